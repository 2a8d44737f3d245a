//! Energy management on this machine with the real SmolLM2 model: the decode selection is what
//! the threads actually run on (read back from the kernel, `/proc/self/task/*/status`), the
//! calling thread gets its own affinity back after a generation, tuning over this machine's
//! cores completes and is stored, and every mode reports energy and CPU time per token.
//!
//! One engine and one test function: the worker threads are told apart by name.

mod common;

use std::sync::Arc;

use common::*;
use tern::runtime::{current_thread_cores, parse_cpu_list, CpuTopology};
use tern::{CoreSelection, EnergyMode, EnergyOptions, Engine, EngineOptions, Event, Session, SessionOptions, Stats};

/// (thread name, allowed CPUs) of every thread of this process.
fn thread_affinities() -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_owned());
        if let (Some(name), Some(cpus)) = (field("Name:"), field("Cpus_allowed_list:")) {
            out.push((name, parse_cpu_list(&cpus).expect("a CPU list")));
        }
    }
    out
}

fn this_thread_cores() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list");
    parse_cpu_list(cpus.trim()).expect("a CPU list")
}

/// Generates `n` tokens; after the third token event (well inside decode) calls `during`.
fn generate(engine: &Arc<Engine>, n: usize, mut during: impl FnMut()) -> Stats {
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: n,
        ignore_eos: true,
        ..Default::default()
    };
    let mut session = Session::new(engine.clone(), opts).expect("session");
    let (mut tokens, mut stats) = (0, None);
    for ev in session.complete("The lighthouse keeper wrote").expect("complete") {
        match ev.expect("event") {
            Event::Token { .. } => {
                tokens += 1;
                if tokens == 3 {
                    during();
                }
            }
            Event::Done(s) => stats = Some(s),
        }
    }
    stats.expect("stats")
}

#[test]
fn selections_are_applied_and_tuning_completes() {
    let own = this_thread_cores();
    if own.len() < 2 || !tern::runtime::pinning_supported() {
        eprintln!("skipped: needs two CPUs this process may pin to (has {own:?})");
        return;
    }
    assert_eq!(current_thread_cores().as_deref(), Some(&own[..]), "the kernel's view of this thread");
    let (a, b) = (own[0], own[1]);
    let dir = std::env::temp_dir().join(format!("tern-energy-device-{}", std::process::id()));
    let custom = EnergyMode::Custom { prefill: CoreSelection::cores([a]), decode: CoreSelection::cores([a, b]) };
    let energy =
        EnergyOptions { mode: custom, tuning_dir: Some(dir.clone()), device_name: Some("test machine".into()) };
    let engine = Engine::load(model_path(SMOLLM2), EngineOptions { threads: Some(2), energy, ..Default::default() })
        .expect("load");

    // Custom selections: during decode the caller runs on `a` and the worker on `b`.
    let (mut seen, mut caller) = (Vec::new(), Vec::new());
    let stats = generate(&engine, 12, || {
        seen = thread_affinities();
        caller = this_thread_cores();
    });
    let me = this_thread_cores();
    let worker = seen.iter().find(|(n, _)| n == "tern-worker-1").map(|(_, c)| c.clone());
    assert_eq!(worker, Some(vec![b]), "the decode worker is pinned to its core: {seen:?}");
    assert_eq!(caller, vec![a], "the calling thread is pinned to the first decode core");
    assert_eq!(me, own, "after the generation the calling thread has its own affinity back");
    assert_eq!(stats.energy.prefill.selection, Some(CoreSelection::cores([a])));
    assert_eq!(stats.energy.decode.selection, Some(CoreSelection::cores([a, b])));
    let decode = &stats.energy.decode;
    assert!(decode.joules_per_token.is_some_and(|j| j > 0.0), "energy per token: {decode:?}");
    assert!(decode.cpu_time_per_token.is_some_and(|c| !c.is_zero()), "CPU time per token: {decode:?}");

    // Real tuning over this machine's cores, stored under the device key.
    let tuning = engine.tune_energy().expect("tuning completes");
    let cores = CpuTopology::detect().big_cores();
    assert!(tuning.probes.len() >= 2 && tuning.probes.len() <= 9, "probes: {}", tuning.probes.len());
    let chosen = tuning.balanced.selection.core_ids().expect("a pinned selection").to_vec();
    assert!(!chosen.is_empty() && chosen.iter().all(|c| cores.contains(c)), "{chosen:?} within {cores:?}");
    assert!(std::fs::read_dir(&dir)
        .expect("tuning dir")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".json")));
    let reloaded = Engine::load(
        model_path(SMOLLM2),
        EngineOptions {
            threads: Some(1),
            energy: EnergyOptions {
                tuning_dir: Some(dir.clone()),
                device_name: Some("test machine".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .expect("load");
    assert_eq!(
        reloaded.energy_tuning().map(|t| t.balanced.selection),
        Some(tuning.balanced.selection.clone()),
        "stored and reused"
    );
    drop(reloaded);

    // Each mode decodes on its selection, applied for real, and reports energy and CPU time.
    for (mode, want) in [
        (EnergyMode::Performance, tuning.fastest.clone()),
        (EnergyMode::Balanced, tuning.balanced.selection.clone()),
        (EnergyMode::PowerSaver, tuning.power_saver.selection.clone()),
    ] {
        engine.set_energy_mode(mode.clone()).expect("a built-in mode");
        let mut caller = Vec::new();
        let stats = generate(&engine, 8, || caller = this_thread_cores());
        let first = want.core_ids().expect("pinned")[0];
        assert_eq!(caller, vec![first], "{mode:?}: the calling thread decodes on {want}");
        assert_eq!(stats.energy.decode.selection.as_ref(), Some(&want), "{mode:?}");
        assert!(stats.energy.decode.joules_per_token.is_some() && stats.energy.decode.cpu_time_per_token.is_some());
    }

    // A throttled phone decodes on the power-saver selection, and goes back when it cools.
    engine.set_energy_mode(EnergyMode::Balanced).expect("a built-in mode");
    engine.report_device_state(tern::DeviceState { thermal: tern::ThermalState::Serious, battery_low: false });
    assert_eq!(engine.energy_status().effective_mode, EnergyMode::PowerSaver);
    assert_eq!(engine.energy_status().decode, Some(tuning.power_saver.selection.clone()));
    engine.report_device_state(tern::DeviceState::default());
    assert_eq!(engine.energy_status().decode, Some(tuning.balanced.selection.clone()));
    let _ = std::fs::remove_dir_all(&dir);
}
