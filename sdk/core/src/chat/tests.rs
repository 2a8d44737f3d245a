//! Expected strings come from Jinja2 3.1 configured as transformers'
//! `apply_chat_template` configures it.

use super::*;

const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn msgs() -> Vec<Message> {
    vec![Message::system("  Be nice.  "), Message::user("Hi <b> & 'ü' 🦀")]
}

fn render(src: &str) -> String {
    let t = ChatTemplate::new(src, "<s>", "</s>").expect("compiles");
    t.render(&msgs(), true).expect("renders")
}

#[test]
fn chatml_renders_and_finds_turn_suffix() {
    let t = ChatTemplate::new(CHATML, "<|im_start|>", "<|im_end|>").expect("compiles");
    let convo = [Message::user("Hi!"), Message::assistant("Hello."), Message::user("Bye")];
    assert_eq!(
        t.render(&convo, true).expect("renders"),
        "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        t.render(&convo[..2], false).expect("renders"),
        "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
    );
    assert_eq!(t.assistant_turn_suffix(), Some("<|im_end|>\n"));
    assert_eq!(t.assistant_stop_text(), Some("<|im_end|>"));
    assert_eq!(t.render(&[], true).expect("renders"), "<|im_start|>assistant\n");
    assert_eq!(t.fallback_kind(), None);
}

#[test]
fn bos_and_eos_are_visible() {
    let t = ChatTemplate::new(
        "{{ bos_token }}{% for m in messages %}{{ m.content + eos_token }}{% endfor %}",
        "<s>",
        "</s>",
    )
    .expect("compiles");
    assert_eq!(t.render(&[Message::user("a"), Message::assistant("b")], false).expect("renders"), "<s>a</s>b</s>");
    assert_eq!(t.assistant_turn_suffix(), Some("</s>"));
    assert_eq!(t.bos_token(), "<s>");
    assert_eq!(t.eos_token(), "</s>");
}

#[test]
fn whitespace_control_matches_hf() {
    let blocks =
        "{% for m in messages %}\n    {% if m.role == 'user' %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}\n";
    assert_eq!(render(blocks), "Hi <b> & 'ü' 🦀\n");
    assert_eq!(render("x\n"), "x");
    assert_eq!(render("x\n\n"), "x\n");
}

#[test]
fn tojson_is_python_json_dumps() {
    assert_eq!(
        render(
            "{{ messages[1] | tojson }}|{{ {'a': 'x\"y\\n', 'b': [1, 2.5, none, true]} | tojson }}|{{ [] | tojson }}"
        ),
        "{\"role\": \"user\", \"content\": \"Hi <b> & 'ü' 🦀\"}|{\"a\": \"x\\\"y\\n\", \"b\": [1, 2.5, null, true]}|[]"
    );
    assert_eq!(
        render("{{ {'a': [1, {'c': {}}], 'b': 'é'} | tojson(indent=2) }}"),
        "{\n  \"a\": [\n    1,\n    {\n      \"c\": {}\n    }\n  ],\n  \"b\": \"é\"\n}"
    );
    assert_eq!(render("{{ 'é🦀<' | tojson(ensure_ascii=True) }}"), "\"\\u00e9\\ud83e\\udd80<\"");
    assert_eq!(
        render("{{ {'b': 1, 'a': [1,2]} | tojson(separators=(',', ':'), sort_keys=True) }}"),
        "{\"a\":[1,2],\"b\":1}"
    );
    assert!(ChatTemplate::new("{{ x | tojson }}", "", "").expect("compiles").render(&[], false).is_err());
}

#[test]
fn values_print_as_python() {
    assert_eq!(
        render("{{ none }}|{{ true }}|{{ false }}|{{ [1, 'a', none, \"it's\"] }}|{{ {'k': 1.5} }}|{{ 1e-05 }}|{{ 1e20 }}|{{ 2.0 }}|{{ 0.1 + 0.2 }}"),
        "None|True|False|[1, 'a', None, \"it's\"]|{'k': 1.5}|1e-05|1e+20|2.0|0.30000000000000004"
    );
    // Unset variables still print as nothing.
    assert_eq!(render("[{{ nothing }}]"), "[]");
}

