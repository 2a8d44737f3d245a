// The Auto-reply screen's logic: for a message that just came in from a contact, suggest the
// user's reply in their own style, from that contact's earlier messages, and the speed-up
// speculative decoding gave it.

import Foundation
import Tern

/// A person the user writes with; `key` is stable (a phone number, a contact identifier).
public struct Contact: Sendable, Equatable, Hashable {
    public let key: String
    public let name: String

    public init(key: String, name: String) {
        self.key = key
        self.name = name
    }
}

/// One message of a thread: the user's own (`fromMe`) or the contact's.
public struct ThreadMessage: Sendable, Equatable {
    public let fromMe: Bool
    public let text: String

    public init(fromMe: Bool, text: String) {
        self.fromMe = fromMe
        self.text = text
    }
}

/// A conversation with one contact, oldest message first.
public struct ContactThread: Sendable, Equatable {
    public let contact: Contact
    public var messages: [ThreadMessage]

    public init(contact: Contact, messages: [ThreadMessage]) {
        self.contact = contact
        self.messages = messages
    }
}

/// A suggested reply, with the figures of the answer that produced it.
public struct ReplySuggestion: Sendable, Equatable {
    /// The reply as shown: the answer's first line, cleaned (see `cleanReply`).
    public let text: String
    /// The model's whole answer, as generated.
    public let answer: String
    public let tokens: Int
    public let timeToFirstTokenMs: Double
    public let decodeTokensPerS: Double
    public let totalMs: Double
    /// What speculative decoding did: verification steps, drafted and accepted tokens, tokens per
    /// decode pass (above 1 means drafted tokens were accepted; 1 is plain decoding).
    public let speculation: SpeculationStats

    public var tokensPerStep: Double { speculation.tokensPerStep }
}

/// The same suggestion decoded plainly and with speculation: the speed-up speculation gave on this
/// device, this thread, now. Greedy decoding makes both answers the same, so `identical` is a check.
public struct SpeculationComparison: Sendable, Equatable {
    public let plain: ReplySuggestion
    public let speculative: ReplySuggestion

    /// Decode tokens/s with speculation over decode tokens/s without.
    public var speedUp: Double { plain.decodeTokensPerS > 0 ? speculative.decodeTokensPerS / plain.decodeTokensPerS : 0 }
    public var identical: Bool { plain.answer == speculative.answer }
}

/// Suggests replies in the user's style. The prompt holds the contact's latest messages (the
/// user's own earlier messages show the style) and ends with the incoming message, in the form of
/// the `reply` workloads; each suggestion is a fresh session, so threads never mix.
///
/// Speculative decoding drafts the reply from the prompt and, given a `history` store, from
/// everything kept under the contact's key: older messages than the prompt holds and the replies
/// the user sent (see `remember`), which is where the user's recurring phrases are.
public struct ReplySuggester: Sendable {
    let engine: Engine
    /// The user's name, as the contact's messages address them.
    public let me: String
    public var maxTokens: UInt32
    /// How many of the thread's latest messages go into the prompt.
    public var historyMessages: Int
    /// Each contact's past messages, keyed by `Contact.key`, for the drafter; nil: the prompt only.
    public let history: HistoryStore?
    /// How suggestions decode; `compare` also runs `.off`.
    public var speculation: Speculation

    public init(
        engine: Engine, me: String, maxTokens: UInt32 = 48, historyMessages: Int = 12, history: HistoryStore? = nil,
        speculation: Speculation = .auto
    ) {
        self.engine = engine
        self.me = me
        self.maxTokens = maxTokens
        self.historyMessages = historyMessages
        self.history = history
        self.speculation = speculation
    }

    /// Suggests the user's reply to `incoming`, the contact's newest message (not yet in `thread`).
    public func suggest(thread: ContactThread, incoming: String) async throws -> ReplySuggestion {
        try await suggest(thread: thread, incoming: incoming, mode: speculation)
    }

    /// Suggests the reply twice, without speculation then with it, and measures the speed-up.
    public func compare(thread: ContactThread, incoming: String) async throws -> SpeculationComparison {
        let plain = try await suggest(thread: thread, incoming: incoming, mode: .off)
        return SpeculationComparison(plain: plain, speculative: try await suggest(thread: thread, incoming: incoming, mode: speculation))
    }

