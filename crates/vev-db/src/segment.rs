//! Index segments: persisted subtrees of the index trees, loaded on demand and cached.
//!
//! Why subtrees: a checkpoint must write only what changed since the last one, and opening a
//! database must read only the top of each tree. Every node at `SEGMENT_HEIGHT` (one level
//! above the leaves: a branch of up to 16 leaves, typically about 150 datoms) becomes one
//! segment; the branches above them form the
//! tree's *top*, which the root record holds. Trees share structure between versions, so a
//! segment that no transaction touched since the last checkpoint is still the same `Stored`
//! node and keeps its id: a checkpoint writes only the segments that transactions rewrote.
//!
//! Loading is lazy: a `Stored` node names its segment and the `SegmentCache` decodes it on the
//! first walk, keeping at most `capacity_datoms` decoded datoms (least recently used out).
//!
//! A segment that cannot be read or decoded gives the walk an empty node, so the walk itself
//! cannot fail; instead the cache counts the failure and keeps its error. Every operation that
//! reads takes a `FailureMark` before it starts and asks `failure_since` when it is done (a
//! scan iterator after each item), and returns the error instead of a short answer. A
//! corrupt segment (`storage/corruption`) fails every later read too; any other failure (a
//! `storage/io` read error) fails only the reads that were running when it happened, and is
//! not cached, so the next read of that segment tries the store again.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, OnceLock};

use vev_core::{Datom, IndexOrder, StorageError};

use crate::codec::{err, DatomDelta, DecodeError, DecodeResult, Reader, Writer};
use crate::tree::{
    branch_entry, leaf_entry, node_size, Change, Entry, Node, Pending, Stored, Tree,
};

/// Nodes at this height (0 = leaf) are persisted as one segment each. Height 1 (about 150
/// datoms) rather than 2 (about 1,700): a transaction on a database larger than the cache
/// loads a few small segments (a first-touch transaction on a large database was about
/// 2.5× faster), and a checkpoint after scattered updates rewrites less; the price is a
/// larger root (about ten times as large, and so slower to open) and slower bulk loads. Compare
/// `bench/history/2026-11-30-1118-storage.md` (two levels) with `2026-11-30-1156-storage.md`.
pub const SEGMENT_HEIGHT: u32 = 1;

/// Trees are never deeper than this; deeper bytes are corrupt.
const TREE_DEPTH_MAX: usize = 32;

const KIND_SEGMENT: u8 = 1;
const TAG_LEAF: u8 = 0;
const TAG_BRANCH: u8 = 1;
const TAG_REF: u8 = 2;

/// Where segment bytes come from (the storage backend).
pub trait SegmentStore: Send + Sync {
    /// The payload of segment `id`, its checksum already verified.
    fn read_segment(&self, id: u64) -> Result<Vec<u8>, StorageError>;

    /// The payload of full-text segment `id`, its checksum already verified; `doc_first`
    /// is the first document of its manifest entry (a store may keep a small segment with
    /// the entry). A store without full-text segments has none to give.
    fn read_fulltext_segment(&self, id: u64, doc_first: u64) -> Result<Vec<u8>, StorageError> {
        let _ = doc_first;
        Err(StorageError::corruption(
            format!("full-text segment {id}"),
            "this store holds no full-text segments",
        ))
    }

    /// The log records of the transactions `first..=last` (basis-t), in order, each checked
    /// and decoded; a missing one is corruption. A store without a log has none to give.
    fn read_log(
        &self,
        first: vev_core::BasisT,
        last: vev_core::BasisT,
    ) -> Result<Vec<crate::persist::LogRecord>, StorageError> {
        Err(StorageError::corruption(
            format!("log records {first} to {last}"),
            "this store holds no log",
        ))
    }
}

/// How many locks the decoded index segments are spread over (`SegmentCache::lru`).
const LRU_SHARDS: usize = 16;

