//! The speculative side of a session: its drafter and acceptance model, calibration during
//! prefill, and the decode step that drafts a tree, verifies it in one pass and commits the
//! accepted tokens one by one through the same path as plain decoding (stop sequences, token
//! limit, end of generation, the sampler's `accept`).

use std::time::Instant;

use super::{Event, FinishReason, Generation};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::{Logits, Scratch};
use crate::sampling::argmax;
use crate::speculative::calibration::PromptScorer;
use crate::speculative::controller::Controller;
use crate::speculative::drafter::{Drafter, TreeShape};
use crate::speculative::features::AcceptanceModel;
use crate::speculative::tree::DraftTree;
use crate::speculative::{agreeing_tail, verify, DraftLimits, SpeculationOptions, SpeculationStats};

/// A session's speculation state; it lives as long as the session, so the acceptance model
/// keeps learning across answers. The model starts from what the engine's earlier sessions
/// learned, and what it learns from each verified draft is left with the engine.
#[derive(Debug)]
pub(super) struct Speculator {
    pub(super) opts: SpeculationOptions,
    limits: DraftLimits,
    drafter: Drafter,
    model: AcceptanceModel,
    controller: Controller,
    tree: DraftTree,
    /// Stored history as token ids, with the store version they were made from.
    history: Option<(u64, Vec<Vec<u32>>)>,
    // Scratch of the decode step.
    children: Vec<(usize, u32)>,
    slots: Vec<usize>,
    chain: Vec<u32>,
    predicted: Vec<u32>,
    scorer: PromptScorer,
}

impl Speculator {
    pub(super) fn new(opts: &SpeculationOptions, model: AcceptanceModel) -> Option<Speculator> {
        let limits = opts.limits()?;
        Some(Speculator {
            opts: opts.clone(),
            limits,
            drafter: Drafter::default(),
            model,
            controller: Controller::default(),
            tree: DraftTree::default(),
            history: None,
            children: Vec::new(),
            slots: Vec::new(),
            chain: Vec::new(),
            predicted: Vec::new(),
            scorer: PromptScorer::default(),
        })
    }

    /// New options; what was learned stays.
    pub(super) fn reconfigure(&mut self, opts: &SpeculationOptions) {
        if let Some(limits) = opts.limits() {
            self.limits = limits;
        }
        if opts.history.as_ref().map(|h| (&h.key, std::sync::Arc::as_ptr(&h.store)))
            != self.opts.history.as_ref().map(|h| (&h.key, std::sync::Arc::as_ptr(&h.store)))
        {
            self.history = None;
        }
        self.opts = opts.clone();
    }

    /// Indexes a request: stored history, then the prompt. Calibration of the first `keep`
    /// prompt positions (still in the KV cache) stays valid.
    pub(super) fn begin(&mut self, engine: &Engine, prompt: &[u32], keep: usize) -> Result<()> {
        if let Some(scope) = &self.opts.history {
            let version = scope.store.version(&scope.key);
            let stale = version == 0
                || scope.store.changed_on_disk(&scope.key)
                || self.history.as_ref().is_none_or(|(v, _)| *v != version);
            if stale {
                // Drafts are an optimisation: a history that cannot be read drafts nothing
                // this time, it does not refuse the request.
                self.history = match scope.store.token_ids(&scope.key, engine.tokenizer()) {
                    Ok(ids) => Some((scope.store.version(&scope.key), ids)),
                    Err(e) => {
                        log::warn!("history scope not used for drafting: {e}");
                        None
                    }
                };
            }
        }
        let sources = self.history.as_ref().map_or(&[][..], |(_, s)| s.as_slice());
        self.drafter.start(sources, prompt, keep);
        self.controller.start_answer();
        Ok(())
    }

    /// The first prompt position whose prediction the prefill should compute.
    pub(super) fn calibration_from(&self, prompt_len: usize) -> Option<usize> {
        let n = self.opts.calibration_positions;
        (n > 0).then(|| prompt_len.saturating_sub(n + 1))
    }

    /// Readies calibration for `prompt` (see [`PromptScorer`]).
    pub(super) fn prepare_calibration(&mut self, engine: &Engine, prompt: &[u32]) {
        self.scorer.prepare(engine.model(), prompt);
    }

    /// Lets go of calibration's buffers once the prefill is done.
    pub(super) fn end_calibration(&mut self) {
        self.scorer.release();
    }

