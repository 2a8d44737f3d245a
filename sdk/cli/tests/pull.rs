//! `tern pull` against a server on the loopback: the file lands in the directory, hash-checked;
//! a wrong hash installs nothing; an unknown name without a hash is a usage error.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

/// Serves `body` to every request, forever, on a thread; the port.
fn serve(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
        }
    });
    port
}

fn pull(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("pull")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("run tern pull")
}

#[test]
fn pull_downloads_verifies_and_refuses_a_wrong_hash() {
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let sha = tern_store::sha256_hex(&body[..]).expect("hash");
    let port = serve(body.clone());
    let url = format!("http://127.0.0.1:{port}/tiny.gguf");
    let dir = std::env::temp_dir().join(format!("tern-pull-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let size = body.len().to_string();

    let out = pull(&dir, &["tiny", "--url", &url, "--sha256", &sha, "--size", &size]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(Path::new(&printed), dir.join("tiny.gguf"));
    assert_eq!(std::fs::read(dir.join("tiny.gguf")).expect("installed"), body);
    // Pulled again: already there, nothing to do.
    assert!(pull(&dir, &["tiny", "--url", &url, "--sha256", &sha, "--size", &size]).status.success());

    let wrong = "0".repeat(64);
    let url2 = format!("http://127.0.0.1:{port}/other.gguf");
    let out = pull(&dir, &["other", "--url", &url2, "--sha256", &wrong, "--size", &size]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error:"));
    assert!(!dir.join("other.gguf").exists(), "a file with the wrong hash was installed");

    let out = pull(&dir, &["no-such-model", "--url", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("smollm2"), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