/// Datoms a shard may hold at least: a smaller cache has fewer shards.
const LRU_SHARD_MIN: usize = 1 << 16;

/// Decoded full-text segments kept, by their approximate size in memory.
pub const FULLTEXT_CACHE_BYTES: usize = 256 << 20;

/// How many eighths of its capacity a full cache keeps when it evicts. Evicting down to half
/// made a cache that the working set nearly filled drop half of that set at once: `pgbench -i
/// -s 8` through `vev serve` filled every shard at its checkpoint, and the first select-only
/// run after it read 10,839 pages from the file in 10 s, where a warm one read 747. Each
/// eviction sorts the shard's entries (a few thousand segments): after one, an eighth of the
/// capacity is loaded before the next.
const EVICT_KEEPS_EIGHTHS: usize = 7;

/// Least-recently-used entries by id, each with its size (datoms, or bytes) and last use.
struct Lru<V> {
    map: hashbrown::HashMap<u64, (V, usize, u64)>,
    tick: u64,
    /// The entries' sizes added up.
    size: usize,
}

impl<V: Clone> Lru<V> {
    fn new() -> Lru<V> {
        Lru {
            map: hashbrown::HashMap::new(),
            tick: 0,
            size: 0,
        }
    }

    fn get(&mut self, id: u64) -> Option<V> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&id).map(|hit| {
            hit.2 = tick;
            hit.0.clone()
        })
    }

    /// Keep `value`; past `capacity`, evict the least recently used entries down to
    /// `EVICT_KEEPS_EIGHTHS` eighths of it in one pass, so the scan over the map is amortised
    /// over many loads.
    fn insert(&mut self, id: u64, value: V, size: usize, capacity: usize) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, old, _)) = self.map.insert(id, (value, size, tick)) {
            self.size -= old;
        }
        self.size += size;
        if self.size <= capacity {
            return;
        }
        let mut ticks: Vec<(u64, u64, usize)> = self
            .map
            .iter()
            .map(|(id, (_, n, t))| (*t, *id, *n))
            .collect();
        ticks.sort_unstable();
        for (_, id, n) in ticks {
            if self.size <= capacity / 8 * EVICT_KEEPS_EIGHTHS {
                break;
            }
            self.map.remove(&id);
            self.size -= n;
        }
    }
}

/// Decoded segments, shared by every `Db` of one database.
pub struct SegmentCache {
    store: Arc<dyn SegmentStore>,
    capacity_datoms: usize,
    /// Decoded index segments in up to `LRU_SHARDS` caches by id, each holding up to its
    /// share of `capacity_datoms` (at least `LRU_SHARD_MIN`): readers on several threads (a
    /// parallel scan) then rarely wait on the same lock, which each takes for every segment
    /// it walks into.
    lru: Box<[Mutex<Lru<Node>>]>,
    /// The first corruption found: it stays.
    corruption: OnceLock<StorageError>,
    /// Failed loads so far, and the latest one's error.
    failures: AtomicU64,
    last_failure: Mutex<Option<StorageError>>,
    loads: AtomicU64,
    fulltext: Mutex<Lru<Arc<crate::fulltext::Segment>>>,
}

impl SegmentCache {
    /// A cache that reads segments from `store` and holds up to `capacity_datoms` decoded
    /// datoms: past that, the least recently used segments are evicted down to 7/8 of it.
    pub fn new(store: Arc<dyn SegmentStore>, capacity_datoms: usize) -> Arc<SegmentCache> {
        Arc::new(SegmentCache {
            store,
            capacity_datoms,
            lru: (0..(capacity_datoms / LRU_SHARD_MIN).clamp(1, LRU_SHARDS))
                .map(|_| Mutex::new(Lru::new()))
                .collect(),
            corruption: OnceLock::new(),
            failures: AtomicU64::new(0),
            last_failure: Mutex::new(None),
            loads: AtomicU64::new(0),
            fulltext: Mutex::new(Lru::new()),
        })
    }

