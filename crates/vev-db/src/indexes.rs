//! The four covering indexes of one set of datoms, and how a batch of changes reaches them:
//! sorted once in EAVT order, then re-sorted in place for AEVT (dealt into runs per
//! attribute) and AVET (through `Value::sort_key`), and applied to each tree in turn; a
//! batch of a thousand changes or more goes to AVET on a second thread (with a copy of its
//! changes) while EAVT, AEVT and VAET take it on this one.

use std::cmp::Ordering;

use vev_core::ids::EntityId;
use vev_core::IndexOrder;

use crate::tree::{Bound, Change, Tree};

/// The four covering indexes of one set of datoms.
#[derive(Clone)]
pub(crate) struct Indexes {
    pub eavt: Tree,
    pub aevt: Tree,
    pub avet: Tree,
    pub vaet: Tree,
}

/// Where `Indexes::apply` sets aside AVET changes, and of which attributes (see `tx::Bulk`).
pub type DeferAvet<'a> = (&'a mut Vec<Change>, &'a dyn Fn(EntityId) -> bool);

impl Indexes {
    pub fn new() -> Indexes {
        Indexes {
            eavt: Tree::new(IndexOrder::Eavt),
            aevt: Tree::new(IndexOrder::Aevt),
            avet: Tree::new(IndexOrder::Avet),
            vaet: Tree::new(IndexOrder::Vaet),
        }
    }

    pub fn tree(&self, order: IndexOrder) -> &Tree {
        match order {
            IndexOrder::Eavt | IndexOrder::Log => &self.eavt,
            IndexOrder::Aevt => &self.aevt,
            IndexOrder::Avet => &self.avet,
            IndexOrder::Vaet => &self.vaet,
        }
    }

    /// Apply inserts and removals that are exact (every insert absent, every removal present,
    /// as a transaction computes them from db-before; see `Tree::apply_through_pending`); `is_ref` says
    /// which attributes go to VAET. Consumes the indexes: nodes no other `Db` shares are
    /// updated in place.
    ///
    /// The changes are sorted once, in EAVT order (with full datom comparisons); each other
    /// order is then a stable sort of that on the components it puts first, since ties keep
    /// EAVT's order of the rest: AEVT sorts by attribute alone (integers), AVET sorts the
    /// AEVT order by attribute then value, VAET sorts by value then attribute.
    ///
    /// `defer`: a list and a predicate on attributes; the AVET changes of attributes it
    /// accepts go to the list instead of the tree (see `tx::Bulk`).
    pub fn apply(
        self,
        mut changes: Vec<Change>,
        is_ref: impl Fn(EntityId) -> bool,
        defer: Option<DeferAvet<'_>>,
        bound: Bound,
    ) -> Indexes {
        let eavt_order = IndexOrder::Eavt;
        changes.sort_by(|x, y| eavt_order.cmp(&x.datom, &y.datom));
        changes.dedup_by(|x, y| eavt_order.cmp(&x.datom, &y.datom) == Ordering::Equal);
        let mut vaet: Vec<Change> = changes
            .iter()
            .filter(|c| is_ref(c.datom.a))
            .cloned()
            .collect();
        vaet.sort_by(|x, y| (x.datom.v.cmp(&y.datom.v)).then(x.datom.a.cmp(&y.datom.a)));
        debug_assert!(sorted_in(IndexOrder::Vaet, &vaet));
        if (ORDERS_BESIDE_MIN..ORDERS_BESIDE_MAX).contains(&changes.len()) {
            self.apply_on_two_threads(changes, vaet, defer, bound)
        } else {
            self.apply_in_turn(changes, vaet, defer, bound)
        }
    }

    /// `apply` of EAVT-sorted `changes` (and VAET's, sorted) to one tree after another.
    fn apply_in_turn(
        self,
        mut changes: Vec<Change>,
        vaet: Vec<Change>,
        defer: Option<DeferAvet<'_>>,
        bound: Bound,
    ) -> Indexes {
        // One list of changes, re-sorted in place for each order in turn (a large
        // transaction's changes are hundreds of megabytes: no copy per order).
        let eavt = self.eavt.apply_through_pending(&changes, bound);
        sort_by_attribute(&mut changes);
        debug_assert!(sorted_in(IndexOrder::Aevt, &changes));
        let aevt = self.aevt.apply_through_pending(&changes, bound);
        let mut avet = avet_share(changes.into_iter(), defer);
        sort_avet(&mut avet);
        debug_assert!(sorted_in(IndexOrder::Avet, &avet));
        Indexes {
            eavt,
            aevt,
            avet: self.avet.apply_through_pending(&avet, bound),
            vaet: self.vaet.apply_through_pending(&vaet, bound),
        }
    }

