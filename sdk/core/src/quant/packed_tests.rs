//! Repacked-weight kernels of every set this CPU runs: held to the scalar reference on ggml's
//! layout, bit-identical whatever the batch, and safe on bad sizes.

use super::blocks::*;
use super::packed::{ActOffsets, OutRows, PackedAct, PackedMatrix, Packing};
use super::tests::*;
use super::*;

fn packing_sets() -> Vec<(&'static Kernels, &'static Packing)> {
    available_kernels().into_iter().filter_map(|k| k.packing().map(|p| (k, p))).collect()
}

fn serial(n: usize, f: &(dyn Fn(usize) + Sync)) {
    (0..n).for_each(f)
}

fn pack(p: &Packing, ty: GgmlType, rows: usize, cols: usize, w: &[u8]) -> PackedMatrix {
    PackedMatrix::pack(p, ty, rows, cols, w, serial, &|_| {}).expect("packs")
}

/// `n_tok` activation rows in the packed layout of `ty`, end to end.
fn packed_acts(p: &Packing, ty: GgmlType, xs: &[Vec<f32>]) -> ActBuf {
    let cols = xs[0].len();
    let rb = p.act_row_bytes(ty, cols).unwrap();
    let mut buf = ActBuf::new();
    buf.resize(rb * xs.len());
    for (t, x) in xs.iter().enumerate() {
        (p.quantize_act)(ty, x, &mut buf.as_bytes_mut()[t * rb..(t + 1) * rb]);
    }
    buf
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

/// Which sets repack (AVX2, AVX-VNNI and AVX-512 on x86; dotprod and i8mm on aarch64), and that each
/// packs every packable type: a set dropped from the list would silently skip the tests below.
#[test]
fn packing_sets_pack_every_packable_type() {
    for k in available_kernels() {
        let repacks = matches!(k.isa, "avx2" | "avxvnni" | "avx512" | "dotprod" | "i8mm");
        assert_eq!(k.packing().is_some(), repacks, "{}", k.isa);
        if let Some(p) = k.packing() {
            for ty in WEIGHT_TYPES {
                assert_eq!(p.supports(ty, 256), PackedAct::of(ty).is_some(), "{} {}", k.isa, ty.name());
            }
        }
    }
}

#[test]
fn packed_activations_hold_ggml_quants() {
    let mut rng = Rng(21);
    let mut rows = tricky_rows();
    // 32 blocks, and 56 (the AVX-512 quantizer's groups of 16 with a tail).
    rows.push(activations(&mut rng, 1024));
    rows.push(activations(&mut rng, 1792));
    for (k, p) in packing_sets() {
        for x in &rows {
            let n = x.len();
            let q81 = quant(reference_kernels(), GgmlType::Q8_1, x);
            let q81 = as_blocks::<BlockQ8_1>(q81.as_bytes()).unwrap();
            let a = packed_acts(p, GgmlType::Q8_0, std::slice::from_ref(x));
            let o = ActOffsets::new(PackedAct::Q8x32, n);
            for (b, q) in q81.iter().enumerate() {
                let qs: Vec<u8> = q.qs.iter().map(|&v| v as u8).collect();
                assert_eq!(&a.as_bytes()[32 * b..32 * b + 32], &qs[..], "{} block {b}", k.isa);
                assert_eq!(f32_at(a.as_bytes(), o.d + 4 * b), q.d.to_f32());
                assert_eq!(i32_at(a.as_bytes(), o.sum + 4 * b), q.qs.iter().map(|&v| v as i32).sum::<i32>());
                assert_eq!(f32_at(a.as_bytes(), o.extra + 4 * b), q.s.to_f32());
            }
            let q8k = quant(reference_kernels(), GgmlType::Q8_K, x);
            let q8k = as_blocks::<BlockQ8K>(q8k.as_bytes()).unwrap();
            let a = packed_acts(p, GgmlType::Q4_K, std::slice::from_ref(x));
            let o = ActOffsets::new(PackedAct::Q8xK, n);
            for (b, q) in q8k.iter().enumerate() {
                let qs: Vec<u8> = q.qs.iter().map(|&v| v as u8).collect();
                assert_eq!(&a.as_bytes()[256 * b..256 * b + 256], &qs[..], "{} super-block {b}", k.isa);
                assert_eq!(f32_at(a.as_bytes(), o.d + 4 * b).to_bits(), q.d.to_bits());
                for j in 0..16 {
                    assert_eq!(i16_at(a.as_bytes(), o.sum + 32 * b + 2 * j), q.bsums[j]);
                }
                for j in 0..8 {
                    assert_eq!(i16_at(a.as_bytes(), o.extra + 16 * b + 2 * j), q.bsums[2 * j] + q.bsums[2 * j + 1]);
                }
            }
        }
    }
}

/// Weights, activations and the reference's dot products for a packed-kernel check.
struct Case {
    ty: GgmlType,
    cols: usize,
    w: ActBuf,
    xs: Vec<Vec<f32>>,
}

impl Case {
    fn new(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize, n_tok: usize) -> Case {
        let w = aligned(&weights(rng, ty, rows * cols));
        let xs = (0..n_tok).map(|_| activations(rng, cols)).collect();
        Case { ty, cols, w, xs }
    }

    /// Reference dot product and its rounding scale for (row, token).
    fn want(&self, r: usize, t: usize) -> (f32, f32) {
        let act = self.ty.activation_type();
        let a = quant(reference_kernels(), act, &self.xs[t]);
        let wb = self.ty.row_bytes(self.cols);
        let row = &self.w.as_bytes()[r * wb..(r + 1) * wb];
        let v = (reference_kernels().vec_dot(self.ty).unwrap())(self.cols, row, a.as_bytes());
        let tol = 2e-5 * mass(&deq(self.ty, row, self.cols), &deq(act, a.as_bytes(), self.cols)) + 1e-6;
        (v, tol)
    }
}

#[test]
fn packed_kernels_match_reference() {
    let mut rng = Rng(22);
    for (k, p) in packing_sets() {
        for ty in WEIGHT_TYPES {
            let lens = lengths(ty);
            for cols in [lens[0], lens[2], *lens.iter().find(|&&n| n >= 512).unwrap_or(&512)] {
                if !p.supports(ty, cols) {
                    continue;
                }
                for (rows, n_tok) in [(1, 1), (5, 3), (16, 9), (17, 12), (40, 2)] {
                    let c = Case::new(&mut rng, ty, rows, cols, n_tok);
                    let m = pack(p, ty, rows, cols, c.w.as_bytes());
                    let a = packed_acts(p, ty, &c.xs);
                    let stride = rows + 3;
                    let mut out = vec![f32::NAN; (n_tok - 1) * stride + rows + 2];
                    (m.kernel)(cols, m.tiles_for_rows(0, rows), rows, a.as_bytes(), n_tok, OutRows::of(&mut out), stride);
                    for (i, &o) in out.iter().enumerate() {
                        let (t, r) = (i / stride, i % stride);
                        if t >= n_tok || r >= rows {
                            assert!(o.is_nan(), "{} {} wrote outside the output at {i}", k.isa, ty.name());
                            continue;
                        }
                        let (want, tol) = c.want(r, t);
                        assert!(
                            (o - want).abs() <= tol,
                            "{} {} cols={cols} rows={rows} t={t} r={r}: {o} vs {want} (tol {tol})",
                            k.isa,
                            ty.name()
                        );
                    }
                }
            }
        }
    }
}

/// A token's results do not depend on the other tokens of the call, nor on which tiles the call
/// covers: the invariant batch-invariant decoding rests on.
#[test]
fn packed_results_do_not_depend_on_the_batch() {
    let mut rng = Rng(23);
    for (k, p) in packing_sets() {
        for ty in WEIGHT_TYPES {
            let cols = *lengths(ty).iter().find(|&&n| n >= 512).unwrap_or(&512);
            if !p.supports(ty, cols) {
                continue;
            }
            // 13..=15 tokens end in a call of every size from 1 to 7 after the groups of 4 or 8.
            for n_tok in 13..=15 {
                let rows = 3 * p.tile_rows + 5;
                let c = Case::new(&mut rng, ty, rows, cols, n_tok);
                let m = pack(p, ty, rows, cols, c.w.as_bytes());
                let a = packed_acts(p, ty, &c.xs);
                let rb = p.act_row_bytes(ty, cols).unwrap();
                let mut all = vec![0f32; n_tok * rows];
                (m.kernel)(cols, m.tiles_for_rows(0, rows), rows, a.as_bytes(), n_tok, OutRows::of(&mut all), rows);
                for t in 0..n_tok {
                    let mut one = vec![0f32; rows];
                    (m.kernel)(
                        cols,
                        m.tiles_for_rows(0, rows),
                        rows,
                        &a.as_bytes()[t * rb..(t + 1) * rb],
                        1,
                        OutRows::of(&mut one),
                        rows,
                    );
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&one), bits(&all[t * rows..(t + 1) * rows]), "{} {} token {t}", k.isa, ty.name());
                    // The same token through the second tile alone.
                    let (r0, r1) = (p.tile_rows, 2 * p.tile_rows);
                    let mut part = vec![0f32; r1 - r0];
                    (m.kernel)(
                        cols,
                        m.tiles_for_rows(r0, r1),
                        r1 - r0,
                        &a.as_bytes()[t * rb..(t + 1) * rb],
                        1,
                        OutRows::of(&mut part),
                        r1 - r0,
                    );
                    assert_eq!(bits(&part), bits(&one[r0..r1]), "{} {} token {t}, one tile", k.isa, ty.name());
                }
            }
        }
    }
}

