//! CPU topology: which cores exist, how fast each is, and how they group into clusters (cores that
//! share a frequency domain). Read from sysfs and procfs under a root path, so tests point it at
//! fixture trees of real devices.
//!
//! Sources, each optional (a missing file falls back to the next):
//! - `sys/devices/system/cpu/online`: the cores that exist now;
//! - `sys/devices/system/cpu/cpuN/cpu_capacity`: the kernel's relative speed (1024 = biggest);
//! - `sys/devices/system/cpu/cpuN/cpufreq/cpuinfo_max_freq`: max frequency in kHz;
//! - `sys/devices/system/cpu/cpufreq/policyM/related_cpus`: the cores of one frequency domain;
//! - `proc/cpuinfo`: `CPU implementer` / `CPU part` per core (Arm), `Hardware` or `model name`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Ids above this are not real cores: a corrupt file must not make us allocate for them.
const MAX_CPU_ID: usize = 4096;

/// A cluster whose capacity is below this fraction of the biggest one is an efficiency cluster:
/// too slow for memory-bound decode to be worth its cores.
const EFFICIENCY_CAPACITY_RATIO: f64 = 0.5;

/// Arm's implementer/part pair from `/proc/cpuinfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CpuPart {
    pub implementer: u32,
    pub part: u32,
}

