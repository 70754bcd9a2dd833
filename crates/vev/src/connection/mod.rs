//! `Connection`: the one writer of a database and the source of its latest `Db`.
//!
//! The writer lock serialises transactions; the latest `Db` sits behind a read-write lock that
//! is held only to clone or replace an `Arc`, so readers never wait for a transaction to be
//! computed. Subscribers get every report in commit order because reports are sent while the
//! writer lock is still held.
//!
//! A durable connection (`Connection::open`) commits in this order: the transactor builds the
//! next `Db` from the previous one in memory (work proportional to the transaction), the log
//! record is appended and synced in one SQLite write batch, and only then is the new `Db`
//! published and the report returned. Transactions from several threads at once share that
//! write batch and its sync (group commit, `group`). A failed append publishes nothing;
//! before the next transaction the writer re-reads the log, in case the failure came after
//! the commit. When
//! the log tail since the last checkpoint passes `checkpoint_datoms`, a checkpoint of the
//! latest database starts on its own thread (the commit path never waits for it; when it is
//! done, the next transaction swaps the persisted subtrees of the latest database for segment
//! references); `checkpoint()`, `bulk_load` and dropping the last handle of a writer with a
//! tail (unless `checkpoint_on_close` is off) checkpoint in the calling thread:
//! it writes the index subtrees that changed as segments plus a new root, so the next open
//! reads the root and a short tail. Closing a writer then empties the `-wal` into the
//! database file (`Store::checkpoint_wal`), so the `.vev` file alone is the whole database;
//! `backup` copies a live one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vev_core::{Edn, Keyword, StorageError, TxOp};
use vev_db::{Db, TxContext, TxFunctions, TxReport};
#[cfg(feature = "testing")]
use vev_sqlite::FaultPlan;
use vev_sqlite::{BackupProgress, BackupReport, LockMode, Store, StoreOptions, VerifyReport};

use backend::{Backend, Version};

use crate::error::Error;

mod backend;
mod bulk;
mod copy;
mod group;

pub use copy::{CopyOptions, CopyProgress, CopyReport, CopyStage};
pub use group::{CommitStats, Prepared};

/// A transaction function: gets db-before and the arguments of its list form, returns the
/// transaction data to use in its place (or an error message that aborts the transaction).
pub type TxFn = Arc<dyn Fn(&Db, &[Edn]) -> Result<Vec<TxOp>, String> + Send + Sync>;

/// The default `OpenOptions::follow_interval`: a following reader checks at least this often.
pub const FOLLOW_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);

