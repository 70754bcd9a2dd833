//! `Db`: an immutable database value and its time-travel views.
//!
//! A `Db` is a shared `State` (the current covering indexes, the retired-datom indexes that
//! hold history, the log and the schema) plus a `View` that filters it (as-of, since,
//! history). Cloning a `Db` is two reference-count increments, and a `Db` never changes: the
//! transactor builds the next `State` by path-copying only what a transaction touches.
//!
//! History is kept the way Datomic keeps it: the current indexes hold only datoms that are
//! true now; when a datom is retracted, its assertion and the retraction move to the retired
//! indexes. A fact `(e a v)` is true as of `t` when its latest operation with tx ≤ t, across
//! both, is an assertion. Every index order ends with tx, so the operations on one fact are
//! adjacent and the as-of view is a single merging pass over two ranges.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

use vev_core::ids::{self, BasisT, EntityId};
use vev_core::schema::{sys, Schema};
use vev_core::{Attribute, Component, Datom, IndexOrder, Keyword, StorageError, Value};

use crate::indexes::Indexes;
use crate::tree::{Iter, Tree};

/// Everything a database value holds. Shared between the `Db` views of one basis.
#[derive(Clone)]
pub(crate) struct State {
    pub current: Indexes,
    pub retired: Indexes,
    /// The log's tail: the datoms of the transactions after `log_stored`, in log order
    /// (all of them when nothing is stored). The rest of the log is in the store's log
    /// records, which `tx_range` reads; the log is not kept twice (see `log.rs`).
    pub log: Tree,
    /// `Some(t)`: the transactions 1 to t are left to the store's log (a checkpoint covered
    /// them, or the database was opened from a root at t) and t 0 is the bootstrap's; `None`:
    /// the tail holds the whole log from t 0 (a database in memory, or a file's before its
    /// first checkpoint).
    pub log_stored: Option<BasisT>,
    pub schema: Arc<Schema>,
    pub basis_t: BasisT,
    /// The next counter of the user partition.
    pub next_user: u64,
    /// The `:db/txInstant` of the latest transaction, in milliseconds.
    pub last_instant: i64,
    /// Where persisted subtrees load from (none for a database that lives only in memory).
    pub segments: Option<Arc<crate::segment::SegmentCache>>,
    /// The full-text index.
    pub fulltext: crate::fulltext::FtState,
    /// Whether to free the trees on the reclaiming thread when the last holder drops this
    /// state (`State::free_beside`).
    pub free_beside: FreeBeside,
}

/// Set on a state when a large transaction was applied to it: its successor copied many of
/// its nodes, which then only this state holds, and freeing them is work proportional to the
/// transaction. A clone starts unset.
#[derive(Default)]
pub(crate) struct FreeBeside(AtomicBool);

impl Clone for FreeBeside {
    fn clone(&self) -> FreeBeside {
        FreeBeside::default()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        if self.free_beside.0.load(AtomicOrdering::Relaxed) {
            let trees = (
                std::mem::replace(&mut self.current, Indexes::new()),
                std::mem::replace(&mut self.retired, Indexes::new()),
                std::mem::replace(&mut self.log, Tree::new(IndexOrder::Log)),
            );
            vev_core::par::drop_beside(trees);
        }
    }
}

impl State {
    /// Have the trees freed on the reclaiming thread (`vev_core::par::drop_beside`) when the
    /// last holder of this state drops it: a transaction report's db-before, say, after a
    /// large transaction, which a caller then does not wait to free.
    pub(crate) fn free_beside(&self) {
        self.free_beside.0.store(true, AtomicOrdering::Relaxed);
    }

    /// The eight index trees, in the order the root record stores them: current EAVT, AEVT,
    /// AVET, VAET, then the retired datoms' four. (The log is not among them: its stored
    /// part is the store's log records.)
    pub(crate) fn trees(&self) -> [&Tree; 8] {
        let (c, r) = (&self.current, &self.retired);
        [
            &c.eavt, &c.aevt, &c.avet, &c.vaet, &r.eavt, &r.aevt, &r.avet, &r.vaet,
        ]
    }

