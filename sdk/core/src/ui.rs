//! UI actions: a screen (its elements) and a goal in, the next action out, as JSON that a schema
//! built from that very screen constrains, so the action always parses and names an element
//! that is on the screen.
//!
//! The prompt is the one of the `ui` workloads (sdk/core/tests/workloads/dev-ui.jsonl): a system
//! message describing the action format, then `Screen:\n<screen JSON>\n\nGoal: <goal>`.
//!
//! ```no_run
//! # use tern::{Engine, EngineOptions, SamplingOptions, Session, SessionOptions};
//! # use tern::ui::{self, Screen};
//! # let engine = Engine::load("model.gguf", EngineOptions::default())?;
//! // Greedy: the most likely action, the same each time for the same screen and goal.
//! let greedy = SessionOptions { sampling: Some(SamplingOptions::greedy()), ..Default::default() };
//! let mut session = Session::new(engine, greedy)?;
//! let screen: Screen = serde_json::from_str(r#"{"app": "Clock", "elements": [
//!     {"id": 0, "class": "Tab", "text": "Timer", "clickable": true}]}"#).unwrap();
//! let action = ui::next_action(&mut session, &screen, "Set a timer")?;
//! # Ok::<(), tern::Error>(())
//! ```

use crate::chat::Message;
use crate::constrain::Grammar;
use crate::error::{Error, Result};
use crate::session::Session;

/// The instructions of the `ui` workloads.
pub const SYSTEM_PROMPT: &str = "You control a phone. Given the screen as JSON and the user's goal, reply with \
the next action as JSON: {\"action\": \"tap\"|\"type\"|\"scroll\"|\"back\", \"id\": <element id>, \"text\": <text \
to type, if any>} followed by one sentence explaining it.";

/// Longest text a `type` action may carry.
pub(crate) const MAX_TYPED_CHARS: usize = 200;

/// What is on the screen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Screen {
    pub app: String,
    pub elements: Vec<UiElement>,
}

/// One element of a screen (field order as in the prompt).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UiElement {
    pub id: u32,
    pub class: String,
    pub text: String,
    pub clickable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UiActionKind {
    Tap,
    Type,
    Scroll,
    Back,
}

/// The next action: `id` for everything but `back`, `text` for `type` only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiAction {
    pub action: UiActionKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Why a text is not a valid action for a screen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    #[error("the answer holds no JSON object")]
    NoJson,
    #[error("the JSON is not an action: {0}")]
    NotAnAction(String),
    #[error("`{0:?}` needs an element id")]
    MissingId(UiActionKind),
    #[error("element {0} is not on the screen")]
    UnknownElement(u32),
    #[error("element {0} is not clickable")]
    NotClickable(u32),
    #[error("`type` needs text of 1 to {MAX_TYPED_CHARS} characters")]
    BadText,
    #[error("`{0:?}` takes no `{1}`")]
    UnexpectedField(UiActionKind, &'static str),
}

/// The user message of the workloads: the screen as indented JSON, then the goal.
pub fn user_message(screen: &Screen, goal: &str) -> String {
    // Serializing plain strings, numbers and booleans cannot fail.
    let json = to_json_indent1(screen);
    format!("Screen:\n{json}\n\nGoal: {goal}")
}

/// System and user messages for one step.
pub fn messages(screen: &Screen, goal: &str) -> Vec<Message> {
    vec![Message::system(SYSTEM_PROMPT), Message::user(user_message(screen, goal))]
}

/// The JSON Schema of an action on `screen`: `tap` on a clickable element (any element if none
/// is marked clickable), `type` into any element with text, `scroll` any element, `back`.
pub fn action_schema(screen: &Screen) -> serde_json::Value {
    let all: Vec<u32> = screen.elements.iter().map(|e| e.id).collect();
    let clickable: Vec<u32> = screen.elements.iter().filter(|e| e.clickable).map(|e| e.id).collect();
    let tappable = if clickable.is_empty() { &all } else { &clickable };
    let with_id = |action: &str, ids: &[u32]| {
        serde_json::json!({
            "type": "object",
            "properties": {"action": {"const": action}, "id": {"enum": ids}},
            "required": ["action", "id"],
            "additionalProperties": false,
        })
    };
    let mut variants = Vec::new();
    if !all.is_empty() {
        variants.push(with_id("tap", tappable));
        variants.push(serde_json::json!({
            "type": "object",
            "properties": {
                "action": {"const": "type"},
                "id": {"enum": all},
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_TYPED_CHARS},
            },
            "required": ["action", "id", "text"],
            "additionalProperties": false,
        }));
        variants.push(with_id("scroll", &all));
    }
    variants.push(serde_json::json!({
        "type": "object",
        "properties": {"action": {"const": "back"}},
        "required": ["action"],
        "additionalProperties": false,
    }));
    serde_json::json!({"anyOf": variants})
}

/// The grammar of an action on `screen`.
pub fn action_grammar(screen: &Screen) -> Grammar {
    Grammar::json_schema(&action_schema(screen))
}