    /// Stores the predictions of a prefill pass run with `Logits::Hidden` whose rows are prompt
    /// positions `first..`.
    pub(super) fn calibrate(&mut self, engine: &Engine, scratch: &Scratch, first: usize, prompt: &[u32]) -> usize {
        let drafter = &mut self.drafter;
        self.scorer.predict(engine.model(), engine.pool(), scratch, first, prompt, |pos, p| drafter.calibrate(pos, p))
    }
}

/// The drafter a session's prefill leaves behind for `prompt`, with `sources` (stored
/// history, as token ids) indexed before it: the prompt prefilled in the session's chunks and
/// the positions `opts` calibrates scored with the same calls as a session's prefill makes.
/// For tools that grow the drafter's trees along known answers (`tern-lab`).
#[cfg(feature = "lab")]
pub fn calibrated_drafter(
    engine: &Engine,
    sources: &[Vec<u32>],
    prompt: &[u32],
    opts: &SpeculationOptions,
) -> Result<Drafter> {
    let mut opts = opts.clone();
    opts.history = None;
    if opts.limits().is_none() {
        opts.mode = crate::speculative::Speculation::Auto;
    }
    let Some(mut spec) = Speculator::new(&opts, AcceptanceModel::default()) else {
        return Err(Error::InvalidOption("speculation is off".into()));
    };
    spec.drafter.start(sources, prompt, 0);
    let model = engine.model();
    let mut kv = model.new_kv_cache(prompt.len() + 1);
    let mut scratch = Scratch::default();
    let from = spec.calibration_from(prompt.len()).unwrap_or(prompt.len());
    model.forward(engine.pool(), &mut kv, &mut scratch, &prompt[..from], Logits::None)?;
    spec.prepare_calibration(engine, prompt);
    for start in (from..prompt.len()).step_by(super::PREFILL_CHUNK) {
        let end = (start + super::PREFILL_CHUNK).min(prompt.len());
        model.forward(engine.pool(), &mut kv, &mut scratch, &prompt[start..end], Logits::Hidden { last: false })?;
        spec.calibrate(engine, &scratch, start, prompt);
    }
    spec.end_calibration();
    Ok(spec.drafter)
}

