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
    /// Sends `text` and streams the answer: `.token` events, then one `.done` with statistics
    /// (just before it a `.toolCall` when the session has tools and the model calls one).
    /// Generation runs on a native thread; awaiting events never blocks a thread.
    ///
    /// Cancelling the consuming Task, or leaving the `for try await` loop early, stops the
    /// generation within one decoding step. Errors are thrown as `TernError`: `.Busy` if this
    /// session is still answering an earlier message.
    public func stream(_ text: String) -> AsyncThrowingStream<TokenEvent, Error> {
        pulledStream { try self.send(text: text) }
    }

    /// Answers the tool call of the last answer with `result` (what the tool returned, usually
    /// JSON) and streams the model's next answer, like `stream(_:)`.
    public func streamToolResult(_ result: String) -> AsyncThrowingStream<TokenEvent, Error> {
        pulledStream { try self.sendToolResult(result: result) }
    }

    /// Sends `text` and waits for the whole answer (cancellable like `stream(_:)`).
    public func reply(_ text: String) async throws -> Reply {
        try await Reply.collect(stream(text))
    }

    /// Answers the last answer's tool call with `result` and waits for the model's next answer.
    public func replyToolResult(_ result: String) async throws -> Reply {
        try await Reply.collect(streamToolResult(result))
    }
}

/// A whole answer: its text and statistics, and the tool call it made if it made one (then
/// `text` is empty: run the tool and answer with `Session.replyToolResult(_:)`).
public struct Reply: Sendable, Equatable {
    public let text: String
    public let stats: Stats
    public let toolCall: ToolCall?

    static func collect(_ events: AsyncThrowingStream<TokenEvent, Error>) async throws -> Reply {
        var answer = ""
        var call: ToolCall?
        for try await event in events {
            switch event {
            case .token(let piece, _):
                answer += piece
            case .toolCall(let made):
                call = made
            case .done(let stats):
                return Reply(text: answer, stats: stats, toolCall: call)
            }
        }
        throw TernError.Internal(detail: "the answer ended without statistics")
    }
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

/// A native source of events pulled one at a time (an answer, a download).
protocol PulledEvents: Sendable {
    associatedtype Event: Sendable
    /// The next event, or nil at the end; cancelling the awaiting Task cancels the source.
    func nextEvent() async throws -> Event?
    func cancel()
}

extension TokenStream: PulledEvents {}

/// The events of the source `start` opens, as an AsyncThrowingStream. A consumer that goes away
/// (a cancelled Task, a `for try await` loop left early) cancels the source.
func pulledStream<Source: PulledEvents>(_ start: () throws -> Source) -> AsyncThrowingStream<Source.Event, Error> {
    AsyncThrowingStream { continuation in
        let source: Source
        do {
            source = try start()
        } catch {
            continuation.finish(throwing: error)
            return
        }
        let pump = Task {
            do {
                while let event = try await source.nextEvent() {
                    continuation.yield(event)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in
            // After a normal end this is a no-op; otherwise the consumer went away.
            source.cancel()
            pump.cancel()
        }
    }
}

extension Session {
    /// Whether this session is busy (answering, or a step such as `prewarm`): the current
    /// state first, then each change; true from `send` until the answer's last event. It takes
    /// the session's one observer (`setObserver`): call it once per session. The stream does
    /// not end by itself; leaving the loop (or cancelling its Task) removes the observer.
    public func respondingUpdates() -> AsyncStream<Bool> {
        AsyncStream { continuation in
            let observer = BusyForwarder { continuation.yield($0) }
            setObserver(observer: observer)
            continuation.onTermination = { [weak self] _ in
                self?.setObserver(observer: nil)
            }
        }
    }
}

/// Hands the session's busy changes to a closure.
final class BusyForwarder: SessionObserver, @unchecked Sendable {
    private let forward: (Bool) -> Void

    init(_ forward: @escaping (Bool) -> Void) {
        self.forward = forward
    }

    func busyChanged(busy: Bool) {
        forward(busy)
    }
}

/// Where loading an engine stands.
public enum EngineState: Sendable {
    case loading
    case ready(Engine)
    case failed(TernError)
}

extension Engine {
    /// Loads the model at `path` and reports how it goes: `.loading`, then `.ready` or
    /// `.failed`. Leaving the loop early abandons the load.
    public static func loadStates(path: String, options: EngineOptions = EngineOptions()) -> AsyncStream<EngineState> {
        AsyncStream { continuation in
            continuation.yield(.loading)
            let load = Task {
                do {
                    continuation.yield(.ready(try await Engine.load(path: path, options: options)))
                } catch let error as TernError {
                    continuation.yield(.failed(error))
                } catch {
                    continuation.yield(.failed(.Internal(detail: "\(error)")))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in load.cancel() }
        }
    }
}
