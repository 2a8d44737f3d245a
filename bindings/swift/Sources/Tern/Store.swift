// Model downloads as an AsyncThrowingStream of progress events, and a one-call `fetch` that
// returns the verified file's path; Task cancellation is wired to the Rust download.

import Foundation

extension Download: PulledEvents {
    /// The next event, or nil after `.done`. Unlike the generated `next()`, cancelling the Task
    /// that awaits it cancels the download (what arrived stays on disk for a later resume).
    public func nextEvent() async throws -> DownloadEvent? {
        try await withTaskCancellationHandler {
            try await next()
        } onCancel: {
            cancel()
        }
    }
}

extension ModelStore {
    /// Downloads `spec` from `url` into this store and streams its progress: `.started`,
    /// `.progress`…, `.verifying`, then `.done` with the path of the verified file (`.retrying`
    /// after a broken connection, resumed where it broke). A model already in the store gives
    /// `.done` alone.
    ///
    /// The transfer runs on a native thread. Cancelling the consuming Task, or leaving the loop
    /// early, cancels it; what arrived stays on disk and the next download of the same model
    /// resumes from it. Failures are thrown as `TernError`: `.HashMismatch` (the file was
    /// deleted), `.SizeMismatch`, `.Http`, `.Network`, `.DownloadInterrupted`,
    /// `.NotEnoughSpace`, `.DownloadInProgress`, `.Io`.
    public func download(
        _ spec: ModelSpec, from url: String, options: DownloadOptions = DownloadOptions()
    ) -> AsyncThrowingStream<DownloadEvent, Error> {
        pulledStream { try self.startDownload(spec: spec, url: url, options: options) }
    }

    /// Downloads `spec` from `url` (see `download(_:from:options:)`) and returns the verified
    /// file's path, ready for `Engine.load`. `onProgress` gets the bytes on disk and the total,
    /// on the caller's actor (e.g. the main actor of a view model).
    public func fetch(
        _ spec: ModelSpec, from url: String, options: DownloadOptions = DownloadOptions(),
        isolation: isolated (any Actor)? = #isolation,
        onProgress: (_ downloaded: UInt64, _ total: UInt64) -> Void = { _, _ in }
    ) async throws -> String {
        for try await event in download(spec, from: url, options: options) {
            switch event {
            case .progress(let downloaded, let total):
                onProgress(downloaded, total)
            case .done(let path):
                return path
            default:
                break
            }
        }
        throw TernError.Internal(detail: "the download ended without its file")
    }
}

/// The known model named `name` (`smollm2`, `qwen2.5`, `gemma3`), if any.
public func knownModel(named name: String) -> ModelSpec? {
    knownModels().first { $0.name == name }
}
