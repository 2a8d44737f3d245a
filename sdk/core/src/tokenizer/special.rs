//! Cutting special-token texts out of the input before tokenization, with the outcome of
//! llama.cpp's `tokenizer_st_partition`: special tokens are tried longest text first, each
//! taking its non-overlapping occurrences left to right in the text not yet claimed.
//!
//! llama.cpp rescans the text once per special token (thousands for Gemma); here one pass
//! finds every occurrence of every special text, and the claiming replays that order.

use super::vocab::{Arena, Index};
use super::{attr, Vocab};

pub(super) enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

pub(super) struct SpecialMatcher {
    /// Special text -> id.
    index: Index,
    /// Per first byte: the distinct lengths of special texts starting with it, longest first.
    lens: Vec<Vec<u32>>,
    /// Whether any special token applies when special parsing is off (user-defined ones).
    any_plain: bool,
    any: bool,
}

/// Whether a token is matched in the input at all, and whether also with special parsing off.
fn applies(a: u16, parse_special: bool) -> bool {
    let special = a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0;
    // Control and unknown tokens only with special parsing on; user-defined ones always,
    // as llama.cpp and HF tokenizers do.
    special && (parse_special || a & (attr::CONTROL | attr::UNKNOWN) == 0)
}

impl SpecialMatcher {
    pub(super) fn new(arena: &Arena, attrs: &[u16]) -> Self {
        let ids: Vec<u32> = (0..attrs.len() as u32)
            .filter(|&id| applies(attrs[id as usize], true) && !arena.get(id).is_empty())
            .collect();
        let mut index = Index::with_capacity(ids.len());
        let mut lens: Vec<Vec<u32>> = vec![Vec::new(); 256];
        let mut any_plain = false;
        for &id in &ids {
            let text = arena.get(id).as_bytes();
            index.insert(arena, id);
            let l = &mut lens[text[0] as usize];
            if !l.contains(&(text.len() as u32)) {
                l.push(text.len() as u32);
            }
            any_plain |= applies(attrs[id as usize], false);
        }
        for l in &mut lens {
            l.sort_unstable_by(|a, b| b.cmp(a));
        }
        SpecialMatcher { index, lens, any_plain, any: !ids.is_empty() }
    }

    /// Splits `text` into plain-text fragments and special tokens, in order.
    pub(super) fn partition<'t>(&self, vocab: &Vocab, attrs: &[u16], text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        let bytes = text.as_bytes();
        if text.is_empty() {
            return Vec::new();
        }
        if !(self.any && (parse_special || self.any_plain)) {
            return vec![Fragment::Text(text)];
        }
        // Every occurrence of every applicable special text: (length, id, start).
        let mut occ: Vec<(u32, u32, usize)> = Vec::new();
        for pos in 0..bytes.len() {
            for &len in &self.lens[bytes[pos] as usize] {
                let end = pos + len as usize;
                if end > bytes.len() {
                    continue;
                }
                if let Some(id) = self.index.get(&vocab.arena, &bytes[pos..end]) {
                    if applies(attrs[id as usize], parse_special) {
                        occ.push((len, id, pos));
                    }
                }
            }
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
        for (start, end, id) in taken {
            // Special texts are whole UTF-8 strings, so cuts fall on character boundaries.
            if start > prev {
                out.push(Fragment::Text(&text[prev..start]));
            }
            out.push(Fragment::Token(id));
            prev = end;
        }
        if prev < text.len() {
            out.push(Fragment::Text(&text[prev..]));
        }
        out
    }
}
