//! The cache of one session: per layer, its keys and values (preallocated for the session's
//! context length), or another state over the sequence (`model::state`: a convolution's
//! window), or nothing. Every operation a session or a speculative verifier does on it (append
//! a pass, keep a token tree's accepted path, truncate to a prefix, save a turn boundary) goes
//! to each layer's kind of state. Keys and values per layer: `[kv_head][position][head_dim]`, each layer with its own heads and head
//! size (or none: a layer that keeps nothing here), independent of the thread count, so the
//! threads working on it can change between calls. Head-major so that attention, which works
//! on one KV head at a time, reads each head's rows as one sequential stream (rows of
//! interleaved heads left the prefetchers a strided pattern: long-context decode ran about a
//! third slower).
//!
//! Two precisions: f16 keys and values (the default), or MNN-LLM's int8 keys and fp8 values
//! (e4m3), each row of a KV head with one f32 scale, which halves the cache's memory and the
//! bytes long-context attention reads, for somewhat different logits (measured in
//! docs/benchmarks.md).

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::quant::reference::quantize_row_e4m3;
use crate::quant::{KvHeadRows, KEY_GROUP};

use super::state::{Checkpoints, ConvState, LayerCache};

/// How the cache stores keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvPrecision {
    /// f16 keys and values.
    #[default]
    F16,
    /// int8 keys and fp8 e4m3 values, a scale per position and KV head for each.
    Int8Fp8,
}

/// What one layer keeps: its KV heads and their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvShape {
    pub n_head: usize,
    pub head_dim: usize,
}

/// Where one layer's part of the cache starts.
#[derive(Debug, Clone, Copy)]
struct LayerPart {
    shape: KvShape,
    /// Offset of its first element, and index of its first row (one head at one position).
    element: usize,
    row: usize,
}

impl LayerPart {
    /// Row index and element offset of KV head `head` at slot `pos`.
    fn place(&self, capacity: usize, head: usize, pos: usize) -> (usize, usize) {
        let row = head * capacity + pos;
        (self.row + row, self.element + row * self.shape.head_dim)
    }
}

pub struct KvCache {
    precision: KvPrecision,
    k16: Vec<f16>,
    v16: Vec<f16>,
    k8: Vec<i8>,
    k_scale: Vec<f32>,
    v8: Vec<u8>,
    v_scale: Vec<f32>,
    capacity: usize,
    /// Per layer (`None`: a layer that keeps nothing here).
    layers: Vec<Option<LayerPart>>,
    /// Positions holding valid entries.
    len: usize,
    /// Per layer, the index of its state in `states` (`None`: keys and values, or nothing).
    state_of: Vec<Option<usize>>,
    states: Vec<ConvState>,
    /// The states at chosen lengths (only when there are states).
    checkpoints: Checkpoints,
    /// The last pass's token tree (slot `tree_base + i` is node i), until a path is kept.
    tree: Option<Tree>,
}

/// A token tree in the cache: where it starts and each node's parent.
struct Tree {
    base: usize,
    parents: Vec<Option<usize>>,
}

impl KvCache {
    /// A cache of `capacity` positions for layers of the given shapes (`None`: the layer keeps
    /// nothing). Zeroed memory is mapped lazily by the OS: only the positions used become
    /// resident. For int8 keys every head size must be a multiple of `quant::KEY_GROUP`, which
    /// the model checks.
    pub fn new(layers: &[Option<KvShape>], capacity: usize, precision: KvPrecision) -> Self {
        let layers: Vec<LayerCache> = layers.iter().map(|s| s.map_or(LayerCache::None, LayerCache::Kv)).collect();
        Self::with_layers(&layers, capacity, precision)
    }

