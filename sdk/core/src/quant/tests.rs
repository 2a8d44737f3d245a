//! Kernel tests: every fast kernel against `reference`, `reference` against plain f32 math on
//! dequantized data, and the byte-level boundary against bad sizes and alignment.

use half::{bf16, f16};

use super::blocks::*;
use super::reference as r;
use super::*;

/// splitmix64: small, deterministic, good enough to fill test blocks.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for b in bytes {
            *b = self.next_u64() as u8;
        }
    }
}

/// Activation-like data: mostly small, a few outliers, some exact zeros.
pub(super) fn activations(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| match rng.next_u64() % 64 {
            0 => 0.0,
            1 => rng.range(-20.0, 20.0),
            _ => rng.range(-1.0, 1.0),
        })
        .collect()
}

fn random_blocks<T: Block>(rng: &mut Rng, nb: usize, fix: impl Fn(&mut T, &mut Rng)) -> Vec<u8> {
    let mut v = vec![T::zeroed(); nb];
    rng.fill(as_bytes_mut(&mut v));
    for b in &mut v {
        fix(b, rng);
    }
    as_bytes(&v).to_vec()
}

/// Small scale of either sign, so no NaN/inf can appear.
fn scale(rng: &mut Rng) -> f16 {
    let s = rng.range(1e-3, 2e-2);
    f16::from_f32(if rng.next_u64() & 1 == 0 { s } else { -s })
}

/// Random weight row bytes of `n` elements; quant bytes random, scales sane.
pub(super) fn weights(rng: &mut Rng, t: GgmlType, n: usize) -> Vec<u8> {
    let nb = n / t.block_size();
    match t {
        GgmlType::F32 => random_blocks::<f32>(rng, nb, |v, r| *v = r.range(-1.0, 1.0)),
        GgmlType::F16 => random_blocks::<f16>(rng, nb, |v, r| *v = f16::from_f32(r.range(-1.0, 1.0))),
        GgmlType::BF16 => random_blocks::<bf16>(rng, nb, |v, r| *v = bf16::from_f32(r.range(-1.0, 1.0))),
        GgmlType::Q4_0 => random_blocks::<BlockQ4_0>(rng, nb, |b, r| b.d = scale(r)),
        GgmlType::Q4_1 => random_blocks::<BlockQ4_1>(rng, nb, |b, r| {
            b.d = f16::from_f32(r.range(1e-3, 2e-2));
            b.m = f16::from_f32(r.range(-0.2, 0.1));
        }),
        GgmlType::Q5_0 => random_blocks::<BlockQ5_0>(rng, nb, |b, r| b.d = scale(r)),
        // Q8_0 weights may hold -128: the fast kernels must cope with it on the weight side.
        GgmlType::Q8_0 => random_blocks::<BlockQ8_0>(rng, nb, |b, r| b.d = scale(r)),
        GgmlType::Q4_K => random_blocks::<BlockQ4K>(rng, nb, |b, r| {
            b.d = f16::from_f32(r.range(1e-4, 1e-3));
            b.dmin = f16::from_f32(r.range(1e-4, 1e-3));
        }),
        GgmlType::Q6_K => random_blocks::<BlockQ6K>(rng, nb, |b, r| b.d = scale(r)),
        GgmlType::Q5_1 => random_blocks::<BlockQ5_1>(rng, nb, |b, r| {
            b.d = f16::from_f32(r.range(1e-3, 2e-2));
            b.m = f16::from_f32(r.range(-0.2, 0.1));
        }),
        GgmlType::Q2_K => random_blocks::<BlockQ2K>(rng, nb, |b, r| {
            b.d = f16::from_f32(r.range(1e-4, 1e-3));
            b.dmin = f16::from_f32(r.range(1e-4, 1e-3));
        }),
        GgmlType::Q3_K => random_blocks::<BlockQ3K>(rng, nb, |b, r| b.d = f16::from_f32(r.range(1e-4, 1e-3))),
        GgmlType::Q5_K => random_blocks::<BlockQ5K>(rng, nb, |b, r| {
            b.d = f16::from_f32(r.range(1e-4, 1e-3));
            b.dmin = f16::from_f32(r.range(1e-4, 1e-3));
        }),
        GgmlType::IQ4_NL => random_blocks::<BlockIq4Nl>(rng, nb, |b, r| b.d = scale(r)),
        GgmlType::IQ4_XS => random_blocks::<BlockIq4Xs>(rng, nb, |b, r| b.d = f16::from_f32(r.range(1e-5, 1e-4))),
        GgmlType::Q8_1 | GgmlType::Q8_K => unreachable!("activation-only type"),
    }
}

/// Every weight type of the table.
pub(super) const WEIGHT_TYPES: [GgmlType; types::N_WEIGHTS] = GgmlType::WEIGHTS;

const ACT_TYPES: [GgmlType; 4] = [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K];

/// Row lengths to try: tails of every unrolled loop (1, odd, even block counts).
pub(super) fn lengths(t: GgmlType) -> Vec<usize> {
    let bs = t.activation_type().block_size().max(t.block_size());
    if bs == 1 {
        vec![1, 7, 8, 9, 31, 32, 33, 100, 576, 1000]
    } else {
        [1, 2, 3, 4, 5, 7, 18, 33].iter().map(|k| k * bs).collect()
    }
}

pub(super) fn deq(t: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; n];
    (reference_kernels().dequantize(t).unwrap())(bytes, &mut out);
    out
}

pub(super) fn quant(k: &Kernels, act: GgmlType, x: &[f32]) -> ActBuf {
    let mut buf = ActBuf::new();
    assert!(buf.quantize(k, act, x), "{} cannot quantize {}", k.isa, act.name());
    buf
}

/// Sum of |w_i * a_i|: the scale of rounding error in any summation order.
pub(super) fn mass(w: &[f32], a: &[f32]) -> f32 {
    w.iter().zip(a).map(|(x, y)| (x * y).abs()).sum()
}

