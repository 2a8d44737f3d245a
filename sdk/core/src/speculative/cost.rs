//! What a verification pass costs on this device, learned from the engine's own passes.
//!
//! On a CPU a pass over n tokens reads the weights once but computes n times as much, so its
//! cost grows with n at a rate that depends on the model, the kernels, the thread count and
//! the context length: on a small model whose weights sit in cache a pass of 8 tokens costs
//! several single-token passes, on a bandwidth-bound one barely more than one. Every decode
//! pass reports its batch size and duration here; the controller asks for cost(n) / cost(1).
//!
//! Each batch size keeps its last few durations and uses their median (the machine may be
//! shared: a slow outlier must not switch speculation off for good). Sizes not seen yet are
//! interpolated between seen ones, or extrapolated past the largest seen one along the seen
//! sizes' mean slope, or an optimistic prior slope where that is flatter, so that the
//! controller tries them once and then knows.
//!
//! A size the controller stops choosing is never measured again, so a bad measurement of it
//! (a noisy start, a shorter context, another process) would keep it out of use for good. A
//! size's durations therefore expire once `STALE_AFTER` passes went by without one: it is
//! treated as not seen, priced from its fresh neighbours, tried again where that pays, and
//! measured anew.

use std::sync::Mutex;
use std::time::Duration;

/// Largest batch the table tracks; larger passes are extrapolated.
pub const MAX_BATCH: usize = 64;

/// Durations kept per batch size.
const WINDOW: usize = 8;

/// Passes after which a size's durations no longer count unless one was added (single-token
/// passes excepted: they are the unit, and the controller makes one regularly).
const STALE_AFTER: u64 = 64;

/// Assumed growth of cost(n) / cost(1) per extra token where nothing is known yet. Optimistic
/// on purpose (a pass of an unseen size gets tried, then measured). Past the largest measured
/// size the curve grows by the measured sizes' own mean slope where that is flatter: on a
/// bandwidth-bound model a token costs a tenth of a pass, and the prior would price the long
/// drafts it could afford at half as much again as they cost, so they would never be tried.
const PRIOR_SLOPE: f64 = 0.25;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Most recent durations in seconds (ring).
    times: [f32; WINDOW],
    filled: u8,
    next: u8,
    /// The table's pass count when the last duration was added.
    last: u64,
}

impl Slot {
    fn push(&mut self, t: f32, pass: u64) {
        self.last = pass;
        self.times[self.next as usize] = t;
        self.next = (self.next + 1) % WINDOW as u8;
        self.filled = (self.filled + 1).min(WINDOW as u8);
    }

    fn median(&self) -> Option<f64> {
        if self.filled == 0 {
            return None;
        }
        let mut v = [0f32; WINDOW];
        let n = self.filled as usize;
        v[..n].copy_from_slice(&self.times[..n]);
        v[..n].sort_unstable_by(f32::total_cmp);
        Some(f64::from(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }))
    }
}

/// The measured cost curve of one engine's decode passes.
#[derive(Debug)]
pub struct CostModel {
    table: Mutex<Table>,
}

#[derive(Debug)]
struct Table {
    slots: [Slot; MAX_BATCH],
    /// Passes observed so far.
    passes: u64,
    /// A curve that prices every pass instead of the measured durations (see [`CostModel::pin`]).
    pinned: Option<CostCurve>,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel { table: Mutex::new(Table { slots: [Slot::default(); MAX_BATCH], passes: 0, pinned: None }) }
    }
}

impl Table {
    fn is_stale(&self, size: usize) -> bool {
        size > 1 && self.passes - self.slots[size - 1].last > STALE_AFTER
    }
}

/// A snapshot of the curve: relative costs for batch sizes 1..=MAX_BATCH.
#[derive(Debug, Clone, PartialEq)]
pub struct CostCurve {
    /// `ratio[n - 1]` = cost(n) / cost(1).
    pub ratio: Vec<f64>,
    /// Which sizes were measured (the others are interpolated or assumed).
    pub measured: Vec<bool>,
    /// Median duration of a single-token pass, if one was measured.
    pub single: Option<Duration>,
}

impl CostCurve {
    /// cost(n) / cost(1); beyond the table, extended along its last slope.
    pub fn ratio(&self, n: usize) -> f64 {
        match n {
            0 | 1 => 1.0,
            n if n <= self.ratio.len() => self.ratio[n - 1],
            n => {
                let len = self.ratio.len();
                let slope = (self.ratio[len - 1] - self.ratio[len - 2]).max(0.0);
                self.ratio[len - 1] + slope * (n - len) as f64
            }
        }
    }
}

