//! In-context calibration: the model's own next-token predictions at context positions.
//!
//! While prefilling, the model scores the prompt's own tokens at prompt positions too (their
//! LM head rows against each position's hidden row; the cap is `calibration_positions` in
//! [`super::SpeculationOptions`]). Only those tokens: a copy drafts nothing else, and the
//! whole vocabulary would cost a quarter or more of the prefill. At each such
//! position we keep the few best tokens and how far the token that really came next in the
//! context sits below the best one. A draft that copies the context then knows where the model
//! agrees with the copy (and how firmly), and where it would say something else, which becomes
//! a draft candidate of its own (CoordGen's calibrated candidates).

use crate::model::{Model, Scratch};
use crate::runtime::ThreadPool;

/// Best tokens kept per position.
pub(crate) const TOP: usize = 3;

/// The model's view at one position: its best tokens with their logit gap below the best
/// (0 for the first), and the gap of the token that actually followed in the context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub top: [u32; TOP],
    pub gap: [f32; TOP],
    pub next_gap: f32,
}

impl Prediction {
    /// From one row of logits and the token that followed the position in the text.
    pub fn from_logits(logits: &[f32], next: u32) -> Prediction {
        Self::from_scores(logits.iter().enumerate().map(|(i, &l)| (i as u32, l)), logits.get(next as usize).copied())
    }

    /// From the logits of some tokens (`(token, logit)`; the best found among them counts as
    /// the best) and the logit of the token that followed the position in the text, if known.
    pub(crate) fn from_scores(scores: impl Iterator<Item = (u32, f32)>, next_logit: Option<f32>) -> Prediction {
        let mut top = [0u32; TOP];
        let mut val = [f32::NEG_INFINITY; TOP];
        for (token, l) in scores {
            // NaN compares false and is skipped.
            if l > val[TOP - 1] {
                let mut j = TOP - 1;
                while j > 0 && l > val[j - 1] {
                    val[j] = val[j - 1];
                    top[j] = top[j - 1];
                    j -= 1;
                }
                val[j] = l;
                top[j] = token;
            }
        }
        let best = val[0];
        let gap = val.map(|v| if v.is_finite() && best.is_finite() { v - best } else { f32::NEG_INFINITY });
        let next_gap = match next_logit {
            Some(l) if l.is_finite() && best.is_finite() => l - best,
            _ => f32::NEG_INFINITY,
        };
        Prediction { top, gap, next_gap }
    }

    /// The gap of `token` below the best, if it is among the kept tokens or is the token that
    /// followed (`next`).
    pub(crate) fn gap_of(&self, token: u32, next: Option<u32>) -> Option<f32> {
        if let Some(i) = self.top.iter().position(|&t| t == token) {
            return self.gap[i].is_finite().then_some(self.gap[i]);
        }
        (next == Some(token) && self.next_gap.is_finite()).then_some(self.next_gap)
    }
}

/// Predictions at a run of positions of the live text, indexed by position.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    /// Position of `rows[0]`.
    start: usize,
    rows: Vec<Option<Prediction>>,
}

impl Calibration {
    pub fn clear(&mut self) {
        self.start = 0;
        self.rows.clear();
    }

