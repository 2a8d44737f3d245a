//! A suffix automaton over token sequences: the drafter's index of everything the answer may
//! repeat (the prompt, earlier turns, stored history, the answer so far).
//!
//! Every substring of the indexed text is a path from the root; a state stands for the
//! substrings that end at the same set of positions, so its transitions are exactly the tokens
//! that followed those substrings somewhere in the text. Appending a token is amortised O(1)
//! (Blumer et al.'s online construction). Besides the classic fields each state keeps how often
//! its substrings occur and where they last ended, updated along the suffix-link path on every
//! append (capped, so a pathologically repetitive text cannot make appends quadratic).
//!
//! Sources are separated by [`SEPARATOR`], a token no model has, so no match runs across two
//! sources and no continuation reads into the next one.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Marks the boundary between two indexed sources.
pub const SEPARATOR: u32 = u32::MAX;

/// Most suffix-link steps an append walks to update occurrence counts and last positions.
const OCCURRENCE_WALK_CAP: usize = 64;

const ROOT: u32 = 0;

#[derive(Debug, Clone, Copy)]
struct State {
    /// Length of the longest substring in this state.
    len: u32,
    /// Suffix link: the state of the longest suffix that occurs elsewhere too.
    link: u32,
    /// Head of this state's transition list in `edges` (`u32::MAX`: none).
    first_edge: u32,
    /// Occurrences of this state's substrings (end positions), capped updates aside.
    count: u32,
    /// Index in `text` of the token where an occurrence last ended.
    last_end: u32,
}

#[derive(Debug, Clone, Copy)]
struct Edge {
    token: u32,
    target: u32,
    next: u32,
}

/// Where the current context stands in the automaton: the longest suffix of the context that
/// also occurs earlier in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub state: u32,
    /// Length in tokens of the matched suffix.
    pub len: u32,
}

impl Match {
    pub const NONE: Match = Match { state: ROOT, len: 0 };
}

/// A continuation the index offers after a match: the next token, the match after it, how
/// often it was seen, and where (the text index of its latest occurrence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continuation {
    pub token: u32,
    pub next: Match,
    pub count: u32,
    pub at: u32,
}

#[derive(Debug, Clone)]
pub struct SuffixAutomaton {
    states: Vec<State>,
    edges: Vec<Edge>,
    lookup: HashMap<u64, u32, BuildHasherDefault<MixHasher>>,
    text: Vec<u32>,
    last: u32,
}

impl Default for SuffixAutomaton {
    fn default() -> Self {
        Self::new()
    }
}

impl SuffixAutomaton {
    pub fn new() -> Self {
        let root = State { len: 0, link: u32::MAX, first_edge: u32::MAX, count: 0, last_end: 0 };
        SuffixAutomaton {
            states: vec![root],
            edges: Vec::new(),
            lookup: HashMap::default(),
            text: Vec::new(),
            last: ROOT,
        }
    }

    /// Forgets everything, keeping the buffers.
    pub fn clear(&mut self) {
        self.states.truncate(1);
        self.states[0].first_edge = u32::MAX;
        self.edges.clear();
        self.lookup.clear();
        self.text.clear();
        self.last = ROOT;
    }

    /// Tokens indexed so far (separators included).
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub fn text(&self) -> &[u32] {
        &self.text
    }

    /// Starts a new source: nothing before this point continues into what follows.
    pub(crate) fn separate(&mut self) {
        if self.text.last().is_some_and(|&t| t != SEPARATOR) {
            self.push(SEPARATOR);
        }
    }

    pub fn extend(&mut self, tokens: &[u32]) {
        for &t in tokens {
            self.push(t);
        }
    }

    /// The transition of `state` on `token`.
    pub fn step(&self, state: u32, token: u32) -> Option<u32> {
        self.lookup.get(&key(state, token)).copied()
    }

    /// Advances `m` by `token` along the automaton as it is now: the longest suffix of
    /// (matched text + token) that occurs in the index. Call before indexing `token` itself,
    /// so that the match is an earlier occurrence.
    pub fn advance(&self, mut m: Match, token: u32) -> Match {
        if token == SEPARATOR {
            return Match::NONE;
        }
        loop {
            if let Some(next) = self.step(m.state, token) {
                return Match { state: next, len: m.len + 1 };
            }
            if m.state == ROOT {
                return Match::NONE;
            }
            m.state = self.states[m.state as usize].link;
            m.len = self.states[m.state as usize].len;
        }
    }

    /// The match one suffix-link shorter (more occurrences, less context), or None at the root.
    pub(crate) fn shorter(&self, m: Match) -> Option<Match> {
        if m.state == ROOT {
            return None;
        }
        let link = self.states[m.state as usize].link;
        Some(Match { state: link, len: self.states[link as usize].len })
    }

    /// Occurrences of the matched substring.
    pub fn count(&self, m: Match) -> u32 {
        self.states[m.state as usize].count
    }

