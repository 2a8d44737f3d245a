//! UniFFI bindings of Tern: the one crate that knows about UniFFI. Kotlin and Swift packages
//! are generated from this library (see `uniffi.toml` at the repository root).
//!
//! Threading: nothing here runs inference on the caller's thread. `load_engine` loads on a
//! thread of its own; `Session::send` starts the generation on a dedicated thread that pushes
//! events into a channel, and `TokenStream::next` awaits that channel. The futures need no
//! runtime: the foreign executor polls them and the worker threads wake it.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

uniffi::setup_scaffolding!();

// ---------------------------------------------------------------------------------------------
// Errors

/// Errors of the SDK. Messages name files, options and counts, never prompt or answer text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum TernError {
    #[error("model file not found: {path}")]
    ModelNotFound { path: String },
    #[error("{detail}")]
    Io { detail: String },
    /// The file is not a valid model (bad magic, truncated, corrupt, missing keys or tensors).
    #[error("{detail}")]
    InvalidModel { detail: String },
    /// A valid model this build cannot run (architecture, tensor type).
    #[error("{detail}")]
    Unsupported { detail: String },
    #[error("context window exceeded: {needed} tokens needed, {limit} available")]
    ContextOverflow { needed: u64, limit: u64 },
    #[error("{detail}")]
    InvalidOption { detail: String },
    #[error("generation cancelled")]
    Cancelled,
    #[error("{detail}")]
    Template { detail: String },
    #[error("{detail}")]
    Tokenizer { detail: String },
    /// A second request on a session that is still generating.
    #[error("session is busy with another request")]
    Busy,
    /// A bug in the SDK (e.g. a panic caught at the boundary).
    #[error("{detail}")]
    Internal { detail: String },
}

impl From<tern::Error> for TernError {
    fn from(e: tern::Error) -> Self {
        use tern::Error as E;
        // tern's messages carry no prompt text, so they can be passed on as they are.
        let message = e.to_string();
        match e {
            E::FileNotFound { path } => TernError::ModelNotFound {
                path: path.display().to_string(),
            },
            E::Io { .. } => TernError::Io { detail: message },
            E::NotGguf { .. }
            | E::UnsupportedVersion(_)
            | E::Truncated { .. }
            | E::Corrupt(_)
            | E::MissingMetadata(_)
            | E::MetadataType { .. }
            | E::MissingTensor(_)
            | E::TensorShape { .. } => TernError::InvalidModel { detail: message },
            E::UnsupportedArchitecture(_) | E::UnsupportedTensorType { .. } => {
                TernError::Unsupported { detail: message }
            }
            E::ContextOverflow { needed, limit } => TernError::ContextOverflow {
                needed: needed as u64,
                limit: limit as u64,
            },
            E::InvalidOption(_) => TernError::InvalidOption { detail: message },
            E::Cancelled => TernError::Cancelled,
            E::Template(_) => TernError::Template { detail: message },
            E::Tokenizer(_) => TernError::Tokenizer { detail: message },
            E::Busy => TernError::Busy,
            _ => TernError::Internal { detail: message },
        }
    }
}