impl CostModel {
    /// Records a decode pass over `n` tokens that took `t`.
    pub(crate) fn observe(&self, n: usize, t: Duration) {
        if n == 0 || n > MAX_BATCH {
            return;
        }
        if let Ok(mut table) = self.table.lock() {
            table.passes += 1;
            if table.is_stale(n) {
                table.slots[n - 1] = Slot::default();
            }
            let pass = table.passes;
            table.slots[n - 1].push(t.as_secs_f32(), pass);
        }
    }

    /// Prices every pass with `curve` instead of the measured durations, until unpinned
    /// (`None`). For tools that compare drafting policies: the controller's choices then follow
    /// the drafts alone, not the machine's timing noise. Passes are still recorded.
    pub fn pin(&self, curve: Option<CostCurve>) {
        if let Ok(mut table) = self.table.lock() {
            table.pinned = curve;
        }
    }

    /// The current curve.
    pub fn curve(&self) -> CostCurve {
        let medians: Vec<Option<f64>> = match self.table.lock() {
            Ok(table) => {
                if let Some(c) = &table.pinned {
                    return c.clone();
                }
                (1..=MAX_BATCH).map(|n| if table.is_stale(n) { None } else { table.slots[n - 1].median() }).collect()
            }
            Err(_) => vec![None; MAX_BATCH],
        };
        curve_from(&medians)
    }
}

/// Relative costs from per-size medians (`None`: not measured).
fn curve_from(medians: &[Option<f64>]) -> CostCurve {
    let n = medians.len();
    let single = medians[0].filter(|&t| t > 0.0);
    let measured: Vec<bool> = medians.iter().map(|m| m.is_some() && single.is_some()).collect();
    let Some(t1) = single else {
        let ratio = (1..=n).map(|k| 1.0 + PRIOR_SLOPE * (k - 1) as f64).collect();
        return CostCurve { ratio, measured, single: None };
    };
    let known: Vec<(usize, f64)> =
        medians.iter().enumerate().filter_map(|(i, m)| m.map(|t| (i + 1, (t / t1).max(1.0)))).collect();
    // Mean growth per extra token from size 1 to the largest measured size.
    let slope = match known.last() {
        Some(&(s, r)) if s > 1 => ((r - 1.0) / (s - 1) as f64).min(PRIOR_SLOPE),
        _ => PRIOR_SLOPE,
    };
    let mut ratio = Vec::with_capacity(n);
    for k in 1..=n {
        let below = known.iter().rev().find(|&&(s, _)| s <= k);
        let above = known.iter().find(|&&(s, _)| s >= k);
        let r = match (below, above) {
            (Some(&(s0, r0)), Some(&(s1, r1))) if s1 > s0 => r0 + (r1 - r0) * (k - s0) as f64 / (s1 - s0) as f64,
            (Some(&(_, r0)), Some(_)) => r0,
            (Some(&(s0, r0)), None) => r0 + slope * (k - s0) as f64,
            // Unreachable: size 1 is known.
            (None, _) => 1.0 + PRIOR_SLOPE * (k - 1) as f64,
        };
        ratio.push(r);
    }
    // Cost never falls with more tokens.
    for k in 1..n {
        ratio[k] = ratio[k].max(ratio[k - 1]);
    }
    CostCurve { ratio, measured, single: Some(Duration::from_secs_f64(t1)) }
}

/// Times forward passes over chains of drafted tokens after a fixed context, as a speculative
/// step verifies them: the one routine behind measured cost curves and pass-cost timings
/// (`tern-lab`). Every pass leaves the cache as it found it.
#[cfg(feature = "lab")]
pub struct PassTimer<'e> {
    engine: &'e crate::Engine,
    kv: crate::model::KvCache,
    scratch: crate::model::Scratch,
    base: usize,
    chain: Vec<u32>,
    parents: Vec<Option<usize>>,
}

