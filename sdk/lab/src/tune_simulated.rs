//! `tern-lab tune-simulated`: the energy tuner on the simulated phones of the MNN-AECS paper.
//! The tuner's probes see noise, and its choice is compared with an exhaustive search over every
//! selection on the noise-free device model and with the usual all-big-cores setting.

use clap::Args;
use serde::Serialize;
use tern::energy::simulator::{SimDevice, SimProbe};
use tern::energy::tuner::{exhaustive, Measurement, Tuner, TunerOptions};
use tern::runtime::{CoreSelection, CpuTopology};
use tern_cli::energy::describe;
use tern_cli::error::{CliError, Result};
use tern_cli::output::Stdout;

#[derive(Args, Debug)]
pub struct TuneSimulatedArgs {
    /// The phone: kirin9000, kirin990, exynos1580, sd8gen3, sd8elite (or the phone's name), or `all`
    #[arg(long, value_name = "DEVICE", default_value = "all")]
    pub device: String,
    /// Seed of the simulated probes' noise
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: TuneSimulatedArgs) -> Result<()> {
    simulate(&a.device, &a)
}

#[derive(Serialize)]
struct Point {
    selection: String,
    tokens_per_s: f64,
    watts: f64,
    mj_per_token: f64,
}

impl Point {
    fn new(topo: &CpuTopology, sel: &CoreSelection, m: &Measurement) -> Point {
        Point {
            selection: describe(topo, sel),
            tokens_per_s: m.tokens_per_s,
            watts: m.watts,
            mj_per_token: m.joules_per_token() * 1e3,
        }
    }
}

#[derive(Serialize)]
struct SimReport {
    device: &'static str,
    phone: &'static str,
    topology: String,
    probes: usize,
    /// Seconds the probes would take on the phone (50 tokens each).
    probe_seconds: f64,
    fastest: String,
    /// The tuner's choice, valued on the noise-free model.
    chosen: Point,
    exhaustive: Point,
    exhaustive_evaluated: usize,
    matches_exhaustive: bool,
    big_cores: Point,
    saving_vs_big_cores_pct: f64,
    slowdown_pct: f64,
    power_saver: Point,
    /// Probes of both searches (power saver reuses the balanced probes).
    probes_with_power_saver: usize,
}

fn simulate(name: &str, a: &TuneSimulatedArgs) -> Result<()> {
    let devices = if name.eq_ignore_ascii_case("all") {
        SimDevice::all()
    } else {
        vec![SimDevice::by_name(name).ok_or_else(|| {
            let ids: Vec<&str> = SimDevice::all().iter().map(|d| d.id).collect();
            CliError::Usage(format!("unknown device `{name}` (known: {}, all)", ids.join(", ")))
        })?]
    };
    let opts = TunerOptions::default();
    let mut reports = Vec::new();
    for device in devices {
        let topo = device.topology();
        let mut probe = SimProbe::new(device.clone(), a.seed);
        let mut tuner = Tuner::new(&topo, &mut probe, opts, true);
        let (fastest, _) = tuner.fastest()?;
        let balanced = tuner.search(opts.max_slowdown)?;
        let saver = tuner.search(tern::energy::tuner::POWER_SAVER_SLOWDOWN)?;
        let best = exhaustive(&topo, &mut SimProbe::exact(device.clone()), opts.max_slowdown, true)?;
        let chosen = device.truth_of(&balanced.selection);
        let big_sel = device.big_cores();
        let big = device.truth_of(&big_sel);
        let reference = best.max_tokens_per_s.max(big.tokens_per_s);
        reports.push(SimReport {
            device: device.id,
            phone: device.phone,
            topology: topo.describe(),
            probes: balanced.probes,
            probe_seconds: probe.seconds,
            fastest: describe(&topo, &fastest),
            chosen: Point::new(&topo, &balanced.selection, &chosen),
            exhaustive: Point::new(&topo, &best.selection, &best.measurement),
            exhaustive_evaluated: best.evaluated,
            matches_exhaustive: balanced.selection == best.selection,
            saving_vs_big_cores_pct: 100.0 * (1.0 - chosen.joules_per_token() / big.joules_per_token()),
            slowdown_pct: 100.0 * (1.0 - chosen.tokens_per_s / reference),
            big_cores: Point::new(&topo, &big_sel, &big),
            power_saver: Point::new(&topo, &saver.selection, &device.truth_of(&saver.selection)),
            probes_with_power_saver: probe.probes,
        });
    }
    let mut out = Stdout::new();
    if a.json {
        return Ok(out.line(&serde_json::to_string_pretty(&reports).map_err(|e| CliError::Other(e.to_string()))?)?);
    }
    for r in &reports {
        out.line(&format!("{} ({}): {}", r.phone, r.device, r.topology))?;
        out.line(&format!("  stage 1 (fastest): {}", r.fastest))?;
        out.line(&format!("  probes: {} (exhaustive search: {} selections)", r.probes, r.exhaustive_evaluated))?;
        for (label, p) in [
            ("tuned", &r.chosen),
            ("exhaustive optimum", &r.exhaustive),
            ("all big cores", &r.big_cores),
            ("power saver", &r.power_saver),
        ] {
            out.line(&format!(
                "  {label:<19} {:<44} {:>5.1} tok/s {:>5.2} W {:>5.0} mJ/token",
                p.selection, p.tokens_per_s, p.watts, p.mj_per_token
            ))?;
        }
        out.line(&format!(
            "  tuned = exhaustive optimum: {} | energy {:.1}% below all big cores | slowdown {:.1}%\n",
            if r.matches_exhaustive { "yes" } else { "NO" },
            r.saving_vs_big_cores_pct,
            r.slowdown_pct
        ))?;
    }
    Ok(())
}
