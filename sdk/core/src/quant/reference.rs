//! Scalar kernels, written to follow ggml's reference C (`ggml-quants.c`, the generic
//! `ggml_vec_dot_*`) operation for operation. They are the truth every SIMD kernel is tested
//! against and the fallback on CPUs without one.
//!
//! All functions take typed block slices and process the blocks both sides have (extra input is
//! ignored): length checks live in the byte-level wrappers of `dispatch`.

use half::{bf16, f16};

use super::blocks::*;
use super::{KvHeadRows, KEY_GROUP};

// ---------------------------------------------------------------------------------------------
// Dequantization (weights and activation formats) -> f32

pub(crate) fn dequantize_row_f32(w: &[f32], out: &mut [f32]) {
    let n = w.len().min(out.len());
    out[..n].copy_from_slice(&w[..n]);
}

pub(crate) fn dequantize_row_f16(w: &[f16], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(w) {
        *o = v.to_f32();
    }
}

pub(crate) fn dequantize_row_bf16(w: &[bf16], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(w) {
        *o = v.to_f32();
    }
}

pub(crate) fn dequantize_row_q4_0(w: &[BlockQ4_0], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for j in 0..QK / 2 {
            y[j] = ((b.qs[j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + QK / 2] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

pub(crate) fn dequantize_row_q4_1(w: &[BlockQ4_1], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        let m = b.m.to_f32();
        for j in 0..QK / 2 {
            y[j] = (b.qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}

pub(crate) fn dequantize_row_q5_0(w: &[BlockQ5_0], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        let qh = u32::from_le_bytes(b.qh);
        for j in 0..QK / 2 {
            let xh0 = (((qh >> j) << 4) & 0x10) as u8;
            let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
            y[j] = (((b.qs[j] & 0x0F) | xh0) as i32 - 16) as f32 * d;
            y[j + QK / 2] = (((b.qs[j] >> 4) | xh1) as i32 - 16) as f32 * d;
        }
    }
}

pub(crate) fn dequantize_row_q8_0(w: &[BlockQ8_0], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}

pub(crate) fn dequantize_row_q8_1(w: &[BlockQ8_1], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}

pub(crate) fn dequantize_row_q4_k(w: &[BlockQ4K], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let min = b.dmin.to_f32();
        for g in 0..QK_K / 64 {
            let (sc0, m0) = q4k_scale_min(2 * g, &b.scales);
            let (sc1, m1) = q4k_scale_min(2 * g + 1, &b.scales);
            let (d1, m1f) = (d * sc0 as f32, min * m0 as f32);
            let (d2, m2f) = (d * sc1 as f32, min * m1 as f32);
            let q = &b.qs[32 * g..32 * g + 32];
            let y = &mut y[64 * g..64 * g + 64];
            for l in 0..32 {
                y[l] = d1 * (q[l] & 0x0F) as f32 - m1f;
                y[l + 32] = d2 * (q[l] >> 4) as f32 - m2f;
            }
        }
    }
}

/// Element `128h + 32k + l` (h: half, k: 0..4, l: 0..32) takes its low 4 bits from
/// `ql[64h + l + 32(k&1)]` (low nibble for k<2, high for k>=2) and its top 2 bits from
/// `qh[32h + l] >> 2k`.
pub(crate) fn dequantize_row_q6_k(w: &[BlockQ6K], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for h in 0..QK_K / 128 {
            let ql = &b.ql[64 * h..64 * h + 64];
            let qh = &b.qh[32 * h..32 * h + 32];
            let sc = &b.scales[8 * h..8 * h + 8];
            let y = &mut y[128 * h..128 * h + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                y[l] = d * sc[is] as f32 * q1 as f32;
                y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

pub(crate) fn dequantize_row_q5_1(w: &[BlockQ5_1], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        let qh = u32::from_le_bytes(b.qh);
        for j in 0..QK / 2 {
            let xh0 = (((qh >> j) << 4) & 0x10) as u8;
            let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
            y[j] = ((b.qs[j] & 0x0F) | xh0) as f32 * d + m;
            y[j + QK / 2] = ((b.qs[j] >> 4) | xh1) as f32 * d + m;
        }
    }
}

pub(crate) fn dequantize_row_iq4_nl(w: &[BlockIq4Nl], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for j in 0..QK / 2 {
            y[j] = d * KVALUES_IQ4NL[(b.qs[j] & 0x0F) as usize] as f32;
            y[j + QK / 2] = d * KVALUES_IQ4NL[(b.qs[j] >> 4) as usize] as f32;
        }
    }
}

pub(crate) fn dequantize_row_iq4_xs(w: &[BlockIq4Xs], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for (j, (y, qs)) in y.chunks_exact_mut(32).zip(b.qs.chunks_exact(16)).enumerate() {
            let dl = d * (iq4xs_scale(b, j) as i32 - 32) as f32;
            for l in 0..16 {
                y[l] = dl * KVALUES_IQ4NL[(qs[l] & 0x0F) as usize] as f32;
                y[l + 16] = dl * KVALUES_IQ4NL[(qs[l] >> 4) as usize] as f32;
            }
        }
    }
}

/// Element `128h + 32k + l`: bits `2k..2k+2` of `qs[32h + l]`, sub-block `8h + 2k + l / 16`.
pub(crate) fn dequantize_row_q2_k(w: &[BlockQ2K], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        let (d, min) = (b.d.to_f32(), b.dmin.to_f32());
        for (i, v) in y.iter_mut().enumerate() {
            let (h, k, l) = (i / 128, (i / 32) % 4, i % 32);
            let sc = b.scales[i / 16];
            let q = (b.qs[32 * h + l] >> (2 * k)) & 3;
            *v = d * (sc & 0x0F) as f32 * q as f32 - min * (sc >> 4) as f32;
        }
    }
}

/// As Q2_K, less 4 where bit `4h + k` of `hmask[l]` is clear.
pub(crate) fn dequantize_row_q3_k(w: &[BlockQ3K], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let sc = q3k_scales(&b.scales);
        for (i, v) in y.iter_mut().enumerate() {
            let (h, k, l) = (i / 128, (i / 32) % 4, i % 32);
            *v = d * sc[i / 16] as f32 * q3k_quant(b, h, k, l) as f32;
        }
    }
}

/// Element `128h + 32k + l` of a Q3_K block, -4..=3.
#[inline]
fn q3k_quant(b: &BlockQ3K, h: usize, k: usize, l: usize) -> i32 {
    let low = ((b.qs[32 * h + l] >> (2 * k)) & 3) as i32;
    let high = (b.hmask[l] >> (4 * h + k)) & 1;
    low - if high == 0 { 4 } else { 0 }
}

pub(crate) fn dequantize_row_q5_k(w: &[BlockQ5K], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let min = b.dmin.to_f32();
        for g in 0..QK_K / 64 {
            let (sc0, m0) = q4k_scale_min(2 * g, &b.scales);
            let (sc1, m1) = q4k_scale_min(2 * g + 1, &b.scales);
            let (d1, m1f) = (d * sc0 as f32, min * m0 as f32);
            let (d2, m2f) = (d * sc1 as f32, min * m1 as f32);
            let q = &b.qs[32 * g..32 * g + 32];
            let y = &mut y[64 * g..64 * g + 64];
            for l in 0..32 {
                let h0 = ((b.qh[l] >> (2 * g)) & 1) << 4;
                let h1 = ((b.qh[l] >> (2 * g + 1)) & 1) << 4;
                y[l] = d1 * ((q[l] & 0x0F) | h0) as f32 - m1f;
                y[l + 32] = d2 * ((q[l] >> 4) | h1) as f32 - m2f;
            }
        }
    }
}

pub(crate) fn dequantize_row_q8_k(w: &[BlockQ8K], out: &mut [f32]) {
    for (b, y) in w.iter().zip(out.chunks_exact_mut(QK_K)) {
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * b.d;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Activation quantization

/// f32 activations are consumed as they are.
pub(crate) fn quantize_row_f32(x: &[f32], out: &mut [f32]) {
    dequantize_row_f32(x, out);
}

/// Largest |x| of a block, NaNs ignored.
#[inline]
fn abs_max(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

/// ggml `quantize_row_q8_0_ref`: `d = amax / 127`, `q = round(x / d)` (half away from zero).
pub(crate) fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let d = abs_max(xb) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f16::from_f32(d);
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = (v * id).round() as i8;
        }
    }
}

/// ggml `quantize_row_q8_1_ref`: Q8_0 plus `s = f16(sum(q) * d)` with the unrounded `d`.
pub(crate) fn quantize_row_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let d = abs_max(xb) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f16::from_f32(d);
        let mut sum = 0i32;
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = (v * id).round() as i8;
            sum += *q as i32;
        }
        y.s = f16::from_f32(sum as f32 * d);
    }
}

