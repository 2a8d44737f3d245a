//! Tool calls: the app gives a session tools (name, description, JSON Schema of the arguments);
//! each answer is then either text or one call that matches a tool's schema.
//!
//! Calls are written the way Qwen 2.5 (and Hermes-style templates) are trained to write them:
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! A template that renders `tools` itself (see [`ToolFormat`]) gets the definitions through its
//! `tools` variable, so the model sees them exactly as in training. Templates without tool support
//! (SmolLM2, Gemma 3) get the same definitions and the same call format described in the system
//! message instead.
//!
//! A grammar enforces the choice: with [`ToolChoice::Auto`] the answer is either text that does
//! not start with `<` or `{`, or a call, tagged or bare (the JSON object alone, which is what
//! small models such as Qwen2.5-0.5B write when left to choose); with [`ToolChoice::Required`]
//! it is a tagged call. The call's JSON is
//! constrained by the union of the tools' schemas, so a finished call always parses and names a
//! tool; arguments hold only the declared properties unless a schema sets
//! `additionalProperties`. Its text is kept out of the token stream; the session reports it as a
//! [`ToolCall`].

use std::collections::HashSet;

use crate::chat::{ChatTemplate, Message, Role, ToolFormat};
use crate::constrain::{CompiledGrammar, Grammar, TokenConstraint};
use crate::engine::Engine;
use crate::error::{Error, Result};

const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tool {
    /// Letters, digits, `_` and `-`.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object, as JSON text.
    pub parameters: String,
}

/// Whether the model must call a tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// Answer in text or call a tool, as the model decides.
    #[default]
    Auto,
    /// Call one of the tools.
    Required,
}

/// A call the model made: the app runs it and answers with
/// [`Session::send_tool_result`](crate::Session::send_tool_result).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub name: String,
    /// The arguments object, as JSON text; it matches the tool's schema.
    pub arguments: String,
}

/// A session's tools, compiled: how they are shown to the model and the grammar of its answers.
#[derive(Debug, Clone)]
pub(crate) struct ToolSet {
    names: Vec<String>,
    /// `[{"type": "function", "function": {...}}, ...]` as templates expect.
    definitions: serde_json::Value,
    native: bool,
    grammar: CompiledGrammar,
}

