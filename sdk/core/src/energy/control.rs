//! The engine's energy state: the mode, what the app reports about the device, the stored
//! tuning, and from those the core selection of each phase. Also the per-phase energy
//! accounting a generation reports in its stats.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::meter::{self, EnergyKind, EnergyMeter};
use super::store::{self, Tuning};
use super::{DeviceState, EnergyMode, EnergyOptions, Phase};
use crate::runtime::{pinning_supported, CoreSelection, CpuTopology};

pub(crate) struct EnergyControl {
    topology: CpuTopology,
    key: String,
    options: EnergyOptions,
    meter: Arc<dyn EnergyMeter>,
    state: Mutex<State>,
}

struct State {
    mode: EnergyMode,
    device: DeviceState,
    tuning: Option<Tuning>,
}

/// What the engine is doing about energy, for apps and the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyStatus {
    pub mode: EnergyMode,
    /// The mode in force: power saver while the device is throttled or low on battery.
    pub effective_mode: EnergyMode,
    pub device: DeviceState,
    pub topology: String,
    pub meter: String,
    pub meter_kind: EnergyKind,
    pub tuned: bool,
    pub prefill: Option<CoreSelection>,
    pub decode: Option<CoreSelection>,
}

impl EnergyControl {
    /// Reads this machine's topology, picks its best meter and loads a stored tuning.
    pub fn new(options: EnergyOptions) -> EnergyControl {
        let topology = CpuTopology::detect();
        let meter = meter::detect(Path::new("/"), &topology);
        EnergyControl::with_parts(options, topology, meter)
    }

    pub(crate) fn with_parts(
        options: EnergyOptions,
        topology: CpuTopology,
        meter: Arc<dyn EnergyMeter>,
    ) -> EnergyControl {
        let name = options.device_name.clone().unwrap_or_else(|| topology.soc.clone());
        let key = store::device_key(&name, &topology);
        let tuning = options.tuning_dir.as_deref().and_then(|d| store::load(d, &key, &topology));
        let state = State { mode: options.mode.clone(), device: DeviceState::default(), tuning };
        EnergyControl { topology, key, options, meter, state: Mutex::new(state) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// Device name and topology signature: where a tuning result applies.
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn meter(&self) -> &Arc<dyn EnergyMeter> {
        &self.meter
    }

    /// Whether selections pin cores here (else they are thread counts).
    pub fn pins(&self) -> bool {
        pinning_supported()
    }

    pub(crate) fn set_mode(&self, mode: EnergyMode) {
        self.state().mode = mode;
    }

    pub fn report_device_state(&self, device: DeviceState) {
        self.state().device = device;
    }

    pub fn tuning(&self) -> Option<Tuning> {
        self.state().tuning.clone()
    }

    /// Keeps a new tuning (and stores it when the app gave a directory).
    pub(crate) fn set_tuning(&self, tuning: Tuning) -> crate::Result<()> {
        if let Some(dir) = &self.options.tuning_dir {
            store::save(dir, &tuning)?;
        }
        self.state().tuning = Some(tuning);
        Ok(())
    }

    /// Every core of the performance clusters, as this platform applies it.
    pub fn big_cores(&self) -> CoreSelection {
        CoreSelection::cores(self.topology.big_cores()).for_platform()
    }

    fn effective(state: &State) -> EnergyMode {
        match &state.mode {
            EnergyMode::Custom { .. } => state.mode.clone(),
            _ if state.device.needs_saving() => EnergyMode::PowerSaver,
            m => m.clone(),
        }
    }

    /// The selection of `phase` under the mode in force. Before tuning, prefill and decode run
    /// on every thread where the OS puts them (as without energy management).
    pub fn selection(&self, phase: Phase) -> Option<CoreSelection> {
        let st = self.state();
        let mode = Self::effective(&st);
        if let EnergyMode::Custom { prefill, decode } = mode {
            return Some(if phase == Phase::Prefill { prefill } else { decode }.for_platform());
        }
        let t = st.tuning.as_ref()?;
        Some(match (phase, mode) {
            (Phase::Prefill, EnergyMode::PowerSaver) => t.fastest.clone(),
            (Phase::Prefill, _) => self.big_cores(),
            (Phase::Decode, EnergyMode::Performance) => t.fastest.clone(),
            (Phase::Decode, EnergyMode::PowerSaver) => t.power_saver.selection.clone(),
            (Phase::Decode, _) => t.balanced.selection.clone(),
        })
        .map(|s| s.for_platform())
    }

    pub fn status(&self) -> EnergyStatus {
        let (mode, effective_mode, device, tuned) = {
            let st = self.state();
            (st.mode.clone(), Self::effective(&st), st.device, st.tuning.is_some())
        };
        EnergyStatus {
            mode,
            effective_mode,
            device,
            topology: self.topology.describe(),
            meter: self.meter.name().to_owned(),
            meter_kind: self.meter.kind(),
            tuned,
            prefill: self.selection(Phase::Prefill),
            decode: self.selection(Phase::Decode),
        }
    }
}

/// Energy and CPU time of one phase of a generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseEnergy {
    /// Where the phase ran (None: every thread, placed by the OS).
    pub selection: Option<CoreSelection>,
    /// Energy over the phase's wall time (None when the meter could not be read).
    pub joules: Option<f64>,
    pub joules_per_token: Option<f64>,
    /// CPU time of the whole process over the phase (all threads, spinning included).
    pub cpu_time: Option<Duration>,
    pub cpu_time_per_token: Option<Duration>,
    pub wall_time: Duration,
}

/// Energy of a generation, per phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyStats {
    pub meter: String,
    pub kind: EnergyKind,
    pub prefill: PhaseEnergy,
    pub decode: PhaseEnergy,
}

