//! `tern bench-workloads`: a workloads file (JSON lines: `id`, `task`, `max_new_tokens`,
//! `messages`) through one model, plain and speculative, greedy.
//!
//! Each case runs `--reps` times each way, interleaved (plain, speculative, speculative, plain,
//! ...) so that a machine shared with other work slows both alike, every run in a fresh session
//! (the acceptance model starts from its priors each time; the engine's measured pass costs
//! carry over from case to case, as they would in an app). Reported per case: decode tokens/s
//! both ways (medians), their ratio, tokens per decode pass, the draft-length histogram, and
//! whether every run produced the same tokens; per task: median and lowest ratio, median
//! tokens per pass. Optional: the verification cost curve cost(n) / cost(1), and llama.cpp's
//! prompt-lookup decoding on the same prompt tokens (through llama-cpp-python).
//!
//! With the cost curve, each case also gets its hindsight bound: the speed-up had every pass
//! carried exactly the drafted tokens it accepted (the same drafts, a controller that knew the
//! outcome), at the measured costs. Run with `--fixed-draft`, it bounds what any controller
//! can make of the drafter's trees on this device. And its copy bound: the speed-up had every
//! pass drafted the longest run of the answer that the context (prompt, answer so far) holds
//! at that point, with draft lengths chosen in hindsight to spend least, at the same costs:
//! what drafts copied from the context could reach at best on this device, whatever the
//! drafter. Between the two, its tree bound: the same cheapest way through the answer when the
//! pass at each position may draft only what the drafter's own tree there (`DraftLimits::AUTO`'s
//! bounds, no depth cap) held of the answer: what a controller that knew which path of each
//! tree the model takes could make of the drafter.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tern::model::{Logits, Scratch};
use tern::speculative::cost::{CostCurve, MAX_BATCH};
use tern::{
    DraftLimits, Engine, Event, HistoryOptions, HistoryScope, HistoryStore, Message, Role, Session, SessionOptions,
    Speculation, SpeculationOptions, Stats,
};

use crate::args::{load, Loaded, ModelArgs};
use crate::bench::median;
use crate::drafts;
use crate::error::{CliError, Result};
use crate::output::Stdout;

/// Which cases of which workloads file.
#[derive(Args, Debug)]
pub struct CaseSelection {
    /// Workloads file (JSON lines with id, task, max_new_tokens, messages)
    #[arg(long, value_name = "FILE")]
    pub workloads: PathBuf,
    /// Only these tasks (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub tasks: Vec<String>,
    /// Only these case ids (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Cap each case's max_new_tokens
    #[arg(long, value_name = "N")]
    pub max_new_tokens: Option<usize>,
}

/// A model over some cases of a workloads file: the arguments `bench-workloads` and
/// `acceptance-data` share.
#[derive(Args, Debug)]
pub struct WorkloadRun {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub selection: CaseSelection,
    /// Worker threads [default: chosen by the engine]
    #[arg(long, short = 't', value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
}

impl WorkloadRun {
    /// The selected cases, and the model loaded to run them.
    pub(crate) fn start(&self) -> Result<(Vec<Case>, Loaded)> {
        let cases = read_cases(&self.selection)?;
        Ok((cases, load(&self.model, self.threads.map(|t| t as usize), None)?))
    }
}

#[derive(Args, Debug)]
pub struct BenchWorkloadsArgs {
    #[command(flatten)]
    pub run: WorkloadRun,
    /// Timed runs of each case, each way
    #[arg(long, short = 'r', default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub repetitions: u64,
    /// Verify every draft the drafter finds, up to N tokens (no adaptive controller)
    #[arg(long, value_name = "N")]
    pub fixed_draft: Option<usize>,
    /// Prompt positions calibrated during prefill (0 = off) [default: the session default]
    #[arg(long, value_name = "N")]
    pub calibration: Option<usize>,
    /// Measure the cost of verifying n tokens, n = 1..=N, at each case's context depth (and price
    /// its bounds with it)
    #[arg(long, value_name = "N")]
    pub cost_curve: Option<usize>,
    /// Price every pass with each case's measured cost curve (pinned while the case runs) and
    /// report the priced speed-up: tokens over summed cost(n) / cost(1). The controller's choices
    /// then follow the drafts alone, not timing noise, so drafting policies compare exactly
    #[arg(long)]
    pub priced: bool,
    /// With --priced: read each case's cost curve from FILE where it holds one, measure and add
    /// the others (so that later runs price alike)
    #[arg(long, value_name = "FILE", requires = "priced")]
    pub curves: Option<PathBuf>,
    /// With --priced: price every pass as if its cost over a single-token pass were F times
    /// the measured one, cost(n) = 1 + F (cost(n) - 1): what cheaper multi-token passes would
    /// buy with the same drafts (the controller plans with the scaled curve too)
    #[arg(long, value_name = "F", requires = "priced", value_parser = extra_cost_scale)]
    pub extra_cost: Option<f64>,
    /// Also run llama.cpp plain and with prompt-lookup decoding on the same prompt tokens,
    /// through this script (llama-cpp-python)
    #[arg(long, value_name = "SCRIPT", num_args = 0..=1, default_missing_value = "scripts/llama_lookup.py")]
    pub llama_cpp: Option<PathBuf>,
    /// Give each task a history scope that holds the answers of the task's earlier cases (in
    /// file order): what an assistant that keeps its past answers per task drafts from. The
    /// first case of each task starts with none; a case never sees its own answer
    #[arg(long)]
    pub history: bool,
    /// Print one JSON object per case (then one per task) instead of tables
    #[arg(long)]
    pub json: bool,
}