/// ggml `nearest_int`: round half to even through the float adder (valid for |x| < 2^22).
#[inline]
fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// ggml `quantize_row_q8_K_ref`: the signed element of largest magnitude maps to -127,
/// `d = 1 / iscale` kept in f32, plus the 16-element sums.
pub(crate) fn quantize_row_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *y = BlockQ8K::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).clamp(-128, 127) as i8;
        }
        for (s, q) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = q.iter().map(|&v| v as i16).sum();
        }
        y.d = 1.0 / iscale;
    }
}

// ---------------------------------------------------------------------------------------------
// Dot products: weight row · quantized activation row

pub(crate) fn vec_dot_f32_f32(w: &[f32], a: &[f32]) -> f32 {
    w.iter().zip(a).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>() as f32
}

pub(crate) fn vec_dot_f16_f32(w: &[f16], a: &[f32]) -> f32 {
    w.iter().zip(a).map(|(x, &y)| x.to_f32() as f64 * y as f64).sum::<f64>() as f32
}

/// SwiGLU's product: `gate[i] = silu(gate[i]) * up[i]`, `silu(x) = x / (1 + e^-x)`; the shorter
/// length. The SIMD sets compute `e^-x` with their vector `exp` (within 2 ulp; saturating
/// below x = -87.3, where |silu(x)| < 1e-35).
pub(crate) fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// GeGLU's product: `gate[i] = gelu(gate[i]) * up[i]` with GELU's tanh form through a table over
/// every f16 input, as ggml computes it (the reference outputs were produced so, and a lookup is
/// cheaper than tanh): 0 at or below -10, the input at or above 10. The shorter length.
pub(crate) fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    let table = gelu_table();
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        let y = if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x
        } else {
            table[f16::from_f32(x).to_bits() as usize].to_f32()
        };
        *g = y * u;
    }
}

