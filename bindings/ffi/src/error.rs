//! The public error type and its one mapping from `tern::Error`.
//!
//! Variants carry what an app can act on (a path, counts); free-text details are the SDK's own
//! messages, which name files, keys and counts but never prompt or answer text.

/// Errors of the SDK, as Kotlin exceptions (`TernException.*`) and Swift errors (`TernError.*`).
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
        let detail = e.to_string();
        match e {
            E::FileNotFound { path } => TernError::ModelNotFound { path: path.display().to_string() },
            E::Io { .. } => TernError::Io { detail },
            E::NotGguf { .. }
            | E::UnsupportedVersion(_)
            | E::Truncated { .. }
            | E::Corrupt(_)
            | E::MissingMetadata(_)
            | E::MetadataType { .. }
            | E::MissingTensor(_)
            | E::TensorShape { .. } => TernError::InvalidModel { detail },
            E::UnsupportedArchitecture(_) | E::UnsupportedTensorType { .. } => TernError::Unsupported { detail },
            E::ContextOverflow { needed, limit } => {
                TernError::ContextOverflow { needed: needed as u64, limit: limit as u64 }
            }
            E::InvalidOption(_) => TernError::InvalidOption { detail },
            E::Cancelled => TernError::Cancelled,
            // Template errors may quote the template, never the conversation it rendered.
            E::Template(_) => TernError::Template { detail },
            E::Tokenizer(_) => TernError::Tokenizer { detail },
            E::Busy => TernError::Busy,
            // `tern::Error` is non-exhaustive: a variant added later is reported, not lost.
            _ => TernError::Internal { detail },
        }
    }
}

impl TernError {
    /// What a caught panic becomes. Its payload may quote data, so only the place is reported.
    pub(crate) fn panicked(what: &str) -> Self {
        TernError::Internal { detail: format!("internal error in {what}") }
    }

    pub(crate) fn no_thread(e: std::io::Error) -> Self {
        TernError::Internal { detail: format!("cannot start a thread: {e}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_each_kind() {
        let nf: TernError = tern::Error::FileNotFound { path: "/x/m.gguf".into() }.into();
        assert!(matches!(nf, TernError::ModelNotFound { ref path } if path == "/x/m.gguf"));
        let bad: TernError = tern::Error::NotGguf { magic: *b"abcd" }.into();
        assert!(matches!(bad, TernError::InvalidModel { .. }));
        let ctx: TernError = tern::Error::ContextOverflow { needed: 10, limit: 4 }.into();
        assert!(matches!(ctx, TernError::ContextOverflow { needed: 10, limit: 4 }));
        let arch: TernError = tern::Error::UnsupportedArchitecture("mamba".into()).into();
        assert!(matches!(arch, TernError::Unsupported { .. }));
        assert!(matches!(TernError::from(tern::Error::Busy), TernError::Busy));
    }

    #[test]
    fn panics_report_the_place_only() {
        let e = TernError::panicked("generation");
        assert_eq!(e.to_string(), "internal error in generation");
    }
}