/// How `Connection::open_with` opens a database (a file, or a `postgres://` URL).
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Read only: no writer lock; `db()` and `sync()` follow the writer's commits.
    pub read_only: bool,
    /// Create the file if it does not exist (default true; ignored when read only).
    pub create: bool,
    /// What to do when another connection holds the writer lock (default: fail at once).
    /// On PostgreSQL, the writer lease: `Wait` retries until the holder's lease is released
    /// or expires.
    pub lock: LockMode,
    /// On PostgreSQL, how long a writer's lease lasts without renewal (default 10 s;
    /// renewed every third of it): a writer that dies is taken over this long after its
    /// last renewal (`docs/design/lease.md`). Ignored for files.
    pub lease: Duration,
    /// Decoded index-segment datoms kept in memory (default 8,000,000).
    pub cache_datoms_max: usize,
    /// Checkpoint automatically once the log holds this many datoms after the last
    /// checkpoint (default 1,000,000).
    pub checkpoint_datoms: usize,
    /// Datoms per write batch during `bulk_load` (default 200,000).
    pub bulk_batch_datoms: usize,
    /// Checkpoint when the last handle of a writer is dropped, if the log has a tail
    /// (default true).
    pub checkpoint_on_close: bool,
    /// How long an index segment that no checkpoint names any more stays in the file before
    /// a later checkpoint deletes it (default an hour; `None` keeps every segment). A
    /// database value older than that (held by a reader in this or another process since
    /// before that many checkpoints ago) may fail with `storage/corruption` when it loads a
    /// segment that is gone; databases from `db()` and `sync()` are never that old. Zero
    /// suits a single connection only: a checkpoint may then delete a segment that a reader
    /// (or the writer's own older database) is loading at the same time.
    pub gc_grace: Option<std::time::Duration>,
    /// When small full-text segments are merged (default: in the background).
    pub fulltext_compaction: FulltextCompaction,
    /// A pause before each full-text segment write: a benchmark's stand-in for an object
    /// store's upload latency (default none).
    pub segment_write_delay: Option<Duration>,
    /// On PostgreSQL, how a read-only connection follows the writer: `Some(interval)` (the
    /// default, 1 s) starts a follower thread that `LISTEN`s for the writer's commits and
    /// catches up within a round trip or two of each, and checks at least every `interval`
    /// (polling while its listen connection is down and being made again), so `db()`
    /// returns the followed database without asking the server (`docs/design/follow.md`).
    /// `None`: no follower; `db()` catches up on every call, as on a file. `sync()`
    /// catches up either way. Ignored for writers and files.
    pub follow_interval: Option<Duration>,
    /// For tests: fail the Nth storage operation (the `testing` feature).
    #[cfg(feature = "testing")]
    pub faults: Option<Arc<FaultPlan>>,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            read_only: false,
            create: true,
            lock: LockMode::Fail,
            lease: vev_postgres::LEASE_DEFAULT,
            cache_datoms_max: 8_000_000,
            checkpoint_datoms: 1_000_000,
            bulk_batch_datoms: 200_000,
            checkpoint_on_close: true,
            gc_grace: Some(vev_sqlite::GC_GRACE_DEFAULT),
            fulltext_compaction: FulltextCompaction::Background,
            segment_write_delay: None,
            follow_interval: Some(FOLLOW_INTERVAL_DEFAULT),
            #[cfg(feature = "testing")]
            faults: None,
        }
    }
}

/// When a connection merges small full-text segments (`OpenOptions::fulltext_compaction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FulltextCompaction {
    /// On a thread of its own, as transactions add segments (tiered: see
    /// `vev_db::fulltext`).
    Background,
    /// Only when `Connection::compact_fulltext` is called: segments accumulate until then.
    Manual,
}

impl OpenOptions {
    /// Options for a read-only connection.
    pub fn read_only() -> OpenOptions {
        OpenOptions {
            read_only: true,
            create: false,
            ..OpenOptions::default()
        }
    }
}

/// Progress of a `bulk_load`, reported after each write batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BulkProgress {
    /// Transactions committed so far by this import.
    pub txs: u64,
    /// Datoms those transactions added and retracted (their tx-data, each transaction's
    /// `:db/txInstant` included).
    pub datoms: u64,
    /// Wall-clock time since `bulk_load` was called.
    pub elapsed: Duration,
}

/// A full-text compaction running on its own thread: the merge and, on a file, the id its
/// segment was written under.
type CompactionThread = std::thread::JoinHandle<
    Result<Option<(vev_db::fulltext::Compaction, Option<u64>)>, StorageError>,
>;

/// A checkpoint running on its own thread: what it returns, and the log tail it covers.
struct Background {
    handle: std::thread::JoinHandle<Result<vev_db::persist::Checkpoint, StorageError>>,
    tail_datoms: usize,
}

struct Writer {
    listeners: Vec<Sender<TxReport>>,
    /// The automatic checkpoint in flight, if any.
    background: Option<Background>,
    /// After a background checkpoint failed, the tail at which to try again (so a lasting
    /// failure, a full disk say, does not start a checkpoint after every transaction).
    retry_at_tail: usize,
    /// A storage write failed: the file may hold a transaction this connection did not
    /// publish, so re-read the log before the next one.
    needs_catch_up: bool,
    /// Datoms in the log since the last checkpoint.
    tail_datoms: usize,
    /// The full-text compaction in flight, if any.
    compaction: Option<CompactionThread>,
    /// Whether compactions start by themselves (`OpenOptions::fulltext_compaction`).
    auto_compact: bool,
}

struct Durable {
    store: Arc<Backend>,
    checkpoint_datoms: usize,
    bulk_batch_datoms: usize,
    checkpoint_on_close: bool,
    /// The store's data version when a read-only connection last caught up.
    seen_version: Mutex<Version>,
    /// A read-only PostgreSQL connection's follower thread (stopped when this is dropped).
    follower: std::sync::OnceLock<vev_postgres::Follower>,
}

