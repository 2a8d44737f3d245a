//! The history store: texts an app keeps for later answers to quote, persistent on disk and
//! scoped by a key the app chooses (one contact's thread for auto-reply, one task's earlier
//! answers, one document set). Sessions given a [`HistoryScope`] index the scope's texts as
//! drafting sources and add their answers to it.
//!
//! Texts, not token ids, are stored: they outlive a model change and any engine can use them.
//! Each key is one file in the store's directory (the key hex-encoded into the file name, so
//! any key is a safe name). Adding a text rereads the file, appends and rewrites it whole
//! through a temporary file of the writer's own and a rename, under the key's lock file: a crash
//! leaves the old or the new version, never a torn one, and writers in other instances or
//! processes each land (none overwrites what another added). Each key is capped in bytes
//! (oldest texts go first; a file over the cap is never read whole) and the whole store too
//! (least recently written keys go first; only files this store's format names are removed).
//!
//! Drafts are an optimisation: a damaged file is read up to the damage with a warning, and the
//! next write replaces it.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result, WriteOp};
use crate::files::{self, FileLock};
use crate::tokenizer::Tokenizer;

const MAGIC: &[u8; 8] = b"TERNHIS1";
const EXTENSION: &str = "hist";
const LOCK_EXTENSION: &str = "lock";

/// Longest key, in bytes (the file name holds it hex-encoded).
pub(crate) const MAX_KEY_BYTES: usize = 96;

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

/// What identifies one version of a key's file: a rename brings a new file (inode), a write
/// a new length or time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = fs::metadata(path).ok()?;
        #[cfg(unix)]
        let ino = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let ino = 0;
        Some(Stamp { ino, len: m.len(), modified: m.modified().ok() })
    }
}

#[derive(Debug, Default)]
struct State {
    /// Texts of the keys read or written so far, and the file version they came from (None:
    /// no file).
    loaded: HashMap<String, (Option<Stamp>, Vec<String>)>,
    /// Bumped on every change of a key seen by this instance, so that readers can cache what
    /// they derive from it.
    versions: HashMap<String, u64>,
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
        fs::create_dir_all(&dir).map_err(Error::write(WriteOp::CreateDir, &dir))?;
        Ok(Arc::new(HistoryStore { dir, opts, state: Mutex::new(State::default()) }))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn options(&self) -> HistoryOptions {
        self.opts
    }

    /// Adds a text to `key`'s scope (the oldest texts go when the cap is passed). Safe against
    /// other instances and processes adding to the same key: each text lands.
    pub fn add(&self, key: &str, text: &str) -> Result<()> {
        let path = self.path_of(key)?;
        if text.is_empty() {
            return Ok(());
        }
        let mut state = self.lock();
        let _key_lock = FileLock::exclusive(&path.with_extension(LOCK_EXTENSION))?;
        // Reread under the lock: another writer may have added since this instance last read.
        let mut texts: VecDeque<String> = read_texts(&path, self.opts.max_bytes_per_key)?.into();
        texts.push_back(text.to_owned());
        keep_within(&mut texts, self.opts.max_bytes_per_key);
        let texts: Vec<String> = texts.into();
        files::replace(&path, &encode(&texts))?;
        let stamp = Stamp::of(&path);
        self.changed(&mut state, key, stamp, texts);
        drop(_key_lock);
        drop(state);
        self.enforce_total(&path)
    }

    /// The texts of `key`'s scope, oldest first (none for a key never written; those before
    /// the damage of a damaged file, with a warning).
    pub fn texts(&self, key: &str) -> Result<Vec<String>> {
        let path = self.path_of(key)?;
        let mut state = self.lock();
        self.refresh(&mut state, key, &path)?;
        Ok(state.loaded[key].1.clone())
    }

    /// The texts of `key`'s scope as the drafter indexes them: token ids, no BOS, special-token
    /// text taken as plain text.
    pub fn token_ids(&self, key: &str, tokenizer: &Tokenizer) -> Result<Vec<Vec<u32>>> {
        self.texts(key)?.iter().map(|t| tokenizer.encode(t, false, false)).collect()
    }

