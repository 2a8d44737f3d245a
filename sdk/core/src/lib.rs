//! Tern: on-device LLM inference over GGUF models with streaming chat sessions.
//!
//! ```no_run
//! use tern::{Engine, EngineOptions, Event, Session, SessionOptions};
//! let engine = Engine::load("SmolLM2-135M-Instruct.Q4_1.gguf", EngineOptions::default())?;
//! let mut session = Session::new(engine, SessionOptions::default())?;
//! for event in session.send("What is the capital of France?")? {
//!     match event? {
//!         Event::Token { text, .. } => print!("{text}"),
//!         Event::Done(stats) => eprintln!("\n{:.1} tokens/s", stats.decode_tokens_per_s),
//!     }
//! }
//! # Ok::<(), tern::Error>(())
//! ```

pub mod chat;
pub mod constrain;
pub mod energy;
pub mod engine;
pub mod error;
mod files;
pub mod gguf;
pub mod sampling;
pub mod session;
pub mod tokenizer;
pub mod tools;
mod typed;
pub mod ui;

/// Declares the engine's internals: public under the `lab` feature (the lab crate, benchmarks
/// and tests reach into them), crate-private otherwise. Items only those reach are unused in
/// the SDK's own build, hence the allowance.
macro_rules! internal_modules {
    ($($name:ident),*) => {$(
        #[cfg(feature = "lab")]
        pub mod $name;
        #[cfg(not(feature = "lab"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name;
    )*};
}
internal_modules!(model, quant, runtime, speculative);

/// A function public under the `lab` feature and crate-private otherwise (see the modules
/// above).
macro_rules! lab_pub {
    ($(#[$m:meta])* fn $($rest:tt)*) => {
        #[cfg(feature = "lab")]
        $(#[$m])* pub fn $($rest)*
        #[cfg(not(feature = "lab"))]
        $(#[$m])* pub(crate) fn $($rest)*
    };
}
pub(crate) use lab_pub;

pub use chat::{Message, Role};
pub use constrain::Grammar;
pub use energy::{CoreSelection, DeviceState, EnergyKind, EnergyMode, EnergyOptions, EnergyStats, ThermalState};
pub use engine::{kernel_sets, Engine, EngineOptions, ModelInfo};
pub use error::{Error, Result, WriteOp};
pub use model::KvPrecision;
pub use runtime::peak_rss_bytes;
pub use sampling::SamplingOptions;
/// The JSON Schema derive for [`Session::generate`]'s types, at the version Tern uses.
#[cfg(feature = "structured")]
pub use schemars;
pub use session::{
    CancelHandle, Event, FinishReason, Generation, OverflowPolicy, Session, SessionOptions, Stats, ToolLoopAnswer,
};
pub use speculative::{
    DraftLimits, HistoryOptions, HistoryScope, HistoryStore, Speculation, SpeculationOptions, SpeculationStats,
};
pub use tools::{Tool, ToolCall, ToolChoice};
