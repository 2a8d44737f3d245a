//! Downloads from a real HTTP server on loopback that each test starts: a fresh download, a
//! connection dropped mid-file (resumed with a Range request, right hash), a corrupted byte
//! (rejected, never installed), servers that ignore ranges or answer errors, no disk space,
//! cancellation, listing and deleting.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tern_store::{known_models, sha256_hex, DownloadEvent, DownloadOptions, ModelSpec, Store, StoreError, StoredFile};

/// How the test server misbehaves.
#[derive(Clone, Default)]
struct Behaviour {
    /// The first response stops after this many body bytes and the connection is closed.
    drop_first_after: Option<usize>,
    /// Every response has this byte flipped.
    corrupt_at: Option<usize>,
    /// Answer every request with the whole file (200), ignoring Range.
    ignore_range: bool,
    /// Answer every request with this status and no body.
    status: Option<u16>,
    /// Send the head and this many body bytes, then nothing more for 30 s (a stalled read).
    stall_after: Option<usize>,
    /// Answer every request with a redirect to itself.
    redirect_loop: bool,
    /// Answer with bytes that are not HTTP.
    garbage: bool,
    /// Send a response header this large.
    huge_header: Option<usize>,
}

/// A one-file HTTP/1.1 server on 127.0.0.1 that serves `data` and records each request's Range
/// header. It serves a bounded number of connections, one request each, then its thread ends.
struct Server {
    url: String,
    ranges: Arc<Mutex<Vec<Option<String>>>>,
    _thread: JoinHandle<()>,
}

const MAX_CONNECTIONS: usize = 16;

impl Server {
    fn start(data: Arc<Vec<u8>>, behaviour: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}/model.gguf", listener.local_addr().expect("address"));
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&ranges);
        let thread = std::thread::spawn(move || {
            for (i, stream) in listener.incoming().take(MAX_CONNECTIONS).enumerate() {
                let Ok(stream) = stream else { return };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                serve(stream, &data, &behaviour, i == 0, &log);
            }
        });
        Server { url, ranges, _thread: thread }
    }

    fn ranges(&self) -> Vec<Option<String>> {
        self.ranges.lock().expect("lock").clone()
    }
}

fn serve(mut stream: TcpStream, data: &[u8], b: &Behaviour, first: bool, log: &Mutex<Vec<Option<String>>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_owned());
            }
        }
    }
    log.lock().expect("lock").push(range.clone());
    if b.redirect_loop {
        let _ = write!(stream, "HTTP/1.1 302 Found\r\nLocation: /model.gguf\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    if b.garbage {
        let _ = stream.write_all(b"\x00\x01garbage that is no status line\r\n\r\n");
        return;
    }
    if let Some(n) = b.huge_header {
        let _ = write!(stream, "HTTP/1.1 200 OK\r\nX-Filler: ");
        let _ = stream.write_all(&vec![b'a'; n]);
        let _ = write!(stream, "\r\nContent-Length: {}\r\n\r\n", data.len());
        return;
    }
    if let Some(status) = b.status {
        let _ = write!(stream, "HTTP/1.1 {status} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    let start = match (&range, b.ignore_range) {
        (Some(r), false) => r.strip_prefix("bytes=").and_then(|r| r.strip_suffix('-')).and_then(|s| s.parse().ok()),
        _ => None,
    };
    let mut body = data[start.unwrap_or(0).min(data.len())..].to_vec();
    if let Some(at) = b.corrupt_at {
        if let Some(byte) = at.checked_sub(start.unwrap_or(0)).and_then(|i| body.get_mut(i)) {
            *byte ^= 0x01;
        }
    }
    let head = match start {
        Some(s) => format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {s}-{}/{}\r\nConnection: close\r\n\r\n",
            body.len(),
            data.len() - 1,
            data.len()
        ),
        None => format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()),
    };
    let _ = stream.write_all(head.as_bytes());
    if let Some(n) = b.stall_after {
        let _ = stream.write_all(&body[..n.min(body.len())]);
        let _ = stream.flush();
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    match b.drop_first_after {
        Some(n) if first => {
            let _ = stream.write_all(&body[..n.min(body.len())]);
            let _ = stream.flush();
            let _ = stream.shutdown(Shutdown::Both);
        }
        _ => {
            let _ = stream.write_all(&body);
        }
    }
}

