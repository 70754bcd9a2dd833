//! The transactor: from transaction data to the next database value.
//!
//! A transaction runs in five stages, each of which exists because the next one needs its
//! output to be simpler:
//!
//! 1. **Expand** (`expand.rs`): map forms, nested maps, reverse keys, collections of values
//!    and registered transaction functions become flat terms (`add`, `retract`,
//!    `retractEntity`, `cas`) whose attributes are resolved and whose values are typed by the
//!    attribute's value type. Idents and lookup refs resolve against db-before, as Datomic's
//!    do; tempids stay symbolic.
//! 2. **Resolve tempids** (`resolve.rs`): tempids that assert a `:db.unique/identity` value
//!    already held in db-before upsert to that entity (conflicting upserts are an error);
//!    tempids that share a new identity value unify; the rest get fresh ids in order of
//!    first appearance; `"datomic.tx"` becomes the transaction entity.
//! 3. **Generate datoms** (`generate.rs`): every term is checked against db-before, never
//!    against the transaction's own earlier effects: cardinality-one replacement retracts the
//!    old value, redundant assertions and retractions of absent facts are dropped, `cas`
//!    compares against db-before, two values for one cardinality-one attribute conflict,
//!    unique values are checked, composite tuples are recomputed for the entities touched.
//! 4. **Schema** (`schema.rs`): datoms on attribute entities are validated with Datomic's
//!    alteration rules and produce the next `Schema`.
//! 5. **Apply**: the datoms go to the current indexes, retracted facts move to the retired
//!    (history) indexes, the whole transaction goes to the log. Each index gets one sorted
//!    batch, so the cost is proportional to the datoms touched.

mod expand;
mod generate;
mod resolve;
pub(crate) mod schema;

pub(crate) use expand::coerce;

use std::cmp::Ordering;
use std::sync::Arc;

use vev_core::ids::{self, tx_id, EntityId};
use vev_core::schema::sys;
use vev_core::{Attribute, Datom, Edn, IndexOrder, Keyword, Schema, TempId, TxError, TxOp, Value};

use crate::db::{Db, State};
use crate::fulltext::FtState;
use crate::indexes::{apply_sorted, Indexes, SortThreads};
use crate::tree::{Bound, Change, Tree};

/// A report's tempids and the entities they resolved to (hashed with foldhash: a COPY's
/// report holds a million of them).
pub type TempIds = foldhash::HashMap<TempId, EntityId>;

/// Registered transaction functions, looked up by the ident at the head of a list form.
pub trait TxFunctions {
    /// Call function `name` with db-before and the form's arguments. `None` when no function
    /// of that name is registered.
    fn call(&self, name: &Keyword, db: &Db, args: &[Edn]) -> Option<Result<Vec<TxOp>, String>>;
}

/// No registered functions.
pub struct NoFunctions;

impl TxFunctions for NoFunctions {
    fn call(&self, _: &Keyword, _: &Db, _: &[Edn]) -> Option<Result<Vec<TxOp>, String>> {
        None
    }
}

/// Settings of one transaction.
pub struct TxContext<'a> {
    /// The transaction functions list forms may call (`&NoFunctions` for none); the
    /// built-in operations (`:db/add`, `:db/retract`, `:db/retractEntity`, `:db/cas`) need
    /// none.
    pub functions: &'a dyn TxFunctions,
    /// The wall clock, in milliseconds since the Unix epoch; the instant of the transaction is
    /// the later of this and the previous transaction's instant.
    pub now_ms: i64,
    /// The result is a speculative value (`with`), most likely read and dropped while the
    /// same operations are committed by another call: its index changes may stay pending in
    /// the trees up to a looser bound (`tree::Bound::Loose`) instead of paying for a merge
    /// into the shared nodes that the commit would pay again.
    pub speculative: bool,
}

/// What a successful transaction returns.
#[derive(Clone, Debug)]
pub struct TxReport {
    /// The database the transaction was checked against: the current state of the value
    /// given to `transact`, without its view.
    pub db_before: Db,
    /// The database with the transaction applied; its basis-t is the transaction's t.
    pub db_after: Db,
    /// The datoms the transaction added and retracted, its `:db/txInstant` first.
    pub tx_data: Vec<Datom>,
    /// Each tempid the transaction data named (a string, a negative number, or
    /// `"datomic.tx"` when used) and the entity id it resolved to: an existing entity
    /// through an upsert, or a new one.
    pub tempids: TempIds,
}

