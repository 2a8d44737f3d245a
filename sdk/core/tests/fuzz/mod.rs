//! The GGUF mutation fuzzer shared by the CI test (`tests/gguf_fuzz.rs`) and the long job
//! (`examples/gguf_fuzz.rs`): seeded mutations of a real model (bit flips, truncations, metadata
//! counts, lengths and values, tensor offsets, shapes and types), each loaded and, when it
//! loads, run for a few tokens. Every case must end in `Ok` or a typed error: a panic is
//! counted as a crash, an allocation that takes the live heap past the file's size + 1 GiB
//! and a case computing for over 10 s (CPU time: a busy machine's waits are no hang) or
//! stuck for over ten minutes abort the process, naming the case.
//!
//! Case `i` of seed `s` is the same mutation on every run (`--seed s --start i --cases 1`
//! replays it alone). One copy of the model is kept in memory and mutated in place; each case
//! undoes its changes, so no case pays for copying the file.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tern::gguf::GgufFile;
use tern::{Engine, EngineOptions};

/// Most CPU time a case may take.
pub const CASE_LIMIT: Duration = Duration::from_secs(10);
/// Longest a case may take in wall time (a blocked case uses no CPU; a starved one on a busy
/// machine waits minutes for a fraction of a second of CPU).
pub const CASE_WALL_LIMIT: Duration = Duration::from_secs(600);
/// Heap a case may hold beyond the file's size.
pub const HEAP_HEADROOM: usize = 1 << 30;

/// The global allocator of a fuzz binary: counts live heap bytes and aborts, naming the case,
/// when one allocation would take them past the armed limit.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Live bytes allowed while a case runs (usize::MAX: not armed).
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static CASE: AtomicU64 = AtomicU64::new(u64::MAX);
/// Nanoseconds since `EPOCH` when the running case started (0: none running).
static CASE_STARTED: AtomicU64 = AtomicU64::new(0);
/// The process's CPU time in nanoseconds when the running case started.
static CASE_CPU_STARTED: AtomicU64 = AtomicU64::new(0);

fn cpu_nanos() -> u64 {
    tern::runtime::process_cpu_time().map_or(0, |d| d.as_nanos() as u64)
}
static REPORTING: AtomicBool = AtomicBool::new(false);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.grow(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.grow(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            self.grow(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

impl CountingAlloc {
    fn grow(&self, size: usize) {
        let live = LIVE.fetch_add(size, Ordering::Relaxed).saturating_add(size);
        PEAK.fetch_max(live, Ordering::Relaxed);
        if live > LIMIT.load(Ordering::Relaxed) && !REPORTING.swap(true, Ordering::SeqCst) {
            LIMIT.store(usize::MAX, Ordering::SeqCst);
            eprintln!(
                "FUZZ FAILURE: case {} allocates {size} bytes, taking the heap to {live} bytes",
                CASE.load(Ordering::SeqCst)
            );
            std::process::abort();
        }
    }
}

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Starts the thread that aborts the process when a case runs past [`CASE_LIMIT`] (once per
/// process), and a panic hook that keeps panics of cases quiet (they are counted).
pub fn install_guards() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = epoch();
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(200));
            let started = CASE_STARTED.load(Ordering::SeqCst);
            if started == 0 {
                continue;
            }
            let ran = epoch().elapsed().saturating_sub(Duration::from_nanos(started));
            let cpu = Duration::from_nanos(cpu_nanos().saturating_sub(CASE_CPU_STARTED.load(Ordering::SeqCst)));
            if cpu > CASE_LIMIT || ran > CASE_WALL_LIMIT {
                eprintln!(
                    "FUZZ FAILURE: case {} has run for {ran:?} ({cpu:?} of CPU time): a hang",
                    CASE.load(Ordering::SeqCst)
                );
                std::process::abort();
            }
        });
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CASE_STARTED.load(Ordering::SeqCst) != 0 {
                *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = info.to_string();
            } else {
                default(info);
            }
        }));
    });
}

static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// splitmix64.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len() as u64) as usize])
    }
}

