//! Speculative decoding on the real models: greedy answers are token for token those of plain
//! decoding on all 28 dev workload cases with each of the three models (the first 40 new tokens
//! with SmolLM2, 24 with Qwen2.5 and Gemma 3, to keep CI time down; `tern bench-workloads`
//! checks whole answers), also at stop sequences, token limits, across turns and under a
//! grammar; sampling runs through the same verification and stays reproducible; the history
//! store feeds the drafter.
//!
//! Each case is prefilled once: the speculative answer first, then the same request again with
//! speculation off, which reuses the cached prompt (all but its last token) and decodes plainly.

mod common;

use std::sync::{Arc, OnceLock};

use common::*;
use tern::{
    DraftLimits, Engine, EngineOptions, Event, HistoryOptions, HistoryScope, HistoryStore, SamplingOptions, Session,
    SessionOptions, Speculation, SpeculationOptions, Stats,
};

/// New tokens per case: enough for several verification steps, few enough for CI (the larger
/// models decode slower).
const TOKENS_PER_CASE: usize = 40;
const TOKENS_PER_CASE_LARGER: usize = 24;

/// Tests here run one at a time: each engine's thread pool already uses every core, and
/// engines spinning side by side would only slow each other down.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn engine(file: &str) -> Arc<Engine> {
    type Loaded = std::sync::Mutex<Vec<(String, Arc<Engine>)>>;
    static ENGINES: OnceLock<Loaded> = OnceLock::new();
    let mut engines = ENGINES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, e)) = engines.iter().find(|(f, _)| f == file) {
        return e.clone();
    }
    let e = Engine::load(model_path(file), EngineOptions::default()).expect("model loads");
    engines.push((file.to_owned(), e.clone()));
    e
}

struct Case {
    id: String,
    task: String,
    system: Option<String>,
    user: String,
}

fn workloads() -> Vec<Case> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/dev.jsonl");
    let text = std::fs::read_to_string(&path).expect("workloads file");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
            let msgs = v["messages"].as_array().expect("messages");
            let content = |role: &str| {
                msgs.iter().find(|m| m["role"] == role).map(|m| m["content"].as_str().expect("content").to_owned())
            };
            Case {
                id: v["id"].as_str().expect("id").to_owned(),
                task: v["task"].as_str().expect("task").to_owned(),
                system: content("system"),
                user: content("user").expect("a user message"),
            }
        })
        .collect()
}

/// Verifies every draft the drafter finds (no controller), so the tree path is exercised on
/// every step, with branching trees. Calibration covers the prompt's last positions only
/// (it costs prefill time; `calibration_is_optional` covers whole prompts).
fn always(max_draft_tokens: usize) -> SpeculationOptions {
    SpeculationOptions {
        mode: Speculation::Limits(DraftLimits { max_draft_tokens, max_width: 3, max_depth: 12, adaptive: false }),
        calibration_positions: 96,
        history: None,
    }
}

fn collect(gen: impl Iterator<Item = tern::Result<Event>>) -> (Vec<u32>, String, Stats, usize) {
    let (mut ids, mut text, mut stats, mut multi) = (Vec::new(), String::new(), None, 0);
    for ev in gen {
        match ev.expect("event") {
            Event::Token { text: t, ids: i } => {
                assert!(stats.is_none(), "token after Done");
                multi += usize::from(i.len() > 1);
                text.push_str(&t);
                ids.extend(i);
            }
            Event::Done(s) => stats = Some(s),
        }
    }
    let stats = stats.expect("a Done event ends every generation");
    // Every pass is in the figures, the last one too (also when it chose only the end of
    // generation): a pass chooses its accepted drafted tokens and one more.
    let sp = &stats.speculation;
    if sp.verify_steps > 0 {
        let steps = (sp.tokens_per_step * sp.decode_passes as f64).round() as usize;
        assert_eq!(steps, sp.decode_passes + sp.accepted_tokens, "{sp:?}");
        assert_eq!(sp.draft_lengths.iter().sum::<usize>(), sp.decode_passes, "{sp:?}");
    }
    (ids, text, stats, multi)
}

