//! `Session` (one conversation) and `TokenStream` (one answer, pulled event by event).
//!
//! A `send` starts the generation on a thread of its own, which pushes events into a channel
//! that `TokenStream::next` awaits. The session is busy from `send` until that thread is done;
//! a second `send` or a `reset` meanwhile fails with `Busy` instead of waiting.
//!
//! Cancellation comes three ways, all ending the answer with `Done(Cancelled)` within one
//! decoding step: `Session::cancel`, `TokenStream::cancel`, and abandoning a `next()` call
//! before it returns (what a cancelled Kotlin coroutine does), or dropping the stream.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::channel::Chan;
use crate::error::TernError;
use crate::records::{Stats, TokenEvent};

type Item = Result<TokenEvent, TernError>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain values live behind these locks: a panic cannot leave them half-updated.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What callers may read while a generation holds the session.
#[derive(Default)]
struct Snapshot {
    tokens_in_context: u32,
    last_stats: Option<Stats>,
}

#[derive(uniffi::Object)]
pub struct Session {
    engine: Arc<tern::Engine>,
    inner: Arc<Mutex<tern::Session>>,
    cancel: tern::CancelHandle,
    context_length: u32,
    /// Set while a generation (or a reset) owns the session.
    busy: Arc<AtomicBool>,
    /// The latest answer's control, for `Session::cancel`.
    current: Mutex<Option<Arc<Control>>>,
    snapshot: Arc<Mutex<Snapshot>>,
}

impl Session {
    pub(crate) fn new(engine: Arc<tern::Engine>, options: tern::SessionOptions) -> Result<Session, TernError> {
        let session = tern::Session::new(Arc::clone(&engine), options)?;
        Ok(Session {
            engine,
            cancel: session.cancel_handle(),
            context_length: session.context_length() as u32,
            inner: Arc::new(Mutex::new(session)),
            busy: Arc::new(AtomicBool::new(false)),
            current: Mutex::new(None),
            snapshot: Arc::default(),
        })
    }

    fn claim(&self) -> Result<BusyGuard, TernError> {
        self.busy.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).map_err(|_| TernError::Busy)?;
        Ok(BusyGuard(Arc::clone(&self.busy)))
    }
}

