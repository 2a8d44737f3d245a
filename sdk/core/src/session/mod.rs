//! Sessions: a conversation (or raw completion) over one engine, with its own KV cache.
//!
//! A request renders the whole conversation with the chat template, tokenizes it, and keeps
//! the longest prefix already in the KV cache, so a second turn prefills only what is new. The
//! answer streams as [`Event`]s from a [`Generation`] iterator; a [`CancelHandle`] stops it from
//! any thread.

mod overflow;
mod phase;
mod speculate;
mod stop;
mod tool_loop;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chat::{contents, Message, Role};
use crate::constrain::{CompiledGrammar, Grammar, TokenConstraint};
use crate::energy::{EnergyStats, Phase};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::{KvCache, Logits, Scratch};
use crate::sampling::{Sampler, SamplingOptions};
use crate::speculative::{HistoryScope, SpeculationOptions, SpeculationStats};
use crate::tools::{self, CallDetector, Tool, ToolCall, ToolChoice, ToolSet};
pub use overflow::OverflowPolicy;
use phase::PhaseTracker;
#[cfg(feature = "lab")]
pub use speculate::calibrated_drafter;
use speculate::Speculator;
use stop::StopMatcher;
pub use tool_loop::ToolLoopAnswer;

/// Tokens per forward pass while prefilling.
const PREFILL_CHUNK: usize = 128;

#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// System message placed before the conversation (the template's default if None).
    pub system_prompt: Option<String>,
    /// How tokens are chosen; none = as the model recommends ([`crate::ModelInfo::sampling`]).
    /// [`SamplingOptions::greedy`] gives reproducible answers.
    pub sampling: Option<SamplingOptions>,
    /// Most tokens one answer may have.
    pub max_tokens: usize,
    /// Generation stops when the text contains any of these; the stop text is not emitted.
    pub stop: Vec<String>,
    /// KV cache length of this session (default: the engine's).
    pub context_length: Option<usize>,
    /// Keep generating past end-of-generation tokens (benchmarks).
    pub ignore_eos: bool,
    /// Speculative decoding: drafts from the context verified several tokens per pass
    /// (automatic by default; see `docs/speculative.md`).
    pub speculation: SpeculationOptions,
    /// Let control-token text inside message contents (`<|im_end|>`, `<start_of_turn>`, ...)
    /// become control tokens. Off by default: only the template's own markup is parsed, and a
    /// pasted or received text that spells a control token stays text, so it cannot end a turn
    /// or open a system one. Turn it on only for contents the app writes itself and means as
    /// markup.
    pub control_tokens_in_messages: bool,
    /// What a chat request does when the conversation outgrows the context: refuse it
    /// (default) or drop the oldest turns.
    pub overflow: OverflowPolicy,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            system_prompt: None,
            sampling: None,
            max_tokens: 512,
            stop: Vec::new(),
            context_length: None,
            ignore_eos: false,
            speculation: SpeculationOptions::default(),
            control_tokens_in_messages: false,
            overflow: OverflowPolicy::Error,
        }
    }
}