/// The case answered once in a new session, with `spec` and at most `max_tokens` new tokens.
fn answer_case(
    e: &Arc<Engine>,
    case: &Case,
    spec: SpeculationOptions,
    max_tokens: usize,
) -> (Vec<u32>, String, Stats, usize) {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        system_prompt: case.system.clone(),
        max_tokens,
        speculation: spec,
        ..Default::default()
    };
    let mut s = Session::new(e.clone(), opts).expect("session");
    collect(s.send(&case.user).expect("send"))
}

/// The case answered with `spec`, then plainly in the same session (prompt reused from the
/// cache): both answers, stats, and the context each left behind.
fn both_ways(
    e: &Arc<Engine>,
    case: &Case,
    spec: SpeculationOptions,
    opts: SessionOptions,
) -> [(Vec<u32>, String, Stats, usize); 2] {
    let opts = SessionOptions { system_prompt: case.system.clone(), speculation: spec, ..opts };
    let mut s = Session::new(e.clone(), opts).expect("session");
    let fast = collect(s.send(&case.user).expect("send"));
    let context_fast = s.tokens_in_context();
    s.set_messages(Vec::new());
    s.set_speculation(SpeculationOptions::off()).expect("valid");
    let plain = collect(s.send(&case.user).expect("send"));
    assert_eq!(plain.2.cached_tokens + 1, plain.2.prompt_tokens, "{}: the prompt came from the cache", case.id);
    assert_eq!(s.tokens_in_context(), context_fast, "{}: same context left behind", case.id);
    [fast, plain]
}

fn check_identical(file: &str, ids: &[&str], spec: SpeculationOptions, max_tokens: usize) -> Vec<Stats> {
    let e = engine(file);
    let mut all = Vec::new();
    for case in workloads().iter().filter(|c| ids.is_empty() || ids.contains(&c.id.as_str())) {
        let opts = SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens, ..Default::default() };
        let [fast, plain] = both_ways(&e, case, spec.clone(), opts);
        assert_eq!(fast.0, plain.0, "{file} {}: speculative and plain answers differ", case.id);
        assert_eq!(fast.1, plain.1, "{file} {}", case.id);
        assert_eq!(fast.2.finish_reason, plain.2.finish_reason, "{file} {}", case.id);
        let sp = &fast.2.speculation;
        assert!(sp.accepted_tokens <= sp.drafted_tokens);
        assert_eq!(sp.decode_passes, sp.draft_lengths.iter().sum::<usize>());
        if sp.decode_passes > 0 {
            assert!(sp.tokens_per_step >= 1.0, "{} {sp:?}", case.id);
        }
        eprintln!(
            "{file} {:16} {:8} tokens {:3} passes {:3} drafted {:4} accepted {:3}",
            case.id,
            case.task,
            fast.0.len(),
            sp.decode_passes,
            sp.drafted_tokens,
            sp.accepted_tokens
        );
        all.push(fast.2);
    }
    all
}

#[test]
fn smollm2_every_dev_case_is_identical() {
    let _serial = serial();
    let stats = check_identical(SMOLLM2, &[], always(16), TOKENS_PER_CASE);
    assert_eq!(stats.len(), 28);
    // The workloads repeat their context: drafts get accepted.
    let accepted: usize = stats.iter().map(|s| s.speculation.accepted_tokens).sum();
    assert!(accepted > 100, "accepted {accepted} drafted tokens over 28 cases");
}

/// The larger models answer two cases of each task (every case would take minutes more; the
/// batch-invariance tests hold tree passes bitwise to one-token passes on every model).
const TWO_PER_TASK: [&str; 8] =
    ["dev-summary-0", "dev-summary-5", "dev-rag-1", "dev-rag-4", "dev-ui-0", "dev-ui-3", "dev-reply-2", "dev-reply-5"];

