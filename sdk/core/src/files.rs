//! Files the SDK keeps for the app (the history store, tuning results): replaced atomically
//! through a temporary file of the writer's own, and read-modify-written under a lock that
//! holds across instances and processes.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result, WriteOp};

/// Suffix of temporary files (never a store's own extension).
pub(crate) const TEMP_SUFFIX: &str = "tmp";

/// A temporary name beside `path` that no other writer uses: this process's id and a counter.
pub(crate) fn unique_temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{}-{n}.{TEMP_SUFFIX}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` whole or not at all: a crash or a racing writer leaves the old or a
/// new version, never a torn one.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = unique_temp_path(path);
    std::fs::write(&tmp, bytes).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Write { op: WriteOp::Write, path: tmp.clone(), source: e }
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Write { op: WriteOp::Rename, path: path.to_path_buf(), source: e }
    })
}

/// An exclusive lock on a lock file, held until dropped: `flock` on Unix, which excludes other
/// processes and other open handles in this one (each lock opens the file anew). Elsewhere only
/// the callers' own mutexes exclude each other.
pub(crate) struct FileLock {
    _file: File,
}

impl FileLock {
    /// Waits for the lock on `path` (created if missing; never removed, so that every writer
    /// locks the same file).
    pub(crate) fn exclusive(path: &Path) -> Result<FileLock> {
        Self::take(path, true)?.ok_or_else(|| unreachable_lock(path))
    }

    /// The lock on `path` if no one holds it now.
    pub(crate) fn try_exclusive(path: &Path) -> Result<Option<FileLock>> {
        Self::take(path, false)
    }

    fn take(path: &Path, wait: bool) -> Result<Option<FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(Error::write(WriteOp::Lock, path))?;
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            let op = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
            loop {
                // SAFETY: flock on a descriptor this function owns.
                if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::Interrupted => continue,
                    std::io::ErrorKind::WouldBlock if !wait => return Ok(None),
                    _ => return Err(Error::Write { op: WriteOp::Lock, path: path.to_path_buf(), source: e }),
                }
            }
        }
        #[cfg(not(unix))]
        let _ = wait;
        Ok(Some(FileLock { _file: file }))
    }
}

fn unreachable_lock(path: &Path) -> Error {
    Error::Write {
        op: WriteOp::Lock,
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::WouldBlock, "the lock was not granted"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_differ_per_writer() {
        let p = Path::new("/x/abc.hist");
        let (a, b) = (unique_temp_path(p), unique_temp_path(p));
        assert_ne!(a, b);
        assert!(a.to_string_lossy().starts_with("/x/abc.hist.") && a.to_string_lossy().ends_with(".tmp"));
    }

    #[cfg(unix)]
    #[test]
    fn a_held_lock_excludes_another_handle() {
        let dir = std::env::temp_dir().join(format!("tern-files-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("k.lock");
        let held = FileLock::exclusive(&path).expect("lock");
        assert!(FileLock::try_exclusive(&path).expect("try").is_none(), "a second handle waits");
        drop(held);
        assert!(FileLock::try_exclusive(&path).expect("try").is_some(), "released on drop");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
