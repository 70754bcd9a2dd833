//! Segments kept outside the tables: in an object store (`vev-objstore`), with the log, the
//! root, the manifest and the lease still here.
//!
//! Such a schema's `meta` row names the application `vev+objects` (so a build without this
//! module refuses it as not Vev's rather than misreading it), and its `objects` row names
//! where the segments are. A `segment` or `ft_segment` row then holds, in place of the
//! payload, the key of one immutable object (under that location) that holds the payload
//! with its CRC-32, as a row would. Keys carry the writer's lease generation
//! (`segments/ID-GENERATION`), so a fenced writer that still uploads can never overwrite an
//! object the current writer's rows name: its uploads are orphans no row names.
//!
//! Order of writes: the object first, then the row in a fenced transaction; a row is never
//! committed before its object exists. Garbage: the objects of rows the grace period has
//! passed are deleted inside the fenced transaction that deletes the rows (a failure keeps
//! the rows, so the next checkpoint deletes again; deleting a missing object succeeds).
//!
//! Orphans, objects no row will ever name (uploaded by a writer that crashed or was fenced
//! before its rows committed), are swept by a later writer (`sweep_orphans` in `lib.rs`): it lists the
//! objects first, then reads every row's key, and deletes the unnamed objects of *older*
//! lease generations only. Their writer is fenced since this writer took the lease, so every
//! row it could commit was committed before, and is seen; an object of the current
//! generation is never swept, since the row naming it may be about to commit.

use std::sync::Arc;

use vev_core::StorageError;

/// Where a store keeps segment payloads when they are not in its tables.
pub trait SegmentObjects: Send + Sync + std::fmt::Debug {
    /// Store each `(key, bytes)` as an object (new objects; the keys are relative to
    /// `location`). Returns once all of them are stored.
    fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> Result<(), StorageError>;
    /// The bytes of object `key`, or `None` when there is no such object.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
    /// Delete the objects `keys`; a missing one is no error.
    fn delete_all(&self, keys: Vec<String>) -> Result<(), StorageError>;
    /// The keys of every object whose key starts with `prefix` (relative to `location`, as
    /// `put_all` takes them), in no particular order.
    fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError>;
    /// The objects' location without credentials (`s3://bucket/prefix`).
    fn location(&self) -> &str;
}

/// Shared by the store and its segment reader.
pub type Objects = Option<Arc<dyn SegmentObjects>>;

/// The `meta` application of a schema whose segments are in an object store.
pub(crate) const APPLICATION: &str = "vev+objects";

pub(crate) fn tables(s: &str) -> String {
    format!(
        "CREATE TABLE {s}.objects (slot integer PRIMARY KEY CHECK (slot = 0), \
         location text NOT NULL);"
    )
}

/// The key of index segment `id` written under lease `generation`.
pub(crate) fn segment_key(id: u64, generation: i64) -> String {
    format!("segments/{id}-{generation}")
}

/// The key of full-text segment `id` written under lease `generation`.
pub(crate) fn fulltext_key(id: u64, generation: i64) -> String {
    format!("fulltext/{id}-{generation}")
}

/// The lease generation a segment or full-text key was written under (`None` for a key
/// that is not one of ours).
fn key_generation(key: &str) -> Option<i64> {
    let name = key
        .strip_prefix("segments/")
        .or_else(|| key.strip_prefix("fulltext/"))?;
    let (id, generation) = name.split_once('-')?;
    id.parse::<u64>().ok()?;
    generation.parse().ok()
}

/// How often a writer sweeps orphans after its first checkpoint's sweep.
pub(crate) const SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// The keys of the segment and full-text objects under `objects`' location.
pub(crate) fn list_ours(objects: &dyn SegmentObjects) -> Result<Vec<String>, StorageError> {
    let mut listed = objects.list("segments/")?;
    listed.extend(objects.list("fulltext/")?);
    Ok(listed)
}

/// The object keys the rows of `tables` (schema-qualified; `payload` a sealed key) name.
pub(crate) fn named_keys(
    c: &mut impl postgres::GenericClient,
    tables: [&str; 2],
    err: impl Fn(postgres::Error) -> StorageError,
) -> Result<std::collections::HashSet<Vec<u8>>, StorageError> {
    let mut named = std::collections::HashSet::new();
    for table in tables {
        for row in c
            .query(&format!("SELECT payload FROM {table}"), &[])
            .map_err(&err)?
        {
            named.insert(crate::unseal(&|| format!("a row of {table}"), row.get(0))?);
        }
    }
    Ok(named)
}

