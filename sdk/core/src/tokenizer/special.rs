//! Cutting special-token texts out of the input before tokenization, with the outcome of
//! llama.cpp's `tokenizer_st_partition`: special tokens are tried longest text first, each
//! taking its non-overlapping occurrences left to right in the text not yet claimed.
//!
//! llama.cpp rescans the text once per special token (thousands for Gemma); here one pass
//! finds every occurrence of every special text, and the claiming replays that order.

use super::vocab::Arena;
use super::{attr, Vocab};

pub(super) enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

pub(super) struct SpecialMatcher {
    /// Special token ids sorted by text (then id): the tokens sharing a prefix are a range,
    /// which a walk over the input narrows byte by byte, like a trie without the nodes.
    sorted: Vec<u32>,
    /// Per first byte, the range of `sorted` whose texts start with it.
    first: Vec<(u32, u32)>,
    /// Whether any special token applies when special parsing is off (user-defined ones).
    any_plain: bool,
}

/// Whether a token is matched in the input at all, and whether also with special parsing off.
fn applies(a: u16, parse_special: bool) -> bool {
    let special = a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0;
    // Control and unknown tokens only with special parsing on; user-defined ones always,
    // as llama.cpp and HF tokenizers do.
    special && (parse_special || !needs_parsing(a))
}

/// Whether a token is only matched with special parsing on (control and unknown tokens).
pub(super) fn needs_parsing(a: u16) -> bool {
    a & (attr::CONTROL | attr::UNKNOWN) != 0
}

/// Byte `k` of a text, below every byte when the text is shorter.
fn byte_at(text: &[u8], k: usize) -> i16 {
    text.get(k).map_or(-1, |&b| b as i16)
}

impl SpecialMatcher {
    pub(super) fn new(arena: &Arena, attrs: &[u16]) -> Self {
        let mut sorted: Vec<u32> = (0..attrs.len() as u32)
            .filter(|&id| applies(attrs[id as usize], true) && !arena.get(id).is_empty())
            .collect();
        sorted.sort_unstable_by(|&a, &b| arena.get(a).cmp(arena.get(b)).then(a.cmp(&b)));
        let mut first = vec![(0u32, 0u32); 256];
        let mut i = 0;
        while i < sorted.len() {
            let b = arena.get(sorted[i]).as_bytes()[0];
            let start = i;
            while i < sorted.len() && arena.get(sorted[i]).as_bytes()[0] == b {
                i += 1;
            }
            first[b as usize] = (start as u32, i as u32);
        }
        let any_plain = sorted.iter().any(|&id| applies(attrs[id as usize], false));
        SpecialMatcher { sorted, first, any_plain }
    }

    /// Calls `found(id, len)` for every special text that starts `bytes`, shortest first.
    fn prefixes_of(&self, arena: &Arena, bytes: &[u8], mut found: impl FnMut(u32, usize)) {
        let Some(&b0) = bytes.first() else { return };
        let (mut lo, mut hi) = (self.first[b0 as usize].0 as usize, self.first[b0 as usize].1 as usize);
        let mut k = 1;
        while lo < hi {
            // All texts in the range share `bytes[..k]`; one of exactly that length sorts first.
            let text = arena.get(self.sorted[lo]).as_bytes();
            if text.len() == k {
                found(self.sorted[lo], k);
            }
            let Some(&c) = bytes.get(k) else { break };
            let c = c as i16;
            let range = &self.sorted[lo..hi];
            let a = range.partition_point(|&id| byte_at(arena.get(id).as_bytes(), k) < c);
            let b = range.partition_point(|&id| byte_at(arena.get(id).as_bytes(), k) <= c);
            (lo, hi) = (lo + a, lo + b);
            k += 1;
        }
    }

    /// Splits `text` into plain-text fragments and special tokens, in order. Inside the byte
    /// ranges of `plain` (sorted, not overlapping) control-token texts stay text, as with
    /// `parse_special` off.
    pub(super) fn partition<'t>(
        &self,
        vocab: &Vocab,
        attrs: &[u16],
        text: &'t str,
        parse_special: bool,
        plain: &[std::ops::Range<usize>],
    ) -> Vec<Fragment<'t>> {
        let bytes = text.as_bytes();
        if text.is_empty() {
            return Vec::new();
        }
        if self.sorted.is_empty() || !(parse_special || self.any_plain) {
            return vec![Fragment::Text(text)];
        }
        // Every occurrence of every applicable special text: (length, id, start).
        let mut occ: Vec<(u32, u32, usize)> = Vec::new();
        // The plain range that ends after `pos`, if any; ranges are visited in order.
        let mut next_plain = 0;
        for pos in 0..bytes.len() {
            while next_plain < plain.len() && plain[next_plain].end <= pos {
                next_plain += 1;
            }
            self.prefixes_of(&vocab.arena, &bytes[pos..], |id, len| {
                let a = attrs[id as usize];
                let in_plain = plain.get(next_plain).is_some_and(|r| r.start < pos + len);
                if applies(a, parse_special && !(in_plain && needs_parsing(a))) {
                    occ.push((len as u32, id, pos));
                }
            });
        }
        if occ.is_empty() {
            return vec![Fragment::Text(text)];
        }
        // Longest text first (ties by id), each token's occurrences left to right.
        occ.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut claimed = vec![false; bytes.len()];
        let mut taken: Vec<(usize, usize, u32)> = Vec::new();
        for (len, id, start) in occ {
            let end = start + len as usize;
            if claimed[start..end].iter().any(|&c| c) {
                continue;
            }
            claimed[start..end].iter_mut().for_each(|c| *c = true);
            taken.push((start, end, id));
        }
        taken.sort_unstable();

        let mut out = Vec::with_capacity(taken.len() * 2 + 1);
        let mut prev = 0;
        // Whether the last token strips the whitespace that follows it.
        let mut rstrip = false;
        for (start, end, id) in taken {
            // Special texts are whole UTF-8 strings, so cuts fall on character boundaries.
            push_text(&mut out, &text[prev..start], rstrip, attrs[id as usize] & attr::LSTRIP != 0);
            out.push(Fragment::Token(id));
            rstrip = attrs[id as usize] & attr::RSTRIP != 0;
            prev = end;
        }
        push_text(&mut out, &text[prev..], rstrip, false);
        out
    }
}

/// Appends the text between two tokens, without the whitespace their LSTRIP/RSTRIP attributes
/// remove (C `isspace`, as llama.cpp); nothing when no text is left.
fn push_text<'t>(out: &mut Vec<Fragment<'t>>, text: &'t str, strip_start: bool, strip_end: bool) {
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r');
    let mut t = text;
    if strip_start {
        t = t.trim_start_matches(is_space);
    }
    if strip_end {
        t = t.trim_end_matches(is_space);
    }
    if !t.is_empty() {
        out.push(Fragment::Text(t));
    }
}
