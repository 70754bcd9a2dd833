//! The full-text index's tables, as on SQLite (`vev-sqlite`'s `fulltext.rs`):
//! `ft_segment` (immutable segments in parts of at most `SEGMENT_PART_BYTES`, keyed by id and
//! part), `ft_manifest` (the live entries, keyed by first document number) and `ft_garbage`
//! (segments a compaction replaced, deleted once the grace period has passed). A
//! transaction's segment and manifest row go in the transaction of its log row; a
//! compaction writes its parts, then in one fenced transaction swaps the manifest rows.

use postgres::GenericClient;
use vev_core::StorageError;
use vev_db::fulltext::{Compaction, NewEntry};
use vev_db::persist::StoredEntry;

use crate::session::pg_error;
use crate::{seal, unseal, SegmentObjects, Store};

/// Full-text segments are stored in parts of at most this many bytes.
const SEGMENT_PART_BYTES: usize = 256 << 10;

pub(crate) fn tables(s: &str) -> String {
    format!(
        "CREATE TABLE {s}.ft_segment (id bigint NOT NULL, part integer NOT NULL, \
             payload bytea NOT NULL, PRIMARY KEY (id, part));
         CREATE TABLE {s}.ft_manifest (doc_first bigint PRIMARY KEY, doc_end bigint NOT NULL, \
             segment bigint NOT NULL, record bytea NOT NULL);
         CREATE TABLE {s}.ft_garbage (id bigint PRIMARY KEY, since_ms bigint NOT NULL);"
    )
}

/// The manifest, read in the caller's snapshot.
pub(crate) fn read_manifest(
    c: &mut impl GenericClient,
    s: &str,
    location: &str,
) -> Result<Vec<StoredEntry>, StorageError> {
    let rows = c
        .query(
            &format!("SELECT doc_first, segment, record FROM {s}.ft_manifest ORDER BY doc_first"),
            &[],
        )
        .map_err(|e| pg_error(location, "full-text manifest read", &e))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let doc: i64 = row.get(0);
        let what = || format!("full-text manifest entry at document {doc}");
        out.push(StoredEntry {
            segment: row.get::<_, i64>(1) as u64,
            record: unseal(&what, row.get(2))?,
        });
    }
    Ok(out)
}

/// The whole payload of segment `id`: its parts in order, each checked.
pub(crate) fn read_segment(
    c: &mut impl GenericClient,
    s: &str,
    location: &str,
    id: u64,
) -> Result<Vec<u8>, StorageError> {
    let what = || format!("full-text segment {id}");
    let rows = c
        .query(
            &format!("SELECT part, payload FROM {s}.ft_segment WHERE id = $1 ORDER BY part"),
            &[&(id as i64)],
        )
        .map_err(|e| pg_error(location, "full-text segment read", &e))?;
    if rows.is_empty() {
        return Err(StorageError::corruption(
            what(),
            "it is missing from storage",
        ));
    }
    let mut out = Vec::new();
    for (expect, row) in rows.into_iter().enumerate() {
        let part: i32 = row.get(0);
        if part as usize != expect {
            return Err(StorageError::corruption(
                what(),
                format!("part {expect} is missing"),
            ));
        }
        out.extend(unseal(
            &|| format!("full-text segment {id} part {part}"),
            row.get(1),
        )?);
    }
    Ok(out)
}

fn insert_parts(
    c: &mut impl GenericClient,
    s: &str,
    location: &str,
    id: u64,
    bytes: &[u8],
) -> Result<(), StorageError> {
    let parts: Vec<Vec<u8>> = bytes
        .chunks(SEGMENT_PART_BYTES)
        .map(|p| seal(p.to_vec()))
        .collect();
    let numbers: Vec<i32> = (0..parts.len() as i32).collect();
    c.execute(
        &format!(
            "INSERT INTO {s}.ft_segment (id, part, payload) \
             SELECT $1, p, b FROM unnest($2::integer[], $3::bytea[]) AS u(p, b)"
        ),
        &[&(id as i64), &numbers, &parts],
    )
    .map_err(|e| pg_error(location, "full-text segment write", &e))?;
    Ok(())
}

/// A writer's start: delete the parts of segments no manifest row names and no garbage row
/// lists (a compaction that failed before its last transaction), and return the next
/// segment id.
pub(crate) fn writer_start(
    c: &mut impl GenericClient,
    s: &str,
    location: &str,
    objects: Option<&dyn SegmentObjects>,
) -> Result<u64, StorageError> {
    crate::objects::delete_rows(
        c,
        objects,
        &format!(
            "DELETE FROM {s}.ft_segment WHERE id NOT IN \
             (SELECT segment FROM {s}.ft_manifest) \
             AND id NOT IN (SELECT id FROM {s}.ft_garbage)"
        ),
        &[],
        |e| pg_error(location, "full-text open", &e),
    )?;
    let max: Option<i64> = c
        .query_one(&format!("SELECT max(id) FROM {s}.ft_segment"), &[])
        .map_err(|e| pg_error(location, "full-text open", &e))?
        .get(0);
    Ok(max.map_or(1, |m| m as u64 + 1))
}

