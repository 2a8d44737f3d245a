//! What a layer keeps between passes when it is not keys and values: LFM2's short convolution
//! keeps the last `L - 1` inputs of its depthwise convolution (a window of a few rows, however
//! long the context). Unlike keys and values, such a state summarises the whole prefix, so it
//! cannot be cut back to an arbitrary length: the cache keeps copies at chosen lengths
//! ([`Checkpoints`]) and rolls back to the nearest one.
//!
//! A token tree (speculative verification) is run without touching the window: each node's
//! convolution reads its own ancestors' inputs (kept for the pass) and then the window, which
//! is what feeding its path token by token would read, in the same order; keeping a path then
//! moves that path's inputs into the window.

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
/// taps (the current token's and `kernel - 1` before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvShape {
    pub channels: usize,
    pub kernel: usize,
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
}

impl ConvState {
    pub fn new(shape: ConvShape) -> ConvState {
        ConvState { shape, window: vec![0.0; shape.rows() * shape.channels], tree_rows: Vec::new() }
    }

    pub fn bytes(&self) -> usize {
        (self.window.capacity() + self.tree_rows.capacity()) * 4
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
    }

    /// Forgets the last tree pass's inputs (none of its nodes is kept).
    pub(crate) fn drop_tree(&mut self) {
        self.tree_rows.clear();
    }

    pub fn window(&self) -> &[f32] {
        &self.window
    }

    pub fn restore(&mut self, window: &[f32]) {
        self.window.copy_from_slice(window);
        self.tree_rows.clear();
    }

    pub fn reset(&mut self) {
        self.window.fill(0.0);
        self.tree_rows.clear();
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
        let mut copy = Vec::with_capacity(states.iter().map(|s| s.window.len()).sum());
        states.iter().for_each(|s| copy.extend_from_slice(s.window()));
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
            let n = s.window.len();
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
