//! Structured output on the real models: answers under a JSON Schema, a Lark grammar or a regex
//! always match it; the `ui` workload cases give valid actions on both chat models; tool calls
//! parse and match their tool; grammars that cannot be used fail before generation.
#![cfg(feature = "structured")]

mod common;

use std::sync::{Arc, OnceLock};

use common::*;
use tern::ui::{self, Screen};
use tern::{
    Engine, EngineOptions, Error, Event, FinishReason, Grammar, Message, Role, Session, SessionOptions, Stats, Tool,
    ToolChoice,
};

/// One compute thread per engine: the tests run side by side on a small machine.
fn load(file: &str) -> Arc<Engine> {
    Engine::load(model_path(file), EngineOptions { threads: Some(1), ..Default::default() }).expect("load")
}

fn smollm2() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| load(SMOLLM2)).clone()
}

fn qwen() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| load(QWEN2)).clone()
}

/// Runs a generation to the end: (text of each token event, stats).
fn collect(gen: impl Iterator<Item = tern::Result<Event>>) -> (Vec<String>, Stats) {
    let (mut pieces, mut stats) = (Vec::new(), None);
    for ev in gen {
        match ev.expect("event") {
            Event::Token { text, .. } => pieces.push(text),
            Event::Done(s) => stats = Some(s),
        }
    }
    (pieces, stats.expect("Done ends every generation"))
}

fn session(engine: Arc<Engine>, system: Option<&str>, max_tokens: usize) -> Session {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        system_prompt: system.map(str::to_owned),
        max_tokens,
        ..Default::default()
    };
    Session::new(engine, opts).expect("session")
}

/// A `ui` case of the dev workloads: its messages, screen and goal.
struct UiCase {
    id: String,
    messages: Vec<Message>,
    screen: Screen,
    goal: String,
}

fn ui_cases() -> Vec<UiCase> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/dev-ui.jsonl");
    let text = std::fs::read_to_string(&path).expect("workload file");
    text.lines()
        .map(|line| {
            let case: serde_json::Value = serde_json::from_str(line).expect("case JSON");
            let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).expect("messages");
            let user = &messages[1].content;
            let (screen, goal) =
                user.strip_prefix("Screen:\n").and_then(|rest| rest.split_once("\n\nGoal: ")).expect("screen and goal");
            UiCase {
                id: case["id"].as_str().expect("id").to_owned(),
                screen: serde_json::from_str(screen).expect("screen JSON"),
                goal: goal.to_owned(),
                messages,
            }
        })
        .collect()
}

/// Every `ui` case, constrained by the helper's schema: the whole answer is one JSON action
/// that validates and names an element of that screen, and the grammar ended the answer.
fn ui_cases_give_valid_actions(engine: Arc<Engine>) {
    let cases = ui_cases();
    assert_eq!(cases.len(), 6);
    for case in cases {
        assert_eq!(ui::messages(&case.screen, &case.goal), case.messages, "{}: the helper's prompt", case.id);
        let mut s = session(engine.clone(), Some(ui::SYSTEM_PROMPT), 96);
        s.set_grammar(Some(&ui::action_grammar(&case.screen))).expect("schema compiles");
        let (pieces, stats) = collect(s.send(&ui::user_message(&case.screen, &case.goal)).expect("send"));
        let text: String = pieces.concat();
        let action = ui::parse_action(&case.screen, &text).unwrap_or_else(|e| panic!("{}: {e}: {text}", case.id));
        let whole: ui::UiAction = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", case.id));
        assert_eq!(whole, action, "{}: nothing but the action", case.id);
        assert_eq!(stats.finish_reason, FinishReason::EndOfGeneration, "{}: {text}", case.id);
        assert!(stats.constraint_time > std::time::Duration::ZERO);
    }
}

#[test]
fn ui_cases_smollm2() {
    ui_cases_give_valid_actions(smollm2());
}

#[test]
fn ui_cases_qwen() {
    ui_cases_give_valid_actions(qwen());
}

