//! The history store under concurrent writers, damage and foreign files: writers in several
//! instances and processes adding to one key all land; a damaged file is read up to the damage
//! and repaired by the next write; a file over the per-key cap is read within the cap; the
//! store cap removes only the store's own files; failures name what failed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tern::speculative::{HistoryOptions, HistoryStore};
use tern::{Error, WriteOp};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tern-history-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Room for every text the concurrency tests add.
fn roomy() -> HistoryOptions {
    HistoryOptions { max_bytes_per_key: 1 << 20, max_total_bytes: 8 << 20 }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn two_instances_and_many_threads_lose_nothing() {
    let dir = temp_dir("instances");
    let stores = [HistoryStore::open(&dir, roomy()).expect("opens"), HistoryStore::open(&dir, roomy()).expect("opens")];
    let (threads, adds) = (4, 100);
    std::thread::scope(|s| {
        for (i, store) in stores.iter().enumerate() {
            for t in 0..threads {
                let store = Arc::clone(store);
                s.spawn(move || {
                    for n in 0..adds {
                        store.add("shared", &format!("instance {i} thread {t} text {n}")).expect("no writer fails");
                    }
                });
            }
        }
    });
    let want: Vec<String> = (0..2)
        .flat_map(|i| {
            (0..threads).flat_map(move |t| (0..adds).map(move |n| format!("instance {i} thread {t} text {n}")))
        })
        .collect();
    for store in &stores {
        assert_eq!(sorted(store.texts("shared").expect("reads")), sorted(want.clone()), "each instance sees all");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file is left: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Set in the child processes of `two_processes_lose_nothing`: the store directory to add to.
const WRITER_ENV: &str = "TERN_HISTORY_WRITER_DIR";
const PROCESS_ADDS: usize = 1000;

/// The body of each child process (a no-op in a normal test run).
#[test]
fn history_writer_process() {
    let Some(dir) = std::env::var_os(WRITER_ENV) else { return };
    let who = std::env::var("TERN_HISTORY_WRITER_ID").expect("writer id");
    let store = HistoryStore::open(Path::new(&dir), roomy()).expect("opens");
    for n in 0..PROCESS_ADDS {
        store.add("shared", &format!("process {who} text {n}")).expect("no writer fails");
    }
}

#[test]
fn two_processes_lose_nothing() {
    let dir = temp_dir("processes");
    std::fs::create_dir_all(&dir).expect("dir");
    let exe = std::env::current_exe().expect("this test binary");
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|who| {
            std::process::Command::new(&exe)
                .args(["--exact", "history_writer_process", "--test-threads", "1"])
                .env(WRITER_ENV, &dir)
                .env("TERN_HISTORY_WRITER_ID", who)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("starts a writer process")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("writer ends").success(), "a writer process failed");
    }
    let store = HistoryStore::open(&dir, roomy()).expect("opens");
    let texts = store.texts("shared").expect("reads");
    assert_eq!(texts.len(), 2 * PROCESS_ADDS, "every add of both processes landed");
    for who in ["a", "b"] {
        let mine: Vec<&String> = texts.iter().filter(|t| t.starts_with(&format!("process {who} "))).collect();
        let want: Vec<String> = (0..PROCESS_ADDS).map(|n| format!("process {who} text {n}")).collect();
        assert_eq!(mine, want.iter().collect::<Vec<_>>(), "process {who}'s texts, in its order");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `key`'s file name (the key hex-encoded).
fn file_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}.hist", key.bytes().map(|b| format!("{b:02x}")).collect::<String>()))
}

fn record(text: &str) -> Vec<u8> {
    let mut b = (text.len() as u32).to_le_bytes().to_vec();
    b.extend_from_slice(text.as_bytes());
    b
}

#[test]
fn damaged_files_are_read_to_the_damage_and_repaired() {
    let dir = temp_dir("damaged");
    let store = HistoryStore::open(&dir, HistoryOptions::default()).expect("opens");
    let mut bytes = b"TERNHIS1".to_vec();
    bytes.extend(record("first"));
    bytes.extend(record("second"));
    bytes.extend([0xff, 0xff, 0xff, 0x7f, b'x']); // a length past the end
    std::fs::write(file_of(&dir, "k"), &bytes).expect("writes");
    assert_eq!(store.texts("k").expect("damage is not an error"), ["first", "second"]);
    store.add("k", "third").expect("adds");
    let reopened = HistoryStore::open(&dir, HistoryOptions::default()).expect("opens");
    assert_eq!(reopened.texts("k").expect("reads"), ["first", "second", "third"]);
    let mut fixed = b"TERNHIS1".to_vec();
    for t in ["first", "second", "third"] {
        fixed.extend(record(t));
    }
    assert_eq!(std::fs::read(file_of(&dir, "k")).expect("reads"), fixed, "the file was rewritten whole");
    // Not UTF-8, not a history file at all: the same.
    let mut bad = b"TERNHIS1".to_vec();
    bad.extend(record("ok"));
    bad.extend([2, 0, 0, 0, 0xc3, 0x28]);
    std::fs::write(file_of(&dir, "u"), &bad).expect("writes");
    assert_eq!(store.texts("u").expect("reads"), ["ok"]);
    std::fs::write(file_of(&dir, "g"), b"GGUF garbage").expect("writes");
    assert!(store.texts("g").expect("reads").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_over_the_cap_are_read_within_the_cap() {
    let dir = temp_dir("oversized");
    let cap = 4096;
    let store =
        HistoryStore::open(&dir, HistoryOptions { max_bytes_per_key: cap, max_total_bytes: 1 << 20 }).expect("opens");
    // 19 MB of texts another writer left: only the newest within the cap are read.
    let mut bytes = b"TERNHIS1".to_vec();
    let n = 190_000;
    for i in 0..n {
        bytes.extend(record(&format!("text number {i:08} with some padding to make it long ......................")));
    }
    // One text far longer than the cap, last: only its end is kept.
    let long = format!("{}é-the-end", "x".repeat(2 * cap));
    bytes.extend(record(&long));
    std::fs::write(file_of(&dir, "big"), &bytes).expect("writes");
    let texts = store.texts("big").expect("reads");
    assert_eq!(texts.len(), 1, "the long text alone fills the cap");
    assert!(texts[0].len() <= cap && texts[0].ends_with("é-the-end"), "{}", texts[0].len());
    // Without the long text: the newest texts that fit, in order.
    bytes.truncate(bytes.len() - record(&long).len());
    std::fs::write(file_of(&dir, "big2"), &bytes).expect("writes");
    let texts = store.texts("big2").expect("reads");
    assert!(texts.iter().map(String::len).sum::<usize>() <= cap);
    assert!(texts.len() > 10 && texts.last().expect("some").starts_with(&format!("text number {:08}", n - 1)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_store_cap_removes_only_its_own_files() {
    let dir = temp_dir("foreign");
    std::fs::create_dir_all(&dir).expect("dir");
    // Files in the directory the store did not write: a foreign name, a store name without the
    // store's format, another extension.
    let foreign = [dir.join("notes.hist"), dir.join("6b6b.hist"), dir.join("6b.txt")];
    for f in &foreign {
        std::fs::write(f, vec![b'z'; 5000]).expect("writes");
    }
    let store =
        HistoryStore::open(&dir, HistoryOptions { max_bytes_per_key: 100, max_total_bytes: 250 }).expect("opens");
    for k in ["a", "b", "c", "d", "e"] {
        store.add(k, &"0123456789".repeat(9)).expect("adds");
    }
    assert!(store.total_bytes().expect("sizes") <= 250, "only the store's files count");
    for f in &foreign {
        assert_eq!(std::fs::read(f).expect("still there").len(), 5000, "{} kept", f.display());
    }
    assert_eq!(store.texts("e").expect("reads").len(), 1, "the newest key stays");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failures_name_what_failed() {
    let dir = temp_dir("failures");
    std::fs::create_dir_all(&dir).expect("dir");
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, b"x").expect("writes");
    let e = HistoryStore::open(blocker.join("store"), HistoryOptions::default()).expect_err("not a directory");
    assert!(matches!(e, Error::Write { op: WriteOp::CreateDir, .. }), "{e:?}");
    assert!(e.to_string().starts_with("cannot create the directory"), "{e}");
    // The store's directory replaced by a file after opening: adding cannot lock or write.
    let gone = dir.join("gone");
    let store = HistoryStore::open(&gone, HistoryOptions::default()).expect("opens");
    std::fs::remove_dir_all(&gone).expect("removes");
    std::fs::write(&gone, b"x").expect("writes");
    let e = store.add("k", "text").expect_err("no directory");
    assert!(matches!(e, Error::Write { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(!msg.contains("read") && !msg.contains("GGUF"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}