    /// A cache of `capacity` positions for layers of any kind of state.
    pub(crate) fn with_layers(kinds: &[LayerCache], capacity: usize, precision: KvPrecision) -> Self {
        let (mut elements, mut rows) = (0, 0);
        let mut states = Vec::new();
        let state_of = kinds
            .iter()
            .map(|kind| match kind {
                LayerCache::Conv(shape) => {
                    states.push(ConvState::new(*shape));
                    Some(states.len() - 1)
                }
                _ => None,
            })
            .collect();
        let layers = kinds
            .iter()
            .map(|kind| {
                let LayerCache::Kv(shape) = kind else { return None };
                let shape = Some(*shape).filter(|s| s.n_head > 0 && s.head_dim > 0)?;
                let part = LayerPart { shape, element: elements, row: rows };
                rows += shape.n_head * capacity;
                elements += shape.n_head * capacity * shape.head_dim;
                Some(part)
            })
            .collect();
        let mut kv = KvCache {
            precision,
            k16: Vec::new(),
            v16: Vec::new(),
            k8: Vec::new(),
            k_scale: Vec::new(),
            v8: Vec::new(),
            v_scale: Vec::new(),
            capacity,
            layers,
            len: 0,
            state_of,
            states,
            checkpoints: Checkpoints::default(),
            tree: None,
        };
        match precision {
            KvPrecision::F16 => {
                kv.k16 = zeroed_f16(elements);
                kv.v16 = zeroed_f16(elements);
            }
            KvPrecision::Int8Fp8 => {
                kv.k8 = vec![0; elements];
                kv.k_scale = vec![0.0; elements / KEY_GROUP];
                kv.v8 = vec![0; elements];
                kv.v_scale = vec![0.0; rows];
            }
        }
        kv
    }

