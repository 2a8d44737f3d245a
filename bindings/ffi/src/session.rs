//! `Session` (one conversation) and `TokenStream` (one answer, pulled event by event).
//!
//! A `send` starts the generation on a thread of its own, which pushes events into a channel
//! that `TokenStream::next` awaits. The session is busy from `send` until that thread is done;
//! a second `send`, a `reset` or a `set_messages` meanwhile fails with `Busy` instead of waiting.
//!
//! Cancellation comes three ways, all ending the answer with `Done(Cancelled)` within one
//! decoding step: `Session::cancel`, `TokenStream::cancel`, and abandoning a `next()` call
//! before it returns (what a cancelled Kotlin coroutine does), or dropping the stream.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::channel::{run_blocking, Chan, OnAbandon};
use crate::error::TernError;
use crate::records::{ConversationMessage, FinishReason, Stats, TokenEvent};
use crate::structured::{Grammar, Tool, ToolChoice};
use crate::ui::{Screen, UiAction};

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
    messages: Vec<ConversationMessage>,
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
    observer: Arc<Mutex<Option<Arc<dyn SessionObserver>>>>,
}

/// Told when a session becomes busy (answering, or a step such as `prewarm`) and ready again,
/// for UI state: Kotlin's `Session.responding()` and Swift's `Session.respondingUpdates()` are
/// built on it. Called on the thread that changed the state, one call at a time; keep it
/// short, and do not call into the session from it.
#[uniffi::export(with_foreign)]
pub trait SessionObserver: Send + Sync {
    fn busy_changed(&self, busy: bool);
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
            observer: Arc::default(),
        })
    }

    fn claim(&self) -> Result<BusyGuard, TernError> {
        self.busy.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).map_err(|_| TernError::Busy)?;
        notify(&self.observer, &self.busy);
        Ok(BusyGuard { busy: Arc::clone(&self.busy), observer: Arc::clone(&self.observer) })
    }
}

/// Clears the busy flag when dropped, also on unwinding, and tells the observer.
struct BusyGuard {
    busy: Arc<AtomicBool>,
    observer: Arc<Mutex<Option<Arc<dyn SessionObserver>>>>,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.busy.store(false, Ordering::Release);
        notify(&self.observer, &self.busy);
    }
}