    /// The same state with other index trees (in `trees` order), reading segments through
    /// `segments`, and the log's tail after `log_stored` (the log records up to it are in
    /// the store `segments` reads from).
    pub(crate) fn with_trees(
        &self,
        trees: [Tree; 8],
        segments: Option<Arc<crate::segment::SegmentCache>>,
        log_stored: Option<BasisT>,
    ) -> State {
        let [ce, ca, cv, cr, re, ra, rv, rr] = trees;
        let log = match log_stored {
            Some(t) => crate::log::tail_after(&self.log, t),
            None => self.log.clone(),
        };
        State {
            current: Indexes {
                eavt: ce,
                aevt: ca,
                avet: cv,
                vaet: cr,
            },
            retired: Indexes {
                eavt: re,
                aevt: ra,
                avet: rv,
                vaet: rr,
            },
            log,
            log_stored: log_stored.max(self.log_stored),
            schema: self.schema.clone(),
            basis_t: self.basis_t,
            next_user: self.next_user,
            last_instant: self.last_instant,
            segments,
            fulltext: self.fulltext.clone(),
            free_beside: FreeBeside::default(),
        }
    }
}

/// Which datoms of the state a `Db` shows. The default shows the current facts as of the
/// basis-t; [`Db::as_of`], [`Db::since`] and [`Db::history`] narrow or widen it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct View {
    /// Show the database as it was at this basis-t: datoms of later transactions are
    /// hidden, and facts they retracted are shown again.
    pub as_of: Option<BasisT>,
    /// Show only datoms of transactions after this basis-t.
    pub since: Option<BasisT>,
    /// Show every assertion and retraction (datoms with `added` false included) instead of
    /// the facts true at the view's basis.
    pub history: bool,
}

impl View {
    fn is_current(&self) -> bool {
        self.as_of.is_none() && self.since.is_none() && !self.history
    }
}

/// An immutable database value. Cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Db {
    pub(crate) state: Arc<State>,
    pub(crate) view: View,
    /// A storage failure met while making this view (resolving an instant to a basis-t):
    /// every read of the view reports it.
    pub(crate) failed: Option<Arc<StorageError>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("basis_t", &self.state.basis_t)
            .field("datoms", &self.state.current.eavt.len())
            .field("view", &self.view)
            .finish()
    }
}

/// A point in time for `as_of` and `since`: a basis-t, a transaction id, or an instant.
/// `TimePoint::parse` and `TimePoint::from_long` read one from text or a number (module
/// `time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimePoint {
    /// A basis-t: the t of a transaction.
    T(BasisT),
    /// A transaction id (the entity id of a transaction, which `?tx` binds to); it stands
    /// for that transaction's t.
    Tx(EntityId),
    /// Milliseconds since the Unix epoch.
    Instant(i64),
}

impl From<BasisT> for TimePoint {
    fn from(t: BasisT) -> TimePoint {
        TimePoint::T(t)
    }
}

impl Db {
    /// An empty database: the system schema, at basis-t 0.
    pub fn empty() -> Db {
        crate::bootstrap::empty_db()
    }

    pub(crate) fn from_state(state: State) -> Db {
        Db {
            state: Arc::new(state),
            view: View::default(),
            failed: None,
        }
    }

    /// The t of the latest transaction in this value (0 for an empty database). A view
    /// does not change it: `as_of(5).basis_t()` is still the latest t.
    pub fn basis_t(&self) -> BasisT {
        self.state.basis_t
    }

    pub(crate) fn is_current_view(&self) -> bool {
        self.view.is_current()
    }

    /// The view this value applies.
    pub fn view(&self) -> View {
        self.view
    }

    /// The idents and installed attributes as of `basis_t`, whatever the view.
    pub fn schema(&self) -> &Schema {
        &self.state.schema
    }

    /// The installed attribute whose ident is `ident`; `None` for an unknown ident and for
    /// an ident that names no attribute (such as `:db.cardinality/one`).
    pub fn attribute(&self, ident: &Keyword) -> Option<&Arc<Attribute>> {
        self.state.schema.attribute_by_ident(ident)
    }

    /// The entity id that `ident` names (through `:db/ident`), if any.
    pub fn entid(&self, ident: &Keyword) -> Option<EntityId> {
        self.state.schema.entid(ident)
    }

