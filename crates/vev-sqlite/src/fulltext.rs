//! The full-text index's tables:
//! - `vev_ft_segment`: immutable full-text segments, each in parts of at most
//!   `SEGMENT_PART_BYTES` (one row a part, each framed, keyed by id × 65,536 + part: a
//!   rowid table, whose inserts cost less than a composite key's): a compaction writes the parts of a
//!   large merged segment in write batches of their own, so a transaction waits for one
//!   part at most, never for a whole segment. The writer gives ids in order from one past
//!   the largest in the file, so none is used twice (readers cache segments by id); parts
//!   of a segment no manifest row names (a compaction that failed or crashed before its
//!   last batch) are deleted when a writer opens the file.
//! - `vev_ft_manifest`: the live segments, one row per manifest entry, keyed by its first
//!   document number, with the entry's record;
//! - `vev_ft_garbage`: segments a compaction replaced, deleted by a later compaction once
//!   the grace period has passed (readers in other processes may still be loading them).
//!
//! A transaction's segment and manifest row are written in the write batch of its log row,
//! so a crash keeps all three or none. A compaction writes its segment's parts, then in one
//! last batch deletes the rows it replaces and inserts its own.

use rusqlite::params;
use vev_core::StorageError;
use vev_db::fulltext::{Compaction, NewEntry};
use vev_db::persist::StoredEntry;

use crate::{io, seal, unreadable, unseal, Store};

/// Each compaction looks for the garbage older than the grace period: without an index that
/// is a scan of every segment replaced in the last hour (thousands under a stream of small
/// transactions). Writers create it on files that lack it (an index changes no format).
macro_rules! garbage_index {
    () => {
        "CREATE INDEX IF NOT EXISTS vev_ft_garbage_since ON vev_ft_garbage (since_ms);"
    };
}

pub(crate) const GARBAGE_INDEX: &str = garbage_index!();

pub(crate) const TABLES: &str = concat!(
    "
    CREATE TABLE IF NOT EXISTS vev_ft_segment (key INTEGER PRIMARY KEY, payload BLOB NOT NULL);
    CREATE TABLE IF NOT EXISTS vev_ft_manifest (
        doc_first INTEGER PRIMARY KEY,
        doc_end INTEGER NOT NULL,
        segment INTEGER NOT NULL,
        record BLOB NOT NULL,
        payload BLOB);
    CREATE TABLE IF NOT EXISTS vev_ft_garbage (id INTEGER PRIMARY KEY, since_ms INTEGER NOT NULL);
    ",
    garbage_index!()
);

/// Whether the file has the full-text tables (a file from before full text, opened read
/// only, does not).
pub(crate) fn has_tables(conn: &rusqlite::Connection) -> Result<bool, StorageError> {
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'vev_ft_manifest'",
            [],
            |r| r.get(0),
        )
        .map_err(io("full-text manifest read"))?;
    Ok(n > 0)
}

