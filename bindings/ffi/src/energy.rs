//! Energy modes, device state and energy figures crossing the boundary (docs/energy.md), each
//! converted from the SDK's own type in one place. The engine's methods that use them are in
//! `engine.rs`; the energy of each answer is `Stats::energy`.

use crate::units::ms;

/// Cores a phase runs on.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum CoreSelection {
    /// One thread pinned to each of these CPU ids (Linux, Android).
    Cores { ids: Vec<u32> },
    /// This many threads, placed by the OS (iOS, where threads cannot be pinned).
    Threads { count: u32 },
}

impl From<tern::CoreSelection> for CoreSelection {
    fn from(s: tern::CoreSelection) -> Self {
        match s {
            tern::CoreSelection::Cores(ids) => {
                CoreSelection::Cores { ids: ids.into_iter().map(|c| c as u32).collect() }
            }
            tern::CoreSelection::Threads(n) => CoreSelection::Threads { count: n as u32 },
        }
    }
}

impl From<CoreSelection> for tern::CoreSelection {
    fn from(s: CoreSelection) -> Self {
        match s {
            CoreSelection::Cores { ids } => tern::CoreSelection::cores(ids.into_iter().map(|c| c as usize)),
            CoreSelection::Threads { count } => tern::CoreSelection::Threads(count as usize),
        }
    }
}

/// How the engine trades speed for energy.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum EnergyMode {
    /// Decode on the fastest selection found by tuning.
    Performance,
    /// Decode on the least-energy selection within 8% of the fastest (the default).
    Balanced,
    /// Decode on the least-energy selection within 25% of the fastest.
    PowerSaver,
    /// The app's own selections.
    Custom { prefill: CoreSelection, decode: CoreSelection },
}

impl From<tern::EnergyMode> for EnergyMode {
    fn from(m: tern::EnergyMode) -> Self {
        match m {
            tern::EnergyMode::Performance => EnergyMode::Performance,
            tern::EnergyMode::Balanced => EnergyMode::Balanced,
            tern::EnergyMode::PowerSaver => EnergyMode::PowerSaver,
            tern::EnergyMode::Custom { prefill, decode } => {
                EnergyMode::Custom { prefill: prefill.into(), decode: decode.into() }
            }
        }
    }
}

impl From<EnergyMode> for tern::EnergyMode {
    fn from(m: EnergyMode) -> Self {
        match m {
            EnergyMode::Performance => tern::EnergyMode::Performance,
            EnergyMode::Balanced => tern::EnergyMode::Balanced,
            EnergyMode::PowerSaver => tern::EnergyMode::PowerSaver,
            EnergyMode::Custom { prefill, decode } => {
                tern::EnergyMode::Custom { prefill: prefill.into(), decode: decode.into() }
            }
        }
    }
}

/// The phone's thermal state as the OS reports it: iOS `ProcessInfo.ThermalState` one to one;
/// Android `PowerManager` thermal status NONE → Nominal, LIGHT and MODERATE → Fair,
/// SEVERE → Serious, CRITICAL and above → Critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ThermalState {
    Nominal,
    Fair,
    Serious,
    Critical,
}

impl From<tern::ThermalState> for ThermalState {
    fn from(t: tern::ThermalState) -> Self {
        match t {
            tern::ThermalState::Nominal => ThermalState::Nominal,
            tern::ThermalState::Fair => ThermalState::Fair,
            tern::ThermalState::Serious => ThermalState::Serious,
            tern::ThermalState::Critical => ThermalState::Critical,
        }
    }
}

impl From<ThermalState> for tern::ThermalState {
    fn from(t: ThermalState) -> Self {
        match t {
            ThermalState::Nominal => tern::ThermalState::Nominal,
            ThermalState::Fair => tern::ThermalState::Fair,
            ThermalState::Serious => tern::ThermalState::Serious,
            ThermalState::Critical => tern::ThermalState::Critical,
        }
    }
}

/// What the app reports about the device: while it is throttled (`Serious` or `Critical`) or
/// low on battery, decode runs on the power-saver selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct DeviceState {
    pub thermal: ThermalState,
    #[uniffi(default = false)]
    pub battery_low: bool,
}