#[test]
fn qwen2_dev_cases_are_identical() {
    let _serial = serial();
    let stats = check_identical(QWEN2, &TWO_PER_TASK, always(12), TOKENS_PER_CASE_LARGER);
    assert_eq!(stats.len(), TWO_PER_TASK.len());
}

#[test]
fn gemma3_dev_cases_are_identical() {
    let _serial = serial();
    let stats = check_identical(GEMMA3, &TWO_PER_TASK, always(12), TOKENS_PER_CASE_LARGER);
    assert_eq!(stats.len(), TWO_PER_TASK.len());
}

#[test]
fn automatic_mode_is_identical_too() {
    let _serial = serial();
    check_identical(
        SMOLLM2,
        &["dev-summary-0", "dev-rag-1", "dev-reply-3"],
        SpeculationOptions::default(),
        TOKENS_PER_CASE,
    );
}

#[test]
fn steps_stream_their_tokens_together() {
    let _serial = serial();
    let e = engine(SMOLLM2);
    let case = workloads().into_iter().find(|c| c.id == "dev-summary-3").expect("case");
    let [fast, plain] = both_ways(
        &e,
        &case,
        always(16),
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 64, ..Default::default() },
    );
    assert_eq!(fast.0, plain.0);
    assert!(fast.3 > 0, "some events carry several tokens");
    assert_eq!(plain.3, 0, "plain decoding streams one token per event");
    let sp = &fast.2.speculation;
    assert!(sp.verify_steps > 0 && sp.accepted_tokens > 0, "{sp:?}");
    assert!(fast.2.decode_tokens_per_s > 0.0);
}

/// Stop sequences and token limits cut a speculative answer exactly where they cut the plain
/// one, even inside a step, and leave the same context behind.
#[test]
fn stops_and_limits_end_where_plain_decoding_ends() {
    let _serial = serial();
    let e = engine(SMOLLM2);
    let case = workloads().into_iter().find(|c| c.id == "dev-summary-3").expect("case");
    let [_, plain] = both_ways(
        &e,
        &case,
        always(16),
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 64, ..Default::default() },
    );
    // A stop text from the middle of the answer.
    let words: Vec<&str> = plain.1.split_whitespace().collect();
    let stop = words[words.len() / 2].to_owned();
    for opts in [
        SessionOptions {
            sampling: Some(tern::SamplingOptions::greedy()),
            max_tokens: 64,
            stop: vec![stop.clone()],
            ..Default::default()
        },
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 7, ..Default::default() },
        SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), max_tokens: 23, ..Default::default() },
    ] {
        let [fast, plain] = both_ways(&e, &case, always(16), opts.clone());
        assert_eq!(fast.0, plain.0, "stop {:?} max {}", opts.stop, opts.max_tokens);
        assert_eq!(fast.1, plain.1);
        assert_eq!(fast.2.finish_reason, plain.2.finish_reason);
        assert_eq!(fast.2.generated_tokens, plain.2.generated_tokens);
    }
}

/// A second turn reuses the first turn's cache, answer included, with speculation as without.
#[test]
fn second_turn_is_identical() {
    let _serial = serial();
    let e = engine(SMOLLM2);
    let turns = ["Name three fruits.", "Now repeat them in reverse order, then name them again."];
    let run = |spec: SpeculationOptions| {
        let mut s = Session::new(
            e.clone(),
            SessionOptions {
                sampling: Some(tern::SamplingOptions::greedy()),
                max_tokens: 40,
                speculation: spec,
                ..Default::default()
            },
        )
        .expect("session");
        let out: Vec<(Vec<u32>, Stats)> = turns
            .iter()
            .map(|t| {
                let (ids, _, stats, _) = collect(s.send(t).expect("send"));
                (ids, stats)
            })
            .collect();
        (out, s.tokens_in_context(), s.messages().to_vec())
    };
    let (fast, ctx_fast, msgs_fast) = run(always(16));
    let (plain, ctx_plain, msgs_plain) = run(SpeculationOptions::off());
    for (f, p) in fast.iter().zip(&plain) {
        assert_eq!(f.0, p.0);
        assert_eq!(f.1.cached_tokens, p.1.cached_tokens);
    }
    assert!(fast[1].1.cached_tokens > 0);
    assert_eq!(ctx_fast, ctx_plain);
    assert_eq!(msgs_fast, msgs_plain);
}

