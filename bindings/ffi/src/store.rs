//! `ModelStore` (a directory of verified model files, `tern-store`) and `Download` (one
//! download's progress, pulled event by event like `TokenStream`).
//!
//! A download runs on a thread of its own and pushes its events into a channel that
//! `Download::next` awaits. Cancelling (`Download::cancel`, abandoning a `next()` call, dropping
//! the object) ends the stream at once with `Cancelled`; the thread stops at its next read and
//! keeps what arrived for a later resume.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::channel::{run_blocking, Chan, OnAbandon};
use crate::error::TernError;

/// A model file the store can fetch and check.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ModelSpec {
    /// Short name (`smollm2`).
    pub name: String,
    /// File name in the store directory (no path).
    pub file_name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the file, 64 hex digits.
    pub sha256: String,
}

impl From<ModelSpec> for tern_store::ModelSpec {
    fn from(m: ModelSpec) -> Self {
        tern_store::ModelSpec::new(&m.name, &m.file_name, m.size, &m.sha256)
    }
}

impl From<tern_store::ModelSpec> for ModelSpec {
    fn from(m: tern_store::ModelSpec) -> Self {
        ModelSpec { name: m.name, file_name: m.file_name, size: m.size, sha256: m.sha256 }
    }
}

/// The models Tern is tested with (SmolLM2-135M, Qwen2.5-Coder-0.5B, Gemma 3 270M), with their
/// sizes and hashes. The app supplies the URL it serves each from.
#[uniffi::export]
pub fn known_models() -> Vec<ModelSpec> {
    tern_store::known_models().into_iter().map(Into::into).collect()
}

#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DownloadOptions {
    /// Resumptions after a broken connection within one download (a later download of the same
    /// model resumes too).
    #[uniffi(default = 5)]
    pub retries: u32,
    /// Pause before the first retry, doubled each time up to 30 s.
    #[uniffi(default = 1000)]
    pub retry_delay_ms: u32,
    /// A connection that delivers nothing for this long counts as broken.
    #[uniffi(default = 60000)]
    pub stall_timeout_ms: u32,
    #[uniffi(default = 30000)]
    pub connect_timeout_ms: u32,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        let o = tern_store::DownloadOptions::default();
        let ms = |d: Duration| d.as_millis().min(u32::MAX as u128) as u32;
        DownloadOptions {
            retries: o.retries,
            retry_delay_ms: ms(o.retry_delay),
            stall_timeout_ms: ms(o.stall_timeout),
            connect_timeout_ms: ms(o.connect_timeout),
        }
    }
}

impl DownloadOptions {
    fn to_store(&self, cancel: Arc<AtomicBool>) -> tern_store::DownloadOptions {
        let ms = |n: u32| Duration::from_millis(n.into());
        tern_store::DownloadOptions {
            retries: self.retries,
            retry_delay: ms(self.retry_delay_ms),
            stall_timeout: ms(self.stall_timeout_ms),
            connect_timeout: ms(self.connect_timeout_ms),
            cancel: Some(cancel),
        }
    }
}

/// Progress of a download, in order: `Started`, `Progress`… (then, after a broken connection,
/// `Retrying`, `Started`, `Progress`…), `Verifying`, `Done`. A model already in the store gives
/// `Done` alone.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum DownloadEvent {
    /// A transfer began; `from` bytes were already on disk (a resumed download).
    Started { from: u64, total: u64 },
    /// `downloaded` of `total` bytes are on disk (about every megabyte).
    Progress { downloaded: u64, total: u64 },
    /// The connection broke at `downloaded` bytes; retry `attempt` resumes from there.
    Retrying { downloaded: u64, attempt: u32 },
    /// All bytes are there; their SHA-256 is being checked.
    Verifying,
    /// The verified model is at `path`, ready for `Engine.load`.
    Done { path: String },
}

impl From<&tern_store::DownloadEvent> for DownloadEvent {
    fn from(e: &tern_store::DownloadEvent) -> Self {
        use tern_store::DownloadEvent as E;
        match e {
            E::Started { from, total } => DownloadEvent::Started { from: *from, total: *total },
            E::Progress { downloaded, total } => DownloadEvent::Progress { downloaded: *downloaded, total: *total },
            E::Retrying { downloaded, attempt } => {
                DownloadEvent::Retrying { downloaded: *downloaded, attempt: *attempt }
            }
            E::Verifying => DownloadEvent::Verifying,
            E::Done { path } => DownloadEvent::Done { path: path.display().to_string() },
        }
    }
}

