//! `Connection::copy_to`: a database moved to another store (a file, or a PostgreSQL
//! schema), with its whole history.
//!
//! What moves is the log itself: the source's log records (each transaction's datoms as it
//! committed them, its `:db/txInstant` and the user-partition counter after it), read in
//! order through the source's store, so the destination has the same basis-t values,
//! entity ids, instants and history. Nothing is re-transacted: no transaction function
//! runs again and no check is made a second time.
//!
//! The steps, and why each:
//! 1. Open the destination as its writer (on PostgreSQL that takes the writer lease, as any
//!    writer does) and refuse one that holds any transaction (`storage/not-empty`), so two
//!    histories are never mixed and a copy never lands on a database someone uses.
//! 2. Replay each record on the destination's empty database (`persist::replay_owned`,
//!    what opening a store does), which builds the indexes, the schema and the full-text
//!    index the destination's checkpoint will write, and checks each record follows the one
//!    before.
//! 3. Append every record, with the full-text segment of them all, in one write batch of
//!    the destination (one SQLite write batch, or one PostgreSQL transaction whose first
//!    statement checks the lease generation: a writer that took the lease over meanwhile
//!    makes it commit nothing, `storage/fenced`). So a crash or an error before that commit
//!    leaves the destination empty, and a retry starts afresh; after it, the destination
//!    holds the whole database.
//! 4. Checkpoint (index segments and a root), so the destination opens from its root
//!    rather than replaying the whole log. A failure here leaves a complete destination
//!    without a root (opening replays its log; the next writer's close checkpoints it), and
//!    is reported as the copy's error.
//! 5. Close the destination and open it again read-only, from storage, and compare it with
//!    the source as it was copied: the basis-t, the user-partition counter, the datoms of
//!    the four indexes of the current and of the history view, and the full-text index
//!    (checked against the destination's datoms, with the source's count of live
//!    documents).
//!
//! The source may be any durable connection, read-only ones included, while other
//! processes write to it: what is copied is the database as of the basis-t it had when
//! the copy started (records are immutable once written). The whole log is held in memory
//! (decoded, and encoded again for the write batch), with the database it builds; the write
//! batch is as large as the log. Into PostgreSQL the records travel as one array
//! parameter, which PostgreSQL caps at 1 GB: a larger log cannot be copied there yet.

use std::path::Path;
#[cfg(feature = "testing")]
use std::sync::Arc;
use std::time::{Duration, Instant};

use vev_core::{IndexOrder, StorageError};
use vev_db::persist::LogRecord;
use vev_db::Db;

use super::{Connection, OpenOptions};
use crate::error::Error;

/// Log records read from the source at a time (between two progress reports).
const READ_RECORDS: u64 = 4096;

/// How `Connection::copy_to` writes and checks the destination.
#[derive(Clone)]
pub struct CopyOptions {
    /// How the destination is opened as a writer: lock or lease waiting (`lock`), the
    /// lease's duration, the segment cache's size. `read_only` and `create` are ignored (a
    /// copy creates a missing file, and writes).
    pub open: OpenOptions,
    /// Open the destination again after the copy and compare it with the source (default
    /// true; it reads every datom of both once more).
    pub verify: bool,
    /// For tests: called after the records are read and replayed and before the write
    /// batch that commits them (the `testing` feature).
    #[cfg(feature = "testing")]
    pub before_commit: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Default for CopyOptions {
    fn default() -> CopyOptions {
        CopyOptions {
            open: OpenOptions::default(),
            verify: true,
            #[cfg(feature = "testing")]
            before_commit: None,
        }
    }
}

impl std::fmt::Debug for CopyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyOptions")
            .field("open", &self.open)
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

/// What a copy is doing (`CopyProgress::stage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyStage {
    /// Reading the source's log records and replaying them.
    Reading,
    /// Committing them to the destination in one write batch.
    Writing,
    /// Writing the destination's index segments and root.
    Checkpointing,
    /// Reading the destination back and comparing it with the source.
    Verifying,
}

/// Progress of `Connection::copy_to`, reported as each stage starts and after each chunk
/// of records read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyProgress {
    /// The stage the copy is in.
    pub stage: CopyStage,
    /// Log records read so far.
    pub records: u64,
    /// Log records to copy (the source's basis-t).
    pub records_total: u64,
    /// Datoms in the records read so far.
    pub datoms: u64,
    /// Since `copy_to` was called.
    pub elapsed: Duration,
}

