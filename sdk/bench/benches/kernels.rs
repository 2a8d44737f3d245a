//! Kernel throughput on real weights: GEMV (decode, one token), GEMM (prefill, a tile of
//! tokens) and the f16 attention kernels, for every kernel set this CPU runs.
//! Throughput is in weight bytes per second, so GEMV figures compare directly with the
//! memory bandwidth. Run: `cargo bench -p tern-bench` (models from `cargo xtask models --all`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use tern::quant::available_kernels;
use tern_bench::{activations, weight_samples};

/// Tokens per GEMM call, as the engine's prefill tile.
const GEMM_TOKENS: usize = 32;

fn gemv_and_gemm(c: &mut Criterion) {
    let samples = weight_samples();
    assert!(!samples.is_empty(), "no model files in the cache: run `cargo xtask models --all`");
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

/// One query head over 1536 cached positions of head size 64: scores, then the weighted sum.
fn attention(c: &mut Criterion) {
    const POSITIONS: usize = 1536;
    const HEAD: usize = 64;
    let keys: Vec<f16> = (0..POSITIONS * HEAD).map(|i| f16::from_f32(((i * 37 % 101) as f32 - 50.0) / 50.0)).collect();
    let q: Vec<f32> = (0..HEAD).map(|i| (i as f32 - 32.0) / 32.0).collect();
    let mut g = c.benchmark_group("attention_head_1536");
    g.throughput(Throughput::Bytes((2 * keys.len() * 2) as u64));
    for k in available_kernels() {
        let (dot, axpy) = (k.f16_dot(), k.f16_axpy());
        let mut acc = vec![0f32; HEAD];
        g.bench_function(k.isa, |b| {
            b.iter(|| {
                let mut sum = 0.0;
                for row in keys.chunks_exact(HEAD) {
                    sum += dot(row, &q);
                }
                for row in keys.chunks_exact(HEAD) {
                    axpy(1e-3, row, &mut acc);
                }
                black_box(sum)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, gemv_and_gemm, attention);
criterion_main!(benches);
