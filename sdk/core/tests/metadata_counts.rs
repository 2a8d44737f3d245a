//! Counts in the metadata are untrusted: a file whose layer count, widths or head geometry
//! cannot be true loads as a typed error naming the key, before anything is sized by them
//! (no abort on a huge allocation, no panic in the first forward pass); a file whose values
//! are odd but possible loads and runs. Each case is a mutated copy of a tiny reference model
//! (tests/archs/models) written to a temporary directory. The model's recommended sampling
//! (`general.sampling.*`) is metadata read the same way: an invalid value is skipped.

use std::path::{Path, PathBuf};

use tern::{Engine, EngineOptions, Error, SamplingOptions, Session, SessionOptions};

/// A GGUF file taken apart just enough to change metadata values and write it back: the
/// tensor table and data are kept as bytes (tensor offsets are relative to the data section).
struct Gguf {
    version: u32,
    /// Key, value type, value bytes.
    kv: Vec<(String, u32, Vec<u8>)>,
    n_tensors: u64,
    tensor_table: Vec<u8>,
    alignment: usize,
    data: Vec<u8>,
}

const U32: u32 = 4;
const F32: u32 = 6;
const STRING: u32 = 8;
const ARRAY: u32 = 9;
const U64: u32 = 10;

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        self.at += n;
        &self.b[self.at - n..self.at]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    fn string(&mut self) -> String {
        let n = self.u64() as usize;
        String::from_utf8(self.take(n).to_vec()).unwrap()
    }
    fn skip_value(&mut self, ty: u32) {
        match ty {
            STRING => {
                self.string();
            }
            ARRAY => {
                let (elem, len) = (self.u32(), self.u64());
                for _ in 0..len {
                    self.skip_value(elem);
                }
            }
            0 | 1 | 7 => self.at += 1,
            2 | 3 => self.at += 2,
            4..=6 => self.at += 4,
            10..=12 => self.at += 8,
            other => panic!("value type {other}"),
        }
    }
}

impl Gguf {
    fn read(path: &Path) -> Gguf {
        let b = std::fs::read(path).expect("model file");
        let mut r = Cursor { b: &b, at: 0 };
        assert_eq!(r.take(4), b"GGUF");
        let version = r.u32();
        let (n_tensors, n_kv) = (r.u64(), r.u64());
        let mut kv = Vec::new();
        for _ in 0..n_kv {
            let key = r.string();
            let ty = r.u32();
            let start = r.at;
            r.skip_value(ty);
            kv.push((key, ty, b[start..r.at].to_vec()));
        }
        let table = r.at;
        for _ in 0..n_tensors {
            r.string();
            let dims = r.u32() as usize;
            r.at += 8 * dims + 4 + 8;
        }
        let tensor_table = b[table..r.at].to_vec();
        let alignment = 32; // the reference models set no general.alignment
        let data = b[r.at.next_multiple_of(alignment)..].to_vec();
        Gguf { version, kv, n_tensors, tensor_table, alignment, data }
    }

    fn write(&self, path: &Path) {
        let mut b = b"GGUF".to_vec();
        b.extend(self.version.to_le_bytes());
        b.extend(self.n_tensors.to_le_bytes());
        b.extend((self.kv.len() as u64).to_le_bytes());
        for (key, ty, value) in &self.kv {
            b.extend((key.len() as u64).to_le_bytes());
            b.extend(key.as_bytes());
            b.extend(ty.to_le_bytes());
            b.extend(value);
        }
        b.extend(&self.tensor_table);
        b.resize(b.len().next_multiple_of(self.alignment), 0);
        b.extend(&self.data);
        std::fs::write(path, b).expect("write the mutated copy");
    }

    fn set(&mut self, key: &str, ty: u32, value: Vec<u8>) {
        match self.kv.iter_mut().find(|(k, ..)| k == key) {
            Some(entry) => (entry.1, entry.2) = (ty, value),
            None => self.kv.push((key.to_owned(), ty, value)),
        }
    }

    fn set_u64(&mut self, key: &str, v: u64) {
        self.set(key, U64, v.to_le_bytes().to_vec());
    }

    fn set_f32(&mut self, key: &str, v: f32) {
        self.set(key, F32, v.to_le_bytes().to_vec());
    }

    fn set_u32_array(&mut self, key: &str, values: &[u32]) {
        let mut v = U32.to_le_bytes().to_vec();
        v.extend((values.len() as u64).to_le_bytes());
        values.iter().for_each(|x| v.extend(x.to_le_bytes()));
        self.set(key, ARRAY, v);
    }