#[derive(Deserialize)]
pub(crate) struct Case {
    pub(crate) id: String,
    pub(crate) task: String,
    max_new_tokens: usize,
    messages: Vec<WireMessage>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    content: String,
}

#[derive(Serialize, Clone)]
struct CaseReport {
    id: String,
    task: String,
    prompt_tokens: usize,
    generated_tokens: usize,
    plain_tps: f64,
    spec_tps: f64,
    ratio: f64,
    tokens_per_step: f64,
    /// Accepted drafted tokens per pass that carried a draft.
    accepted_per_verify: f64,
    /// Speed-up had each pass carried exactly the drafted tokens it accepted (needs the cost
    /// curve).
    #[serde(skip_serializing_if = "Option::is_none")]
    hindsight_bound: Option<f64>,
    /// Speed-up had every pass drafted the answer's copyable run exactly (needs the cost curve).
    #[serde(skip_serializing_if = "Option::is_none")]
    copy_bound: Option<f64>,
    /// Speed-up had every pass drafted what the drafter's full tree held of the answer there
    /// (needs the cost curve).
    #[serde(skip_serializing_if = "Option::is_none")]
    tree_bound: Option<f64>,
    /// Tokens over the summed cost(n) / cost(1) of the passes made (with --priced).
    #[serde(skip_serializing_if = "Option::is_none")]
    priced: Option<f64>,
    /// cost(n) / cost(1) for n = 1, 2, ... at this case's prompt depth, which the bounds are
    /// priced with.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_ratio: Option<Vec<f64>>,
    /// The prompt as tokens (the llama.cpp comparison runs the same ones).
    #[serde(skip)]
    prompt_ids: Vec<u32>,
    /// For each answer position, the longest run of the answer from there that the context held.
    #[serde(skip)]
    copy_runs: Vec<usize>,
    /// The greedy answer, as tokens and as text (added to the task's history with --history).
    #[serde(skip)]
    answer_ids: Vec<u32>,
    #[serde(skip)]
    answer_text: String,
    verify_steps: usize,
    decode_passes: usize,
    drafted_tokens: usize,
    accepted_tokens: usize,
    drafting_ms: f64,
    draft_lengths: Vec<usize>,
    accepted_lengths: Vec<usize>,
    identical: bool,
    plain_prefill_tps: f64,
    spec_prefill_tps: f64,
    calibrated_positions: usize,
    plain_tps_runs: Vec<f64>,
    spec_tps_runs: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_plain_tps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_lookup_tps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_lookup_ratio: Option<f64>,
}

#[derive(Serialize)]
struct TaskReport {
    summary_of_task: String,
    cases: usize,
    median_ratio: f64,
    min_ratio: f64,
    median_tokens_per_step: f64,
    /// The task's tokens over its passes, all cases pooled (long answers weigh more).
    pooled_tokens_per_step: f64,
    /// Median over cases of the tokens a pass that carried a draft produced.
    median_tokens_per_verify: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_hindsight_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_copy_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_tree_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_priced: Option<f64>,
    /// Median over cases of the speculative prefill's time over the plain one's (calibration's
    /// cost, which the decode speed-up does not count).
    median_prefill_cost: f64,
    all_identical: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_lookup_median_ratio: Option<f64>,
}

