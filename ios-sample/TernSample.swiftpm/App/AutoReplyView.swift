// The Auto-reply tab: conversations with contacts; for the message that just came in, a reply
// suggested in the user's own style, what producing it took, and the speed-up speculative decoding
// from the contact's history gave (measured against plain decoding with "Compare"). iOS gives no
// app other apps' messages, so the threads here are the demo's, and new messages are typed in.

import SwiftUI
import Tern
import TernSampleLogic

struct AutoReplyView: View {
    let engine: Engine
    /// Drafting context per contact; nil where the store could not be opened (prompt only).
    let history: HistoryStore?
    @State private var threads = ContactThread.demo
    @State private var suggestions: [String: Result<ReplySuggestion, Error>] = [:]
    @State private var comparisons: [String: SpeculationComparison] = [:]
    @State private var working: String?
    @State private var drafts: [String: String] = [:]

    var body: some View {
        NavigationStack {
            List {
                ForEach(threads.indices, id: \.self) { i in
                    section(i)
                }
            }
            .navigationTitle("Auto-reply")
            // The demo threads become drafting context the first time.
            .task { for (thread, _) in threads { try? suggester.seedHistory(thread) } }
        }
    }

    private var suggester: ReplySuggester { ReplySuggester(engine: engine, me: "Sam", history: history) }

    private func section(_ i: Int) -> some View {
        let (thread, incoming) = threads[i]
        let key = thread.contact.key
        return Section(thread.contact.name) {
            ForEach(Array(thread.messages.suffix(3).enumerated()), id: \.offset) { _, m in
                Text(m.text).foregroundStyle(m.fromMe ? .secondary : .primary).frame(maxWidth: .infinity, alignment: m.fromMe ? .trailing : .leading)
            }
            Text(incoming).bold()
            if working == key {
                ProgressView()
            } else if case .success(let s)? = suggestions[key] {
                TextField("Reply", text: Binding(get: { drafts[key] ?? s.text }, set: { drafts[key] = $0 }))
                Text(String(format: "%d tokens · %.1f tok/s · %.2f tokens/step · %d/%d drafted tokens accepted · first token after %.0f ms",
                            s.tokens, s.decodeTokensPerS, s.tokensPerStep, Int(s.speculation.acceptedTokens),
                            Int(s.speculation.draftedTokens), s.timeToFirstTokenMs))
                    .font(.caption2).foregroundStyle(.secondary)
                if let c = comparisons[key] {
                    Text(String(format: "speed-up %.2f× with speculation: %.1f → %.1f tok/s", c.speedUp,
                                c.plain.decodeTokensPerS, c.speculative.decodeTokensPerS) + (c.identical ? ", same reply" : ", replies differ"))
                        .font(.caption)
                }
                HStack {
                    // Sending is the user's decision, every time.
                    Button("Send") { send(i, drafts[key] ?? s.text) }.buttonStyle(.borderedProminent)
                    Button("Again") { Task { await suggest(i) } }
                    Button("Compare") { Task { await suggest(i, compare: true) } }
                }
            } else {
                if case .failure(let error)? = suggestions[key] { Text("\(error)").foregroundStyle(.red) }
                Button("Suggest a reply") { Task { await suggest(i) } }
            }
        }
    }

    /// Suggests a reply; with `compare`, decodes it plainly first and keeps the measured speed-up
    /// (both answers are the same, so the second one is the suggestion).
    private func suggest(_ i: Int, compare: Bool = false) async {
        let (thread, incoming) = threads[i]
        let key = thread.contact.key
        working = key
        defer { working = nil }
        comparisons[key] = nil
        do {
            if compare {
                let c = try await suggester.compare(thread: thread, incoming: incoming)
                comparisons[key] = c
                suggestions[key] = .success(c.speculative)
            } else {
                suggestions[key] = .success(try await suggester.suggest(thread: thread, incoming: incoming))
            }
        } catch {
            suggestions[key] = .failure(error)
        }
    }

    /// The demo "sends" by adding both messages to the thread; the contact's next message is typed
    /// into the same field afterwards to try again.
    private func send(_ i: Int, _ reply: String) {
        var (thread, incoming) = threads[i]
        let said = [ThreadMessage(fromMe: false, text: incoming), ThreadMessage(fromMe: true, text: reply)]
        thread.messages += said
        threads[i] = (thread, "Great, see you then!")
        // What was said joins the contact's history, so later replies draft from it.
        for m in said { try? suggester.remember(m, of: thread.contact) }
        suggestions[thread.contact.key] = nil
        comparisons[thread.contact.key] = nil
        drafts[thread.contact.key] = nil
    }
}
