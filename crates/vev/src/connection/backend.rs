//! The storage backends, a closed set: a SQLite file (`vev-sqlite`) or a PostgreSQL schema
//! (`vev-postgres`). The connection calls one method here per storage operation, and each
//! forwards to its backend; what only one backend can do (SQLite's online backup) says so.

use std::path::Path;
use std::sync::Arc;

use vev_core::{Datom, StorageError};
use vev_db::persist::{Checkpoint, LogRecord, SegmentCache};
use vev_db::Db;
use vev_sqlite::{BackupProgress, BackupReport, VerifyReport};

/// One backend's store. Held once per connection, behind an `Arc`, so the variants' sizes
/// (a PostgreSQL store holds its clients' configurations) do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    Sqlite(vev_sqlite::Store),
    Postgres(vev_postgres::Store),
}

/// What changes when another connection commits or checkpoints: SQLite's `data_version`,
/// or PostgreSQL's last log t and root.
pub(crate) type Version = [i64; 3];

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            Backend::Sqlite($s) => $e,
            Backend::Postgres($s) => $e,
        }
    };
}

impl Backend {
    pub(crate) fn is_read_only(&self) -> bool {
        each!(self, s => s.is_read_only())
    }

    pub(crate) fn cache(&self) -> &Arc<SegmentCache> {
        each!(self, s => s.cache())
    }

    /// The file's path, or the PostgreSQL URL without credentials.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Backend::Sqlite(s) => s.path(),
            Backend::Postgres(s) => Path::new(s.location()),
        }
    }

    pub(crate) fn data_version(&self) -> Result<Version, StorageError> {
        match self {
            Backend::Sqlite(s) => s.data_version().map(|v| [v, 0, 0]),
            Backend::Postgres(s) => s.data_version(),
        }
    }

    pub(crate) fn catch_up(&self, db: &Db) -> Result<Db, StorageError> {
        each!(self, s => s.catch_up(db))
    }

    pub(crate) fn append(&self, txs: &[(&Db, &[Datom])]) -> Result<(), StorageError> {
        each!(self, s => s.append(txs))
    }

    pub(crate) fn append_many(
        &self,
        records: &[LogRecord],
        fulltext: &[vev_db::fulltext::NewEntry],
    ) -> Result<(), StorageError> {
        each!(self, s => s.append_many(records, fulltext))
    }

    pub(crate) fn checkpoint(&self, db: &Db) -> Result<Db, StorageError> {
        each!(self, s => s.checkpoint(db))
    }

    pub(crate) fn prepare_checkpoint(&self, db: &Db) -> Result<Checkpoint, StorageError> {
        each!(self, s => s.prepare_checkpoint(db))
    }

    pub(crate) fn write_checkpoint(&self, cp: &mut Checkpoint) -> Result<(), StorageError> {
        each!(self, s => s.write_checkpoint(cp))
    }

    pub(crate) fn write_compaction(
        &self,
        c: &vev_db::fulltext::Compaction,
    ) -> Result<u64, StorageError> {
        each!(self, s => s.write_compaction(c))
    }

    pub(crate) fn store_fulltext_entries(&self, db: &Db) -> Result<Db, StorageError> {
        each!(self, s => s.store_fulltext_entries(db))
    }

    pub(crate) fn verify(&self, db: &Db) -> Result<VerifyReport, StorageError> {
        match self {
            Backend::Sqlite(s) => s.verify(db),
            Backend::Postgres(s) => s.verify(db).map(|r| VerifyReport {
                log_rows: r.log_rows,
                log_datoms: r.log_datoms,
                segments: r.segments,
                garbage_segments: r.garbage_segments,
                index_datoms: r.index_datoms,
                fulltext_segments: r.fulltext_segments,
                fulltext_garbage_segments: r.fulltext_garbage_segments,
                fulltext_documents: r.fulltext_documents,
            }),
        }
    }

    pub(crate) fn backup(
        &self,
        dest: &Path,
        progress: &mut dyn FnMut(&BackupProgress),
    ) -> Result<BackupReport, StorageError> {
        match self {
            Backend::Sqlite(s) => s.backup(dest, progress),
            Backend::Postgres(_) => Err(StorageError::io_kind(
                "backup",
                std::io::ErrorKind::Unsupported,
                "backup copies a sqlite file; copy a postgresql database into a file with \
                 vev copy, or back it up with postgresql's own tools (pg_dump of its schema)",
            )),
        }
    }
}
