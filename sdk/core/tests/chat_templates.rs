//! The chat templates of current model families (`templates/*.jinja`, as their models ship them)
//! render byte for byte as Hugging Face `apply_chat_template` renders them:
//! `templates/expected.json` holds Jinja2's renderings in transformers' environment, made by
//! `templates/render_expected.py`, for conversations with and without a system message,
//! several turns, generation prompts, tools, tool results and thinking switches, at a fixed
//! `strftime_now` time.

use std::path::PathBuf;

use serde_json::Value;
use tern::chat::{ChatTemplate, Message, RenderOptions};

fn templates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/templates")
}

fn expected() -> Vec<Value> {
    let path = templates_dir().join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Value>(&text).expect("expected.json parses").as_array().expect("an array").clone()
}

#[test]
fn every_template_renders_as_transformers_does() {
    let cases = expected();
    let mut failures = Vec::new();
    let mut templates = std::collections::BTreeSet::new();
    for case in &cases {
        let file = case["template"].as_str().expect("template name");
        let name = case["case"].as_str().expect("case name");
        templates.insert(file);
        let source = std::fs::read_to_string(templates_dir().join(file)).expect("template file");
        let bos = case["bos_token"].as_str().expect("bos");
        let eos = case["eos_token"].as_str().expect("eos");
        let template = ChatTemplate::new(&source, bos, eos).unwrap_or_else(|e| panic!("{file} compiles: {e}"));
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).expect("messages parse");
        let tools = (!case["tools"].is_null()).then_some(&case["tools"]);
        let opts = RenderOptions {
            add_generation_prompt: case["add_generation_prompt"].as_bool().expect("flag"),
            tools,
            variables: case["variables"].as_object(),
            now: case["now"].as_i64(),
        };
        let got = template.render_with(&messages, &opts);
        match (&got, case["rendered"].as_str()) {
            (Ok(got), Some(want)) if got == want => {}
            (Err(_), None) => {}
            (got, want) => failures.push(format!("{file} / {name}:\n   got  {got:?}\n   want {want:?}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} renderings differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert_eq!(templates.len(), 8, "all eight templates are covered");
}
