//! What durable storage needs from a `Db`, as bytes: log records, checkpoints (a root record
//! plus the segments it names), and the way back (open a root, replay log records).
//!
//! The storage backend (`vev-sqlite`) owns the I/O, checksums and locking; this module owns
//! the meaning of the bytes, so every backend persists the same thing. A committed
//! transaction is one log record: its basis-t, the user-partition counter after it, and its
//! datoms exactly as the report's `tx-data`. Replaying a record on the Db before it yields the
//! same Db the transactor built (the transaction's checks already passed when it committed;
//! replay only re-derives the indexes, history and schema). A checkpoint is a root record:
//! basis-t, counters, the schema datoms and the top of each of the eight index trees, whose
//! segment-height subtrees are separate segments. The log has no tree in a checkpoint: its
//! records are the log (`log.rs`). Roots written before format 5 (`KIND_ROOT_WITH_LOG`)
//! also hold a log tree; opening one skips it, and `root_segment_ids` still names its
//! segments, so that the first new checkpoint turns them into garbage.

use std::sync::Arc;

use vev_core::ids::{tx_id, BasisT};
use vev_core::schema::sys;
use vev_core::schema::{Attribute, Cardinality, Schema, SchemaParts, TupleSpec, Unique, ValueType};
use vev_core::{Component, Datom, IndexOrder, Keyword, StorageError, Value};

use crate::codec::{err, DatomDelta, DecodeError, DecodeResult, Reader, Writer};
use crate::db::{Db, State};
use crate::indexes::Indexes;
use crate::segment::{persist_tree, read_tree, rebase_tree};
pub use crate::segment::{NewSegment, SegmentCache, SegmentStore, SEGMENT_HEIGHT};
use crate::tree::Stored;

const KIND_LOG: u8 = 2;
/// A root of format 3 or 4: the eight index trees, then a tree of the whole log.
const KIND_ROOT_WITH_LOG: u8 = 3;
/// A root of format 5 on: the eight index trees only.
const KIND_ROOT: u8 = 4;
/// Marks the full-text section after a root's trees (roots written before full text end
/// with the trees).
const ROOT_FULLTEXT: u8 = 1;

/// One committed transaction as the log stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRecord {
    /// The transaction's basis-t: one more than that of the database it was committed on.
    pub t: BasisT,
    /// The user-partition counter after the transaction.
    pub next_user: u64,
    /// The transaction's datoms, as in its report's `tx-data` (the `:db/txInstant` first).
    pub datoms: Vec<Datom>,
}

impl LogRecord {
    /// The record as bytes, for the storage backend to append to the log (it adds the
    /// checksum).
    pub fn encode(&self) -> Vec<u8> {
        LogRecord::encode_of(self.t, self.next_user, &self.datoms)
    }

    /// The encoded record of a transaction, from its parts (no `LogRecord` needed: the
    /// commit path encodes the report's `tx-data` in place); packed (`compress.rs`: LZ4 when
    /// it is at least 64 bytes and that makes it shorter).
    pub fn encode_of(t: BasisT, next_user: u64, datoms: &[Datom]) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(KIND_LOG);
        w.varint(t);
        w.varint(next_user);
        w.varint(datoms.len() as u64);
        let mut delta = DatomDelta::new();
        for d in datoms {
            delta.write(&mut w, d);
        }
        crate::compress::pack(w.buf)
    }

    /// Reads a record from the bytes `encode` wrote (compressed or raw, and so also the raw
    /// records of files before format 6). Bytes that are not exactly one
    /// well-formed log record give a [`DecodeError`], never a panic (a count is checked
    /// against the bytes left before anything is allocated).
    pub fn decode(bytes: &[u8]) -> DecodeResult<LogRecord> {
        let bytes = crate::compress::unpack(bytes)?;
        let mut r = Reader::new(&bytes);
        let kind = r.u8()?;
        if kind != KIND_LOG {
            return err(format!(
                "record kind {kind}, expected a log record ({KIND_LOG})"
            ));
        }
        let t = r.varint()?;
        let next_user = r.varint()?;
        let n = r.count()?;
        let mut delta = DatomDelta::new();
        let mut datoms = Vec::with_capacity(n);
        for _ in 0..n {
            datoms.push(delta.read(&mut r)?);
        }
        if !r.is_at_end() {
            return err("trailing bytes after the datoms");
        }
        Ok(LogRecord {
            t,
            next_user,
            datoms,
        })
    }
}

