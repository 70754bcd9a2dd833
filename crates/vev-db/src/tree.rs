//! A persistent B+tree of datoms in one index order.
//!
//! Why this shape: a `Db` is an immutable value and every transaction makes a new one, so the
//! indexes must share structure between versions. Leaves are sorted chunks of datoms behind an
//! `Arc`; branches hold their children's first datoms and subtree sizes. Applying a batch of
//! changes copies only the leaves the batch touches and the branches above them (path
//! copying), so a transaction costs time proportional to the datoms it touches times the
//! tree's depth, never to the size of the index. A whole batch is applied in one descent:
//! the sorted changes are split among the children by their first keys, so a transaction of
//! 100,000 datoms rewrites each touched leaf once rather than once per datom.
//!
//! A small transaction does not touch the nodes at all: its changes join the tree's *pending*
//! changes (Datomic's memory index in miniature), which every read merges with the nodes.
//! They are two sorted lists, so that a transaction copies only a short one: its changes go
//! to `recent` (at most `RECENT_MAX`), a full `recent` goes to `older` (at most
//! `PENDING_MAX`), and a full `older` goes to the nodes as one batch, so the path copies of
//! many transactions share their branches and, for datoms that land near each other (a new
//! entity's datoms, every attribute's newest entity), their leaves.
//!
//! Subtree sizes make `rank` (and so range counts for the query planner) logarithmic.
//! Leaves may underflow after removals; small neighbours are merged when a branch is rebuilt.
//! All leaves are always at the same depth.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use smallvec::{smallvec, SmallVec};
use vev_core::{Datom, IndexOrder};

use crate::segment::SegmentCache;

// Small nodes keep path copies cheap: copying a branch bumps the reference count of each of
// its children (a cache miss apiece), so a transaction's cost is dominated by fanout × depth.
const LEAF_MAX: usize = 16;
const LEAF_TARGET: usize = 12;
const LEAF_MIN: usize = 4;
const BRANCH_MAX: usize = 16;
const BRANCH_TARGET: usize = 12;

#[derive(Clone)]
pub(crate) enum Node {
    Leaf(Arc<Vec<Datom>>),
    Branch(Arc<Branch>),
    /// A subtree persisted as a segment, loaded through the segment cache when first walked.
    /// Loading never yields another `Stored` node.
    Stored(Arc<Stored>),
}

/// A branch's children and their subtree sizes, kept inline in the branch's one allocation (a
/// path copy then allocates once per branch, and a walk follows one pointer fewer per level).
pub(crate) type Children = SmallVec<[Node; BRANCH_MAX]>;
pub(crate) type Sizes = SmallVec<[usize; BRANCH_MAX]>;

#[derive(Clone)]
pub(crate) struct Branch {
    pub(crate) children: Children,
    /// The first datom of each child; shared between versions while no child's first datom
    /// changes (the common case), so a path copy does not clone them.
    pub(crate) mins: Arc<Vec<Datom>>,
    pub(crate) sizes: Sizes,
}

/// A reference to a persisted subtree: its segment id, datom count and height (0 for a leaf).
pub(crate) struct Stored {
    pub(crate) id: u64,
    pub(crate) size: usize,
    pub(crate) height: u32,
    pub(crate) cache: Arc<SegmentCache>,
}

impl Stored {
    fn load(&self) -> Node {
        self.cache.load(self)
    }
}

/// What rebuilding a node hands up: usually one node (kept inline, so the common path
/// allocates no list per level), several after a split, none when it emptied.
pub(crate) type Entries = SmallVec<[Entry; 1]>;

/// A child node with its first datom and size, as a rebuilt level hands it up.
pub(crate) struct Entry {
    pub(crate) node: Node,
    pub(crate) min: Datom,
    pub(crate) size: usize,
}

/// One change in a batch: insert or remove a datom.
#[derive(Clone, Debug)]
pub struct Change {
    pub datom: Datom,
    pub insert: bool,
}

/// A persistent sorted set of datoms in one index order. Cloning is O(1).
#[derive(Clone)]
pub struct Tree {
    pub(crate) order: IndexOrder,
    pub(crate) root: Option<Node>,
    /// The datoms in the tree: the nodes' plus the pending inserts less the pending removals.
    pub(crate) len: usize,
    /// Changes not yet applied to the nodes (see `apply_through_pending`); `None` when there are none.
    pub(crate) pending: Option<Pending>,
}

/// The most changes in a tree's `recent` list, which every small transaction copies.
const RECENT_MAX: usize = 48;

/// The most changes in a tree's `older` list, copied once per `RECENT_MAX` changes or so; the
/// longer it is, the more transactions share one path copy in the nodes.
const PENDING_MAX: usize = 512;

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
struct PendingPos {
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

    /// These changes with exact `changes` added; or, when that outgrows the bounds, all of
    /// them in one list, exact for the nodes.
    fn with(&self, order: IndexOrder, changes: &[Change]) -> Result<Option<Pending>, Vec<Change>> {
        let recent = merge_changes(order, &self.recent, changes, true);
        if recent.len() <= RECENT_MAX {
            let p = Pending {
                older: self.older.clone(),
                recent: Arc::new(recent),
            };
            return Ok((p.len() > 0).then_some(p));
        }
        let older = merge_changes(order, &self.older, &recent, true);
        if older.len() <= PENDING_MAX {
            return Ok((!older.is_empty()).then(|| Pending::from_sorted(older)));
        }
        Err(older)
    }

    fn seek(&self, below: impl Fn(&Datom) -> bool) -> PendingPos {
        PendingPos {
            older: self.older.partition_point(|c| below(&c.datom)),
            recent: self.recent.partition_point(|c| below(&c.datom)),
        }
    }

    /// The change in effect at `pos` (moving `pos` past cancelled pairs), and the position
    /// after it.
    fn at(&self, order: IndexOrder, pos: &mut PendingPos) -> Option<(&Change, PendingPos)> {
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
    fn iter_at(&self, order: IndexOrder, pos: PendingPos) -> InEffect<'_> {
        InEffect {
            pending: self,
            order,
            pos,
        }
    }

    /// Inserts less removals in effect `below` (monotone).
    fn net_below(&self, below: impl Fn(&Datom) -> bool) -> isize {
        let net = |list: &[Change]| {
            let n = list.partition_point(|c| below(&c.datom));
            let inserts = list[..n].iter().filter(|c| c.insert).count();
            inserts as isize - (n - inserts) as isize
        };
        // A cancelled pair counts +1 and -1.
        net(&self.older) + net(&self.recent)
    }

