//! Structured output across the boundary (docs/structured-output.md): grammars that answers
//! must match, and tools the model may call. The session methods that take them are in
//! `session.rs`; a call arrives as `TokenEvent::ToolCall`.

/// What every answer of a session must match (`Session::set_grammar`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Grammar {
    /// A JSON Schema, as JSON text. The answer is one JSON value on one line.
    JsonSchema { schema: String },
    /// A grammar in llguidance's Lark syntax (`start: ...`; `%json { ... }` embeds a schema).
    Lark { source: String },
    /// A regular expression the whole answer must match.
    Regex { pattern: String },
}

impl From<Grammar> for tern::Grammar {
    fn from(g: Grammar) -> Self {
        match g {
            Grammar::JsonSchema { schema } => tern::Grammar::JsonSchema(schema),
            Grammar::Lark { source } => tern::Grammar::Lark(source),
            Grammar::Regex { pattern } => tern::Grammar::Regex(pattern),
        }
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Tool {
    /// Letters, digits, `_` and `-`.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object, as JSON text.
    pub parameters: String,
}

impl From<Tool> for tern::Tool {
    fn from(t: Tool) -> Self {
        tern::Tool { name: t.name, description: t.description, parameters: t.parameters }
    }
}

/// Whether the model must call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ToolChoice {
    /// Answer in text or call a tool, as the model decides.
    Auto,
    /// Call one of the tools.
    Required,
}

impl From<ToolChoice> for tern::ToolChoice {
    fn from(c: ToolChoice) -> Self {
        match c {
            ToolChoice::Auto => tern::ToolChoice::Auto,
            ToolChoice::Required => tern::ToolChoice::Required,
        }
    }
}

/// A call the model made: the app runs it and answers with `Session::send_tool_result`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    /// One of the session's tools.
    pub name: String,
    /// The arguments object as JSON text; it matches the tool's schema.
    pub arguments: String,
}

impl From<tern::ToolCall> for ToolCall {
    fn from(c: tern::ToolCall) -> Self {
        ToolCall { name: c.name, arguments: c.arguments }
    }
}
