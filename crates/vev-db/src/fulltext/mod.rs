//! The full-text index of the `:db/fulltext` attributes: a derived index beside the
//! covering indexes, kept in every `Db` value.
//!
//! Why segments per transaction: on any storage a transaction's index change must be one
//! write. Each transaction that asserts full-text values builds exactly one immutable
//! `Segment` of those documents, and the manifest (the list of live segments) gets one
//! entry for it; the storage backend writes both in the transaction's own commit. A document
//! is one assertion `(e a v tx)` and never changes; retracting the value marks the document
//! deleted *at* that transaction (its *deletion mark*), which costs no segment at all: the
//! marks live in the manifest state in memory, in each checkpoint's root, and in the log
//! (replaying a retraction marks the document again).
//!
//! Why marks with a transaction rather than removal: a database keeps every past state, and
//! so does this index. A search against a view shows the documents that view shows of the
//! attribute: asserted at or before its basis (and after `since`), and not yet deleted at
//! its basis (any document, in a history view). Compaction merges segments but keeps every
//! document, so no answer and no score (statistics are over the view's documents, see
//! `vev_query::fulltext`) depends on how the documents are divided into segments.
//!
//! Adding `:db/fulltext` to an attribute indexes, in the altering transaction's segment,
//! every value the attribute has had: its current values and, from history, its retracted
//! ones, whose deletion marks are embedded with the segment's manifest entry (as are those
//! of a database from before full text existed, indexed when it is opened).
//!
//! Document numbers are assigned in order (`next_doc`), each entry covering one contiguous
//! range, so entries are ordered and a compaction replaces a contiguous run of them.

mod compact;
mod search;
pub(crate) mod segment;
mod verify;

use std::collections::BTreeMap;
use std::sync::Arc;

use vev_core::ids::{t_of, BasisT};
use vev_core::schema::{sys, Schema};
use vev_core::{Component, Datom, EntityId, IndexOrder, SmolStr, StorageError, Value};

pub use compact::{Compaction, FANOUT};
pub(crate) use search::search;
pub(crate) use segment::{Doc, Segment};
pub use verify::FulltextVerify;

use crate::codec::{err, DecodeResult, Reader, Writer};
use crate::segment::SegmentCache;

/// Cumulative counters of the full-text index, persisted with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FulltextStats {
    /// Segments written: one per transaction that asserted full-text values, one per
    /// compaction.
    pub segments_written: u64,
    /// Manifest entries appended by transactions (a compaction replaces entries instead).
    pub manifest_appends: u64,
    /// Entries in the manifest now (not cumulative).
    pub live_segments: u64,
    /// Compactions done.
    pub compactions: u64,
    /// Bytes of the segments written (transactions' and compactions').
    pub bytes_written: u64,
    /// Documents indexed (not cumulative: every document ever indexed, deleted ones too).
    pub documents: u64,
    /// Of `documents`, those deleted (retracted) by now.
    pub deleted_documents: u64,
}

/// Counter increments (see `Entry::counts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub segments_written: u64,
    pub manifest_appends: u64,
    pub compactions: u64,
    pub bytes_written: u64,
}

impl Counts {
    /// A transaction's segment of `bytes` bytes.
    pub fn appended(bytes: u64) -> Counts {
        Counts {
            segments_written: 1,
            manifest_appends: 1,
            compactions: 0,
            bytes_written: bytes,
        }
    }

