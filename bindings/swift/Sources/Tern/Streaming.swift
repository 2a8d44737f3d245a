// The idiomatic layer over the generated bindings (Generated/Tern.swift, same module): answers
// as an AsyncThrowingStream, a one-call reply, and Task cancellation wired to Rust. Loading
// (`Engine.load`, async throws), options (structs with defaults), errors (`TernError`) and the
// Sendable objects come from the generated code as they are.

import Foundation

extension TokenStream {
    /// The next event, or nil after `Done`. Unlike the generated `next()`, cancelling the Task
    /// that awaits it cancels the generation (Swift cancellation does not reach Rust by itself);
    /// the stream then ends with `Done` whose reason is `.cancelled`.
    public func nextEvent() async throws -> TokenEvent? {
        try await withTaskCancellationHandler {
            try await next()
        } onCancel: {
            cancel()
        }
    }
}

extension Session {
    /// Sends `text` and streams the answer: `.token` events, then one `.done` with statistics.
    /// Generation runs on a native thread; awaiting events never blocks a thread.
    ///
    /// Cancelling the consuming Task, or leaving the `for try await` loop early, stops the
    /// generation within one decoding step. Errors are thrown as `TernError`: `.Busy` if this
    /// session is still answering an earlier message.
    public func stream(_ text: String) -> AsyncThrowingStream<TokenEvent, Error> {
        AsyncThrowingStream { continuation in
            let tokens: TokenStream
            do {
                tokens = try send(text: text)
            } catch {
                continuation.finish(throwing: error)
                return
            }
            let pump = Task {
                do {
                    while let event = try await tokens.nextEvent() {
                        continuation.yield(event)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in
                // After a normal end this is a no-op; otherwise the consumer went away.
                tokens.cancel()
                pump.cancel()
            }
        }
    }

    /// Sends `text` and waits for the whole answer (cancellable like `stream(_:)`).
    public func reply(_ text: String) async throws -> Reply {
        var answer = ""
        for try await event in stream(text) {
            switch event {
            case .token(let piece, _):
                answer += piece
            case .done(let stats):
                return Reply(text: answer, stats: stats)
            }
        }
        throw TernError.Internal(detail: "the answer ended without statistics")
    }
}

/// A whole answer: its text and statistics.
public struct Reply: Sendable, Equatable {
    public let text: String
    public let stats: Stats
}

extension AsyncThrowingStream where Element == TokenEvent, Failure == Error {
    /// Only the text pieces of an answer's events.
    public var textPieces: AsyncCompactMapSequence<Self, String> {
        compactMap { event in
            if case .token(let text, _) = event { return text }
            return nil
        }
    }
}