/// Where the header's fields are, for mutations that change structure rather than bytes.
#[derive(Default)]
pub struct HeaderFields {
    /// The tensor and metadata counts (u64 each).
    pub counts: Vec<usize>,
    /// Length prefixes (u64): keys, strings, tensor names.
    pub lengths: Vec<usize>,
    /// Array element counts (u64) and their element types (u32, 4 bytes before).
    pub array_counts: Vec<usize>,
    /// Value types of metadata entries (u32).
    pub value_types: Vec<usize>,
    /// Integer scalars of metadata: position and width in bytes.
    pub integers: Vec<(usize, usize)>,
    /// Per tensor: its dimension count (u32), dims (u64 each), type (u32), offset (u64).
    pub n_dims: Vec<usize>,
    pub dims: Vec<usize>,
    pub types: Vec<usize>,
    pub offsets: Vec<usize>,
    /// End of the tensor table: bytes before it are structure, after it weights.
    pub header_end: usize,
}

struct Walk<'a> {
    b: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn u32(&mut self) -> Option<u32> {
        let v = u32::from_le_bytes(self.b.get(self.at..self.at + 4)?.try_into().ok()?);
        self.at += 4;
        Some(v)
    }
    fn u64(&mut self) -> Option<u64> {
        let v = u64::from_le_bytes(self.b.get(self.at..self.at + 8)?.try_into().ok()?);
        self.at += 8;
        Some(v)
    }
    fn skip(&mut self, n: u64) -> Option<()> {
        self.at = self.at.checked_add(usize::try_from(n).ok()?)?;
        (self.at <= self.b.len()).then_some(())
    }
    fn value(&mut self, ty: u32, l: &mut HeaderFields, top: bool) -> Option<()> {
        match ty {
            8 => {
                l.lengths.push(self.at);
                let n = self.u64()?;
                self.skip(n)
            }
            9 => {
                let elem = self.u32()?;
                l.array_counts.push(self.at);
                let n = self.u64()?;
                match elem {
                    0 | 1 | 7 => self.skip(n),
                    2 | 3 => self.skip(n.checked_mul(2)?),
                    4..=6 => self.skip(n.checked_mul(4)?),
                    10..=12 => self.skip(n.checked_mul(8)?),
                    _ => (0..n).try_for_each(|_| self.value(elem, l, false)),
                }
            }
            _ => {
                let width = match ty {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    10..=12 => 8,
                    _ => return None,
                };
                if top && !matches!(ty, 6 | 7 | 12) {
                    l.integers.push((self.at, width));
                }
                self.skip(width as u64)
            }
        }
    }
}

impl HeaderFields {
    /// The fields of an intact file's header.
    pub fn of(b: &[u8]) -> Option<HeaderFields> {
        let mut l = HeaderFields::default();
        let mut w = Walk { b, at: 8 };
        l.counts = vec![8, 16];
        let n_tensors = w.u64()?;
        let n_kv = w.u64()?;
        for _ in 0..n_kv {
            l.lengths.push(w.at);
            let n = w.u64()?;
            w.skip(n)?;
            l.value_types.push(w.at);
            let ty = w.u32()?;
            w.value(ty, &mut l, true)?;
        }
        for _ in 0..n_tensors {
            l.lengths.push(w.at);
            let n = w.u64()?;
            w.skip(n)?;
            l.n_dims.push(w.at);
            let dims = w.u32()?;
            for _ in 0..dims {
                l.dims.push(w.at);
                w.u64()?;
            }
            l.types.push(w.at);
            w.u32()?;
            l.offsets.push(w.at);
            w.u64()?;
        }
        l.header_end = w.at;
        Some(l)
    }
}

/// Values that break counts and sizes: zero, one, powers of two near the integer limits, and
/// the old value nudged, doubled or shifted.
fn interesting(rng: &mut Rng, old: u64, width: usize) -> u64 {
    let max = if width >= 8 { u64::MAX } else { (1u64 << (8 * width)) - 1 };
    let v = match rng.below(12) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max / 2 + 1,
        4 => 1 << rng.below(8 * width as u64),
        5 => old.wrapping_add(1),
        6 => old.wrapping_sub(1),
        7 => old.wrapping_mul(2),
        8 => old << rng.below(40),
        9 => old >> rng.below(8),
        10 => (1 << 31) + rng.below(1 << 8),
        _ => rng.next(),
    };
    v & max
}

/// What one case did to the image, to be undone.
struct Undo {
    writes: Vec<(usize, Vec<u8>)>,
}

