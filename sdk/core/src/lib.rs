//! Tern: on-device LLM inference over GGUF models with streaming chat sessions.

pub mod error;
pub mod gguf;
pub mod quant;

pub use error::{Error, Result};
