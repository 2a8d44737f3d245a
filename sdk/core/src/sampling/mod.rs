//! Token sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty.
//!
//! Transforms run in llama.cpp's default order:
//!
//! 1. repetition penalty over the last `repeat_last_n` history tokens (in place on the logits),
//! 2. top-k, 3. top-p, 4. min-p (all three on the temperature-1 distribution),
//! 5. temperature, 6. a draw from what is left.
//!
//! Temperature 0 (or `top_k == 1`) is greedy: the argmax after penalties, no draw.
//!
//! A sampler may carry a grammar [`TokenConstraint`]. Then `sample` (and `distribution`) first
//! set the logits of every token the grammar forbids to -inf, and whoever commits tokens calls
//! [`Sampler::accept`] for each one (prompt tokens excluded) so the grammar follows the answer.
//! A speculative verifier does the same: `sample` on each verification row, `accept` on each
//! token it keeps, so a draft token the grammar forbids is never kept. Without a constraint
//! none of this costs anything.

mod rng;

use std::cmp::Ordering;

use crate::constrain::TokenConstraint;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use rng::Rng;

/// How the next token is chosen. `Default` (also [`SamplingOptions::greedy`]) is greedy
/// decoding with llama.cpp's defaults for the other knobs, so raising `temperature` alone gives
/// the usual sampling setup. A session given no options samples as the model recommends
/// ([`crate::ModelInfo::sampling`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SamplingOptions {
    /// Softmax temperature; 0 = greedy.
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p; 1 = off.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; 0 = off.
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recent tokens by this; 1 = off.
    pub repetition_penalty: f32,
    /// How many of the latest history tokens the penalty looks at; 0 = off.
    pub repeat_last_n: usize,
    /// Seed for reproducible sampling; `None` draws one from the environment.
    pub seed: Option<u64>,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        SamplingOptions {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            repeat_last_n: 64,
            seed: None,
        }
    }
}

/// Keys a converter writes from the model's `generation_config.json` (llama.cpp's
/// `general.sampling.*`).
const RECOMMENDED_KEYS: [&str; 6] = ["temp", "top_k", "top_p", "min_p", "penalty_repeat", "penalty_last_n"];

impl SamplingOptions {
    /// Always the most likely token: reproducible answers for tests and benchmarks.
    pub fn greedy() -> SamplingOptions {
        SamplingOptions::default()
    }

    /// What a session samples with when the model file recommends nothing: llama.cpp's
    /// defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty).
    pub fn general_purpose() -> SamplingOptions {
        SamplingOptions { temperature: 0.8, ..SamplingOptions::default() }
    }

    /// The model's own recommendation (`general.sampling.*`) over [`Self::general_purpose`]
    /// for the keys it leaves out. Numbers of any type are read; a value that is not one, or
    /// that would make the options invalid, is skipped with a warning, so a file's odd
    /// recommendation never stops a session from opening.
    pub(crate) fn recommended_by(file: &GgufFile) -> SamplingOptions {
        let mut opts = SamplingOptions::general_purpose();
        for key in RECOMMENDED_KEYS {
            let full = format!("general.sampling.{key}");
            let Some(value) = file.get(&full) else { continue };
            let mut next = opts.clone();
            let applied = match key {
                "temp" => value.as_f32().map(|v| next.temperature = v),
                "top_p" => value.as_f32().map(|v| next.top_p = v),
                "min_p" => value.as_f32().map(|v| next.min_p = v),
                "penalty_repeat" => value.as_f32().map(|v| next.repetition_penalty = v),
                // llama.cpp reads a negative or zero count as "off" for both.
                "top_k" => value.as_i64().map(|v| next.top_k = usize::try_from(v).unwrap_or(0)),
                _ => value.as_i64().map(|v| next.repeat_last_n = usize::try_from(v).unwrap_or(0)),
            };
            match applied.map(|()| next.validate()) {
                Some(Ok(())) => opts = next,
                Some(Err(e)) => log::warn!("ignoring `{full}`: {e}"),
                None => log::warn!("ignoring `{full}`: not a number"),
            }
        }
        opts
    }