impl Undo {
    fn put(&mut self, image: &mut [u8], at: usize, bytes: &[u8]) {
        if at + bytes.len() <= image.len() {
            self.writes.push((at, image[at..at + bytes.len()].to_vec()));
            image[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }
    fn put_int(&mut self, image: &mut [u8], at: usize, width: usize, v: u64) {
        self.put(image, at, &v.to_le_bytes()[..width]);
    }
    fn restore(self, image: &mut [u8]) {
        for (at, old) in self.writes.into_iter().rev() {
            image[at..at + old.len()].copy_from_slice(&old);
        }
    }
}

fn read_int(image: &[u8], at: usize, width: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..width].copy_from_slice(&image[at..at + width]);
    u64::from_le_bytes(b)
}

/// Applies case `rng`'s mutation; returns the length to parse and a name for the kind.
fn mutate(rng: &mut Rng, image: &mut [u8], l: &HeaderFields, undo: &mut Undo) -> (usize, &'static str) {
    let len = image.len();
    let header = l.header_end;
    let kind = rng.below(100);
    let field = |rng: &mut Rng, v: &[usize]| rng.pick(v).copied();
    match kind {
        // Bit flips, mostly in the header.
        0..=29 => {
            for _ in 0..1 + rng.below(4) {
                let at = if rng.below(8) == 0 { rng.below(len as u64) } else { rng.below(header as u64) } as usize;
                let b = image[at] ^ (1 << rng.below(8));
                undo.put(image, at, &[b]);
            }
            (len, "bit flips")
        }
        // Random bytes over a short run of the header.
        30..=34 => {
            let at = rng.below(header as u64) as usize;
            let run: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
            undo.put(image, at, &run);
            (len, "random bytes")
        }
        // Truncations: in the header, just after it, or anywhere.
        35..=44 => {
            let cut = match rng.below(3) {
                0 => rng.below(header as u64),
                1 => header as u64 + rng.below(4096),
                _ => rng.below(len as u64),
            } as usize;
            (cut.min(len), "truncation")
        }
        45..=49 => {
            let at = field(rng, &l.counts).unwrap_or(8);
            let v = interesting(rng, read_int(image, at, 8), 8);
            undo.put_int(image, at, 8, v);
            (len, "header count")
        }
        50..=59 => {
            let at = field(rng, &l.lengths).unwrap_or(24);
            let v = interesting(rng, read_int(image, at, 8), 8);
            undo.put_int(image, at, 8, v);
            (len, "string length")
        }
        60..=64 => {
            let Some(at) = field(rng, &l.array_counts) else { return (len, "none") };
            if rng.below(4) == 0 {
                let v = rng.below(16);
                undo.put_int(image, at - 4, 4, v);
                (len, "array element type")
            } else {
                let v = interesting(rng, read_int(image, at, 8), 8);
                undo.put_int(image, at, 8, v);
                (len, "array count")
            }
        }
        65..=74 => {
            let Some(&(at, width)) = rng.pick(&l.integers) else { return (len, "none") };
            let v = interesting(rng, read_int(image, at, width), width);
            undo.put_int(image, at, width, v);
            (len, "metadata integer")
        }
        75..=77 => {
            let Some(at) = field(rng, &l.value_types) else { return (len, "none") };
            let v = rng.below(16);
            undo.put_int(image, at, 4, v);
            (len, "metadata type")
        }
        78..=81 => {
            let Some(at) = field(rng, &l.n_dims) else { return (len, "none") };
            let v = if rng.below(2) == 0 { rng.below(6) } else { interesting(rng, read_int(image, at, 4), 4) };
            undo.put_int(image, at, 4, v);
            (len, "tensor rank")
        }
        82..=89 => {
            let Some(at) = field(rng, &l.dims) else { return (len, "none") };
            let v = interesting(rng, read_int(image, at, 8), 8);
            undo.put_int(image, at, 8, v);
            (len, "tensor dim")
        }
        90..=94 => {
            let Some(at) = field(rng, &l.types) else { return (len, "none") };
            let v = if rng.below(4) == 0 { interesting(rng, 0, 4) } else { rng.below(42) };
            undo.put_int(image, at, 4, v);
            (len, "tensor type")
        }
        _ => {
            let Some(at) = field(rng, &l.offsets) else { return (len, "none") };
            let old = read_int(image, at, 8);
            let v = match rng.below(3) {
                0 => interesting(rng, old, 8),
                1 => old.wrapping_add(32 * (1 + rng.below(64))),
                _ => rng.below(len as u64 * 2),
            };
            undo.put_int(image, at, 8, v);
            (len, "tensor offset")
        }
    }
}

/// Outcomes of a run.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub cases: u64,
    /// Parsing or loading returned a typed error.
    pub typed_errors: u64,
    /// The file loaded (and ran a few tokens, or returned a typed error doing so).
    pub loaded: u64,
    /// Panics caught (each printed with its case); must stay 0.
    pub crashes: u64,
    /// Highest live heap during a case beyond what it started with.
    pub peak_heap: usize,
    pub slowest: Duration,
}