pub fn run(a: BenchWorkloadsArgs) -> Result<()> {
    let (cases, loaded) = a.run.start()?;
    let engine = loaded.engine.clone();
    let mut out = Stdout::new();
    let model_name = loaded.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());

    let spec_opts = {
        let mut o = SpeculationOptions::default();
        if let Some(n) = a.fixed_draft {
            o.mode = Speculation::Limits(DraftLimits { max_draft_tokens: n, adaptive: false, ..DraftLimits::AUTO });
        }
        if let Some(c) = a.calibration {
            o.calibration_positions = c;
        }
        o.validate()?;
        o
    };

    let bar = if a.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(cases.len() as u64 * a.repetitions * 2);
        if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}") {
            bar.set_style(style);
        }
        bar
    };

    if !a.json {
        out.line(&format!(
            "{model_name}: {} threads, {} kernels, {} runs each way per case, interleaved",
            engine.info().threads,
            engine.info().kernels,
            a.repetitions
        ))?;
        if let Some(scale) = a.extra_cost {
            out.line(&format!("priced with each pass's measured cost over a single-token pass scaled by {scale}"))?;
        }
    }
    let curve_size = a.cost_curve.or(a.priced.then_some(DEFAULT_CURVE_SIZE)).map(|n| n.clamp(1, MAX_BATCH - 1));
    let curve_reps = a.repetitions as usize * 2 + 1;
    let mut curves: BTreeMap<String, CostCurveReport> = match &a.curves {
        Some(path) if path.exists() => serde_json::from_str(&std::fs::read_to_string(path)?)
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?,
        _ => BTreeMap::new(),
    };
    // Per task, the earlier cases' answers (--history), in a store of this run's own.
    let history = if a.history {
        let dir = std::env::temp_dir().join(format!("tern-bench-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Some(HistoryStore::open(&dir, HistoryOptions::default())?)
    } else {
        None
    };
    let mut reports = Vec::new();
    for case in &cases {
        bar.set_message(case.id.clone());
        let mut spec_opts = spec_opts.clone();
        if let Some(store) = &history {
            spec_opts.history =
                Some(HistoryScope { record_answers: false, ..HistoryScope::new(store.clone(), &case.task) });
        }
        // Each case's bounds at its own depth: how much a pass of n tokens costs next to one
        // depends on how much of it is attention over the cache.
        let mut curve = None;
        if let (true, Some(n)) = (a.priced, curve_size) {
            if !curves.contains_key(&case.id) {
                let c = measure_cost_curve(&engine, &prompt_ids(&engine, case)?, n, curve_reps)?;
                curves.insert(case.id.clone(), c);
            }
            let c = match a.extra_cost {
                Some(scale) => curves[&case.id].with_extra_cost(scale),
                None => curves[&case.id].clone(),
            };
            engine.verify_costs().pin(Some(c.pinned()));
            curve = Some(c);
        }
        // The history the case's sessions draft from, for its tree bound.
        let sources = match (&history, curve_size) {
            (Some(store), Some(_)) => store.token_ids(&case.task, engine.tokenizer())?,
            _ => Vec::new(),
        };
        let run = run_case(&engine, case, &spec_opts, a.repetitions as usize, &bar);
        engine.verify_costs().pin(None);
        let mut r = run?;
        if let Some(store) = &history {
            store.add(&case.task, &r.answer_text)?;
        }
        if let (None, Some(n)) = (&curve, curve_size) {
            curve = Some(measure_cost_curve(&engine, &r.prompt_ids, n, curve_reps)?);
        }
        if let Some(c) = curve {
            if reports.is_empty() {
                print_curve(&mut out, &c, r.prompt_ids.len(), a.json)?;
            }
            r.hindsight_bound = Some(hindsight_bound(&r.accepted_lengths, &c.ratio));
            r.copy_bound = Some(copy_bound(&r.copy_runs, &c.ratio));
            let held = drafts::tree_runs(&engine, &sources, &r.prompt_ids, &r.answer_ids)?;
            r.tree_bound = Some(copy_bound(&held, &c.ratio));
            r.priced = a.priced.then(|| priced(&r.draft_lengths, &r.accepted_lengths, &c.ratio));
            r.cost_ratio = Some(c.ratio);
        }
        if !a.json {
            print_case_line(&mut out, &r, reports.is_empty())?;
        }
        reports.push(r);
    }
    bar.finish_and_clear();
    if let Some(store) = &history {
        let _ = std::fs::remove_dir_all(store.dir());
    }
    if let Some(path) = &a.curves {
        std::fs::write(path, serde_json::to_string(&curves).map_err(|e| CliError::Other(e.to_string()))?)?;
    }

    if let Some(script) = &a.llama_cpp {
        // Tern's own figures are printed even when the comparison cannot run.
        if let Err(e) = add_llama_cpp(&engine, &loaded.path, script, &cases, &mut reports, a.repetitions as usize) {
            eprintln!("llama.cpp comparison skipped: {e}");
        }
    }

    let tasks = summarise(&reports);
    if a.json {
        for r in &reports {
            out.line(&serde_json::to_string(r).map_err(|e| CliError::Other(e.to_string()))?)?;
        }
        for t in &tasks {
            out.line(&serde_json::to_string(t).map_err(|e| CliError::Other(e.to_string()))?)?;
        }
        return Ok(());
    }
    if a.llama_cpp.is_some() {
        out.line("")?;
        out.line("| case | llama.cpp plain t/s | llama.cpp lookup t/s | lookup ratio | Tern ratio |")?;
        out.line("|---|---|---|---|---|")?;
        for r in &reports {
            out.line(&format!(
                "| {} | {:.1} | {:.1} | {:.2} | {:.2} |",
                r.id,
                r.llama_plain_tps.unwrap_or(f64::NAN),
                r.llama_lookup_tps.unwrap_or(f64::NAN),
                r.llama_lookup_ratio.unwrap_or(f64::NAN),
                r.ratio
            ))?;
        }
    }
    out.line("")?;
    out.line(
        "| task | cases | median speed-up | lowest | median tokens/pass | pooled tokens/pass \
         | median tokens/verifying pass \
         | hindsight bound | tree bound | copy bound | priced | prefill time, speculative / plain | identical \
         | llama.cpp lookup median |",
    )?;
    out.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    let ratio_cell = |b: Option<f64>| b.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x"));
    for t in &tasks {
        out.line(&format!(
            "| {} | {} | {:.2}x | {:.2}x | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {:.2}x | {} | {} |",
            t.summary_of_task,
            t.cases,
            t.median_ratio,
            t.min_ratio,
            t.median_tokens_per_step,
            t.pooled_tokens_per_step,
            t.median_tokens_per_verify,
            ratio_cell(t.median_hindsight_bound),
            ratio_cell(t.median_tree_bound),
            ratio_cell(t.median_copy_bound),
            ratio_cell(t.median_priced),
            t.median_prefill_cost,
            if t.all_identical { "yes" } else { "NO" },
            ratio_cell(t.llama_lookup_median_ratio)
        ))?;
    }
    Ok(())
}

fn read_cases(a: &CaseSelection) -> Result<Vec<Case>> {
    let text = std::fs::read_to_string(&a.workloads)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", a.workloads.display())))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let mut c: Case = serde_json::from_str(line)
            .map_err(|e| CliError::Usage(format!("{} line {}: {e}", a.workloads.display(), n + 1)))?;
        if !a.tasks.is_empty() && !a.tasks.contains(&c.task) || !a.cases.is_empty() && !a.cases.contains(&c.id) {
            continue;
        }
        if let Some(cap) = a.max_new_tokens {
            c.max_new_tokens = c.max_new_tokens.min(cap);
        }
        if c.max_new_tokens == 0 || !c.messages.iter().any(|m| m.role == "user") {
            return Err(CliError::Usage(format!("case {}: needs max_new_tokens > 0 and a user message", c.id)));
        }
        cases.push(c);
    }
    if cases.is_empty() {
        return Err(CliError::Usage("no cases selected".into()));
    }
    Ok(cases)
}

