use std::fmt;

/// What a command can fail with; each kind maps to an exit code.
#[derive(Debug)]
pub enum CliError {
    /// A command line that parses but makes no sense (bad JSON, empty ids): exit 2.
    Usage(String),
    /// The engine refused or failed: exit 1.
    Engine(tern::Error),
    /// Anything else at run time (terminal I/O, a missing default model): exit 1.
    Other(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Engine(_) | CliError::Other(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Other(m) => f.write_str(m),
            CliError::Engine(e) => write!(f, "{e}"),
        }
    }
}

impl From<tern::Error> for CliError {
    fn from(e: tern::Error) -> Self {
        CliError::Engine(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Other(e.to_string())
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;