    pub fn add(self, o: Counts) -> Counts {
        Counts {
            segments_written: self.segments_written + o.segments_written,
            manifest_appends: self.manifest_appends + o.manifest_appends,
            compactions: self.compactions + o.compactions,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }

    fn write(&self, w: &mut Writer) {
        w.varint(self.segments_written);
        w.varint(self.manifest_appends);
        w.varint(self.compactions);
        w.varint(self.bytes_written);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Counts> {
        Ok(Counts {
            segments_written: r.varint()?,
            manifest_appends: r.varint()?,
            compactions: r.varint()?,
            bytes_written: r.varint()?,
        })
    }
}

/// A deletion mark: local document id and the retracting transaction (0 when the value
/// was erased from every view: a `:db/noHistory` attribute keeps no past).
pub(crate) type Mark = (u32, EntityId);

/// Where a manifest entry's segment is.
#[derive(Clone, Debug)]
pub(crate) enum SegRef {
    /// Built here, with its encoding (not yet stored, or stored and still held).
    Memory {
        seg: Arc<Segment>,
        bytes: Arc<Vec<u8>>,
    },
    /// In storage under this id, loaded through the segment cache.
    Stored(u64),
}

/// One entry of the manifest: a segment and the deletion marks of its documents.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub doc_first: u64,
    pub doc_end: u64,
    /// The transactions whose segments it holds.
    pub t_first: BasisT,
    pub t_last: BasisT,
    /// The least and greatest asserting tx of its documents.
    pub tx_min: EntityId,
    pub tx_max: EntityId,
    /// Attributes with documents in it, and per attribute (documents, total length).
    pub attrs: Arc<[(EntityId, u64, u64)]>,
    pub seg: SegRef,
    /// Whether storage holds it (an entry the store has not written is written with the
    /// next transaction's commit).
    pub stored: bool,
    /// What writing this entry and the entries merged into it added to the counters (so the
    /// counters of a stored index are the sum over its manifest: nothing else is written
    /// per transaction).
    pub counts: Counts,
    /// Deletion marks embedded in the manifest entry (documents already retracted when
    /// indexed), sorted by local id.
    pub embedded: Arc<Vec<Mark>>,
    /// All deletion marks (embedded ones included), sorted by local id.
    pub deleted: Arc<Vec<Mark>>,
}

impl Entry {
    pub fn docs(&self) -> u64 {
        self.doc_end - self.doc_first
    }

    pub fn deleted_at(&self, local: u32) -> Option<EntityId> {
        self.deleted
            .binary_search_by_key(&local, |m| m.0)
            .ok()
            .map(|i| self.deleted[i].1)
    }

    fn has_attr(&self, a: EntityId) -> bool {
        self.attrs.iter().any(|x| x.0 == a)
    }
}

/// The full-text state of one database value.
#[derive(Clone, Debug, Default)]
pub(crate) struct FtState {
    /// Shared entries: a transaction copies the list of pointers, not the entries.
    pub entries: Arc<Vec<Arc<Entry>>>,
    pub next_doc: u64,
    /// While opening: documents below this number are in stored entries already, so a
    /// replayed transaction only counts its documents.
    pub stored_docs_end: u64,
    /// Live (not deleted) documents per attribute: (documents, total length).
    pub live: Arc<BTreeMap<EntityId, (u64, u64)>>,
    /// The running totals (the sum of the entries' `counts`).
    pub counters: Counts,
}

/// What a transaction changes in the index, found before it is applied.
pub(crate) struct TxDocs {
    /// Documents to index, and the deletion marks already known for them.
    docs: Vec<Doc>,
    marks: Vec<Mark>,
}

impl TxDocs {
    /// How many documents the transaction indexes.
    pub fn len(&self) -> usize {
        self.docs.len()
    }
}

fn is_ft(s: &Schema, a: EntityId) -> bool {
    s.attribute(a).is_some_and(|x| x.fulltext)
}

impl FtState {
    /// The documents a transaction indexes, from `db_before` (its trees: an alteration that
    /// makes an attribute full-text indexes the values it has had) with the schema after the
    /// transaction, and the transaction's datoms. `None` when it changes nothing in the
    /// index. `apply_tx` then applies them.
    pub fn tx_docs(
        before: &crate::db::State,
        schema_before: &Schema,
        tx_data: &[Datom],
    ) -> Option<TxDocs> {
        let schema = &before.schema;
        // Attributes this transaction makes full-text (only a `:db/fulltext` datom can):
        // every value they have had.
        let mut altered: Vec<EntityId> = tx_data
            .iter()
            .filter(|d| d.a == sys::FULLTEXT && is_ft(schema, d.e) && !is_ft(schema_before, d.e))
            .map(|d| d.e)
            .collect();
        if altered.is_empty() && !tx_data.iter().any(|d| is_ft(schema, d.a)) {
            return None;
        }
        let mut new = TxDocs {
            docs: Vec::new(),
            marks: Vec::new(),
        };
        altered.sort_unstable();
        altered.dedup();
        for a in altered {
            collect_existing(before, a, &mut new);
        }
        for d in tx_data.iter().filter(|d| d.added && is_ft(schema, d.a)) {
            if let Value::String(s) = &d.v {
                new.docs.push(Doc {
                    e: d.e,
                    a: d.a,
                    tx: d.tx,
                    len: 0,
                    value: s.clone(),
                });
            }
        }
        Some(new)
    }

