//! `Db` as a query [`Source`]: the engine's only view of the indexes.
//!
//! On a current view, scans walk the borrowed tree nodes (no datom is cloned) and counts are
//! two rank descents. Time-travel views go through the merging scan of `db.rs`; their counts
//! are estimates from the current and retired trees together.

use std::cmp::Ordering;
use std::ops::Bound;

use vev_core::{BasisT, Component, Datom, EntityId, IndexOrder, Schema, Value};
use vev_query::Source;

use crate::db::Db;
use crate::tree::Tree;

impl Source for Db {
    fn schema(&self) -> &Schema {
        Db::schema(self)
    }

    fn fulltext(
        &self,
        a: EntityId,
        query: &vev_query::fulltext::FtQuery,
        values: bool,
    ) -> Result<Vec<vev_query::fulltext::Hit>, vev_query::QueryError> {
        if let Some(f) = &self.failed {
            return Err(vev_core::StorageError::clone(f).into());
        }
        Ok(crate::fulltext::search(self, a, query, values)?)
    }

    fn basis_t(&self) -> BasisT {
        Db::basis_t(self)
    }

    fn is_history(&self) -> bool {
        self.view.history
    }

    fn scan(&self, order: IndexOrder, prefix: &[Component], visit: &mut dyn FnMut(&Datom) -> bool) {
        if self.is_current_view() {
            let tree = self.state.current.tree(order);
            if let Some((key, len)) = id_prefix(order, prefix) {
                // Ids only (e and a leading): compare machine words, not components.
                tree.visit_from(
                    |d| id_cmp(leading_ids(order, d), key, len) == Ordering::Less,
                    &mut |d| id_cmp(leading_ids(order, d), key, len) == Ordering::Equal && visit(d),
                );
                return;
            }
            let boxed = prefix
                .iter()
                .any(|c| matches!(c, Component::Value(v) if behind_pointer(v)));
            if let (IndexOrder::Avet, [Component::Entity(a), Component::Value(v)], false) =
                (order, prefix, boxed)
            {
                // An attribute and a value (a unique value's holder, an equality filter):
                // the comparison inlined, not `cmp_prefix`'s walk over components.
                let key = |d: &Datom| d.a.cmp(a).then_with(|| d.v.cmp(v));
                tree.visit_from(|d| key(d) == Ordering::Less, &mut |d| {
                    key(d) == Ordering::Equal && visit(d)
                });
                return;
            }
            let below = |d: &Datom| order.cmp_prefix(d, prefix) == Ordering::Less;
            if !boxed {
                tree.visit_from(below, &mut |d| {
                    order.cmp_prefix(d, prefix) == Ordering::Equal && visit(d)
                });
                return;
            }
            // A value behind a pointer in the prefix: count the range first (two descents),
            // then visit exactly that many datoms, so no datom's value is dereferenced.
            let lo = tree.rank(below);
            let hi = tree.rank(|d| order.cmp_prefix(d, prefix) != Ordering::Greater);
            let mut left = hi - lo;
            if left == 0 {
                return;
            }
            tree.visit_from(below, &mut |d| {
                left -= 1;
                visit(d) && left > 0
            });
            return;
        }
        let view = self.view();
        if let (None, Some(since), false) = (view.as_of, view.since, view.history) {
            // A since view is the current datoms of later transactions: walk the current
            // tree in place and skip the older ones, cloning none.
            let tree = self.state.current.tree(order);
            let below = |d: &Datom| order.cmp_prefix(d, prefix) == Ordering::Less;
            tree.visit_from(below, &mut |d| {
                order.cmp_prefix(d, prefix) == Ordering::Equal
                    && (vev_core::ids::t_of(d.tx) <= since || visit(d))
            });
            return;
        }
        // The engine checks for storage failures once, after the query.
        for d in self.datoms_unchecked(order, prefix) {
            if !visit(&d) {
                return;
            }
        }
    }

    fn scan_batch(
        &self,
        order: IndexOrder,
        prefixes: &[Vec<Component>],
        visit: &mut dyn FnMut(usize, &Datom) -> bool,
    ) {
        if !self.is_current_view() {
            vev_query::source::scan_each_prefix(self, order, prefixes, visit);
            return;
        }
        let tree = self.state.current.tree(order);
        if let Some(keys) = id_keys(order, prefixes) {
            // Prefixes of ids only (e and a): compare machine words, not components.
            self.scan_id_batch(order, &keys, prefixes[0].len(), visit);
            return;
        }
        tree.visit_batch(
            prefixes.len(),
            &|k, d| order.cmp_prefix(d, &prefixes[k]) == Ordering::Less,
            &|k, d| order.cmp_prefix(d, &prefixes[k]) == Ordering::Greater,
            visit,
        );
    }