fn dot64(w: &[f32], a: &[f32]) -> f32 {
    w.iter().zip(a).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>() as f32
}

pub(super) fn aligned(bytes: &[u8]) -> ActBuf {
    let mut b = ActBuf::new();
    b.resize(bytes.len());
    b.as_bytes_mut().copy_from_slice(bytes);
    b
}

#[test]
fn block_layouts_match_ggml_type() {
    fn check<T: Block>(t: GgmlType) {
        assert_eq!(size_of::<T>(), t.block_bytes(), "{}", t.name());
        assert_eq!(T::ELEMS, t.block_size(), "{}", t.name());
        assert!(align_of::<T>() <= 4);
    }
    check::<f32>(GgmlType::F32);
    check::<f16>(GgmlType::F16);
    check::<bf16>(GgmlType::BF16);
    check::<BlockQ4_0>(GgmlType::Q4_0);
    check::<BlockQ4_1>(GgmlType::Q4_1);
    check::<BlockQ5_0>(GgmlType::Q5_0);
    check::<BlockQ8_0>(GgmlType::Q8_0);
    check::<BlockQ8_1>(GgmlType::Q8_1);
    check::<BlockQ4K>(GgmlType::Q4_K);
    check::<BlockQ6K>(GgmlType::Q6_K);
    check::<BlockQ8K>(GgmlType::Q8_K);
    check::<BlockQ5_1>(GgmlType::Q5_1);
    check::<BlockQ2K>(GgmlType::Q2_K);
    check::<BlockQ3K>(GgmlType::Q3_K);
    check::<BlockQ5K>(GgmlType::Q5_K);
    check::<BlockIq4Nl>(GgmlType::IQ4_NL);
    check::<BlockIq4Xs>(GgmlType::IQ4_XS);
    for t in GgmlType::ALL {
        assert_eq!(GgmlType::from_id(t.id()), Some(t), "{}", t.name());
    }
    // ggml types not in the table (IQ2_XXS, IQ1_S, TQ1_0, ...) are unknown, not misread.
    for id in [4, 5, 16, 17, 18, 19, 21, 22, 24, 29, 34, 35, 39, 1000] {
        assert_eq!(GgmlType::from_id(id), None, "id {id}");
    }
}

/// Dequantization of the types added after the first ones against gguf-py's, on random blocks
/// (`scripts/quant_fixtures.py` writes the fixtures).
#[test]
fn dequantization_matches_gguf_py() {
    macro_rules! fixture {
        ($t:ident, $name:literal) => {
            (
                GgmlType::$t,
                &include_bytes!(concat!("../../tests/fixtures/quant/", $name, ".blocks"))[..],
                &include_bytes!(concat!("../../tests/fixtures/quant/", $name, ".f32"))[..],
            )
        };
    }
    let fixtures = [
        fixture!(Q5_1, "q5_1"),
        fixture!(Q2_K, "q2_k"),
        fixture!(Q3_K, "q3_k"),
        fixture!(Q5_K, "q5_k"),
        fixture!(IQ4_NL, "iq4_nl"),
        fixture!(IQ4_XS, "iq4_xs"),
    ];
    for (t, blocks, values) in fixtures {
        let want: Vec<f32> = values.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(t.row_bytes(want.len()), blocks.len(), "{}", t.name());
        let got = deq(t, aligned(blocks).as_bytes(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-6 * w.abs(), "{} element {i}: {g} vs {w}", t.name());
        }
    }
}

#[test]
fn as_blocks_checks_length_and_alignment() {
    let mut buf = ActBuf::new();
    buf.resize(1024);
    let b = buf.as_bytes();
    assert_eq!(as_blocks::<BlockQ8K>(&b[..292]).map(<[_]>::len), Some(1));
    assert_eq!(as_blocks::<BlockQ8K>(&b[..584]).map(<[_]>::len), Some(2));
    assert_eq!(as_blocks::<BlockQ8K>(&b[..0]).map(<[_]>::len), Some(0));
    assert!(as_blocks::<BlockQ8K>(&b[..291]).is_none(), "short");
    assert!(as_blocks::<BlockQ8K>(&b[..293]).is_none(), "ragged");
    assert!(as_blocks::<BlockQ8K>(&b[2..294]).is_none(), "2-aligned f32 block");
    assert!(as_blocks::<BlockQ8_0>(&b[2..36]).is_some(), "f16 blocks need only 2");
    assert!(as_blocks::<BlockQ8_0>(&b[1..35]).is_none(), "odd address");
    assert!(as_blocks::<f32>(&b[1..5]).is_none());
    let mut buf2 = ActBuf::new();
    buf2.resize(40);
    assert!(as_blocks_mut::<BlockQ4_1>(&mut buf2.as_bytes_mut()[..20]).is_some());
    assert!(as_blocks_mut::<BlockQ4_1>(&mut buf2.as_bytes_mut()[1..21]).is_none());
}

#[test]
fn act_buf_is_aligned_and_sized() {
    let mut b = ActBuf::new();
    assert!(b.is_empty());
    for len in [1, 3, 4, 292, 1000, 7] {
        b.resize(len);
        assert_eq!(b.len(), len);
        assert_eq!(b.as_bytes().len(), len);
        assert_eq!(b.as_bytes().as_ptr() as usize % 4, 0);
    }
    assert!(!b.quantize(reference_kernels(), GgmlType::Q4_0, &[0.0; 32]), "not an activation format");
    assert!(!b.quantize(reference_kernels(), GgmlType::Q8_0, &[0.0; 31]), "ragged row");
    assert!(b.is_empty());
}