/// GELU's tanh form at every f16 value, rounded to f16, indexed by the input's bits; one entry
/// more (0), so that a vector gather of 32-bit words at 2-byte steps stays inside.
pub(crate) fn gelu_table() -> &'static [f16; 65537] {
    static TABLE: std::sync::OnceLock<Box<[f16; 65537]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        let gelu = |x: f32| 0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh());
        let mut t = Box::new([f16::ZERO; 65537]);
        for (bits, v) in t.iter_mut().take(65536).enumerate() {
            *v = f16::from_f32(gelu(f16::from_bits(bits as u16).to_f32()));
        }
        t
    })
}

/// `y += a * x` over an f16 row (attention's weighted sum of value rows).
pub(crate) fn axpy_f16_f32(a: f32, x: &[f16], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x.to_f32();
    }
}

pub(crate) fn vec_dot_bf16_f32(w: &[bf16], a: &[f32]) -> f32 {
    w.iter().zip(a).map(|(x, &y)| x.to_f32() as f64 * y as f64).sum::<f64>() as f32
}

pub(crate) fn vec_dot_q4_0_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32 - 8;
            let v1 = (x.qs[j] >> 4) as i32 - 8;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sumf
}

pub(crate) fn vec_dot_q4_1_q8_1(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32;
            let v1 = (x.qs[j] >> 4) as i32;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sumf
}