    fn scan_id_batch(
        &self,
        order: IndexOrder,
        keys: &[[EntityId; 2]],
        len: usize,
        visit: &mut dyn FnMut(usize, &Datom) -> bool,
    ) {
        if !self.is_current_view() || !matches!(order, IndexOrder::Eavt | IndexOrder::Aevt) {
            let prefixes = vev_query::source::id_prefixes(keys, len);
            vev_query::source::scan_each_prefix(self, order, &prefixes, visit);
            return;
        }
        self.state.current.tree(order).visit_batch(
            keys.len(),
            &|k, d| id_cmp(leading_ids(order, d), keys[k], len) == Ordering::Less,
            &|k, d| id_cmp(leading_ids(order, d), keys[k], len) == Ordering::Greater,
            visit,
        );
    }

    fn scan_range(
        &self,
        a: EntityId,
        start: Bound<&Value>,
        end: Bound<&Value>,
        visit: &mut dyn FnMut(&Datom) -> bool,
    ) {
        let below = |d: &Datom| d.a < a || (d.a == a && before_start(&d.v, start));
        let inside = |d: &Datom| d.a == a && before_end(&d.v, end);
        if self.is_current_view() {
            let tree = self.state.current.tree(IndexOrder::Avet);
            tree.visit_from(below, &mut |d| inside(d) && visit(d));
            return;
        }
        let start_v = match start {
            Bound::Included(v) | Bound::Excluded(v) => Some(v.clone()),
            Bound::Unbounded => None,
        };
        for d in self.index_range_unchecked(a, start_v, None) {
            if !inside(&d) {
                return;
            }
            if before_start(&d.v, start) {
                continue;
            }
            if !visit(&d) {
                return;
            }
        }
    }

    fn obeys_schema(&self) -> bool {
        self.is_current_view() && self.failed.is_none()
    }

    fn attr_runs(
        &self,
        a: EntityId,
        entities: std::ops::Range<EntityId>,
    ) -> Option<Box<dyn vev_query::source::AttrRuns + '_>> {
        if !self.is_current_view() {
            return None;
        }
        let start = entities.start;
        let runs = self
            .state
            .current
            .tree(IndexOrder::Aevt)
            .runs_from(|d| (d.a, d.e) < (a, start));
        Some(Box::new(AttrCursor {
            runs,
            a,
            end: entities.end,
            len: 0,
            last: false,
        }))
    }

    fn entity_cuts(&self, a: EntityId, parts: usize) -> Vec<EntityId> {
        if !self.is_current_view() || parts < 2 {
            return Vec::new();
        }
        let tree = self.state.current.tree(IndexOrder::Aevt);
        let lo = tree.rank(|d| d.a < a);
        let hi = tree.rank(|d| d.a <= a);
        let mut cuts: Vec<EntityId> = (1..parts)
            .filter_map(|i| tree.nth_in_nodes(lo + (hi - lo) * i / parts))
            .filter(|d| d.a == a)
            .map(|d| d.e)
            .collect();
        cuts.dedup();
        cuts
    }

    fn count_estimate(&self, order: IndexOrder, prefix: &[Component]) -> usize {
        let count = |tree: &Tree| {
            let hi = tree.rank(|d| order.cmp_prefix(d, prefix) != Ordering::Greater);
            let lo = tree.rank(|d| order.cmp_prefix(d, prefix) == Ordering::Less);
            hi - lo
        };
        let current = count(self.state.current.tree(order));
        if self.is_current_view() {
            return current;
        }
        current + count(self.state.retired.tree(order))
    }

    fn storage_mark(&self) -> u64 {
        Db::storage_mark(self)
    }

    fn storage_failure_since(&self, mark: u64) -> Option<vev_core::StorageError> {
        Db::storage_failure_since(self, mark)
    }

    fn count_range_estimate(&self, a: EntityId, start: Bound<&Value>, end: Bound<&Value>) -> usize {
        let count = |tree: &Tree| {
            let lo = tree.rank(|d| d.a < a || (d.a == a && before_start(&d.v, start)));
            let hi = tree.rank(|d| d.a < a || (d.a == a && before_end(&d.v, end)));
            hi.saturating_sub(lo)
        };
        let current = count(self.state.current.tree(IndexOrder::Avet));
        if self.is_current_view() {
            return current;
        }
        current + count(self.state.retired.tree(IndexOrder::Avet))
    }
}

/// One attribute's AEVT datoms with entities below `end`, a run at a time: the tree's runs
/// cut where the attribute or the entity range ends.
struct AttrCursor {
    runs: crate::tree::Runs,
    a: EntityId,
    end: EntityId,
    /// How much of the tree's current run is inside.
    len: usize,
    /// Whether the current run reached past the end (so there is no next one).
    last: bool,
}

