//! Vev's durable storage: one SQLite file (`rusqlite` with its bundled SQLite).
//!
//! The file holds three tables (byte-level layout in `docs/design/file-format.md`):
//! - `vev_log`: one row per committed transaction, keyed by basis-t, holding the encoded
//!   `LogRecord` plus a CRC-32. Appending rows is one SQLite write batch in WAL mode with
//!   `synchronous=FULL`, so a transaction is durable (one WAL sync) before its report returns,
//!   and a crash leaves it whole or absent. The rows of a group of transactions committed
//!   together (`Store::append`) share that write batch and its sync.
//! - `vev_segment`: immutable index segments (persisted subtrees), written by checkpoints,
//!   never changed afterwards, so readers in other processes can load them at any time.
//! - `vev_root`: one row naming the latest checkpoint: its basis-t and the root record (the
//!   top of every index tree, pointing at segments).
//! - `vev_garbage`: segments no root names any more (those the previous root named and the
//!   new one does not, and those of checkpoints that failed before their root), with when
//!   they became garbage. A checkpoint deletes the segments that have been garbage for
//!   longer than the grace period, so the file does not grow with every checkpoint while a
//!   reader still on an older root keeps its segments for that long.
//!
//! Opening reads the root and the log rows after it, not every datom; segments load on demand.
//! The format version lives in SQLite's `user_version`, the file's identity in its
//! `application_id`; both are checked on open. One writer per file is enforced with an
//! exclusive `flock` on the database file, held for the writer's life (`storage/locked`).
//!
//! Only this crate knows SQL.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod probe;

use rusqlite::{params, OpenFlags, OptionalExtension, TransactionBehavior};
use vev_core::{BasisT, StorageError};
use vev_db::persist::{self, Checkpoint, LogRecord, SegmentCache, SegmentStore};
use vev_db::Db;

mod backup;
mod create;
mod faults;
mod fulltext;
#[cfg(not(feature = "testing"))]
use faults::FaultPlan;
#[cfg(feature = "testing")]
pub use faults::{flip_log_byte, flip_segment_byte, FaultPlan};
#[cfg(unix)]
mod lock;
#[cfg(not(unix))]
#[path = "lock_portable.rs"]
mod lock;
// The portable lock is compiled on Unix too, so that its tests run here.
#[cfg(all(unix, test))]
mod lock_portable;
pub use backup::{BackupProgress, BackupReport};
use lock::{TryLock, WriterLock};

/// The version of the file format this build reads and writes.
pub const FORMAT_VERSION: i64 = 7;
/// The older versions this build also reads, and a writer migrates by marking them version
/// 6. Version 4 added the full-text tables and the root's full-text section (a version-3
/// file is a version-4 file without full text: migrating creates the tables); version 5
/// drops the log's tree from the root (the log rows are the log), and reads older roots by
/// skipping theirs, whose segments the first new checkpoint makes garbage; version 6 may
/// store a segment or log record LZ4-compressed (a new kind byte, which a reader of version
/// 5 would refuse as corrupt), and reads the raw ones of older files as they are, so
/// migrating only marks the file; version 7 may keep a small full-text segment in its
/// manifest row (a `payload` column, which migrating adds; a version-6 reader would find
/// no parts for it).
pub const FORMAT_VERSIONS_MIGRATED: [i64; 4] = [3, 4, 5, 6];
/// Segments per write batch when a checkpoint writes them.
const SEGMENTS_PER_BATCH: usize = 1024;

/// SQLite's `application_id` of a Vev file: "VEV1" in ASCII.
pub const APPLICATION_ID: i64 = 0x5645_5631;

/// What a second writer does when the writer lock is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Fail at once with `storage/locked`.
    Fail,
    /// Retry until the lock is free or the timeout passes, then `storage/locked`.
    Wait(Duration),
}

/// How to open a database file.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Open for reading only: no writer lock, no writes.
    pub read_only: bool,
    /// Create the file when it does not exist (writers only).
    pub create: bool,
    pub lock: LockMode,
    /// Decoded segment datoms kept in memory.
    pub cache_datoms_max: usize,
    /// Storage operations to fail on purpose (tests; the `testing` feature).
    #[cfg(feature = "testing")]
    pub faults: Option<Arc<FaultPlan>>,
    /// How long a segment stays in the file after no root names it (for readers, in this or
    /// other processes, still reading an older database); `None` keeps every segment.
    pub gc_grace: Option<Duration>,
    /// A pause before each full-text segment write (a benchmark's stand-in for an object
    /// store's upload latency); `None` for none.
    pub segment_write_delay: Option<Duration>,
}

impl StoreOptions {
    #[cfg(feature = "testing")]
    fn faults(&self) -> Option<Arc<FaultPlan>> {
        self.faults.clone()
    }

    #[cfg(not(feature = "testing"))]
    fn faults(&self) -> Option<Arc<FaultPlan>> {
        None
    }
}

