//! Kernel throughput on real weights (and synthetic Q5_1, IQ4_NL and Q5_K matrices, types no
//! cached model has): GEMV (decode, one token), GEMM (prefill, a tile of tokens), on ggml's
//! layout and, for sets that have one, on their repacked layout, and the attention chunk kernel,
//! for every kernel set this CPU runs.
//! GEMV throughput is in weight bytes per second, so it compares directly with the memory
//! bandwidth (the samples are larger than the caches). Run: `cargo bench -p tern-bench`
//! (models from `cargo xtask models --all`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use tern::quant::packed::{OutRows, PackedMatrix};
use tern::quant::{available_kernels, reference, KvHeadRows, KEY_GROUP};
use tern_bench::{activations, packed_activations, weight_samples};

/// Tokens per GEMM call, as the engine's prefill tile.
const GEMM_TOKENS: usize = 32;

fn gemv_and_gemm(c: &mut Criterion) {
    let samples = weight_samples();
    assert!(
        samples.iter().any(|s| s.model != "synthetic"),
        "no model files in the cache: run `cargo xtask models --all`"
    );
    for k in available_kernels() {
        let mut g = c.benchmark_group(format!("gemv/{}", k.isa));
        g.sample_size(20);
        for s in &samples {
            let (Some(mat_vec), Some(act)) = (k.mat_vec(s.ty), activations(k, s.ty, s.cols, 1)) else { continue };
            let mut out = vec![0f32; s.rows];
            g.throughput(Throughput::Bytes(s.bytes.len() as u64));
            let id = BenchmarkId::new(s.ty.name(), format!("{}:{} {}x{}", s.model, s.tensor, s.rows, s.cols));
            g.bench_function(id, |b| b.iter(|| mat_vec(s.cols, black_box(&s.bytes), act.as_bytes(), &mut out)));
        }
        g.finish();

        let mut g = c.benchmark_group(format!("gemm{GEMM_TOKENS}/{}", k.isa));
        g.sample_size(10);
        for s in &samples {
            let (Some(mat_mat), Some(act)) = (k.mat_mat(s.ty), activations(k, s.ty, s.cols, GEMM_TOKENS)) else {
                continue;
            };
            let mut out = vec![0f32; s.rows * GEMM_TOKENS];
            g.throughput(Throughput::Elements((s.rows * s.cols * GEMM_TOKENS) as u64));
            let id = BenchmarkId::new(s.ty.name(), format!("{}:{} {}x{}", s.model, s.tensor, s.rows, s.cols));
            g.bench_function(id, |b| {
                b.iter(|| mat_mat(s.cols, black_box(&s.bytes), s.rows, act.as_bytes(), GEMM_TOKENS, &mut out, s.rows))
            });
        }
        g.finish();
    }
}

/// The same products on each set's repacked layout: GEMV is its GEMM kernel with one token.
fn packed_gemv_and_gemm(c: &mut Criterion) {
    let samples = weight_samples();
    for k in available_kernels() {
        let Some(p) = k.packing() else { continue };
        let packed: Vec<_> = samples
            .iter()
            .filter_map(|s| {
                let m = PackedMatrix::pack(p, s.ty, s.rows, s.cols, &s.bytes, |n, f| (0..n).for_each(f), &|_| {})?;
                Some((s, m))
            })
            .collect();
        // 8 tokens: a speculative verification pass.
        for (n_tok, name) in [(1, "gemv"), (8, "gemm8"), (GEMM_TOKENS, "gemm32")] {
            let mut g = c.benchmark_group(format!("{name}/{}-{}", k.isa, p.layout));
            g.sample_size(if n_tok == 1 { 20 } else { 10 });
            for (s, m) in &packed {
                let Some(act) = packed_activations(p, s.ty, s.cols, n_tok) else { continue };
                let mut out = vec![0f32; s.rows * n_tok];
                g.throughput(if n_tok == 1 {
                    Throughput::Bytes(s.bytes.len() as u64)
                } else {
                    Throughput::Elements((s.rows * s.cols * n_tok) as u64)
                });
                let id = BenchmarkId::new(s.ty.name(), format!("{}:{} {}x{}", s.model, s.tensor, s.rows, s.cols));
                let tiles = m.tiles_for_rows(0, s.rows);
                g.bench_function(id, |b| {
                    b.iter(|| {
                        (m.kernel)(
                            s.cols,
                            black_box(tiles),
                            s.rows,
                            act.as_bytes(),
                            n_tok,
                            OutRows::of(&mut out),
                            s.rows,
                        )
                    })
                });
            }
            g.finish();
        }
    }
}

/// One KV head of size 64 over 1536 cached positions, in chunks of 256 as the model runs it; f16
/// rows and int8/fp8 rows. 3 query heads: SmolLM2 decoding at depth; 24: its 8-token verifying
/// pass (every token's heads served by one read of each chunk).
fn attention(c: &mut Criterion) {
    for heads in [3, 24] {
        attention_heads(c, heads);
    }
}

fn attention_heads(c: &mut Criterion, heads: usize) {
    const POSITIONS: usize = 1536;
    const HEAD: usize = 64;
    let vals: Vec<f32> = (0..POSITIONS * HEAD).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
    let keys: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
    let k8: Vec<i8> = vals.iter().map(|&v| (v * 127.0) as i8).collect();
    let key_scales = vec![1.0 / 127.0; POSITIONS * HEAD / KEY_GROUP];
    let mut v8 = vec![0u8; vals.len()];
    let mut value_scales = vec![0f32; POSITIONS];
    for (i, (x, c)) in vals.chunks_exact(HEAD).zip(v8.chunks_exact_mut(HEAD)).enumerate() {
        value_scales[i] = reference::quantize_row_e4m3(x, c);
    }
    let q: Vec<f32> = (0..heads * HEAD).map(|i| ((i % HEAD) as f32 - 32.0) / 32.0).collect();
    let slots: Vec<u32> = (0..POSITIONS as u32).collect();
    let rows = [
        ("f16", KvHeadRows::F16 { keys: &keys, values: &keys, stride: HEAD }, 2 * 2 * keys.len()),
        (
            "int8-fp8",
            KvHeadRows::Int8Fp8 {
                keys: &k8,
                key_scales: &key_scales,
                values: &v8,
                value_scales: &value_scales,
                stride: HEAD,
                key_scale_stride: HEAD / KEY_GROUP,
                value_scale_stride: 1,
            },
            k8.len() + v8.len() + 4 * (key_scales.len() + value_scales.len()),
        ),
    ];
    let mut g = c.benchmark_group(format!("attention_{heads}heads_1536"));
    for (name, kv, bytes) in rows {
        g.throughput(Throughput::Bytes(bytes as u64));
        for k in available_kernels() {
            let attn = k.attn_chunk();
            let mut scores = vec![0f32; heads * 256];
            let mut out = vec![0f32; heads * (HEAD + 2)];
            g.bench_function(BenchmarkId::new(name, k.isa), |b| {
                b.iter(|| {
                    for chunk in slots.chunks(256) {
                        attn(&q, heads, kv, chunk, 0.125, &mut scores, &mut out);
                    }
                    black_box(out[2])
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, gemv_and_gemm, packed_gemv_and_gemm, attention);
criterion_main!(benches);