    /// `apply_in_turn` with EAVT, AEVT and VAET on this thread and AVET on another, AVET's
    /// changes copied out first. AVET takes a transaction's values in no particular order, so
    /// each change lands in a leaf of its own; EAVT's and AEVT's new entities are mostly
    /// appended (`vev-bench scale` loaded about 17% faster with VAET on this side than beside
    /// AVET).
    fn apply_on_two_threads(
        self,
        mut changes: Vec<Change>,
        vaet_changes: Vec<Change>,
        defer: Option<DeferAvet<'_>>,
        bound: Bound,
    ) -> Indexes {
        let mut avet_changes = avet_share(changes.iter().cloned(), defer);
        let Indexes {
            eavt,
            aevt,
            avet,
            vaet,
        } = self;
        let ((eavt, aevt, vaet), avet) = vev_core::par::join(
            || {
                let eavt = eavt.apply_through_pending(&changes, bound);
                sort_by_attribute(&mut changes);
                debug_assert!(sorted_in(IndexOrder::Aevt, &changes));
                let aevt = aevt.apply_through_pending(&changes, bound);
                (eavt, aevt, vaet.apply_through_pending(&vaet_changes, bound))
            },
            || {
                sort_avet(&mut avet_changes);
                debug_assert!(sorted_in(IndexOrder::Avet, &avet_changes));
                avet.apply_through_pending(&avet_changes, bound)
            },
        );
        Indexes {
            eavt,
            aevt,
            avet,
            vaet,
        }
    }
}

/// The changes AVET takes now: with `defer`, those of the attributes it accepts go to its
/// list instead (they are sorted when they are merged).
fn avet_share(changes: impl Iterator<Item = Change>, defer: Option<DeferAvet<'_>>) -> Vec<Change> {
    match defer {
        Some((pending, deferrable)) => {
            let (later, now): (Vec<Change>, Vec<Change>) =
                changes.partition(|c| deferrable(c.datom.a));
            pending.extend(later);
            now
        }
        None => changes.collect(),
    }
}

/// Batches of at least this many changes (and fewer than `ORDERS_BESIDE_MAX`) are applied
/// to AVET on a thread of its own beside the other three orders. Below it the second
/// thread costs more than it saves; from the maximum on (an import), copying AVET's changes
/// costs more memory than it is worth, and each tree's apply splits over two threads itself.
const ORDERS_BESIDE_MIN: usize = 1024;
const ORDERS_BESIDE_MAX: usize = 1 << 18;

/// Sort changes by attribute, keeping their order within each (EAVT-sorted changes come out
/// in AEVT order). A transaction names few attributes, so a large batch is dealt into one
/// run per attribute in a pass, instead of a comparison sort (an import of 3.2M datoms over
/// four attributes: 0.27 s of stable sort).
fn sort_by_attribute(changes: &mut Vec<Change>) {
    if changes.len() < BUCKET_SORT_MIN {
        changes.sort_by_key(|c| c.datom.a);
        return;
    }
    // Each attribute's run, counted first so that each is allocated once.
    let mut runs: foldhash::HashMap<EntityId, usize> = Default::default();
    let mut counts: Vec<(EntityId, usize)> = Vec::new();
    for c in changes.iter() {
        let next = counts.len();
        let at = *runs.entry(c.datom.a).or_insert(next);
        if at == next {
            counts.push((c.datom.a, 0));
        }
        counts[at].1 += 1;
    }
    if counts.len() == 1 {
        return;
    }
    let mut buckets: Vec<(EntityId, Vec<Change>)> = counts
        .iter()
        .map(|&(a, n)| (a, Vec::with_capacity(n)))
        .collect();
    for c in changes.drain(..) {
        buckets[runs[&c.datom.a]].1.push(c);
    }
    buckets.sort_unstable_by_key(|(a, _)| *a);
    for (_, run) in buckets {
        changes.extend(run);
    }
}

/// Batches below this many changes are sorted by attribute with a comparison sort.
const BUCKET_SORT_MIN: usize = 4096;

/// At least this many changes are sorted on two threads.
const PARALLEL_SORT_MIN: usize = 65_536;

/// Sort changes into AVET order; changes to the same datom keep their relative order. The
/// sort compares attributes and `Value::sort_key`s first, which settles most comparisons
/// without following a value's pointer (a cache miss apiece on a large batch of strings).
pub(crate) fn sort_avet(changes: &mut Vec<Change>) {
    sort_avet_on(changes, SortThreads::Two)
}

/// How many threads a sort of changes may use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SortThreads {
    /// This thread alone (for a caller that is itself off the critical path).
    One,
    /// This thread and one more, for a batch of at least `PARALLEL_SORT_MIN` changes.
    Two,
}