    /// The next state after a transaction: its documents `new` (from `tx_docs`) indexed in
    /// one segment, and the values it retracts marked deleted. Reads only `before`'s schema
    /// (the one after the transaction) and segment cache, not its trees; `tx_data` and, per
    /// retraction, the tx it retracts, as for `tx_docs`.
    pub fn apply_tx(
        self,
        new: TxDocs,
        before: &crate::db::State,
        schema_before: &Schema,
        tx_data: &[Datom],
        retracted_tx: &[EntityId],
        t: BasisT,
    ) -> FtState {
        let schema = &before.schema;
        let mut next = self;
        if !new.docs.is_empty() {
            next.add_segment(new, t);
        }
        let retractions = tx_data.iter().filter(|d| !d.added).zip(retracted_tx);
        for (d, &asserted) in retractions.filter(|(d, _)| is_ft(schema, d.a)) {
            let Value::String(s) = &d.v else { continue };
            let erased = schema_before.attribute(d.a).is_some_and(|x| x.no_history);
            let at = if erased { 0 } else { d.tx };
            next.mark_deleted(d.e, d.a, asserted, s, at, before.segments.as_ref());
        }
        next
    }

    /// Index `new` as one segment (or, while opening, count documents a stored entry has).
    fn add_segment(&mut self, new: TxDocs, t: BasisT) {
        let n = new.docs.len() as u64;
        let doc_first = self.next_doc;
        self.next_doc += n;
        let live = Arc::make_mut(&mut self.live);
        let deleted: std::collections::HashSet<u32> = new.marks.iter().map(|m| m.0).collect();
        if doc_first < self.stored_docs_end {
            // Replaying on open: the stored entry has these documents (and their embedded
            // marks); only the live statistics were not counted (they are, from here).
            for (i, d) in new.docs.iter().enumerate() {
                if !deleted.contains(&(i as u32)) {
                    let s = live.entry(d.a).or_default();
                    s.0 += 1;
                    s.1 += u64::from(vev_query::fulltext::analyze::terms(&d.value).len() as u32);
                }
            }
            return;
        }
        let seg = Segment::build(new.docs);
        let mut attrs: BTreeMap<EntityId, (u64, u64)> = BTreeMap::new();
        for (i, d) in seg.docs.iter().enumerate() {
            let s = attrs.entry(d.a).or_default();
            s.0 += 1;
            s.1 += u64::from(d.len);
            if !deleted.contains(&(i as u32)) {
                let l = live.entry(d.a).or_default();
                l.0 += 1;
                l.1 += u64::from(d.len);
            }
        }
        let bytes = seg.encode();
        let counts = Counts::appended(bytes.len() as u64);
        self.counters = self.counters.add(counts);
        let (tx_min, tx_max) = tx_range(&seg.docs);
        let mut marks = new.marks;
        marks.sort_unstable();
        let marks = Arc::new(marks);
        Arc::make_mut(&mut self.entries).push(Arc::new(Entry {
            doc_first,
            doc_end: doc_first + n,
            t_first: t,
            t_last: t,
            tx_min,
            tx_max,
            attrs: attrs.into_iter().map(|(a, (n, l))| (a, n, l)).collect(),
            seg: SegRef::Memory {
                seg: Arc::new(seg),
                bytes: Arc::new(bytes),
            },
            stored: false,
            counts,
            embedded: marks.clone(),
            deleted: marks,
        }));
    }