    /// Rejects values that have no meaning: NaN anywhere, negative or infinite
    /// temperature, `top_p` outside (0, 1], `min_p` outside [0, 1], a penalty <= 0.
    pub fn validate(&self) -> Result<()> {
        let t = self.temperature;
        if !(t.is_finite() && t >= 0.0) {
            return Err(Error::InvalidOption(format!(
                "temperature must be a finite number >= 0 (0 = greedy), got {t}"
            )));
        }
        let p = self.top_p;
        if !(p > 0.0 && p <= 1.0) {
            return Err(Error::InvalidOption(format!("top_p must be in (0, 1] (1 = off), got {p}")));
        }
        let m = self.min_p;
        if !(0.0..=1.0).contains(&m) {
            return Err(Error::InvalidOption(format!("min_p must be in [0, 1] (0 = off), got {m}")));
        }
        let r = self.repetition_penalty;
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::InvalidOption(format!(
                "repetition_penalty must be a finite number > 0 (1 = off), got {r}"
            )));
        }
        Ok(())
    }

    /// True when the choice is deterministic: temperature 0 or `top_k == 1`.
    pub(crate) fn is_greedy(&self) -> bool {
        self.temperature == 0.0 || self.top_k == 1
    }
}

/// Chooses tokens from logits. Owns its random state and scratch buffers, which
/// are reused: after the first call sampling allocates nothing.
#[derive(Debug, Clone)]
pub struct Sampler {
    opts: SamplingOptions,
    rng: Rng,
    /// The tokens still in play.
    cand: Vec<Cand>,
    /// Distinct recent tokens for the repetition penalty.
    window: Vec<u32>,
    /// The grammar the answer must follow, if any.
    constraint: Option<Box<TokenConstraint>>,
}

/// A token still in play: its id, its (penalised, clamped) logit, and a weight:
/// `exp(logit - max)` while top-p runs, the temperature weight once `filter` is done.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cand {
    id: u32,
    logit: f32,
    w: f32,
}

/// Descending logit, ties by ascending id, so every order is reproducible.
fn by_logit_desc(a: &Cand, b: &Cand) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// Tokens this far below the best one (probability ratio e^-40, about 4e-18)
/// add nothing measurable to top-p's mass; skipping their exp() shortens the
/// pass over a large vocabulary.
const NEGLIGIBLE_LOGIT_GAP: f32 = -40.0;

fn t1_weight(logit: f32, max: f32) -> f32 {
    let d = logit - max;
    if d < NEGLIGIBLE_LOGIT_GAP {
        0.0
    } else {
        d.exp()
    }
}

/// Up to this top-k the k best are kept in a bounded heap while scanning, so
/// the vocabulary is never copied; larger k gathers everything and selects.
const HEAP_TOP_K_MAX: usize = 1024;

/// Top-p sorts candidate lists up to this size outright.
const TOP_P_SMALL: usize = 64;

impl Sampler {
    /// Validates `opts`; a `None` seed is drawn from time, address and std's
    /// per-process random keys.
    pub fn new(opts: SamplingOptions) -> Result<Sampler> {
        opts.validate()?;
        let seed = opts.seed.unwrap_or_else(Rng::entropy_seed);
        Ok(Sampler { opts, rng: Rng::from_seed(seed), cand: Vec::new(), window: Vec::new(), constraint: None })
    }

    pub fn options(&self) -> &SamplingOptions {
        &self.opts
    }

