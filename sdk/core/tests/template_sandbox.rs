//! Hostile chat templates (`templates/hostile/*.jinja`: runaway loops, recursion, includes,
//! deep nesting, huge literals, string and list growth, amplifying filters) each end in a typed
//! `Error::Template` within 1 s and 64 MB, measured here: wall time, and the peak of the bytes
//! allocated through this test binary's global allocator while the template loads and renders.
//! The real templates still render within their limits (`chat_templates.rs` checks the text).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tern::chat::{ChatTemplate, Message, TemplateLimits};
use tern::Error;

/// Counts live heap bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MAX_TIME: Duration = Duration::from_secs(1);
const MAX_BYTES: usize = 64 << 20;

fn templates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/templates")
}

fn conversation() -> Vec<Message> {
    vec![Message::system("Be brief."), Message::user("Hello"), Message::assistant("Hi."), Message::user("Bye")]
}

/// Loads `source` as `Engine::load` does (compile and probe) and renders a conversation:
/// (the outcome, seconds, peak bytes above what was live before).
fn run(source: &str, limits: Option<TemplateLimits>) -> (tern::Result<String>, Duration, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t0 = Instant::now();
    let outcome = ChatTemplate::new(source, "<s>", "</s>").and_then(|mut t| {
        if let Some(limits) = limits {
            t.set_limits(limits);
        }
        t.render(&conversation(), true)
    });
    let elapsed = t0.elapsed();
    (outcome, elapsed, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

#[test]
fn hostile_templates_end_in_typed_errors_quickly_and_small() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(templates_dir().join("hostile"))
        .expect("hostile templates")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jinja"))
        .collect();
    files.sort();
    assert!(files.len() >= 41, "the reported templates and at least 34 more ({} found)", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_owned();
        let source = std::fs::read_to_string(path).expect("template file");
        let (outcome, elapsed, peak) = run(&source, None);
        let verdict = match &outcome {
            Err(Error::Template(msg)) => format!("Template error: {}", msg.chars().take(120).collect::<String>()),
            Err(e) => format!("WRONG ERROR {e:?}"),
            Ok(text) => format!("RENDERED {} bytes", text.len()),
        };
        eprintln!("{name:32} {:7.1} ms {:8.2} MB  {verdict}", elapsed.as_secs_f64() * 1e3, peak as f64 / 1048576.0);
        if !matches!(outcome, Err(Error::Template(_))) || elapsed > MAX_TIME || peak > MAX_BYTES {
            failures.push(format!("{name}: {verdict} in {elapsed:?}, {peak} bytes"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} hostile templates escaped:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Each budget stops a template on its own, with an error that names it.
#[test]
fn each_limit_is_its_own_error() {
    let memory = "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}";
    let work = "{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}";
    let time = "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% if 'y' in s %}{% endif %}{% endfor %}";
    let loose = TemplateLimits { memory_bytes: usize::MAX / 4, work: u64::MAX / 4, time: Duration::from_secs(3600) };
    let cases = [
        (memory, TemplateLimits { memory_bytes: 1 << 20, ..loose }, "memory budget"),
        (work, TemplateLimits { work: 100_000, ..loose }, "work budget"),
        (time, TemplateLimits { time: Duration::from_millis(50), ..loose }, "time limit"),
    ];
    for (source, limits, what) in cases {
        // The limits apply from the first render on, so set them before any: compile a template
        // that renders nothing until told to.
        let gated = format!("{{% if add_generation_prompt %}}{source}{{% endif %}}");
        let mut t = ChatTemplate::new(&gated, "", "").expect("compiles");
        t.set_limits(limits);
        match t.render(&conversation(), true) {
            Err(Error::Template(msg)) => assert!(msg.contains(what), "{what}: {msg}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// The real templates of `templates/` render within the default limits, also for a long
/// conversation.
#[test]
fn real_templates_fit_their_limits() {
    let mut long = Vec::new();
    for i in 0..200 {
        long.push(Message::user(format!("Question {i}: {}", "words ".repeat(50))));
        long.push(Message::assistant(format!("Answer {i}: {}", "more words ".repeat(50))));
    }
    long.push(Message::user("Last question"));
    for entry in std::fs::read_dir(templates_dir()).expect("templates") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jinja") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("template");
        let t = ChatTemplate::new(&source, "<s>", "</s>").expect("compiles");
        let t0 = Instant::now();
        let text = t.render(&long, true).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(text.len() > 100_000, "{}", path.display());
        eprintln!("{}: {} bytes in {:?}", path.display(), text.len(), t0.elapsed());
    }
}