impl TxReport {
    /// The entity a string tempid resolved to.
    pub fn tempid(&self, name: &str) -> Option<EntityId> {
        let key = if name == "datomic.tx" {
            TempId::Tx
        } else {
            TempId::Str(Arc::from(name))
        };
        self.tempids.get(&key).copied()
    }

    /// The transaction entity.
    pub fn tx(&self) -> EntityId {
        tx_id(self.db_after.basis_t())
    }
}

/// An entity in a term (`Term`): resolved, or a tempid still to resolve.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TermEntity {
    Id(EntityId),
    Temp(TempId),
}

/// A value in a term (`Term`): typed, or a tempid (for ref attributes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TermValue {
    Val(Value),
    Temp(TempId),
}

#[derive(Clone, Debug)]
pub(crate) enum Term {
    Add {
        e: TermEntity,
        a: Arc<Attribute>,
        v: TermValue,
    },
    Retract {
        e: TermEntity,
        a: Arc<Attribute>,
        v: Option<TermValue>,
    },
    RetractEntity {
        e: TermEntity,
    },
    Cas {
        e: TermEntity,
        a: Arc<Attribute>,
        old: Option<TermValue>,
        new: TermValue,
    },
}

/// A transaction's terms in order, in one or more runs: the halves of an expansion on two
/// threads are not copied into one list (a large transaction's terms are hundreds of
/// megabytes).
#[derive(Debug)]
pub(crate) struct Terms(Vec<Vec<Term>>);

impl Terms {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Term> {
        self.0.iter().flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }
}

impl IntoIterator for Terms {
    type Item = Term;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<Term>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().flatten()
    }
}

/// Apply `ops` to `db` (its current state, whatever its view) and return the report.
pub fn transact(db: &Db, ops: &[TxOp], ctx: &TxContext<'_>) -> Result<TxReport, TxError> {
    let (before, after) = run(db.current(), ops, ctx, DbBefore::Keep, None, LogTail::Keep)?;
    Ok(TxReport {
        db_before: before.expect("kept"),
        db_after: after.db,
        tx_data: after.tx_data,
        tempids: after.tempids,
    })
}

/// What `transact_owned` returns: the report without db-before.
pub struct TxOutcome {
    /// The database with the transaction applied (`TxReport::db_after`).
    pub db: Db,
    /// The datoms added and retracted, its `:db/txInstant` first (`TxReport::tx_data`).
    pub tx_data: Vec<Datom>,
    /// Tempids and the entity ids they resolved to (`TxReport::tempids`).
    pub tempids: TempIds,
}

/// `transact` that consumes `db`. When nothing else holds `db`'s index nodes (as in a bulk
/// import that keeps only the latest value), the transaction updates them in place instead of
/// copying the paths it touches; the result is the same.
pub fn transact_owned(db: Db, ops: &[TxOp], ctx: &TxContext<'_>) -> Result<TxOutcome, TxError> {
    run(
        db.into_current(),
        ops,
        ctx,
        DbBefore::Consume,
        None,
        LogTail::Keep,
    )
    .map(|(_, after)| after)
}

/// A bulk import: transactions applied one after another to a database value that nothing
/// else holds (its index nodes are updated in place), with the AVET entries of attributes
/// that are not unique set aside and merged into AVET in large sorted batches.
///
/// Those entries are what makes a large import slow: the values of an attribute such as a
/// name or an amount land all over AVET, so each costs a walk down the tree, while EAVT, AEVT
/// and the log grow at a few places. The transactor never reads them: it looks up AVET only
/// for unique attributes (upserts, lookup refs, uniqueness checks). Two things can: a
/// transaction function (it gets db-before) and a schema alteration (making an attribute
/// unique checks its values). Before either, and at `finish`, the set-aside entries are
/// merged; between merges the value held here is not a complete database and is never
/// handed out.
pub struct Bulk {
    db: Db,
    /// AVET changes of non-unique attributes, in the order the transactions made them.
    avet: SetAside,
    /// Merge once `avet` holds this many changes (or a quarter of AVET's size, if more).
    merge_min: usize,
    /// Hand set-aside changes to a sorting thread in chunks of this many.
    sort_chunk: usize,
    /// `LogTail::Stored` when the caller stores every transaction's log record before the
    /// import's value is handed out (`log_in_store`): the value then keeps no log tail.
    log: LogTail,
}