/// Quants at the ends of their ranges against activations at ±127, where a kernel that sums
/// u8 × i8 products in 16 bits (AVX2's `vpmaddubsw`) would saturate if it took one pair or one
/// sum too many: every quant byte of a row set to its largest value (Q8_0: -128 and 127 on
/// alternate rows; Q6_K: scales ±127), the rows' scales left as generated.
#[test]
fn packed_kernels_are_exact_at_extreme_quants() {
    let mut rng = Rng(25);
    for (k, p) in packing_sets() {
        for ty in WEIGHT_TYPES {
            let cols = 512;
            if !p.supports(ty, cols) {
                continue;
            }
            let rows = p.tile_rows + 3;
            let mut w = weights(&mut rng, ty, rows * cols);
            let bb = ty.block_bytes();
            for (i, blk) in w.chunks_exact_mut(bb).enumerate() {
                let row = i / (cols / ty.block_size());
                match ty {
                    GgmlType::Q4_0 => blk[2..18].fill(0xFF),
                    GgmlType::Q4_1 => blk[4..20].fill(0xFF),
                    GgmlType::Q5_0 => blk[2..22].fill(0xFF),
                    GgmlType::Q5_1 => blk[4..24].fill(0xFF),
                    // Nibbles 0 and 15: the grid's -127 and 113.
                    GgmlType::IQ4_NL => blk[2..18].fill(if row % 2 == 0 { 0x00 } else { 0xFF }),
                    GgmlType::Q8_0 => blk[2..34].fill(if row % 2 == 0 { 0x80 } else { 0x7F }),
                    GgmlType::Q4_K => blk[4..144].fill(0xFF),
                    GgmlType::Q5_K => blk[4..176].fill(0xFF),
                    GgmlType::Q6_K => {
                        blk[..192].fill(0xFF);
                        blk[192..208].fill(if row % 2 == 0 { 0x7F } else { 0x81 });
                    }
                    _ => unreachable!("not a packable type"),
                }
            }
            let xs = vec![vec![1.0f32; cols], vec![-1.0f32; cols], activations(&mut rng, cols)];
            let c = Case { ty, cols, w: aligned(&w), xs };
            let m = pack(p, ty, rows, cols, c.w.as_bytes());
            let a = packed_acts(p, ty, &c.xs);
            let mut out = vec![f32::NAN; c.xs.len() * rows];
            (m.kernel)(cols, m.tiles_for_rows(0, rows), rows, a.as_bytes(), c.xs.len(), OutRows::of(&mut out), rows);
            for (i, &o) in out.iter().enumerate() {
                let (t, r) = (i / rows, i % rows);
                let (want, tol) = c.want(r, t);
                assert!((o - want).abs() <= tol, "{} {} t={t} r={r}: {o} vs {want} (tol {tol})", k.isa, ty.name());
            }
        }
    }
}

