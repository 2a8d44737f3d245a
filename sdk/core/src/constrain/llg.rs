//! The llguidance backend: vocabulary trie, grammar compilation, per-answer token masks.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};

use super::{ConstraintTime, Grammar, TokenBytes};
use crate::error::{Error, Result};

/// JSON formatting applied to schemas that do not choose their own: one compact line, the
/// separators chat models write. Without it the grammar allows any whitespace between items,
/// and small models can get stuck emitting newlines.
const COMPACT_JSON: &str = r#"{"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}"#;

/// A model's vocabulary as the grammar engine sees it, with its compiled-grammar factory. Built
/// once per engine (a trie over every token's bytes) and shared by its sessions.
pub struct Vocabulary {
    factory: Arc<ParserFactory>,
    size: usize,
}

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary").field("size", &self.size).finish()
    }
}

/// llguidance asks its environment to tokenize literal text only for token forcing, which the
/// sessions do not use; greedy longest-match over the trie is the documented fallback.
struct TrieEnv {
    trie: TokTrie,
}

impl TokenizerEnv for TrieEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        self.trie.greedy_tokenize(s)
    }

    fn tokenize_is_canonical(&self) -> bool {
        false
    }
}

impl Vocabulary {
    /// `tokens[id]` is what token `id` stands for; `end` lists the end-of-generation ids (at
    /// least one), any of which may end an answer once the grammar is complete.
    pub fn new(tokens: Vec<TokenBytes>, end: &[u32]) -> Result<Vocabulary> {
        let size = tokens.len();
        if end.is_empty() || end.iter().any(|&t| t as usize >= size) {
            return Err(Error::Grammar("the vocabulary has no valid end-of-generation token".into()));
        }
        let words: Vec<Vec<u8>> = tokens
            .into_iter()
            .map(|t| match t {
                TokenBytes::Text(b) => b,
                TokenBytes::Special(mut b) => {
                    b.insert(0, TokTrie::SPECIAL_TOKEN_MARKER);
                    b
                }
            })
            .collect();
        let size_u32 = u32::try_from(size).map_err(|_| Error::Grammar("vocabulary too large".into()))?;
        // The trie builder asserts on shapes no real vocabulary has; keep such a file's problem
        // a typed error rather than a panic in the app.
        let built = catch_unwind(AssertUnwindSafe(|| {
            let trie = TokTrie::from(&TokRxInfo::new(size_u32, end[0]), &words).with_eos_tokens(end);
            let env: TokEnv = Arc::new(TrieEnv { trie });
            ParserFactory::new_simple(&env)
        }));
        let mut factory = match built {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return Err(Error::Grammar(format!("cannot index the vocabulary: {e}"))),
            Err(_) => return Err(Error::Grammar("cannot index the vocabulary".into())),
        };
        factory.quiet();
        // Errors must not carry the parser state: it holds the generated text.
        *factory.limits_mut() = ParserLimits { verbose_errors: false, ..ParserLimits::default() };
        Ok(Vocabulary { factory: Arc::new(factory), size })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// A grammar compiled for one vocabulary, ready to start any number of answers.
#[derive(Clone)]
pub struct CompiledGrammar {
    /// The parser before the first token; each answer starts from a clone.
    start: Matcher,
    size: usize,
}

impl fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledGrammar").finish_non_exhaustive()
    }
}

impl CompiledGrammar {
    pub(super) fn new(vocab: &Vocabulary, grammar: &Grammar) -> Result<CompiledGrammar> {
        let top = match grammar {
            Grammar::JsonSchema(text) => {
                let mut schema: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| Error::Grammar(format!("the JSON Schema is not valid JSON: {e}")))?;
                if let Some(obj) = schema.as_object_mut() {
                    if !obj.contains_key("x-guidance") {
                        let compact = serde_json::from_str(COMPACT_JSON).unwrap_or_default();
                        obj.insert("x-guidance".into(), compact);
                    }
                }
                TopLevelGrammar::from_json_schema(schema)
            }
            Grammar::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
            Grammar::Regex(rx) => TopLevelGrammar::from_regex(rx),
        };
        let mut start = Matcher::new(vocab.factory.create_parser(top));
        if let Some(e) = start.get_error() {
            return Err(Error::Grammar(first_line(&e)));
        }
        // Computing the first mask also builds the lexer: a grammar that is too large or
        // ambiguous for the library's limits fails here, still before generation.
        if let Err(e) = start.compute_mask() {
            return Err(Error::Grammar(first_line(&e.to_string())));
        }
        Ok(CompiledGrammar { start, size: vocab.size })
    }

    /// The constraint for one answer, at its first token.
    pub fn start(&self) -> TokenConstraint {
        TokenConstraint {
            matcher: self.start.clone(),
            mask: None,
            error: None,
            size: self.size,
            time: ConstraintTime::default(),
        }
    }
}

