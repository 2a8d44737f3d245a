//! UI actions across the boundary: a screen (its elements) and a goal in, the next action out,
//! constrained to that screen (`Session::next_action`), and the checks an app runs on actions
//! from elsewhere. See `tern::ui`.

use crate::error::TernError;

/// What is on the screen.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Screen {
    /// The app's name, as the model sees it.
    pub app: String,
    pub elements: Vec<UiElement>,
}

/// One element of a screen.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct UiElement {
    /// Unique on its screen; actions name elements by it.
    pub id: u32,
    /// The widget's class (`Button`, `EditText`, ...); `class` in the prompt's JSON.
    pub class_name: String,
    #[uniffi(default = "")]
    pub text: String,
    #[uniffi(default = false)]
    pub clickable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum UiActionKind {
    Tap,
    Type,
    Scroll,
    Back,
}

/// The next action: `id` for everything but `Back`, `text` for `Type` only.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct UiAction {
    pub action: UiActionKind,
    #[uniffi(default = None)]
    pub id: Option<u32>,
    #[uniffi(default = None)]
    pub text: Option<String>,
}

impl From<Screen> for tern::ui::Screen {
    fn from(s: Screen) -> Self {
        let elements = s
            .elements
            .into_iter()
            .map(|e| tern::ui::UiElement { id: e.id, class: e.class_name, text: e.text, clickable: e.clickable })
            .collect();
        tern::ui::Screen { app: s.app, elements }
    }
}

impl From<tern::ui::Screen> for Screen {
    fn from(s: tern::ui::Screen) -> Self {
        let elements = s
            .elements
            .into_iter()
            .map(|e| UiElement { id: e.id, class_name: e.class, text: e.text, clickable: e.clickable })
            .collect();
        Screen { app: s.app, elements }
    }
}

impl From<tern::ui::UiActionKind> for UiActionKind {
    fn from(k: tern::ui::UiActionKind) -> Self {
        match k {
            tern::ui::UiActionKind::Tap => UiActionKind::Tap,
            tern::ui::UiActionKind::Type => UiActionKind::Type,
            tern::ui::UiActionKind::Scroll => UiActionKind::Scroll,
            tern::ui::UiActionKind::Back => UiActionKind::Back,
        }
    }
}

impl From<UiActionKind> for tern::ui::UiActionKind {
    fn from(k: UiActionKind) -> Self {
        match k {
            UiActionKind::Tap => tern::ui::UiActionKind::Tap,
            UiActionKind::Type => tern::ui::UiActionKind::Type,
            UiActionKind::Scroll => tern::ui::UiActionKind::Scroll,
            UiActionKind::Back => tern::ui::UiActionKind::Back,
        }
    }
}

impl From<tern::ui::UiAction> for UiAction {
    fn from(a: tern::ui::UiAction) -> Self {
        UiAction { action: a.action.into(), id: a.id, text: a.text }
    }
}

impl From<UiAction> for tern::ui::UiAction {
    fn from(a: UiAction) -> Self {
        tern::ui::UiAction { action: a.action.into(), id: a.id, text: a.text }
    }
}

/// The system prompt UI-action sessions should have (the `ui` workloads' instructions).
#[uniffi::export]
pub fn ui_system_prompt() -> String {
    tern::ui::SYSTEM_PROMPT.to_owned()
}

/// Reads a screen written as JSON (`{"app": ..., "elements": [{"id", "class", "text",
/// "clickable"}]}`, the form of the `ui` workloads).
#[uniffi::export]
pub fn screen_from_json(json: String) -> Result<Screen, TernError> {
    let screen: tern::ui::Screen = serde_json::from_str(&json).map_err(|e| TernError::InvalidOption {
        // The parser's message may quote the screen's text: give the place only.
        detail: format!("not a screen at line {} column {}: {:?} error", e.line(), e.column(), e.classify()),
    })?;
    Ok(screen.into())
}

/// The JSON Schema of an action on `screen` (ids restricted to its elements), as JSON text.
#[uniffi::export]
pub fn ui_action_schema(screen: Screen) -> String {
    tern::ui::action_schema(&screen.into()).to_string()
}

/// Reads the first JSON object in `text` and checks it is a valid action on `screen`
/// (`InvalidAction` otherwise): for actions a model wrote without the constraint.
#[uniffi::export]
pub fn parse_ui_action(screen: Screen, text: String) -> Result<UiAction, TernError> {
    Ok(tern::ui::parse_action(&screen.into(), &text)?.into())
}

/// Checks that `action` can be performed on `screen`: an element that is there (clickable for
/// `Tap`), text of 1 to 200 characters for `Type` only. `InvalidAction` says what is wrong.
#[uniffi::export]
pub fn validate_ui_action(screen: Screen, action: UiAction) -> Result<(), TernError> {
    Ok(tern::ui::validate(&screen.into(), &action.into())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen() -> Screen {
        screen_from_json(
            r#"{"app": "Clock", "elements": [
                {"id": 0, "class": "TextView", "text": "7:00", "clickable": false},
                {"id": 3, "class": "Button", "text": "Add alarm", "clickable": true}]}"#
                .into(),
        )
        .expect("a screen")
    }

    #[test]
    fn actions_are_checked_against_the_screen() {
        let tap = UiAction { action: UiActionKind::Tap, id: Some(3), text: None };
        assert_eq!(parse_ui_action(screen(), r#"Sure: {"action": "tap", "id": 3}"#.into()).ok(), Some(tap.clone()));
        assert!(validate_ui_action(screen(), tap).is_ok());
        let unknown = UiAction { action: UiActionKind::Tap, id: Some(9), text: None };
        let err = validate_ui_action(screen(), unknown).unwrap_err();
        assert!(matches!(&err, TernError::InvalidAction { detail } if detail.contains('9')), "{err:?}");
        assert!(ui_action_schema(screen()).contains(r#""enum":[3]"#));
    }

    #[test]
    fn errors_do_not_quote_the_text() {
        let err = parse_ui_action(screen(), r#"{"action": "secret-word", "id": 3}"#.into()).unwrap_err();
        assert!(matches!(err, TernError::InvalidAction { .. }));
        assert!(!err.to_string().contains("secret"), "{err}");
        let err = screen_from_json(r#"{"app": "secret-app"}"#.into()).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