/// Reads the first JSON object in `answer` (models without constraints often wrap it in prose
/// or code fences) and checks it is a valid action on `screen`.
pub fn parse_action(screen: &Screen, answer: &str) -> std::result::Result<UiAction, ActionError> {
    let start = answer.find('{').ok_or(ActionError::NoJson)?;
    let value = serde_json::Deserializer::from_str(&answer[start..])
        .into_iter::<serde_json::Value>()
        .next()
        .ok_or(ActionError::NoJson)?
        .map_err(|e| ActionError::NotAnAction(e.to_string()))?;
    let action: UiAction = serde_json::from_value(value).map_err(|e| ActionError::NotAnAction(e.to_string()))?;
    validate(screen, &action)?;
    Ok(action)
}

/// Checks `action` against the rules of [`action_schema`]: an element of `screen` for all but
/// `back` (a clickable one for `tap` when the screen marks any), text of 1 to
/// `MAX_TYPED_CHARS` characters for `type` and for nothing else.
pub fn validate(screen: &Screen, action: &UiAction) -> std::result::Result<(), ActionError> {
    let kind = action.action;
    if kind != UiActionKind::Type && action.text.is_some() {
        return Err(ActionError::UnexpectedField(kind, "text"));
    }
    if kind == UiActionKind::Back {
        return match action.id {
            Some(_) => Err(ActionError::UnexpectedField(kind, "id")),
            None => Ok(()),
        };
    }
    let id = action.id.ok_or(ActionError::MissingId(kind))?;
    let element = screen.elements.iter().find(|e| e.id == id).ok_or(ActionError::UnknownElement(id))?;
    if kind == UiActionKind::Tap && !element.clickable && screen.elements.iter().any(|e| e.clickable) {
        return Err(ActionError::NotClickable(id));
    }
    if kind == UiActionKind::Type {
        let chars = action.text.as_deref().map_or(0, |t| t.chars().count());
        if !(1..=MAX_TYPED_CHARS).contains(&chars) {
            return Err(ActionError::BadText);
        }
    }
    Ok(())
}

/// Asks the model for the next action on `screen` towards `goal`, constrained to that screen.
/// The step is one turn in `session`'s conversation (reset it between unrelated steps); the
/// session's system prompt should be [`SYSTEM_PROMPT`] or say the same.
pub fn next_action(session: &mut Session, screen: &Screen, goal: &str) -> Result<UiAction> {
    let (answer, _) = session.send_matching(&user_message(screen, goal), &action_grammar(screen))?.text_and_stats()?;
    parse_action(screen, &answer).map_err(|e| Error::Constraint(format!("the model's action is not valid: {e}")))
}

/// JSON with one space of indentation, as Python's `json.dumps(indent=1)` writes the screens of
/// the workloads.
fn to_json_indent1(value: &impl serde::Serialize) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    if value.serialize(&mut ser).is_err() {
        return String::new();
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen() -> Screen {
        Screen {
            app: "Clock".into(),
            elements: vec![
                UiElement { id: 0, class: "TextView".into(), text: "7:00".into(), clickable: false },
                UiElement { id: 3, class: "Button".into(), text: "Add".into(), clickable: true },
            ],
        }
    }

    #[test]
    fn parses_and_checks_actions() {
        let s = screen();
        let tap = UiAction { action: UiActionKind::Tap, id: Some(3), text: None };
        assert_eq!(parse_action(&s, r#"{"action": "tap", "id": 3}"#), Ok(tap.clone()));
        assert_eq!(parse_action(&s, "Sure!\n```json\n{\"action\": \"tap\", \"id\": 3}\n```"), Ok(tap));
        assert_eq!(parse_action(&s, r#"{"action": "tap", "id": 7}"#), Err(ActionError::UnknownElement(7)));
        assert_eq!(parse_action(&s, r#"{"action": "type", "id": 3}"#), Err(ActionError::BadText));
        assert_eq!(parse_action(&s, r#"{"action": "tap", "id": 0}"#), Err(ActionError::NotClickable(0)));
        let extra = parse_action(&s, r#"{"action": "tap", "id": 3, "text": "Add"}"#);
        assert_eq!(extra, Err(ActionError::UnexpectedField(UiActionKind::Tap, "text")));
        assert!(matches!(
            parse_action(&s, r#"{"action": "tap", "type": "x", "id": 3}"#),
            Err(ActionError::NotAnAction(_))
        ));
        assert_eq!(parse_action(&s, r#"{"action": "scroll"}"#), Err(ActionError::MissingId(UiActionKind::Scroll)));
        assert!(matches!(parse_action(&s, r#"{"action": "swipe", "id": 3}"#), Err(ActionError::NotAnAction(_))));
        assert_eq!(parse_action(&s, "tap the button"), Err(ActionError::NoJson));
        assert!(parse_action(&s, r#"{"action": "back"}"#).is_ok());
    }

    #[test]
    fn schema_lists_only_this_screens_ids() {
        let schema = action_schema(&screen());
        let variants = schema["anyOf"].as_array().expect("anyOf");
        assert_eq!(variants[0]["properties"]["id"]["enum"], serde_json::json!([3]), "tap: clickable only");
        assert_eq!(variants[1]["properties"]["id"]["enum"], serde_json::json!([0, 3]));
        assert_eq!(variants.len(), 4);
    }
}