/// With temperature the verification draws through the sampler, one draw per token as plain
/// decoding does: the same seed gives the same answer with or without speculation (so a seeded
/// answer never depends on whether speculation ran), different seeds differ, and drafts still
/// get accepted. (That the output distribution is exactly the sampler's is tested
/// statistically in `speculative::verify`.)
#[test]
fn sampling_is_reproducible_and_accepts_drafts() {
    let _serial = serial();
    let e = engine(SMOLLM2);
    let case = workloads().into_iter().find(|c| c.id == "dev-rag-1").expect("case");
    let run = |seed: u64, speculation: SpeculationOptions| {
        let sampling = SamplingOptions { temperature: 0.7, seed: Some(seed), ..Default::default() };
        let opts = SessionOptions {
            system_prompt: case.system.clone(),
            sampling: Some(sampling),
            max_tokens: 48,
            speculation,
            ..Default::default()
        };
        let mut s = Session::new(e.clone(), opts).expect("session");
        collect(s.send(&case.user).expect("send"))
    };
    let (a, b, c) = (run(11, always(12)), run(11, always(4)), run(12, always(12)));
    let plain = run(11, SpeculationOptions::off());
    assert_eq!(a.0, plain.0, "same seed, same answer as plain decoding");
    assert_eq!(b.0, plain.0, "same seed, same answer whatever the draft limit");
    assert_ne!(a.0, c.0, "another seed, another answer");
    let accepted = a.2.speculation.accepted_tokens + c.2.speculation.accepted_tokens;
    assert!(accepted > 0, "{:?}", a.2.speculation);
}

