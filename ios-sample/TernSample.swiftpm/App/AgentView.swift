// The UI agent tab: the sample's own small app (inbox, a thread, settings) on top, the goal and
// the agent's proposal below. iOS gives no app the screens of another, so the agent drives these
// screens of its own app; each proposal waits for "Do it", and sending always asks.

import SwiftUI
import Tern
import TernSampleLogic

struct AgentView: View {
    let engine: Engine
    @State private var screens = InAppScreens()
    @State private var controller: UiAgentController?
    @State private var goal = ""

    var body: some View {
        NavigationStack {
            VStack(spacing: 12) {
                InAppScreenView(screens: screens)
                    .frame(maxHeight: .infinity)
                    .background(Color.secondary.opacity(0.08), in: .rect(cornerRadius: 12))
                if let controller {
                    AgentPanel(controller: controller, goal: $goal)
                }
            }
            .padding()
            .navigationTitle("UI agent")
        }
        .task(id: ObjectIdentifier(engine)) {
            if let agent = try? UiAgent(engine: engine) {
                controller = UiAgentController(agent: agent, reader: screens, performer: screens)
            }
        }
    }
}

private struct AgentPanel: View {
    let controller: UiAgentController
    @Binding var goal: String

    var body: some View {
        VStack(alignment: .leading, spacing: 8) {
            HStack {
                TextField("What should the agent do?", text: $goal).textFieldStyle(.roundedBorder)
                Button("Start") { controller.start(goal: goal) }.disabled(goal.isEmpty)
            }
            Toggle("Take safe steps without asking", isOn: Binding(get: { controller.autoRunSafe }, set: { controller.autoRunSafe = $0 }))
                .font(.footnote)
            switch controller.state {
            case .idle:
                Text("Try “Turn on battery saver” or “Tell Priya that Jo is welcome”.").foregroundStyle(.secondary)
            case .thinking(_, let step):
                Label("Step \(step): reading the screen…", systemImage: "ellipsis")
            case .confirm(let proposal, let step):
                Text("Step \(step): \(proposal.summary)").bold()
                if proposal.risk != .none {
                    Text("This \(String(describing: proposal.risk)): please check before you confirm.").foregroundStyle(.orange)
                }
                HStack {
                    Button("Do it") { controller.confirm() }.buttonStyle(.borderedProminent)
                    Button("Not this") { controller.reject() }
                }
            case .performed(let proposal, let step):
                Text("Step \(step) done: \(proposal.summary)")
            case .finished(_, let steps, let reason):
                Text("Finished after \(steps) steps: \(reason).")
            case .failed(_, let message):
                Text("Stopped: \(message)").foregroundStyle(.red)
            }
        }
    }
}

/// Renders the in-app screens the agent reads; the user can use them by hand too.
private struct InAppScreenView: View {
    let screens: InAppScreens

    var body: some View {
        List {
            switch screens.page {
            case .inbox:
                Section("Messages") {
                    ForEach(screens.inbox, id: \.contact) { item in
                        Button("\(item.contact): \(item.last)") { screens.open(.thread(contact: item.contact)) }
                    }
                }
                Button("Settings") { screens.open(.settings) }
            case .thread(let contact):
                Button("Back") { screens.open(.inbox) }
                Text("\(contact): \(screens.inbox.first { $0.contact == contact }?.last ?? "")")
                TextField("Message", text: Binding(get: { screens.draft }, set: { screens.setDraft($0) }))
                Button("Send") { screens.sendDraft() }.disabled(screens.draft.isEmpty)
                ForEach(Array(screens.sent.enumerated()).filter { $0.element.contact == contact }, id: \.offset) { _, m in
                    Text(m.text).frame(maxWidth: .infinity, alignment: .trailing)
                }
            case .settings:
                Button("Back") { screens.open(.inbox) }
                ForEach(screens.switches, id: \.name) { s in
                    Toggle(s.name, isOn: Binding(get: { s.on }, set: { _ in screens.toggle(s.name) }))
                }
            }
        }
    }
}