/// The case's conversation before its last user message, and that message.
fn conversation(case: &Case) -> Result<(Option<String>, Vec<Message>, String)> {
    let mut system = None;
    let mut earlier = Vec::new();
    let last_user = case.messages.iter().rposition(|m| m.role == "user").unwrap_or(0);
    for (i, m) in case.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" if i == 0 => {
                system = Some(m.content.clone());
                continue;
            }
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => return Err(CliError::Usage(format!("case {}: unsupported role `{other}`", case.id))),
        };
        if i < last_user {
            earlier.push(Message::new(role, m.content.clone()));
        }
    }
    Ok((system, earlier, case.messages[last_user].content.clone()))
}

fn session(engine: &Arc<Engine>, case: &Case, speculation: SpeculationOptions) -> Result<(Session, String)> {
    let (system_prompt, earlier, user) = conversation(case)?;
    let opts = SessionOptions { system_prompt, max_tokens: case.max_new_tokens, speculation, ..Default::default() };
    let mut s = Session::new(engine.clone(), opts)?;
    s.set_messages(earlier);
    Ok((s, user))
}

pub(crate) fn prompt_ids(engine: &Arc<Engine>, case: &Case) -> Result<Vec<u32>> {
    let (mut s, user) = session(engine, case, SpeculationOptions::off())?;
    let generation = s.send(&user)?;
    Ok(generation.prompt().to_vec())
}

/// One answer: its tokens and stats.
pub(crate) fn answer(engine: &Arc<Engine>, case: &Case, speculation: SpeculationOptions) -> Result<(Vec<u32>, Stats)> {
    let (mut s, user) = session(engine, case, speculation)?;
    let mut ids = Vec::new();
    for event in s.send(&user)? {
        match event? {
            Event::Token { ids: t, .. } => ids.extend(t),
            Event::Done(stats) => return Ok((ids, stats)),
        }
    }
    Err(CliError::Other("generation ended without stats".into()))
}

