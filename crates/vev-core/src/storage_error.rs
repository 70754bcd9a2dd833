//! Errors of the storage family: opening, committing to and reading from durable storage.
//! Every variant has a stable code (`StorageError::code`). Bytes read from disk are never
//! trusted: anything malformed is `Corruption`, naming what was being read.

/// A storage failure. `Clone` so that one failure can be reported to every reader it affects.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageError {
    /// The file's contents are not what Vev wrote: a checksum mismatch, a truncated record,
    /// an impossible value. `what` names the record (`segment 17`, `log row t=42`).
    #[error("{what} is corrupt: {reason}")]
    Corruption { what: String, reason: String },
    /// Another connection holds the writer lock of this database.
    #[error("database {path} is locked by another writer{waited}")]
    Locked { path: String, waited: String },
    /// The file was written by an unknown version of Vev's file format.
    #[error(
        "database {path} has file format version {found}; this build reads version {supported}"
    )]
    FormatVersion {
        path: String,
        found: i64,
        supported: i64,
    },
    /// The file exists but is not a Vev database (another application's SQLite file, or not
    /// SQLite at all).
    #[error("{path} is not a vev database: {reason}")]
    NotVev { path: String, reason: String },
    /// The operating system or SQLite failed an operation.
    #[error("storage i/o failed during {op}: {reason}")]
    Io { op: String, reason: String },
    /// A write was attempted through a read-only connection.
    #[error("connection to {path} is read-only")]
    ReadOnly { path: String },
    /// A file Vev was asked to create (a backup's destination) already exists.
    #[error("{path} already exists")]
    Exists { path: String },
    /// A fault injected by a test backend.
    #[error("injected fault at {op} (operation {n})")]
    Injected { op: String, n: u64 },
}

impl StorageError {
    /// The stable code, e.g. `storage/corruption`.
    pub fn code(&self) -> &'static str {
        match self {
            StorageError::Corruption { .. } => "storage/corruption",
            StorageError::Locked { .. } => "storage/locked",
            StorageError::FormatVersion { .. } => "storage/format-version",
            StorageError::NotVev { .. } => "storage/not-vev",
            StorageError::Io { .. } => "storage/io",
            StorageError::ReadOnly { .. } => "storage/read-only",
            StorageError::Exists { .. } => "storage/exists",
            StorageError::Injected { .. } => "storage/injected",
        }
    }

    pub fn corruption(what: impl Into<String>, reason: impl Into<String>) -> StorageError {
        StorageError::Corruption {
            what: what.into(),
            reason: reason.into(),
        }
    }
}
