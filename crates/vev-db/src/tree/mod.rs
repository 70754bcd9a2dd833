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
//! How a path copy stays cheap: each touched child is rebuilt in its slot, and a branch whose
//! rebuilt children keep their shape (one node, same first datom) keeps its shared list of
//! first datoms; a leaf with few changes places them by binary search; a branch keeps its
//! children and subtree sizes inline (one allocation, copied within its new `Arc` by
//! `Arc::make_mut`), so a small transaction allocates one block per branch and two per leaf.
//! A node no older `Db` shares is updated in place (bulk imports, replays), and a large batch
//! splits the root's children between two threads.
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

mod pending;
mod scan;
#[cfg(test)]
mod tests;

pub(crate) use pending::Pending;
use pending::{PendingMerge, PendingPos, PENDING_LOOSE_MAX, PENDING_MAX};
pub(crate) use scan::gallop;
use scan::{batch_node, visit_node};
pub use scan::{Iter, Runs};

// Small nodes keep path copies cheap: copying a branch bumps the reference count of each of
// its children (a cache miss apiece), so a transaction's cost is dominated by fanout × depth.
const LEAF_MAX: usize = 16;
const LEAF_TARGET: usize = 12;
const LEAF_MIN: usize = 4;
const BRANCH_MAX: usize = 16;
const BRANCH_TARGET: usize = 12;

#[derive(Clone)]
pub(crate) enum Node {
    /// Datoms in order, in one allocation with the reference counts (no `Vec` header
    /// between: one cache miss less per leaf a scan walks into, and no spare capacity).
    Leaf(Arc<[Datom]>),
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
    /// changes (the common case), so a path copy does not clone them. A slice in the `Arc`'s
    /// own allocation: a descent reads the datoms one pointer after the branch, not two.
    pub(crate) mins: Arc<[Datom]>,
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

/// How many changes a tree may keep pending before they are applied to its nodes.
///
/// Why two: applying the pending changes to the nodes copies a path per change, a cost the
/// first version to outgrow the bound pays. A database value that is read and dropped (what
/// `with` gives a SQL session for reading its block's own writes, while the commit applies
/// the same operations again to the latest database) would pay it once more for every such
/// value made from the same database; with a looser bound they leave it to the commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Bound {
    /// `PENDING_MAX`: for the versions a database's history is made of.
    Shared,
    /// `PENDING_LOOSE_MAX`: for a speculative value (`with`). Its pending lists may then be
    /// up to this long; a transaction applied to it later with `Shared` applies them to the
    /// nodes as soon as its `recent` list overflows.
    Loose,
}

