//! Untrusted files: random truncations and byte flips of a real model must give typed errors
//! (or, where the damage is in weight values, a model that still runs), never a panic or an
//! out-of-bounds read.

mod common;

use common::*;
use tern::gguf::GgufFile;
use tern::{Engine, EngineOptions, Error};

/// splitmix64: a deterministic stream of test positions.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn model_bytes() -> Vec<u8> {
    std::fs::read(model_path(SMOLLM2)).expect("read model")
}

/// End of the header and tensor table: where damage changes structure rather than values.
fn header_len(bytes: &[u8]) -> usize {
    let f = GgufFile::from_bytes(bytes.to_vec()).expect("intact file parses");
    f.tensors().iter().map(|t| t.offset as usize).min().unwrap_or(bytes.len())
}

#[test]
fn every_truncation_is_a_typed_error() {
    let bytes = model_bytes();
    let header = header_len(&bytes);
    let mut rng = Rng(1);
    let mut cuts: Vec<usize> = (0..64).collect();
    cuts.extend((0..300).map(|_| rng.below(header as u64 + 64) as usize));
    cuts.extend((0..40).map(|_| rng.below(bytes.len() as u64) as usize));
    cuts.push(bytes.len() - 1);
    for cut in cuts {
        match GgufFile::from_bytes(bytes[..cut].to_vec()) {
            Err(Error::Truncated { .. }) | Err(Error::NotGguf { .. }) | Err(Error::Corrupt(_)) => {}
            Err(e) => panic!("cut at {cut}: unexpected error kind {e:?}"),
            Ok(_) => panic!("cut at {cut}: a truncated file parsed"),
        }
    }
}

#[test]
fn byte_flips_never_panic() {
    let mut bytes = model_bytes();
    let header = header_len(&bytes);
    let mut rng = Rng(2);
    let (mut errors, mut loaded) = (0, 0);
    for i in 0..160 {
        // Mostly the header (structure), sometimes the weights (values).
        let pos = if i % 8 == 7 { rng.below(bytes.len() as u64) } else { rng.below(header as u64) } as usize;
        let old = bytes[pos];
        bytes[pos] ^= 1 << rng.below(8);
        let outcome = std::panic::catch_unwind(|| match GgufFile::from_bytes(bytes.clone()) {
            Err(_) => false,
            Ok(file) => match Engine::from_file(file, EngineOptions { threads: Some(1), ..Default::default() }) {
                Err(_) => false,
                Ok(engine) => {
                    // A model that loads must also run (weights may be garbage, shapes are not).
                    let _ = engine.score(&[1, 2, 3], 1);
                    true
                }
            },
        });
        match outcome {
            Ok(true) => loaded += 1,
            Ok(false) => errors += 1,
            Err(_) => panic!("flip at byte {pos} panicked"),
        }
        bytes[pos] = old;
    }
    eprintln!("byte flips: {errors} typed errors, {loaded} files still loaded");
    assert!(errors > 0 && loaded > 0);
}

#[test]
fn not_gguf_and_missing_files() {
    assert!(matches!(GgufFile::from_bytes(b"GGML\x03\0\0\0".to_vec()), Err(Error::NotGguf { .. })));
    assert!(matches!(GgufFile::from_bytes(Vec::new()), Err(Error::Truncated { .. })));
    let mut v3 = model_bytes();
    v3[4] = 9; // version 9
    assert!(matches!(GgufFile::from_bytes(v3), Err(Error::UnsupportedVersion(9))));
    assert!(matches!(
        Engine::load("/nonexistent/model.gguf", EngineOptions::default()),
        Err(Error::FileNotFound { .. })
    ));
}

#[test]
fn unsupported_architecture_is_named() {
    let bytes = model_bytes();
    // Rewrite the value of general.architecture ("llama") in place to "llamb".
    let key = b"general.architecture";
    let at = bytes.windows(key.len()).position(|w| w == key).expect("key present");
    let mut changed = bytes.clone();
    let value_at = changed[at..].windows(5).position(|w| w == b"llama").expect("value") + at;
    changed[value_at + 4] = b'b';
    let file = GgufFile::from_bytes(changed).expect("still a valid container");
    match Engine::from_file(file, EngineOptions::default()) {
        Err(Error::UnsupportedArchitecture { name, .. }) => assert_eq!(name, "llamb"),
        other => panic!("expected UnsupportedArchitecture, got {other:?}"),
    }
}

#[test]
fn positioned_reads_match_the_mapped_bytes() {
    let mapped = GgufFile::open(model_path(SMOLLM2)).expect("model opens");
    let owned = GgufFile::from_bytes(model_bytes()).expect("model parses");
    let t = mapped.tensor("token_embd.weight").expect("embedding table");
    let (start, len) = (t.offset as usize, t.size as usize);
    for (at, n) in [(start, 1), (start + 4093, 9), (start + len / 2, 4096 + 3), (start + len - 600, 600)] {
        let want = &mapped.bytes()[at..at + n];
        for f in [&mapped, &owned] {
            let mut got = vec![0u8; n];
            f.read_at(at, &mut got);
            assert_eq!(got, want, "{n} bytes at {at}");
        }
    }
}

/// What is not a regular file is refused before it is opened or mapped, at once: a directory
/// (mmap would say "No such device"), a FIFO (opening one blocks until a writer comes), a
/// device. A watchdog turns a blocked load into a failure instead of a hung test.
#[test]
fn paths_that_are_not_files_are_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("tern-paths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut paths = vec![dir.clone()];
    #[cfg(unix)]
    {
        let fifo = dir.join("model.gguf");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("path");
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        paths.push(fifo);
        paths.push("/dev/null".into());
    }
    for path in paths {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Engine::load(&p, EngineOptions::default()).map(drop));
        });
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(Err(Error::InvalidOption(msg))) => assert!(msg.contains(&path.display().to_string()), "{msg}"),
            Ok(other) => panic!("{}: expected InvalidOption, got {other:?}", path.display()),
            Err(_) => panic!("{}: the load blocked", path.display()),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