#[cfg(feature = "lab")]
impl<'e> PassTimer<'e> {
    /// Prefills `context` (at least one token) and readies chains of up to `longest` tokens,
    /// taken from the context (the cost depends on the counts, not the text).
    pub fn new(engine: &'e crate::Engine, context: &[u32], longest: usize) -> crate::Result<PassTimer<'e>> {
        if context.is_empty() || longest == 0 {
            return Err(crate::Error::InvalidOption("a pass timer needs a context and a chain length".into()));
        }
        let model = engine.model();
        let mut kv = model.new_kv_cache(context.len() + longest + 1);
        let mut scratch = crate::model::Scratch::default();
        model.forward(engine.pool(), &mut kv, &mut scratch, context, crate::model::Logits::None)?;
        let base = kv.len();
        let chain = context.iter().copied().cycle().skip(1).take(longest).collect();
        let parents = (0..longest).map(|i| i.checked_sub(1)).collect();
        Ok(PassTimer { engine, kv, scratch, base, chain, parents })
    }

    /// Cached positions before each timed chain.
    pub fn depth(&self) -> usize {
        self.base
    }

    /// One pass over the first `n` chain tokens (1..=longest), all logits: its wall time.
    pub fn time(&mut self, n: usize) -> crate::Result<Duration> {
        let n = n.clamp(1, self.chain.len());
        let t0 = std::time::Instant::now();
        let result = self.engine.model().forward_tree(
            self.engine.pool(),
            &mut self.kv,
            &mut self.scratch,
            &self.chain[..n],
            &self.parents[..n],
            crate::model::Logits::All,
        );
        let elapsed = t0.elapsed();
        self.kv.truncate(self.base);
        result.map(|_| elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmeasured_sizes_follow_the_prior() {
        let c = CostModel::default().curve();
        assert_eq!(c.ratio(1), 1.0);
        assert!((c.ratio(5) - (1.0 + 4.0 * PRIOR_SLOPE)).abs() < 1e-9);
        assert!(c.single.is_none());
    }

    #[test]
    fn measured_sizes_are_interpolated_and_medians_resist_outliers() {
        let m = CostModel::default();
        for _ in 0..3 {
            m.observe(1, Duration::from_millis(10));
            m.observe(5, Duration::from_millis(30));
        }
        // One descheduled pass does not move the median.
        m.observe(5, Duration::from_millis(900));
        let c = m.curve();
        assert!((c.ratio(5) - 3.0).abs() < 1e-6, "{}", c.ratio(5));
        assert!((c.ratio(3) - 2.0).abs() < 1e-6, "{}", c.ratio(3));
        // Past the last measured size: its value plus the prior slope.
        assert!((c.ratio(7) - (3.0 + 2.0 * PRIOR_SLOPE)).abs() < 1e-6);
        assert!(c.measured[4] && !c.measured[2]);
    }

    #[test]
    fn a_size_not_measured_for_a_while_is_priced_afresh() {
        let m = CostModel::default();
        m.observe(1, Duration::from_millis(10));
        // A bad start: size 3 looks as dear as four single passes.
        m.observe(3, Duration::from_millis(40));
        m.observe(2, Duration::from_millis(12));
        assert!((m.curve().ratio(3) - 4.0).abs() < 1e-6);
        for _ in 0..STALE_AFTER {
            m.observe(1, Duration::from_millis(10));
            m.observe(2, Duration::from_millis(12));
        }
        let c = m.curve();
        assert!(!c.measured[2], "size 3 expired");
        assert!((c.ratio(3) - 1.4).abs() < 1e-6, "size 2's slope onwards: {}", c.ratio(3));
        // Measured again: only the new duration counts.
        m.observe(3, Duration::from_millis(14));
        let c = m.curve();
        assert!(c.measured[2] && (c.ratio(3) - 1.4).abs() < 1e-6, "{}", c.ratio(3));
        assert!(c.single.is_some(), "the single-token cost never expires");
    }

    #[test]
    fn past_the_measured_sizes_a_flat_curve_stays_flat() {
        let m = CostModel::default();
        m.observe(1, Duration::from_millis(10));
        m.observe(6, Duration::from_millis(15));
        let c = m.curve();
        // Half a pass over five extra tokens: a tenth of one per token, not the prior's quarter.
        assert!((c.ratio(16) - 2.5).abs() < 1e-6, "{}", c.ratio(16));
        // A steep one grows by the prior's slope only: unmeasured sizes stay worth a try.
        for _ in 0..WINDOW {
            m.observe(6, Duration::from_millis(60));
        }
        let c = m.curve();
        assert!((c.ratio(16) - (6.0 + 10.0 * PRIOR_SLOPE)).abs() < 1e-6, "{}", c.ratio(16));
    }

    #[test]
    fn a_pinned_curve_prices_every_pass_until_unpinned() {
        let m = CostModel::default();
        m.observe(1, Duration::from_millis(10));
        m.observe(4, Duration::from_millis(40));
        let fixed = CostCurve {
            ratio: vec![1.0, 1.1, 1.2, 1.3],
            measured: vec![true; 4],
            single: Some(Duration::from_millis(5)),
        };
        m.pin(Some(fixed.clone()));
        m.observe(4, Duration::from_millis(80));
        assert_eq!(m.curve(), fixed);
        m.pin(None);
        assert!((m.curve().ratio(4) - 6.0).abs() < 1e-6, "passes made while pinned still count");
    }

    #[test]
    fn cost_never_decreases() {
        let m = CostModel::default();
        m.observe(1, Duration::from_millis(10));
        m.observe(4, Duration::from_millis(40));
        m.observe(6, Duration::from_millis(20));
        let c = m.curve();
        assert!(c.ratio.windows(2).all(|w| w[1] >= w[0]));
    }
}
