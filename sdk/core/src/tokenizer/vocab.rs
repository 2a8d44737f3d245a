//! Token strings stored in one arena, an open-addressing index from text to id, and the BPE
//! merge table.
//!
//! A 262k-entry vocabulary as 262k `String`s (plus a `HashMap<String, u32>` holding a second
//! copy) costs half a million allocations at load; the arena is one allocation and the index
//! holds ids and arena positions, comparing texts only on a hash match.

use crate::error::{Error, Result};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// Multiplicative hash over 8-byte words. Keys are short token strings and the tables are
/// built once from the model file; lookups of user text cannot degrade them (no insertions).
#[inline]
pub(super) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(SEED);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(SEED);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(buf)).wrapping_mul(SEED);
    }
    // Products only carry low bits upward: finish with a full avalanche (murmur3 fmix64) so
    // that the low bits, taken as the slot, depend on every input byte.
    fmix64(h)
}

#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// All strings back to back; string `i` is `text[offs[i]..offs[i + 1]]`.
pub(super) struct Arena {
    text: String,
    offs: Vec<u32>,
}

impl Arena {
    pub(super) fn with_capacity(n: usize, bytes: usize) -> Self {
        let mut offs = Vec::with_capacity(n + 1);
        offs.push(0);
        Arena { text: String::with_capacity(bytes), offs }
    }

    pub(super) fn push(&mut self, s: &str) -> Result<u32> {
        let id = self.len() as u32;
        self.text.push_str(s);
        let end =
            u32::try_from(self.text.len()).map_err(|_| Error::Tokenizer("vocabulary text exceeds 4 GiB".into()))?;
        self.offs.push(end);
        Ok(id)
    }

    pub(super) fn len(&self) -> usize {
        self.offs.len() - 1
    }

    #[inline]
    fn at(&self, off: u32, len: u32) -> &[u8] {
        &self.text.as_bytes()[off as usize..(off + len) as usize]
    }

    #[inline]
    pub(super) fn get(&self, id: u32) -> &str {
        let i = id as usize;
        &self.text[self.offs[i] as usize..self.offs[i + 1] as usize]
    }
}

const EMPTY: u32 = u32::MAX;

/// One index entry. The text's place in the arena sits in the slot itself, so a lookup reads
/// the slot and the text, not also the offset table (one cache miss fewer on big tables).
#[derive(Clone, Copy)]
struct Slot {
    id: u32,
    tag: u32,
    off: u32,
    len: u32,
}

/// Keys handled together by the batched operations: enough independent cache misses in
/// flight to hide memory latency, few enough that their slots stay in L1.
const BATCH: usize = 16;

/// Text -> id over (a subset of) an arena. Linear probing, load factor below 3/4.
///
/// Big vocabularies make the table larger than the CPU caches, so nearly every access misses.
/// Bulk operations therefore work in batches: the slots of all keys of a batch are read
/// before any is used, which lets their misses overlap instead of queueing one by one.
pub(super) struct Index {
    slots: Vec<Slot>,
    mask: usize,
}

impl Index {
    pub(super) fn with_capacity(n: usize) -> Self {
        let cap = (n.max(4) + n / 2).next_power_of_two();
        Index { slots: vec![Slot { id: EMPTY, tag: 0, off: 0, len: 0 }; cap], mask: cap - 1 }
    }

    /// An index over arena ids `0..n`; a text seen twice keeps its first id.
    pub(super) fn build(arena: &Arena, n: usize) -> Index {
        let mut index = Index::with_capacity(n);
        let mut hashes = [0u64; BATCH];
        let mut start = 0;
        while start < n {
            let end = (start + BATCH).min(n);
            for (h, id) in hashes.iter_mut().zip(start..end) {
                *h = hash_bytes(arena.get(id as u32).as_bytes());
            }
            index.touch(&hashes[..end - start]);
            for (&h, id) in hashes.iter().zip(start..end) {
                index.insert_hashed(arena, id as u32, h);
            }
            start = end;
        }
        index
    }

    /// Reads the first slot of each hash so that the following accesses hit the cache.
    fn touch(&self, hashes: &[u64]) {
        let mut sink = 0u32;
        for &h in hashes {
            sink ^= self.slots[h as usize & self.mask].tag;
        }
        std::hint::black_box(sink);
    }

