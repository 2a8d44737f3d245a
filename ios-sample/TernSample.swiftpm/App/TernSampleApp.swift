// The app: four tabs (Chat, Auto-reply, UI agent, Models) over one engine.

import SwiftUI
import Tern
import TernSampleLogic

@main
struct TernSampleApp: App {
    @State private var model = AppModel()

    var body: some Scene {
        WindowGroup {
            TabView {
                EngineGate(model: model) { ChatView(engine: $0) }
                    .tabItem { Label("Chat", systemImage: "bubble.left.and.bubble.right") }
                EngineGate(model: model) { AutoReplyView(engine: $0, history: model.history) }
                    .tabItem { Label("Auto-reply", systemImage: "arrowshape.turn.up.left") }
                EngineGate(model: model) { AgentView(engine: $0) }
                    .tabItem { Label("UI agent", systemImage: "hand.tap") }
                ModelsView(model: model)
                    .tabItem { Label("Models", systemImage: "square.and.arrow.down") }
            }
            .task { await model.restore() }
        }
    }
}

/// Shows `content` once a model is loaded, and what is happening until then.
struct EngineGate<Content: View>: View {
    let model: AppModel
    @ViewBuilder let content: (Engine) -> Content

    var body: some View {
        switch model.engine {
        case .ready(let engine, _): content(engine)
        case .loading: ProgressView("Loading the model…")
        case .failed(let message): ContentUnavailableView("Cannot load the model", systemImage: "exclamationmark.triangle", description: Text(message))
        case .none: ContentUnavailableView("No model yet", systemImage: "square.and.arrow.down", description: Text("Pick one in Models."))
        }
    }
}
