//! A token's logits do not depend on how it reaches the model: alone, in a batch of any size,
//! or as a node of a token tree (speculative verification). Bit for bit, for every kernel set
//! this CPU runs and all three architectures. Speculative decoding relies on this to give
//! exactly the output of plain decoding.

mod common;

use std::sync::Arc;

use common::*;
use tern::model::{KvCache, Logits, Scratch};
use tern::{Engine, EngineOptions};

fn load(file: &str, kernels: &str) -> Arc<Engine> {
    let opts = EngineOptions { kernels: Some(kernels.into()), ..Default::default() };
    Engine::load(model_path(file), opts).expect("model loads")
}

/// The end of a golden case's prompt, and its greedy continuation: short, because the
/// reference kernels run it too.
fn sequence(file: &str) -> (Vec<u32>, Vec<u32>) {
    let g = golden(file);
    let cases = g["chat"].as_array().filter(|c| !c.is_empty()).or(g["completions"].as_array());
    let case = &cases.expect("reference cases")[0];
    let prompt = ids(&case["prompt_ids"]);
    let greedy = ids(&case["greedy"]);
    (prompt[prompt.len().saturating_sub(20)..].to_vec(), greedy[..greedy.len().min(8)].to_vec())
}

/// Feeds `tokens` in chunks of the given sizes (cycled) and returns every position's logits.
fn logits_in_chunks(e: &Engine, tokens: &[u32], sizes: &[usize]) -> Vec<Vec<f32>> {
    let mut kv = e.model().new_kv_cache(tokens.len() + 8);
    let mut scratch = Scratch::default();
    let mut out = Vec::new();
    let mut rest = tokens;
    for &n in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        e.model().forward(e.pool(), &mut kv, &mut scratch, chunk, Logits::All).expect("forward");
        out.extend(scratch.logits().map(<[f32]>::to_vec));
        rest = tail;
    }
    out
}

/// The logits after feeding `prefix` and then `path` one token at a time.
fn logits_after(e: &Engine, prefix: &[u32], path: &[u32]) -> Vec<f32> {
    let mut kv = e.model().new_kv_cache(prefix.len() + path.len() + 8);
    let mut scratch = Scratch::default();
    e.model().forward(e.pool(), &mut kv, &mut scratch, prefix, Logits::Last).expect("prefix");
    for &t in path {
        e.model().forward(e.pool(), &mut kv, &mut scratch, &[t], Logits::Last).expect("step");
    }
    scratch.logits().last().expect("a row").to_vec()
}

fn assert_bitwise(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    if let Some(i) = a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
        panic!("{what}: logit {i} differs: {} vs {}", a[i], b[i]);
    }
}

fn check_batches(file: &str) {
    for k in tern::quant::available_kernels() {
        check_batches_with(file, &load(file, k.isa), k.isa);
    }
}

fn check_batches_with(file: &str, e: &Engine, what: &str) {
    let (prompt, greedy) = sequence(file);
    let mut tokens = prompt.clone();
    tokens.extend(&greedy);
    let one_by_one = logits_in_chunks(e, &tokens, &[1]);
    for sizes in [&[tokens.len()][..], &[3, 7, 2, 32], &[5]] {
        let batched = logits_in_chunks(e, &tokens, sizes);
        for (i, (a, b)) in one_by_one.iter().zip(&batched).enumerate() {
            assert_bitwise(&format!("{file} [{what}] chunks {sizes:?}, position {i}"), a, b);
        }
    }
}