impl vev_query::source::AttrRuns for AttrCursor {
    fn run(&self) -> &[Datom] {
        &self.runs.run()[..self.len]
    }

    fn advance(&mut self) -> bool {
        self.len = 0;
        if self.last || !self.runs.advance() {
            self.last = true;
            return false;
        }
        let (a, end) = (self.a, self.end);
        let run = self.runs.run();
        self.len = run.partition_point(|d| d.a == a && d.e < end);
        self.last = self.len < run.len();
        self.len > 0
    }
}

/// The ids an order leads with: e then a (EAVT), a then e (AEVT, AVET).
#[inline]
/// Whether comparing with `v` follows a pointer (a string longer than `SmolStr` keeps
/// inline, a keyword, a tuple, ...).
fn behind_pointer(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_heap_allocated(),
        Value::Keyword(_)
        | Value::Uri(_)
        | Value::Bytes(_)
        | Value::Symbol(_)
        | Value::BigInt(_)
        | Value::BigDec(_)
        | Value::Tuple(_) => true,
        _ => false,
    }
}

fn leading_ids(order: IndexOrder, d: &Datom) -> [u64; 2] {
    match order {
        IndexOrder::Aevt | IndexOrder::Avet => [d.a, d.e],
        _ => [d.e, d.a],
    }
}

/// Compare the first `len` (1 or 2) ids of a datom with a key's.
#[inline]
fn id_cmp(ids: [u64; 2], key: [u64; 2], len: usize) -> Ordering {
    match ids[0].cmp(&key[0]) {
        Ordering::Equal if len > 1 => ids[1].cmp(&key[1]),
        ord => ord,
    }
}

/// A prefix of entity ids in an order that leads with them (e and a of EAVT or AEVT, a of
/// AVET), as machine words: the key and its length.
fn id_prefix(order: IndexOrder, prefix: &[Component]) -> Option<([u64; 2], usize)> {
    let max = match order {
        IndexOrder::Eavt | IndexOrder::Aevt => 2,
        IndexOrder::Avet => 1,
        _ => 0,
    };
    if prefix.is_empty() || prefix.len() > max {
        return None;
    }
    let mut key = [0u64; 2];
    for (i, c) in prefix.iter().enumerate() {
        match c {
            Component::Entity(id) => key[i] = *id,
            Component::Value(_) => return None,
        }
    }
    Some((key, prefix.len()))
}

/// The prefixes as id pairs, when they are EAVT or AEVT prefixes of at most two ids.
fn id_keys(order: IndexOrder, prefixes: &[Vec<Component>]) -> Option<Vec<[u64; 2]>> {
    if !matches!(order, IndexOrder::Eavt | IndexOrder::Aevt) {
        return None;
    }
    prefixes.first()?;
    prefixes
        .iter()
        .map(|p| id_prefix(order, p).map(|(key, _)| key))
        .collect()
}

/// Whether `v` sorts before the range that starts at `start`.
fn before_start(v: &Value, start: Bound<&Value>) -> bool {
    match start {
        Bound::Included(s) => v < s,
        Bound::Excluded(s) => v <= s,
        Bound::Unbounded => false,
    }
}

/// Whether `v` sorts before the end of the range.
fn before_end(v: &Value, end: Bound<&Value>) -> bool {
    match end {
        Bound::Included(e) => v <= e,
        Bound::Excluded(e) => v < e,
        Bound::Unbounded => true,
    }
}

impl Db {
    /// Run a query with this database as its first input (`$`) and `args` as the rest.
    pub fn q(
        &self,
        query: &str,
        args: &[vev_core::Edn],
    ) -> Result<vev_query::QueryResult, vev_query::QueryError> {
        let prepared = vev_query::Query::parse(query)?;
        self.q_prepared(&prepared, args, &vev_query::QueryOptions::default())
    }

    /// Run a prepared query with this database as `$` and `args` as the remaining inputs.
    pub fn q_prepared(
        &self,
        query: &vev_query::Query,
        args: &[vev_core::Edn],
        opts: &vev_query::QueryOptions,
    ) -> Result<vev_query::QueryResult, vev_query::QueryError> {
        let mut inputs = Vec::with_capacity(args.len() + 1);
        inputs.push(vev_query::Input::Db(self));
        inputs.extend(args.iter().map(vev_query::Input::Edn));
        query.run(&inputs, opts)
    }

    /// Pull `pattern` (EDN text) for entity `e`.
    pub fn pull(&self, pattern: &str, e: EntityId) -> Result<vev_core::Edn, vev_query::QueryError> {
        let pattern = vev_datalog::parse_pull(pattern)?;
        Ok(vev_query::pull(self, &pattern, e)?)
    }
}
