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
pub mod model;
pub mod quant;
pub mod runtime;
pub mod sampling;
pub mod session;
pub mod speculative;
pub mod tokenizer;
pub mod tools;
pub mod ui;

pub use chat::{Message, Role};
pub use constrain::Grammar;
pub use energy::{CoreSelection, DeviceState, EnergyKind, EnergyMode, EnergyOptions, EnergyStats, ThermalState};
pub use engine::{Engine, EngineOptions, ModelInfo};
pub use error::{Error, Result, WriteOp};
pub use runtime::peak_rss_bytes;
pub use sampling::SamplingOptions;
pub use session::{CancelHandle, Event, FinishReason, Generation, Session, SessionOptions, Stats};
pub use speculative::{
    DraftLimits, HistoryOptions, HistoryScope, HistoryStore, Speculation, SpeculationOptions, SpeculationStats,
};
pub use tools::{Tool, ToolCall, ToolChoice};