    /// Restarts the random sequence as if the sampler had been built with `seed`.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = Rng::from_seed(seed);
    }

    /// Makes the following tokens follow `constraint` (a fresh one per answer), or removes it.
    pub(crate) fn set_constraint(&mut self, constraint: Option<TokenConstraint>) {
        self.constraint = constraint.map(Box::new);
    }

    pub fn constraint(&self) -> Option<&TokenConstraint> {
        self.constraint.as_deref()
    }

    /// Advances the constraint past `token`, a token the caller has committed to the answer.
    /// A token the grammar forbids here is an [`Error::Constraint`]. Without a constraint this
    /// does nothing.
    pub fn accept(&mut self, token: u32) -> Result<()> {
        match self.constraint.as_deref_mut() {
            Some(c) => c.accept(token),
            None => Ok(()),
        }
    }

    /// Whether the constraint (if any) allows `token` next.
    pub fn allows(&mut self, token: u32) -> bool {
        self.constraint.as_deref_mut().is_none_or(|c| c.allows(token))
    }

    /// True when a constraint is set and its grammar is complete: the answer is over.
    pub(crate) fn constraint_complete(&self) -> bool {
        self.constraint.as_deref().is_some_and(TokenConstraint::is_complete)
    }

    /// Picks the next token. `logits` (one per vocabulary entry) are modified in
    /// place: the constraint's mask and the repetition penalty are applied to them.
    /// `history` holds the previous token ids; ids outside the vocabulary are
    /// ignored. NaN logits are never chosen. Empty (or all-NaN) logits give 0.
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        if let Some(c) = self.constraint.as_deref_mut() {
            c.mask_logits(logits);
        }
        self.apply_penalties(logits, history);
        if self.opts.is_greedy() {
            return argmax(logits);
        }
        let Some(total) = self.filter(logits, false) else {
            return argmax(logits);
        };
        self.draw_weighted(total)
    }

    /// The distribution [`sample`](Self::sample) draws from, after all transforms:
    /// `out` is cleared and filled with (id, probability) of the kept tokens,
    /// sorted by descending probability (ties by id), probabilities summing to 1.
    /// Greedy options give the single argmax with probability 1. Like `sample`,
    /// this applies the repetition penalty to `logits` in place.
    pub fn distribution(&mut self, logits: &mut [f32], history: &[u32], out: &mut Vec<(u32, f32)>) {
        out.clear();
        if let Some(c) = self.constraint.as_deref_mut() {
            c.mask_logits(logits);
        }
        self.apply_penalties(logits, history);
        if self.opts.is_greedy() {
            if !logits.is_empty() {
                out.push((argmax(logits), 1.0));
            }
            return;
        }
        match self.filter(logits, true) {
            Some(total) => {
                let inv = 1.0 / total;
                out.extend(self.cand.iter().map(|c| (c.id, (f64::from(c.w) * inv) as f32)));
            }
            None if !logits.is_empty() => out.push((argmax(logits), 1.0)),
            None => {}
        }
    }

    /// Draws from an explicit (id, probability) list such as one built from
    /// [`distribution`](Self::distribution); weights need not sum to 1.
    /// Returns `None` when no entry has positive finite weight.
    pub fn draw(&mut self, dist: &[(u32, f32)]) -> Option<u32> {
        let total: f64 = dist.iter().map(|&(_, p)| weight(p)).sum();
        if !(total > 0.0 && total.is_finite()) {
            return None;
        }
        let target = self.rng.next_f64() * total;
        let mut acc = 0.0;
        let mut last = None;
        for &(id, p) in dist {
            let w = weight(p);
            if w > 0.0 {
                acc += w;
                last = Some(id);
                if target < acc {
                    return Some(id);
                }
            }
        }
        last
    }

    /// llama.cpp's repetition penalty, once per distinct token among the last
    /// `repeat_last_n` of `history`.
    fn apply_penalties(&mut self, logits: &mut [f32], history: &[u32]) {
        let penalty = self.opts.repetition_penalty;
        if penalty == 1.0 || self.opts.repeat_last_n == 0 || history.is_empty() {
            return;
        }
        let start = history.len().saturating_sub(self.opts.repeat_last_n);
        self.window.clear();
        self.window.extend_from_slice(&history[start..]);
        self.window.sort_unstable();
        self.window.dedup();
        for &t in &self.window {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = if *l <= 0.0 { *l * penalty } else { *l / penalty };
            }
        }
    }

    /// Runs top-k, top-p, min-p and temperature, leaving the survivors in
    /// `self.cand` with their unnormalised temperature weights; sorted by
    /// descending weight when `sorted` (or when top-p left them so). Returns the
    /// total weight, or `None` if no logit is usable.
    fn filter(&mut self, logits: &[f32], sorted: bool) -> Option<f64> {
        let opts = &self.opts;
        let cand = &mut self.cand;
        cand.clear();
        let want_top_p = opts.top_p < 1.0;
        let k = opts.top_k;

        // Top-p and min-p each keep a prefix of the descending order, so applying
        // both keeps the shorter one. Min-p's prefix needs no sort; top-p is
        // measured against the full post-top-k mass `z`, taken before min-p trims.
        let max;
        let mut z = 0.0f64;
        if k > 0 && k < logits.len() {
            if k <= HEAP_TOP_K_MAX {
                gather_top_k(logits, k, cand);
            } else {
                cand.extend(usable(logits));
                if k < cand.len() {
                    cand.select_nth_unstable_by(k - 1, by_logit_desc);
                    cand.truncate(k);
                }
            }
            max = cand.iter().map(|c| c.logit).fold(f32::NEG_INFINITY, f32::max);
            if want_top_p {
                for c in cand.iter_mut() {
                    c.w = t1_weight(c.logit, max);
                    z += f64::from(c.w);
                }
            }
            if opts.min_p > 0.0 {
                let threshold = max + opts.min_p.ln();
                cand.retain(|c| c.logit >= threshold);
            }
        } else {
            // Whole vocabulary: min-p filters while gathering, so the large tail is
            // never copied; top-p's mass is summed in the same pass.
            max = max_logit(logits)?;
            let threshold = if opts.min_p > 0.0 { max + opts.min_p.ln() } else { f32::NEG_INFINITY };
            for mut c in usable(logits) {
                if want_top_p {
                    c.w = t1_weight(c.logit, max);
                    z += f64::from(c.w);
                }
                if c.logit >= threshold {
                    cand.push(c);
                }
            }
        }
        if cand.is_empty() {
            return None;
        }
        let is_sorted = want_top_p && top_p_prefix(cand, max, z, f64::from(opts.top_p));
        if sorted && !is_sorted {
            cand.sort_unstable_by(by_logit_desc);
        }

        // Weights relative to the best token keep exp() in range at any temperature.
        let inv_t = 1.0 / opts.temperature;
        let mut total = 0.0f64;
        for c in cand.iter_mut() {
            let d = c.logit - max;
            // d == 0 stays weight 1 even when a tiny temperature makes inv_t infinite.
            c.w = if d == 0.0 { 1.0 } else { (d * inv_t).exp() };
            total += f64::from(c.w);
        }
        // The best token has weight exactly 1, so total >= 1 whenever cand is non-empty.
        (total > 0.0).then_some(total)
    }

    fn draw_weighted(&mut self, total: f64) -> u32 {
        let target = self.rng.next_f64() * total;
        let mut acc = 0.0;
        for c in &self.cand {
            acc += f64::from(c.w);
            if target < acc {
                return c.id;
            }
        }
        // Rounding can leave target a hair above the sum: take the last token.
        self.cand.last().map_or(0, |c| c.id)
    }
}