/// The manifest, read in the caller's snapshot.
pub(crate) fn read_manifest(conn: &rusqlite::Connection) -> Result<Vec<StoredEntry>, StorageError> {
    if !has_tables(conn)? {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare_cached("SELECT doc_first, segment, record FROM vev_ft_manifest ORDER BY doc_first")
        .map_err(io("full-text manifest read"))?;
    let mut rows = st.query([]).map_err(io("full-text manifest read"))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(io("full-text manifest read"))? {
        let doc: i64 = row.get(0).map_err(io("full-text manifest read"))?;
        let segment: i64 = row.get(1).map_err(io("full-text manifest read"))?;
        let what = || format!("full-text manifest entry at document {doc}");
        let bytes: Vec<u8> = row.get(2).map_err(|e| unreadable(what(), e))?;
        out.push(StoredEntry {
            segment: segment as u64,
            record: unseal(&what, bytes)?,
        });
    }
    Ok(out)
}

impl Store {
    /// Write manifest entries and their segments in the write batch `tx`, counting them as
    /// transactions' segments.
    pub(crate) fn write_entries(
        &self,
        tx: &rusqlite::Transaction<'_>,
        entries: &[NewEntry],
    ) -> Result<(), StorageError> {
        for e in entries {
            self.fault("full-text segment write")?;
            self.delay_segment_write();
            let id = self.next_fulltext_id();
            let inline = e.segment.len() <= INLINE_BYTES_MAX;
            if !inline {
                for (part, chunk) in e.segment.chunks(SEGMENT_PART_BYTES).enumerate() {
                    insert_part(tx, id, part, chunk)?;
                }
            }
            insert_entry(
                tx,
                (e.doc_first, e.doc_end, id),
                e.record.clone(),
                inline.then(|| e.segment.to_vec()),
            )
            .map_err(io("full-text manifest write"))?;
        }
        Ok(())
    }

    /// Write the manifest entries `db` holds that storage does not (an index built when a
    /// file from before full text was opened) in a write batch of their own, and return
    /// `db` with them marked stored.
    pub fn store_fulltext_entries(&self, db: &vev_db::Db) -> Result<vev_db::Db, StorageError> {
        let entries = db.fulltext_unstored();
        if entries.is_empty() || self.read_only {
            return Ok(db.clone());
        }
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(io("full-text write"))?;
        self.write_entries(&tx, &entries)?;
        self.commit(tx, "full-text sync")?;
        Ok(db.fulltext_stored())
    }

    /// Write a compaction: its segment's parts, each in a write batch of its own (so
    /// transactions interleave with a large one), then in one last batch its manifest row
    /// in place of the rows it replaces; the replaced segments become garbage, and garbage
    /// older than the grace period is deleted. None of these batches is synced on its own:
    /// the next transaction's commit syncs the write-ahead log (frames reach the disk in
    /// order), so a crash can only lose the compaction, never the entries it replaces, and
    /// transactions never wait for its sync. Returns the new segment's id. On a failure the
    /// parts already written are deleted unless the manifest names them (or, if that fails
    /// too, by the next writer's open).
    pub fn write_compaction(&self, c: &Compaction) -> Result<u64, StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        let id = self.next_fulltext_id();
        let written = self.write_compaction_parts(c, id);
        if written.is_err() {
            let _ = self.unsynced(|tx| {
                // Unless its last batch landed after all (a failure reported after the
                // commit): then the manifest names it.
                tx.execute(
                    "DELETE FROM vev_ft_segment WHERE key BETWEEN ?1 AND ?2 \
                     AND ?3 NOT IN (SELECT segment FROM vev_ft_manifest)",
                    [first_key(id), first_key(id) + PARTS_MAX - 1, id as i64],
                )
                .map(|_| ())
                .map_err(io("full-text compaction"))
            });
        }
        written.map(|()| id)
    }

    fn write_compaction_parts(&self, c: &Compaction, id: u64) -> Result<(), StorageError> {
        let entry = c.new_entry();
        if entry.segment.len() <= INLINE_BYTES_MAX {
            // A small merged segment goes in its manifest row, in the one batch of the swap.
            self.delay_segment_write();
            return self.unsynced(|tx| {
                self.fault("full-text compaction write")?;
                self.swap_manifest(tx, c, id, &entry)
            });
        }
        let parts: Vec<&[u8]> = entry.segment.chunks(SEGMENT_PART_BYTES).collect();
        let (last, first) = parts.split_last().expect("a large segment has parts");
        for (part, chunk) in first.iter().enumerate() {
            self.unsynced(|tx| {
                self.fault("full-text compaction write")?;
                insert_part(tx, id, part, chunk)
            })?;
        }
        self.delay_segment_write();
        // The last part in the batch of the manifest swap: one batch fewer to wait for.
        self.unsynced(|tx| {
            self.fault("full-text compaction write")?;
            insert_part(tx, id, first.len(), last)?;
            self.swap_manifest(tx, c, id, &entry)
        })
    }

    /// Run `write` in a write batch committed without a sync of its own.
    fn unsynced(
        &self,
        write: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let mut conn = self.conn();
        set_synchronous(&conn, "NORMAL")?;
        let written = (|| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(io("full-text compaction"))?;
            write(&tx)?;
            self.commit(tx, "full-text compaction sync")
        })();
        set_synchronous(&conn, "FULL")?;
        written
    }

    /// The compaction's last batch: its manifest row in place of those it replaces.
    fn swap_manifest(
        &self,
        tx: &rusqlite::Transaction<'_>,
        c: &Compaction,
        id: u64,
        entry: &NewEntry,
    ) -> Result<(), StorageError> {
        let (first, end) = c.range();
        let replaced: Vec<i64> = tx
            .prepare_cached(
                "SELECT segment FROM vev_ft_manifest WHERE doc_first >= ?1 AND doc_end <= ?2",
            )
            .and_then(|mut st| {
                st.query_map([first as i64, end as i64], |r| r.get(0))?
                    .collect()
            })
            .map_err(io("full-text compaction"))?;
        if replaced.len() != c.replaces() {
            return Err(StorageError::corruption(
                "full-text manifest",
                format!(
                    "a compaction of {} entries found {} rows for documents {first}..{end}",
                    c.replaces(),
                    replaced.len()
                ),
            ));
        }
        let now_ms = crate::now_ms();
        let run = |sql: &str, p: &[&dyn rusqlite::ToSql]| {
            tx.prepare_cached(sql)
                .and_then(|mut st| st.execute(p))
                .map_err(io("full-text compaction"))
        };
        // The replaced entries' segments held in their rows become parts (garbage, like
        // the others): a reader that still has the old manifest may load them until the
        // grace period ends.
        run(
            "INSERT INTO vev_ft_segment (key, payload) SELECT segment * 65536, payload \
             FROM vev_ft_manifest WHERE doc_first >= ?1 AND doc_end <= ?2 \
             AND payload IS NOT NULL",
            params![first as i64, end as i64],
        )?;
        run(
            "DELETE FROM vev_ft_manifest WHERE doc_first >= ?1 AND doc_end <= ?2",
            params![first as i64, end as i64],
        )?;
        let inline = entry.segment.len() <= INLINE_BYTES_MAX;
        insert_entry(
            tx,
            (first, end, id),
            entry.record.clone(),
            inline.then(|| entry.segment.to_vec()),
        )
        .map_err(io("full-text compaction"))?;
        for old in replaced {
            run(
                "INSERT OR IGNORE INTO vev_ft_garbage (id, since_ms) VALUES (?1, ?2)",
                params![old, now_ms],
            )?;
        }
        if let Some(grace) = self.gc_grace {
            let cutoff = now_ms.saturating_sub(grace.as_millis() as i64);
            let old: Vec<i64> = tx
                .prepare_cached("SELECT id FROM vev_ft_garbage WHERE since_ms <= ?1")
                .and_then(|mut st| st.query_map([cutoff], |r| r.get(0))?.collect())
                .map_err(io("full-text compaction"))?;
            for id in old {
                delete_segment(tx, id as u64)?;
            }
            run(
                "DELETE FROM vev_ft_garbage WHERE since_ms <= ?1",
                params![cutoff],
            )?;
        }
        Ok(())
    }

    /// The next full-text segment id (the writer's).
    fn next_fulltext_id(&self) -> u64 {
        let mut next = vev_core::sync::lock(&self.next_fulltext);
        let id = *next;
        *next += 1;
        id
    }

    /// Check every full-text segment's checksum; the count of segments and garbage ones.
    pub(crate) fn verify_fulltext_segments(&self) -> Result<(u64, u64), StorageError> {
        let conn = self.conn();
        if !has_tables(&conn)? {
            return Ok((0, 0));
        }
        let mut st = conn
            .prepare("SELECT key, payload FROM vev_ft_segment ORDER BY key")
            .map_err(io("verify"))?;
        let mut rows = st.query([]).map_err(io("verify"))?;
        let mut n = 0;
        let mut last: Option<(i64, i64)> = None;
        while let Some(row) = rows.next().map_err(io("verify"))? {
            let key: i64 = row.get(0).map_err(io("verify"))?;
            let (id, part) = (key / PARTS_MAX, key % PARTS_MAX);
            let what = || format!("full-text segment {id} part {part}");
            let bytes: Vec<u8> = row.get(1).map_err(|e| unreadable(what(), e))?;
            unseal(&what, bytes)?;
            let expect = match last {
                Some((i, p)) if i == id => p + 1,
                _ => {
                    n += 1;
                    0
                }
            };
            if part != expect {
                return Err(StorageError::corruption(
                    what(),
                    format!("expected part {expect}"),
                ));
            }
            last = Some((id, part));
        }
        drop(rows);
        drop(st);
        // Segments held in their manifest rows (none in a file of format 6 or older).
        if let Ok(mut st) =
            conn.prepare("SELECT segment, payload FROM vev_ft_manifest WHERE payload IS NOT NULL")
        {
            let mut rows = st.query([]).map_err(io("verify"))?;
            while let Some(row) = rows.next().map_err(io("verify"))? {
                let id: i64 = row.get(0).map_err(io("verify"))?;
                let what = || format!("full-text segment {id} (in its manifest row)");
                let bytes: Vec<u8> = row.get(1).map_err(|e| unreadable(what(), e))?;
                unseal(&what, bytes)?;
                n += 1;
            }
        }
        let garbage: i64 = conn
            .query_row("SELECT count(*) FROM vev_ft_garbage", [], |r| r.get(0))
            .map_err(io("verify"))?;
        Ok((n, garbage as u64))
    }

    fn delay_segment_write(&self) {
        if let Some(d) = self.segment_write_delay {
            std::thread::sleep(d);
        }
    }
}