    pub fn precision(&self) -> KvPrecision {
        self.precision
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops every position from `len` on (rollback to a shared prefix). Layers with a state
    /// over the sequence (a convolution window) can only go back to a length where the state
    /// was saved (`KvCache::checkpoint`; 0 always), or to the start of a pending token
    /// tree: the cache then goes back to the longest such length at most `len`, and
    /// [`KvCache::len`] says where it is.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        if let Some(tree) = self.tree.take() {
            self.states.iter_mut().for_each(ConvState::drop_tree);
            if len >= tree.base || self.states.is_empty() {
                self.len = if self.states.is_empty() { len } else { tree.base };
                return;
            }
            self.len = tree.base;
        }
        self.len = if self.states.is_empty() { len } else { self.checkpoints.restore(len, &mut self.states) };
    }

    /// The length [`KvCache::truncate`]`(len)` would leave, without changing anything.
    pub(crate) fn rollback_len(&self, len: usize) -> usize {
        if len >= self.len || self.states.is_empty() {
            return len.min(self.len);
        }
        match &self.tree {
            Some(tree) if len >= tree.base => tree.base,
            _ => self.checkpoints.longest_at_most(len),
        }
    }

    /// Saves the state layers' state at the current length, so that [`KvCache::truncate`]
    /// can come back to it (a turn boundary: the next turn starts from here). Costs a copy of
    /// the states (none without state layers); the newest few are kept.
    pub(crate) fn checkpoint(&mut self) {
        if !self.states.is_empty() && self.tree.is_none() {
            self.checkpoints.save(self.len, &self.states);
        }
    }

    /// Whether some layer keeps a state over the sequence (not truncatable to any length).
    pub fn has_states(&self) -> bool {
        !self.states.is_empty()
    }

    /// Forgets everything: the empty sequence.
    pub fn clear(&mut self) {
        self.len = 0;
        self.tree = None;
        self.checkpoints.clear();
        self.states.iter_mut().for_each(ConvState::reset);
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity);
    }

    /// Records that the pass just run at `base` was a token tree with these parents (its
    /// nodes fill slots `base..`), until [`KvCache::keep_slots`] keeps a path.
    pub(crate) fn begin_tree(&mut self, base: usize, parents: &[Option<usize>]) {
        let mut tree = self.tree.take().unwrap_or(Tree { base, parents: Vec::new() });
        tree.base = base;
        tree.parents.clear();
        tree.parents.extend_from_slice(parents);
        self.tree = Some(tree);
    }

    /// A pass is about to start: a token tree whose path was not kept is dropped first.
    pub(crate) fn begin_pass(&mut self) {
        if let Some(base) = self.tree.as_ref().map(|t| t.base) {
            self.truncate(base);
        }
    }

    /// A pass that started at `pos0` stopped part way (cancelled): keys and values past `pos0`
    /// are simply not counted, but state layers may have advanced, so they go back to the
    /// longest checkpoint at most `pos0`, and [`KvCache::len`] says where that is.
    pub(crate) fn abandon_pass(&mut self, pos0: usize) {
        if self.states.is_empty() {
            return;
        }
        self.tree = None;
        self.states.iter_mut().for_each(ConvState::drop_tree);
        self.len = self.checkpoints.restore(pos0.min(self.len), &mut self.states);
    }

    /// The state of layer `layer`, if it keeps one besides keys and values.
    pub(super) fn conv_state(&mut self, layer: usize) -> Option<&mut ConvState> {
        let i = self.state_of.get(layer).copied().flatten()?;
        self.states.get_mut(i)
    }

    /// Keeps, of the entries from `base` on, only those at `slots` (ascending, each below
    /// `len()`), moved down to `base`, `base + 1`, ...: the accepted path of a token tree.
    /// Returns false, changing nothing, when `slots` does not fit that description (with
    /// state layers, also when they are not a path from a root of the last tree pass at
    /// `base`).
    pub fn keep_slots(&mut self, base: usize, slots: &[usize]) -> bool {
        let ascending = slots.windows(2).all(|w| w[0] < w[1]);
        let in_range = slots.first().is_none_or(|&s| s >= base) && slots.last().is_none_or(|&s| s < self.len);
        if !ascending || !in_range {
            return false;
        }
        let mut path = Vec::new();
        if !self.states.is_empty() {
            match &self.tree {
                // A path: the first node a root, each next one a child of the one before.
                Some(tree) if tree.base == base => {
                    path.extend(slots.iter().map(|&s| s - base));
                    let chain = path.iter().enumerate().all(|(i, &node)| {
                        node < tree.parents.len() && tree.parents[node] == i.checked_sub(1).map(|p| path[p])
                    });
                    if !chain {
                        return false;
                    }
                }
                // The cached sequence itself: nothing moves.
                None if slots.iter().enumerate().all(|(i, &s)| s == base + i) && base + slots.len() == self.len => {}
                _ => return false,
            }
        }
        for part in self.layers.iter().flatten() {
            let d = part.shape.head_dim;
            for head in 0..part.shape.n_head {
                for (i, &slot) in slots.iter().enumerate() {
                    let ((rf, from), (rt, to)) =
                        (part.place(self.capacity, head, slot), part.place(self.capacity, head, base + i));
                    if from == to {
                        continue;
                    }
                    match self.precision {
                        KvPrecision::F16 => {
                            self.k16.copy_within(from..from + d, to);
                            self.v16.copy_within(from..from + d, to);
                        }
                        KvPrecision::Int8Fp8 => {
                            self.k8.copy_within(from..from + d, to);
                            self.v8.copy_within(from..from + d, to);
                            let (kf, kt, kn) = (from / KEY_GROUP, to / KEY_GROUP, d / KEY_GROUP);
                            self.k_scale.copy_within(kf..kf + kn, kt);
                            self.v_scale[rt] = self.v_scale[rf];
                        }
                    }
                }
            }
        }
        if self.tree.take().is_some() {
            self.states.iter_mut().for_each(|s| s.keep_path(&path));
        }
        self.len = base + slots.len();
        true
    }

    /// Heap bytes of the cache at full capacity.
    pub fn bytes(&self) -> usize {
        (self.k16.len() + self.v16.len()) * 2
            + self.k8.len()
            + self.v8.len()
            + (self.k_scale.len() + self.v_scale.len()) * 4
            + self.states.iter().map(ConvState::bytes).sum::<usize>()
            + self.checkpoints.bytes()
    }

    fn part(&self, layer: usize) -> Option<LayerPart> {
        self.layers.get(layer).copied().flatten()
    }

    /// Stores rows of keys and values (one row of the layer's KV width per position) in slots
    /// `pos..`. A layer that keeps nothing stores nothing.
    pub fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let Some(part) = self.part(layer) else { return };
        let hd = part.shape.head_dim;
        let width = part.shape.n_head * hd;
        let rows = k.chunks_exact(width).zip(v.chunks_exact(width));
        for (i, (k, v)) in rows.enumerate() {
            for (head, (k, v)) in k.chunks_exact(hd).zip(v.chunks_exact(hd)).enumerate() {
                let (r, o) = part.place(self.capacity, head, pos + i);
                match self.precision {
                    KvPrecision::F16 => {
                        self.k16[o..o + hd].convert_from_f32_slice(k);
                        self.v16[o..o + hd].convert_from_f32_slice(v);
                    }
                    KvPrecision::Int8Fp8 => {
                        let groups = k.chunks_exact(KEY_GROUP).zip(self.k8[o..o + hd].chunks_exact_mut(KEY_GROUP));
                        for (g, (kg, qg)) in groups.enumerate() {
                            self.k_scale[o / KEY_GROUP + g] = quantize_i8(kg, qg);
                        }
                        self.v_scale[r] = quantize_row_e4m3(v, &mut self.v8[o..o + hd]);
                    }
                }
            }
        }
    }

    /// KV head `head`'s rows of `layer` up to `positions`, as the attention kernels read them
    /// (none for a layer that keeps nothing).
    pub(crate) fn head_rows(&self, layer: usize, head: usize, positions: usize) -> KvHeadRows<'_> {
        let Some(part) = self.part(layer) else {
            return KvHeadRows::F16 { keys: &[], values: &[], stride: 1 };
        };
        let hd = part.shape.head_dim;
        let ((r, o), n) = (part.place(self.capacity, head, 0), positions * hd);
        match self.precision {
            KvPrecision::F16 => KvHeadRows::F16 { keys: &self.k16[o..o + n], values: &self.v16[o..o + n], stride: hd },
            KvPrecision::Int8Fp8 => KvHeadRows::Int8Fp8 {
                keys: &self.k8[o..o + n],
                key_scales: &self.k_scale[o / KEY_GROUP..(o + n) / KEY_GROUP],
                values: &self.v8[o..o + n],
                value_scales: &self.v_scale[r..r + positions],
                stride: hd,
                key_scale_stride: hd / KEY_GROUP,
                value_scale_stride: 1,
            },
        }
    }
}