struct Inner {
    latest: RwLock<Db>,
    writer: Mutex<Writer>,
    functions: RwLock<HashMap<Keyword, TxFn>>,
    /// How many times `register_fn` ran: a transaction prepared before a registration is
    /// applied afresh at its commit (`Connection::transact_prepared`).
    functions_version: AtomicU64,
    durable: Option<Durable>,
    /// Transactions waiting for the leader of the next group commit.
    queue: group::Queue,
}

impl Drop for Inner {
    /// Closing a writer with a log tail checkpoints it (best effort: the tail is durable in
    /// the log either way), so that the next open reads the root and no tail.
    fn drop(&mut self) {
        let Some(durable) = &self.durable else {
            return;
        };
        let writer = vev_core::sync::get_mut(&mut self.writer);
        if let Some(c) = writer.compaction.take() {
            // Written or not, the file is consistent; only the adoption is skipped.
            let _ = c.join();
        }
        if let Some(bg) = writer.background.take() {
            if let Ok(Ok(cp)) = bg.handle.join() {
                writer.tail_datoms = writer.tail_datoms.saturating_sub(bg.tail_datoms);
                let latest = vev_core::sync::get_mut_rw(&mut self.latest);
                *latest = cp.rebase(latest);
            }
        }
        if !durable.checkpoint_on_close
            || durable.store.is_read_only()
            || writer.tail_datoms == 0
            || writer.needs_catch_up
        {
            return;
        }
        let latest = vev_core::sync::get_mut_rw(&mut self.latest);
        let _ = durable.store.checkpoint(latest);
    }
}

/// A connection to one database. Cheap to clone; clones share the database.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("path", &self.path())
            .field("basis_t", &self.latest().basis_t())
            .finish()
    }
}

struct Registry<'a>(&'a HashMap<Keyword, TxFn>);