    /// Text index of the last token of the matched substring's latest occurrence.
    pub(crate) fn last_end(&self, m: Match) -> u32 {
        self.states[m.state as usize].last_end
    }

    /// The tokens that followed the matched substring, most frequent first (ties: latest
    /// first), at most `limit` of them, into `out`.
    pub fn continuations(&self, m: Match, limit: usize, out: &mut Vec<Continuation>) {
        out.clear();
        if m.len == 0 {
            return;
        }
        let mut e = self.states[m.state as usize].first_edge;
        while e != u32::MAX {
            let edge = self.edges[e as usize];
            e = edge.next;
            if edge.token == SEPARATOR {
                continue;
            }
            let target = &self.states[edge.target as usize];
            out.push(Continuation {
                token: edge.token,
                next: Match { state: edge.target, len: m.len + 1 },
                count: target.count,
                at: target.last_end,
            });
        }
        out.sort_unstable_by(|a, b| b.count.cmp(&a.count).then(b.at.cmp(&a.at)));
        out.truncate(limit);
    }

    /// Appends one token (online construction). Returns the state split off by the append
    /// (`(original, clone)`), which a caller holding a [`Match`] on `original` must move to the
    /// clone when its length fits there: see [`Matcher`].
    fn push_token(&mut self, token: u32) -> Option<(u32, u32)> {
        let pos = self.text.len() as u32;
        self.text.push(token);
        let cur = self.new_state(self.states[self.last as usize].len + 1, pos);
        let mut p = self.last;
        let mut split = None;
        loop {
            if self.step(p, token).is_some() {
                break;
            }
            self.add_edge(p, token, cur);
            if p == ROOT {
                break;
            }
            p = self.states[p as usize].link;
        }
        let link = match self.step(p, token) {
            Some(q) if q == cur => ROOT,
            None => ROOT,
            Some(q) if self.states[p as usize].len + 1 == self.states[q as usize].len => q,
            Some(q) => {
                let clone = self.new_state(self.states[p as usize].len + 1, self.states[q as usize].last_end);
                self.states[clone as usize].link = self.states[q as usize].link;
                self.states[clone as usize].count = self.states[q as usize].count;
                let mut e = self.states[q as usize].first_edge;
                while e != u32::MAX {
                    let edge = self.edges[e as usize];
                    self.add_edge(clone, edge.token, edge.target);
                    e = edge.next;
                }
                let mut r = p;
                loop {
                    if self.step(r, token) != Some(q) {
                        break;
                    }
                    self.lookup.insert(key(r, token), clone);
                    self.retarget(r, token, clone);
                    if r == ROOT {
                        break;
                    }
                    r = self.states[r as usize].link;
                }
                self.states[q as usize].link = clone;
                split = Some((q, clone));
                clone
            }
        };
        self.states[cur as usize].link = link;
        self.last = cur;
        // Every suffix of the text now ends at `pos` once more.
        let mut s = cur;
        for _ in 0..OCCURRENCE_WALK_CAP {
            if s == ROOT || s == u32::MAX {
                break;
            }
            let st = &mut self.states[s as usize];
            st.count = st.count.saturating_add(1);
            st.last_end = pos;
            s = st.link;
        }
        split
    }

    fn push(&mut self, token: u32) {
        self.push_token(token);
    }

    fn new_state(&mut self, len: u32, last_end: u32) -> u32 {
        self.states.push(State { len, link: ROOT, first_edge: u32::MAX, count: 0, last_end });
        (self.states.len() - 1) as u32
    }

    fn add_edge(&mut self, from: u32, token: u32, to: u32) {
        let head = self.states[from as usize].first_edge;
        self.edges.push(Edge { token, target: to, next: head });
        self.states[from as usize].first_edge = (self.edges.len() - 1) as u32;
        self.lookup.insert(key(from, token), to);
    }

    fn retarget(&mut self, from: u32, token: u32, to: u32) {
        let mut e = self.states[from as usize].first_edge;
        while e != u32::MAX {
            let edge = &mut self.edges[e as usize];
            if edge.token == token {
                edge.target = to;
                return;
            }
            e = edge.next;
        }
    }
}

/// The automaton plus the match of the text indexed so far, kept up to date as tokens arrive:
/// after each append, `current()` is the longest suffix of the text that also ended earlier.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    index: SuffixAutomaton,
    current: Match,
    /// Text index where the matched suffix last ended before the live text's own end.
    current_at: Option<u32>,
}

impl Default for Match {
    fn default() -> Self {
        Match::NONE
    }
}

impl Matcher {
    pub(crate) fn index(&self) -> &SuffixAutomaton {
        &self.index
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.current = Match::NONE;
        self.current_at = None;
    }

    pub fn current(&self) -> Match {
        self.current
    }

    /// Text index of the last token of the current match's latest earlier occurrence.
    pub(crate) fn current_at(&self) -> Option<u32> {
        self.current_at
    }

