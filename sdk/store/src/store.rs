//! The store directory: where models live, which are there, deleting them.

use std::fs;
use std::path::{Path, PathBuf};

use crate::download::{self, DownloadEvent, DownloadOptions};
use crate::error::{io_error, Result};
use crate::manifest::{sha256_hex, ModelSpec};
use crate::StoreError;

/// Suffix of a download in progress.
pub(crate) const PART_SUFFIX: &str = ".part";

/// A directory of model files. Only verified files carry a model's name; downloads in progress
/// are `<name>.part`.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A file in the store directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    pub file_name: String,
    pub size: u64,
    /// False for a download in progress or interrupted (`.part`).
    pub complete: bool,
}

impl Store {
    /// Uses `dir` (created if missing) as the store.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Store> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        Ok(Store { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `spec` lives once downloaded.
    pub fn path(&self, spec: &ModelSpec) -> PathBuf {
        self.dir.join(&spec.file_name)
    }

    pub(crate) fn part_path(&self, spec: &ModelSpec) -> PathBuf {
        self.dir.join(format!("{}{PART_SUFFIX}", spec.file_name))
    }

    /// The model's file if it is in the store, `None` otherwise. Its hash was checked when it
    /// was downloaded; [`verify`](Self::verify) checks it again.
    pub fn installed(&self, spec: &ModelSpec) -> Option<PathBuf> {
        spec.validate().ok()?;
        let path = self.path(spec);
        let meta = fs::metadata(&path).ok()?;
        (meta.is_file() && meta.len() == spec.size).then_some(path)
    }

    /// Hashes the stored file again; a file that no longer matches is deleted.
    pub fn verify(&self, spec: &ModelSpec) -> Result<()> {
        spec.validate()?;
        let path = self.path(spec);
        let file = fs::File::open(&path).map_err(io_error(&path))?;
        let actual = sha256_hex(std::io::BufReader::new(file)).map_err(io_error(&path))?;
        if actual != spec.sha256 {
            fs::remove_file(&path).map_err(io_error(&path))?;
            return Err(StoreError::HashMismatch { expected: spec.sha256.clone(), actual });
        }
        Ok(())
    }

    /// The files in the store, sorted by name.
    pub fn list(&self) -> Result<Vec<StoredFile>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_error(&self.dir))? {
            let entry = entry.map_err(io_error(&self.dir))?;
            let meta = entry.metadata().map_err(io_error(entry.path()))?;
            if !meta.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let (file_name, complete) = match name.strip_suffix(PART_SUFFIX) {
                Some(base) => (base.to_owned(), false),
                None => (name, true),
            };
            out.push(StoredFile { file_name, size: meta.len(), complete });
        }
        out.sort_by(|a, b| (&a.file_name, !a.complete).cmp(&(&b.file_name, !b.complete)));
        Ok(out)
    }

    /// Deletes the model's file and any partial download of it; returns whether there was any.
    pub fn delete(&self, spec: &ModelSpec) -> Result<bool> {
        spec.validate()?;
        let mut removed = false;
        for path in [self.path(spec), self.part_path(spec)] {
            match fs::remove_file(&path) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&path)(e)),
            }
        }
        Ok(removed)
    }

    /// Downloads `spec` from `url` unless it is already here, and returns its path. See the
    /// crate documentation for the steps; every failure is a typed [`StoreError`].
    pub fn download(
        &self,
        spec: &ModelSpec,
        url: &str,
        opts: &DownloadOptions,
        on_event: &mut dyn FnMut(&DownloadEvent),
    ) -> Result<PathBuf> {
        spec.validate()?;
        if let Some(path) = self.installed(spec) {
            on_event(&DownloadEvent::Done { path: path.clone() });
            return Ok(path);
        }
        download::fetch(self, spec, url, opts, on_event)
    }
}