/// Set the connection's `synchronous` (a compaction's batches are not synced on their own);
/// the statement is prepared once per connection.
fn set_synchronous(conn: &rusqlite::Connection, level: &str) -> Result<(), StorageError> {
    conn.prepare_cached(&format!("PRAGMA synchronous = {level}"))
        .and_then(|mut st| st.execute([]).map(|_| ()))
        .map_err(io("full-text compaction"))
}

/// A segment of at most this many bytes is stored in its manifest row (one page with the
/// entry, so a small transaction writes one page fewer); a larger one in parts.
pub(crate) const INLINE_BYTES_MAX: usize = 2048;

/// Insert a manifest row: (first document, end, segment id), the entry's record and, for a
/// small segment, its bytes.
fn insert_entry(
    tx: &rusqlite::Transaction<'_>,
    (doc_first, doc_end, id): (u64, u64, u64),
    record: Vec<u8>,
    inline: Option<Vec<u8>>,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO vev_ft_manifest (doc_first, doc_end, segment, record, payload) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        doc_first as i64,
        doc_end as i64,
        id as i64,
        seal(record),
        inline.map(seal)
    ])
    .map(|_| ())
}

/// Full-text segments are stored in parts of at most this many bytes.
pub(crate) const SEGMENT_PART_BYTES: usize = 256 << 10;

