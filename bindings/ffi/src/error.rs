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
    /// A JSON Schema, grammar or tool definition that cannot be used; raised before generating.
    #[error("{detail}")]
    Grammar { detail: String },
    /// Constrained generation could not go on, or the model's answer did not complete the
    /// grammar (e.g. cut off by `max_tokens`).
    #[error("{detail}")]
    Constraint { detail: String },
    /// A UI action that is not valid on its screen (unknown element, missing text, ...).
    #[error("{detail}")]
    InvalidAction { detail: String },
    /// The CPU topology could not be read.
    #[error("{detail}")]
    Topology { detail: String },
    /// An energy meter could not be started or read, or energy tuning failed.
    #[error("{detail}")]
    Energy { detail: String },
    /// The disk lacks room for a download (checked before it starts).
    #[error("the disk has {available} bytes free, the download needs {needed}")]
    NotEnoughSpace { needed: u64, available: u64 },
    /// The server answered a download with an error status.
    #[error("the server answered HTTP {status}")]
    Http { status: u16 },
    /// No connection could be made, or it failed (DNS, TLS, protocol, timeout).
    #[error("{detail}")]
    Network { detail: String },
    /// The connection broke more often than the retries allow; the next download of the same
    /// model resumes from `downloaded`.
    #[error("download interrupted at {downloaded} of {total} bytes (it resumes on the next attempt)")]
    DownloadInterrupted { downloaded: u64, total: u64 },
    /// The server's file does not have the model's size.
    #[error("the file has {actual} bytes, the model has {expected}")]
    SizeMismatch { expected: u64, actual: u64 },
    /// The downloaded file is not the model (corrupted in transit or on the server); it was
    /// deleted and never used.
    #[error("SHA-256 mismatch: expected {expected}, got {actual}; the file was deleted")]
    HashMismatch { expected: String, actual: String },
    /// Another download of the same model file is running.
    #[error("another download of {file_name} is in progress")]
    DownloadInProgress { file_name: String },
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
            E::Io { .. } | E::Write { .. } => TernError::Io { detail },
            E::NotGguf { .. }
            | E::UnsupportedVersion(_)
            | E::Truncated { .. }
            | E::Corrupt(_)
            | E::MissingMetadata(_)
            | E::MetadataType { .. }
            | E::MissingTensor(_)
            | E::TensorShape { .. } => TernError::InvalidModel { detail },
            E::UnsupportedArchitecture { .. } | E::UnsupportedTensorType { .. } => TernError::Unsupported { detail },
            E::ContextOverflow { needed, limit } => {
                TernError::ContextOverflow { needed: needed as u64, limit: limit as u64 }
            }
            E::InvalidOption(_) => TernError::InvalidOption { detail },
            E::Cancelled => TernError::Cancelled,
            // Template errors may quote the template, never the conversation it rendered.
            E::Template(_) => TernError::Template { detail },
            E::Tokenizer(_) => TernError::Tokenizer { detail },
            E::Busy => TernError::Busy,
            E::Grammar(_) => TernError::Grammar { detail },
            E::Constraint(_) => TernError::Constraint { detail },
            E::Topology(_) => TernError::Topology { detail },
            E::Energy(_) => TernError::Energy { detail },
            // `tern::Error` is non-exhaustive: a variant added later is reported, not lost.
            _ => TernError::Internal { detail },
        }
    }
}

impl From<tern_store::StoreError> for TernError {
    fn from(e: tern_store::StoreError) -> Self {
        use tern_store::StoreError as E;
        let detail = e.to_string();
        match e {
            E::Io { .. } => TernError::Io { detail },
            E::InvalidSpec(_) => TernError::InvalidOption { detail },
            E::NotEnoughSpace { needed, available } => TernError::NotEnoughSpace { needed, available },
            E::Http { status } => TernError::Http { status },
            E::Network(_) | E::BadResponse(_) => TernError::Network { detail },
            E::Interrupted { downloaded, total } => TernError::DownloadInterrupted { downloaded, total },
            E::SizeMismatch { expected, actual } => TernError::SizeMismatch { expected, actual },
            E::HashMismatch { expected, actual } => TernError::HashMismatch { expected, actual },
            E::Busy(file_name) => TernError::DownloadInProgress { file_name },
            E::Cancelled => TernError::Cancelled,
            _ => TernError::Internal { detail },
        }
    }
}

impl From<tern::ui::ActionError> for TernError {
    fn from(e: tern::ui::ActionError) -> Self {
        use tern::ui::ActionError as E;
        let detail = match e {
            // The parser's message quotes the answer's keys and values: say what is wrong only.
            E::NotAnAction(_) => "the JSON is not an action (unknown keys or values)".to_owned(),
            e => e.to_string(),
        };
        TernError::InvalidAction { detail }
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
        let arch: TernError =
            tern::Error::UnsupportedArchitecture { name: "mamba".into(), supported: "llama".into() }.into();
        assert!(matches!(arch, TernError::Unsupported { .. }));
        assert!(matches!(TernError::from(tern::Error::Busy), TernError::Busy));
    }

    #[test]
    fn panics_report_the_place_only() {
        let e = TernError::panicked("generation");
        assert_eq!(e.to_string(), "internal error in generation");
    }
}
