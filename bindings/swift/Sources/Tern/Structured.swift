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

/// A type the model can answer with, like Foundation Models' `@Generable` types: `Decodable`,
/// with the JSON Schema of its encoded form. The schema constrains the answer, so it always
/// decodes unless the schema says less than the type's `init(from:)` expects.
///
/// ```swift
/// struct Trip: Generable {
///     let city: String
///     let days: Int
///     static let jsonSchema = #"{"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},"#
///         + #" "days": {"type": "integer", "minimum": 1, "maximum": 30}},"#
///         + #" "required": ["city", "days"], "additionalProperties": false}"#
/// }
/// let trip = try await session.generate("Plan a trip to Lyon.", as: Trip.self)
/// ```
public protocol Generable: Decodable {
    /// JSON Schema of the type's JSON form, as JSON text.
    static var jsonSchema: String { get }
}

extension Session {
    /// Sends `prompt` and returns the answer as a `T` (see the generated `generateJson`): one
    /// turn of the conversation. Cancelling the awaiting Task stops the generation (then
    /// `TernError.Cancelled`); an answer cut off by `maxTokens` throws `TernError.Constraint`.
    public func generate<T: Generable>(_ prompt: String, as type: T.Type = T.self) async throws -> T {
        let json = try await withTaskCancellationHandler {
            try Task.checkCancellation()
            return try await generateJson(text: prompt, schema: T.jsonSchema)
        } onCancel: {
            cancel()
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(json.utf8))
        } catch {
            throw TernError.Constraint(detail: "the answer matches the schema but is not a \(T.self): \(error)")
        }
    }
}

/// A tool and the code that runs it, for `Session.reply(_:using:choice:maxCalls:)`.
public struct ToolHandler: Sendable {
    public let tool: Tool
    /// Runs a call: its arguments object as JSON text in, the result (usually JSON) out.
    public let run: @Sendable (_ arguments: String) async throws -> String

    public init(_ tool: Tool, run: @escaping @Sendable (_ arguments: String) async throws -> String) {
        self.tool = tool
        self.run = run
    }
}

/// The end of a tool loop: the model's text answer, and each call made on the way with the
/// result its handler gave.
public struct ToolReply: Sendable {
    public let reply: Reply
    public let calls: [(call: ToolCall, result: String)]
}

extension Session {
    /// Sends `text` with `tools` and runs the calls the model makes: each goes to its handler,
    /// whose result is sent back, until the model answers in text. After `maxCalls` calls the
    /// model must answer in text, so the loop always ends. The tools stay set on the session.
    /// A handler's error ends the loop and is rethrown; cancelling the Task stops it.
    public func reply(
        _ text: String, using tools: [ToolHandler], choice: ToolChoice = .auto, maxCalls: Int = 8
    ) async throws -> ToolReply {
        let handlers = Dictionary(tools.map { ($0.tool.name, $0) }, uniquingKeysWith: { first, _ in first })
        try await setTools(tools: tools.map(\.tool), choice: choice)
        var calls: [(call: ToolCall, result: String)] = []
        var answer = try await reply(text)
        while let call = answer.toolCall {
            guard let handler = handlers[call.name] else {
                throw TernError.Internal(detail: "the model called \(call.name), which has no handler")
            }
            let result = try await handler.run(call.arguments)
            calls.append((call, result))
            answer = calls.count >= maxCalls
                ? try await Reply.collect(pulledStream { try self.sendLastToolResult(result: result) })
                : try await replyToolResult(result)
        }
        return ToolReply(reply: answer, calls: calls)
    }
}