/// The default `gc_grace`: an hour.
pub const GC_GRACE_DEFAULT: Duration = Duration::from_secs(3600);

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            read_only: false,
            create: true,
            lock: LockMode::Fail,
            cache_datoms_max: 8_000_000,
            #[cfg(feature = "testing")]
            faults: None,
            gc_grace: Some(GC_GRACE_DEFAULT),
            segment_write_delay: None,
        }
    }
}

/// The wall clock in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A SQLite failure as a storage error: SQLite's own corruption findings (a malformed or
/// truncated file) are `storage/corruption`, the rest `storage/io`.
fn io(op: &str) -> impl Fn(rusqlite::Error) -> StorageError + '_ {
    move |e| {
        // A column of the wrong type is a row Vev did not write.
        let corrupt = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        ) || matches!(
            e,
            rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..)
        );
        if corrupt {
            StorageError::corruption("the sqlite file", format!("{e} (during {op})"))
        } else {
            StorageError::Io {
                op: op.to_owned(),
                kind: sqlite_error_kind(&e),
                sqlite_code: e.sqlite_error().map(|f| f.extended_code),
                message: e.to_string(),
            }
        }
    }
}

/// The operating system's error kind that a SQLite failure stands for, where one does.
fn sqlite_error_kind(e: &rusqlite::Error) -> std::io::ErrorKind {
    use rusqlite::ErrorCode as C;
    use std::io::ErrorKind as K;
    match e.sqlite_error_code() {
        Some(C::PermissionDenied | C::ReadOnly) => K::PermissionDenied,
        Some(C::DiskFull) => K::StorageFull,
        Some(C::DatabaseBusy | C::DatabaseLocked) => K::WouldBlock,
        Some(C::OutOfMemory) => K::OutOfMemory,
        Some(C::CannotOpen) => K::NotFound,
        _ => K::Other,
    }
}

/// A column that cannot be read as what Vev wrote there: corruption of that record.
fn unreadable(what: String, e: rusqlite::Error) -> StorageError {
    match e {
        rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..) => {
            StorageError::corruption(what, format!("unreadable column: {e}"))
        }
        other => io("read")(other),
    }
}

/// Frame a payload for storage: the payload then its CRC-32 (4 bytes, little-endian).
fn seal(mut payload: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

/// Check and strip a frame's CRC-32.
fn unseal(what: &dyn Fn() -> String, mut bytes: Vec<u8>) -> Result<Vec<u8>, StorageError> {
    if bytes.len() < 4 {
        return Err(StorageError::corruption(
            what(),
            format!("{} bytes, shorter than its checksum", bytes.len()),
        ));
    }
    let at = bytes.len() - 4;
    let stored = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    bytes.truncate(at);
    let actual = crc32fast::hash(&bytes);
    if stored != actual {
        return Err(StorageError::corruption(
            what(),
            format!("checksum mismatch (stored {stored:08x}, computed {actual:08x})"),
        ));
    }
    Ok(bytes)
}

/// How long a statement waits for a lock another connection holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn open_sqlite(path: &Path, read_only: bool) -> Result<rusqlite::Connection, StorageError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(io("open"))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(io("open"))?;
    Ok(conn)
}

/// Make the write-ahead log file as long as SQLite fills it before it starts over (at the
/// automatic checkpoint), by writing zeros past its end and syncing them once.
///
/// A commit that extends a file makes its sync also commit the file system's metadata (the
/// new size and blocks), which on ext4 costs about as much again as the commit itself: until
/// the log wraps for the first time (1,000 pages after it was created, and SQLite deletes it
/// when the last connection closes), every small transaction paid that. Zeros past the last
/// frame are what SQLite leaves there itself once the log has wrapped: recovery stops at the
/// first frame whose salt does not match the header. They are written under SQLite's write
/// lock, so no other connection is appending frames meanwhile. Best effort: a failure leaves
/// the file as SQLite made it, which is only slower.
fn preallocate_wal(conn: &mut rusqlite::Connection, path: &Path) {
    let pragma = |conn: &rusqlite::Connection, name: &str| -> Option<u64> {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .ok()
            .and_then(|n| u64::try_from(n).ok())
    };
    let (Some(page), Some(frames)) = (
        pragma(conn, "page_size"),
        pragma(conn, "wal_autocheckpoint"),
    ) else {
        return;
    };
    // The header, then each frame's header and page.
    let want = WAL_HEADER + frames.min(WAL_PREALLOCATE_FRAMES_MAX) * (WAL_FRAME_HEADER + page);
    let Ok(tx) = conn.transaction_with_behavior(TransactionBehavior::Immediate) else {
        return;
    };
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let _ = zero_fill(Path::new(&wal), want);
    // Nothing was written through SQLite: ending the transaction only releases its lock.
    let _ = tx.rollback();
}

