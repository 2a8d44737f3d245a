//! `tern-lab bench-workloads`: `tern bench-workloads` (plain against speculative decoding over
//! a workloads file) with what research on the drafter and the controller needs beside it.
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
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use clap::Args;
use serde::{Deserialize, Serialize};
use tern::speculative::cost::{CostCurve, PassTimer, MAX_BATCH};
use tern::Engine;
use tern_cli::bench::median;
use tern_cli::bench_workloads::{
    header, json_line, print_case_line, progress, prompt_ids, ratio_cell, run_case, speculation_options, summarise,
    task_cells, yes_no, BenchWorkloadsArgs, Case, CaseReport, TaskHistory, TaskReport,
};
use tern_cli::error::{CliError, Result};
use tern_cli::output::Stdout;

use crate::drafts;

#[derive(Args, Debug)]
pub struct LabBenchArgs {
    #[command(flatten)]
    pub base: BenchWorkloadsArgs,
    /// Verify every draft the drafter finds, up to N tokens (no adaptive controller)
    #[arg(long, value_name = "N")]
    pub fixed_draft: Option<usize>,
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
}

/// A case's figures with the bounds and comparisons beside them.
#[derive(Serialize)]
struct LabCase {
    #[serde(flatten)]
    base: CaseReport,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_plain_tps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_lookup_tps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_lookup_ratio: Option<f64>,
}

/// A task's figures with the medians of the bounds.
#[derive(Serialize)]
struct LabTask {
    #[serde(flatten)]
    base: TaskReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_hindsight_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_copy_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_tree_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_priced: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_lookup_median_ratio: Option<f64>,
}