/// The logits that can be chosen: NaN and -inf never can; +inf is clamped so
/// the arithmetic stays finite.
fn usable(logits: &[f32]) -> impl Iterator<Item = Cand> + '_ {
    logits.iter().enumerate().filter(|(_, l)| **l > f32::NEG_INFINITY).map(|(i, &l)| Cand {
        id: i as u32,
        logit: l.min(f32::MAX),
        w: 0.0,
    })
}

/// Largest usable logit (clamped like [`usable`]), `None` if there is none.
fn max_logit(logits: &[f32]) -> Option<f32> {
    let m = lane_max(logits);
    (m > f32::NEG_INFINITY).then_some(m.min(f32::MAX))
}

/// Maximum ignoring NaN, -inf for empty input. Eight independent lanes of
/// `if x > m` let the compiler use vector max instructions.
fn lane_max(logits: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = logits.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            *m = if x > *m { x } else { *m };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &x in lanes.iter().chain(rest) {
        if x > m {
            m = x;
        }
    }
    m
}

/// Keeps the `k` best (id, logit) of `logits` in `heap`, a binary heap whose
/// root is the worst kept candidate. Ids arrive in increasing order, so a later
/// equal logit ranks worse and never displaces the root: ties go to lower ids.
fn gather_top_k(logits: &[f32], k: usize, heap: &mut Vec<Cand>) {
    // `a` ranks after `b`: it belongs nearer the root.
    let worse = |a: &Cand, b: &Cand| by_logit_desc(a, b) == Ordering::Greater;
    for c in usable(logits) {
        if heap.len() < k {
            heap.push(c);
            let mut i = heap.len() - 1;
            while i > 0 {
                let parent = (i - 1) / 2;
                if !worse(&heap[i], &heap[parent]) {
                    break;
                }
                heap.swap(i, parent);
                i = parent;
            }
        } else if c.logit > heap[0].logit {
            heap[0] = c;
            let mut i = 0;
            loop {
                let (l, r) = (2 * i + 1, 2 * i + 2);
                let mut w = i;
                if l < heap.len() && worse(&heap[l], &heap[w]) {
                    w = l;
                }
                if r < heap.len() && worse(&heap[r], &heap[w]) {
                    w = r;
                }
                if w == i {
                    break;
                }
                heap.swap(i, w);
                i = w;
            }
        }
    }
}