/// Extend the file at `path` with zeros to `len` bytes (a longer file is left alone), then
/// sync it. Seek and write rather than Unix's positioned writes, so that it builds anywhere.
fn zero_fill(path: &Path, len: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    let mut at = file.metadata()?.len();
    if at >= len {
        return Ok(());
    }
    file.seek(SeekFrom::Start(at))?;
    let zeros = vec![0u8; 1 << 20];
    while at < len {
        let n = (len - at).min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n])?;
        at += n as u64;
    }
    file.sync_all()
}

/// Bytes of a write-ahead log's header and of each frame's header (SQLite's WAL format).
const WAL_HEADER: u64 = 32;
const WAL_FRAME_HEADER: u64 = 24;
/// At most this many frames are preallocated (16 MiB of 4 KiB pages), whatever
/// `wal_autocheckpoint` says.
const WAL_PREALLOCATE_FRAMES_MAX: u64 = 4096;

/// Reads segments for the cache through its own SQLite connection.
struct SegmentReader {
    conn: Mutex<rusqlite::Connection>,
}

impl SegmentStore for SegmentReader {
    fn read_segment(&self, id: u64) -> Result<Vec<u8>, StorageError> {
        let conn = vev_core::sync::lock(&self.conn);
        read_payload(
            &conn,
            "SELECT payload FROM vev_segment WHERE id = ?1",
            id,
            &|| format!("segment {id}"),
        )
    }

    fn read_fulltext_segment(&self, id: u64, doc_first: u64) -> Result<Vec<u8>, StorageError> {
        fulltext::read_segment(&vev_core::sync::lock(&self.conn), id, doc_first)
    }

    fn read_log(&self, first: BasisT, last: BasisT) -> Result<Vec<LogRecord>, StorageError> {
        let conn = vev_core::sync::lock(&self.conn);
        let mut records = read_log_after(&conn, first - 1, Some(last))?;
        if records.last().map(|r| r.t) != Some(last) {
            let found = records.len();
            records.clear();
            return Err(StorageError::corruption(
                format!("log row t={}", first + found as u64),
                "it is missing from the file",
            ));
        }
        Ok(records)
    }
}

/// The checked payload of the row `sql` selects by `id`; a missing row is corruption (a
/// segment something names).
fn read_payload(
    conn: &rusqlite::Connection,
    sql: &str,
    id: u64,
    what: &dyn Fn() -> String,
) -> Result<Vec<u8>, StorageError> {
    let bytes: Option<Vec<u8>> = conn
        .prepare_cached(sql)
        .and_then(|mut st| st.query_row([id as i64], |r| r.get(0)).optional())
        .map_err(|e| unreadable(what(), e))?;
    match bytes {
        Some(b) => unseal(what, b),
        None => Err(StorageError::corruption(
            what(),
            "it is missing from the file",
        )),
    }
}

/// An open database file: the connection that writes (or, read-only, reads) the log and the
/// root, the segment cache, and for a writer the lock.
pub struct Store {
    path: PathBuf,
    conn: Mutex<rusqlite::Connection>,
    cache: Arc<SegmentCache>,
    read_only: bool,
    faults: Option<Arc<FaultPlan>>,
    /// The next segment id a checkpoint may use.
    next_segment: Mutex<u64>,
    gc_grace: Option<Duration>,
    segment_write_delay: Option<Duration>,
    /// The next full-text segment id (a writer's).
    next_fulltext: Mutex<u64>,
    /// The root (its basis-t and `next_segment`) the latest database read here is built on:
    /// `catch_up` adopts any other, so a reader that keeps up with the log still moves onto
    /// each checkpoint's segments instead of holding in memory every path the log changed.
    root_seen: Mutex<Option<(i64, i64)>>,
    /// Held for a writer's life; dropping it releases the lock.
    _lock: Option<WriterLock>,
}

impl Drop for Store {
    /// A writer's close leaves the whole database in the `.vev` file (`checkpoint_wal`).
    fn drop(&mut self) {
        if !self.read_only {
            let _ = self.checkpoint_wal();
        }
    }
}

/// What `Store::open` found in the file.
pub struct Opened {
    pub store: Store,
    pub db: Db,
    /// The basis-t of the latest checkpoint (0 when there is none).
    pub checkpoint_t: BasisT,
    /// Datoms in the log after that checkpoint.
    pub tail_datoms: usize,
}

/// Totals that `verify` checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    pub log_rows: u64,
    pub log_datoms: u64,
    pub segments: u64,
    /// Of `segments`, those no root names any more, kept for the grace period.
    pub garbage_segments: u64,
    pub index_datoms: u64,
    /// Full-text segments in the file (their checksums checked).
    pub fulltext_segments: u64,
    /// Of those, the ones a compaction replaced, kept for the grace period.
    pub fulltext_garbage_segments: u64,
    /// Documents of the full-text index, checked against the database's values.
    pub fulltext_documents: u64,
}