fn run_case(
    engine: &Arc<Engine>,
    case: &Case,
    spec_opts: &SpeculationOptions,
    reps: usize,
    bar: &ProgressBar,
) -> Result<CaseReport> {
    let mut plain_runs = Vec::new();
    let mut spec_runs = Vec::new();
    let mut reference: Option<Vec<u32>> = None;
    let mut identical = true;
    let mut spec_first: Option<Stats> = None;
    let mut plain_first: Option<Stats> = None;
    for rep in 0..reps {
        // plain, spec, spec, plain, ...: each way gets the earlier slot as often as the later.
        let order = if rep % 2 == 0 { [false, true] } else { [true, false] };
        for speculate in order {
            let opts = if speculate { spec_opts.clone() } else { SpeculationOptions::off() };
            let (ids, stats) = answer(engine, case, opts)?;
            match &reference {
                None => reference = Some(ids),
                Some(r) => identical &= *r == ids,
            }
            if speculate {
                spec_runs.push(stats.decode_tokens_per_s);
                spec_first.get_or_insert(stats);
            } else {
                plain_runs.push(stats.decode_tokens_per_s);
                plain_first.get_or_insert(stats);
            }
            bar.inc(1);
        }
    }
    let (Some(spec), Some(plain), Some(answer)) = (spec_first, plain_first, reference) else {
        return Err(CliError::Other("no runs".into()));
    };
    let prompt_ids = prompt_ids(engine, case)?;
    let copy_runs = copy_runs(&prompt_ids, &answer);
    let answer_text = engine.tokenizer().decode(&answer, true);
    let (plain_tps, spec_tps) = (median(&plain_runs), median(&spec_runs));
    let sp = &spec.speculation;
    Ok(CaseReport {
        id: case.id.clone(),
        task: case.task.clone(),
        prompt_tokens: spec.prompt_tokens,
        generated_tokens: spec.generated_tokens,
        plain_tps,
        spec_tps,
        ratio: spec_tps / plain_tps,
        tokens_per_step: sp.tokens_per_step,
        accepted_per_verify: if sp.verify_steps == 0 {
            0.0
        } else {
            sp.accepted_tokens as f64 / sp.verify_steps as f64
        },
        hindsight_bound: None,
        copy_bound: None,
        tree_bound: None,
        priced: None,
        cost_ratio: None,
        prompt_ids,
        copy_runs,
        answer_ids: answer,
        answer_text,
        verify_steps: sp.verify_steps,
        decode_passes: sp.decode_passes,
        drafted_tokens: sp.drafted_tokens,
        accepted_tokens: sp.accepted_tokens,
        drafting_ms: sp.drafting_time.as_secs_f64() * 1e3,
        draft_lengths: sp.draft_lengths.clone(),
        accepted_lengths: sp.accepted_lengths.clone(),
        identical,
        plain_prefill_tps: plain.prefill_tokens_per_s,
        spec_prefill_tps: spec.prefill_tokens_per_s,
        calibrated_positions: sp.calibrated_positions,
        plain_tps_runs: plain_runs,
        spec_tps_runs: spec_runs,
        llama_plain_tps: None,
        llama_lookup_tps: None,
        llama_lookup_ratio: None,
    })
}

fn print_case_line(out: &mut Stdout, r: &CaseReport, header: bool) -> Result<()> {
    if header {
        out.line("| case | task | plain t/s | spec t/s | ratio | tokens/pass | drafted/accepted | identical | draft lengths |")?;
        out.line("|---|---|---|---|---|---|---|---|---|")?;
    }
    out.line(&format!(
        "| {} | {} | {:.1} | {:.1} | {:.2}x | {:.2} | {}/{} | {} | {} |",
        r.id,
        r.task,
        r.plain_tps,
        r.spec_tps,
        r.ratio,
        r.tokens_per_step,
        r.drafted_tokens,
        r.accepted_tokens,
        if r.identical { "yes" } else { "NO" },
        histogram(&r.draft_lengths)
    ))?;
    Ok(())
}

/// "0:12 3:4 8:1": count of passes per drafted length, lengths that occurred only.
fn histogram(h: &[usize]) -> String {
    h.iter().enumerate().filter(|(_, &c)| c > 0).map(|(n, c)| format!("{n}:{c}")).collect::<Vec<_>>().join(" ")
}

fn summarise(reports: &[CaseReport]) -> Vec<TaskReport> {
    let mut by_task: BTreeMap<&str, Vec<&CaseReport>> = BTreeMap::new();
    for r in reports {
        by_task.entry(&r.task).or_default().push(r);
    }
    by_task
        .into_iter()
        .map(|(task, rs)| {
            let ratios: Vec<f64> = rs.iter().map(|r| r.ratio).collect();
            let lookups: Vec<f64> = rs.iter().filter_map(|r| r.llama_lookup_ratio).collect();
            let bounds: Vec<f64> = rs.iter().filter_map(|r| r.hindsight_bound).collect();
            let copy_bounds: Vec<f64> = rs.iter().filter_map(|r| r.copy_bound).collect();
            let tree_bounds: Vec<f64> = rs.iter().filter_map(|r| r.tree_bound).collect();
            let priced: Vec<f64> = rs.iter().filter_map(|r| r.priced).collect();
            let prefill_costs: Vec<f64> = rs.iter().map(|r| r.plain_prefill_tps / r.spec_prefill_tps).collect();
            let verifying: Vec<f64> =
                rs.iter().filter(|r| r.verify_steps > 0).map(|r| 1.0 + r.accepted_per_verify).collect();
            TaskReport {
                summary_of_task: task.to_owned(),
                cases: rs.len(),
                median_ratio: median(&ratios),
                min_ratio: ratios.iter().copied().fold(f64::INFINITY, f64::min),
                median_tokens_per_step: median(&rs.iter().map(|r| r.tokens_per_step).collect::<Vec<_>>()),
                pooled_tokens_per_step: {
                    let passes: usize = rs.iter().map(|r| r.decode_passes).sum();
                    let tokens: f64 = rs.iter().map(|r| r.tokens_per_step * r.decode_passes as f64).sum();
                    if passes == 0 {
                        0.0
                    } else {
                        tokens / passes as f64
                    }
                },
                median_tokens_per_verify: if verifying.is_empty() { 0.0 } else { median(&verifying) },
                median_hindsight_bound: (!bounds.is_empty()).then(|| median(&bounds)),
                median_copy_bound: (!copy_bounds.is_empty()).then(|| median(&copy_bounds)),
                median_tree_bound: (!tree_bounds.is_empty()).then(|| median(&tree_bounds)),
                median_priced: (!priced.is_empty()).then(|| median(&priced)),
                median_prefill_cost: median(&prefill_costs),
                all_identical: rs.iter().all(|r| r.identical),
                llama_lookup_median_ratio: (!lookups.is_empty()).then(|| median(&lookups)),
            }
        })
        .collect()
}

