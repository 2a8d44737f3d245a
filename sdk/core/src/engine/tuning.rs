//! Energy tuning of a loaded engine: the tuner's [`Probe`] implemented on the engine (decode
//! [`PROBE_TOKENS`] greedy tokens on a selection and measure speed, energy and CPU time), and
//! the tuning run. The model and prompt do not matter much (one tuning serves every model): what
//! is measured is how the device decodes memory-bound work on those cores. It sits beside the
//! engine so that `energy/` needs nothing of it.

use std::time::{Duration, Instant};

use super::Engine;
use crate::energy::meter::EnergyMeter;
pub use crate::energy::tuner::POWER_SAVER_SLOWDOWN;
use crate::energy::tuner::{Measurement, Probe, PROBE_TOKENS};
use crate::error::{Error, Result};
use crate::model::{Logits, Scratch};
use crate::runtime::{process_cpu_time, CoreSelection};

/// Tokens decoded before timing starts (pins the threads, warms caches).
const WARMUP_TOKENS: usize = 2;

pub(crate) struct EngineProbe<'a> {
    engine: &'a Engine,
    meter: &'a dyn EnergyMeter,
    /// Probes taken, and the seconds they took.
    pub probes: usize,
    pub seconds: f64,
}

impl<'a> EngineProbe<'a> {
    pub fn new(engine: &'a Engine, meter: &'a dyn EnergyMeter) -> EngineProbe<'a> {
        EngineProbe { engine, meter, probes: 0, seconds: 0.0 }
    }

    /// Decodes on `selection` and measures; the pool is left on that selection.
    fn decode(&mut self, selection: &CoreSelection) -> Result<Measurement> {
        let t_all = Instant::now();
        let pool = self.engine.pool();
        let model = self.engine.model();
        pool.set_selection(Some(selection));
        self.meter.note_selection(Some(selection));
        let start = self.engine.tokenizer().bos_id().unwrap_or(0);
        let mut kv = model.new_kv_cache(WARMUP_TOKENS + PROBE_TOKENS + 2);
        let mut scratch = Scratch::default();
        let mut next = start;
        let mut step = |next: &mut u32| -> Result<()> {
            model.forward(pool, &mut kv, &mut scratch, &[*next], Logits::Last)?;
            *next = argmax(scratch.last_logits());
            Ok(())
        };
        for _ in 0..WARMUP_TOKENS {
            step(&mut next)?;
        }
        let j0 = self.meter.total_joules()?;
        let cpu0 = process_cpu_time();
        let t0 = Instant::now();
        for _ in 0..PROBE_TOKENS {
            step(&mut next)?;
        }
        let elapsed = t0.elapsed();
        let joules = self.meter.total_joules()? - j0;
        let cpu = process_cpu_time().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
        pool.release_caller();
        self.meter.note_selection(None);
        self.probes += 1;
        self.seconds += t_all.elapsed().as_secs_f64();
        let secs = elapsed.as_secs_f64().max(1e-9);
        Ok(Measurement {
            tokens_per_s: PROBE_TOKENS as f64 / secs,
            watts: joules.max(0.0) / secs,
            kind: self.meter.kind(),
            cpu_s_per_token: cpu.map(|c: Duration| c.as_secs_f64() / PROBE_TOKENS as f64),
        })
    }
}

impl Probe for EngineProbe<'_> {
    fn measure(&mut self, selection: &CoreSelection) -> Result<Measurement> {
        self.decode(selection).map_err(|e| match e {
            Error::Energy(_) => e,
            other => Error::Energy(format!("probe on {selection}: {other}")),
        })
    }
}

fn argmax(v: &[f32]) -> u32 {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32)
}

/// Tunes a loaded engine on this device: stage 1, then the balanced and power-saver searches
/// (the second reuses the first's probes). Leaves the pool on every thread, unpinned.
pub(crate) fn tune_engine(engine: &Engine) -> Result<crate::energy::Tuning> {
    use crate::energy::tuner::{Tuner, TunerOptions};
    let control = engine.energy();
    let started = Instant::now();
    let mut probe = EngineProbe::new(engine, control.meter().as_ref());
    let topology = control.topology().clone();
    let result = (|| {
        let mut tuner = Tuner::new(&topology, &mut probe, TunerOptions::default(), control.pins());
        let (fastest, fastest_tokens_per_s) = tuner.fastest()?;
        let balanced = tuner.search(TunerOptions::default().max_slowdown)?;
        let power_saver = tuner.search(POWER_SAVER_SLOWDOWN)?;
        Ok(crate::energy::Tuning {
            version: crate::energy::Tuning::new_version(),
            key: control.key().to_owned(),
            topology: topology.describe(),
            fastest,
            fastest_tokens_per_s,
            balanced,
            power_saver,
            probes: tuner.records().to_vec(),
            seconds: started.elapsed().as_secs_f64(),
            tuned_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        })
    })();
    engine.pool().set_selection(None);
    result
}
