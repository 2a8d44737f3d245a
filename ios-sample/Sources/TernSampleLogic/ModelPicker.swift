// The model picker's logic: which models the app offers, which are on the device, and the
// progress of downloads (resumed after a dropped connection, checked against their SHA-256
// before use), over Tern's model store.

import Foundation
import Observation
import Tern

/// A model the app offers: what it is and where the app downloads it from.
public struct CatalogEntry: Sendable, Equatable, Identifiable {
    public let spec: ModelSpec
    public let url: String
    public let title: String
    public var id: String { spec.name }

    public init(spec: ModelSpec, url: String, title: String) {
        self.spec = spec
        self.url = url
        self.title = title
    }
}

public enum ModelStatus: Sendable, Equatable {
    case notInstalled
    case downloading(downloaded: UInt64, total: UInt64)
    case verifying
    case installed(path: String)
    case failed(String)
}

/// The catalog with each model's status; progress updates `statuses` about every megabyte.
@MainActor
@Observable
public final class ModelPicker {
    public let catalog: [CatalogEntry]
    public private(set) var statuses: [String: ModelStatus] = [:]
    private let store: ModelStore
    private var tasks: [String: Task<Void, Never>] = [:]

    public init(store: ModelStore, catalog: [CatalogEntry]) {
        self.store = store
        self.catalog = catalog
        for entry in catalog { statuses[entry.spec.name] = status(of: entry.spec) }
    }

    private func status(of spec: ModelSpec) -> ModelStatus {
        store.installed(spec: spec).map { .installed(path: $0) } ?? .notInstalled
    }

    /// Downloads the model named `name` (resuming what an earlier attempt left).
    public func download(_ name: String) {
        guard let entry = catalog.first(where: { $0.spec.name == name }), tasks[name] == nil else { return }
        statuses[name] = .downloading(downloaded: 0, total: entry.spec.size)
        tasks[name] = Task {
            defer { tasks[name] = nil }
            do {
                let download = try store.startDownload(spec: entry.spec, url: entry.url)
                while let event = try await download.nextEvent() { // a cancelled Task cancels the download
                    switch event {
                    case .started(let from, let total): statuses[name] = .downloading(downloaded: from, total: total)
                    case .progress(let downloaded, let total): statuses[name] = .downloading(downloaded: downloaded, total: total)
                    case .retrying: break // the bar stays where it was; the transfer resumes there
                    case .verifying: statuses[name] = .verifying
                    case .done(let path): statuses[name] = .installed(path: path)
                    }
                }
            } catch {
                statuses[name] = Task.isCancelled ? status(of: entry.spec) : .failed("\(error)")
            }
        }
    }

    /// Stops a download; what arrived is kept and the next download resumes from it.
    public func cancel(_ name: String) {
        tasks[name]?.cancel()
    }

    /// Deletes the model's file (and any partial download).
    public func delete(_ name: String) {
        cancel(name)
        guard let entry = catalog.first(where: { $0.spec.name == name }) else { return }
        _ = try? store.delete(spec: entry.spec)
        statuses[name] = .notInstalled
    }

    /// Waits for a download to end.
    public func waitUntilDone(_ name: String) async {
        await tasks[name]?.value
    }

    /// Tern's known models, downloaded from `baseURL` + file name (the app serves or mirrors them).
    public static func catalog(baseURL: String) -> [CatalogEntry] {
        knownModels().map { spec in
            let title = switch spec.name {
            case "smollm2": "SmolLM2 135M (fast, small)"
            case "qwen2.5": "Qwen2.5 Coder 0.5B (better answers)"
            case "gemma3": "Gemma 3 270M (base model)"
            default: spec.name
            }
            let base = baseURL.hasSuffix("/") ? baseURL : baseURL + "/"
            return CatalogEntry(spec: spec, url: base + spec.fileName, title: "\(title) · \(spec.size / 1_000_000) MB")
        }
    }
}
