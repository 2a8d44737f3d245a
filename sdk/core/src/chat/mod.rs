//! Chat templates: render `tokenizer.chat_template` with minijinja.
//!
//! The environment mirrors what Hugging Face `apply_chat_template` (and the
//! llama.cpp reference used for the golden data) set up, so prompts match byte
//! for byte: `trim_blocks` and `lstrip_blocks` on, the single trailing newline of
//! the source dropped, no autoescaping, `raise_exception`, `strftime_now`, a
//! Python `json.dumps`-style `tojson`, Python spelling of `None`/`True`/`False`
//! in output, and the common Python string/dict methods (`.strip()`,
//! `.startswith()`, `.split()`, `.items()`, ...).
//!
//! Sandbox: templates have no loader, so no file or network access; recursion is capped by
//! minijinja (500 levels), instructions by its fuel, the rendered output by [`ChatTemplate`],
//! and the memory, work and time of each render by [`TemplateLimits`] (see `sandbox.rs`: the
//! source is rewritten so that operators and loop bodies pay into the budget).

pub mod contents;
mod fallback;
mod pyjson;
mod pymethods;
mod rewrite;
mod sandbox;
mod strftime;

use std::fmt;
use std::io;
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use minijinja::{Environment, UndefinedBehavior};

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

pub use fallback::FallbackKind;
pub use sandbox::TemplateLimits;

/// Name under which the template is stored; it has no extension so that
/// minijinja never turns on HTML autoescaping for it.
const TEMPLATE_NAME: &str = "chat";

/// Assistant content used to locate the end-of-turn text; unlikely to occur in
/// any template's literal text.
const PROBE_ANSWER: &str = "TERN-PROBE-ANSWER-7f3a";
const PROBE_USER: &str = "TERN-PROBE-USER-7f3a";
const PROBE_USER_2: &str = "TERN-PROBE-USER-2-7f3a";

/// Rendered output beyond this many bytes, plus four times the input size, is
/// treated as a runaway template rather than a prompt.
const OUTPUT_BASE_LIMIT: usize = 1 << 20;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool result fed back to the model; templates without tool support may reject it.
    Tool,
}

impl Role {
    /// The lowercase name templates compare against (`"user"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One turn of a conversation, as templates see it: `{"role": ..., "content": ...}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message { role, content: content.into() }
    }
    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }
}

/// A message as templates see it: a map whose keys iterate in the order
/// `role`, `content`, as the Python dicts do (matters for `|tojson`, `.items()`).
#[derive(Debug)]
struct MessageValue {
    role: Value,
    content: Value,
}

impl MessageValue {
    fn value_of(m: &Message) -> Value {
        Value::from_object(MessageValue {
            role: Value::from(m.role.as_str()),
            content: Value::from(m.content.as_str()),
        })
    }
}

impl Object for MessageValue {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "role" => Some(self.role.clone()),
            "content" => Some(self.content.clone()),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["role", "content"])
    }
}

/// A JSON value as templates see it: objects keep their key order, as Python dicts do (matters
/// for `|tojson` of tool definitions).
#[derive(Debug)]
struct JsonObject(Vec<(String, Value)>);

impl JsonObject {
    fn value_of(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Object(map) => {
                Value::from_object(JsonObject(map.iter().map(|(k, v)| (k.clone(), JsonObject::value_of(v))).collect()))
            }
            serde_json::Value::Array(items) => Value::from(items.iter().map(JsonObject::value_of).collect::<Vec<_>>()),
            other => Value::from_serialize(other),
        }
    }
}

impl Object for JsonObject {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.0.iter().map(|(k, _)| Value::from(k.as_str())).collect())
    }
}

/// What a render passes to the template besides the messages, as the arguments of Hugging Face
/// `apply_chat_template` do.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOptions<'a> {
    /// End with the opening of an assistant turn, ready for generation.
    pub add_generation_prompt: bool,
    /// Tool definitions (a JSON array) for templates that show them.
    pub tools: Option<&'a serde_json::Value>,
    /// Further template variables, e.g. `{"enable_thinking": false}` for Qwen 3's and SmolLM 3's
    /// templates.
    pub variables: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The time `strftime_now()` reports, in seconds since the Unix epoch (UTC); the system clock
    /// when `None`.
    pub now: Option<i64>,
}

