//! Energy-aware core selection (after MNN-AECS): decode, which is memory-bound and dominates an
//! answer's energy, runs on the cores that cost least at no visible slowdown; prefill keeps the
//! big cores.
//!
//! - [`power_model`]: the power heuristic (Eq. 9) over the CPU topology.
//! - [`meter`]: energy meters (RAPL, battery, Android through JNI, or the estimate).
//! - [`tuner`]: the two-stage search with 50-token probes, and the exhaustive search.
//! - `simulator`: probes on simulated phones (tests, `tern-lab`); probes on a loaded engine
//!   are the engine's (`engine/tuning.rs`).
//! - [`store`]: tuning results on disk, keyed by device and topology.
//! - `switch`: what moving the pool between two selections costs.
//! - [`control`]: the engine's energy state: mode, device state, selection per phase, and the
//!   per-phase energy accounting that sessions report in their stats.

#[cfg(any(target_os = "android", feature = "android-battery"))]
pub mod android;
pub mod control;
pub mod meter;
pub mod power_model;
// Simulated phones: for tests and the lab only.
#[cfg(any(test, feature = "lab"))]
pub mod simulator;
pub mod store;
mod switch;
pub mod tuner;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::runtime::{Cluster, CoreSelection, CpuCore, CpuPart, CpuTopology};
pub use control::{EnergyStats, EnergyStatus, PhaseEnergy};
pub use meter::{EnergyKind, EnergyMeter};
pub use store::Tuning;
pub use switch::{measure_switch_cost, SwitchCost};

/// How the engine trades speed for energy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum EnergyMode {
    /// Decode on the fastest selection found.
    Performance,
    /// Decode on the least-energy selection within 8% of the fastest (the default).
    #[default]
    Balanced,
    /// Decode on the least-energy selection within 25% of the fastest.
    PowerSaver,
    /// The app's own selections.
    Custom { prefill: CoreSelection, decode: CoreSelection },
}

impl EnergyMode {
    /// A custom mode's selections must name online CPUs ([`CoreSelection::validate`]):
    /// [`crate::Error::InvalidOption`] otherwise.
    pub fn validate(&self) -> crate::Result<()> {
        if let EnergyMode::Custom { prefill, decode } = self {
            prefill.validate()?;
            decode.validate()?;
        }
        Ok(())
    }
}

/// The phone's thermal state as the OS reports it (iOS `ProcessInfo.ThermalState`; Android
/// `PowerManager` thermal status: NONE/LIGHT → Nominal/Fair, MODERATE → Fair, SEVERE → Serious,
/// CRITICAL and above → Critical).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ThermalState {
    #[default]
    Nominal,
    Fair,
    Serious,
    Critical,
}

/// What the app reports about the device; throttling or a low battery moves decode to the
/// power-saver selection until it clears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceState {
    pub thermal: ThermalState,
    pub battery_low: bool,
}

impl DeviceState {
    pub(crate) fn needs_saving(&self) -> bool {
        self.battery_low || matches!(self.thermal, ThermalState::Serious | ThermalState::Critical)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum Phase {
    Prefill,
    Decode,
}

/// Energy settings of an engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergyOptions {
    pub mode: EnergyMode,
    /// Where tuning results are kept (an app's files directory); None keeps them in memory.
    pub tuning_dir: Option<PathBuf>,
    /// The device's name as the app knows it (Android `Build.MODEL`, iOS machine id); part of the
    /// tuning key. Default: the CPU name from `/proc/cpuinfo`.
    pub device_name: Option<String>,
}
