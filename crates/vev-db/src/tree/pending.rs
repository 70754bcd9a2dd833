//! A tree's pending changes: Datomic's memory index in miniature (see the parent module's
//! doc). Two sorted lists that every read merges with the nodes, so that a small
//! transaction copies only the short one.

use std::sync::Arc;

use vev_core::{Datom, IndexOrder};

use super::*;

/// The most changes in a tree's `recent` list, which every small transaction copies.
pub(super) const RECENT_MAX: usize = 48;

/// The most changes in a tree's `older` list, copied once per `RECENT_MAX` changes or so; the
/// longer it is, the more transactions share one path copy in the nodes.
pub(super) const PENDING_MAX: usize = 512;

/// The most changes in a speculative value's `older` list (`Bound::Loose`).
pub(super) const PENDING_LOOSE_MAX: usize = 8 * PENDING_MAX;

/// A tree's pending changes: two lists, each sorted in the tree's order with one change per
/// datom. `older`'s are exact for the nodes (an insert absent from them, a removal present),
/// `recent`'s for the nodes with `older` applied. In effect, an insert and a removal of one
/// datom in the two lists cancel out.
#[derive(Clone, Default)]
pub(crate) struct Pending {
    older: Arc<Vec<Change>>,
    recent: Arc<Vec<Change>>,
}

/// A position in a `Pending`'s changes in effect: an index in each list.
#[derive(Clone, Copy, Default)]
pub(super) struct PendingPos {
    older: usize,
    recent: usize,
}

impl Pending {
    /// A tree's pending changes from one list, exact for its nodes.
    pub(crate) fn from_sorted(changes: Vec<Change>) -> Pending {
        Pending {
            older: Arc::new(changes),
            recent: Arc::default(),
        }
    }

    /// How many changes the two lists hold.
    pub(crate) fn len(&self) -> usize {
        self.older.len() + self.recent.len()
    }

    /// The changes in effect, in one list exact for the nodes.
    pub(crate) fn flattened(&self, order: IndexOrder) -> Vec<Change> {
        merge_changes(order, &self.older, &self.recent, true)
    }

    /// These changes with exact `changes` added; or, when that outgrows the bounds (`older`
    /// at most `older_max`), all of them in one list, exact for the nodes.
    pub(super) fn with(
        &self,
        order: IndexOrder,
        changes: &[Change],
        older_max: usize,
    ) -> Result<Option<Pending>, Vec<Change>> {
        let recent = merge_changes(order, &self.recent, changes, true);
        if recent.len() <= RECENT_MAX {
            let p = Pending {
                older: self.older.clone(),
                recent: Arc::new(recent),
            };
            return Ok((p.len() > 0).then_some(p));
        }
        let older = merge_changes(order, &self.older, &recent, true);
        if older.len() <= older_max {
            return Ok((!older.is_empty()).then(|| Pending::from_sorted(older)));
        }
        Err(older)
    }

    pub(super) fn seek(&self, below: impl Fn(&Datom) -> bool) -> PendingPos {
        PendingPos {
            older: self.older.partition_point(|c| below(&c.datom)),
            recent: self.recent.partition_point(|c| below(&c.datom)),
        }
    }

    /// The change in effect at `pos` (moving `pos` past cancelled pairs), and the position
    /// after it.
    pub(super) fn at(
        &self,
        order: IndexOrder,
        pos: &mut PendingPos,
    ) -> Option<(&Change, PendingPos)> {
        loop {
            let (i, j) = (pos.older, pos.recent);
            let next = |older, recent| PendingPos { older, recent };
            return match (self.older.get(i), self.recent.get(j)) {
                (None, None) => None,
                (Some(a), None) => Some((a, next(i + 1, j))),
                (None, Some(b)) => Some((b, next(i, j + 1))),
                (Some(a), Some(b)) => match order.cmp(&a.datom, &b.datom) {
                    Ordering::Less => Some((a, next(i + 1, j))),
                    Ordering::Greater => Some((b, next(i, j + 1))),
                    Ordering::Equal if a.insert != b.insert => {
                        *pos = next(i + 1, j + 1);
                        continue;
                    }
                    Ordering::Equal => Some((b, next(i + 1, j + 1))),
                },
            };
        }
    }