    /// Mark the live document (e, a, value) asserted by `asserted` deleted at `at`.
    fn mark_deleted(
        &mut self,
        e: EntityId,
        a: EntityId,
        asserted: EntityId,
        value: &str,
        at: EntityId,
        cache: Option<&Arc<SegmentCache>>,
    ) {
        let entries = Arc::make_mut(&mut self.entries);
        for entry in entries.iter_mut().rev() {
            if asserted < entry.tx_min || asserted > entry.tx_max || !entry.has_attr(a) {
                continue;
            }
            let Some(seg) = load(entry, cache) else {
                return; // the cache recorded the failure; the caller's check reports it
            };
            let Some(local) = seg.find(e, a, asserted, value) else {
                continue;
            };
            match entry.deleted_at(local) {
                // Replaying, on opening, a retraction that a compaction's entry already
                // recorded: the mark is there, the live statistics (the root's) do not
                // count it yet.
                Some(marked) if marked == at => {}
                Some(_) => continue,
                None => {
                    let deleted = Arc::make_mut(&mut Arc::make_mut(entry).deleted);
                    let at_pos = deleted.partition_point(|m| m.0 < local);
                    deleted.insert(at_pos, (local, at));
                }
            }
            let len = u64::from(seg.docs[local as usize].len);
            let live = Arc::make_mut(&mut self.live);
            if let Some(s) = live.get_mut(&a) {
                s.0 = s.0.saturating_sub(1);
                s.1 = s.1.saturating_sub(len);
            }
            return;
        }
    }

    /// Merge the trailing entries storage does not hold yet into one (a bulk import's
    /// transactions, written as one segment per write batch). The counters then count the
    /// one segment, as it is the one written.
    pub(crate) fn coalesce_unstored(&mut self) {
        let first = self
            .entries
            .iter()
            .rposition(|e| e.stored)
            .map_or(0, |i| i + 1);
        if self.entries.len() - first < 2 {
            return;
        }
        let run = &self.entries[first..];
        let segs: Vec<Arc<Segment>> = run
            .iter()
            .filter_map(|e| match &e.seg {
                SegRef::Memory { seg, .. } => Some(seg.clone()),
                SegRef::Stored(_) => None,
            })
            .collect();
        if segs.len() != run.len() {
            return;
        }
        let old = run.iter().fold(Counts::default(), |c, e| c.add(e.counts));
        let merged_entry = merged_entry(run, &segs, Counts::appended);
        // The merged entries' segments were never written: only the merged one is.
        self.counters = Counts {
            segments_written: self.counters.segments_written - old.segments_written,
            manifest_appends: self.counters.manifest_appends - old.manifest_appends,
            compactions: self.counters.compactions - old.compactions,
            bytes_written: self.counters.bytes_written - old.bytes_written,
        }
        .add(merged_entry.counts);
        let entries = Arc::make_mut(&mut self.entries);
        entries.truncate(first);
        entries.push(Arc::new(merged_entry));
    }