impl Bound {
    fn max(self) -> usize {
        match self {
            Bound::Shared => PENDING_MAX,
            Bound::Loose => PENDING_LOOSE_MAX,
        }
    }
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
    /// bounds (`older`'s by `bound`) all of them are applied to the nodes as one batch.
    pub fn apply_through_pending(self, changes: &[Change], bound: Bound) -> Tree {
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
                // An import's batch, many times what can be pending: the pending changes go
                // to the nodes first and the batch after them, which is the same (each is
                // exact for the tree before it) without copying the batch to merge them in.
                Some(p) if changes.len() >= BATCH_PAST_PENDING => {
                    let tree = Tree::from_root(order, root, 0)
                        .merge_into_nodes(&p.flattened(order))
                        .merge_into_nodes(changes);
                    debug_assert_eq!(tree.len, len);
                    return tree;
                }
                Some(p) => Cow::Owned(merge_changes(order, &p.flattened(order), changes, true)),
            }
        } else {
            match pending
                .unwrap_or_default()
                .with(order, changes, bound.max())
            {
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
            leaf: scan::LeafAt::None,
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
                    it.leaf = scan::LeafAt::Owned(items);
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

    /// A cursor lending the datoms a run (leaf slice) at a time, from the first for which
    /// `below` is false (see `rank`), pending changes merged in.
    pub fn runs_from(&self, below: impl Fn(&Datom) -> bool) -> Runs {
        Runs::new(self.iter_from(below))
    }

    /// The datom at position `k` of the nodes, leaving pending changes out (so it may be off
    /// by as many places as there are pending changes before it); `None` past the end. Cheap
    /// (one descent by subtree sizes): for cutting a range into parts of about equal size.
    pub fn nth_in_nodes(&self, mut k: usize) -> Option<Datom> {
        let mut node = self.root.clone()?;
        loop {
            let next = match &node {
                Node::Leaf(items) => return items.get(k).cloned(),
                Node::Branch(b) => {
                    let mut child = None;
                    for (c, size) in b.sizes.iter().enumerate() {
                        if k < *size {
                            child = Some(b.children[c].clone());
                            break;
                        }
                        k -= size;
                    }
                    child?
                }
                Node::Stored(s) => s.load(),
            };
            node = next;
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
        Node::Leaf(mut items) => match Arc::get_mut(&mut items) {
            Some(owned) => leaf_merge_owned(order, take_datoms(owned), changes),
            None => leaf_merge(order, &items, changes),
        },
        Node::Stored(s) => apply_node_owned(order, s.load(), changes),
        Node::Branch(b) => apply_branch_owned(order, b, changes, false),
    }
}

/// The datoms of a slice no one else holds, moved out (a placeholder left behind): no
/// value is cloned.
fn take_datoms(owned: &mut [Datom]) -> Vec<Datom> {
    owned
        .iter_mut()
        .map(|d| std::mem::replace(d, Datom::new(0, 0, vev_core::Value::Nil, 0, false)))
        .collect()
}

/// The datoms of a shared slice: moved out when this is its last holder, else cloned.
fn unwrap_datoms(mut datoms: Arc<[Datom]>) -> Vec<Datom> {
    match Arc::get_mut(&mut datoms) {
        Some(owned) => take_datoms(owned),
        None => datoms.to_vec(),
    }
}

/// A placeholder for a child taken out of its slot while it is rebuilt (shared, so taking a
/// child allocates nothing).
fn vacant() -> Node {
    static EMPTY: std::sync::OnceLock<Arc<[Datom]>> = std::sync::OnceLock::new();
    Node::Leaf(EMPTY.get_or_init(|| Arc::from(Vec::new())).clone())
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
    let mins = unwrap_datoms(mins);
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
    let mins_owned = unwrap_datoms(mins);
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
    let (mut out, rest) = vev_core::par::join(|| run(work), || run(second));
    out.extend(rest);
    merge_small_leaves(&mut out);
    split_branch(out)
}

/// A batch of at least this many changes (16 times what may be pending) goes to the nodes
/// after the pending changes instead of being merged with them.
const BATCH_PAST_PENDING: usize = 16 * PENDING_LOOSE_MAX;

/// Batches with at least this many changes split the root's children between two threads.
const PARALLEL_APPLY_MIN: usize = 2048;

/// A leaf gets few changes (a small transaction's usual one): each is placed by binary
/// search rather than by comparing it with every datom of the leaf.
fn few_changes(items: usize, changes: usize) -> bool {
    changes * 4 <= items
}

/// Merge the sorted leaf (which the caller owns: its datoms move into the result) with the
/// sorted changes, then cut the result into leaves. A batch of at least
/// `PARALLEL_LEAF_MIN` changes (an import into a small tree lands in one leaf) is merged in
/// two halves, on this thread and one more: the datoms below the second half's first
/// change with the first half, the others with the second.
fn leaf_merge_owned(order: IndexOrder, mut items: Vec<Datom>, changes: &[Change]) -> Entries {
    if changes.len() < PARALLEL_LEAF_MIN {
        return leaf_merge_one(order, items, changes);
    }
    let (low, high) = changes.split_at(changes.len() / 2);
    let pivot = &high[0].datom;
    let upper = items.split_off(items.partition_point(|d| order.cmp(d, pivot) == Ordering::Less));
    let (mut out, rest) = vev_core::par::join(
        || leaf_merge_one(order, items, low),
        || leaf_merge_one(order, upper, high),
    );
    out.extend(rest);
    out
}

/// Batches with at least this many changes for one leaf are merged on two threads.
const PARALLEL_LEAF_MIN: usize = 16_384;

/// `leaf_merge_owned` on this thread.
fn leaf_merge_one(order: IndexOrder, mut items: Vec<Datom>, changes: &[Change]) -> Entries {
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
        node: Node::Leaf(Arc::from(items)),
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
        mins: Arc::from(mins),
        sizes,
    };
    Entry {
        node: Node::Branch(Arc::new(b)),
        min,
        size,
    }
}