#[test]
fn json_schema_answer_streams_and_validates() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "languages": {"type": "array", "items": {"enum": ["en", "fr", "de", "es"]}, "minItems": 1, "maxItems": 3},
        },
        "required": ["name", "age", "languages"],
        "additionalProperties": false,
    });
    let mut s = session(smollm2(), None, 80);
    s.set_grammar(Some(&Grammar::json_schema(&schema))).expect("compiles");
    let (pieces, stats) = collect(s.send("Describe a person who speaks French, as JSON.").expect("send"));
    let text = pieces.concat();
    // Streamed as generated: token by token, and the pieces add up to the stored answer.
    assert!(pieces.len() > 5, "{pieces:?}");
    assert_eq!(s.messages().last().map(|m| m.content.as_str()), Some(text.as_str()));
    assert_eq!(stats.finish_reason, FinishReason::EndOfGeneration, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let obj = v.as_object().expect("object");
    assert_eq!(obj.len(), 3, "{text}");
    assert!(obj["name"].as_str().is_some_and(|n| n.chars().count() <= 20), "{text}");
    assert!(obj["age"].as_u64().is_some_and(|a| a <= 120), "{text}");
    let langs = obj["languages"].as_array().expect("array");
    assert!((1..=3).contains(&langs.len()), "{text}");
    assert!(langs.iter().all(|l| ["en", "fr", "de", "es"].contains(&l.as_str().unwrap_or(""))), "{text}");
}

#[test]
fn regex_and_lark_answers_match() {
    let mut s = session(smollm2(), None, 16);
    s.set_grammar(Some(&Grammar::Regex("(yes|no)".into()))).expect("compiles");
    let (pieces, stats) = collect(s.send("Is Paris in France? Answer yes or no.").expect("send"));
    let text = pieces.concat();
    assert!(text == "yes" || text == "no", "{text:?}");
    assert_eq!(stats.finish_reason, FinishReason::EndOfGeneration);

    let lark = "start: \"The answer is \" NUM \".\"\nNUM: /[0-9]{1,3}/\n";
    s.set_grammar(Some(&Grammar::Lark(lark.into()))).expect("compiles");
    let (pieces, _) = collect(s.send("What is 6 times 7?").expect("send"));
    let text = pieces.concat();
    let num =
        text.strip_prefix("The answer is ").and_then(|t| t.strip_suffix('.')).unwrap_or_else(|| panic!("{text:?}"));
    assert!((1..=3).contains(&num.len()) && num.bytes().all(|b| b.is_ascii_digit()), "{text:?}");

    // Lifting the grammar gives free text again.
    s.set_grammar(None).expect("lift");
    s.reset();
    let (pieces, _) = collect(s.send("Say hello.").expect("send"));
    assert!(!pieces.concat().is_empty());
}

