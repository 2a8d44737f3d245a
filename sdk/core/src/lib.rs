//! Tern: on-device LLM inference over GGUF models with streaming chat sessions.

pub mod chat;
pub mod error;
pub mod gguf;
pub mod quant;
pub mod sampling;
pub mod tokenizer;

pub use error::{Error, Result};
