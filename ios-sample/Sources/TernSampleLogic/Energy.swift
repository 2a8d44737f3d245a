// Energy figures of an answer, as the chat shows them under each answer, and the energy mode the
// chat's settings switch.

import Tern

/// Energy per generated token and how it was obtained (a meter, or the power model).
public struct EnergyFigures: Sendable, Equatable {
    public var millijoulesPerToken: Double
    /// False when the figure comes from the power model rather than a meter.
    public var measured: Bool
    /// The meter's name, e.g. `estimate (power model)`.
    public var meter: String

    /// The decode phase's energy per token; nil when the meter could not be read.
    init?(stats: Stats) {
        guard let perToken = stats.energy.decode.joulesPerToken else { return nil }
        millijoulesPerToken = perToken * 1e3
        measured = stats.energy.kind == .measured
        meter = stats.energy.meter
    }
}

/// The modes the settings offer, in the words the screen shows.
public let energyModes: [(name: String, mode: EnergyMode)] = [
    ("Performance", .performance), ("Balanced", .balanced), ("Power saver", .powerSaver),
]

/// A mode's name on screen.
public func energyModeName(_ mode: EnergyMode) -> String {
    switch mode {
    case .performance: "Performance"
    case .balanced: "Balanced"
    case .powerSaver: "Power saver"
    case .custom: "Custom"
    }
}