    /// An unsigned value of the key as stored (u32 or u64).
    fn get(&self, key: &str) -> u64 {
        let (_, ty, v) = self.kv.iter().find(|(k, ..)| k == key).expect("key present");
        match *ty {
            U32 => u32::from_le_bytes(v[..4].try_into().unwrap()) as u64,
            U64 => u64::from_le_bytes(v[..8].try_into().unwrap()),
            other => panic!("{key} has type {other}"),
        }
    }
}

fn model(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/archs/models").join(format!("{name}.gguf"))
}

/// A directory of one test's mutated copies, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("tern-metadata-counts-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads the copy of `name` that `mutate` changed.
fn load_mutated(dir: &TempDir, name: &str, case: &str, mutate: impl FnOnce(&mut Gguf)) -> tern::Result<()> {
    let mut g = Gguf::read(&model(name));
    mutate(&mut g);
    let path = dir.0.join(format!("{name}-{case}.gguf"));
    g.write(&path);
    let e = Engine::load(&path, EngineOptions { threads: Some(1), ..Default::default() })?;
    // A file that loads must run.
    e.score(&[1, 2, 3], 1).map(|_| ())
}

/// The copy loads as a corrupt file whose message names `key`.
fn refused(dir: &TempDir, name: &str, key: &str, case: &str, mutate: impl FnOnce(&mut Gguf)) {
    match load_mutated(dir, name, case, mutate) {
        Err(Error::Corrupt(msg)) => {
            eprintln!("{name} {case}: {msg}");
            assert!(msg.contains(key), "{name} {case}: the message does not name `{key}`: {msg}");
        }
        other => panic!("{name} {case}: expected a corrupt-file error, got {other:?}"),
    }
}