/// 3 MiB of deterministic bytes and a spec that describes them.
fn model() -> (Arc<Vec<u8>>, ModelSpec) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let data: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    let hash = sha256_hex(&data[..]).expect("in memory");
    let spec = ModelSpec::new("test", "test-model.gguf", data.len() as u64, &hash);
    (Arc::new(data), spec)
}

/// A store in a fresh temporary directory, removed when the test ends (passed or failed).
struct TempStore(Store);

impl std::ops::Deref for TempStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.dir());
    }
}

fn temp_store(name: &str) -> TempStore {
    let dir = std::env::temp_dir().join(format!("tern-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TempStore(Store::open(dir).expect("store dir"))
}

fn quick(retries: u32) -> DownloadOptions {
    DownloadOptions {
        retries,
        retry_delay: Duration::ZERO,
        stall_timeout: Duration::from_secs(10),
        ..Default::default()
    }
}

fn download(
    store: &Store,
    spec: &ModelSpec,
    url: &str,
    opts: &DownloadOptions,
) -> (Result<PathBuf, StoreError>, Vec<DownloadEvent>) {
    let mut events = Vec::new();
    let r = store.download(spec, url, opts, &mut |e| events.push(e.clone()));
    (r, events)
}

#[test]
fn fresh_download_is_verified_and_installed() {
    let (data, spec) = model();
    let server = Server::start(data.clone(), Behaviour::default());
    let store = temp_store("fresh");
    let (r, events) = download(&store, &spec, &server.url, &quick(0));
    let path = r.expect("download");
    assert_eq!(std::fs::read(&path).expect("file"), *data);
    assert_eq!(store.installed(&spec), Some(path.clone()));
    assert_eq!(events.first(), Some(&DownloadEvent::Started { from: 0, total: spec.size }));
    assert!(events.contains(&DownloadEvent::Progress { downloaded: spec.size, total: spec.size }));
    assert_eq!(&events[events.len() - 2..], &[DownloadEvent::Verifying, DownloadEvent::Done { path }]);
    assert_eq!(server.ranges(), vec![None]);
    store.verify(&spec).expect("hash still matches");
    // Already there: no request.
    download(&store, &spec, &server.url, &quick(0)).0.expect("installed");
    assert_eq!(server.ranges().len(), 1);
}

#[test]
fn dropped_connection_resumes_with_a_range_request() {
    let (data, spec) = model();
    let cut = 1_234_567;
    let server = Server::start(data.clone(), Behaviour { drop_first_after: Some(cut), ..Default::default() });
    let store = temp_store("resume");
    let (r, events) = download(&store, &spec, &server.url, &quick(3));
    let path = r.expect("resumed download");
    assert_eq!(sha256_hex(std::fs::File::open(&path).expect("file")).expect("read"), spec.sha256);
    assert_eq!(std::fs::read(&path).expect("file"), *data);
    let ranges = server.ranges();
    assert_eq!(ranges, vec![None, Some(format!("bytes={cut}-"))], "second request asks for the rest only");
    assert!(events.contains(&DownloadEvent::Retrying { downloaded: cut as u64, attempt: 1 }));
    assert!(events.contains(&DownloadEvent::Started { from: cut as u64, total: spec.size }));
}

#[test]
fn interrupted_download_resumes_on_the_next_call() {
    let (data, spec) = model();
    let cut = 2_000_000;
    let store = temp_store("next-call");
    let server = Server::start(data.clone(), Behaviour { drop_first_after: Some(cut), ..Default::default() });
    match download(&store, &spec, &server.url, &quick(0)).0 {
        Err(StoreError::Interrupted { downloaded, total }) => assert_eq!((downloaded, total), (cut as u64, spec.size)),
        other => panic!("expected an interruption, got {other:?}"),
    }
    assert_eq!(store.installed(&spec), None, "a partial file is never installed");
    assert_eq!(
        store.list().expect("list"),
        vec![StoredFile { file_name: spec.file_name.clone(), size: cut as u64, complete: false }]
    );
    let path = download(&store, &spec, &server.url, &quick(0)).0.expect("resumed");
    assert_eq!(std::fs::read(&path).expect("file"), *data);
    assert_eq!(server.ranges()[1], Some(format!("bytes={cut}-")));
}

#[test]
fn corrupted_byte_is_rejected_and_never_installed() {
    let (data, spec) = model();
    let server = Server::start(data, Behaviour { corrupt_at: Some(1_000_000), ..Default::default() });
    let store = temp_store("corrupt");
    match download(&store, &spec, &server.url, &quick(0)) {
        (Err(StoreError::HashMismatch { expected, actual }), events) => {
            assert_eq!(expected, spec.sha256);
            assert_ne!(actual, spec.sha256);
            assert!(events.contains(&DownloadEvent::Verifying));
            assert!(!events.iter().any(|e| matches!(e, DownloadEvent::Done { .. })));
        }
        (other, _) => panic!("expected a hash mismatch, got {other:?}"),
    }
    assert_eq!(store.installed(&spec), None);
    assert!(!store.path(&spec).exists(), "nothing under the model's name");
    assert_eq!(store.list().expect("list"), vec![], "the bad bytes are deleted");
}

#[test]
fn corruption_after_a_resume_is_caught_too() {
    let (data, spec) = model();
    let behaviour = Behaviour { drop_first_after: Some(500_000), corrupt_at: Some(2_500_000), ..Default::default() };
    let server = Server::start(data, behaviour);
    let store = temp_store("corrupt-resume");
    assert!(matches!(download(&store, &spec, &server.url, &quick(2)).0, Err(StoreError::HashMismatch { .. })));
    assert_eq!(store.installed(&spec), None);
}

#[test]
fn server_ignoring_ranges_restarts_from_zero() {
    let (data, spec) = model();
    let behaviour = Behaviour { drop_first_after: Some(700_000), ignore_range: true, ..Default::default() };
    let server = Server::start(data.clone(), behaviour);
    let store = temp_store("no-range");
    let (r, events) = download(&store, &spec, &server.url, &quick(2));
    assert_eq!(std::fs::read(r.expect("download")).expect("file"), *data);
    assert!(events.contains(&DownloadEvent::Started { from: 0, total: spec.size }));
    assert_eq!(server.ranges().len(), 2);
}

#[test]
fn http_errors_and_wrong_sizes_are_typed() {
    let (data, spec) = model();
    let store = temp_store("errors");
    let server = Server::start(data.clone(), Behaviour { status: Some(404), ..Default::default() });
    assert!(matches!(download(&store, &spec, &server.url, &quick(2)).0, Err(StoreError::Http { status: 404 })));
    assert_eq!(server.ranges().len(), 1, "a 404 is not retried");

    let server = Server::start(data.clone(), Behaviour { status: Some(503), ..Default::default() });
    assert!(matches!(download(&store, &spec, &server.url, &quick(1)).0, Err(StoreError::Http { status: 503 })));
    assert_eq!(server.ranges().len(), 2, "a 503 is retried");

    let server = Server::start(data, Behaviour::default());
    let smaller = ModelSpec { size: spec.size - 10, ..spec.clone() };
    match download(&store, &smaller, &server.url, &quick(0)).0 {
        Err(StoreError::SizeMismatch { expected, actual }) => assert_eq!((expected, actual), (smaller.size, spec.size)),
        other => panic!("expected a size mismatch, got {other:?}"),
    }
    assert_eq!(store.installed(&smaller), None);

    // Nothing listens on a port just released.
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}/x");
    assert!(matches!(download(&store, &spec, &url, &quick(0)).0, Err(StoreError::Interrupted { downloaded: 0, .. })));
}

#[test]
fn disk_space_is_checked_before_any_request() {
    let (data, spec) = model();
    let server = Server::start(data, Behaviour::default());
    let store = temp_store("space");
    let huge = ModelSpec { size: u64::MAX / 2, ..spec };
    assert!(matches!(download(&store, &huge, &server.url, &quick(0)).0, Err(StoreError::NotEnoughSpace { .. })));
    assert!(server.ranges().is_empty());
}

#[test]
fn cancelled_download_keeps_its_bytes() {
    let (data, spec) = model();
    // The server stalls after 2 of the 3 MiB, so that the download cannot end before the
    // cancel (raised at the first progress event, 1 MiB) reaches it, however loaded the machine.
    let server = Server::start(data, Behaviour { stall_after: Some(2 << 20), ..Default::default() });
    let store = temp_store("cancel");
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = DownloadOptions { cancel: Some(cancel.clone()), ..quick(0) };
    let mut seen = 0;
    let r = store.download(&spec, &server.url, &opts, &mut |e| {
        if let DownloadEvent::Progress { downloaded, .. } = e {
            seen = *downloaded;
            cancel.store(true, Ordering::Relaxed);
        }
    });
    assert!(matches!(r, Err(StoreError::Cancelled)), "{r:?}");
    let listed = store.list().expect("list");
    assert_eq!(listed.len(), 1);
    assert!(!listed[0].complete && listed[0].size >= seen && seen > 0);
}

#[test]
fn list_and_delete() {
    let (data, spec) = model();
    let server = Server::start(data, Behaviour::default());
    let store = temp_store("list");
    assert_eq!(store.list().expect("list"), vec![]);
    download(&store, &spec, &server.url, &quick(0)).0.expect("download");
    let want = StoredFile { file_name: spec.file_name.clone(), size: spec.size, complete: true };
    assert_eq!(store.list().expect("list"), vec![want]);
    assert!(store.delete(&spec).expect("delete"));
    assert!(!store.delete(&spec).expect("delete again"));
    assert_eq!(store.list().expect("list"), vec![]);
}

#[test]
fn manifest_matches_the_test_models() {
    let sums = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../core/tests/golden/MODELS.sha256"))
        .expect("MODELS.sha256");
    let known = known_models();
    assert_eq!(known.len(), 3);
    for spec in &known {
        spec.validate().expect("valid");
        let line = sums.lines().find(|l| l.ends_with(&format!("  {}", spec.file_name))).expect("listed");
        assert_eq!(line.split_whitespace().next(), Some(spec.sha256.as_str()), "{}", spec.file_name);
    }
}

/// A cancel while a read waits on a stalled connection returns at once, not after the stall
/// timeout (10 s here); the bytes that arrived stay for a resume.
#[test]
fn cancel_during_a_stalled_read_returns_at_once() {
    let (data, spec) = model();
    let server = Server::start(data, Behaviour { stall_after: Some(4096), ..Default::default() });
    let store = temp_store("stall-cancel");
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = DownloadOptions { cancel: Some(cancel.clone()), ..quick(0) };
    let flag = Arc::clone(&cancel);
    let cancelled_at = Arc::new(Mutex::new(None));
    let at = Arc::clone(&cancelled_at);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        *at.lock().expect("lock") = Some(std::time::Instant::now());
        flag.store(true, Ordering::Relaxed);
    });
    let r = store.download(&spec, &server.url, &opts, &mut |_| {});
    let returned = std::time::Instant::now();
    t.join().expect("thread");
    assert!(matches!(r, Err(StoreError::Cancelled)), "{r:?}");
    let latency = returned - cancelled_at.lock().expect("lock").expect("cancelled");
    eprintln!("cancel during a stalled read returned after {:.1} ms", latency.as_secs_f64() * 1e3);
    assert!(latency < Duration::from_secs(5), "returned only after {latency:?} (the stall timeout is 10 s)");
}

/// Servers that cannot give the file say so, instead of "download interrupted … resumes".
#[test]
fn broken_servers_get_their_own_messages() {
    let (data, spec) = model();
    for (name, behaviour, says) in [
        ("redirects", Behaviour { redirect_loop: true, ..Default::default() }, "redirects"),
        ("garbage", Behaviour { garbage: true, ..Default::default() }, "not HTTP"),
        ("header", Behaviour { huge_header: Some(1 << 20), ..Default::default() }, "headers are too large"),
    ] {
        let server = Server::start(Arc::clone(&data), behaviour);
        let store = temp_store(&format!("broken-{name}"));
        let r = download(&store, &spec, &server.url, &quick(2)).0;
        match r {
            Err(e @ StoreError::BadResponse(_)) => assert!(e.to_string().contains(says), "{name}: {e}"),
            other => panic!("{name}: expected BadResponse, got {other:?}"),
        }
    }
}