    /// The counters, with the live segment and document counts.
    pub fn stats(&self) -> FulltextStats {
        FulltextStats {
            segments_written: self.counters.segments_written,
            manifest_appends: self.counters.manifest_appends,
            compactions: self.counters.compactions,
            bytes_written: self.counters.bytes_written,
            live_segments: self.entries.len() as u64,
            documents: self.next_doc,
            deleted_documents: self.entries.iter().map(|e| e.deleted.len() as u64).sum(),
        }
    }
}

/// One entry for consecutive entries `run` (whose segments are `segs`): their segments
/// merged (documents keep their numbers), their statistics summed, every deletion mark
/// they have embedded in it, and the counts `counts` gives for the merged segment's size.
pub(crate) fn merged_entry(
    run: &[Arc<Entry>],
    segs: &[Arc<Segment>],
    counts: impl FnOnce(u64) -> Counts,
) -> Entry {
    let parts: Vec<&Segment> = segs.iter().map(|s| &**s).collect();
    let merged = Segment::merge(&parts);
    let bytes = merged.encode();
    let mut attrs: BTreeMap<EntityId, (u64, u64)> = BTreeMap::new();
    for (a, n, len) in run.iter().flat_map(|e| e.attrs.iter()) {
        let s = attrs.entry(*a).or_default();
        s.0 += n;
        s.1 += len;
    }
    let doc_first = run[0].doc_first;
    let marks = Arc::new(merged_marks(run, doc_first));
    Entry {
        doc_first,
        doc_end: run[run.len() - 1].doc_end,
        t_first: run.iter().map(|e| e.t_first).min().unwrap_or(0),
        t_last: run.iter().map(|e| e.t_last).max().unwrap_or(0),
        tx_min: run.iter().map(|e| e.tx_min).min().unwrap_or(0),
        tx_max: run.iter().map(|e| e.tx_max).max().unwrap_or(0),
        attrs: attrs.into_iter().map(|(a, (n, l))| (a, n, l)).collect(),
        counts: counts(bytes.len() as u64),
        seg: SegRef::Memory {
            seg: Arc::new(merged),
            bytes: Arc::new(bytes),
        },
        stored: false,
        embedded: marks.clone(),
        deleted: marks,
    }
}

/// The deletion marks of consecutive entries, renumbered from document `first`.
pub(crate) fn merged_marks(entries: &[Arc<Entry>], first: u64) -> Vec<Mark> {
    entries
        .iter()
        .flat_map(|e| {
            let base = (e.doc_first - first) as u32;
            e.deleted.iter().map(move |m| (base + m.0, m.1))
        })
        .collect()
}

/// The ids of the schema's full-text attributes, in order.
pub(crate) fn fulltext_attrs(schema: &Schema) -> Vec<EntityId> {
    let mut attrs: Vec<EntityId> = schema
        .parts()
        .attributes
        .iter()
        .filter(|a| a.fulltext)
        .map(|a| a.id)
        .collect();
    attrs.sort_unstable();
    attrs
}

/// Every value attribute `a` has had in `before`: current ones, and retracted ones (with
/// their deletion marks) from history.
fn collect_existing(before: &crate::db::State, a: EntityId, out: &mut TxDocs) {
    visit_values(before, a, &mut |e, value, tx, retracted| {
        if let Some(at) = retracted {
            out.marks.push((out.docs.len() as u32, at));
        }
        out.docs.push(Doc {
            e,
            a,
            tx,
            len: 0,
            value: value.clone(),
        });
    });
}

/// What `visit_values` calls with each value: entity, value, asserting tx, and the
/// retracting tx of a retracted one.
pub(crate) type ValueVisitor<'a> = dyn FnMut(EntityId, &SmolStr, EntityId, Option<EntityId>) + 'a;

/// Visit every string value attribute `a` has had in `state`: the current ones (with
/// `None`), then from history each retracted one with the tx that retracted it.
pub(crate) fn visit_values(state: &crate::db::State, a: EntityId, visit: &mut ValueVisitor<'_>) {
    let db = crate::Db::from_state(state.clone());
    for d in db.datoms_unchecked(IndexOrder::Aevt, &[Component::Entity(a)]) {
        if let Value::String(s) = &d.v {
            visit(d.e, s, d.tx, None);
        }
    }
    // Retired datoms come in (assertion, retraction) pairs, adjacent in AEVT order.
    let mut open: Option<Datom> = None;
    state.retired.aevt.visit_from(|d| d.a < a, &mut |d| {
        if d.a != a {
            return false;
        }
        if d.added {
            open = Some(d.clone());
        } else if let Some(asserted) = open.take() {
            if let Value::String(s) = &asserted.v {
                visit(asserted.e, s, asserted.tx, Some(d.tx));
            }
        }
        true
    });
}

fn tx_range(docs: &[Doc]) -> (EntityId, EntityId) {
    let min = docs.iter().map(|d| d.tx).min().unwrap_or(0);
    let max = docs.iter().map(|d| d.tx).max().unwrap_or(0);
    (min, max)
}

/// The segment of an entry: in memory, or through the cache (`None` when it fails to load;
/// the cache recorded why).
pub(crate) fn load(entry: &Entry, cache: Option<&Arc<SegmentCache>>) -> Option<Arc<Segment>> {
    match &entry.seg {
        SegRef::Memory { seg, .. } => Some(seg.clone()),
        SegRef::Stored(id) => match cache {
            Some(c) => c.load_fulltext(*id, entry.doc_first),
            None => None,
        },
    }
}

/// Whether a document asserted by `tx` and deleted at `deleted` is in a view with basis
/// `basis` (the as-of, or the database's), `since` and `history`.
pub(crate) fn visible(tx: EntityId, deleted: Option<EntityId>, view: &ViewBounds) -> bool {
    let t = t_of(tx);
    if t > view.basis || view.since.is_some_and(|s| t <= s) {
        return false;
    }
    match deleted {
        None => true,
        Some(0) => false,
        Some(at) => view.history || t_of(at) > view.basis,
    }
}

/// A view's bounds, as the index checks them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ViewBounds {
    pub basis: BasisT,
    pub since: Option<BasisT>,
    pub history: bool,
    /// The plain current view of the latest basis: every document without a mark is in it.
    pub latest: bool,
}

