//! How much to draft each step: the tree prefix whose expected tokens per unit of pass cost is
//! highest, against plain decoding's one token per single-token pass.
//!
//! A tree's nodes come best-first with `p_path`, the estimated probability that the path to
//! the node is accepted; keeping the first k of them yields 1 + Σ p_path tokens in
//! expectation (the token the model adds after the accepted path included), for a pass of
//! k + 1 tokens. The controller keeps the k that maximises that over cost(k + 1) / cost(1)
//! and drafts nothing when no k beats a plain step by a margin: speculation switches itself
//! off where it would not pay, step by step, and back on where the text turns predictable.
//! The margin is wider on an answer's first step, which a short answer cannot win back.
//!
//! The acceptance estimates can be confidently wrong for a while (a screen's long element
//! list that the answer quotes only in part), and a long rejected draft costs several steps.
//! So the depth of a draft is capped too (and its size at twice that, for trees), and the cap
//! follows the outcomes: it starts at
//! `INITIAL_DEPTH_CAP`, halves below a draft of which less than a quarter was accepted and
//! doubles after one at least half as deep as the cap that was taken whole. Doubling after a
//! draft half taken let a screen's element list, copied for a few elements, lift the cap to
//! drafts of 30 tokens that were rejected early.
//!
//! Within an answer, the estimates are held to what they promised: each plan promises
//! Σ p_path drafted tokens, and where an answer's drafts have been taken less often than
//! promised (a reply that leaves the thread's wording), its later estimates are scaled down by
//! the ratio, smoothed by a prior of `PRIOR_TOKENS` promised of which a share
//! `PRIOR_TAKEN_SHARE` was taken: an answer's first drafts count their estimates at that
//! share, until drafts of the answer have been taken. Never up: the acceptance model already
//! learns from every outcome, and the scale only keeps one answer's shortfall from costing
//! more passes than the answer has steps to win back.

use super::cost::CostCurve;
use super::tree::DraftTree;

/// A draft must promise at least this speed-up over a plain step to be verified: estimates
/// are noisy, and a pass that does not pay costs more than one that was not made.
const MIN_GAIN: f64 = 1.05;

/// The same for an answer's first step: its estimates have seen nothing of the answer yet,
/// and a short answer (a name, a number) has no later steps to win back a rejected draft.
/// Priced over the dev workloads (docs/design/speculative-results.md), 1.3 kept Qwen2.5's 2-token dev-rag-1
/// from its rejected opening draft (0.81× → 1.00×) for 0.06× of its reply median; 1.15 did
/// not, and cost the replies as much.
const MIN_GAIN_FIRST: f64 = 1.3;

/// A plain step at least this often keeps the single-token cost (the curve's unit) current
/// as the context grows.
const REFRESH_STEPS: usize = 48;

/// Depth cap of the first drafts, and its bounds.
pub(crate) const INITIAL_DEPTH_CAP: usize = 4;
const MIN_DEPTH_CAP: usize = 2;
const MAX_DEPTH_CAP: usize = 64;

/// Drafted tokens promised and taken that an answer's scale starts from (see the module
/// documentation).
const PRIOR_TOKENS: f64 = 4.0;

/// The share of the prior's tokens taken. The acceptance model leaves an answer copied word for
/// word confident, and the next answer may be a word or two long, which a rejected draft costs
/// more than it could ever win back. Priced over the dev workloads (docs/design/speculative-results.md),
/// 0.75 moved the task medians by -0.05 to +0.04 with or without history and kept SmolLM2's
/// 10-token dev-ui-0 from its rejected draft; measured, Qwen2.5's 2-token dev-rag-1 after the
/// copied dev-rag-0 stopped drafting (0.78-0.89x before, with history).
const PRIOR_TAKEN_SHARE: f64 = 0.75;

#[derive(Debug, Clone)]
pub(crate) struct Controller {
    steps_since_plain: usize,
    depth_cap: usize,
    /// Drafted tokens this answer's verified plans promised (Σ p_path) and the model took.
    promised: f64,
    taken: f64,
    /// What the last plan promised, until its pass is recorded.
    pending_promise: f64,
    /// No pass of this answer recorded yet.
    first_step: bool,
}

impl Default for Controller {
    fn default() -> Self {
        Controller {
            steps_since_plain: 0,
            depth_cap: INITIAL_DEPTH_CAP,
            promised: 0.0,
            taken: 0.0,
            pending_promise: 0.0,
            first_step: true,
        }
    }
}

/// The controller's decision for one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    /// Nodes of the tree to verify, the root included (1: a plain step).
    pub keep: usize,
    /// Expected tokens of the step.
    pub expected_tokens: f64,
    /// Expected speed-up of the step over a plain one.
    pub expected_gain: f64,
}

