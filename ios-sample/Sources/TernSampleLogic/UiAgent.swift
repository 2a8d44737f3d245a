// The in-app UI agent's logic: a screen of this app (its elements, as the app describes them) and
// the user's goal in, the next action out, constrained so that it names an element of that
// screen; the user confirms it before it is performed, and anything that sends, pays or deletes
// always asks. iOS lets no app read or drive another app's screens: the agent drives this app's.

import Foundation
import Observation
import Tern

/// Describes the screen the user sees now, in the form the model reads.
public protocol ScreenReader: Sendable {
    @MainActor func currentScreen() -> Screen?
}

/// Performs an action on the screen it was chosen for; false when the element is gone.
public protocol ActionPerformer: Sendable {
    @MainActor func perform(_ action: UiAction, on screen: Screen) -> Bool
}

/// What an action would do that the user must always agree to first.
public enum Risk: Sendable, Equatable {
    case none, sends, pays, deletes
}

/// The next action the model proposes, described for the user.
public struct Proposal: Sendable, Equatable {
    public let goal: String
    public let screen: Screen
    public let action: UiAction
    /// The element the action names (nil for `back`).
    public let element: UiElement?
    public let risk: Risk

    public init(goal: String, screen: Screen, action: UiAction, element: UiElement?, risk: Risk) {
        self.goal = goal
        self.screen = screen
        self.action = action
        self.element = element
        self.risk = risk
    }

    /// Risky actions always ask; others ask unless the user let the agent run safe steps alone.
    public func needsConfirmation(autoRunSafe: Bool) -> Bool {
        risk != .none || !autoRunSafe
    }

    /// "Tap “Send”", "Type “hello” into “Message”", ...
    public var summary: String {
        let target = element.map { "“\($0.text.isEmpty ? $0.className : $0.text)”" } ?? ""
        switch action.action {
        case .tap: return "Tap \(target)"
        case .type: return "Type “\(action.text ?? "")” into \(target)"
        case .scroll: return "Scroll \(target)"
        case .back: return "Go back"
        }
    }
}

/// Chooses actions with a session of its own: the UI-action system prompt, each step one turn,
/// constrained by a schema built from that step's screen (ids restricted to its elements).
public final class UiAgent: Sendable {
    private let engine: Engine
    private let maxTokens: UInt32
    private let holder: SessionHolder

    public init(engine: Engine, maxTokens: UInt32 = 64) throws {
        self.engine = engine
        self.maxTokens = maxTokens
        holder = SessionHolder(try UiAgent.newSession(engine, maxTokens))
    }

    private static func newSession(_ engine: Engine, _ maxTokens: UInt32) throws -> Session {
        // Greedy: the most likely action, the same one each time for the same screen and goal.
        try engine.newSession(options: SessionOptions(systemPrompt: uiSystemPrompt(), sampling: SamplingOptions(), maxTokens: maxTokens))
    }

    /// Forgets earlier steps: call it before a goal unrelated to the last one.
    public func reset() throws {
        holder.session = try UiAgent.newSession(engine, maxTokens)
    }

    /// The next action towards `goal` on `screen`; it names an element that is on the screen.
    public func propose(screen: Screen, goal: String) async throws -> Proposal {
        let action = try await holder.session.action(on: screen, goal: goal)
        // The constraint already guarantees this; the app checks again before touching anything.
        try validateUiAction(screen: screen, action: action)
        let element = action.id.flatMap { id in screen.elements.first { $0.id == id } }
        return Proposal(goal: goal, screen: screen, action: action, element: element, risk: riskOf(action, element))
    }

    /// Stops a proposal in progress.
    public func cancel() {
        holder.session.cancel()
    }
}

/// The agent's current session, replaced by `reset`.
private final class SessionHolder: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Session

    init(_ session: Session) { current = session }

    var session: Session {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }
}

private let paysWords = ["pay", "buy", "purchase", "checkout", "check out", "order", "subscribe", "donate", "transfer", "cart"]
private let sendsWords = ["send", "post", "reply", "share", "submit", "publish", "forward", "call", "tweet"]
private let deletesWords = ["delete", "remove", "erase", "trash", "discard", "clear", "uninstall", "unsubscribe", "archive"]