impl TxFunctions for Registry<'_> {
    fn call(&self, name: &Keyword, db: &Db, args: &[Edn]) -> Option<Result<Vec<TxOp>, String>> {
        self.0.get(name).map(|f| f(db, args))
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Connection {
    /// Open (or create) the database file at `path`, as its one writer. The embedded default:
    /// every transaction is durable before its report returns. A `postgres://` (or
    /// `postgresql://`) URL opens a database stored in PostgreSQL instead (`vev-postgres`;
    /// `docs/storage-postgres.md`), taking the writer lease; an
    /// `s3://BUCKET/PREFIX?log=postgres://...` URL one with its segments in an
    /// S3-compatible object store (`vev-objstore`, with the `objstore` feature;
    /// `docs/storage-objstore.md`).
    pub fn open(path: impl AsRef<Path>) -> Result<Connection, Error> {
        Connection::open_with(path, &OpenOptions::default())
    }

    /// Open a database file with options (read only, lock waiting, cache size, ...).
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Connection, Error> {
        if let Some(url) = path
            .as_ref()
            .to_str()
            .filter(|p| vev_postgres::is_postgres_url(p))
        {
            return Connection::open_postgres(url, opts, None);
        }
        if let Some(url) = path.as_ref().to_str().filter(|p| crate::is_objstore_url(p)) {
            return Connection::open_objstore(url, opts);
        }
        let opened = Store::open(
            path.as_ref(),
            &StoreOptions {
                read_only: opts.read_only,
                create: opts.create && !opts.read_only,
                lock: opts.lock,
                cache_datoms_max: opts.cache_datoms_max,
                #[cfg(feature = "testing")]
                faults: opts.faults.clone(),
                gc_grace: opts.gc_grace,
                segment_write_delay: opts.segment_write_delay,
            },
        )?;
        Connection::opened(
            Backend::Sqlite(opened.store),
            &opened.db,
            opened.tail_datoms,
            opts,
        )
    }

    /// `open_with` of an `s3://` URL: the objects checked (or, for a new database, the
    /// prefix marked), then the PostgreSQL store with its segments there.
    #[cfg(feature = "objstore")]
    fn open_objstore(url: &str, opts: &OpenOptions) -> Result<Connection, Error> {
        let (log, objects) = vev_objstore::open(
            url,
            vev_objstore::OpenMode {
                read_only: opts.read_only,
                create: opts.create,
            },
        )?;
        Connection::open_postgres(&log, opts, Some(objects))
    }

    /// Without the `objstore` feature an `s3://` URL is refused.
    #[cfg(not(feature = "objstore"))]
    fn open_objstore(_url: &str, _opts: &OpenOptions) -> Result<Connection, Error> {
        Err(StorageError::io_kind(
            "open",
            std::io::ErrorKind::Unsupported,
            "this build of vev has no object-store backend (the objstore feature)",
        )
        .into())
    }

    /// `open_with` of a `postgres://` URL, with the segments in `objects` when given.
    fn open_postgres(
        url: &str,
        opts: &OpenOptions,
        objects: vev_postgres::Objects,
    ) -> Result<Connection, Error> {
        let opened = vev_postgres::Store::open(
            url,
            &vev_postgres::StoreOptions {
                read_only: opts.read_only,
                create: opts.create && !opts.read_only,
                wait: match opts.lock {
                    LockMode::Fail => vev_postgres::LeaseWait::Fail,
                    LockMode::Wait(d) => vev_postgres::LeaseWait::Wait(d),
                },
                lease: opts.lease,
                cache_datoms_max: opts.cache_datoms_max,
                gc_grace: opts.gc_grace,
                objects,
            },
        )?;
        Connection::opened(
            Backend::Postgres(opened.store),
            &opened.db,
            opened.tail_datoms,
            opts,
        )
    }

    /// A durable connection on an opened store.
    fn opened(
        store: Backend,
        db: &Db,
        tail_datoms: usize,
        opts: &OpenOptions,
    ) -> Result<Connection, Error> {
        // A file from before full text: its index, built on opening, is stored now.
        let db = store.store_fulltext_entries(db)?;
        let conn = Connection::build(
            db,
            tail_datoms,
            Some(Durable {
                store: Arc::new(store),
                checkpoint_datoms: opts.checkpoint_datoms.max(1),
                bulk_batch_datoms: opts.bulk_batch_datoms.max(1),
                checkpoint_on_close: opts.checkpoint_on_close,
                // Unknown: a commit may have landed between the open's read and now, so the
                // first `sync` catches up whatever the version.
                seen_version: Mutex::new([i64::MIN; 3]),
                follower: std::sync::OnceLock::new(),
            }),
        );
        vev_core::sync::lock(&conn.inner.writer).auto_compact =
            opts.fulltext_compaction == FulltextCompaction::Background;
        if let Some(interval) = opts.follow_interval {
            conn.start_follower(interval)?;
        }
        Ok(conn)
    }

    /// A new, empty in-memory database.
    pub fn open_in_memory() -> Connection {
        Connection::from_db(Db::empty())
    }

    /// An in-memory connection whose database starts as `db` (e.g. one built with `with`).
    pub fn from_db(db: Db) -> Connection {
        Connection::build(db, 0, None)
    }

    fn build(db: Db, tail_datoms: usize, durable: Option<Durable>) -> Connection {
        Connection {
            inner: Arc::new(Inner {
                latest: RwLock::new(db.current()),
                writer: Mutex::new(Writer {
                    listeners: Vec::new(),
                    background: None,
                    retry_at_tail: 0,
                    needs_catch_up: false,
                    tail_datoms,
                    compaction: None,
                    auto_compact: true,
                }),
                functions: RwLock::new(HashMap::new()),
                functions_version: AtomicU64::new(0),
                durable,
                queue: group::Queue::default(),
            }),
        }
    }

    /// The latest database value. A read-only connection on PostgreSQL with a follower
    /// (`OpenOptions::follow_interval`) returns the database its follower caught up with
    /// (behind the writer by a notification's delivery and a read, or at most the interval
    /// while the follower polls); any other read-only connection first catches up with the
    /// writer's commits (use `sync` to see a failure to do so; here the last good value is
    /// returned).
    pub fn db(&self) -> Db {
        let following = self
            .inner
            .durable
            .as_ref()
            .is_some_and(|d| d.follower.get().is_some());
        if self.is_read_only() && !following {
            let _ = self.sync();
        }
        self.latest()
    }

    /// Start a read-only PostgreSQL connection's follower (nothing for files and writers).
    /// Its thread holds the connection weakly: it stops once the last handle is dropped.
    fn start_follower(&self, interval: Duration) -> Result<(), Error> {
        let Some(durable) = &self.inner.durable else {
            return Ok(());
        };
        let Backend::Postgres(store) = &*durable.store else {
            return Ok(());
        };
        if !store.is_read_only() {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.inner);
        let follower = store.follow(
            interval,
            Box::new(move || {
                let Some(inner) = weak.upgrade() else {
                    return vev_postgres::Checked::Stop;
                };
                match (Connection { inner }).catch_up_read_only() {
                    Ok(false) => vev_postgres::Checked::Same,
                    // A failure (the server unreachable) is retried at the next wake.
                    Ok(true) | Err(_) => vev_postgres::Checked::Changed,
                }
            }),
        )?;
        let _ = durable.follower.set(follower);
        Ok(())
    }

    fn latest(&self) -> Db {
        vev_core::sync::read(&self.inner.latest).clone()
    }

    /// Make `db` the latest database; returns the one it replaces. The lock is held only for
    /// the swap: the old value (whose nodes may be many, after a checkpoint) is dropped after
    /// it is released, so readers never wait for that.
    fn publish(&self, db: Db) -> Db {
        let mut latest = vev_core::sync::write(&self.inner.latest);
        std::mem::replace(&mut *latest, db)
    }

    fn is_read_only(&self) -> bool {
        self.inner
            .durable
            .as_ref()
            .is_some_and(|d| d.store.is_read_only())
    }

    /// Catch up with every transaction committed to the file (by this or another process)
    /// and return the latest database. In memory, the latest database.
    pub fn sync(&self) -> Result<Db, Error> {
        self.catch_up_read_only()?;
        Ok(self.latest())
    }

    /// `sync`'s work: whether the store had changed since the last catch-up.
    fn catch_up_read_only(&self) -> Result<bool, Error> {
        let Some(durable) = &self.inner.durable else {
            return Ok(false);
        };
        let _writer = vev_core::sync::lock(&self.inner.writer);
        let version = durable.store.data_version()?;
        let mut seen = vev_core::sync::lock(&durable.seen_version);
        let changed = version != *seen;
        if changed || !durable.store.is_read_only() {
            let db = durable.store.catch_up(&self.latest())?;
            self.publish(db);
            *seen = version;
        }
        Ok(changed)
    }

    /// Write a checkpoint now: the index segments changed since the last one and a new root,
    /// so that the next open reads no log tail.
    pub fn checkpoint(&self) -> Result<(), Error> {
        let Some(durable) = &self.inner.durable else {
            return Ok(());
        };
        let mut writer = vev_core::sync::lock(&self.inner.writer);
        self.checkpoint_locked(durable, &mut writer)
    }

    /// Adopt a finished background checkpoint (`wait`: wait for one in flight): the latest
    /// database's persisted subtrees become segment references, and the tail it covered is
    /// no longer tail.
    fn finish_background(&self, writer: &mut Writer, wait: bool) {
        let done = writer
            .background
            .as_ref()
            .is_some_and(|bg| wait || bg.handle.is_finished());
        if !done {
            return;
        }
        let Some(bg) = writer.background.take() else {
            return;
        };
        // A failed checkpoint leaves the tail as it was; a later one retries.
        match bg.handle.join() {
            Ok(Ok(cp)) => {
                self.publish(cp.rebase(&self.latest()));
                writer.tail_datoms = writer.tail_datoms.saturating_sub(bg.tail_datoms);
                writer.retry_at_tail = 0;
            }
            _ => {
                writer.retry_at_tail = writer.tail_datoms + writer.tail_datoms / 4 + 1;
                // Its root may have landed although it reported a failure: re-read the root
                // before going on, so that no database here keeps naming segments that root
                // dropped (a later checkpoint would otherwise name them again).
                writer.needs_catch_up = true;
            }
        }
    }

    /// Start a checkpoint of the latest database on its own thread, unless one is running.
    fn start_background(&self, durable: &Durable, writer: &mut Writer) {
        if writer.background.is_some() {
            return;
        }
        let store = durable.store.clone();
        let snapshot = self.latest();
        let handle = std::thread::spawn(move || {
            let mut cp = store.prepare_checkpoint(&snapshot)?;
            store.write_checkpoint(&mut cp)?;
            Ok(cp)
        });
        writer.background = Some(Background {
            handle,
            tail_datoms: writer.tail_datoms,
        });
    }

    fn checkpoint_locked(&self, durable: &Durable, writer: &mut Writer) -> Result<(), Error> {
        self.finish_background(writer, true);
        self.catch_up_locked(writer)?;
        let stored = durable.store.checkpoint(&self.latest()).inspect_err(|_| {
            writer.needs_catch_up = true;
        })?;
        self.publish(stored);
        writer.tail_datoms = 0;
        Ok(())
    }

    /// Check every log row and index segment of the file (checksums, decoding, order,
    /// counts). In memory there is nothing to check.
    pub fn verify(&self) -> Result<Option<VerifyReport>, Error> {
        let Some(durable) = &self.inner.durable else {
            return Ok(None);
        };
        let db = self.sync()?;
        Ok(Some(durable.store.verify(&db)?))
    }

    /// Copy the database, as of its latest commit, to a new file at `dest` (which must not
    /// exist: `storage/exists`), while this and other connections go on writing and reading.
    /// Works from any connection to the file, read-only ones included; the copy is a
    /// complete Vev file (no `-wal` beside it needed). `progress` is called after each step
    /// of SQLite's online backup. In memory there is no file to copy (`storage/io`).
    #[allow(clippy::result_large_err)] // `Error`, as every method here returns
    pub fn backup(
        &self,
        dest: impl AsRef<Path>,
        progress: &mut dyn FnMut(&BackupProgress),
    ) -> Result<BackupReport, Error> {
        let Some(durable) = &self.inner.durable else {
            return Err(StorageError::io_kind(
                "backup",
                std::io::ErrorKind::Unsupported,
                "an in-memory database has no file to copy",
            )
            .into());
        };
        Ok(durable.store.backup(dest.as_ref(), progress)?)
    }

    /// The file this connection stores to (none in memory); on PostgreSQL, the database's
    /// URL without credentials.
    pub fn path(&self) -> Option<&Path> {
        self.inner.durable.as_ref().map(|d| d.store.path())
    }

    /// Transact EDN transaction data.
    pub fn transact_edn(&self, text: &str) -> Result<TxReport, Error> {
        let ops: Vec<TxOp> = vev_core::parse_tx(text)?
            .into_iter()
            .map(|s| s.op)
            .collect();
        self.transact(&ops)
    }

    /// Adopt a finished full-text compaction (`wait`: wait for one in flight). A failed one
    /// changes nothing (the file keeps the entries it would have replaced).
    fn finish_compaction(&self, writer: &mut Writer, wait: bool) {
        let done = writer
            .compaction
            .as_ref()
            .is_some_and(|c| wait || c.is_finished());
        if !done {
            return;
        }
        match writer.compaction.take().map(|h| h.join()) {
            Some(Ok(Ok(Some((c, id))))) => {
                self.publish(self.latest().fulltext_adopt(&c, id));
            }
            // Its write may have landed although it failed: re-read the file first.
            Some(Ok(Err(_))) => writer.needs_catch_up = true,
            Some(Err(p)) => std::panic::resume_unwind(p),
            _ => {}
        }
    }

    /// Start a full-text compaction of the latest database on its own thread, unless one
    /// is running or none is due (`all`: merge every segment into one).
    fn start_compaction(&self, writer: &mut Writer, all: bool) {
        let durable = self.inner.durable.as_ref();
        if writer.compaction.is_some()
            || durable.is_some_and(|d| d.store.is_read_only())
            || !self
                .latest()
                .fulltext_compaction_due(all, durable.is_some())
        {
            return;
        }
        let store = durable.map(|d| d.store.clone());
        let snapshot = self.latest();
        writer.compaction = Some(std::thread::spawn(move || {
            let Some(c) = snapshot.fulltext_compaction(all, store.is_some())? else {
                return Ok(None);
            };
            let id = match &store {
                Some(store) => Some(store.write_compaction(&c)?),
                None => None,
            };
            Ok(Some((c, id)))
        }));
    }

    /// Merge every full-text segment into one now (after any compaction in flight), so
    /// searches visit one segment. Transactions wait meanwhile; readers do not.
    pub fn compact_fulltext(&self) -> Result<(), Error> {
        let mut writer = vev_core::sync::lock(&self.inner.writer);
        self.finish_compaction(&mut writer, true);
        self.catch_up_locked(&mut writer)?;
        self.start_compaction(&mut writer, true);
        let Some(handle) = writer.compaction.take() else {
            return Ok(());
        };
        let joined = handle
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        if let Some((c, id)) = joined.inspect_err(|_| writer.needs_catch_up = true)? {
            self.publish(self.latest().fulltext_adopt(&c, id));
        }
        Ok(())
    }

    /// The full-text index's counters, on the latest database.
    pub fn fulltext_stats(&self) -> vev_db::fulltext::FulltextStats {
        self.latest().fulltext_stats()
    }

    /// After a failed storage write, adopt whatever the file holds.
    fn catch_up_locked(&self, writer: &mut Writer) -> Result<(), Error> {
        if let Some(durable) = &self.inner.durable {
            if durable.store.is_read_only() {
                return Err(StorageError::ReadOnly {
                    path: durable.store.path().display().to_string(),
                }
                .into());
            }
            if writer.needs_catch_up {
                let db = durable.store.catch_up(&self.latest())?;
                self.publish(db);
                writer.needs_catch_up = false;
            }
        }
        Ok(())
    }

    /// Apply operations to `db` without committing them (Datomic's `with`).
    pub fn with(&self, db: &Db, ops: &[TxOp]) -> Result<TxReport, Error> {
        self.apply(db, ops, true)
    }

    /// `with` for EDN transaction data.
    pub fn with_edn(&self, db: &Db, text: &str) -> Result<TxReport, Error> {
        let ops: Vec<TxOp> = vev_core::parse_tx(text)?
            .into_iter()
            .map(|s| s.op)
            .collect();
        self.with(db, &ops)
    }

    /// Run the transactor on `db`; `speculative` for a value that is not (or not
    /// necessarily) committed, see `TxContext::speculative`.
    fn apply(&self, db: &Db, ops: &[TxOp], speculative: bool) -> Result<TxReport, Error> {
        self.run_transactor(db.segment_cache().cloned(), speculative, |ctx| {
            vev_db::transact(db, ops, ctx)
        })
    }

    /// Run the transactor with the registered functions. A segment that failed to load
    /// (the database's `segments` cache records it) made it see less than the data: its
    /// verdict (success or error) is not to be trusted.
    fn run_transactor<T>(
        &self,
        segments: Option<Arc<vev_db::persist::SegmentCache>>,
        speculative: bool,
        run: impl FnOnce(&TxContext) -> Result<T, vev_core::TxError>,
    ) -> Result<T, Error> {
        let functions = vev_core::sync::read(&self.inner.functions);
        let ctx = TxContext {
            functions: &Registry(&functions),
            now_ms: now_ms(),
            speculative,
        };
        let mark = segments.as_ref().map(|c| c.mark());
        let result = run(&ctx);
        if let Some(f) = segments.zip(mark).and_then(|(c, m)| c.failure_since(m)) {
            return Err(f.into());
        }
        Ok(result?)
    }

    /// Register a transaction function under an ident: `[:my/transfer from to amount]`.
    pub fn register_fn(
        &self,
        ident: &str,
        f: impl Fn(&Db, &[Edn]) -> Result<Vec<TxOp>, String> + Send + Sync + 'static,
    ) {
        let key = Keyword::new(ident.trim_start_matches(':'));
        vev_core::sync::write(&self.inner.functions).insert(key, Arc::new(f));
        self.inner
            .functions_version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// A feed of every transaction report committed from now on, in commit order.
    pub fn subscribe(&self) -> Receiver<TxReport> {
        let (tx, rx) = channel();
        vev_core::sync::lock(&self.inner.writer).listeners.push(tx);
        rx
    }
}