    /// Adds `id` unless its text is already present; returns the id already holding it.
    fn insert_hashed(&mut self, arena: &Arena, id: u32, h: u64) -> Option<u32> {
        let i = id as usize;
        let (off, end) = (arena.offs[i], arena.offs[i + 1]);
        let key = arena.at(off, end - off);
        let tag = (h >> 32) as u32;
        let mut i = h as usize & self.mask;
        loop {
            let slot = self.slots[i];
            if slot.id == EMPTY {
                self.slots[i] = Slot { id, tag, off, len: end - off };
                return None;
            }
            if slot.tag == tag && arena.at(slot.off, slot.len) == key {
                return Some(slot.id);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline]
    pub(super) fn get(&self, arena: &Arena, key: &[u8]) -> Option<u32> {
        self.get_hashed(arena, key, hash_bytes(key))
    }

    #[inline]
    fn get_hashed(&self, arena: &Arena, key: &[u8], h: u64) -> Option<u32> {
        let tag = (h >> 32) as u32;
        let mut i = h as usize & self.mask;
        loop {
            let slot = self.slots[i];
            if slot.id == EMPTY {
                return None;
            }
            if slot.tag == tag && arena.at(slot.off, slot.len) == key {
                return Some(slot.id);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Looks up many keys, appending one result per key to `out`.
    pub(super) fn get_many(&self, arena: &Arena, keys: &[&[u8]], out: &mut Vec<Option<u32>>) {
        let bytes = arena.text.as_bytes();
        let mut hashes = [0u64; BATCH];
        for chunk in keys.chunks(BATCH) {
            let hashes = &mut hashes[..chunk.len()];
            for (h, k) in hashes.iter_mut().zip(chunk) {
                *h = hash_bytes(k);
            }
            self.touch(hashes);
            // Second wave: the text of each key's candidate slot, needed for the comparison.
            let mut sink = 0u8;
            for &h in hashes.iter() {
                let tag = (h >> 32) as u32;
                let mut i = h as usize & self.mask;
                loop {
                    let slot = self.slots[i];
                    if slot.id == EMPTY {
                        break;
                    }
                    if slot.tag == tag {
                        sink ^= bytes.get(slot.off as usize).copied().unwrap_or(0);
                        break;
                    }
                    i = (i + 1) & self.mask;
                }
            }
            std::hint::black_box(sink);
            for (&h, k) in hashes.iter().zip(chunk) {
                out.push(self.get_hashed(arena, k, h));
            }
        }
    }
}

/// (left id, right id) -> (rank, merged id): the BPE merge table, open addressing like
/// [`Index`] and filled in batches for the same reason.
pub(super) struct PairMap {
    slots: Vec<PairSlot>,
    mask: usize,
}

#[derive(Clone, Copy)]
struct PairSlot {
    key: u64,
    rank: u32,
    merged: u32,
}

/// No real pair packs to this: ids stay below `u32::MAX`.
const NO_PAIR: u64 = u64::MAX;

#[inline]
pub(super) fn pack(left: u32, right: u32) -> u64 {
    (left as u64) << 32 | right as u64
}

impl PairMap {
    pub(super) fn with_capacity(n: usize) -> Self {
        let cap = (n.max(4) + n / 2).next_power_of_two();
        PairMap { slots: vec![PairSlot { key: NO_PAIR, rank: 0, merged: 0 }; cap], mask: cap - 1 }
    }

    /// Adds `(key, rank, merged)` entries; a key already present keeps its first entry.
    pub(super) fn insert_many(&mut self, entries: &[(u64, u32, u32)]) {
        for chunk in entries.chunks(BATCH) {
            let mut sink = 0u32;
            for &(key, _, _) in chunk {
                sink ^= self.slots[fmix64(key) as usize & self.mask].rank;
            }
            std::hint::black_box(sink);
            for &(key, rank, merged) in chunk {
                let mut i = fmix64(key) as usize & self.mask;
                loop {
                    let slot = &mut self.slots[i];
                    if slot.key == NO_PAIR {
                        *slot = PairSlot { key, rank, merged };
                        break;
                    }
                    if slot.key == key {
                        break;
                    }
                    i = (i + 1) & self.mask;
                }
            }
        }
    }

    #[inline]
    pub(super) fn get(&self, key: u64) -> Option<(u32, u32)> {
        let mut i = fmix64(key) as usize & self.mask;
        loop {
            let slot = self.slots[i];
            if slot.key == key {
                return Some((slot.rank, slot.merged));
            }
            if slot.key == NO_PAIR {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_index_roundtrip() {
        let words = ["a", "b", "ab", "", "hello world", "ab"];
        let mut arena = Arena::with_capacity(words.len(), 32);
        for w in words {
            arena.push(w).unwrap();
        }
        // Enough keys for several batches and probe chains.
        for i in 0..1000 {
            arena.push(&format!("k{i}")).unwrap();
        }
        let index = Index::build(&arena, arena.len());
        for i in 0..1000u32 {
            assert_eq!(index.get(&arena, format!("k{i}").as_bytes()), Some(words.len() as u32 + i));
        }
        // A duplicate text resolves to its first id.
        assert_eq!(index.get(&arena, b"ab"), Some(2));
        assert_eq!(index.get(&arena, b""), Some(3));
        assert_eq!(index.get(&arena, b"hello world"), Some(4));
        assert_eq!(index.get(&arena, b"abc"), None);
        assert_eq!(arena.get(4), "hello world");

        let keys: Vec<Vec<u8>> = (0..40).map(|i| format!("k{}", i * 37 % 1100).into_bytes()).collect();
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let mut many = Vec::new();
        index.get_many(&arena, &keys, &mut many);
        let one: Vec<Option<u32>> = keys.iter().map(|k| index.get(&arena, k)).collect();
        assert_eq!(many, one);
        assert!(many.contains(&None));
    }

    #[test]
    fn pair_map_keeps_first_entry() {
        let mut m = PairMap::with_capacity(3000);
        let entries: Vec<(u64, u32, u32)> = (0..3000u32).map(|i| (pack(i % 1000, i / 1000), i, i + 1)).collect();
        m.insert_many(&entries);
        m.insert_many(&[(pack(5, 0), 99, 99)]);
        assert_eq!(m.get(pack(5, 0)), Some((5, 6)));
        assert_eq!(m.get(pack(999, 2)), Some((2999, 3000)));
        assert_eq!(m.get(pack(1000, 0)), None);
    }
}