#[test]
fn unusable_grammars_fail_before_generation() {
    let mut s = session(smollm2(), None, 8);
    let bad = [
        Grammar::JsonSchema("{not json".into()),
        Grammar::JsonSchema(r#"{"type": "integer", "minimum": 5, "maximum": 1}"#.into()),
        Grammar::JsonSchema(r#"{"type": "banana"}"#.into()),
        Grammar::JsonSchema(r##"{"$ref": "#/$defs/missing"}"##.into()),
        Grammar::Lark("start: undefined_rule\n".into()),
        Grammar::Regex("(unclosed".into()),
    ];
    for g in &bad {
        match s.set_grammar(Some(g)) {
            Err(Error::Grammar(msg)) => assert!(!msg.is_empty()),
            other => panic!("{g:?}: expected a grammar error, got {other:?}"),
        }
    }
    // The session is untouched: nothing was generated, free text still works.
    assert_eq!(s.tokens_in_context(), 0);
    let (pieces, _) = collect(s.send("Hi").expect("send"));
    assert!(!pieces.concat().is_empty());

    let tool =
        |name: &str, params: &str| Tool { name: name.into(), description: String::new(), parameters: params.into() };
    for tools in [vec![tool("bad name", "{}")], vec![tool("f", "[]")], vec![tool("f", "{}"), tool("f", "{}")]] {
        assert!(matches!(s.set_tools(&tools, ToolChoice::Auto), Err(Error::Grammar(_))), "{tools:?}");
    }
}

fn weather_tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: "Current weather in a city".into(),
        parameters: r#"{"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}"#.into(),
    }
}

fn time_tool() -> Tool {
    Tool {
        name: "get_time".into(),
        description: "Current time in a time zone".into(),
        parameters:
            r#"{"type": "object", "properties": {"zone": {"type": "string", "maxLength": 40}}, "required": ["zone"]}"#
                .into(),
    }
}

/// The model calls a tool: the call is a typed value matching the tool's schema, its text is not
/// streamed, and the tool's result leads to a text answer.
fn tool_round_trip(engine: Arc<Engine>) {
    let mut s = session(engine, None, 64);
    s.set_tools(&[weather_tool(), time_tool()], ToolChoice::Required).expect("tools");
    let (pieces, stats) = collect(s.send("What's the weather like in Paris right now?").expect("send"));
    let written = s.messages().last().map(|m| m.content.clone()).unwrap_or_default();
    assert_eq!(pieces.concat(), "", "the call is not streamed as text");
    assert_eq!(stats.finish_reason, FinishReason::EndOfGeneration, "{written}");
    let call = s.tool_call().expect("a tool call").clone();
    let args: serde_json::Value = serde_json::from_str(&call.arguments).expect("arguments are JSON");
    match call.name.as_str() {
        "get_weather" => assert!(args["city"].is_string(), "{args}"),
        "get_time" => assert!(args["zone"].is_string(), "{args}"),
        other => panic!("unknown tool {other}"),
    }
    // The call stays in the conversation as the model wrote it.
    let last = s.messages().last().expect("assistant turn");
    assert_eq!(last.role, Role::Assistant);
    assert!(last.content.starts_with("<tool_call>\n{\"name\": \""), "{}", last.content);

    s.set_tools(&[weather_tool(), time_tool()], ToolChoice::Auto).expect("tools");
    let (pieces, stats) = collect(s.send_tool_result(r#"{"temperature": 18, "sky": "cloudy"}"#).expect("result"));
    assert!(stats.generated_tokens > 0);
    match s.tool_call() {
        // A text answer starts with anything but `<`.
        None => assert!(!pieces.concat().starts_with('<'), "{:?}", pieces.concat()),
        Some(c) => assert!(c.name == "get_weather" || c.name == "get_time"),
    }
    assert_eq!(s.messages().iter().filter(|m| m.role == Role::Tool).count(), 1);
}

#[test]
fn tool_calls_qwen_native_format() {
    tool_round_trip(qwen());
}

#[test]
fn tool_calls_smollm2_fallback_format() {
    tool_round_trip(smollm2());
}

#[test]
fn qwen_template_renders_tool_definitions() {
    let engine = qwen();
    let t = engine.chat_template();
    assert_eq!(t.tool_format(), tern::chat::ToolFormat::ToolCallTags);
    let tools = serde_json::json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
    }}]);
    let text = t.render_with_tools(&[Message::user("Hi")], true, Some(&tools)).expect("renders");
    let want =
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n\
        You may call one or more functions to assist with the user query.\n\nYou are provided with function signatures \
        within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \
        \"description\": \"Weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \
        \"string\"}}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments \
        within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": \
        <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(text, want);
    assert_eq!(smollm2().chat_template().tool_format(), tern::chat::ToolFormat::None);
}

/// Gemma's SentencePiece vocabulary (byte tokens, `▁` for spaces, 262 k entries) under a grammar.
#[test]
fn gemma_follows_a_grammar() {
    let engine = load(GEMMA3);
    let mut s = session(engine, None, 12);
    s.set_grammar(Some(&Grammar::Regex("(Yes|No), [a-z ]{1,20}\\.".into()))).expect("compiles");
    let (pieces, _) = collect(s.send("Is water wet?").expect("send"));
    let text = pieces.concat();
    let (word, rest) = text.split_once(", ").unwrap_or_else(|| panic!("{text:?}"));
    assert!(word == "Yes" || word == "No", "{text:?}");
    assert!(rest.chars().all(|c| c.is_ascii_lowercase() || c == ' ' || c == '.'), "{text:?}");
}

