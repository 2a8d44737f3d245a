//! `tern energy tune`: finds the decode core selection with least energy at no visible slowdown
//! on this machine, with a model (`tern-lab tune-simulated` does the same on simulated phones).
//!
//! The tuner decodes with the model on each candidate, then every mode generates
//! once and reports its decode speed, CPU time and energy per token; the cost of switching the
//! pool between the prefill and decode selections is measured last.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;
use tern::energy::power_model::selection_counts;
use tern::energy::tuner::{Measurement, ProbeRecord};
use tern::energy::{measure_switch_cost, CoreSelection, CpuTopology, SwitchCost};
use tern::{
    EnergyMode, EnergyOptions, Engine, EngineOptions, Event, Session, SessionOptions, SpeculationOptions, Stats,
};

use crate::args::ModelArgs;
use crate::error::{CliError, Result};
use crate::output::Stdout;

#[derive(Args, Debug)]
pub struct EnergyArgs {
    #[command(subcommand)]
    pub command: EnergyCommand,
}

#[derive(Subcommand, Debug)]
pub enum EnergyCommand {
    /// Search for the decode cores with least energy within 8% of the fastest.
    Tune(TuneArgs),
}

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Threads of the engine [default: one per core]
    #[arg(long, short = 't', value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
    /// Keep the result in this directory (as an app would)
    #[arg(long, value_name = "DIR")]
    pub tuning_dir: Option<PathBuf>,
    /// Tokens each mode generates on this machine
    #[arg(long, short = 'n', default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub gen_tokens: u64,
    /// Generations per mode (the median is reported)
    #[arg(long, short = 'r', default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub repetitions: u64,
}

pub fn run(a: EnergyArgs) -> Result<()> {
    match a.command {
        EnergyCommand::Tune(t) => tune_here(&t),
    }
}

/// A selection with what it runs on, e.g. `cpu 4,5 (2×Cortex-A77@2.54GHz)`.
pub fn describe(topo: &CpuTopology, sel: &CoreSelection) -> String {
    let counts = selection_counts(topo, Some(sel));
    let parts: Vec<String> = topo
        .clusters
        .iter()
        .zip(&counts)
        .filter(|(_, &n)| n > 0)
        .map(|(c, &n)| {
            let mut c = c.clone();
            c.cores.truncate(n);
            c.describe()
        })
        .collect();
    format!("{sel} ({})", parts.join(" + "))
}

#[derive(Serialize)]
struct ProbeRow {
    selection: String,
    stage: u8,
    tokens_per_s: f64,
    watts: f64,
    mj_per_token: f64,
    cpu_ms_per_token: Option<f64>,
    kind: String,
}

#[derive(Serialize)]
struct ModeRow {
    mode: String,
    prefill: String,
    decode: String,
    decode_tokens_per_s: f64,
    decode_mj_per_token: Option<f64>,
    decode_cpu_ms_per_token: Option<f64>,
    kind: String,
}

#[derive(Serialize)]
struct HereReport {
    topology: String,
    meter: String,
    meter_kind: String,
    threads: usize,
    probes: Vec<ProbeRow>,
    fastest: String,
    balanced: String,
    power_saver: String,
    tuning_seconds: f64,
    modes: Vec<ModeRow>,
    switch: SwitchCost,
}