impl ToolSet {
    /// Checks the tools and compiles the answer grammar: bad names or schemas give
    /// [`Error::Grammar`] here.
    pub fn new(engine: &Engine, tools: &[Tool], choice: ToolChoice) -> Result<ToolSet> {
        if tools.is_empty() {
            return Err(Error::InvalidOption("a tool set needs at least one tool".into()));
        }
        let mut seen = HashSet::new();
        let mut definitions = Vec::with_capacity(tools.len());
        let mut calls = Vec::with_capacity(tools.len());
        for tool in tools {
            let valid =
                !tool.name.is_empty() && tool.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid {
                return Err(Error::Grammar(format!("tool name `{}` must be letters, digits, `_` or `-`", tool.name)));
            }
            if !seen.insert(tool.name.as_str()) {
                return Err(Error::Grammar(format!("tool `{}` is defined twice", tool.name)));
            }
            let params: serde_json::Value = serde_json::from_str(&tool.parameters)
                .map_err(|e| Error::Grammar(format!("parameters of tool `{}` are not JSON: {e}", tool.name)))?;
            if !params.is_object() {
                return Err(Error::Grammar(format!("parameters of tool `{}` must be a JSON Schema object", tool.name)));
            }
            definitions.push(serde_json::json!({
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": params},
            }));
            calls.push(serde_json::json!({
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": closed(params)},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            }));
        }
        let call_schema = serde_json::json!({
            "anyOf": calls,
            "x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "},
        });
        let grammar = Grammar::Lark(call_grammar(&call_schema, choice));
        Ok(ToolSet {
            names: tools.iter().map(|t| t.name.clone()).collect(),
            definitions: serde_json::Value::Array(definitions),
            native: engine.chat_template().tool_format() == ToolFormat::ToolCallTags,
            grammar: engine.compile_grammar(&grammar)?,
        })
    }

    /// The prompt for `conversation`: tools through the template where it shows them, else in
    /// the system message.
    pub fn render(&self, template: &ChatTemplate, conversation: &[Message]) -> Result<String> {
        if self.native {
            return template.render_with_tools(conversation, true, Some(&self.definitions));
        }
        let mut with_tools = Vec::with_capacity(conversation.len() + 1);
        let block = self.fallback_instructions();
        match conversation.first() {
            Some(m) if m.role == Role::System => {
                with_tools.push(Message::system(format!("{}\n\n{block}", m.content)));
                with_tools.extend_from_slice(&conversation[1..]);
            }
            _ => {
                with_tools.push(Message::system(block));
                with_tools.extend_from_slice(conversation);
            }
        }
        template.render(&with_tools, true)
    }

    /// The constraint for one answer.
    pub fn start(&self) -> TokenConstraint {
        self.grammar.start()
    }

    /// The call in a finished answer that began with the call tag; `None` if it is incomplete
    /// (the answer was cut off) or names no tool of this set.
    pub(crate) fn parse_call(&self, answer: &str) -> Option<ToolCall> {
        let body = match answer.strip_prefix(CALL_OPEN) {
            Some(tagged) => tagged.trim_end().strip_suffix(CALL_CLOSE)?,
            None => answer.strip_prefix('{').map(|_| answer)?,
        };
        let value: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
        let name = value.get("name")?.as_str()?;
        let arguments = value.get("arguments").filter(|a| a.is_object())?;
        self.names
            .iter()
            .any(|n| n == name)
            .then(|| ToolCall { name: name.to_owned(), arguments: arguments.to_string() })
    }

    /// What templates without tool support get in their system message: the definitions and
    /// the call format, in the words of Qwen 2.5's template.
    fn fallback_instructions(&self) -> String {
        let mut s = String::from(
            "# Tools\n\nYou may call one of these functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
        );
        if let serde_json::Value::Array(defs) = &self.definitions {
            for d in defs {
                s.push('\n');
                s.push_str(&d.to_string());
            }
        }
        s.push_str(
            "\n</tools>\n\nTo call a function, reply with only a json object with the function name and \
             arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n\
             {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
        );
        s
    }
}

/// The arguments schema as the grammar uses it: an object schema that does not say whether other
/// keys are allowed gets only its declared properties, so a model cannot ramble on with extra
/// keys (JSON Schema would allow them).
fn closed(mut params: serde_json::Value) -> serde_json::Value {
    if let Some(obj) = params.as_object_mut() {
        if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
            obj.insert("additionalProperties".into(), serde_json::Value::Bool(false));
        }
    }
    params
}

/// A call's text as the conversation keeps it: tagged, also when the model wrote it bare.
pub(crate) fn tagged_call(answer: &str) -> String {
    let answer = answer.trim();
    if answer.starts_with(CALL_OPEN) {
        answer.to_owned()
    } else {
        format!("{CALL_OPEN}\n{answer}\n{CALL_CLOSE}")
    }
}

/// A text answer in the grammars below: one that cannot be taken for a call.
const TEXT_RULE: &str = "TEXT: /[^<{\\s](?s:.)*/\n";

/// The grammar of an answer that must be text although the session has tools.
pub(crate) fn text_answer_grammar() -> Grammar {
    Grammar::Lark(format!("start: TEXT\n{TEXT_RULE}"))
}

/// The Lark grammar of an answer: a call (the tag, one line of JSON matching `call_schema`, the
/// closing tag), or with `Auto` also the bare JSON call and text that does not start with `<` or
/// `{`.
fn call_grammar(call_schema: &serde_json::Value, choice: ToolChoice) -> String {
    let start = match choice {
        ToolChoice::Auto => format!("start: TEXT | call | body\n{TEXT_RULE}"),
        ToolChoice::Required => "start: call\n".to_owned(),
    };
    format!("{start}call: \"{CALL_OPEN}\\n\" body \"\\n{CALL_CLOSE}\"\nbody: %json {call_schema}\n")
}

/// Separates the shown answer from a call while it streams: the grammar lets an answer start
/// with `<` or `{` only when it is a call, so its first character decides.
#[derive(Debug, Default)]
pub(crate) struct CallDetector {
    decided: Option<bool>,
}

impl CallDetector {
    /// The part of `text` to show: all of it for a text answer, nothing for a call.
    pub fn show(&mut self, text: String) -> String {
        if self.decided.is_none() {
            if let Some(c) = text.chars().next() {
                self.decided = Some(c == '<' || c == '{');
            }
        }
        if self.decided == Some(true) {
            String::new()
        } else {
            text
        }
    }

    /// True once the answer is known to be a call.
    pub(crate) fn is_call(&self) -> bool {
        self.decided == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_embeds_the_schema_and_the_tags() {
        let g = call_grammar(&serde_json::json!({"anyOf": []}), ToolChoice::Required);
        assert_eq!(g, "start: call\ncall: \"<tool_call>\\n\" body \"\\n</tool_call>\"\nbody: %json {\"anyOf\":[]}\n");
        assert!(call_grammar(&serde_json::json!({}), ToolChoice::Auto).starts_with("start: TEXT | call | body\n"));
    }

    #[test]
    fn argument_objects_are_closed_unless_they_say_otherwise() {
        let open = serde_json::json!({"type": "object", "properties": {"a": {}}});
        assert_eq!(closed(open)["additionalProperties"], false);
        let explicit = serde_json::json!({"type": "object", "properties": {}, "additionalProperties": true});
        assert_eq!(closed(explicit)["additionalProperties"], true);
    }

    #[test]
    fn detector_hides_calls_only() {
        let mut d = CallDetector::default();
        assert_eq!(d.show(String::new()), "");
        assert_eq!(d.show("Hello".into()), "Hello");
        assert_eq!(d.show(" <b>".into()), " <b>");
        let mut d = CallDetector::default();
        assert_eq!(d.show(" <b>".into()), " <b>");
        let mut d = CallDetector::default();
        assert_eq!(d.show("{\"name".into()), "");
        assert!(d.is_call());
        let mut d = CallDetector::default();
        assert_eq!(d.show("<tool".into()), "");
        assert!(d.is_call());
        assert_eq!(d.show("_call>".into()), "");
    }
}
