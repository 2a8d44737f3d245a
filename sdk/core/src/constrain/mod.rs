//! Constrained decoding: answers that must match a JSON Schema, a Lark grammar or a regular
//! expression.
//!
//! A [`Grammar`] is compiled once against a model's vocabulary into a [`CompiledGrammar`]; each
//! answer then runs a fresh [`TokenConstraint`] from it. The constraint lives inside the
//! [`Sampler`](crate::sampling::Sampler): before a token is chosen it masks every token the
//! grammar forbids at that point, and the session advances it past each token it commits. When
//! the grammar can go no further the answer is complete.
//!
//! The work is done by llguidance (the library behind llama.cpp's and vLLM's structured output):
//! an Earley parser over a lexer of derivative-based regexes, walking a trie of the vocabulary's
//! token bytes. It needs Rust 1.87, so it is compiled only with the `structured` cargo feature;
//! without it every grammar is refused with [`crate::Error::Grammar`].

#[cfg(feature = "structured")]
mod llg;
#[cfg(not(feature = "structured"))]
mod unavailable;
#[cfg(feature = "structured")]
use llg as backend;
#[cfg(not(feature = "structured"))]
use unavailable as backend;

use std::time::Duration;

use crate::error::Result;
use crate::tokenizer::Tokenizer;

pub use backend::{CompiledGrammar, TokenConstraint, Vocabulary};

/// What an answer must match. Text payloads keep the type plain for language bindings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "source", rename_all = "snake_case")]
pub enum Grammar {
    /// A JSON Schema (draft 2020-12 subset that llguidance supports), as JSON text. The answer is
    /// one JSON value, written compactly (`", "` and `": "` separators, no other whitespace)
    /// unless the schema sets its own `x-guidance` formatting options.
    JsonSchema(String),
    /// A grammar in llguidance's Lark syntax (`start: ...`; `%json { ... }` embeds a schema).
    Lark(String),
    /// A regular expression (Rust `regex` syntax) the whole answer must match.
    Regex(String),
}

impl Grammar {
    /// A JSON Schema given as a value.
    pub fn json_schema(schema: &serde_json::Value) -> Grammar {
        Grammar::JsonSchema(schema.to_string())
    }

    /// Compiles the grammar for `vocab`. Grammars the library cannot handle (syntax errors,
    /// unsupported schema keywords, unsatisfiable schemas, builds without the `structured`
    /// feature) give [`crate::Error::Grammar`] here, before any generation.
    pub fn compile(&self, vocab: &Vocabulary) -> Result<CompiledGrammar> {
        CompiledGrammar::new(vocab, self)
    }
}

/// Builds the vocabulary view a grammar compiles against: every token's bytes, control tokens
/// marked as special, and the end-of-generation tokens that may end an answer.
pub fn vocabulary(tokenizer: &Tokenizer) -> Result<Vocabulary> {
    let n = tokenizer.vocab_size();
    let mut tokens = Vec::with_capacity(n);
    for id in 0..n as u32 {
        tokens.push(if tokenizer.is_control(id) {
            TokenBytes::Special(tokenizer.token_to_bytes(id, true))
        } else {
            TokenBytes::Text(tokenizer.token_to_bytes(id, false))
        });
    }
    let mut end = tokenizer.eog_ids().to_vec();
    if end.is_empty() {
        end.extend(tokenizer.eos_id());
    }
    Vocabulary::new(tokens, &end)
}

/// What one vocabulary entry stands for, as far as grammars are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenBytes {
    /// Text bytes (possibly part of a UTF-8 character); empty for tokens that never appear.
    Text(Vec<u8>),
    /// A control token such as `<|im_end|>`: grammars match it only by name (`<|im_end|>` in
    /// Lark), never as text.
    Special(Vec<u8>),
}

/// Time a constraint has spent computing masks and following tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConstraintTime {
    pub total: Duration,
    /// Masks computed (about one per sampled token).
    pub masks: usize,
}

#[cfg(all(test, not(feature = "structured")))]
mod tests {
    use super::*;

    #[test]
    fn builds_without_the_feature_refuse_grammars() {
        let vocab = Vocabulary::new(vec![TokenBytes::Text(b"a".to_vec())], &[0]).expect("vocabulary");
        let err = Grammar::Regex("a".into()).compile(&vocab).err();
        assert!(matches!(err, Some(crate::Error::Grammar(_))), "{err:?}");
    }
}
