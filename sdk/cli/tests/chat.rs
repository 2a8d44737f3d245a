//! `tern chat` with SmolLM2 on a pipe: Ctrl-C (SIGINT) during an answer stops that answer, the
//! conversation goes on from it, and the program ends normally at the end of input.
#![cfg(unix)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn model() -> PathBuf {
    let dir = std::env::var_os("TERN_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/tern/models"));
    dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// Collects what a pipe gives, on a thread of its own.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

/// Waits until `text` satisfies `done`, at most `limit`.
fn wait_for(text: &Mutex<String>, limit: Duration, done: impl Fn(&str) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done(&text.lock().unwrap()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn ctrl_c_stops_the_answer_and_the_conversation_goes_on() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["chat", "--greedy", "-n", "4000", "-t", "1", "--model"])
        .arg(model())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tern starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let out = collect(child.stdout.take().expect("stdout"));
    let err = collect(child.stderr.take().expect("stderr"));

    writeln!(stdin, "Write a very long story about a dragon who learns to cook, in ten chapters.").unwrap();
    assert!(wait_for(&out, Duration::from_secs(120), |t| t.len() > 40), "no answer: {}", err.lock().unwrap());
    let pressed = Instant::now();
    // SAFETY: sends a signal to our own child, which is alive (its pipes are open).
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let stopped = wait_for(&err, Duration::from_secs(10), |t| t.contains("finish: cancelled"));
    let latency = pressed.elapsed();
    assert!(stopped, "the answer did not stop: {}", err.lock().unwrap());
    eprintln!("stopped {} ms after SIGINT", latency.as_millis());

    writeln!(stdin, "Give the dragon a name.").unwrap();
    let second = |t: &str| t.matches("| finish: ").count() == 2;
    assert!(wait_for(&err, Duration::from_secs(120), second), "no second answer: {}", err.lock().unwrap());
    drop(stdin);
    let status = child.wait().expect("tern ends");
    let err = err.lock().unwrap().clone();
    assert!(status.success(), "exit {status}: {err}");
    // The second turn's prompt reused the first turn, the stopped answer included.
    let last = err.lines().filter(|l| l.contains("| finish: ")).last().expect("stats line");
    assert!(last.contains(" cached)"), "the second turn reused nothing: {last}");
}