    /// The mark a read takes before it starts: how many loads had failed so far.
    pub fn mark(&self) -> u64 {
        self.failures.load(AtomicOrdering::Acquire)
    }

    /// The failure a read that took `mark` must report: the corruption found so far, if any,
    /// else a load that failed after the mark was taken (in any thread: a read may be failed
    /// by another's transient error that it did not need, never passed by one it did).
    pub fn failure_since(&self, mark: u64) -> Option<StorageError> {
        if let Some(c) = self.corruption.get() {
            return Some(c.clone());
        }
        if self.failures.load(AtomicOrdering::Acquire) == mark {
            return None;
        }
        let last = vev_core::sync::lock(&self.last_failure);
        last.clone()
    }

    /// Record a failure (of a load, or found outside the cache, e.g. by `verify`).
    pub fn fail(&self, e: StorageError) {
        if matches!(e, StorageError::Corruption { .. }) {
            let _ = self.corruption.set(e.clone());
        }
        *vev_core::sync::lock(&self.last_failure) = Some(e);
        self.failures.fetch_add(1, AtomicOrdering::AcqRel);
    }

    /// The store's log records of the transactions `first..=last` (not cached: the log is
    /// read by `tx_range`, seldom and in order). A corruption is also kept as the cache's
    /// (so every later read fails too, as with a corrupt segment). Public for `vev copy`,
    /// which moves the records themselves to another store.
    pub fn read_log(
        &self,
        first: vev_core::BasisT,
        last: vev_core::BasisT,
    ) -> Result<Vec<crate::persist::LogRecord>, StorageError> {
        if let Some(c) = self.corruption.get() {
            return Err(c.clone());
        }
        let records = self.store.read_log(first, last).inspect_err(|e| {
            if matches!(e, StorageError::Corruption { .. }) {
                self.fail(e.clone());
            }
        })?;
        let expected = (last - first + 1) as usize;
        if records.len() != expected || records.iter().zip(first..).any(|(r, t)| r.t != t) {
            let e = StorageError::corruption(
                format!("log records {first} to {last}"),
                format!(
                    "the store gave {} records, not those {expected}",
                    records.len()
                ),
            );
            self.fail(e.clone());
            return Err(e);
        }
        Ok(records)
    }

    /// How many segments have been read from the store so far.
    pub fn loads(&self) -> u64 {
        self.loads.load(AtomicOrdering::Relaxed)
    }

    /// Decoded datoms held now.
    pub fn cached_datoms(&self) -> usize {
        self.lru.iter().map(|l| vev_core::sync::lock(l).size).sum()
    }

