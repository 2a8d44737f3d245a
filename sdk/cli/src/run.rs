//! `tern run`: one prompt, streamed.

use std::path::PathBuf;

use clap::Args;
use tern::{Event, Grammar, Session, SessionOptions};

use crate::args::{load, ModelArgs, RuntimeArgs, SamplingArgs};
use crate::error::{CliError, Result};
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
    /// The answer must match this JSON Schema (given inline)
    #[arg(long, short = 'j', value_name = "SCHEMA", group = "grammar_source")]
    pub json_schema: Option<String>,
    /// The answer must match the JSON Schema in this file
    #[arg(long, value_name = "FILE", group = "grammar_source")]
    pub json_schema_file: Option<PathBuf>,
    /// The answer must match this Lark grammar (given inline, llguidance syntax)
    #[arg(long, value_name = "GRAMMAR", group = "grammar_source")]
    pub grammar: Option<String>,
    /// The answer must match the Lark grammar in this file
    #[arg(long, value_name = "FILE", group = "grammar_source")]
    pub grammar_file: Option<PathBuf>,
    /// The answer must match this regular expression
    #[arg(long, value_name = "REGEX", group = "grammar_source")]
    pub regex: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

impl RunArgs {
    /// The grammar the options ask for (read from its file where it is given as one).
    fn grammar(&self) -> Result<Option<Grammar>> {
        let read =
            |p: &PathBuf| std::fs::read_to_string(p).map_err(|e| CliError::Usage(format!("{}: {e}", p.display())));
        Ok(Some(if let Some(schema) = &self.json_schema {
            Grammar::JsonSchema(schema.clone())
        } else if let Some(p) = &self.json_schema_file {
            Grammar::JsonSchema(read(p)?)
        } else if let Some(lark) = &self.grammar {
            Grammar::Lark(lark.clone())
        } else if let Some(p) = &self.grammar_file {
            Grammar::Lark(read(p)?)
        } else if let Some(rx) = &self.regex {
            Grammar::Regex(rx.clone())
        } else {
            return Ok(None);
        }))
    }
}

pub fn run(a: RunArgs) -> Result<()> {
    let loaded = load(&a.model, a.runtime.threads(), a.runtime.ctx())?;
    let opts = SessionOptions {
        system_prompt: a.system.clone(),
        sampling: Some(a.sampling.options(&loaded.engine.info().sampling)),
        max_tokens: a.max_tokens,
        stop: a.stop.clone(),
        context_length: a.runtime.ctx(),
        ..Default::default()
    };
    let mut session = Session::new(loaded.engine, opts)?;
    session.set_grammar(a.grammar()?.as_ref())?;
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
