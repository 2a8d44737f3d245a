//! Builds without the `structured` feature: the same types, and every grammar is refused.

use super::{ConstraintTime, Grammar, TokenBytes};
use crate::error::{Error, Result};

const UNAVAILABLE: &str = "structured output is not in this build (cargo feature `structured`)";

/// Stands in for the vocabulary index of builds with the feature.
#[derive(Debug)]
pub struct Vocabulary {
    size: usize,
}

impl Vocabulary {
    pub fn new(tokens: Vec<TokenBytes>, _end: &[u32]) -> Result<Vocabulary> {
        Ok(Vocabulary { size: tokens.len() })
    }

    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// Never built: [`Grammar::compile`] always fails in this build.
#[derive(Debug, Clone)]
pub struct CompiledGrammar {
    _private: (),
}

impl CompiledGrammar {
    pub(super) fn new(_vocab: &Vocabulary, _grammar: &Grammar) -> Result<CompiledGrammar> {
        Err(Error::Grammar(UNAVAILABLE.into()))
    }

    pub fn start(&self) -> TokenConstraint {
        TokenConstraint { _private: () }
    }
}

/// Never built, like [`CompiledGrammar`]; were it, it would refuse every token.
#[derive(Debug, Clone)]
pub struct TokenConstraint {
    _private: (),
}

impl TokenConstraint {
    pub fn mask_logits(&mut self, logits: &mut [f32]) {
        logits.fill(f32::NEG_INFINITY);
    }

    pub fn allows(&mut self, _token: u32) -> bool {
        false
    }

    pub fn accept(&mut self, _token: u32) -> Result<()> {
        Err(Error::Constraint(UNAVAILABLE.into()))
    }

    pub(crate) fn is_complete(&self) -> bool {
        false
    }

    pub fn is_accepting(&mut self) -> bool {
        false
    }

    pub fn time(&self) -> ConstraintTime {
        ConstraintTime::default()
    }
}
