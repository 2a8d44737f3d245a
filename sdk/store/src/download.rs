//! One download: resumable transfer into `<file>.part`, verification, atomic rename.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fs4::FileExt;

use crate::error::{io_error, Result, StoreError};
use crate::manifest::{sha256_hex, ModelSpec};
use crate::store::Store;

/// Progress of [`Store::download`], in order: `Started`, `Progress`…, (`Retrying`, `Started`,
/// `Progress`…)…, `Verifying`, `Done`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadEvent {
    /// A transfer began; `from` bytes were already on disk (a resumed download).
    Started {
        from: u64,
        total: u64,
    },
    /// `downloaded` of `total` bytes are on disk.
    Progress {
        downloaded: u64,
        total: u64,
    },
    /// The connection broke at `downloaded` bytes; retry `attempt` resumes from there.
    Retrying {
        downloaded: u64,
        attempt: u32,
    },
    /// All bytes are there; their hash is being checked.
    Verifying,
    Done {
        path: PathBuf,
    },
}

#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// Resumptions after a broken connection within one call (the next call resumes too).
    pub retries: u32,
    /// Pause before a retry, doubled each time up to 30 s.
    pub retry_delay: Duration,
    /// A connection that delivers nothing for this long counts as broken.
    pub stall_timeout: Duration,
    pub connect_timeout: Duration,
    /// Set from any thread to stop the download; what arrived is kept for a later resume.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            retries: 5,
            retry_delay: Duration::from_secs(1),
            stall_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            cancel: None,
        }
    }
}

/// Progress is reported at most once per this many bytes (and at the end).
const PROGRESS_STEP: u64 = 1 << 20;

/// Whose certificates HTTPS trusts: the platform's verifier (see Cargo.toml), else the bundled
/// Mozilla roots.
fn tls_config() -> ureq::tls::TlsConfig {
    let roots =
        if cfg!(target_os = "android") { ureq::tls::RootCerts::WebPki } else { ureq::tls::RootCerts::PlatformVerifier };
    ureq::tls::TlsConfig::builder().root_certs(roots).build()
}

/// How one transfer attempt ended badly.
enum Failure {
    /// Worth resuming: the connection broke or the server had a passing problem.
    Transient(StoreError),
    Fatal(StoreError),
}

/// The partial file of a download, locked while this download owns it.
struct Part {
    file: File,
    path: PathBuf,
    len: u64,
}

impl Part {
    fn open(path: PathBuf, name: &str) -> Result<Part> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_error(&path))?;
        if FileExt::try_lock(&file).is_err() {
            return Err(StoreError::Busy(name.to_owned()));
        }
        let len = file.metadata().map_err(io_error(&path))?.len();
        Ok(Part { file, path, len })
    }

    fn truncate(&mut self) -> Result<()> {
        self.file.set_len(0).map_err(io_error(&self.path))?;
        self.len = 0;
        Ok(())
    }
}

/// How often a cancellable download's caller looks at the cancel flag while the transfer
/// waits on the network.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// What a download's transfer thread tells its caller.
enum Report {
    Event(DownloadEvent),
    Done(Result<PathBuf>),
}

/// Downloads `spec`. A cancellable download transfers on a thread of its own while the caller
/// watches the flag, so that a cancel returns at once even while a read waits on a stalled
/// connection (the transfer thread stops at its next read; what arrived stays for a resume).
pub(crate) fn fetch(
    store: &Store,
    spec: &ModelSpec,
    url: &str,
    opts: &DownloadOptions,
    on_event: &mut dyn FnMut(&DownloadEvent),
) -> Result<PathBuf> {
    let Some(cancel) = opts.cancel.clone() else { return fetch_here(store, spec, url, opts, on_event) };
    let cancelled = || cancel.load(Ordering::Relaxed);
    let (tx, rx) = std::sync::mpsc::channel();
    let (store, spec, url, opts) = (store.clone(), spec.clone(), url.to_owned(), opts.clone());
    let worker = std::thread::Builder::new()
        .name("tern-download".into())
        .spawn(move || {
            let events = tx.clone();
            let r = fetch_here(&store, &spec, &url, &opts, &mut |e| {
                let _ = events.send(Report::Event(e.clone()));
            });
            let _ = tx.send(Report::Done(r));
        })
        .map_err(|e| StoreError::Network(format!("cannot start the download thread: {e}")))?;
    loop {
        if cancelled() {
            return Err(StoreError::Cancelled);
        }
        match rx.recv_timeout(CANCEL_POLL) {
            Ok(Report::Event(e)) => on_event(&e),
            Ok(Report::Done(r)) => {
                let _ = worker.join();
                return r;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(StoreError::Network("the download thread stopped without a result".into()))
            }
        }
    }
}