impl SessionOptions {
    pub fn validate(&self) -> Result<()> {
        if let Some(sampling) = &self.sampling {
            sampling.validate()?;
        }
        if self.max_tokens == 0 {
            return Err(Error::InvalidOption("max_tokens must be at least 1".into()));
        }
        if self.stop.iter().any(|s| s.is_empty()) {
            return Err(Error::InvalidOption("stop sequences must not be empty".into()));
        }
        if self.context_length == Some(0) {
            return Err(Error::InvalidOption("context_length must be positive".into()));
        }
        self.speculation.validate()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token, or the answer's grammar is complete.
    EndOfGeneration,
    /// A stop sequence appeared in the text.
    StopSequence,
    MaxTokens,
    Cancelled,
    /// The KV cache is full.
    ContextFull,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Tokens of the prompt of this request (the whole rendered conversation).
    pub prompt_tokens: usize,
    /// Of those, how many were already in the KV cache and not computed again.
    pub cached_tokens: usize,
    /// The oldest messages this request left out of the conversation to fit the context
    /// ([`OverflowPolicy::DropOldestTurns`]); 0 otherwise.
    pub dropped_messages: usize,
    pub generated_tokens: usize,
    pub time_to_first_token: Duration,
    pub prefill_time: Duration,
    pub decode_time: Duration,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub finish_reason: FinishReason,
    /// Verification steps, drafted and accepted tokens (all zero with speculation off; boxed
    /// like `energy`).
    pub speculation: Box<SpeculationStats>,
    /// Time the grammar constraint took (token masks and following tokens); zero without one.
    pub constraint_time: Duration,
    /// Energy, CPU time and core selection of each phase (boxed: it is large, events are not).
    pub energy: Box<EnergyStats>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// New text (possibly empty while a stop sequence or a UTF-8 sequence is pending) and the
    /// token ids it came from.
    Token {
        text: String,
        ids: Vec<u32>,
    },
    Done(Stats),
}

/// Stops a session's request from any thread.
#[derive(Debug, Clone)]
pub struct CancelHandle(Arc<AtomicBool>);

impl CancelHandle {
    /// Cancels the request in flight, or, when none is, the session's next one: a cancel made
    /// just before `send` is not lost, that request ends at once with
    /// [`FinishReason::Cancelled`] and nothing generated. Each cancel is used up by the one
    /// request it ends (or that ends while it is pending), so it never reaches a later one.
    /// Prefill stops between layers, decode between tokens: well within 200 ms on the models
    /// tested (`examples/cancel_latency.rs`).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Takes back a cancel no request has used up yet, so the next request runs: for a caller
    /// whose cancel means "this request" and who learns it came after the request had ended.
    pub fn withdraw(&self) {
        self.0.store(false, Ordering::Release);
    }
}

pub struct Session {
    engine: Arc<Engine>,
    opts: SessionOptions,
    kv: KvCache,
    scratch: Scratch,
    /// Token ids whose keys and values are in `kv`, in order.
    cached: Vec<u32>,
    messages: Vec<Message>,
    sampler: Sampler,
    cancel: Arc<AtomicBool>,
    /// Drafting and acceptance state, when speculation is on.
    spec: Option<Speculator>,
    /// Grammar every answer follows (`set_grammar`).
    grammar: Option<CompiledGrammar>,
    /// Tools the model may call in chat answers (`set_tools`).
    tools: Option<ToolSet>,
    /// The call the last answer made.
    tool_call: Option<ToolCall>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("cached_tokens", &self.cached.len())
            .field("messages", &self.messages.len())
            .finish()
    }
}