private func mentions(_ text: String, _ words: [String]) -> Bool {
    let lower = text.lowercased()
    return words.contains { word in
        var from = lower.startIndex
        while let r = lower.range(of: word, range: from..<lower.endIndex) {
            let before = r.lowerBound == lower.startIndex || !lower[lower.index(before: r.lowerBound)].isLetter
            let after = r.upperBound == lower.endIndex || !lower[r.upperBound].isLetter
            if before && after { return true }
            from = r.upperBound
        }
        return false
    }
}

/// What tapping (or submitting) an element would do, judged from its words and class. Errs on
/// the side of asking: a false alarm costs a tap, a missed payment costs money.
public func riskOf(_ action: UiAction, _ element: UiElement?) -> Risk {
    guard let element, action.action != .scroll, action.action != .type else { return .none }
    let words = "\(element.text) \(element.className)"
    if mentions(words, paysWords) { return .pays }
    if mentions(words, deletesWords) { return .deletes }
    if mentions(words, sendsWords) { return .sends }
    return .none
}

/// Where the agent is in a goal.
public enum AgentState: Sendable, Equatable {
    case idle
    case thinking(goal: String, step: Int)
    /// Waiting for the user to confirm or reject the proposal.
    case confirm(Proposal, step: Int)
    case performed(Proposal, step: Int)
    case finished(goal: String, steps: Int, reason: String)
    case failed(goal: String, message: String)
}

/// The agent screen's loop: read the screen, propose, ask, perform, repeat until the user stops,
/// `maxSteps` actions were taken or the screen no longer changes. The SwiftUI view renders
/// `state` and calls `confirm()` / `reject()`.
@MainActor
@Observable
public final class UiAgentController {
    public private(set) var state: AgentState = .idle
    /// The steps performed for the current goal, oldest first.
    public private(set) var performed: [Proposal] = []
    /// Perform actions without risk at once; sending, paying and deleting still ask.
    public var autoRunSafe = false

    private let agent: UiAgent
    private let reader: any ScreenReader
    private let performer: any ActionPerformer
    private let maxSteps: Int
    private var task: Task<Void, Never>?
    private var answer: CheckedContinuation<Bool, Never>?

    public init(agent: UiAgent, reader: any ScreenReader, performer: any ActionPerformer, maxSteps: Int = 5) {
        self.agent = agent
        self.reader = reader
        self.performer = performer
        self.maxSteps = maxSteps
    }

    public func start(goal: String) {
        task?.cancel()
        performed = []
        do {
            try agent.reset()
        } catch {
            state = .failed(goal: goal, message: "\(error)")
            return
        }
        task = Task { await loop(goal) }
    }

    public func confirm() { reply(true) }

    public func reject() { reply(false) }

    public func stop() {
        reply(false)
        task?.cancel()
        agent.cancel()
        state = .idle
    }

    /// Waits until the loop has ended.
    public func waitUntilDone() async {
        await task?.value
    }

    private func reply(_ yes: Bool) {
        answer?.resume(returning: yes)
        answer = nil
    }

    private func loop(_ goal: String) async {
        var last: Screen?
        for step in 1...maxSteps {
            guard let screen = reader.currentScreen() else { return finish(goal, step - 1, "no screen to read") }
            if screen == last { return finish(goal, step - 1, "the screen did not change") }
            state = .thinking(goal: goal, step: step)
            let proposal: Proposal
            do {
                proposal = try await agent.propose(screen: screen, goal: goal)
            } catch {
                if !Task.isCancelled { state = .failed(goal: goal, message: "\(error)") }
                return
            }
            if proposal.needsConfirmation(autoRunSafe: autoRunSafe) {
                state = .confirm(proposal, step: step)
                let yes = await withCheckedContinuation { answer = $0 }
                if !yes { return finish(goal, step - 1, "the user declined") }
            }
            if !performer.perform(proposal.action, on: screen) { return finish(goal, step - 1, "the element is gone") }
            performed.append(proposal)
            state = .performed(proposal, step: step)
            last = screen
        }
        finish(goal, maxSteps, "step limit")
    }

    private func finish(_ goal: String, _ steps: Int, _ reason: String) {
        state = .finished(goal: goal, steps: steps, reason: reason)
    }
}