/// Apply a committed transaction's record to the Db it was committed on.
pub fn replay(before: &Db, record: &LogRecord) -> DecodeResult<Db> {
    replay_owned(before.current(), record)
}

/// `replay`, consuming the Db: index nodes nothing else shares are updated in place.
pub fn replay_owned(before: Db, record: &LogRecord) -> DecodeResult<Db> {
    let before = if before.view() == crate::View::default() {
        before
    } else {
        before.current()
    };
    let t = before.basis_t() + 1;
    if record.t != t {
        return err(format!(
            "log record for t={} follows a database at t={}",
            record.t,
            before.basis_t()
        ));
    }
    let tx = tx_id(t);
    let instant = match record.datoms.first() {
        Some(d) if d.e == tx && d.a == sys::TX_INSTANT && d.added => match d.v {
            Value::Instant(ms) => ms,
            _ => return err("the :db/txInstant datom does not hold an instant"),
        },
        _ => return err("the record does not start with the transaction's :db/txInstant"),
    };
    let mut retracted_tx = Vec::new();
    for d in &record.datoms {
        if d.tx != tx {
            return err(format!("datom of tx {} in the record of tx {tx}", d.tx));
        }
        if d.added {
            continue;
        }
        let prefix = [
            Component::Entity(d.e),
            Component::Entity(d.a),
            Component::Value(d.v.clone()),
        ];
        match before.datoms_unchecked(IndexOrder::Eavt, &prefix).next() {
            Some(asserted) => retracted_tx.push(asserted.tx),
            None => {
                return err(format!(
                    "retraction of [{} {} {}] which is not asserted at t={}",
                    d.e,
                    d.a,
                    d.v,
                    before.basis_t()
                ))
            }
        }
    }
    let new_schema = match crate::tx::schema::next_schema(&before, &record.datoms) {
        Ok(s) => s,
        Err(e) => return err(format!("the schema change does not apply: {e}")),
    };
    let schema_before = before.state.schema.clone();
    let mut state = Arc::unwrap_or_clone(before.state);
    if let Some(schema) = new_schema {
        state.schema = Arc::new(schema);
    }
    crate::tx::apply(
        &mut state,
        &schema_before,
        &record.datoms,
        &retracted_tx,
        None,
        crate::tx::LogTail::Keep,
        crate::tree::Bound::Shared,
    );
    state.basis_t = t;
    state.next_user = record.next_user;
    state.last_instant = instant;
    Ok(Db::from_state(state))
}

/// A checkpoint to write: the root record and the segments it names that are not yet stored.
pub struct Checkpoint {
    /// The basis-t of the checkpointed database: the root covers the log records up to and
    /// including it, and opening replays only those after it.
    pub t: BasisT,
    /// The encoded root record: basis-t, user-partition counter, last transaction instant,
    /// the schema, and the top of each of the eight index trees. Read back by [`open_root`].
    pub root: Vec<u8>,
    /// Segments the root names that are not stored yet: the backend must have stored them
    /// by the time it commits the root.
    pub segments: Vec<NewSegment>,
    /// The first segment id this checkpoint could take: ids from here on are its own (or
    /// later checkpoints'); ids below that no root names were left by checkpoints that failed.
    pub first_id: u64,
    /// The same database with its persisted subtrees as segment references, so memory can be
    /// given back to the cache's bound, and without its log tail (the store's log records
    /// up to `t` are the log).
    pub db: Db,
    /// The database checkpointed, kept alive so the addresses in `swaps` stay unique.
    source: Db,
    /// In-memory nodes of `source` that became segments, by address.
    swaps: Vec<(usize, Arc<Stored>)>,
}

impl Checkpoint {
    /// A later database (built from the checkpointed one by more transactions) with every
    /// subtree it still shares with the checkpointed one replaced by its segment reference:
    /// the same datoms, whose persisted parts can now leave memory, and which the next
    /// checkpoint need not write again. Costs time proportional to the trees' tops.
    pub fn rebase(&self, later: &Db) -> Db {
        let _alive = &self.source;
        let swaps: hashbrown::HashMap<usize, Arc<Stored>> = self.swaps.iter().cloned().collect();
        let state = &later.state;
        let trees = state.trees().map(|t| rebase_tree(t, &swaps));
        Db::from_state(state.with_trees(trees, self.db.state.segments.clone(), Some(self.t)))
    }
}

