// The Chat screen's logic: one conversation with the model, streamed into observable state that
// the SwiftUI view renders. No SwiftUI here: the tests drive it on Linux with the real model.

import Foundation
import Observation
import Tern

/// How the chat talks: the session's options, in the terms the settings screen shows.
public struct ChatSettings: Sendable, Equatable {
    public var systemPrompt: String?
    /// Most tokens per answer; a phone screen rarely needs more.
    public var maxTokens: UInt32
    /// 0 is greedy (the same answer every time); around 0.7 gives varied answers.
    public var temperature: Float
    /// Fixed seed for reproducible sampling; nil draws a fresh one per conversation.
    public var seed: UInt64?

    public init(systemPrompt: String? = nil, maxTokens: UInt32 = 256, temperature: Float = 0.7, seed: UInt64? = nil) {
        self.systemPrompt = systemPrompt
        self.maxTokens = maxTokens
        self.temperature = temperature
        self.seed = seed
    }

    public func sessionOptions() -> SessionOptions {
        SessionOptions(
            systemPrompt: systemPrompt,
            sampling: SamplingOptions(temperature: temperature, seed: seed),
            maxTokens: maxTokens
        )
    }
}

public enum Role: Sendable, Equatable {
    case user, assistant
}

/// What the chat shows under an answer. While it streams, tokens/s is measured from the token
/// events as they arrive; when it is done, the engine's statistics replace the live figures.
public struct AnswerMetrics: Sendable, Equatable {
    public var tokens: Int
    /// Tokens of the conversation reused from the KV cache (a follow-up prefills only what is new).
    public var cachedTokens: Int?
    public var timeToFirstTokenMs: Double?
    public var tokensPerSecond: Double?
    /// Why the answer ended; nil while streaming.
    public var finishReason: FinishReason?
    public var energy: EnergyFigures?

    init(stats: Stats) {
        tokens = Int(stats.generatedTokens)
        cachedTokens = Int(stats.cachedTokens)
        timeToFirstTokenMs = stats.timeToFirstTokenMs
        tokensPerSecond = stats.generatedTokens > 1 ? stats.decodeTokensPerS : nil
        finishReason = stats.finishReason
        energy = EnergyFigures(stats: stats)
    }

    init(tokens: Int, timeToFirstTokenMs: Double?, tokensPerSecond: Double?) {
        self.tokens = tokens
        self.timeToFirstTokenMs = timeToFirstTokenMs
        self.tokensPerSecond = tokensPerSecond
    }
}

public struct ChatMessage: Identifiable, Sendable, Equatable {
    public let id: Int
    public let role: Role
    public var text: String
    /// The answer is still arriving.
    public var streaming = false
    /// The user stopped it before it was complete.
    public var stopped = false
    public var metrics: AnswerMetrics?
}

/// One conversation: `send` streams an answer into `messages`, `stop` ends it where it is,
/// `regenerate` answers the last question again, `newChat` starts over. Multi-turn: every answer
/// stays in the session, so a follow-up reuses the KV cache of what came before.
@MainActor
@Observable
public final class ChatViewModel {
    public private(set) var messages: [ChatMessage] = []
    public private(set) var generating = false
    /// The last failure, in words for the user (typed errors carry no prompt text).
    public private(set) var error: String?
    /// The energy mode in force (power saver while the device is hot or low on battery).
    public private(set) var energyMode: String

    private let engine: Engine
    private var settings: ChatSettings
    private var session: Session
    private var task: Task<Void, Never>?
    private var nextId = 0

    public init(engine: Engine, settings: ChatSettings = ChatSettings()) throws {
        self.engine = engine
        self.settings = settings
        session = try engine.newSession(options: settings.sessionOptions())
        energyMode = energyModeName(engine.energyStatus().effectiveMode)
    }

    /// Sets the engine's energy mode (it applies from the next answer, to every session of the
    /// engine): performance, balanced (the default) or power saver.
    /// A mode the device cannot run (a custom selection of cores it lacks) leaves the mode as
    /// it was and says why in `error`.
    public func setEnergyMode(_ mode: EnergyMode) {
        do {
            try engine.setEnergyMode(mode: mode)
        } catch let e as TernError {
            error = describe(e)
        } catch {
            self.error = "\(error)"
        }
        energyMode = energyModeName(engine.energyStatus().effectiveMode)
    }

    /// Whether the engine is still generating for this chat (briefly true after a stop).
    public var answering: Bool { session.isBusy() }

    /// Starts answering `text`; false (and nothing happens) while an answer is in progress.
    @discardableResult
    public func send(_ text: String) -> Bool {
        let question = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !question.isEmpty, !generating else { return false }
        messages.append(ChatMessage(id: takeId(), role: .user, text: question))
        error = nil
        answer(question, again: false)
        return true
    }