/// What `Connection::copy_to` copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyReport {
    /// The destination (a path, or a URL without credentials).
    pub dest: String,
    /// The basis-t copied: the destination's, the source's when the copy started.
    pub basis_t: u64,
    /// Log records (transactions) copied.
    pub records: u64,
    /// Datoms in them (each transaction's tx-data, its `:db/txInstant` included).
    pub datoms: u64,
    /// Bytes written to the destination: log records, full-text segments and manifest
    /// entries, index segments and the root (before checksums).
    pub bytes: u64,
    /// Index datoms compared with the source (zero without `verify`).
    pub verified_datoms: u64,
    /// Since `copy_to` was called.
    pub elapsed: Duration,
}

impl Connection {
    /// Copy this database, with its whole history, into the empty database at `dest` (a
    /// file path, created if missing, or a `postgres://` URL): the same log records, so the
    /// same basis-t values, entity ids and instants, in one write batch of the destination,
    /// then a checkpoint; then (with `opts.verify`) the destination is read back and
    /// compared with the source. A destination that holds any transaction is refused
    /// (`storage/not-empty`). A failure or crash before the write batch commits leaves the
    /// destination empty, so the copy can be run again. `progress` is called as each stage
    /// starts and after each chunk of records read. An in-memory database has no log to
    /// copy (`storage/io` of kind `Unsupported`). Module doc: `connection/copy.rs`.
    #[allow(clippy::result_large_err)] // `Error`, as every method here returns
    pub fn copy_to(
        &self,
        dest: impl AsRef<Path>,
        opts: &CopyOptions,
        progress: &mut dyn FnMut(&CopyProgress),
    ) -> Result<CopyReport, Error> {
        let started = Instant::now();
        if self.inner.durable.is_none() {
            return Err(StorageError::io_kind(
                "copy",
                std::io::ErrorKind::Unsupported,
                "an in-memory database has no log to copy",
            )
            .into());
        }
        let source = self.sync()?;
        let total = source.basis_t();
        let mut at = CopyProgress {
            stage: CopyStage::Reading,
            records: 0,
            records_total: total,
            datoms: 0,
            elapsed: Duration::ZERO,
        };
        let mut report = |stage: CopyStage, at: &mut CopyProgress| {
            at.stage = stage;
            at.elapsed = started.elapsed();
            progress(at);
        };
        let writer_opts = OpenOptions {
            read_only: false,
            create: true,
            ..opts.open.clone()
        };
        let target = Connection::open_with(dest.as_ref(), &writer_opts)?;
        let location = target
            .path()
            .map_or_else(String::new, |p| p.display().to_string());
        let bytes = target.fill(&source, opts, &mut at, &mut report)?;
        // Closed (a PostgreSQL lease released), so that it is read back as any reader would.
        drop(target);
        let mut verified_datoms = 0;
        if opts.verify {
            report(CopyStage::Verifying, &mut at);
            let reader = Connection::open_with(
                dest.as_ref(),
                &OpenOptions {
                    lease: opts.open.lease,
                    cache_datoms_max: opts.open.cache_datoms_max,
                    ..OpenOptions::read_only()
                },
            )?;
            verified_datoms = compare(&source, &reader.db(), &location)?;
        }
        Ok(CopyReport {
            dest: location,
            basis_t: total,
            records: at.records,
            datoms: at.datoms,
            bytes,
            verified_datoms,
            elapsed: started.elapsed(),
        })
    }