fn fetch_here(
    store: &Store,
    spec: &ModelSpec,
    url: &str,
    opts: &DownloadOptions,
    on_event: &mut dyn FnMut(&DownloadEvent),
) -> Result<PathBuf> {
    let mut part = Part::open(store.part_path(spec), &spec.file_name)?;
    if part.len > spec.size {
        part.truncate()?;
    }
    let needed = spec.size - part.len;
    let available = fs4::available_space(store.dir()).map_err(io_error(store.dir()))?;
    if available < needed {
        return Err(StoreError::NotEnoughSpace { needed, available });
    }

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls_config())
        .http_status_as_error(false)
        .timeout_connect(Some(opts.connect_timeout))
        .timeout_recv_response(Some(opts.stall_timeout))
        .timeout_per_read(Some(opts.stall_timeout))
        .build()
        .into();
    let mut attempt = 0;
    while part.len < spec.size {
        match transfer(&agent, url, spec, &mut part, opts, on_event) {
            Ok(()) => {}
            Err(Failure::Transient(_)) if attempt < opts.retries => {
                attempt += 1;
                on_event(&DownloadEvent::Retrying { downloaded: part.len, attempt });
                let delay = opts.retry_delay.saturating_mul(1 << (attempt - 1).min(5)).min(Duration::from_secs(30));
                std::thread::sleep(delay);
            }
            Err(Failure::Transient(StoreError::Http { status })) => return Err(StoreError::Http { status }),
            Err(Failure::Transient(_)) => {
                return Err(StoreError::Interrupted { downloaded: part.len, total: spec.size })
            }
            Err(Failure::Fatal(e)) => return Err(e),
        }
    }
    part.file.sync_all().map_err(io_error(&part.path))?;

    on_event(&DownloadEvent::Verifying);
    part.file.seek(SeekFrom::Start(0)).map_err(io_error(&part.path))?;
    let actual = sha256_hex(std::io::BufReader::new(&part.file)).map_err(io_error(&part.path))?;
    if actual != spec.sha256 {
        let Part { file, path, .. } = part;
        drop(file);
        fs::remove_file(&path).map_err(io_error(&path))?;
        return Err(StoreError::HashMismatch { expected: spec.sha256.clone(), actual });
    }
    let dest = store.path(spec);
    fs::rename(&part.path, &dest).map_err(io_error(&dest))?;
    sync_dir(store.dir());
    on_event(&DownloadEvent::Done { path: dest.clone() });
    Ok(dest)
}