impl Controller {
    /// A new answer: its estimates start at the prior's scale.
    pub(crate) fn start_answer(&mut self) {
        (self.promised, self.taken, self.pending_promise) = (0.0, 0.0, 0.0);
        self.first_step = true;
    }

    /// The factor this answer's acceptance estimates are scaled by (at most 1).
    pub(crate) fn answer_scale(&self) -> f64 {
        ((self.taken + PRIOR_TAKEN_SHARE * PRIOR_TOKENS) / (self.promised + PRIOR_TOKENS)).min(1.0)
    }

    /// Chooses how many of `tree`'s nodes to verify.
    pub(crate) fn plan(&mut self, tree: &DraftTree, curve: &CostCurve) -> Plan {
        self.pending_promise = 0.0;
        let plain = Plan { keep: 1, expected_tokens: 1.0, expected_gain: 1.0 };
        if curve.single.is_none() || self.steps_since_plain >= REFRESH_STEPS {
            return plain;
        }
        let scale = self.answer_scale();
        let (mut best, mut best_promise) = (plain, 0.0);
        let mut promise = 0.0;
        for (k, node) in tree.nodes().iter().enumerate().skip(1) {
            if node.depth > self.depth_cap || k > 2 * self.depth_cap {
                break;
            }
            promise += f64::from(node.p_path);
            let tokens = 1.0 + scale * promise;
            let gain = tokens / curve.ratio(k + 1);
            if gain > best.expected_gain {
                (best, best_promise) = (Plan { keep: k + 1, expected_tokens: tokens, expected_gain: gain }, promise);
            }
        }
        let margin = if self.first_step { MIN_GAIN_FIRST } else { MIN_GAIN };
        if best.expected_gain < margin {
            return plain;
        }
        self.pending_promise = best_promise;
        best
    }

    /// Records the pass that was made: `batch` tokens, the deepest drafted path `depth`
    /// tokens long, `accepted` drafted tokens taken.
    pub fn record(&mut self, batch: usize, depth: usize, accepted: usize) {
        self.steps_since_plain = if batch <= 1 { 0 } else { self.steps_since_plain + 1 };
        self.first_step = false;
        if self.pending_promise > 0.0 {
            self.promised += std::mem::take(&mut self.pending_promise);
            self.taken += accepted as f64;
        }
        if depth == 0 {
            return;
        }
        if 4 * accepted < depth {
            self.depth_cap = (depth / 2).max(MIN_DEPTH_CAP);
        } else if accepted >= depth && 2 * depth >= self.depth_cap {
            self.depth_cap = (2 * self.depth_cap).min(MAX_DEPTH_CAP);
        }
    }

    /// The current cap on a draft's depth.
    pub(crate) fn depth_cap(&self) -> usize {
        self.depth_cap
    }
}

#[cfg(test)]
mod tests {
    use super::super::features::Features;
    use super::super::tree::Origin;
    use super::*;
    use std::time::Duration;

    fn chain(ps: &[f32]) -> DraftTree {
        let mut t = DraftTree::default();
        t.reset(0);
        for (i, &p) in ps.iter().enumerate() {
            t.push(i, i as u32 + 1, Origin::Context, p, Features::default());
        }
        t
    }

    fn linear(slope: f64) -> CostCurve {
        let ratio = (1..=64).map(|n| 1.0 + slope * (n - 1) as f64).collect();
        CostCurve { ratio, measured: vec![true; 64], single: Some(Duration::from_millis(10)) }
    }

    #[test]
    fn cheap_passes_take_long_confident_drafts() {
        let t = chain(&[0.95; 12]);
        let mut c = Controller::default();
        assert_eq!(c.plan(&t, &linear(0.02)).keep, INITIAL_DEPTH_CAP + 1, "the first drafts are capped");
        let mut cap = INITIAL_DEPTH_CAP;
        while cap < 12 {
            c.record(cap + 1, cap, cap);
            cap *= 2;
            assert_eq!(c.depth_cap(), cap, "an accepted draft lifts the cap");
        }
        assert_eq!(c.plan(&t, &linear(0.02)).keep, 13);
    }