/// Tells the observer, if any, the state as it is now. The lock orders the calls, so the last
/// one always tells the current state (a call may repeat the one before).
fn notify(observer: &Mutex<Option<Arc<dyn SessionObserver>>>, busy: &AtomicBool) {
    let current = lock(observer);
    if let Some(o) = &*current {
        o.busy_changed(busy.load(Ordering::Acquire));
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
/// before the session is released to the next `send`, and a cancel that came after the SDK
/// ended the answer but before `finish` is withdrawn there.
struct Control {
    cancelled: AtomicBool,
    finished: Mutex<bool>,
    session_cancel: tern::CancelHandle,
}

impl Control {
    fn new(session_cancel: tern::CancelHandle) -> Control {
        Control { cancelled: AtomicBool::new(false), finished: Mutex::new(false), session_cancel }
    }

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
        let mut finished = lock(&self.finished);
        *finished = true;
        if self.is_cancelled() {
            self.session_cancel.withdraw();
        }
    }
}

#[uniffi::export]
impl Session {
    /// Sends a user message; the answer streams from the returned `TokenStream`, computed on a
    /// thread of its own. Fails with `Busy` while the previous answer is still generating.
    pub fn send(&self, text: String) -> Result<Arc<TokenStream>, TernError> {
        self.start(Request::Message(text))
    }

    /// Answers the tool call the last answer made (its `TokenEvent::ToolCall`) with the tool's
    /// result, and streams the model's next answer.
    pub fn send_tool_result(&self, result: String) -> Result<Arc<TokenStream>, TernError> {
        self.start(Request::ToolResult(result))
    }

    /// Answers the last answer's tool call like `send_tool_result`, but the model must answer
    /// in text this time: the last round of a bounded tool loop.
    pub fn send_last_tool_result(&self, result: String) -> Result<Arc<TokenStream>, TernError> {
        self.start(Request::LastToolResult(result))
    }

    /// Makes every later answer match `grammar`; none lifts it. The grammar is compiled for the
    /// model on a thread of its own (the first one also indexes the vocabulary, see
    /// `Engine::prepare_structured_output`); one that cannot be used raises `Grammar` and the
    /// previous setting stays. A session takes a grammar or tools, not both.
    pub async fn set_grammar(&self, grammar: Option<Grammar>) -> Result<(), TernError> {
        self.configure("grammar", move |s| s.set_grammar(grammar.map(tern::Grammar::from).as_ref())).await
    }

    /// Lets the model call `tools` in later answers (an empty list removes them): each answer is
    /// then text or one call that matches a tool's schema, reported as `TokenEvent::ToolCall`.
    /// Bad names or schemas raise `Grammar`, and the previous setting stays.
    pub async fn set_tools(&self, tools: Vec<Tool>, choice: ToolChoice) -> Result<(), TernError> {
        let tools: Vec<tern::Tool> = tools.into_iter().map(Into::into).collect();
        self.configure("tools", move |s| s.set_tools(&tools, choice.into())).await
    }

    /// Asks the model for the next action on `screen` towards `goal`: one turn of this session's
    /// conversation, constrained so that the action parses and names an element of that screen.
    /// The session's system prompt should be `ui_system_prompt()`; reset it between unrelated
    /// goals. Cancellable like an answer (`cancel()`, or cancelling the awaiting coroutine or
    /// Task): then `Cancelled`. An answer cut off by `max_tokens` raises `Constraint`.
    pub async fn next_action(&self, screen: Screen, goal: String) -> Result<UiAction, TernError> {
        let screen: tern::ui::Screen = screen.into();
        self.cancellable_step("ui-action", move |session, control, snapshot| {
            let text = tern::ui::user_message(&screen, &goal);
            let answer = matching_answer(session, text, tern::ui::action_grammar(&screen), control, snapshot)?;
            Ok(tern::ui::parse_action(&screen, &answer)?.into())
        })
        .await
    }

    /// Sends `text` and returns the answer: one JSON value, as compact JSON text, that matches
    /// `schema` (a JSON Schema as JSON text), for the caller to decode into its own type. The
    /// question and the answer join the conversation. A schema that cannot be used raises
    /// `Grammar` before anything is sent; an answer cut off by `max_tokens` raises `Constraint`.
    /// Cancellable like `next_action`.
    pub async fn generate_json(&self, text: String, schema: String) -> Result<String, TernError> {
        self.cancellable_step("typed-answer", move |session, control, snapshot| {
            matching_answer(session, text, tern::Grammar::JsonSchema(schema), control, snapshot)
        })
        .await
    }

    /// Prefills what the next message's prompt starts with (the system prompt, the tools'
    /// definitions and the conversation so far), so that the first answer starts sooner: call
    /// it after loading, while the user types. Returns the tokens now in the KV cache.
    /// Cancellable like `next_action`; fails with `Busy` while an answer is generating.
    pub async fn prewarm(&self) -> Result<u32, TernError> {
        self.cancellable_step("prewarm", |session, _, snapshot| {
            let cached = session.prewarm()? as u32;
            lock(snapshot).tokens_in_context = cached;
            Ok(cached)
        })
        .await
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
        let mut snap = lock(&self.snapshot);
        snap.tokens_in_context = 0;
        snap.messages.clear();
        Ok(())
    }

    /// The conversation so far, without the system prompt, as of the last finished answer (the
    /// question of an answer still generating is not in it yet).
    pub fn messages(&self) -> Vec<ConversationMessage> {
        lock(&self.snapshot).messages.clone()
    }

    /// Replaces the conversation, e.g. with one restored from storage, or with the conversation
    /// minus its last question and answer to ask that question again. The KV cache is kept: the
    /// next answer reuses the prefix that still matches and prefills only the rest. Fails with
    /// `Busy` while generating.
    pub fn set_messages(&self, messages: Vec<ConversationMessage>) -> Result<(), TernError> {
        let _busy = self.claim()?;
        lock_session(&self.inner).set_messages(messages.iter().cloned().map(Into::into).collect());
        // The KV cache stays as it is until the next request: `token_count` is unchanged.
        lock(&self.snapshot).messages = messages;
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

    /// Sets the one observer told of busy/ready changes (none removes it); it is told the
    /// current state at once. It must not call into this session.
    pub fn set_observer(&self, observer: Option<Arc<dyn SessionObserver>>) {
        *lock(&self.observer) = observer;
        notify(&self.observer, &self.busy);
    }
}

/// What an answer replies to.
enum Request {
    /// A user message.
    Message(String),
    /// The result of the tool call the last answer made.
    ToolResult(String),
    /// As `ToolResult`, with a text answer required.
    LastToolResult(String),
    /// A user message whose answer must match a grammar.
    Matching(String, tern::Grammar),
}

impl Session {
    /// A fresh control for the next answer, the one `cancel()` reaches from now on.
    fn new_control(&self) -> Arc<Control> {
        let control = Arc::new(Control::new(self.cancel.clone()));
        *lock(&self.current) = Some(Arc::clone(&control));
        control
    }

    /// Starts an answer on a thread of its own.
    fn start(&self, request: Request) -> Result<Arc<TokenStream>, TernError> {
        let busy = self.claim()?;
        let chan: Arc<Chan<Item>> = Chan::new();
        let control = self.new_control();
        let stream = Arc::new(TokenStream { chan: Arc::clone(&chan), control: Arc::clone(&control) });
        let session = Arc::clone(&self.inner);
        let snapshot = Arc::clone(&self.snapshot);
        std::thread::Builder::new()
            .name("tern-generate".into())
            .spawn(move || {
                let last = catch_unwind(AssertUnwindSafe(|| generate(&session, &request, &chan, &control, &snapshot)))
                    .unwrap_or_else(|_| Err(TernError::panicked("generation")));
                control.finish();
                // Free the session before the last event, so that a caller reacting to it can
                // send the next message at once.
                drop(busy);
                chan.push(last);
                chan.close();
            })
            .map_err(TernError::no_thread)?;
        Ok(stream)
    }

    /// Runs `step` on the SDK session on a thread of its own, cancellable like an answer:
    /// by `cancel()` or by abandoning the awaiting call.
    async fn cancellable_step<T: Send + 'static>(
        &self,
        what: &'static str,
        step: impl FnOnce(&mut tern::Session, &Control, &Mutex<Snapshot>) -> Result<T, TernError> + Send + 'static,
    ) -> Result<T, TernError> {
        let busy = self.claim()?;
        let control = self.new_control();
        let guard = OnAbandon::new(|| control.cancel());
        let (session, snapshot, c) = (Arc::clone(&self.inner), Arc::clone(&self.snapshot), Arc::clone(&control));
        let result = run_blocking(what, move || {
            let result = step(&mut lock_session(&session), &c, &snapshot);
            c.finish();
            drop(busy);
            result
        })
        .await;
        guard.disarm();
        result
    }

    /// Runs `change` on the SDK session on a thread of its own (grammars compile there), while
    /// no answer is generating.
    async fn configure(
        &self,
        what: &'static str,
        change: impl FnOnce(&mut tern::Session) -> tern::Result<()> + Send + 'static,
    ) -> Result<(), TernError> {
        let busy = self.claim()?;
        let session = Arc::clone(&self.inner);
        run_blocking(what, move || {
            let result = change(&mut lock_session(&session));
            drop(busy);
            Ok(result?)
        })
        .await
    }
}

/// Runs one answer to its end, pushing its events; returns the last item (`Done` or an error),
/// which the caller pushes once the session is free again.
fn generate(
    session: &Mutex<tern::Session>,
    request: &Request,
    chan: &Chan<Item>,
    control: &Control,
    snapshot: &Mutex<Snapshot>,
) -> Item {
    let mut guard = lock_session(session);
    let stats =
        run_answer(&mut guard, request, control, snapshot, |text, ids| chan.push(Ok(TokenEvent::Token { text, ids })))?;
    if let Some(call) = guard.tool_call() {
        chan.push(Ok(TokenEvent::ToolCall { call: call.clone().into() }));
    }
    Ok(TokenEvent::Done { stats })
}

/// The whole answer to `text` under `grammar`; an answer that ended early is an error.
fn matching_answer(
    session: &mut tern::Session,
    text: String,
    grammar: tern::Grammar,
    control: &Control,
    snapshot: &Mutex<Snapshot>,
) -> Result<String, TernError> {
    let mut answer = String::new();
    let stats = run_answer(session, &Request::Matching(text, grammar), control, snapshot, |text, _| {
        answer.push_str(&text);
        true
    })?;
    match stats.finish_reason {
        FinishReason::Cancelled => Err(TernError::Cancelled),
        FinishReason::MaxTokens | FinishReason::ContextFull => Err(TernError::Constraint {
            detail: "the answer ended before it was complete (max_tokens or the context)".into(),
        }),
        _ => Ok(answer),
    }
}

/// Sends `request` on the session and runs the answer to its end, handing each token to
/// `on_token` (false: nobody listens any more, so stop, keeping what was generated). The
/// answer's statistics, or its error.
fn run_answer(
    session: &mut tern::Session,
    request: &Request,
    control: &Control,
    snapshot: &Mutex<Snapshot>,
    mut on_token: impl FnMut(String, Vec<u32>) -> bool,
) -> Result<Stats, TernError> {
    let generation = match request {
        Request::Message(text) => session.send(text)?,
        Request::ToolResult(result) => session.send_tool_result(result)?,
        Request::LastToolResult(result) => session.send_last_tool_result(result)?,
        Request::Matching(text, grammar) => session.send_matching(text, grammar)?,
    };
    // `send` lowers the session's cancel flag: apply a cancel that came before it.
    if control.is_cancelled() {
        control.session_cancel.cancel();
    }
    let mut done = None;
    let mut error = None;
    for event in generation {
        match event {
            Ok(tern::Event::Token { text, ids }) => {
                if !on_token(text, ids) {
                    control.session_cancel.cancel();
                }
            }
            Ok(tern::Event::Done(stats)) => done = Some(Stats::from(stats)),
            Err(e) => error = Some(e),
        }
    }
    let mut snap = lock(snapshot);
    snap.tokens_in_context = session.tokens_in_context() as u32;
    snap.messages = session.messages().iter().cloned().map(Into::into).collect();
    if let Some(stats) = &done {
        snap.last_stats = Some(stats.clone());
    }
    match (error, done) {
        (Some(e), _) => Err(e.into()),
        (None, Some(stats)) => Ok(stats),
        (None, None) => Err(TernError::Internal { detail: "the answer ended without statistics".into() }),
    }
}

/// The answer to one `send`. Dropping it (or closing it) stops the generation.
#[derive(uniffi::Object)]
pub struct TokenStream {
    chan: Arc<Chan<Item>>,
    control: Arc<Control>,
}

#[uniffi::export]
impl TokenStream {
    /// The next event; `null`/`nil` after `Done`. Errors of the generation are thrown here.
    /// Abandoning the call (cancelling the coroutine awaiting it) cancels the answer.
    pub async fn next(&self) -> Result<Option<TokenEvent>, TernError> {
        let guard = OnAbandon::new(|| self.control.cancel());
        let item = self.chan.recv().await;
        guard.disarm();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> std::path::PathBuf {
        let dir = std::env::var_os("TERN_MODEL_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/tern/models")
        });
        dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")
    }

    /// The generation thread has a window between the SDK ending the answer and `finish`; a
    /// cancel made there (driven here step by step) ends nothing, and must not end the next.
    #[test]
    fn a_cancel_as_an_answer_ends_does_not_reach_the_next() {
        let engine = tern::Engine::load(model(), tern::EngineOptions { threads: Some(1), ..Default::default() })
            .expect("the SmolLM2 model (cargo xtask models)");
        let opts = tern::SessionOptions {
            sampling: Some(tern::SamplingOptions::greedy()),
            max_tokens: 3,
            ignore_eos: true,
            ..Default::default()
        };
        let mut session = tern::Session::new(engine, opts).unwrap();
        let snapshot = Mutex::new(Snapshot::default());
        let first = Control::new(session.cancel_handle());
        let stats = run_answer(&mut session, &Request::Message("Hi".into()), &first, &snapshot, |_, _| true).unwrap();
        assert_eq!(stats.finish_reason, FinishReason::MaxTokens);
        first.cancel();
        first.finish();
        let next = Control::new(session.cancel_handle());
        let stats =
            run_answer(&mut session, &Request::Message("Hi again".into()), &next, &snapshot, |_, _| true).unwrap();
        assert_eq!(stats.finish_reason, FinishReason::MaxTokens, "the old answer's cancel reached the next one");
        assert_eq!(stats.generated_tokens, 3);
    }
}