impl Store {
    /// Open (or create) the database at `path` and build its latest `Db`.
    pub fn open(path: &Path, opts: &StoreOptions) -> Result<Opened, StorageError> {
        let display = path.display().to_string();
        let exists = path.exists();
        if !exists && (opts.read_only || !opts.create) {
            return Err(StorageError::io_kind(
                "open",
                std::io::ErrorKind::NotFound,
                format!("{display} does not exist"),
            ));
        }
        probe::check_file(path, &display)?;
        if !exists {
            create::create_file(path, &display, opts.faults().as_deref())
                .map_err(|e| probe::explain_failure(path, &display, e))?;
        }
        Store::open_file(path, &display, opts)
            .map_err(|e| probe::explain_failure(path, &display, e))
    }

    /// `open` of a path that passed `probe::check_file`.
    fn open_file(path: &Path, display: &str, opts: &StoreOptions) -> Result<Opened, StorageError> {
        let mut next_fulltext = 1;
        let lock = if opts.read_only {
            None
        } else {
            Some(take_lock(path, display, opts.lock)?)
        };
        let mut conn = open_sqlite(path, opts.read_only)?;
        if !opts.read_only {
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(io("set journal mode"))?;
            conn.pragma_update(None, "synchronous", "FULL")
                .map_err(io("set synchronous"))?;
        }
        check_or_init_format(&conn, display, opts.read_only)?;
        if !opts.read_only {
            // Files of this format written before garbage was tracked lack the table.
            conn.execute_batch(GARBAGE_TABLE).map_err(io("create"))?;
            conn.execute_batch(fulltext::GARBAGE_INDEX)
                .map_err(io("create"))?;
            next_fulltext = fulltext::writer_start(&conn)?;
            preallocate_wal(&mut conn, path);
        }
        let seg_conn = open_sqlite(path, true)?;
        let cache = SegmentCache::new(
            Arc::new(SegmentReader {
                conn: Mutex::new(seg_conn),
            }),
            opts.cache_datoms_max,
        );
        let store = Store {
            path: path.to_owned(),
            conn: Mutex::new(conn),
            cache,
            read_only: opts.read_only,
            faults: opts.faults(),
            next_segment: Mutex::new(1),
            gc_grace: opts.gc_grace,
            segment_write_delay: opts.segment_write_delay,
            next_fulltext: Mutex::new(next_fulltext),
            root_seen: Mutex::new(None),
            _lock: lock,
        };
        let (db, checkpoint_t, tail_datoms) = store.load()?;
        Ok(Opened {
            store,
            db,
            checkpoint_t,
            tail_datoms,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub fn cache(&self) -> &Arc<SegmentCache> {
        &self.cache
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, rusqlite::Connection> {
        vev_core::sync::lock(&self.conn)
    }

    fn fault(&self, op: &str) -> Result<(), StorageError> {
        match &self.faults {
            Some(f) => f.hit(op),
            None => Ok(()),
        }
    }

    /// The root and the log after it, read in one snapshot, made into a `Db`.
    fn load(&self) -> Result<(Db, BasisT, usize), StorageError> {
        let mark = self.cache.mark();
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(io("open read"))?;
        let root: Option<(i64, i64, Vec<u8>)> = tx
            .query_row(
                "SELECT t, next_segment, record FROM vev_root WHERE slot = 0",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(io("root read"))?;
        let manifest = fulltext::read_manifest(&tx)?;
        let (db, root_t) = match root {
            None => (persist::open_root_with(None, &self.cache, manifest)?, 0),
            Some((t, next_segment, bytes)) => {
                let what = || format!("root record (t={t})");
                let payload = unseal(&what, bytes)?;
                let db = persist::open_root_with(Some(&payload), &self.cache, manifest).map_err(
                    |e| match e {
                        StorageError::Corruption { reason, .. } => {
                            StorageError::corruption(what(), reason)
                        }
                        other => other,
                    },
                )?;
                if db.basis_t() != t as u64 {
                    return Err(StorageError::corruption(
                        what(),
                        format!("it holds the database at t={}", db.basis_t()),
                    ));
                }
                *vev_core::sync::lock(&self.next_segment) = next_segment.max(1) as u64;
                *vev_core::sync::lock(&self.root_seen) = Some((t, next_segment));
                (db, t as u64)
            }
        };
        // Segments written by a checkpoint whose root never landed (a crash between its
        // batches) are in the file but named by no root: new ids start past them too.
        let max_id: Option<i64> = tx
            .query_row("SELECT max(id) FROM vev_segment", [], |r| r.get(0))
            .map_err(io("segment ids"))?;
        {
            let mut next = vev_core::sync::lock(&self.next_segment);
            *next = (*next).max(max_id.map_or(1, |m| m as u64 + 1));
        }
        let records = read_log_after(&tx, root_t, None)?;
        drop(tx);
        drop(conn);
        let mut tail = 0;
        let mut db = db;
        for rec in records {
            tail += rec.datoms.len();
            db = replay(db, &rec)?;
        }
        if let Some(f) = self.cache.failure_since(mark) {
            return Err(f);
        }
        Ok((db, root_t, tail))
    }

    /// Append committed transactions' log records in one synced write batch: a group commit.
    /// `txs` are each transaction's db-after and tx-data, in commit order, each built on the
    /// one before; the last db-after's unstored full-text entries (each transaction's
    /// segment) go in the same write batch.
    pub fn append(&self, txs: &[(&Db, &[vev_core::Datom])]) -> Result<(), StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        let Some((last, _)) = txs.last() else {
            return Ok(());
        };
        let records: Vec<(i64, Vec<u8>)> = txs
            .iter()
            .map(|(db, datoms)| {
                let t = db.basis_t();
                let bytes = LogRecord::encode_of(t, db.next_user(), datoms);
                (t as i64, seal(bytes))
            })
            .collect();
        let entries = last.fulltext_unstored();
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(io("log write"))?;
        {
            let mut st = tx
                .prepare_cached("INSERT INTO vev_log (t, record) VALUES (?1, ?2)")
                .map_err(io("log write"))?;
            for (t, record) in &records {
                self.fault("log write")?;
                st.execute(params![t, record]).map_err(io("log write"))?;
            }
        }
        // The transactions' full-text segments and manifest entries, in the same commit.
        self.write_entries(&tx, &entries)?;
        self.commit(tx, "log sync")
    }

    /// Append many transactions' log records in one synced write batch (bulk import), with
    /// the full-text entries of those transactions.
    pub fn append_many(
        &self,
        records: &[LogRecord],
        fulltext: &[vev_db::fulltext::NewEntry],
    ) -> Result<(), StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(io("log write"))?;
        {
            let mut st = tx
                .prepare_cached("INSERT INTO vev_log (t, record) VALUES (?1, ?2)")
                .map_err(io("log write"))?;
            for rec in records {
                self.fault("log write")?;
                st.execute(params![rec.t as i64, seal(rec.encode())])
                    .map_err(io("log write"))?;
            }
        }
        self.write_entries(&tx, fulltext)?;
        self.commit(tx, "log sync")
    }

    fn commit(&self, tx: rusqlite::Transaction<'_>, op: &str) -> Result<(), StorageError> {
        let after = self.faults.as_ref().is_some_and(|f| f.after_commit);
        if !after {
            self.fault(op)?;
        }
        tx.commit().map_err(io(op))?;
        if after {
            self.fault(op)?;
        }
        Ok(())
    }

    /// Write a checkpoint of `db` and return the same database reading through segments.
    pub fn checkpoint(&self, db: &Db) -> Result<Db, StorageError> {
        let mut cp = self.prepare_checkpoint(db)?;
        self.write_checkpoint(&mut cp)?;
        Ok(cp.db)
    }

    /// Encode a checkpoint of `db` (no I/O but segment reads): the segments that are not yet
    /// in the file and the root naming them.
    pub fn prepare_checkpoint(&self, db: &Db) -> Result<Checkpoint, StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        // Ids are taken for good, even if this checkpoint fails: the cache may already hold
        // segments under them, and a later checkpoint must not reuse an id for other bytes.
        let mark = self.cache.mark();
        let mut ids = vev_core::sync::lock(&self.next_segment);
        let mut next = *ids;
        let cp = persist::checkpoint(db, &self.cache, &mut next);
        *ids = next;
        drop(ids);
        if let Some(f) = self.cache.failure_since(mark) {
            return Err(f);
        }
        Ok(cp)
    }

    /// Write a prepared checkpoint: its segments in write batches of at most
    /// `SEGMENTS_PER_BATCH` (so log appends from the writer interleave with a large
    /// checkpoint), then the root in one synced batch. Segments no root names yet are
    /// harmless if a crash comes between. The checkpoint's segment and root bytes move into
    /// the file (they are left empty); its databases stay.
    pub fn write_checkpoint(&self, cp: &mut Checkpoint) -> Result<(), StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        for chunk in cp.segments.chunks_mut(SEGMENTS_PER_BATCH) {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(io("checkpoint"))?;
            {
                let mut st = tx
                    .prepare_cached("INSERT INTO vev_segment (id, payload) VALUES (?1, ?2)")
                    .map_err(io("segment write"))?;
                for seg in chunk {
                    self.fault("segment write")?;
                    let payload = seal(std::mem::take(&mut seg.payload));
                    st.execute(params![seg.id as i64, payload])
                        .map_err(io("segment write"))?;
                }
            }
            self.commit(tx, "segment sync")?;
        }
        let next = *vev_core::sync::lock(&self.next_segment);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(io("checkpoint"))?;
        self.fault("root write")?;
        // In the root's own write batch, so that a crash keeps both or neither: what the
        // new root no longer names becomes garbage, and old garbage goes.
        self.collect_garbage(&tx, cp)?;
        tx.execute(
            "INSERT OR REPLACE INTO vev_root (slot, t, next_segment, record) VALUES (0, ?1, ?2, ?3)",
            params![cp.t as i64, next as i64, seal(std::mem::take(&mut cp.root))],
        )
        .map_err(io("root write"))?;
        self.commit(tx, "checkpoint sync")?;
        // The writer's databases move onto this root as they adopt the checkpoint.
        *vev_core::sync::lock(&self.root_seen) = Some((cp.t as i64, next as i64));
        Ok(())
    }

    /// Record as garbage the segments the root about to be replaced names and `cp` does not,
    /// and those of checkpoints that failed before writing their root (ids from the old
    /// root's `next_segment` up to `cp`'s first); delete those garbage longer than the grace.
    fn collect_garbage(
        &self,
        tx: &rusqlite::Transaction<'_>,
        cp: &Checkpoint,
    ) -> Result<(), StorageError> {
        let named: std::collections::HashSet<u64> = cp.db.segment_ids().into_iter().collect();
        let old: Option<(i64, Vec<u8>)> = tx
            .query_row(
                "SELECT next_segment, record FROM vev_root WHERE slot = 0",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| unreadable("root record".into(), e))?;
        let mut dead: Vec<u64> = Vec::new();
        let mut orphans_from = 0;
        if let Some((old_next, record)) = old {
            let record = unseal(&|| "root record".into(), record)?;
            let old_ids = persist::root_segment_ids(&record, &self.cache)
                .map_err(|e| StorageError::corruption("root record", e.0))?;
            dead.extend(old_ids);
            orphans_from = old_next;
        }
        {
            let mut st = tx
                .prepare_cached("SELECT id FROM vev_segment WHERE id >= ?1 AND id < ?2")
                .map_err(io("garbage"))?;
            let ids = st
                .query_map(params![orphans_from, cp.first_id as i64], |r| {
                    r.get::<_, i64>(0)
                })
                .map_err(io("garbage"))?;
            for id in ids {
                dead.push(id.map_err(io("garbage"))? as u64);
            }
        }
        let now_ms = now_ms();
        {
            let mut st = tx
                .prepare_cached("INSERT OR IGNORE INTO vev_garbage (id, since_ms) VALUES (?1, ?2)")
                .map_err(io("garbage"))?;
            for id in dead.iter().filter(|id| !named.contains(id)) {
                st.execute(params![*id as i64, now_ms])
                    .map_err(io("garbage"))?;
            }
        }
        {
            // A segment the new root names is never garbage, even if an earlier root dropped
            // it (a checkpoint whose commit reported a failure after landing is not adopted,
            // so the next one can name that root's dead segments again).
            let listed: Vec<i64> = tx
                .prepare_cached("SELECT id FROM vev_garbage")
                .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
                .map_err(io("garbage"))?;
            let mut st = tx
                .prepare_cached("DELETE FROM vev_garbage WHERE id = ?1")
                .map_err(io("garbage"))?;
            for id in listed
                .into_iter()
                .filter(|id| named.contains(&(*id as u64)))
            {
                st.execute([id]).map_err(io("garbage"))?;
            }
        }
        if let Some(grace) = self.gc_grace {
            let cutoff = now_ms.saturating_sub(grace.as_millis() as i64);
            tx.execute(
                "DELETE FROM vev_segment WHERE id IN \
                 (SELECT id FROM vev_garbage WHERE since_ms <= ?1)",
                [cutoff],
            )
            .map_err(io("garbage"))?;
            tx.execute("DELETE FROM vev_garbage WHERE since_ms <= ?1", [cutoff])
                .map_err(io("garbage"))?;
        }
        Ok(())
    }

    /// Segments waiting out the grace period before a checkpoint deletes them.
    pub fn garbage_segments(&self) -> Result<u64, StorageError> {
        let conn = self.conn();
        let exists: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'vev_garbage'",
                [],
                |r| r.get(0),
            )
            .map_err(io("garbage"))?;
        if exists == 0 {
            return Ok(0);
        }
        conn.query_row("SELECT count(*) FROM vev_garbage", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| n as u64)
        .map_err(io("garbage"))
    }

