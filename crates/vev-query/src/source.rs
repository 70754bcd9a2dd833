//! The one door between the query engine and storage.
//!
//! The engine reads datoms only through [`Source`]: ordered scans over the four index orders
//! and counts of index prefixes. The in-memory `Db` implements it today; durable and shared
//! storage implement the same trait, so the planner and executor never change with storage.

use std::ops::Bound;

use vev_core::{BasisT, Component, Datom, EntityId, IndexOrder, Schema, Value};

/// A database value as the query engine sees it.
///
/// Scans visit datoms by reference in index order and stop when the visitor returns `false`.
/// A scan reflects the source's view: an as-of or since view yields the datoms true in it, a
/// history view yields every assertion and retraction (`added` tells which).
pub trait Source: Send + Sync {
    /// The schema the source's datoms are read with (attribute types, cardinalities,
    /// idents), which the engine resolves constants and pull patterns against.
    fn schema(&self) -> &Schema;

    /// The basis-t of the database value the source reads (the last transaction it sees).
    fn basis_t(&self) -> BasisT;

    /// Whether scans yield history (assertions and retractions) rather than current facts.
    fn is_history(&self) -> bool;

    /// Visit the datoms of `order` whose leading components equal `prefix` (positions in the
    /// order's own sequence: `[a v e tx]` for AVET).
    fn scan(&self, order: IndexOrder, prefix: &[Component], visit: &mut dyn FnMut(&Datom) -> bool);

    /// Visit AVET datoms of attribute `a` with a value inside the bounds, in value order.
    fn scan_range(
        &self,
        a: EntityId,
        start: Bound<&Value>,
        end: Bound<&Value>,
        visit: &mut dyn FnMut(&Datom) -> bool,
    );

    /// Visit, for each prefix of `prefixes` (all the same length, sorted in `order`), the
    /// datoms under it; the visitor gets the prefix's index. Sources may walk the index once
    /// for the whole batch; the default does one scan per prefix.
    fn scan_batch(
        &self,
        order: IndexOrder,
        prefixes: &[Vec<Component>],
        visit: &mut dyn FnMut(usize, &Datom) -> bool,
    ) {
        scan_each_prefix(self, order, prefixes, visit);
    }

    /// `scan_batch` for prefixes of `len` (1 or 2) entity ids in EAVT or AEVT, given as
    /// machine words (sorted in `order`, no duplicates). The default builds the components.
    fn scan_id_batch(
        &self,
        order: IndexOrder,
        keys: &[[EntityId; 2]],
        len: usize,
        visit: &mut dyn FnMut(usize, &Datom) -> bool,
    ) {
        self.scan_batch(order, &id_prefixes(keys, len), visit);
    }

    /// An estimate of how many datoms `scan(order, prefix)` visits, cheap to compute
    /// (logarithmic in the index size). Exact on a current view.
    fn count_estimate(&self, order: IndexOrder, prefix: &[Component]) -> usize;

    /// An estimate of how many AVET datoms of `a` lie inside the bounds.
    fn count_range_estimate(&self, a: EntityId, start: Bound<&Value>, end: Bound<&Value>) -> usize;

    /// The documents of the full-text attribute `a` (values the view shows) that match
    /// `query`, with their scores, in no particular order; with `values`, each with its
    /// value (else a source may leave `Hit::value` out, which saves touching every
    /// matching value). The default is the reference search: a scan of every value of `a`
    /// (`fulltext::scan_search`); a source with a full-text index answers from it, with the
    /// same rows and scores.
    fn fulltext(
        &self,
        a: EntityId,
        query: &crate::fulltext::FtQuery,
        values: bool,
    ) -> Result<Vec<crate::fulltext::Hit>, crate::QueryError> {
        let _ = values;
        Ok(crate::fulltext::scan_search(self, a, query))
    }

    /// Whether every datom the view shows obeys the schema: at most one value of a
    /// cardinality-one attribute per entity and one entity per value of a unique one. A
    /// database's current view does (the transactor refuses anything else, alterations
    /// included); a past view may show values from before an alteration, and a test source
    /// may hold anything, so the default is false. The planner relies on it only to skip
    /// work (see `exec::fd`), never for an answer a false here would change.
    fn obeys_schema(&self) -> bool {
        false
    }

    /// A cursor over the current datoms of attribute `a` in AEVT order whose entity lies in
    /// `entities`, lent a run at a time (see [`AttrRuns`]); `None` when the source cannot
    /// give one (the default, and any view other than a plain current database: as-of,
    /// since, history), and the engine then reads through `scan`. What the star aggregate
    /// (`query::star_agg`) merges, one cursor per pattern.
    fn attr_runs(
        &self,
        a: EntityId,
        entities: std::ops::Range<EntityId>,
    ) -> Option<Box<dyn AttrRuns + '_>> {
        let _ = (a, entities);
        None
    }

    /// Up to `parts - 1` entity ids, ascending, that cut attribute `a`'s AEVT datoms into
    /// `parts` ranges of about equal size, for reading them on several threads; empty when
    /// the source has none to offer (the default).
    fn entity_cuts(&self, a: EntityId, parts: usize) -> Vec<EntityId> {
        let _ = (a, parts);
        Vec::new()
    }

    /// A mark to give `storage_failure_since` when the reads it covers are done.
    fn storage_mark(&self) -> u64 {
        0
    }

    /// A storage failure met while reading since `mark` was taken (a segment that could not
    /// be loaded; a lasting one such as corruption whenever it was met). Scans cannot return
    /// errors, so the engine takes a mark before running and asks after, and fails the whole
    /// query.
    fn storage_failure_since(&self, mark: u64) -> Option<vev_core::StorageError> {
        let _ = mark;
        None
    }
}

/// A cursor over sorted datoms that lends them a run (a borrowed slice) at a time, so a
/// reader merging several streams holds a position in each and reads the datoms in place.
pub trait AttrRuns {
    /// The current run: never empty after an `advance` that returned true; empty before the
    /// first `advance` and after the last.
    fn run(&self) -> &[Datom];
    /// Move to the next run; false at the end.
    fn advance(&mut self) -> bool;
}

/// Id keys of `scan_id_batch` as the components of `scan_batch` prefixes.
pub fn id_prefixes(keys: &[[EntityId; 2]], len: usize) -> Vec<Vec<Component>> {
    keys.iter()
        .map(|k| k[..len].iter().map(|id| Component::Entity(*id)).collect())
        .collect()
}

/// `scan_batch` done the plain way: one `scan` per prefix, in order. The trait's default, and
/// what sources that can do better fall back to when they cannot.
pub fn scan_each_prefix<S: Source + ?Sized>(
    src: &S,
    order: IndexOrder,
    prefixes: &[Vec<Component>],
    visit: &mut dyn FnMut(usize, &Datom) -> bool,
) {
    for (i, prefix) in prefixes.iter().enumerate() {
        let mut go = true;
        src.scan(order, prefix, &mut |d| {
            go = visit(i, d);
            go
        });
        if !go {
            return;
        }
    }
}
