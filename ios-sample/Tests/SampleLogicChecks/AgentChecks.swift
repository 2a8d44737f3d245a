// The UI agent's checks (called from main.swift): a valid action on an existing element for
// every `ui` workload case, the risk rules, the confirm-then-act loop and the in-app screens.

import Foundation
import Tern
import TernSampleLogic


func uiCases() throws -> [(id: String, screen: Screen, goal: String)] {
    let dir = casesDir.appendingPathComponent("ui")
    let goals = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".goal.txt") }.sorted()
    return try goals.map { name in
        let id = String(name.dropLast(".goal.txt".count))
        let json = try String(contentsOf: dir.appendingPathComponent("\(id).screen.json"), encoding: .utf8)
        let goal = try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
        return (id, try screenFromJson(json: json), goal.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// One fixed screen; counts the actions performed on it.
final class FixedScreen: ScreenReader, ActionPerformer, @unchecked Sendable {
    let screen: Screen
    var performed = 0
    init(_ screen: Screen) { self.screen = screen }
    func currentScreen() -> Screen? { screen }
    func perform(_ action: UiAction, on screen: Screen) -> Bool {
        performed += 1
        return true
    }
}

@MainActor
func agentChecks() async {
    await test("the agent gives a valid action on an existing element for every ui workload") {
        let cases = try uiCases()
        try expect(!cases.isEmpty, "no ui cases")
        let agent = try UiAgent(engine: engine)
        for c in cases {
            try agent.reset()
            let p = try await agent.propose(screen: c.screen, goal: c.goal)
            let element = c.screen.elements.first { $0.id == p.action.id }
            switch p.action.action {
            case .back: try expect(p.action.id == nil, "\(c.id): back with an id")
            case .tap: try expect(element?.clickable == true, "\(c.id): tap on \(String(describing: p.action.id))")
            case .type: try expect(element != nil && !(p.action.text ?? "").isEmpty, "\(c.id): type \(p.action)")
            case .scroll: try expect(element != nil, "\(c.id): scroll on \(String(describing: p.action.id))")
            }
            try expect(p.element == element, "\(c.id): proposal names \(String(describing: p.element))")
            print("     \(c.id): \(p.summary) (risk \(p.risk))")
        }
        print("     \(cases.count) of \(cases.count) ui cases gave a valid action")
    }

    await test("risky actions are recognised: sending, paying, deleting") {
        func el(_ text: String, _ cls: String = "Button") -> UiElement { UiElement(id: 1, className: cls, text: text, clickable: true) }
        let tap = UiAction(action: .tap, id: 1, text: nil)
        let type = UiAction(action: .type, id: 1, text: "hello")
        try expect(riskOf(tap, el("Send")) == .sends, "Send")
        try expect(riskOf(tap, el("Pay $12.00")) == .pays, "Pay")
        try expect(riskOf(tap, el("Place order")) == .pays, "Place order")
        try expect(riskOf(tap, el("Delete conversation")) == .deletes, "Delete")
        try expect(riskOf(tap, el("Move to trash", "ImageButton")) == .deletes, "trash")
        try expect(riskOf(tap, el("Timer", "Tab")) == .none, "Timer")
        try expect(riskOf(tap, el("Sender settings")) == .none, "Sender is not send")
        try expect(riskOf(type, el("Send a message", "EditText")) == .none, "typing")
        let proposal = Proposal(goal: "g", screen: Screen(app: "App", elements: [el("Send")]), action: tap, element: el("Send"), risk: .sends)
        try expect(proposal.needsConfirmation(autoRunSafe: true), "a send ran without asking")
    }

    await test("the agent loop asks before acting and does nothing when the user declines") {
        let clock = try uiCases().first { $0.id == "dev-ui-2" }!
        let app = FixedScreen(clock.screen)
        let controller = UiAgentController(agent: try UiAgent(engine: engine), reader: app, performer: app)
        controller.start(goal: clock.goal)
        try await eventually("a proposal") {
            switch controller.state {
            case .confirm, .failed, .finished: return true
            default: return false
            }
        }
        guard case .confirm = controller.state else { throw Failure(description: "state \(controller.state)") }
        controller.reject()
        await controller.waitUntilDone()
        try expect(app.performed == 0, "performed \(app.performed) actions")
        try expect(controller.state == .finished(goal: clock.goal, steps: 0, reason: "the user declined"), "end \(controller.state)")
    }

    await test("the in-app agent drives the sample's own screens; sending always asks") {
        let screens = InAppScreens()
        let controller = UiAgentController(agent: try UiAgent(engine: engine), reader: screens, performer: screens, maxSteps: 3)
        controller.autoRunSafe = true
        var seen: [AgentState] = []
        controller.start(goal: "Open the settings")
        while true {
            if seen.last != controller.state { seen.append(controller.state) }
            if case .confirm(let p, _) = controller.state {
                try expect(p.risk != .none, "a safe step asked although safe steps run alone: \(p.summary)")
                controller.reject()
            }
            if case .finished = controller.state { break }
            if case .failed(_, let message) = controller.state { throw Failure(description: message) }
            try await Task.sleep(for: .milliseconds(1))
        }
        await controller.waitUntilDone()
        let performed = controller.performed
        for p in performed {
            try expect(p.risk == .none, "a risky step ran without asking: \(p.summary)")
            try expect(p.action.action == .back || p.element != nil, "no element for \(p.summary)")
        }
        try expect(!performed.isEmpty || seen.contains { if case .finished(_, _, "the user declined") = $0 { return true } else { return false } },
                   "nothing happened: \(seen)")
        print("     \(performed.map(\.summary).joined(separator: ", ")) -> page \(screens.page)")
    }

    await test("in-app screens: actions change the page, and stale or invalid actions are refused") {
        let screens = InAppScreens()
        let inbox = screens.currentScreen()!
        let settingsButton = inbox.elements.first { $0.text == "Settings" }!
        try expect(screens.perform(UiAction(action: .tap, id: settingsButton.id, text: nil), on: inbox), "tap Settings")
        try expect(screens.page == .settings, "page \(screens.page)")
        try expect(!screens.perform(UiAction(action: .tap, id: settingsButton.id, text: nil), on: inbox), "a stale screen was acted on")
        let settings = screens.currentScreen()!
        let saver = settings.elements.first { $0.text.hasPrefix("Battery saver") }!
        try expect(screens.perform(UiAction(action: .tap, id: saver.id, text: nil), on: settings), "tap Battery saver")
        try expect(screens.switches.first { $0.name == "Battery saver" }!.on, "battery saver still off")
        try expect(screens.perform(UiAction(action: .back, id: nil, text: nil), on: screens.currentScreen()!), "back")
        try expect(screens.page == .inbox, "back went to \(screens.page)")
    }
}