#[test]
fn packed_kernels_refuse_bad_sizes() {
    let mut rng = Rng(24);
    for (k, p) in packing_sets() {
        for ty in WEIGHT_TYPES {
            let cols = *lengths(ty).iter().find(|&&n| n >= 256).unwrap_or(&256);
            if !p.supports(ty, cols) {
                continue;
            }
            let (rows, n_tok) = (20, 3);
            let c = Case::new(&mut rng, ty, rows, cols, n_tok);
            let m = pack(p, ty, rows, cols, c.w.as_bytes());
            let a = packed_acts(p, ty, &c.xs);
            let tiles = m.tiles_for_rows(0, rows);
            let fresh = || vec![f32::NAN; n_tok * rows];
            let untouched = |v: &[f32]| v.iter().all(|x| x.is_nan());
            let run = |cols: usize, tiles: &[u8], act: &[u8], n_tok: usize, out: &mut [f32], stride: usize| {
                (m.kernel)(cols, tiles, rows, act, n_tok, OutRows::of(out), stride)
            };
            let mut out = fresh();
            run(cols, &tiles[..tiles.len() - 1], a.as_bytes(), n_tok, &mut out, rows);
            assert!(untouched(&out), "{} {} short tiles", k.isa, ty.name());
            run(cols, tiles, &a.as_bytes()[..a.len() - 1], n_tok, &mut out, rows);
            assert!(untouched(&out), "{} {} short activations", k.isa, ty.name());
            run(cols, tiles, a.as_bytes(), n_tok, &mut out[..n_tok * rows - 1], rows);
            assert!(untouched(&out), "{} {} short output", k.isa, ty.name());
            run(cols, tiles, a.as_bytes(), n_tok, &mut out, rows - 1);
            assert!(untouched(&out), "{} {} overlapping stride", k.isa, ty.name());
            run(cols + 1, tiles, a.as_bytes(), n_tok, &mut out, rows);
            assert!(untouched(&out), "{} {} ragged columns", k.isa, ty.name());
            run(cols, tiles, a.as_bytes(), n_tok, &mut out, rows);
            assert!(!untouched(&out), "{} {} the valid call writes", k.isa, ty.name());
        }
    }
}

#[test]
fn packing_refuses_what_it_cannot_pack() {
    for (_, p) in packing_sets() {
        assert!(PackedMatrix::pack(p, GgmlType::F32, 4, 64, &[0u8; 1024], serial, &|_| {}).is_none());
        assert!(PackedMatrix::pack(p, GgmlType::Q8_0, 4, 64, &[0u8; 10], serial, &|_| {}).is_none(), "short source");
        assert!(PackedMatrix::pack(p, GgmlType::Q8_0, 0, 64, &[], serial, &|_| {}).is_none());
        assert!(!p.supports(GgmlType::Q8_0, 33));
    }
}