// ---- persisted forms ----

const KIND_MANIFEST_ENTRY: u8 = 6;

/// A manifest entry to store: its document range, the record to keep beside it, and the
/// segment's bytes.
pub struct NewEntry {
    /// The first document number it covers.
    pub doc_first: u64,
    /// One past the last.
    pub doc_end: u64,
    /// The manifest record (`decode_entry` reads it back, with the segment id).
    pub record: Vec<u8>,
    /// The segment's bytes.
    pub segment: Arc<Vec<u8>>,
}

impl Entry {
    /// The manifest record: ranges, attributes and embedded marks (the segment id is kept
    /// beside it by the store).
    pub(crate) fn record(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(KIND_MANIFEST_ENTRY);
        w.varint(self.doc_first);
        w.varint(self.doc_end - self.doc_first);
        w.varint(self.t_first);
        w.varint(self.t_last - self.t_first);
        w.varint(self.tx_min);
        w.varint(self.tx_max - self.tx_min);
        w.varint(self.attrs.len() as u64);
        for (a, n, len) in self.attrs.iter() {
            w.varint(*a);
            w.varint(*n);
            w.varint(*len);
        }
        write_marks(&mut w, &self.embedded);
        self.counts.write(&mut w);
        w.buf
    }
}

fn write_marks(w: &mut Writer, marks: &[Mark]) {
    w.varint(marks.len() as u64);
    let mut prev = 0;
    for (local, at) in marks {
        w.varint(u64::from(*local - prev));
        prev = *local;
        w.varint(*at);
    }
}

fn read_marks(r: &mut Reader<'_>, docs: u64) -> DecodeResult<Vec<Mark>> {
    let n = r.count()?;
    let mut out = Vec::with_capacity(n);
    let mut prev: Option<u64> = None;
    for _ in 0..n {
        let delta = r.varint()?;
        let local = match prev {
            None => delta,
            Some(p) if delta > 0 => p + delta,
            Some(_) => return err("deletion marks repeat a document"),
        };
        if local >= docs {
            return err(format!("deletion mark of document {local} past the entry"));
        }
        out.push((local as u32, r.varint()?));
        prev = Some(local);
    }
    Ok(out)
}

