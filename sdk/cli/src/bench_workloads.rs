//! `tern bench-workloads`: a workloads file (JSON lines: `id`, `task`, `max_new_tokens`,
//! `messages`) through one model, plain and speculative, greedy.
//!
//! Each case runs `--reps` times each way, interleaved (plain, speculative, speculative, plain,
//! ...) so that a machine shared with other work slows both alike, every run in a fresh session
//! (the acceptance model starts from its priors each time; the engine's measured pass costs
//! carry over from case to case, as they would in an app). Reported per case: decode tokens/s
//! both ways (medians), their ratio, tokens per decode pass, the draft-length histogram, and
//! whether every run produced the same tokens; per task: median and lowest ratio, median
//! tokens per pass. The pieces are public for `tern-lab bench-workloads`, which adds bounds,
//! cost curves, priced runs and llama.cpp's lookup decoding beside.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tern::{
    DraftLimits, Engine, Event, HistoryOptions, HistoryScope, HistoryStore, Message, Role, Session, SessionOptions,
    Speculation, SpeculationOptions, Stats,
};

use crate::args::{load, Loaded, ModelArgs};
use crate::bench::median;
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
    pub fn start(&self) -> Result<(Vec<Case>, Loaded)> {
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
    /// Prompt positions calibrated during prefill (0 = off) [default: the session default]
    #[arg(long, value_name = "N")]
    pub calibration: Option<usize>,
    /// Give each task a history scope that holds the answers of the task's earlier cases (in
    /// file order): what an assistant that keeps its past answers per task drafts from. The
    /// first case of each task starts with none; a case never sees its own answer
    #[arg(long)]
    pub history: bool,
    /// Print one JSON object per case (then one per task) instead of tables
    #[arg(long)]
    pub json: bool,
}

/// One case of a workloads file.
#[derive(Deserialize)]
pub struct Case {
    pub id: String,
    pub task: String,
    pub max_new_tokens: usize,
    messages: Vec<WireMessage>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    content: String,
}

/// One case's figures, plain against speculative.
#[derive(Serialize, Clone)]
pub struct CaseReport {
    pub id: String,
    pub task: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub plain_tps: f64,
    pub spec_tps: f64,
    pub ratio: f64,
    pub tokens_per_step: f64,
    /// Accepted drafted tokens per pass that carried a draft.
    pub accepted_per_verify: f64,
    /// The prompt as tokens.
    #[serde(skip)]
    pub prompt_ids: Vec<u32>,
    /// The greedy answer, as tokens and as text (added to the task's history with --history).
    #[serde(skip)]
    pub answer_ids: Vec<u32>,
    #[serde(skip)]
    pub answer_text: String,
    pub verify_steps: usize,
    pub decode_passes: usize,
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    pub drafting_ms: f64,
    pub draft_lengths: Vec<usize>,
    pub accepted_lengths: Vec<usize>,
    pub identical: bool,
    pub plain_prefill_tps: f64,
    pub spec_prefill_tps: f64,
    pub calibrated_positions: usize,
    pub plain_tps_runs: Vec<f64>,
    pub spec_tps_runs: Vec<f64>,
}

/// A task's figures over its cases.
#[derive(Serialize)]
pub struct TaskReport {
    pub summary_of_task: String,
    pub cases: usize,
    pub median_ratio: f64,
    pub min_ratio: f64,
    pub median_tokens_per_step: f64,
    /// The task's tokens over its passes, all cases pooled (long answers weigh more).
    pub pooled_tokens_per_step: f64,
    /// Median over cases of the tokens a pass that carried a draft produced.
    pub median_tokens_per_verify: f64,
    /// Median over cases of the speculative prefill's time over the plain one's (calibration's
    /// cost, which the decode speed-up does not count).
    pub median_prefill_cost: f64,
    pub all_identical: bool,
}

/// The speculation options of a run: the session's, with `--calibration` and, where given, a
/// fixed draft length verified whole (no adaptive controller).
pub fn speculation_options(calibration: Option<usize>, fixed_draft: Option<usize>) -> Result<SpeculationOptions> {
    let mut o = SpeculationOptions::default();
    if let Some(n) = fixed_draft {
        o.mode = Speculation::Limits(DraftLimits { max_draft_tokens: n, adaptive: false, ..DraftLimits::AUTO });
    }
    if let Some(c) = calibration {
        o.calibration_positions = c;
    }
    o.validate()?;
    Ok(o)
}

