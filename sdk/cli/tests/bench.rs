//! `tern bench`'s options, checked before any model is read.

use std::process::Command;

/// A one-token decode test has no decode step to time (the first token comes from the prompt's
/// pass), so it is refused up front rather than reported as 0 t/s.
#[test]
fn a_decode_test_of_one_token_is_refused() {
    let bench = |n: &str| {
        Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["bench", "--model", "/nonexistent/model.gguf", "--gen-tokens", n])
            .output()
            .unwrap()
    };
    let one = bench("1");
    assert_eq!(one.status.code(), Some(2), "{}", String::from_utf8_lossy(&one.stderr));
    assert!(String::from_utf8_lossy(&one.stderr).contains("--gen-tokens"));
    // Two tokens pass the option check and fail later, on the missing file.
    let two = bench("2");
    assert_ne!(two.status.code(), Some(2), "{}", String::from_utf8_lossy(&two.stderr));
    assert!(!two.status.success());
}