/// A file in the store directory.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct StoredFile {
    pub file_name: String,
    pub size: u64,
    /// False for a download in progress or interrupted.
    pub complete: bool,
}

impl From<tern_store::StoredFile> for StoredFile {
    fn from(f: tern_store::StoredFile) -> Self {
        StoredFile { file_name: f.file_name, size: f.size, complete: f.complete }
    }
}

/// A directory of model files. Only complete, verified files carry a model's name; downloads in
/// progress are `<file>.part`.
#[derive(uniffi::Object)]
pub struct ModelStore {
    inner: tern_store::Store,
}

#[uniffi::export]
impl ModelStore {
    /// Uses `dir` (created if missing) as the store, e.g. a `models` folder in the app's files.
    #[uniffi::constructor]
    pub fn open(dir: String) -> Result<Arc<ModelStore>, TernError> {
        Ok(Arc::new(ModelStore { inner: tern_store::Store::open(dir)? }))
    }

    pub fn dir(&self) -> String {
        self.inner.dir().display().to_string()
    }

    /// The model's path if it is in the store (complete, hash checked when it arrived).
    pub fn installed(&self, spec: ModelSpec) -> Option<String> {
        self.inner.installed(&spec.into()).map(|p| p.display().to_string())
    }

    /// Files in the store, sorted by name, partial downloads included.
    pub fn list(&self) -> Result<Vec<StoredFile>, TernError> {
        Ok(self.inner.list()?.into_iter().map(Into::into).collect())
    }

    /// Deletes the model's file and any partial download of it; whether there was any.
    pub fn delete(&self, spec: ModelSpec) -> Result<bool, TernError> {
        Ok(self.inner.delete(&spec.into())?)
    }

    /// Hashes the stored file again (on a thread of its own); a file that no longer matches is
    /// deleted and `HashMismatch` raised.
    pub async fn verify(&self, spec: ModelSpec) -> Result<(), TernError> {
        let store = self.inner.clone();
        run_blocking("verify", move || Ok(store.verify(&spec.into())?)).await
    }

    /// Starts downloading `spec` from `url` on a thread of its own (or finds it already here);
    /// pull the progress from the returned `Download`. Disk space, size and SHA-256 are checked,
    /// and the file gets its name only once verified.
    #[uniffi::method(default(options))]
    pub fn start_download(
        &self,
        spec: ModelSpec,
        url: String,
        options: DownloadOptions,
    ) -> Result<Arc<Download>, TernError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let opts = options.to_store(Arc::clone(&cancel));
        let chan: Arc<Chan<Item>> = Chan::new();
        let download = Arc::new(Download { chan: Arc::clone(&chan), cancel });
        let store = self.inner.clone();
        let spec: tern_store::ModelSpec = spec.into();
        std::thread::Builder::new()
            .name("tern-download".into())
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    store.download(&spec, &url, &opts, &mut |e| {
                        chan.push(Ok(e.into()));
                    })
                }));
                match result {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        chan.push(Err(e.into()));
                    }
                    Err(_) => {
                        chan.push(Err(TernError::panicked("download")));
                    }
                }
                chan.close();
            })
            .map_err(TernError::no_thread)?;
        Ok(download)
    }
}

type Item = Result<DownloadEvent, TernError>;

/// One download's progress. Dropping it cancels the download.
#[derive(uniffi::Object)]
pub struct Download {
    chan: Arc<Chan<Item>>,
    cancel: Arc<AtomicBool>,
}

impl Download {
    fn stop(&self) {
        if !self.cancel.swap(true, Ordering::AcqRel) {
            // End the stream now: the thread may sit in a read (up to the stall timeout) or a
            // retry pause before it sees the flag. Its later events are refused.
            self.chan.finish_with(Err(TernError::Cancelled));
        }
    }
}

#[uniffi::export]
impl Download {
    /// The next event; `null`/`nil` after `Done`. A failed download throws its error here
    /// (`HashMismatch`, `DownloadInterrupted`, `Http`, `Cancelled`, ...). Abandoning the call
    /// (cancelling the coroutine awaiting it) cancels the download.
    pub async fn next(&self) -> Result<Option<DownloadEvent>, TernError> {
        let guard = OnAbandon::new(|| self.stop());
        let item = self.chan.recv().await;
        guard.disarm();
        item.transpose()
    }

    /// Stops the download; the stream ends with `Cancelled`. What arrived stays on disk and the
    /// next download of the same model resumes from it.
    pub fn cancel(&self) {
        self.stop();
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        if !self.chan.is_closed() {
            self.stop();
        }
        self.chan.drop_receiver();
    }
}