/// What `Bulk::transact` returns: the report without any database value.
pub struct BulkTx {
    /// The datoms added and retracted, its `:db/txInstant` first (`TxReport::tx_data`).
    pub tx_data: Vec<Datom>,
    /// Tempids and the entity ids they resolved to (`TxReport::tempids`).
    pub tempids: TempIds,
}

/// Set-aside AVET changes are merged once there are this many, or a quarter of AVET's
/// size if more: memory stays bounded and each datom is merged a bounded number of times.
const BULK_MERGE_MIN: usize = 1 << 20;

impl Bulk {
    /// Start a bulk import on `db` (updated in place when nothing else holds its nodes).
    pub fn new(db: Db) -> Bulk {
        Bulk {
            db: db.into_current(),
            avet: SetAside::default(),
            merge_min: BULK_MERGE_MIN,
            sort_chunk: SORT_CHUNK,
            log: LogTail::Keep,
        }
    }

    /// The caller stores each transaction's log record in the database's store (the one
    /// its segment cache reads) before the finished database is used: the import then keeps
    /// no log tail in memory, and the finished database reads its log from the store.
    /// Without a segment cache there is no store, and this does nothing.
    pub fn log_in_store(mut self) -> Bulk {
        if self.db.segment_cache().is_some() {
            self.log = LogTail::Stored;
        }
        self
    }

    /// Sort set-aside AVET changes on threads of their own in chunks of `changes` (the
    /// default is 262,144), while the import goes on.
    pub fn sort_chunks_of(mut self, changes: usize) -> Bulk {
        self.sort_chunk = changes.max(1);
        self
    }

    /// Merge set-aside AVET changes once there are `changes` of them (or a quarter of AVET's
    /// size, if more); the default is about a million. Less memory, more merging.
    pub fn merge_at(mut self, changes: usize) -> Bulk {
        self.merge_min = changes.max(1);
        self
    }

    /// The basis of the last transaction applied.
    pub fn basis_t(&self) -> vev_core::ids::BasisT {
        self.db.basis_t()
    }

    /// The next counter of the user partition.
    pub fn next_user(&self) -> u64 {
        self.db.next_user()
    }

    /// Where the database's persisted index nodes load from, if anywhere.
    pub fn segment_cache(&self) -> Option<&Arc<crate::segment::SegmentCache>> {
        self.db.segment_cache()
    }

    /// Apply one transaction; the import goes on with the `Bulk` returned. On an error the
    /// import is over (the value it was building is consumed: the caller recovers what it
    /// committed elsewhere, e.g. from its log), so it cannot be continued by mistake.
    pub fn transact(
        mut self,
        ops: &[TxOp],
        ctx: &TxContext<'_>,
    ) -> Result<(Bulk, BulkTx), TxError> {
        if ops.iter().any(|op| matches!(op, TxOp::Call { .. })) {
            self.merge();
        }
        let before = std::mem::replace(&mut self.db, Db::empty());
        let (_, after) = run(
            before,
            ops,
            ctx,
            DbBefore::Consume,
            Some(&mut self.avet),
            self.log,
        )?;
        self.db = after.db;
        self.avet.sort_behind(self.sort_chunk);
        let merge_at = (self.db.state.current.avet.len() / 4).max(self.merge_min);
        if self.avet.len() >= merge_at {
            self.merge();
        }
        let done = BulkTx {
            tx_data: after.tx_data,
            tempids: after.tempids,
        };
        Ok((self, done))
    }

    /// The full-text entries of the transactions since the last call, as one entry to
    /// store with their log records (a bulk import writes one segment per write batch).
    pub fn take_fulltext(&mut self) -> Vec<crate::fulltext::NewEntry> {
        let db = std::mem::replace(&mut self.db, Db::empty());
        let (db, entries) = db.take_fulltext();
        self.db = db;
        entries
    }

    /// The database with everything applied.
    pub fn finish(mut self) -> Db {
        self.merge();
        self.db
    }

    fn merge(&mut self) {
        if self.avet.is_empty() {
            return;
        }
        let db = std::mem::replace(&mut self.db, Db::empty());
        self.db = merge_avet(db, &mut self.avet);
    }
}

