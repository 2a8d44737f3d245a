// Energy figures of an answer, as the chat shows them under each answer.

import Tern

/// Energy per generated token and how it was obtained (a meter, or the power model).
public struct EnergyFigures: Sendable, Equatable {
    public var millijoulesPerToken: Double
    /// False when the figure comes from the power model rather than a meter.
    public var measured: Bool
    /// The meter's name, e.g. `estimate (power model)`.
    public var meter: String
}
