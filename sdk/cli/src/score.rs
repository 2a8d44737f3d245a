//! `tern score`: teacher-forced top-K logits, for comparing against a reference engine.

use std::fmt::Write as _;

use clap::Args;
use tern::tokenizer::Tokenizer;

use crate::args::{load, ModelArgs, RuntimeArgs};
use crate::error::{CliError, Result};
use crate::output::Stdout;

#[derive(Args, Debug)]
pub struct ScoreArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Token ids as a JSON array, e.g. '[1, 504, 3458]'
    #[arg(long, value_name = "JSON_ARRAY")]
    pub ids: String,
    /// How many top logits to keep per position
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
    /// Print JSON: one [[id, logit], ...] list per position
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

pub fn run(a: ScoreArgs) -> Result<()> {
    let ids: Vec<u32> = serde_json::from_str(&a.ids)
        .map_err(|e| CliError::Usage(format!("--ids must be a JSON array of token ids: {e}")))?;
    if ids.is_empty() {
        return Err(CliError::Usage("--ids is empty".into()));
    }
    let loaded = load(&a.model, a.runtime.threads(), a.runtime.ctx())?;
    let vocab = loaded.engine.info().vocab_size;
    if let Some((i, id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= vocab) {
        return Err(CliError::Usage(format!("--ids[{i}] = {id} is outside the vocabulary (size {vocab})")));
    }
    let top = loaded.engine.score(&ids, a.top as usize)?;
    let mut out = Stdout::new();
    if a.json {
        let json = serde_json::to_string(&top).map_err(|e| CliError::Other(e.to_string()))?;
        out.line(&json)?;
        return Ok(());
    }
    let tok = loaded.engine.tokenizer();
    out.line(&format!("{:>5}  {:<24} {:<24} {:>9}  rest (id:logit)", "pos", "input", "top-1", "logit"))?;
    for (pos, (&input, row)) in ids.iter().zip(&top).enumerate() {
        let mut line = format!("{pos:>5}  {:<24}", labelled(tok, input));
        // Writing into a String cannot fail.
        let _ = match row.first() {
            Some(&(id, logit)) => write!(line, " {:<24} {logit:>9.3} ", labelled(tok, id)),
            None => write!(line, " {:<24} {:>9} ", "-", "-"),
        };
        for &(id, logit) in row.iter().skip(1) {
            let _ = write!(line, " {id}:{logit:.3}");
        }
        out.line(&line)?;
        if out.closed() {
            break;
        }
    }
    Ok(())
}

/// `504 "Paris"`, the text cut short so that columns stay aligned.
fn labelled(tok: &Tokenizer, id: u32) -> String {
    let text = tok.decode(&[id], false);
    let mut quoted = format!("{text:?}");
    if quoted.chars().count() > 16 {
        quoted = quoted.chars().take(14).collect::<String>() + "…\"";
    }
    format!("{id} {quoted}")
}