    /// The shard that holds segment `id`.
    fn lock(&self, id: u64) -> std::sync::MutexGuard<'_, Lru<Node>> {
        vev_core::sync::lock(&self.lru[(id % self.lru.len() as u64) as usize])
    }

    pub(crate) fn load(&self, s: &Stored) -> Node {
        if let Some(hit) = self.lock(s.id).get(s.id) {
            return hit;
        }
        self.loads.fetch_add(1, AtomicOrdering::Relaxed);
        let loaded = self.store.read_segment(s.id).and_then(|bytes| {
            decode_segment(&bytes, s)
                .map_err(|e| StorageError::corruption(format!("segment {}", s.id), e.0))
        });
        match loaded {
            Ok(node) => {
                self.insert(s.id, node.clone(), s.size);
                node
            }
            Err(e) => {
                self.fail(e);
                Node::Leaf(Arc::from(Vec::new()))
            }
        }
    }

    /// Full-text segment `id`, decoded (from the cache, or read and decoded now). `None`
    /// when it cannot be: the failure is recorded as for index segments.
    pub(crate) fn load_fulltext(
        &self,
        id: u64,
        doc_first: u64,
    ) -> Option<Arc<crate::fulltext::Segment>> {
        if let Some(hit) = vev_core::sync::lock(&self.fulltext).get(id) {
            return Some(hit);
        }
        self.loads.fetch_add(1, AtomicOrdering::Relaxed);
        let what = || format!("full-text segment {id}");
        let loaded = self
            .store
            .read_fulltext_segment(id, doc_first)
            .and_then(|bytes| {
                crate::fulltext::Segment::decode(&bytes)
                    .map_err(|e| StorageError::corruption(what(), e.0))
            });
        match loaded {
            Ok(seg) => {
                let seg = Arc::new(seg);
                self.insert_fulltext(id, seg.clone());
                Some(seg)
            }
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// Keep a decoded full-text segment (one just written, say) under `id`.
    pub(crate) fn insert_fulltext(&self, id: u64, seg: Arc<crate::fulltext::Segment>) {
        let size = seg.size_bytes();
        vev_core::sync::lock(&self.fulltext).insert(id, seg, size, FULLTEXT_CACHE_BYTES);
    }

    pub(crate) fn insert(&self, id: u64, node: Node, size: usize) {
        let capacity = self.capacity_datoms / self.lru.len();
        self.lock(id).insert(id, node, size, capacity);
    }
}

fn height(node: &Node) -> u32 {
    match node {
        Node::Leaf(_) => 0,
        Node::Branch(b) => 1 + height(&b.children[0]),
        Node::Stored(s) => s.height,
    }
}

fn loaded(node: &Node) -> Node {
    match node {
        Node::Stored(s) => s.cache.load(s),
        other => other.clone(),
    }
}

/// The payload of one segment: kind, height, then the subtree (leaves hold delta-coded
/// datoms; one delta run through the whole segment), packed (`compress.rs`: LZ4 when that
/// makes it shorter).
fn encode_segment(node: &Node, h: u32, size: usize) -> Vec<u8> {
    let mut w = Writer {
        buf: Vec::with_capacity(16 + size * 12),
    };
    w.u8(KIND_SEGMENT);
    w.varint(u64::from(h));
    let mut delta = DatomDelta::new();
    encode_node(&mut w, &mut delta, node);
    crate::compress::pack(w.buf)
}

fn encode_node(w: &mut Writer, delta: &mut DatomDelta, node: &Node) {
    match loaded(node) {
        Node::Leaf(items) => {
            w.u8(TAG_LEAF);
            w.varint(items.len() as u64);
            for d in items.iter() {
                delta.write(w, d);
            }
        }
        Node::Branch(b) => {
            w.u8(TAG_BRANCH);
            w.varint(b.children.len() as u64);
            for c in &b.children {
                encode_node(w, delta, c);
            }
        }
        Node::Stored(_) => unreachable!("loading never yields a stored node"),
    }
}

fn decode_segment(bytes: &[u8], s: &Stored) -> DecodeResult<Node> {
    let bytes = crate::compress::unpack(bytes)?;
    let bytes = bytes.as_ref();
    let mut r = Reader::sharing_strings(bytes);
    let kind = r.u8()?;
    if kind != KIND_SEGMENT {
        return err(format!(
            "record kind {kind}, expected a segment ({KIND_SEGMENT})"
        ));
    }
    let h = r.varint()?;
    if h != u64::from(s.height) {
        return err(format!("height {h}, but the root says {}", s.height));
    }
    let mut delta = DatomDelta::new();
    let entry = decode_node(&mut r, &mut delta, 0)?;
    if !r.is_at_end() {
        return err(format!("{} trailing bytes", bytes.len() - r.position()));
    }
    if entry.size != s.size {
        return err(format!(
            "{} datoms, but the root says {}",
            entry.size, s.size
        ));
    }
    Ok(entry.node)
}

fn decode_node(r: &mut Reader<'_>, delta: &mut DatomDelta, depth: usize) -> DecodeResult<Entry> {
    if depth > TREE_DEPTH_MAX {
        return err("nodes nested deeper than 32");
    }
    match r.u8()? {
        TAG_LEAF => {
            let n = r.count()?;
            if n == 0 {
                return err("empty leaf");
            }
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(delta.read(r)?);
            }
            Ok(leaf_entry(items))
        }
        TAG_BRANCH => {
            let n = r.count()?;
            if n == 0 {
                return err("empty branch");
            }
            let mut children = Vec::with_capacity(n);
            for _ in 0..n {
                children.push(decode_node(r, delta, depth + 1)?);
            }
            Ok(branch_entry(children))
        }
        tag => err(format!("unknown node tag {tag}")),
    }
}

