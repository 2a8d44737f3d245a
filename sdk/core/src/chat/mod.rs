//! Chat templates: render `tokenizer.chat_template` with minijinja.