    /// The change in effect for exactly this datom, if any.
    fn find(&self, order: IndexOrder, datom: &Datom) -> Option<&Change> {
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
struct InEffect<'a> {
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
struct PendingMerge<'a, I: Iterator<Item = (usize, &'a Change)>> {
    order: IndexOrder,
    changes: std::iter::Peekable<I>,
    /// False once the visitor has asked to stop.
    more: bool,
}

impl<'a, I: Iterator<Item = (usize, &'a Change)>> PendingMerge<'a, I> {
    fn new(order: IndexOrder, changes: I) -> Self {
        PendingMerge {
            order,
            changes: changes.peekable(),
            more: true,
        }
    }

    /// The walk's next datom `d`, in range `k`; whether the walk should go on.
    fn node<V>(&mut self, k: usize, d: &Datom, visit: &mut V) -> bool
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
    fn finish<V>(mut self, visit: &mut V)
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

impl Tree {
    pub fn new(order: IndexOrder) -> Tree {
        Tree {
            order,
            root: None,
            len: 0,
            pending: None,
        }
    }

    /// A tree of these nodes (none pending).
    pub(crate) fn from_root(order: IndexOrder, root: Option<Node>, len: usize) -> Tree {
        Tree {
            order,
            root,
            len,
            pending: None,
        }
    }