/// Parts a segment may have (its parts' keys are `id × PARTS_MAX + part`).
const PARTS_MAX: i64 = 1 << 16;

fn first_key(id: u64) -> i64 {
    id as i64 * PARTS_MAX
}

fn insert_part(
    tx: &rusqlite::Transaction<'_>,
    id: u64,
    part: usize,
    bytes: &[u8],
) -> Result<(), StorageError> {
    if part as i64 >= PARTS_MAX {
        return Err(StorageError::io_kind(
            "full-text segment write",
            std::io::ErrorKind::FileTooLarge,
            format!("a segment of more than {PARTS_MAX} parts of {SEGMENT_PART_BYTES} bytes"),
        ));
    }
    tx.prepare_cached("INSERT INTO vev_ft_segment (key, payload) VALUES (?1, ?2)")
        .and_then(|mut st| st.execute(params![first_key(id) + part as i64, seal(bytes.to_vec())]))
        .map_err(io("full-text segment write"))?;
    Ok(())
}

fn delete_segment(tx: &rusqlite::Connection, id: u64) -> Result<(), StorageError> {
    tx.prepare_cached("DELETE FROM vev_ft_segment WHERE key BETWEEN ?1 AND ?2")
        .and_then(|mut st| st.execute([first_key(id), first_key(id) + PARTS_MAX - 1]))
        .map_err(io("full-text segment delete"))?;
    Ok(())
}