/// The grammar's state during one answer.
#[derive(Clone)]
pub struct TokenConstraint {
    matcher: Matcher,
    /// Tokens allowed next; computed at the first question after each accepted token.
    mask: Option<SimpleVob>,
    /// The first failure; every later use reports it.
    error: Option<String>,
    size: usize,
    time: ConstraintTime,
}

impl fmt::Debug for TokenConstraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConstraint")
            .field("complete", &self.is_complete())
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl TokenConstraint {
    fn ensure_mask(&mut self) -> Option<&SimpleVob> {
        if self.mask.is_none() && self.error.is_none() {
            let t0 = Instant::now();
            match self.matcher.compute_mask_or_eos() {
                Ok(m) => self.mask = Some(m),
                Err(e) => self.error = Some(first_line(&e.to_string())),
            }
            self.time.total += t0.elapsed();
            self.time.masks += 1;
        }
        self.mask.as_ref()
    }

    /// Sets the logits of every token the grammar forbids here to -inf. After a failure every
    /// token is forbidden (and [`accept`](Self::accept) reports the failure).
    pub fn mask_logits(&mut self, logits: &mut [f32]) {
        self.ensure_mask();
        let t0 = Instant::now();
        match &self.mask {
            Some(mask) => apply_mask(mask.as_slice(), logits),
            None => logits.fill(f32::NEG_INFINITY),
        }
        self.time.total += t0.elapsed();
    }

    /// Whether the grammar allows `token` next.
    pub fn allows(&mut self, token: u32) -> bool {
        (token as usize) < self.size && self.ensure_mask().is_some_and(|m| m.is_allowed(token))
    }

    /// Advances past `token`, which the session has committed. A token the grammar forbids is
    /// an [`Error::Constraint`]; so is any earlier failure.
    pub fn accept(&mut self, token: u32) -> Result<()> {
        if !self.allows(token) {
            return Err(Error::Constraint(match &self.error {
                Some(e) => e.clone(),
                None => format!("token {token} is not allowed by the grammar here"),
            }));
        }
        let t0 = Instant::now();
        let r = self.matcher.consume_token(token);
        self.time.total += t0.elapsed();
        self.mask = None;
        r.map_err(|e| {
            let msg = first_line(&e.to_string());
            self.error = Some(msg.clone());
            Error::Constraint(msg)
        })
    }

    /// True once the grammar can accept nothing more: the answer is complete.
    pub(crate) fn is_complete(&self) -> bool {
        self.error.is_none() && !self.matcher.is_error() && self.matcher.is_stopped()
    }

    /// Whether the text so far is a complete sentence of the grammar (it may still go on).
    pub fn is_accepting(&mut self) -> bool {
        self.error.is_none() && self.matcher.is_accepting().unwrap_or(false)
    }

    /// Time spent on masks and tokens so far.
    pub fn time(&self) -> ConstraintTime {
        self.time
    }
}

/// Forbids (-inf) every logit whose bit in `words` is clear. Whole words of 32 allowed or
/// forbidden tokens are handled at once: masks are mostly one or the other.
fn apply_mask(words: &[u32], logits: &mut [f32]) {
    for (w, chunk) in words.iter().zip(logits.chunks_mut(32)) {
        match *w {
            u32::MAX => {}
            0 => chunk.fill(f32::NEG_INFINITY),
            bits => {
                for (i, l) in chunk.iter_mut().enumerate() {
                    if bits & (1 << i) == 0 {
                        *l = f32::NEG_INFINITY;
                    }
                }
            }
        }
    }
    // Logits beyond the grammar's vocabulary (a padded output layer) are never allowed.
    if let Some(rest) = logits.get_mut(words.len() * 32..) {
        rest.fill(f32::NEG_INFINITY);
    }
}

/// llguidance errors can run to several lines of context; the first says what went wrong.
fn first_line(msg: &str) -> String {
    msg.lines().next().unwrap_or("grammar error").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::apply_mask;

    #[test]
    fn mask_keeps_exactly_the_allowed_bits() {
        let words = [u32::MAX, 0, 0b1010, 1 << 31];
        let mut logits = vec![1.0f32; 130];
        apply_mask(&words, &mut logits);
        for (i, l) in logits.iter().enumerate() {
            let allowed = i < 32 || i == 65 || i == 67 || i == 127;
            assert_eq!(*l == 1.0, allowed, "token {i}");
        }
    }
}
