//! Process helpers shared by the tasks.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug)]
pub enum TaskError {
    /// Bad command line: exit code 2 with the usage text.
    Usage(String),
    /// A step failed: exit code 1.
    Failed(String),
}

impl From<String> for TaskError {
    fn from(s: String) -> Self {
        TaskError::Failed(s)
    }
}

pub fn fail<T>(msg: impl Into<String>) -> Result<T, TaskError> {
    Err(TaskError::Failed(msg.into()))
}

pub fn workspace_root() -> PathBuf {
    // xtask/ sits directly under the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent directory").to_owned()
}

/// The cargo that launched us (`cargo xtask` sets `CARGO`), so nested builds use the same toolchain.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs a command with inherited stdio; a non-zero exit becomes an error naming `what`.
pub fn run_cmd(cmd: &mut Command, what: &str) -> Result<(), TaskError> {
    let status = cmd.status().map_err(|e| TaskError::Failed(format!("could not start `{what}`: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        fail(format!("`{what}` failed ({status})"))
    }
}

/// Runs a command and returns its stdout; stderr is passed through.
pub fn capture(cmd: &mut Command, what: &str) -> Result<String, TaskError> {
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| TaskError::Failed(format!("could not start `{what}`: {e}")))?;
    if !out.status.success() {
        return fail(format!("`{what}` failed ({})", out.status));
    }
    String::from_utf8(out.stdout).map_err(|_| TaskError::Failed(format!("`{what}` printed invalid UTF-8")))
}

fn capture_quiet(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The facts that explain a CI run's timings and code paths.
pub fn print_environment(model_dir: &Path) {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let show = |k: &str, v: Option<String>| println!("  {k:<10} {}", v.unwrap_or_else(|| "unknown".into()));
    println!("environment:");
    show("rustc", capture_quiet(&rustc, &["--version"]));
    show("cargo", capture_quiet(&std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()), &["--version"]));
    show("os", capture_quiet("uname", &["-srm"]));
    show("cores", std::thread::available_parallelism().ok().map(|n| n.to_string()));
    show("cpu", cpu_model());
    show("features", Some(cpu_features()));
    show("python3", capture_quiet("python3", &["--version"]));
    show("models", Some(model_dir.display().to_string()));
    show("CI", std::env::var("CI").ok());
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name") || l.starts_with("CPU part"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// The SIMD features the kernels dispatch on, as seen by the OS.
fn cpu_features() -> String {
    const WANTED: &[&str] = &[
        // x86-64
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512_vnni",
        "avx_vnni",
        "amx_int8",
        // aarch64 (/proc/cpuinfo "Features")
        "asimd",
        "asimddp",
        "i8mm",
        "fphp",
        "sve",
    ];
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = info
        .lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect())
        .unwrap_or_default();
    let present: Vec<&str> = WANTED.iter().copied().filter(|w| flags.contains(w)).collect();
    if present.is_empty() {
        "none of avx2/avx512/neon-dotprod found".into()
    } else {
        present.join(" ")
    }
}
