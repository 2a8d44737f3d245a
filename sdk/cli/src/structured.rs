//! `tern bench-structured`: the `ui` workload cases with and without the UI-action schema.
//!
//! For each model and case it asks for the next action twice, greedy: once constrained by the
//! schema of that screen, once free. It counts the answers that parse, validate and name an
//! element of the screen (free answers: the whole answer, and the first JSON object in it), and
//! measures what the constraint costs per token against a decode step.
//!
//! Costs are CPU time of the generating thread (`CLOCK_THREAD_CPUTIME_ID`), so that other processes on
//! a busy machine do not distort them: decode steps of the free run, and a replay of the
//! constrained answer's tokens through a fresh constraint (mask and advance per token). The
//! engine runs on one thread by default so that the decode step's work is all on that thread;
//! with more threads a step takes less wall time and the constraint's share grows accordingly.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use tern::constrain::CompiledGrammar;
use tern::ui::{self, Screen};
use tern::{Engine, EngineOptions, Event, Message, Session, SessionOptions, Stats};

use crate::error::{CliError, Result};
use crate::output::Stdout;

/// The `ui` cases of the dev workloads, shipped with the tests.
const DEV_UI: &str = include_str!("../../core/tests/workloads/dev-ui.jsonl");

/// Models measured when none is given: the two chat models of the test set.
const DEFAULT_MODELS: [&str; 2] = ["SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"];

