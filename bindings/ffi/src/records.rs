//! Plain data crossing the boundary: options (every field has a default, so a field added later
//! breaks no caller), model facts, statistics and stream events, each converted from the SDK's
//! own type in one place.

use crate::energy::{EnergyOptions, EnergyStats};
use crate::error::TernError;
use crate::speculation::{SpeculationOptions, SpeculationStats};
use crate::structured::ToolCall;
use crate::units::ms;

#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct EngineOptions {
    /// Compute threads (default: one per available core, at most 8).
    #[uniffi(default = None)]
    pub threads: Option<u32>,
    /// Default context length of sessions (default: the model's, capped at 4096).
    #[uniffi(default = None)]
    pub context_length: Option<u32>,
    /// Force a kernel set by name (`reference`, `neon`, `avx2`, ...); default: the best this CPU
    /// runs. An unknown or unavailable name is an `InvalidOption` error.
    #[uniffi(default = None)]
    pub kernels: Option<String>,
    /// Energy mode, where tuning results are kept, the device's name (docs/energy.md).
    #[uniffi(default)]
    pub energy: EnergyOptions,
    /// Repack weights at load into the layout the kernels read fastest (default on: faster
    /// prefill and decode, more load time and memory; off keeps only the mapped file).
    #[uniffi(default = None)]
    pub repack_weights: Option<bool>,
    /// How KV caches store keys and values; none = f16. (An option because a record's enum
    /// field cannot carry a default in the generated code.)
    #[uniffi(default = None)]
    pub kv_precision: Option<KvPrecision>,
}

/// KV cache storage: f16 (default), or int8 keys and fp8 values (half the memory and
/// long-context bandwidth, slightly different logits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, uniffi::Enum)]
pub enum KvPrecision {
    #[default]
    F16,
    Int8Fp8,
}

impl From<KvPrecision> for tern::KvPrecision {
    fn from(p: KvPrecision) -> Self {
        match p {
            KvPrecision::F16 => tern::KvPrecision::F16,
            KvPrecision::Int8Fp8 => tern::KvPrecision::Int8Fp8,
        }
    }
}

impl From<EngineOptions> for tern::EngineOptions {
    fn from(o: EngineOptions) -> Self {
        tern::EngineOptions {
            threads: o.threads.map(|n| n as usize),
            context_length: o.context_length.map(|n| n as usize),
            kernels: o.kernels,
            energy: o.energy.into(),
            repack_weights: o.repack_weights,
            kv_precision: o.kv_precision.unwrap_or_default().into(),
        }
    }
}

/// How the next token is chosen. The defaults are greedy decoding (temperature 0); a session
/// given none samples as the model recommends (`ModelInfo.sampling`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
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
    /// How many recent tokens the penalty looks at.
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

#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SessionOptions {
    /// System message placed before the conversation (the template's default if none).
    #[uniffi(default = None)]
    pub system_prompt: Option<String>,
    /// How tokens are chosen; none = as the model recommends (`ModelInfo.sampling`). Greedy
    /// (`SamplingOptions()` as it is, temperature 0) gives reproducible answers.
    #[uniffi(default = None)]
    pub sampling: Option<SamplingOptions>,
    /// Most tokens one answer may have.
    #[uniffi(default = 512)]
    pub max_tokens: u32,
    /// Generation stops when the text contains any of these; the stop text is not emitted.
    #[uniffi(default = [])]
    pub stop: Vec<String>,
    /// KV cache length of this session (default: the engine's).
    #[uniffi(default = None)]
    pub context_length: Option<u32>,
    /// Keep generating past end-of-generation tokens (benchmarks).
    #[uniffi(default = false)]
    pub ignore_eos: bool,
    /// Speculative decoding: automatic by default (the answer is the same as without).
    #[uniffi(default)]
    pub speculation: SpeculationOptions,
    /// Let control-token text inside message contents (`<|im_end|>`, ...) become control tokens.
    /// Off by default, so that a pasted or received text cannot end a turn or open a system one.
    #[uniffi(default = false)]
    pub control_tokens_in_messages: bool,
    /// What a message does when the conversation outgrows the context: fail with
    /// `ContextOverflow` (none, the default, or `Error`) or drop the oldest turns.
    #[uniffi(default = None)]
    pub overflow: Option<OverflowPolicy>,
}

