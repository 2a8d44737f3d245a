//! Simulated phones for tests and benchmarks: the five Android devices of MNN-AECS, each a
//! topology plus per-cluster decode speed and power models.
//!
//! Speed: decode is split evenly over the threads (as the engines the paper measured do), so the
//! slowest selected core sets the pace, up to the memory-bandwidth limit:
//!   speed(I) = min(R_max, |I| · min over selected clusters of r_i)
//! Power: what the phone draws while decoding (as a battery gauge sees it):
//!   P(I) = P_base + e_dram · speed + Σ over clusters with a selected core of
//!          (P_cluster,i + |I_i| · P_busy,i + (|C_i| − |I_i|) · P_idle,i)
//! (a cluster with no selected core clocks down; its draw is inside P_base).
//! This is a different model from the tuner's heuristic (Eq. 9), so the tuner is not checked
//! against its own assumptions. The paper gives the topologies and, for the Mate 40 Pro with
//! Qwen2.5-1.5B, Table 4: all 8 cores 10.2 tok/s at 8.8 W, the 4 big cores 21.7 tok/s at 8.7 W,
//! 2 middle cores 20.6 tok/s at 6.2 W. The Mate 40 Pro's values are solved from those figures;
//! the other phones' are plausible values of the same kind (docs/energy.md lists them all).
//! Probes see noise: ±1.5% on speed and ±5% on power (the paper's battery-gauge noise).

use super::meter::EnergyKind;
use super::power_model::selection_counts;
use super::tuner::{Measurement, Probe, PROBE_TOKENS};
use crate::error::Result;
use crate::runtime::{CoreSelection, CpuPart, CpuTopology};