/// `sort_avet` on the threads `threads` allows.
pub(crate) fn sort_avet_on(changes: &mut Vec<Change>, threads: SortThreads) {
    struct Key {
        a: EntityId,
        v: vev_core::value::SortKey,
        e: EntityId,
        tx: EntityId,
        added: bool,
        at: usize,
    }
    let mut keyed: Vec<Key> = changes
        .iter()
        .enumerate()
        .map(|(at, c)| Key {
            a: c.datom.a,
            v: c.datom.v.sort_key(),
            e: c.datom.e,
            tx: c.datom.tx,
            added: c.datom.added,
            at,
        })
        .collect();
    let cmp = |x: &Key, y: &Key| {
        x.a.cmp(&y.a)
            .then_with(|| {
                x.v.cmp_known(&y.v)
                    .unwrap_or_else(|| changes[x.at].datom.v.cmp(&changes[y.at].datom.v))
            })
            .then(x.e.cmp(&y.e))
            .then(x.tx.cmp(&y.tx))
            .then(x.added.cmp(&y.added))
            .then(x.at.cmp(&y.at))
    };
    // The changes' new order, as positions in `changes` (8 bytes each, where a key is 80:
    // a large transaction's sort allocates as little as it can).
    let order: Vec<usize> = if keyed.len() < PARALLEL_SORT_MIN || threads == SortThreads::One {
        keyed.sort_unstable_by(cmp);
        keyed.iter().map(|k| k.at).collect()
    } else {
        // Each half sorted on its own thread, then merged.
        let mut second = keyed.split_off(keyed.len() / 2);
        vev_core::par::join(
            || keyed.sort_unstable_by(cmp),
            || second.sort_unstable_by(cmp),
        );
        let mut merged = Vec::with_capacity(keyed.len() + second.len());
        let (mut i, mut j) = (0, 0);
        while i < keyed.len() && j < second.len() {
            if cmp(&second[j], &keyed[i]) == Ordering::Less {
                merged.push(second[j].at);
                j += 1;
            } else {
                merged.push(keyed[i].at);
                i += 1;
            }
        }
        merged.extend(keyed[i..].iter().map(|k| k.at));
        merged.extend(second[j..].iter().map(|k| k.at));
        merged
    };
    drop(keyed);
    // Cloning a change is a copy and, for a value behind a pointer, a reference count
    // increment: cheaper than a list of moved-out slots as large as the changes.
    let sorted: Vec<Change> = order.iter().map(|&at| changes[at].clone()).collect();
    *changes = sorted;
}

/// True when `changes` are strictly increasing in `order`.
fn sorted_in(order: IndexOrder, changes: &[Change]) -> bool {
    changes
        .windows(2)
        .all(|w| order.cmp(&w[0].datom, &w[1].datom) == Ordering::Less)
}