impl Session {
    pub fn new(engine: Arc<Engine>, mut opts: SessionOptions) -> Result<Session> {
        opts.validate()?;
        // Resolved here, so `options()` says what the session samples with.
        let sampling = opts.sampling.get_or_insert_with(|| engine.info().sampling.clone());
        let capacity = match opts.context_length {
            Some(n) => n.min(engine.info().train_context_length),
            None => engine.info().context_length,
        };
        let kv = engine.model().new_kv_cache(capacity);
        let sampler = Sampler::new(sampling.clone())?;
        let spec = Speculator::new(&opts.speculation, engine.acceptance_model());
        log::info!("session opened: context {capacity} tokens, at most {} tokens per answer", opts.max_tokens);
        Ok(Session {
            engine,
            opts,
            kv,
            scratch: Scratch::default(),
            cached: Vec::new(),
            messages: Vec::new(),
            sampler,
            cancel: Arc::new(AtomicBool::new(false)),
            spec,
            grammar: None,
            tools: None,
            tool_call: None,
        })
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn options(&self) -> &SessionOptions {
        &self.opts
    }

    /// Replaces the sampling options for later requests.
    pub fn set_sampling(&mut self, sampling: SamplingOptions) -> Result<()> {
        self.sampler = Sampler::new(sampling.clone())?;
        self.opts.sampling = Some(sampling);
        Ok(())
    }

    /// Replaces the speculation options for later requests (the acceptance model learned so
    /// far is kept while speculation stays on).
    pub fn set_speculation(&mut self, speculation: SpeculationOptions) -> Result<()> {
        speculation.validate()?;
        match (&mut self.spec, speculation.is_on()) {
            (Some(spec), true) => spec.reconfigure(&speculation),
            (_, on) => {
                self.spec = if on { Speculator::new(&speculation, self.engine.acceptance_model()) } else { None }
            }
        }
        self.opts.speculation = speculation;
        Ok(())
    }

    /// Makes every later answer match `grammar` (`None` lifts it). A grammar that cannot be used
    /// is an [`Error::Grammar`] here, and the previous setting stays.
    pub fn set_grammar(&mut self, grammar: Option<&Grammar>) -> Result<()> {
        if grammar.is_some() && self.tools.is_some() {
            return Err(Error::InvalidOption("a session takes a grammar or tools, not both".into()));
        }
        self.grammar = grammar.map(|g| self.engine.compile_grammar(g)).transpose()?;
        Ok(())
    }

    /// Lets the model call `tools` in later chat answers (an empty list removes them). Bad names
    /// or schemas are an [`Error::Grammar`] here, and the previous setting stays.
    pub fn set_tools(&mut self, tools: &[Tool], choice: ToolChoice) -> Result<()> {
        if !tools.is_empty() && self.grammar.is_some() {
            return Err(Error::InvalidOption("a session takes a grammar or tools, not both".into()));
        }
        self.tools = if tools.is_empty() { None } else { Some(ToolSet::new(&self.engine, tools, choice)?) };
        Ok(())
    }

    /// The tool call the last answer made, if it made one (its text was not streamed).
    pub fn tool_call(&self) -> Option<&ToolCall> {
        self.tool_call.as_ref()
    }

    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle(Arc::clone(&self.cancel))
    }

    /// The conversation so far (without the system prompt).
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Replaces the conversation (e.g. one restored from storage). The KV cache keeps whatever
    /// prefix still matches the next request.
    pub fn set_messages(&mut self, messages: Vec<Message>) {
        self.messages = messages;
    }

    /// Tokens held in the KV cache.
    pub fn tokens_in_context(&self) -> usize {
        self.cached.len()
    }

    pub fn context_length(&self) -> usize {
        self.kv.capacity()
    }

    /// Forgets the conversation and the KV cache.
    pub fn reset(&mut self) {
        self.messages.clear();
        self.cached.clear();
        self.kv.clear();
    }