#[derive(Debug, Clone, PartialEq)]
pub struct SimCluster {
    pub cores: usize,
    pub capacity: u32,
    pub max_khz: u32,
    pub part: CpuPart,
    /// Decode tokens/s each core of this cluster sustains under an even split.
    pub core_tokens_per_s: f64,
    /// Watts of the cluster itself (L2, clock tree) while any of its cores is busy.
    pub cluster_w: f64,
    pub busy_w: f64,
    /// Watts of an idle core in an active cluster (held at the cluster's frequency).
    pub idle_w: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimDevice {
    /// Short id for the command line (the SoC).
    pub id: &'static str,
    pub phone: &'static str,
    pub soc: &'static str,
    /// Biggest first.
    pub clusters: Vec<SimCluster>,
    /// Memory-bandwidth limit on decode speed (tokens/s).
    pub max_tokens_per_s: f64,
    /// Everything else the phone draws (W): screen, radios, idle clusters.
    pub base_w: f64,
    /// DRAM energy per decoded token (J): the model's weights are read once per token.
    pub dram_j_per_token: f64,
}

const A55: CpuPart = CpuPart { implementer: 0x41, part: 0xd05 };
const A76: CpuPart = CpuPart { implementer: 0x41, part: 0xd0b };
const A77: CpuPart = CpuPart { implementer: 0x41, part: 0xd0d };
const A520: CpuPart = CpuPart { implementer: 0x41, part: 0xd80 };
const A720: CpuPart = CpuPart { implementer: 0x41, part: 0xd81 };
const X4: CpuPart = CpuPart { implementer: 0x41, part: 0xd82 };
const ORYON: CpuPart = CpuPart { implementer: 0x51, part: 0x001 };

#[allow(clippy::too_many_arguments)]
const fn cluster(
    cores: usize,
    capacity: u32,
    max_khz: u32,
    part: CpuPart,
    r: f64,
    cl: f64,
    busy: f64,
    idle: f64,
) -> SimCluster {
    SimCluster { cores, capacity, max_khz, part, core_tokens_per_s: r, cluster_w: cl, busy_w: busy, idle_w: idle }
}

impl SimDevice {
    /// The five phones of the paper.
    pub fn all() -> Vec<SimDevice> {
        vec![
            SimDevice {
                id: "kirin9000",
                phone: "Huawei Mate 40 Pro",
                soc: "Kirin 9000",
                clusters: vec![
                    cluster(1, 1024, 3_130_000, A77, 12.7, 0.20, 1.430, 0.143),
                    cluster(3, 831, 2_540_000, A77, 10.3, 0.30, 0.894, 0.089),
                    cluster(4, 240, 2_050_000, A55, 1.275, 0.10, 0.172, 0.020),
                ],
                max_tokens_per_s: 21.7,
                base_w: 2.787,
                dram_j_per_token: 0.060,
            },
            SimDevice {
                id: "kirin990",
                phone: "Honor V30 Pro",
                soc: "Kirin 990",
                clusters: vec![
                    cluster(2, 1024, 2_860_000, A76, 9.7, 0.25, 1.35, 0.14),
                    cluster(2, 845, 2_360_000, A76, 8.2, 0.25, 0.85, 0.09),
                    cluster(4, 230, 1_950_000, A55, 1.2, 0.10, 0.16, 0.02),
                ],
                max_tokens_per_s: 17.0,
                base_w: 2.6,
                dram_j_per_token: 0.070,
            },
            SimDevice {
                id: "exynos1580",
                phone: "Samsung Galaxy A56",
                soc: "Exynos 1580",
                clusters: vec![
                    cluster(1, 1024, 2_900_000, A720, 8.9, 0.20, 1.25, 0.12),
                    cluster(3, 918, 2_600_000, A720, 8.6, 0.30, 1.10, 0.10),
                    cluster(4, 280, 1_950_000, A520, 1.3, 0.10, 0.18, 0.02),
                ],
                max_tokens_per_s: 18.0,
                base_w: 2.2,
                dram_j_per_token: 0.065,
            },
            SimDevice {
                id: "sd8gen3",
                phone: "Meizu 21",
                soc: "Snapdragon 8 Gen 3",
                clusters: vec![
                    cluster(1, 1024, 3_300_000, X4, 11.0, 0.30, 2.20, 0.22),
                    cluster(3, 870, 3_150_000, A720, 10.5, 0.30, 1.30, 0.20),
                    cluster(2, 817, 2_960_000, A720, 9.9, 0.35, 1.10, 0.11),
                    cluster(2, 350, 2_270_000, A520, 2.0, 0.10, 0.22, 0.02),
                ],
                max_tokens_per_s: 24.0,
                base_w: 2.7,
                dram_j_per_token: 0.055,
            },
            SimDevice {
                id: "sd8elite",
                phone: "Xiaomi 15 Pro",
                soc: "Snapdragon 8 Elite",
                clusters: vec![
                    cluster(2, 1024, 4_320_000, ORYON, 16.0, 0.30, 2.60, 0.26),
                    cluster(6, 837, 3_530_000, ORYON, 13.0, 0.30, 1.90, 0.25),
                ],
                max_tokens_per_s: 31.0,
                base_w: 2.9,
                dram_j_per_token: 0.050,
            },
        ]
    }

    /// A device by SoC id (`kirin9000`) or phone name without spaces, any case (`mate40pro`).
    pub fn by_name(name: &str) -> Option<SimDevice> {
        let key: String = name.chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
        SimDevice::all().into_iter().find(|d| {
            let phone: String = d.phone.chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
            d.id == key || phone == key || phone.ends_with(&key)
        })
    }

    pub fn topology(&self) -> CpuTopology {
        let clusters: Vec<_> = self.clusters.iter().map(|c| (c.cores, c.capacity, c.max_khz, Some(c.part))).collect();
        CpuTopology::from_clusters(self.soc, &clusters)
    }

    /// Noise-free decode speed (tokens/s) and power (W) with `counts[i]` cores of cluster i.
    pub fn truth(&self, counts: &[usize]) -> (f64, f64) {
        let threads: usize = counts.iter().sum();
        let pace = self
            .clusters
            .iter()
            .zip(counts)
            .filter(|(_, &n)| n > 0)
            .map(|(c, _)| c.core_tokens_per_s)
            .fold(f64::INFINITY, f64::min);
        if threads == 0 {
            return (0.0, self.base_w);
        }
        let speed = (threads as f64 * pace).min(self.max_tokens_per_s);
        let cores: f64 = self
            .clusters
            .iter()
            .zip(counts)
            .filter(|(_, &n)| n > 0)
            .map(|(c, &n)| {
                let n = n.min(c.cores);
                c.cluster_w + n as f64 * c.busy_w + (c.cores - n) as f64 * c.idle_w
            })
            .sum();
        (speed, self.base_w + self.dram_j_per_token * speed + cores)
    }

