//! Errors of the storage family: opening, committing to and reading from durable storage.
//! Every variant has a stable code (`StorageError::code`). Bytes read from disk are never
//! trusted: anything malformed is `Corruption`, naming what was being read.

/// A storage failure. `Clone` so that one failure can be reported to every reader it affects.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageError {
    /// The file's contents are not what Vev wrote: a checksum mismatch, a truncated record,
    /// an impossible value.
    #[error("{what} is corrupt: {reason}")]
    Corruption {
        /// The record being read (`segment 17`, `log row t=42`).
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Another connection holds the writer lock of this database.
    #[error("database {path} is locked by another writer{}", waited_suffix(.waited))]
    Locked {
        /// The database file's path.
        path: String,
        /// How long the open waited for the lock (`LockMode::Wait`), `None` when it failed at
        /// once.
        waited: Option<std::time::Duration>,
    },
    /// The file was written by an unknown version of Vev's file format.
    #[error(
        "database {path} has file format version {found}; this build reads version {supported}"
    )]
    FormatVersion {
        /// The database file's path.
        path: String,
        /// The format version recorded in the file.
        found: i64,
        /// The one format version this build reads and writes.
        supported: i64,
    },
    /// The file exists but is not a Vev database (another application's SQLite file, or not
    /// SQLite at all).
    #[error("{path} is not a vev database: {reason}")]
    NotVev {
        /// The file's path.
        path: String,
        /// Why it is not taken for one (`the file is empty`, SQLite's message, ...).
        reason: String,
    },
    /// The file is shorter than its own header says: it was cut off (a partial copy or
    /// download, a full disk).
    #[error(
        "database {path} is truncated: the file has {size} bytes but its header says {expected}"
    )]
    Truncated {
        /// The database file's path.
        path: String,
        /// The file's length, in bytes.
        size: u64,
        /// The length its header implies, in bytes.
        expected: u64,
    },
    /// The path given as the database is a directory.
    #[error("{path} is a directory, not a database file")]
    IsDirectory {
        /// The path given.
        path: String,
    },
    /// SQLite cannot create its `-wal` and `-shm` files beside the database file (a writer
    /// needs both, a reader the `-shm`) because the directory is read-only.
    #[error(
        "cannot open {path}: its directory {dir} is read-only, and sqlite needs its -wal and -shm files beside the database ({reason})"
    )]
    ReadOnlyDirectory {
        /// The database file's path.
        path: String,
        /// The read-only directory that holds it.
        dir: String,
        /// SQLite's or the operating system's message.
        reason: String,
    },
    /// The operating system or SQLite failed an operation.
    #[error("storage i/o failed during {op}: {message}")]
    Io {
        /// The operation that failed, as a phrase (`open`, `read the file header`, ...).
        op: String,
        /// The operating system's error kind, `Other` when the failure carries none.
        kind: std::io::ErrorKind,
        /// SQLite's extended result code, when SQLite reported the failure.
        sqlite_code: Option<i32>,
        /// The failure's text, with the path where there is one.
        message: String,
    },
    /// A write was attempted through a read-only connection.
    #[error("connection to {path} is read-only")]
    ReadOnly {
        /// The database file's path.
        path: String,
    },
    /// A file Vev was asked to create (a backup's destination) already exists.
    #[error("{path} already exists")]
    Exists {
        /// The existing file's path.
        path: String,
    },
    /// A database Vev was asked to fill (`vev copy`'s destination) already holds
    /// transactions: a copy goes only into an empty database, so it never mixes two
    /// histories.
    #[error("{location} is not empty: it holds transactions up to t={basis_t}; a copy needs an empty destination")]
    NotEmpty {
        /// The destination (a file's path, or a URL without credentials).
        location: String,
        /// The basis-t of the database it holds.
        basis_t: u64,
    },
    /// The storage service (a PostgreSQL server) cannot be reached or dropped the
    /// connection: nothing is known to be wrong with the database, try again later.
    #[error("storage {location} is unavailable during {op}: {message}")]
    Unavailable {
        /// The database's location, without credentials (`postgres://vev@127.0.0.1:5433/app`).
        location: String,
        /// The operation that failed, as a phrase (`connect`, `log write`, ...).
        op: String,
        /// The client's message.
        message: String,
    },
    /// This writer lost its lease: another writer took the database over (after this one's
    /// lease expired), so this connection accepts no more transactions. Reopen to write.
    #[error(
        "writer lease on {location} lost: generation {held} was taken over (now {current}); this connection accepts no more transactions"
    )]
    Fenced {
        /// The database's location, without credentials.
        location: String,
        /// The lease generation this writer held.
        held: i64,
        /// The generation storage holds now (`-1` when the lease row is gone).
        current: i64,
    },
    /// A fault injected by a test backend.
    #[error("injected fault at {op} (operation {n})")]
    Injected {
        /// The operation the fault made fail.
        op: String,
        /// Its number among the operations the test backend counted, from 1.
        n: u64,
    },
}

