//! The drafter: proposes a token tree after the answer so far, from the index of everything
//! the answer may repeat, the model's calibrated predictions at context positions, and the
//! reusable tail of the last rejected draft. No draft model: drafting costs microseconds.
//!
//! The tree grows best-first by the estimated probability that its whole path is accepted
//! (the [`AcceptanceModel`] scores each candidate), so any prefix of the nodes is a tree and
//! the nodes come in the order in which they add most to the expected accepted length. The
//! controller then decides how many of them a verification pass should carry.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::automaton::{Continuation, Match, Matcher};
use super::calibration::{Calibration, Prediction};
use super::features::{AcceptanceModel, Evidence, Features};
use super::tree::{DraftTree, Origin};

/// Candidates below this path probability are not worth a verification slot anywhere.
const MIN_PATH_P: f32 = 0.01;

/// Model predictions more than this many logits below the best are not drafted.
const CALIBRATED_GAP_LIMIT: f32 = 4.0;

/// Shorter suffixes of the match tried when the longest offers too few continuations.
const MAX_BACKOFF: usize = 2;

/// Verification steps a reserved draft tail stays on offer.
const RESERVE_STEPS: u8 = 2;

/// Bounds of one tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeShape {
    /// Drafted tokens (the root not counted).
    pub max_nodes: usize,
    /// Children per node.
    pub max_width: usize,
    pub max_depth: usize,
}

impl TreeShape {
    /// The largest tree `limits` lets a step draft (a session narrows it to the room left in
    /// the cache and the answer, and to the controller's depth cap).
    pub const fn of(limits: super::DraftLimits) -> TreeShape {
        TreeShape { max_nodes: limits.max_draft_tokens, max_width: limits.max_width, max_depth: limits.max_depth }
    }
}

/// Where a tree node stands in the index.
#[derive(Debug, Clone, Copy)]
struct Place {
    m: Match,
    /// Text index of this node's token in the matched occurrence.
    at: Option<u32>,
    /// Position in the reserved run, for nodes that follow it.
    run: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    p_path: f32,
    parent: usize,
    token: u32,
    origin: Origin,
    p: f32,
    features: Features,
    place: Place,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// Higher path probability first; on ties the earlier parent, then the lower token, so
    /// that trees are reproducible.
    fn cmp(&self, other: &Self) -> Ordering {
        self.p_path.total_cmp(&other.p_path).then(other.parent.cmp(&self.parent)).then(other.token.cmp(&self.token))
    }
}

/// A tail of a rejected draft that the model's own predictions agreed with.
#[derive(Debug, Clone, Default)]
struct Reserved {
    tokens: Vec<u32>,
    steps_left: u8,
}

#[derive(Debug, Clone, Default)]
pub struct Drafter {
    matcher: Matcher,
    /// Text index where the live text (this request's prompt, then its answer) starts;
    /// everything before it is history.
    live_start: usize,
    /// Text index where the answer starts.
    answer_start: usize,
    /// Predictions by live-text position (they stay valid across requests for the prompt
    /// prefix that stays the same).
    calibration: Calibration,
    reserved: Reserved,
    frontier: BinaryHeap<Candidate>,
    places: Vec<Place>,
    conts: Vec<Continuation>,
    seen: Vec<u32>,
}

impl Drafter {
    /// Forgets every source, the calibration and the reserved tail.
    pub fn clear(&mut self) {
        self.matcher.clear();
        self.calibration.clear();
        self.reserved = Reserved::default();
        self.live_start = 0;
        self.answer_start = 0;
    }

    /// Indexes a new request: `sources` (stored history: texts the answer may quote), then
    /// `prompt`, where the live text starts; the answer follows it. Calibrated predictions of
    /// the first `keep_calibration` prompt positions are kept (that prefix did not change).
    pub fn start(&mut self, sources: &[Vec<u32>], prompt: &[u32], keep_calibration: usize) {
        self.matcher.clear();
        self.reserved = Reserved::default();
        for s in sources {
            self.matcher.add_source(s);
        }
        self.matcher.add_source(&[]);
        self.live_start = self.matcher.index().len();
        self.matcher.extend(prompt);
        self.answer_start = self.matcher.index().len();
        self.calibration.truncate(keep_calibration);
    }

    /// Records the model's prediction after prompt token `i`.
    pub(crate) fn calibrate(&mut self, i: usize, p: Prediction) {
        self.calibration.insert(i, p);
    }

    /// The calibrated prediction after the token at text index `at`.
    fn predicted(&self, at: usize) -> Option<&Prediction> {
        at.checked_sub(self.live_start).and_then(|i| self.calibration.at(i))
    }

    pub fn calibrated_positions(&self) -> usize {
        self.calibration.len()
    }

    /// Appends committed answer tokens to the live text.
    pub fn push(&mut self, tokens: &[u32]) {
        self.matcher.extend(tokens);
    }

    /// Tokens in the index (all sources).
    pub fn indexed(&self) -> usize {
        self.matcher.index().len()
    }