    /// A number that changes whenever `key`'s texts do (0 while they were never read or
    /// written in this process). Changes by other instances and processes show after the next
    /// read ([`HistoryStore::texts`]).
    pub fn version(&self, key: &str) -> u64 {
        self.lock().versions.get(key).copied().unwrap_or(0)
    }

    /// Whether `key`'s file changed since this instance last read or wrote it.
    pub(crate) fn changed_on_disk(&self, key: &str) -> bool {
        let Ok(path) = self.path_of(key) else { return false };
        let state = self.lock();
        state.loaded.get(key).is_none_or(|(stamp, _)| *stamp != Stamp::of(&path))
    }

    /// Forgets `key`'s texts, on disk too.
    pub fn clear(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        let mut state = self.lock();
        let _key_lock = FileLock::exclusive(&path.with_extension(LOCK_EXTENSION))?;
        remove_if_present(&path)?;
        self.changed(&mut state, key, None, Vec::new());
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

    /// Bytes the store's files take on disk (all keys).
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

    fn changed(&self, state: &mut State, key: &str, stamp: Option<Stamp>, texts: Vec<String>) {
        state.loaded.insert(key.to_owned(), (stamp, texts));
        *state.versions.entry(key.to_owned()).or_insert(0) += 1;
    }

    /// Rereads `key` when its file is not the version last read.
    fn refresh(&self, state: &mut State, key: &str, path: &Path) -> Result<()> {
        let stamp = Stamp::of(path);
        if state.loaded.get(key).is_some_and(|(s, _)| *s == stamp) {
            return Ok(());
        }
        let texts = read_texts(path, self.opts.max_bytes_per_key)?;
        let same = state.loaded.get(key).is_some_and(|(_, t)| *t == texts);
        if same {
            state.loaded.insert(key.to_owned(), (stamp, texts));
        } else {
            self.changed(state, key, stamp, texts);
        }
        Ok(())
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

    /// The key files of this store: named as it names them (a hex key and the extension) and
    /// starting with its magic bytes. Other files in the directory are never counted or removed.
    fn files(&self) -> Result<Vec<PathBuf>> {
        let entries = fs::read_dir(&self.dir).map_err(|source| Error::Io { path: self.dir.clone(), source })?;
        Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| is_store_file(p)).collect())
    }

    /// Drops the least recently written keys (never `keep`) while the store is over its cap.
    /// A key another writer holds locked right now is left for a later pass.
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
            let Some(_key_lock) = FileLock::try_exclusive(&path.with_extension(LOCK_EXTENSION))? else { continue };
            remove_if_present(&path)?;
            total -= len;
            // Whichever key it was, reread it from disk next time.
            let gone: Vec<String> =
                state.loaded.keys().filter(|k| self.path_of(k).is_ok_and(|p| p == path)).cloned().collect();
            for k in gone {
                self.changed(&mut state, &k, None, Vec::new());
            }
        }
        Ok(())
    }
}

/// A name this store gives: `<hex key>.hist`, the key 1 to [`MAX_KEY_BYTES`] bytes, and the
/// file starting with the store's magic bytes.
fn is_store_file(path: &Path) -> bool {
    let (Some(stem), Some(ext)) = (path.file_stem().and_then(|s| s.to_str()), path.extension()) else {
        return false;
    };
    let named = ext == EXTENSION
        && !stem.is_empty()
        && stem.len() % 2 == 0
        && stem.len() <= 2 * MAX_KEY_BYTES
        && stem.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let mut magic = [0u8; 8];
    named && fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == *MAGIC
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::Write { op: WriteOp::Remove, path: path.to_path_buf(), source: e })
        }
        _ => Ok(()),
    }
}

/// Drops the oldest texts while they pass `cap` bytes; a single text longer than the cap keeps
/// its end (cut at a character boundary).
fn keep_within(texts: &mut VecDeque<String>, cap: usize) {
    let mut bytes: usize = texts.iter().map(String::len).sum();
    while bytes > cap && texts.len() > 1 {
        bytes -= texts.pop_front().map_or(0, |t| t.len());
    }
    if let Some(t) = texts.front_mut().filter(|t| t.len() > cap) {
        let mut cut = t.len() - cap;
        while !t.is_char_boundary(cut) {
            cut += 1;
        }
        *t = t[cut..].to_owned();
    }
}

