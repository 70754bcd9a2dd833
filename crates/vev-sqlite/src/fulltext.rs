//! The full-text index's tables:
//! - `vev_ft_segment`: immutable full-text segments. SQLite gives a new row the largest id
//!   plus one, and the segment with the largest id is always named by the manifest (a
//!   segment stops being named only when a compaction merges it, and the merged one is
//!   newer), so it is never deleted and no id is ever used twice: readers cache segments
//!   by id. (`AUTOINCREMENT` would say the same at the cost of one more page written per
//!   transaction.)
//! - `vev_ft_manifest`: the live segments, one row per manifest entry, keyed by its first
//!   document number, with the entry's record;
//! - `vev_ft_garbage`: segments a compaction replaced, deleted by a later compaction once
//!   the grace period has passed (readers in other processes may still be loading them).
//!
//! A transaction's segment and manifest row are written in the write batch of its log row,
//! so a crash keeps all three or none. A compaction writes its segment, deletes the rows it
//! replaces and inserts its own in one batch.

use rusqlite::params;
use vev_core::StorageError;
use vev_db::fulltext::{Compaction, NewEntry};
use vev_db::persist::StoredEntry;

use crate::{io, seal, unreadable, unseal, Store};

pub(crate) const TABLES: &str = "
    CREATE TABLE IF NOT EXISTS vev_ft_segment (id INTEGER PRIMARY KEY, payload BLOB NOT NULL);
    CREATE TABLE IF NOT EXISTS vev_ft_manifest (
        doc_first INTEGER PRIMARY KEY,
        doc_end INTEGER NOT NULL,
        segment INTEGER NOT NULL,
        record BLOB NOT NULL);
    CREATE TABLE IF NOT EXISTS vev_ft_garbage (id INTEGER PRIMARY KEY, since_ms INTEGER NOT NULL);";

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
            let id = insert_segment(tx, &e.segment)?;
            tx.prepare_cached(
                "INSERT INTO vev_ft_manifest (doc_first, doc_end, segment, record) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    e.doc_first as i64,
                    e.doc_end as i64,
                    id as i64,
                    seal(e.record.clone())
                ])
            })
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

    /// Write a compaction: its segment, and its manifest row in place of the rows it
    /// replaces, in one synced write batch; the replaced segments become garbage, and
    /// garbage older than the grace period is deleted. Returns the new segment's id.
    pub fn write_compaction(&self, c: &Compaction) -> Result<u64, StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        let mut conn = self.conn();
        // Not synced on its own: until the next transaction's commit syncs the write-ahead
        // log (frames reach the disk in order), a crash can only lose the compaction whole,
        // and the entries it would replace are still in the file. So the writer's commits
        // never wait for a compaction's sync.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(io("full-text compaction"))?;
        let written = self.write_compaction_batch(&mut conn, c);
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(io("full-text compaction"))?;
        written
    }

    fn write_compaction_batch(
        &self,
        conn: &mut rusqlite::Connection,
        c: &Compaction,
    ) -> Result<u64, StorageError> {
        let entry = c.new_entry();
        let (first, end) = c.range();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(io("full-text compaction"))?;
        self.fault("full-text compaction write")?;
        self.delay_segment_write();
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
        let id = insert_segment(&tx, &entry.segment)?;
        let now_ms = crate::now_ms();
        tx.execute(
            "DELETE FROM vev_ft_manifest WHERE doc_first >= ?1 AND doc_end <= ?2",
            [first as i64, end as i64],
        )
        .map_err(io("full-text compaction"))?;
        tx.execute(
            "INSERT INTO vev_ft_manifest (doc_first, doc_end, segment, record) VALUES (?1, ?2, ?3, ?4)",
            params![first as i64, end as i64, id as i64, seal(entry.record)],
        )
        .map_err(io("full-text compaction"))?;
        for old in replaced {
            tx.execute(
                "INSERT OR IGNORE INTO vev_ft_garbage (id, since_ms) VALUES (?1, ?2)",
                [old, now_ms],
            )
            .map_err(io("full-text compaction"))?;
        }
        if let Some(grace) = self.gc_grace {
            let cutoff = now_ms.saturating_sub(grace.as_millis() as i64);
            tx.execute(
                "DELETE FROM vev_ft_segment WHERE id IN \
                 (SELECT id FROM vev_ft_garbage WHERE since_ms <= ?1)",
                [cutoff],
            )
            .map_err(io("full-text compaction"))?;
            tx.execute("DELETE FROM vev_ft_garbage WHERE since_ms <= ?1", [cutoff])
                .map_err(io("full-text compaction"))?;
        }
        self.commit(tx, "full-text compaction sync")?;
        Ok(id)
    }

    /// Check every full-text segment's checksum; the count of segments and garbage ones.
    pub(crate) fn verify_fulltext_segments(&self) -> Result<(u64, u64), StorageError> {
        let conn = self.conn();
        if !has_tables(&conn)? {
            return Ok((0, 0));
        }
        let mut st = conn
            .prepare("SELECT id, payload FROM vev_ft_segment ORDER BY id")
            .map_err(io("verify"))?;
        let mut rows = st.query([]).map_err(io("verify"))?;
        let mut n = 0;
        while let Some(row) = rows.next().map_err(io("verify"))? {
            let id: i64 = row.get(0).map_err(io("verify"))?;
            let what = || format!("full-text segment {id}");
            let bytes: Vec<u8> = row.get(1).map_err(|e| unreadable(what(), e))?;
            unseal(&what, bytes)?;
            n += 1;
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

fn insert_segment(tx: &rusqlite::Transaction<'_>, payload: &[u8]) -> Result<u64, StorageError> {
    tx.prepare_cached("INSERT INTO vev_ft_segment (payload) VALUES (?1)")
        .and_then(|mut st| st.execute([seal(payload.to_vec())]))
        .map_err(io("full-text segment write"))?;
    Ok(tx.last_insert_rowid() as u64)
}