    /// Stops the answer in progress; what came so far stays, marked as stopped.
    public func stop() {
        session.cancel()
    }

    /// Answers the last question again, in the same session: its conversation is set back to
    /// before that question, which is then asked again. Everything before it stays in the KV
    /// cache, so only the question's last token is computed again before the new answer. With a
    /// temperature above 0 the session's sampler goes on with its random stream, so the new answer
    /// differs (a fixed seed makes the sequence of answers reproducible); greedy decoding
    /// (temperature 0) gives the same answer again.
    @discardableResult
    public func regenerate() -> Bool {
        guard !generating, let last = messages.lastIndex(where: { $0.role == .user }) else { return false }
        messages = Array(messages[...last])
        error = nil
        answer(messages[last].text, again: true)
        return true
    }

    /// Forgets the conversation (and applies changed settings).
    public func newChat(settings newSettings: ChatSettings? = nil) throws {
        task?.cancel()
        settings = newSettings ?? settings
        session = try engine.newSession(options: settings.sessionOptions())
        messages = []
        generating = false
        error = nil
    }

    /// Waits until the current answer is complete (or stopped).
    public func waitUntilDone() async {
        await task?.value
    }

    /// Cancels the answer's Task, as leaving the screen does: the generation stops in Rust.
    public func cancelTask() {
        task?.cancel()
    }

    private func takeId() -> Int {
        defer { nextId += 1 }
        return nextId
    }

    /// Streams the answer to `question`. `again`: it is the conversation's last question, and the
    /// session's conversation is first set back to before it.
    private func answer(_ question: String, again: Bool) {
        let id = takeId()
        let target = session
        messages.append(ChatMessage(id: id, role: .assistant, text: "", streaming: true))
        generating = true
        task = Task { [weak self] in
            do {
                while target.isBusy() { try await Task.sleep(for: .milliseconds(5)) }
                if again { try target.setMessages(messages: conversation(target.messages(), before: question)) }
                try await self?.stream(question, into: id, on: target)
                if let self { energyMode = energyModeName(engine.energyStatus().effectiveMode) }
            } catch is CancellationError {
                self?.finish(id) { $0.stopped = true }
            } catch let e as TernError {
                self?.finish(id) { _ in }
                self?.error = describe(e)
            } catch {
                self?.finish(id) { _ in }
                self?.error = "\(error)"
            }
        }
    }

    // snippet:begin stream
    private func stream(_ question: String, into id: Int, on target: Session) async throws {
        let clock = ContinuousClock()
        let sent = clock.now
        var firstToken: ContinuousClock.Instant?
        var tokens = 0
        var text = ""
        for try await event in target.stream(question) {
            switch event {
            case .token(let piece, let ids):
                let now = clock.now
                let first = firstToken ?? now
                firstToken = first
                tokens += ids.count
                text += piece
                let decode = (now - first).seconds
                let live = AnswerMetrics(
                    tokens: tokens,
                    timeToFirstTokenMs: (first - sent).seconds * 1000,
                    tokensPerSecond: decode > 0 ? Double(tokens - 1) / decode : nil
                )
                edit(id) {
                    $0.text = text
                    $0.metrics = live
                }
            case .done(let stats):
                finish(id) {
                    $0.text = text
                    $0.metrics = AnswerMetrics(stats: stats)
                    $0.stopped = stats.finishReason == .cancelled
                }
            default:
                break // events of tool calls: this chat gives the model no tools
            }
        }
        if Task.isCancelled { throw CancellationError() }
    }
    // snippet:end

    private func edit(_ id: Int, _ change: (inout ChatMessage) -> Void) {
        guard let i = messages.firstIndex(where: { $0.id == id }) else { return }
        change(&messages[i])
    }

    private func finish(_ id: Int, _ change: (inout ChatMessage) -> Void) {
        edit(id) {
            change(&$0)
            $0.streaming = false
        }
        generating = false
    }
}

extension Duration {
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}

/// The conversation up to `question`, its last question (the question and all after it are
/// dropped); all of it when the question never joined it (sending it failed).
func conversation(_ messages: [ConversationMessage], before question: String) -> [ConversationMessage] {
    guard let last = messages.lastIndex(where: { $0.role == .user }), messages[last].content == question else {
        return messages
    }
    return Array(messages[..<last])
}

/// A typed error in words for the user.
public func describe(_ error: TernError) -> String {
    switch error {
    case .ContextOverflow(let needed, let limit):
        return "The conversation is too long for the model (\(needed) of \(limit) tokens). Start a new chat."
    case .ModelNotFound:
        return "The model file is missing. Download it again from the model picker."
    case .InvalidModel:
        return "The model file is damaged. Delete it and download it again."
    case .Busy:
        return "Still answering. Wait for the answer or stop it."
    default:
        return "Something went wrong: \(error)"
    }
}
