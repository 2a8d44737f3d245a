//! The session API on the real SmolLM2 model: greedy answers equal llama.cpp's, KV reuse across
//! turns changes nothing but speed, cancellation, stop sequences, limits and typed errors.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tern::{
    Engine, EngineOptions, Error, Event, FinishReason, Message, OverflowPolicy, SamplingOptions, Session,
    SessionOptions, Stats,
};

fn engine() -> Arc<Engine> {
    static ENGINE: std::sync::OnceLock<Arc<Engine>> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| Engine::load(model_path(SMOLLM2), EngineOptions::default()).expect("load")).clone()
}

/// Runs a generation to the end: (ids, text, stats).
fn collect(gen: impl Iterator<Item = tern::Result<Event>>) -> (Vec<u32>, String, Stats) {
    let (mut ids, mut text, mut stats) = (Vec::new(), String::new(), None);
    for ev in gen {
        match ev.expect("event") {
            Event::Token { text: t, ids: i } => {
                assert!(stats.is_none(), "token after Done");
                text.push_str(&t);
                ids.extend(i);
            }
            Event::Done(s) => stats = Some(s),
        }
    }
    (ids, text, stats.expect("a Done event ends every generation"))
}

/// Length of the prefix over which a free-running greedy decode must equal the reference: up to
/// (and including) the first step where the reference's top-2 margin is small.
fn decisive_prefix(case: &serde_json::Value) -> usize {
    let steps = case["steps"].as_array().expect("steps");
    steps.iter().position(|s| s["margin"].as_f64().unwrap_or(0.0) < 0.5).unwrap_or(steps.len())
}

#[test]
fn greedy_chat_matches_reference() {
    let g = golden(SMOLLM2);
    for case in g["chat"].as_array().expect("chat cases") {
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).expect("messages");
        let (last, history) = messages.split_last().expect("a user message");
        let (system, history): (Vec<_>, Vec<_>) = history.iter().cloned().partition(|m| m.role == tern::Role::System);
        let opts = SessionOptions {
            sampling: Some(tern::SamplingOptions::greedy()),
            system_prompt: system.first().map(|m| m.content.clone()),
            max_tokens: 32,
            ..Default::default()
        };
        let mut s = Session::new(engine(), opts).expect("session");
        s.set_messages(history);
        let (ids, _text, stats) = collect(s.send(&last.content).expect("send"));
        let want = ids_of(&case["greedy"]);
        let n = decisive_prefix(case).min(want.len());
        assert_eq!(&ids[..n.min(ids.len())], &want[..n], "first {n} greedy tokens");
        assert_eq!(stats.prompt_tokens, case["prompt_ids"].as_array().map_or(0, |a| a.len()));
        assert_eq!(stats.generated_tokens, ids.len());
        if n == want.len() && want.len() == 32 {
            assert_eq!(stats.finish_reason, FinishReason::MaxTokens);
        }
    }
}

fn ids_of(v: &serde_json::Value) -> Vec<u32> {
    ids(v)
}

#[test]
fn second_turn_reuses_the_cache_and_answers_the_same() {
    let opts = SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 24, ..Default::default() };
    let mut a = Session::new(engine(), opts.clone()).expect("session");
    let (_, first_answer, s1) = collect(a.send("Name a color.").expect("send"));
    assert_eq!(s1.cached_tokens, 0);
    let (ids2, text2, s2) = collect(a.send("Name another one.").expect("send"));
    assert!(
        s2.cached_tokens >= s1.prompt_tokens,
        "second turn recomputed the first: cached {} of a {}-token first prompt",
        s2.cached_tokens,
        s1.prompt_tokens
    );
    assert_eq!(a.messages().len(), 4);
    assert_eq!(a.messages()[1].content, first_answer);

    // A fresh session given the same history computes everything and must agree exactly.
    let mut b = Session::new(engine(), opts).expect("session");
    b.set_messages(a.messages()[..2].to_vec());
    let (ids_b, text_b, sb) = collect(b.send("Name another one.").expect("send"));
    assert_eq!(sb.cached_tokens, 0);
    assert_eq!(ids2, ids_b);
    assert_eq!(text2, text_b);
}