/// A segment a checkpoint must write.
pub struct NewSegment {
    /// The segment's id, unique in the database; `Stored` nodes and roots name it.
    pub id: u64,
    /// The encoded subtree, as [`SegmentStore::read_segment`] must give it back (the
    /// backend adds and checks its own checksum).
    pub payload: Vec<u8>,
}

/// Write `tree`'s top into `w` (its segments into `out`, new ids from `next_id`), then its
/// pending changes, and return the same tree with every segment-height node replaced by its
/// `Stored` reference.
pub(crate) fn persist_tree(
    tree: &Tree,
    cache: &Arc<SegmentCache>,
    next_id: &AtomicU64,
    out: &mut Vec<NewSegment>,
    swaps: &mut Vec<(usize, Arc<Stored>)>,
    w: &mut Writer,
) -> Tree {
    w.u8(order_code(tree.order));
    w.varint(tree.len as u64);
    let root = match &tree.root {
        None => {
            w.u8(0);
            None
        }
        Some(root) => {
            w.u8(1);
            let seg_h = SEGMENT_HEIGHT.min(height(root));
            let min = first_datom(root);
            let mut ctx = PersistCtx {
                seg_h,
                cache,
                next_id,
                out,
                swaps,
                w: &mut *w,
            };
            Some(persist_node(root, &min, node_size(root), &mut ctx))
        }
    };
    let pending = tree
        .pending
        .as_ref()
        .map_or_else(Vec::new, |p| p.flattened(tree.order));
    w.varint(pending.len() as u64);
    for c in &pending {
        w.u8(c.insert as u8);
    }
    let mut delta = DatomDelta::new();
    for c in &pending {
        delta.write(w, &c.datom);
    }
    Tree {
        order: tree.order,
        root,
        len: tree.len,
        pending: tree.pending.clone(),
    }
}

fn first_datom(node: &Node) -> Datom {
    match loaded(node) {
        Node::Leaf(items) => items
            .first()
            .cloned()
            .unwrap_or_else(|| Datom::new(0, 0, vev_core::Value::Nil, 0, false)),
        Node::Branch(b) => b.mins[0].clone(),
        Node::Stored(_) => unreachable!("loading never yields a stored node"),
    }
}

struct PersistCtx<'a> {
    seg_h: u32,
    cache: &'a Arc<SegmentCache>,
    next_id: &'a AtomicU64,
    out: &'a mut Vec<NewSegment>,
    /// In-memory nodes that became segments: (node address, its reference), for `rebase`.
    swaps: &'a mut Vec<(usize, Arc<Stored>)>,
    w: &'a mut Writer,
}

/// The address of an in-memory node (its `Arc`'s), as the key `rebase` matches on.
fn node_addr(node: &Node) -> Option<usize> {
    match node {
        Node::Leaf(a) => Some(Arc::as_ptr(a) as *const () as usize),
        Node::Branch(a) => Some(Arc::as_ptr(a) as *const () as usize),
        Node::Stored(_) => None,
    }
}