#[test]
fn activation_types_and_tables_are_complete() {
    use GgmlType::*;
    let expect = [
        (F32, F32),
        (F16, F32),
        (BF16, F32),
        (Q4_0, Q8_0),
        (Q4_1, Q8_1),
        (Q5_0, Q8_0),
        (Q5_1, Q8_1),
        (Q8_0, Q8_0),
        (Q2_K, Q8_K),
        (Q3_K, Q8_K),
        (Q4_K, Q8_K),
        (Q5_K, Q8_K),
        (Q6_K, Q8_K),
        (IQ4_NL, Q8_0),
        (IQ4_XS, Q8_K),
    ];
    for (w, a) in expect {
        assert_eq!(w.activation_type(), a);
    }
    let kernels = available_kernels();
    assert_eq!(kernels[0].isa, "reference");
    for k in &kernels {
        for w in WEIGHT_TYPES {
            assert!(
                k.vec_dot(w).is_some() && k.mat_vec(w).is_some() && k.mat_mat(w).is_some() && k.dequantize(w).is_some(),
                "{} {}",
                k.isa,
                w.name()
            );
            assert!(k.quantize(w.activation_type()).is_some());
        }
        for t in [Q8_1, Q8_K] {
            assert!(k.vec_dot(t).is_none() && k.mat_vec(t).is_none() && k.mat_mat(t).is_none());
        }
        for t in WEIGHT_TYPES {
            assert_eq!(k.quantize(t).is_some(), t.is_activation(), "{} {}", k.isa, t.name());
        }
    }
    assert!(kernels.iter().any(|k| std::ptr::eq(*k, super::kernels())));
}

#[test]
fn kernel_selection_by_name() {
    let best = *available_kernels().last().unwrap();
    assert_eq!(dispatch::select_for_test(Some("reference")).isa, "reference");
    assert_eq!(dispatch::select_for_test(Some("REFERENCE ")).isa, "reference");
    assert_eq!(dispatch::select_for_test(None).isa, best.isa);
    assert_eq!(dispatch::select_for_test(Some("bogus")).isa, best.isa);
    if available_kernels().iter().any(|k| k.isa == "avx2") {
        assert_eq!(dispatch::select_for_test(Some("avx2")).isa, "avx2");
    }
    // NEON is part of every aarch64 target: the SIMD set must be there to be tested, and the
    // best is the deepest of neon < dotprod < i8mm the CPU runs.
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let want = match (has!("dotprod"), has!("i8mm")) {
            (true, true) => "i8mm",
            (true, false) => "dotprod",
            _ => "neon",
        };
        assert_eq!(best.isa, want);
        assert_eq!(dispatch::select_for_test(Some("neon")).isa, "neon");
        assert_eq!(dispatch::select_for_test(Some(want)).isa, want);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let has_512 = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vnni");
        // Built with a compiler that has AVX-512 (see build.rs), a CPU with it must get it.
        let want = if has_512 && cfg!(tern_avx512) { "avx512" } else { "avx2" };
        assert_eq!(best.isa, want);
        assert_eq!(dispatch::select_for_test(Some("avx512")).isa, want);
        // AVX-VNNI's 256-bit kernels run on CPUs with either AVX-VNNI or AVX-512 VNNI (built by
        // the same compilers as the AVX-512 set; the run-time check needs them too).
        #[cfg(tern_avx512)]
        let want = if has_512 || std::arch::is_x86_feature_detected!("avxvnni") { "avxvnni" } else { best.isa };
        #[cfg(not(tern_avx512))]
        let want = best.isa;
        assert_eq!(dispatch::select_for_test(Some("avxvnni")).isa, want);
    }
}

#[test]
fn q4k_scale_unpacking_agrees() {
    let mut rng = Rng(7);
    for _ in 0..2000 {
        let mut s = [0u8; 12];
        rng.fill(&mut s);
        let all = q4k_scales_mins(&s);
        for j in 0..8 {
            assert_eq!(q4k_scale_min(j, &s), (all[j], all[8 + j]), "{s:?} j={j}");
        }
    }
}

/// Hand-built blocks pin the bit layouts independently of the dot products.
#[test]
fn known_layouts() {
    let one = f16::from_f32(1.0);
    let b = BlockQ4_0 {
        d: f16::from_f32(0.5),
        qs: {
            let mut q = [0x88; 16];
            q[0] = 0x2F;
            q
        },
    };
    let mut y = [0.0; 32];
    r::dequantize_row_q4_0(&[b], &mut y);
    assert_eq!((y[0], y[16], y[1]), (3.5, -3.0, 0.0));

    let b = BlockQ5_0 { d: one, qh: 0x0001_0002u32.to_le_bytes(), qs: [0x11; 16] };
    r::dequantize_row_q5_0(&[b], &mut y);
    // Element 1 and 16 have the fifth bit set.
    assert_eq!((y[0], y[1], y[16], y[17]), (-15.0, 1.0, 1.0, -15.0));

    let mut b = BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [1; 16], d: one };
    b.ql[0] = 0x21;
    b.ql[32] = 0x43;
    b.qh[0] = 0b11_10_01_00;
    b.scales[4] = 2;
    b.ql[64] = 0x05;
    let mut y = [0.0; 256];
    r::dequantize_row_q6_k(&[b], &mut y);
    assert_eq!(
        (y[0], y[32], y[64], y[96]),
        (1.0 - 32.0, 3.0 + 16.0 - 32.0, 2.0 * (2.0 + 32.0 - 32.0), 4.0 + 48.0 - 32.0)
    );
    assert_eq!(y[128], 5.0 - 32.0, "second half starts at ql[64]");

    let mut b = BlockQ4K { d: one, dmin: one, scales: [0; 12], qs: [0; 128] };
    b.scales[0] = 2; // scale of sub-block 0
    b.scales[4] = 1; // min of sub-block 0
    b.scales[8] = 0x53; // sub-block 4: scale low 3, min low 5
    b.scales[0] |= 0x40; // sub-block 4 scale bit 4
    b.qs[0] = 0x73;
    b.qs[64] = 0x02;
    let mut y = [0.0; 256];
    r::dequantize_row_q4_k(&[b], &mut y);
    assert_eq!(y[0], 2.0 * 3.0 - 1.0);
    assert_eq!(y[128], (3.0 + 16.0) * 2.0 - 5.0);
}

