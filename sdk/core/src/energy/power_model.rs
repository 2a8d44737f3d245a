//! The power heuristic (MNN-AECS Eq. 9): an estimate of device power while decoding on a core
//! selection, from the topology alone.
//!
//! h(I) = Σ_i a_i · (|I_i| + (|C_i| − |I_i|) · b) · (f_max,i · s_i)² + P_s
//!
//! over clusters i with |C_i| cores of which |I_i| are selected. `a_i` is a per-core-type factor
//! (W/GHz²), `b` the share of a busy core's power that an idle core of an active cluster still
//! draws (its cluster stays at full frequency), `s_i` the biggest selected capacity in cluster i
//! over the cluster's capacity (1 when the cluster has a selected core, 0 when it has none: an
//! unused cluster clocks down to next to nothing), and `P_s` static power (memory, uncore).
//! The paper leaves a_i, b and P_s open; the values below are ours (see docs/energy.md). Only
//! ratios between selections matter to the tuner, which rescales h to its measurements.

use serde::{Deserialize, Serialize};

use crate::runtime::{CoreSelection, CpuPart, CpuTopology};

/// Idle-core share of a busy core's power in an active cluster.
const IDLE_SHARE: f64 = 0.3;
/// Static power (W): memory, interconnect, the rest of the SoC.
const STATIC_W: f64 = 1.5;
/// Frequency assumed where the OS does not give one.
const UNKNOWN_GHZ: f64 = 2.5;

/// Power factor a_i (W/GHz²) of a core type: in-order little cores draw far less per clock than
/// out-of-order middle cores, and the widest cores (Cortex-X) the most.
fn core_factor(part: Option<CpuPart>, capacity: u32) -> f64 {
    match part.and_then(|p| p.name()) {
        Some("Cortex-A55" | "Cortex-A510" | "Cortex-A520") => 0.05,
        Some("Cortex-X1" | "Cortex-X2" | "Cortex-X3" | "Cortex-X4" | "Cortex-X925") => 0.28,
        Some(_) => 0.16,
        // Unknown cores (x86, new parts): scale with capacity between the two ends.
        None => 0.05 + 0.23 * (capacity as f64 / 1024.0).powi(2),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PowerModel {
    /// a_i per cluster (W/GHz²).
    pub factor: Vec<f64>,
    /// f_max,i per cluster (GHz).
    pub ghz: Vec<f64>,
    /// |C_i| per cluster.
    pub cores: Vec<usize>,
    pub idle_share: f64,
    pub static_w: f64,
}

impl PowerModel {
    pub(crate) fn for_topology(topo: &CpuTopology) -> PowerModel {
        PowerModel {
            factor: topo.clusters.iter().map(|c| core_factor(c.part, c.capacity)).collect(),
            ghz: topo.clusters.iter().map(|c| c.max_ghz().unwrap_or(UNKNOWN_GHZ)).collect(),
            cores: topo.clusters.iter().map(|c| c.cores.len()).collect(),
            idle_share: IDLE_SHARE,
            static_w: STATIC_W,
        }
    }

    /// Estimated watts while decoding with `counts[i]` selected cores in cluster i.
    pub fn watts(&self, counts: &[usize]) -> f64 {
        let clusters = self.factor.iter().zip(&self.ghz).zip(&self.cores).zip(counts);
        self.static_w
            + clusters
                .filter(|(_, &n)| n > 0)
                .map(|(((a, f), &size), &n)| {
                    let n = n.min(size);
                    a * (n as f64 + (size - n) as f64 * self.idle_share) * f * f
                })
                .sum::<f64>()
    }

    /// Estimated watts for a selection on `topo` (see [`selection_counts`]).
    pub(crate) fn watts_for(&self, topo: &CpuTopology, selection: Option<&CoreSelection>) -> f64 {
        self.watts(&selection_counts(topo, selection))
    }
}

/// Selected cores per cluster. A thread count (or no selection: every core) is counted on the
/// biggest clusters first, where the OS scheduler puts busy threads.
pub fn selection_counts(topo: &CpuTopology, selection: Option<&CoreSelection>) -> Vec<usize> {
    let mut counts = vec![0; topo.clusters.len()];
    match selection.and_then(|s| s.core_ids()) {
        Some(ids) => {
            for id in ids {
                if let Some(core) = topo.core(*id) {
                    counts[core.cluster] += 1;
                }
            }
        }
        None => {
            let mut left = selection.map_or(topo.n_cores(), |s| s.threads());
            for (count, cluster) in counts.iter_mut().zip(&topo.clusters) {
                *count = left.min(cluster.cores.len());
                left -= *count;
            }
        }
    }
    counts
}

/// The concrete selection for per-cluster counts: the first `counts[i]` cores of cluster i
/// (cores in a cluster are interchangeable), or a thread count where cores cannot be pinned.
pub(crate) fn counts_selection(topo: &CpuTopology, counts: &[usize], pin: bool) -> CoreSelection {
    if !pin {
        return CoreSelection::Threads(counts.iter().sum::<usize>().max(1));
    }
    CoreSelection::cores(topo.clusters.iter().zip(counts).flat_map(|(c, &n)| c.cores.iter().copied().take(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_clusters_cost_nothing_and_idle_cores_a_share() {
        let t = CpuTopology::from_clusters("t", &[(1, 1024, 3_000_000, None), (3, 800, 2_000_000, None)]);
        let m = PowerModel::for_topology(&t);
        let a1 = m.factor[1] * 4.0;
        assert!((m.watts(&[0, 0]) - STATIC_W).abs() < 1e-9);
        assert!((m.watts(&[0, 1]) - (STATIC_W + a1 * (1.0 + 2.0 * IDLE_SHARE))).abs() < 1e-9);
        assert!(m.watts(&[1, 1]) > m.watts(&[0, 2]));
        assert_eq!(selection_counts(&t, Some(&CoreSelection::Threads(2))), vec![1, 1]);
        assert_eq!(selection_counts(&t, Some(&CoreSelection::cores([0, 3]))), vec![1, 1]);
        assert_eq!(counts_selection(&t, &[1, 2], true), CoreSelection::cores([3, 0, 1]));
    }
}