    /// Noise-free measurement of a selection.
    pub fn truth_of(&self, selection: &CoreSelection) -> Measurement {
        let (tokens_per_s, watts) = self.truth(&selection_counts(&self.topology(), Some(selection)));
        Measurement { tokens_per_s, watts, kind: EnergyKind::Measured, cpu_s_per_token: None }
    }

    /// The usual engine setting: every core of the performance clusters.
    pub fn big_cores(&self) -> CoreSelection {
        CoreSelection::cores(self.topology().big_cores())
    }
}

/// Probes a simulated device the way a phone's battery gauge would: with noise.
pub struct SimProbe {
    pub device: SimDevice,
    topology: CpuTopology,
    rng: u64,
    pub speed_noise: f64,
    pub power_noise: f64,
    /// Probes taken so far.
    pub probes: usize,
    /// Seconds of decoding the probes would have taken on the phone.
    pub seconds: f64,
}

impl SimProbe {
    pub fn new(device: SimDevice, seed: u64) -> SimProbe {
        let topology = device.topology();
        SimProbe {
            device,
            topology,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            speed_noise: 0.015,
            power_noise: 0.05,
            probes: 0,
            seconds: 0.0,
        }
    }

    /// A noise-free probe: the ground truth, for the exhaustive search.
    pub fn exact(device: SimDevice) -> SimProbe {
        SimProbe { speed_noise: 0.0, power_noise: 0.0, ..SimProbe::new(device, 1) }
    }

    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// Uniform in [-1, 1) (xorshift64*).
    fn unit(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

impl Probe for SimProbe {
    fn measure(&mut self, selection: &CoreSelection) -> Result<Measurement> {
        let (speed, watts) = self.device.truth(&selection_counts(&self.topology, Some(selection)));
        let speed = speed * (1.0 + self.speed_noise * self.unit());
        let watts = watts * (1.0 + self.power_noise * self.unit());
        self.probes += 1;
        if speed > 0.0 {
            self.seconds += PROBE_TOKENS as f64 / speed;
        }
        Ok(Measurement { tokens_per_s: speed, watts, kind: EnergyKind::Measured, cpu_s_per_token: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Mate 40 Pro reproduces the paper's Table 4.
    #[test]
    fn table_4() {
        let d = SimDevice::by_name("Mate 40 Pro").expect("device");
        let close = |(s, p): (f64, f64), (ws, wp): (f64, f64)| (s - ws).abs() < 0.05 && (p - wp).abs() < 0.05;
        assert!(close(d.truth(&[1, 3, 4]), (10.2, 8.8)), "all 8 cores: {:?}", d.truth(&[1, 3, 4]));
        assert!(close(d.truth(&[1, 3, 0]), (21.7, 8.7)), "4 big cores: {:?}", d.truth(&[1, 3, 0]));
        assert!(close(d.truth(&[0, 2, 0]), (20.6, 6.2)), "2 middle cores: {:?}", d.truth(&[0, 2, 0]));
    }

    #[test]
    fn names_and_noise() {
        assert_eq!(SimDevice::by_name("xiaomi15pro").map(|d| d.id), Some("sd8elite"));
        assert_eq!(SimDevice::by_name("kirin990").map(|d| d.phone), Some("Honor V30 Pro"));
        assert!(SimDevice::by_name("pixel").is_none());
        let mut p = SimProbe::new(SimDevice::by_name("kirin9000").expect("device"), 7);
        let sel = CoreSelection::cores([4, 5]);
        let m = p.measure(&sel).expect("probe");
        let (s, w) = (m.tokens_per_s / 20.6, m.watts / 6.2);
        assert!((0.98..=1.02).contains(&s) && (0.94..=1.06).contains(&w), "{m:?}");
    }
}
