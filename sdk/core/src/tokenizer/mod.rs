//! Tokenizers from GGUF metadata: byte-level BPE and SentencePiece-style.
//!
//! The reference is llama.cpp (`llama-vocab.cpp`, as shipped in llama-cpp-python 0.3.36):
//! the same ids for the same text, special tokens, BOS and end-of-generation rules included,
//! so that prompts match what the models were converted and tested with. Its rules include
//! two that may surprise: user-defined tokens (Gemma's whitespace runs, Qwen's `<tool_call>`)
//! are cut out of the text even when special parsing is off, and tokens that end generation
//! by their text (such as `</s>` in Qwen's vocabulary) count as control tokens.
//!
//! Three families of vocabularies: SentencePiece (`llama`: Llama 2, Phi-3, Gemma 3), byte-level
//! BPE (`gpt2`, with the pre-tokenizer `tokenizer.ggml.pre` names: Llama 3, Qwen 2/3/3.5,
//! SmolLM, GPT-2, ...) and SentencePiece-style BPE over characters (`gemma4`). Each is held to
//! llama.cpp's own tokenizer tests (`tests/vocab.rs`).
//!
//! Known differences from llama.cpp, none of which the supported models exercise:
//! - an unknown `tokenizer.ggml.pre` (and `default`) uses the GPT-2 pattern instead of
//!   failing to load (llama.cpp rejects unknown values; its `default` chains four regexes);
//! - of the per-model token attributes llama.cpp sets by name, only Phi-3's RSTRIP is applied
//!   (not jina's or modern-bert's `<mask>` LSTRIP); `clean_spaces` detokenization is not
//!   applied; decoding never strips a leading space;
//! - unassigned code points count as punctuation in the pre-tokenizers, where llama.cpp's
//!   flags leave them in no class;
//! - a BPE merge result missing from the vocabulary falls back to the byte tokens of its
//!   text, where llama.cpp looks up single bytes of the mapped text (dropping most of them);
//! - duplicate vocabulary texts resolve to the first id (llama.cpp refuses the file).

mod bpe;
mod pretok;
mod special;
mod spm;
mod stream;
mod unicode;
mod vocab;

pub use stream::StreamDecoder;

use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use bpe::{Alphabet, Bpe, BpeScratch};
use pretok::PreTokenizer;
use special::{Fragment, SpecialMatcher};
use spm::{Spm, SpmScratch};
use vocab::{Arena, Index};

/// Token attributes, as llama.cpp's `llama_token_attr` bits.
pub(crate) mod attr {
    pub(crate) const UNKNOWN: u16 = 1 << 0;
    pub(crate) const UNUSED: u16 = 1 << 1;
    pub(crate) const NORMAL: u16 = 1 << 2;
    pub(crate) const CONTROL: u16 = 1 << 3;
    pub(crate) const USER_DEFINED: u16 = 1 << 4;
    pub(crate) const BYTE: u16 = 1 << 5;
    /// Whitespace before the token's text is dropped when the text is cut out of the input.
    pub(crate) const LSTRIP: u16 = 1 << 7;
    /// Whitespace after it is dropped.
    pub(crate) const RSTRIP: u16 = 1 << 8;

    /// From `tokenizer.ggml.token_type` (1 normal, 2 unknown, 3 control, 4 user-defined,
    /// 5 unused, 6 byte; anything else undefined, which decodes to nothing).
    pub(crate) fn from_type(t: i64) -> u16 {
        match t {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => 0,
        }
    }
}

/// Vocabulary texts; ids past `n` are BPE merge intermediates that are not tokens.
struct Vocab {
    arena: Arena,
    /// Text -> id over the `n` tokens.
    index: Index,
    n: usize,
}

enum Model {
    Bpe(Box<Bpe>),
    Spm(Box<Spm>),
}

/// A model's tokenizer, built once from its GGUF metadata; immutable, so one instance
/// serves every thread.
pub struct Tokenizer {
    vocab: Vocab,
    attrs: Vec<u16>,
    model: Model,
    special: SpecialMatcher,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    /// Sorted, unique.
    eog: Vec<u32>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field(
                "model",
                &match self.model {
                    Model::Bpe(_) => "bpe",
                    Model::Spm(_) => "spm",
                },
            )
            .field("vocab_size", &self.vocab.n)
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .field("eog", &self.eog)
            .finish()
    }
}