/// `--extra-cost`: a fraction in (0, 1] (a pass of n tokens never costs less than one token).
fn extra_cost_scale(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!("{s:?} is not a fraction in (0, 1]")),
    }
}

/// Cost-curve size of --priced runs without --cost-curve.
const DEFAULT_CURVE_SIZE: usize = 17;

/// Single-token passes in a row per round of the cost curve; the last one is timed.
const SINGLE_RUN: usize = 8;

#[derive(Serialize, Deserialize, Clone)]
struct CostCurveReport {
    cost_curve_depth: usize,
    single_ms: f64,
    /// cost(n) / cost(1) for n = 1, 2, ...
    ratio: Vec<f64>,
}

/// The cost of one forward pass over a chain of n tokens after `prompt`, relative to one
/// token, n = 1..=max: the curve the speculation controller learns online, measured directly
/// (minimum over `reps` interleaved rounds: interference only ever adds time).
///
/// One token is timed as plain decoding runs it, at the end of [`SINGLE_RUN`] single-token
/// passes in a row: a single-token pass right after a longer one (or any pause) costs more on
/// some machines and only regains its speed over a few passes (on a shared-cache Xeon, a
/// SmolLM2 pass after a 17-token one 15-40% more; `pass_cost` with sizes `1,1,1,1,1,1,1,1,17`
/// shows the recovery), and timed after the round's longest pass it made every ratio, and the
/// bounds priced with them, too favourable.
fn measure_cost_curve(engine: &Arc<Engine>, prompt: &[u32], max: usize, reps: usize) -> Result<CostCurveReport> {
    let model = engine.model();
    let mut kv = model.new_kv_cache(prompt.len() + max + 1);
    let mut scratch = Scratch::default();
    model.forward(engine.pool(), &mut kv, &mut scratch, prompt, Logits::None)?;
    let base = kv.len();
    let tokens: Vec<u32> = prompt.iter().copied().cycle().skip(1).take(max).collect();
    let parents: Vec<Option<usize>> = (0..max).map(|i| i.checked_sub(1)).collect();
    // One pass over the first n tokens, its seconds; the cache is left as it was.
    let mut pass = |n: usize| -> Result<f64> {
        let t0 = Instant::now();
        model.forward_tree(engine.pool(), &mut kv, &mut scratch, &tokens[..n], &parents[..n], Logits::All)?;
        let elapsed = t0.elapsed().as_secs_f64();
        kv.truncate(base);
        Ok(elapsed)
    };
    let mut best = vec![f64::INFINITY; max];
    for _ in 0..reps {
        for n in 1..=max {
            if n == 1 {
                for _ in 1..SINGLE_RUN {
                    pass(1)?;
                }
            }
            best[n - 1] = best[n - 1].min(pass(n)?);
        }
    }
    Ok(CostCurveReport {
        cost_curve_depth: base,
        single_ms: best[0] * 1e3,
        ratio: best.iter().map(|t| t / best[0]).collect(),
    })
}

impl CostCurveReport {
    /// The curve with every size's cost over a single token scaled by `scale`.
    fn with_extra_cost(&self, scale: f64) -> CostCurveReport {
        CostCurveReport { ratio: self.ratio.iter().map(|r| 1.0 + scale * (r - 1.0)).collect(), ..self.clone() }
    }

    /// The curve as the controller sees it, every size measured.
    fn pinned(&self) -> CostCurve {
        CostCurve {
            measured: vec![true; self.ratio.len()],
            ratio: self.ratio.clone(),
            single: Some(std::time::Duration::from_secs_f64(self.single_ms / 1e3)),
        }
    }
}

/// cost(n) / cost(1) from the measured `ratio` (n = 1, 2, ...); past the curve it goes on
/// along its last step.
fn cost_of(ratio: &[f64], n: usize) -> f64 {
    match ratio {
        [] => 1.0,
        [r] => *r,
        _ if n <= ratio.len() => ratio[n - 1],
        _ => {
            let (last, before) = (ratio[ratio.len() - 1], ratio[ratio.len() - 2]);
            last + (last - before).max(0.0) * (n - ratio.len()) as f64
        }
    }
}