/// Build the checkpoint of `db` (its current state). Segments already stored through `cache`
/// are referenced, not rewritten; new ones get ids from `next_id` on. The eight trees are
/// encoded on two threads. The store must hold the log records up to the database's
/// basis-t (they are committed before a database is checkpointed).
pub fn checkpoint(db: &Db, cache: &Arc<SegmentCache>, next_id: &mut u64) -> Checkpoint {
    use std::sync::atomic::AtomicU64;
    let state = &db.state;
    let mut w = Writer::new();
    w.u8(KIND_ROOT);
    w.varint(state.basis_t);
    w.varint(state.next_user);
    w.zigzag(state.last_instant);
    write_schema(&mut w, &state.schema);
    let trees = state.trees();
    let first_id = *next_id;
    let ids = AtomicU64::new(first_id);
    type Swaps = Vec<(usize, Arc<Stored>)>;
    type Persisted = (crate::tree::Tree, Vec<u8>, Vec<NewSegment>, Swaps);
    let persist = |t: &crate::tree::Tree| -> Persisted {
        let mut top = Writer::new();
        let mut segments = Vec::new();
        let mut swaps = Vec::new();
        let stored = persist_tree(t, cache, &ids, &mut segments, &mut swaps, &mut top);
        (stored, top.buf, segments, swaps)
    };
    // Two groups of about equal datom counts, one per thread.
    let total: usize = trees.iter().map(|t| t.len()).sum();
    let mut order: Vec<usize> = (0..trees.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(trees[i].len()));
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    let (mut a, mut b) = (0, 0);
    for i in order {
        if a <= b {
            a += trees[i].len();
            mine.push(i);
        } else {
            b += trees[i].len();
            theirs.push(i);
        }
    }
    let run = |which: &[usize]| -> Vec<(usize, Persisted)> {
        which.iter().map(|&i| (i, persist(trees[i]))).collect()
    };
    let mut results = if total >= PARALLEL_CHECKPOINT_MIN {
        let (mut out, rest) = vev_core::par::join(|| run(&mine), || run(&theirs));
        out.extend(rest);
        out
    } else {
        let mut out = run(&mine);
        out.extend(run(&theirs));
        out
    };
    results.sort_by_key(|(i, _)| *i);
    let mut segments = Vec::new();
    let mut swaps = Vec::new();
    let mut stored_trees = Vec::with_capacity(trees.len());
    for (_, (tree, top, segs, sw)) in results {
        w.buf.extend_from_slice(&top);
        segments.extend(segs);
        swaps.extend(sw);
        stored_trees.push(tree);
    }
    // The full-text index's part of the root: its deletion marks and live statistics (its
    // entries are in the manifest, which the backend stores beside each transaction).
    w.u8(ROOT_FULLTEXT);
    state.fulltext.write_root(&mut w);
    *next_id = ids.into_inner();
    let stored_trees: [crate::tree::Tree; 8] = match stored_trees.try_into() {
        Ok(t) => t,
        Err(_) => unreachable!("every one of the eight trees is persisted"),
    };
    let stored = state.with_trees(stored_trees, Some(cache.clone()), Some(state.basis_t));
    Checkpoint {
        t: state.basis_t,
        root: w.buf,
        segments,
        first_id,
        db: Db::from_state(stored),
        source: db.current(),
        swaps,
    }
}

/// Databases with at least this many datoms in their trees checkpoint on two threads.
const PARALLEL_CHECKPOINT_MIN: usize = 20_000;