/// Read a manifest record stored with segment `id`.
pub(crate) fn decode_entry(bytes: &[u8], id: u64) -> DecodeResult<Entry> {
    let mut r = Reader::new(bytes);
    if r.u8()? != KIND_MANIFEST_ENTRY {
        return err("not a full-text manifest entry");
    }
    let doc_first = r.varint()?;
    let docs = r.varint()?;
    let t_first = r.varint()?;
    let t_last = t_first
        .checked_add(r.varint()?)
        .ok_or_else(|| crate::codec::DecodeError("t range overflows".into()))?;
    let tx_min = r.varint()?;
    let tx_max = tx_min
        .checked_add(r.varint()?)
        .ok_or_else(|| crate::codec::DecodeError("tx range overflows".into()))?;
    let Some(doc_end) = doc_first
        .checked_add(docs)
        .filter(|_| docs <= u64::from(u32::MAX))
    else {
        return err("document range overflows");
    };
    let n = r.count()?;
    let mut attrs = Vec::with_capacity(n);
    for _ in 0..n {
        attrs.push((r.varint()?, r.varint()?, r.varint()?));
    }
    if attrs.iter().map(|x| x.1).sum::<u64>() != docs {
        return err("attribute document counts do not add up to the entry's");
    }
    let marks = Arc::new(read_marks(&mut r, docs)?);
    let counts = Counts::read(&mut r)?;
    if !r.is_at_end() {
        return err("trailing bytes after the manifest entry");
    }
    Ok(Entry {
        doc_first,
        doc_end,
        t_first,
        t_last,
        tx_min,
        tx_max,
        attrs: attrs.into(),
        seg: SegRef::Stored(id),
        stored: true,
        counts,
        embedded: marks.clone(),
        deleted: marks,
    })
}

impl FtState {
    /// The root record's section: next document number and every deletion mark (by
    /// document number).
    pub(crate) fn write_root(&self, w: &mut Writer) {
        w.varint(self.next_doc);
        w.varint(self.live.len() as u64);
        for (a, (n, len)) in self.live.iter() {
            w.varint(*a);
            w.varint(*n);
            w.varint(*len);
        }
        let marks: Vec<(u64, EntityId)> = self.global_marks();
        w.varint(marks.len() as u64);
        let mut prev = 0;
        for (doc, at) in marks {
            w.varint(doc - prev);
            prev = doc;
            w.varint(at);
        }
    }

    fn global_marks(&self) -> Vec<(u64, EntityId)> {
        self.entries
            .iter()
            .flat_map(|e| {
                e.deleted
                    .iter()
                    .map(|m| (e.doc_first + u64::from(m.0), m.1))
            })
            .collect()
    }

    /// Read the root's section (`None` for a root from before full text).
    pub(crate) fn read_root(r: &mut Reader<'_>) -> DecodeResult<RootSection> {
        let next_doc = r.varint()?;
        let n = r.count()?;
        let mut live = BTreeMap::new();
        for _ in 0..n {
            live.insert(r.varint()?, (r.varint()?, r.varint()?));
        }
        let n = r.count()?;
        let mut marks = Vec::with_capacity(n);
        let mut prev: Option<u64> = None;
        for _ in 0..n {
            let delta = r.varint()?;
            let doc = match prev {
                None => delta,
                Some(p) if delta > 0 => p
                    .checked_add(delta)
                    .ok_or_else(|| crate::codec::DecodeError("mark overflows".into()))?,
                Some(_) => return err("deletion marks repeat a document"),
            };
            if doc >= next_doc {
                return err(format!("deletion mark of document {doc} past the index"));
            }
            marks.push((doc, r.varint()?));
            prev = Some(doc);
        }
        Ok(RootSection {
            next_doc,
            live,
            marks,
        })
    }

    /// The state a database opens with: the manifest's entries (with the root's deletion
    /// marks, if the root has a section), the counters their sum; the log after the root
    /// replays onto it.
    pub(crate) fn opened(
        root: Option<&RootSection>,
        mut entries: Vec<Entry>,
    ) -> Result<FtState, StorageError> {
        let counters = entries
            .iter()
            .fold(Counts::default(), |c, e| c.add(e.counts));
        entries.sort_by_key(|e| e.doc_first);
        let mut expect = 0;
        for e in &entries {
            if e.doc_first != expect {
                return Err(StorageError::corruption(
                    "full-text manifest",
                    format!(
                        "entry of documents {}..{} where {expect} was expected",
                        e.doc_first, e.doc_end
                    ),
                ));
            }
            expect = e.doc_end;
        }
        let stored_docs_end = expect;
        let marks: &[(u64, EntityId)] = root.map_or(&[], |r| &r.marks);
        let mut at = 0;
        for e in entries.iter_mut() {
            while at < marks.len() && marks[at].0 < e.doc_end {
                let (doc, tx) = marks[at];
                at += 1;
                if doc < e.doc_first {
                    continue;
                }
                let local = (doc - e.doc_first) as u32;
                let deleted = Arc::make_mut(&mut e.deleted);
                match deleted.binary_search_by_key(&local, |m| m.0) {
                    Ok(_) => {}
                    Err(pos) => deleted.insert(pos, (local, tx)),
                }
            }
        }
        if let Some(r) = root {
            if r.next_doc > stored_docs_end {
                return Err(StorageError::corruption(
                    "full-text manifest",
                    format!(
                        "it ends at document {stored_docs_end} but the root counts {}",
                        r.next_doc
                    ),
                ));
            }
        }
        Ok(FtState {
            entries: Arc::new(entries.into_iter().map(Arc::new).collect()),
            next_doc: root.map_or(0, |r| r.next_doc),
            stored_docs_end,
            live: Arc::new(root.map(|r| r.live.clone()).unwrap_or_default()),
            counters,
        })
    }