/// AVET changes a bulk import sets aside (see `Bulk`), in the order its transactions made
/// them: chunks that threads of their own are sorting (oldest first), then the latest.
/// Sorting is most of a merge's cost, and this way it runs beside the import.
/// At most `SORTING_THREADS_MAX` chunks are sorting at once: handing over one more first
/// waits for the oldest, so a long import never has more threads than that running beside it.
#[derive(Default)]
pub(crate) struct SetAside {
    /// Chunks already sorted, oldest first.
    sorted: Vec<Vec<Change>>,
    /// Chunks still sorting on their threads, oldest first; all newer than `sorted`.
    sorting: std::collections::VecDeque<std::thread::JoinHandle<Vec<Change>>>,
    /// Changes in `sorted` and `sorting`.
    sorting_len: usize,
    latest: Vec<Change>,
}

/// Set-aside changes go to a sorting thread in chunks of this many (`Bulk::sort_chunks_of`).
const SORT_CHUNK: usize = 1 << 18;

/// At most this many sorting threads run beside a bulk import.
const SORTING_THREADS_MAX: usize = 2;

/// A sorting thread's run; a panic there is re-raised here, as if the sort had run inline.
fn join_sorted(handle: std::thread::JoinHandle<Vec<Change>>) -> Vec<Change> {
    handle
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

impl SetAside {
    fn len(&self) -> usize {
        self.sorting_len + self.latest.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hand the latest changes to a sorting thread once there are `chunk` of them.
    fn sort_behind(&mut self, chunk: usize) {
        if self.latest.len() < chunk {
            return;
        }
        if self.sorting.len() >= SORTING_THREADS_MAX {
            if let Some(oldest) = self.sorting.pop_front() {
                self.sorted.push(join_sorted(oldest));
            }
        }
        let mut chunk = std::mem::take(&mut self.latest);
        self.sorting_len += chunk.len();
        self.sorting.push_back(std::thread::spawn(move || {
            sort_last_wins(&mut chunk, SortThreads::One);
            chunk
        }));
    }

    /// Every set-aside change in AVET order, only the last change to each datom; none are
    /// left.
    fn take_sorted(&mut self) -> Vec<Change> {
        let mut runs = std::mem::take(&mut self.sorted);
        runs.extend(self.sorting.drain(..).map(join_sorted));
        self.sorting_len = 0;
        let mut latest = std::mem::take(&mut self.latest);
        if !latest.is_empty() {
            sort_last_wins(&mut latest, SortThreads::Two);
            runs.push(latest);
        }
        // Neighbours merge pairwise, level by level, so every run stays between the runs
        // before and after it: a later run's change to a datom replaces an earlier one's.
        while runs.len() > 1 {
            let mut next = Vec::with_capacity(runs.len().div_ceil(2));
            let mut runs_in_order = runs.into_iter();
            while let Some(earlier) = runs_in_order.next() {
                next.push(match runs_in_order.next() {
                    Some(later) => merge_later_wins(earlier, later),
                    None => earlier,
                });
            }
            runs = next;
        }
        runs.pop().unwrap_or_default()
    }
}

/// Sort changes into AVET order and keep only the last change to each datom (a datom may be
/// inserted by one transaction and removed by a later one).
fn sort_last_wins(changes: &mut Vec<Change>, threads: SortThreads) {
    let order = IndexOrder::Avet;
    crate::indexes::sort_avet_on(changes, threads);
    // Keep the last change to each datom, in place.
    let mut kept = 0;
    for i in 0..changes.len() {
        let same =
            kept > 0 && order.cmp(&changes[kept - 1].datom, &changes[i].datom) == Ordering::Equal;
        let at = if same { kept - 1 } else { kept };
        changes.swap(at, i);
        if !same {
            kept += 1;
        }
    }
    changes.truncate(kept);
}

/// Merge two runs sorted by `sort_last_wins`; on the same datom the later run's change counts.
fn merge_later_wins(earlier: Vec<Change>, later: Vec<Change>) -> Vec<Change> {
    let order = IndexOrder::Avet;
    let mut out = Vec::with_capacity(earlier.len() + later.len());
    let mut earlier = earlier.into_iter().peekable();
    let mut later = later.into_iter().peekable();
    loop {
        let ord = match (earlier.peek(), later.peek()) {
            (Some(a), Some(b)) => order.cmp(&a.datom, &b.datom),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return out,
        };
        match ord {
            Ordering::Less => out.extend(earlier.next()),
            Ordering::Greater => out.extend(later.next()),
            Ordering::Equal => {
                earlier.next();
                out.extend(later.next());
            }
        }
    }
}

/// Merge set-aside AVET changes into `db`'s current AVET.
fn merge_avet(db: Db, set_aside: &mut SetAside) -> Db {
    let changes = set_aside.take_sorted();
    let mut state = Arc::unwrap_or_clone(db.state);
    let avet = std::mem::replace(&mut state.current.avet, Tree::new(IndexOrder::Avet));
    state.current.avet = avet.apply_to_nodes(&changes);
    Db::from_state(state)
}

/// Whether `run` hands db-before back beside db-after (a clone that shares its nodes, so the
/// new value's trees are copied on write), or consumes it (so nodes nothing else shares are
/// updated in place).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum DbBefore {
    Keep,
    Consume,
}

/// Where a transaction's datoms go besides the indexes: into the database's log tail (`Keep`),
/// or nowhere, because the caller stores its log record before the database is used
/// (`Stored`: a durable bulk import; the tail is dropped and `log_stored` moves to the
/// transaction).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LogTail {
    Keep,
    Stored,
}