pub(crate) fn vec_dot_q5_0_q8_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let qh = u32::from_le_bytes(x.qh);
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let xh0 = (((qh >> j) << 4) & 0x10) as u8;
            let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
            let v0 = ((x.qs[j] & 0x0F) | xh0) as i32 - 16;
            let v1 = ((x.qs[j] >> 4) | xh1) as i32 - 16;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sumf
}

pub(crate) fn vec_dot_q8_0_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sumi: i32 = x.qs.iter().zip(&y.qs).map(|(&p, &q)| p as i32 * q as i32).sum();
        sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sumf
}

/// The mins term goes through the activation's `bsums`, as in ggml.
pub(crate) fn vec_dot_q4_k_q8_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sm = q4k_scales_mins(&x.scales);
        let mut sumi = 0i32;
        for g in 0..QK_K / 64 {
            let q4 = &x.qs[32 * g..32 * g + 32];
            let q8 = &y.qs[64 * g..64 * g + 64];
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                lo += (q4[l] & 0x0F) as i32 * q8[l] as i32;
                hi += (q4[l] >> 4) as i32 * q8[l + 32] as i32;
            }
            sumi += sm[2 * g] as i32 * lo + sm[2 * g + 1] as i32 * hi;
        }
        let mut summ = 0i32;
        for j in 0..QK_K / 32 {
            summ += sm[8 + j] as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
        }
        let d = x.d.to_f32() * y.d;
        let dmin = x.dmin.to_f32() * y.d;
        sumf += d * sumi as f32 - dmin * summ as f32;
    }
    sumf
}

/// ggml's generic form: unpack the 6-bit quants to signed bytes first, then 16-element groups.
pub(crate) fn vec_dot_q6_k_q8_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    let mut q6 = [0i8; QK_K];
    for (x, y) in w.iter().zip(a) {
        for h in 0..QK_K / 128 {
            let ql = &x.ql[64 * h..64 * h + 64];
            let qh = &x.qh[32 * h..32 * h + 32];
            let out = &mut q6[128 * h..128 * h + 128];
            for l in 0..32 {
                out[l] = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i8 - 32;
                out[l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                out[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                out[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let mut sumi = 0i32;
        for (g, &sc) in x.scales.iter().enumerate() {
            let s: i32 = q6[16 * g..16 * g + 16]
                .iter()
                .zip(&y.qs[16 * g..16 * g + 16])
                .map(|(&p, &q)| p as i32 * q as i32)
                .sum();
            sumi += sc as i32 * s;
        }
        sumf += x.d.to_f32() * y.d * sumi as f32;
    }
    sumf
}

pub(crate) fn vec_dot_q5_1_q8_1(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let qh = u32::from_le_bytes(x.qh);
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let xh0 = (((qh >> j) << 4) & 0x10) as u8;
            let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
            let v0 = ((x.qs[j] & 0x0F) | xh0) as i32;
            let v1 = ((x.qs[j] >> 4) | xh1) as i32;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sumf
}

pub(crate) fn vec_dot_iq4_nl_q8_0(w: &[BlockIq4Nl], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            sumi += KVALUES_IQ4NL[(x.qs[j] & 0x0F) as usize] as i32 * y.qs[j] as i32;
            sumi += KVALUES_IQ4NL[(x.qs[j] >> 4) as usize] as i32 * y.qs[j + QK / 2] as i32;
        }
        sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sumf
}

/// Exact integer sum per super-block (scales included), one f32 multiply per super-block.
pub(crate) fn vec_dot_iq4_xs_q8_k(w: &[BlockIq4Xs], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..QK_K / 32 {
            let (qs, q8) = (&x.qs[16 * j..16 * j + 16], &y.qs[32 * j..32 * j + 32]);
            let mut s = 0i32;
            for l in 0..16 {
                s += KVALUES_IQ4NL[(qs[l] & 0x0F) as usize] as i32 * q8[l] as i32;
                s += KVALUES_IQ4NL[(qs[l] >> 4) as usize] as i32 * q8[l + 16] as i32;
            }
            sumi += (iq4xs_scale(x, j) as i32 - 32) * s;
        }
        sumf += x.d.to_f32() * y.d * sumi as f32;
    }
    sumf
}

/// The mins term goes through the activation's `bsums`, as in ggml.
pub(crate) fn vec_dot_q2_k_q8_k(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for j in 0..QK_K / 16 {
            let (h, k, l0) = (j / 8, (j / 2) % 4, 16 * (j % 2));
            let mut s = 0i32;
            for l in l0..l0 + 16 {
                s += ((x.qs[32 * h + l] >> (2 * k)) & 3) as i32 * y.qs[16 * j + l - l0] as i32;
            }
            sumi += (x.scales[j] & 0x0F) as i32 * s;
        }
        let summ: i32 = x.scales.iter().zip(&y.bsums).map(|(&sc, &b)| (sc >> 4) as i32 * b as i32).sum();
        let d = x.d.to_f32() * y.d;
        let dmin = x.dmin.to_f32() * y.d;
        sumf += d * sumi as f32 - dmin * summ as f32;
    }
    sumf
}

pub(crate) fn vec_dot_q3_k_q8_k(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sc = q3k_scales(&x.scales);
        let mut sumi = 0i32;
        for j in 0..QK_K / 16 {
            let (h, k, l0) = (j / 8, (j / 2) % 4, 16 * (j % 2));
            let mut s = 0i32;
            for l in l0..l0 + 16 {
                s += q3k_quant(x, h, k, l) * y.qs[16 * j + l - l0] as i32;
            }
            sumi += sc[j] as i32 * s;
        }
        sumf += x.d.to_f32() * y.d * sumi as f32;
    }
    sumf
}