/// Whether a template shows tool definitions to the model itself, and in which format it
/// expects calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// The template does not render `tools`.
    None,
    /// `tools` rendered by the template; calls written as
    /// `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` (Qwen 2.5, Hermes).
    ToolCallTags,
}

/// A compiled chat template. Compiled once; rendering is `&self`, so one
/// instance can be shared across threads.
pub struct ChatTemplate {
    env: Environment<'static>,
    limits: TemplateLimits,
    bos_token: String,
    eos_token: String,
    source_len: usize,
    turn_suffix: Option<String>,
    fallback: Option<FallbackKind>,
    tool_format: ToolFormat,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("source_len", &self.source_len)
            .field("turn_suffix", &self.turn_suffix)
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles `source` (a Jinja chat template as found in `tokenizer.chat_template`).
    /// `bos_token`/`eos_token` are the model's BOS/EOS token texts, visible to the
    /// template as `bos_token`/`eos_token`. Syntax errors give [`Error::Template`].
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate> {
        let mut env = base_environment(bos_token, eos_token);
        let budgeted = rewrite::rewrite(source, TEMPLATE_NAME)?;
        env.add_template_owned(TEMPLATE_NAME, budgeted).map_err(template_error)?;
        let mut t = Self::finish(env, bos_token, eos_token, source.len(), None);
        // A template that runs out of its budget on the probe conversation is refused here,
        // at load, rather than at every send.
        t.turn_suffix = t.probe_turn_suffix()?;
        if source.contains("tools") && source.contains("<tool_call>") {
            t.tool_format = ToolFormat::ToolCallTags;
        }
        Ok(t)
    }

    /// A built-in template for models whose GGUF carries none (e.g. Gemma 3 base).
    /// Choose `kind` with [`FallbackKind::detect`]. Fallback templates never emit
    /// BOS: the tokenizer adds it when the model asks for it (`add_bos_token`).
    pub fn fallback(kind: FallbackKind, bos_token: &str, eos_token: &str) -> ChatTemplate {
        let source = kind.source();
        let mut env = base_environment(bos_token, eos_token);
        // The built-in sources are fixed and covered by tests, so compiling cannot fail;
        // should it ever, rendering reports the missing template as Error::Template.
        let _ = env.add_template(TEMPLATE_NAME, source);
        let mut t = Self::finish(env, bos_token, eos_token, source.len(), Some(kind));
        t.turn_suffix = t.probe_turn_suffix().ok().flatten();
        t
    }

    /// The template a GGUF model should use: its `tokenizer.chat_template` when
    /// present, else the fallback its vocabulary suggests.
    pub fn from_gguf(file: &GgufFile) -> Result<ChatTemplate> {
        let tokens = file.get_array("tokenizer.ggml.tokens")?;
        let vocab: Vec<&str> = tokens
            .strings(file.bytes())
            .ok_or_else(|| Error::MetadataType {
                key: "tokenizer.ggml.tokens".into(),
                expected: "array of strings",
                found: format!("array of {}", tokens.elem.name()),
            })?
            .collect();
        let token_text = |key: &str| -> &str {
            file.get(key)
                .and_then(|v| v.as_u64())
                .and_then(|id| usize::try_from(id).ok())
                .and_then(|id| vocab.get(id).copied())
                .unwrap_or("")
        };
        let bos = token_text("tokenizer.ggml.bos_token_id");
        let eos = token_text("tokenizer.ggml.eos_token_id");
        match file.get("tokenizer.chat_template") {
            Some(_) => ChatTemplate::new(file.get_str("tokenizer.chat_template")?, bos, eos),
            None => {
                let kind = FallbackKind::detect(|t| vocab.contains(&t));
                Ok(ChatTemplate::fallback(kind, bos, eos))
            }
        }
    }

    fn finish(
        env: Environment<'static>,
        bos_token: &str,
        eos_token: &str,
        source_len: usize,
        fallback: Option<FallbackKind>,
    ) -> ChatTemplate {
        ChatTemplate {
            env,
            limits: TemplateLimits::default(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
            source_len,
            turn_suffix: None,
            fallback,
            tool_format: ToolFormat::None,
        }
    }

    /// Renders the conversation. With `add_generation_prompt` the text ends with
    /// the opening of an assistant turn, ready for generation.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        self.render_with(messages, &RenderOptions { add_generation_prompt, ..RenderOptions::default() })
    }

