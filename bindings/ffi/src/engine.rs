//! `Engine`: a loaded model, shared by any number of sessions.

use std::sync::Arc;

use crate::channel::run_blocking;
use crate::error::TernError;
use crate::records::{EngineOptions, ModelInfo, SessionOptions};
use crate::session::Session;

#[derive(uniffi::Object)]
pub struct Engine {
    inner: Arc<tern::Engine>,
}

#[uniffi::export]
impl Engine {
    /// Loads a model file (GGUF) on a thread of its own; the weights are mapped, not copied.
    #[uniffi::constructor(default(options))]
    pub async fn load(path: String, options: EngineOptions) -> Result<Arc<Engine>, TernError> {
        run_blocking("load", move || Ok(Arc::new(Engine { inner: tern::Engine::load(&path, options.into())? }))).await
    }

    pub fn info(&self) -> ModelInfo {
        self.inner.info().into()
    }

    /// Tokens `text` takes as message content.
    pub fn count_tokens(&self, text: String) -> Result<u32, TernError> {
        Ok(self.inner.count_tokens(&text)? as u32)
    }

    /// A new conversation with its own KV cache.
    #[uniffi::method(default(options))]
    pub fn new_session(&self, options: SessionOptions) -> Result<Arc<Session>, TernError> {
        Ok(Arc::new(Session::new(Arc::clone(&self.inner), options.into())?))
    }
}

/// Names of the kernel sets this CPU runs, best last (values for `EngineOptions.kernels`).
#[uniffi::export]
pub fn available_kernels() -> Vec<String> {
    tern::quant::available_kernels().iter().map(|k| k.isa.to_owned()).collect()
}