/// The schema as the root stores it: its idents (old ones that still resolve included), each
/// entity's current ident, and every attribute's definition (tuple components by entity id, so
/// renaming an attribute never breaks the composites that include it).
fn write_schema(w: &mut Writer, schema: &Schema) {
    let parts = schema.parts();
    w.varint(parts.idents.len() as u64);
    for (k, e) in &parts.idents {
        w.str(k.as_str());
        w.varint(*e);
    }
    w.varint(parts.current.len() as u64);
    for (e, k) in &parts.current {
        w.varint(*e);
        w.str(k.as_str());
    }
    w.varint(parts.attributes.len() as u64);
    for a in &parts.attributes {
        w.varint(a.id);
        w.str(a.ident.as_str());
        w.varint(a.value_type.entity_id());
        w.u8(match a.cardinality {
            Cardinality::One => 0,
            Cardinality::Many => 1,
        });
        w.u8(match a.unique {
            None => 0,
            Some(Unique::Identity) => 1,
            Some(Unique::Value) => 2,
        });
        w.u8(a.is_component as u8
            | (a.index as u8) << 1
            | (a.fulltext as u8) << 2
            | (a.no_history as u8) << 3);
        match &a.tuple {
            None => w.u8(0),
            Some(TupleSpec::Composite(ids)) => {
                w.u8(1);
                w.varint(ids.len() as u64);
                for id in ids {
                    w.varint(*id);
                }
            }
            Some(TupleSpec::Homogeneous(t)) => {
                w.u8(2);
                w.varint(t.entity_id());
            }
            Some(TupleSpec::Heterogeneous(ts)) => {
                w.u8(3);
                w.varint(ts.len() as u64);
                for t in ts {
                    w.varint(t.entity_id());
                }
            }
        }
    }
}

fn read_schema(r: &mut Reader<'_>) -> DecodeResult<Schema> {
    let read_type = |r: &mut Reader<'_>| -> DecodeResult<ValueType> {
        let e = r.varint()?;
        ValueType::ALL
            .into_iter()
            .find(|t| t.entity_id() == e)
            .ok_or_else(|| DecodeError(format!("entity {e} is not a value type")))
    };
    let n = r.count()?;
    let mut idents = Vec::with_capacity(n);
    for _ in 0..n {
        let k = Keyword::new(r.str()?);
        idents.push((k, r.varint()?));
    }
    let n = r.count()?;
    let mut current = Vec::with_capacity(n);
    for _ in 0..n {
        let e = r.varint()?;
        current.push((e, Keyword::new(r.str()?)));
    }
    let n = r.count()?;
    let mut attributes = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.varint()?;
        let ident = Keyword::new(r.str()?);
        let value_type = read_type(r)?;
        let cardinality = match r.u8()? {
            0 => Cardinality::One,
            1 => Cardinality::Many,
            b => return err(format!("cardinality byte {b}")),
        };
        let unique = match r.u8()? {
            0 => None,
            1 => Some(Unique::Identity),
            2 => Some(Unique::Value),
            b => return err(format!("uniqueness byte {b}")),
        };
        let flags = r.u8()?;
        if flags > 0b1111 {
            return err(format!("attribute flags {flags:#b}"));
        }
        let tuple = match r.u8()? {
            0 => None,
            1 => {
                let k = r.count()?;
                let mut ids = Vec::with_capacity(k);
                for _ in 0..k {
                    ids.push(r.varint()?);
                }
                Some(TupleSpec::Composite(ids))
            }
            2 => Some(TupleSpec::Homogeneous(read_type(r)?)),
            3 => {
                let k = r.count()?;
                let mut ts = Vec::with_capacity(k);
                for _ in 0..k {
                    ts.push(read_type(r)?);
                }
                Some(TupleSpec::Heterogeneous(ts))
            }
            b => return err(format!("tuple kind byte {b}")),
        };
        attributes.push(Attribute {
            id,
            ident,
            value_type,
            cardinality,
            unique,
            is_component: flags & 1 != 0,
            index: flags & 2 != 0,
            fulltext: flags & 4 != 0,
            no_history: flags & 8 != 0,
            tuple,
        });
    }
    Schema::from_parts(SchemaParts {
        idents,
        current,
        attributes,
    })
    .map_err(|e| DecodeError(format!("the schema is inconsistent: {e}")))
}

/// The basis-t a root record was written at, read without decoding the rest.
pub fn root_t(bytes: &[u8]) -> DecodeResult<BasisT> {
    let mut r = Reader::new(bytes);
    if !matches!(r.u8()?, KIND_ROOT | KIND_ROOT_WITH_LOG) {
        return err("not a root record");
    }
    r.varint()
}