fn tune_here(a: &TuneArgs) -> Result<()> {
    let path = a.model.path()?;
    let energy = EnergyOptions { tuning_dir: a.tuning_dir.clone(), ..Default::default() };
    let opts = EngineOptions { threads: a.threads.map(|t| t as usize), energy, ..Default::default() };
    let engine = Engine::load(&path, opts)?;
    let status = engine.energy_status();
    let topo = CpuTopology::detect();
    let tuning = engine.tune_energy()?;
    let ms = |m: &Measurement| m.cpu_s_per_token.map(|s| s * 1e3);
    let probes = tuning
        .probes
        .iter()
        .map(|r: &ProbeRecord| ProbeRow {
            selection: describe(&topo, &r.selection),
            stage: r.stage,
            tokens_per_s: r.measurement.tokens_per_s,
            watts: r.measurement.watts,
            mj_per_token: r.measurement.joules_per_token() * 1e3,
            cpu_ms_per_token: ms(&r.measurement),
            kind: r.measurement.kind.to_string(),
        })
        .collect();
    let mut modes = Vec::new();
    for mode in [EnergyMode::Performance, EnergyMode::Balanced, EnergyMode::PowerSaver] {
        engine.set_energy_mode(mode.clone())?;
        let mut runs: Vec<Stats> =
            (0..a.repetitions).map(|_| generate(&engine, a.gen_tokens as usize)).collect::<Result<_>>()?;
        runs.sort_by(|x, y| x.decode_tokens_per_s.total_cmp(&y.decode_tokens_per_s));
        let s = &runs[runs.len() / 2];
        let shown =
            |sel: &Option<CoreSelection>| sel.as_ref().map_or("every thread".to_owned(), |s| describe(&topo, s));
        modes.push(ModeRow {
            mode: format!("{mode:?}"),
            prefill: shown(&s.energy.prefill.selection),
            decode: shown(&s.energy.decode.selection),
            decode_tokens_per_s: s.decode_tokens_per_s,
            decode_mj_per_token: s.energy.decode.joules_per_token.map(|j| j * 1e3),
            decode_cpu_ms_per_token: s.energy.decode.cpu_time_per_token.map(|d| d.as_secs_f64() * 1e3),
            kind: s.energy.kind.to_string(),
        });
    }
    engine.set_energy_mode(EnergyMode::Balanced)?;
    let prefill_sel = CoreSelection::cores(topo.big_cores()).for_platform();
    let switch = measure_switch_cost(engine.info().threads, &prefill_sel, &tuning.balanced.selection);
    let report = HereReport {
        topology: topo.describe(),
        meter: status.meter,
        meter_kind: status.meter_kind.to_string(),
        threads: engine.info().threads,
        probes,
        fastest: describe(&topo, &tuning.fastest),
        balanced: describe(&topo, &tuning.balanced.selection),
        power_saver: describe(&topo, &tuning.power_saver.selection),
        tuning_seconds: tuning.seconds,
        modes,
        switch,
    };
    print_here(&report, a.json)
}

fn print_here(r: &HereReport, json: bool) -> Result<()> {
    let mut out = Stdout::new();
    if json {
        return Ok(out.line(&serde_json::to_string_pretty(r).map_err(|e| CliError::Other(e.to_string()))?)?);
    }
    out.line(&format!("topology: {} | meter: {} ({}) | {} threads", r.topology, r.meter, r.meter_kind, r.threads))?;
    out.line(&format!("tuning took {:.1} s; probes (50 tokens each):", r.tuning_seconds))?;
    for p in &r.probes {
        let cpu = p.cpu_ms_per_token.map_or("?".to_owned(), |c| format!("{c:.2}"));
        out.line(&format!(
            "  stage {} {:<40} {:>7.1} tok/s {:>6.2} W {:>7.1} mJ/token {:>6} CPU ms/token ({})",
            p.stage, p.selection, p.tokens_per_s, p.watts, p.mj_per_token, cpu, p.kind
        ))?;
    }
    out.line(&format!("fastest: {}\nbalanced: {}\npower saver: {}", r.fastest, r.balanced, r.power_saver))?;
    out.line("modes (median decode of the runs):")?;
    for m in &r.modes {
        let mj = m.decode_mj_per_token.map_or("?".to_owned(), |j| format!("{j:.1}"));
        let cpu = m.decode_cpu_ms_per_token.map_or("?".to_owned(), |c| format!("{c:.2}"));
        out.line(&format!(
            "  {:<12} decode on {:<36} {:>7.1} tok/s {:>7} mJ/token ({}) {:>6} CPU ms/token | prefill on {}",
            m.mode, m.decode, m.decode_tokens_per_s, mj, m.kind, cpu, m.prefill
        ))?;
    }
    let s = &r.switch;
    out.line(&format!(
        "switching {} <-> {}: {:.1} µs median, {:.1} µs p90 ({} switches; the call alone {:.1} µs)",
        s.between[0], s.between[1], s.median_us, s.p90_us, s.samples, s.call_median_us
    ))?;
    Ok(())
}

/// One generation of `n` tokens (end of generation ignored) from a short prompt.
fn generate(engine: &std::sync::Arc<Engine>, n: usize) -> Result<Stats> {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: n,
        ignore_eos: true,
        speculation: SpeculationOptions::off(),
        ..Default::default()
    };
    let mut session = Session::new(engine.clone(), opts)?;
    let mut stats = None;
    for ev in session.complete("The history of the lighthouse begins")? {
        if let Event::Done(s) = ev? {
            stats = Some(s);
        }
    }
    stats.ok_or_else(|| CliError::Other("the generation ended without stats".into()))
}