impl Store {
    /// Store full-text segment `id`: its parts in the caller's transaction, or (segments in
    /// an object store) its object, then one part holding the object's key.
    fn insert_segment(
        &self,
        c: &mut impl GenericClient,
        id: u64,
        bytes: &[u8],
    ) -> Result<(), StorageError> {
        let (s, location) = (&self.schema, self.location());
        let Some(objects) = &self.objects else {
            return insert_parts(c, s, location, id, bytes);
        };
        let generation = self.writable_lease()?.generation;
        let key = crate::objects::fulltext_key(id, generation);
        objects.put_all(vec![(key.clone(), seal(bytes.to_vec()))])?;
        insert_parts(c, s, location, id, key.as_bytes())
    }

    /// Write manifest entries and their segments in the caller's transaction.
    pub(crate) fn write_entries(
        &self,
        c: &mut impl GenericClient,
        entries: &[NewEntry],
    ) -> Result<(), StorageError> {
        let (s, location) = (&self.schema, self.location());
        for e in entries {
            let id = self.next_fulltext_id();
            self.insert_segment(c, id, &e.segment)?;
            c.execute(
                &format!(
                    "INSERT INTO {s}.ft_manifest (doc_first, doc_end, segment, record) \
                     VALUES ($1, $2, $3, $4)"
                ),
                &[
                    &(e.doc_first as i64),
                    &(e.doc_end as i64),
                    &(id as i64),
                    &seal(e.record.clone()),
                ],
            )
            .map_err(|e| pg_error(location, "full-text manifest write", &e))?;
        }
        Ok(())
    }

    /// Write the manifest entries `db` holds that storage does not, in a fenced
    /// transaction of their own, and return `db` with them marked stored.
    pub fn store_fulltext_entries(&self, db: &vev_db::Db) -> Result<vev_db::Db, StorageError> {
        let entries = db.fulltext_unstored();
        if entries.is_empty() || self.lease.is_none() {
            return Ok(db.clone());
        }
        self.write_fenced("full-text write", |tx| self.write_entries(tx, &entries))?;
        Ok(db.fulltext_stored())
    }

    /// Write a compaction: its segment's parts, then in one fenced transaction its manifest
    /// row in place of the rows it replaces (those segments become garbage, and garbage
    /// older than the grace period is deleted). Returns the new segment's id.
    pub fn write_compaction(&self, c: &Compaction) -> Result<u64, StorageError> {
        let id = self.next_fulltext_id();
        let entry = c.new_entry();
        let (s, location) = (&self.schema, self.location());
        self.write_fenced("full-text compaction", |tx| {
            self.insert_segment(tx, id, &entry.segment)?;
            let (first, end) = c.range();
            let err = |e: postgres::Error| pg_error(location, "full-text compaction", &e);
            let replaced: Vec<i64> = tx
                .query(
                    &format!(
                        "DELETE FROM {s}.ft_manifest WHERE doc_first >= $1 AND doc_end <= $2 \
                         RETURNING segment"
                    ),
                    &[&(first as i64), &(end as i64)],
                )
                .map_err(err)?
                .iter()
                .map(|r| r.get(0))
                .collect();
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
            tx.execute(
                &format!(
                    "INSERT INTO {s}.ft_manifest (doc_first, doc_end, segment, record) \
                     VALUES ($1, $2, $3, $4)"
                ),
                &[
                    &(first as i64),
                    &(end as i64),
                    &(id as i64),
                    &seal(entry.record.clone()),
                ],
            )
            .map_err(err)?;
            let now = crate::now_ms();
            tx.execute(
                &format!(
                    "INSERT INTO {s}.ft_garbage (id, since_ms) SELECT unnest($1::bigint[]), $2 \
                     ON CONFLICT DO NOTHING"
                ),
                &[&replaced, &now],
            )
            .map_err(err)?;
            crate::objects::collect_garbage(
                tx,
                self.objects.as_deref(),
                &format!("{s}.ft_segment"),
                &format!("{s}.ft_garbage"),
                self.gc_grace,
                now,
                err,
            )
        })?;
        Ok(id)
    }

    /// The next full-text segment id (the writer's).
    fn next_fulltext_id(&self) -> u64 {
        let mut next = vev_core::sync::lock(&self.next_fulltext);
        let id = *next;
        *next += 1;
        id
    }
}
