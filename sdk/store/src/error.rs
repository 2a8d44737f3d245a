//! What can go wrong with a download or the store directory.

use std::path::PathBuf;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    /// A model description that cannot be used (file name with a path in it, malformed hash).
    #[error("invalid model description: {0}")]
    InvalidSpec(String),

    #[error("the disk has {available} bytes free, the download needs {needed}")]
    NotEnoughSpace { needed: u64, available: u64 },

    /// The server answered with an error status.
    #[error("the server answered HTTP {status}")]
    Http { status: u16 },

    /// No connection could be made, or the connection failed (DNS, TLS, protocol, timeout).
    #[error("network error: {0}")]
    Network(String),

    /// The server answered, but not with the file: redirects without end, an answer that is
    /// not HTTP, headers past the size limit.
    #[error("the server's response cannot be used: {0}")]
    BadResponse(String),

    /// The connection broke more often than the retries allow; what arrived is kept and the next
    /// download of the model resumes from it.
    #[error("download interrupted at {downloaded} of {total} bytes (it resumes on the next attempt)")]
    Interrupted { downloaded: u64, total: u64 },

    /// The server's file does not have the model's size.
    #[error("the file has {actual} bytes, the model has {expected}")]
    SizeMismatch { expected: u64, actual: u64 },

    /// The downloaded file is not the model (corrupted in transit or on the server); deleted.
    #[error("SHA-256 mismatch: expected {expected}, got {actual}; the file was deleted")]
    HashMismatch { expected: String, actual: String },

    /// Another download of the same model is running.
    #[error("another download of {0} is in progress")]
    Busy(String),

    #[error("download cancelled")]
    Cancelled,
}

pub(crate) fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |source| StoreError::Io { path, source }
}
