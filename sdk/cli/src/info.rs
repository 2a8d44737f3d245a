//! `tern info`: what a model file holds.

use std::collections::BTreeMap;

use clap::Args;
use tern::gguf::GgufFile;
use tern::SamplingOptions;

use crate::args::{load, ModelArgs};
use crate::error::Result;
use crate::output::{mib, Stdout};

#[derive(Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    pub model: ModelArgs,
}

/// The sampling sessions get by default, and where it comes from.
fn sampling_line(s: &SamplingOptions, from_file: bool) -> String {
    let source = if from_file { "the model's recommendation" } else { "general purpose: the file recommends none" };
    format!(
        "temperature {} top-k {} top-p {} min-p {} repeat penalty {} ({source})",
        s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty
    )
}

pub fn run(a: InfoArgs) -> Result<()> {
    let path = a.model.path()?;
    // The tensor table comes from the file itself, so that a model the engine cannot load
    // (an unsupported tensor type, say) still shows what it holds.
    let file = GgufFile::open(&path)?;
    let loaded = load(&a.model, None, None);

    let mut rows = vec![("file", format!("{} ({})", path.display(), mib(file.bytes().len() as u64)))];
    match &loaded {
        Ok(l) => {
            let info = l.engine.info();
            rows.extend([
                ("architecture", info.architecture.clone()),
                ("name", info.name.clone()),
                ("parameters", format!("{} ({:.1} M)", info.n_params, info.n_params as f64 / 1e6)),
                ("context", format!("{} (trained for {})", info.context_length, info.train_context_length)),
                ("vocabulary", info.vocab_size.to_string()),
                ("kernels", format!("{} on {} threads", info.kernels, info.threads)),
                (
                    "sampling",
                    sampling_line(&info.sampling, file.metadata().keys().any(|k| k.starts_with("general.sampling."))),
                ),
                ("load time", format!("{} ms", l.load_time.as_millis())),
            ]);
        }
        Err(_) => {
            rows.push(("architecture", file.architecture().unwrap_or("?").to_owned()));
            rows.push(("name", file.get_str("general.name").unwrap_or("").to_owned()));
        }
    }
    rows.push(("gguf", format!("v{}, alignment {}", file.version(), file.alignment())));
    rows.push(("tensors", file.tensors().len().to_string()));

    let mut types: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for t in file.tensors() {
        let e = types.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.size;
    }
    let mut out = Stdout::new();
    for (k, v) in rows {
        out.line(&format!("{k:<14}{v}"))?;
    }
    for (ty, (count, bytes)) in types {
        out.line(&format!("  {ty:<12}{count:>5}  {:>12}", mib(bytes)))?;
    }
    loaded.map(|_| ())
}
