//! The two-stage search for the decode selection with least energy at no visible slowdown
//! (MNN-AECS §4), and the exhaustive search it is checked against.
//!
//! Stage 1 starts on one core of the biggest cluster and adds cores, big to small, while decode
//! gets faster by more than measurement noise; efficiency clusters are left out (memory-bound
//! decode gains nothing from them). Its end point Ĩ is the speed reference and the root of
//! stage 2, a tree of cheaper candidates two levels deep:
//! (a) drop the smallest selected core, (b) drop the two smallest (both only below the root),
//! (c) move one core from a bigger selected cluster to a smaller selected one that has room,
//! (d) move a selected cluster's cores to an unselected smaller cluster.
//! Every step removes or slows cores, so a candidate slower than the bound has no faster child and
//! is not expanded. Each candidate decodes a short probe; among those within the slowdown bound
//! the least E_h = (1 − α)·E + α·ĥ·t wins, ĥ being the power heuristic rescaled to the
//! measurements (it steadies the choice against meter noise).

use serde::{Deserialize, Serialize};

use super::meter::EnergyKind;
use super::power_model::{counts_selection, PowerModel};
use crate::error::Result;
use crate::runtime::{CoreSelection, CpuTopology};

/// Decode tokens per probe (the paper's choice: long enough for the battery gauge).
pub(crate) const PROBE_TOKENS: usize = 50;

/// The slowdown the power-saver mode accepts.
pub const POWER_SAVER_SLOWDOWN: f64 = 0.25;

/// Measures decode on a selection: a real engine, or a simulated device.
pub trait Probe {
    fn measure(&mut self, selection: &CoreSelection) -> Result<Measurement>;
}

/// One probe's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub tokens_per_s: f64,
    /// Average device power over the probe.
    pub watts: f64,
    /// Whether `watts` came from a meter or from the power model.
    pub kind: EnergyKind,
    /// Process CPU time per token, where known.
    pub cpu_s_per_token: Option<f64>,
}

impl Measurement {
    pub fn joules_per_token(&self) -> f64 {
        if self.tokens_per_s > 0.0 {
            self.watts / self.tokens_per_s
        } else {
            f64::INFINITY
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TunerOptions {
    /// Largest accepted slowdown against the stage-1 speed (0.08: users do not notice).
    pub max_slowdown: f64,
    /// Stage 1 keeps a core only if decode gets at least this much faster (above probe noise).
    pub min_gain: f64,
    /// Weight α of the heuristic in the energy objective.
    pub alpha: f64,
}

impl Default for TunerOptions {
    fn default() -> Self {
        TunerOptions { max_slowdown: 0.08, min_gain: 0.03, alpha: 0.5 }
    }
}

/// A probed candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub selection: CoreSelection,
    /// Selected cores per cluster.
    pub counts: Vec<usize>,
    /// 1 or 2: the stage that first probed it.
    pub stage: u8,
    pub measurement: Measurement,
    /// The power heuristic's watts for it (before rescaling).
    pub heuristic_watts: f64,
}

/// The outcome of one search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub max_slowdown: f64,
    pub selection: CoreSelection,
    pub measurement: Measurement,
    /// Candidates this search measured (stage 1 included; a probe shared with an earlier search
    /// counts in both).
    pub probes: usize,
}

/// The two-stage search over one device. Probes are cached, so a second search with a wider
/// bound (power saver) only pays for candidates the first did not measure.
pub struct Tuner<'a> {
    topo: &'a CpuTopology,
    model: PowerModel,
    probe: &'a mut dyn Probe,
    opts: TunerOptions,
    pin: bool,
    records: Vec<ProbeRecord>,
    /// Stage-1 result: (counts, speed).
    root: Option<(Vec<usize>, f64)>,
}