/// As Q4_K, with the fifth bits from `qh`.
pub(crate) fn vec_dot_q5_k_q8_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sm = q4k_scales_mins(&x.scales);
        let mut sumi = 0i32;
        for g in 0..QK_K / 64 {
            let q4 = &x.qs[32 * g..32 * g + 32];
            let q8 = &y.qs[64 * g..64 * g + 64];
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let h0 = ((x.qh[l] >> (2 * g)) & 1) << 4;
                let h1 = ((x.qh[l] >> (2 * g + 1)) & 1) << 4;
                lo += ((q4[l] & 0x0F) | h0) as i32 * q8[l] as i32;
                hi += ((q4[l] >> 4) | h1) as i32 * q8[l + 32] as i32;
            }
            sumi += sm[2 * g] as i32 * lo + sm[2 * g + 1] as i32 * hi;
        }
        let mut summ = 0i32;
        for j in 0..QK_K / 32 {
            summ += sm[8 + j] as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
        }
        let d = x.d.to_f32() * y.d;
        let dmin = x.dmin.to_f32() * y.d;
        sumf += d * sumi as f32 - dmin * summ as f32;
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// fp8 e4m3 (the KV cache's compact value format)

/// Largest finite e4m3 value.
pub(crate) const E4M3_MAX: f32 = 448.0;