    /// The `:db/ident` of entity `e`, if it has one.
    pub fn ident(&self, e: EntityId) -> Option<&Keyword> {
        self.state.schema.ident(e)
    }

    /// The `:db/txInstant` of the latest transaction.
    pub fn last_instant(&self) -> i64 {
        self.state.last_instant
    }

    /// Resolve a time point to a basis-t. A transaction id given as `T` (a plain number
    /// through `From<u64>`) is read as its t too, as Datomic's `as-of` does. An instant is
    /// looked up in the AVET index, which may read storage.
    pub fn t_of(&self, point: TimePoint) -> Result<BasisT, StorageError> {
        match point {
            TimePoint::T(t) => Ok(ids::t_of(t)),
            TimePoint::Tx(tx) => Ok(ids::t_of(tx)),
            TimePoint::Instant(ms) => {
                let mark = self.storage_mark();
                let t = self.t_at_instant(ms);
                self.storage_check(mark).map(|()| t)
            }
        }
    }

    /// The latest basis-t whose transaction instant is at or before `ms`.
    pub(crate) fn t_at_instant(&self, ms: i64) -> BasisT {
        let tx_instant = Component::Entity(sys::TX_INSTANT);
        let mut best = 0;
        self.state
            .current
            .avet
            .iter_from(|d| {
                IndexOrder::Avet.cmp_prefix(d, std::slice::from_ref(&tx_instant)) == Ordering::Less
            })
            .for_each_ref(|d| {
                if d.a != sys::TX_INSTANT || !matches!(d.v, Value::Instant(x) if x <= ms) {
                    return false;
                }
                best = best.max(ids::t_of(d.e));
                true
            });
        best
    }

    /// The database as of a point in time: only what was true then. When an instant cannot
    /// be resolved (a storage failure), every read of the returned view reports the failure.
    pub fn as_of(&self, point: impl Into<TimePoint>) -> Db {
        let (t, failed) = self.resolve(point.into());
        let as_of = Some(self.view.as_of.map_or(t, |old| old.min(t)));
        self.with_view(View { as_of, ..self.view }, failed)
    }

    /// The database since a point in time: only datoms added after it (failures as `as_of`).
    pub fn since(&self, point: impl Into<TimePoint>) -> Db {
        let (t, failed) = self.resolve(point.into());
        let since = Some(self.view.since.map_or(t, |old| old.max(t)));
        self.with_view(View { since, ..self.view }, failed)
    }

    /// Every assertion and retraction ever made (filtered by as-of and since, if set).
    pub fn history(&self) -> Db {
        self.with_view(
            View {
                history: true,
                ..self.view
            },
            None,
        )
    }

    /// `t_of`, with a failure kept for the view instead of returned.
    fn resolve(&self, point: TimePoint) -> (BasisT, Option<Arc<StorageError>>) {
        match self.t_of(point) {
            Ok(t) => (t, None),
            Err(e) => (0, Some(Arc::new(e))),
        }
    }

    /// The same state through another view; a failure of this view carries over.
    fn with_view(&self, view: View, failed: Option<Arc<StorageError>>) -> Db {
        Db {
            state: self.state.clone(),
            view,
            failed: failed.or_else(|| self.failed.clone()),
        }
    }

    /// Whether both values share one state (the same database after the same
    /// transactions, and no checkpoint or catch-up in between), whatever their views.
    /// A cheap pointer comparison: two values of equal content made apart are not
    /// identical.
    pub fn same_state(&self, other: &Db) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// `current`, keeping this value (and so its unshared nodes) when it has no view filter.
    pub(crate) fn into_current(self) -> Db {
        if self.view.is_current() {
            self
        } else {
            self.current()
        }
    }

    /// The same state without any view filter.
    pub fn current(&self) -> Db {
        self.with_view(View::default(), None)
    }

    /// The datoms of an index whose leading components equal `prefix` (index order
    /// positions: `[e a v tx]` for EAVT, `[a v e tx]` for AVET, ...). A storage failure
    /// ends the scan with an `Err` item.
    pub fn datoms(&self, order: IndexOrder, prefix: &[Component]) -> Datoms {
        self.checked_scan(|| Box::new(self.datoms_unchecked(order, prefix)))
    }

