//! `tern tokenize`: text to token ids.

use clap::Args;

use crate::args::{load, ModelArgs};
use crate::error::{CliError, Result};
use crate::output::Stdout;

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The text to tokenize
    #[arg(long)]
    pub text: String,
    /// Parse special tokens written in the text (e.g. `<|im_start|>`) as single tokens
    #[arg(long)]
    pub special: bool,
    /// Never add the beginning-of-sequence token (by default the model's own rule decides)
    #[arg(long)]
    pub no_bos: bool,
}

pub fn run(a: TokenizeArgs) -> Result<()> {
    let loaded = load(&a.model, None, None)?;
    let tok = loaded.engine.tokenizer();
    let add_bos = !a.no_bos && tok.add_bos_default();
    let ids = tok.encode(&a.text, add_bos, a.special)?;
    let json = serde_json::to_string(&ids).map_err(|e| CliError::Other(e.to_string()))?;
    Stdout::new().line(&json)?;
    Ok(())
}
