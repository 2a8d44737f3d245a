//! How likely the model is to accept a drafted token: a logistic model over what the drafter
//! knew when it proposed the token, with starting weights fitted offline on the dev workloads
//! and refined online from every verification (each drafted token whose parent was accepted is
//! one labelled example).

/// Number of inputs of the acceptance model.
pub const N: usize = 21;

/// What the drafter knew about one candidate token.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Features(pub [f32; N]);

/// Names of the inputs, in order (documentation and the fitting tool).
pub const NAMES: [&str; N] = [
    "bias",
    "match_1",
    "match_2",
    "match_3",
    "match_4_5",
    "match_6_8",
    "match_9_15",
    "match_16_up",
    "share",
    "only_continuation",
    "calibrated",
    "model_top1",
    "model_gap",
    "model_margin",
    "origin_calibrated",
    "origin_reused",
    "seen_in_answer",
    "seen_in_history",
    "deep",
    "weak_parent",
    "backed_off",
];

/// The inputs a candidate is described by, before they become a [`Features`] vector.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evidence {
    /// Tokens of context matched before the candidate (0: none).
    pub match_len: u32,
    /// Share of the candidate among the continuations seen after the match (0 when the
    /// candidate did not come from the index).
    pub share: f32,
    pub only_continuation: bool,
    /// The model's logit gap of the candidate below its best token at the matched context
    /// position (0: it was the best), when that position was calibrated.
    pub model_gap: Option<f32>,
    /// The model's margin between its best and second-best token there, when the candidate
    /// is the best.
    pub model_margin: Option<f32>,
    pub calibrated_origin: bool,
    pub reused_origin: bool,
    pub seen_in_answer: bool,
    pub seen_in_history: bool,
    /// Depth of the candidate in the tree (1: a child of the root).
    pub depth: usize,
    /// The parent was itself a guess with little context behind it.
    pub weak_parent: bool,
    /// The candidate followed a shorter suffix than the longest match.
    pub backed_off: bool,
}

impl Evidence {
    pub fn features(&self) -> Features {
        let mut x = [0f32; N];
        x[0] = 1.0;
        let bucket = match self.match_len {
            0 => None,
            1 => Some(1),
            2 => Some(2),
            3 => Some(3),
            4..=5 => Some(4),
            6..=8 => Some(5),
            9..=15 => Some(6),
            _ => Some(7),
        };
        if let Some(b) = bucket {
            x[b] = 1.0;
        }
        x[8] = self.share;
        x[9] = f32::from(u8::from(self.only_continuation));
        if let Some(gap) = self.model_gap {
            x[10] = 1.0;
            x[11] = f32::from(u8::from(gap >= 0.0));
            x[12] = (-gap).clamp(0.0, 8.0) / 8.0;
            x[13] = self.model_margin.unwrap_or(0.0).clamp(0.0, 8.0) / 8.0;
        }
        x[14] = f32::from(u8::from(self.calibrated_origin));
        x[15] = f32::from(u8::from(self.reused_origin));
        x[16] = f32::from(u8::from(self.seen_in_answer));
        x[17] = f32::from(u8::from(self.seen_in_history));
        x[18] = f32::from(u8::from(self.depth >= 2));
        x[19] = f32::from(u8::from(self.weak_parent));
        x[20] = f32::from(u8::from(self.backed_off));
        Features(x)
    }
}

/// Starting weights: `scripts/fit_acceptance.py` on the examples `tern-lab acceptance-data` draws
/// from the greedy answers of SmolLM2-135M and Qwen2.5-0.5B over the dev workloads (every
/// answer position, the earlier cases' answers of each task as history; see
/// docs/speculative.md). Reused tails are not simulated there and keep weight 0.
pub const INITIAL_WEIGHTS: [f32; N] = [
    -1.50, -1.18, -0.97, -0.60, -0.33, 0.10, 0.25, 1.23, 2.64, 1.34, -0.25, -0.16, -1.26, 0.74, -2.51, 0.00, -0.06,
    -1.19, -0.21, 0.45, -1.53,
];

/// Learning rate of the online updates: slow enough that one unlucky step does not swing the
/// estimates, fast enough to follow a conversation within a few dozen tokens.
const LEARNING_RATE: f32 = 0.05;

#[derive(Debug, Clone)]
pub struct AcceptanceModel {
    w: [f32; N],
}

impl Default for AcceptanceModel {
    fn default() -> Self {
        AcceptanceModel { w: INITIAL_WEIGHTS }
    }
}

impl AcceptanceModel {
    pub fn with_weights(w: [f32; N]) -> Self {
        AcceptanceModel { w }
    }

    pub fn weights(&self) -> &[f32; N] {
        &self.w
    }

    /// Probability that the model picks the candidate.
    pub fn p(&self, x: &Features) -> f32 {
        let z: f32 = self.w.iter().zip(&x.0).map(|(w, x)| w * x).sum();
        sigmoid(z)
    }

    /// One gradient step on an observed outcome.
    pub(crate) fn learn(&mut self, x: &Features, accepted: bool) {
        let err = f32::from(u8::from(accepted)) - self.p(x);
        for (w, x) in self.w.iter_mut().zip(&x.0) {
            *w += LEARNING_RATE * err * x;
        }
    }
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z.clamp(-30.0, 30.0)).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_moves_estimates_towards_outcomes() {
        let x =
            Evidence { match_len: 4, share: 1.0, only_continuation: true, depth: 1, ..Default::default() }.features();
        let mut m = AcceptanceModel::default();
        let before = m.p(&x);
        for _ in 0..50 {
            m.learn(&x, false);
        }
        assert!(m.p(&x) < before * 0.5, "{} -> {}", before, m.p(&x));
        for _ in 0..200 {
            m.learn(&x, true);
        }
        assert!(m.p(&x) > 0.8);
    }

    #[test]
    fn match_length_selects_one_bucket() {
        for len in [1u32, 2, 3, 5, 7, 12, 40] {
            let x = Evidence { match_len: len, ..Default::default() }.features();
            assert_eq!(x.0[1..8].iter().filter(|&&v| v == 1.0).count(), 1, "length {len}");
        }
        let x = Evidence::default().features();
        assert!(x.0[1..8].iter().all(|&v| v == 0.0));
    }
}