/// Sort exact changes (see `Indexes::apply`) into the tree's order and apply them.
pub(crate) fn apply_sorted(tree: Tree, mut changes: Vec<Change>, bound: Bound) -> Tree {
    let order = tree.order();
    changes.sort_by(|x, y| order.cmp(&x.datom, &y.datom));
    changes.dedup_by(|x, y| order.cmp(&x.datom, &y.datom) == Ordering::Equal);
    tree.apply_through_pending(&changes, bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vev_core::{Datom, Value};

    #[test]
    fn avet_sorts_of_large_batches_on_two_threads_match_a_plain_sort() {
        // Strings whose first 15 bytes tie (so the sort falls back to full comparisons),
        // longs, refs, and duplicate (a, v) pairs across entities.
        let mut x: u64 = 77;
        let mut changes: Vec<Change> = (0..PARALLEL_SORT_MIN as u64 + 5_000)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = x >> 33;
                let v = match r % 3 {
                    0 => Value::string(&format!("a-common-prefix-{}", r % 900)),
                    1 => Value::Long((r % 5000) as i64 - 2500),
                    _ => Value::Ref(r % 700),
                };
                Change {
                    datom: Datom::new(1000 + i, 10 + r % 4, v, 7, true),
                    insert: i % 5 != 0,
                }
            })
            .collect();
        let mut want = changes.clone();
        want.sort_by(|x, y| IndexOrder::Avet.cmp(&x.datom, &y.datom));
        sort_avet(&mut changes);
        assert!(sorted_in(IndexOrder::Avet, &changes));
        let same = changes
            .iter()
            .zip(&want)
            .all(|(c, w)| c.insert == w.insert && IndexOrder::Avet.cmp(&c.datom, &w.datom).is_eq());
        assert!(same && changes.len() == want.len());
    }

    #[test]
    fn attribute_runs_of_large_batches_match_a_stable_sort() {
        // Entities in order, each with some of seven attributes in order (as a transaction's
        // EAVT-sorted changes are), so a stable sort by attribute gives AEVT order; and one
        // batch of a single attribute.
        let mut x: u64 = 5;
        let mut changes = Vec::new();
        for e in 0..(BUCKET_SORT_MIN as u64 * 2) {
            for a in 20..27u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if !(x >> 40).is_multiple_of(3) {
                    changes.push(Change {
                        datom: Datom::new(e, 60 - a, Value::Long((x >> 50) as i64), 7, true),
                        insert: !(x >> 35).is_multiple_of(4),
                    });
                }
            }
        }
        let single: Vec<Change> = changes
            .iter()
            .filter(|c| c.datom.a == 40)
            .cloned()
            .collect();
        for mut batch in [changes, single] {
            assert!(batch.len() >= BUCKET_SORT_MIN);
            let mut want = batch.clone();
            want.sort_by_key(|c| c.datom.a);
            sort_by_attribute(&mut batch);
            let same = batch.iter().zip(&want).all(|(c, w)| {
                c.insert == w.insert && IndexOrder::Eavt.cmp(&c.datom, &w.datom).is_eq()
            });
            assert!(same && batch.len() == want.len());
        }
    }

    /// A batch applied to AVET on one thread and the other orders on another gives
    /// the trees (and the set-aside AVET changes) applying it to one tree after another
    /// gives: inserts, removals of present datoms, refs, deferred attributes.
    #[test]
    fn orders_on_two_threads_match_orders_in_turn() {
        let is_ref = |a: EntityId| a == 12;
        let deferrable = |a: EntityId| a != 10;
        let value = |a: u64, x: u64| match a {
            12 => Value::Ref(1 + x % 900),
            11 => Value::string(&format!("s{}", x % 300)),
            _ => Value::Long((x % 5000) as i64),
        };
        let sorted = |mut changes: Vec<Change>| {
            changes.sort_by(|x, y| IndexOrder::Eavt.cmp(&x.datom, &y.datom));
            changes.dedup_by(|x, y| IndexOrder::Eavt.cmp(&x.datom, &y.datom).is_eq());
            changes
        };
        let mut x: u64 = 11;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let first: Vec<Change> = (0..900u64)
            .flat_map(|e| (10..13u64).map(move |a| (e, a)))
            .map(|(e, a)| Change {
                datom: Datom::new(1 + e, a, value(a, e * 7 + a), 5, true),
                insert: true,
            })
            .collect();
        let base = Indexes::new().apply(sorted(first.clone()), is_ref, None, Bound::Shared);
        // Removals of a third of the first batch's datoms, and new datoms on old and new
        // entities.
        let mut batch: Vec<Change> = first
            .iter()
            .filter(|_| next() % 3 == 0)
            .map(|c| Change {
                datom: c.datom.clone(),
                insert: false,
            })
            .collect();
        for _ in 0..3 * ORDERS_BESIDE_MIN {
            let (e, a) = (1 + next() % 1500, 10 + next() % 3);
            batch.push(Change {
                datom: Datom::new(e, a, value(a, next()), 6, true),
                insert: true,
            });
        }
        let batch = sorted(batch);
        assert!((ORDERS_BESIDE_MIN..ORDERS_BESIDE_MAX).contains(&batch.len()));
        let vaet = |changes: &[Change]| {
            let mut v: Vec<Change> = changes
                .iter()
                .filter(|c| is_ref(c.datom.a))
                .cloned()
                .collect();
            v.sort_by(|x, y| IndexOrder::Vaet.cmp(&x.datom, &y.datom));
            v
        };
        let dump = |ix: &Indexes| -> Vec<Vec<Datom>> {
            [&ix.eavt, &ix.aevt, &ix.avet, &ix.vaet]
                .iter()
                .map(|t| t.iter().collect())
                .collect()
        };
        for defer in [false, true] {
            let (mut set_aside_two, mut set_aside_turn) = (Vec::new(), Vec::new());
            let two = base.clone().apply_on_two_threads(
                batch.clone(),
                vaet(&batch),
                defer.then_some((&mut set_aside_two, &deferrable as &dyn Fn(EntityId) -> bool)),
                Bound::Shared,
            );
            let turn = base.clone().apply_in_turn(
                batch.clone(),
                vaet(&batch),
                defer.then_some((
                    &mut set_aside_turn,
                    &deferrable as &dyn Fn(EntityId) -> bool,
                )),
                Bound::Shared,
            );
            assert_eq!(dump(&two), dump(&turn));
            let key = |c: &Change| (c.datom.clone(), c.insert);
            let mut a: Vec<_> = set_aside_two.iter().map(key).collect();
            let mut b: Vec<_> = set_aside_turn.iter().map(key).collect();
            a.sort_by(|x, y| IndexOrder::Eavt.cmp(&x.0, &y.0));
            b.sort_by(|x, y| IndexOrder::Eavt.cmp(&x.0, &y.0));
            assert_eq!(a, b);
            assert_eq!(defer, !a.is_empty());
        }
    }
}