    /// `datoms` without the storage checks, for the transactor, replay and the query engine:
    /// their callers take a mark before and check once at the end (a failed load shows as
    /// missing datoms).
    pub(crate) fn datoms_unchecked(
        &self,
        order: IndexOrder,
        prefix: &[Component],
    ) -> impl Iterator<Item = Datom> + Send + 'static {
        let prefix_owned: Vec<Component> = prefix.to_vec();
        let stop = prefix_owned.clone();
        self.scan(order, move |d| {
            order.cmp_prefix(d, &prefix_owned) == Ordering::Less
        })
        .take_while(move |d| order.cmp_prefix(d, &stop) == Ordering::Equal)
    }

    /// A `Datoms` over the scan `start` makes, checked for storage failures from before the
    /// scan starts (starting it loads the path to its first datom).
    fn checked_scan(
        &self,
        start: impl FnOnce() -> Box<dyn Iterator<Item = Datom> + Send>,
    ) -> Datoms {
        let mark = self.storage_mark();
        let inner = start();
        Datoms {
            failed: self.storage_check(mark).err(),
            inner,
            check: self.state.segments.clone().map(|c| (c, mark)),
            done: false,
        }
    }

    /// The datoms `datoms(order, prefix)` yields, lent a batch at a time (see
    /// `DatomBatches`).
    pub fn datom_batches(&self, order: IndexOrder, prefix: &[Component]) -> DatomBatches {
        let mark = self.storage_mark();
        let prefix_owned: Vec<Component> = prefix.to_vec();
        let start = prefix_owned.clone();
        let below = move |d: &Datom| order.cmp_prefix(d, &start) == Ordering::Less;
        let inner = if self.view.is_current() {
            let tree = self.state.current.tree(order);
            let hi = tree.rank(|d| order.cmp_prefix(d, prefix) != Ordering::Greater);
            let lo = tree.rank(|d| order.cmp_prefix(d, prefix) == Ordering::Less);
            Batches::InPlace(tree.iter_from(below), hi - lo)
        } else {
            Batches::Owned(Box::new(self.scan(order, below)))
        };
        DatomBatches {
            inner,
            order,
            prefix: prefix_owned,
            failed: self.storage_check(mark).err(),
            check: self.state.segments.clone().map(|c| (c, mark)),
            done: false,
        }
    }

    /// `datom_batches` cut into up to `parts` scans of consecutive ranges, for readers on
    /// several threads: together they lend exactly the datoms `datom_batches` does, each
    /// range in index order. The ranges are cut at entity ids, so only where the component
    /// after `prefix` is an entity (EAVT from its start, AEVT after its attribute) on a
    /// database without a view filter; anything else, and a range too short to be worth
    /// cutting (under 16,384 datoms a part), is one scan.
    pub fn datom_batches_split(
        &self,
        order: IndexOrder,
        prefix: &[Component],
        parts: usize,
    ) -> Vec<DatomBatches> {
        let by_entity = matches!(
            (order, prefix.len()),
            (IndexOrder::Eavt, 0) | (IndexOrder::Aevt, 1)
        );
        if parts < 2 || !by_entity || !self.view.is_current() {
            return vec![self.datom_batches(order, prefix)];
        }
        let tree = self.state.current.tree(order);
        let at = |e: Option<EntityId>| -> Vec<Component> {
            let mut p = prefix.to_vec();
            p.extend(e.map(Component::Entity));
            p
        };
        // The number of the prefix's datoms before entity `e`, as a rank in the tree.
        let rank_before = |e: EntityId| {
            let p = at(Some(e));
            tree.rank(|d| order.cmp_prefix(d, &p) == Ordering::Less)
        };
        let lo = tree.rank(|d| order.cmp_prefix(d, prefix) == Ordering::Less);
        let hi = tree.rank(|d| order.cmp_prefix(d, prefix) != Ordering::Greater);
        // A part smaller than this is not worth a thread (nor the cuts' rank searches).
        const MIN_PART: usize = 16_384;
        let parts = parts.min((hi - lo) / MIN_PART);
        if parts < 2 {
            return vec![self.datom_batches(order, prefix)];
        }
        // Cut points: the least entity id at or past each share of the range.
        let mut cuts: Vec<(EntityId, usize)> = Vec::new();
        for k in 1..parts {
            let target = lo + (hi - lo) * k / parts;
            let (mut a, mut b) = (0u64, EntityId::MAX);
            while a < b {
                let mid = a + (b - a) / 2;
                if rank_before(mid) >= target {
                    b = mid;
                } else {
                    a = mid + 1;
                }
            }
            let r = rank_before(a);
            if r > lo && r < hi && cuts.last().is_none_or(|(e, _)| *e < a) {
                cuts.push((a, r));
            }
        }
        let mark = self.storage_mark();
        let failed = self.storage_check(mark).err();
        let mut out = Vec::with_capacity(cuts.len() + 1);
        let mut start: Option<(EntityId, usize)> = None;
        for end in cuts.iter().copied().map(Some).chain([None]) {
            let from = at(start.map(|(e, _)| e));
            let below = move |d: &Datom| order.cmp_prefix(d, &from) == Ordering::Less;
            let count = end.map_or(hi, |(_, r)| r) - start.map_or(lo, |(_, r)| r);
            out.push(DatomBatches {
                inner: Batches::InPlace(tree.iter_from(below), count),
                order,
                prefix: prefix.to_vec(),
                failed: failed.clone(),
                check: self.state.segments.clone().map(|c| (c, mark)),
                done: false,
            });
            start = end;
        }
        out
    }

    /// The entity whose value of attribute `a` is `v` (the first in AVET order): the holder
    /// of a unique value.
    pub fn entity_with_value(
        &self,
        a: EntityId,
        v: &Value,
    ) -> Result<Option<EntityId>, StorageError> {
        let mark = self.storage_mark();
        let found = self.holder_of(a, v);
        self.storage_check(mark).map(|()| found)
    }

    /// `entity_with_value` for the transactor, which checks for storage failures once at
    /// the end. On the current view, a walk down the index with no allocation.
    pub(crate) fn holder_of(&self, a: EntityId, v: &Value) -> Option<EntityId> {
        let mut found = None;
        self.visit_key(
            IndexOrder::Avet,
            &[Component::Entity(a), Component::Value(v.clone())],
            |d| d.a.cmp(&a).then_with(|| d.v.cmp(v)),
            &mut |d| {
                found = Some(d.e);
                false
            },
        );
        found
    }

    /// `holder_of` for many keys at once: `keys` sorted by attribute, then value, without
    /// repeats; the holder of each, in order. On the current view one walk down AVET serves
    /// them all, so keys near each other (a transaction's new identities, usually) share the
    /// nodes they pass instead of each descending from the root.
    pub(crate) fn holders_of(&self, keys: &[(EntityId, Value)]) -> Vec<Option<EntityId>> {
        let mut out = vec![None; keys.len()];
        if !self.view.is_current() {
            for (slot, (a, v)) in out.iter_mut().zip(keys) {
                *slot = self.holder_of(*a, v);
            }
            return out;
        }
        debug_assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "keys sorted, no repeats"
        );
        let key_cmp = |k: usize, d: &Datom| {
            let (a, v) = &keys[k];
            d.a.cmp(a).then_with(|| d.v.cmp(v))
        };
        self.state.current.tree(IndexOrder::Avet).visit_batch(
            keys.len(),
            &|k, d| key_cmp(k, d) == Ordering::Less,
            &|k, d| key_cmp(k, d) == Ordering::Greater,
            &mut |k, d| {
                out[k].get_or_insert(d.e);
                true
            },
        );
        out
    }

    /// Visit by reference the datoms of entity `e` and attribute `a`, until `visit` returns
    /// false (for the transactor, which checks for storage failures at the end).
    pub(crate) fn visit_entity_attr(
        &self,
        e: EntityId,
        a: EntityId,
        visit: &mut dyn FnMut(&Datom) -> bool,
    ) {
        self.visit_key(
            IndexOrder::Eavt,
            &[Component::Entity(e), Component::Entity(a)],
            |d| d.e.cmp(&e).then(d.a.cmp(&a)),
            visit,
        );
    }

    /// Visit the datoms `datoms(order, prefix)` yields, until `visit` returns false. `key`
    /// compares a datom with the prefix exactly as `order.cmp_prefix(d, prefix)` does, only
    /// faster: on the current view the walk uses it over the index nodes in place (no
    /// iterator, no reference counting, no allocation). A storage failure ends the walk
    /// early; the caller's storage check reports it.
    fn visit_key(
        &self,
        order: IndexOrder,
        prefix: &[Component],
        key: impl Fn(&Datom) -> Ordering,
        visit: &mut dyn FnMut(&Datom) -> bool,
    ) {
        if !self.view.is_current() {
            for d in self.datoms(order, prefix) {
                match d {
                    Ok(d) if visit(&d) => {}
                    _ => return,
                }
            }
            return;
        }
        self.state
            .current
            .tree(order)
            .visit_from(|d| key(d) == Ordering::Less, &mut |d| {
                debug_assert_eq!(key(d), order.cmp_prefix(d, prefix));
                key(d) == Ordering::Equal && visit(d)
            });
    }

    /// The datoms of an index from `start` on, to the end of the index.
    pub fn seek_datoms(&self, order: IndexOrder, start: &[Component]) -> Datoms {
        let start: Vec<Component> = start.to_vec();
        self.checked_scan(|| {
            Box::new(self.scan(order, move |d| {
                order.cmp_prefix(d, &start) == Ordering::Less
            }))
        })
    }

    /// AVET datoms of attribute `a` with `start <= v < end` (`None` for open ends).
    pub fn index_range(&self, a: EntityId, start: Option<Value>, end: Option<Value>) -> Datoms {
        self.checked_scan(|| Box::new(self.index_range_unchecked(a, start, end)))
    }

    /// `index_range` without the storage checks, for the query engine (which checks once
    /// at the end of a query).
    pub(crate) fn index_range_unchecked(
        &self,
        a: EntityId,
        start: Option<Value>,
        end: Option<Value>,
    ) -> impl Iterator<Item = Datom> + Send + 'static {
        self.scan(IndexOrder::Avet, move |d| {
            d.a < a || (d.a == a && start.as_ref().is_some_and(|s| d.v < *s))
        })
        .take_while(move |d| d.a == a && end.as_ref().is_none_or(|e| d.v < *e))
    }

    /// The number of datoms `datoms(order, prefix)` yields; logarithmic on the current view.
    pub fn count(&self, order: IndexOrder, prefix: &[Component]) -> Result<usize, StorageError> {
        if self.view.is_current() {
            let mark = self.storage_mark();
            let tree = self.state.current.tree(order);
            let hi = tree.rank(|d| order.cmp_prefix(d, prefix) != Ordering::Greater);
            let lo = tree.rank(|d| order.cmp_prefix(d, prefix) == Ordering::Less);
            return self.storage_check(mark).map(|()| hi - lo);
        }
        self.datoms(order, prefix)
            .try_fold(0, |n, d| d.map(|_| n + 1))
    }

    /// All datoms of one entity and attribute in this view (EAVT order).
    pub fn values(&self, e: EntityId, a: EntityId) -> Result<Vec<Value>, StorageError> {
        self.datoms(
            IndexOrder::Eavt,
            &[Component::Entity(e), Component::Entity(a)],
        )
        .map(|d| d.map(|d| d.v))
        .collect()
    }

    /// An ordered scan of this view from the first datom not `below`.
    fn scan(
        &self,
        order: IndexOrder,
        below: impl Fn(&Datom) -> bool + Clone + Send + 'static,
    ) -> ViewScan {
        let current = self.state.current.tree(order).iter_from(below.clone());
        let view = self.view;
        if view.is_current() {
            return ViewScan::Current(current);
        }
        if view.as_of.is_none() && !view.history {
            return ViewScan::Since(current, view.since.unwrap_or(0));
        }
        let retired = self.state.retired.tree(order).iter_from(below);
        ViewScan::Merged(Box::new(Merged {
            order,
            view,
            current: current.peekable(),
            retired: retired.peekable(),
            pending: std::collections::VecDeque::new(),
        }))
    }
}

