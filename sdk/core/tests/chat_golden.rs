//! Chat templates against the reference renderings: every chat case of the
//! SmolLM2 and Qwen reference files renders byte for byte; Gemma 3 (no template
//! in its GGUF) gets the built-in Gemma turn format.

mod common;

use common::*;
use tern::chat::{ChatTemplate, FallbackKind, Message, Role};
use tern::gguf::GgufFile;
use tern::Error;

fn template_of(file: &str) -> ChatTemplate {
    let gguf = GgufFile::open(model_path(file)).expect("model opens");
    ChatTemplate::from_gguf(&gguf).expect("template compiles")
}

fn check_golden(file: &str) {
    let template = template_of(file);
    assert_eq!(template.fallback_kind(), None, "{file} carries its own template");
    let g = golden(file);
    let cases = g["chat"].as_array().expect("chat cases");
    assert!(!cases.is_empty(), "{file} has chat cases");
    for (i, case) in cases.iter().enumerate() {
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).expect("messages parse");
        let expected = case["rendered"].as_str().expect("rendered text");
        let rendered = template.render(&messages, true).expect("renders");
        assert_eq!(rendered, expected, "{file} chat case {i}");
    }
}

#[test]
fn smollm2_matches_reference() {
    check_golden(SMOLLM2);
}

#[test]
fn qwen2_matches_reference() {
    check_golden(QWEN2);
}

#[test]
fn chatml_models_close_turns_with_im_end() {
    for file in [SMOLLM2, QWEN2] {
        let t = template_of(file);
        assert_eq!(t.assistant_turn_suffix(), Some("<|im_end|>\n"), "{file}");
        assert_eq!(t.assistant_stop_text(), Some("<|im_end|>"), "{file}");
    }
}

#[test]
fn model_template_renders_without_generation_prompt() {
    let t = template_of(QWEN2);
    let msgs = [Message::user("Hi!"), Message::assistant("Hello!")];
    let text = t.render(&msgs, false).expect("renders");
    assert!(text.ends_with("<|im_start|>assistant\nHello!<|im_end|>\n"), "{text:?}");
    // Qwen's template also handles tool results.
    let msgs = [Message::user("2+2?"), Message::new(Role::Tool, "4")];
    let text = t.render(&msgs, true).expect("renders");
    assert!(text.contains("<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n"), "{text:?}");
}

#[test]
fn gemma3_uses_gemma_turn_fallback() {
    let gguf = GgufFile::open(model_path(GEMMA3)).expect("model opens");
    assert!(gguf.get("tokenizer.chat_template").is_none(), "premise: the Gemma 3 base GGUF has no template");
    let t = ChatTemplate::from_gguf(&gguf).expect("fallback");
    assert_eq!(t.fallback_kind(), Some(FallbackKind::Gemma));
    assert_eq!(t.bos_token(), "<bos>");
    assert_eq!(t.eos_token(), "<eos>");

    let one = t.render(&[Message::user("What is the capital of France?")], true).expect("renders");
    assert_eq!(one, "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n");

    let convo = [
        Message::system("Be brief."),
        Message::user("Hi!"),
        Message::assistant("Hello! How can I help?"),
        Message::user("Tell me a fun fact about owls."),
    ];
    assert_eq!(
        t.render(&convo, true).expect("renders"),
        "<start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n\
         <start_of_turn>model\nHello! How can I help?<end_of_turn>\n\
         <start_of_turn>user\nTell me a fun fact about owls.<end_of_turn>\n\
         <start_of_turn>model\n"
    );
    assert_eq!(t.assistant_turn_suffix(), Some("<end_of_turn>\n"));
    assert_eq!(t.assistant_stop_text(), Some("<end_of_turn>"));
}

#[test]
fn broken_template_is_a_template_error() {
    let err = ChatTemplate::new("{% for m in messages %}{{ m.content }", "<s>", "</s>").unwrap_err();
    assert!(matches!(err, Error::Template(_)), "{err:?}");
    let err = ChatTemplate::new("{% if messages %}never closed", "<s>", "</s>").unwrap_err();
    assert!(matches!(err, Error::Template(_)), "{err:?}");
}

#[test]
fn raise_exception_surfaces_its_message() {
    let src = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation must start with a user message') }}{% endif %}ok";
    let t = ChatTemplate::new(src, "<s>", "</s>").expect("compiles");
    assert_eq!(t.render(&[Message::user("x")], true).expect("renders"), "ok");
    match t.render(&[Message::assistant("x")], true) {
        Err(Error::Template(msg)) => assert!(msg.contains("Conversation must start with a user message"), "{msg}"),
        other => panic!("expected a template error, got {other:?}"),
    }
}
