//! Speculative decoding across the boundary: the session's speculation settings, the history
//! store that feeds the drafter (an object: one store is shared by many sessions), and the
//! figures of one answer. Each record converts from the SDK's own type in one place.

use std::sync::Arc;

use crate::error::TernError;
use crate::units::ms;

/// Bounds of a speculative decoding step. The defaults are those of automatic speculation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct DraftLimits {
    /// Drafted tokens per verification pass (1 to 63).
    #[uniffi(default = 31)]
    pub max_draft_tokens: u32,
    /// Drafted children per tree node (1: a single chain).
    #[uniffi(default = 3)]
    pub max_width: u32,
    /// Longest drafted path.
    #[uniffi(default = 24)]
    pub max_depth: u32,
    /// Let the SDK choose how much to verify (and whether) within these bounds from the measured
    /// costs and the running acceptance; `false` verifies whatever is drafted (tests).
    #[uniffi(default = true)]
    pub adaptive: bool,
}

impl Default for DraftLimits {
    fn default() -> Self {
        tern::DraftLimits::AUTO.into()
    }
}

impl From<tern::DraftLimits> for DraftLimits {
    fn from(l: tern::DraftLimits) -> Self {
        DraftLimits {
            max_draft_tokens: l.max_draft_tokens as u32,
            max_width: l.max_width as u32,
            max_depth: l.max_depth as u32,
            adaptive: l.adaptive,
        }
    }
}

impl From<DraftLimits> for tern::DraftLimits {
    fn from(l: DraftLimits) -> Self {
        tern::DraftLimits {
            max_draft_tokens: l.max_draft_tokens as usize,
            max_width: l.max_width as usize,
            max_depth: l.max_depth as usize,
            adaptive: l.adaptive,
        }
    }
}

/// Whether and how a session speculates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Speculation {
    /// Plain decoding, one token per pass.
    Off,
    /// Draft and verify where it pays, within the default `DraftLimits`.
    Auto,
    /// Explicit bounds.
    Limits { limits: DraftLimits },
}

impl From<tern::Speculation> for Speculation {
    fn from(s: tern::Speculation) -> Self {
        match s {
            tern::Speculation::Off => Speculation::Off,
            tern::Speculation::Auto => Speculation::Auto,
            tern::Speculation::Limits(l) => Speculation::Limits { limits: l.into() },
        }
    }
}

impl From<Speculation> for tern::Speculation {
    fn from(s: Speculation) -> Self {
        match s {
            Speculation::Off => tern::Speculation::Off,
            Speculation::Auto => tern::Speculation::Auto,
            Speculation::Limits { limits } => tern::Speculation::Limits(limits.into()),
        }
    }
}

/// Speculation settings of a session (docs/speculative.md). The defaults speculate
/// automatically from the prompt and the session's own turns.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SpeculationOptions {
    /// None: `Auto`. (UniFFI has no enum defaults, so the default is written as none.)
    #[uniffi(default = None)]
    pub mode: Option<Speculation>,
    /// How many of the last prompt positions get the model's own predictions as drafts,
    /// computed during prefill at some prefill cost; 0 turns this calibration off.
    #[uniffi(default = 2048)]
    pub calibration_positions: u32,
    /// Stored texts to draft from, and where to add answers.
    #[uniffi(default = None)]
    pub history: Option<HistoryScope>,
}

impl Default for SpeculationOptions {
    fn default() -> Self {
        tern::SpeculationOptions::default().into()
    }
}

impl From<tern::SpeculationOptions> for SpeculationOptions {
    fn from(o: tern::SpeculationOptions) -> Self {
        SpeculationOptions {
            mode: match o.mode {
                tern::Speculation::Auto => None,
                mode => Some(mode.into()),
            },
            calibration_positions: o.calibration_positions as u32,
            history: o.history.map(Into::into),
        }
    }
}

impl From<SpeculationOptions> for tern::SpeculationOptions {
    fn from(o: SpeculationOptions) -> Self {
        tern::SpeculationOptions {
            mode: o.mode.map_or(tern::Speculation::Auto, Into::into),
            calibration_positions: o.calibration_positions as usize,
            history: o.history.map(Into::into),
        }
    }
}