/// One model's image and header layout.
pub struct Target {
    pub name: String,
    image: Arc<[u8]>,
    layout: HeaderFields,
}

impl Target {
    pub fn read(path: &std::path::Path) -> Target {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let layout = HeaderFields::of(&bytes).expect("the intact model's header walks");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Target { name, image: Arc::from(bytes), layout }
    }

    /// Runs cases `start..start + cases` of `seed`; `progress` is called every 1,000 cases.
    pub fn run(&mut self, seed: u64, start: u64, cases: u64, mut progress: impl FnMut(&Tally)) -> Tally {
        install_guards();
        let mut tally = Tally::default();
        let opts = EngineOptions {
            threads: Some(1),
            context_length: Some(16),
            repack_weights: Some(false),
            ..Default::default()
        };
        for case in start..start + cases {
            let mut rng = Rng::new(seed ^ case.wrapping_mul(0xA24B_AED4_963E_E407));
            let mut undo = Undo { writes: Vec::new() };
            let image = Arc::get_mut(&mut self.image).expect("every case releases the image");
            let (len, _kind) = mutate(&mut rng, image, &self.layout, &mut undo);
            let shared = Arc::clone(&self.image);

            let base = LIVE.load(Ordering::SeqCst);
            PEAK.store(base, Ordering::SeqCst);
            CASE.store(case, Ordering::SeqCst);
            LIMIT.store(base.saturating_add(shared.len()).saturating_add(HEAP_HEADROOM), Ordering::SeqCst);
            let t0 = Instant::now();
            CASE_CPU_STARTED.store(cpu_nanos(), Ordering::SeqCst);
            CASE_STARTED.store(epoch().elapsed().as_nanos().max(1) as u64, Ordering::SeqCst);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load_and_run(shared, len, &opts)));
            CASE_STARTED.store(0, Ordering::SeqCst);
            LIMIT.store(usize::MAX, Ordering::SeqCst);
            tally.slowest = tally.slowest.max(t0.elapsed());
            tally.peak_heap = tally.peak_heap.max(PEAK.load(Ordering::SeqCst).saturating_sub(base));

            tally.cases += 1;
            match outcome {
                Ok(true) => tally.loaded += 1,
                Ok(false) => tally.typed_errors += 1,
                Err(_) => {
                    tally.crashes += 1;
                    let msg = std::mem::take(&mut *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()));
                    eprintln!("FUZZ CRASH: {} seed {seed} case {case} ({_kind}): {msg}", self.name);
                }
            }
            let image = Arc::get_mut(&mut self.image).expect("every case releases the image");
            undo.restore(image);
            if tally.cases % 1000 == 0 {
                progress(&tally);
            }
        }
        tally
    }
}

/// Parses and loads a mutated image and, when it loads, encodes a text and runs three tokens.
/// True when it loaded; a typed error anywhere is false.
fn load_and_run(image: Arc<[u8]>, len: usize, opts: &EngineOptions) -> bool {
    let Ok(file) = GgufFile::from_shared(image, len) else { return false };
    let Ok(engine) = Engine::from_file(file, opts.clone()) else { return false };
    let _ = engine.tokenizer().encode("Hello, <|im_start|> world 123", true, true);
    let last = engine.info().vocab_size.saturating_sub(1) as u32;
    let _ = engine.score(&[1.min(last), 2.min(last), last], 1);
    true
}