/// Prewarming computes the prompt's start ahead of time: the first answer reuses it and is the
/// same answer a cold session gives.
#[test]
fn prewarm_prefills_the_system_prompt_and_changes_no_answer() {
    let opts = SessionOptions {
        sampling: Some(SamplingOptions::greedy()),
        system_prompt: Some("You are a terse assistant. Answer in one short sentence.".into()),
        max_tokens: 16,
        ..Default::default()
    };
    let mut warm = Session::new(engine(), opts.clone()).expect("session");
    let prewarmed = warm.prewarm().expect("prewarm");
    let system_only = warm.prompt_ids(&Message::user("x")).expect("prompt").len();
    assert!(prewarmed > 10 && prewarmed < system_only, "prewarmed {prewarmed} of {system_only}");
    assert_eq!(warm.tokens_in_context(), prewarmed);
    assert_eq!(warm.prewarm().expect("again"), prewarmed, "a second prewarm computes nothing new");
    let (ids, _, stats) = collect(warm.send("Name a color.").expect("send"));
    assert_eq!(stats.cached_tokens, prewarmed);

    let mut cold = Session::new(engine(), opts).expect("session");
    let (cold_ids, _, cold_stats) = collect(cold.send("Name a color.").expect("send"));
    assert_eq!(cold_stats.cached_tokens, 0);
    assert_eq!(ids, cold_ids);
    // Later in the conversation it covers the turns so far.
    let before = warm.tokens_in_context();
    assert!(warm.prewarm().expect("prewarm") >= stats.prompt_tokens.min(before));
}

#[test]
fn cancel_from_another_thread_stops_promptly() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: 100_000,
        ignore_eos: true,
        context_length: Some(2048),
        ..Default::default()
    };
    let mut s = Session::new(engine(), opts).expect("session");
    let handle = s.cancel_handle();
    let cancelled = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancelled);
    let mut gen = s.complete("Once upon a time").expect("complete");
    let first = gen.next().expect("an event").expect("ok");
    assert!(matches!(first, Event::Token { .. }));
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        flag.store(true, Ordering::SeqCst);
        handle.cancel();
    });
    // Cancellation is checked before every step: at most the step in flight completes.
    let (mut after_cancel, mut finish) = (0, None);
    for ev in gen {
        match ev.expect("event") {
            Event::Token { .. } if cancelled.load(Ordering::SeqCst) => after_cancel += 1,
            Event::Token { .. } => {}
            Event::Done(stats) => finish = Some(stats.finish_reason),
        }
    }
    t.join().expect("thread");
    assert_eq!(finish, Some(FinishReason::Cancelled));
    assert!(after_cancel <= 1, "{after_cancel} tokens came after cancel");
}

#[test]
fn stop_sequence_cuts_the_text() {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: 32,
        stop: vec![" 9".into()],
        ..Default::default()
    };
    let mut s = Session::new(engine(), opts).expect("session");
    let (_, text, stats) = collect(s.complete("1, 2, 3, 4, 5,").expect("complete"));
    assert_eq!(stats.finish_reason, FinishReason::StopSequence);
    assert_eq!(text, " 6, 7, 8,");
}

#[test]
fn max_tokens_and_reset() {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: 5,
        ignore_eos: true,
        ..Default::default()
    };
    let mut s = Session::new(engine(), opts).expect("session");
    let (ids, _, stats) = collect(s.send("Hi").expect("send"));
    assert_eq!((ids.len(), stats.generated_tokens, stats.finish_reason), (5, 5, FinishReason::MaxTokens));
    assert!(stats.decode_tokens_per_s > 0.0 && stats.prefill_tokens_per_s > 0.0);
    assert!(s.tokens_in_context() > 0);
    s.reset();
    assert_eq!((s.tokens_in_context(), s.messages().len()), (0, 0));
}