/// Caps of a `HistoryStore`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct HistoryOptions {
    /// Bytes of text kept per key; the oldest texts are dropped beyond it.
    #[uniffi(default = 65536)]
    pub max_bytes_per_key: u64,
    /// Bytes of text kept in the whole store; the least recently written keys are dropped
    /// beyond it.
    #[uniffi(default = 8388608)]
    pub max_total_bytes: u64,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        tern::HistoryOptions::default().into()
    }
}

impl From<tern::HistoryOptions> for HistoryOptions {
    fn from(o: tern::HistoryOptions) -> Self {
        HistoryOptions { max_bytes_per_key: o.max_bytes_per_key as u64, max_total_bytes: o.max_total_bytes as u64 }
    }
}

impl From<HistoryOptions> for tern::HistoryOptions {
    fn from(o: HistoryOptions) -> Self {
        let bytes = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        tern::HistoryOptions {
            max_bytes_per_key: bytes(o.max_bytes_per_key),
            max_total_bytes: bytes(o.max_total_bytes),
        }
    }
}

/// Texts an app keeps for later answers to quote (one contact's thread, a task's earlier
/// answers), persistent in a directory and scoped by keys the app chooses (1 to 96 bytes).
/// Sessions given a `HistoryScope` draft from its texts and add their answers to it. Calls read
/// or write small files on the caller's thread.
#[derive(Debug, uniffi::Object)]
pub struct HistoryStore {
    inner: Arc<tern::HistoryStore>,
}

/// Two handles are equal when they are the same store.
impl PartialEq for HistoryStore {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

#[uniffi::export]
impl HistoryStore {
    /// Uses `dir` (created if missing) as the store, e.g. a `history` folder in the app's files.
    #[uniffi::constructor(default(options))]
    pub fn open(dir: String, options: HistoryOptions) -> Result<Arc<HistoryStore>, TernError> {
        Ok(Arc::new(HistoryStore { inner: tern::HistoryStore::open(dir, options.into())? }))
    }

    pub fn dir(&self) -> String {
        self.inner.dir().display().to_string()
    }

    pub fn options(&self) -> HistoryOptions {
        self.inner.options().into()
    }

    /// Adds a text to `key`'s scope (e.g. a message received); the oldest go past the cap.
    pub fn add(&self, key: String, text: String) -> Result<(), TernError> {
        Ok(self.inner.add(&key, &text)?)
    }

    /// The texts of `key`'s scope, oldest first (none for a key never written).
    pub fn texts(&self, key: String) -> Result<Vec<String>, TernError> {
        Ok(self.inner.texts(&key)?)
    }

    /// Forgets `key`'s texts, on disk too.
    pub fn clear(&self, key: String) -> Result<(), TernError> {
        Ok(self.inner.clear(&key)?)
    }

    /// Forgets every key's texts.
    pub fn clear_all(&self) -> Result<(), TernError> {
        Ok(self.inner.clear_all()?)
    }

    /// Bytes the store holds on disk (all keys).
    pub fn total_bytes(&self) -> Result<u64, TernError> {
        Ok(self.inner.total_bytes()?)
    }
}

/// Which part of a store a session drafts from, and whether it adds its answers there.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct HistoryScope {
    pub store: Arc<HistoryStore>,
    pub key: String,
    /// Add each finished answer to the scope.
    #[uniffi(default = true)]
    pub record_answers: bool,
}

impl From<tern::HistoryScope> for HistoryScope {
    fn from(s: tern::HistoryScope) -> Self {
        HistoryScope { store: Arc::new(HistoryStore { inner: s.store }), key: s.key, record_answers: s.record_answers }
    }
}

impl From<HistoryScope> for tern::HistoryScope {
    fn from(s: HistoryScope) -> Self {
        tern::HistoryScope { store: Arc::clone(&s.store.inner), key: s.key, record_answers: s.record_answers }
    }
}