    /// Sends a user message; the answer streams from the returned generation and joins the
    /// conversation when it ends (also when cancelled, with what was generated until then).
    pub fn send(&mut self, user_text: &str) -> Result<Generation<'_>> {
        self.send_message(Message { role: Role::User, content: user_text.to_owned() }, None)
    }

    /// Answers the last answer's [`tool_call`](Self::tool_call) with its result (a tool message)
    /// and generates the model's next answer.
    pub fn send_tool_result(&mut self, content: &str) -> Result<Generation<'_>> {
        self.send_message(Message { role: Role::Tool, content: content.to_owned() }, None)
    }

    /// Sends a user message whose answer must match `grammar`: this answer only, with the
    /// session's own grammar and tools set aside for it (their definitions stay in the prompt).
    /// A grammar that cannot be used is an [`Error::Grammar`] here, and nothing is sent.
    pub fn send_matching(&mut self, user_text: &str, grammar: &Grammar) -> Result<Generation<'_>> {
        self.send_message(Message { role: Role::User, content: user_text.to_owned() }, Some(grammar))
    }

    /// Answers the last answer's tool call like [`Self::send_tool_result`], but the model must
    /// answer in text this time: the last round of a bounded tool loop.
    pub fn send_last_tool_result(&mut self, content: &str) -> Result<Generation<'_>> {
        let text_only = self.tools.as_ref().map(|_| tools::text_answer_grammar());
        self.send_message(Message { role: Role::Tool, content: content.to_owned() }, text_only.as_ref())
    }

    /// Sends `message`, its answer under `grammar` if given (compiled first: a grammar that
    /// cannot be used refuses the request before anything changes).
    fn send_message(&mut self, message: Message, grammar: Option<&Grammar>) -> Result<Generation<'_>> {
        let own = grammar.map(|g| self.engine.compile_grammar(g)).transpose()?;
        let (ids, dropped) = self.fitting_prompt(&message)?;
        self.start(ids, Some((message, dropped)), own.as_ref().map(CompiledGrammar::start))
    }

    /// The token ids sending `message` now would prefill: the whole conversation rendered by the
    /// chat template, its markup with special tokens parsed and message contents as text (unless
    /// [`SessionOptions::control_tokens_in_messages`]).
    pub fn prompt_ids(&self, message: &Message) -> Result<Vec<u32>> {
        self.prompt_ids_after(0, message)
    }

    /// As [`Self::prompt_ids`], leaving out the first `skip` messages of the conversation.
    fn prompt_ids_after(&self, skip: usize, message: &Message) -> Result<Vec<u32>> {
        let kept = self.messages.get(skip..).unwrap_or_default();
        let mut conversation = Vec::with_capacity(kept.len() + 2);
        if let Some(sys) = &self.opts.system_prompt {
            conversation.push(Message { role: Role::System, content: sys.clone() });
        }
        conversation.extend(kept.iter().cloned());
        conversation.push(message.clone());
        self.chat_prompt(&conversation)
    }

    fn chat_prompt(&self, conversation: &[Message]) -> Result<Vec<u32>> {
        let template = self.engine.chat_template();
        let render = |messages: &[Message]| match &self.tools {
            Some(tools) => tools.render(template, messages),
            None => template.render(messages, true),
        };
        let rendered = render(conversation)?;
        let tok = self.engine.tokenizer();
        // Templates that print the BOS text themselves must not get a second one.
        let bos_text = template.bos_token();
        let add_bos = tok.add_bos_default() && (bos_text.is_empty() || !rendered.starts_with(bos_text));
        let guarded = |m: &Message| tok.contains_control_text(&m.content);
        if self.opts.control_tokens_in_messages || !conversation.iter().any(guarded) {
            return tok.encode(&rendered, add_bos, true);
        }
        // Where the template put the contents that spell control tokens: those stay text.
        let (probe, _) = contents::with_placeholders(conversation, guarded);
        let skeleton = render(&probe)?;
        let plain = contents::content_ranges(&rendered, &skeleton, conversation).ok_or_else(|| {
            Error::Template(
                "a message spells a control token and the template changes it, so it cannot be kept as text".into(),
            )
        })?;
        tok.encode_with_plain_ranges(&rendered, add_bos, &plain)
    }

    /// Prefills what the next user message's prompt starts with (the system prompt, the
    /// tools' definitions and the conversation so far), so that the first answer starts
    /// sooner: call it after loading, while the app waits for the user. Returns the tokens
    /// now cached. Cancelled through the cancel handle, it ends with [`Error::Cancelled`] and
    /// keeps what was computed.
    pub fn prewarm(&mut self) -> Result<usize> {
        // The part of the prompt no user message changes: where two different ones part.
        let a = self.prompt_ids(&Message::user("a"))?;
        let b = self.prompt_ids(&Message::user("b"))?;
        let prefix = &a[..a.iter().zip(&b).take_while(|(x, y)| x == y).count()];
        let keep = self.reusable_prefix(prefix, prefix.len());
        self.cached.truncate(keep);
        self.kv.truncate(keep);
        self.check_fits(prefix.len())?;
        let result = self.prefill_plain(&prefix[keep..]);
        self.kv.checkpoint();
        self.cancel.store(false, Ordering::Release);
        result.map(|()| self.cached.len())
    }

    /// Feeds `tokens` after the cache in prefill chunks, without logits, recording each chunk
    /// in `cached` once it is in.
    fn prefill_plain(&mut self, tokens: &[u32]) -> Result<()> {
        for chunk in tokens.chunks(PREFILL_CHUNK) {
            let model = self.engine.model();
            model.forward_unless(
                self.engine.pool(),
                &mut self.kv,
                &mut self.scratch,
                chunk,
                Logits::None,
                &self.cancel,
            )?;
            self.cached.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Continues raw text (no chat template; special-token text is not parsed).
    pub fn complete(&mut self, text: &str) -> Result<Generation<'_>> {
        let tok = self.engine.tokenizer();
        let ids = tok.encode(text, tok.add_bos_default(), false)?;
        self.complete_ids(&ids)
    }

    /// Continues a sequence of token ids.
    pub fn complete_ids(&mut self, ids: &[u32]) -> Result<Generation<'_>> {
        if ids.is_empty() {
            return Err(Error::InvalidOption("the prompt is empty".into()));
        }
        let vocab = self.engine.info().vocab_size;
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::InvalidOption(format!("token id {bad} is outside the vocabulary ({vocab})")));
        }
        self.check_fits(ids.len())?;
        self.start(ids.to_vec(), None, None)
    }

    /// How much of the cache `prompt` can keep, at most `limit` tokens: the common prefix, or
    /// less in a cache with state layers, which can only go back to a saved length.
    fn reusable_prefix(&self, prompt: &[u32], limit: usize) -> usize {
        let common = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        self.kv.rollback_len(common.min(limit).min(self.cached.len()))
    }

    fn check_fits(&self, prompt_len: usize) -> Result<()> {
        // The prompt plus at least one generated token must fit.
        if prompt_len + 1 > self.kv.capacity() {
            return Err(Error::ContextOverflow { needed: prompt_len + 1, limit: self.kv.capacity() });
        }
        Ok(())
    }

    /// Starts a request: `message` (chat) joins the conversation, and the oldest messages its
    /// prompt leaves out leave it, only once nothing can refuse the request any more, so a
    /// refused request leaves the session as it was. `grammar` is this answer's own constraint.
    fn start(
        &mut self,
        prompt: Vec<u32>,
        message: Option<(Message, usize)>,
        grammar: Option<TokenConstraint>,
    ) -> Result<Generation<'_>> {
        // Reuse the longest cached prefix, but always recompute the last prompt token: its
        // logits are what the first answer token is sampled from.
        let keep = self.reusable_prefix(&prompt, prompt.len() - 1);
        if let Some(spec) = &mut self.spec {
            spec.begin(&self.engine, &prompt, keep)?;
        }
        self.cached.truncate(keep);
        self.kv.truncate(keep);
        let chat = message.is_some();
        let mut dropped_messages = 0;
        if let Some((message, dropped)) = message {
            self.messages.drain(..dropped);
            self.messages.push(message);
            dropped_messages = dropped;
        }
        let stop = StopMatcher::new(self.opts.stop.clone());
        // Each answer follows its grammar from the start: its own, else tools in chat, else the
        // session's grammar.
        self.tool_call = None;
        let tools = self.tools.as_ref().filter(|_| chat && grammar.is_none());
        let constraint = match (grammar, tools) {
            (Some(own), _) => Some(own),
            (None, Some(t)) => Some(t.start()),
            (None, None) => self.grammar.as_ref().map(CompiledGrammar::start),
        };
        self.sampler.set_constraint(constraint);
        let calls = tools.map(|_| CallDetector::default());
        let history = self.spec.as_ref().and_then(|s| s.opts.history.clone());
        Ok(Generation {
            prompt_tokens: prompt.len(),
            cached_tokens: keep,
            dropped_messages,
            prompt,
            chat,
            session: self,
            state: State::Prefill,
            started: Instant::now(),
            ttft: Duration::ZERO,
            prefill_time: Duration::ZERO,
            decode_time: Duration::ZERO,
            decode_steps: 0,
            generated: Vec::new(),
            answer: String::new(),
            stop,
            decoder_pending: Vec::new(),
            pending_finish: None,
            spec_stats: SpeculationStats::default(),
            spec_absorbed: 0,
            history,
            calls,
            energy: PhaseTracker::default(),
        })
    }
}