#[test]
fn q8_quantization_round_trips() {
    let mut rng = Rng(1);
    let k = reference_kernels();
    for act in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        for &n in &[256usize, 512, 2048] {
            let x = activations(&mut rng, n);
            let a = quant(k, act, &x);
            let y = deq(act, a.as_bytes(), n);
            let bs = act.block_size();
            for (bi, (xb, yb)) in x.chunks(bs).zip(y.chunks(bs)).enumerate() {
                let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                // Half a step, plus the f16 rounding of the scale for the 32-element formats.
                let tol = match act {
                    GgmlType::Q8_K => amax / 127.0 * 0.5 * (1.0 + 1e-6),
                    _ => amax / 127.0 * 0.5 + amax / 1024.0,
                } + 1e-12;
                for (i, (&u, &v)) in xb.iter().zip(yb).enumerate() {
                    assert!((u - v).abs() <= tol, "{} block {bi} elem {i}: {u} vs {v} tol {tol}", act.name());
                }
            }
            match act {
                GgmlType::Q8_1 => {
                    for b in as_blocks::<BlockQ8_1>(a.as_bytes()).unwrap() {
                        let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
                        let expect = sum as f32 * b.d.to_f32();
                        assert!((b.s.to_f32() - expect).abs() <= expect.abs() / 512.0 + 1e-6);
                        assert!(b.qs.iter().all(|&q| q != -128));
                    }
                }
                GgmlType::Q8_K => {
                    for b in as_blocks::<BlockQ8K>(a.as_bytes()).unwrap() {
                        for (s, q) in b.bsums.iter().zip(b.qs.chunks(16)) {
                            assert_eq!(*s as i32, q.iter().map(|&v| v as i32).sum::<i32>());
                        }
                        assert!(b.qs.iter().all(|&q| q != -128));
                    }
                }
                _ => {
                    assert!(as_blocks::<BlockQ8_0>(a.as_bytes())
                        .unwrap()
                        .iter()
                        .all(|b| b.qs.iter().all(|&q| q != -128)));
                }
            }
        }
    }
}

/// Inputs that hit rounding ties, sign ties and empty blocks.
pub(super) fn tricky_rows() -> Vec<Vec<f32>> {
    let mut rows = Vec::new();
    // amax = 127 makes d = 1 exactly: products are the inputs, so .5 ties stay ties.
    let mut t = vec![0.0f32; 256];
    for (i, v) in t.iter_mut().enumerate() {
        *v = (i as f32 - 128.0) * 0.5;
    }
    t[0] = 127.0;
    t[32] = -127.0;
    t[64] = 127.0;
    rows.push(t.clone());
    // Same with the negative extreme first (Q8_K keeps the sign of the first maximum).
    t[0] = -127.0;
    t[1] = 127.0;
    rows.push(t);
    rows.push(vec![0.0; 256]);
    rows.push((0..256).map(|i| if i < 128 { 0.0 } else { -1e-30 }).collect());
    rows.push((0..256).map(|i| (i as f32 * 0.37).sin() * 1e30).collect());
    rows.push((0..256).map(|i| if i % 17 == 0 { -3.0 } else { 1.0 / (i as f32 + 1.0) }).collect());
    rows
}

#[test]
fn fast_quantize_is_byte_identical() {
    let mut rng = Rng(2);
    let mut rows = tricky_rows();
    for n in [256, 512, 4096] {
        rows.push(activations(&mut rng, n));
    }
    for k in available_kernels() {
        for act in ACT_TYPES {
            for x in &rows {
                let want = quant(reference_kernels(), act, x);
                let got = quant(k, act, x);
                assert_eq!(got.as_bytes(), want.as_bytes(), "{} {} n={}", k.isa, act.name(), x.len());
            }
        }
    }
}

#[test]
fn fast_vec_dot_matches_reference() {
    let mut rng = Rng(3);
    for w_type in WEIGHT_TYPES {
        let act = w_type.activation_type();
        for n in lengths(w_type) {
            let w = aligned(&weights(&mut rng, w_type, n));
            let x = activations(&mut rng, n);
            let a = quant(reference_kernels(), act, &x);
            let want = (reference_kernels().vec_dot(w_type).unwrap())(n, w.as_bytes(), a.as_bytes());
            let tol = 2e-5 * mass(&deq(w_type, w.as_bytes(), n), &deq(act, a.as_bytes(), n)) + 1e-6;
            assert!(want.is_finite());
            for k in available_kernels() {
                let got = (k.vec_dot(w_type).unwrap())(n, w.as_bytes(), a.as_bytes());
                assert!((got - want).abs() <= tol, "{} {} n={n}: {got} vs {want} (tol {tol})", k.isa, w_type.name());
            }
        }
    }
}

