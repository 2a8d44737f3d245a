//! The history store: texts an app keeps for later answers to quote, persistent on disk and
//! scoped by a key the app chooses (one contact's thread for auto-reply, one task's earlier
//! answers, one document set). Sessions given a [`HistoryScope`] index the scope's texts as
//! drafting sources and add their answers to it.
//!
//! Texts, not token ids, are stored: they outlive a model change and any engine can use them.
//! Each key is one file in the store's directory (the key hex-encoded into the file name, so
//! any key is a safe name), rewritten whole through a temporary file and a rename: a crash
//! leaves the old or the new version, never a torn one. Each key is capped in bytes (oldest
//! texts go first) and the whole store too (least recently written keys go first).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

const MAGIC: &[u8; 8] = b"TERNHIS1";
const EXTENSION: &str = "hist";

/// Longest key, in bytes (the file name holds it hex-encoded).
pub const MAX_KEY_BYTES: usize = 96;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryOptions {
    /// Bytes of text kept per key; the oldest texts are dropped beyond it.
    pub max_bytes_per_key: usize,
    /// Bytes of text kept in the whole store; the least recently written keys are dropped
    /// beyond it.
    pub max_total_bytes: usize,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions { max_bytes_per_key: 64 * 1024, max_total_bytes: 8 * 1024 * 1024 }
    }
}

/// Which part of a store a session drafts from, and whether it adds its answers there.
#[derive(Debug, Clone)]
pub struct HistoryScope {
    pub store: Arc<HistoryStore>,
    pub key: String,
    /// Add each finished answer to the scope (default in [`HistoryScope::new`]: yes).
    pub record_answers: bool,
}

impl HistoryScope {
    pub fn new(store: Arc<HistoryStore>, key: impl Into<String>) -> HistoryScope {
        HistoryScope { store, key: key.into(), record_answers: true }
    }
}

#[derive(Debug)]
pub struct HistoryStore {
    dir: PathBuf,
    opts: HistoryOptions,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Texts of the keys read or written so far.
    loaded: HashMap<String, Vec<String>>,
    /// Bumped on every change of a key, so that readers can cache what they derive from it.
    versions: HashMap<String, u64>,
    /// Write order of keys (for the store cap): a counter value per key.
    clock: u64,
}

impl HistoryStore {
    /// Opens (creating it if needed) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: HistoryOptions) -> Result<Arc<HistoryStore>> {
        if opts.max_bytes_per_key == 0 || opts.max_total_bytes < opts.max_bytes_per_key {
            return Err(Error::InvalidOption(
                "history caps: max_bytes_per_key must be positive and at most max_total_bytes".into(),
            ));
        }
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
        Ok(Arc::new(HistoryStore { dir, opts, state: Mutex::new(State::default()) }))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn options(&self) -> HistoryOptions {
        self.opts
    }

    /// Adds a text to `key`'s scope (the oldest texts go when the cap is passed).
    pub fn add(&self, key: &str, text: &str) -> Result<()> {
        let path = self.path_of(key)?;
        if text.is_empty() {
            return Ok(());
        }
        let mut state = self.lock();
        let mut texts = self.load(&mut state, key, &path)?.clone();
        texts.push(text.to_owned());
        // Oldest first out; a single text longer than the cap keeps its end.
        let mut bytes: usize = texts.iter().map(String::len).sum();
        while bytes > self.opts.max_bytes_per_key && texts.len() > 1 {
            bytes -= texts.remove(0).len();
        }
        if bytes > self.opts.max_bytes_per_key {
            let t = &texts[0];
            let mut cut = t.len() - self.opts.max_bytes_per_key;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            texts[0] = t[cut..].to_owned();
        }
        write_texts(&path, &texts)?;
        state.clock += 1;
        let version = state.versions.entry(key.to_owned()).or_insert(0);
        *version += 1;
        state.loaded.insert(key.to_owned(), texts);
        drop(state);
        self.enforce_total(&path)
    }

    /// The texts of `key`'s scope, oldest first (none for a key never written).
    pub fn texts(&self, key: &str) -> Result<Vec<String>> {
        let path = self.path_of(key)?;
        let mut state = self.lock();
        Ok(self.load(&mut state, key, &path)?.clone())
    }