    /// Indexes a separate source (history, an earlier context) without moving the match into
    /// it: the match restarts with the next [`push`](Self::push).
    pub(crate) fn add_source(&mut self, tokens: &[u32]) {
        self.index.separate();
        self.index.extend(tokens);
        self.index.separate();
        self.current = Match::NONE;
        self.current_at = None;
    }

    /// Appends a token of the live text (prompt, then answer): the match advances over the
    /// earlier text first, then the token joins the index.
    pub fn push(&mut self, token: u32) {
        let m = self.index.advance(self.current, token);
        self.current_at = (m.len > 0).then(|| self.index.last_end(m));
        let split = self.index.push_token(token);
        self.current = match split {
            Some((orig, clone)) if m.state == orig && m.len <= self.index.states[clone as usize].len => {
                Match { state: clone, len: m.len }
            }
            _ => m,
        };
    }

    pub fn extend(&mut self, tokens: &[u32]) {
        for &t in tokens {
            self.push(t);
        }
    }
}

fn key(state: u32, token: u32) -> u64 {
    (u64::from(state) << 32) | u64::from(token)
}

/// A multiply-xorshift hasher for the (state, token) keys: std's SipHash is built to resist
/// hash flooding, which a local index of the user's own text does not need, at several times
/// the cost.
#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^ (x >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every substring of `text` is found, and the continuations after a substring are
    /// exactly the distinct tokens that follow its occurrences, with their counts.
    fn check_against_brute_force(text: &[u32]) {
        let mut sam = SuffixAutomaton::new();
        sam.extend(text);
        for i in 0..text.len() {
            for j in i + 1..=text.len().min(i + 6) {
                let sub = &text[i..j];
                let mut m = Match::NONE;
                for &t in sub {
                    m = sam.advance(m, t);
                }
                assert_eq!(m.len as usize, sub.len(), "substring {sub:?} is found whole");
                let mut want: Vec<(u32, u32)> = Vec::new();
                for k in 0..=text.len() - sub.len() {
                    if &text[k..k + sub.len()] == sub {
                        if let Some(&next) = text.get(k + sub.len()) {
                            match want.iter_mut().find(|(t, _)| *t == next) {
                                Some(w) => w.1 += 1,
                                None => want.push((next, 1)),
                            }
                        }
                    }
                }
                let mut got = Vec::new();
                sam.continuations(m, usize::MAX, &mut got);
                let mut got: Vec<(u32, u32)> = got.iter().map(|c| (c.token, c.count)).collect();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "continuations of {sub:?}");
            }
        }
    }

    #[test]
    fn matches_brute_force_on_small_texts() {
        check_against_brute_force(&[1, 2, 1, 2, 3, 1, 2, 1, 2, 3, 4]);
        check_against_brute_force(&[5, 5, 5, 5, 5, 5, 5]);
        check_against_brute_force(&[1, 2, 3, 4, 5, 6]);
        let mut x = 7u32;
        let pseudo: Vec<u32> = (0..200)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 16) % 4
            })
            .collect();
        check_against_brute_force(&pseudo);
    }

    #[test]
    fn latest_occurrence_is_reported() {
        let mut sam = SuffixAutomaton::new();
        sam.extend(&[1, 2, 9, 1, 2, 8, 7]);
        let m = sam.advance(sam.advance(Match::NONE, 1), 2);
        let mut c = Vec::new();
        sam.continuations(m, 8, &mut c);
        // Both continuations seen once: the later one (8, at index 5) first.
        assert_eq!(c.iter().map(|c| (c.token, c.at)).collect::<Vec<_>>(), [(8, 5), (9, 2)]);
    }

    #[test]
    fn separators_stop_matches_and_continuations() {
        let mut m = Matcher::default();
        m.add_source(&[1, 2, 3]);
        m.extend(&[9, 1, 2]);
        assert_eq!(m.current().len, 2);
        let mut c = Vec::new();
        m.index().continuations(m.current(), 8, &mut c);
        assert_eq!(c.iter().map(|c| c.token).collect::<Vec<_>>(), [3]);
        // "3" was followed only by the separator: nothing to continue with.
        let after = m.index().advance(m.current(), 3);
        m.index().continuations(after, 8, &mut c);
        assert!(c.is_empty());
    }

    /// The live match always equals the longest suffix that occurred earlier, checked by
    /// brute force after every append (covers the fix-up after a state is split).
    #[test]
    fn live_match_is_the_longest_earlier_suffix() {
        let mut x = 3u32;
        let text: Vec<u32> = (0..300)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 16) % 3
            })
            .collect();
        let mut m = Matcher::default();
        for i in 0..text.len() {
            m.push(text[i]);
            let seen = &text[..=i];
            let longest = (1..=i)
                .rev()
                .find(|&l| {
                    let suffix = &seen[i + 1 - l..];
                    (0..i + 1 - l).any(|k| &seen[k..k + l] == suffix)
                })
                .unwrap_or(0);
            assert_eq!(m.current().len as usize, longest, "after {} tokens", i + 1);
        }
    }
}