impl From<tern::DeviceState> for DeviceState {
    fn from(d: tern::DeviceState) -> Self {
        DeviceState { thermal: d.thermal.into(), battery_low: d.battery_low }
    }
}

impl From<DeviceState> for tern::DeviceState {
    fn from(d: DeviceState) -> Self {
        tern::DeviceState { thermal: d.thermal.into(), battery_low: d.battery_low }
    }
}

/// Energy settings of an engine.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct EnergyOptions {
    /// The mode at load (default: balanced); `Engine.setEnergyMode` changes it later.
    #[uniffi(default = None)]
    pub mode: Option<EnergyMode>,
    /// Where tuning results are kept (e.g. the app's files directory); none keeps them in memory
    /// only, and the device is tuned again after each start.
    #[uniffi(default = None)]
    pub tuning_dir: Option<String>,
    /// The device's name as the app knows it (Android `Build.MODEL`, iOS machine id); part of the
    /// tuning key. Default: the CPU name the OS reports.
    #[uniffi(default = None)]
    pub device_name: Option<String>,
}

impl From<EnergyOptions> for tern::EnergyOptions {
    fn from(o: EnergyOptions) -> Self {
        tern::EnergyOptions {
            mode: o.mode.map(Into::into).unwrap_or_default(),
            tuning_dir: o.tuning_dir.map(Into::into),
            device_name: o.device_name,
        }
    }
}

/// Whether energy figures come from a meter or from the power model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum EnergyKind {
    Measured,
    Estimated,
}

impl From<tern::EnergyKind> for EnergyKind {
    fn from(k: tern::EnergyKind) -> Self {
        match k {
            tern::EnergyKind::Measured => EnergyKind::Measured,
            tern::EnergyKind::Estimated => EnergyKind::Estimated,
        }
    }
}

/// What the engine is doing about energy.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct EnergyStatus {
    /// The mode the app set.
    pub mode: EnergyMode,
    /// The mode in force: power saver while the device is throttled or low on battery.
    pub effective_mode: EnergyMode,
    pub device: DeviceState,
    /// The CPU's clusters, e.g. `1×Cortex-X4@3.30GHz + 3×Cortex-A720@3.15GHz + ...`.
    pub topology: String,
    /// The energy meter's name (`android battery`, `rapl`, `estimate (power model)`, ...).
    pub meter: String,
    pub meter_kind: EnergyKind,
    /// Whether this device has a tuning result (stored or just made).
    pub tuned: bool,
    /// Where each phase runs now; none: every thread, placed by the OS (before tuning).
    pub prefill: Option<CoreSelection>,
    pub decode: Option<CoreSelection>,
}

impl From<tern::energy::EnergyStatus> for EnergyStatus {
    fn from(s: tern::energy::EnergyStatus) -> Self {
        EnergyStatus {
            mode: s.mode.into(),
            effective_mode: s.effective_mode.into(),
            device: s.device.into(),
            topology: s.topology,
            meter: s.meter,
            meter_kind: s.meter_kind.into(),
            tuned: s.tuned,
            prefill: s.prefill.map(Into::into),
            decode: s.decode.map(Into::into),
        }
    }
}

/// One decode selection tuning chose, with what its probe measured.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct TunedSelection {
    pub selection: CoreSelection,
    pub tokens_per_s: f64,
    pub watts: f64,
    pub joules_per_token: f64,
    pub kind: EnergyKind,
    /// The slowdown it was allowed against the fastest selection (0.08 = 8%).
    pub max_slowdown: f64,
}

impl From<tern::energy::tuner::Choice> for TunedSelection {
    fn from(c: tern::energy::tuner::Choice) -> Self {
        TunedSelection {
            selection: c.selection.into(),
            tokens_per_s: c.measurement.tokens_per_s,
            watts: c.measurement.watts,
            joules_per_token: c.measurement.joules_per_token(),
            kind: c.measurement.kind.into(),
            max_slowdown: c.max_slowdown,
        }
    }
}

/// What tuning found on this device (kept and reused by every model and session).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Tuning {
    pub topology: String,
    /// The fastest decode selection and its speed.
    pub fastest: CoreSelection,
    pub fastest_tokens_per_s: f64,
    /// Decode in `Balanced` mode.
    pub balanced: TunedSelection,
    /// Decode in `PowerSaver` mode (and while the device is throttled or low on battery).
    pub power_saver: TunedSelection,
    /// Probes (50 decoded tokens each) the search ran.
    pub probes: u32,
    pub seconds: f64,
    /// Unix time of the tuning.
    pub tuned_at: u64,
}