    /// The texts of `key`'s scope as the drafter indexes them: token ids, no BOS, special-token
    /// text taken as plain text.
    pub fn token_ids(&self, key: &str, tokenizer: &Tokenizer) -> Result<Vec<Vec<u32>>> {
        self.texts(key)?.iter().map(|t| tokenizer.encode(t, false, false)).collect()
    }

    /// A number that changes whenever `key`'s texts do (0 while they were never read or
    /// written in this process).
    pub fn version(&self, key: &str) -> u64 {
        self.lock().versions.get(key).copied().unwrap_or(0)
    }

    /// Forgets `key`'s texts, on disk too.
    pub fn clear(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        let mut state = self.lock();
        remove_if_present(&path)?;
        state.loaded.insert(key.to_owned(), Vec::new());
        *state.versions.entry(key.to_owned()).or_insert(0) += 1;
        Ok(())
    }

    /// Forgets every key's texts.
    pub fn clear_all(&self) -> Result<()> {
        let mut state = self.lock();
        for path in self.files()? {
            remove_if_present(&path)?;
        }
        state.loaded.clear();
        for v in state.versions.values_mut() {
            *v += 1;
        }
        Ok(())
    }

    /// Bytes of text the store holds on disk (all keys).
    pub fn total_bytes(&self) -> Result<u64> {
        let _state = self.lock();
        let mut total = 0;
        for path in self.files()? {
            total += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        }
        Ok(total)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent with the files in
        // a way that matters: the files are the truth and are reread.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn load<'s>(&self, state: &'s mut State, key: &str, path: &Path) -> Result<&'s Vec<String>> {
        if !state.loaded.contains_key(key) {
            let texts = read_texts(path)?;
            state.loaded.insert(key.to_owned(), texts);
            let version = state.versions.entry(key.to_owned()).or_insert(0);
            *version = (*version).max(1);
        }
        Ok(&state.loaded[key])
    }

    fn path_of(&self, key: &str) -> Result<PathBuf> {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(Error::InvalidOption(format!(
                "history keys must have 1 to {MAX_KEY_BYTES} bytes (got {})",
                key.len()
            )));
        }
        let mut name = String::with_capacity(key.len() * 2 + 6);
        for b in key.bytes() {
            name.push_str(&format!("{b:02x}"));
        }
        name.push('.');
        name.push_str(EXTENSION);
        Ok(self.dir.join(name))
    }

    fn files(&self) -> Result<Vec<PathBuf>> {
        let entries = fs::read_dir(&self.dir).map_err(|source| Error::Io { path: self.dir.clone(), source })?;
        Ok(entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == EXTENSION))
            .collect())
    }

    /// Drops the least recently written keys (never `keep`) while the store is over its cap.
    fn enforce_total(&self, keep: &Path) -> Result<()> {
        let mut state = self.lock();
        let mut files: Vec<(PathBuf, u64, std::time::SystemTime)> = self
            .files()?
            .into_iter()
            .filter_map(|p| {
                let m = fs::metadata(&p).ok()?;
                Some((p, m.len(), m.modified().ok()?))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort_by_key(|f| f.2);
        for (path, len, _) in files {
            if total <= self.opts.max_total_bytes as u64 {
                break;
            }
            if path == keep {
                continue;
            }
            remove_if_present(&path)?;
            total -= len;
            // Whichever key it was, reread it from disk next time.
            state.loaded.retain(|k, _| self.path_of(k).is_ok_and(|p| p != path));
            for v in state.versions.values_mut() {
                *v += 1;
            }
        }
        Ok(())
    }
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io { path: path.to_path_buf(), source: e }),
        _ => Ok(()),
    }
}

fn write_texts(path: &Path, texts: &[String]) -> Result<()> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + texts.iter().map(|t| t.len() + 4).sum::<usize>());
    bytes.extend_from_slice(MAGIC);
    for t in texts {
        bytes.extend_from_slice(&(t.len() as u32).to_le_bytes());
        bytes.extend_from_slice(t.as_bytes());
    }
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, &bytes).map_err(|source| Error::Io { path: tmp.clone(), source })?;
    fs::rename(&tmp, path).map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