#[test]
fn the_mutation_helper_round_trips() {
    let dir = TempDir::new("the_mutation_helper_round_trips");
    for name in ["llama-ropefreqs-f16", "phi3-q4_k_m", "granite-q8_0"] {
        load_mutated(&dir, name, "unchanged", |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn impossible_layer_counts_are_refused_before_allocating() {
    let dir = TempDir::new("impossible_layer_counts_are_refused_before_allocating");
    let key = "llama.block_count";
    for (case, n) in [("2^31", 1u64 << 31), ("2^40", 1 << 40), ("u64-max", u64::MAX), ("zero", 0)] {
        refused(&dir, "llama-ropefreqs-f16", key, case, |g| g.set_u64(key, n));
    }
    // One bit flip of the stored count (2 layers -> 2^21 + 2).
    refused(&dir, "llama-ropefreqs-f16", key, "bit-21", |g| {
        let n = g.get(key);
        g.set_u64(key, n ^ (1 << 21));
    });
    // A count the file could hold, but whose layers' tensors are not there.
    match load_mutated(&dir, "llama-ropefreqs-f16", "3-layers", |g| g.set_u64(key, 3)) {
        Err(Error::Corrupt(_)) | Err(Error::MissingTensor(_)) => {}
        other => panic!("expected a typed error, got {other:?}"),
    }
}

#[test]
fn impossible_rotary_dimensions_are_refused() {
    let dir = TempDir::new("impossible_rotary_dimensions_are_refused");
    let key = "phi3.rope.dimension_count";
    for (case, n) in [("zero", 0), ("odd", 47), ("wider-than-the-head", 66)] {
        refused(&dir, "phi3-f16", key, case, |g| g.set_u64(key, n));
    }
    // llama, smollm3 and granite rotate whole heads (llama.cpp refuses anything else).
    refused(&dir, "llama-ropefreqs-f16", "llama.rope.dimension_count", "partial", |g| {
        g.set_u64("llama.rope.dimension_count", 32)
    });
    refused(&dir, "phi3-f16", "phi3.rope.freq_base", "base-zero", |g| g.set_f32("phi3.rope.freq_base", 0.0));
}

#[test]
fn head_shapes_that_do_not_divide_are_refused() {
    let dir = TempDir::new("head_shapes_that_do_not_divide_are_refused");
    // 4 query heads cannot share 3 KV heads.
    refused(&dir, "llama-ropefreqs-f16", "llama.attention.head_count_kv", "kv-heads", |g| {
        g.set_u64("llama.attention.head_count_kv", 3)
    });
    refused(&dir, "llama-ropefreqs-f16", "llama.attention.head_count", "zero-heads", |g| {
        g.set_u64("llama.attention.head_count", 0)
    });
    // Without `key_length` the head size is width / heads: 256 / 3 is no size.
    refused(&dir, "llama-ropefreqs-f16", "llama.attention.key_length", "undivided-width", |g| {
        g.set_u64("llama.attention.head_count", 3);
        g.set_u64("llama.attention.head_count_kv", 1);
    });
    refused(&dir, "smollm3-f16", "smollm3.attention.value_length", "value-length", |g| {
        g.set_u64("smollm3.attention.value_length", 32)
    });
    refused(&dir, "smollm3-f16", "smollm3.attention.key_length", "odd-head", |g| {
        g.set_u64("smollm3.attention.key_length", 63);
        g.set_u64("smollm3.attention.value_length", 63);
    });
    // A per-layer count with the wrong number of layers.
    refused(&dir, "qwen3-f16", "qwen3.attention.head_count_kv", "per-layer", |g| {
        g.set_u32_array("qwen3.attention.head_count_kv", &[1, 1, 1])
    });
}

#[test]
fn sizes_that_overflow_are_refused() {
    let dir = TempDir::new("sizes_that_overflow_are_refused");
    refused(&dir, "smollm3-f16", "smollm3.attention.key_length", "huge-head", |g| {
        g.set_u64("smollm3.attention.key_length", 1 << 62);
        g.set_u64("smollm3.attention.value_length", 1 << 62);
    });
    refused(&dir, "smollm3-f16", "smollm3.attention.head_count", "overflowing-heads", |g| {
        g.set_u64("smollm3.attention.head_count", 1 << 62);
        g.set_u64("smollm3.attention.head_count_kv", 1);
    });
    // Widths no tensor has: refused by the tensors' shapes before anything is sized by them.
    for (key, case) in [("smollm3.embedding_length", "huge-width"), ("smollm3.feed_forward_length", "huge-ffn")] {
        match load_mutated(&dir, "smollm3-f16", case, |g| g.set_u64(key, 1 << 40)) {
            Err(Error::TensorShape { .. }) => {}
            other => panic!("{case}: expected a tensor shape error, got {other:?}"),
        }
    }
    refused(&dir, "smollm3-f16", "smollm3.embedding_length", "zero-width", |g| {
        g.set_u64("smollm3.embedding_length", 0)
    });
    refused(&dir, "granite-f16", "granite.logit_scale", "logit-scale", |g| g.set_f32("granite.logit_scale", 0.0));
    refused(&dir, "qwen3-f16", "epsilon", "eps-nan", |g| g.set_f32("qwen3.attention.layer_norm_rms_epsilon", f32::NAN));
}

/// Values that are odd but possible load and run: a trained context of 2^64 - 1 (sessions
/// get the default cap), an original context past it (Phi-3 then rotates by the short factors).
#[test]
fn possible_values_load_and_run() {
    let dir = TempDir::new("possible_values_load_and_run");
    load_mutated(&dir, "qwen3-f16", "context", |g| g.set_u64("qwen3.context_length", u64::MAX)).expect("runs");
    load_mutated(&dir, "phi3-f16", "original-context", |g| {
        g.set_u64("phi3.rope.scaling.original_context_length", u64::MAX)
    })
    .expect("runs");
}

#[test]
fn recommended_sampling_is_read_and_invalid_values_skipped() {
    let dir = TempDir::new("recommended_sampling_is_read_and_invalid_values_skipped");
    let load = |case: &str, mutate: &dyn Fn(&mut Gguf)| {
        let mut g = Gguf::read(&model("llama-ropefreqs-f16"));
        mutate(&mut g);
        let path = dir.0.join(format!("sampling-{case}.gguf"));
        g.write(&path);
        Engine::load(&path, EngineOptions { threads: Some(1), ..Default::default() }).expect("loads")
    };
    // No recommendation: general-purpose sampling, and sessions given none use it.
    let plain = load("none", &|_| {});
    assert_eq!(plain.info().sampling, SamplingOptions::general_purpose());
    let session = Session::new(plain, SessionOptions::default()).expect("session");
    assert_eq!(session.options().sampling, Some(SamplingOptions::general_purpose()));

    // Any number type is read; a top-p outside (0, 1] is skipped, the rest kept.
    let e = load("some", &|g| {
        g.set_f32("general.sampling.temp", 0.6);
        g.set_u64("general.sampling.top_k", 20);
        g.set_f32("general.sampling.top_p", 1.5);
        g.set_f32("general.sampling.penalty_repeat", 1.05);
    });
    let want =
        SamplingOptions { temperature: 0.6, top_k: 20, repetition_penalty: 1.05, ..SamplingOptions::general_purpose() };
    assert_eq!(e.info().sampling, want);
    let session = Session::new(e.clone(), SessionOptions::default()).expect("session");
    assert_eq!(session.options().sampling, Some(want));
    // Options the app gives win.
    let greedy = SessionOptions { sampling: Some(SamplingOptions::greedy()), ..Default::default() };
    let session = Session::new(e, greedy).expect("session");
    assert_eq!(session.options().sampling, Some(SamplingOptions::greedy()));
}