impl CpuPart {
    /// The marketing name of well-known parts (the ones of the phones Tern targets).
    pub fn name(&self) -> Option<&'static str> {
        Some(match (self.implementer, self.part) {
            (0x41, 0xd05) => "Cortex-A55",
            (0x41, 0xd0b) => "Cortex-A76",
            (0x41, 0xd0d) => "Cortex-A77",
            (0x41, 0xd41) => "Cortex-A78",
            (0x41, 0xd44) => "Cortex-X1",
            (0x41, 0xd46) => "Cortex-A510",
            (0x41, 0xd47) => "Cortex-A710",
            (0x41, 0xd48) => "Cortex-X2",
            (0x41, 0xd4d) => "Cortex-A715",
            (0x41, 0xd4e) => "Cortex-X3",
            (0x41, 0xd80) => "Cortex-A520",
            (0x41, 0xd81) => "Cortex-A720",
            (0x41, 0xd82) => "Cortex-X4",
            (0x41, 0xd85) => "Cortex-X925",
            (0x41, 0xd87) => "Cortex-A725",
            (0x51, 0x001) => "Oryon",
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuCore {
    /// The OS's CPU number (what affinity masks use).
    pub id: usize,
    /// Index into `CpuTopology::clusters`.
    pub cluster: usize,
    /// Relative speed, 1024 for the biggest core.
    pub capacity: u32,
    pub max_freq_khz: Option<u32>,
    pub part: Option<CpuPart>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// CPU ids, ascending.
    pub cores: Vec<usize>,
    pub capacity: u32,
    pub max_freq_khz: Option<u32>,
    pub part: Option<CpuPart>,
    /// Too slow to help decode (see `EFFICIENCY_CAPACITY_RATIO`).
    pub efficiency: bool,
}

impl Cluster {
    pub(crate) fn max_ghz(&self) -> Option<f64> {
        self.max_freq_khz.map(|k| k as f64 / 1e6)
    }

    /// Short description, e.g. `4×Cortex-A55@2.05GHz`.
    pub fn describe(&self) -> String {
        let part = self.part.and_then(|p| p.name()).unwrap_or("core");
        match self.max_ghz() {
            Some(g) => format!("{}×{part}@{g:.2}GHz", self.cores.len()),
            None => format!("{}×{part}", self.cores.len()),
        }
    }
}

/// The cores of a device grouped into clusters, biggest cluster first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuTopology {
    /// What the device calls its CPU (`Hardware` or `model name` in `/proc/cpuinfo`); may be empty.
    pub soc: String,
    /// By CPU id.
    pub cores: Vec<CpuCore>,
    pub clusters: Vec<Cluster>,
}

impl CpuTopology {
    /// This machine's topology: sysfs where the OS has it, otherwise one cluster of the cores the
    /// process may use (iOS, macOS, Windows).
    pub fn detect() -> CpuTopology {
        if cfg!(any(target_os = "linux", target_os = "android")) {
            if let Ok(t) = CpuTopology::read(Path::new("/")) {
                return t;
            }
        }
        let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        CpuTopology::uniform(n)
    }

    /// `n` identical cores in one cluster, numbered from 0.
    pub(crate) fn uniform(n: usize) -> CpuTopology {
        let specs = (0..n.max(1)).map(|id| CoreSpec { id, capacity: 1024, max_freq_khz: None, part: None }).collect();
        CpuTopology::from_specs(String::new(), specs, &[])
    }

    /// Builds a topology from clusters given as (core count, capacity, max kHz, part), biggest
    /// first; CPU ids are numbered smallest cluster first, as Android kernels do.
    pub(crate) fn from_clusters(soc: &str, clusters: &[(usize, u32, u32, Option<CpuPart>)]) -> CpuTopology {
        let mut specs = Vec::new();
        let mut domains = Vec::new();
        for &(count, capacity, khz, part) in clusters.iter().rev() {
            let first = specs.len();
            for id in first..first + count {
                specs.push(CoreSpec { id, capacity, max_freq_khz: Some(khz), part });
            }
            domains.push((first..first + count).collect());
        }
        CpuTopology::from_specs(soc.to_owned(), specs, &domains)
    }

    /// Reads `root/sys/devices/system/cpu/...` and `root/proc/cpuinfo`.
    pub fn read(root: &Path) -> Result<CpuTopology> {
        let cpu_dir = root.join("sys/devices/system/cpu");
        let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap_or_default();
        let info = parse_cpuinfo(&cpuinfo);
        let ids = ["online", "present", "possible"]
            .iter()
            .find_map(|f| read_trimmed(&cpu_dir.join(f)).and_then(|s| parse_cpu_list(&s)))
            .or_else(|| (!info.parts.is_empty()).then(|| info.parts.keys().copied().collect()))
            .ok_or_else(|| Error::Topology(format!("no CPU list under {}", cpu_dir.display())))?;
        if ids.is_empty() {
            return Err(Error::Topology("the CPU list is empty".into()));
        }
        let specs: Vec<CoreSpec> = ids
            .iter()
            .map(|&id| {
                let dir = cpu_dir.join(format!("cpu{id}"));
                CoreSpec {
                    id,
                    capacity: read_num(&dir.join("cpu_capacity")).map_or(1024, |c| c.clamp(1, 1 << 20) as u32),
                    max_freq_khz: read_num(&dir.join("cpufreq/cpuinfo_max_freq"))
                        .map(|k| k.min(u32::MAX as u64) as u32),
                    part: info.parts.get(&id).copied().flatten(),
                }
            })
            .collect();
        let domains = read_freq_domains(&cpu_dir.join("cpufreq"));
        Ok(CpuTopology::from_specs(info.soc, specs, &domains))
    }

    /// Groups cores into clusters: by frequency domain when known, otherwise by equal capacity,
    /// frequency and part. Orders clusters biggest first and marks the efficiency ones.
    fn from_specs(soc: String, specs: Vec<CoreSpec>, domains: &[Vec<usize>]) -> CpuTopology {
        let mut groups: Vec<Vec<CoreSpec>> = Vec::new();
        for spec in specs {
            let domain = domains.iter().position(|d| d.contains(&spec.id));
            let same = |g: &Vec<CoreSpec>| match domain {
                Some(d) => domains[d].contains(&g[0].id),
                None => {
                    let first = &g[0];
                    domains.iter().all(|d| !d.contains(&first.id))
                        && (first.capacity, first.max_freq_khz, first.part)
                            == (spec.capacity, spec.max_freq_khz, spec.part)
                }
            };
            match groups.iter_mut().find(|g| same(g)) {
                Some(g) => g.push(spec),
                None => groups.push(vec![spec]),
            }
        }
        // Where the kernel gives no capacities (x86, older kernels), frequency ranks the clusters.
        let speed = |g: &Vec<CoreSpec>| {
            let cap = g.iter().map(|c| c.capacity).max().unwrap_or(1024);
            (cap, g.iter().filter_map(|c| c.max_freq_khz).max().unwrap_or(0))
        };
        groups.sort_by(|a, b| speed(b).cmp(&speed(a)).then(a[0].id.cmp(&b[0].id)));
        let top = groups.first().map_or(1024, |g| speed(g).0) as f64;
        let mut cores = Vec::new();
        let clusters = groups
            .iter()
            .enumerate()
            .map(|(ci, g)| {
                let (capacity, khz) = speed(g);
                let mut ids: Vec<usize> = g.iter().map(|c| c.id).collect();
                ids.sort_unstable();
                cores.extend(g.iter().map(|c| CpuCore {
                    id: c.id,
                    cluster: ci,
                    capacity: c.capacity,
                    max_freq_khz: c.max_freq_khz,
                    part: c.part,
                }));
                Cluster {
                    cores: ids,
                    capacity,
                    max_freq_khz: (khz > 0).then_some(khz),
                    part: g[0].part,
                    efficiency: ci > 0 && (capacity as f64) < EFFICIENCY_CAPACITY_RATIO * top,
                }
            })
            .collect();
        cores.sort_by_key(|c| c.id);
        CpuTopology { soc, cores, clusters }
    }

    pub fn n_cores(&self) -> usize {
        self.cores.len()
    }

    pub fn core(&self, id: usize) -> Option<&CpuCore> {
        self.cores.iter().find(|c| c.id == id)
    }

    /// The clusters worth running decode on (all but the efficiency ones), biggest first.
    pub(crate) fn performance_clusters(&self) -> impl Iterator<Item = (usize, &Cluster)> {
        self.clusters.iter().enumerate().filter(|(_, c)| !c.efficiency)
    }

    /// Every core of the performance clusters: the usual "big cores" selection.
    pub fn big_cores(&self) -> Vec<usize> {
        let mut ids: Vec<usize> = self.performance_clusters().flat_map(|(_, c)| c.cores.iter().copied()).collect();
        ids.sort_unstable();
        ids
    }

    /// A stable text that changes when the hardware does: clusters with sizes, capacities,
    /// frequencies and parts. Part of the key under which tuning results are stored.
    pub(crate) fn signature(&self) -> String {
        let clusters: Vec<String> = self
            .clusters
            .iter()
            .map(|c| {
                let part = c.part.map_or(String::from("-"), |p| format!("{:x}:{:x}", p.implementer, p.part));
                format!("{}x{}@{}k/{}", c.cores.len(), c.capacity, c.max_freq_khz.unwrap_or(0), part)
            })
            .collect();
        format!("{}|{}", self.soc, clusters.join(","))
    }

    /// e.g. `1×Cortex-A77@3.13GHz + 3×Cortex-A77@2.54GHz + 4×Cortex-A55@2.05GHz`.
    pub fn describe(&self) -> String {
        self.clusters.iter().map(Cluster::describe).collect::<Vec<_>>().join(" + ")
    }
}

struct CoreSpec {
    id: usize,
    capacity: u32,
    max_freq_khz: Option<u32>,
    part: Option<CpuPart>,
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

fn read_num(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// Parses kernel CPU lists: `0-3,6`, or the space-separated `0 1 2 3` of `related_cpus`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut ids = Vec::new();
    for tok in s.split([',', ' ', '\n', '\t']).filter(|t| !t.is_empty()) {
        let (lo, hi) = match tok.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?),
            None => {
                let v = tok.trim().parse::<usize>().ok()?;
                (v, v)
            }
        };
        if lo > hi || hi > MAX_CPU_ID {
            return None;
        }
        ids.extend(lo..=hi);
    }
    ids.sort_unstable();
    ids.dedup();
    Some(ids)
}

/// The cores of each `policy*` frequency domain.
fn read_freq_domains(cpufreq: &Path) -> Vec<Vec<usize>> {
    let Ok(dir) = std::fs::read_dir(cpufreq) else { return Vec::new() };
    let mut domains: Vec<(String, Vec<usize>)> = dir
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("policy"))
        .filter_map(|e| {
            let cpus = read_trimmed(&e.path().join("related_cpus")).and_then(|s| parse_cpu_list(&s))?;
            Some((e.file_name().to_string_lossy().into_owned(), cpus))
        })
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    domains.sort();
    domains.into_iter().map(|(_, cpus)| cpus).collect()
}