#[test]
fn reference_vec_dot_matches_dequantized_math() {
    let mut rng = Rng(4);
    for w_type in WEIGHT_TYPES {
        let act = w_type.activation_type();
        for n in lengths(w_type) {
            let w = aligned(&weights(&mut rng, w_type, n));
            let x = activations(&mut rng, n);
            let a = quant(reference_kernels(), act, &x);
            let (wf, af) = (deq(w_type, w.as_bytes(), n), deq(act, a.as_bytes(), n));
            let want = dot64(&wf, &af);
            let got = (reference_kernels().vec_dot(w_type).unwrap())(n, w.as_bytes(), a.as_bytes());
            // Q4_1 and Q5_1 read their offset through `s`, which is rounded to f16 from the unrounded
            // activation scale: allow that rounding on the m * s terms.
            let ab = || as_blocks::<BlockQ8_1>(a.as_bytes()).unwrap();
            let extra = match w_type {
                GgmlType::Q4_1 => {
                    let wb = as_blocks::<BlockQ4_1>(w.as_bytes()).unwrap();
                    wb.iter().zip(ab()).map(|(p, q)| (p.m.to_f32() * q.s.to_f32()).abs() / 1000.0).sum()
                }
                GgmlType::Q5_1 => {
                    let wb = as_blocks::<BlockQ5_1>(w.as_bytes()).unwrap();
                    wb.iter().zip(ab()).map(|(p, q)| (p.m.to_f32() * q.s.to_f32()).abs() / 1000.0).sum()
                }
                _ => 0.0,
            };
            let tol = 2e-5 * mass(&wf, &af) + extra + 1e-6;
            assert!((got - want).abs() <= tol, "{} n={n}: {got} vs {want} (tol {tol})", w_type.name());
        }
    }
}

#[test]
fn mat_vec_equals_row_dots() {
    let mut rng = Rng(5);
    for w_type in WEIGHT_TYPES {
        let act = w_type.activation_type();
        let n = *lengths(w_type).iter().find(|&&n| n >= 256).unwrap_or(&256);
        let rows = 5;
        let w = aligned(&weights(&mut rng, w_type, n * rows));
        let a = quant(reference_kernels(), act, &activations(&mut rng, n));
        let row_bytes = w_type.row_bytes(n);
        for k in available_kernels() {
            let mut out = vec![f32::NAN; rows];
            (k.mat_vec(w_type).unwrap())(n, w.as_bytes(), a.as_bytes(), &mut out);
            for (r, &o) in out.iter().enumerate() {
                let row = &w.as_bytes()[r * row_bytes..(r + 1) * row_bytes];
                assert_eq!(
                    o,
                    (k.vec_dot(w_type).unwrap())(n, row, a.as_bytes()),
                    "{} {} row {r}",
                    k.isa,
                    w_type.name()
                );
            }
            // Too few weight bytes for the rows asked: untouched.
            let mut out = vec![f32::NAN; rows + 1];
            (k.mat_vec(w_type).unwrap())(n, w.as_bytes(), a.as_bytes(), &mut out);
            assert!(out.iter().all(|v| v.is_nan()));
        }
    }
}

/// `n_tok` activation rows of `n` elements, quantized one by one and laid end to end.
fn act_rows(rng: &mut Rng, act: GgmlType, n: usize, n_tok: usize) -> ActBuf {
    let mut bytes = Vec::new();
    for _ in 0..n_tok {
        bytes.extend_from_slice(quant(reference_kernels(), act, &activations(rng, n)).as_bytes());
    }
    aligned(&bytes)
}