#[test]
fn python_string_methods() {
    assert_eq!(
        render("[{{ messages[0].content.strip() }}][{{ messages[0].content.lstrip() }}][{{ messages[0].content.rstrip() }}][{{ 'xxhixx'.strip('x') }}]"),
        "[Be nice.][Be nice.  ][  Be nice.][hi]"
    );
    assert_eq!(
        render("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x','lo')) }}{{ 'hello'.startswith('lo') }}"),
        "TrueTrueFalse"
    );
    assert_eq!(
        render("{{ ' a  b c '.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}{{ ' a  b c '.split(none, 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ' a  b c '.rsplit(none, 1) }}{{ 'l1\nl2\n'.splitlines() }}"),
        "['a', 'b', 'c']['a', 'b', '', 'c']['a', 'b,c']['a', 'b c ']['a,b', 'c'][' a  b', 'c']['l1', 'l2']"
    );
    assert_eq!(
        render("{{ 'Hi There'.upper() }}{{ 'Hi There'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'aaa'.replace('a','b',2) }}{{ 'abcabc'.find('c') }}{{ 'abcabc'.rfind('c') }}{{ 'abcabc'.count('bc') }}{{ '-'.join(['a','b']) }}{{ '123'.isdigit() }}{{ 'ab1'.isalpha() }}"),
        "HI THEREhi thereHello WorldHellobba252a-bTrueFalse"
    );
    assert_eq!(render("{{ 'a b'.split(maxsplit=0) }}"), "['a b']");
    // Python's line boundaries: "\r\n" once, "\r", "\x0b", U+2028; no empty last line.
    assert_eq!(render("{{ 'a\r\nb\rc\x0bd\u{2028}e\n'.splitlines() }}"), "['a', 'b', 'c', 'd', 'e']");
}

#[test]
fn python_dict_methods() {
    assert_eq!(
        render("{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}{{ messages[0].keys() | list }}{{ messages[0].get('role') }}{{ messages[0].get('nope') }}{{ messages[0].get('nope', 'dflt') }}"),
        "role=system;content=  Be nice.  ;['role', 'content']systemNonedflt"
    );
    assert_eq!(render("{{ messages[1].values() | list }}"), "['user', \"Hi <b> & 'ü' 🦀\"]");
}

#[test]
fn unknown_method_is_a_template_error() {
    let t = ChatTemplate::new("{{ messages[0].content.frobnicate() }}", "", "").expect("compiles");
    assert!(matches!(t.render(&msgs(), false), Err(Error::Template(_))));
}

#[test]
fn tools_and_documents_are_none() {
    assert_eq!(render("{% if tools is not none %}T{% else %}N{% endif %}{% if tools %}t{% endif %}"), "N");
    assert_eq!(render("{{ documents is none }}"), "True");
}