impl StorageError {
    /// The stable code, e.g. `storage/corruption`.
    pub fn code(&self) -> &'static str {
        match self {
            StorageError::Corruption { .. } => "storage/corruption",
            StorageError::Locked { .. } => "storage/locked",
            StorageError::FormatVersion { .. } => "storage/format-version",
            StorageError::NotVev { .. } => "storage/not-vev",
            StorageError::Truncated { .. } => "storage/truncated",
            StorageError::IsDirectory { .. } => "storage/is-directory",
            StorageError::ReadOnlyDirectory { .. } => "storage/read-only-directory",
            StorageError::Io { .. } => "storage/io",
            StorageError::ReadOnly { .. } => "storage/read-only",
            StorageError::Exists { .. } => "storage/exists",
            StorageError::NotEmpty { .. } => "storage/not-empty",
            StorageError::Injected { .. } => "storage/injected",
            StorageError::Unavailable { .. } => "storage/unavailable",
            StorageError::Fenced { .. } => "storage/fenced",
        }
    }

    /// An operating-system failure of `op` on the file at `path`.
    pub fn from_io(op: impl Into<String>, path: &str, e: &std::io::Error) -> StorageError {
        StorageError::Io {
            op: op.into(),
            kind: e.kind(),
            sqlite_code: None,
            message: format!("{path}: {e}"),
        }
    }

    /// A failure of `op` of the given kind that no `std::io::Error` describes.
    pub fn io_kind(
        op: impl Into<String>,
        kind: std::io::ErrorKind,
        message: impl Into<String>,
    ) -> StorageError {
        StorageError::Io {
            op: op.into(),
            kind,
            sqlite_code: None,
            message: message.into(),
        }
    }

    /// A `Corruption` of the record `what`.
    pub fn corruption(what: impl Into<String>, reason: impl Into<String>) -> StorageError {
        StorageError::Corruption {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

fn waited_suffix(waited: &Option<std::time::Duration>) -> String {
    match waited {
        Some(d) => format!(" (waited {} ms)", d.as_millis()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_has_its_own_code() {
        let s = String::new;
        let errors = [
            StorageError::corruption("x", "y"),
            StorageError::Locked {
                path: s(),
                waited: None,
            },
            StorageError::FormatVersion {
                path: s(),
                found: 1,
                supported: 2,
            },
            StorageError::NotVev {
                path: s(),
                reason: s(),
            },
            StorageError::Truncated {
                path: s(),
                size: 1,
                expected: 2,
            },
            StorageError::IsDirectory { path: s() },
            StorageError::ReadOnlyDirectory {
                path: s(),
                dir: s(),
                reason: s(),
            },
            StorageError::io_kind("open", std::io::ErrorKind::NotFound, "x"),
            StorageError::ReadOnly { path: s() },
            StorageError::Injected { op: s(), n: 1 },
            StorageError::Exists { path: s() },
            StorageError::NotEmpty {
                location: s(),
                basis_t: 3,
            },
            StorageError::Unavailable {
                location: s(),
                op: s(),
                message: s(),
            },
            StorageError::Fenced {
                location: s(),
                held: 1,
                current: 2,
            },
        ];
        let codes: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), errors.len(), "{codes:?}");
        assert!(codes.iter().all(|c| c.starts_with("storage/")), "{codes:?}");
        let e = StorageError::Truncated {
            path: "a.vev".into(),
            size: 3000,
            expected: 28672,
        };
        assert_eq!(
            e.to_string(),
            "database a.vev is truncated: the file has 3000 bytes but its header says 28672"
        );
    }

    #[test]
    fn io_errors_keep_their_kind_and_locked_its_wait() {
        let e = StorageError::from_io(
            "open",
            "a.vev",
            &std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert!(matches!(
            e,
            StorageError::Io {
                kind: std::io::ErrorKind::PermissionDenied,
                sqlite_code: None,
                ..
            }
        ));
        assert!(e
            .to_string()
            .starts_with("storage i/o failed during open: a.vev: "));
        let locked = |waited| StorageError::Locked {
            path: "a.vev".into(),
            waited,
        };
        assert_eq!(
            locked(None).to_string(),
            "database a.vev is locked by another writer"
        );
        assert_eq!(
            locked(Some(std::time::Duration::from_millis(250))).to_string(),
            "database a.vev is locked by another writer (waited 250 ms)"
        );
    }
}