    /// Positions with a prediction.
    pub fn len(&self) -> usize {
        self.rows.iter().filter(|r| r.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.iter().all(Option::is_none)
    }

    /// Drops the predictions at positions `len` and beyond.
    pub fn truncate(&mut self, len: usize) {
        let keep = len.saturating_sub(self.start);
        self.rows.truncate(keep);
    }

    /// Records the prediction made after the token at position `at`.
    pub fn insert(&mut self, at: usize, p: Prediction) {
        if self.rows.is_empty() {
            self.start = at;
        }
        if at < self.start {
            let shift = self.start - at;
            self.rows.splice(0..0, std::iter::repeat_n(None, shift));
            self.start = at;
        }
        let i = at - self.start;
        if i >= self.rows.len() {
            self.rows.resize(i + 1, None);
        }
        self.rows[i] = Some(p);
    }

    /// The prediction after the token at position `at`.
    pub fn at(&self, at: usize) -> Option<&Prediction> {
        at.checked_sub(self.start).and_then(|i| self.rows.get(i)).and_then(Option::as_ref)
    }
}

/// Scores a prompt's own distinct tokens at its positions, from the hidden rows of passes run
/// with [`Logits::Hidden`](crate::model::Logits::Hidden): the LM head rows of those tokens
/// (read once per prompt) against each row. The best of them stands in for the model's best
/// token.
#[derive(Debug, Default)]
pub(crate) struct PromptScorer {
    /// The prompt's distinct tokens, sorted.
    tokens: Vec<u32>,
    /// Their LM head rows, one after another.
    rows: Vec<f32>,
    /// One pass's scores: per row, one per token.
    scores: Vec<f32>,
}

impl PromptScorer {
    /// Readies for `prompt`. Where the rows cannot be read it scores nothing: calibration only
    /// guides drafts, so the request then drafts without it.
    pub(crate) fn prepare(&mut self, model: &Model, prompt: &[u32]) {
        self.tokens.clear();
        self.tokens.extend_from_slice(prompt);
        self.tokens.sort_unstable();
        self.tokens.dedup();
        if model.output_rows(&self.tokens, &mut self.rows).is_err() {
            self.release();
        }
    }

    /// Lets go of the buffers (megabytes for long prompts) until the next `prepare`.
    pub fn release(&mut self) {
        *self = PromptScorer::default();
    }

    /// Hands `keep` the prediction at each position `first + i` of the last pass (rows over
    /// prompt positions `first..`) that a prompt token follows; returns how many.
    pub(crate) fn predict(
        &mut self,
        model: &Model,
        pool: &ThreadPool,
        scratch: &Scratch,
        first: usize,
        prompt: &[u32],
        mut keep: impl FnMut(usize, Prediction),
    ) -> usize {
        let k = self.tokens.len();
        if k == 0 {
            return 0;
        }
        model.score_hidden(pool, scratch, &self.rows, &mut self.scores);
        let mut n = 0;
        for (i, row) in self.scores.chunks_exact(k).enumerate() {
            let pos = first + i;
            if let Some(&next) = prompt.get(pos + 1) {
                let next_logit = self.tokens.binary_search(&next).ok().map(|j| row[j]);
                let scores = self.tokens.iter().copied().zip(row.iter().copied());
                keep(pos, Prediction::from_scores(scores, next_logit));
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_tokens_and_the_next_gap() {
        let logits = [0.5, 3.0, -1.0, 2.0, f32::NAN, 2.5, 0.0];
        let p = Prediction::from_logits(&logits, 6);
        assert_eq!(p.top, [1, 5, 3]);
        assert_eq!(p.gap, [0.0, -0.5, -1.0]);
        assert_eq!(p.next_gap, -3.0);
        assert_eq!(p.gap_of(5, Some(6)), Some(-0.5));
        assert_eq!(p.gap_of(6, Some(6)), Some(-3.0));
        assert_eq!(p.gap_of(2, Some(6)), None);
    }

    #[test]
    fn some_tokens_scored_rank_among_themselves() {
        let p = Prediction::from_scores([(40, 1.0), (7, 4.0), (12, 2.5), (9, -1.0)].into_iter(), Some(1.0));
        assert_eq!(p.top, [7, 12, 40]);
        assert_eq!(p.gap, [0.0, -1.5, -3.0]);
        assert_eq!(p.next_gap, -3.0);
        let unknown = Prediction::from_scores([(3, 0.5)].into_iter(), None);
        assert_eq!((unknown.top[0], unknown.gap[0]), (3, 0.0));
        assert_eq!(unknown.gap[1], f32::NEG_INFINITY);
        assert_eq!(unknown.next_gap, f32::NEG_INFINITY);
        assert_eq!(unknown.gap_of(8, Some(8)), None);
    }

    #[test]
    fn positions_are_found_by_text_index() {
        let mut c = Calibration::default();
        let p = Prediction::from_logits(&[1.0, 0.0], 0);
        c.insert(10, p);
        c.insert(12, p);
        c.insert(8, p);
        assert!(c.at(8).is_some() && c.at(10).is_some() && c.at(12).is_some());
        assert!(c.at(9).is_none() && c.at(7).is_none() && c.at(13).is_none());
        assert_eq!(c.len(), 3);
    }
}
