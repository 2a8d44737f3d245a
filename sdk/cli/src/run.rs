//! `tern run`: one prompt, streamed.

use clap::Args;
use tern::{Event, Session, SessionOptions};

use crate::args::{load, ModelArgs, RuntimeArgs, SamplingArgs};
use crate::error::Result;
use crate::output::{self, Stdout};

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The user message (or, with --raw, the text to continue)
    #[arg(long, short = 'p')]
    pub prompt: String,
    /// Stop after this many generated tokens
    #[arg(long, short = 'n', default_value_t = 256)]
    pub max_tokens: usize,
    /// System prompt for the chat template
    #[arg(long, conflicts_with = "raw")]
    pub system: Option<String>,
    /// Stop when the output contains this text (repeatable)
    #[arg(long = "stop", value_name = "STR")]
    pub stop: Vec<String>,
    /// Continue the prompt as plain text, without the chat template
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

pub fn run(a: RunArgs) -> Result<()> {
    let loaded = load(&a.model, a.runtime.threads(), a.runtime.ctx())?;
    let opts = SessionOptions {
        system_prompt: a.system.clone(),
        sampling: a.sampling.options(),
        max_tokens: a.max_tokens,
        stop: a.stop.clone(),
        context_length: a.runtime.ctx(),
        ..Default::default()
    };
    let mut session = Session::new(loaded.engine, opts)?;
    let generation = if a.raw { session.complete(&a.prompt)? } else { session.send(&a.prompt)? };
    let mut out = Stdout::new();
    if let Some(stats) = stream(generation, &mut out)? {
        out.write("\n")?;
        eprintln!("{}", output::stats_line(&stats));
    }
    Ok(())
}

/// Streams one generation to stdout; returns its stats, or None if stdout closed first.
pub fn stream(generation: impl Iterator<Item = tern::Result<Event>>, out: &mut Stdout) -> Result<Option<tern::Stats>> {
    for event in generation {
        match event? {
            Event::Token { text, .. } => {
                out.write(&text)?;
                if out.closed() {
                    // Dropping the generation ends it; nobody is reading any more.
                    return Ok(None);
                }
            }
            Event::Done(stats) => return Ok(Some(stats)),
        }
    }
    Ok(None)
}
