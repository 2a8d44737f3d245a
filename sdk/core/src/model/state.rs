//! What a layer keeps between passes when it is not keys and values: LFM2's short convolution
//! keeps the last `L - 1` inputs of its depthwise convolution (a window of a few rows, however
//! long the context); Qwen3.5's Gated DeltaNet keeps such a window and, beside it, a matrix per
//! head that every token updates ([`DeltaRule`]). Unlike keys and values, such a state
//! summarises the whole prefix, so it cannot be cut back to an arbitrary length: the cache
//! keeps copies at chosen lengths ([`Checkpoints`]) and rolls back to the nearest one.
//!
//! A token tree (speculative verification) is run without touching the state: each node's
//! convolution reads its own ancestors' inputs (kept for the pass) and then the window, and
//! each node's recurrence replays its path from the state, which is what feeding the path
//! token by token computes, in the same order; keeping a path then moves that path's inputs
//! into the window and replays them into the recurrent state.

use super::attention::BatchLayout;

/// What one layer keeps besides keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerCache {
    /// Nothing (a layer that reads another layer's keys and values, or keeps no state).
    None,
    /// Keys and values of every position.
    Kv(super::kv::KvShape),
    /// A causal depthwise convolution's last inputs.
    Conv(ConvShape),
}

/// A depthwise convolution over time: `channels` inputs per token, a kernel of `kernel`
/// taps (the current token's and `kernel - 1` before it), and the recurrence that follows it
/// where there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvShape {
    pub channels: usize,
    pub kernel: usize,
    pub rule: Option<DeltaRule>,
}

/// Gated DeltaNet's recurrence (Qwen3.5's linear attention). Value head `h` keeps a matrix
/// `S` of `dim` rows (one per value element) of `dim` key elements, and each token does
///   S ← exp(g)·S;  S ← S + (β·(v − S·k))·kᵀ;  o = S·q / √dim
/// with its q and k from key head `h % k_heads` (ggml repeats the key heads, as llama.cpp's
/// Qwen3.5 graph reads them), in the order ggml's `gated_delta_net` sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaRule {
    pub v_heads: usize,
    pub k_heads: usize,
    pub dim: usize,
}

impl DeltaRule {
    /// Floats of the state: a `dim × dim` matrix per value head.
    pub fn state_len(&self) -> usize {
        self.v_heads * self.dim * self.dim
    }

    /// Floats of one token's inputs: q and k (`k_heads × dim` each), v (`v_heads × dim`),
    /// then g and β (one per value head).
    pub fn input_len(&self) -> usize {
        (2 * self.k_heads + self.v_heads) * self.dim + 2 * self.v_heads
    }

    /// Floats of one token's output (`v_heads × dim`).
    pub fn output_len(&self) -> usize {
        self.v_heads * self.dim
    }