/// The datoms of an index scan. An owning iterator: it keeps the index nodes it needs alive.
///
/// A segment that fails to load would make the scan skip its datoms, so the iterator checks
/// the segment cache after each datom: a failure is delivered as an `Err` item, and then the
/// iterator ends. Every item before it is a datom the index holds, in order.
pub struct Datoms {
    inner: Box<dyn Iterator<Item = Datom> + Send>,
    /// The cache whose failures count, and the mark taken before the scan started.
    check: Option<(Arc<crate::segment::SegmentCache>, u64)>,
    /// A failure met while the scan started (or while its view was made).
    failed: Option<StorageError>,
    done: bool,
}

impl Iterator for Datoms {
    type Item = Result<Datom, StorageError>;

    fn next(&mut self) -> Option<Result<Datom, StorageError>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        let next = self.inner.next();
        if let Some((cache, mark)) = &self.check {
            if let Some(e) = cache.failure_since(*mark) {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.done = next.is_none();
        next.map(Ok)
    }
}

/// A scan that hands its datoms out by reference, a batch at a time (`Db::datom_batches`):
/// for bulk readers that copy fields out of each datom (the DuckDB extension's column scans)
/// and so need no owned datom per row. On a database without a view filter it walks the
/// index's leaves in place; through a view (as-of, since, history) it merges as `datoms`
/// does and lends each datom it made.
pub struct DatomBatches {
    inner: Batches,
    order: IndexOrder,
    prefix: Vec<Component>,
    /// The cache whose failures count, and the mark taken before the scan started.
    check: Option<(Arc<crate::segment::SegmentCache>, u64)>,
    failed: Option<StorageError>,
    done: bool,
}

enum Batches {
    /// The index's own datoms, and how many of them the prefix still covers (counted up
    /// front from the tree's ranks, so no datom is compared with the prefix).
    InPlace(Iter, usize),
    Owned(Box<dyn Iterator<Item = Datom> + Send>),
}

impl DatomBatches {
    /// Visit the next datoms, at most `max`; returns how many (0 once the scan is done). A
    /// storage failure met during the batch is returned instead, and ends the scan: the
    /// datoms `f` saw in that batch may be incomplete.
    pub fn next_batch(
        &mut self,
        max: usize,
        mut f: impl FnMut(&Datom),
    ) -> Result<usize, StorageError> {
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Err(e);
        }
        if self.done {
            return Ok(0);
        }
        let (order, prefix) = (self.order, &self.prefix);
        let mut taken = 0;
        let mut past_end = false;
        let mut take = |d: &Datom| {
            if order.cmp_prefix(d, prefix) != Ordering::Equal {
                past_end = true;
                return false;
            }
            f(d);
            taken += 1;
            true
        };
        match &mut self.inner {
            Batches::InPlace(it, left) => {
                let want = max.min(*left);
                let visited = it.visit(want, |d| {
                    f(d);
                    true
                });
                taken = visited;
                *left -= visited;
                past_end = *left == 0 || visited < want;
            }
            Batches::Owned(it) => {
                for _ in 0..max {
                    let Some(d) = it.next() else {
                        past_end = true;
                        break;
                    };
                    if !take(&d) {
                        break;
                    }
                }
            }
        }
        if let Some((cache, mark)) = &self.check {
            if let Some(e) = cache.failure_since(*mark) {
                self.done = true;
                return Err(e);
            }
        }
        self.done = past_end;
        Ok(taken)
    }
}