fn persist_node(node: &Node, min: &Datom, size: usize, cx: &mut PersistCtx<'_>) -> Node {
    let h = height(node);
    if h <= cx.seg_h {
        let stored = match node {
            Node::Stored(s) if Arc::ptr_eq(&s.cache, cx.cache) && s.height == h => s.clone(),
            _ => {
                let id = cx.next_id.fetch_add(1, AtomicOrdering::Relaxed);
                cx.out.push(NewSegment {
                    id,
                    payload: encode_segment(node, h, size),
                });
                cx.cache.insert(id, loaded(node), size);
                let stored = Arc::new(Stored {
                    id,
                    size,
                    height: h,
                    cache: cx.cache.clone(),
                });
                if let Some(addr) = node_addr(node) {
                    cx.swaps.push((addr, stored.clone()));
                }
                stored
            }
        };
        let w = &mut *cx.w;
        w.u8(TAG_REF);
        w.varint(stored.id);
        w.varint(stored.size as u64);
        w.varint(u64::from(stored.height));
        DatomDelta::new().write(w, min);
        return Node::Stored(stored);
    }
    let Node::Branch(b) = loaded(node) else {
        unreachable!("a node above the segment height is a branch")
    };
    cx.w.u8(TAG_BRANCH);
    cx.w.varint(b.children.len() as u64);
    let children = b
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| persist_node(c, &b.mins[i], b.sizes[i], cx))
        .collect();
    Node::Branch(Arc::new(crate::tree::Branch {
        children,
        mins: b.mins.clone(),
        sizes: b.sizes.clone(),
    }))
}

/// `tree` with every node that a checkpoint persisted (found by address in `swaps`) replaced
/// by its segment reference. Subtrees without such nodes are shared, not copied. The
/// checkpointed database must be alive while this runs, so no address was reused.
pub(crate) fn rebase_tree(tree: &Tree, swaps: &hashbrown::HashMap<usize, Arc<Stored>>) -> Tree {
    let root = tree
        .root
        .as_ref()
        .map(|r| rebase_node(r, swaps).unwrap_or_else(|| r.clone()));
    Tree {
        order: tree.order,
        root,
        len: tree.len,
        pending: tree.pending.clone(),
    }
}

fn rebase_node(node: &Node, swaps: &hashbrown::HashMap<usize, Arc<Stored>>) -> Option<Node> {
    if let Some(s) = node_addr(node).and_then(|a| swaps.get(&a)) {
        return Some(Node::Stored(s.clone()));
    }
    let Node::Branch(b) = node else {
        return None;
    };
    if height(node) <= SEGMENT_HEIGHT {
        return None;
    }
    let mut changed = false;
    let children: crate::tree::Children = b
        .children
        .iter()
        .map(|c| match rebase_node(c, swaps) {
            Some(n) => {
                changed = true;
                n
            }
            None => c.clone(),
        })
        .collect();
    changed.then(|| {
        Node::Branch(Arc::new(crate::tree::Branch {
            children,
            mins: b.mins.clone(),
            sizes: b.sizes.clone(),
        }))
    })
}

/// Read a tree written by `persist_tree`; segments stay unloaded.
pub(crate) fn read_tree(
    r: &mut Reader<'_>,
    expect: IndexOrder,
    cache: &Arc<SegmentCache>,
) -> DecodeResult<Tree> {
    let code = r.u8()?;
    if code != order_code(expect) {
        return err(format!(
            "tree order code {code}, expected {} ({expect:?})",
            order_code(expect)
        ));
    }
    let len = usize::try_from(r.varint()?).map_err(|_| DecodeError("tree length".into()))?;
    let root = match r.u8()? {
        0 => None,
        1 => Some(read_top(r, cache, 0)?),
        b => return err(format!("tree presence byte {b}")),
    };
    let size = root.as_ref().map_or(0, |e| e.size);
    let n = r.count()?;
    let mut flags = Vec::with_capacity(n);
    for _ in 0..n {
        flags.push(match r.u8()? {
            0 => false,
            1 => true,
            b => return err(format!("pending change flag {b}")),
        });
    }
    let mut delta = DatomDelta::new();
    let mut pending: Vec<Change> = Vec::with_capacity(n);
    for insert in flags {
        let datom = delta.read(r)?;
        if let Some(prev) = pending.last() {
            if expect.cmp(&prev.datom, &datom) != std::cmp::Ordering::Less {
                return err(format!("{expect:?} tree's pending changes out of order"));
            }
        }
        pending.push(Change { datom, insert });
    }
    let inserts = pending.iter().filter(|c| c.insert).count();
    let removals = pending.len() - inserts;
    if removals > size || size - removals + inserts != len {
        return err(format!(
            "{expect:?} tree says {len} datoms but its segments hold {size} and its pending \
             changes add {inserts} and remove {removals}"
        ));
    }
    Ok(Tree {
        order: expect,
        root: root.map(|e| e.node),
        len,
        pending: (!pending.is_empty()).then(|| Pending::from_sorted(pending)),
    })
}

