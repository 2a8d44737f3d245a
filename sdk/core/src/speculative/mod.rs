//! Context-augmented speculative decoding (after CoordGen): the answer often repeats its
//! context (the document it summarises, the passages it cites, the screen it acts on, the
//! thread it replies to), so drafts are taken from that context, not from a draft model, and
//! verified several tokens per forward pass.
//!
//! Per decode step:
//! 1. [`drafter`]: a token tree after the last chosen token, from a suffix automaton over the
//!    prompt, stored history and the answer so far ([`automaton`]), the model's own
//!    predictions at context positions computed during prefill ([`calibration`]), and the
//!    agreeing tail of the last rejected draft (draft reuse); each candidate scored by an
//!    online-learned acceptance model ([`features`]).
//! 2. [`controller`]: how much of the tree to verify, from the measured cost of a pass of n
//!    tokens on this device ([`cost`]); nothing where it would not pay.
//! 3. One forward pass over the tree (tree attention mask), then [`verify`]: the sampler picks
//!    each token along the path exactly as plain decoding would (greedy: the same tokens;
//!    sampling: the same distribution), and the KV cache keeps only the accepted path.
//!
//! The pieces are public for tools and tests; sessions use them through
//! [`SpeculationOptions`] in [`crate::SessionOptions`].

pub mod automaton;
pub mod calibration;
pub mod controller;
pub mod cost;
pub mod drafter;
pub mod features;
pub mod history;
pub mod tree;
pub mod verify;

use std::time::Duration;

use crate::error::{Error, Result};

pub use history::{HistoryOptions, HistoryScope, HistoryStore};

/// Whether and how a session speculates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speculation {
    /// Plain decoding, one token per pass.
    Off,
    /// Draft and verify where the measured costs and the running acceptance say it pays, up to
    /// [`DraftLimits::AUTO`].
    #[default]
    Auto,
    /// Explicit bounds; with `adaptive: false` every step verifies whatever the drafter finds
    /// within them (tests, experiments).
    Limits(DraftLimits),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftLimits {
    /// Drafted tokens per verification pass (the pass carries one more: the last chosen token).
    pub max_draft_tokens: usize,
    /// Drafted children per tree node (1: a single chain).
    pub max_width: usize,
    /// Longest drafted path.
    pub max_depth: usize,
    /// Let the controller choose how much to verify (and whether), within these bounds.
    pub adaptive: bool,
}

impl DraftLimits {
    /// The bounds of [`Speculation::Auto`].
    pub const AUTO: DraftLimits = DraftLimits { max_draft_tokens: 31, max_width: 3, max_depth: 24, adaptive: true };
}

/// Speculation settings of a session.
#[derive(Debug, Clone)]
pub struct SpeculationOptions {
    pub mode: Speculation,
    /// How many prompt positions (the last ones) get calibrated predictions during prefill:
    /// the prompt's distinct tokens are scored at those rows (a few per cent of prefill time;
    /// see docs/speculative.md); 0 turns calibration off.
    pub calibration_positions: usize,
    /// Stored texts to draft from, and where to add answers.
    pub history: Option<HistoryScope>,
}

impl Default for SpeculationOptions {
    fn default() -> Self {
        SpeculationOptions { mode: Speculation::Auto, calibration_positions: 2048, history: None }
    }
}

impl SpeculationOptions {
    /// Speculation off.
    pub fn off() -> Self {
        SpeculationOptions { mode: Speculation::Off, calibration_positions: 0, history: None }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.mode != Speculation::Off
    }

