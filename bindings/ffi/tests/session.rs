//! The FFI objects from Rust, on the real SmolLM2 model: what the Kotlin and Swift suites rely
//! on, pinned at the source. Each way of cancelling ends the Rust generation, a busy session
//! refuses instead of waiting, and the stream matches the SDK session's answer.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use pollster::block_on;
use tern_ffi::{
    ConversationMessage, DraftLimits, Engine, EngineOptions, FinishReason, HistoryOptions, HistoryScope, HistoryStore,
    MessageRole, SamplingOptions, Session, SessionOptions, Speculation, SpeculationOptions, Stats, TernError,
    TokenEvent, TokenStream,
};

fn model() -> String {
    let dir = std::env::var_os("TERN_MODEL_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/tern/models")
    });
    dir.join("SmolLM2-135M-Instruct.Q4_1.gguf").display().to_string()
}

fn engine() -> Arc<Engine> {
    static ENGINE: std::sync::OnceLock<Arc<Engine>> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(|| {
            block_on(Engine::load(model(), EngineOptions { threads: Some(1), ..Default::default() })).unwrap()
        })
        .clone()
}

fn long_session() -> Arc<Session> {
    engine()
        .new_session(SessionOptions {
            sampling: Some(SamplingOptions::default()),
            max_tokens: 2000,
            ignore_eos: true,
            ..Default::default()
        })
        .unwrap()
}

/// A session in the middle of a long answer: its first token has come.
fn decoding() -> (Arc<Session>, Arc<TokenStream>) {
    let session = long_session();
    let stream = session.send("Tell me a long story.".into()).unwrap();
    block_on(stream.next()).unwrap();
    (session, stream)
}

