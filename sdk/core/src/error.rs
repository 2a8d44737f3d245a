//! The one error type of the SDK. Messages name files, keys and counts, never prompt or answer text.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What [`Error::Write`] was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp {
    CreateDir,
    Write,
    Rename,
    Lock,
    Remove,
}

impl std::fmt::Display for WriteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriteOp::CreateDir => "create the directory",
            WriteOp::Write => "write",
            WriteOp::Rename => "rename into place",
            WriteOp::Lock => "lock",
            WriteOp::Remove => "remove",
        })
    }
}

impl Error {
    /// A closure making [`Error::Write`] of `op` on `path`, for `map_err`.
    pub(crate) fn write(op: WriteOp, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Write { op, path: path.to_path_buf(), source }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("model file not found: {path}")]
    FileNotFound { path: PathBuf },

    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    /// A file the SDK keeps for the app (history, tuning) could not be created, written, renamed,
    /// locked or removed.
    #[error("cannot {op} {path}: {source}")]
    Write { op: WriteOp, path: PathBuf, source: std::io::Error },

    #[error("not a GGUF file (magic bytes {magic:02x?})")]
    NotGguf { magic: [u8; 4] },

    #[error("unsupported GGUF version {0} (supported: 2, 3)")]
    UnsupportedVersion(u32),

    /// The file ends before a structure it declares, or an offset points outside it.
    #[error("truncated GGUF: {what} needs bytes {start}..{end} but the file has {len}")]
    Truncated { what: String, start: u64, end: u64, len: u64 },

    /// Structurally invalid content (bad UTF-8, impossible counts, misaligned data, ...).
    #[error("corrupt GGUF: {0}")]
    Corrupt(String),

    /// `supported` lists the architectures this build loads (filled in by the loader, so that
    /// the error type needs nothing of the model).
    #[error("unsupported architecture `{name}` (supported: {supported})")]
    UnsupportedArchitecture { name: String, supported: String },

    #[error("tensor `{tensor}` has unsupported type {ty}")]
    UnsupportedTensorType { tensor: String, ty: String },

    #[error("missing metadata key `{0}`")]
    MissingMetadata(String),

    #[error("metadata key `{key}` is {found}, expected {expected}")]
    MetadataType { key: String, expected: &'static str, found: String },

    #[error("missing tensor `{0}`")]
    MissingTensor(String),

    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    TensorShape { name: String, expected: Vec<u64>, found: Vec<u64> },

    #[error("context window exceeded: {needed} tokens needed, {limit} available")]
    ContextOverflow { needed: usize, limit: usize },

    #[error("invalid option: {0}")]
    InvalidOption(String),

    #[error("generation cancelled")]
    Cancelled,

    #[error("chat template error: {0}")]
    Template(String),

    #[error("tokenizer error: {0}")]
    Tokenizer(String),

    /// The CPU topology could not be read (sysfs/procfs missing or malformed).
    #[error("CPU topology: {0}")]
    Topology(String),

    /// An energy meter could not be read, or energy tuning failed.
    #[error("energy: {0}")]
    Energy(String),

    /// A second request on a session that is still generating.
    #[error("session is busy with another request")]
    Busy,

    /// A JSON Schema, grammar or tool definition that cannot be used; reported before generation.
    #[error("grammar error: {0}")]
    Grammar(String),

    /// Constrained generation could not continue (the grammar rejected a committed token).
    #[error("constraint error: {0}")]
    Constraint(String),
}