impl<'a> Tuner<'a> {
    /// `pin`: whether selections are core sets (Linux, Android) or thread counts (iOS).
    pub fn new(topo: &'a CpuTopology, probe: &'a mut dyn Probe, opts: TunerOptions, pin: bool) -> Tuner<'a> {
        let model = PowerModel::for_topology(topo);
        Tuner { topo, model, probe, opts, pin, records: Vec::new(), root: None }
    }

    /// Every probe so far, in order.
    pub fn records(&self) -> &[ProbeRecord] {
        &self.records
    }

    /// Stage 1's selection (the fastest) and its speed.
    pub fn fastest(&mut self) -> Result<(CoreSelection, f64)> {
        let (counts, speed) = self.stage1()?;
        Ok((counts_selection(self.topo, &counts, self.pin), speed))
    }

    /// The least-energy selection within `max_slowdown` of the fastest.
    pub fn search(&mut self, max_slowdown: f64) -> Result<Choice> {
        let (root, reference) = self.stage1()?;
        let bound = (1.0 - max_slowdown) * reference;
        let mut used: Vec<Vec<usize>> =
            self.records.iter().filter(|r| r.stage == 1).map(|r| r.counts.clone()).collect();
        let mut level1: Vec<Vec<usize>> =
            [self.remove_smallest(&root, 1), self.remove_smallest(&root, 2)].into_iter().flatten().collect();
        level1.extend(self.moves(&root));
        for candidate in level1 {
            let speed = self.measure(&candidate, 2)?.tokens_per_s;
            note(&mut used, &candidate);
            if speed >= bound {
                for child in self.moves(&candidate) {
                    self.measure(&child, 2)?;
                    note(&mut used, &child);
                }
            }
        }
        // Rescale the heuristic to the measurements (mean ratio over every probe so far).
        let scale = {
            let ratios: Vec<f64> = self.records.iter().map(|r| r.measurement.watts / r.heuristic_watts).collect();
            ratios.iter().sum::<f64>() / ratios.len().max(1) as f64
        };
        let alpha = self.opts.alpha;
        let objective = |r: &ProbeRecord| {
            let m = &r.measurement;
            ((1.0 - alpha) * m.watts + alpha * scale * r.heuristic_watts) / m.tokens_per_s
        };
        let best = self
            .records
            .iter()
            .filter(|r| used.contains(&r.counts) && r.measurement.tokens_per_s >= bound)
            .min_by(|a, b| objective(a).total_cmp(&objective(b)))
            .or_else(|| self.records.iter().find(|r| r.counts == root))
            .cloned()
            .ok_or_else(|| crate::Error::Energy("the tuner measured nothing".into()))?;
        Ok(Choice { max_slowdown, selection: best.selection, measurement: best.measurement, probes: used.len() })
    }

    fn stage1(&mut self) -> Result<(Vec<usize>, f64)> {
        if let Some(root) = &self.root {
            return Ok(root.clone());
        }
        let order: Vec<usize> =
            self.topo.performance_clusters().flat_map(|(i, c)| std::iter::repeat_n(i, c.cores.len())).collect();
        let mut best = vec![0; self.topo.clusters.len()];
        best[order[0]] = 1;
        let mut best_speed = self.measure(&best, 1)?.tokens_per_s;
        for &cluster in &order[1..] {
            let mut next = best.clone();
            next[cluster] += 1;
            let speed = self.measure(&next, 1)?.tokens_per_s;
            if speed < best_speed * (1.0 + self.opts.min_gain) {
                break;
            }
            (best, best_speed) = (next, speed);
        }
        self.root = Some((best.clone(), best_speed));
        Ok((best, best_speed))
    }

    /// Probes `counts` once; later calls return the cached measurement.
    fn measure(&mut self, counts: &[usize], stage: u8) -> Result<Measurement> {
        if let Some(r) = self.records.iter().find(|r| r.counts == counts) {
            return Ok(r.measurement);
        }
        let selection = counts_selection(self.topo, counts, self.pin);
        let measurement = self.probe.measure(&selection)?;
        let heuristic_watts = self.model.watts(counts);
        self.records.push(ProbeRecord { selection, counts: counts.to_vec(), stage, measurement, heuristic_watts });
        Ok(measurement)
    }

    /// (a)/(b): without the `n` smallest selected cores; None if nothing would be left.
    fn remove_smallest(&self, counts: &[usize], n: usize) -> Option<Vec<usize>> {
        let mut c = counts.to_vec();
        for _ in 0..n {
            let smallest = (0..c.len()).rev().find(|&i| c[i] > 0)?;
            c[smallest] -= 1;
        }
        (c.iter().sum::<usize>() > 0).then_some(c)
    }

    /// (c) and (d) over the performance clusters.
    fn moves(&self, counts: &[usize]) -> Vec<Vec<usize>> {
        let perf: Vec<usize> = self.topo.performance_clusters().map(|(i, _)| i).collect();
        let size = |i: usize| self.topo.clusters[i].cores.len();
        let mut out = Vec::new();
        for &x in perf.iter().filter(|&&x| counts[x] > 0) {
            for &y in perf.iter().filter(|&&y| y > x) {
                let mut c = counts.to_vec();
                if counts[y] > 0 && counts[y] < size(y) {
                    c[x] -= 1;
                    c[y] += 1;
                } else if counts[y] == 0 {
                    c[y] = counts[x].min(size(y));
                    c[x] = 0;
                } else {
                    continue;
                }
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }
}

fn note(used: &mut Vec<Vec<usize>>, counts: &[usize]) {
    if !used.iter().any(|c| c == counts) {
        used.push(counts.to_vec());
    }
}

/// The result of trying every selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exhaustive {
    pub selection: CoreSelection,
    pub counts: Vec<usize>,
    pub measurement: Measurement,
    /// The fastest speed over all selections (the bound's reference).
    pub max_tokens_per_s: f64,
    /// Selections tried.
    pub evaluated: usize,
}

/// Tries every per-cluster core count (efficiency clusters included) and returns the least
/// energy per token within `max_slowdown` of the fastest: what the tuner should find.
pub fn exhaustive(topo: &CpuTopology, probe: &mut dyn Probe, max_slowdown: f64, pin: bool) -> Result<Exhaustive> {
    let sizes: Vec<usize> = topo.clusters.iter().map(|c| c.cores.len()).collect();
    let mut all = Vec::new();
    let mut counts = vec![0; sizes.len()];
    loop {
        // Next count vector, odometer style.
        let mut i = 0;
        while i < sizes.len() && counts[i] == sizes[i] {
            counts[i] = 0;
            i += 1;
        }
        if i == sizes.len() {
            break;
        }
        counts[i] += 1;
        let selection = counts_selection(topo, &counts, pin);
        all.push((counts.clone(), selection.clone(), probe.measure(&selection)?));
    }
    let max = all.iter().map(|(_, _, m)| m.tokens_per_s).fold(0.0, f64::max);
    let evaluated = all.len();
    let (counts, selection, measurement) = all
        .into_iter()
        .filter(|(_, _, m)| m.tokens_per_s >= (1.0 - max_slowdown) * max)
        .min_by(|a, b| a.2.joules_per_token().total_cmp(&b.2.joules_per_token()))
        .ok_or_else(|| crate::Error::Energy("no selection to try".into()))?;
    Ok(Exhaustive { selection, counts, measurement, max_tokens_per_s: max, evaluated })
}