/// The segments a root record names (an old root's log tree's among them). Every reference
/// is in the trees' tops (a segment holds whole subtrees, never references), so no segment
/// is read.
pub fn root_segment_ids(bytes: &[u8], cache: &Arc<SegmentCache>) -> DecodeResult<Vec<u64>> {
    let opened = open_root_parts(bytes, cache)?;
    let mut ids = opened.db.segment_ids();
    ids.extend(opened.old_log_segments);
    Ok(ids)
}

/// Open the database a root record describes. Segments load on demand through `cache`.
/// Its full-text index has no entries: see `open_root_with`.
pub fn open_root(bytes: &[u8], cache: &Arc<SegmentCache>) -> DecodeResult<Db> {
    open_root_parts(bytes, cache).map(|opened| opened.db)
}

/// A stored full-text manifest entry: its segment's id and its record.
pub struct StoredEntry {
    /// The segment's id in the backend's full-text segments.
    pub segment: u64,
    /// The record `fulltext_unstored` gave (or a compaction's `new_entry`).
    pub record: Vec<u8>,
}

/// Open the database a root record (or, with `None`, an empty database) describes, with
/// the full-text manifest the backend read in the same snapshot;
/// the log after the root then replays onto it. A root from before full text existed gets
/// its full-text attributes' values indexed now (as one entry not yet stored).
pub fn open_root_with(
    bytes: Option<&[u8]>,
    cache: &Arc<SegmentCache>,
    manifest: Vec<StoredEntry>,
) -> Result<Db, StorageError> {
    let corrupt = |e: DecodeError| StorageError::corruption("root record", e.0);
    let (db, section) = match bytes {
        Some(b) => {
            let opened = open_root_parts(b, cache).map_err(corrupt)?;
            (opened.db, opened.fulltext)
        }
        None => {
            let mut db = Db::empty();
            Arc::make_mut(&mut db.state).segments = Some(cache.clone());
            (db, None)
        }
    };
    let mut entries = Vec::with_capacity(manifest.len());
    for m in manifest {
        let e = crate::fulltext::decode_entry(&m.record, m.segment).map_err(|e| {
            StorageError::corruption(
                format!("full-text manifest entry of segment {}", m.segment),
                e.0,
            )
        })?;
        entries.push(e);
    }
    let ft = crate::fulltext::FtState::opened(section.as_ref(), entries)?;
    let mut state = Arc::unwrap_or_clone(db.state);
    state.fulltext = ft;
    if section.is_none() && bytes.is_some() {
        state.fulltext = state.fulltext.reindex(&state);
    }
    Ok(Db::from_state(state))
}

/// What a root record holds.
struct OpenedRoot {
    db: Db,
    /// The root's full-text section (none in a root from before full text).
    fulltext: Option<crate::fulltext::RootSection>,
    /// The segments of an old root's log tree, which the database does not keep.
    old_log_segments: Vec<u64>,
}

fn open_root_parts(bytes: &[u8], cache: &Arc<SegmentCache>) -> DecodeResult<OpenedRoot> {
    let mut r = Reader::new(bytes);
    let kind = r.u8()?;
    if kind != KIND_ROOT && kind != KIND_ROOT_WITH_LOG {
        return err(format!(
            "record kind {kind}, expected a root ({KIND_ROOT}, or {KIND_ROOT_WITH_LOG} before format 5)"
        ));
    }
    let basis_t = r.varint()?;
    let next_user = r.varint()?;
    let last_instant = r.zigzag()?;
    let schema = read_schema(&mut r)?;
    let mut indexes = || -> DecodeResult<Indexes> {
        Ok(Indexes {
            eavt: read_tree(&mut r, IndexOrder::Eavt, cache)?,
            aevt: read_tree(&mut r, IndexOrder::Aevt, cache)?,
            avet: read_tree(&mut r, IndexOrder::Avet, cache)?,
            vaet: read_tree(&mut r, IndexOrder::Vaet, cache)?,
        })
    };
    let current = indexes()?;
    let retired = indexes()?;
    let old_log_segments = if kind == KIND_ROOT_WITH_LOG {
        let log = read_tree(&mut r, IndexOrder::Log, cache)?;
        log.root
            .as_ref()
            .map_or_else(Vec::new, crate::segment::stored_ids)
    } else {
        Vec::new()
    };
    let section = if r.is_at_end() {
        None
    } else {
        match r.u8()? {
            ROOT_FULLTEXT => Some(crate::fulltext::FtState::read_root(&mut r)?),
            b => return err(format!("root section byte {b}")),
        }
    };
    if !r.is_at_end() {
        return err("trailing bytes after the trees");
    }
    let db = Db::from_state(State {
        current,
        retired,
        log: crate::tree::Tree::new(IndexOrder::Log),
        log_stored: Some(basis_t),
        schema: Arc::new(schema),
        basis_t,
        next_user,
        last_instant,
        segments: Some(cache.clone()),
        fulltext: Default::default(),
        free_beside: Default::default(),
    });
    Ok(OpenedRoot {
        db,
        fulltext: section,
        old_log_segments,
    })
}

