// The Chat tab: the conversation streaming in, Stop while it does, Regenerate and New chat, and
// under each answer its time to first token, tokens/s and energy per token.

import SwiftUI
import Tern
import TernSampleLogic

struct ChatView: View {
    @State private var chat: ChatViewModel?
    @State private var input = ""
    let engine: Engine

    var body: some View {
        NavigationStack {
            Group {
                if let chat { conversation(chat) } else { ProgressView() }
            }
            .navigationTitle("Chat")
            .toolbar {
                ToolbarItem(placement: .topBarLeading) {
                    if let chat {
                        Menu("Energy: \(chat.energyMode)") {
                            ForEach(energyModes, id: \.name) { entry in
                                Button(entry.name) { chat.setEnergyMode(entry.mode) }
                            }
                        }
                    }
                }
                ToolbarItemGroup(placement: .topBarTrailing) {
                    Button("Regenerate", systemImage: "arrow.clockwise") { chat?.regenerate() }
                        .disabled(chat?.generating ?? true || chat?.messages.isEmpty ?? true)
                    Button("New chat", systemImage: "square.and.pencil") { try? chat?.newChat() }
                }
            }
        }
        .task(id: ObjectIdentifier(engine)) {
            chat = try? ChatViewModel(engine: engine, settings: ChatSettings(systemPrompt: "You are a helpful assistant. Answer briefly."))
        }
        .onDisappear { chat?.cancelTask() } // leaving the tab stops an answer, in Rust too
    }

    // snippet:begin conversation
    private func conversation(_ chat: ChatViewModel) -> some View {
        VStack(spacing: 0) {
            ScrollViewReader { scroll in
                List(chat.messages) { message in
                    Bubble(message: message).id(message.id).listRowSeparator(.hidden)
                }
                .listStyle(.plain)
                .onChange(of: chat.messages.last?.text) { _, _ in
                    if let last = chat.messages.last { scroll.scrollTo(last.id, anchor: .bottom) }
                }
            }
            if let error = chat.error {
                Text(error).foregroundStyle(.red).padding(.horizontal)
            }
            HStack {
                TextField("Message", text: $input, axis: .vertical).textFieldStyle(.roundedBorder)
                if chat.generating {
                    Button("Stop", systemImage: "stop.circle.fill") { chat.stop() }.labelStyle(.iconOnly).font(.title2)
                } else {
                    Button("Send", systemImage: "arrow.up.circle.fill") {
                        if chat.send(input) { input = "" }
                    }
                    .labelStyle(.iconOnly).font(.title2)
                }
            }
            .padding()
        }
    }
    // snippet:end
}

private struct Bubble: View {
    let message: ChatMessage

    var body: some View {
        let mine = message.role == .user
        VStack(alignment: mine ? .trailing : .leading, spacing: 4) {
            Text(message.text.isEmpty && message.streaming ? "…" : message.text)
                .padding(12)
                .background(mine ? Color.accentColor.opacity(0.2) : Color.secondary.opacity(0.15), in: .rect(cornerRadius: 12))
            if let m = message.metrics {
                Text(figures(m, stopped: message.stopped)).font(.caption2).foregroundStyle(.secondary)
            }
        }
        .frame(maxWidth: .infinity, alignment: mine ? .trailing : .leading)
    }
}

/// "TTFT 180 ms · 38.2 tok/s · 64 tokens · 2.1 mJ/token (estimated)"
private func figures(_ m: AnswerMetrics, stopped: Bool) -> String {
    var parts: [String] = []
    if let t = m.timeToFirstTokenMs { parts.append(String(format: "TTFT %.0f ms", t)) }
    if let r = m.tokensPerSecond { parts.append(String(format: "%.1f tok/s", r)) }
    parts.append("\(m.tokens) tokens")
    if let e = m.energy { parts.append(String(format: "%.1f mJ/token (%@)", e.millijoulesPerToken, e.measured ? "measured" : "estimated")) }
    if stopped { parts.append("stopped") }
    return parts.joined(separator: " · ")
}