/// What speculation did during one answer.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SpeculationStats {
    /// Decode passes, with a draft or without.
    pub decode_passes: u32,
    /// Passes that verified a draft.
    pub verify_steps: u32,
    pub drafted_tokens: u32,
    /// Drafted tokens the model accepted.
    pub accepted_tokens: u32,
    /// Tokens chosen per decode pass (1 without speculation).
    pub tokens_per_step: f64,
    /// Time spent building drafts and planning (part of the decode time).
    pub drafting_ms: f64,
    /// Prompt positions whose predictions were computed in this answer's prefill.
    pub calibrated_positions: u32,
    /// `draftLengths[n]`: passes that carried n drafted tokens.
    pub draft_lengths: Vec<u32>,
    /// `acceptedLengths[n]`: passes in which n drafted tokens were accepted.
    pub accepted_lengths: Vec<u32>,
    /// Why the answer could not be added to the history scope, if it could not.
    pub history_error: Option<String>,
}

impl From<tern::SpeculationStats> for SpeculationStats {
    fn from(s: tern::SpeculationStats) -> Self {
        let counts = |h: Vec<usize>| h.into_iter().map(|n| n as u32).collect();
        SpeculationStats {
            decode_passes: s.decode_passes as u32,
            verify_steps: s.verify_steps as u32,
            drafted_tokens: s.drafted_tokens as u32,
            accepted_tokens: s.accepted_tokens as u32,
            tokens_per_step: s.tokens_per_step,
            drafting_ms: ms(s.drafting_time),
            calibrated_positions: s.calibrated_positions as u32,
            draft_lengths: counts(s.draft_lengths),
            accepted_lengths: counts(s.accepted_lengths),
            history_error: s.history_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_sdks() {
        let ours: tern::SpeculationOptions = SpeculationOptions::default().into();
        assert_eq!(format!("{ours:?}"), format!("{:?}", tern::SpeculationOptions::default()));
        let limits: tern::DraftLimits = DraftLimits::default().into();
        assert_eq!(limits, tern::DraftLimits::AUTO);
        let history: tern::HistoryOptions = HistoryOptions::default().into();
        assert_eq!(history, tern::HistoryOptions::default());
    }

    #[test]
    fn modes_and_scopes_round_trip() {
        let limits = DraftLimits { max_draft_tokens: 8, max_width: 1, max_depth: 8, adaptive: false };
        for mode in [Speculation::Off, Speculation::Auto, Speculation::Limits { limits }] {
            let sdk: tern::Speculation = mode.into();
            assert_eq!(Speculation::from(sdk), mode);
        }
        let dir = std::env::temp_dir().join(format!("tern-ffi-history-{}", std::process::id()));
        let store = HistoryStore::open(dir.display().to_string(), HistoryOptions::default()).unwrap();
        let scope = HistoryScope { store: Arc::clone(&store), key: "alice".into(), record_answers: false };
        let sdk: tern::HistoryScope = scope.clone().into();
        assert!(Arc::ptr_eq(&sdk.store, &store.inner), "the scope shares the app's store");
        assert_eq!(HistoryScope::from(sdk), scope);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_store_adds_clears_and_refuses_bad_keys() {
        let dir = std::env::temp_dir().join(format!("tern-ffi-history-clear-{}", std::process::id()));
        let store = HistoryStore::open(dir.display().to_string(), HistoryOptions::default()).unwrap();
        store.add("alice".into(), "See you at noon.".into()).unwrap();
        store.add("bob".into(), "Call me back.".into()).unwrap();
        assert_eq!(store.texts("alice".into()).unwrap(), ["See you at noon."]);
        assert!(store.total_bytes().unwrap() > 0);
        store.clear("alice".into()).unwrap();
        assert!(store.texts("alice".into()).unwrap().is_empty());
        assert_eq!(store.texts("bob".into()).unwrap().len(), 1);
        store.clear_all().unwrap();
        assert!(store.texts("bob".into()).unwrap().is_empty());
        assert_eq!(store.total_bytes().unwrap(), 0);
        assert!(matches!(store.add(String::new(), "x".into()), Err(TernError::InvalidOption { .. })));
        let caps = HistoryOptions { max_bytes_per_key: 0, ..Default::default() };
        assert!(matches!(HistoryStore::open(dir.display().to_string(), caps), Err(TernError::InvalidOption { .. })));
        let _ = std::fs::remove_dir_all(dir);
    }
}
