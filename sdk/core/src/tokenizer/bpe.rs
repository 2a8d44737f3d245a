//! BPE with merges ranked by their position in `tokenizer.ggml.merges`, merged lowest rank
//! first. Byte-level (`tokenizer.ggml.model = "gpt2"`): words are GPT-2 byte-to-unicode mapped
//! bytes. Character-level (`gemma4`, SentencePiece-style): spaces become U+2581, symbols are
//! UTF-8 characters, and a piece with no token falls back to `<0xXX>` byte tokens.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::pretok::{PreTokenizer, SplitScratch};
use super::vocab::{pack, PairMap};
use super::Vocab;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// GPT-2's `bytes_to_unicode`: printable Latin-1 bytes stand for themselves, the other 68
/// bytes map to U+0100.. in byte order, so that every byte is a visible character.
pub(super) const BYTE_TO_CHAR: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut n = 0u16;
    let mut b = 0usize;
    while b < 256 {
        let printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if printable {
            t[b] = b as u16;
        } else {
            t[b] = 256 + n;
            n += 1;
        }
        b += 1;
    }
    t
};

/// The inverse of [`BYTE_TO_CHAR`], indexed by code point; `NO_BYTE` where none maps there.
const CHAR_TO_BYTE: [u16; 324] = {
    let mut t = [NO_BYTE; 324];
    let mut b = 0usize;
    while b < 256 {
        t[BYTE_TO_CHAR[b] as usize] = b as u16;
        b += 1;
    }
    t
};
const NO_BYTE: u16 = u16::MAX;

