// The app-wide state: the engine of the chosen model (every screen opens its own sessions on it)
// and the model store in the app's Application Support folder.

import Foundation
import Observation
import Tern
import TernSampleLogic

@MainActor
@Observable
final class AppModel {
    enum EngineState {
        case none
        case loading
        case ready(Engine, path: String)
        case failed(String)
    }

    private(set) var engine: EngineState = .none
    let store: ModelStore?
    let picker: ModelPicker?
    /// Each contact's past messages and sent replies, which speculative decoding drafts replies from.
    let history: HistoryStore?

    /// Where the sample downloads models from. The files are published inside PyPI packages, not
    /// at one URL: serve `~/.cache/tern/models` from the Mac (`python3 -m http.server 8000`; the
    /// simulator reaches it as 127.0.0.1), or put your own mirror here. The SHA-256 of each known
    /// model pins the exact file, whatever the server.
    static let modelBaseURL = "http://127.0.0.1:8000/"

    init() {
        let dir = URL.applicationSupportDirectory.appending(path: "models", directoryHint: .isDirectory)
        store = try? ModelStore.open(dir: dir.path)
        picker = store.map { ModelPicker(store: $0, catalog: ModelPicker.catalog(baseURL: AppModel.modelBaseURL)) }
        history = try? HistoryStore.open(dir: URL.applicationSupportDirectory.appending(path: "history", directoryHint: .isDirectory).path)
        setLogLevel(level: .info)
        watchDeviceState()
    }

    /// Tells the engine when the device gets hot or Low Power Mode is on: decode then uses fewer
    /// threads (the power-saver selection) until it passes.
    private func watchDeviceState() {
        let center = NotificationCenter.default
        for name in [ProcessInfo.thermalStateDidChangeNotification, Notification.Name.NSProcessInfoPowerStateDidChange] {
            center.addObserver(forName: name, object: nil, queue: .main) { [weak self] _ in
                MainActor.assumeIsolated { self?.reportDeviceState() }
            }
        }
    }

    private func reportDeviceState() {
        guard case .ready(let engine, _) = engine else { return }
        let info = ProcessInfo.processInfo
        engine.report(thermalState: ThermalState(info.thermalState), batteryLow: info.isLowPowerModeEnabled)
    }

    // snippet:begin load
    func load(path: String) async {
        engine = .loading
        do {
            let options = EngineOptions(
                contextLength: 2048,
                energy: EnergyOptions(tuningDir: URL.applicationSupportDirectory.appending(path: "tern").path)
            )
            let loaded = try await Engine.load(path: path, options: options)
            UserDefaults.standard.set(path, forKey: "model")
            engine = .ready(loaded, path: path)
            reportDeviceState()
        } catch let error as TernError {
            engine = .failed(describe(error))
        } catch {
            engine = .failed("\(error)")
        }
    }
    // snippet:end

    var pathInUse: String? {
        if case .ready(_, let path) = engine { return path }
        return nil
    }
}