/// What a message does when the conversation outgrows the session's context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, uniffi::Enum)]
pub enum OverflowPolicy {
    /// Fail with `ContextOverflow`; the session keeps every message.
    #[default]
    Error,
    /// Drop whole turns from the start (never the system prompt or the new message) until the
    /// answer has room; `Stats.droppedMessages` counts them.
    DropOldestTurns,
}

impl From<OverflowPolicy> for tern::OverflowPolicy {
    fn from(p: OverflowPolicy) -> Self {
        match p {
            OverflowPolicy::Error => tern::OverflowPolicy::Error,
            OverflowPolicy::DropOldestTurns => tern::OverflowPolicy::DropOldestTurns,
        }
    }
}

impl From<tern::OverflowPolicy> for OverflowPolicy {
    fn from(p: tern::OverflowPolicy) -> Self {
        match p {
            tern::OverflowPolicy::Error => OverflowPolicy::Error,
            tern::OverflowPolicy::DropOldestTurns => OverflowPolicy::DropOldestTurns,
        }
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        tern::SessionOptions::default().into()
    }
}

impl From<tern::SessionOptions> for SessionOptions {
    fn from(o: tern::SessionOptions) -> Self {
        SessionOptions {
            system_prompt: o.system_prompt,
            sampling: o.sampling.map(Into::into),
            max_tokens: o.max_tokens as u32,
            stop: o.stop,
            context_length: o.context_length.map(|n| n as u32),
            ignore_eos: o.ignore_eos,
            speculation: o.speculation.into(),
            control_tokens_in_messages: o.control_tokens_in_messages,
            overflow: Some(o.overflow.into()),
        }
    }
}

impl From<SessionOptions> for tern::SessionOptions {
    fn from(o: SessionOptions) -> Self {
        tern::SessionOptions {
            system_prompt: o.system_prompt,
            sampling: o.sampling.map(Into::into),
            max_tokens: o.max_tokens as usize,
            stop: o.stop,
            context_length: o.context_length.map(|n| n as usize),
            ignore_eos: o.ignore_eos,
            speculation: o.speculation.into(),
            control_tokens_in_messages: o.control_tokens_in_messages,
            overflow: o.overflow.unwrap_or_default().into(),
            ..tern::SessionOptions::default()
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

/// Counts and timings of one answer.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Stats {
    /// Tokens of the prompt of this request (the whole rendered conversation).
    pub prompt_tokens: u32,
    /// Of those, how many were already in the KV cache.
    pub cached_tokens: u32,
    /// The oldest messages this answer's request dropped to fit the context (`OverflowPolicy`).
    pub dropped_messages: u32,
    pub generated_tokens: u32,
    pub time_to_first_token_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub finish_reason: FinishReason,
    /// Time the grammar or tool constraint took (token masks); zero without one.
    pub constraint_ms: f64,
    /// Verification steps, drafted and accepted tokens, drafting time.
    pub speculation: SpeculationStats,
    /// Energy, CPU time and core selection of prefill and decode.
    pub energy: EnergyStats,
}

impl From<tern::Stats> for Stats {
    fn from(s: tern::Stats) -> Self {
        Stats {
            prompt_tokens: s.prompt_tokens as u32,
            cached_tokens: s.cached_tokens as u32,
            dropped_messages: s.dropped_messages as u32,
            generated_tokens: s.generated_tokens as u32,
            time_to_first_token_ms: ms(s.time_to_first_token),
            prefill_ms: ms(s.prefill_time),
            decode_ms: ms(s.decode_time),
            prefill_tokens_per_s: s.prefill_tokens_per_s,
            decode_tokens_per_s: s.decode_tokens_per_s,
            finish_reason: s.finish_reason.into(),
            constraint_ms: ms(s.constraint_time),
            speculation: (*s.speculation).into(),
            energy: (*s.energy).into(),
        }
    }
}

/// Who wrote a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum MessageRole {
    /// Instructions placed before the conversation; the session's own system prompt is not
    /// part of `Session::messages`.
    System,
    User,
    Assistant,
    /// A tool's result (`Session::send_tool_result`).
    Tool,
}

impl From<tern::Role> for MessageRole {
    fn from(r: tern::Role) -> Self {
        match r {
            tern::Role::System => MessageRole::System,
            tern::Role::User => MessageRole::User,
            tern::Role::Assistant => MessageRole::Assistant,
            tern::Role::Tool => MessageRole::Tool,
        }
    }
}

impl From<MessageRole> for tern::Role {
    fn from(r: MessageRole) -> Self {
        match r {
            MessageRole::System => tern::Role::System,
            MessageRole::User => tern::Role::User,
            MessageRole::Assistant => tern::Role::Assistant,
            MessageRole::Tool => tern::Role::Tool,
        }
    }
}

/// One turn of a session's conversation (`Session::messages`, `Session::set_messages`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ConversationMessage {
    pub role: MessageRole,
    pub content: String,
}