fn check_tree(file: &str) {
    let (prompt, greedy) = sequence(file);
    let (g, other) = (&greedy, [prompt[1], prompt[2]]);
    // Two branches from the root, one from the first node, a chain under the greedy path:
    //   0:g0 ─ 1:g1 ─ 2:g2 ─ 5:g3
    //        └ 3:other0
    //   4:other1
    let tokens = [g[0], g[1], g[2], other[0], other[1], g[3]];
    let parents = [None, Some(0), Some(1), Some(0), None, Some(2)];
    let paths: [&[u32]; 6] =
        [&[g[0]], &[g[0], g[1]], &[g[0], g[1], g[2]], &[g[0], other[0]], &[other[1]], &[g[0], g[1], g[2], g[3]]];
    for k in tern::quant::available_kernels() {
        let e = load(file, k.isa);
        let mut kv: KvCache = e.model().new_kv_cache(prompt.len() + 16);
        let mut scratch = Scratch::default();
        e.model().forward(e.pool(), &mut kv, &mut scratch, &prompt, Logits::Last).expect("prompt");
        e.model().forward_tree(e.pool(), &mut kv, &mut scratch, &tokens, &parents, Logits::All).expect("tree");
        let rows: Vec<Vec<f32>> = scratch.logits().map(<[f32]>::to_vec).collect();
        for (node, path) in paths.iter().enumerate() {
            let want = logits_after(&e, &prompt, path);
            assert_bitwise(&format!("{file} [{}] tree node {node}", k.isa), &rows[node], &want);
        }

        // Keep the greedy path and carry on as if it had been decoded token by token.
        let base = prompt.len();
        assert!(kv.keep_slots(base, &[base, base + 1, base + 2, base + 5]));
        assert_eq!(kv.len(), base + 4);
        e.model().forward(e.pool(), &mut kv, &mut scratch, &[g[4]], Logits::Last).expect("after");
        let want = logits_after(&e, &prompt, &[g[0], g[1], g[2], g[3], g[4]]);
        assert_bitwise(&format!("{file} [{}] after keeping a path", k.isa), scratch.logits().last().unwrap(), &want);
    }
}

/// Past the first chunks of cache, one task serves every query of a batch over a cached chunk:
/// each query must still get the bits it gets alone, in prefill chunks and in a token tree.
/// (Gemma 3's sliding-window layers see different cache starts per query and share nothing.)
fn check_long_context(file: &str) {
    let (prompt, greedy) = sequence(file);
    let prefix: Vec<u32> = prompt.iter().cycle().take(600).copied().collect();
    // More tokens than one shared-chunk task serves.
    let batch: Vec<u32> = greedy.iter().chain(&prompt).take(20).copied().collect();
    let e = load(file, tern::quant::kernels().isa);
    let after_prefix = |sizes: &[usize]| {
        let mut kv = e.model().new_kv_cache(prefix.len() + batch.len() + 8);
        let mut scratch = Scratch::default();
        e.model().forward(e.pool(), &mut kv, &mut scratch, &prefix, Logits::None).expect("prefix");
        let mut rows = Vec::new();
        let mut rest = &batch[..];
        for &n in sizes {
            let (chunk, tail) = rest.split_at(n.min(rest.len()));
            e.model().forward(e.pool(), &mut kv, &mut scratch, chunk, Logits::All).expect("forward");
            rows.extend(scratch.logits().map(<[f32]>::to_vec));
            rest = tail;
        }
        rows
    };
    let one_by_one = after_prefix(&vec![1; batch.len()]);
    assert_eq!(one_by_one.len(), batch.len());
    for sizes in [&[batch.len()][..], &[3, 17]] {
        for (i, (a, b)) in one_by_one.iter().zip(&after_prefix(sizes)).enumerate() {
            assert_bitwise(&format!("{file} at depth {}: chunks {sizes:?}, token {i}", prefix.len()), a, b);
        }
    }

    let g = &greedy;
    let tokens = [g[0], g[1], g[2], prompt[1], g[3]];
    let parents = [None, Some(0), Some(1), Some(0), Some(2)];
    let mut kv = e.model().new_kv_cache(prefix.len() + 16);
    let mut scratch = Scratch::default();
    e.model().forward(e.pool(), &mut kv, &mut scratch, &prefix, Logits::None).expect("prefix");
    e.model().forward_tree(e.pool(), &mut kv, &mut scratch, &tokens, &parents, Logits::All).expect("tree");
    let rows: Vec<Vec<f32>> = scratch.logits().map(<[f32]>::to_vec).collect();
    for (node, path) in [&g[..1], &g[..2], &g[..3], &[g[0], prompt[1]], &g[..4]].iter().enumerate() {
        let want = logits_after(&e, &prefix, path);
        assert_bitwise(&format!("{file} at depth {}: tree node {node}", prefix.len()), &rows[node], &want);
    }
}

#[test]
fn smollm2_long_context() {
    check_long_context(SMOLLM2);
}

