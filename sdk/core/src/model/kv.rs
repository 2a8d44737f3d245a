//! The key/value cache of one session, preallocated for the session's context length.
//! Layout per layer: `[kv_head][position][head_dim]`, independent of the thread count, so the
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

/// How the cache stores keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvPrecision {
    /// f16 keys and values.
    #[default]
    F16,
    /// int8 keys and fp8 e4m3 values, a scale per position and KV head for each.
    Int8Fp8,
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
    kv_dim: usize,
    head_dim: usize,
    n_layer: usize,
    /// Positions holding valid entries.
    len: usize,
}

impl KvCache {
    /// An f16 cache. Zeroed memory is mapped lazily by the OS: only the positions used become
    /// resident.
    pub fn new(n_layer: usize, kv_dim: usize, capacity: usize) -> Self {
        Self::with_precision(n_layer, kv_dim, kv_dim, capacity, KvPrecision::F16)
    }

    /// A cache of the given precision for heads of `head_dim` (dividing `kv_dim`; for int8 keys a
    /// multiple of `quant::KEY_GROUP`, which the model checks).
    pub fn with_precision(
        n_layer: usize,
        kv_dim: usize,
        head_dim: usize,
        capacity: usize,
        precision: KvPrecision,
    ) -> Self {
        let n = n_layer * capacity * kv_dim;
        let head_dim = head_dim.clamp(1, kv_dim.max(1));
        let mut kv = KvCache {
            precision,
            k16: Vec::new(),
            v16: Vec::new(),
            k8: Vec::new(),
            k_scale: Vec::new(),
            v8: Vec::new(),
            v_scale: Vec::new(),
            capacity,
            kv_dim,
            head_dim,
            n_layer,
            len: 0,
        };
        match precision {
            KvPrecision::F16 => {
                kv.k16 = zeroed_f16(n);
                kv.v16 = zeroed_f16(n);
            }
            KvPrecision::Int8Fp8 => {
                kv.k8 = vec![0; n];
                kv.k_scale = vec![0.0; n / KEY_GROUP];
                kv.v8 = vec![0; n];
                kv.v_scale = vec![0.0; n / head_dim];
            }
        }
        kv
    }

    pub fn precision(&self) -> KvPrecision {
        self.precision
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
        let (d, n_head) = (self.head_dim, self.n_head());
        for (layer, head) in (0..self.n_layer).flat_map(|l| (0..n_head).map(move |h| (l, h))) {
            for (i, &slot) in slots.iter().enumerate() {
                let (from, to) = (self.offset(layer, head, slot), self.offset(layer, head, base + i));
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
                        self.v_scale[to / d] = self.v_scale[from / d];
                    }
                }
            }
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
    }

    fn n_head(&self) -> usize {
        self.kv_dim / self.head_dim
    }

    /// Element offset of KV head `head`'s row at `pos` in `layer`.
    fn offset(&self, layer: usize, head: usize, pos: usize) -> usize {
        ((layer * self.n_head() + head) * self.capacity + pos) * self.head_dim
    }

    /// Stores rows of keys and values (rows of kv_dim, one per position) in slots `pos..`.
    pub fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        debug_assert!(layer < self.n_layer);
        let hd = self.head_dim;
        let rows = k.chunks_exact(self.kv_dim).zip(v.chunks_exact(self.kv_dim));
        for (i, (k, v)) in rows.enumerate() {
            for (head, (k, v)) in k.chunks_exact(hd).zip(v.chunks_exact(hd)).enumerate() {
                let o = self.offset(layer, head, pos + i);
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
                        self.v_scale[o / hd] = quantize_row_e4m3(v, &mut self.v8[o..o + hd]);
                    }
                }
            }
        }
    }

    /// KV head `head`'s rows of `layer` up to `positions`, as the attention kernels read them.
    pub fn head_rows(&self, layer: usize, head: usize, positions: usize) -> KvHeadRows<'_> {
        let hd = self.head_dim;
        let (o, n) = (self.offset(layer, head, 0), positions * hd);
        match self.precision {
            KvPrecision::F16 => KvHeadRows::F16 { keys: &self.k16[o..o + n], values: &self.v16[o..o + n], stride: hd },
            KvPrecision::Int8Fp8 => KvHeadRows::Int8Fp8 {
                keys: &self.k8[o..o + n],
                key_scales: &self.k_scale[o / KEY_GROUP..(o + n) / KEY_GROUP],
                values: &self.v8[o..o + n],
                value_scales: &self.v_scale[o / hd..(o + n) / hd],
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
            let mut kv = KvCache::with_precision(2, 128, 64, 6, p);
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