#[test]
fn context_overflow_is_typed_and_loses_nothing() {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        context_length: Some(32),
        ..Default::default()
    };
    let mut s = Session::new(engine(), opts).expect("session");
    let long = "word ".repeat(100);
    match s.send(&long) {
        Err(Error::ContextOverflow { needed, limit }) => assert!(needed > limit && limit == 32),
        other => panic!("expected ContextOverflow, got {:?}", other.map(|_| ())),
    }
    assert!(s.messages().is_empty());
    // The session still works after the refusal.
    let (ids, _, _) = collect(s.complete("Hi").expect("complete"));
    assert!(!ids.is_empty());
}

#[test]
fn dropping_the_oldest_turns_keeps_the_conversation_going() {
    let opts = |overflow| SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        system_prompt: Some("You answer in one short sentence.".into()),
        context_length: Some(160),
        max_tokens: 12,
        ignore_eos: true,
        overflow,
        ..Default::default()
    };
    let questions: Vec<String> = (1..=8)
        .map(|i| format!("Question {i}: name a colour that starts with the letter {}.", (b'a' + i) as char))
        .collect();

    // As before, a conversation that outgrows the context is refused.
    let mut refusing = Session::new(engine(), opts(OverflowPolicy::Error)).expect("session");
    let refused = questions.iter().position(|q| match refusing.send(q) {
        Ok(gen) => {
            collect(gen);
            false
        }
        Err(Error::ContextOverflow { .. }) => true,
        Err(e) => panic!("unexpected error {e}"),
    });
    let refused = refused.expect("eight turns outgrow 160 tokens");
    assert_eq!(refusing.messages().len(), 2 * refused);

    let mut s = Session::new(engine(), opts(OverflowPolicy::DropOldestTurns)).expect("session");
    let system = engine().tokenizer().encode("You answer in one short sentence.", false, false).expect("encode");
    let mut dropped_total = 0;
    for (i, q) in questions.iter().enumerate() {
        let gen = s.send(q).expect("each question gets an answer");
        let prompt = gen.prompt().to_vec();
        let (ids, _, stats) = collect(gen);
        assert_eq!(ids.len(), 12);
        assert!(stats.prompt_tokens + 12 <= 160, "turn {i}: the answer had room");
        // Whole turns go, two messages each, and never the system prompt or the new question.
        assert_eq!(stats.dropped_messages % 2, 0);
        assert!(prompt.windows(system.len()).any(|w| w == system), "turn {i}: system prompt kept");
        let newest = engine().tokenizer().encode(q, false, false).expect("encode");
        assert!(prompt.windows(newest.len()).any(|w| w == newest), "turn {i}: question kept");
        dropped_total += stats.dropped_messages;
        assert_eq!(s.messages().len(), 2 * (i + 1) - dropped_total);
        assert_eq!(s.messages()[0].role, tern::Role::User);
        assert_eq!(&s.messages()[s.messages().len() - 2].content, q);
    }
    assert!(dropped_total >= 2 * (questions.len() - refused), "turns were dropped: {dropped_total}");
}

#[test]
fn generation_stops_when_the_context_is_full() {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        context_length: Some(24),
        max_tokens: 1000,
        ignore_eos: true,
        ..Default::default()
    };
    let mut s = Session::new(engine(), opts).expect("session");
    let (_, _, stats) = collect(s.complete("The capital of France is").expect("complete"));
    assert_eq!(stats.finish_reason, FinishReason::ContextFull);
    assert_eq!(stats.prompt_tokens + stats.generated_tokens, 25);
}

#[test]
fn invalid_options_are_rejected() {
    let bad = |sampling: SamplingOptions| {
        let r = Session::new(engine(), SessionOptions { sampling: Some(sampling), ..Default::default() });
        assert!(matches!(r, Err(Error::InvalidOption(_))), "{r:?}");
    };
    bad(SamplingOptions { temperature: -1.0, ..Default::default() });
    bad(SamplingOptions { top_p: 1.5, ..Default::default() });
    bad(SamplingOptions { temperature: f32::NAN, ..Default::default() });
    let r = Session::new(
        engine(),
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 0, ..Default::default() },
    );
    assert!(matches!(r, Err(Error::InvalidOption(_))));
    let mut s = Session::new(
        engine(),
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), ..Default::default() },
    )
    .expect("session");
    assert!(matches!(s.complete_ids(&[u32::MAX]), Err(Error::InvalidOption(_))));
}