enum ViewScan {
    Current(Iter),
    Since(Iter, BasisT),
    Merged(Box<Merged>),
}

impl Iterator for ViewScan {
    type Item = Datom;

    fn next(&mut self) -> Option<Datom> {
        match self {
            ViewScan::Current(it) => it.next(),
            ViewScan::Since(it, t) => it.find(|d| ids::t_of(d.tx) > *t),
            ViewScan::Merged(m) => m.next(),
        }
    }
}

/// Merges the current and retired indexes in one order, grouping the operations on each fact.
struct Merged {
    order: IndexOrder,
    view: View,
    current: std::iter::Peekable<Iter>,
    retired: std::iter::Peekable<Iter>,
    pending: std::collections::VecDeque<Datom>,
}

impl Merged {
    /// Whether the next datom in order comes from the current index (ties go to current).
    fn current_first(&mut self) -> bool {
        match (self.current.peek(), self.retired.peek()) {
            (Some(c), Some(r)) => self.order.cmp(c, r) != Ordering::Greater,
            (current, _) => current.is_some(),
        }
    }

    fn next_raw(&mut self) -> Option<Datom> {
        if self.current_first() {
            self.current.next()
        } else {
            self.retired.next()
        }
    }

    fn peek_raw(&mut self) -> Option<&Datom> {
        if self.current_first() {
            self.current.peek()
        } else {
            self.retired.peek()
        }
    }