/// Answers join the history scope; a later session drafts from them: the same request is
/// answered with long accepted drafts, and the same tokens.
#[test]
fn history_scope_feeds_the_drafter() {
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("tern-spec-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = HistoryStore::open(&dir, HistoryOptions::default()).expect("store");
    let e = engine(SMOLLM2);
    let history = || SpeculationOptions { history: Some(HistoryScope::new(store.clone(), "friend-1")), ..always(16) };
    let question = "Write a short poem about the sea and the wind at night.";
    let ask = |spec: SpeculationOptions| {
        let mut s = Session::new(
            e.clone(),
            SessionOptions {
                sampling: Some(tern::SamplingOptions::greedy()),
                max_tokens: 48,
                speculation: spec,
                ..Default::default()
            },
        )
        .expect("session");
        collect(s.send(question).expect("send"))
    };
    let first = ask(history());
    assert_eq!(store.texts("friend-1").expect("texts"), std::slice::from_ref(&first.1), "the answer was stored");
    let again = ask(history());
    assert_eq!(again.0, first.0);
    let without = ask(SpeculationOptions { history: None, ..always(16) });
    assert!(
        again.2.speculation.accepted_tokens > without.2.speculation.accepted_tokens + 10,
        "with history {:?}, without {:?}",
        again.2.speculation,
        without.2.speculation
    );
    assert_eq!(store.texts("friend-1").expect("texts").len(), 2, "the second answer was stored, the third not");
    store.clear("friend-1").expect("clears");
    assert!(store.texts("friend-1").expect("texts").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sessions_start_from_what_the_engine_learned() {
    let _serial = serial();
    // A fresh engine: the shared ones have learned from other tests.
    let e = Engine::load(model_path(SMOLLM2), EngineOptions::default()).expect("model loads");
    let priors = e.acceptance_weights();
    let case = workloads().into_iter().find(|c| c.id == "dev-rag-2").expect("case");
    let answer = |spec: SpeculationOptions| answer_case(&e, &case, spec, 24);
    let first = answer(always(8));
    assert!(first.2.speculation.verify_steps > 0);
    let learned = e.acceptance_weights();
    assert_ne!(learned, priors, "verified drafts teach the engine's acceptance model");
    answer(SpeculationOptions::off());
    assert_eq!(e.acceptance_weights(), learned, "a session without speculation leaves it alone");
    // A second session goes on from there: its estimates are no longer the priors, and its
    // answer is still the plain one.
    let second = answer(always(8));
    assert_eq!(second.0, first.0);
    let after = e.acceptance_weights();
    assert_ne!(after, learned);
    let fresh = Engine::load(model_path(SMOLLM2), EngineOptions::default()).expect("model loads");
    assert_eq!(fresh.acceptance_weights(), priors, "learning is per engine");
}

#[test]
fn calibration_is_optional() {
    let _serial = serial();
    let e = engine(SMOLLM2);
    let case = workloads().into_iter().find(|c| c.id == "dev-ui-2").expect("case");
    let run = |positions: usize| {
        answer_case(&e, &case, SpeculationOptions { calibration_positions: positions, ..always(8) }, 8)
    };
    let (on, off, few) = (run(4096), run(0), run(50));
    assert_eq!(on.0, off.0);
    assert_eq!(on.2.speculation.calibrated_positions + 1, on.2.prompt_tokens);
    assert_eq!(off.2.speculation.calibrated_positions, 0);
    assert_eq!(few.2.speculation.calibrated_positions, 50);
}

#[test]
fn bad_limits_are_refused() {
    let _serial = serial();
    let e = engine(SMOLLM2);
    let bad = SpeculationOptions {
        mode: Speculation::Limits(DraftLimits { max_draft_tokens: 0, ..DraftLimits::AUTO }),
        ..Default::default()
    };
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        speculation: bad.clone(),
        ..Default::default()
    };
    assert!(matches!(Session::new(e.clone(), opts), Err(tern::Error::InvalidOption(_))));
    let mut s =
        Session::new(e, SessionOptions { sampling: Some(tern::SamplingOptions::greedy()), ..Default::default() })
            .expect("session");
    assert!(s.set_speculation(bad).is_err());
    assert_eq!(s.options().speculation.mode, Speculation::Auto, "the previous setting stays");
}

/// Under a grammar the verifier masks every row and the sampler follows each kept token, so a
/// drafted token the grammar forbids is never kept: on every `ui` case with the action schema
/// the speculative answer is the plain one, a valid action, ended by the grammar.
#[cfg(feature = "structured")]
#[test]
fn grammar_holds_under_speculation() {
    use tern::ui::{self, Screen};
    let _serial = serial();
    let e = engine(SMOLLM2);
    let mut drafted = 0;
    for case in workloads().into_iter().filter(|c| c.task == "ui") {
        let (screen, goal) =
            case.user.strip_prefix("Screen:\n").and_then(|r| r.split_once("\n\nGoal: ")).expect("ui case");
        let screen: Screen = serde_json::from_str(screen).expect("screen JSON");
        let run = |spec: SpeculationOptions| {
            let opts = SessionOptions {
                sampling: Some(tern::SamplingOptions::greedy()),
                system_prompt: case.system.clone(),
                max_tokens: 96,
                speculation: spec,
                ..Default::default()
            };
            let mut s = Session::new(e.clone(), opts).expect("session");
            s.set_grammar(Some(&ui::action_grammar(&screen))).expect("schema compiles");
            collect(s.send(&ui::user_message(&screen, goal)).expect("send"))
        };
        let (fast, plain) = (run(always(16)), run(SpeculationOptions::off()));
        assert_eq!(fast.0, plain.0, "{}: {} / {}", case.id, fast.1, plain.1);
        ui::parse_action(&screen, &fast.1).unwrap_or_else(|err| panic!("{}: {err}: {}", case.id, fast.1));
        assert_eq!(fast.2.finish_reason, tern::FinishReason::EndOfGeneration, "{}", case.id);
        drafted += fast.2.speculation.drafted_tokens;
    }
    assert!(drafted > 0, "drafts were verified under the grammar");
}