// Special tokens llama.cpp (`llama_vocab::impl::load`) finds by their text when the file
// does not name them; every one found is forced to control type.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
/// Texts that end generation wherever they appear in a vocabulary (also forced to control).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// Structure tokens some vocabularies mark as control although they must print (gpt-oss).
const ALWAYS_PRINTED_TEXTS: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// Whitespace stripping around special tokens, which GGUF files do not store: llama.cpp sets it
/// by model name, as the Hugging Face tokenizers of those models do (Phi-3: `<|user|>\n` is
/// `<|user|>`).
fn strip_attributes(file: &GgufFile, vocab: &Vocab, attrs: &mut [u16]) -> Result<()> {
    let name = match file.get("general.name") {
        Some(_) => file.get_str("general.name")?.to_lowercase(),
        None => return Ok(()),
    };
    if name.contains("phi-3") || name.contains("phi3") {
        for a in attrs.iter_mut() {
            if *a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0 {
                *a |= attr::RSTRIP;
            }
        }
        let mut set = |text: &str, on: bool| {
            if let Some(id) = vocab.index.get(&vocab.arena, text.as_bytes()) {
                let a = &mut attrs[id as usize];
                *a = if on { *a | attr::RSTRIP } else { *a & !attr::RSTRIP };
            }
        };
        set("</s>", true);
        for text in ["<unk>", "<s>", "<|endoftext|>"] {
            set(text, false);
        }
    }
    Ok(())
}

/// The end-of-generation ids, adjusting `attrs` on the way as llama.cpp does.
fn end_of_generation(file: &GgufFile, vocab: &Vocab, attrs: &mut [u16], eos: Option<u32>) -> Result<Vec<u32>> {
    let n = vocab.n;
    let find = |t: &str| vocab.index.get(&vocab.arena, t.as_bytes());
    // The id under `key`, else the first vocabulary entry with one of `texts` (made control).
    let mut by_text = |key: &str, texts: &[&str]| -> Result<Option<u32>> {
        if let Some(id) = opt_id(file, key, n)? {
            return Ok(Some(id));
        }
        let id = texts.iter().find_map(|t| find(t));
        if let Some(id) = id {
            attrs[id as usize] |= attr::CONTROL;
        }
        Ok(id)
    };
    let eot = by_text("tokenizer.ggml.eot_token_id", EOT_TEXTS)?;
    let eom = by_text("tokenizer.ggml.eom_token_id", EOM_TEXTS)?;
    by_text("tokenizer.ggml.fim_pre_token_id", FIM_PRE_TEXTS)?;
    by_text("tokenizer.ggml.fim_suf_token_id", FIM_SUF_TEXTS)?;
    by_text("tokenizer.ggml.fim_mid_token_id", FIM_MID_TEXTS)?;
    let fim_pad = by_text("tokenizer.ggml.fim_pad_token_id", FIM_PAD_TEXTS)?;
    let fim_rep = by_text("tokenizer.ggml.fim_rep_token_id", FIM_REP_TEXTS)?;
    let fim_sep = by_text("tokenizer.ggml.fim_sep_token_id", FIM_SEP_TEXTS)?;

    let mut eog: Vec<u32> = [fim_pad, fim_rep, fim_sep].into_iter().flatten().collect();
    for id in EOG_TEXTS.iter().filter_map(|t| find(t)) {
        attrs[id as usize] |= attr::CONTROL;
        eog.push(id);
    }
    for id in ALWAYS_PRINTED_TEXTS.iter().filter_map(|t| find(t)) {
        attrs[id as usize] = attr::USER_DEFINED;
    }
    eog.extend([eos, eot, eom].into_iter().flatten());

    let in_eog = |eog: &[u32], t: &str| find(t).filter(|id| eog.contains(id));
    // Harmony-style vocabularies end a turn with <|return|> or <|call|>; their <|end|> only
    // closes a message and prints.
    if let Some(end) = in_eog(&eog, "<|end|>") {
        let call = in_eog(&eog, "<|call|>").or(in_eog(&eog, "<|calls|>")).is_some();
        let ret = in_eog(&eog, "<|return|>").is_some();
        let flush = in_eog(&eog, "<|flush|>").is_some();
        if call && (ret || flush) {
            eog.retain(|&id| id != end);
            attrs[end as usize] = attr::USER_DEFINED;
        }
    }
    // Where <|tool_response> ends turns, </s> is ordinary text.
    if let (Some(_), Some(s)) = (in_eog(&eog, "<|tool_response>"), in_eog(&eog, "</s>")) {
        eog.retain(|&id| id != s);
        attrs[s as usize] = attr::NORMAL;
    }
    eog.sort_unstable();
    eog.dedup();
    Ok(eog)
}