impl Db {
    /// A mark to take before reads that cannot return errors themselves (a query's scans, a
    /// transaction), for `storage_failure_since` after them.
    pub fn storage_mark(&self) -> u64 {
        self.state.segments.as_ref().map_or(0, |c| c.mark())
    }

    /// The storage failure reads since `mark` met, which they must report instead of their
    /// answer: any corruption found so far (it stays), a segment that failed to load since
    /// the mark (a read error is not kept: the next load tries again), or the failure this
    /// view was made with (see `as_of`).
    pub fn storage_failure_since(&self, mark: u64) -> Option<StorageError> {
        if let Some(f) = &self.failed {
            return Some(StorageError::clone(f));
        }
        self.state
            .segments
            .as_ref()
            .and_then(|c| c.failure_since(mark))
    }

    /// `storage_failure_since` as a `Result`.
    pub(crate) fn storage_check(&self, mark: u64) -> Result<(), StorageError> {
        match self.storage_failure_since(mark) {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// The segment cache this database reads through (none in memory).
    pub fn segment_cache(&self) -> Option<&Arc<SegmentCache>> {
        self.state.segments.as_ref()
    }

    /// The segments this database's trees reference, found by walking the nodes in memory
    /// down to the first segment reference on each path (nothing loads). Cheap for a
    /// checkpointed database (only the trees' tops are in memory), proportional to the
    /// in-memory datoms otherwise.
    pub fn segment_ids(&self) -> Vec<u64> {
        self.tree_segment_ids()
            .into_iter()
            .flat_map(|(_, ids)| ids)
            .collect()
    }

    /// `segment_ids` tree by tree, in the root record's order, each with its name (`eavt`,
    /// ..., `retired vaet`): which segments hold which index (for tests and tools).
    pub fn tree_segment_ids(&self) -> Vec<(&'static str, Vec<u64>)> {
        const NAMES: [&str; 8] = [
            "eavt",
            "aevt",
            "avet",
            "vaet",
            "retired eavt",
            "retired aevt",
            "retired avet",
            "retired vaet",
        ];
        NAMES
            .into_iter()
            .zip(self.state.trees())
            .map(|(name, tree)| {
                let ids = tree
                    .root
                    .as_ref()
                    .map_or_else(Vec::new, crate::segment::stored_ids);
                (name, ids)
            })
            .collect()
    }

    /// The user-partition counter: the next new entity gets this number.
    pub fn next_user(&self) -> u64 {
        self.state.next_user
    }

    /// Walk every datom of every tree, loading every segment; the first storage failure, if
    /// any. With the datom counts checked against the trees' sizes.
    pub fn verify_segments(&self) -> Result<usize, StorageError> {
        let mut total = 0;
        let mark = self.storage_mark();
        for tree in self.state.trees() {
            let mut n = 0;
            let mut prev: Option<Datom> = None;
            let mut unsorted = None;
            let order = tree.order();
            tree.visit_from(|_| false, &mut |d| {
                if let Some(p) = &prev {
                    if order.cmp(p, d) != std::cmp::Ordering::Less && unsorted.is_none() {
                        unsorted = Some(n);
                    }
                }
                prev = Some(d.clone());
                n += 1;
                true
            });
            self.storage_check(mark)?;
            if let Some(at) = unsorted {
                return Err(StorageError::corruption(
                    format!("{order:?} index"),
                    format!("datom {at} is out of order"),
                ));
            }
            if n != tree.len() {
                return Err(StorageError::corruption(
                    format!("{order:?} index"),
                    format!("holds {n} datoms but its root says {}", tree.len()),
                ));
            }
            total += n;
        }
        Ok(total)
    }
}