pub fn run(a: LabBenchArgs) -> Result<()> {
    let b = &a.base;
    let (cases, loaded) = b.run.start()?;
    let engine = loaded.engine.clone();
    let mut out = Stdout::new();
    let model_name = loaded.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let spec_opts = speculation_options(b.calibration, a.fixed_draft)?;
    let bar = progress(cases.len() as u64 * b.repetitions * 2, b.json);
    if !b.json {
        out.line(&header(&model_name, &engine, b.repetitions))?;
        if let Some(scale) = a.extra_cost {
            out.line(&format!("priced with each pass's measured cost over a single-token pass scaled by {scale}"))?;
        }
    }
    let curve_size = a.cost_curve.or(a.priced.then_some(DEFAULT_CURVE_SIZE)).map(|n| n.clamp(1, MAX_BATCH - 1));
    let curve_reps = b.repetitions as usize * 2 + 1;
    let mut curves: BTreeMap<String, CostCurveReport> = match &a.curves {
        Some(path) if path.exists() => serde_json::from_str(&std::fs::read_to_string(path)?)
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?,
        _ => BTreeMap::new(),
    };
    let history = if b.history { Some(TaskHistory::open()?) } else { None };
    let mut reports: Vec<LabCase> = Vec::new();
    for case in &cases {
        bar.set_message(case.id.clone());
        let opts = history.as_ref().map_or_else(|| spec_opts.clone(), |h| h.scope(&spec_opts, case));
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
            (Some(h), Some(_)) => h.store.token_ids(&case.task, engine.tokenizer())?,
            _ => Vec::new(),
        };
        let run = run_case(&engine, case, &opts, b.repetitions as usize, &bar);
        engine.verify_costs().pin(None);
        let mut r = LabCase {
            base: run?,
            hindsight_bound: None,
            copy_bound: None,
            tree_bound: None,
            priced: None,
            cost_ratio: None,
            llama_plain_tps: None,
            llama_lookup_tps: None,
            llama_lookup_ratio: None,
        };
        if let Some(h) = &history {
            h.store.add(&case.task, &r.base.answer_text)?;
        }
        if let (None, Some(n)) = (&curve, curve_size) {
            curve = Some(measure_cost_curve(&engine, &r.base.prompt_ids, n, curve_reps)?);
        }
        if let Some(c) = curve {
            let base = &r.base;
            if reports.is_empty() {
                print_curve(&mut out, &c, base.prompt_ids.len(), b.json)?;
            }
            r.hindsight_bound = Some(hindsight_bound(&base.accepted_lengths, &c.ratio));
            r.copy_bound = Some(copy_bound(&copy_runs(&base.prompt_ids, &base.answer_ids), &c.ratio));
            let held = drafts::tree_runs(&engine, &sources, &base.prompt_ids, &base.answer_ids)?;
            r.tree_bound = Some(copy_bound(&held, &c.ratio));
            r.priced = a.priced.then(|| priced(&base.draft_lengths, &base.accepted_lengths, &c.ratio));
            r.cost_ratio = Some(c.ratio);
        }
        if !b.json {
            print_case_line(&mut out, &r.base, reports.is_empty())?;
        }
        reports.push(r);
    }
    bar.finish_and_clear();
    drop(history);
    if let Some(path) = &a.curves {
        std::fs::write(path, serde_json::to_string(&curves).map_err(|e| CliError::Other(e.to_string()))?)?;
    }

    if let Some(script) = &a.llama_cpp {
        // Tern's own figures are printed even when the comparison cannot run.
        if let Err(e) = add_llama_cpp(&engine, &loaded.path, script, &cases, &mut reports, b.repetitions as usize) {
            eprintln!("llama.cpp comparison skipped: {e}");
        }
    }

    let tasks = summarise_lab(&reports);
    if b.json {
        for r in &reports {
            json_line(&mut out, r)?;
        }
        for t in &tasks {
            json_line(&mut out, t)?;
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
                r.base.id,
                r.llama_plain_tps.unwrap_or(f64::NAN),
                r.llama_lookup_tps.unwrap_or(f64::NAN),
                r.llama_lookup_ratio.unwrap_or(f64::NAN),
                r.base.ratio
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
    for t in &tasks {
        out.line(&format!(
            "| {} | {} | {} | {} | {} | {:.2}x | {} | {} |",
            task_cells(&t.base),
            ratio_cell(t.median_hindsight_bound),
            ratio_cell(t.median_tree_bound),
            ratio_cell(t.median_copy_bound),
            ratio_cell(t.median_priced),
            t.base.median_prefill_cost,
            yes_no(t.base.all_identical),
            ratio_cell(t.llama_lookup_median_ratio)
        ))?;
    }
    Ok(())
}

/// The product's task summary, with the medians of the bounds per task (in the same order).
fn summarise_lab(reports: &[LabCase]) -> Vec<LabTask> {
    let bases: Vec<CaseReport> = reports.iter().map(|r| r.base.clone()).collect();
    summarise(&bases)
        .into_iter()
        .map(|base| {
            let rs: Vec<&LabCase> = reports.iter().filter(|r| r.base.task == base.summary_of_task).collect();
            let med = |f: fn(&LabCase) -> Option<f64>| {
                let v: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
                (!v.is_empty()).then(|| median(&v))
            };
            LabTask {
                median_hindsight_bound: med(|r| r.hindsight_bound),
                median_copy_bound: med(|r| r.copy_bound),
                median_tree_bound: med(|r| r.tree_bound),
                median_priced: med(|r| r.priced),
                llama_lookup_median_ratio: med(|r| r.llama_lookup_ratio),
                base,
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
/// SmolLM2 pass after a 17-token one 15-40% more; `tern-lab pass-cost --sizes 1,1,1,1,1,1,1,1,17`
/// shows the recovery), and timed after the round's longest pass it made every ratio, and the
/// bounds priced with them, too favourable.
fn measure_cost_curve(engine: &Arc<Engine>, prompt: &[u32], max: usize, reps: usize) -> Result<CostCurveReport> {
    let mut timer = PassTimer::new(engine, prompt, max)?;
    let mut best = vec![f64::INFINITY; max];
    for _ in 0..reps {
        for n in 1..=max {
            if n == 1 {
                for _ in 1..SINGLE_RUN {
                    timer.time(1)?;
                }
            }
            best[n - 1] = best[n - 1].min(timer.time(n)?.as_secs_f64());
        }
    }
    Ok(CostCurveReport {
        cost_curve_depth: timer.depth(),
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
pub fn copy_runs(prompt: &[u32], answer: &[u32]) -> Vec<usize> {
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
    reports: &mut [LabCase],
    reps: usize,
) -> Result<()> {
    let mut input = String::new();
    // The reports are in the cases' order.
    for (c, r) in cases.iter().zip(reports.iter()) {
        let line = LlamaCase { id: &c.id, prompt_ids: &r.base.prompt_ids, max_new_tokens: c.max_new_tokens };
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
        if let Some(rep) = reports.iter_mut().find(|x| x.base.id == r.id) {
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
}