    /// SQLite's counter of commits by other connections: changes when another connection
    /// (another process's writer) commits.
    pub fn data_version(&self) -> Result<i64, StorageError> {
        self.conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(io("data version"))
    }

    /// Bring `db` up to the latest committed transaction by replaying the log after it.
    /// A database built on an older root (a reader in another process) adopts the latest
    /// root instead: its indexes then read through segments, so a long-lived reader's memory
    /// stays bounded, and only the log after the root is replayed.
    pub fn catch_up(&self, db: &Db) -> Result<Db, StorageError> {
        let root: Option<(i64, i64)> = self
            .conn()
            .query_row(
                "SELECT t, next_segment FROM vev_root WHERE slot = 0",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(io("root read"))?;
        let seen = *vev_core::sync::lock(&self.root_seen);
        // A new root, even one older than `db` (which replayed the log past it): adopt it,
        // so that what the log changed leaves memory for the root's segments. A writer
        // catches up only after a failed write, and then reads everything again: the
        // full-text entries that write may have stored must come from the manifest, not
        // from a replay that would take them for unstored ones.
        if root.is_some() && root != seen {
            return self.load().map(|(db, _, _)| db);
        }
        let records = {
            let conn = self.conn();
            read_log_after(&conn, db.basis_t(), None)?
        };
        if !records.is_empty() && !self.read_only {
            return self.load().map(|(db, _, _)| db);
        }
        let mut db = db.current();
        for rec in records {
            db = replay(db, &rec)?;
        }
        Ok(db)
    }

    /// Check every log row and segment: checksums, decoding, order and counts, and that the
    /// log replays into the indexes `db` holds (the latest database); and that a `-wal`
    /// beside the file is one SQLite reads (`backup::check_wal_sibling`).
    pub fn verify(&self, db: &Db) -> Result<VerifyReport, StorageError> {
        backup::check_wal_sibling(&self.path)?;
        let conn = self.conn();
        let mut report = VerifyReport {
            log_rows: 0,
            log_datoms: 0,
            segments: 0,
            garbage_segments: 0,
            index_datoms: 0,
            fulltext_segments: 0,
            fulltext_garbage_segments: 0,
            fulltext_documents: 0,
        };
        let mut expect_t = 1;
        {
            let mut st = conn
                .prepare("SELECT t, record FROM vev_log ORDER BY t")
                .map_err(io("verify"))?;
            let mut rows = st.query([]).map_err(io("verify"))?;
            while let Some(row) = rows.next().map_err(io("verify"))? {
                let t: i64 = row.get(0).map_err(io("verify"))?;
                let bytes: Vec<u8> = row
                    .get(1)
                    .map_err(|e| unreadable(format!("log row t={t}"), e))?;
                let rec = decode_log_row(t, bytes)?;
                if t as u64 != expect_t {
                    return Err(StorageError::corruption(
                        format!("log row t={t}"),
                        format!("expected t={expect_t}: the log has a gap"),
                    ));
                }
                expect_t += 1;
                report.log_rows += 1;
                report.log_datoms += rec.datoms.len() as u64;
            }
        }
        {
            let mut st = conn
                .prepare("SELECT id, payload FROM vev_segment ORDER BY id")
                .map_err(io("verify"))?;
            let mut rows = st.query([]).map_err(io("verify"))?;
            while let Some(row) = rows.next().map_err(io("verify"))? {
                let id: i64 = row.get(0).map_err(io("verify"))?;
                let bytes: Vec<u8> = row
                    .get(1)
                    .map_err(|e| unreadable(format!("segment {id}"), e))?;
                unseal(&|| format!("segment {id}"), bytes)?;
                report.segments += 1;
            }
        }
        drop(conn);
        report.garbage_segments = self.garbage_segments()?;
        // The log may have grown since `db` was read (another process's writer), not shrunk.
        if expect_t - 1 < db.basis_t() {
            return Err(StorageError::corruption(
                "log",
                format!(
                    "it ends at t={} but the database is at t={}",
                    expect_t - 1,
                    db.basis_t()
                ),
            ));
        }
        report.index_datoms = db.verify_segments()? as u64;
        (report.fulltext_segments, report.fulltext_garbage_segments) =
            self.verify_fulltext_segments()?;
        report.fulltext_documents = db.verify_fulltext()?.documents;
        Ok(report)
    }

    fn read_only_error(&self) -> StorageError {
        StorageError::ReadOnly {
            path: self.path.display().to_string(),
        }
    }
}

fn replay(db: Db, rec: &LogRecord) -> Result<Db, StorageError> {
    persist::replay_owned(db, rec)
        .map_err(|e| StorageError::corruption(format!("log row t={}", rec.t), e.0))
}

fn decode_log_row(t: i64, bytes: Vec<u8>) -> Result<LogRecord, StorageError> {
    let what = || format!("log row t={t}");
    let payload = unseal(&what, bytes)?;
    let rec = LogRecord::decode(&payload).map_err(|e| StorageError::corruption(what(), e.0))?;
    if rec.t != t as u64 {
        return Err(StorageError::corruption(
            what(),
            format!("it holds the record of t={}", rec.t),
        ));
    }
    Ok(rec)
}

/// The log records after basis-t `after` (up to `last`, if given), in order and without gaps.
fn read_log_after(
    conn: &rusqlite::Connection,
    after: BasisT,
    last: Option<BasisT>,
) -> Result<Vec<LogRecord>, StorageError> {
    let mut st = conn
        .prepare_cached("SELECT t, record FROM vev_log WHERE t > ?1 AND t <= ?2 ORDER BY t")
        .map_err(io("log read"))?;
    let last = last.map_or(i64::MAX, |t| t.min(i64::MAX as u64) as i64);
    let mut rows = st.query([after as i64, last]).map_err(io("log read"))?;
    let mut out = Vec::new();
    let mut expect = after + 1;
    while let Some(row) = rows.next().map_err(io("log read"))? {
        let t: i64 = row.get(0).map_err(io("log read"))?;
        if t as u64 != expect {
            return Err(StorageError::corruption(
                format!("log row t={t}"),
                format!("expected t={expect}: the log has a gap"),
            ));
        }
        let bytes: Vec<u8> = row
            .get(1)
            .map_err(|e| unreadable(format!("log row t={t}"), e))?;
        out.push(decode_log_row(t, bytes)?);
        expect += 1;
    }
    Ok(out)
}

fn take_lock(path: &Path, display: &str, mode: LockMode) -> Result<WriterLock, StorageError> {
    let started = Instant::now();
    loop {
        match lock::try_lock(path) {
            Ok(held) => return Ok(held),
            Err(TryLock::Taken) => match mode {
                LockMode::Wait(limit) if started.elapsed() < limit => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                LockMode::Wait(limit) => {
                    return Err(StorageError::Locked {
                        path: display.to_owned(),
                        waited: Some(limit),
                    })
                }
                LockMode::Fail => {
                    return Err(StorageError::Locked {
                        path: display.to_owned(),
                        waited: None,
                    })
                }
            },
            Err(TryLock::Failed(e)) => return Err(StorageError::from_io("lock", display, &e)),
        }
    }
}

/// Check the file's identity and format version; give a new (empty) file Vev's tables.
const GARBAGE_TABLE: &str = "CREATE TABLE IF NOT EXISTS vev_garbage \
     (id INTEGER PRIMARY KEY, since_ms INTEGER NOT NULL);";

fn check_or_init_format(
    conn: &rusqlite::Connection,
    display: &str,
    read_only: bool,
) -> Result<(), StorageError> {
    let not_vev = |reason: String| StorageError::NotVev {
        path: display.to_owned(),
        reason,
    };
    // SQLite's "file is not a database" is a file that is not SQLite; anything else is as
    // `io` says (a malformed header is corruption, or a truncation `probe` explains).
    let header_err = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => not_vev(e.to_string()),
        _ => io("read the file header")(e),
    };
    let app_id: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(header_err)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(header_err)?;
    if app_id == 0 && tables == 0 {
        if read_only {
            return Err(not_vev("the file is empty".into()));
        }
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE;
             CREATE TABLE IF NOT EXISTS vev_log (t INTEGER PRIMARY KEY, record BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS vev_segment (id INTEGER PRIMARY KEY, payload BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS vev_root (
                 slot INTEGER PRIMARY KEY CHECK (slot = 0),
                 t INTEGER NOT NULL,
                 next_segment INTEGER NOT NULL,
                 record BLOB NOT NULL);
             {GARBAGE_TABLE}
             {}
             PRAGMA application_id = {APPLICATION_ID};
             PRAGMA user_version = {FORMAT_VERSION};
             COMMIT;",
            fulltext::TABLES
        ))
        .map_err(io("create"))?;
        return Ok(());
    }
    if app_id != APPLICATION_ID {
        return Err(not_vev(format!(
            "its SQLite application_id is {app_id:#x}, not vev's {APPLICATION_ID:#x}"
        )));
    }
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(io("read format version"))?;
    let migrated = FORMAT_VERSIONS_MIGRATED.contains(&version);
    if migrated && !read_only {
        // Creating the full-text tables is a no-op on a version-4 file; the manifest of a
        // file of version 4 to 6 gains the column for segments held in their rows.
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(io("migrate"))?;
        let migrated = (|| {
            conn.execute_batch(fulltext::TABLES)
                .map_err(io("migrate"))?;
            fulltext::add_payload_column(conn)?;
            conn.execute_batch(&format!("PRAGMA user_version = {FORMAT_VERSION}; COMMIT;"))
                .map_err(io("migrate"))
        })();
        if migrated.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        return migrated;
    }
    if version != FORMAT_VERSION && !migrated {
        return Err(StorageError::FormatVersion {
            path: display.to_owned(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_fill_extends_with_zeros_and_leaves_longer_files_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        zero_fill(&path, 3 + (1 << 20) + 5).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 3 + (1 << 20) + 5);
        assert_eq!(&bytes[..3], b"abc");
        assert!(bytes[3..].iter().all(|b| *b == 0));
        zero_fill(&path, 2).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 + (1 << 20) + 5);
    }

    #[test]
    fn frames_detect_flipped_bits() {
        let sealed = seal(vec![1, 2, 3, 4, 5]);
        assert_eq!(
            unseal(&|| "x".into(), sealed.clone()).unwrap(),
            vec![1, 2, 3, 4, 5]
        );
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x10;
            let e = unseal(&|| "x".into(), bad).unwrap_err();
            assert_eq!(e.code(), "storage/corruption");
        }
        assert!(unseal(&|| "x".into(), vec![1, 2]).is_err());
    }
}