/// Clears the busy flag when dropped, also on unwinding.
struct BusyGuard(Arc<AtomicBool>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Locks the SDK session; after a panic in an earlier generation its state is forgotten.
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

/// Cancellation of one answer. The session's cancel flag is shared by all its answers, so it
/// is raised only while this answer is still running: `finished` is set (under the lock)
/// before the session is released to the next `send`.
struct Control {
    cancelled: AtomicBool,
    finished: Mutex<bool>,
    session_cancel: tern::CancelHandle,
}

impl Control {
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        let finished = lock(&self.finished);
        if !*finished {
            self.session_cancel.cancel();
        }
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    fn finish(&self) {
        *lock(&self.finished) = true;
    }
}

#[uniffi::export]
impl Session {
    /// Sends a user message; the answer streams from the returned `TokenStream`, computed on a
    /// thread of its own. Fails with `Busy` while the previous answer is still generating.
    pub fn send(&self, text: String) -> Result<Arc<TokenStream>, TernError> {
        let busy = self.claim()?;
        let chan: Arc<Chan<Item>> = Chan::new();
        let control = Arc::new(Control {
            cancelled: AtomicBool::new(false),
            finished: Mutex::new(false),
            session_cancel: self.cancel.clone(),
        });
        *lock(&self.current) = Some(Arc::clone(&control));
        let stream = Arc::new(TokenStream { chan: Arc::clone(&chan), control: Arc::clone(&control) });
        let session = Arc::clone(&self.inner);
        let snapshot = Arc::clone(&self.snapshot);
        std::thread::Builder::new()
            .name("tern-generate".into())
            .spawn(move || {
                let last = catch_unwind(AssertUnwindSafe(|| generate(&session, &text, &chan, &control, &snapshot)))
                    .unwrap_or_else(|_| Some(Err(TernError::panicked("generation"))));
                control.finish();
                // Free the session before the last event, so that a caller reacting to it can
                // send the next message at once.
                drop(busy);
                if let Some(item) = last {
                    chan.push(item);
                }
                chan.close();
            })
            .map_err(TernError::no_thread)?;
        Ok(stream)
    }

    /// Stops the answer in progress (it ends with a `Done` event whose reason is `Cancelled`).
    pub fn cancel(&self) {
        if let Some(control) = &*lock(&self.current) {
            control.cancel();
        }
    }

    /// Forgets the conversation and the KV cache. Fails with `Busy` while generating.
    pub fn reset(&self) -> Result<(), TernError> {
        let _busy = self.claim()?;
        lock_session(&self.inner).reset();
        lock(&self.snapshot).tokens_in_context = 0;
        Ok(())
    }

    /// Tokens held in the KV cache (the conversation so far), as of the last finished answer.
    pub fn token_count(&self) -> u32 {
        lock(&self.snapshot).tokens_in_context
    }

    /// Most tokens the KV cache holds: the conversation and the next answer must fit in it.
    pub fn context_length(&self) -> u32 {
        self.context_length
    }

    /// Statistics of the last finished answer.
    pub fn last_stats(&self) -> Option<Stats> {
        lock(&self.snapshot).last_stats.clone()
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

/// Runs one answer to its end, pushing token events; returns the last item (`Done` or an
/// error), which the caller pushes once the session is free again.
fn generate(
    session: &Mutex<tern::Session>,
    text: &str,
    chan: &Chan<Item>,
    control: &Control,
    snapshot: &Mutex<Snapshot>,
) -> Option<Item> {
    let mut guard = lock_session(session);
    let generation = match guard.send(text) {
        Ok(g) => g,
        Err(e) => return Some(Err(e.into())),
    };
    // `send` lowers the session's cancel flag: apply a cancel that came before it.
    if control.is_cancelled() {
        control.session_cancel.cancel();
    }
    let mut last = None;
    for event in generation {
        match event {
            Ok(tern::Event::Token { text, ids }) => {
                if !chan.push(Ok(TokenEvent::Token { text, ids })) {
                    // Nobody listens any more: stop, keeping what was generated.
                    control.session_cancel.cancel();
                }
            }
            Ok(tern::Event::Done(stats)) => {
                let stats = Stats::from(stats);
                lock(snapshot).last_stats = Some(stats.clone());
                last = Some(Ok(TokenEvent::Done { stats }));
            }
            Err(e) => last = Some(Err(e.into())),
        }
    }
    lock(snapshot).tokens_in_context = guard.tokens_in_context() as u32;
    last
}

/// The answer to one `send`. Dropping it (or closing it) stops the generation.
#[derive(uniffi::Object)]
pub struct TokenStream {
    chan: Arc<Chan<Item>>,
    control: Arc<Control>,
}

/// Cancels the answer if a `next()` call is abandoned before it returns.
struct CancelUnlessDone<'a> {
    control: &'a Control,
    done: bool,
}

impl Drop for CancelUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.control.cancel();
        }
    }
}

#[uniffi::export]
impl TokenStream {
    /// The next event; `null`/`nil` after `Done`. Errors of the generation are thrown here.
    /// Abandoning the call (cancelling the coroutine awaiting it) cancels the answer.
    pub async fn next(&self) -> Result<Option<TokenEvent>, TernError> {
        let mut guard = CancelUnlessDone { control: &self.control, done: false };
        let item = self.chan.recv().await;
        guard.done = true;
        item.transpose()
    }

    /// Stops this answer: the stream ends with `Done(Cancelled)` after at most one more token.
    pub fn cancel(&self) {
        self.control.cancel();
    }
}

impl Drop for TokenStream {
    fn drop(&mut self) {
        self.chan.drop_receiver();
        if !self.chan.is_closed() {
            self.control.cancel();
        }
    }
}