struct CpuInfo {
    soc: String,
    /// CPU id → its part (None where the block names no part, e.g. on x86).
    parts: BTreeMap<usize, Option<CpuPart>>,
}

fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut soc = String::new();
    let mut model_name = String::new();
    let mut parts = BTreeMap::new();
    let mut current: Option<usize> = None;
    let mut implementer = None;
    for line in text.lines().chain(std::iter::once("")) {
        let Some((key, value)) = line.split_once(':') else {
            if let Some(id) = current.take() {
                parts.insert(id, None);
            }
            implementer = None;
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => {
                current = value.parse().ok().filter(|&id| id <= MAX_CPU_ID);
                if let Some(id) = current {
                    parts.insert(id, None);
                }
            }
            "CPU implementer" => implementer = parse_hex(value),
            "CPU part" => {
                if let (Some(id), Some(imp), Some(part)) = (current, implementer, parse_hex(value)) {
                    parts.insert(id, Some(CpuPart { implementer: imp, part }));
                    current = None;
                }
            }
            "Hardware" => soc = value.to_owned(),
            "model name" if model_name.is_empty() => model_name = value.to_owned(),
            _ => {}
        }
    }
    if soc.is_empty() {
        soc = model_name;
    }
    CpuInfo { soc, parts }
}

fn parse_hex(s: &str) -> Option<u32> {
    u32::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("4 5 6\n"), Some(vec![4, 5, 6]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("0-999999999"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn cpuinfo_parts_and_soc() {
        let text = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd05\n\nprocessor\t: 1\n\
                    CPU implementer\t: 0x41\nCPU part\t: 0xd0d\n\nHardware\t: Kirin9000\n";
        let info = parse_cpuinfo(text);
        assert_eq!(info.soc, "Kirin9000");
        assert_eq!(info.parts[&1].and_then(|p| p.name()), Some("Cortex-A77"));
    }

    #[test]
    fn clusters_without_domains_group_by_speed() {
        let t = CpuTopology::from_clusters("x", &[(2, 1024, 3_000_000, None), (4, 300, 2_000_000, None)]);
        assert_eq!(t.clusters.len(), 2);
        assert_eq!(t.clusters[0].cores, vec![4, 5]);
        assert!(t.clusters[1].efficiency && !t.clusters[0].efficiency);
        assert_eq!(t.big_cores(), vec![4, 5]);
    }
}
