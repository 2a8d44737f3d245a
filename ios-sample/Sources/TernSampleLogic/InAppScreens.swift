// The sample's own screens as the UI agent sees and drives them. iOS gives no app the screens of
// another, so the agent works inside this app: each screen describes itself in the form the model
// reads (elements with id, class, text, clickable), and actions change this state, which the
// SwiftUI views render.

import Observation
import Tern

@MainActor
@Observable
public final class InAppScreens: ScreenReader, ActionPerformer {
    public enum Page: Sendable, Equatable {
        case inbox
        case thread(contact: String)
        case settings
    }

    public private(set) var page: Page = .inbox
    /// The message being written on a thread page.
    public private(set) var draft = ""
    /// Messages sent from a thread page: (contact, text).
    public private(set) var sent: [(contact: String, text: String)] = []
    /// Switches of the settings page, in display order.
    public private(set) var switches: [(name: String, on: Bool)] = [
        ("Dark mode", false), ("Battery saver", false), ("Notifications", true), ("Auto-reply suggestions", true),
    ]
    /// The last message of each contact, in display order.
    public let inbox: [(contact: String, last: String)]

    public init(inbox: [(contact: String, last: String)] = [
        ("Priya", "also Jo might join, is that ok?"), ("Mom", "And call your grandmother this weekend"), ("Work group", "Standup moved to 10:30"),
    ]) {
        self.inbox = inbox
    }

    /// What the user sees now, as elements; ids are positions on this page.
    public func currentScreen() -> Screen? {
        Screen(app: "Tern sample", elements: elements().enumerated().map { i, e in
            UiElement(id: UInt32(i), className: e.cls, text: e.text, clickable: e.clickable)
        })
    }

    public func perform(_ action: UiAction, on screen: Screen) -> Bool {
        guard screen == currentScreen() else { return false } // the screen changed since it was read
        if action.action == .back {
            page = .inbox
            return true
        }
        guard let id = action.id.map(Int.init), id < screen.elements.count else { return false }
        let target = elements()[id]
        switch action.action {
        case .tap:
            guard target.clickable, let tap = target.tap else { return false }
            tap()
        case .type:
            guard target.cls == "EditText", let text = action.text else { return false }
            draft = text
        case .scroll, .back:
            break // everything fits on these pages
        }
        return true
    }

    /// Navigation for the SwiftUI views (the same moves the agent makes).
    public func open(_ page: Page) {
        self.page = page
        draft = ""
    }

    public func setDraft(_ text: String) { draft = text }

    public func sendDraft() {
        guard case .thread(let contact) = page, !draft.isEmpty else { return }
        sent.append((contact, draft))
        draft = ""
    }

    public func toggle(_ name: String) {
        if let i = switches.firstIndex(where: { $0.name == name }) { switches[i].on.toggle() }
    }

    private struct Element {
        let cls: String
        let text: String
        let clickable: Bool
        let tap: (@MainActor () -> Void)?
    }

    private func elements() -> [Element] {
        switch page {
        case .inbox:
            return [Element(cls: "TextView", text: "Messages", clickable: false, tap: nil),
                    Element(cls: "Button", text: "Settings", clickable: true, tap: { [unowned self] in open(.settings) })]
                + inbox.map { item in
                    Element(cls: "ListItem", text: "\(item.contact): \(item.last)", clickable: true, tap: { [unowned self] in open(.thread(contact: item.contact)) })
                }
        case .thread(let contact):
            let last = inbox.first { $0.contact == contact }?.last ?? ""
            return [Element(cls: "Button", text: "Back", clickable: true, tap: { [unowned self] in open(.inbox) }),
                    Element(cls: "TextView", text: "\(contact): \(last)", clickable: false, tap: nil),
                    Element(cls: "EditText", text: draft.isEmpty ? "Message" : draft, clickable: true, tap: {}),
                    Element(cls: "Button", text: "Send", clickable: !draft.isEmpty, tap: { [unowned self] in sendDraft() })]
        case .settings:
            return [Element(cls: "Button", text: "Back", clickable: true, tap: { [unowned self] in open(.inbox) }),
                    Element(cls: "TextView", text: "Settings", clickable: false, tap: nil)]
                + switches.map { s in
                    Element(cls: "Switch", text: "\(s.name): \(s.on ? "on" : "off")", clickable: true, tap: { [unowned self] in toggle(s.name) })
                }
        }
    }
}