    /// The bounds in force.
    pub fn limits(&self) -> Option<DraftLimits> {
        match self.mode {
            Speculation::Off => None,
            Speculation::Auto => Some(DraftLimits::AUTO),
            Speculation::Limits(l) => Some(l),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if let Speculation::Limits(l) = self.mode {
            if l.max_draft_tokens == 0 || l.max_draft_tokens >= cost::MAX_BATCH {
                return Err(Error::InvalidOption(format!(
                    "max_draft_tokens must be in 1..{} (got {})",
                    cost::MAX_BATCH,
                    l.max_draft_tokens
                )));
            }
            if l.max_width == 0 || l.max_depth == 0 {
                return Err(Error::InvalidOption("max_width and max_depth must be at least 1".into()));
            }
        }
        Ok(())
    }
}

/// What speculation did during one answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeculationStats {
    /// Decode passes, with a draft or without.
    pub decode_passes: usize,
    /// Passes that verified a draft.
    pub verify_steps: usize,
    pub drafted_tokens: usize,
    /// Drafted tokens the model accepted.
    pub accepted_tokens: usize,
    /// Tokens chosen per decode pass (1 without speculation).
    pub tokens_per_step: f64,
    /// Time spent building drafts and planning (part of the decode time).
    pub drafting_time: Duration,
    /// Prompt positions whose predictions were computed in this answer's prefill.
    pub calibrated_positions: usize,
    /// `draft_lengths[n]`: passes that carried n drafted tokens.
    pub draft_lengths: Vec<usize>,
    /// `accepted_lengths[n]`: passes in which n drafted tokens were accepted.
    pub accepted_lengths: Vec<usize>,
    /// Why the answer could not be added to the history scope, if it could not.
    pub history_error: Option<String>,
}

impl SpeculationStats {
    pub(crate) fn record_pass(&mut self, drafted: usize, accepted: usize) {
        self.decode_passes += 1;
        if drafted > 0 {
            self.verify_steps += 1;
        }
        self.drafted_tokens += drafted;
        self.accepted_tokens += accepted;
        bump(&mut self.draft_lengths, drafted);
        bump(&mut self.accepted_lengths, accepted);
    }
}

fn bump(h: &mut Vec<usize>, i: usize) {
    if h.len() <= i {
        h.resize(i + 1, 0);
    }
    h[i] += 1;
}

/// Draft reuse (CoordGen): after a rejection, the part of the rejected draft that the model's
/// own predictions agreed with is likely to come a little later (the answer inserted or
/// replaced a word). `chain` is the rejected draft from its first rejected token on, and
/// `predicted[j]` the model's choice after `chain[j]` (under the draft's prefix); returns the
/// longest run `chain[a..b]`, a ≥ 1, whose every token the model predicted.
pub(crate) fn agreeing_tail<'a>(chain: &'a [u32], predicted: &[u32]) -> &'a [u32] {
    let (mut best, mut start) = (0..0, None);
    for j in 1..chain.len().min(predicted.len() + 1) {
        if predicted[j - 1] == chain[j] {
            let s = *start.get_or_insert(j);
            if j + 1 - s > best.len() {
                best = s..j + 1;
            }
        } else {
            start = None;
        }
    }
    &chain[best]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreeing_tail_is_the_longest_predicted_run() {
        // x_e rejected; the model then agreed with 3, 4 (predicted after 2, 3), not with 5.
        assert_eq!(agreeing_tail(&[2, 3, 4, 5, 6, 7], &[3, 4, 9, 6, 0, 0]), &[3, 4]);
        assert_eq!(agreeing_tail(&[2, 3, 4, 5, 6, 7], &[0, 4, 5, 6, 7, 0]), &[4, 5, 6, 7]);
        assert!(agreeing_tail(&[2, 3], &[9, 9]).is_empty());
        assert!(agreeing_tail(&[2], &[]).is_empty());
    }

    #[test]
    fn limits_are_validated() {
        let mut o = SpeculationOptions::default();
        assert!(o.validate().is_ok() && o.is_on());
        o.mode = Speculation::Limits(DraftLimits { max_draft_tokens: 0, ..DraftLimits::AUTO });
        assert!(o.validate().is_err());
        o.mode = Speculation::Limits(DraftLimits { max_draft_tokens: 64, ..DraftLimits::AUTO });
        assert!(o.validate().is_err());
        o.mode = Speculation::Limits(DraftLimits { max_width: 0, ..DraftLimits::AUTO });
        assert!(o.validate().is_err());
        assert!(!SpeculationOptions::off().is_on());
    }
}