/// Waits for the generation thread to end; panics after 10 s.
fn until_idle(session: &Session) {
    let start = Instant::now();
    while session.is_busy() {
        assert!(start.elapsed() < Duration::from_secs(10), "generation did not stop");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn finish_reason(session: &Session) -> Option<FinishReason> {
    session.last_stats().map(|s| s.finish_reason)
}

#[test]
fn stream_matches_the_sdk_session() {
    let opts = SessionOptions { sampling: Some(SamplingOptions::default()), max_tokens: 12, ..Default::default() };
    let session = engine().new_session(opts.clone()).unwrap();
    let stream = session.send("What is the capital of France?".into()).unwrap();
    let mut text = String::new();
    while let Some(event) = block_on(stream.next()).unwrap() {
        if let TokenEvent::Token { text: t, .. } = event {
            text.push_str(&t);
        }
    }
    let sdk_engine =
        tern::Engine::load(model(), tern::EngineOptions { threads: Some(1), ..Default::default() }).unwrap();
    let mut sdk = tern::Session::new(sdk_engine, opts.into()).unwrap();
    let mut want = String::new();
    for event in sdk.send("What is the capital of France?").unwrap() {
        if let tern::Event::Token { text: t, .. } = event.unwrap() {
            want.push_str(&t);
        }
    }
    assert_eq!(text, want);
    assert_eq!(finish_reason(&session), Some(FinishReason::MaxTokens));
}

/// The whole answer's text and statistics.
fn answer(session: &Session, text: &str) -> (String, Stats) {
    let stream = session.send(text.into()).unwrap();
    let mut answer = String::new();
    loop {
        match block_on(stream.next()).unwrap() {
            Some(TokenEvent::Token { text, .. }) => answer.push_str(&text),
            Some(TokenEvent::Done { stats }) => return (answer, stats),
            Some(_) => {}
            None => panic!("no Done event"),
        }
    }
}

fn speculating(speculation: SpeculationOptions) -> Arc<Session> {
    engine()
        .new_session(SessionOptions {
            sampling: Some(SamplingOptions::default()),
            max_tokens: 48,
            speculation,
            ..Default::default()
        })
        .unwrap()
}

const SUMMARY: &str = "Summarise in two sentences: The town library will close for renovation from 3 March to \
    28 April. During the closure, books can be returned to the drop box at the town hall, and the mobile library \
    will visit the market square every Saturday morning. The renovated library will have a larger children's \
    section, a quiet study room and longer opening hours on weekdays.";

/// Every draft verified, whatever it costs on this machine: what is accepted depends on the
/// drafts only (automatic speculation drafts as much as the measured costs say pays).
const ALWAYS: Option<Speculation> = Some(Speculation::Limits {
    limits: DraftLimits { max_draft_tokens: 16, max_width: 3, max_depth: 12, adaptive: false },
});

#[test]
fn speculation_keeps_the_greedy_answer() {
    let (plain, plain_stats) =
        answer(&speculating(SpeculationOptions { mode: Some(Speculation::Off), ..Default::default() }), SUMMARY);
    assert_eq!(plain_stats.speculation.verify_steps, 0);
    let (auto, _) = answer(&speculating(SpeculationOptions::default()), SUMMARY);
    assert_eq!(auto, plain);
    let (fast, stats) = answer(&speculating(SpeculationOptions { mode: ALWAYS, ..Default::default() }), SUMMARY);
    assert_eq!(fast, plain);
    let sp = &stats.speculation;
    assert!(sp.verify_steps > 0 && sp.accepted_tokens > 0 && sp.calibrated_positions > 0, "{sp:?}");
    assert!(sp.tokens_per_step > 1.0, "{sp:?}");
}

/// Answers join the scope; a later session drafts from them, and clearing the key forgets them.
#[test]
fn history_scope_feeds_a_later_session() {
    let dir = std::env::temp_dir().join(format!("tern-ffi-session-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = HistoryStore::open(dir.display().to_string(), HistoryOptions::default()).unwrap();
    let scope = HistoryScope { store: Arc::clone(&store), key: "contact-7".into(), record_answers: true };
    let question = "Write a short poem about the sea and the wind at night.";
    let history = || SpeculationOptions { mode: ALWAYS, history: Some(scope.clone()), ..Default::default() };
    let (first, _) = answer(&speculating(history()), question);
    assert_eq!(store.texts("contact-7".into()).unwrap(), [first.as_str()]);
    let (again, with) = answer(&speculating(history()), question);
    let (_, without) = answer(&speculating(SpeculationOptions { mode: ALWAYS, ..Default::default() }), question);
    assert_eq!(again, first);
    assert!(
        with.speculation.accepted_tokens > without.speculation.accepted_tokens + 10,
        "with history {:?}, without {:?}",
        with.speculation,
        without.speculation
    );
    store.clear("contact-7".into()).unwrap();
    assert!(store.texts("contact-7".into()).unwrap().is_empty());
    let (_, cleared) = answer(
        &speculating(SpeculationOptions {
            history: Some(HistoryScope { record_answers: false, ..scope }),
            ..Default::default()
        }),
        question,
    );
    assert!(cleared.speculation.accepted_tokens < with.speculation.accepted_tokens, "{:?}", cleared.speculation);
    assert!(store.texts("contact-7".into()).unwrap().is_empty(), "record_answers: false adds nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn abandoning_a_pending_next_cancels_the_generation() {
    let (session, stream) = decoding();
    // Poll next() once; drop it while it waits for a token (what a cancelled coroutine does).
    loop {
        let mut next = pin!(stream.next());
        if next.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending() {
            break;
        }
    }
    until_idle(&session);
    assert_eq!(finish_reason(&session), Some(FinishReason::Cancelled));
}

#[test]
fn dropping_the_stream_cancels_the_generation() {
    let (session, stream) = decoding();
    drop(stream);
    until_idle(&session);
    assert_eq!(finish_reason(&session), Some(FinishReason::Cancelled));
}

#[test]
fn session_cancel_ends_the_stream_with_done() {
    let (session, stream) = decoding();
    session.cancel();
    let mut after = 0;
    let last = loop {
        match block_on(stream.next()).unwrap() {
            Some(TokenEvent::Token { .. }) => after += 1,
            Some(done) => break done,
            None => panic!("no Done event"),
        }
    };
    assert!(matches!(last, TokenEvent::Done { stats } if stats.finish_reason == FinishReason::Cancelled));
    assert!(after <= 2, "{after} tokens after cancel");
    assert!(block_on(stream.next()).unwrap().is_none());
}

#[test]
fn a_cancel_of_an_old_stream_leaves_the_next_answer_alone() {
    let session = engine()
        .new_session(SessionOptions {
            sampling: Some(SamplingOptions::default()),
            max_tokens: 4,
            ignore_eos: true,
            ..Default::default()
        })
        .unwrap();
    let first = session.send("Hi".into()).unwrap();
    while block_on(first.next()).unwrap().is_some() {}
    until_idle(&session);
    let second = session.send("Hello again".into()).unwrap();
    first.cancel();
    while block_on(second.next()).unwrap().is_some() {}
    assert_eq!(finish_reason(&session), Some(FinishReason::MaxTokens));
}

#[test]
fn a_busy_session_refuses_instead_of_waiting() {
    let session = long_session();
    let stream = session.send("Count to one hundred.".into()).unwrap();
    assert!(matches!(session.send("Hello".into()), Err(TernError::Busy)));
    assert!(matches!(session.reset(), Err(TernError::Busy)));
    assert!(matches!(session.set_messages(Vec::new()), Err(TernError::Busy)));
    // The conversation as of the last finished answer: the question joins with its answer.
    assert!(session.messages().is_empty());
    stream.cancel();
    until_idle(&session);
    session.reset().unwrap();
    assert_eq!(session.token_count(), 0);
}

#[test]
fn set_messages_rewinds_and_the_cache_keeps_the_prefix() {
    let session = engine()
        .new_session(SessionOptions {
            sampling: Some(SamplingOptions::default()),
            max_tokens: 12,
            ..Default::default()
        })
        .unwrap();
    let (first, _) = answer(&session, "Name a color.");
    let (second, stats) = answer(&session, "Name another one.");
    let message = |role, content: &str| ConversationMessage { role, content: content.into() };
    let conversation = vec![
        message(MessageRole::User, "Name a color."),
        message(MessageRole::Assistant, &first),
        message(MessageRole::User, "Name another one."),
        message(MessageRole::Assistant, &second),
    ];
    assert_eq!(session.messages(), conversation);
    let tokens = session.token_count();
    session.set_messages(conversation[..2].to_vec()).unwrap();
    assert_eq!(session.messages(), conversation[..2]);
    assert_eq!(session.token_count(), tokens, "the KV cache changes with the next request only");
    let (again, again_stats) = answer(&session, "Name another one.");
    assert_eq!(again, second);
    assert_eq!(again_stats.prompt_tokens, stats.prompt_tokens);
    // Only the prompt's last token is computed again: its logits pick the first answer token.
    assert_eq!(again_stats.cached_tokens, again_stats.prompt_tokens - 1);
    assert_eq!(session.messages(), conversation);
}

#[test]
fn load_errors_are_typed() {
    let missing = block_on(Engine::load("/nonexistent/m.gguf".into(), EngineOptions::default()));
    assert!(matches!(missing, Err(TernError::ModelNotFound { path }) if path == "/nonexistent/m.gguf"));
    let kernels = EngineOptions { kernels: Some("no-such-isa".into()), ..Default::default() };
    assert!(matches!(block_on(Engine::load(model(), kernels)), Err(TernError::InvalidOption { .. })));
    assert_eq!(tern_ffi::available_kernels().first().map(String::as_str), Some("reference"));
}