#[test]
fn mat_mat_equals_row_dots() {
    let mut rng = Rng(7);
    for w_type in WEIGHT_TYPES {
        let act = w_type.activation_type();
        let lens = lengths(w_type);
        // A short row (tails of the block loops) and one of at least 256 elements.
        for n in [lens[2], *lens.iter().find(|&&n| n >= 256).unwrap_or(&256)] {
            for rows in [1, 2, 5] {
                let w = aligned(&weights(&mut rng, w_type, n * rows));
                let (wb, ab) = (w_type.row_bytes(n), act.row_bytes(n));
                for n_tok in [1, 2, 3, 4, 5, 9] {
                    let a = act_rows(&mut rng, act, n, n_tok);
                    for stride in [rows, rows + 3] {
                        for k in available_kernels() {
                            let mm = k.mat_mat(w_type).unwrap();
                            let dot = k.vec_dot(w_type).unwrap();
                            let mut out = vec![f32::NAN; (n_tok - 1) * stride + rows + 2];
                            mm(n, w.as_bytes(), rows, a.as_bytes(), n_tok, &mut out, stride);
                            for (i, &o) in out.iter().enumerate() {
                                let (t, r) = (i / stride, i % stride);
                                if t >= n_tok || r >= rows {
                                    assert!(o.is_nan(), "{} {} wrote outside the tile at {i}", k.isa, w_type.name());
                                    continue;
                                }
                                let wr = &w.as_bytes()[r * wb..(r + 1) * wb];
                                let at = &a.as_bytes()[t * ab..(t + 1) * ab];
                                // Bit for bit: a token's result does not depend on its batch.
                                let want = dot(n, wr, at);
                                assert_eq!(
                                    o.to_bits(),
                                    want.to_bits(),
                                    "{} {} n={n} rows={rows} n_tok={n_tok} stride={stride} t={t} r={r}: {o} vs {want}",
                                    k.isa,
                                    w_type.name()
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn mat_mat_survives_bad_sizes_and_alignment() {
    let mut rng = Rng(8);
    for w_type in WEIGHT_TYPES {
        let act = w_type.activation_type();
        let n = 512;
        let (rows, n_tok) = (3, 5);
        let w = aligned(&weights(&mut rng, w_type, n * rows));
        let a = act_rows(&mut rng, act, n, n_tok);
        for k in available_kernels() {
            let mm = k.mat_mat(w_type).unwrap();
            let mut base = vec![0.0; rows * n_tok];
            mm(n, w.as_bytes(), rows, a.as_bytes(), n_tok, &mut base, rows);

            // Misaligned copies: identical result.
            let mut sw = vec![0u8; w.len() + 1];
            sw[1..].copy_from_slice(w.as_bytes());
            let mut sa = vec![0u8; a.len() + 3];
            sa[3..].copy_from_slice(a.as_bytes());
            let mut out = vec![0.0; rows * n_tok];
            mm(n, &sw[1..], rows, &sa[3..], n_tok, &mut out, rows);
            assert_eq!(out, base, "{} {}", k.isa, w_type.name());

            // Bad sizes: output untouched, no panic.
            let untouched = |w: &[u8], a: &[u8], n: usize, rows: usize, n_tok: usize, len: usize, stride: usize| {
                let mut out = vec![f32::NAN; len];
                mm(n, w, rows, a, n_tok, &mut out, stride);
                assert!(out.iter().all(|v| v.is_nan()), "{} {}", k.isa, w_type.name());
            };
            let (wb, ab) = (w.as_bytes(), a.as_bytes());
            untouched(&wb[..wb.len() - 1], ab, n, rows, n_tok, rows * n_tok, rows);
            untouched(wb, &ab[..ab.len() - 1], n, rows, n_tok, rows * n_tok, rows);
            untouched(wb, ab, n, rows, n_tok, rows * n_tok - 1, rows);
            untouched(wb, ab, n, rows, n_tok, rows * n_tok, rows - 1);
            untouched(wb, ab, n + 1, rows, n_tok, rows * n_tok, rows);
            untouched(wb, ab, usize::MAX / 2 + 1, rows, n_tok, rows * n_tok, rows);
            untouched(wb, ab, n, usize::MAX, n_tok, rows * n_tok, rows);
            untouched(wb, ab, n, rows, usize::MAX, rows * n_tok, usize::MAX);
            untouched(wb, ab, n, 0, n_tok, 4, rows);
            untouched(wb, ab, n, rows, 0, 4, rows);
            // A single token needs no stride.
            let mut one = vec![f32::NAN; rows];
            mm(n, wb, rows, ab, 1, &mut one, 0);
            let (rb, tb) = (w_type.row_bytes(n), act.row_bytes(n));
            for (r, &o) in one.iter().enumerate() {
                let want = (k.vec_dot(w_type).unwrap())(n, &wb[r * rb..(r + 1) * rb], &ab[..tb]);
                assert_eq!(o, want, "{} {}", k.isa, w_type.name());
            }
            // Zero-length rows: zeros.
            let mut z = vec![f32::NAN; rows * n_tok];
            mm(0, wb, rows, ab, n_tok, &mut z, rows);
            assert!(z.iter().all(|&v| v == 0.0));
        }
    }
}

#[test]
fn byte_api_survives_bad_sizes_and_alignment() {
    let mut rng = Rng(6);
    for w_type in WEIGHT_TYPES {
        let act = w_type.activation_type();
        let n = 512;
        let wb = weights(&mut rng, w_type, n);
        let x = activations(&mut rng, n);
        for k in available_kernels() {
            let w = aligned(&wb);
            let a = quant(k, act, &x);
            let dot = k.vec_dot(w_type).unwrap();
            let base = dot(n, w.as_bytes(), a.as_bytes());

            // Misaligned copies take the copying path and give the identical result.
            let mut shifted_w = vec![0u8; wb.len() + 1];
            shifted_w[1..].copy_from_slice(&wb);
            let mut shifted_a = vec![0u8; a.len() + 3];
            shifted_a[3..].copy_from_slice(a.as_bytes());
            assert_eq!(dot(n, &shifted_w[1..], &shifted_a[3..]), base, "{} {}", k.isa, w_type.name());

            // Longer buffers: only the first n elements count.
            let mut long_a = aligned(a.as_bytes());
            long_a.resize(a.len() + 300);
            assert_eq!(dot(n, w.as_bytes(), long_a.as_bytes()), base);

            // Short or ragged input: 0.0, no panic.
            assert_eq!(dot(n, &w.as_bytes()[..wb.len() - 1], a.as_bytes()), 0.0);
            assert_eq!(dot(n, w.as_bytes(), &a.as_bytes()[..a.len() - 1]), 0.0);
            assert_eq!(dot(n + 1, w.as_bytes(), a.as_bytes()), 0.0);
            assert_eq!(dot(usize::MAX, w.as_bytes(), a.as_bytes()), 0.0);
            assert_eq!(dot(0, w.as_bytes(), a.as_bytes()), 0.0);
            let mut out = vec![0.0; 4];
            (k.mat_vec(w_type).unwrap())(usize::MAX / 2 + 1, w.as_bytes(), a.as_bytes(), &mut out);

            // Quantize into a misaligned or short buffer.
            let q = k.quantize(act).unwrap();
            let mut shifted = vec![0u8; a.len() + 1];
            q(&x, &mut shifted[1..]);
            assert_eq!(&shifted[1..], a.as_bytes());
            let mut short = vec![7u8; a.len() - 1];
            q(&x, &mut short);
            assert!(short.iter().all(|&b| b == 7));
            q(&x[..x.len() - 1], &mut shifted);

            // Dequantize: misaligned equals aligned; short input leaves the output alone.
            let dq = k.dequantize(w_type).unwrap();
            let mut y0 = vec![0.0; n];
            let mut y1 = vec![0.0; n];
            dq(w.as_bytes(), &mut y0);
            dq(&shifted_w[1..], &mut y1);
            assert_eq!(y0, y1);
            let mut y2 = vec![f32::NAN; n];
            dq(&w.as_bytes()[..wb.len() - 1], &mut y2);
            assert!(y2.iter().all(|v| v.is_nan()));
        }
    }
}

#[test]
fn f16_attention_kernels_match_reference() {
    let mut rng = Rng(0xa77e);
    for n in [0usize, 1, 7, 8, 9, 31, 64, 100, 256] {
        let x: Vec<f16> = activations(&mut rng, n).into_iter().map(f16::from_f32).collect();
        let y = activations(&mut rng, n);
        let a = rng.range(-1.0, 1.0);
        let want_dot = dot64(&x.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), &y);
        let mut want_axpy = y.clone();
        r::axpy_f16_f32(a, &x, &mut want_axpy);
        for k in available_kernels() {
            let got = (k.f16_dot())(&x, &y);
            let tol = 1e-5 * (1.0 + mass(&x.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), &y));
            assert!((got - want_dot).abs() <= tol, "{} f16_dot n={n}: {got} vs {want_dot}", k.isa);
            let mut got_axpy = y.clone();
            (k.f16_axpy())(a, &x, &mut got_axpy);
            for (i, (g, w)) in got_axpy.iter().zip(&want_axpy).enumerate() {
                assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{} f16_axpy n={n} i={i}: {g} vs {w}", k.isa);
            }
        }
    }
}

#[test]
fn attention_chunks_match_reference() {
    let mut rng = Rng(0xa7c4);
    for (heads, hd, rows, n) in [(1, 64, 10, 1), (3, 64, 300, 256), (7, 64, 40, 33), (4, 256, 20, 17), (9, 32, 8, 5)] {
        let stride = 2 * hd + 8;
        let kv =
            |rng: &mut Rng| -> Vec<f16> { activations(rng, rows * stride).into_iter().map(f16::from_f32).collect() };
        let (keys, values) = (kv(&mut rng), kv(&mut rng));
        let q = activations(&mut rng, heads * hd);
        // Any rows in any order (token trees), some repeated.
        let slots: Vec<u32> = (0..n).map(|i| ((i * 7 + 3) % rows) as u32).collect();
        // The same rows as int8 keys (a scale per row) and fp8 values.
        let k8: Vec<i8> = keys.iter().map(|v| (v.to_f32() * 6.0).round().clamp(-127.0, 127.0) as i8).collect();
        let groups = stride / KEY_GROUP + 1;
        let scales: Vec<f32> = (0..rows * groups).map(|i| 1.0 / 6.0 + i as f32 * 1e-3).collect();
        let mut v8 = vec![0u8; values.len()];
        let mut v_scales = vec![0f32; rows];
        let vf: Vec<f32> = values.iter().map(|v| v.to_f32()).collect();
        for (i, (x, c)) in vf.chunks_exact(stride).zip(v8.chunks_exact_mut(stride)).enumerate() {
            v_scales[i] = r::quantize_row_e4m3(&x[hd..2 * hd], &mut c[hd..2 * hd]);
        }
        let int8 = KvHeadRows::Int8Fp8 {
            keys: &k8[hd..],
            key_scales: &scales,
            values: &v8[hd..],
            value_scales: &v_scales,
            stride,
            key_scale_stride: groups,
            value_scale_stride: 1,
        };
        let f16_rows = KvHeadRows::F16 { keys: &keys[hd..], values: &values[hd..], stride };
        let run = |k: &Kernels, slots: &[u32], kv_rows: KvHeadRows| {
            let mut scores = vec![0f32; heads * n];
            let mut out = vec![f32::NAN; heads * (hd + 2)];
            (k.attn_chunk())(&q, heads, kv_rows, slots, 0.125, &mut scores, &mut out);
            out
        };
        for (rows_kind, kv_rows) in [("f16", f16_rows), ("int8/fp8", int8)] {
            let want = run(reference_kernels(), &slots, kv_rows);
            // Largest |value| per dimension over the rows used: the numerators are rounded to f16,
            // and a score differing in its last bits may round one ulp (2^-10) the other way.
            let vmax: Vec<f32> = (0..hd)
                .map(|i| slots.iter().map(|&s| values[hd + s as usize * stride + i].to_f32().abs()).fold(0.0, f32::max))
                .collect();
            for k in available_kernels() {
                let got = run(k, &slots, kv_rows);
                for h in 0..heads {
                    let (w, g) = (&want[h * (hd + 2)..(h + 1) * (hd + 2)], &got[h * (hd + 2)..(h + 1) * (hd + 2)]);
                    assert!((w[0] - g[0]).abs() <= 1e-5 * (1.0 + w[0].abs()), "{} max: {} vs {}", k.isa, g[0], w[0]);
                    assert!((w[1] - g[1]).abs() <= 1e-3 * w[1], "{} sum: {} vs {}", k.isa, g[1], w[1]);
                    for (i, (a, b)) in w[2..].iter().zip(&g[2..]).enumerate() {
                        let tol = 1e-3 * w[1] * vmax[i] + 1e-5;
                        assert!(
                            (a - b).abs() <= tol,
                            "{} {rows_kind} heads={heads} hd={hd} h={h} i={i}: {b} vs {a}",
                            k.isa
                        );
                    }
                }
                // A slot past the cache: nothing written.
                let bad: Vec<u32> = slots.iter().copied().chain([rows as u32]).collect();
                let mut scores = vec![0f32; heads * (n + 1)];
                let mut out = vec![f32::NAN; heads * (hd + 2)];
                (k.attn_chunk())(&q, heads, kv_rows, &bad, 0.125, &mut scores, &mut out);
                assert!(out.iter().all(|v| v.is_nan()), "{} {rows_kind} wrote with a bad slot", k.isa);
            }
        }
    }
}

#[test]
fn attention_heads_do_not_depend_on_their_group() {
    // A head's output, bit for bit, whether it shares the call with other heads or runs alone
    // (the kernels' head groups and blocks: 9 heads as 8 and 1 or as 5 and 4; 7 and 8 in one
    // block; 24 as four blocks of 6; 24 or more of 64 to 256 elements: f16 scores of all heads
    // at once over transposed rows). 40: f16 rows only (not a multiple of KEY_GROUP).
    let mut rng = Rng(0x5eed);
    for (hd, heads) in
        [(40, 9), (48, 9), (48, 5), (64, 3), (64, 7), (48, 8), (32, 24), (64, 24), (128, 18), (256, 35), (80, 11)]
    {
        let (rows, n) = (30, 27);
        let keys: Vec<f16> = activations(&mut rng, rows * hd).into_iter().map(f16::from_f32).collect();
        let values: Vec<f16> = activations(&mut rng, rows * hd).into_iter().map(f16::from_f32).collect();
        let k8: Vec<i8> = keys.iter().map(|v| (v.to_f32() * 6.0).round().clamp(-127.0, 127.0) as i8).collect();
        let v8: Vec<u8> = (0..rows * hd).map(|i| (i * 37 % 256) as u8).collect();
        let scales: Vec<f32> = (0..rows * hd / KEY_GROUP).map(|i| 0.1 + i as f32 * 1e-3).collect();
        let q = activations(&mut rng, heads * hd);
        let slots: Vec<u32> = (0..n).map(|i| ((i * 11 + 5) % rows) as u32).collect();
        let mut kinds = vec![KvHeadRows::F16 { keys: &keys, values: &values, stride: hd }];
        if hd % KEY_GROUP == 0 {
            kinds.push(KvHeadRows::Int8Fp8 {
                keys: &k8,
                key_scales: &scales,
                values: &v8,
                value_scales: &scales[..rows],
                stride: hd,
                key_scale_stride: hd / KEY_GROUP,
                value_scale_stride: 1,
            });
        }
        for kv_rows in kinds {
            for k in available_kernels() {
                let run = |q: &[f32], h: usize| {
                    let mut scores = vec![0f32; h * n];
                    let mut out = vec![f32::NAN; h * (hd + 2)];
                    (k.attn_chunk())(q, h, kv_rows, &slots, 0.2, &mut scores, &mut out);
                    out
                };
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let all = run(&q, heads);
                for h in 0..heads {
                    let (alone, shared) = (run(&q[h * hd..(h + 1) * hd], 1), &all[h * (hd + 2)..(h + 1) * (hd + 2)]);
                    assert_eq!(bits(&alone), bits(shared), "{} hd={hd} head {h}", k.isa);
                }
            }
        }
    }
}

#[test]
fn e4m3_rows_round_to_nearest_code() {
    // Every code's value (times a scale that maps 448 to 448): read back exactly.
    let values: Vec<f32> = (0..=255u8)
        .map(|b| f16::from_bits(r::e4m3_f16_bits(b)).to_f32() * 256.0)
        .filter(|v| v.abs() <= 448.0)
        .collect();
    let mut row = values.clone();
    row.push(448.0);
    let mut codes = vec![0u8; row.len()];
    let back_scale = r::quantize_row_e4m3(&row, &mut codes);
    assert_eq!(back_scale, 256.0);
    for (&v, &c) in row.iter().zip(&codes) {
        assert_eq!(f16::from_bits(r::e4m3_f16_bits(c)).to_f32() * back_scale, v, "{v}");
    }
    // Between codes: the nearest (1.0 and 1.125 are neighbours; 3.4 lies between 3.25 and 3.5).
    let mut c = [0u8; 4];
    let s = r::quantize_row_e4m3(&[448.0, 1.05, -3.4, 1e-9], &mut c);
    let read = |c: u8| f16::from_bits(r::e4m3_f16_bits(c)).to_f32() * s;
    assert_eq!((read(c[0]), read(c[1]), read(c[2]), read(c[3])), (448.0, 1.0, -3.5, 0.0));
    assert_eq!(r::quantize_row_e4m3(&[0.0; 3], &mut c[..3]), 0.0);
}

#[test]
fn gelu_mul_matches_reference() {
    // Ordinary activations; the clamps at ±10 and either side of them; f16's overflow (65520
    // rounds to infinity) and underflow; infinities and NaN.
    let mut rng = Rng(0x6e1);
    let mut gate: Vec<f32> = activations(&mut rng, 203).iter().map(|x| x * 4.0).collect();
    gate.extend([0.0, -0.0, 10.0, -10.0, 9.999, -9.999, 10.001, -10.001, 65520.0, -65520.0, 1e-8, -1e-8]);
    gate.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 3.0e-5, -6.1e-5, 0.5, -0.5, 2.75, -2.75]);
    let up = activations(&mut rng, gate.len());
    let mut want = gate.clone();
    r::gelu_mul(&mut want, &up);
    // The table is GELU's tanh form: gelu(1) = 0.8412, gelu(-1) = -0.1588 (to f16 precision).
    let mut ones = [1.0, -1.0];
    r::gelu_mul(&mut ones, &[1.0, 1.0]);
    assert!((ones[0] - 0.8412).abs() < 1e-3 && (ones[1] + 0.1588).abs() < 1e-3, "{ones:?}");
    for k in available_kernels() {
        for len in [gate.len(), 7, 1] {
            let mut got = gate[..len].to_vec();
            (k.gelu_mul())(&mut got, &up[..len]);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                assert!(same, "{} i={i} x={}: {g} vs {w}", k.isa, gate[i]);
            }
        }
    }
}

#[test]
fn silu_mul_matches_reference() {
    // Ordinary activations, large ones of both signs (e^-x overflowing or vanishing), zeros.
    let mut rng = Rng(0x5117);
    let mut gate = activations(&mut rng, 203);
    gate.extend([0.0, -0.0, 88.5, -88.5, 100.0, -100.0, 1e-30, -1e-30, 20.0, -20.0]);
    let up = activations(&mut rng, gate.len());
    let mut want = gate.clone();
    r::silu_mul(&mut want, &up);
    for k in available_kernels() {
        let mut got = gate.clone();
        (k.silu_mul())(&mut got, &up);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // Below x = -87.3 the vector `exp` saturates, where |silu(x)| < 1e-35.
            assert!((g - w).abs() <= 1e-6 * w.abs() + 1e-35, "{} i={i} x={}: {g} vs {w}", k.isa, gate[i]);
        }
        // Each element alone (in the last, partial vector): the same bits.
        for i in (0..gate.len()).step_by(7) {
            let mut one = [gate[i]];
            (k.silu_mul())(&mut one, &up[i..i + 1]);
            assert_eq!(one[0].to_bits(), got[i].to_bits(), "{} i={i}", k.isa);
        }
    }
}