/// Tokens over cost, in single-token passes, had each pass carried only the `a` drafted
/// tokens it accepted: `accepted[a]` passes took `a + 1` tokens at cost(a + 1) each.
fn hindsight_bound(accepted: &[usize], ratio: &[f64]) -> f64 {
    let (tokens, passes) = accepted.iter().enumerate().fold((0.0, 0.0), |(t, p), (a, &count)| {
        (t + (count * (a + 1)) as f64, p + count as f64 * cost_of(ratio, a + 1))
    });
    if passes == 0.0 {
        1.0
    } else {
        tokens / passes
    }
}

/// Tokens over cost, in single-token passes, of the passes made: `drafted[n]` passes carried
/// n drafted tokens (cost(n + 1) each), `accepted[a]` passes took a + 1 tokens.
fn priced(drafted: &[usize], accepted: &[usize], ratio: &[f64]) -> f64 {
    let tokens: usize = accepted.iter().enumerate().map(|(a, &count)| count * (a + 1)).sum();
    let cost: f64 = drafted.iter().enumerate().map(|(n, &count)| count as f64 * cost_of(ratio, n + 1)).sum();
    if cost == 0.0 {
        1.0
    } else {
        tokens as f64 / cost
    }
}

/// For each position i of `answer`, the longest run `answer[i..i + k]` that occurs in the
/// context a drafter had there: the prompt, then the answer before i.
pub(crate) fn copy_runs(prompt: &[u32], answer: &[u32]) -> Vec<usize> {
    let context: Vec<u32> = prompt.iter().chain(answer).copied().collect();
    (0..answer.len())
        .map(|i| {
            let (seen, rest) = (&context[..prompt.len() + i], &answer[i..]);
            (0..seen.len()).map(|p| seen[p..].iter().zip(rest).take_while(|(a, b)| a == b).count()).max().unwrap_or(0)
        })
        .collect()
}

/// Tokens over cost, in single-token passes, of the cheapest way through the answer when the
/// pass at position i may draft any d ≤ `runs[i]` tokens (all of them accepted) and takes
/// d + 1 tokens at cost(d + 1). Drafts stay below [`MAX_BATCH`], as [`DraftLimits`] does.
fn copy_bound(runs: &[usize], ratio: &[f64]) -> f64 {
    let n = runs.len();
    // least[i]: the least cost of tokens i.. .
    let mut least = vec![0.0; n + 1];
    for i in (0..n).rev() {
        least[i] = (0..=runs[i].min(n - 1 - i).min(MAX_BATCH - 1))
            .map(|d| cost_of(ratio, d + 1) + least[i + d + 1])
            .fold(f64::INFINITY, f64::min);
    }
    if n == 0 {
        1.0
    } else {
        n as f64 / least[0]
    }
}

fn print_curve(out: &mut Stdout, c: &CostCurveReport, depth: usize, json: bool) -> Result<()> {
    if json {
        return Ok(out.line(&serde_json::to_string(c).map_err(|e| CliError::Other(e.to_string()))?)?);
    }
    out.line(&format!("verification cost at depth {depth}: one token {:.2} ms; cost(n)/cost(1):", c.single_ms))?;
    let cells: Vec<String> = c.ratio.iter().enumerate().map(|(i, r)| format!("{}:{r:.2}", i + 1)).collect();
    for chunk in cells.chunks(8) {
        out.line(&format!("  {}", chunk.join("  ")))?;
    }
    Ok(())
}

#[derive(Serialize)]
struct LlamaCase<'a> {
    id: &'a str,
    prompt_ids: &'a [u32],
    max_new_tokens: usize,
}

#[derive(Deserialize)]
struct LlamaResult {
    id: String,
    plain_tps: f64,
    lookup_tps: f64,
}