/// A progress bar over `steps` runs, hidden for JSON output or without a terminal.
pub fn progress(steps: u64, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Per task, the answers of its earlier cases (`--history`), in a store of this run's own that
/// is removed when dropped.
pub struct TaskHistory {
    pub store: Arc<HistoryStore>,
}

impl TaskHistory {
    pub fn open() -> Result<TaskHistory> {
        let dir = std::env::temp_dir().join(format!("tern-bench-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Ok(TaskHistory { store: HistoryStore::open(&dir, HistoryOptions::default())? })
    }

    /// `opts` drafting from the case's task's earlier answers (without adding its own).
    pub fn scope(&self, opts: &SpeculationOptions, case: &Case) -> SpeculationOptions {
        let mut o = opts.clone();
        o.history = Some(HistoryScope { record_answers: false, ..HistoryScope::new(self.store.clone(), &case.task) });
        o
    }
}

impl Drop for TaskHistory {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.store.dir());
    }
}

/// A JSON line for `value`.
pub fn json_line(out: &mut Stdout, value: &impl Serialize) -> Result<()> {
    Ok(out.line(&serde_json::to_string(value).map_err(|e| CliError::Other(e.to_string()))?)?)
}

/// `ratio` as a table cell, `-` where there is none.
pub fn ratio_cell(b: Option<f64>) -> String {
    b.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x"))
}

pub fn run(a: BenchWorkloadsArgs) -> Result<()> {
    let (cases, loaded) = a.run.start()?;
    let engine = loaded.engine.clone();
    let mut out = Stdout::new();
    let model_name = loaded.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let spec_opts = speculation_options(a.calibration, None)?;
    let bar = progress(cases.len() as u64 * a.repetitions * 2, a.json);
    if !a.json {
        out.line(&header(&model_name, &engine, a.repetitions))?;
    }
    let history = if a.history { Some(TaskHistory::open()?) } else { None };
    let mut reports = Vec::new();
    for case in &cases {
        bar.set_message(case.id.clone());
        let opts = history.as_ref().map_or_else(|| spec_opts.clone(), |h| h.scope(&spec_opts, case));
        let r = run_case(&engine, case, &opts, a.repetitions as usize, &bar)?;
        if let Some(h) = &history {
            h.store.add(&case.task, &r.answer_text)?;
        }
        if !a.json {
            print_case_line(&mut out, &r, reports.is_empty())?;
        }
        reports.push(r);
    }
    bar.finish_and_clear();
    let tasks = summarise(&reports);
    if a.json {
        for r in &reports {
            json_line(&mut out, r)?;
        }
        for t in &tasks {
            json_line(&mut out, t)?;
        }
        return Ok(());
    }
    out.line("")?;
    out.line(
        "| task | cases | median speed-up | lowest | median tokens/pass | pooled tokens/pass \
         | median tokens/verifying pass | prefill time, speculative / plain | identical |",
    )?;
    out.line("|---|---|---|---|---|---|---|---|---|")?;
    for t in &tasks {
        out.line(&format!("| {} | {:.2}x | {} |", task_cells(t), t.median_prefill_cost, yes_no(t.all_identical)))?;
    }
    Ok(())
}

/// The first line of a table run: model, threads, kernels, runs.
pub fn header(model_name: &str, engine: &Engine, reps: u64) -> String {
    let info = engine.info();
    format!(
        "{model_name}: {} threads, {} kernels, {reps} runs each way per case, interleaved",
        info.threads, info.kernels
    )
}

/// A task's first seven cells: task, cases, median and lowest speed-up, tokens per pass
/// (median, pooled, per verifying pass).
pub fn task_cells(t: &TaskReport) -> String {
    format!(
        "{} | {} | {:.2}x | {:.2}x | {:.2} | {:.2} | {:.2}",
        t.summary_of_task,
        t.cases,
        t.median_ratio,
        t.min_ratio,
        t.median_tokens_per_step,
        t.pooled_tokens_per_step,
        t.median_tokens_per_verify
    )
}

pub fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

pub fn read_cases(a: &CaseSelection) -> Result<Vec<Case>> {
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
pub fn conversation(case: &Case) -> Result<(Option<String>, Vec<Message>, String)> {
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
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        system_prompt,
        max_tokens: case.max_new_tokens,
        speculation,
        ..Default::default()
    };
    let mut s = Session::new(engine.clone(), opts)?;
    s.set_messages(earlier);
    Ok((s, user))
}

pub fn prompt_ids(engine: &Arc<Engine>, case: &Case) -> Result<Vec<u32>> {
    let (mut s, user) = session(engine, case, SpeculationOptions::off())?;
    let generation = s.send(&user)?;
    Ok(generation.prompt().to_vec())
}

/// One answer: its tokens and stats.
pub fn answer(engine: &Arc<Engine>, case: &Case, speculation: SpeculationOptions) -> Result<(Vec<u32>, Stats)> {
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

/// One case, `reps` times each way, interleaved, each run in a fresh session.
pub fn run_case(
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
        prompt_ids,
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
    })
}

pub fn print_case_line(out: &mut Stdout, r: &CaseReport, header: bool) -> Result<()> {
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
        yes_no(r.identical),
        histogram(&r.draft_lengths)
    ))?;
    Ok(())
}

/// "0:12 3:4 8:1": count of passes per drafted length, lengths that occurred only.
pub fn histogram(h: &[usize]) -> String {
    h.iter().enumerate().filter(|(_, &c)| c > 0).map(|(n, c)| format!("{n}:{c}")).collect::<Vec<_>>().join(" ")
}

/// Per task (in name order): the cases' figures summed up.
pub fn summarise(reports: &[CaseReport]) -> Vec<TaskReport> {
    let mut by_task: BTreeMap<&str, Vec<&CaseReport>> = BTreeMap::new();
    for r in reports {
        by_task.entry(&r.task).or_default().push(r);
    }
    by_task
        .into_iter()
        .map(|(task, rs)| {
            let ratios: Vec<f64> = rs.iter().map(|r| r.ratio).collect();
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
                median_prefill_cost: median(&prefill_costs),
                all_identical: rs.iter().all(|r| r.identical),
            }
        })
        .collect()
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