impl Generation<'_> {
    /// One speculative decode step after `next`, the last chosen token: draft, verify, commit.
    pub(super) fn speculative_step(&mut self, next: u32) -> Result<Event> {
        let Some(mut spec) = self.session.spec.take() else {
            return Err(Error::InvalidOption("speculation is off".into()));
        };
        let result = self.speculate_with(&mut spec, next);
        self.session.spec = Some(spec);
        result
    }

    fn speculate_with(&mut self, spec: &mut Speculator, next: u32) -> Result<Event> {
        let started = Instant::now();
        let engine = std::sync::Arc::clone(&self.session.engine);

        // 1. Draft: the index catches up with the answer, then a tree grows after `next`.
        spec.drafter.push(&self.generated[self.spec_absorbed..]);
        self.spec_absorbed = self.generated.len();
        let remaining = self.session.opts.max_tokens.saturating_sub(self.generated.len());
        let room = self.session.kv.capacity() - self.session.kv.len();
        let full = TreeShape::of(spec.limits);
        let mut shape = TreeShape {
            max_nodes: full.max_nodes.min(room.saturating_sub(1)),
            max_width: full.max_width,
            // A step chooses at most depth + 1 tokens; more than the answer may still take is waste.
            max_depth: full.max_depth.min(remaining.saturating_sub(1)),
        };
        if spec.limits.adaptive {
            // The controller's depth cap shapes the tree: nodes a capped draft could not verify
            // go to alternatives instead.
            let cap = spec.controller.depth_cap();
            shape.max_depth = shape.max_depth.min(cap);
            shape.max_nodes = shape.max_nodes.min(2 * cap);
        }
        if shape.max_nodes == 0 || shape.max_depth == 0 {
            spec.tree.reset(next);
        } else {
            spec.drafter.draft(next, shape, &spec.model, &mut spec.tree);
        }
        if spec.limits.adaptive {
            let plan = spec.controller.plan(&spec.tree, &engine.verify_costs().curve());
            spec.tree.truncate(plan.keep);
        }
        self.spec_stats.drafting_time += started.elapsed();

        // 2. Verify: one pass over the tree; row i holds the logits after node i's path.
        let s = &mut *self.session;
        let base = s.kv.len();
        let batch = spec.tree.len();
        let pass = Instant::now();
        if batch == 1 {
            engine.model().forward(engine.pool(), &mut s.kv, &mut s.scratch, &[next], Logits::Last)?;
        } else {
            let (tokens, parents) = (spec.tree.tokens(), spec.tree.parents());
            engine.model().forward_tree(engine.pool(), &mut s.kv, &mut s.scratch, tokens, parents, Logits::All)?;
        }
        engine.verify_costs().observe(batch, pass.elapsed());
        s.cached.push(next);

        // 3. Walk the tree: the sampler chooses after each node as plain decoding would, and
        // every chosen token is committed before the next row is sampled.
        spec.slots.clear();
        spec.slots.push(base);
        let tok = engine.tokenizer();
        let (mut text, mut ids) = (String::new(), Vec::new());
        let mut node = 0;
        let mut done = None;
        let mut rejected_at = None;
        let mut failed = None;
        loop {
            spec.children.clear();
            spec.children.extend(spec.tree.children(node).map(|c| (c, spec.tree.node(c).token)));
            let s = &mut *self.session;
            // The pass returned a row per node.
            let Some(row) = s.scratch.logits_row_mut(node) else { break };
            let choice = verify::choose(&mut s.sampler, row, &s.cached, &spec.children);
            self.decode_steps += 1;
            for &(c, _) in &spec.children {
                spec.model.learn(&spec.tree.node(c).features, choice.child == Some(c));
            }
            if choice.child.is_none() && !spec.children.is_empty() {
                rejected_at = Some(node);
            }
            // End of generation: reported once this pass is in the figures (after this step's
            // tokens, if it has any).
            if tok.is_eog(choice.token) && !self.session.opts.ignore_eos {
                self.pending_finish = Some(FinishReason::EndOfGeneration);
                break;
            }
            match self.accept(choice.token) {
                Ok(Some(Event::Token { text: t, ids: i })) => {
                    text.push_str(&t);
                    ids.extend(i);
                }
                Ok(Some(end)) => {
                    done = Some(end);
                    break;
                }
                Ok(None) => break,
                // The KV cache is compacted below all the same.
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
            let Some(child) = choice.child.filter(|_| self.pending_finish.is_none()) else { break };
            node = child;
            self.session.cached.push(spec.tree.node(child).token);
            spec.slots.push(base + child);
        }

        // 4. Keep the accepted path in the KV cache; offer the agreeing tail of a rejected
        // draft to the next steps.
        let accepted = spec.slots.len() - 1;
        let depth = spec.tree.nodes().iter().map(|n| n.depth).max().unwrap_or(0);
        spec.controller.record(batch, depth, accepted);
        if batch > 1 {
            self.session.engine.keep_acceptance_model(&spec.model);
        }
        // The slots are ascending and inside the pass: keeping them cannot fail.
        let kept = self.session.kv.keep_slots(base, &spec.slots);
        debug_assert!(kept);
        if let Some(at) = rejected_at {
            self.reserve_agreeing_tail(spec, at);
        }
        self.spec_stats.record_pass(spec.tree.drafted(), accepted);
        self.decode_time += started.elapsed();
        if let Some(e) = failed {
            return Err(e);
        }
        if let Some(end) = done {
            return Ok(end);
        }
        if ids.is_empty() {
            if let Some(reason) = self.pending_finish.take() {
                return Ok(self.finish(reason));
            }
        }
        Ok(Event::Token { text, ids })
    }

    /// After the model rejected every child of `node`: follows the most likely rejected child's
    /// line and keeps the run the model's own predictions agreed with (see
    /// [`agreeing_tail`]).
    fn reserve_agreeing_tail(&mut self, spec: &mut Speculator, node: usize) {
        spec.chain.clear();
        spec.predicted.clear();
        let mut cur = spec.tree.children(node).next();
        while let Some(c) = cur {
            let Some(row) = self.session.scratch.logits_row_mut(c) else { break };
            spec.chain.push(spec.tree.node(c).token);
            spec.predicted.push(argmax(row));
            cur = spec.tree.children(c).next();
        }
        let tail = agreeing_tail(&spec.chain, &spec.predicted).to_vec();
        spec.drafter.reserve(&tail);
    }
}

impl Generation<'_> {
    /// This answer's speculation figures; adds the answer to the history scope, if any.
    pub(super) fn speculation_stats(&mut self) -> SpeculationStats {
        let mut stats = self.spec_stats.clone();
        if stats.decode_passes == 0 {
            stats.decode_passes = self.decode_steps;
        }
        stats.tokens_per_step =
            if stats.decode_passes == 0 { 0.0 } else { self.decode_steps as f64 / stats.decode_passes as f64 };
        if let Some(scope) = self.history.as_ref().filter(|s| s.record_answers && !self.answer.is_empty()) {
            if let Err(e) = scope.store.add(&scope.key, &self.answer) {
                stats.history_error = Some(e.to_string());
            }
        }
        stats
    }
}
