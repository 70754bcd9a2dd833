//! Vev's durable storage in PostgreSQL (the synchronous `postgres` client): the same log,
//! segments and root as on SQLite (`vev-sqlite`), in tables of one schema (default `vev`,
//! `?schema=NAME` in the URL), plus the writer lease.
//!
//! - `meta`: one row, the application (`vev`) and the format version; checked on open.
//! - `log`: one row per committed transaction, keyed by basis-t, the encoded `LogRecord`
//!   plus a CRC-32. A group commit's rows are one PostgreSQL transaction (with the
//!   transactions' full-text segments when they have any), and its first statement checks the
//!   writer's lease generation (`lease.rs`), so nothing commits after a takeover.
//! - `segment`: immutable index segments; `root`: one row naming the latest checkpoint;
//!   `garbage`: segments no root names any more, deleted by a later checkpoint once the
//!   grace period has passed (readers on other hosts may still be loading them).
//! - `lease`: one row naming the writer (`lease.rs`, `docs/design/lease.md`).
//! - `ft_segment`, `ft_manifest`, `ft_garbage`: the full-text index (`fulltext.rs`).
//!
//! Opening reads the root, the manifest and the log after the root in one repeatable-read
//! snapshot; segments load on demand through a connection of the segment cache's own.
//! Readers take no lease and follow the writer: every log write and checkpoint root
//! `NOTIFY`s in its own PostgreSQL transaction, and a reader's follower `LISTEN`s and
//! catches up, polling when its listen connection is down (`follow.rs`; `data_version`,
//! `catch_up`).
//! Connections reconnect on their next use after the server went away (`session.rs`).
//!
//! Only this crate (and `vev-sqlite`) knows SQL for storage.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::{GenericClient, IsolationLevel, Transaction};
use vev_core::{BasisT, StorageError};
use vev_db::persist::{self, Checkpoint, LogRecord, SegmentCache, SegmentStore};
use vev_db::Db;

mod follow;
mod fulltext;
mod lease;
mod objects;
mod session;
#[cfg(feature = "testing")]
pub mod testing;
mod verify;

pub use follow::{Checked, Follower, LISTEN_APPLICATION};
pub use lease::LeaseWait;
use lease::{fence_sql, Lease};
pub use objects::{Objects, SegmentObjects};
pub use session::{is_postgres_url, Target};
use session::{pg_error, Session};
pub use verify::VerifyReport;

/// The version of the table layout this build reads and writes (the `meta` row's). Version 2
/// may store a segment or log record LZ4-compressed (as SQLite files of format 6 do); a build
/// of version 1 would refuse those blobs as corrupt, so it must refuse the schema instead.
pub const FORMAT_VERSION: i64 = 2;
/// The older layouts this build also reads (their blobs are all raw, which it reads as they
/// are); a writer migrates one by marking it `FORMAT_VERSION` once it holds the lease.
pub const FORMAT_VERSIONS_MIGRATED: [i64; 1] = [1];
/// The default lease duration: a writer that stops renewing is taken over after this long.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(10);
/// The default `gc_grace`: an hour, as on SQLite.
pub const GC_GRACE_DEFAULT: Duration = Duration::from_secs(3600);

/// How to open a database.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Read only: no lease, no writes.
    pub read_only: bool,
    /// Create Vev's tables when the schema has none (writers only).
    pub create: bool,
    /// What a writer does while another holds a live lease.
    pub wait: LeaseWait,
    /// How long the lease lasts without renewal (renewed every third of it).
    pub lease: Duration,
    /// Decoded segment datoms kept in memory.
    pub cache_datoms_max: usize,
    /// How long a segment stays after no root names it; `None` keeps every segment.
    pub gc_grace: Option<Duration>,
    /// Where segments are kept when not in the tables (`objects.rs`): `None` keeps them in
    /// the `segment` and `ft_segment` tables.
    pub objects: Objects,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            read_only: false,
            create: true,
            wait: LeaseWait::Fail,
            lease: LEASE_DEFAULT,
            cache_datoms_max: 8_000_000,
            gc_grace: Some(GC_GRACE_DEFAULT),
            objects: None,
        }
    }
}