/// Reads a key's file; a missing file is an empty scope, a damaged one an error.
fn read_texts(path: &Path) -> Result<Vec<String>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
    };
    let corrupt = |what: &str| Error::Corrupt(format!("history file {}: {what}", path.display()));
    let Some(mut rest) = bytes.strip_prefix(MAGIC.as_slice()) else {
        return Err(corrupt("not a history file"));
    };
    let mut texts = Vec::new();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(corrupt("truncated length"));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > tail.len() {
            return Err(corrupt("truncated text"));
        }
        let (text, tail) = tail.split_at(len);
        let text = std::str::from_utf8(text).map_err(|_| corrupt("text is not UTF-8"))?;
        texts.push(text.to_owned());
        rest = tail;
    }
    Ok(texts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tern-history-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn texts_persist_per_key_and_clear() {
        let dir = temp_dir("persist");
        let store = HistoryStore::open(&dir, HistoryOptions::default()).expect("opens");
        store.add("alice", "see you at 7").expect("adds");
        store.add("alice", "sure thing").expect("adds");
        store.add("bob/../x", "other").expect("any key is a safe file name");
        let v = store.version("alice");
        drop(store);
        let store = HistoryStore::open(&dir, HistoryOptions::default()).expect("reopens");
        assert_eq!(store.texts("alice").expect("reads"), ["see you at 7", "sure thing"]);
        assert_eq!(store.texts("bob/../x").expect("reads"), ["other"]);
        assert!(store.texts("nobody").expect("reads").is_empty());
        store.clear("alice").expect("clears");
        assert!(store.texts("alice").expect("reads").is_empty());
        assert!(store.version("alice") != v || v == 0);
        store.clear_all().expect("clears all");
        assert!(store.texts("bob/../x").expect("reads").is_empty());
        assert_eq!(store.total_bytes().expect("sizes"), 0);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn caps_drop_the_oldest() {
        let dir = temp_dir("caps");
        let opts = HistoryOptions { max_bytes_per_key: 10, max_total_bytes: 30 };
        let store = HistoryStore::open(&dir, opts).expect("opens");
        store.add("k", "aaaa").expect("adds");
        store.add("k", "bbbb").expect("adds");
        store.add("k", "cccc").expect("adds");
        assert_eq!(store.texts("k").expect("reads"), ["bbbb", "cccc"]);
        store.add("k", "a text longer than the cap, ending in é!").expect("adds");
        let t = store.texts("k").expect("reads");
        assert!(t.len() == 1 && t[0].len() <= 10 && t[0].ends_with("é!"), "{t:?}");
        // The store cap drops whole keys, least recently written first.
        for k in ["k1", "k2", "k3", "k4"] {
            store.add(k, "0123456789").expect("adds");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(store.total_bytes().expect("sizes") <= 30);
        assert_eq!(store.texts("k4").expect("reads"), ["0123456789"], "the newest key stays");
        assert!(store.texts("k3").expect("reads").is_empty() && store.texts("k").expect("reads").is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_keys_and_damaged_files_are_typed_errors() {
        let dir = temp_dir("bad");
        let store = HistoryStore::open(&dir, HistoryOptions::default()).expect("opens");
        assert!(matches!(store.add("", "x"), Err(Error::InvalidOption(_))));
        assert!(matches!(store.texts(&"k".repeat(MAX_KEY_BYTES + 1)), Err(Error::InvalidOption(_))));
        fs::write(dir.join("6b.hist"), b"TERNHIS1\xff\xff\xff\x7fabc").expect("writes");
        assert!(matches!(store.texts("k"), Err(Error::Corrupt(_))));
        fs::write(dir.join("6c.hist"), b"garbage").expect("writes");
        assert!(matches!(store.texts("l"), Err(Error::Corrupt(_))));
        assert!(HistoryStore::open(&dir, HistoryOptions { max_bytes_per_key: 0, max_total_bytes: 1 }).is_err());
        let _ = fs::remove_dir_all(&dir);
    }
}