/// A writer's start: delete the parts of segments no manifest row names and no garbage row
/// lists (a compaction that failed or crashed before its last batch), and return the next
/// segment id (one past the largest left).
pub(crate) fn writer_start(conn: &rusqlite::Connection) -> Result<u64, StorageError> {
    let orphans: Vec<i64> = conn
        .prepare(
            "SELECT DISTINCT key / 65536 FROM vev_ft_segment \
             WHERE key / 65536 NOT IN (SELECT segment FROM vev_ft_manifest) \
             AND key / 65536 NOT IN (SELECT id FROM vev_ft_garbage)",
        )
        .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        .map_err(io("full-text open"))?;
    for id in orphans {
        delete_segment(conn, id as u64)?;
    }
    // The largest id in parts or in the manifest (a segment held in its row has no parts).
    let max: Option<i64> = conn
        .query_row(
            "SELECT max(id) FROM (SELECT max(key) / 65536 AS id FROM vev_ft_segment \
             UNION ALL SELECT max(segment) FROM vev_ft_manifest)",
            [],
            |r| r.get(0),
        )
        .map_err(io("full-text open"))?;
    Ok(max.map_or(1, |m| m as u64 + 1))
}

/// The whole payload of segment `id`, whose entry starts at document `doc_first`: its
/// parts in order, each checked, or the bytes its manifest row holds. One statement, so one
/// snapshot: a compaction that replaces the row moves its bytes to parts in the same commit.
/// A file of format 6 or older opened read-only has no `payload` column and only parts.
pub(crate) fn read_segment(
    conn: &rusqlite::Connection,
    id: u64,
    doc_first: u64,
) -> Result<Vec<u8>, StorageError> {
    let what = || format!("full-text segment {id}");
    let (lo, hi) = (first_key(id), first_key(id) + PARTS_MAX - 1);
    let with_rows = conn.prepare_cached(
        "SELECT key, payload FROM vev_ft_segment WHERE key BETWEEN ?1 AND ?2 \
         UNION ALL SELECT -1, payload FROM vev_ft_manifest \
         WHERE doc_first = ?3 AND segment = ?4 AND payload IS NOT NULL ORDER BY 1",
    );
    let (mut st, with_rows) = match with_rows {
        Ok(st) => (st, true),
        Err(e) if e.to_string().contains("no such column") => (
            conn.prepare_cached(
                "SELECT key, payload FROM vev_ft_segment WHERE key BETWEEN ?1 AND ?2 ORDER BY key",
            )
            .map_err(|e| unreadable(what(), e))?,
            false,
        ),
        Err(e) => return Err(unreadable(what(), e)),
    };
    let rows = if with_rows {
        st.query(params![lo, hi, doc_first as i64, id as i64])
    } else {
        st.query(params![lo, hi])
    };
    let mut rows = rows.map_err(|e| unreadable(what(), e))?;
    let mut out = Vec::new();
    let mut inline = None;
    let mut parts = 0i64;
    while let Some(row) = rows.next().map_err(|e| unreadable(what(), e))? {
        let key: i64 = row.get(0).map_err(|e| unreadable(what(), e))?;
        let bytes: Vec<u8> = row.get(1).map_err(|e| unreadable(what(), e))?;
        if key < 0 {
            inline = Some(bytes);
            continue;
        }
        let part = key - lo;
        if part != parts {
            return Err(StorageError::corruption(
                what(),
                format!("part {parts} is missing"),
            ));
        }
        out.extend(unseal(
            &|| format!("full-text segment {id} part {part}"),
            bytes,
        )?);
        parts += 1;
    }
    if parts > 0 {
        return Ok(out);
    }
    match inline {
        Some(bytes) => unseal(&what, bytes),
        None => Err(StorageError::corruption(
            what(),
            "it is missing from the file",
        )),
    }
}

/// Add the manifest's `payload` column (format 7) to a file that lacks it.
pub(crate) fn add_payload_column(conn: &rusqlite::Connection) -> Result<(), StorageError> {
    let has: i64 = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('vev_ft_manifest') WHERE name = 'payload'",
            [],
            |r| r.get(0),
        )
        .map_err(io("migrate"))?;
    if has == 0 {
        conn.execute_batch("ALTER TABLE vev_ft_manifest ADD COLUMN payload BLOB")
            .map_err(io("migrate"))?;
    }
    Ok(())
}