fn panic_error(what: &str) -> TernError {
    // The panic payload may quote data; report only where it happened.
    TernError::Internal {
        detail: format!("internal error in {what}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Records

#[derive(Debug, Clone, uniffi::Record)]
pub struct EngineOptions {
    /// Compute threads (default: one per available core, at most 8).
    #[uniffi(default = None)]
    pub threads: Option<u32>,
    /// Default context length of sessions (default: the model's, capped at 4096).
    #[uniffi(default = None)]
    pub context_length: Option<u32>,
    /// Force a kernel set by name (`reference`, `avx2`, ...); default: the best available.
    #[uniffi(default = None)]
    pub kernels: Option<String>,
}

impl From<EngineOptions> for tern::EngineOptions {
    fn from(o: EngineOptions) -> Self {
        tern::EngineOptions {
            threads: o.threads.map(|n| n as usize),
            context_length: o.context_length.map(|n| n as usize),
            kernels: o.kernels,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, uniffi::Record)]
pub struct SamplingOptions {
    /// Softmax temperature; 0 = greedy.
    #[uniffi(default = 0.0)]
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 = off.
    #[uniffi(default = 40)]
    pub top_k: u32,
    /// Nucleus sampling threshold; 1 = off.
    #[uniffi(default = 0.95)]
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; 0 = off.
    #[uniffi(default = 0.05)]
    pub min_p: f32,
    /// Penalty on recently seen tokens; 1 = off.
    #[uniffi(default = 1.0)]
    pub repetition_penalty: f32,
    /// How many recent tokens the penalty looks at; 0 = off.
    #[uniffi(default = 64)]
    pub repeat_last_n: u32,
    /// Seed for reproducible sampling; none draws one from the environment.
    #[uniffi(default = None)]
    pub seed: Option<u64>,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        tern::SamplingOptions::default().into()
    }
}

impl From<tern::SamplingOptions> for SamplingOptions {
    fn from(o: tern::SamplingOptions) -> Self {
        SamplingOptions {
            temperature: o.temperature,
            top_k: o.top_k as u32,
            top_p: o.top_p,
            min_p: o.min_p,
            repetition_penalty: o.repetition_penalty,
            repeat_last_n: o.repeat_last_n as u32,
            seed: o.seed,
        }
    }
}

impl From<SamplingOptions> for tern::SamplingOptions {
    fn from(o: SamplingOptions) -> Self {
        tern::SamplingOptions {
            temperature: o.temperature,
            top_k: o.top_k as usize,
            top_p: o.top_p,
            min_p: o.min_p,
            repetition_penalty: o.repetition_penalty,
            repeat_last_n: o.repeat_last_n as usize,
            seed: o.seed,
        }
    }
}

#[derive(Debug, Clone, uniffi::Record)]
pub struct SessionOptions {
    /// System message placed before the conversation (the template's default if none).
    #[uniffi(default = None)]
    pub system_prompt: Option<String>,
    #[uniffi(default)]
    pub sampling: SamplingOptions,
    /// Most tokens one answer may have.
    #[uniffi(default = 512)]
    pub max_tokens: u32,
    /// Generation stops when the text contains any of these; the stop text is not emitted.
    #[uniffi(default)]
    pub stop: Vec<String>,
    /// KV cache length of this session (default: the engine's).
    #[uniffi(default = None)]
    pub context_length: Option<u32>,
    /// Keep generating past end-of-generation tokens (benchmarks).
    #[uniffi(default = false)]
    pub ignore_eos: bool,
}

impl From<SessionOptions> for tern::SessionOptions {
    fn from(o: SessionOptions) -> Self {
        tern::SessionOptions {
            system_prompt: o.system_prompt,
            sampling: o.sampling.into(),
            max_tokens: o.max_tokens as usize,
            stop: o.stop,
            context_length: o.context_length.map(|n| n as usize),
            ignore_eos: o.ignore_eos,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum FinishReason {
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// A stop sequence appeared in the text.
    StopSequence,
    MaxTokens,
    Cancelled,
    /// The KV cache is full.
    ContextFull,
}

impl From<tern::FinishReason> for FinishReason {
    fn from(r: tern::FinishReason) -> Self {
        match r {
            tern::FinishReason::EndOfGeneration => FinishReason::EndOfGeneration,
            tern::FinishReason::StopSequence => FinishReason::StopSequence,
            tern::FinishReason::MaxTokens => FinishReason::MaxTokens,
            tern::FinishReason::Cancelled => FinishReason::Cancelled,
            tern::FinishReason::ContextFull => FinishReason::ContextFull,
        }
    }
}

#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Stats {
    /// Tokens of the prompt of this request (the whole rendered conversation).
    pub prompt_tokens: u32,
    /// Of those, how many were already in the KV cache.
    pub cached_tokens: u32,
    pub generated_tokens: u32,
    pub time_to_first_token_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub finish_reason: FinishReason,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl From<tern::Stats> for Stats {
    fn from(s: tern::Stats) -> Self {
        Stats {
            prompt_tokens: s.prompt_tokens as u32,
            cached_tokens: s.cached_tokens as u32,
            generated_tokens: s.generated_tokens as u32,
            time_to_first_token_ms: ms(s.time_to_first_token),
            prefill_ms: ms(s.prefill_time),
            decode_ms: ms(s.decode_time),
            prefill_tokens_per_s: s.prefill_tokens_per_s,
            decode_tokens_per_s: s.decode_tokens_per_s,
            finish_reason: s.finish_reason.into(),
        }
    }
}

#[derive(Debug, Clone, uniffi::Record)]
pub struct ModelInfo {
    pub architecture: String,
    pub name: String,
    pub n_params: u64,
    /// Context length sessions get by default.
    pub context_length: u32,
    /// Context length the model was trained for.
    pub train_context_length: u32,
    pub vocab_size: u32,
    pub file_size: u64,
    /// Name of the kernel set in use.
    pub kernels: String,
    pub threads: u32,
    pub load_ms: f64,
}

#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum TokenEvent {
    /// New text (possibly empty while a stop sequence or UTF-8 sequence is pending) and the
    /// token ids it came from.
    Token { text: String, ids: Vec<u32> },
    /// The last event of a stream.
    Done { stats: Stats },
}

// ---------------------------------------------------------------------------------------------
// A small channel whose receiving end is a future (no runtime needed).

struct ChanState<T> {
    queue: VecDeque<T>,
    closed: bool,
    receiver_gone: bool,
    waker: Option<Waker>,
}

struct Chan<T> {
    state: Mutex<ChanState<T>>,
}

impl<T> Chan<T> {
    fn new() -> Arc<Self> {
        Arc::new(Chan {
            state: Mutex::new(ChanState {
                queue: VecDeque::new(),
                closed: false,
                receiver_gone: false,
                waker: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ChanState<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an item; false when the receiver is gone (the item is dropped).
    fn push(&self, item: T) -> bool {
        let waker = {
            let mut s = self.lock();
            if s.receiver_gone {
                return false;
            }
            s.queue.push_back(item);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    fn close(&self) {
        let waker = {
            let mut s = self.lock();
            s.closed = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn receiver_gone(&self) -> bool {
        self.lock().receiver_gone
    }

    fn drop_receiver(&self) {
        let mut s = self.lock();
        s.receiver_gone = true;
        s.queue.clear();
    }

    fn recv(self: &Arc<Self>) -> Recv<T> {
        Recv {
            chan: Arc::clone(self),
        }
    }
}

struct Recv<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Future for Recv<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.chan.lock();
        if let Some(item) = s.queue.pop_front() {
            Poll::Ready(Some(item))
        } else if s.closed {
            Poll::Ready(None)
        } else {
            s.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// Runs `f` on a new thread and awaits its result without blocking the caller's executor.
async fn run_blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, TernError> + Send + 'static,
) -> Result<T, TernError> {
    let chan = Chan::new();
    let tx = Arc::clone(&chan);
    std::thread::Builder::new()
        .name(format!("tern-{what}"))
        .spawn(move || {
            let result =
                catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(panic_error(what)));
            tx.push(result);
            tx.close();
        })
        .map_err(|e| TernError::Internal {
            detail: format!("cannot start a thread: {e}"),
        })?;
    chan.recv().await.unwrap_or_else(|| Err(panic_error(what)))
}

// ---------------------------------------------------------------------------------------------
// Engine

/// A loaded model, shared by any number of sessions.
#[derive(uniffi::Object)]
pub struct Engine {
    inner: Arc<tern::Engine>,
}

/// Loads a model file on a background thread (the weights are mapped, not copied).
#[uniffi::export]
pub async fn load_engine(path: String, options: EngineOptions) -> Result<Arc<Engine>, TernError> {
    run_blocking("load", move || {
        let inner = tern::Engine::load(&path, options.into())?;
        Ok(Arc::new(Engine { inner }))
    })
    .await
}

#[uniffi::export]
impl Engine {
    pub fn info(&self) -> ModelInfo {
        let i = self.inner.info();
        ModelInfo {
            architecture: i.architecture.clone(),
            name: i.name.clone(),
            n_params: i.n_params,
            context_length: i.context_length as u32,
            train_context_length: i.train_context_length as u32,
            vocab_size: i.vocab_size as u32,
            file_size: i.file_size,
            kernels: i.kernels.to_owned(),
            threads: i.threads as u32,
            load_ms: i.load_ms,
        }
    }

    /// Tokens `text` takes as message content.
    pub fn count_tokens(&self, text: String) -> Result<u32, TernError> {
        Ok(self.inner.count_tokens(&text)? as u32)
    }

    /// A new conversation with its own KV cache.
    pub fn new_session(&self, options: SessionOptions) -> Result<Arc<Session>, TernError> {
        let session = tern::Session::new(Arc::clone(&self.inner), options.into())?;
        Ok(Arc::new(Session {
            engine: Arc::clone(&self.inner),
            cancel: session.cancel_handle(),
            inner: Arc::new(Mutex::new(session)),
            busy: Arc::new(AtomicBool::new(false)),
            current: Mutex::new(None),
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Session

/// A conversation over one engine. One request at a time: `send` while an answer is still
/// streaming fails with `TernError.Busy`.
#[derive(uniffi::Object)]
pub struct Session {
    engine: Arc<tern::Engine>,
    inner: Arc<Mutex<tern::Session>>,
    cancel: tern::CancelHandle,
    /// Set while a generation (or a reset) owns the session.
    busy: Arc<AtomicBool>,
    /// Cancellation flag of the latest stream.
    current: Mutex<Option<Arc<AtomicBool>>>,
}

/// Locks the session; after a panic in an earlier generation its state is forgotten.
fn lock_session(m: &Mutex<tern::Session>) -> MutexGuard<'_, tern::Session> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => {
            let mut g = poisoned.into_inner();
            m.clear_poison();
            g.reset();
            g
        }
    }
}

type Item = Result<TokenEvent, TernError>;

/// Clears the busy flag when dropped, also on unwinding.
struct BusyGuard(Arc<AtomicBool>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn generate(
    session: &Mutex<tern::Session>,
    text: &str,
    chan: &Chan<Item>,
    cancelled: &AtomicBool,
    cancel: &tern::CancelHandle,
) -> Option<Item> {
    let mut guard = lock_session(session);
    let generation = match guard.send(text) {
        Ok(g) => g,
        Err(e) => return Some(Err(e.into())),
    };
    // `send` clears the session's cancel flag: apply a cancel that came before it.
    if cancelled.load(Ordering::Acquire) {
        cancel.cancel();
    }
    for event in generation {
        match event {
            Ok(tern::Event::Token { text, ids }) => {
                if !chan.push(Ok(TokenEvent::Token { text, ids })) {
                    // Nobody listens any more: stop, keeping what was generated.
                    cancel.cancel();
                }
            }
            Ok(tern::Event::Done(stats)) => {
                return Some(Ok(TokenEvent::Done {
                    stats: stats.into(),
                }))
            }
            Err(e) => return Some(Err(e.into())),
        }
        if cancelled.load(Ordering::Acquire) || chan.receiver_gone() {
            cancel.cancel();
        }
    }
    None
}

#[uniffi::export]
impl Session {
    /// Sends a user message; the answer streams from the returned `TokenStream`, computed on a
    /// thread of its own.
    pub fn send(&self, text: String) -> Result<Arc<TokenStream>, TernError> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(TernError::Busy);
        }
        let busy = BusyGuard(Arc::clone(&self.busy));
        let chan: Arc<Chan<Item>> = Chan::new();
        let cancelled = Arc::new(AtomicBool::new(false));
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&cancelled));
        let stream = Arc::new(TokenStream {
            chan: Arc::clone(&chan),
            cancelled: Arc::clone(&cancelled),
            cancel: self.cancel.clone(),
        });
        let session = Arc::clone(&self.inner);
        let cancel = self.cancel.clone();
        std::thread::Builder::new()
            .name("tern-generate".into())
            .spawn(move || {
                let last = catch_unwind(AssertUnwindSafe(|| {
                    generate(&session, &text, &chan, &cancelled, &cancel)
                }))
                .unwrap_or_else(|_| Some(Err(panic_error("generation"))));
                // Free the session before the last event, so that a caller reacting to it can
                // send the next message at once.
                drop(busy);
                if let Some(item) = last {
                    chan.push(item);
                }
                chan.close();
            })
            .map_err(|e| TernError::Internal {
                detail: format!("cannot start a thread: {e}"),
            })?;
        Ok(stream)
    }

    /// Stops the answer in progress (it ends with a `Done` event whose reason is `Cancelled`).
    pub fn cancel(&self) {
        if let Some(flag) = &*self.current.lock().unwrap_or_else(|e| e.into_inner()) {
            flag.store(true, Ordering::Release);
        }
        self.cancel.cancel();
    }

    /// Forgets the conversation and the KV cache. Fails with `Busy` while generating.
    pub fn reset(&self) -> Result<(), TernError> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(TernError::Busy);
        }
        let _busy = BusyGuard(Arc::clone(&self.busy));
        lock_session(&self.inner).reset();
        Ok(())
    }

    /// Tokens `text` takes as message content.
    pub fn count_tokens(&self, text: String) -> Result<u32, TernError> {
        Ok(self.engine.count_tokens(&text)? as u32)
    }

    /// Whether an answer is being generated.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }
}

// ---------------------------------------------------------------------------------------------
// Token stream

/// The answer to one `send`, pulled event by event. Dropping it stops the generation.
#[derive(uniffi::Object)]
pub struct TokenStream {
    chan: Arc<Chan<Item>>,
    cancelled: Arc<AtomicBool>,
    cancel: tern::CancelHandle,
}

#[uniffi::export]
impl TokenStream {
    /// The next event; `null`/`nil` after `Done`. Errors of the generation are thrown here.
    pub async fn next(&self) -> Result<Option<TokenEvent>, TernError> {
        self.chan.recv().await.transpose()
    }

    /// Stops this answer (same as `Session.cancel` while it is the current one).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        if !self.chan.lock().closed {
            self.cancel.cancel();
        }
    }
}

impl Drop for TokenStream {
    fn drop(&mut self) {
        self.chan.drop_receiver();
    }
}
