//! No import cycles between the modules of `tern` or of the FFI crate, and `energy/` free of
//! the engine, sessions and the model (scripts/module_cycles.py reads every `crate::` path).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check(dir: &str, depth: &str) {
    let root = repo();
    let out = match Command::new("python3")
        .arg(root.join("scripts/module_cycles.py"))
        .arg(root.join(dir))
        .args(["--depth", depth])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("python3 not available ({e}); module cycles of {dir} not checked");
            return;
        }
    };
    assert!(out.status.success(), "{dir}:\n{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn no_import_cycles_in_the_core() {
    check("sdk/core/src", "1");
    check("sdk/core/src", "2");
}

#[test]
fn no_import_cycles_in_the_bindings() {
    check("bindings/ffi/src", "1");
}

#[test]
fn energy_needs_nothing_of_the_engine_sessions_or_model() {
    let dir = repo().join("sdk/core/src/energy");
    for entry in std::fs::read_dir(&dir).expect("energy/") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("source");
        // Unit tests may build whatever they check against.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        for banned in ["crate::engine", "crate::session", "crate::model", "crate::Engine", "crate::Session"] {
            assert!(!code.contains(banned), "{} names {banned}", path.display());
        }
    }
}