impl From<tern::energy::Tuning> for Tuning {
    fn from(t: tern::energy::Tuning) -> Self {
        Tuning {
            topology: t.topology,
            fastest: t.fastest.into(),
            fastest_tokens_per_s: t.fastest_tokens_per_s,
            balanced: t.balanced.into(),
            power_saver: t.power_saver.into(),
            probes: t.probes.len() as u32,
            seconds: t.seconds,
            tuned_at: t.tuned_at,
        }
    }
}

/// Energy and CPU time of one phase of an answer.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct PhaseEnergy {
    /// Where the phase ran; none: every thread, placed by the OS.
    pub selection: Option<CoreSelection>,
    /// Energy over the phase (none when the meter could not be read).
    pub joules: Option<f64>,
    pub joules_per_token: Option<f64>,
    /// CPU time of the whole process over the phase.
    pub cpu_ms: Option<f64>,
    pub cpu_ms_per_token: Option<f64>,
    pub wall_ms: f64,
}

impl From<tern::energy::PhaseEnergy> for PhaseEnergy {
    fn from(p: tern::energy::PhaseEnergy) -> Self {
        PhaseEnergy {
            selection: p.selection.map(Into::into),
            joules: p.joules,
            joules_per_token: p.joules_per_token,
            cpu_ms: p.cpu_time.map(ms),
            cpu_ms_per_token: p.cpu_time_per_token.map(ms),
            wall_ms: ms(p.wall_time),
        }
    }
}

/// Energy of an answer, per phase, always labelled measured or estimated.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct EnergyStats {
    pub meter: String,
    pub kind: EnergyKind,
    pub prefill: PhaseEnergy,
    pub decode: PhaseEnergy,
}

impl From<tern::EnergyStats> for EnergyStats {
    fn from(e: tern::EnergyStats) -> Self {
        EnergyStats { meter: e.meter, kind: e.kind.into(), prefill: e.prefill.into(), decode: e.decode.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_states_round_trip() {
        let custom = tern::EnergyMode::Custom {
            prefill: tern::CoreSelection::Cores(vec![4, 5, 6, 7]),
            decode: tern::CoreSelection::Threads(2),
        };
        for mode in [tern::EnergyMode::Performance, tern::EnergyMode::PowerSaver, custom] {
            assert_eq!(tern::EnergyMode::from(EnergyMode::from(mode.clone())), mode);
        }
        let state = tern::DeviceState { thermal: tern::ThermalState::Serious, battery_low: true };
        assert_eq!(tern::DeviceState::from(DeviceState::from(state)), state);
    }

    #[test]
    fn options_default_to_the_sdks() {
        assert_eq!(tern::EnergyOptions::from(EnergyOptions::default()), tern::EnergyOptions::default());
        // Cores given in any order are pinned in ascending order, once each.
        let s: tern::CoreSelection = CoreSelection::Cores { ids: vec![3, 1, 3] }.into();
        assert_eq!(s, tern::CoreSelection::Cores(vec![1, 3]));
    }

    #[test]
    fn ids_that_are_not_online_cpus_are_invalid_options() {
        // What `Engine.setEnergyMode` and `EngineOptions.energy` check before anything pins.
        for ids in [vec![99_999], vec![1024], vec![0, u32::MAX], Vec::new()] {
            let bad = EnergyMode::Custom {
                prefill: CoreSelection::Threads { count: 1 },
                decode: CoreSelection::Cores { ids: ids.clone() },
            };
            let err = tern::EnergyMode::from(bad).validate().map_err(crate::TernError::from);
            assert!(matches!(err, Err(crate::TernError::InvalidOption { .. })), "{ids:?}: {err:?}");
        }
        let online = tern::energy::CpuTopology::detect().cores[0].id as u32;
        let good = EnergyMode::Custom {
            prefill: CoreSelection::Cores { ids: vec![online] },
            decode: CoreSelection::Threads { count: 2 },
        };
        assert!(tern::EnergyMode::from(good).validate().is_ok());
    }
}