    /// Index every value of the full-text attributes of `before` in one segment: a
    /// database from before full text existed, opened. Its basis-t is the segment's t.
    pub(crate) fn reindex(&self, before: &crate::db::State) -> FtState {
        let mut next = self.clone();
        let mut new = TxDocs {
            docs: Vec::new(),
            marks: Vec::new(),
        };
        for a in fulltext_attrs(&before.schema) {
            collect_existing(before, a, &mut new);
        }
        if !new.docs.is_empty() {
            next.add_segment(new, before.basis_t);
        }
        next
    }
}

/// The full-text section of a root record.
#[derive(Clone, Debug, Default)]
pub(crate) struct RootSection {
    pub next_doc: u64,
    pub live: BTreeMap<EntityId, (u64, u64)>,
    pub marks: Vec<(u64, EntityId)>,
}

impl crate::Db {
    /// The full-text index's counters.
    pub fn fulltext_stats(&self) -> FulltextStats {
        self.state.fulltext.stats()
    }

    /// The manifest entries storage does not hold yet, with their segments: normally the
    /// one the latest transaction made (a database from before full text existed also has
    /// the one its opening indexed). The storage backend writes them in the transaction's
    /// commit, then calls `fulltext_stored`.
    pub fn fulltext_unstored(&self) -> Vec<NewEntry> {
        self.state
            .fulltext
            .entries
            .iter()
            .filter(|e| !e.stored)
            .filter_map(|e| match &e.seg {
                SegRef::Memory { bytes, .. } => Some(NewEntry {
                    doc_first: e.doc_first,
                    doc_end: e.doc_end,
                    record: e.record(),
                    segment: bytes.clone(),
                }),
                SegRef::Stored(_) => None,
            })
            .collect()
    }

    /// This database with every manifest entry marked as stored (after the backend wrote
    /// what `fulltext_unstored` gave). Their segments stay in memory.
    pub fn fulltext_stored(&self) -> crate::Db {
        if self.state.fulltext.entries.iter().all(|e| e.stored) {
            return self.clone();
        }
        let mut state = (*self.state).clone();
        for e in Arc::make_mut(&mut state.fulltext.entries).iter_mut() {
            if !e.stored {
                Arc::make_mut(e).stored = true;
            }
        }
        crate::Db {
            state: Arc::new(state),
            view: self.view,
            failed: self.failed.clone(),
        }
    }
}

impl crate::Db {
    /// This database with the entries storage does not hold merged into one (see
    /// `fulltext_unstored`), which it returns to store, and marked stored.
    pub fn take_fulltext(self) -> (crate::Db, Vec<NewEntry>) {
        if self.state.fulltext.entries.iter().all(|e| e.stored) {
            return (self, Vec::new());
        }
        let view = self.view;
        let failed = self.failed.clone();
        let mut state = Arc::unwrap_or_clone(self.state);
        state.fulltext.coalesce_unstored();
        let db = crate::Db {
            state: Arc::new(state),
            view,
            failed,
        };
        let entries = db.fulltext_unstored();
        (db.fulltext_stored(), entries)
    }
}