enum State {
    Prefill,
    /// `next` is sampled but not yet fed to the model.
    Decode {
        next: u32,
    },
    Finished,
}

/// A streaming answer. Iterating drives the model; dropping it stops generation (the session
/// keeps what was computed).
pub struct Generation<'a> {
    session: &'a mut Session,
    prompt: Vec<u32>,
    chat: bool,
    state: State,
    prompt_tokens: usize,
    cached_tokens: usize,
    dropped_messages: usize,
    started: Instant,
    ttft: Duration,
    prefill_time: Duration,
    decode_time: Duration,
    /// Tokens chosen by decode passes (one per pass without speculation).
    decode_steps: usize,
    generated: Vec<u32>,
    answer: String,
    stop: StopMatcher,
    /// Generated ids whose text the detokenizer has not completed yet.
    decoder_pending: Vec<u32>,
    /// The end decided after the last token event, reported by the next call.
    pending_finish: Option<FinishReason>,
    spec_stats: SpeculationStats,
    /// Generated tokens the drafter has indexed.
    spec_absorbed: usize,
    /// Where the finished answer is recorded; held here because an answer can end inside a
    /// verification step, while the session's speculator is taken out.
    history: Option<HistoryScope>,
    /// Present when tools are on: keeps a call's text out of the stream.
    calls: Option<CallDetector>,
    /// Core selection and energy per phase.
    energy: PhaseTracker,
}

