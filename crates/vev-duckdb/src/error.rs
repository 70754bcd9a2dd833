//! The extension's error: a stable code and a message, shown to DuckDB as
//! `vev <code>: <message>` (DuckDB prefixes it with the failing function's context).

use std::fmt;

/// An error of one call: Vev's own (`tx/*`, `query/*`, `storage/*`, ...) or the extension's
/// (`duckdb/*`: a bad argument, a value a column cannot hold, a panic caught at the boundary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtError {
    /// The stable code, e.g. `query/unknown-attribute` or `duckdb/bad-argument`.
    pub code: &'static str,
    /// What went wrong, naming the offending value.
    pub message: String,
}

impl ExtError {
    /// An error with the extension's own code.
    pub fn new(code: &'static str, message: impl Into<String>) -> ExtError {
        ExtError {
            code,
            message: message.into(),
        }
    }

    /// A bad argument to a table function (`duckdb/bad-argument`).
    pub fn argument(message: impl Into<String>) -> ExtError {
        ExtError::new("duckdb/bad-argument", message)
    }
}

impl fmt::Display for ExtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vev {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ExtError {}

impl From<vev::Error> for ExtError {
    fn from(e: vev::Error) -> ExtError {
        ExtError::new(e.code(), e.to_string())
    }
}

impl From<vev::QueryError> for ExtError {
    fn from(e: vev::QueryError) -> ExtError {
        ExtError::new(e.code(), e.to_string())
    }
}

impl From<vev::StorageError> for ExtError {
    fn from(e: vev::StorageError) -> ExtError {
        ExtError::new(e.code(), e.to_string())
    }
}

impl From<vev::edn::ParseError> for ExtError {
    fn from(e: vev::edn::ParseError) -> ExtError {
        ExtError::new(e.code(), e.to_string())
    }
}

impl From<vev::PullError> for ExtError {
    fn from(e: vev::PullError) -> ExtError {
        ExtError::new(e.code(), e.to_string())
    }
}

/// The result of one step of a call.
pub type Result<T> = std::result::Result<T, ExtError>;
