//! SentencePiece-style tokenizer (`tokenizer.ggml.model = "llama"`), as llama.cpp's
//! `llm_tokenizer_spm`: start from UTF-8 characters, repeatedly merge the adjacent pair whose
//! concatenation is the highest-scoring vocabulary token, then map every symbol that is not
//! a token to byte tokens `<0xXX>`.

use std::collections::BinaryHeap;

use super::Vocab;
use crate::error::{Error, Result};

/// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
pub(super) const SPACE_MARK: &str = "\u{2581}";

pub(super) struct Spm {
    pub(super) scores: Vec<f32>,
    /// Token of each byte, for characters that are not tokens themselves.
    byte_tokens: [Option<u32>; 256],
    unk: Option<u32>,
    pub(super) add_space_prefix: bool,
}

impl Spm {
    pub(super) fn new(vocab: &Vocab, scores: Vec<f32>, unk: Option<u32>, add_space_prefix: bool) -> Spm {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            let name = [b'<', b'0', b'x', HEX[b >> 4], HEX[b & 15], b'>'];
            *slot = vocab.index.get(&vocab.arena, &name).or_else(|| {
                // As llama.cpp: fall back to the byte itself as a token (ASCII only here,
                // a lone byte >= 0x80 is not a string).
                if b < 0x80 {
                    vocab.index.get(&vocab.arena, &[b as u8])
                } else {
                    None
                }
            });
        }
        Spm { scores, byte_tokens, unk, add_space_prefix }
    }

    /// Tokenizes `text`, already whitespace-escaped, onto `out`.
    pub(super) fn encode(&self, vocab: &Vocab, text: &str, s: &mut SpmScratch, out: &mut Vec<u32>) -> Result<()> {
        let bytes = text.as_bytes();
        let syms = &mut s.syms;
        syms.clear();
        let mut iter = text.char_indices().peekable();
        while let Some((i, c)) = iter.next() {
            let idx = syms.len() as u32;
            syms.push(Sym {
                start: i as u32,
                n: c.len_utf8() as u32,
                prev: if idx == 0 { NONE } else { idx - 1 },
                next: if iter.peek().is_some() { idx + 1 } else { NONE },
            });
        }
        let heap = &mut s.heap;
        heap.clear();
        for i in 1..syms.len() as u32 {
            self.try_add(vocab, bytes, syms, heap, i - 1, i);
        }
        while let Some(Bigram { left, right, size, .. }) = heap.pop() {
            let (ls, rs) = (syms[left as usize], syms[right as usize]);
            // Stale: one side was merged since (sizes only grow, so the sum tells).
            if ls.n == 0 || rs.n == 0 || ls.n + rs.n != size {
                continue;
            }
            syms[left as usize].n += rs.n;
            syms[right as usize].n = 0;
            syms[left as usize].next = rs.next;
            if rs.next != NONE {
                syms[rs.next as usize].prev = left;
            }
            if ls.prev != NONE {
                self.try_add(vocab, bytes, syms, heap, ls.prev, left);
            }
            if rs.next != NONE {
                self.try_add(vocab, bytes, syms, heap, left, rs.next);
            }
        }

        let mut i = if syms.is_empty() { NONE } else { 0 };
        while i != NONE {
            let sym = syms[i as usize];
            let piece = &bytes[sym.start as usize..(sym.start + sym.n) as usize];
            match vocab.index.get(&vocab.arena, piece) {
                Some(id) => out.push(id),
                None => {
                    for &b in piece {
                        match self.byte_tokens[b as usize].or(self.unk) {
                            Some(id) => out.push(id),
                            None => {
                                return Err(Error::Tokenizer(format!(
                                    "no token for byte 0x{b:02X} and no unknown token"
                                )))
                            }
                        }
                    }
                }
            }
            i = sym.next;
        }
        Ok(())
    }

    #[inline]
    fn try_add(&self, vocab: &Vocab, bytes: &[u8], syms: &[Sym], heap: &mut BinaryHeap<Bigram>, l: u32, r: u32) {
        let (ls, rs) = (syms[l as usize], syms[r as usize]);
        let size = ls.n + rs.n;
        let text = &bytes[ls.start as usize..(ls.start + size) as usize];
        if let Some(id) = vocab.index.get(&vocab.arena, text) {
            let score = self.scores.get(id as usize).copied().unwrap_or(0.0);
            heap.push(Bigram { score: OrdF32(score), left: l, right: r, size });
        }
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Sym {
    start: u32,
    /// Byte length; 0 once merged into the left neighbour.
    n: u32,
    prev: u32,
    next: u32,
}

/// f32 with a total order (IEEE totalOrder), so scores can key a heap.
#[derive(Clone, Copy, PartialEq)]
struct OrdF32(f32);

impl OrdF32 {
    fn key(self) -> u32 {
        let b = self.0.to_bits();
        if b >> 31 == 1 {
            !b
        } else {
            b | 0x8000_0000
        }
    }
}

#[derive(Clone, Copy)]
struct Bigram {
    score: OrdF32,
    left: u32,
    right: u32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Max-heap order: highest score first, then the leftmost pair.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.score.key().cmp(&o.score.key()).then(o.left.cmp(&self.left))
    }
}

#[derive(Default)]
pub(super) struct SpmScratch {
    syms: Vec<Sym>,
    heap: BinaryHeap<Bigram>,
}

/// Appends `text` with every space replaced by U+2581.
pub(super) fn escape_spaces(text: &str, out: &mut String) {
    for (i, part) in text.split(' ').enumerate() {
        if i > 0 {
            out.push_str(SPACE_MARK);
        }
        out.push_str(part);
    }
}

/// Appends `text`'s bytes with every U+2581 turned back into a space.
pub(super) fn unescape_spaces(text: &str, out: &mut Vec<u8>) {
    for (i, part) in text.split(SPACE_MARK).enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(part.as_bytes());
    }
}

/// The byte of a `<0xXX>` token text.
pub(super) fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        let mut s = String::new();
        escape_spaces(" a  b ", &mut s);
        assert_eq!(s, "▁a▁▁b▁");
        let mut b = Vec::new();
        unescape_spaces("▁a▁▁b▁", &mut b);
        assert_eq!(b, b" a  b ");
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xff>"), Some(255));
        assert_eq!(parse_byte_token("<0x1>"), None);
        assert_eq!(parse_byte_token("0x41"), None);
    }

    #[test]
    fn score_order() {
        let mut v = [-1000.0f32, 0.0, -0.5, 3.0, -0.0, f32::NEG_INFINITY];
        v.sort_by_key(|&x| OrdF32(x).key());
        assert_eq!(v[0], f32::NEG_INFINITY);
        assert_eq!(v[5], 3.0);
        assert_eq!(v[1], -1000.0);
    }
}