impl Generation<'_> {
    /// The token ids of this request's prompt (the whole rendered conversation).
    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    /// Runs the answer to its end: its whole text and its statistics.
    pub fn text_and_stats(self) -> Result<(String, Stats)> {
        let mut text = String::new();
        for event in self {
            match event? {
                Event::Token { text: piece, .. } => text.push_str(&piece),
                Event::Done(stats) => return Ok((text, stats)),
            }
        }
        // Unreachable: every answer ends with `Done` or an error.
        Err(Error::Cancelled)
    }

    fn cancelled(&self) -> bool {
        self.session.cancel.load(Ordering::Acquire)
    }

    /// Feeds `tokens` to the model after what is cached; logits of the last one are ready after.
    /// A pass stops between layers when the request is cancelled ([`Error::Cancelled`]; the
    /// cache then holds what it held before the pass).
    fn feed(&mut self, tokens: &[u32], want: Logits) -> Result<()> {
        let s = &mut *self.session;
        s.engine.model().forward_unless(s.engine.pool(), &mut s.kv, &mut s.scratch, tokens, want, &s.cancel)?;
        s.cached.extend_from_slice(tokens);
        Ok(())
    }

    fn prefill(&mut self) -> Result<Option<FinishReason>> {
        self.energy.enter(&self.session.engine, Phase::Prefill);
        let t0 = Instant::now();
        let todo = self.prompt[self.cached_tokens..].to_vec();
        let calibrate_from = self.session.spec.as_ref().and_then(|s| s.calibration_from(self.prompt.len()));
        // Positions calibrated in this prefill: from the later of `from` and what is cached.
        if calibrate_from.is_some_and(|from| from.max(self.cached_tokens) + 1 < self.prompt.len()) {
            let s = &mut *self.session;
            if let Some(spec) = &mut s.spec {
                spec.prepare_calibration(&s.engine, &self.prompt);
            }
        }
        let mut pos = self.cached_tokens;
        let mut cancelled = false;
        while pos < self.prompt.len() {
            if self.cancelled() {
                cancelled = true;
                break;
            }
            // Passes over positions to calibrate keep every row's input to the LM head.
            let (len, calibrate) = match calibrate_from {
                Some(from) if pos >= from => (PREFILL_CHUNK, true),
                Some(from) => (PREFILL_CHUNK.min(from - pos), false),
                None => (PREFILL_CHUNK, false),
            };
            let chunk = &todo[pos - self.cached_tokens..(pos + len).min(self.prompt.len()) - self.cached_tokens];
            let last = pos + chunk.len() == self.prompt.len();
            let want = if calibrate {
                Logits::Hidden { last }
            } else if last {
                Logits::Last
            } else {
                Logits::None
            };
            match self.feed(chunk, want) {
                Err(Error::Cancelled) => {
                    cancelled = true;
                    break;
                }
                other => other?,
            }
            if calibrate {
                let s = &mut *self.session;
                if let Some(spec) = &mut s.spec {
                    self.spec_stats.calibrated_positions += spec.calibrate(&s.engine, &s.scratch, pos, &self.prompt);
                }
            }
            pos += chunk.len();
        }
        if let Some(spec) = &mut self.session.spec {
            spec.end_calibration();
        }
        // A turn boundary: a later prompt that shares this one reuses the state up to here.
        self.session.kv.checkpoint();
        self.prefill_time = t0.elapsed();
        Ok(cancelled.then_some(FinishReason::Cancelled))
    }

    fn sample(&mut self) -> u32 {
        let s = &mut *self.session;
        let logits = s.scratch.last_logits();
        s.sampler.sample(logits, &s.cached)
    }

    /// Text of newly generated ids: complete UTF-8 only, then held back while it could still
    /// be the start of a stop sequence.
    fn take_text(&mut self, id: u32) -> (String, bool) {
        self.decoder_pending.push(id);
        let tok = self.session.engine.tokenizer();
        let bytes_all = tok.decode_bytes(&self.decoder_pending);
        let complete = match std::str::from_utf8(&bytes_all) {
            Ok(s) => s.to_owned(),
            Err(e) if e.error_len().is_none() => {
                // Incomplete multi-byte sequence at the end: wait for more tokens.
                return (String::new(), false);
            }
            Err(_) => String::from_utf8_lossy(&bytes_all).into_owned(),
        };
        self.decoder_pending.clear();
        let (text, hit) = self.stop.push(&complete);
        (text, hit)
    }

    fn finish(&mut self, reason: FinishReason) -> Event {
        // Flush text held back for a possible stop sequence (not when one matched).
        let s = &mut *self.session;
        // The answer's end: the next turn's prompt usually continues from here.
        s.kv.checkpoint();
        if reason != FinishReason::StopSequence {
            let tok = s.engine.tokenizer();
            let rest = String::from_utf8_lossy(&tok.decode_bytes(&self.decoder_pending)).into_owned();
            self.decoder_pending.clear();
            let tail = self.stop.finish(&rest);
            self.answer.push_str(&tail);
        }
        if let (Some(calls), Some(tools)) = (&self.calls, &s.tools) {
            if calls.is_call() {
                s.tool_call = tools.parse_call(&self.answer);
            }
        }
        if self.chat {
            // A call joins the conversation in the form the template teaches, also when the
            // model wrote it bare, so that later turns see calls written one way.
            let content = match &s.tool_call {
                Some(_) => tools::tagged_call(&self.answer),
                None => self.answer.clone(),
            };
            s.messages.push(Message { role: Role::Assistant, content });
        }
        self.state = State::Finished;
        // This request used up any cancel made for it.
        s.cancel.store(false, Ordering::Release);
        let constraint_time = s.sampler.constraint().map_or(Duration::ZERO, |c| c.time().total);
        let prefilled = self.prompt_tokens - self.cached_tokens;
        let speculation = self.speculation_stats();
        let stats = Stats {
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            dropped_messages: self.dropped_messages,
            generated_tokens: self.generated.len(),
            time_to_first_token: self.ttft,
            prefill_time: self.prefill_time,
            decode_time: self.decode_time,
            prefill_tokens_per_s: rate(prefilled, self.prefill_time),
            decode_tokens_per_s: rate(self.decode_steps, self.decode_time),
            finish_reason: reason,
            speculation: Box::new(speculation),
            constraint_time,
            energy: Box::new(self.energy.finish(prefilled, self.decode_steps)),
        };
        log::info!(
            "generation finished ({reason:?}): {} prompt tokens ({} cached), {} generated, first token after {:.0} ms, prefill {:.1} tokens/s, decode {:.1} tokens/s",
            stats.prompt_tokens,
            stats.cached_tokens,
            stats.generated_tokens,
            stats.time_to_first_token.as_secs_f64() * 1e3,
            stats.prefill_tokens_per_s,
            stats.decode_tokens_per_s
        );
        Event::Done(stats)
    }

    fn step(&mut self) -> Result<Event> {
        loop {
            match self.state {
                State::Finished => unreachable!("step is not called after the end"),
                State::Prefill => {
                    if let Some(reason) = self.prefill()? {
                        return Ok(self.finish(reason));
                    }
                    self.energy.enter(&self.session.engine, Phase::Decode);
                    let id = self.sample();
                    self.ttft = self.started.elapsed();
                    if let Some(ev) = self.accept(id)? {
                        return Ok(ev);
                    }
                }
                State::Decode { next } => {
                    if self.cancelled() {
                        return Ok(self.finish(FinishReason::Cancelled));
                    }
                    if self.session.kv.len() + 1 > self.session.kv.capacity() {
                        return Ok(self.finish(FinishReason::ContextFull));
                    }
                    if self.session.spec.is_some() {
                        return self.speculative_step(next);
                    }
                    let t0 = Instant::now();
                    match self.feed(&[next], Logits::Last) {
                        Err(Error::Cancelled) => return Ok(self.finish(FinishReason::Cancelled)),
                        other => other?,
                    }
                    let id = self.sample();
                    self.decode_time += t0.elapsed();
                    self.decode_steps += 1;
                    if let Some(ev) = self.accept(id)? {
                        return Ok(ev);
                    }
                }
            }
        }
    }

    /// Handles a sampled id: end of generation, or a token event (or finish on a stop
    /// sequence, a complete grammar or the token limit).
    fn accept(&mut self, id: u32) -> Result<Option<Event>> {
        let tok = self.session.engine.tokenizer();
        if tok.is_eog(id) && !self.session.opts.ignore_eos {
            return Ok(Some(self.finish(FinishReason::EndOfGeneration)));
        }
        self.session.sampler.accept(id)?;
        self.generated.push(id);
        let (mut text, stop_hit) = self.take_text(id);
        self.answer.push_str(&text);
        if let Some(calls) = &mut self.calls {
            text = calls.show(text);
        }
        self.state = State::Decode { next: id };
        // Emit the text first; the end is reported by the next call.
        if stop_hit {
            self.pending_finish = Some(FinishReason::StopSequence);
        } else if self.session.sampler.constraint_complete() {
            self.pending_finish = Some(FinishReason::EndOfGeneration);
        } else if self.generated.len() >= self.session.opts.max_tokens {
            self.pending_finish = Some(FinishReason::MaxTokens);
        }
        Ok(Some(Event::Token { text, ids: vec![id] }))
    }
}

fn rate(n: usize, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if n == 0 || s <= 0.0 {
        0.0
    } else {
        n as f64 / s
    }
}

impl Drop for Generation<'_> {
    fn drop(&mut self) {
        // A request dropped before its end uses up a pending cancel too.
        if !matches!(self.state, State::Finished) {
            self.session.cancel.store(false, Ordering::Release);
        }
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        if matches!(self.state, State::Finished) {
            return None;
        }
        if let Some(reason) = self.pending_finish.take() {
            return Some(Ok(self.finish(reason)));
        }
        match self.step() {
            Ok(ev) => Some(Ok(ev)),
            Err(e) => {
                self.state = State::Finished;
                self.session.cancel.store(false, Ordering::Release);
                Some(Err(e))
            }
        }
    }
}