    /// The changes in effect from `pos` on.
    pub(super) fn iter_at(&self, order: IndexOrder, pos: PendingPos) -> InEffect<'_> {
        InEffect {
            pending: self,
            order,
            pos,
        }
    }

    /// Inserts less removals in effect `below` (monotone).
    pub(super) fn net_below(&self, below: impl Fn(&Datom) -> bool) -> isize {
        let net = |list: &[Change]| {
            let n = list.partition_point(|c| below(&c.datom));
            let inserts = list[..n].iter().filter(|c| c.insert).count();
            inserts as isize - (n - inserts) as isize
        };
        // A cancelled pair counts +1 and -1.
        net(&self.older) + net(&self.recent)
    }

    /// The change in effect for exactly this datom, if any.
    pub(super) fn find(&self, order: IndexOrder, datom: &Datom) -> Option<&Change> {
        let find = |list: &[Change]| list.binary_search_by(|c| order.cmp(&c.datom, datom)).ok();
        if let Some(i) = find(&self.recent) {
            // A removal of what `older` inserted (or the reverse) leaves the nodes' state.
            return match find(&self.older) {
                Some(k) if self.older[k].insert != self.recent[i].insert => None,
                _ => Some(&self.recent[i]),
            };
        }
        find(&self.older).map(|k| &self.older[k])
    }
}

/// A `Pending`'s changes in effect, in order.
pub(super) struct InEffect<'a> {
    pending: &'a Pending,
    order: IndexOrder,
    pos: PendingPos,
}

impl<'a> Iterator for InEffect<'a> {
    type Item = &'a Change;

    fn next(&mut self) -> Option<&'a Change> {
        let (c, after) = self.pending.at(self.order, &mut self.pos)?;
        self.pos = after;
        Some(c)
    }
}

/// A walk over the nodes' datoms (each with the number of its key range) with pending
/// changes in effect merged in, in order: a pending insert is visited in its place, a node's
/// datom a pending removal removes is skipped. The walk hands each node datom to `node`,
/// then `finish` visits the inserts after the last one.
pub(super) struct PendingMerge<'a, I: Iterator<Item = (usize, &'a Change)>> {
    order: IndexOrder,
    changes: std::iter::Peekable<I>,
    /// False once the visitor has asked to stop.
    more: bool,
}

impl<'a, I: Iterator<Item = (usize, &'a Change)>> PendingMerge<'a, I> {
    pub(super) fn new(order: IndexOrder, changes: I) -> Self {
        PendingMerge {
            order,
            changes: changes.peekable(),
            more: true,
        }
    }

    /// The walk's next datom `d`, in range `k`; whether the walk should go on.
    pub(super) fn node<V>(&mut self, k: usize, d: &Datom, visit: &mut V) -> bool
    where
        V: FnMut(usize, &Datom) -> bool + ?Sized,
    {
        while let Some(&(r, c)) = self.changes.peek() {
            match r.cmp(&k).then_with(|| self.order.cmp(&c.datom, d)) {
                Ordering::Less => {
                    self.changes.next();
                    if c.insert && !visit(r, &c.datom) {
                        self.more = false;
                        return false;
                    }
                }
                Ordering::Equal => {
                    self.changes.next();
                    if !c.insert {
                        return true;
                    }
                    break;
                }
                Ordering::Greater => break,
            }
        }
        self.more = visit(k, d);
        self.more
    }

    /// Visit the inserts after the walk's last datom, unless the visitor stopped.
    pub(super) fn finish<V>(mut self, visit: &mut V)
    where
        V: FnMut(usize, &Datom) -> bool + ?Sized,
    {
        if !self.more {
            return;
        }
        for (r, c) in self.changes.by_ref() {
            if c.insert && !visit(r, &c.datom) {
                return;
            }
        }
    }
}
