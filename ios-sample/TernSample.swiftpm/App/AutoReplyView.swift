// The Auto-reply tab: conversations with contacts; for the message that just came in, a reply
// suggested in the user's own style, and what producing it took. iOS gives no app other apps'
// messages, so the threads here are the demo's, and new messages are typed in.

import SwiftUI
import Tern
import TernSampleLogic

struct AutoReplyView: View {
    let engine: Engine
    @State private var threads = ContactThread.demo
    @State private var suggestions: [String: Result<ReplySuggestion, Error>] = [:]
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
        }
    }

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
                Text(String(format: "%d tokens · %.1f tok/s · %.2f tokens/step · first token after %.0f ms",
                            s.tokens, s.decodeTokensPerS, s.tokensPerStep, s.timeToFirstTokenMs))
                    .font(.caption2).foregroundStyle(.secondary)
                HStack {
                    // Sending is the user's decision, every time.
                    Button("Send") { send(i, drafts[key] ?? s.text) }.buttonStyle(.borderedProminent)
                    Button("Again") { Task { await suggest(i) } }
                }
            } else {
                if case .failure(let error)? = suggestions[key] { Text("\(error)").foregroundStyle(.red) }
                Button("Suggest a reply") { Task { await suggest(i) } }
            }
        }
    }

    private func suggest(_ i: Int) async {
        let (thread, incoming) = threads[i]
        working = thread.contact.key
        defer { working = nil }
        let suggester = ReplySuggester(engine: engine, me: "Sam")
        do {
            suggestions[thread.contact.key] = .success(try await suggester.suggest(thread: thread, incoming: incoming))
        } catch {
            suggestions[thread.contact.key] = .failure(error)
        }
    }

    /// The demo "sends" by adding both messages to the thread; the contact's next message is typed
    /// into the same field afterwards to try again.
    private func send(_ i: Int, _ reply: String) {
        var (thread, incoming) = threads[i]
        thread.messages += [ThreadMessage(fromMe: false, text: incoming), ThreadMessage(fromMe: true, text: reply)]
        threads[i] = (thread, "Great, see you then!")
        suggestions[thread.contact.key] = nil
        drafts[thread.contact.key] = nil
    }
}