#[derive(Args, Debug)]
pub struct BenchStructuredArgs {
    /// GGUF model files (repeatable) [default: SmolLM2-135M and Qwen2.5-0.5B from $TERN_MODEL_DIR]
    #[arg(long, short = 'm', value_name = "PATH")]
    pub model: Vec<PathBuf>,
    /// JSON-lines workload file; its `ui` cases are run [default: the dev `ui` cases]
    #[arg(long, value_name = "FILE")]
    pub workload: Option<PathBuf>,
    /// Worker threads
    #[arg(long, short = 't', default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: u64,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

struct Case {
    id: String,
    max_tokens: usize,
    system: String,
    screen: Screen,
    goal: String,
}

#[derive(Serialize)]
struct CaseResult {
    id: String,
    /// Constrained answer: the whole text is a valid action on the screen.
    constrained_valid: bool,
    constrained_answer: String,
    constrained_tokens: usize,
    /// Free answer: the whole text is a valid action.
    free_valid_whole: bool,
    /// Free answer: its first JSON object is a valid action.
    free_valid_first_object: bool,
    /// Free answer: its first JSON object has a known action and names an element of the screen
    /// (other keys and values not checked).
    free_names_element: bool,
    free_answer: String,
    /// Schema compile time.
    compile_ms: f64,
    /// CPU time of the constraint per token (mask and advance), from the replay.
    constraint_us_per_token: Option<f64>,
    /// CPU time of a decode step (forward pass and sampling) of the free run.
    decode_ms_per_step: Option<f64>,
    /// Wall time of a decode step of the free and of the constrained run.
    free_decode_wall_ms: f64,
    constrained_decode_wall_ms: f64,
}

#[derive(Serialize)]
struct ModelReport {
    model: String,
    vocabulary_index_ms: f64,
    cases: Vec<CaseResult>,
    constrained_valid: usize,
    free_valid_whole: usize,
    free_valid_first_object: usize,
    free_names_element: usize,
    /// Constraint CPU time per token over decode CPU time per step, over all cases.
    overhead_percent: Option<f64>,
}

pub fn run(a: BenchStructuredArgs) -> Result<()> {
    let text = match &a.workload {
        Some(path) => std::fs::read_to_string(path).map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?,
        None => DEV_UI.to_owned(),
    };
    let cases = ui_cases(&text)?;
    if cases.is_empty() {
        return Err(CliError::Usage("the workload has no `ui` cases".into()));
    }
    let models = if a.model.is_empty() { default_models()? } else { a.model.clone() };
    let mut out = Stdout::new();
    let mut reports = Vec::new();
    for path in &models {
        let opts = EngineOptions { threads: Some(a.threads as usize), ..Default::default() };
        let engine = Engine::load(path, opts)?;
        let t0 = Instant::now();
        engine.grammar_vocabulary()?;
        let vocabulary_index_ms = ms(t0.elapsed());
        let mut results = Vec::new();
        for case in &cases {
            let r = run_case(&engine, case)?;
            if !a.json {
                eprintln!("{} {}: {}", file_name(path), r.id, if r.constrained_valid { "valid" } else { "INVALID" });
            }
            results.push(r);
        }
        let count = |f: fn(&CaseResult) -> bool| results.iter().filter(|r| f(r)).count();
        let mean = |f: fn(&CaseResult) -> Option<f64>| {
            let v: Option<Vec<f64>> = results.iter().map(f).collect();
            v.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
        };
        let overhead =
            mean(|r| r.constraint_us_per_token).zip(mean(|r| r.decode_ms_per_step)).map(|(c, d)| 100.0 * c / (d * 1e3));
        reports.push(ModelReport {
            model: file_name(path),
            vocabulary_index_ms,
            constrained_valid: count(|r| r.constrained_valid),
            free_valid_whole: count(|r| r.free_valid_whole),
            free_valid_first_object: count(|r| r.free_valid_first_object),
            free_names_element: count(|r| r.free_names_element),
            overhead_percent: overhead,
            cases: results,
        });
    }
    if a.json {
        let json = serde_json::to_string_pretty(&reports).map_err(|e| CliError::Other(e.to_string()))?;
        return Ok(out.line(&json)?);
    }
    for r in &reports {
        out.line(&format!(
            "\n{} ({} thread(s); vocabulary indexed in {:.0} ms)",
            r.model, a.threads, r.vocabulary_index_ms
        ))?;
        out.line(&format!(
            "{:<6} {:>11} {:>10} {:>12} {:>9} {:>6} {:>10} {:>13} {:>14} {:>6}  constrained answer",
            "case",
            "constrained",
            "free:whole",
            "free:1st-obj",
            "free:elem",
            "tokens",
            "compile ms",
            "constraint us",
            "decode step ms",
            "share"
        ))?;
        for c in &r.cases {
            let share = c.constraint_us_per_token.zip(c.decode_ms_per_step).map(|(u, m)| 100.0 * u / (m * 1e3));
            out.line(&format!(
                "{:<6} {:>11} {:>10} {:>12} {:>9} {:>6} {:>10.1} {:>13} {:>14} {:>6}  {}",
                c.id.trim_start_matches("dev-"),
                yes_no(c.constrained_valid),
                yes_no(c.free_valid_whole),
                yes_no(c.free_valid_first_object),
                yes_no(c.free_names_element),
                c.constrained_tokens,
                c.compile_ms,
                opt(c.constraint_us_per_token, 0),
                opt(c.decode_ms_per_step, 2),
                share.map_or("-".into(), |p| format!("{p:.1}%")),
                c.constrained_answer,
            ))?;
        }
        let n = r.cases.len();
        out.line(&format!(
            "valid actions: constrained {}/{n}, free (whole answer) {}/{n}, free (first JSON object) {}/{n}; \
             free answers naming an element of the screen: {}/{n}",
            r.constrained_valid, r.free_valid_whole, r.free_valid_first_object, r.free_names_element
        ))?;
        if let Some(p) = r.overhead_percent {
            out.line(&format!("constraint cost per token: {p:.1}% of a decode step (CPU time, mean over cases)"))?;
        }
    }
    Ok(())
}

fn run_case(engine: &std::sync::Arc<Engine>, case: &Case) -> Result<CaseResult> {
    let new_session = || {
        let opts = SessionOptions {
            sampling: Some(tern::SamplingOptions::greedy()),
            system_prompt: Some(case.system.clone()),
            max_tokens: case.max_tokens,
            ..Default::default()
        };
        Session::new(engine.clone(), opts)
    };
    let user = ui::user_message(&case.screen, &case.goal);

    let mut free = new_session()?;
    let (free_answer, free_stats, decode_cpu) = answer(&mut free, &user)?;

    let mut constrained = new_session()?;
    let t0 = Instant::now();
    let grammar = engine.compile_grammar(&ui::action_grammar(&case.screen))?;
    let compile_ms = ms(t0.elapsed());
    constrained.set_grammar(Some(&ui::action_grammar(&case.screen)))?;
    let (constrained_answer, stats, _) = answer(&mut constrained, &user)?;
    let ids = engine.tokenizer().encode(&constrained_answer, false, false)?;
    let constraint_cpu = replay(&grammar, &ids, engine.info().vocab_size)?;

    let whole = |text: &str| {
        serde_json::from_str::<ui::UiAction>(text).ok().is_some_and(|a| ui::validate(&case.screen, &a).is_ok())
    };
    let steps = free_stats.generated_tokens.saturating_sub(1).max(1);
    Ok(CaseResult {
        id: case.id.clone(),
        constrained_valid: whole(&constrained_answer),
        constrained_tokens: stats.generated_tokens,
        free_valid_whole: whole(&free_answer),
        free_valid_first_object: ui::parse_action(&case.screen, &free_answer).is_ok(),
        free_names_element: names_element(&case.screen, &free_answer),
        compile_ms,
        constraint_us_per_token: constraint_cpu.map(|t| t.as_secs_f64() * 1e6 / ids.len().max(1) as f64),
        decode_ms_per_step: decode_cpu.map(|t| t.as_secs_f64() * 1e3 / steps as f64),
        free_decode_wall_ms: wall_ms_per_step(&free_stats),
        constrained_decode_wall_ms: wall_ms_per_step(&stats),
        constrained_answer,
        free_answer,
    })
}

/// Runs `tokens` through a fresh constraint as a session would (mask, then advance, per token);
/// the CPU time it took, where the OS reports it.
fn replay(grammar: &CompiledGrammar, tokens: &[u32], vocab: usize) -> Result<Option<Duration>> {
    let mut logits = vec![0.0f32; vocab];
    let t0 = thread_cpu_time();
    let mut c = grammar.start();
    for &t in tokens {
        c.mask_logits(&mut logits);
        c.accept(t)?;
    }
    Ok(t0.zip(thread_cpu_time()).map(|(a, b)| b.saturating_sub(a)))
}

/// The loosest reading of a free answer: its first JSON object has a known `action` and, unless
/// it is `back`, an `id` that is on the screen.
fn names_element(screen: &Screen, answer: &str) -> bool {
    let Some(start) = answer.find('{') else { return false };
    let first = serde_json::Deserializer::from_str(&answer[start..]).into_iter::<serde_json::Value>().next();
    let Some(Ok(v)) = first else { return false };
    let id = v["id"].as_u64();
    match v["action"].as_str() {
        Some("back") => true,
        Some("tap" | "type" | "scroll") => id.is_some_and(|id| screen.elements.iter().any(|e| u64::from(e.id) == id)),
        _ => false,
    }
}

/// One answer: its text, stats, and the thread CPU time of its decode steps (all events after the
/// first, which includes the prefill).
fn answer(session: &mut Session, user: &str) -> Result<(String, Stats, Option<Duration>)> {
    let mut text = String::new();
    let mut decode_start = None;
    for event in session.send(user)? {
        match event? {
            Event::Token { text: t, .. } => {
                text.push_str(&t);
                if decode_start.is_none() {
                    decode_start = Some(thread_cpu_time());
                }
            }
            Event::Done(stats) => {
                let cpu = decode_start.flatten().zip(thread_cpu_time()).map(|(a, b)| b.saturating_sub(a));
                return Ok((text, stats, cpu));
            }
        }
    }
    Err(CliError::Other("the generation ended without stats".into()))
}

/// CPU time this thread has run, where the OS reports it.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

fn wall_ms_per_step(s: &Stats) -> f64 {
    if s.decode_tokens_per_s > 0.0 {
        1e3 / s.decode_tokens_per_s
    } else {
        0.0
    }
}

fn ui_cases(text: &str) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |what: &str| CliError::Usage(format!("workload line {}: {what}", i + 1));
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| bad(&e.to_string()))?;
        if v["task"] != "ui" {
            continue;
        }
        let messages: Vec<Message> = serde_json::from_value(v["messages"].clone()).map_err(|e| bad(&e.to_string()))?;
        let [system, user] = messages.as_slice() else {
            return Err(bad("a ui case has a system and a user message"));
        };
        let (screen, goal) = user
            .content
            .strip_prefix("Screen:\n")
            .and_then(|rest| rest.split_once("\n\nGoal: "))
            .ok_or_else(|| bad("the user message is not `Screen:\\n<json>\\n\\nGoal: <goal>`"))?;
        cases.push(Case {
            id: v["id"].as_str().unwrap_or("?").to_owned(),
            max_tokens: v["max_new_tokens"].as_u64().unwrap_or(96) as usize,
            system: system.content.clone(),
            screen: serde_json::from_str(screen).map_err(|e| bad(&format!("screen: {e}")))?,
            goal: goal.to_owned(),
        });
    }
    Ok(cases)
}

fn default_models() -> Result<Vec<PathBuf>> {
    let dir = match std::env::var_os("TERN_MODEL_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/tern/models"),
    };
    let paths: Vec<PathBuf> = DEFAULT_MODELS.iter().map(|f| dir.join(f)).collect();
    if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
        return Err(CliError::Other(format!(
            "{} is missing: run `cargo xtask models --all`, or pass --model PATH",
            missing.display()
        )));
    }
    Ok(paths)
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