fn run(
    before: Db,
    ops: &[TxOp],
    ctx: &TxContext<'_>,
    db_before: DbBefore,
    mut defer_avet: Option<&mut SetAside>,
    log: LogTail,
) -> Result<(Option<Db>, TxOutcome), TxError> {
    let t = before.basis_t() + 1;
    let tx = tx_id(t);
    let terms = expand::expand(&before, ops, ctx.functions)?;
    let resolved = resolve::resolve(&before, terms, tx)?;
    let resolve::Resolved {
        terms,
        tempids,
        next_user,
    } = resolved;
    let generated = generate::generate(&before, &terms, tx)?;
    // A large transaction's terms (hundreds of megabytes for an import) are not held while
    // it is applied, and are freed beside it rather than before it.
    if terms.len() >= FREE_BESIDE_MIN {
        vev_core::par::drop_beside(terms);
    } else {
        drop(terms);
    }
    let instant = tx_instant(&before, &generated.datoms, tx, ctx.now_ms)?;
    let mut tx_data = generated.datoms;
    let instant_datom = match tx_data
        .iter()
        .position(|d| d.e == tx && d.a == sys::TX_INSTANT)
    {
        Some(pos) => tx_data.remove(pos),
        None => Datom::new(tx, sys::TX_INSTANT, Value::Instant(instant), tx, true),
    };
    tx_data.insert(0, instant_datom);
    // Altering an attribute may read its AVET entries: merge any that were set aside.
    let mut before = before;
    if let Some(pending) = defer_avet.as_deref_mut() {
        let schema = before.schema();
        if !pending.is_empty() && tx_data.iter().any(|d| schema.attribute(d.e).is_some()) {
            before = merge_avet(before, pending);
        }
    }
    let new_schema = schema::next_schema(&before, &tx_data)?;
    // Every check has passed: from here on nothing reads db-before but its schema.
    let schema_before = before.state.schema.clone();
    let kept = (db_before == DbBefore::Keep).then(|| before.clone());
    // The nodes a large transaction replaces are freed on the reclaiming thread once
    // db-before is dropped (by the caller that holds its report, typically).
    if tx_data.len() >= FREE_BESIDE_MIN {
        before.state.free_beside();
    }
    let mut state = Arc::unwrap_or_clone(before.state);
    state.free_beside = Default::default();
    state.next_user = next_user;
    if let Some(s) = new_schema {
        state.schema = Arc::new(s);
    }
    let bound = if ctx.speculative {
        Bound::Loose
    } else {
        Bound::Shared
    };
    apply(
        &mut state,
        &schema_before,
        &tx_data,
        &generated.retracted_tx,
        defer_avet.map(|s| &mut s.latest),
        log,
        bound,
    );
    state.basis_t = t;
    state.last_instant = instant;
    Ok((
        kept,
        TxOutcome {
            db: Db::from_state(state),
            tx_data,
            tempids,
        },
    ))
}

