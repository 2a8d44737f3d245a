//! What the SDK logs through the `log` facade: loading, sessions and finished answers with their
//! counts, and never the prompt's or the answer's text above `Debug`.

mod common;

use std::sync::Mutex;

use common::*;
use log::{Level, LevelFilter, Log, Metadata, Record};
use tern::{Engine, EngineOptions, Event, Session, SessionOptions};

struct Capture(Mutex<Vec<(Level, String)>>);

impl Log for Capture {
    fn enabled(&self, _: &Metadata) -> bool {
        true
    }
    fn log(&self, record: &Record) {
        self.0.lock().unwrap().push((record.level(), record.args().to_string()));
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn logs_counts_and_timings_but_no_text() {
    log::set_logger(&CAPTURE).expect("the only logger of this test binary");
    log::set_max_level(LevelFilter::Trace);

    let prompt = "Name one colour of the flag of Zanzibaria.";
    let engine = Engine::load(model_path(SMOLLM2), EngineOptions::default()).expect("load");
    let mut session = Session::new(
        engine,
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 8, ..Default::default() },
    )
    .expect("session");
    let mut answer = String::new();
    for event in session.send(prompt).expect("send") {
        if let Event::Token { text, .. } = event.expect("event") {
            answer.push_str(&text);
        }
    }

    let records = CAPTURE.0.lock().unwrap().clone();
    let has = |what: &str| records.iter().any(|(l, m)| *l == Level::Info && m.starts_with(what));
    assert!(has("model loaded"), "{records:?}");
    assert!(has("session opened"), "{records:?}");
    assert!(has("generation finished"), "{records:?}");
    assert!(records.iter().any(|(_, m)| m.contains("8 generated")), "{records:?}");
    let answer = answer.trim();
    assert!(!answer.is_empty());
    for (level, message) in records.iter().filter(|(l, _)| *l <= Level::Info) {
        assert!(!message.contains("Zanzibaria"), "prompt text logged at {level}: {message}");
        assert!(!message.contains(answer), "answer text logged at {level}: {message}");
    }
}