fn encode(texts: &[String]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + texts.iter().map(|t| t.len() + 4).sum::<usize>());
    bytes.extend_from_slice(MAGIC);
    for t in texts {
        bytes.extend_from_slice(&(t.len() as u32).to_le_bytes());
        bytes.extend_from_slice(t.as_bytes());
    }
    bytes
}

/// Reads a key's file, keeping only the newest texts within `cap` bytes: memory stays near
/// the cap whatever the file's size, and a text longer than the cap is read from its end only.
/// A missing file is an empty scope; a damaged one gives the texts before the damage (with a
/// warning), and the next write replaces it.
fn read_texts(path: &Path, cap: usize) -> Result<Vec<String>> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
    };
    let mut r = BufReader::with_capacity(64 << 10, file);
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let mut texts = VecDeque::new();
    let damage = match read_records(&mut r, cap, &mut texts) {
        Ok(None) => return Ok(texts.into()),
        Ok(Some(what)) => what,
        Err(e) => return Err(io(e)),
    };
    log::warn!(
        "history file {} is damaged ({damage}): {} texts before the damage kept; the next write replaces it",
        path.display(),
        texts.len()
    );
    Ok(texts.into())
}

/// The records of a history file into `texts` (capped as it goes); Some(what) where the file
/// is damaged.
fn read_records(
    r: &mut BufReader<fs::File>,
    cap: usize,
    texts: &mut VecDeque<String>,
) -> std::io::Result<Option<&'static str>> {
    let mut magic = [0u8; 8];
    if !read_full(r, &mut magic)? || magic != *MAGIC {
        return Ok(Some("not a history file"));
    }
    loop {
        let mut len = [0u8; 4];
        match r.read(&mut len[..1])? {
            0 => return Ok(None),
            _ if !read_full(r, &mut len[1..])? => return Ok(Some("truncated length")),
            _ => {}
        }
        let len = u32::from_le_bytes(len) as usize;
        if len == 0 {
            return Ok(Some("an empty text"));
        }
        // Of a text longer than the cap only its end can be kept.
        let skip = len.saturating_sub(cap);
        let mut buf = vec![0u8; len - skip];
        if skip > 0 {
            r.seek_relative(skip as i64)?;
        }
        if !read_full(r, &mut buf)? {
            return Ok(Some("truncated text"));
        }
        if skip > 0 {
            // Cut at the first character boundary.
            let start = buf.iter().position(|&b| (b as i8) >= -0x40).unwrap_or(buf.len());
            buf.drain(..start);
        }
        let Ok(text) = String::from_utf8(buf) else { return Ok(Some("a text is not UTF-8")) };
        texts.push_back(text);
        keep_within(texts, cap);
    }
}

/// Fills `buf`; false at an end of file before it is full.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
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
        drop(store);
        let store = HistoryStore::open(&dir, HistoryOptions::default()).expect("reopens");
        assert_eq!(store.texts("alice").expect("reads"), ["see you at 7", "sure thing"]);
        assert_eq!(store.texts("bob/../x").expect("reads"), ["other"]);
        assert!(store.texts("nobody").expect("reads").is_empty());
        // Versions count this instance's changes: a clear is one.
        let v = store.version("alice");
        store.clear("alice").expect("clears");
        assert!(store.texts("alice").expect("reads").is_empty());
        assert_ne!(store.version("alice"), v);
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
        // Damaged files are read up to the damage, and the next write repairs them.
        fs::write(dir.join("6b.hist"), b"TERNHIS1\x02\0\0\0ok\xff\xff\xff\x7fabc").expect("writes");
        assert_eq!(store.texts("k").expect("skipped, not an error"), ["ok"]);
        fs::write(dir.join("6c.hist"), b"garbage").expect("writes");
        assert!(store.texts("l").expect("skipped, not an error").is_empty());
        store.add("l", "new").expect("adds over the damage");
        assert_eq!(store.texts("l").expect("reads"), ["new"]);
        let reopened = HistoryStore::open(&dir, HistoryOptions::default()).expect("opens");
        assert_eq!(reopened.texts("l").expect("repaired on disk"), ["new"]);
        assert!(HistoryStore::open(&dir, HistoryOptions { max_bytes_per_key: 0, max_total_bytes: 1 }).is_err());
        let _ = fs::remove_dir_all(&dir);
    }
}