#[test]
fn raise_exception_and_syntax_errors() {
    let t = ChatTemplate::new("{{ raise_exception('roles must alternate') }}", "", "").expect("compiles");
    match t.render(&msgs(), true) {
        Err(Error::Template(msg)) => assert!(msg.contains("roles must alternate"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // A template that rejects the probe still compiles; it just has no known suffix.
    assert_eq!(t.assistant_turn_suffix(), None);
    assert!(matches!(ChatTemplate::new("{{ unclosed", "", ""), Err(Error::Template(_))));
    assert!(matches!(ChatTemplate::new("{% endfor %}", "", ""), Err(Error::Template(_))));
}

#[test]
fn runaway_output_is_capped() {
    let mut t = ChatTemplate::new(
        "{% for i in range(100000) %}{% for j in range(100) %}0123456789{% endfor %}{% endfor %}",
        "",
        "",
    )
    .expect("compiles");
    // The output cap is what must stop it; under emulation (qemu) the render is slow enough
    // for the default 2 s time limit to come first.
    t.set_limits(TemplateLimits { time: std::time::Duration::from_secs(600), ..TemplateLimits::default() });
    match t.render(&[], false) {
        Err(Error::Template(msg)) => assert!(msg.contains("exceeds"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn suffix_is_none_when_assistant_text_is_not_rendered() {
    let t = ChatTemplate::new("{% for m in messages if m.role == 'user' %}{{ m.content }}{% endfor %}", "", "")
        .expect("compiles");
    assert_eq!(t.assistant_turn_suffix(), None);
    assert_eq!(t.assistant_stop_text(), None);
}

#[test]
fn strftime_formats_utc() {
    let f = "%Y-%m-%d %H:%M:%S|%a %A|%b %B %h|%j|%-d %e|%I %p|%y|%F %T|%%|%Q";
    assert_eq!(
        strftime::format_unix(f, 0),
        "1970-01-01 00:00:00|Thu Thursday|Jan January Jan|001|1  1|12 AM|70|1970-01-01 00:00:00|%|%Q"
    );
    assert_eq!(
        strftime::format_unix(f, 1_709_251_199),
        "2024-02-29 23:59:59|Thu Thursday|Feb February Feb|060|29 29|11 PM|24|2024-02-29 23:59:59|%|%Q"
    );
    assert_eq!(
        strftime::format_unix(f, 1_735_732_800),
        "2025-01-01 12:00:00|Wed Wednesday|Jan January Jan|001|1  1|12 PM|25|2025-01-01 12:00:00|%|%Q"
    );
    assert_eq!(
        strftime::format_unix(f, 951_782_400),
        "2000-02-29 00:00:00|Tue Tuesday|Feb February Feb|060|29 29|12 AM|00|2000-02-29 00:00:00|%|%Q"
    );
    let year: i64 = render("{{ strftime_now('%Y') }}").parse().expect("a year");
    assert!(year >= 2024, "{year}");
}

#[test]
fn strftime_now_renders_local_time() {
    // 2024-02-29 23:59:59 UTC, an hour east and eight hours west.
    assert_eq!(strftime::format_local("%F %T", 1_709_251_199, 3600), "2024-03-01 00:59:59");
    assert_eq!(strftime::format_local("%F %T", 1_709_251_199, -8 * 3600), "2024-02-29 15:59:59");
    // The template's clock is the device's wall clock (a minute may turn between the reads).
    let before = chrono::Local::now().format("%Y-%m-%d %H:%M").to_string();
    let ours = render("{{ strftime_now('%Y-%m-%d %H:%M') }}");
    let after = chrono::Local::now().format("%Y-%m-%d %H:%M").to_string();
    assert!(ours == before || ours == after, "template {ours}, local {before}..{after}");
}

#[test]
fn float_repr_matches_python() {
    for (f, s) in [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (1.5, "1.5"),
        (123456.0, "123456.0"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.25e-7, "1.25e-07"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.5e300, "1.5e+300"),
        (f64::NAN, "nan"),
        (f64::NEG_INFINITY, "-inf"),
    ] {
        assert_eq!(pyjson::float_repr(f, false), s);
    }
    assert_eq!(pyjson::float_repr(f64::INFINITY, true), "Infinity");
}

#[test]
fn fallback_detection() {
    let vocab = |v: &'static [&'static str]| move |t: &str| v.contains(&t);
    assert_eq!(FallbackKind::detect(vocab(&["<bos>", "<start_of_turn>", "<end_of_turn>"])), FallbackKind::Gemma);
    assert_eq!(FallbackKind::detect(vocab(&["<|im_start|>", "<|im_end|>"])), FallbackKind::ChatMl);
    assert_eq!(FallbackKind::detect(vocab(&["<s>", "</s>", "<start_of_turn>"])), FallbackKind::Plain);
}

#[test]
fn fallback_templates_render() {
    let convo = [Message::system("Sys"), Message::user("Hi"), Message::assistant("Yo"), Message::user("Q")];

    let gemma = ChatTemplate::fallback(FallbackKind::Gemma, "<bos>", "<eos>");
    assert_eq!(
        gemma.render(&convo, true).expect("renders"),
        "<start_of_turn>user\nSys\n\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n<start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n"
    );
    assert_eq!(
        gemma.render(&[Message::system("Only")], false).expect("renders"),
        "<start_of_turn>user\nOnly<end_of_turn>\n"
    );
    assert_eq!(gemma.assistant_turn_suffix(), Some("<end_of_turn>\n"));
    assert_eq!(gemma.fallback_kind(), Some(FallbackKind::Gemma));

    let chatml = ChatTemplate::fallback(FallbackKind::ChatMl, "", "<|im_end|>");
    assert_eq!(
        chatml.render(&convo[1..3], true).expect("renders"),
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(chatml.assistant_stop_text(), Some("<|im_end|>"));

    let plain = ChatTemplate::fallback(FallbackKind::Plain, "<s>", "</s>");
    assert_eq!(
        plain.render(&convo, true).expect("renders"),
        "System: Sys\nUser: Hi\nAssistant: Yo\nUser: Q\nAssistant:"
    );
    assert_eq!(plain.assistant_turn_suffix(), Some("\n"));
    assert_eq!(plain.assistant_stop_text(), None);
}

#[test]
fn messages_round_trip_through_serde() {
    let m = Message::new(Role::Tool, "42");
    let json = serde_json::to_string(&m).expect("serializes");
    assert_eq!(json, r#"{"role":"tool","content":"42"}"#);
    assert_eq!(serde_json::from_str::<Message>(&json).expect("parses"), m);
    assert!(serde_json::from_str::<Message>(r#"{"role":"robot","content":""}"#).is_err());
}

#[test]
fn template_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ChatTemplate>();
}

#[test]
fn common_prefix_respects_char_boundaries() {
    assert_eq!(common_prefix_len("é<x", "é<y"), "é<".len());
    assert_eq!(common_prefix_len("éa", "èa"), 0);
    assert_eq!(common_prefix_len("ab", "abc"), 2);
}