#[test]
fn same_seed_same_sample() {
    let run = |seed| {
        let sampling = SamplingOptions { temperature: 0.9, seed: Some(seed), ..Default::default() };
        let mut s =
            Session::new(engine(), SessionOptions { sampling: Some(sampling), max_tokens: 16, ..Default::default() })
                .expect("s");
        collect(s.complete("Once upon a time").expect("complete")).0
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn two_sessions_generate_at_once() {
    let opts = SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 16, ..Default::default() };
    let alone = {
        let mut s = Session::new(engine(), opts.clone()).expect("s");
        collect(s.send("Tell me about owls.").expect("send")).0
    };
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let opts = opts.clone();
            std::thread::spawn(move || {
                let mut s = Session::new(engine(), opts).expect("s");
                collect(s.send("Tell me about owls.").expect("send")).0
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("thread"), alone);
    }
}

#[test]
fn token_counting() {
    let e = engine();
    assert_eq!(e.count_tokens("Hello world").expect("count"), 2);
    assert_eq!(e.count_tokens("").expect("count"), 0);
}

/// A cancel made before `send` is not lost: that request ends at once, cancelled, nothing
/// generated; it is used up, so the request after it runs normally.
#[test]
fn a_cancel_before_send_stops_that_request_only() {
    let opts = SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 8, ..Default::default() };
    let mut s = Session::new(engine(), opts.clone()).expect("session");
    s.cancel_handle().cancel();
    let (ids, _, stats) = collect(s.send("Hello").expect("send"));
    assert_eq!(stats.finish_reason, FinishReason::Cancelled);
    assert!(ids.is_empty(), "nothing generated");
    let (_, _, stats) = collect(s.send("Hello again").expect("send"));
    assert_ne!(stats.finish_reason, FinishReason::Cancelled, "the cancel was used up");
    // A request dropped unfinished uses it up too.
    s.cancel_handle().cancel();
    drop(s.send("Once more").expect("send"));
    let (_, _, stats) = collect(s.send("And again").expect("send"));
    assert_ne!(stats.finish_reason, FinishReason::Cancelled);
}

/// Cancelling inside a prefill pass stops it between layers, and the session stays consistent:
/// its next answer is the one a fresh session gives.
#[test]
fn a_cancel_during_prefill_leaves_the_session_consistent() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: 6,
        context_length: Some(2048),
        ..Default::default()
    };
    let long = "The history of the lighthouse keeper and the storm at sea. ".repeat(60);
    let mut s = Session::new(engine(), opts.clone()).expect("session");
    let handle = s.cancel_handle();
    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        handle.cancel();
        flag.store(true, Ordering::SeqCst);
    });
    let mut gen = s.send(&long).expect("send");
    let stats = loop {
        match gen.next().expect("an event").expect("ok") {
            Event::Done(stats) => break stats,
            Event::Token { .. } => {}
        }
    };
    drop(gen);
    t.join().expect("thread");
    assert_eq!(stats.finish_reason, FinishReason::Cancelled);
    assert_eq!(s.messages().len(), 2, "the cancelled request's turn is kept, as documented");
    // The KV cache holds only whole passes: a question after it answers as in a fresh session.
    let after = collect(s.send("Who keeps the lighthouse?").expect("send"));
    let mut fresh = Session::new(engine(), opts).expect("session");
    fresh.set_messages(s.messages()[..2].to_vec());
    let want = collect(fresh.send("Who keeps the lighthouse?").expect("send"));
    assert_eq!(after.0, want.0, "same answer as a session that never ran the cancelled pass");
}