#[test]
fn gemma3_long_context() {
    check_long_context(GEMMA3);
}

#[test]
fn smollm2_batches() {
    check_batches(SMOLLM2);
}

#[test]
fn qwen2_batches() {
    check_batches(QWEN2);
}

#[test]
fn gemma3_batches() {
    check_batches(GEMMA3);
}

/// The int8-key / fp8-value cache quantizes each position's row on its own: batches do not
/// change it either.
#[test]
fn smollm2_batches_with_int8_kv() {
    let opts = EngineOptions { kv_precision: tern::model::KvPrecision::Int8Fp8, ..Default::default() };
    let e = Engine::load(model_path(SMOLLM2), opts).expect("model loads");
    check_batches_with(SMOLLM2, &e, "default set, int8/fp8 KV");
}

#[test]
fn smollm2_tree() {
    check_tree(SMOLLM2);
}

#[test]
fn qwen2_tree() {
    check_tree(QWEN2);
}

#[test]
fn gemma3_tree() {
    check_tree(GEMMA3);
}

#[test]
fn bad_trees_are_refused() {
    let e = load(SMOLLM2, tern::quant::reference_kernels().isa);
    let mut kv = e.model().new_kv_cache(16);
    let mut scratch = Scratch::default();
    let m = e.model();
    assert!(m.forward_tree(e.pool(), &mut kv, &mut scratch, &[1, 2], &[None], Logits::All).is_err());
    assert!(m.forward_tree(e.pool(), &mut kv, &mut scratch, &[1, 2], &[Some(1), None], Logits::All).is_err());
    assert!(m.forward_tree(e.pool(), &mut kv, &mut scratch, &[1, 2], &[None, Some(1)], Logits::All).is_err());
    assert_eq!(kv.len(), 0);
    assert!(!kv.keep_slots(0, &[0]), "slot beyond the cached length");
}

/// A pass that keeps every row's input to the LM head (calibration) gives the last token the
/// logits a `Logits::Last` pass gives it, bit for bit; and the logits it scores for a few
/// tokens from those rows agree with the whole LM head's to within its quantized activations
/// (the largest difference seen: 1% of the largest logit).
fn check_hidden_rows(file: &str) {
    let e = Engine::load(model_path(file), EngineOptions::default()).expect("model loads");
    let (mut tokens, greedy) = sequence(file);
    tokens.extend(&greedy);
    let m = e.model();
    let run = |want: Logits| {
        let mut kv = m.new_kv_cache(tokens.len() + 1);
        let mut scratch = Scratch::default();
        m.forward(e.pool(), &mut kv, &mut scratch, &tokens, want).expect("forward");
        scratch
    };
    let (last, hidden, all) = (run(Logits::Last), run(Logits::Hidden { last: true }), run(Logits::All));
    let last_row = last.logits().last().expect("a row");
    assert_bitwise(&format!("{file}: last row"), last_row, hidden.logits().last().expect("a row"));
    assert_eq!(hidden.hidden().len(), tokens.len());
    assert_eq!(run(Logits::Hidden { last: false }).hidden().len(), tokens.len());

    let mut chosen: Vec<u32> = tokens.clone();
    chosen.sort_unstable();
    chosen.dedup();
    let mut rows = Vec::new();
    m.output_rows(&chosen, &mut rows).expect("output rows");
    let mut scores = Vec::new();
    m.score_hidden(e.pool(), &hidden, &rows, &mut scores);
    assert_eq!(scores.len(), tokens.len() * chosen.len());
    for (t, (full, scored)) in all.logits().zip(scores.chunks_exact(chosen.len())).enumerate() {
        let spread = full.iter().fold(0f32, |a, &v| a.max(v.abs()));
        for (&tok, &s) in chosen.iter().zip(scored) {
            let want = full[tok as usize];
            assert!((s - want).abs() <= 0.015 * spread + 0.05, "{file}: position {t}, token {tok}: {s} vs {want}");
        }
    }
}

#[test]
fn smollm2_hidden_rows() {
    check_hidden_rows(SMOLLM2);
}

#[test]
fn qwen2_hidden_rows() {
    check_hidden_rows(QWEN2);
}

#[test]
fn gemma3_hidden_rows() {
    check_hidden_rows(GEMMA3);
}