    /// Offers `tokens` as a draft for the next steps (see [`super::agreeing_tail`]).
    pub(crate) fn reserve(&mut self, tokens: &[u32]) {
        self.reserved.tokens.clear();
        self.reserved.tokens.extend_from_slice(tokens);
        self.reserved.steps_left = if tokens.is_empty() { 0 } else { RESERVE_STEPS };
    }

    /// Builds the tree after `root` (the last committed token, already pushed) into `tree`,
    /// best-first, within `shape`.
    pub fn draft(&mut self, root: u32, shape: TreeShape, model: &AcceptanceModel, tree: &mut DraftTree) {
        tree.reset(root);
        self.frontier.clear();
        self.places.clear();
        let m = self.matcher.current();
        self.places.push(Place { m, at: self.matcher.current_at(), run: self.reserved_start(root) });
        if self.reserved.steps_left > 0 {
            self.reserved.steps_left -= 1;
        }
        self.expand(0, tree, shape, model);
        while let Some(c) = self.frontier.pop() {
            if tree.drafted() >= shape.max_nodes || c.p_path < MIN_PATH_P {
                break;
            }
            let node = tree.push(c.parent, c.token, c.origin, c.p, c.features);
            self.places.push(c.place);
            if tree.node(node).depth < shape.max_depth {
                self.expand(node, tree, shape, model);
            }
        }
    }

    /// Where the reserved run continues after `root`: from its start, or after the root when
    /// the root is one of its tokens (the answer caught up with it).
    fn reserved_start(&self, root: u32) -> Option<usize> {
        if self.reserved.steps_left == 0 {
            return None;
        }
        match self.reserved.tokens.iter().position(|&t| t == root) {
            Some(i) if i + 1 < self.reserved.tokens.len() => Some(i + 1),
            Some(_) => None,
            None => Some(0),
        }
    }

    /// Puts the candidate children of `node` on the frontier.
    fn expand(&mut self, node: usize, tree: &DraftTree, shape: TreeShape, model: &AcceptanceModel) {
        let place = self.places[node];
        let parent = tree.node(node);
        let depth = parent.depth + 1;
        let weak_parent = node != 0 && place.m.len <= 1;
        let index = self.matcher.index();
        self.seen.clear();
        let mut added = 0;

        // What followed the matched text in the index; where that offers fewer tokens than the
        // width allows (or none: the match runs into the end of the text), what followed
        // shorter suffixes of it.
        let mut m = place.m;
        for level in 0..=MAX_BACKOFF {
            if m.len == 0 || added >= shape.max_width {
                break;
            }
            index.continuations(m, shape.max_width, &mut self.conts);
            let total: u32 = self.conts.iter().map(|c| c.count.max(1)).sum();
            let only = self.conts.len() == 1;
            for c in &self.conts {
                if added >= shape.max_width || self.seen.contains(&c.token) {
                    continue;
                }
                let prediction = (c.at as usize).checked_sub(1).and_then(|i| self.predicted(i));
                let (model_gap, model_margin) = judge(prediction, c.token, Some(c.token));
                let at = c.at as usize;
                let evidence = Evidence {
                    match_len: m.len,
                    share: c.count.max(1) as f32 / total.max(1) as f32,
                    only_continuation: only,
                    model_gap,
                    model_margin,
                    seen_in_answer: at >= self.answer_start,
                    seen_in_history: at < self.live_start,
                    backed_off: level > 0,
                    depth,
                    weak_parent,
                    ..Default::default()
                };
                let next = Place { m: c.next, at: Some(c.at), run: None };
                offer(&mut self.frontier, node, parent.p_path, c.token, Origin::Context, evidence, next, model);
                self.seen.push(c.token);
                added += 1;
            }
            match index.shorter(m) {
                Some(shorter) => m = shorter,
                None => break,
            }
        }

        // The model's own predictions where the matched text last occurred in the prompt.
        if let Some(prediction) = place.at.and_then(|at| self.predicted(at as usize)).copied() {
            for k in 0..prediction.top.len() {
                let token = prediction.top[k];
                if added >= shape.max_width || prediction.gap[k] < -CALIBRATED_GAP_LIMIT || self.seen.contains(&token) {
                    continue;
                }
                let (model_gap, model_margin) = judge(Some(&prediction), token, None);
                let evidence = Evidence {
                    match_len: place.m.len,
                    model_gap,
                    model_margin,
                    calibrated_origin: true,
                    depth,
                    weak_parent,
                    ..Default::default()
                };
                let m = index.advance(place.m, token);
                let next = Place { m, at: (m.len > 0).then(|| index.last_end(m)), run: None };
                offer(&mut self.frontier, node, parent.p_path, token, Origin::Calibrated, evidence, next, model);
                self.seen.push(token);
                added += 1;
            }
        }

        // The reserved tail of the last rejected draft.
        if let Some(i) = place.run {
            if let Some(&token) = self.reserved.tokens.get(i) {
                if added < shape.max_width && !self.seen.contains(&token) {
                    let evidence =
                        Evidence { match_len: i as u32, reused_origin: true, depth, weak_parent, ..Default::default() };
                    let m = index.advance(place.m, token);
                    let next = Place { m, at: (m.len > 0).then(|| index.last_end(m)), run: Some(i + 1) };
                    offer(&mut self.frontier, node, parent.p_path, token, Origin::Reused, evidence, next, model);
                }
            }
        }
    }
}