fn read_top(r: &mut Reader<'_>, cache: &Arc<SegmentCache>, depth: usize) -> DecodeResult<Entry> {
    if depth > TREE_DEPTH_MAX {
        return err("tree top nested deeper than 32");
    }
    match r.u8()? {
        TAG_REF => {
            let id = r.varint()?;
            let size = usize::try_from(r.varint()?).map_err(|_| DecodeError("size".into()))?;
            let height = u32::try_from(r.varint()?).map_err(|_| DecodeError("height".into()))?;
            if size == 0 || height > TREE_DEPTH_MAX as u32 {
                return err(format!(
                    "segment reference {id} with size {size}, height {height}"
                ));
            }
            let min = DatomDelta::new().read(r)?;
            let node = Node::Stored(Arc::new(Stored {
                id,
                size,
                height,
                cache: cache.clone(),
            }));
            debug_assert_eq!(node_size(&node), size);
            Ok(Entry { node, min, size })
        }
        TAG_BRANCH => {
            let n = r.count()?;
            if n == 0 {
                return err("empty branch in a tree top");
            }
            let mut children = Vec::with_capacity(n);
            for _ in 0..n {
                children.push(read_top(r, cache, depth + 1)?);
            }
            Ok(branch_entry(children))
        }
        tag => err(format!("unknown tree-top tag {tag}")),
    }
}

fn order_code(order: IndexOrder) -> u8 {
    match order {
        IndexOrder::Eavt => 0,
        IndexOrder::Aevt => 1,
        IndexOrder::Avet => 2,
        IndexOrder::Vaet => 3,
        IndexOrder::Log => 4,
    }
}

/// The segments a node references, found by walking the nodes in memory down to the first
/// segment reference on each path (nothing loads).
pub(crate) fn stored_ids(node: &Node) -> Vec<u64> {
    fn walk(node: &Node, out: &mut Vec<u64>) {
        match node {
            Node::Stored(s) => out.push(s.id),
            Node::Branch(b) => b.children.iter().for_each(|c| walk(c, out)),
            Node::Leaf(_) => {}
        }
    }
    let mut out = Vec::new();
    walk(node, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past its capacity the cache evicts the least recently used entries down to 7/8 of it
    /// (fails when it evicts down to half: 500 of the 1,000 datoms would go).
    #[test]
    fn a_full_cache_evicts_an_eighth_least_recently_used_first() {
        let mut lru: Lru<u64> = Lru::new();
        for id in 0..100 {
            lru.insert(id, id, 10, 1_000);
        }
        assert_eq!(lru.size, 1_000);
        // The first ten are used again: the next ten evicted are the ten after them.
        for id in 0..10 {
            assert_eq!(lru.get(id), Some(id));
        }
        lru.insert(100, 100, 10, 1_000);
        assert_eq!(lru.size, 870);
        assert!((0..10).all(|id| lru.map.contains_key(&id)));
        assert!((10..24).all(|id| !lru.map.contains_key(&id)));
        assert!((24..=100).all(|id| lru.map.contains_key(&id)));
    }
}
