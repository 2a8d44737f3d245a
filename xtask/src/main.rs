//! Developer tasks: `cargo xtask <models|test|demo|ci>`.
//!
//! No dependencies on purpose: it is compiled on every fresh clone before anything else runs,
//! so hashing and unzipping are delegated to `sha256sum` and `python3`, which CI has anyway.

mod bindings;
mod models;
mod snippets;
mod steps;
mod util;

use std::path::PathBuf;
use std::process::ExitCode;

use steps::Step;
use util::{cargo, run_cmd, workspace_root, TaskError};

const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  models [--all | NAME...]   fetch and verify models into the model cache
                             (default: the default model; names: smollm2, qwen2.5, gemma3)
  test                       fetch every model, then run the whole test suite (cargo test,
                             then the kotlin, swift, aarch64, android-sample and
                             ios-sample suites)
  suite NAME                 one of those suites alone (tests/<name>/run.sh)
  snippets                   rewrite the code in docs/android.md and docs/ios.md from the
                             samples the suites compile
  demo [--prompt TEXT] [--model NAME]
                             fetch a model (default: qwen2.5) and stream a chat answer
  ci                         print the machine's facts, then `test`

The model cache is $TERN_MODEL_DIR (default ~/.cache/tern/models).";

const DEFAULT_PROMPT: &str = "What is the capital of France?";
/// The demo's model: the smallest of the test models that answers a plain question right when
/// it samples (SmolLM2-135M, the default for tests, often does not).
const DEMO_MODEL: &str = "qwen2.5";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match task.as_str() {
        "models" => models_cmd(rest),
        "test" => no_args(task, rest).and_then(|_| test_cmd(false)),
        "ci" => no_args(task, rest).and_then(|_| test_cmd(true)),
        "demo" => demo_cmd(rest),
        "suite" => models::model_dir().and_then(|m| bindings::suite_cmd(rest, workspace_root(), m)),
        "snippets" => no_args(task, rest).and_then(|_| snippets::update(&workspace_root())),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(TaskError::Usage(format!("unknown task `{other}`"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(TaskError::Usage(msg)) => {
            eprintln!("error: {msg}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(TaskError::Failed(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn no_args(task: &str, rest: &[String]) -> Result<(), TaskError> {
    match rest.first() {
        None => Ok(()),
        Some(a) => Err(TaskError::Usage(format!("`{task}` takes no arguments (got `{a}`)"))),
    }
}

fn models_cmd(args: &[String]) -> Result<(), TaskError> {
    let mut all = false;
    let mut names = Vec::new();
    for a in args {
        match a.as_str() {
            "--all" => all = true,
            s if s.starts_with('-') => return Err(TaskError::Usage(format!("unknown option `{s}`"))),
            s => names.push(s.to_owned()),
        }
    }
    if all && !names.is_empty() {
        return Err(TaskError::Usage("give either --all or model names, not both".into()));
    }
    let specs = if all {
        models::MODELS.iter().collect()
    } else if names.is_empty() {
        vec![models::default_model()]
    } else {
        names.iter().map(|n| models::by_name(n)).collect::<Result<Vec<_>, _>>()?
    };
    models::ensure(&specs)?;
    Ok(())
}

fn test_cmd(ci: bool) -> Result<(), TaskError> {
    let root = workspace_root();
    let model_dir = models::model_dir()?;
    let (suite_root, suite_models) = (root.clone(), model_dir.clone());
    let mut list: Vec<Step> = Vec::new();
    if ci {
        list.push(Step::new("environment", || {
            util::print_environment(&models::model_dir()?);
            Ok(())
        }));
    }
    list.push(Step::new("models", || models::ensure(&models::MODELS.iter().collect::<Vec<_>>())));
    list.push(Step::new("cargo test", move || {
        // The test profile is optimised (see Cargo.toml) without release's LTO link time.
        // No fail-fast inside cargo: one run should list every failing test binary.
        let mut cmd = cargo();
        cmd.current_dir(&root).args(["test", "--workspace", "--no-fail-fast"]).env("TERN_MODEL_DIR", &model_dir);
        run_cmd(&mut cmd, "cargo test --workspace --no-fail-fast")
    }));
    let check_root = workspace_root();
    list.push(Step::new("android battery meter (JNI in a desktop JVM)", move || {
        // The JNI meter builds only for Android by default; this builds it here and runs its
        // calls against stand-in classes in a JVM.
        let mut cmd = cargo();
        cmd.current_dir(&check_root).args([
            "test",
            "-p",
            "tern",
            "--features",
            "android-battery",
            "--test",
            "android_battery_jvm",
        ]);
        run_cmd(&mut cmd, "cargo test -p tern --features android-battery --test android_battery_jvm")
    }));
    list.extend(bindings::steps(&suite_root, &suite_models));
    steps::run_all(if ci { "ci" } else { "test" }, list)
}

fn demo_cmd(args: &[String]) -> Result<(), TaskError> {
    let (mut prompt, mut name) = (DEFAULT_PROMPT.to_owned(), DEMO_MODEL);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_owned())),
            None => (a.as_str(), None),
        };
        let value = match inline {
            Some(v) => v,
            None if matches!(flag, "--prompt" | "--model") => {
                it.next().cloned().ok_or_else(|| TaskError::Usage(format!("{flag} needs a value")))?
            }
            None => String::new(),
        };
        match flag {
            "--prompt" => prompt = value,
            "--model" => name = models::by_name(&value)?.name,
            s => return Err(TaskError::Usage(format!("unknown argument `{s}`"))),
        }
    }
    let spec = models::by_name(name)?;
    models::ensure(&[spec])?;
    let model_dir = models::model_dir()?;
    let model: PathBuf = model_dir.join(spec.file);
    let mut cmd = cargo();
    cmd.current_dir(workspace_root())
        .args(["run", "--release", "-p", "tern-cli", "--", "run", "--prompt"])
        .arg(&prompt)
        .arg("--model")
        .arg(&model)
        .env("TERN_MODEL_DIR", &model_dir);
    run_cmd(&mut cmd, "tern run")
}