    /// [`render`](Self::render) with tool definitions for templates that show them (see
    /// [`tool_format`](Self::tool_format)): `tools` is a JSON array, typically of
    /// `{"type": "function", "function": {"name", "description", "parameters"}}`.
    pub fn render_with_tools(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
    ) -> Result<String> {
        self.render_with(messages, &RenderOptions { add_generation_prompt, tools, ..RenderOptions::default() })
    }

    /// Renders the conversation with everything a template may be given; see [`RenderOptions`].
    /// A render that exceeds the template's [limits](TemplateLimits) is an [`Error::Template`].
    pub fn render_with(&self, messages: &[Message], opts: &RenderOptions<'_>) -> Result<String> {
        self.render_budgeted(messages, opts).map_err(|f| match f {
            RenderFailure::Budget(exceeded) => Error::Template(exceeded.to_string()),
            RenderFailure::Other(e) => e,
        })
    }

    fn render_budgeted(
        &self,
        messages: &[Message],
        opts: &RenderOptions<'_>,
    ) -> std::result::Result<String, RenderFailure> {
        let other = |e| RenderFailure::Other(e);
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| other(template_error(e)))?;
        let tools = opts.tools;
        let tools_len = tools.map_or(0, |t| t.to_string().len());
        let input: usize = messages.iter().map(|m| m.content.len()).sum::<usize>() + self.source_len + tools_len;
        let limit = OUTPUT_BASE_LIMIT.saturating_add(input.saturating_mul(4));
        let mut vars: Vec<(&str, Value)> = Vec::new();
        if let Some(extra) = opts.variables {
            vars.extend(extra.iter().map(|(k, v)| (k.as_str(), JsonObject::value_of(v))));
        }
        if let Some(now) = opts.now {
            let clock = move |format: String| strftime::format_unix(&format, now);
            vars.push(("strftime_now", Value::from_function(clock)));
        }
        let base = minijinja::context! {
            messages => Value::from(messages.iter().map(MessageValue::value_of).collect::<Vec<_>>()),
            add_generation_prompt => opts.add_generation_prompt,
            // HF passes these as None, and templates test `tools is not none`.
            tools => tools.map_or(Value::from(()), JsonObject::value_of),
            documents => Value::from(()),
        };
        // The fixed variables win over caller-given ones of the same name.
        let ctx = minijinja::context! { ..base, ..Value::from_iter(vars) };
        let mut out = CappedWriter { buf: Vec::new(), limit, overflowed: false };
        let budget = sandbox::Session::start(&self.limits, input);
        let result = template.render_captured_to(ctx, &mut out);
        // Over budget, the render may also have ended on some other error the budget caused.
        if let Some(exceeded) = budget.exceeded() {
            return Err(RenderFailure::Budget(exceeded));
        }
        match result {
            Ok(_) => {}
            Err(_) if out.overflowed => {
                return Err(other(Error::Template(format!("rendered prompt exceeds {limit} bytes"))));
            }
            Err(e) => return Err(other(template_error(e))),
        }
        // Only `&str` pieces were written, so the bytes are UTF-8; checked anyway.
        String::from_utf8(out.buf).map_err(|_| other(Error::Template("rendered prompt is not UTF-8".into())))
    }

    /// Text the template puts after an assistant message's content, e.g.
    /// `"<|im_end|>\n"` (ChatML) or `"<end_of_turn>\n"` (Gemma).
    ///
    /// Found once, at construction, by rendering a probe conversation
    /// `[user, assistant(PROBE)]` and `[user, assistant(PROBE), user]` and taking
    /// the common text right after PROBE. Sessions append it to close a turn whose
    /// generation stopped on the end-of-turn token. `None` when the probe fails
    /// (e.g. the template rejects the probe) or the template puts nothing there.
    pub fn assistant_turn_suffix(&self) -> Option<&str> {
        self.turn_suffix.as_deref()
    }

    /// [`assistant_turn_suffix`](Self::assistant_turn_suffix) without trailing
    /// whitespace, e.g. `"<|im_end|>"`: the text whose appearance in the output
    /// ends the assistant's turn (stop string). `None` if nothing is left.
    pub fn assistant_stop_text(&self) -> Option<&str> {
        self.turn_suffix.as_deref().map(str::trim_end).filter(|s| !s.is_empty())
    }

    /// The BOS token text the template was built with. A template may emit it
    /// itself; callers should then not let the tokenizer add a second one.
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }

    /// How this template presents tools; [`ToolFormat::None`] for templates without tool support.
    pub fn tool_format(&self) -> ToolFormat {
        self.tool_format
    }

    /// Replaces the limits each render runs under (memory, work, time); see [`TemplateLimits`].
    pub fn set_limits(&mut self, limits: TemplateLimits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> TemplateLimits {
        self.limits
    }

    /// `Some(kind)` for built-in fallback templates.
    pub fn fallback_kind(&self) -> Option<FallbackKind> {
        self.fallback
    }

    /// The turn suffix (see [`assistant_turn_suffix`](Self::assistant_turn_suffix)); an error
    /// only when the template exceeds its limits on the probe.
    fn probe_turn_suffix(&self) -> Result<Option<String>> {
        let one = [Message::user(PROBE_USER), Message::assistant(PROBE_ANSWER)];
        let two = [one[0].clone(), one[1].clone(), Message::user(PROBE_USER_2)];
        let render = |messages: &[Message]| match self.render_budgeted(messages, &RenderOptions::default()) {
            Ok(text) => Ok(Some(text)),
            Err(RenderFailure::Budget(exceeded)) => Err(Error::Template(exceeded.to_string())),
            // Templates may reject the probe (a required system message, say): no suffix then.
            Err(RenderFailure::Other(_)) => Ok(None),
        };
        let (Some(a), Some(b)) = (render(&one)?, render(&two)?) else { return Ok(None) };
        let after = |s: &str| s.find(PROBE_ANSWER).map(|i| s[i + PROBE_ANSWER.len()..].to_owned());
        let (Some(a), Some(b)) = (after(&a), after(&b)) else { return Ok(None) };
        // The last turn may be followed by template-wide trailers, the middle one by
        // the next user turn; what both share is the turn's own closing text.
        let common = common_prefix_len(&a, &b);
        let suffix = &a[..common];
        Ok((!suffix.is_empty()).then(|| suffix.to_owned()))
    }
}