/// The model's logit gap for `token` at a calibrated position and, when it is the best token
/// there, its margin over the second.
fn judge(prediction: Option<&Prediction>, token: u32, next: Option<u32>) -> (Option<f32>, Option<f32>) {
    let Some(p) = prediction else { return (None, None) };
    let gap = p.gap_of(token, next).unwrap_or(-8.0);
    let margin = (gap >= 0.0).then(|| -p.gap[1]).filter(|m| m.is_finite());
    (Some(gap), margin.or(Some(8.0).filter(|_| gap >= 0.0)))
}

#[allow(clippy::too_many_arguments)]
fn offer(
    frontier: &mut BinaryHeap<Candidate>,
    parent: usize,
    parent_p_path: f32,
    token: u32,
    origin: Origin,
    evidence: Evidence,
    place: Place,
    model: &AcceptanceModel,
) {
    let features = evidence.features();
    let p = model.p(&features);
    frontier.push(Candidate { p_path: parent_p_path * p, parent, token, origin, p, features, place });
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: TreeShape = TreeShape { max_nodes: 16, max_width: 3, max_depth: 16 };

    /// Believes every candidate (p = 0.95), so that trees hold whatever the sources offer.
    fn confident() -> AcceptanceModel {
        let mut w = [0.0; super::super::features::N];
        w[0] = 3.0;
        AcceptanceModel::with_weights(w)
    }

    #[test]
    fn copies_the_context_after_a_match() {
        let mut d = Drafter::default();
        d.start(&[], &[10, 11, 12, 13, 14, 15, 99, 10, 11], 0);
        let mut tree = DraftTree::default();
        d.draft(11, SHAPE, &confident(), &mut tree);
        // The main line continues 12 13 14 15 ...
        let mut path = Vec::new();
        let mut node = 0;
        while let Some(c) = tree.children(node).next() {
            path.push(tree.node(c).token);
            node = c;
        }
        assert!(path.starts_with(&[12, 13, 14]), "{path:?}");
        assert!(tree.nodes().windows(2).all(|w| w[0].p_path >= w[1].p_path || w[1].parent.is_some()));
    }

    #[test]
    fn calibrated_prediction_becomes_a_candidate() {
        let mut d = Drafter::default();
        d.start(&[], &[1, 2, 3, 4, 9, 1, 2], 0);
        // After "2" at prompt index 1 the model would have said 7 (not the 3 that followed).
        let mut logits = vec![0.0f32; 16];
        logits[7] = 5.0;
        logits[3] = 4.0;
        d.calibrate(1, Prediction::from_logits(&logits, 3));
        let mut tree = DraftTree::default();
        d.draft(2, SHAPE, &confident(), &mut tree);
        let roots: Vec<(u32, Origin)> = tree.children(0).map(|c| (tree.node(c).token, tree.node(c).origin)).collect();
        assert!(roots.contains(&(7, Origin::Calibrated)) && roots.contains(&(3, Origin::Context)), "{roots:?}");
    }

    #[test]
    fn reserved_tail_is_offered_after_a_rejection() {
        let mut d = Drafter::default();
        d.start(&[], &[1, 2, 3], 0);
        d.reserve(&[40, 41, 42]);
        let mut tree = DraftTree::default();
        d.draft(5, SHAPE, &confident(), &mut tree);
        let reused: Vec<u32> = tree.nodes().iter().filter(|n| n.origin == Origin::Reused).map(|n| n.token).collect();
        assert_eq!(reused, [40, 41, 42]);
        // Offered for a limited number of steps only.
        for _ in 0..RESERVE_STEPS {
            d.draft(5, SHAPE, &confident(), &mut tree);
        }
        assert!(tree.nodes().iter().all(|n| n.origin != Origin::Reused));
    }

    #[test]
    fn history_sources_are_drafted_from_but_not_crossed() {
        let mut d = Drafter::default();
        d.start(&[vec![5, 6, 7, 8]], &[1, 2, 5, 6], 0);
        let mut tree = DraftTree::default();
        d.draft(6, SHAPE, &confident(), &mut tree);
        let first: Vec<u32> = tree.children(0).map(|c| tree.node(c).token).collect();
        assert_eq!(first, [7]);
        assert!(tree.nodes()[1].features.0[17] == 1.0, "marked as seen in history");
        assert!(tree.nodes().iter().all(|n| n.token != super::super::automaton::SEPARATOR));
    }

    #[test]
    fn shape_bounds_the_tree() {
        let mut d = Drafter::default();
        let text: Vec<u32> = (0..50).chain(0..50).collect();
        d.start(&[], &text, 0);
        let mut tree = DraftTree::default();
        let shape = TreeShape { max_nodes: 5, max_width: 1, max_depth: 3 };
        d.draft(49, shape, &confident(), &mut tree);
        assert!(tree.drafted() <= 5 && tree.depth() <= 3);
        assert!((0..tree.len()).all(|i| tree.children(i).count() <= 1));
    }
}