    pub fn order(&self) -> IndexOrder {
        self.order
    }

    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Apply a batch of changes to the nodes, with whatever is pending (the tree that comes
    /// out has nothing pending). The changes must be sorted in this tree's order with at most
    /// one change per datom; inserting a present datom or removing an absent one is a no-op.
    /// Nodes that nothing else shares (no older `Db` holds them) are updated in place,
    /// moving their datoms instead of copying them; clone the tree (O(1)) to keep it.
    pub fn apply_to_nodes(self, changes: &[Change]) -> Tree {
        let Tree {
            order,
            root,
            pending,
            ..
        } = self;
        let nodes_only = Tree::from_root(order, root, 0);
        match pending {
            None => nodes_only.merge_into_nodes(changes),
            // On the same datom the batch's change is the later one. Both are then exact or
            // no-ops for the nodes (a pending insert is absent from them, a removal present).
            Some(p) => {
                let all = p.flattened(order);
                nodes_only.merge_into_nodes(&merge_changes(order, &all, changes, false))
            }
        }
    }

    /// Apply changes that are exact for this tree: sorted in its order, one per datom, every
    /// insert absent from the tree and every removal present in it (what a transaction
    /// computes from db-before). A small batch only joins the pending changes, at a cost
    /// proportional to the `recent` list's length (see `Pending`); when they outgrow their
    /// bounds all of them are applied to the nodes as one batch.
    pub fn apply_through_pending(self, changes: &[Change]) -> Tree {
        if changes.is_empty() {
            return self;
        }
        debug_assert!(
            changes.iter().all(|c| self.contains(&c.datom) != c.insert),
            "a change that is not exact for the tree"
        );
        let inserts = changes.iter().filter(|c| c.insert).count();
        let len = self.len + inserts - (changes.len() - inserts);
        let Tree {
            order,
            root,
            pending,
            ..
        } = self;
        let all: Cow<[Change]> = if changes.len() > PENDING_MAX {
            // A large batch goes straight to the nodes, with what is pending.
            match &pending {
                None => Cow::Borrowed(changes),
                Some(p) => Cow::Owned(merge_changes(order, &p.flattened(order), changes, true)),
            }
        } else {
            match pending.unwrap_or_default().with(order, changes) {
                Ok(pending) => {
                    return Tree {
                        order,
                        root,
                        len,
                        pending,
                    }
                }
                Err(all) => Cow::Owned(all),
            }
        };
        let tree = Tree::from_root(order, root, 0).apply_to_nodes(&all);
        debug_assert_eq!(tree.len, len);
        tree
    }

    /// Apply sorted changes to the nodes of a tree with nothing pending.
    fn merge_into_nodes(self, changes: &[Change]) -> Tree {
        debug_assert!(self.pending.is_none());
        if changes.is_empty() {
            let len = self.root.as_ref().map_or(0, node_size);
            return Tree { len, ..self };
        }
        debug_assert!(changes
            .windows(2)
            .all(|w| self.order.cmp(&w[0].datom, &w[1].datom) == Ordering::Less));
        let order = self.order;
        let entries = match self.root {
            None => leaf_merge(order, &[], changes),
            // At the root, a large batch may use a second thread.
            Some(Node::Branch(b)) => apply_branch_owned(order, b, changes, true),
            Some(node) => apply_node_owned(order, node, changes),
        };
        let mut level = entries;
        while level.len() > 1 {
            level = group_branches(level.into_vec());
        }
        let mut root = level.pop().map(|e| e.node);
        while let Some(Node::Branch(b)) = &root {
            if b.children.len() != 1 {
                break;
            }
            root = Some(b.children[0].clone());
        }
        let len = root.as_ref().map_or(0, node_size);
        Tree::from_root(order, root, len)
    }

    #[cfg(test)]
    /// Build a tree from datoms in any order (duplicates removed).
    pub fn from_datoms(order: IndexOrder, mut datoms: Vec<Datom>) -> Tree {
        datoms.sort_by(|x, y| order.cmp(x, y));
        datoms.dedup_by(|x, y| order.cmp(x, y) == Ordering::Equal);
        let changes: Vec<Change> = datoms
            .into_iter()
            .map(|datom| Change {
                datom,
                insert: true,
            })
            .collect();
        Tree::new(order).apply_to_nodes(&changes)
    }

    /// The number of datoms `d` for which `below(d)` holds. `below` must be monotone in this
    /// tree's order (true for a prefix of the datoms, then false).
    pub fn rank(&self, below: impl Fn(&Datom) -> bool) -> usize {
        let in_nodes = self.rank_nodes(&below);
        let Some(p) = &self.pending else {
            return in_nodes;
        };
        // Every pending removal below is one of the nodes' datoms counted above.
        (in_nodes as isize + p.net_below(&below)) as usize
    }

    fn rank_nodes(&self, below: &impl Fn(&Datom) -> bool) -> usize {
        let mut node = match &self.root {
            None => return 0,
            Some(n) => n.clone(),
        };
        let mut acc = 0;
        loop {
            let next = match &node {
                Node::Leaf(items) => return acc + items.partition_point(|d| below(d)),
                Node::Branch(b) => {
                    let idx = b.mins.partition_point(|d| below(d));
                    if idx == 0 {
                        return acc;
                    }
                    acc += b.sizes[..idx - 1].iter().sum::<usize>();
                    b.children[idx - 1].clone()
                }
                Node::Stored(s) => s.load(),
            };
            node = next;
        }
    }

    /// Iterate from the first datom for which `below` is false (see `rank`).
    pub fn iter_from(&self, below: impl Fn(&Datom) -> bool) -> Iter {
        let mut it = Iter {
            stack: Vec::new(),
            leaf: None,
            pos: 0,
            pending: self
                .pending
                .as_ref()
                .map(|p| (p.clone(), p.seek(&below), self.order)),
        };
        let mut node = match &self.root {
            None => return it,
            Some(n) => n.clone(),
        };
        loop {
            match node {
                Node::Leaf(items) => {
                    it.pos = items.partition_point(|d| below(d));
                    it.leaf = Some(items);
                    return it;
                }
                Node::Branch(b) => {
                    let idx = b.mins.partition_point(|d| below(d)).saturating_sub(1);
                    node = b.children[idx].clone();
                    it.stack.push((b, idx));
                }
                Node::Stored(s) => node = s.load(),
            }
        }
    }

    /// Visit datoms by reference in order, from the first for which `below` is false (see
    /// `rank`), until `visit` returns false. Walks the borrowed nodes: no reference counting.
    pub fn visit_from(
        &self,
        below: impl Fn(&Datom) -> bool,
        visit: &mut dyn FnMut(&Datom) -> bool,
    ) {
        let Some(p) = &self.pending else {
            if let Some(root) = &self.root {
                visit_node(root, Some(&below), visit);
            }
            return;
        };
        // The nodes' datoms, with the pending changes merged in.
        let order = self.order;
        let mut merge = PendingMerge::new(order, p.iter_at(order, p.seek(&below)).map(|c| (0, c)));
        if let Some(root) = &self.root {
            visit_node(root, Some(&below), &mut |d| {
                merge.node(0, d, &mut |_, x| visit(x))
            });
        }
        merge.finish(&mut |_, x| visit(x));
    }

    /// Visit, for each of `n` sorted, non-overlapping key ranges, the datoms inside it, in
    /// index order, walking the tree once. `below(k, d)`: `d` sorts before range `k`;
    /// `after(k, d)`: `d` sorts after range `k`. `visit(k, d)` returns false to stop.
    pub fn visit_batch<B, A>(
        &self,
        n: usize,
        below: &B,
        after: &A,
        visit: &mut dyn FnMut(usize, &Datom) -> bool,
    ) where
        B: Fn(usize, &Datom) -> bool,
        A: Fn(usize, &Datom) -> bool,
    {
        if n == 0 {
            return;
        }
        let Some(p) = &self.pending else {
            if let Some(root) = &self.root {
                batch_node(root, 0, n, below, after, visit);
            }
            return;
        };
        // The pending changes inside some range, with that range, in order.
        let order = self.order;
        let mut k = 0;
        let inside = p
            .iter_at(order, p.seek(|d| below(0, d)))
            .map_while(move |c| {
                while k < n && after(k, &c.datom) {
                    k += 1;
                }
                (k < n).then_some((k, c))
            })
            .filter(|&(k, c)| !below(k, &c.datom));
        let mut merge = PendingMerge::new(order, inside);
        if let Some(root) = &self.root {
            batch_node(root, 0, n, below, after, &mut |k, d| {
                merge.node(k, d, visit)
            });
        }
        merge.finish(visit);
    }

    #[cfg(test)]
    pub fn iter(&self) -> Iter {
        self.iter_from(|_| false)
    }

    /// Does the tree hold this exact datom (all five fields)?
    pub fn contains(&self, datom: &Datom) -> bool {
        let order = self.order;
        if let Some(p) = &self.pending {
            if let Some(c) = p.find(order, datom) {
                return c.insert;
            }
        }
        let below = |d: &Datom| order.cmp(d, datom) == Ordering::Less;
        let mut found = false;
        if let Some(root) = &self.root {
            visit_node(root, Some(&below), &mut |d| {
                found = order.cmp(d, datom) == Ordering::Equal;
                false
            });
        }
        found
    }
}

/// Merge two sorted change lists, `later` after `earlier`. On the same datom the later change
/// is kept, except that with `cancel` an insert and a removal of it cancel out (both exact
/// for the nodes under a pending list: the datom is back to what the nodes hold).
fn merge_changes(
    order: IndexOrder,
    earlier: &[Change],
    later: &[Change],
    cancel: bool,
) -> Vec<Change> {
    let mut out = Vec::with_capacity(earlier.len() + later.len());
    // `later` is usually a transaction's few changes and `earlier` a longer pending list:
    // each change finds its place by binary search and the runs between are copied whole.
    let mut i = 0;
    for c in later {
        let at =
            i + earlier[i..].partition_point(|e| order.cmp(&e.datom, &c.datom) == Ordering::Less);
        out.extend_from_slice(&earlier[i..at]);
        i = at;
        let same = earlier
            .get(i)
            .is_some_and(|e| order.cmp(&e.datom, &c.datom) == Ordering::Equal);
        if same {
            if !(cancel && earlier[i].insert != c.insert) {
                out.push(c.clone());
            }
            i += 1;
        } else {
            out.push(c.clone());
        }
    }
    out.extend_from_slice(&earlier[i..]);
    out
}

pub(crate) fn node_size(node: &Node) -> usize {
    match node {
        Node::Leaf(items) => items.len(),
        Node::Branch(b) => b.sizes.iter().sum(),
        Node::Stored(s) => s.size,
    }
}

/// Apply sorted changes to a node the caller owns; the node comes back as the entries that
/// replace it (none, one, or several after a split). A node whose `Arc` is unique is taken
/// apart and its datoms and children are moved; a shared one (an older `Db` holds it) is
/// copied, and so is everything under it, since its children are shared through it: that is
/// the path copy.
fn apply_node_owned(order: IndexOrder, node: Node, changes: &[Change]) -> Entries {
    match node {
        Node::Leaf(items) => match Arc::try_unwrap(items) {
            Ok(items) => leaf_merge_owned(order, items, changes),
            Err(shared) => leaf_merge(order, &shared, changes),
        },
        Node::Stored(s) => apply_node_owned(order, s.load(), changes),
        Node::Branch(b) => apply_branch_owned(order, b, changes, false),
    }
}

/// A placeholder for a child taken out of its slot while it is rebuilt (shared, so taking a
/// child allocates nothing).
fn vacant() -> Node {
    static EMPTY: std::sync::OnceLock<Arc<Vec<Datom>>> = std::sync::OnceLock::new();
    Node::Leaf(EMPTY.get_or_init(|| Arc::new(Vec::new())).clone())
}

fn apply_branch_owned(
    order: IndexOrder,
    mut b: Arc<Branch>,
    changes: &[Change],
    parallel: bool,
) -> Entries {
    if parallel && changes.len() >= PARALLEL_APPLY_MIN {
        return apply_branch_parallel(order, Arc::unwrap_or_clone(b), changes);
    }
    // Rebuilt in its own allocation when nothing else holds it, else in a copy written
    // straight into a new one: either way the branch is not moved through the stack.
    let branch = Arc::make_mut(&mut b);
    let n = branch.children.len();
    // Rebuild each child the changes fall into, in its slot.
    let mut rebuilt: SmallVec<[(usize, Entries); 4]> = SmallVec::new();
    let mut rest = changes;
    while let Some(c) = rest.first() {
        let mins = &branch.mins;
        let i = mins
            .partition_point(|m| order.cmp(m, &c.datom) != Ordering::Greater)
            .saturating_sub(1);
        let end = match mins.get(i + 1) {
            // Usually every change falls below the next child's first datom: one comparison.
            Some(next) if order.cmp(&rest[rest.len() - 1].datom, next) == Ordering::Less => {
                rest.len()
            }
            Some(next) => rest.partition_point(|c| order.cmp(&c.datom, next) == Ordering::Less),
            None => rest.len(),
        };
        let (mine, tail) = rest.split_at(end);
        rest = tail;
        let child = std::mem::replace(&mut branch.children[i], vacant());
        rebuilt.push((i, apply_node_owned(order, child, mine)));
    }
    // The common case: each rebuilt child is still one node with the same first datom, so
    // this branch keeps its shape and its (shared) list of first datoms.
    let same_shape = rebuilt.iter().all(|(i, entries)| {
        entries.len() == 1
            && order.cmp(&entries[0].min, &branch.mins[*i]) == Ordering::Equal
            && (entries[0].size >= LEAF_MIN || n == 1)
    });
    if same_shape {
        for (i, mut entries) in rebuilt {
            let Entry { node, size, .. } = entries.pop().expect("one entry");
            branch.children[i] = node;
            branch.sizes[i] = size;
        }
        let size = branch.sizes.iter().sum();
        let min = branch.mins[0].clone();
        return smallvec![Entry {
            node: Node::Branch(b),
            min,
            size,
        }];
    }
    let Branch {
        children,
        mins,
        sizes,
    } = Arc::unwrap_or_clone(b);
    let mins = Arc::unwrap_or_clone(mins);
    let mut out: Vec<Entry> = Vec::with_capacity(n + rebuilt.len());
    let mut rebuilt = rebuilt.into_iter().peekable();
    for (i, ((node, min), size)) in children.into_iter().zip(mins).zip(sizes).enumerate() {
        match rebuilt.next_if(|(j, _)| *j == i) {
            Some((_, entries)) => out.extend(entries),
            None => out.push(Entry { node, min, size }),
        }
    }
    merge_small_leaves(&mut out);
    split_branch(out)
}

/// `apply_branch_owned` for a large batch at the root: the children are independent
/// subtrees, so about half of the changes' children go to a second thread.
fn apply_branch_parallel(order: IndexOrder, b: Branch, changes: &[Change]) -> Entries {
    let Branch {
        children,
        mins,
        sizes,
    } = b;
    let n = children.len();
    // Split the changes among the children (moving the children and their first datoms).
    let mut work: Vec<(Entry, &[Change])> = Vec::with_capacity(n);
    let mut rest = changes;
    let mins_owned = Arc::unwrap_or_clone(mins);
    let bounds: Vec<usize> = (1..n)
        .map(|i| {
            let bound = &mins_owned[i];
            changes.partition_point(|c| order.cmp(&c.datom, bound) == Ordering::Less)
        })
        .collect();
    let mut taken = 0;
    for (i, ((node, min), size)) in children.into_iter().zip(mins_owned).zip(sizes).enumerate() {
        let end = if i + 1 < n { bounds[i] } else { changes.len() };
        let (mine, tail) = rest.split_at(end - taken);
        taken = end;
        rest = tail;
        work.push((Entry { node, min, size }, mine));
    }
    let run = |work: Vec<(Entry, &[Change])>| -> Vec<Entry> {
        let mut out = Vec::with_capacity(work.len() + 1);
        for (entry, mine) in work {
            if mine.is_empty() {
                out.push(entry);
            } else {
                out.extend(apply_node_owned(order, entry.node, mine));
            }
        }
        out
    };
    let mut count = 0;
    let split = work
        .iter()
        .position(|(_, mine)| {
            count += mine.len();
            count * 2 >= changes.len()
        })
        .map_or(work.len(), |i| i + 1)
        .clamp(1, work.len().saturating_sub(1).max(1));
    let second = work.split_off(split);
    let mut out = std::thread::scope(|scope| {
        let other = scope.spawn(|| run(second));
        let mut out = run(work);
        out.extend(
            other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        );
        out
    });
    merge_small_leaves(&mut out);
    split_branch(out)
}

/// Batches with at least this many changes split the root's children between two threads.
const PARALLEL_APPLY_MIN: usize = 2048;

/// A leaf gets few changes (a small transaction's usual one): each is placed by binary
/// search rather than by comparing it with every datom of the leaf.
fn few_changes(items: usize, changes: usize) -> bool {
    changes * 4 <= items
}

/// Merge the sorted leaf (which the caller owns: its datoms move into the result) with the
/// sorted changes, then cut the result into leaves.
fn leaf_merge_owned(order: IndexOrder, mut items: Vec<Datom>, changes: &[Change]) -> Entries {
    if few_changes(items.len(), changes.len()) {
        // In place, from the last change back so earlier positions stay valid.
        for c in changes.iter().rev() {
            let pos = items.partition_point(|d| order.cmp(d, &c.datom) == Ordering::Less);
            let present = items
                .get(pos)
                .is_some_and(|d| order.cmp(d, &c.datom) == Ordering::Equal);
            match (present, c.insert) {
                (false, true) => items.insert(pos, c.datom.clone()),
                (true, false) => drop(items.remove(pos)),
                _ => {}
            }
        }
        return chunk_leaves(items);
    }
    let mut merged: Vec<Datom> = Vec::with_capacity(items.len() + changes.len());
    let mut items = items.into_iter().peekable();
    let mut j = 0;
    loop {
        let ord = match (items.peek(), changes.get(j)) {
            (Some(d), Some(c)) => order.cmp(d, &c.datom),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match ord {
            Ordering::Less => merged.extend(items.next()),
            Ordering::Equal => {
                let d = items.next();
                if changes[j].insert {
                    merged.extend(d);
                }
                j += 1;
            }
            Ordering::Greater => {
                if changes[j].insert {
                    merged.push(changes[j].datom.clone());
                }
                j += 1;
            }
        }
    }
    chunk_leaves(merged)
}

/// `leaf_merge_owned` of a leaf an older version shares: on a copy of its datoms (with room
/// for the inserts, so an in-place insert does not reallocate).
fn leaf_merge(order: IndexOrder, items: &[Datom], changes: &[Change]) -> Entries {
    let mut copy = Vec::with_capacity(items.len() + changes.len());
    copy.extend_from_slice(items);
    leaf_merge_owned(order, copy, changes)
}

fn chunk_leaves(merged: Vec<Datom>) -> Entries {
    if merged.is_empty() {
        return Entries::new();
    }
    if merged.len() <= LEAF_MAX {
        return smallvec![leaf_entry(merged)];
    }
    chunk_evenly(merged, LEAF_TARGET, leaf_entry)
}

/// Cut `items` into about-`target`-sized runs of equal length and make a node of each.
fn chunk_evenly<T>(items: Vec<T>, target: usize, make: fn(Vec<T>) -> Entry) -> Entries {
    let parts = items.len().div_ceil(target);
    let per = items.len().div_ceil(parts);
    let mut out = Entries::with_capacity(parts);
    let mut iter = items.into_iter().peekable();
    while iter.peek().is_some() {
        out.push(make(iter.by_ref().take(per).collect()));
    }
    out
}

pub(crate) fn leaf_entry(items: Vec<Datom>) -> Entry {
    Entry {
        min: items[0].clone(),
        size: items.len(),
        node: Node::Leaf(Arc::new(items)),
    }
}

fn merge_small_leaves(entries: &mut Vec<Entry>) {
    let mut i = 1;
    while i < entries.len() {
        let small = entries[i].size < LEAF_MIN || entries[i - 1].size < LEAF_MIN;
        let fits = entries[i].size + entries[i - 1].size <= LEAF_MAX;
        match (&entries[i - 1].node, &entries[i].node) {
            (Node::Leaf(a), Node::Leaf(b)) if small && fits => {
                let mut items = Vec::with_capacity(a.len() + b.len());
                items.extend(a.iter().cloned());
                items.extend(b.iter().cloned());
                entries[i - 1] = leaf_entry(items);
                entries.remove(i);
            }
            _ => i += 1,
        }
    }
}

fn split_branch(entries: Vec<Entry>) -> Entries {
    if entries.is_empty() {
        return Entries::new();
    }
    if entries.len() <= BRANCH_MAX {
        return smallvec![branch_entry(entries)];
    }
    group_branches(entries)
}

fn group_branches(entries: Vec<Entry>) -> Entries {
    chunk_evenly(entries, BRANCH_TARGET, branch_entry)
}

pub(crate) fn branch_entry(entries: Vec<Entry>) -> Entry {
    let mut children = Children::with_capacity(entries.len());
    let mut mins = Vec::with_capacity(entries.len());
    let mut sizes = Sizes::with_capacity(entries.len());
    for e in entries {
        children.push(e.node);
        mins.push(e.min);
        sizes.push(e.size);
    }
    let min = mins[0].clone();
    let size = sizes.iter().sum();
    let b = Branch {
        children,
        mins: Arc::new(mins),
        sizes,
    };
    Entry {
        node: Node::Branch(Arc::new(b)),
        min,
        size,
    }
}

/// Visits `node` from the first datom not `below` (all of it when `below` is `None`); returns
/// whether the visitor wants more. Generic over `below`, so its comparisons inline.
fn visit_node<B: Fn(&Datom) -> bool>(
    node: &Node,
    below: Option<&B>,
    visit: &mut dyn FnMut(&Datom) -> bool,
) -> bool {
    match node {
        Node::Leaf(items) => {
            let start = below.map_or(0, |b| items.partition_point(|d| b(d)));
            items[start..].iter().all(|d| visit(d))
        }
        Node::Stored(s) => visit_node(&s.load(), below, visit),
        Node::Branch(b) => {
            let start = below.map_or(0, |f| b.mins.partition_point(|d| f(d)).saturating_sub(1));
            let mut below = below;
            for child in &b.children[start..] {
                if !visit_node(child, below, visit) {
                    return false;
                }
                below = None;
            }
            true
        }
    }
}

/// The first index at or after `from` whose item fails `pred` (which holds for a prefix of
/// `items`): steps of 1, 2, 4, ... from `from`, then a binary search in the last step. Costs
/// the logarithm of the distance moved, not of the slice, and reads near `from` first.
#[inline]
fn gallop<T>(items: &[T], from: usize, pred: impl Fn(&T) -> bool) -> usize {
    let rest = &items[from..];
    let mut bound = 1;
    while bound <= rest.len() && pred(&rest[bound - 1]) {
        bound *= 2;
    }
    // `pred` holds before `bound / 2` and fails at `bound - 1` (or the end is there).
    let lo = bound / 2;
    let hi = bound.min(rest.len());
    from + lo + rest[lo..hi].partition_point(pred)
}

/// `visit_batch` on one node, for ranges `lo..hi`; returns whether to go on. Generic over the
/// two comparisons, so that they inline into the walk (it makes several per key and level).
fn batch_node<B, A>(
    node: &Node,
    lo: usize,
    hi: usize,
    below: &B,
    after: &A,
    visit: &mut dyn FnMut(usize, &Datom) -> bool,
) -> bool
where
    B: Fn(usize, &Datom) -> bool,
    A: Fn(usize, &Datom) -> bool,
{
    match node {
        Node::Leaf(items) => {
            let mut pos = 0;
            for k in lo..hi {
                // Keys come in order, usually a few datoms apart: gallop from the last one
                // rather than search the rest of the leaf (whose probes miss the cache).
                pos = gallop(items, pos, |d| below(k, d));
                let mut j = pos;
                while j < items.len() && !after(k, &items[j]) {
                    if !visit(k, &items[j]) {
                        return false;
                    }
                    j += 1;
                }
                pos = j;
            }
            true
        }
        Node::Stored(s) => batch_node(&s.load(), lo, hi, below, after, visit),
        Node::Branch(b) => {
            let n = b.children.len();
            let mut first = lo;
            for c in 0..n {
                // Ranges wholly before this child were handled by earlier children.
                while first < hi && c > 0 && after(first, &b.mins[c]) {
                    first += 1;
                }
                if first >= hi {
                    break;
                }
                // Ranges that start at or after the next child's first datom belong there.
                let mut last = first;
                while last < hi && !(c + 1 < n && below(last, &b.mins[c + 1])) {
                    last += 1;
                }
                if first < last && !batch_node(&b.children[c], first, last, below, after, visit) {
                    return false;
                }
            }
            true
        }
    }
}

/// An owning iterator over a tree (it keeps the nodes it walks alive, so it outlives the
/// `Tree` it came from).
pub struct Iter {
    stack: Vec<(Arc<Branch>, usize)>,
    leaf: Option<Arc<Vec<Datom>>>,
    pos: usize,
    /// The tree's pending changes, the next one to merge, and the order to merge by.
    pending: Option<(Pending, PendingPos, IndexOrder)>,
}

/// What an `Iter` yields next.
enum Next {
    /// The datom at `leaf[pos]`.
    Node,
    /// The pending insert at this position.
    Pending(PendingPos),
    Done,
}

impl Iter {
    /// Visit datoms in order without cloning them, until `f` returns false.
    pub fn for_each_ref(mut self, mut f: impl FnMut(&Datom) -> bool) {
        if self.pending.is_some() {
            loop {
                let go_on = match self.step() {
                    Next::Node => {
                        let go_on = f(&self.leaf.as_ref().expect("a leaf")[self.pos]);
                        self.pos += 1;
                        go_on
                    }
                    Next::Pending(mut at) => {
                        let (p, _, order) = self.pending.as_ref().expect("pending changes");
                        f(&p.at(*order, &mut at).expect("a pending change").0.datom)
                    }
                    Next::Done => return,
                };
                if !go_on {
                    return;
                }
            }
        }
        loop {
            let Some(leaf) = self.leaf.clone() else {
                return;
            };
            for d in &leaf[self.pos..] {
                if !f(d) {
                    return;
                }
            }
            self.pos = leaf.len();
            if !self.advance_leaf() {
                return;
            }
        }
    }

    /// Whether `leaf[pos]` is a datom, moving to the next leaf when this one is done.
    fn at_datom(&mut self) -> bool {
        loop {
            match &self.leaf {
                None => return false,
                Some(leaf) if self.pos < leaf.len() => return true,
                Some(_) => {
                    if !self.advance_leaf() {
                        return false;
                    }
                }
            }
        }
    }

    /// Merge the nodes' next datom with the pending changes: skips removed datoms, moves the
    /// pending cursor past what it returns (the caller moves `pos` past a `Next::Node`).
    fn step(&mut self) -> Next {
        loop {
            let at_datom = self.at_datom();
            let Some((p, at, order)) = &mut self.pending else {
                return if at_datom { Next::Node } else { Next::Done };
            };
            let Some((c, after)) = p.at(*order, at) else {
                return if at_datom { Next::Node } else { Next::Done };
            };
            let ord = if at_datom {
                order.cmp(&c.datom, &self.leaf.as_ref().expect("a leaf")[self.pos])
            } else {
                Ordering::Less
            };
            let insert = c.insert;
            match ord {
                Ordering::Greater => return Next::Node,
                Ordering::Less => {
                    let found = *at;
                    *at = after;
                    if insert {
                        return Next::Pending(found);
                    }
                }
                Ordering::Equal => {
                    *at = after;
                    if insert {
                        return Next::Node;
                    }
                    self.pos += 1;
                }
            }
        }
    }

    fn advance_leaf(&mut self) -> bool {
        while let Some((branch, idx)) = self.stack.pop() {
            if idx + 1 < branch.children.len() {
                let mut node = branch.children[idx + 1].clone();
                self.stack.push((branch, idx + 1));
                loop {
                    match node {
                        Node::Leaf(items) => {
                            self.leaf = Some(items);
                            self.pos = 0;
                            return true;
                        }
                        Node::Branch(b) => {
                            node = b.children[0].clone();
                            self.stack.push((b, 0));
                        }
                        Node::Stored(s) => node = s.load(),
                    }
                }
            }
        }
        self.leaf = None;
        false
    }
}

impl Iterator for Iter {
    type Item = Datom;

    fn next(&mut self) -> Option<Datom> {
        if self.pending.is_some() {
            return match self.step() {
                Next::Node => {
                    self.pos += 1;
                    Some(self.leaf.as_ref().expect("a leaf")[self.pos - 1].clone())
                }
                Next::Pending(mut at) => {
                    let (p, _, order) = self.pending.as_ref().expect("pending changes");
                    Some(
                        p.at(*order, &mut at)
                            .expect("a pending change")
                            .0
                            .datom
                            .clone(),
                    )
                }
                Next::Done => None,
            };
        }
        loop {
            let leaf = self.leaf.as_ref()?;
            if let Some(d) = leaf.get(self.pos) {
                self.pos += 1;
                return Some(d.clone());
            }
            if !self.advance_leaf() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vev_core::Value;

    fn d(e: u64) -> Datom {
        Datom::new(e, 1, Value::Long(e as i64), 7, true)
    }

    #[test]
    fn galloping_finds_what_a_binary_search_finds() {
        for len in 0..70usize {
            let items: Vec<usize> = (0..len).map(|i| i * 3).collect();
            for from in 0..=len {
                for target in 0..len * 3 + 2 {
                    let want = from + items[from..].partition_point(|x| *x < target);
                    assert_eq!(
                        gallop(&items, from, |x| *x < target),
                        want,
                        "len {len} from {from} target {target}"
                    );
                }
            }
        }
    }

    #[test]
    fn batch_insert_remove_and_rank() {
        let changes: Vec<Change> = (0..10_000)
            .map(|e| Change {
                datom: d(e * 2),
                insert: true,
            })
            .collect();
        let t = Tree::new(IndexOrder::Eavt).apply_to_nodes(&changes);
        assert_eq!(t.len(), 10_000);
        assert_eq!(t.iter().count(), 10_000);
        assert_eq!(t.rank(|x| x.e < 1000), 500);
        let t2 = t.clone().apply_to_nodes(&[
            Change {
                datom: d(5),
                insert: true,
            },
            Change {
                datom: d(6),
                insert: false,
            },
        ]);
        assert_eq!(t.len(), 10_000, "the old version is unchanged");
        assert_eq!(t2.len(), 10_000);
        assert!(t2.contains(&d(5)) && !t2.contains(&d(6)) && t.contains(&d(6)));
        let firsts: Vec<u64> = t2.iter_from(|x| x.e < 3).take(3).map(|x| x.e).collect();
        assert_eq!(firsts, vec![4, 5, 8]);
        let all_gone: Vec<Change> = (0..10_000)
            .map(|e| Change {
                datom: d(e * 2),
                insert: false,
            })
            .collect();
        let t3 = t.clone().apply_to_nodes(&all_gone);
        assert!(t3.is_empty() && t3.iter().next().is_none());
    }

    type Model = std::collections::BTreeSet<u64>;
    type Batch = std::collections::BTreeMap<u64, bool>;

    fn changes_of(batch: &Batch) -> Vec<Change> {
        batch
            .iter()
            .map(|(&e, &insert)| Change {
                datom: d(e),
                insert,
            })
            .collect()
    }

    fn apply_to_model(model: &mut Model, batch: Batch) {
        for (e, insert) in batch {
            if insert {
                model.insert(e);
            } else {
                model.remove(&e);
            }
        }
    }

    fn assert_matches(t: &Tree, model: &Model, round: usize) {
        let got: Vec<u64> = t.iter().map(|x| x.e).collect();
        assert_eq!(
            got,
            model.iter().copied().collect::<Vec<_>>(),
            "round {round}"
        );
        assert_eq!(t.len(), got.len());
        if let Some(root) = &t.root {
            check_node(t.order, root, None, round);
        }
        for probe in [0, 1, 2, 500, 1501, 2999, 39_999] {
            assert_eq!(
                t.contains(&d(probe)),
                model.contains(&probe),
                "round {round}"
            );
            let below = model.iter().filter(|e| **e < probe).count();
            assert_eq!(t.rank(|x| x.e < probe), below, "round {round}");
            // Ten datoms from the probe on, by each way of reading.
            let want: Vec<u64> = model.range(probe..).take(10).copied().collect();
            let mut seen = Vec::new();
            t.visit_from(|x| x.e < probe, &mut |x| {
                seen.push(x.e);
                seen.len() < 10
            });
            assert_eq!(seen, want, "round {round}: visit_from {probe}");
            let mut seen = Vec::new();
            t.iter_from(|x| x.e < probe).for_each_ref(|x| {
                seen.push(x.e);
                seen.len() < 10
            });
            assert_eq!(seen, want, "round {round}: for_each_ref {probe}");
            let got: Vec<u64> = t.iter_from(|x| x.e < probe).take(10).map(|x| x.e).collect();
            assert_eq!(got, want, "round {round}: iter_from {probe}");
        }
        // Ranges of 0-4, 7-29, 100-100, ... in one batch walk.
        let ranges: Vec<(u64, u64)> = (0..40u64)
            .map(|k| (k * k * 7, k * k * 7 + k % 23))
            .collect();
        let mut seen = Vec::new();
        t.visit_batch(
            ranges.len(),
            &|k, x| x.e < ranges[k].0,
            &|k, x| x.e > ranges[k].1,
            &mut |k, x| {
                seen.push((k, x.e));
                true
            },
        );
        let want: Vec<(usize, u64)> = ranges
            .iter()
            .enumerate()
            .flat_map(|(k, &(lo, hi))| model.range(lo..=hi).map(move |&e| (k, e)))
            .collect();
        assert_eq!(seen, want, "round {round}: visit_batch");
        // Stopping inside the batch walk.
        let mut seen = 0;
        t.visit_batch(
            ranges.len(),
            &|k, x| x.e < ranges[k].0,
            &|k, x| x.e > ranges[k].1,
            &mut |_, _| {
                seen += 1;
                seen < 3
            },
        );
        assert_eq!(seen, want.len().min(3), "round {round}: visit_batch stops");
    }

    /// The tree's shape: every branch's first datoms and sizes are its children's, nodes
    /// are within their bounds, every leaf is at the same depth. Returns (first datom, size,
    /// height).
    fn check_node(
        order: IndexOrder,
        node: &Node,
        parent_min: Option<&Datom>,
        round: usize,
    ) -> (Datom, usize, usize) {
        match node {
            Node::Leaf(items) => {
                assert!(
                    !items.is_empty() && items.len() <= LEAF_MAX,
                    "round {round}: leaf of {}",
                    items.len()
                );
                assert!(items
                    .windows(2)
                    .all(|w| order.cmp(&w[0], &w[1]) == Ordering::Less));
                if let Some(m) = parent_min {
                    assert_eq!(
                        order.cmp(m, &items[0]),
                        Ordering::Equal,
                        "round {round}: leaf min"
                    );
                }
                (items[0].clone(), items.len(), 0)
            }
            Node::Branch(b) => {
                let n = b.children.len();
                assert!(n >= 1 && n <= BRANCH_MAX, "round {round}: branch of {n}");
                assert_eq!((b.mins.len(), b.sizes.len()), (n, n), "round {round}");
                let mut height = None;
                for i in 0..n {
                    let (min, size, h) = check_node(order, &b.children[i], Some(&b.mins[i]), round);
                    assert_eq!(
                        order.cmp(&min, &b.mins[i]),
                        Ordering::Equal,
                        "round {round}: mins[{i}]"
                    );
                    assert_eq!(size, b.sizes[i], "round {round}: sizes[{i}]");
                    assert!(
                        height.is_none_or(|x| x == h),
                        "round {round}: leaves at different depths"
                    );
                    height = Some(h);
                }
                if let Some(m) = parent_min {
                    assert_eq!(
                        order.cmp(m, &b.mins[0]),
                        Ordering::Equal,
                        "round {round}: branch min"
                    );
                }
                (
                    b.mins[0].clone(),
                    b.sizes.iter().sum(),
                    height.unwrap_or(0) + 1,
                )
            }
            Node::Stored(_) => panic!("in-memory trees hold no stored nodes"),
        }
    }

    #[test]
    fn large_batches_split_across_threads_match_a_model() {
        let mut t = Tree::new(IndexOrder::Eavt);
        let mut model = std::collections::BTreeSet::new();
        let mut x: u64 = 7;
        for round in 0..6 {
            let mut batch = std::collections::BTreeMap::new();
            while batch.len() < PARALLEL_APPLY_MIN + 500 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                batch.insert((x >> 33) % 40_000, round == 0 || (x >> 20) % 3 != 0);
            }
            let changes = changes_of(&batch);
            let kept = (round % 2 == 1).then(|| t.clone());
            t = t.apply_to_nodes(&changes);
            drop(kept);
            apply_to_model(&mut model, batch);
            assert_matches(&t, &model, round);
        }
    }

    #[test]
    fn in_place_batches_match_a_model_and_leave_shared_versions_alone() {
        // Batches applied to a uniquely owned tree (updated in place) and, every few rounds,
        // to a tree an older version still shares (copied): both must match the model, and
        // the older version must not change.
        let mut t = Tree::new(IndexOrder::Eavt);
        let mut model = std::collections::BTreeSet::new();
        let mut kept: Vec<(Tree, Vec<u64>)> = Vec::new();
        let mut x: u64 = 99;
        for round in 0..300 {
            let mut batch = std::collections::BTreeMap::new();
            for _ in 0..(1 + round % 40) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                batch.insert((x >> 33) % 3000, (x >> 20) % 4 != 0);
            }
            let changes = changes_of(&batch);
            if round % 7 == 0 {
                kept.push((t.clone(), model.iter().copied().collect()));
            }
            t = t.apply_to_nodes(&changes);
            apply_to_model(&mut model, batch);
            assert_matches(&t, &model, round);
        }
        for (old, want) in kept {
            let got: Vec<u64> = old.iter().map(|x| x.e).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn single_inserts_match_a_sorted_vec() {
        let mut t = Tree::new(IndexOrder::Eavt);
        let mut model = std::collections::BTreeSet::new();
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let e = (x >> 33) % 2000;
            let insert = (x >> 20) % 3 != 0;
            t = t.clone().apply_to_nodes(&[Change {
                datom: d(e),
                insert,
            }]);
            if insert {
                model.insert(e);
            } else {
                model.remove(&e);
            }
        }
        assert_matches(&t, &model, 0);
    }

    #[test]
    fn changes_spread_over_several_children_keep_the_shape() {
        // Small batches touching a few far-apart children of a shared tree (as one
        // transaction's datoms do in AEVT and AVET): copied each time, checked each time.
        let mut t = Tree::new(IndexOrder::Eavt)
            .apply_to_nodes(&changes_of(&(0..3000).map(|e| (e * 2, true)).collect()));
        let mut model: Model = (0..3000).map(|e| e * 2).collect();
        let mut x: u64 = 4242;
        for round in 0..400 {
            let mut batch = Batch::new();
            for _ in 0..(1 + round % 5) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let e = (x >> 33) % 6100;
                batch.insert(e, (x >> 20) % 3 != 0 || e == 0);
            }
            let kept = t.clone();
            t = t.apply_to_nodes(&changes_of(&batch));
            drop(kept);
            apply_to_model(&mut model, batch);
            assert_matches(&t, &model, round);
        }
    }

    #[test]
    fn exact_changes_kept_pending_match_a_model() {
        // Small exact batches (as transactions make them) go to the pending list and, when
        // it fills, to the nodes; versions kept along the way must not change, and a general
        // `apply_to_nodes` now and then takes the pending list with it.
        let mut t = Tree::new(IndexOrder::Eavt)
            .apply_to_nodes(&changes_of(&(0..2000).map(|e| (e * 3, true)).collect()));
        let mut model: Model = (0..2000).map(|e| e * 3).collect();
        let mut kept: Vec<(Tree, Vec<u64>)> = Vec::new();
        let mut x: u64 = 2024;
        let mut pending_seen = 0;
        let mut flushes = 0;
        for round in 0..1500 {
            let mut batch = Batch::new();
            for _ in 0..(1 + round % 9) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let e = (x >> 33) % 20_000;
                // Exact: insert what is absent, remove what is present (also what an
                // earlier batch inserted and left pending).
                batch.insert(e, !model.contains(&e));
            }
            if round % 11 == 0 {
                kept.push((t.clone(), model.iter().copied().collect()));
            }
            let pending_len =
                |t: &Tree| t.pending.as_ref().map_or(0, |p| p.flattened(t.order).len());
            let before = pending_len(&t);
            let general = round % 500 == 499;
            let size = batch.len();
            t = if general {
                t.apply_to_nodes(&changes_of(&batch))
            } else {
                t.apply_through_pending(&changes_of(&batch))
            };
            pending_seen = pending_seen.max(pending_len(&t));
            if !general && pending_len(&t) + size < before {
                flushes += 1;
            }
            apply_to_model(&mut model, batch);
            assert_matches(&t, &model, round);
        }
        assert!(pending_seen > PENDING_MAX / 2, "the pending list was used");
        assert!(flushes > 0, "a full pending list went to the nodes");
        for (old, want) in kept {
            let got: Vec<u64> = old.iter().map(|x| x.e).collect();
            assert_eq!(got, want);
        }
        let settled = t.apply_to_nodes(&[]);
        assert!(settled.pending.is_none());
        assert_matches(&settled, &model, 1500);
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;
    use std::cell::Cell;
    use vev_core::Value;

    #[test]
    fn batch_visits_each_range_once_and_compares_little() {
        let datoms: Vec<Datom> = (0..100_000u64)
            .map(|i| Datom::new(i / 5 + 1000, 64 + i % 5, Value::Long(i as i64), 1, true))
            .collect();
        let tree = Tree::from_datoms(IndexOrder::Eavt, datoms);
        let keys: Vec<[u64; 2]> = (0..2500u64).map(|i| [1000 + i * 8, 66]).collect();
        let calls = Cell::new(0usize);
        let mut seen = Vec::new();
        tree.visit_batch(
            keys.len(),
            &|k, d| {
                calls.set(calls.get() + 1);
                [d.e, d.a] < keys[k]
            },
            &|k, d| {
                calls.set(calls.get() + 1);
                [d.e, d.a] > keys[k]
            },
            &mut |k, d| {
                seen.push((k, d.e));
                true
            },
        );
        assert_eq!(seen.len(), 2500);
        assert!(seen
            .iter()
            .enumerate()
            .all(|(i, (k, e))| *k == i && *e == 1000 + i as u64 * 8));
        assert!(calls.get() < 2500 * 30, "{} comparisons", calls.get());
    }
}
