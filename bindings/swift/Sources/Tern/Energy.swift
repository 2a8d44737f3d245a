// Energy on Apple platforms: the device's state in Tern's terms.

import Foundation

extension Engine {
    /// Reports the device's state: while it is `.serious`/`.critical` or the battery is low
    /// (the app's own rule, e.g. Low Power Mode), decode runs on the power-saver selection.
    /// Call it at start and from `ProcessInfo.thermalStateDidChangeNotification`.
    public func report(thermalState: ThermalState, batteryLow: Bool = false) {
        reportDeviceState(state: DeviceState(thermal: thermalState, batteryLow: batteryLow))
    }
}

#if canImport(Darwin)
extension ThermalState {
    /// `ProcessInfo.ThermalState`, one to one (Foundation on Linux has no thermal state).
    public init(_ state: ProcessInfo.ThermalState) {
        switch state {
        case .nominal: self = .nominal
        case .fair: self = .fair
        case .serious: self = .serious
        case .critical: self = .critical
        @unknown default: self = .critical
        }
    }
}
#endif
