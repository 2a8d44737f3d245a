//! `Engine`: a loaded model, shared by any number of sessions.

use std::sync::Arc;

use crate::channel::run_blocking;
use crate::energy::{DeviceState, EnergyMode, EnergyStatus, Tuning};
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

    /// Indexes the vocabulary for grammars, tools and UI actions on a thread of its own (a
    /// fraction of a second to about a second, once per engine). Without it the first
    /// `set_grammar`, `set_tools` or `next_action` does it.
    pub async fn prepare_structured_output(&self) -> Result<(), TernError> {
        let engine = Arc::clone(&self.inner);
        run_blocking("grammar-vocabulary", move || Ok(engine.grammar_vocabulary().map(drop)?)).await
    }

    /// Mode, device state, meter, and the cores each phase runs on.
    pub fn energy_status(&self) -> EnergyStatus {
        self.inner.energy_status().into()
    }

    /// Applies from the next answer on. A custom mode naming a CPU id that is not an online CPU
    /// of this device is `InvalidOption`, and the mode in force stays.
    pub fn set_energy_mode(&self, mode: EnergyMode) -> Result<(), TernError> {
        Ok(self.inner.set_energy_mode(mode.into())?)
    }

    /// The app reports thermal throttling or a low battery, and their end: while either lasts,
    /// decode runs on the power-saver selection. The Kotlin and Swift packages have monitors
    /// that call this from the OS's notifications.
    pub fn report_device_state(&self, state: DeviceState) {
        self.inner.report_device_state(state.into());
    }

    /// This device's tuning result, if it has one (stored by an earlier run or just made).
    pub fn energy_tuning(&self) -> Option<Tuning> {
        self.inner.energy_tuning().map(Into::into)
    }

    /// Searches this device for its decode core selections (a few seconds of decoding, on a
    /// thread of its own) and keeps the result, in `EnergyOptions.tuning_dir` too. Run it once
    /// per device while no session of this engine generates; abandoning the call does not stop
    /// the search.
    pub async fn tune_energy(&self) -> Result<Tuning, TernError> {
        let engine = Arc::clone(&self.inner);
        run_blocking("tune-energy", move || Ok(engine.tune_energy()?.into())).await
    }
}

/// Names of the kernel sets this CPU runs, best last (values for `EngineOptions.kernels`).
#[uniffi::export]
pub fn available_kernels() -> Vec<String> {
    tern::kernel_sets().into_iter().map(str::to_owned).collect()
}