/// Of `listed` (listed before `named` was read: see the module doc for why that order is
/// safe), the objects no row names and a writer of a lease generation older than
/// `generation`, the sweeping writer's, wrote.
pub(crate) fn orphans(
    listed: &[String],
    named: &std::collections::HashSet<Vec<u8>>,
    generation: i64,
) -> Vec<String> {
    listed
        .iter()
        .filter(|k| !named.contains(k.as_bytes()))
        .filter(|k| key_generation(k).is_some_and(|g| g < generation))
        .cloned()
        .collect()
}

/// The payload of the object a row names: `key` (the row's unsealed payload) fetched, its
/// checksum checked.
pub(crate) fn fetch(
    objects: &dyn SegmentObjects,
    what: &dyn Fn() -> String,
    key: Vec<u8>,
) -> Result<Vec<u8>, StorageError> {
    let key = String::from_utf8(key)
        .map_err(|_| StorageError::corruption(what(), "its row names no object key"))?;
    match objects.get(&key)? {
        Some(bytes) => crate::unseal(what, bytes),
        None => Err(StorageError::corruption(
            what(),
            format!("its object {}/{key} is missing", objects.location()),
        )),
    }
}

/// With a grace period (`None`: keep every segment), delete the rows of table `segments`
/// whose ids have waited in table `garbage` (both schema-qualified) since before `now` less
/// the grace period, their objects too (`delete_rows`), and then those waiting entries.
pub(crate) fn collect_garbage(
    c: &mut impl postgres::GenericClient,
    objects: Option<&dyn SegmentObjects>,
    segments: &str,
    garbage: &str,
    grace: Option<std::time::Duration>,
    now: i64,
    err: impl Fn(postgres::Error) -> StorageError,
) -> Result<(), StorageError> {
    let Some(grace) = grace else {
        return Ok(());
    };
    let cutoff = now.saturating_sub(grace.as_millis() as i64);
    delete_rows(
        c,
        objects,
        &format!(
            "DELETE FROM {segments} WHERE id IN (SELECT id FROM {garbage} WHERE since_ms <= $1)"
        ),
        &[&cutoff],
        &err,
    )?;
    c.execute(
        &format!("DELETE FROM {garbage} WHERE since_ms <= $1"),
        &[&cutoff],
    )
    .map_err(&err)?;
    Ok(())
}

/// Run `delete` (a `DELETE` of segment rows, `params` its parameters). With segments in an
/// object store, the rows' payloads (their sealed object keys) come back and those objects
/// are deleted too, inside the rows' transaction: if that fails, the rows stay for the next
/// try. Without one, no payload is sent back.
pub(crate) fn delete_rows(
    c: &mut impl postgres::GenericClient,
    objects: Option<&dyn SegmentObjects>,
    delete: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
    err: impl Fn(postgres::Error) -> StorageError,
) -> Result<(), StorageError> {
    let Some(objects) = objects else {
        c.execute(delete, params).map_err(err)?;
        return Ok(());
    };
    let keys: Vec<String> = c
        .query(&format!("{delete} RETURNING payload"), params)
        .map_err(err)?
        .into_iter()
        .filter_map(|r| crate::unseal(&String::new, r.get(0)).ok())
        .filter_map(|k| String::from_utf8(k).ok())
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    objects.delete_all(keys)
}

#[cfg(test)]
mod tests {
    use super::key_generation;

    #[test]
    fn generations_are_read_from_our_keys_only() {
        assert_eq!(key_generation("segments/12-3"), Some(3));
        assert_eq!(key_generation("fulltext/7-41"), Some(41));
        assert_eq!(key_generation("segments/12"), None);
        assert_eq!(key_generation("segments/x-3"), None);
        assert_eq!(key_generation("segments/12-3.tmp"), None);
        assert_eq!(key_generation("vev-database"), None);
        assert_eq!(key_generation("other/12-3"), None);
    }
}