/// Appends the bytes a byte-level token text stands for. Characters outside the mapping
/// (not produced by GPT-2 conversion) are kept as their own UTF-8.
pub(super) fn unmap_bytes(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        let cp = c as usize;
        match CHAR_TO_BYTE.get(cp) {
            Some(&b) if b != NO_BYTE => out.push(b as u8),
            _ => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

/// How a BPE vocabulary writes text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Alphabet {
    /// GPT-2's byte-to-unicode characters, one per byte.
    Bytes,
    /// Raw UTF-8 with spaces as U+2581, `<0xXX>` tokens for bytes without a token.
    Chars,
}

pub(super) struct Bpe {
    pre: PreTokenizer,
    pub(super) alphabet: Alphabet,
    /// Take a word that is itself a token as is, without merging (llama3-style vocabularies).
    ignore_merges: bool,
    /// (left id, right id) packed -> (rank, merged id).
    merges: PairMap,
    /// Symbol id of each byte's mapped character (byte alphabet).
    byte_sym: [u32; 256],
    /// The `<0xXX>` token of each byte, `NONE` where the vocabulary lacks it (char alphabet).
    byte_token: [u32; 256],
    /// Merge parts that are not tokens, by text: their ids past the vocabulary.
    extra: HashMap<Box<[u8]>, u32>,
}

/// The id of a string that takes part in merges but is not a token: appended to the arena
/// past the vocabulary, once.
fn intern_extra(vocab: &mut Vocab, extra: &mut HashMap<Box<[u8]>, u32>, s: &[u8]) -> Result<u32> {
    if let Some(&id) = extra.get(s) {
        return Ok(id);
    }
    let text = std::str::from_utf8(s).map_err(|_| Error::Tokenizer("merge part is not UTF-8".into()))?;
    let id = vocab.arena.push(text)?;
    extra.insert(s.into(), id);
    Ok(id)
}

impl Bpe {
    /// Reads the merges. Strings that take part in merges but are not in the vocabulary get
    /// ids past its end (appended to the arena), so merging works on ids alone.
    pub(super) fn load(
        file: &GgufFile,
        vocab: &mut Vocab,
        pre: PreTokenizer,
        alphabet: Alphabet,
        ignore_merges: bool,
    ) -> Result<Bpe> {
        const KEY: &str = "tokenizer.ggml.merges";
        let arr = file.get_array(KEY)?;
        let strings = arr.strings(file.bytes()).ok_or_else(|| Error::MetadataType {
            key: KEY.into(),
            expected: "an array of strings",
            found: format!("an array of {}", arr.elem.name()),
        })?;
        let n_merges = arr.len as usize;
        let mut extra: HashMap<Box<[u8]>, u32> = HashMap::new();
        let mut merges = PairMap::with_capacity(n_merges);

        // Merges go in chunks: split them, look up the parts of a whole chunk at once (see
        // `Index::get_many`), then resolve the rare parts that are not tokens. Vocabularies list
        // merge results in merge order, so a result is first tried as the token after the
        // previous one: a sequential read instead of a random lookup.
        const CHUNK: usize = 256;
        let mut parts: Vec<(u32, u32)> = Vec::with_capacity(CHUNK);
        let mut keys: Vec<&[u8]> = Vec::with_capacity(2 * CHUNK);
        let mut found = Vec::with_capacity(2 * CHUNK);
        let mut entries = Vec::with_capacity(CHUNK);
        let mut joined = String::new();
        let mut guess: Option<u32> = None;
        let mut strings = strings.enumerate().peekable();
        while strings.peek().is_some() {
            parts.clear();
            keys.clear();
            for (rank, m) in strings.by_ref().take(CHUNK) {
                // As llama.cpp: split at the first space after the first byte.
                let Some(sp) = m.as_bytes().iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) else {
                    continue;
                };
                let (left, right) = (&m[..sp], &m[sp + 1..]);
                if left.is_empty() || right.is_empty() {
                    continue;
                }
                let is_joined =
                    |t: &str| t.len() == left.len() + right.len() && t.starts_with(left) && t.ends_with(right);
                let j = match guess.filter(|&g| (g as usize) < vocab.n && is_joined(vocab.arena.get(g))) {
                    Some(g) => g,
                    None => {
                        joined.clear();
                        joined.push_str(left);
                        joined.push_str(right);
                        match vocab.index.get(&vocab.arena, joined.as_bytes()) {
                            Some(id) => id,
                            None => intern_extra(vocab, &mut extra, joined.as_bytes())?,
                        }
                    }
                };
                guess = j.checked_add(1);
                parts.push((rank as u32, j));
                keys.extend_from_slice(&[left.as_bytes(), right.as_bytes()]);
            }
            found.clear();
            vocab.index.get_many(&vocab.arena, &keys, &mut found);
            entries.clear();
            for (i, &(rank, j)) in parts.iter().enumerate() {
                let mut lr = [0u32; 2];
                for (k, id) in lr.iter_mut().enumerate() {
                    *id = match found[2 * i + k] {
                        Some(id) => id,
                        None => intern_extra(vocab, &mut extra, keys[2 * i + k])?,
                    };
                }
                entries.push((pack(lr[0], lr[1]), rank, j));
            }
            // The first occurrence of a pair keeps its rank.
            merges.insert_many(&entries);
        }

        let mut byte_sym = [NONE; 256];
        let mut byte_token = [NONE; 256];
        match alphabet {
            Alphabet::Bytes => {
                for (b, slot) in byte_sym.iter_mut().enumerate() {
                    let c = char::from_u32(BYTE_TO_CHAR[b] as u32).unwrap_or('\u{FFFD}');
                    let mut buf = [0u8; 4];
                    let s = c.encode_utf8(&mut buf).as_bytes();
                    *slot = match vocab.index.get(&vocab.arena, s) {
                        Some(id) => id,
                        None => intern_extra(vocab, &mut extra, s)?,
                    };
                }
            }
            Alphabet::Chars => {
                for (b, slot) in byte_token.iter_mut().enumerate() {
                    *slot = vocab.index.get(&vocab.arena, format!("<0x{b:02X}>").as_bytes()).unwrap_or(NONE);
                }
            }
        }
        Ok(Bpe { pre, alphabet, ignore_merges, merges, byte_sym, byte_token, extra })
    }

    /// The symbol id of one character's text (char alphabet): a token, a merge part, or `NONE`.
    fn char_sym(&self, vocab: &Vocab, text: &[u8]) -> u32 {
        vocab.index.get(&vocab.arena, text).or_else(|| self.extra.get(text).copied()).unwrap_or(NONE)
    }

    /// Tokenizes plain text (no special tokens in it) onto `out`.
    pub(super) fn encode(&self, vocab: &Vocab, text: &str, s: &mut BpeScratch, out: &mut Vec<u32>) {
        let mut escaped = std::mem::take(&mut s.escaped);
        let text = match self.alphabet {
            Alphabet::Bytes => text,
            Alphabet::Chars => {
                escaped.clear();
                super::spm::escape_spaces(text, &mut escaped);
                escaped.as_str()
            }
        };
        s.words.clear();
        self.pre.split(text, &mut s.split, &mut s.words);
        for i in 0..s.words.len() {
            let (a, b) = s.words[i];
            self.encode_word(vocab, &text.as_bytes()[a..b], s, out);
        }
        s.escaped = escaped;
    }

    fn encode_word(&self, vocab: &Vocab, word: &[u8], s: &mut BpeScratch, out: &mut Vec<u32>) {
        if self.alphabet == Alphabet::Chars {
            return self.encode_chars(vocab, word, s, out);
        }
        if self.ignore_merges {
            s.mapped.clear();
            for &b in word {
                s.mapped.push(char::from_u32(BYTE_TO_CHAR[b as usize] as u32).unwrap_or('\u{FFFD}'));
            }
            if let Some(id) = vocab.index.get(&vocab.arena, s.mapped.as_bytes()) {
                out.push(id);
                return;
            }
        }

        s.syms.clear();
        for (i, &b) in word.iter().enumerate() {
            s.syms.push(Sym {
                id: self.byte_sym[b as usize],
                start: i as u32,
                end: i as u32 + 1,
                prev: NONE,
                next: NONE,
            });
        }
        self.merge(s);
        let n_vocab = vocab.n as u32;
        let mut i = 0u32;
        while i != NONE && (i as usize) < s.syms.len() {
            let sym = s.syms[i as usize];
            if sym.id < n_vocab {
                out.push(sym.id);
            } else {
                // A merge result missing from the vocabulary: fall back to its bytes.
                for &b in &word[sym.start as usize..sym.end as usize] {
                    let id = self.byte_sym[b as usize];
                    if id < n_vocab {
                        out.push(id);
                    }
                }
            }
            i = sym.next;
        }
    }

    /// A word of the char alphabet: a run of newlines that is a token stays whole (as llama.cpp
    /// does for Gemma 4), else characters merged; pieces without a token become byte tokens.
    fn encode_chars(&self, vocab: &Vocab, word: &[u8], s: &mut BpeScratch, out: &mut Vec<u32>) {
        let n_vocab = vocab.n as u32;
        if word.iter().all(|&b| b == b'\n') {
            if let Some(id) = vocab.index.get(&vocab.arena, word) {
                out.push(id);
                return;
            }
        }
        s.syms.clear();
        let Ok(text) = std::str::from_utf8(word) else { return };
        for (i, c) in text.char_indices() {
            let end = i + c.len_utf8();
            let id = self.char_sym(vocab, &word[i..end]);
            s.syms.push(Sym { id, start: i as u32, end: end as u32, prev: NONE, next: NONE });
        }
        self.merge(s);
        let mut i = 0u32;
        while i != NONE && (i as usize) < s.syms.len() {
            let sym = s.syms[i as usize];
            if sym.id < n_vocab {
                out.push(sym.id);
            } else {
                for &b in &word[sym.start as usize..sym.end as usize] {
                    let id = self.byte_token[b as usize];
                    if id != NONE {
                        out.push(id);
                    }
                }
            }
            i = sym.next;
        }
    }

    /// Links `s.syms` into a chain and merges pairs lowest rank first, then leftmost.
    fn merge(&self, s: &mut BpeScratch) {
        let syms = &mut s.syms;
        let n = syms.len();
        for (i, sym) in syms.iter_mut().enumerate() {
            sym.prev = if i == 0 { NONE } else { i as u32 - 1 };
            sym.next = if i + 1 < n { i as u32 + 1 } else { NONE };
        }
        let heap = &mut s.heap;
        heap.clear();
        for i in 1..n {
            self.push_pair(syms, heap, i as u32 - 1, i as u32);
        }
        // Lowest rank first, then leftmost; an entry is stale when either side has changed since.
        while let Some(Reverse(Cand { key, left_id, right_id, merged })) = heap.pop() {
            let l = key as u32;
            let ls = syms[l as usize];
            if ls.dead() || ls.id != left_id || ls.next == NONE {
                continue;
            }
            let r = ls.next;
            let rs = syms[r as usize];
            if rs.id != right_id {
                continue;
            }
            syms[l as usize].id = merged;
            syms[l as usize].end = rs.end;
            syms[l as usize].next = rs.next;
            syms[r as usize].start = rs.end; // dead: empty span
            if rs.next != NONE {
                syms[rs.next as usize].prev = l;
            }
            if ls.prev != NONE {
                self.push_pair(syms, heap, ls.prev, l);
            }
            if rs.next != NONE {
                self.push_pair(syms, heap, l, rs.next);
            }
        }
    }

    #[inline]
    fn push_pair(&self, syms: &[Sym], heap: &mut BinaryHeap<Reverse<Cand>>, l: u32, r: u32) {
        let (left_id, right_id) = (syms[l as usize].id, syms[r as usize].id);
        // A character with no id takes part in no merge (and NONE pairs are the table's empty key).
        if left_id == NONE || right_id == NONE {
            return;
        }
        if let Some((rank, merged)) = self.merges.get(pack(left_id, right_id)) {
            heap.push(Reverse(Cand { key: (rank as u64) << 32 | l as u64, left_id, right_id, merged }));
        }
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Sym {
    id: u32,
    /// Byte span in the word; empty once merged into its left neighbour.
    start: u32,
    end: u32,
    prev: u32,
    next: u32,
}

impl Sym {
    fn dead(&self) -> bool {
        self.start == self.end
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cand {
    /// rank << 32 | left symbol index: orders by rank, then position.
    key: u64,
    left_id: u32,
    right_id: u32,
    merged: u32,
}

/// Buffers reused across the words of one call.
#[derive(Default)]
pub(super) struct BpeScratch {
    split: SplitScratch,
    words: Vec<(usize, usize)>,
    syms: Vec<Sym>,
    heap: BinaryHeap<Reverse<Cand>>,
    mapped: String,
    /// The text with spaces escaped (char alphabet).
    escaped: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection() {
        let mut seen = std::collections::HashSet::new();
        for (b, &c) in BYTE_TO_CHAR.iter().enumerate() {
            assert!(seen.insert(c));
            let mut out = Vec::new();
            unmap_bytes(&char::from_u32(c as u32).unwrap().to_string(), &mut out);
            assert_eq!(out, [b as u8]);
        }
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], 0x120); // 'Ġ'
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], 0x10A); // 'Ċ'
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], b'a' as u16);
    }
}