/// The transaction's instant: the one asserted on the transaction entity, or the clock.
fn tx_instant(before: &Db, datoms: &[Datom], tx: EntityId, now_ms: i64) -> Result<i64, TxError> {
    let previous = before.last_instant();
    let given = datoms
        .iter()
        .find(|d| d.e == tx && d.a == sys::TX_INSTANT && d.added);
    match given.map(|d| &d.v) {
        Some(Value::Instant(ms)) if *ms < previous => Err(TxError::InstantBackwards {
            instant: Edn::Inst(*ms),
            previous: Edn::Inst(previous),
        }),
        Some(Value::Instant(ms)) => Ok(*ms),
        _ => Ok(now_ms.max(previous)),
    }
}

/// Put the transaction's datoms into the indexes, the history and (`LogTail::Keep`) the log
/// tail. `retracted_tx` gives, for each retraction, the tx of the assertion it retracts.
pub(crate) fn apply(
    state: &mut State,
    schema_before: &Schema,
    tx_data: &[Datom],
    retracted_tx: &[EntityId],
    defer_avet: Option<&mut Vec<Change>>,
    log_tail: LogTail,
    bound: Bound,
) {
    let schema = state.schema.clone();
    // The full-text documents, found while db-before's trees are in `state` (an alteration
    // reads its attribute's values there); indexing them reads only the schema and segments.
    let ft_docs = tx_data.first().and_then(|d| {
        FtState::tx_docs(state, schema_before, tx_data).map(|docs| (ids::t_of(d.tx), docs))
    });
    let ft_docs = match ft_docs {
        Some((t, docs)) if docs.len() < FULLTEXT_BESIDE_MIN => {
            let ft = std::mem::take(&mut state.fulltext);
            state.fulltext = ft.apply_tx(docs, state, schema_before, tx_data, retracted_tx, t);
            None
        }
        beside => beside,
    };
    let take = |ix: &mut Indexes| std::mem::replace(ix, Indexes::new());
    let mut trees = Trees {
        current: take(&mut state.current),
        retired: take(&mut state.retired),
        log: std::mem::replace(&mut state.log, Tree::new(IndexOrder::Log)),
    };
    let indexes = |trees: &mut Trees| {
        trees.apply(
            &schema,
            schema_before,
            tx_data,
            retracted_tx,
            defer_avet,
            log_tail,
            bound,
        )
    };
    let log_stored = match ft_docs {
        // Many documents: indexed on another thread while the trees, out of `state`, change.
        Some((t, docs)) => {
            let ft = std::mem::take(&mut state.fulltext);
            let before = &*state;
            let (log_stored, ft) = vev_core::par::join(
                || indexes(&mut trees),
                || ft.apply_tx(docs, before, schema_before, tx_data, retracted_tx, t),
            );
            state.fulltext = ft;
            log_stored
        }
        None => indexes(&mut trees),
    };
    state.current = trees.current;
    state.retired = trees.retired;
    state.log = trees.log;
    if let Some(t) = log_stored {
        state.log_stored = Some(t);
    }
}

/// Datoms (or resolved terms) from which a transaction's garbage is freed on the reclaiming
/// thread (`vev_core::par::drop_beside`): the terms once generated, db-before's replaced
/// nodes once the report is dropped. Sending costs a few microseconds; freeing the nodes
/// 3,000 datoms replaced in a million-datom database took about 2 ms (perf, `vev-bench
/// scale`).
const FREE_BESIDE_MIN: usize = 1024;

/// Full-text documents in a transaction from which indexing them on a thread of its own
/// (beside the trees' changes) pays for starting it.
const FULLTEXT_BESIDE_MIN: usize = 256;

/// The trees a transaction changes, out of its `State` while they change.
struct Trees {
    current: Indexes,
    retired: Indexes,
    log: Tree,
}