    /// One token: updates `state` with `input` and, if given, writes the output.
    pub fn step(&self, state: &mut [f32], input: &[f32], mut out: Option<&mut [f32]>) {
        let (dim, kd) = (self.dim, self.k_heads * self.dim);
        let (q, rest) = input.split_at(kd);
        let (k, rest) = rest.split_at(kd);
        let (v, rest) = rest.split_at(self.v_heads * dim);
        let (g, beta) = rest.split_at(self.v_heads);
        let scale = 1.0 / (dim as f32).sqrt();
        for h in 0..self.v_heads {
            let kh = h % self.k_heads;
            let (qh, khd) = (&q[kh * dim..(kh + 1) * dim], &k[kh * dim..(kh + 1) * dim]);
            let vh = &v[h * dim..(h + 1) * dim];
            let s = &mut state[h * dim * dim..(h + 1) * dim * dim];
            let decay = g[h].exp();
            s.iter_mut().for_each(|x| *x *= decay);
            for (j, row) in s.chunks_exact_mut(dim).enumerate() {
                let delta = (vh[j] - dot(row, khd)) * beta[h];
                row.iter_mut().zip(khd).for_each(|(x, &kv)| *x += kv * delta);
                if let Some(o) = out.as_deref_mut() {
                    o[h * dim + j] = dot(row, qh) * scale;
                }
            }
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl ConvShape {
    /// Rows the window keeps: the inputs before the current token that the kernel reads.
    pub fn rows(&self) -> usize {
        self.kernel.saturating_sub(1)
    }
}

/// One convolution layer's state in a session.
pub(super) struct ConvState {
    shape: ConvShape,
    /// The last `rows()` inputs before the cached length, oldest first (zeros before the
    /// sequence's start, as llama.cpp starts its state).
    window: Vec<f32>,
    /// The inputs of the last tree pass's nodes, a row per node, until a path is kept.
    tree_rows: Vec<f32>,
    /// The recurrence's state at the cached length (empty without a rule).
    recurrent: Vec<f32>,
    /// The recurrence's inputs of the last tree pass's nodes, a row per node.
    tree_inputs: Vec<f32>,
    /// A tree node's state while its path is replayed.
    work: Vec<f32>,
}

impl ConvState {
    pub fn new(shape: ConvShape) -> ConvState {
        ConvState {
            shape,
            window: vec![0.0; shape.rows() * shape.channels],
            tree_rows: Vec::new(),
            recurrent: vec![0.0; shape.rule.map_or(0, |r| r.state_len())],
            tree_inputs: Vec::new(),
            work: Vec::new(),
        }
    }

    pub fn bytes(&self) -> usize {
        [&self.window, &self.tree_rows, &self.recurrent, &self.tree_inputs, &self.work]
            .iter()
            .map(|v| v.capacity() * 4)
            .sum()
    }

    /// Runs the recurrence over the batch: token `t`'s inputs are row `t` of `inputs`
    /// ([`DeltaRule::input_len`] each), its output row `t` of `out`. A plain batch advances
    /// the state; a tree replays each node's path from it and keeps the inputs for
    /// [`ConvState::keep_path`]. Does nothing without a rule.
    pub fn recur(&mut self, inputs: &[f32], layout: &BatchLayout, out: &mut [f32]) {
        let Some(rule) = self.shape.rule else { return };
        let (il, ol, n) = (rule.input_len(), rule.output_len(), layout.positions.len());
        if !layout.is_tree() {
            for t in 0..n {
                rule.step(&mut self.recurrent, &inputs[t * il..(t + 1) * il], Some(&mut out[t * ol..(t + 1) * ol]));
            }
            return;
        }
        for t in 0..n {
            self.work.clear();
            self.work.extend_from_slice(&self.recurrent);
            // The node's path, root first: its predecessors within the batch, then itself.
            let depth = (1..).take_while(|&k| layout.predecessor(t, k).is_ok()).count();
            for back in (1..=depth).rev() {
                let Ok(c) = layout.predecessor(t, back) else { break };
                rule.step(&mut self.work, &inputs[c * il..(c + 1) * il], None);
            }
            rule.step(&mut self.work, &inputs[t * il..(t + 1) * il], Some(&mut out[t * ol..(t + 1) * ol]));
        }
        self.tree_inputs.clear();
        self.tree_inputs.extend_from_slice(&inputs[..n * il]);
    }

    /// out[t] = Σ_j w[c][j] · input(t, j) per channel c for each batch token t, where tap
    /// `kernel - 1` is the token's own input and tap `kernel - 1 - k` the input `k` steps back
    /// along its path (the batch's earlier tokens, a tree node's ancestors, then the window).
    /// `w` holds `kernel` taps per channel (`shape.channels` rows of `kernel`). A plain batch
    /// then moves its last inputs into the window; a tree keeps its inputs for
    /// [`ConvState::keep_path`].
    pub fn apply(&mut self, w: &[f32], input: &[f32], layout: &BatchLayout, out: &mut [f32]) {
        let (ch, kernel, rows) = (self.shape.channels, self.shape.kernel, self.shape.rows());
        let n = layout.positions.len();
        for t in 0..n {
            let o = &mut out[t * ch..(t + 1) * ch];
            o.fill(0.0);
            // Taps in ascending order (oldest input first), as ggml's ssm_conv sums them.
            for j in 0..kernel {
                let back = kernel - 1 - j;
                let row = match layout.predecessor(t, back) {
                    Ok(b) => &input[b * ch..(b + 1) * ch],
                    // `k` steps past the batch's start: window row `rows - k`.
                    Err(k) if k <= rows => &self.window[(rows - k) * ch..(rows - k + 1) * ch],
                    Err(_) => continue,
                };
                for c in 0..ch {
                    o[c] += w[c * kernel + j] * row[c];
                }
            }
        }
        if layout.is_tree() {
            self.tree_rows.clear();
            self.tree_rows.extend_from_slice(&input[..n * ch]);
        } else {
            self.push_rows(&input[..n * ch]);
        }
    }

    /// The window after `rows` more inputs.
    fn push_rows(&mut self, input: &[f32]) {
        let (ch, keep) = (self.shape.channels, self.shape.rows());
        let n = input.len() / ch;
        if keep == 0 {
            return;
        }
        if n >= keep {
            self.window.copy_from_slice(&input[(n - keep) * ch..n * ch]);
        } else {
            self.window.copy_within(n * ch.., 0);
            let start = (keep - n) * ch;
            self.window[start..].copy_from_slice(input);
        }
    }

    /// Appends the inputs of the last tree pass's nodes `path` (a chain from a root, checked
    /// by the caller) to the window, and forgets the tree.
    pub(crate) fn keep_path(&mut self, path: &[usize]) {
        let ch = self.shape.channels;
        let rows = std::mem::take(&mut self.tree_rows);
        for &node in path {
            self.push_rows(&rows[node * ch..(node + 1) * ch]);
        }
        self.tree_rows = rows;
        self.tree_rows.clear();
        if let Some(rule) = self.shape.rule {
            let il = rule.input_len();
            for &node in path {
                rule.step(&mut self.recurrent, &self.tree_inputs[node * il..(node + 1) * il], None);
            }
            self.tree_inputs.clear();
        }
    }

    /// Forgets the last tree pass's inputs (none of its nodes is kept).
    pub(crate) fn drop_tree(&mut self) {
        self.tree_rows.clear();
        self.tree_inputs.clear();
    }

    /// Floats a checkpoint of this state takes: the window, then the recurrent state.
    fn saved_len(&self) -> usize {
        self.window.len() + self.recurrent.len()
    }

    fn save_into(&self, out: &mut Vec<f32>) {
        out.extend_from_slice(&self.window);
        out.extend_from_slice(&self.recurrent);
    }

    /// Back to a state [`ConvState::save_into`] wrote.
    fn restore(&mut self, saved: &[f32]) {
        let (window, recurrent) = saved.split_at(self.window.len());
        self.window.copy_from_slice(window);
        self.recurrent.copy_from_slice(recurrent);
        self.drop_tree();
    }

    pub fn reset(&mut self) {
        self.window.fill(0.0);
        self.recurrent.fill(0.0);
        self.drop_tree();
    }
}

/// Copies of every state layer's state at chosen lengths (turn boundaries), newest last, so
/// that a session can roll back to a prefix: the next turn reuses the previous turn's state.
#[derive(Default)]
pub(super) struct Checkpoints {
    /// (length, each state layer's window in layer order).
    saved: Vec<(usize, Vec<f32>)>,
}

/// Checkpoints kept per session: a turn takes two (after the prompt, after the answer), so
/// this covers the last few turns; older ones go first.
const MAX_CHECKPOINTS: usize = 8;

impl Checkpoints {
    pub fn save(&mut self, len: usize, states: &[ConvState]) {
        if self.saved.last().is_some_and(|(l, _)| *l == len) {
            self.saved.pop();
        }
        self.saved.retain(|(l, _)| *l < len);
        if self.saved.len() == MAX_CHECKPOINTS {
            self.saved.remove(0);
        }
        let mut copy = Vec::with_capacity(states.iter().map(ConvState::saved_len).sum());
        states.iter().for_each(|s| s.save_into(&mut copy));
        self.saved.push((len, copy));
    }

    /// Rolls `states` back to the longest saved length at most `len` (0, the empty
    /// sequence, is always there) and returns it; later checkpoints are dropped.
    pub fn restore(&mut self, len: usize, states: &mut [ConvState]) -> usize {
        self.saved.retain(|(l, _)| *l <= len);
        let Some((at, copy)) = self.saved.last() else {
            states.iter_mut().for_each(ConvState::reset);
            return 0;
        };
        let mut offset = 0;
        for s in states.iter_mut() {
            let n = s.saved_len();
            s.restore(&copy[offset..offset + n]);
            offset += n;
        }
        *at
    }

    /// The length [`Checkpoints::restore`] would go back to.
    pub(crate) fn longest_at_most(&self, len: usize) -> usize {
        self.saved.iter().rev().map(|(l, _)| *l).find(|&l| l <= len).unwrap_or(0)
    }

    pub fn clear(&mut self) {
        self.saved.clear();
    }

    pub fn bytes(&self) -> usize {
        self.saved.iter().map(|(_, c)| c.capacity() * 4).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: DeltaRule = DeltaRule { v_heads: 4, k_heads: 2, dim: 3 };

    /// Deterministic inputs in [-1, 1), with β in (0, 1) and g < 0 as the model makes them.
    fn inputs(n: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32) * 2.0 - 1.0
        };
        let il = RULE.input_len();
        let mut v: Vec<f32> = (0..n * il).map(|_| next()).collect();
        for t in 0..n {
            let gb = &mut v[t * il + il - 2 * RULE.v_heads..(t + 1) * il];
            for h in 0..RULE.v_heads {
                gb[h] = -gb[h].abs() - 0.05;
                gb[RULE.v_heads + h] = 0.5 + 0.4 * gb[RULE.v_heads + h];
            }
        }
        v
    }

    fn shape() -> ConvShape {
        ConvShape { channels: 2, kernel: 3, rule: Some(RULE) }
    }

    /// The rule written out over explicit matrices, value head h reading key head h % k_heads.
    #[test]
    fn the_delta_rule_is_the_formula() {
        let (dim, hv, hk) = (RULE.dim, RULE.v_heads, RULE.k_heads);
        let x = inputs(5, 7);
        let mut state = vec![0.0f32; RULE.state_len()];
        let mut s = vec![[[0.0f64; 3]; 3]; hv];
        for row in x.chunks_exact(RULE.input_len()) {
            let mut out = vec![0.0f32; RULE.output_len()];
            RULE.step(&mut state, row, Some(&mut out));
            for h in 0..hv {
                let at = |base: usize, i: usize| row[base + i] as f64;
                let (q0, k0, v0) = ((h % hk) * dim, hk * dim + (h % hk) * dim, 2 * hk * dim + h * dim);
                let (g, beta) = (at(2 * hk * dim + hv * dim, h), at(2 * hk * dim + hv * dim + hv, h));
                let m = &mut s[h];
                m.iter_mut().flatten().for_each(|e| *e *= g.exp());
                let sk: Vec<f64> = (0..dim).map(|i| (0..dim).map(|j| m[i][j] * at(k0, j)).sum()).collect();
                for i in 0..dim {
                    for j in 0..dim {
                        m[i][j] += beta * (at(v0, i) - sk[i]) * at(k0, j);
                    }
                }
                for i in 0..dim {
                    let o: f64 = (0..dim).map(|j| m[i][j] * at(q0, j)).sum::<f64>() / (dim as f64).sqrt();
                    assert!(
                        (out[h * dim + i] as f64 - o).abs() < 1e-5,
                        "head {h} row {i}: {} vs {o}",
                        out[h * dim + i]
                    );
                }
            }
        }
    }

    /// Each tree node's output is what feeding its path token by token gives, bit for bit, and
    /// keeping a path leaves the state those tokens leave.
    #[test]
    fn a_tree_node_sees_the_state_its_path_would_leave() {
        let (il, ol) = (RULE.input_len(), RULE.output_len());
        let prefix = inputs(2, 1);
        // Nodes: 0 and 1 roots, 2 under 0, 3 under 2.
        let parents = [None, None, Some(0), Some(2)];
        let nodes = inputs(parents.len(), 2);
        let conv_in = vec![0.5f32; parents.len() * 2];
        let mut layout = BatchLayout::default();

        let mut base = ConvState::new(shape());
        layout.build(0, 2, None);
        base.recur(&prefix, &layout, &mut vec![0.0; 2 * ol]);
        let mut tree = ConvState::new(shape());
        tree.restore(&{
            let mut saved = Vec::new();
            base.save_into(&mut saved);
            saved
        });
        layout.build(2, parents.len(), Some(&parents));
        let mut conv_out = vec![0.0; conv_in.len()];
        tree.apply(&[0.0; 6], &conv_in, &layout, &mut conv_out);
        let mut out = vec![0.0; parents.len() * ol];
        tree.recur(&nodes, &layout, &mut out);
        assert_eq!(tree.recurrent, base.recurrent, "a tree pass leaves the state alone");

        for (node, path) in [(0, vec![0]), (1, vec![1]), (2, vec![0, 2]), (3, vec![0, 2, 3])] {
            let mut plain = ConvState::new(shape());
            plain.recurrent.copy_from_slice(&base.recurrent);
            let feed: Vec<f32> = path.iter().flat_map(|&c| nodes[c * il..(c + 1) * il].to_vec()).collect();
            layout.build(2, path.len(), None);
            let mut plain_out = vec![0.0; path.len() * ol];
            plain.recur(&feed, &layout, &mut plain_out);
            assert_eq!(&out[node * ol..(node + 1) * ol], &plain_out[(path.len() - 1) * ol..], "node {node}");
            if node == 3 {
                tree.keep_path(&path);
                assert_eq!(tree.recurrent, plain.recurrent, "the kept path's state");
            }
        }
    }

    /// A checkpoint holds the recurrent state with the window; rolling back restores both.
    #[test]
    fn checkpoints_restore_the_recurrent_state() {
        let ol = RULE.output_len();
        let mut layout = BatchLayout::default();
        let mut states = [ConvState::new(shape())];
        let mut cp = Checkpoints::default();
        layout.build(0, 3, None);
        states[0].apply(&[0.1; 6], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &layout, &mut [0.0; 6]);
        states[0].recur(&inputs(3, 3), &layout, &mut vec![0.0; 3 * ol]);
        cp.save(3, &states);
        let (window, recurrent) = (states[0].window.clone(), states[0].recurrent.clone());
        layout.build(3, 2, None);
        states[0].apply(&[0.1; 6], &[7.0, 8.0, 9.0, 10.0], &layout, &mut [0.0; 4]);
        states[0].recur(&inputs(2, 4), &layout, &mut vec![0.0; 2 * ol]);
        assert_ne!(states[0].recurrent, recurrent);
        assert_eq!(cp.restore(4, &mut states), 3);
        assert_eq!((&states[0].window, &states[0].recurrent), (&window, &recurrent));
        assert_eq!(cp.restore(2, &mut states), 0, "before the first checkpoint: the start");
        assert!(states[0].recurrent.iter().chain(&states[0].window).all(|&x| x == 0.0));
    }
}