/// Runs the llama-cpp-python script on the same prompt tokens and adds its figures.
fn add_llama_cpp(
    engine: &Arc<Engine>,
    model: &std::path::Path,
    script: &std::path::Path,
    cases: &[Case],
    reports: &mut [CaseReport],
    reps: usize,
) -> Result<()> {
    let mut input = String::new();
    // The reports are in the cases' order.
    for (c, r) in cases.iter().zip(reports.iter()) {
        let line = LlamaCase { id: &c.id, prompt_ids: &r.prompt_ids, max_new_tokens: c.max_new_tokens };
        input.push_str(&serde_json::to_string(&line).map_err(|e| CliError::Other(e.to_string()))?);
        input.push('\n');
    }
    let path = std::env::temp_dir().join(format!("tern-llama-cases-{}.jsonl", std::process::id()));
    std::fs::write(&path, input)?;
    let output = Command::new("python3")
        .arg(script)
        .arg("--model")
        .arg(model)
        .arg("--cases")
        .arg(&path)
        .arg("--threads")
        .arg(engine.info().threads.to_string())
        .arg("--reps")
        .arg(reps.to_string())
        .output()
        .map_err(|e| CliError::Other(format!("cannot run python3 {}: {e}", script.display())))?;
    let _ = std::fs::remove_file(&path);
    if !output.status.success() {
        return Err(CliError::Other(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
        )));
    }
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(r) = serde_json::from_str::<LlamaResult>(line) else { continue };
        if let Some(rep) = reports.iter_mut().find(|x| x.id == r.id) {
            rep.llama_plain_tps = Some(r.plain_tps);
            rep.llama_lookup_tps = Some(r.lookup_tps);
            rep.llama_lookup_ratio = Some(r.lookup_tps / r.plain_tps);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_lists_occurring_lengths() {
        assert_eq!(histogram(&[3, 0, 2, 0, 1]), "0:3 2:2 4:1");
        assert_eq!(histogram(&[]), "");
    }

    #[test]
    fn hindsight_bound_prices_each_pass_at_its_accepted_length() {
        // Two plain passes (1 token each) and one pass that took 3 drafted tokens (4 tokens).
        let ratio = [1.0, 1.2, 1.4, 1.6];
        assert!((hindsight_bound(&[2, 0, 0, 1], &ratio) - 6.0 / 3.6).abs() < 1e-12);
        // Past the curve, costs go on along its last step: cost(6) = 1.6 + 2 * 0.2.
        assert!((hindsight_bound(&[0, 0, 0, 0, 0, 1], &ratio) - 6.0 / 2.0).abs() < 1e-12);
        assert_eq!(hindsight_bound(&[5], &ratio), 1.0, "plain decoding is its own bound");
        assert_eq!(hindsight_bound(&[], &ratio), 1.0);
    }

    #[test]
    fn priced_sums_each_pass_at_its_size() {
        let ratio = [1.0, 1.2, 1.5, 1.6];
        // Two plain passes (one token each), one of 3 drafted tokens of which 2 were taken.
        let (drafted, accepted) = ([2, 0, 0, 1], [2, 0, 1]);
        assert!((priced(&drafted, &accepted, &ratio) - 5.0 / 3.6).abs() < 1e-12);
        assert_eq!(priced(&[4], &[4], &ratio), 1.0, "plain decoding prices at 1");
        assert_eq!(priced(&[], &[], &ratio), 1.0);
    }

    #[test]
    fn extra_cost_scales_what_a_pass_costs_over_one_token() {
        let c = CostCurveReport { cost_curve_depth: 100, single_ms: 4.0, ratio: vec![1.0, 1.2, 2.0] };
        let half = c.with_extra_cost(0.5);
        for (got, want) in half.ratio.iter().zip([1.0, 1.1, 1.5]) {
            assert!((got - want).abs() < 1e-12, "{got} != {want}");
        }
        assert_eq!((half.single_ms, half.cost_curve_depth), (4.0, 100));
        assert_eq!(extra_cost_scale("0.75"), Ok(0.75));
        assert!(extra_cost_scale("0").is_err() && extra_cost_scale("1.5").is_err() && extra_cost_scale("x").is_err());
    }

    #[test]
    fn copy_runs_follow_the_context_seen_so_far() {
        // Prompt 1 2 3 4; the answer copies 2 3 4, then repeats its own 7s (a run never reads
        // past the answer so far).
        let runs = copy_runs(&[1, 2, 3, 4], &[2, 3, 4, 9, 7, 7, 7]);
        assert_eq!(runs, vec![3, 2, 1, 0, 0, 1, 1]);
        assert_eq!(copy_runs(&[5], &[]), Vec::<usize>::new());
    }

    #[test]
    fn copy_bound_drafts_the_runs_where_they_pay() {
        let ratio = [1.0, 1.2, 1.4, 1.6];
        // Nothing to copy: plain decoding.
        assert_eq!(copy_bound(&[0, 0, 0], &ratio), 1.0);
        // 4 tokens, a run of 3 at the start: one pass of 4 tokens at cost 1.6.
        assert!((copy_bound(&[3, 2, 1, 0], &ratio) - 4.0 / 1.6).abs() < 1e-12);
        // One token to copy: a pass of 2 at 1.2 beats two plain passes.
        assert!((copy_bound(&[1, 0], &ratio) - 2.0 / 1.2).abs() < 1e-12);
        // Costly verification: plain passes are cheaper.
        assert_eq!(copy_bound(&[1, 0], &[1.0, 2.5]), 1.0);
        assert_eq!(copy_bound(&[], &ratio), 1.0);
    }

    #[test]
    fn conversation_splits_system_history_and_last_user_message() {
        let case: Case = serde_json::from_str(
            r#"{"id":"x","task":"t","max_new_tokens":4,"messages":[{"role":"system","content":"s"},
            {"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"}]}"#,
        )
        .expect("parses");
        let (system, earlier, user) = conversation(&case).expect("valid");
        assert_eq!(system.as_deref(), Some("s"));
        assert_eq!(earlier.len(), 2);
        assert_eq!(user, "u2");
    }
}