/// The app's own type, its schema derived (through the `schemars` Tern re-exports).
#[derive(Debug, serde::Deserialize, tern::schemars::JsonSchema)]
#[schemars(crate = "tern::schemars")]
struct Capital {
    country: String,
    city: String,
    population_millions: f32,
}

#[test]
fn typed_answers_come_back_as_the_apps_type() {
    let mut s = session(qwen(), None, 64);
    let capital: Capital = s.generate("What is the capital of France?").expect("a Capital");
    assert_eq!(capital.city, "Paris", "{capital:?}");
    assert_eq!(capital.country, "France", "{capital:?}");
    assert!(capital.population_millions > 0.0, "{capital:?}");
    // Question and answer joined the conversation, which goes on.
    assert_eq!(s.messages().len(), 2);
    let (pieces, _) = collect(s.send("And of Italy?").expect("send"));
    assert!(pieces.concat().contains("Rome"), "{:?}", pieces.concat());
    assert_eq!(s.messages().len(), 4);

    // Cut off by max_tokens: a typed error, not a half value.
    let mut short = session(qwen(), None, 4);
    assert!(matches!(short.generate::<Capital>("What is the capital of Spain?"), Err(Error::Constraint(_))));
    // A schema that cannot be used fails before anything is sent.
    let before = s.messages().len();
    assert!(matches!(s.generate_json("Hi", "{\"type\": 7}"), Err(Error::Grammar(_))));
    assert_eq!(s.messages().len(), before);
}

/// The loop runs the handler for each call and sends its result back, and ends in text after
/// at most `max_calls` calls. (Qwen2.5-Coder-0.5B calls the tool again after every result
/// rather than reading it, so the bound is what ends this loop.)
#[test]
fn tool_loop_runs_the_handler_and_ends_in_text() {
    let mut s = session(qwen(), None, 64);
    s.set_tools(&[weather_tool(), time_tool()], ToolChoice::Auto).expect("tools");
    let mut seen = Vec::new();
    let result = r#"{"temperature_c": 23, "sky": "sunny"}"#;
    let answer = s
        .send_with_tools("What's the weather like in Paris right now?", 2, |call| {
            seen.push(call.clone());
            result.to_owned()
        })
        .expect("answer");
    assert_eq!(seen.len(), 2, "{:?}", answer.text);
    assert_eq!(answer.calls.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>(), seen);
    for call in &seen {
        assert_eq!(call.name, "get_weather");
        let args: serde_json::Value = serde_json::from_str(&call.arguments).expect("JSON arguments");
        assert_eq!(args["city"], "Paris", "{args}");
    }
    // Each result answered its call in the conversation, calls kept in the tagged form.
    let roles: Vec<Role> = s.messages().iter().map(|m| m.role).collect();
    use Role::{Assistant as A, Tool as T, User as U};
    assert_eq!(roles, [U, A, T, A, T, A]);
    assert!(s.messages().iter().filter(|m| m.role == T).all(|m| m.content == result));
    assert!(
        s.messages()[1].content.starts_with("<tool_call>\n{\"name\": \"get_weather\""),
        "{}",
        s.messages()[1].content
    );
    let text = &answer.text;
    assert!(!text.is_empty() && !text.starts_with(['<', '{']) && s.tool_call().is_none(), "{text:?}");
    assert_eq!(s.messages().last().map(|m| m.content.as_str()), Some(text.as_str()));

    // Without tools there is no loop to run.
    let mut plain = session(qwen(), None, 8);
    assert!(matches!(plain.send_with_tools("Hi", 2, |_| String::new()), Err(Error::InvalidOption(_))));
}