/// `q = round(x / d)` with `d = max |x| / 127`; returns `d`.
fn quantize_i8(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * inv).round_ties_even().clamp(-127.0, 127.0) as i8;
    }
    d
}

/// `n` zero f16 values in memory that stays untouched until written: zero bits allocated as
/// zeroed (the OS maps such pages lazily), then viewed as f16. `vec![f16::ZERO; n]` would write
/// every element and make the whole capacity resident at once.
fn zeroed_f16(n: usize) -> Vec<f16> {
    use half::vec::HalfBitsVecExt;
    vec![0u16; n].reinterpret_into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_keys_keep_rows_within_half_a_step() {
        let x: Vec<f32> = (0..64).map(|i| ((i * 37 % 23) as f32 - 11.0) / 3.0).collect();
        let mut q = vec![0i8; 64];
        let d = quantize_i8(&x, &mut q);
        for (&v, &q) in x.iter().zip(&q) {
            assert!((v - q as f32 * d).abs() <= d / 2.0 + 1e-6);
        }
        assert_eq!(quantize_i8(&[0.0; 8], &mut q[..8]), 0.0);
    }

    #[test]
    fn keep_slots_moves_every_precision() {
        for p in [KvPrecision::F16, KvPrecision::Int8Fp8] {
            let shape = Some(KvShape { n_head: 2, head_dim: 64 });
            let mut kv = KvCache::new(&[shape, shape], 6, p);
            for pos in 0..5 {
                let row: Vec<f32> = (0..128).map(|i| (pos * 10 + i % 8) as f32).collect();
                for layer in 0..2 {
                    kv.store(layer, pos, &row, &row);
                }
            }
            kv.set_len(5);
            // Element 67 (head 1) of a position.
            let before = |kv: &KvCache, pos: usize| match kv.head_rows(1, 1, 6) {
                KvHeadRows::F16 { keys, values, stride } => {
                    (keys[pos * stride + 3].to_f32(), values[pos * stride + 3].to_f32())
                }
                KvHeadRows::Int8Fp8 { keys, key_scales, values, value_scales, stride, key_scale_stride, .. } => {
                    let v = half::f16::from_bits(crate::quant::reference::e4m3_f16_bits(values[pos * stride + 3]));
                    (keys[pos * stride + 3] as f32 * key_scales[pos * key_scale_stride], v.to_f32() * value_scales[pos])
                }
            };
            let want = before(&kv, 4);
            assert!(kv.keep_slots(2, &[2, 4]));
            assert_eq!(kv.len(), 4);
            assert_eq!(before(&kv, 3), want, "{p:?}");
        }
    }
}