/// Truncates `cand` to the shortest prefix, in [`by_logit_desc`] order, whose
/// weight sums to at least `top_p * z`, without sorting the whole list: weights
/// are binned by logit distance from `max` (bins are ordered like the logits),
/// the bin holding the cut is found from the bins' sums, and only that bin is
/// sorted. Returns whether `cand` ends up sorted.
fn top_p_prefix(cand: &mut Vec<Cand>, max: f32, z: f64, top_p: f64) -> bool {
    const BINS: usize = 1024;
    let target = top_p * z;
    let scale = BINS as f32 / -NEGLIGIBLE_LOGIT_GAP;
    // Monotone in the logit; `as` saturates, and the far tail shares the last bin.
    let bin = |c: &Cand| (((max - c.logit) * scale) as usize).min(BINS - 1);

    let (mut start, mut above) = (0, 0.0f64);
    if cand.len() > TOP_P_SMALL {
        let mut mass = [0.0f64; BINS];
        for c in cand.iter() {
            mass[bin(c)] += f64::from(c.w);
        }
        let mut cut_bin = BINS - 1;
        for (b, m) in mass.iter().enumerate().take(BINS - 1) {
            if above + m >= target {
                cut_bin = b;
                break;
            }
            above += m;
        }
        // Bins before the cut bin are kept whole, up front; later bins go.
        cand.retain(|c| bin(c) <= cut_bin);
        for j in 0..cand.len() {
            if bin(&cand[j]) < cut_bin {
                cand.swap(start, j);
                start += 1;
            }
        }
    }
    cand[start..].sort_unstable_by(by_logit_desc);
    // Rounding may leave the running sum a hair short: then keep everything left.
    let mut cut = cand.len();
    for (j, c) in cand[start..].iter().enumerate() {
        above += f64::from(c.w);
        if above >= target {
            cut = start + j + 1;
            break;
        }
    }
    cand.truncate(cut);
    start == 0
}

fn weight(p: f32) -> f64 {
    if p.is_finite() && p > 0.0 {
        f64::from(p)
    } else {
        0.0
    }
}

/// Index of the largest logit; the first one on ties. NaN is skipped; empty or
/// all-NaN input gives 0.
pub fn argmax(logits: &[f32]) -> u32 {
    let max = lane_max(logits);
    // All NaN / -inf: the first non-NaN entry, else 0.
    let pos = if max > f32::NEG_INFINITY {
        logits.iter().position(|&l| l == max)
    } else {
        logits.iter().position(|l| !l.is_nan())
    };
    pos.unwrap_or(0) as u32
}

#[cfg(test)]
mod tests;
