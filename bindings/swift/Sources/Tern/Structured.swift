// Structured output helpers: UI actions with Task cancellation wired to Rust.

import Foundation

extension Session {
    /// The next action on `screen` towards `goal` (see the generated `nextAction`): one turn of
    /// this session's conversation, constrained so that the action parses and names an element
    /// of that screen. Unlike `nextAction`, cancelling the awaiting Task stops the generation
    /// (it then throws `TernError.Cancelled`; `CancellationError` if the Task was cancelled
    /// before the call).
    public func action(on screen: Screen, goal: String) async throws -> UiAction {
        try await withTaskCancellationHandler {
            // A Task cancelled before the call starts would cancel nothing yet: do not start.
            try Task.checkCancellation()
            return try await nextAction(screen: screen, goal: goal)
        } onCancel: {
            cancel()
        }
    }
}