    /// All operations on the next fact, oldest first.
    fn next_group(&mut self) -> Option<Vec<Datom>> {
        let first = self.next_raw()?;
        let mut group = vec![first];
        while let Some(d) = self.peek_raw() {
            let g = &group[0];
            if d.e == g.e && d.a == g.a && d.v == g.v {
                let d = self.next_raw()?;
                group.push(d);
            } else {
                break;
            }
        }
        Some(group)
    }
}

impl Iterator for Merged {
    type Item = Datom;

    fn next(&mut self) -> Option<Datom> {
        loop {
            if let Some(d) = self.pending.pop_front() {
                return Some(d);
            }
            let group = self.next_group()?;
            let as_of = self.view.as_of.unwrap_or(u64::MAX);
            let since = self.view.since;
            let visible = |d: &Datom| {
                let t = ids::t_of(d.tx);
                t <= as_of && since.is_none_or(|s| t > s)
            };
            if self.view.history {
                self.pending.extend(group.into_iter().filter(visible));
                continue;
            }
            let last = group
                .into_iter()
                .filter(|d| ids::t_of(d.tx) <= as_of)
                .last();
            if let Some(d) = last {
                if d.added && visible(&d) {
                    return Some(d);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `holders_of` finds what `holder_of` finds for every key: held and missing values,
    /// keys next to each other and far apart, two attributes, changes still pending in the
    /// trees (small transactions) and in their nodes (one large one), and on an as-of view.
    #[test]
    fn holders_of_agrees_with_one_lookup_per_key() {
        let mut db = Db::empty();
        let run = |db: &Db, text: String| {
            let ops: Vec<_> = vev_core::parse_tx(&text)
                .unwrap()
                .into_iter()
                .map(|s| s.op)
                .collect();
            let ctx = crate::TxContext {
                functions: &crate::tx::NoFunctions,
                now_ms: 1_000,
                speculative: false,
            };
            crate::transact(db, &ops, &ctx).unwrap().db_after
        };
        db = run(&db, "[{:db/ident :k :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
              {:db/ident :n :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/value}]".into());
        let people = |from: u64, to: u64| {
            let maps: Vec<String> = (from..to)
                .map(|i| format!("{{:k \"key-{i}-of-a-longer-name\" :n {}}}", i * 3))
                .collect();
            format!("[{}]", maps.join(" "))
        };
        db = run(&db, people(0, 3000));
        let as_of = db.basis_t();
        for i in 0..20 {
            db = run(&db, people(3000 + i, 3001 + i));
        }
        let k = db
            .schema()
            .attribute_by_ident(&Keyword::new("k"))
            .unwrap()
            .id;
        let n = db
            .schema()
            .attribute_by_ident(&Keyword::new("n"))
            .unwrap()
            .id;
        let mut keys: Vec<(EntityId, Value)> = (0..3100u64)
            .step_by(7)
            .flat_map(|i| {
                [
                    (k, Value::string(&format!("key-{i}-of-a-longer-name"))),
                    (n, Value::Long(i as i64 * 3 + i as i64 % 2)),
                ]
            })
            .collect();
        keys.sort();
        for view in [db.clone(), db.as_of(as_of)] {
            let batch = view.holders_of(&keys);
            let one_by_one: Vec<_> = keys.iter().map(|(a, v)| view.holder_of(*a, v)).collect();
            assert_eq!(batch, one_by_one);
            assert!(batch.iter().filter(|h| h.is_some()).count() > 300);
            assert!(batch.iter().filter(|h| h.is_none()).count() > 200);
        }
    }
}