impl From<tern::Message> for ConversationMessage {
    fn from(m: tern::Message) -> Self {
        ConversationMessage { role: m.role.into(), content: m.content }
    }
}

impl From<ConversationMessage> for tern::Message {
    fn from(m: ConversationMessage) -> Self {
        tern::Message { role: m.role.into(), content: m.content }
    }
}

/// A conversation as JSON text, the way the Rust SDK's `Message` serializes:
/// `[{"role": "user", "content": "..."}, ...]`. For saving `Session::messages`.
#[uniffi::export]
pub fn messages_to_json(messages: Vec<ConversationMessage>) -> String {
    let messages: Vec<tern::Message> = messages.into_iter().map(Into::into).collect();
    serde_json::to_string(&messages).unwrap_or_default()
}

/// The conversation `messages_to_json` wrote, for `Session::set_messages`; JSON of another
/// shape raises `InvalidOption`.
#[uniffi::export]
pub fn messages_from_json(json: String) -> Result<Vec<ConversationMessage>, TernError> {
    let messages: Vec<tern::Message> = serde_json::from_str(&json)
        .map_err(|e| TernError::InvalidOption { detail: format!("not a saved conversation: {e}") })?;
    Ok(messages.into_iter().map(Into::into).collect())
}

/// Facts about a loaded model.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
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
    /// How the model's makers recommend sampling it (from the file), or general-purpose
    /// sampling: what sessions given no sampling options use.
    pub sampling: SamplingOptions,
}

impl From<&tern::ModelInfo> for ModelInfo {
    fn from(i: &tern::ModelInfo) -> Self {
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
            sampling: i.sampling.clone().into(),
        }
    }
}

/// One event of an answer's stream.
// `Done` carries the statistics by value: events are serialized across the boundary one by
// one, so boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum TokenEvent {
    /// New text (possibly empty while a stop sequence or UTF-8 sequence is pending) and the
    /// token ids it came from.
    Token { text: String, ids: Vec<u32> },
    /// The answer is a call of one of the session's tools (see `Session::set_tools`): run it and
    /// answer with `Session::send_tool_result`. Comes just before `Done`; the call's own tokens
    /// stream as `Token` events with empty text.
    ToolCall { call: ToolCall },
    /// The last event of a stream.
    Done { stats: Stats },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_sdks() {
        let ours: tern::SessionOptions = SessionOptions::default().into();
        let sdk = tern::SessionOptions::default();
        assert_eq!(format!("{ours:?}"), format!("{sdk:?}"));
        let ours: tern::EngineOptions = EngineOptions::default().into();
        assert_eq!(format!("{ours:?}"), format!("{:?}", tern::EngineOptions::default()));
    }

    #[test]
    fn control_tokens_in_messages_reaches_the_sdk() {
        let ours = SessionOptions { control_tokens_in_messages: true, ..SessionOptions::default() };
        let sdk: tern::SessionOptions = ours.clone().into();
        assert!(sdk.control_tokens_in_messages);
        assert_eq!(SessionOptions::from(sdk), ours);
    }

    #[test]
    fn overflow_policy_reaches_the_sdk_and_none_refuses() {
        let ours = SessionOptions { overflow: Some(OverflowPolicy::DropOldestTurns), ..SessionOptions::default() };
        let sdk: tern::SessionOptions = ours.clone().into();
        assert_eq!(sdk.overflow, tern::OverflowPolicy::DropOldestTurns);
        assert_eq!(SessionOptions::from(sdk), ours);
        let unset = SessionOptions { overflow: None, ..SessionOptions::default() };
        assert_eq!(tern::SessionOptions::from(unset).overflow, tern::OverflowPolicy::Error);
    }
}
