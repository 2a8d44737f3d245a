//! The language-package suites as `cargo xtask test` steps: Kotlin on a JVM, Swift in the trixie
//! chroot, and sdk/core's tests on aarch64 under qemu in the same chroot. Each is a script under
//! tests/ that installs what it lacks (cached under ~/.cache/tern) and prints its own summary.

use std::path::{Path, PathBuf};

use crate::steps::Step;
use crate::util::{run_cmd, TaskError};

/// (step name, script) of each suite, in the order `test` runs them.
pub const SUITES: &[(&str, &str)] =
    [("kotlin", "tests/kotlin/run.sh"), ("swift", "tests/swift/run.sh"), ("aarch64", "tests/aarch64/run.sh")]
        .as_slice();

pub fn run_suite(root: &Path, model_dir: &Path, script: &str) -> Result<(), TaskError> {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(root.join(script)).current_dir(root).env("TERN_MODEL_DIR", model_dir);
    run_cmd(&mut cmd, script)
}

pub fn steps<'a>(root: &'a Path, model_dir: &'a Path) -> Vec<Step<'a>> {
    SUITES.iter().map(|&(name, script)| Step::new(name, move || run_suite(root, model_dir, script))).collect()
}

/// `cargo xtask suite NAME`: one suite alone.
pub fn suite_cmd(args: &[String], root: PathBuf, model_dir: PathBuf) -> Result<(), TaskError> {
    let names: Vec<&str> = SUITES.iter().map(|s| s.0).collect();
    let [name] = args else {
        return Err(TaskError::Usage(format!("`suite` takes one of: {}", names.join(", "))));
    };
    let (_, script) = SUITES
        .iter()
        .find(|s| s.0 == name)
        .ok_or_else(|| TaskError::Usage(format!("unknown suite `{name}` (one of: {})", names.join(", "))))?;
    run_suite(&root, &model_dir, script)
}
