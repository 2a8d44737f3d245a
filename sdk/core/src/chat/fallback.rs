//! Built-in templates for models whose GGUF has no `tokenizer.chat_template`.

/// Which built-in turn format to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FallbackKind {
    /// `<start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n` (Gemma).
    /// Gemma has no system role: a leading system message is prepended to the
    /// first user turn, as Gemma's own template does.
    Gemma,
    /// `<|im_start|>role\n...<|im_end|>\n`, no default system prompt.
    ChatMl,
    /// `User: ...\nAssistant: ...\n`, generation prompt `Assistant:`.
    Plain,
}

impl FallbackKind {
    /// Picks the format from the special tokens the vocabulary has:
    /// `<start_of_turn>`+`<end_of_turn>` → Gemma, `<|im_start|>`+`<|im_end|>` → ChatML,
    /// else plain text.
    pub fn detect(has_token: impl Fn(&str) -> bool) -> FallbackKind {
        if has_token("<start_of_turn>") && has_token("<end_of_turn>") {
            FallbackKind::Gemma
        } else if has_token("<|im_start|>") && has_token("<|im_end|>") {
            FallbackKind::ChatMl
        } else {
            FallbackKind::Plain
        }
    }

    pub(super) fn source(self) -> &'static str {
        match self {
            FallbackKind::Gemma => GEMMA,
            FallbackKind::ChatMl => CHATML,
            FallbackKind::Plain => PLAIN,
        }
    }
}

// Whitespace control on every tag: the environment keeps HF's trim/lstrip
// settings, and these sources must not depend on them.
const GEMMA: &str = r#"
{%- if messages and messages[0].role == 'system' -%}
  {%- set system_prefix = (messages[0].content | trim) ~ '\n\n' -%}
  {%- set loop_messages = messages[1:] -%}
{%- else -%}
  {%- set system_prefix = '' -%}
  {%- set loop_messages = messages -%}
{%- endif -%}
{%- if system_prefix and not loop_messages -%}
  {{- '<start_of_turn>user\n' ~ (messages[0].content | trim) ~ '<end_of_turn>\n' -}}
{%- endif -%}
{%- for message in loop_messages -%}
  {{- '<start_of_turn>' ~ ('model' if message.role == 'assistant' else 'user') ~ '\n' -}}
  {{- (system_prefix if loop.first else '') ~ (message.content | trim) ~ '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%}
"#;

const CHATML: &str = r#"
{%- for message in messages -%}
  {{- '<|im_start|>' ~ message.role ~ '\n' ~ message.content ~ '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
"#;

const PLAIN: &str = r#"
{%- for message in messages -%}
  {{- (message.role | capitalize) ~ ': ' ~ message.content ~ '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- 'Assistant:' -}}
{%- endif -%}
"#;