fn common_prefix_len(a: &str, b: &str) -> usize {
    let mut n = 0;
    for ((i, ca), cb) in a.char_indices().zip(b.chars()) {
        if ca != cb {
            return i;
        }
        n = i + ca.len_utf8();
    }
    n
}

/// The environment shared by parsed and built-in templates.
/// Instructions one render may execute; real chat templates use a few thousand per message.
const TEMPLATE_FUEL: u64 = 5_000_000;

fn base_environment(bos_token: &str, eos_token: &str) -> Environment<'static> {
    let mut env = Environment::new();
    // What transformers' apply_chat_template and llama-cpp-python configure.
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_formatter(pyjson::python_formatter);
    env.set_unknown_method_callback(pymethods::call_method);
    // Bounds the work one render may do: a hostile template cannot spin forever.
    env.set_fuel(Some(TEMPLATE_FUEL));
    sandbox::install(&mut env);
    env.add_filter("tojson", pyjson::tojson_filter);
    env.add_function("strftime_now", strftime::strftime_now);
    env.add_global("bos_token", bos_token.to_owned());
    env.add_global("eos_token", eos_token.to_owned());
    env
}

/// Longest template error message kept (a template chooses its own error texts).
const MAX_ERROR_MESSAGE: usize = 2048;

fn template_error(e: minijinja::Error) -> Error {
    // Plain Display: kind, detail and location; never the debug dump of variables.
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    if msg.len() > MAX_ERROR_MESSAGE {
        let mut end = MAX_ERROR_MESSAGE;
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push_str("...");
    }
    Error::Template(msg)
}

/// Why a render failed: over one of its budgets, or anything else.
enum RenderFailure {
    Budget(sandbox::Exceeded),
    Other(Error),
}

/// Collects output and refuses to grow past `limit` bytes.
struct CappedWriter {
    buf: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl io::Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.limit {
            self.overflowed = true;
            return Err(io::Error::other("output limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