impl Tokenizer {
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer> {
        let model_name = file.get_str("tokenizer.ggml.model")?;
        let (is_spm, alphabet) = match model_name {
            "llama" => (true, Alphabet::Bytes),
            "gpt2" => (false, Alphabet::Bytes),
            // SentencePiece-style BPE: merges over characters, spaces as U+2581.
            "gemma4" => (false, Alphabet::Chars),
            other => {
                return Err(Error::Tokenizer(format!(
                    "unsupported tokenizer model `{other}` (supported: gpt2, llama, gemma4)"
                )))
            }
        };

        let mut vocab = read_vocab(file)?;
        let n = vocab.n;
        let mut attrs = read_attrs(file, n)?;

        let id_key = |key: &str| opt_id(file, key, n);
        let mut bos = id_key("tokenizer.ggml.bos_token_id")?;
        let mut eos = id_key("tokenizer.ggml.eos_token_id")?;
        let mut unk = id_key("tokenizer.ggml.unknown_token_id")?;
        if is_spm {
            // llama.cpp's defaults for SentencePiece vocabularies.
            let default = |id: u32| ((id as usize) < n).then_some(id);
            bos = bos.or(default(1));
            eos = eos.or(default(2));
            unk = unk.or(default(0));
        }

        let eog = end_of_generation(file, &vocab, &mut attrs, eos)?;

        let pre = match file.get("tokenizer.ggml.pre") {
            // llama.cpp ignores the key for Gemma 4's model.
            _ if alphabet == Alphabet::Chars => Some(PreTokenizer::Lines),
            Some(_) => PreTokenizer::from_name(file.get_str("tokenizer.ggml.pre")?),
            None => None,
        };
        // llama3-style vocabularies start prompts with BOS by default, as in llama.cpp.
        let llama3 = !is_spm && matches!(pre, Some(PreTokenizer::Llama3 { max_digits: 3, .. }));
        let model = if is_spm {
            let scores = read_scores(file, n)?;
            let add_space_prefix = opt_bool(file, "tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
            Model::Spm(Box::new(Spm::new(&vocab, scores, unk, add_space_prefix)))
        } else {
            // Unknown or missing `pre`: the plain GPT-2 pattern, the common ancestor of all
            // byte-level pre-tokenizers (a best effort; ids may differ from the model's own).
            let pre = pre.unwrap_or(PreTokenizer::Gpt2);
            Model::Bpe(Box::new(Bpe::load(file, &mut vocab, pre, alphabet, llama3)?))
        };
        let add_bos = match alphabet {
            // llama.cpp always starts Gemma 4 prompts with BOS, whatever the file says.
            Alphabet::Chars => true,
            Alphabet::Bytes => opt_bool(file, "tokenizer.ggml.add_bos_token")?.unwrap_or(is_spm || llama3),
        };
        strip_attributes(file, &vocab, &mut attrs)?;

        let special = SpecialMatcher::new(&vocab.arena, &attrs);
        Ok(Tokenizer { vocab, attrs, model, special, bos, eos, add_bos, eog })
    }

    /// Token ids of `text`. `add_bos` prepends BOS (pass [`Self::add_bos_default`] unless the
    /// text already carries one); `parse_special` turns control-token texts such as
    /// `<|im_start|>` into their ids (user-defined tokens are matched either way, as llama.cpp
    /// does), otherwise they are tokenized as plain text.
    pub fn encode(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<u32>> {
        self.encode_parts(text, add_bos, parse_special, &[])
    }

    /// [`encode`](Self::encode) with special tokens parsed except inside the byte ranges of
    /// `plain` (sorted, not overlapping), whose control-token texts stay text: a rendered chat
    /// prompt whose markup is control tokens and whose message contents are the user's words.
    /// Everything else tokenizes as `encode(text, add_bos, true)` does.
    pub(crate) fn encode_with_plain_ranges(
        &self,
        text: &str,
        add_bos: bool,
        plain: &[std::ops::Range<usize>],
    ) -> Result<Vec<u32>> {
        let ordered = plain.windows(2).all(|w| w[0].end <= w[1].start);
        if !ordered || plain.last().is_some_and(|r| r.end > text.len() || r.start > r.end) {
            return Err(Error::InvalidOption("plain ranges must be sorted, disjoint and inside the text".into()));
        }
        self.encode_parts(text, add_bos, true, plain)
    }

    /// Whether `text` holds the text of a control token that special parsing would turn into
    /// its id (`<|im_start|>`, `<end_of_turn>`, ...).
    pub fn contains_control_text(&self, text: &str) -> bool {
        self.special
            .partition(&self.vocab, &self.attrs, text, true, &[])
            .iter()
            .any(|f| matches!(f, Fragment::Token(id) if special::needs_parsing(self.attr(*id))))
    }

    fn encode_parts(
        &self,
        text: &str,
        add_bos: bool,
        parse_special: bool,
        plain: &[std::ops::Range<usize>],
    ) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_bos {
            out.push(self.bos.ok_or_else(|| Error::Tokenizer("BOS requested but the model has no BOS token".into()))?);
        }
        let fragments = self.special.partition(&self.vocab, &self.attrs, text, parse_special, plain);
        match &self.model {
            Model::Bpe(bpe) => {
                let mut scratch = BpeScratch::default();
                for f in fragments {
                    match f {
                        Fragment::Text(t) => bpe.encode(&self.vocab, t, &mut scratch, &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Model::Spm(spm) => {
                let mut scratch = SpmScratch::default();
                let mut escaped = String::new();
                // The space prefix goes before text that starts the input or follows a special token.
                let mut after_special = true;
                for f in fragments {
                    match f {
                        Fragment::Text(t) => {
                            escaped.clear();
                            if spm.add_space_prefix && after_special {
                                escaped.push_str(spm::SPACE_MARK);
                            }
                            spm::escape_spaces(t, &mut escaped);
                            spm.encode(&self.vocab, &escaped, &mut scratch, &mut out)?;
                            after_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            after_special = true;
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Whether prompts should start with BOS (`tokenizer.ggml.add_bos_token`, else the
    /// model type's default: SentencePiece yes, byte-level BPE no).
    pub fn add_bos_default(&self) -> bool {
        self.add_bos
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Whether generating `id` ends the answer (EOS, end-of-turn and the like).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.n
    }

    /// The vocabulary string of `id` as stored in the file (byte-level or `▁` escaped).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        ((id as usize) < self.vocab.n).then(|| self.vocab.arena.get(id))
    }

    /// The id whose vocabulary string is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.index.get(&self.vocab.arena, text.as_bytes())
    }

    /// Control tokens (BOS, `<|im_end|>`, ...) decode to nothing unless asked for.
    pub fn is_control(&self, id: u32) -> bool {
        self.attr(id) & attr::CONTROL != 0
    }

    fn attr(&self, id: u32) -> u16 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// Appends the bytes `id` stands for. Control and unknown tokens give their text only
    /// with `special`; unused and out-of-range ids give nothing.
    pub(crate) fn append_token_bytes(&self, id: u32, special: bool, out: &mut Vec<u8>) {
        let a = self.attr(id);
        if a & (attr::CONTROL | attr::UNKNOWN) != 0 && !special {
            return;
        }
        let Some(text) = self.token_text(id) else { return };
        if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
            out.extend_from_slice(text.as_bytes());
        } else if a & attr::NORMAL != 0 {
            match self.model {
                Model::Bpe(ref bpe) if bpe.alphabet == Alphabet::Chars => spm::unescape_spaces(text, out),
                Model::Bpe(_) => bpe::unmap_bytes(text, out),
                Model::Spm(_) => spm::unescape_spaces(text, out),
            }
        } else if a & attr::BYTE != 0 {
            if let Some(b) = spm::parse_byte_token(text) {
                out.push(b);
            }
        }
    }

    /// The bytes of one token: a piece of a UTF-8 character for byte tokens.
    pub fn token_to_bytes(&self, id: u32, special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        self.append_token_bytes(id, special, &mut out);
        out
    }

    /// The bytes of generated ids as shown to a user (control tokens skipped), before UTF-8
    /// validation; see [`StreamDecoder`] for incremental text.
    pub(crate) fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            self.append_token_bytes(id, false, &mut out);
        }
        out
    }

    /// Text of `ids`; `skip_special` leaves out control tokens. Bytes that do not form UTF-8
    /// (a character cut off at the end) become U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let mut out = Vec::new();
        for &id in ids {
            self.append_token_bytes(id, !skip_special, &mut out);
        }
        match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    pub fn stream_decoder(&self, skip_special: bool) -> StreamDecoder<'_> {
        StreamDecoder::new(self, skip_special)
    }
}

fn read_vocab(file: &GgufFile) -> Result<Vocab> {
    const KEY: &str = "tokenizer.ggml.tokens";
    let arr = file.get_array(KEY)?;
    let strings = arr.strings(file.bytes()).ok_or_else(|| Error::MetadataType {
        key: KEY.into(),
        expected: "an array of strings",
        found: format!("an array of {}", arr.elem.name()),
    })?;
    let n =
        usize::try_from(arr.len).map_err(|_| Error::Tokenizer(format!("{} tokens do not fit in memory", arr.len)))?;
    if n == 0 || n > u32::MAX as usize / 2 {
        return Err(Error::Tokenizer(format!("vocabulary of {n} tokens")));
    }
    // About 8 bytes per token on average; the arena grows if not.
    let mut arena = Arena::with_capacity(n, n * 8);
    for (i, s) in strings.enumerate() {
        if s.is_empty() {
            // As llama.cpp: an empty text could never be matched or told apart.
            arena.push(&format!("[EMPTY_{i}]"))?;
        } else {
            arena.push(s)?;
        }
    }
    if arena.len() != n {
        return Err(Error::Corrupt(format!("{KEY} holds {} strings, expected {n}", arena.len())));
    }
    // A duplicate text keeps its first id for lookups; the later id still decodes.
    let index = Index::build(&arena, n);
    Ok(Vocab { arena, index, n })
}

fn read_attrs(file: &GgufFile, n: usize) -> Result<Vec<u16>> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let Some(v) = file.get(KEY) else {
        return Ok(vec![attr::NORMAL; n]);
    };
    let arr = v.as_array().ok_or_else(|| Error::MetadataType {
        key: KEY.into(),
        expected: "an array",
        found: v.type_name().into(),
    })?;
    let types = arr.to_i64_vec(file.bytes()).ok_or_else(|| Error::MetadataType {
        key: KEY.into(),
        expected: "an array of integers",
        found: format!("an array of {}", arr.elem.name()),
    })?;
    if types.len() < n {
        return Err(Error::Tokenizer(format!("{KEY} has {} entries for {n} tokens", types.len())));
    }
    Ok(types[..n].iter().map(|&t| attr::from_type(t)).collect())
}

fn read_scores(file: &GgufFile, n: usize) -> Result<Vec<f32>> {
    const KEY: &str = "tokenizer.ggml.scores";
    let Some(v) = file.get(KEY) else {
        return Ok(vec![0.0; n]);
    };
    let arr = v.as_array().ok_or_else(|| Error::MetadataType {
        key: KEY.into(),
        expected: "an array",
        found: v.type_name().into(),
    })?;
    let mut scores = arr.to_f32_vec(file.bytes()).ok_or_else(|| Error::MetadataType {
        key: KEY.into(),
        expected: "an array of numbers",
        found: format!("an array of {}", arr.elem.name()),
    })?;
    if scores.len() < n {
        return Err(Error::Tokenizer(format!("{KEY} has {} entries for {n} tokens", scores.len())));
    }
    scores.truncate(n);
    Ok(scores)
}

/// A token id from metadata: absent, negative (a "none" marker some converters write) or out
/// of range reads as None, as llama.cpp keeps its default then.
fn opt_id(file: &GgufFile, key: &str, n: usize) -> Result<Option<u32>> {
    let Some(v) = file.get(key) else { return Ok(None) };
    let id = v.as_i64().ok_or_else(|| Error::MetadataType {
        key: key.into(),
        expected: "an integer",
        found: v.type_name().into(),
    })?;
    Ok((id >= 0 && (id as u64) < n as u64).then_some(id as u32))
}

fn opt_bool(file: &GgufFile, key: &str) -> Result<Option<bool>> {
    match file.get(key) {
        None => Ok(None),
        Some(_) => file.get_bool(key).map(Some),
    }
}

#[cfg(test)]
mod tests;