/// The wall clock in milliseconds since the Unix epoch (garbage ages).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Frame a payload: the payload then its CRC-32 (4 bytes, little-endian), as on SQLite.
pub(crate) fn seal(mut payload: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

/// Sweep orphan objects for the writer of `generation` (`objects.rs`'s module doc): list
/// the objects, then read the rows' keys on a PostgreSQL connection of its own (so the
/// writer's commits need not wait), then delete the orphans.
fn sweep_orphans(
    objects: &dyn SegmentObjects,
    target: Target,
    schema: &str,
    location: &str,
    generation: i64,
) -> Result<(), StorageError> {
    let listed = objects::list_ours(objects)?;
    let session = Session::new(target, String::new());
    let named = session.with("orphan sweep", |c| {
        objects::named_keys(
            c,
            [
                &format!("{schema}.segment"),
                &format!("{schema}.ft_segment"),
            ],
            |e| pg_error(location, "orphan sweep", &e),
        )
    })?;
    let orphans = objects::orphans(&listed, &named, generation);
    if orphans.is_empty() {
        return Ok(());
    }
    objects.delete_all(orphans)
}

/// Check and strip a frame's CRC-32.
pub(crate) fn unseal(
    what: &dyn Fn() -> String,
    mut bytes: Vec<u8>,
) -> Result<Vec<u8>, StorageError> {
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

/// Reads segments and old log records for the cache, through its own connection.
struct SegmentReader {
    session: Session,
    schema: String,
    objects: Objects,
}

impl SegmentStore for SegmentReader {
    fn read_segment(&self, id: u64) -> Result<Vec<u8>, StorageError> {
        let s = &self.schema;
        let location = self.session.location();
        let what = || format!("segment {id}");
        let row = self.session.with("segment read", |c| {
            c.query_opt(
                &format!("SELECT payload FROM {s}.segment WHERE id = $1"),
                &[&(id as i64)],
            )
            .map_err(|e| pg_error(location, "segment read", &e))
        })?;
        match row {
            Some(r) => {
                let payload = unseal(&what, r.get(0))?;
                match &self.objects {
                    Some(objects) => objects::fetch(objects.as_ref(), &what, payload),
                    None => Ok(payload),
                }
            }
            None => Err(StorageError::corruption(
                what(),
                "it is missing from storage",
            )),
        }
    }

    fn read_fulltext_segment(&self, id: u64, _doc_first: u64) -> Result<Vec<u8>, StorageError> {
        let location = self.session.location();
        self.session
            .with("full-text segment read", |c| {
                fulltext::read_segment(c, &self.schema, location, id)
            })
            .and_then(|payload| match &self.objects {
                Some(objects) => objects::fetch(
                    objects.as_ref(),
                    &|| format!("full-text segment {id}"),
                    payload,
                ),
                None => Ok(payload),
            })
    }

    fn read_log(&self, first: BasisT, last: BasisT) -> Result<Vec<LogRecord>, StorageError> {
        let location = self.session.location();
        let records = self.session.with("log read", |c| {
            read_log_after(c, &self.schema, location, first - 1, Some(last))
        })?;
        if records.last().map(|r| r.t) != Some(last) {
            return Err(StorageError::corruption(
                format!("log row t={}", first + records.len() as u64),
                "it is missing from storage",
            ));
        }
        Ok(records)
    }
}

/// An open database: the connection that writes (or reads) the log and the root, the
/// segment cache, and for a writer its lease.
pub struct Store {
    target: Target,
    /// The database's location for messages: the PostgreSQL URL, or with segments in an
    /// object store `OBJECTS?log=URL`; never credentials.
    location: String,
    schema: String,
    conn: Session,
    /// Where the segments are when not in the tables.
    objects: Objects,
    cache: Arc<SegmentCache>,
    /// A writer's lease; `None` when read only.
    lease: Option<Lease>,
    /// The next segment id a checkpoint may use.
    next_segment: Mutex<u64>,
    /// The next full-text segment id (a writer's).
    next_fulltext: Mutex<u64>,
    gc_grace: Option<Duration>,
    /// The channel writes notify readers on (`follow::channel`).
    channel: String,
    /// The root (basis-t, `next_segment`) the latest database read here is built on.
    root_seen: Mutex<Option<(i64, i64)>>,
    /// When this writer last swept orphan objects (`sweep_when_due`).
    swept_at: Mutex<Option<std::time::Instant>>,
}

impl Drop for Store {
    /// A writer's close gives its lease up, so the next writer need not wait for it to
    /// expire.
    fn drop(&mut self) {
        if let Some(lease) = &mut self.lease {
            lease.stop();
            if !lease.is_fenced() {
                lease::release(&self.conn, &self.schema, lease.generation);
            }
        }
    }
}

/// What `Store::open` found.
pub struct Opened {
    pub store: Store,
    pub db: Db,
    /// The basis-t of the latest checkpoint (0 when there is none).
    pub checkpoint_t: BasisT,
    /// Datoms in the log after that checkpoint.
    pub tail_datoms: usize,
}

impl Store {
    /// Open (or, for a writer, create) the database at `url` and build its latest `Db`. A
    /// writer takes the lease first, then reads: what it reads is final, since any older
    /// writer is fenced from then on.
    pub fn open(url: &str, opts: &StoreOptions) -> Result<Opened, StorageError> {
        let target = Target::parse(url)?;
        let schema = target.schema.clone();
        let lease_ms = opts.lease.as_millis().max(1);
        // A writer paused inside a transaction holds the lease row's lock; the server ends
        // such a session after a lease's length, so a takeover never waits longer.
        let setup = if opts.read_only {
            String::new()
        } else {
            format!("SET idle_in_transaction_session_timeout = {lease_ms}")
        };
        let conn = Session::new(target.clone(), setup);
        let create = opts.create && !opts.read_only;
        let location = match &opts.objects {
            Some(o) => format!("{}?log={}", o.location(), target.location()),
            None => target.location().to_owned(),
        };
        let version = conn.with("open", |c| {
            check_or_init(c, &schema, &location, create, opts.objects.as_deref())
        })?;
        let lease = if opts.read_only {
            None
        } else {
            let generation = lease::acquire(&conn, &schema, opts.lease, opts.wait)?;
            let renew = Session::new(target.clone(), String::new());
            Some(Lease::start(renew, schema.clone(), generation, opts.lease))
        };
        let cache = SegmentCache::new(
            Arc::new(SegmentReader {
                session: Session::new(target.clone(), String::new()),
                schema: schema.clone(),
                objects: opts.objects.clone(),
            }),
            opts.cache_datoms_max,
        );
        let channel = follow::channel(&schema);
        let store = Store {
            channel,
            target,
            location,
            schema,
            objects: opts.objects.clone(),
            conn,
            cache,
            lease,
            next_segment: Mutex::new(1),
            next_fulltext: Mutex::new(1),
            gc_grace: opts.gc_grace,
            root_seen: Mutex::new(None),
            swept_at: Mutex::new(None),
        };
        if store.lease.is_some() {
            if version != FORMAT_VERSION {
                let s = &store.schema;
                let location = store.location();
                store.write_fenced("migrate", |tx| {
                    tx.execute(
                        &format!("UPDATE {s}.meta SET format_version = $1 WHERE slot = 0"),
                        &[&FORMAT_VERSION],
                    )
                    .map(drop)
                    .map_err(|e| pg_error(location, "migrate", &e))
                })?;
            }
            let mut next = 1;
            store.write_fenced("full-text open", |tx| {
                next = fulltext::writer_start(
                    tx,
                    &store.schema,
                    store.location(),
                    store.objects.as_deref(),
                )?;
                Ok(())
            })?;
            *vev_core::sync::lock(&store.next_fulltext) = next;
        }
        let (db, checkpoint_t, tail_datoms) = store.load()?;
        Ok(Opened {
            store,
            db,
            checkpoint_t,
            tail_datoms,
        })
    }

    /// The database's URL without credentials.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The PostgreSQL URL (without credentials) of the log and root.
    pub fn log_location(&self) -> &str {
        self.target.location()
    }

    pub fn is_read_only(&self) -> bool {
        self.lease.is_none()
    }

    pub fn cache(&self) -> &Arc<SegmentCache> {
        &self.cache
    }

    /// Start following the writer (read-only stores): a thread that `LISTEN`s for the
    /// writer's notifications on a connection of its own and runs `check` on each (and at
    /// least every `interval`, polling, also while that connection is down and being made
    /// again with backoff). `check` catches the reader up; dropping the `Follower` stops it.
    pub fn follow(
        &self,
        interval: Duration,
        check: Box<dyn FnMut() -> Checked + Send>,
    ) -> Result<Follower, StorageError> {
        if !self.is_read_only() {
            return Err(StorageError::io_kind(
                "follow",
                std::io::ErrorKind::Unsupported,
                "a writer has nothing to follow",
            ));
        }
        follow::start(&self.target, interval, check)
            .map_err(|e| StorageError::io_kind("follow", e.kind(), e.to_string()))
    }

    /// The lease generation this writer holds (`None` when read only).
    pub fn lease_generation(&self) -> Option<i64> {
        self.lease.as_ref().map(|l| l.generation)
    }

    fn read_only_error(&self) -> StorageError {
        StorageError::ReadOnly {
            path: self.location().to_owned(),
        }
    }

    fn fenced_error(&self, held: i64, current: i64) -> StorageError {
        StorageError::Fenced {
            location: self.location().to_owned(),
            held,
            current,
        }
    }

    /// The lease, or why this connection may not write: read only, or fenced already.
    fn writable_lease(&self) -> Result<&Lease, StorageError> {
        let Some(lease) = &self.lease else {
            return Err(self.read_only_error());
        };
        if lease.is_fenced() {
            let current = self
                .conn
                .with("lease read", |c| {
                    lease::current_generation(c, &self.schema, self.location())
                })
                .unwrap_or(-1);
            return Err(self.fenced_error(lease.generation, current));
        }
        Ok(lease)
    }

    /// Run `write` in a PostgreSQL transaction whose first statement checks (and renews)
    /// the lease: after a takeover it writes nothing and fences this writer for good.
    fn write_fenced(
        &self,
        op: &str,
        write: impl FnOnce(&mut Transaction<'_>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        self.write_fenced_notify(op, None, write)
    }

    /// `write_fenced` that also notifies readers (`follow.rs`) with `payload` when it
    /// commits: the `NOTIFY` rides on the fence statement, so it costs no round trip and is
    /// delivered only if the transaction commits.
    fn write_fenced_notify(
        &self,
        op: &str,
        payload: Option<&str>,
        write: impl FnOnce(&mut Transaction<'_>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let lease = self.writable_lease()?;
        let location = self.location();
        let err = |e: postgres::Error| pg_error(location, op, &e);
        self.conn.with(op, |client| {
            let mut tx = client.transaction().map_err(err)?;
            let held = match payload {
                None => tx.query_opt(&fence_sql(&self.schema), &[&lease.generation, &lease.ms()]),
                Some(payload) => tx.query_opt(
                    &format!(
                        "WITH fence AS ({}) SELECT generation, pg_notify($3, $4)::text FROM fence",
                        fence_sql(&self.schema)
                    ),
                    &[&lease.generation, &lease.ms(), &self.channel, &payload],
                ),
            }
            .map_err(err)?;
            if held.is_none() {
                lease
                    .fenced
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let current = lease::current_generation(&mut tx, &self.schema, location)?;
                return Err(self.fenced_error(lease.generation, current));
            }
            write(&mut tx)?;
            tx.commit().map_err(err)
        })
    }

    /// The root and the log after it, read in one snapshot, made into a `Db`.
    fn load(&self) -> Result<(Db, BasisT, usize), StorageError> {
        let mark = self.cache.mark();
        let s = &self.schema;
        let location = self.location();
        let err = |e: postgres::Error| pg_error(location, "open read", &e);
        let (root, manifest, max_id, records) = self.conn.with("open read", |client| {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(err)?;
            let root: Option<(i64, i64, Vec<u8>)> = tx
                .query_opt(
                    &format!("SELECT t, next_segment, record FROM {s}.root WHERE slot = 0"),
                    &[],
                )
                .map_err(err)?
                .map(|r| (r.get(0), r.get(1), r.get(2)));
            let manifest = fulltext::read_manifest(&mut tx, s, location)?;
            let max_id: Option<i64> = tx
                .query_one(&format!("SELECT max(id) FROM {s}.segment"), &[])
                .map_err(err)?
                .get(0);
            let root_t = root.as_ref().map_or(0, |r| r.0 as u64);
            let records = read_log_after(&mut tx, s, location, root_t, None)?;
            tx.commit().map_err(err)?;
            Ok((root, manifest, max_id, records))
        })?;
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
        {
            // Segments of a checkpoint whose root never landed: new ids start past them.
            let mut next = vev_core::sync::lock(&self.next_segment);
            *next = (*next).max(max_id.map_or(1, |m| m as u64 + 1));
        }
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

    /// Append committed transactions' log records in one PostgreSQL transaction (a group
    /// commit), fenced by the lease; the last db-after's unstored full-text entries go in
    /// the same transaction. Without full-text entries it is one statement (the lease check
    /// as a CTE of the insert), so a commit costs one round trip.
    pub fn append(&self, txs: &[(&Db, &[vev_core::Datom])]) -> Result<(), StorageError> {
        let Some((last, _)) = txs.last() else {
            return Ok(());
        };
        let (ts, records): (Vec<i64>, Vec<Vec<u8>>) = txs
            .iter()
            .map(|(db, datoms)| {
                let t = db.basis_t();
                (
                    t as i64,
                    seal(LogRecord::encode_of(t, db.next_user(), datoms)),
                )
            })
            .unzip();
        let entries = last.fulltext_unstored();
        if entries.is_empty() {
            return self.append_rows(&ts, &records);
        }
        let payload = format!("log {}", last.basis_t());
        self.write_fenced_notify("log write", Some(&payload), |tx| {
            self.insert_log(tx, &ts, &records)?;
            self.write_entries(tx, &entries)
        })
    }

    /// Log rows (and nothing else) in one fenced statement, which also notifies readers.
    fn append_rows(&self, ts: &[i64], records: &[Vec<u8>]) -> Result<(), StorageError> {
        let lease = self.writable_lease()?;
        let s = &self.schema;
        let location = self.location();
        // No row out of `ins` (fenced) means no notification and no row back.
        let sql = format!(
            "WITH fence AS ({}), ins AS (INSERT INTO {s}.log (t, record) \
             SELECT u.t, u.r FROM unnest($3::bigint[], $4::bytea[]) AS u(t, r), fence \
             RETURNING t) \
             SELECT count(*), pg_notify($5, 'log ' || max(t))::text FROM ins HAVING count(*) > 0",
            fence_sql(s)
        );
        let row = self.conn.with_prepared("log write", &sql, |c, statement| {
            c.query_opt(
                statement,
                &[&lease.generation, &lease.ms(), &ts, &records, &self.channel],
            )
            .map_err(|e| pg_error(location, "log write", &e))
        })?;
        if row.is_none() {
            lease
                .fenced
                .store(true, std::sync::atomic::Ordering::SeqCst);
            return Err(self
                .writable_lease()
                .err()
                .unwrap_or_else(|| self.fenced_error(lease.generation, -1)));
        }
        Ok(())
    }

    fn insert_log(
        &self,
        tx: &mut Transaction<'_>,
        ts: &[i64],
        records: &[Vec<u8>],
    ) -> Result<(), StorageError> {
        let s = &self.schema;
        tx.execute(
            &format!(
                "INSERT INTO {s}.log (t, record) SELECT * FROM unnest($1::bigint[], $2::bytea[])"
            ),
            &[&ts, &records],
        )
        .map_err(|e| pg_error(self.location(), "log write", &e))?;
        Ok(())
    }

    /// Append many transactions' log records in one fenced transaction (bulk import), with
    /// their full-text entries.
    pub fn append_many(
        &self,
        records: &[LogRecord],
        fulltext: &[vev_db::fulltext::NewEntry],
    ) -> Result<(), StorageError> {
        let (ts, bytes): (Vec<i64>, Vec<Vec<u8>>) = records
            .iter()
            .map(|r| (r.t as i64, seal(r.encode())))
            .unzip();
        let payload = format!("log {}", records.last().map_or(0, |r| r.t));
        self.write_fenced_notify("log write", Some(&payload), |tx| {
            self.insert_log(tx, &ts, &bytes)?;
            self.write_entries(tx, fulltext)
        })
    }

    /// Write a checkpoint of `db` and return the same database reading through segments.
    pub fn checkpoint(&self, db: &Db) -> Result<Db, StorageError> {
        let mut cp = self.prepare_checkpoint(db)?;
        self.write_checkpoint(&mut cp)?;
        Ok(cp.db)
    }

    /// Encode a checkpoint of `db`: the segments not yet stored and the root naming them.
    pub fn prepare_checkpoint(&self, db: &Db) -> Result<Checkpoint, StorageError> {
        self.writable_lease()?;
        // Ids are taken for good, even if this checkpoint fails (as on SQLite).
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

    /// Write a prepared checkpoint: its segments in fenced transactions of at most 1,024,
    /// then the root (with the garbage bookkeeping) in one more.
    pub fn write_checkpoint(&self, cp: &mut Checkpoint) -> Result<(), StorageError> {
        let s = &self.schema;
        let location = self.location();
        for chunk in cp.segments.chunks_mut(1024) {
            let (ids, mut payloads): (Vec<i64>, Vec<Vec<u8>>) = chunk
                .iter_mut()
                .map(|seg| (seg.id as i64, seal(std::mem::take(&mut seg.payload))))
                .unzip();
            if let Some(objects) = &self.objects {
                // The objects first; the rows, naming them, only once they all exist.
                let generation = self.writable_lease()?.generation;
                let keys: Vec<String> = ids
                    .iter()
                    .map(|&id| objects::segment_key(id as u64, generation))
                    .collect();
                objects.put_all(keys.iter().cloned().zip(payloads).collect())?;
                payloads = keys.into_iter().map(|k| seal(k.into_bytes())).collect();
            }
            self.write_fenced("segment write", |tx| {
                tx.execute(
                    &format!(
                        "INSERT INTO {s}.segment (id, payload) \
                         SELECT * FROM unnest($1::bigint[], $2::bytea[])"
                    ),
                    &[&ids, &payloads],
                )
                .map(|_| ())
                .map_err(|e| pg_error(location, "segment write", &e))
            })?;
        }
        let next = *vev_core::sync::lock(&self.next_segment) as i64;
        let root = seal(std::mem::take(&mut cp.root));
        let payload = format!("root {}", cp.t);
        self.write_fenced_notify("root write", Some(&payload), |tx| {
            self.collect_garbage(tx, cp)?;
            tx.execute(
                &format!(
                    "INSERT INTO {s}.root (slot, t, next_segment, record) VALUES (0, $1, $2, $3) \
                     ON CONFLICT (slot) DO UPDATE SET t = EXCLUDED.t, \
                     next_segment = EXCLUDED.next_segment, record = EXCLUDED.record"
                ),
                &[&(cp.t as i64), &next, &root],
            )
            .map(|_| ())
            .map_err(|e| pg_error(location, "root write", &e))
        })?;
        *vev_core::sync::lock(&self.root_seen) = Some((cp.t as i64, next));
        self.sweep_when_due();
        Ok(())
    }

    /// Sweep orphan objects at a writer's first checkpoint and then once per
    /// `SWEEP_INTERVAL`, on a thread of its own: listing a large bucket takes seconds, and
    /// neither this checkpoint nor a commit waits for it. A failed or interrupted sweep
    /// loses nothing (it only deletes objects no row names); the next one is due an
    /// interval later.
    fn sweep_when_due(&self) {
        let Some(objects) = &self.objects else {
            return;
        };
        let Ok(lease) = self.writable_lease() else {
            return;
        };
        {
            let mut at = vev_core::sync::lock(&self.swept_at);
            if at.is_some_and(|at| at.elapsed() < objects::SWEEP_INTERVAL) {
                return;
            }
            *at = Some(std::time::Instant::now());
        }
        let (objects, target) = (objects.clone(), self.target.clone());
        let (schema, location) = (self.schema.clone(), self.location.clone());
        let generation = lease.generation;
        std::thread::spawn(move || {
            sweep_orphans(objects.as_ref(), target, &schema, &location, generation)
        });
    }

    /// As on SQLite: the segments the old root names and `cp` does not, and those of
    /// checkpoints that failed before their root, become garbage; a segment the new root
    /// names is never garbage; garbage older than the grace period is deleted.
    fn collect_garbage(
        &self,
        tx: &mut Transaction<'_>,
        cp: &Checkpoint,
    ) -> Result<(), StorageError> {
        let s = &self.schema;
        let err = |e: postgres::Error| pg_error(self.location(), "garbage", &e);
        let named: std::collections::HashSet<u64> = cp.db.segment_ids().into_iter().collect();
        let old = tx
            .query_opt(
                &format!("SELECT next_segment, record FROM {s}.root WHERE slot = 0"),
                &[],
            )
            .map_err(err)?;
        let mut dead: Vec<u64> = Vec::new();
        let mut orphans_from = 0i64;
        if let Some(row) = old {
            let record = unseal(&|| "root record".into(), row.get(1))?;
            let old_ids = persist::root_segment_ids(&record, &self.cache)
                .map_err(|e| StorageError::corruption("root record", e.0))?;
            dead.extend(old_ids);
            orphans_from = row.get(0);
        }
        for row in tx
            .query(
                &format!("SELECT id FROM {s}.segment WHERE id >= $1 AND id < $2"),
                &[&orphans_from, &(cp.first_id as i64)],
            )
            .map_err(err)?
        {
            dead.push(row.get::<_, i64>(0) as u64);
        }
        let now = now_ms();
        let dead: Vec<i64> = dead
            .into_iter()
            .filter(|id| !named.contains(id))
            .map(|id| id as i64)
            .collect();
        let named: Vec<i64> = named.into_iter().map(|id| id as i64).collect();
        tx.execute(
            &format!(
                "INSERT INTO {s}.garbage (id, since_ms) SELECT unnest($1::bigint[]), $2 \
                 ON CONFLICT DO NOTHING"
            ),
            &[&dead, &now],
        )
        .map_err(err)?;
        tx.execute(
            &format!("DELETE FROM {s}.garbage WHERE id = ANY($1::bigint[])"),
            &[&named],
        )
        .map_err(err)?;
        objects::collect_garbage(
            tx,
            self.objects.as_deref(),
            &format!("{s}.segment"),
            &format!("{s}.garbage"),
            self.gc_grace,
            now,
            err,
        )
    }

    /// Segments waiting out the grace period before a checkpoint deletes them.
    pub fn garbage_segments(&self) -> Result<u64, StorageError> {
        let s = &self.schema;
        self.conn.with("garbage", |c| {
            c.query_one(&format!("SELECT count(*) FROM {s}.garbage"), &[])
                .map(|r| r.get::<_, i64>(0) as u64)
                .map_err(|e| pg_error(self.location(), "garbage", &e))
        })
    }

    /// What changes when the database does: the last log t, and the root's t and
    /// `next_segment`. A reader polls it to know whether to catch up.
    pub fn data_version(&self) -> Result<[i64; 3], StorageError> {
        let s = &self.schema;
        let sql = format!(
            "SELECT coalesce((SELECT max(t) FROM {s}.log), 0), \
             coalesce((SELECT t FROM {s}.root WHERE slot = 0), 0), \
             coalesce((SELECT next_segment FROM {s}.root WHERE slot = 0), 0)"
        );
        self.conn
            .with_prepared("data version", &sql, |c, statement| {
                let row = c
                    .query_one(statement, &[])
                    .map_err(|e| pg_error(self.location(), "data version", &e))?;
                Ok([row.get(0), row.get(1), row.get(2)])
            })
    }

    /// Bring `db` up to the latest committed transaction: a new root is adopted (reopening
    /// from it), otherwise the log after `db` is replayed (a writer after a failed write
    /// reads everything again, as on SQLite).
    pub fn catch_up(&self, db: &Db) -> Result<Db, StorageError> {
        let s = &self.schema;
        let location = self.location();
        let root: Option<(i64, i64)> = self.conn.with("root read", |c| {
            c.query_opt(
                &format!("SELECT t, next_segment FROM {s}.root WHERE slot = 0"),
                &[],
            )
            .map(|r| r.map(|r| (r.get(0), r.get(1))))
            .map_err(|e| pg_error(location, "root read", &e))
        })?;
        let seen = *vev_core::sync::lock(&self.root_seen);
        if root.is_some() && root != seen {
            return self.load().map(|(db, _, _)| db);
        }
        let records = self.conn.with("log read", |c| {
            read_log_after(c, s, location, db.basis_t(), None)
        })?;
        if !records.is_empty() && !self.is_read_only() {
            return self.load().map(|(db, _, _)| db);
        }
        let mut db = db.current();
        for rec in records {
            db = replay(db, &rec)?;
        }
        Ok(db)
    }
}

fn replay(db: Db, rec: &LogRecord) -> Result<Db, StorageError> {
    persist::replay_owned(db, rec)
        .map_err(|e| StorageError::corruption(format!("log row t={}", rec.t), e.0))
}

pub(crate) fn decode_log_row(t: i64, bytes: Vec<u8>) -> Result<LogRecord, StorageError> {
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

/// The log records after basis-t `after` (up to `last`, if given), in order, without gaps.
fn read_log_after(
    c: &mut impl GenericClient,
    s: &str,
    location: &str,
    after: BasisT,
    last: Option<BasisT>,
) -> Result<Vec<LogRecord>, StorageError> {
    let last = last.map_or(i64::MAX, |t| t.min(i64::MAX as u64) as i64);
    let rows = c
        .query(
            &format!("SELECT t, record FROM {s}.log WHERE t > $1 AND t <= $2 ORDER BY t"),
            &[&(after as i64), &last],
        )
        .map_err(|e| pg_error(location, "log read", &e))?;
    let mut out = Vec::with_capacity(rows.len());
    for (expect, row) in (after + 1..).zip(rows) {
        let t: i64 = row.get(0);
        if t as u64 != expect {
            return Err(StorageError::corruption(
                format!("log row t={t}"),
                format!("expected t={expect}: the log has a gap"),
            ));
        }
        out.push(decode_log_row(t, row.get(1))?);
    }
    Ok(out)
}

/// Check that the schema holds a Vev database of a format this build reads, and give its
/// version (a writer then migrates an older one); give an empty (or missing) schema Vev's
/// tables when `create`. With `objects`, the database must keep its segments there (and
/// a new one is made so), without, in its tables.
fn check_or_init(
    c: &mut postgres::Client,
    s: &str,
    location: &str,
    create: bool,
    objects: Option<&dyn SegmentObjects>,
) -> Result<i64, StorageError> {
    let err = |e: postgres::Error| pg_error(location, "open", &e);
    let not_vev = |reason: String| StorageError::NotVev {
        path: location.to_owned(),
        reason,
    };
    let meta_exists = |c: &mut dyn GenericClientDyn| -> Result<bool, StorageError> {
        c.exists(&format!("{s}.meta")).map_err(err)
    };
    if !meta_exists(c)? {
        let tables: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE schemaname = $1",
                &[&s],
            )
            .map_err(err)?
            .get(0);
        if tables > 0 {
            return Err(not_vev(format!(
                "schema {s} holds {tables} tables but no {s}.meta"
            )));
        }
        if !create {
            return Err(not_vev(format!("schema {s} holds no vev tables")));
        }
        let mut tx = c.transaction().map_err(err)?;
        // Two writers creating at once: the second waits here, then finds the tables.
        tx.execute("SELECT pg_advisory_xact_lock(1447383601)", &[])
            .map_err(err)?;
        if !meta_exists(&mut tx)? {
            let (application, objects_tables) = match objects {
                Some(_) => (objects::APPLICATION, objects::tables(s)),
                None => ("vev", String::new()),
            };
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {s};
                 CREATE TABLE {s}.meta (slot integer PRIMARY KEY CHECK (slot = 0),
                     application text NOT NULL, format_version bigint NOT NULL);
                 CREATE TABLE {s}.log (t bigint PRIMARY KEY, record bytea NOT NULL);
                 CREATE TABLE {s}.segment (id bigint PRIMARY KEY, payload bytea NOT NULL);
                 CREATE TABLE {s}.root (slot integer PRIMARY KEY CHECK (slot = 0),
                     t bigint NOT NULL, next_segment bigint NOT NULL, record bytea NOT NULL);
                 CREATE TABLE {s}.garbage (id bigint PRIMARY KEY, since_ms bigint NOT NULL);
                 CREATE TABLE {s}.lease (slot integer PRIMARY KEY CHECK (slot = 0),
                     owner text NOT NULL, generation bigint NOT NULL,
                     expires_at timestamptz NOT NULL);
                 {}
                 {objects_tables}
                 INSERT INTO {s}.meta VALUES (0, '{application}', {FORMAT_VERSION});
                 INSERT INTO {s}.lease VALUES (0, '', 0, '-infinity');",
                fulltext::tables(s)
            ))
            .map_err(err)?;
            if let Some(o) = objects {
                tx.execute(
                    &format!("INSERT INTO {s}.objects VALUES (0, $1)"),
                    &[&o.location()],
                )
                .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
    }
    let row = c
        .query_opt(
            &format!("SELECT application, format_version FROM {s}.meta WHERE slot = 0"),
            &[],
        )
        .map_err(err)?;
    let Some(row) = row else {
        return Err(not_vev(format!("{s}.meta has no row")));
    };
    let application: String = row
        .try_get(0)
        .map_err(|e| not_vev(format!("{s}.meta is not vev's: {e}")))?;
    let version: i64 = row
        .try_get(1)
        .map_err(|e| not_vev(format!("{s}.meta is not vev's: {e}")))?;
    check_application(c, s, location, &application, objects)?;
    if version != FORMAT_VERSION && !FORMAT_VERSIONS_MIGRATED.contains(&version) {
        return Err(StorageError::FormatVersion {
            path: location.to_owned(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    check_columns(c, s, location).map(|()| version)
}

/// The `meta` row's application against how the database is opened: `vev` keeps its
/// segments in the tables, `vev+objects` in the object store its `objects` row names.
fn check_application(
    c: &mut postgres::Client,
    s: &str,
    location: &str,
    application: &str,
    objects: Option<&dyn SegmentObjects>,
) -> Result<(), StorageError> {
    let err = |e: postgres::Error| pg_error(location, "open", &e);
    let not_vev = |reason: String| StorageError::NotVev {
        path: location.to_owned(),
        reason,
    };
    match (application, objects) {
        ("vev", None) => {}
        ("vev", Some(o)) => {
            return Err(not_vev(format!(
                "schema {s} keeps its segments in postgresql, not in {}: open it with its \
                 postgres:// url",
                o.location()
            )))
        }
        (objects::APPLICATION, None) => {
            return Err(not_vev(format!(
                "schema {s} keeps its segments in an object store: open it with its s3:// url"
            )))
        }
        (objects::APPLICATION, Some(o)) => {
            let row = c
                .query_opt(
                    &format!("SELECT location FROM {s}.objects WHERE slot = 0"),
                    &[],
                )
                .map_err(err)?;
            let named: Option<String> = row.and_then(|r| r.try_get(0).ok());
            if named.as_deref() != Some(o.location()) {
                return Err(not_vev(format!(
                    "schema {s} keeps its segments in {}, not in {}",
                    named.as_deref().unwrap_or("no named object store"),
                    o.location()
                )));
            }
        }
        _ => {
            return Err(not_vev(format!(
                "{s}.meta names application {application:?}, not vev"
            )))
        }
    }
    Ok(())
}

/// Every column Vev reads, with its type; all `NOT NULL`. Reads take values by these types
/// (`Row::get`, which panics on a mismatch), so a schema altered by hand is refused at open.
const COLUMNS: &[(&str, &str, &str)] = &[
    ("log", "t", "bigint"),
    ("log", "record", "bytea"),
    ("segment", "id", "bigint"),
    ("segment", "payload", "bytea"),
    ("root", "t", "bigint"),
    ("root", "next_segment", "bigint"),
    ("root", "record", "bytea"),
    ("garbage", "id", "bigint"),
    ("garbage", "since_ms", "bigint"),
    ("lease", "owner", "text"),
    ("lease", "generation", "bigint"),
    ("lease", "expires_at", "timestamp with time zone"),
    ("ft_segment", "id", "bigint"),
    ("ft_segment", "part", "integer"),
    ("ft_segment", "payload", "bytea"),
    ("ft_manifest", "doc_first", "bigint"),
    ("ft_manifest", "doc_end", "bigint"),
    ("ft_manifest", "segment", "bigint"),
    ("ft_manifest", "record", "bytea"),
    ("ft_garbage", "id", "bigint"),
    ("ft_garbage", "since_ms", "bigint"),
];

fn check_columns(c: &mut postgres::Client, s: &str, location: &str) -> Result<(), StorageError> {
    let rows = c
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
             FROM information_schema.columns WHERE table_schema = $1",
            &[&s],
        )
        .map_err(|e| pg_error(location, "open", &e))?;
    let found: std::collections::HashMap<(String, String), (String, String)> = rows
        .iter()
        .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3))))
        .collect();
    for (table, column, ty) in COLUMNS {
        let key = ((*table).to_owned(), (*column).to_owned());
        match found.get(&key) {
            Some((t, nullable)) if t == ty && nullable == "NO" => {}
            other => {
                return Err(StorageError::NotVev {
                    path: location.to_owned(),
                    reason: format!(
                        "column {s}.{table}.{column} is {}, not {ty} NOT NULL",
                        other.map_or("missing".to_owned(), |(t, n)| {
                            format!("{t}{}", if n == "NO" { " NOT NULL" } else { "" })
                        })
                    ),
                })
            }
        }
    }
    Ok(())
}

/// `to_regclass` through any client (a connection or a transaction).
trait GenericClientDyn {
    fn exists(&mut self, table: &str) -> Result<bool, postgres::Error>;
}

impl<C: GenericClient> GenericClientDyn for C {
    fn exists(&mut self, table: &str) -> Result<bool, postgres::Error> {
        let row = self.query_one("SELECT to_regclass($1)::text", &[&table])?;
        Ok(row.get::<_, Option<String>>(0).is_some())
    }
}