    private func suggest(thread: ContactThread, incoming: String, mode: Speculation) async throws -> ReplySuggestion {
        // A suggestion is not sent yet: only what the user sends joins the history (remember).
        let scope = history.map { HistoryScope(store: $0, key: thread.contact.key, recordAnswers: false) }
        // Greedy (`SamplingOptions()`): the suggestion is the model's most likely reply, so the
        // comparison with speculation shows the same text at two speeds.
        let options = SessionOptions(
            systemPrompt: systemPrompt(), sampling: SamplingOptions(), maxTokens: maxTokens, speculation: SpeculationOptions(mode: mode, history: scope))
        let session = try engine.newSession(options: options)
        var text = ""
        var stats: Stats?
        for try await event in session.stream(userMessage(thread: thread, incoming: incoming)) {
            switch event {
            case .token(let piece, _):
                text += piece
            case .done(let s):
                stats = s
            default:
                break // no tools in this session
            }
        }
        guard let stats else { throw TernError.Internal(detail: "the answer ended without statistics") }
        return ReplySuggestion(
            text: cleanReply(text, me: me),
            answer: text,
            tokens: Int(stats.generatedTokens),
            timeToFirstTokenMs: stats.timeToFirstTokenMs,
            decodeTokensPerS: stats.decodeTokensPerS,
            totalMs: stats.prefillMs + stats.decodeMs,
            speculation: stats.speculation
        )
    }

    /// Keeps `message` (received, or the reply the user sent) in `contact`'s history for later drafts.
    public func remember(_ message: ThreadMessage, of contact: Contact) throws {
        try history?.add(key: contact.key, text: message.text)
    }

    /// Fills the contact's history from `thread` when it holds nothing yet (first start, demo threads).
    public func seedHistory(_ thread: ContactThread) throws {
        guard let history, try history.texts(key: thread.contact.key).isEmpty else { return }
        for m in thread.messages { try history.add(key: thread.contact.key, text: m.text) }
    }

    public func systemPrompt() -> String {
        "You write replies for \(me). Match \(me)'s usual style: the length, tone and words of \(me)'s earlier messages."
    }

    /// The conversation so far and the incoming message, as the model is asked.
    public func userMessage(thread: ContactThread, incoming: String) -> String {
        let lines = (thread.messages.suffix(historyMessages) + [ThreadMessage(fromMe: false, text: incoming)])
            .map { "\($0.fromMe ? me : thread.contact.name): \($0.text)" }
            .joined(separator: "\n")
        return "Conversation so far:\n\(lines)\n\nWrite \(me)'s reply to the last message."
    }
}

/// The reply's first line, without the `Name:` prefix or quotes small models sometimes add.
public func cleanReply(_ raw: String, me: String) -> String {
    var text = raw.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { !$0.isEmpty } ?? ""
    if text.lowercased().hasPrefix(me.lowercased() + ":") {
        text = String(text.dropFirst(me.count + 1)).trimmingCharacters(in: .whitespaces)
    }
    if text.count >= 2, text.first == "\"", text.last == "\"" {
        text = String(text.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
    }
    return text
}

extension ContactThread {
    /// Two contacts with a few messages each and the message each just sent, for trying the
    /// Auto-reply screen (iOS lets no app read other apps' messages).
    public static let demo: [(thread: ContactThread, incoming: String)] = [
        (ContactThread(contact: Contact(key: "demo:priya", name: "Priya"), messages: [
            ThreadMessage(fromMe: false, text: "are we still on for climbing tomorrow?"),
            ThreadMessage(fromMe: true, text: "yes!! 6pm at the usual gym right?"),
            ThreadMessage(fromMe: false, text: "yep. can you bring the extra harness"),
            ThreadMessage(fromMe: true, text: "sure thing, I'll bring the extra harness"),
        ]), "also Jo might join, is that ok?"),
        (ContactThread(contact: Contact(key: "demo:mom", name: "Mom"), messages: [
            ThreadMessage(fromMe: false, text: "Did you eat dinner?"),
            ThreadMessage(fromMe: true, text: "Yes mom, I ate dinner, pasta again haha"),
            ThreadMessage(fromMe: false, text: "You need vegetables too"),
            ThreadMessage(fromMe: true, text: "Yes mom, I will eat vegetables tomorrow haha"),
        ]), "And call your grandmother this weekend"),
    ]
}