impl Trees {
    /// Apply the transaction; `Some(t)`: the log's tail is left to the store from t.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        schema: &Schema,
        schema_before: &Schema,
        tx_data: &[Datom],
        retracted_tx: &[EntityId],
        defer_avet: Option<&mut Vec<Change>>,
        log_tail: LogTail,
        bound: Bound,
    ) -> Option<ids::BasisT> {
        let mut current = Vec::with_capacity(tx_data.len());
        let mut retired = Vec::new();
        let mut r = 0;
        for d in tx_data {
            if d.added {
                current.push(Change {
                    datom: d.clone(),
                    insert: true,
                });
                continue;
            }
            let asserted_tx = retracted_tx[r];
            r += 1;
            let assertion = Datom::new(d.e, d.a, d.v.clone(), asserted_tx, true);
            current.push(Change {
                datom: assertion.clone(),
                insert: false,
            });
            let keep_history = schema_before.attribute(d.a).is_none_or(|a| !a.no_history);
            if keep_history {
                retired.push(Change {
                    datom: assertion,
                    insert: true,
                });
                retired.push(Change {
                    datom: d.clone(),
                    insert: true,
                });
            }
        }
        let is_ref = |a: EntityId| schema.attribute(a).is_some_and(|x| x.is_ref());
        let take = |ix: &mut Indexes| std::mem::replace(ix, Indexes::new());
        let deferrable = |a: EntityId| schema.attribute(a).is_none_or(|x| x.unique.is_none());
        let log_tree = std::mem::replace(&mut self.log, Tree::new(IndexOrder::Log));
        let (kept_log, log_stored) = match (log_tail, tx_data.first()) {
            (LogTail::Keep, _) | (LogTail::Stored, None) => (Some(log_tree), None),
            // The store's log records hold it all: the tail is empty.
            (LogTail::Stored, Some(first)) => (None, Some(ids::t_of(first.tx))),
        };
        let indexes = || {
            self.current = take(&mut self.current).apply(
                current,
                is_ref,
                defer_avet.map(|d| (d, &deferrable as &dyn Fn(EntityId) -> bool)),
                bound,
            );
            if !retired.is_empty() {
                self.retired = take(&mut self.retired).apply(retired, is_ref, None, bound);
            }
        };
        self.log = match kept_log {
            // A large transaction's log tail is built beside its indexes.
            Some(tree) if tx_data.len() >= PARALLEL_LOG_MIN => {
                vev_core::par::join(indexes, || log_tail_with(tree, tx_data, bound)).1
            }
            Some(tree) => {
                indexes();
                log_tail_with(tree, tx_data, bound)
            }
            None => {
                indexes();
                Tree::new(IndexOrder::Log)
            }
        };
        log_stored
    }
}

/// Transactions with at least this many datoms build their log tail on a second thread.
const PARALLEL_LOG_MIN: usize = 32_768;

/// The log's tail with a transaction's datoms added.
fn log_tail_with(tree: Tree, tx_data: &[Datom], bound: Bound) -> Tree {
    let log = tx_data
        .iter()
        .map(|d| Change {
            datom: d.clone(),
            insert: true,
        })
        .collect();
    apply_sorted(tree, log, bound)
}

/// True when `e` is an id this database has allocated (or the transaction being built).
pub(crate) fn is_allocated(db: &Db, e: EntityId, tx: EntityId) -> bool {
    match ids::partition(e) {
        ids::PART_DB => db.ident(e).is_some(),
        ids::PART_TX => e <= tx,
        ids::PART_USER => {
            let n = e & ((1 << ids::PARTITION_SHIFT) - 1);
            n > 0 && n < db.state.next_user
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(e: u64, v: i64, insert: bool) -> Change {
        Change {
            datom: Datom::new(e, 100, Value::Long(v), tx_id(1), true),
            insert,
        }
    }

    /// However many chunks an import sets aside, at most `SORTING_THREADS_MAX` sort at
    /// once, and the runs still come out in order with the last change to a datom winning.
    #[test]
    fn set_aside_sorts_on_a_bounded_number_of_threads() {
        let mut set_aside = SetAside::default();
        for i in 0..20u64 {
            // Entity i asserts value i, then retracts the value entity i - 1 asserted.
            set_aside.latest.push(change(i, i as i64, true));
            if i > 0 {
                set_aside.latest.push(change(i - 1, i as i64 - 1, false));
            }
            set_aside.sort_behind(2);
            assert!(set_aside.sorting.len() <= SORTING_THREADS_MAX);
        }
        assert!(
            !set_aside.sorted.is_empty(),
            "chunks beyond the bound were joined"
        );
        let sorted = set_aside.take_sorted();
        let inserted: Vec<u64> = sorted
            .iter()
            .filter(|c| c.insert)
            .map(|c| c.datom.e)
            .collect();
        assert_eq!(inserted, vec![19], "{sorted:?}");
        assert_eq!(sorted.len(), 20);
        assert!(set_aside.is_empty());
    }
}