/// Quantizes a row to fp8 e4m3 (1 sign, 4 exponent bits of bias 7, 3 mantissa bits) with one
/// scale, the row's largest |x| mapping to 448, rounding to nearest. Returns the factor that
/// turns a code's `e4m3_f16_bits` reading back into the value (`scale * 256`).
pub fn quantize_row_e4m3(x: &[f32], out: &mut [u8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 || !amax.is_finite() {
        out.iter_mut().for_each(|o| *o = 0);
        return 0.0;
    }
    let inv = E4M3_MAX / amax;
    for (o, &v) in out.iter_mut().zip(x) {
        // The code's bits are an f16's bits 7..15 for the value / 256 (see `e4m3_f16_bits`):
        // round that f16 to its top 9 bits, to nearest even.
        let h = f16::from_f32((v * inv).clamp(-E4M3_MAX, E4M3_MAX) / 256.0).to_bits();
        let mag = (h & 0x7FFF) as u32;
        let rounded = ((mag + 0x3F + ((mag >> 7) & 1)) >> 7).min(0x7E);
        *o = ((h >> 8) as u8 & 0x80) | rounded as u8;
    }
    amax / E4M3_MAX * 256.0
}

/// The bits of an f16 whose value is an e4m3 code's value / 256 (exact, subnormals included):
/// the code's exponent and mantissa moved up by 7, its sign to the top.
#[inline]
pub(crate) fn e4m3_f16_bits(b: u8) -> u16 {
    ((b as u16 & 0x80) << 8) | ((b as u16 & 0x7F) << 7)
}

// ---------------------------------------------------------------------------------------------
// Attention over a chunk of cached positions

/// Attention of `heads` query heads sharing one KV head over the cached positions `slots`
/// (see [`AttnChunkFn`](super::AttnChunkFn)): `score(slot, q)` gives a key row's dot product
/// with a query row, `axpy(p, slot, acc)` adds `p` times a value row. The sizes have been
/// checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attn_chunk_with(
    score: impl Fn(usize, &[f32]) -> f32,
    axpy: impl Fn(f32, usize, &mut [f32]),
    q: &[f32],
    heads: usize,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = q.len() / heads;
    let n = slots.len();
    for h in 0..heads {
        let qh = &q[h * hd..(h + 1) * hd];
        let sc = &mut scores[h * n..(h + 1) * n];
        for (s, &slot) in sc.iter_mut().zip(slots) {
            *s = score(slot as usize, qh) * scale;
        }
        let max = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        // Numerators rounded to f16, as ggml feeds them to its f16 value product.
        for s in sc.iter_mut() {
            *s = f16::from_f32((*s - max).exp()).to_f32();
            sum += *s;
        }
        let o = &mut out[h * (hd + 2)..(h + 1) * (hd + 2)];
        o[0] = max;
        o[1] = sum;
        let acc = &mut o[2..];
        acc.fill(0.0);
        for (&p, &slot) in sc.iter().zip(slots) {
            axpy(p, slot as usize, acc);
        }
    }
}

/// [`attn_chunk_with`] with f16 rows through the given row kernels, or with int8 keys and fp8
/// values in scalar code.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attn_chunk_rows(
    dot: impl Fn(&[f16], &[f32]) -> f32,
    axpy: impl Fn(f32, &[f16], &mut [f32]),
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = q.len() / heads;
    match rows {
        KvHeadRows::F16 { keys, values, stride } => attn_chunk_with(
            |j, qh| dot(&keys[j * stride..j * stride + hd], qh),
            |p, j, acc| axpy(p, &values[j * stride..j * stride + hd], acc),
            q,
            heads,
            slots,
            scale,
            scores,
            out,
        ),
        KvHeadRows::Int8Fp8 {
            keys,
            key_scales,
            values,
            value_scales,
            stride,
            key_scale_stride,
            value_scale_stride,
        } => attn_chunk_with(
            |j, qh| {
                let k = &keys[j * stride..j * stride + hd];
                let groups = k.chunks(KEY_GROUP).zip(qh.chunks(KEY_GROUP)).enumerate();
                groups
                    .map(|(g, (k, q))| {
                        let d = key_scales[j * key_scale_stride + g];
                        k.iter().zip(q).map(|(&k, &q)| k as f32 * d * q).sum::<f32>()
                    })
                    .sum()
            },
            |p, j, acc| {
                let pv = p * value_scales[j * value_scale_stride];
                for (a, &v) in acc.iter_mut().zip(&values[j * stride..j * stride + hd]) {
                    *a += pv * f16::from_bits(e4m3_f16_bits(v)).to_f32();
                }
            },
            q,
            heads,
            slots,
            scale,
            scores,
            out,
        ),
    }
}

/// `attn_chunk_rows` on the scalar row kernels.
#[allow(clippy::too_many_arguments)]
pub fn attn_chunk(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    attn_chunk_rows(vec_dot_f16_f32, axpy_f16_f32, q, heads, rows, slots, scale, scores, out)
}
