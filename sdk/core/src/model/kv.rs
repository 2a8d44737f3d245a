//! The key/value cache of one session: f16, preallocated for the session's context length.
//! Layout per layer: `[position][kv_head][head_dim]`, independent of the thread count, so the
//! threads working on it can change between calls.

use half::f16;
use half::slice::HalfFloatSliceExt;

pub struct KvCache {
    k: Vec<f16>,
    v: Vec<f16>,
    capacity: usize,
    kv_dim: usize,
    n_layer: usize,
    /// Positions holding valid entries.
    len: usize,
}

impl KvCache {
    /// Zeroed memory is mapped lazily by the OS: only the positions used become resident.
    pub fn new(n_layer: usize, kv_dim: usize, capacity: usize) -> Self {
        let n = n_layer * capacity * kv_dim;
        KvCache { k: vec![f16::ZERO; n], v: vec![f16::ZERO; n], capacity, kv_dim, n_layer, len: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops every position from `len` on (rollback to a shared prefix).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity);
    }

    /// Keeps, of the entries from `base` on, only those at `slots` (ascending, each below
    /// `len()`), moved down to `base`, `base + 1`, ...: the accepted path of a token tree.
    /// Returns false, changing nothing, when `slots` does not fit that description.
    pub fn keep_slots(&mut self, base: usize, slots: &[usize]) -> bool {
        let ascending = slots.windows(2).all(|w| w[0] < w[1]);
        let in_range = slots.first().is_none_or(|&s| s >= base) && slots.last().is_none_or(|&s| s < self.len);
        if !ascending || !in_range {
            return false;
        }
        let d = self.kv_dim;
        for layer in 0..self.n_layer {
            for (i, &slot) in slots.iter().enumerate() {
                let (from, to) = (self.offset(layer, slot), self.offset(layer, base + i));
                if from != to {
                    self.k.copy_within(from..from + d, to);
                    self.v.copy_within(from..from + d, to);
                }
            }
        }
        self.len = base + slots.len();
        true
    }

    pub fn bytes(&self) -> usize {
        (self.k.len() + self.v.len()) * 2
    }

    fn offset(&self, layer: usize, pos: usize) -> usize {
        (layer * self.capacity + pos) * self.kv_dim
    }

    /// Stores rows of keys and values (`n` rows of kv_dim) in slots `pos..pos + n`.
    pub fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        debug_assert!(layer < self.n_layer);
        let o = self.offset(layer, pos);
        let n = k.len();
        self.k[o..o + n].convert_from_f32_slice(k);
        self.v[o..o + n].convert_from_f32_slice(v);
    }

    /// All keys of a layer up to `positions` (rows of kv_dim).
    pub fn keys(&self, layer: usize, positions: usize) -> &[f16] {
        let o = self.offset(layer, 0);
        &self.k[o..o + positions * self.kv_dim]
    }

    pub fn values(&self, layer: usize, positions: usize) -> &[f16] {
        let o = self.offset(layer, 0);
        &self.v[o..o + positions * self.kv_dim]
    }
}