/// One request: asks for the bytes after what is on disk and appends what arrives.
fn transfer(
    agent: &ureq::Agent,
    url: &str,
    spec: &ModelSpec,
    part: &mut Part,
    opts: &DownloadOptions,
    on_event: &mut dyn FnMut(&DownloadEvent),
) -> std::result::Result<(), Failure> {
    let fatal = Failure::Fatal;
    let mut request = agent.get(url);
    if part.len > 0 {
        request = request.header("Range", format!("bytes={}-", part.len));
    }
    let mut response = request.call().map_err(classify)?;
    let status = response.status().as_u16();
    match status {
        206 => {
            let header = response.headers().get("content-range").and_then(|v| v.to_str().ok());
            match header.and_then(parse_content_range) {
                Some((start, total)) if start == part.len && total.is_none_or(|t| t == spec.size) => {}
                Some((_, Some(total))) if total != spec.size => {
                    return Err(fatal(StoreError::SizeMismatch { expected: spec.size, actual: total }))
                }
                // A range other than the one asked for: start over.
                _ => {
                    part.truncate().map_err(fatal)?;
                    return Err(Failure::Transient(StoreError::Network("unexpected Content-Range".into())));
                }
            }
        }
        200 => {
            // The server sends the whole file (it ignores ranges): start over.
            if part.len > 0 {
                part.truncate().map_err(fatal)?;
            }
            let length = response.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if let Some(len) = length.filter(|&l| l != spec.size) {
                return Err(fatal(StoreError::SizeMismatch { expected: spec.size, actual: len }));
            }
        }
        416 => {
            // Nothing after what we have: the partial file does not belong to this file.
            part.truncate().map_err(fatal)?;
            return Err(Failure::Transient(StoreError::Http { status }));
        }
        408 | 429 | 500..=599 => return Err(Failure::Transient(StoreError::Http { status })),
        _ => return Err(fatal(StoreError::Http { status })),
    }

    on_event(&DownloadEvent::Started { from: part.len, total: spec.size });
    part.file.seek(SeekFrom::Start(part.len)).map_err(|e| fatal(io_error(&part.path)(e)))?;
    let mut body = response.body_mut().as_reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut reported = part.len;
    loop {
        if opts.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(fatal(StoreError::Cancelled));
        }
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Transient(StoreError::Network(e.to_string()))),
        };
        if part.len + n > spec.size {
            part.truncate().map_err(fatal)?;
            return Err(fatal(StoreError::SizeMismatch { expected: spec.size, actual: part.len + n }));
        }
        part.file.write_all(&buf[..n as usize]).map_err(|e| fatal(io_error(&part.path)(e)))?;
        part.len += n;
        if part.len - reported >= PROGRESS_STEP || part.len == spec.size {
            reported = part.len;
            on_event(&DownloadEvent::Progress { downloaded: part.len, total: spec.size });
        }
    }
    if part.len < spec.size {
        // The body ended early without an error (no Content-Length): resume.
        return Err(Failure::Transient(StoreError::Network("the connection closed early".into())));
    }
    Ok(())
}

/// A failed request: a broken or slow connection is worth resuming; a server that cannot give
/// the file (redirects without end, an answer that is not HTTP, headers past the limit) is
/// reported as what it is, not as an interrupted download.
fn classify(e: ureq::Error) -> Failure {
    use ureq::Error as E;
    match e {
        E::TooManyRedirects | E::RedirectFailed => {
            Failure::Fatal(StoreError::BadResponse(format!("the server's redirects do not end in the file ({e})")))
        }
        E::LargeResponseHeader(..) => {
            Failure::Fatal(StoreError::BadResponse(format!("the response's headers are too large ({e})")))
        }
        E::Protocol(_) => Failure::Fatal(StoreError::BadResponse(format!("the answer is not HTTP ({e})"))),
        // TLS refused the connection (an untrusted or invalid certificate): retrying cannot help.
        E::Rustls(_) => Failure::Fatal(StoreError::Network(format!("the secure connection failed: {e}"))),
        E::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            Failure::Fatal(StoreError::Network(format!("the secure connection failed: {io}")))
        }
        E::Timeout(_) | E::Io(_) | E::ConnectionFailed | E::HostNotFound | E::BodyStalled => {
            Failure::Transient(StoreError::Network(e.to_string()))
        }
        e => Failure::Fatal(StoreError::Network(e.to_string())),
    }
}

/// `bytes START-END/TOTAL` → (START, TOTAL), TOTAL `None` for `*`.
fn parse_content_range(v: &str) -> Option<(u64, Option<u64>)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, _end) = range.split_once('-')?;
    let total = if total == "*" { None } else { Some(total.parse().ok()?) };
    Some((start.parse().ok()?, total))
}

/// Makes the rename durable (Unix: fsync of the directory); best effort.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::parse_content_range;

    #[test]
    fn content_range() {
        assert_eq!(parse_content_range("bytes 100-199/200"), Some((100, Some(200))));
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, None)));
        assert_eq!(parse_content_range("bytes */200"), None);
        assert_eq!(parse_content_range("items 1-2/3"), None);
    }
}
