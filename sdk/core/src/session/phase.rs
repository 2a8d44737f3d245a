//! A generation's energy phases: the pool switched to each phase's selection at its boundary
//! (prefill, decode) and each phase's energy, CPU time and wall time added up. It lives on the
//! session side: it reaches the pool and the energy control through the engine it holds, so
//! `energy/` needs nothing of the engine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::energy::control::EnergyControl;
use crate::energy::{EnergyStats, Phase, PhaseEnergy};
use crate::engine::Engine;
use crate::runtime::process_cpu_time;

/// Switches the pool at phase boundaries and adds up each phase's energy. Dropped before the
/// end (a generation abandoned mid-way), it still gives the calling thread its affinity back.
#[derive(Default)]
pub(crate) struct PhaseTracker {
    engine: Option<Arc<Engine>>,
    open: Option<Open>,
    prefill: PhaseEnergy,
    decode: PhaseEnergy,
}

struct Open {
    phase: Phase,
    started: Instant,
    joules: Option<f64>,
    cpu: Option<Duration>,
}

impl PhaseTracker {
    /// Ends the phase in progress and starts `phase` on its selection (one pool call).
    pub(crate) fn enter(&mut self, engine: &Arc<Engine>, phase: Phase) {
        let (control, pool) = (engine.energy(), engine.pool());
        self.engine.get_or_insert_with(|| Arc::clone(engine));
        self.close(control);
        let selection = control.selection(phase);
        pool.set_selection(selection.as_ref());
        control.meter().note_selection(selection.as_ref());
        self.slot(phase).selection = selection;
        self.open = Some(Open {
            phase,
            started: Instant::now(),
            joules: control.meter().total_joules().ok(),
            cpu: process_cpu_time(),
        });
    }

    /// Ends the last phase and gives back the calling thread's affinity.
    pub(crate) fn finish(&mut self, prefill_tokens: usize, decode_tokens: usize) -> EnergyStats {
        let Some(engine) = self.engine.take() else { return EnergyStats::default() };
        let control = engine.energy();
        self.close(control);
        control.meter().note_selection(None);
        engine.pool().release_caller();
        for (p, n) in [(&mut self.prefill, prefill_tokens), (&mut self.decode, decode_tokens)] {
            if n > 0 {
                p.joules_per_token = p.joules.map(|j| j / n as f64);
                p.cpu_time_per_token = p.cpu_time.map(|c| c / n as u32);
            }
        }
        EnergyStats {
            meter: control.meter().name().to_owned(),
            kind: control.meter().kind(),
            prefill: std::mem::take(&mut self.prefill),
            decode: std::mem::take(&mut self.decode),
        }
    }

    fn slot(&mut self, phase: Phase) -> &mut PhaseEnergy {
        match phase {
            Phase::Prefill => &mut self.prefill,
            Phase::Decode => &mut self.decode,
        }
    }

    fn close(&mut self, control: &EnergyControl) {
        let Some(open) = self.open.take() else { return };
        let joules = match (open.joules, control.meter().total_joules().ok()) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        };
        let cpu = match (open.cpu, process_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let slot = self.slot(open.phase);
        slot.wall_time += open.started.elapsed();
        slot.joules = add(slot.joules, joules);
        slot.cpu_time = match (slot.cpu_time, cpu) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

impl Drop for PhaseTracker {
    fn drop(&mut self) {
        if let Some(engine) = self.engine.take() {
            engine.energy().meter().note_selection(None);
            engine.pool().release_caller();
        }
    }
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}