    /// Steps 1 to 4 of the module doc on `self`, the destination opened as a writer:
    /// refuse it unless empty, replay the source's records on it, commit them in one write
    /// batch, checkpoint. Returns the bytes written.
    #[allow(clippy::result_large_err)] // `Error`, as every method here returns
    fn fill(
        &self,
        source: &Db,
        opts: &CopyOptions,
        at: &mut CopyProgress,
        report: &mut dyn FnMut(CopyStage, &mut CopyProgress),
    ) -> Result<u64, Error> {
        let mut writer = vev_core::sync::lock(&self.inner.writer);
        let durable =
            self.inner.durable.as_ref().ok_or_else(|| {
                StorageError::io_kind("copy", std::io::ErrorKind::Other, "no store")
            })?;
        let held = self.latest().basis_t();
        if held != 0 {
            return Err(StorageError::NotEmpty {
                location: durable.store.path().display().to_string(),
                basis_t: held,
            }
            .into());
        }
        report(CopyStage::Reading, at);
        let (db, records) = read_and_replay(source, self.latest(), at, &mut |a| {
            report(CopyStage::Reading, a)
        })?;
        let (db, fulltext) = db.take_fulltext();
        #[cfg(feature = "testing")]
        if let Some(hook) = &opts.before_commit {
            hook();
        }
        #[cfg(not(feature = "testing"))]
        let _ = opts;
        report(CopyStage::Writing, at);
        let mut bytes: u64 = records.iter().map(|r| r.encode().len() as u64).sum();
        bytes += fulltext
            .iter()
            .map(|e| (e.record.len() + e.segment.len()) as u64)
            .sum::<u64>();
        durable.store.append_many(&records, &fulltext)?;
        drop(records);
        // Published with its tail: if the checkpoint fails, closing checkpoints it.
        writer.tail_datoms = at.datoms as usize;
        self.publish(db);
        report(CopyStage::Checkpointing, at);
        let mut cp = durable.store.prepare_checkpoint(&self.latest())?;
        bytes += cp.root.len() as u64;
        bytes += cp
            .segments
            .iter()
            .map(|s| s.payload.len() as u64)
            .sum::<u64>();
        durable.store.write_checkpoint(&mut cp)?;
        self.publish(cp.db);
        writer.tail_datoms = 0;
        Ok(bytes)
    }
}

/// The source's log records 1..=its basis-t, read a chunk at a time through its store, each
/// replayed on `db` (the destination's empty database); returns the database they build
/// and the records.
fn read_and_replay(
    source: &Db,
    mut db: Db,
    at: &mut CopyProgress,
    progress: &mut dyn FnMut(&mut CopyProgress),
) -> Result<(Db, Vec<LogRecord>), StorageError> {
    let total = source.basis_t();
    let cache = source.segment_cache().ok_or_else(|| {
        StorageError::io_kind(
            "copy",
            std::io::ErrorKind::Unsupported,
            "the source database has no store to read its log from",
        )
    })?;
    let mark = db.storage_mark();
    let mut records = Vec::with_capacity(total as usize);
    let mut first = 1;
    while first <= total {
        let last = total.min(first + READ_RECORDS - 1);
        for rec in cache.read_log(first, last)? {
            db = vev_db::persist::replay_owned(db, &rec).map_err(|e| {
                StorageError::corruption(format!("log record t={} of the source", rec.t), e.0)
            })?;
            at.datoms += rec.datoms.len() as u64;
            records.push(rec);
        }
        at.records = last;
        progress(at);
        first = last + 1;
    }
    match db.storage_failure_since(mark) {
        Some(f) => Err(f),
        None => Ok((db, records)),
    }
}

/// Compare the copy with the source: basis-t, user-partition counter, every index of the
/// current and the history view datom by datom, and the full-text index. Returns the
/// datoms compared.
fn compare(source: &Db, copy: &Db, location: &str) -> Result<u64, StorageError> {
    let differs =
        |reason: String| StorageError::corruption(format!("the copy at {location}"), reason);
    if copy.basis_t() != source.basis_t() || copy.next_user() != source.next_user() {
        return Err(differs(format!(
            "it is at t={} with next user id {}, the source at t={} with {}",
            copy.basis_t(),
            copy.next_user(),
            source.basis_t(),
            source.next_user()
        )));
    }
    let mut compared = 0;
    for (view, a, b) in [
        ("current", source.current(), copy.current()),
        ("history", source.history(), copy.history()),
    ] {
        for order in [
            IndexOrder::Eavt,
            IndexOrder::Aevt,
            IndexOrder::Avet,
            IndexOrder::Vaet,
        ] {
            let mut xs = a.datoms(order, &[]);
            let mut ys = b.datoms(order, &[]);
            let mut n: u64 = 0;
            loop {
                match (xs.next().transpose()?, ys.next().transpose()?) {
                    (None, None) => break,
                    (Some(x), Some(y)) if x == y => n += 1,
                    (x, y) => {
                        return Err(differs(format!(
                            "datom {n} of its {view} {order:?} index is {y:?}, the source's {x:?}"
                        )))
                    }
                }
            }
            compared += n;
        }
    }
    copy.verify_fulltext()?;
    let live = |db: &Db| {
        let s = db.fulltext_stats();
        s.documents - s.deleted_documents
    };
    if live(copy) != live(source) {
        return Err(differs(format!(
            "its full-text index has {} live documents, the source's {}",
            live(copy),
            live(source)
        )));
    }
    Ok(compared)
}