impl Default for EnergyStats {
    fn default() -> Self {
        EnergyStats {
            meter: String::new(),
            kind: EnergyKind::Estimated,
            prefill: PhaseEnergy::default(),
            decode: PhaseEnergy::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::meter::EstimatedMeter;
    use crate::energy::simulator::{SimDevice, SimProbe};
    use crate::energy::tuner::{Tuner, TunerOptions};
    use crate::energy::ThermalState;

    fn tuned_kirin9000() -> (EnergyControl, Tuning) {
        let device = SimDevice::by_name("kirin9000").expect("device");
        let topo = device.topology();
        let mut probe = SimProbe::new(device, 5);
        let mut tuner = Tuner::new(&topo, &mut probe, TunerOptions::default(), true);
        let (fastest, fastest_tokens_per_s) = tuner.fastest().expect("stage 1");
        let balanced = tuner.search(0.08).expect("balanced");
        let power_saver = tuner.search(0.25).expect("saver");
        let meter = Arc::new(EstimatedMeter::new(topo.clone()));
        let control = EnergyControl::with_parts(EnergyOptions::default(), topo.clone(), meter);
        let tuning = Tuning {
            version: Tuning::new_version(),
            key: control.key().to_owned(),
            topology: topo.describe(),
            fastest,
            fastest_tokens_per_s,
            balanced,
            power_saver,
            probes: tuner.records().to_vec(),
            seconds: 0.0,
            tuned_at: 0,
        };
        (control, tuning)
    }

    #[test]
    fn modes_and_device_state_pick_the_selections() {
        let (control, tuning) = tuned_kirin9000();
        assert_eq!(control.selection(Phase::Decode), None, "untuned: every thread, as without energy management");
        control.set_tuning(tuning.clone()).expect("kept in memory");
        let big = CoreSelection::cores([4, 5, 6, 7]);
        assert_eq!(control.selection(Phase::Prefill), Some(big.clone()));
        assert_eq!(control.selection(Phase::Decode), Some(CoreSelection::cores([4, 5])));
        control.set_mode(EnergyMode::Performance);
        assert_eq!(control.selection(Phase::Decode), Some(tuning.fastest.clone()));
        control.set_mode(EnergyMode::Balanced);
        for hot in [
            DeviceState { thermal: ThermalState::Serious, battery_low: false },
            DeviceState { thermal: ThermalState::Nominal, battery_low: true },
        ] {
            control.report_device_state(hot);
            assert_eq!(control.status().effective_mode, EnergyMode::PowerSaver);
            assert_eq!(control.selection(Phase::Decode), Some(tuning.power_saver.selection.clone()));
            assert_eq!(control.selection(Phase::Prefill), Some(tuning.fastest.clone()));
        }
        control.report_device_state(DeviceState { thermal: ThermalState::Fair, battery_low: false });
        assert_eq!(control.selection(Phase::Decode), Some(tuning.balanced.selection.clone()), "back when it cools");
        let custom = EnergyMode::Custom { prefill: big.clone(), decode: CoreSelection::cores([7]) };
        control.set_mode(custom);
        control.report_device_state(DeviceState { thermal: ThermalState::Critical, battery_low: true });
        assert_eq!(control.selection(Phase::Decode), Some(CoreSelection::cores([7])), "the app's own choice stands");
    }
}
