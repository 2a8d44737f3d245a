//! `tern pull`: downloads a model into the model directory through the model store, with a
//! progress bar. Ctrl-C stops it and keeps what arrived; the next pull resumes from there.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tern_store::{known_models, DownloadEvent, DownloadOptions, ModelSpec, Store};

use crate::args::model_dir;
use crate::error::{CliError, Result};

#[derive(Args, Debug)]
pub struct PullArgs {
    /// A model Tern knows (smollm2, qwen2.5, gemma3), or any name with --sha256 and --size
    pub name: String,
    /// Where to download the file from (http or https)
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// SHA-256 of the file (hex), for a model Tern does not know
    #[arg(long, value_name = "HEX", requires = "size")]
    pub sha256: Option<String>,
    /// Size of the file in bytes, for a model Tern does not know
    #[arg(long, value_name = "BYTES", requires = "sha256")]
    pub size: Option<u64>,
    /// Directory to store the model in [default: $TERN_MODEL_DIR, else ~/.cache/tern/models]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// What to download: a known model, or the file the URL names with the given hash and size.
fn spec(a: &PullArgs) -> Result<ModelSpec> {
    if let (Some(sha256), Some(size)) = (&a.sha256, a.size) {
        let file_name = a.url.rsplit('/').next().unwrap_or_default().split(['?', '#']).next().unwrap_or_default();
        return Ok(ModelSpec::new(&a.name, file_name, size, &sha256.to_ascii_lowercase()));
    }
    let known = known_models();
    known.iter().find(|m| m.name == a.name).cloned().ok_or_else(|| {
        let names: Vec<&str> = known.iter().map(|m| m.name.as_str()).collect();
        CliError::Usage(format!(
            "unknown model `{}`: pass --sha256 and --size for it, or one of {}",
            a.name,
            names.join(", ")
        ))
    })
}

pub fn run(a: PullArgs) -> Result<()> {
    let spec = spec(&a)?;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => model_dir()?,
    };
    let store = Store::open(&dir).map_err(store_error)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    // Without a handler (another one is set) Ctrl-C just ends the process; the part file stays.
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Release));
    let opts = DownloadOptions { cancel: Some(Arc::clone(&cancel)), ..Default::default() };

    let bar = ProgressBar::new(spec.size);
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(spec.file_name.clone());
    let result = store.download(&spec, &a.url, &opts, &mut |event| match event {
        DownloadEvent::Started { from, .. } => bar.set_position(*from),
        DownloadEvent::Progress { downloaded, .. } => bar.set_position(*downloaded),
        DownloadEvent::Retrying { downloaded, attempt } => {
            bar.println(format!("connection lost at {downloaded} bytes; resuming (attempt {attempt})"))
        }
        DownloadEvent::Verifying => bar.set_message(format!("{} (checking its SHA-256)", spec.file_name)),
        DownloadEvent::Done { .. } => {}
    });
    bar.finish_and_clear();
    let path = result.map_err(store_error)?;
    println!("{}", path.display());
    Ok(())
}

fn store_error(e: tern_store::StoreError) -> CliError {
    CliError::Other(e.to_string())
}
