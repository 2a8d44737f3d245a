//! UniFFI bindings of Tern: the one crate that knows about UniFFI. The Kotlin package
//! (`dev.tern`) and the Swift module (`Tern`) are generated from this library with the
//! settings in `uniffi.toml` at the repository root; `bindings/kotlin` and `bindings/swift`
//! add the idiomatic layer (coroutines and `Flow`, `async`/`AsyncThrowingStream`) on top.
//!
//! Rules kept here:
//! - Nothing runs inference on a caller's thread: loading and generation run on threads of
//!   their own and wake the foreign executor (see `channel`). No async runtime is needed.
//! - No panic crosses the boundary: work on our threads runs under `catch_unwind`, and UniFFI
//!   catches panics in the exported calls themselves.
//! - Errors are `TernError`, mapped from `tern::Error` and `tern_store::StoreError` in one
//!   place, without prompt or answer text.

uniffi::setup_scaffolding!();

#[cfg(any(target_os = "android", feature = "android-battery"))]
mod android;
mod channel;
mod energy;
mod engine;
mod error;
mod logging;
mod records;
mod session;
mod speculation;
mod store;
mod structured;
mod ui;
mod units;

pub use energy::{
    CoreSelection, DeviceState, EnergyKind, EnergyMode, EnergyOptions, EnergyStats, EnergyStatus, PhaseEnergy,
    ThermalState, TunedSelection, Tuning,
};
pub use engine::{available_kernels, Engine};
pub use error::TernError;
pub use logging::{set_log_level, LogLevel};
pub use records::{
    ConversationMessage, EngineOptions, FinishReason, MessageRole, ModelInfo, SamplingOptions, SessionOptions, Stats,
    TokenEvent,
};
pub use session::{Session, TokenStream};
pub use speculation::{
    DraftLimits, HistoryOptions, HistoryScope, HistoryStore, Speculation, SpeculationOptions, SpeculationStats,
};
pub use store::{known_models, Download, DownloadEvent, DownloadOptions, ModelSpec, ModelStore, StoredFile};
pub use structured::{Grammar, Tool, ToolCall, ToolChoice};
pub use ui::{
    parse_ui_action, screen_from_json, ui_action_schema, ui_system_prompt, validate_ui_action, Screen, UiAction,
    UiActionKind, UiElement,
};
