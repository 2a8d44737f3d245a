//! Tuning results on disk: one JSON file per device and topology in a directory the app gives
//! (its files directory). A result is reused by every model and session until the key changes
//! (another phone, a kernel that reports its CPUs differently), which makes the engine tune again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::tuner::{Choice, ProbeRecord};
use crate::error::{Error, Result, WriteOp};
use crate::runtime::{CoreSelection, CpuTopology};

/// Bumped when the meaning of stored fields changes; older files are then ignored.
const FORMAT_VERSION: u32 = 1;

/// What tuning found on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    pub version: u32,
    /// Device name and topology signature: the result applies only where this matches.
    pub key: String,
    /// Human-readable topology, e.g. `1×Cortex-A77@3.13GHz + 3×...`.
    pub topology: String,
    /// Stage 1's result: the fastest selection and its speed.
    pub fastest: CoreSelection,
    pub fastest_tokens_per_s: f64,
    /// Least energy within 8% of the fastest.
    pub balanced: Choice,
    /// Least energy within 25% of the fastest.
    pub power_saver: Choice,
    /// Every probe, in order.
    pub probes: Vec<ProbeRecord>,
    /// Seconds the tuning took.
    pub seconds: f64,
    /// Unix time of the tuning.
    pub tuned_at: u64,
}

/// The key of a device: its name and the topology signature.
pub fn device_key(device_name: &str, topology: &CpuTopology) -> String {
    format!("{device_name}|{}", topology.signature())
}

/// The file for `key` in `dir` (a hash of the key: names must be safe on every file system).
pub(crate) fn path_for(dir: &Path, key: &str) -> PathBuf {
    // FNV-1a, 64 bits: stable across Rust versions, unlike std's hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    dir.join(format!("tern-energy-{hash:016x}.json"))
}

/// The stored tuning for `key` on `topology`, if there is one of this format; a missing,
/// unreadable, foreign or damaged file is None (the engine tunes again and overwrites it). A
/// selection naming a core the topology does not have is damage too: such ids never reach the
/// OS.
pub fn load(dir: &Path, key: &str, topology: &CpuTopology) -> Option<Tuning> {
    // No tuning is anywhere near this size: a larger file is not read into memory.
    const MAX_FILE_BYTES: u64 = 16 << 20;
    let path = path_for(dir, key);
    if std::fs::metadata(&path).ok()?.len() > MAX_FILE_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let t: Tuning = serde_json::from_str(&text).ok()?;
    (t.version == FORMAT_VERSION && t.key == key && t.fits(topology)).then_some(t)
}

/// Writes `tuning` atomically: a temporary file of this writer's own, renamed over the old one.
/// Writers racing on one key each land whole; the last rename wins (a tuning replaces the
/// previous one, nothing is merged).
pub fn save(dir: &Path, tuning: &Tuning) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(Error::write(WriteOp::CreateDir, dir))?;
    let path = path_for(dir, &tuning.key);
    let text =
        serde_json::to_string_pretty(tuning).map_err(|e| Error::Energy(format!("cannot encode the tuning: {e}")))?;
    crate::files::replace(&path, text.as_bytes())?;
    Ok(path)
}

impl Tuning {
    pub fn new_version() -> u32 {
        FORMAT_VERSION
    }

    /// Whether every selection it applies runs on cores of `topology` (and thread counts are
    /// in range).
    pub(crate) fn fits(&self, topology: &CpuTopology) -> bool {
        [&self.fastest, &self.balanced.selection, &self.power_saver.selection].iter().all(|s| match s {
            CoreSelection::Cores(ids) => !ids.is_empty() && ids.iter().all(|&id| topology.core(id).is_some()),
            threads => threads.validate().is_ok(),
        })
    }
}