    #[test]
    fn rejected_long_drafts_shrink_the_cap_until_drafts_are_taken_again() {
        let t = chain(&[0.95; 40]);
        let mut c = Controller::default();
        c.record(9, 8, 1);
        assert_eq!(c.depth_cap(), 4);
        assert_eq!(c.plan(&t, &linear(0.02)).keep, 5);
        c.record(5, 4, 0);
        c.record(3, 2, 0);
        assert_eq!(c.depth_cap(), 2, "never below two");
        c.record(3, 2, 2);
        assert_eq!(c.depth_cap(), 4);
        c.record(5, 4, 3);
        assert_eq!(c.depth_cap(), 4, "a draft taken in part holds the cap");
        c.record(5, 4, 4);
        c.record(9, 8, 8);
        c.record(17, 16, 16);
        assert_eq!(c.depth_cap(), 32);
        c.record(3, 2, 2);
        assert_eq!(c.depth_cap(), 32, "a short draft says nothing about long ones");
    }

    #[test]
    fn expensive_passes_draft_little_or_nothing() {
        let t = chain(&[0.5, 0.5, 0.5]);
        assert_eq!(Controller::default().plan(&t, &linear(0.9)).keep, 1);
        let sure = chain(&[0.99, 0.99, 0.3]);
        let mut c = Controller::default();
        c.record(1, 0, 0);
        let plan = c.plan(&sure, &linear(0.6));
        assert_eq!(plan.keep, 3, "{plan:?}");
    }

    #[test]
    fn an_answers_first_step_needs_a_larger_promise() {
        // A 0.3 estimate counted at three quarters: 1.225 expected tokens for a pass costing
        // 1.1, a gain of 1.11.
        let t = chain(&[0.3]);
        let curve = linear(0.1);
        let mut c = Controller::default();
        assert_eq!(c.plan(&t, &curve).keep, 1, "not on the first step");
        c.record(1, 0, 0);
        assert_eq!(c.plan(&t, &curve).keep, 2, "on later ones");
        c.start_answer();
        assert_eq!(c.plan(&t, &curve).keep, 1, "nor on the next answer's first");
    }

    #[test]
    fn an_answer_whose_drafts_fall_short_of_their_estimates_drafts_less() {
        let t = chain(&[0.9; 4]);
        let curve = linear(0.25);
        let mut c = Controller::default();
        let first = c.plan(&t, &curve);
        assert_eq!(first.keep, 5, "{first:?}");
        // Promised 3.1 tokens, took none: the estimates are scaled down.
        c.record(5, 4, 0);
        assert!(c.answer_scale() < 0.6, "{}", c.answer_scale());
        c.record(5, 4, 0);
        let (mut passes, mut keep) = (1, c.plan(&t, &curve).keep);
        while keep > 1 && passes < 10 {
            c.record(keep, keep - 1, 0);
            (passes, keep) = (passes + 1, c.plan(&t, &curve).keep);
        }
        assert_eq!(keep, 1, "a plain step after {passes} rejected drafts");
        // A new answer starts from the prior again.
        c.start_answer();
        assert_eq!(c.answer_scale(), PRIOR_TAKEN_SHARE);
        assert!(c.plan(&t, &curve).keep > 1);
    }

    #[test]
    fn an_answers_estimates_count_in_full_once_its_drafts_are_taken() {
        let curve = linear(0.1);
        let mut c = Controller::default();
        c.record(1, 0, 0);
        // 1.2 expected tokens for a pass costing 1.1: a gain of 1.09, 1.05 at three quarters.
        let weak = chain(&[0.2]);
        assert_eq!(c.plan(&weak, &curve).keep, 1, "not before drafts of the answer were taken");
        for _ in 0..2 {
            assert_eq!(c.plan(&chain(&[0.5]), &curve).keep, 2);
            c.record(2, 1, 1);
        }
        assert_eq!(c.answer_scale(), 1.0);
        assert_eq!(c.plan(&weak, &curve).keep, 2);
    }

    #[test]
    fn drafts_taken_as_promised_keep_the_estimates() {
        let t = chain(&[0.6; 4]);
        let mut c = Controller::default();
        for _ in 0..20 {
            let plan = c.plan(&t, &linear(0.1));
            c.record(plan.keep, plan.keep - 1, plan.keep - 1);
        }
        assert_eq!(c.answer_scale(), 1.0, "never scaled up past the model's own estimates");
    }

    #[test]
    fn unknown_single_cost_or_a_stale_one_means_a_plain_step() {
        let t = chain(&[0.99; 4]);
        let mut unknown = linear(0.1);
        unknown.single = None;
        let mut c = Controller::default();
        assert_eq!(c.plan(&t, &unknown).keep, 1);
        for _ in 0..REFRESH_STEPS {
            c.record(5, 4, 4);
        }
        assert_eq!(c.plan(&t, &linear(0.1)).keep, 1);
        c.record(1, 0, 0);
        assert!(c.plan(&t, &linear(0.1)).keep > 1);
    }
}
