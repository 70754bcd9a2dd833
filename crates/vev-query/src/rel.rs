//! Relations: the bindings that flow between clauses, as compact rows.
//!
//! A [`Rel`] is a list of variables and a flat `Vec<Value>` holding `len` rows of
//! `vars.len()` values each. Clauses extend, filter and join relations; a variable that no
//! later clause needs is projected away (and the rows deduplicated, since query results are
//! sets over the find and `:with` variables).

use std::hash::BuildHasher;

use hashbrown::HashTable;
use vev_core::Value;

/// A variable of a compiled query scope.
pub(crate) type VarId = usize;

/// The scalar inputs' values by variable (a run looks them up at every step: foldhash, not
/// SipHash).
pub(crate) type Consts = std::collections::HashMap<VarId, Value, foldhash::fast::RandomState>;

/// A set of variables, as bits indexed by id (a scope numbers its variables from 0): what
/// each step of a run asks about the clauses after it, without hashing or allocating for the
/// first 128 ids.
#[derive(Clone, Debug, Default)]
pub(crate) struct VarSet(smallvec::SmallVec<[u64; 2]>);

impl VarSet {
    pub fn insert(&mut self, v: VarId) {
        let (word, bit) = (v / 64, v % 64);
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        self.0[word] |= 1 << bit;
    }

    pub fn contains(&self, v: VarId) -> bool {
        self.0.get(v / 64).is_some_and(|w| w & (1 << (v % 64)) != 0)
    }
}

impl FromIterator<VarId> for VarSet {
    fn from_iter<I: IntoIterator<Item = VarId>>(iter: I) -> VarSet {
        let mut set = VarSet::default();
        iter.into_iter().for_each(|v| set.insert(v));
        set
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Rel {
    pub vars: Vec<VarId>,
    pub data: Vec<Value>,
    pub len: usize,
    /// Known to hold no duplicate rows (so projections that keep every column need no
    /// deduplication). `false` means "not known", not "has duplicates".
    pub distinct: bool,
}

/// Relations with at least this many rows are checked for a sorted column before a
/// deduplicating projection.
const SORTED_PROJECTION_MIN: usize = 1024;

/// The hasher of rows: fast, and seeded per process.
pub(crate) fn hasher() -> foldhash::fast::RandomState {
    foldhash::fast::RandomState::default()
}

/// A row's hash over some columns. Entity ids and longs (most of what joins and rule tables
/// hash) are mixed in as words; other values are hashed through `Hash` first. A final
/// avalanche (MurmurHash3's) spreads every input bit over the high bits the table's tags
/// use and the low bits its buckets use. Equal values hash equally: values of different
/// types are never equal.
#[inline]
fn hash_cols(index: &RowIndex, row: &[Value], cols: &[usize]) -> u64 {
    let mut h = index.seed;
    for c in cols {
        h = mix(h, value_word(&index.state, &row[*c]));
    }
    finish(h)
}

/// A value as one word to hash: entity ids and longs as themselves, others through `Hash`.
#[inline]
pub(crate) fn value_word(state: &foldhash::fast::RandomState, v: &Value) -> u64 {
    match v {
        Value::Ref(e) => *e,
        Value::Long(n) => (*n as u64) ^ 0x9e37_79b9_7f4a_7c15,
        v => state.hash_one(v),
    }
}

/// One word more into a row's running hash.
#[inline]
pub(crate) fn mix(h: u64, word: u64) -> u64 {
    (h ^ word)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(31)
}

/// A running hash's final avalanche (MurmurHash3's).
#[inline]
pub(crate) fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Value equality with entity ids compared first (the common case in joins and rule tables).
#[inline]
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Ref(x), Value::Ref(y)) => x == y,
        _ => a == b,
    }
}

/// Groups rows by the values of some columns without building a key per row. Each entry
/// keeps its row's hash, so growing the table does not hash the rows again.
pub(crate) struct RowIndex {
    state: foldhash::fast::RandomState,
    /// Where every row's hash starts: random per index, so rows that collide in one index
    /// do not collide in the next.
    seed: u64,
    table: HashTable<(u64, usize)>,
}

impl RowIndex {
    pub fn with_capacity(n: usize) -> RowIndex {
        let state = hasher();
        RowIndex {
            seed: state.hash_one(0x5eed_u64),
            state,
            table: HashTable::with_capacity(n),
        }
    }

    /// Room for `n` more entries without growing.
    pub fn reserve(&mut self, n: usize) {
        self.table.reserve(n, |&(h, _)| h);
    }

    /// Insert row `i` of `rel` keyed by `cols` unless an equal key is present; returns the
    /// row index holding the key.
    pub fn insert(&mut self, rel: &Rel, cols: &[usize], i: usize) -> (usize, bool) {
        let row = rel.row(i);
        let hash = hash_cols(self, row, cols);
        let eq = |&(h, j): &(u64, usize)| {
            h == hash && {
                let other = rel.row(j);
                cols.iter().all(|c| values_equal(&row[*c], &other[*c]))
            }
        };
        if let Some(&(_, j)) = self.table.find(hash, eq) {
            return (j, false);
        }
        self.table.insert_unique(hash, (hash, i), |&(h, _)| h);
        (i, true)
    }

    /// The row of `rel` whose `cols` equal `probe_cols` of `probe`, if any.
    pub fn find(
        &self,
        rel: &Rel,
        cols: &[usize],
        probe: &[Value],
        probe_cols: &[usize],
    ) -> Option<usize> {
        let hash = hash_cols(self, probe, probe_cols);
        self.table
            .find(hash, |&(h, j)| {
                h == hash && {
                    let row = rel.row(j);
                    cols.iter()
                        .zip(probe_cols)
                        .all(|(a, b)| values_equal(&row[*a], &probe[*b]))
                }
            })
            .map(|&(_, j)| j)
    }
}

/// How two relations join: the columns of their shared variables on each side, and the
/// columns of the right one that the output adds after all of the left one's.
pub(crate) struct JoinShape {
    pub left_cols: Vec<usize>,
    pub right_cols: Vec<usize>,
    extra: Vec<usize>,
}

impl JoinShape {
    pub fn of(left: &Rel, right: &Rel) -> JoinShape {
        let shared = left.vars.iter().filter(|v| right.has(**v));
        JoinShape {
            left_cols: shared
                .clone()
                .map(|v| left.col(*v).expect("shared"))
                .collect(),
            right_cols: shared.map(|v| right.col(*v).expect("shared")).collect(),
            extra: (0..right.width())
                .filter(|c| !left.has(right.vars[*c]))
                .collect(),
        }
    }

    /// The empty output relation: the left variables, then the right one's extra ones.
    fn output(&self, left: &Rel, right: &Rel) -> Rel {
        let mut vars = left.vars.clone();
        vars.extend(self.extra.iter().map(|c| right.vars[*c]));
        let mut out = Rel::empty(vars);
        out.distinct = left.distinct && right.distinct;
        out
    }

    /// Append the joined row of a left and a right row.
    fn push(&self, out: &mut Rel, lrow: &[Value], rrow: &[Value]) {
        out.data.extend_from_slice(lrow);
        out.data.extend(self.extra.iter().map(|c| rrow[*c].clone()));
        out.len += 1;
    }
}

/// All rows of a relation grouped by some columns: a hash index of each key's first row,
/// and the rest of each key's rows chained after it.
pub(crate) struct ChainIndex {
    heads: RowIndex,
    next: Vec<usize>,
}

impl ChainIndex {
    pub fn build(rel: &Rel, cols: &[usize]) -> ChainIndex {
        let mut heads = RowIndex::with_capacity(rel.len);
        let mut next = vec![usize::MAX; rel.len];
        let mut last = vec![usize::MAX; rel.len];
        for i in 0..rel.len {
            let (head, fresh) = heads.insert(rel, cols, i);
            if fresh {
                last[i] = i;
            } else {
                next[last[head]] = i;
                last[head] = i;
            }
        }
        ChainIndex { heads, next }
    }

    /// The rows of `rel` (the relation indexed) whose `cols` equal `probe_cols` of `probe`.
    pub fn matches<'i>(
        &'i self,
        rel: &Rel,
        cols: &[usize],
        probe: &[Value],
        probe_cols: &[usize],
    ) -> impl Iterator<Item = usize> + 'i {
        let mut at = self
            .heads
            .find(rel, cols, probe, probe_cols)
            .unwrap_or(usize::MAX);
        std::iter::from_fn(move || {
            if at == usize::MAX {
                return None;
            }
            let i = at;
            at = self.next[i];
            Some(i)
        })
    }
}

impl Rel {
    /// The relation with no variables and one (empty) row: the identity of joins.
    pub fn unit() -> Rel {
        Rel {
            vars: Vec::new(),
            data: Vec::new(),
            len: 1,
            distinct: true,
        }
    }

    pub fn empty(vars: Vec<VarId>) -> Rel {
        Rel {
            vars,
            data: Vec::new(),
            len: 0,
            distinct: false,
        }
    }

    pub fn width(&self) -> usize {
        self.vars.len()
    }

    pub fn col(&self, var: VarId) -> Option<usize> {
        self.vars.iter().position(|v| *v == var)
    }

    pub fn has(&self, var: VarId) -> bool {
        self.vars.contains(&var)
    }

    pub fn row(&self, i: usize) -> &[Value] {
        let w = self.width();
        &self.data[i * w..(i + 1) * w]
    }

    pub fn rows(&self) -> impl Iterator<Item = &[Value]> {
        (0..self.len).map(move |i| self.row(i))
    }

    pub fn push_row(&mut self, row: &[Value]) {
        debug_assert_eq!(row.len(), self.width());
        self.data.extend_from_slice(row);
        self.len += 1;
    }

    /// `push_row` that moves the values out of `row` (leaving it empty).
    pub fn push_row_from(&mut self, row: &mut Vec<Value>) {
        debug_assert_eq!(row.len(), self.width());
        self.data.append(row);
        self.len += 1;
    }

    /// Keep only the rows for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&[Value]) -> bool) {
        let w = self.width();
        if w == 0 {
            if self.len > 0 && !keep(&[]) {
                self.len = 0;
            }
            return;
        }
        let mut out = Vec::with_capacity(self.data.len());
        let mut len = 0;
        for row in self.data.chunks(w) {
            if keep(row) {
                out.extend_from_slice(row);
                len += 1;
            }
        }
        self.data = out;
        self.len = len;
    }

    /// The relation over `vars` (a subset of this one's), deduplicated.
    pub fn project(&self, vars: &[VarId]) -> Rel {
        let cols: Vec<usize> = vars
            .iter()
            .map(|v| self.col(*v).expect("projected variable is bound"))
            .collect();
        let mut out = Rel::empty(vars.to_vec());
        out.distinct = true;
        if vars.is_empty() {
            out.len = usize::from(self.len > 0);
            return out;
        }
        let keeps_all = {
            let mut sorted = cols.clone();
            sorted.sort_unstable();
            sorted.dedup();
            sorted.len() == self.width()
        };
        if keeps_all && self.distinct {
            self.copy_columns(&cols, &mut out);
            return out;
        }
        out.data.reserve(self.len * cols.len());
        // A large relation sorted by a kept column (a scan of one attribute leaves it sorted
        // by entity) is deduplicated run by run; small ones fit the cache and hash fast.
        if self.len >= SORTED_PROJECTION_MIN {
            if let Some(&sorted) = cols.iter().find(|c| self.sorted_by(**c)) {
                self.project_sorted(&cols, sorted, &mut out);
                return out;
            }
        }
        let mut index = RowIndex::with_capacity(self.len);
        for i in 0..self.len {
            if index.insert(self, &cols, i).1 {
                let row = self.row(i);
                out.data.extend(cols.iter().map(|c| row[*c].clone()));
                out.len += 1;
            }
        }
        out
    }

    /// Whether column `c` never decreases from row to row.
    pub fn sorted_by(&self, c: usize) -> bool {
        (1..self.len).all(|i| self.row(i - 1)[c] <= self.row(i)[c])
    }

    /// `project` when the rows are sorted by column `sorted`, one of `cols`: equal projected
    /// rows then lie in one run of equal `sorted` values, so each row is compared with the
    /// rows kept from its run only (through a hash index once a run passes a few rows).
    fn project_sorted(&self, cols: &[usize], sorted: usize, out: &mut Rel) {
        const LINEAR_MAX: usize = 16;
        let out_cols: Vec<usize> = (0..cols.len()).collect();
        let mut run_start = 0;
        let mut run_index: Option<RowIndex> = None;
        for i in 0..self.len {
            let row = self.row(i);
            if i > 0 && self.row(i - 1)[sorted] != row[sorted] {
                run_start = out.len;
                run_index = None;
            }
            let duplicate = match &run_index {
                Some(_) => false,
                None => (run_start..out.len)
                    .any(|k| cols.iter().zip(out.row(k)).all(|(c, v)| row[*c] == *v)),
            };
            if duplicate {
                continue;
            }
            out.data.extend(cols.iter().map(|c| row[*c].clone()));
            out.len += 1;
            if let Some(index) = &mut run_index {
                if !index.insert(out, &out_cols, out.len - 1).1 {
                    out.len -= 1;
                    out.data.truncate(out.len * cols.len());
                }
            } else if out.len - run_start > LINEAR_MAX {
                let mut index = RowIndex::with_capacity(2 * LINEAR_MAX);
                for k in run_start..out.len {
                    index.insert(out, &out_cols, k);
                }
                run_index = Some(index);
            }
        }
    }

    /// `project`, without copying when the relation already is that projection.
    pub fn into_projection(mut self, vars: &[VarId]) -> Rel {
        if self.distinct && self.vars == vars {
            return self;
        }
        let mut cols: Vec<usize> = Vec::with_capacity(vars.len());
        for v in vars {
            match self.col(*v) {
                Some(c) if !cols.contains(&c) => cols.push(c),
                _ => return self.project(vars),
            }
        }
        if !self.distinct || cols.is_empty() || cols.len() != self.width() || self.len == 0 {
            return self.project(vars);
        }
        // Every column, reordered: the values swap places within their rows (no clone).
        // The swaps that take a row from the old order to the new, found once: `at[c]` is
        // where old column `c` is after the swaps so far, `held[i]` which one place i holds.
        let w = cols.len();
        let mut at: Vec<usize> = (0..w).collect();
        let mut held: Vec<usize> = (0..w).collect();
        let mut swaps: Vec<(usize, usize)> = Vec::new();
        for (k, &c) in cols.iter().enumerate() {
            let from = at[c];
            if from != k {
                swaps.push((k, from));
                let displaced = held[k];
                held.swap(k, from);
                at[c] = k;
                at[displaced] = from;
            }
        }
        for chunk in self.data[..w * self.len].chunks_exact_mut(w) {
            for &(i, j) in &swaps {
                chunk.swap(i, j);
            }
        }
        self.vars = vars.to_vec();
        self
    }

    /// Drop the variables not in `keep`, deduplicating when any is dropped.
    pub fn retain_vars(self, keep: impl Fn(VarId) -> bool) -> Rel {
        if self.vars.iter().all(|v| keep(*v)) {
            return self;
        }
        let vars: Vec<VarId> = self.vars.iter().copied().filter(|v| keep(*v)).collect();
        self.project(&vars)
    }

    /// `retain_vars` without removing the duplicate rows that dropping columns may leave.
    /// The kept values move down in place (no clones); the dropped ones are dropped.
    pub fn retain_vars_bag(mut self, keep: impl Fn(VarId) -> bool) -> Rel {
        if self.vars.iter().all(|v| keep(*v)) {
            return self;
        }
        let w = self.width();
        let cols: Vec<usize> = (0..w).filter(|c| keep(self.vars[*c])).collect();
        // Row r's k-th kept value goes to r * cols.len() + k, never after where it is (r * w
        // + cols[k]): every slot before the one read has been read already.
        let mut write = 0;
        for r in 0..self.len {
            for &c in &cols {
                self.data.swap(write, r * w + c);
                write += 1;
            }
        }
        self.data.truncate(write);
        self.vars = cols.iter().map(|c| self.vars[*c]).collect();
        self.distinct = false;
        self
    }

    /// Every row's `cols`, in order, into the empty `out`.
    fn copy_columns(&self, cols: &[usize], out: &mut Rel) {
        out.data.reserve(self.len * cols.len());
        for row in self.rows() {
            out.data.extend(cols.iter().map(|c| row[*c].clone()));
        }
        out.len = self.len;
    }

    /// `retain_vars` when every dropped variable holds one value in all rows (a scalar
    /// input): no two rows differ only there, so nothing needs deduplicating.
    pub fn retain_vars_constant(self, keep: impl Fn(VarId) -> bool) -> Rel {
        let distinct = self.distinct;
        let mut out = self.retain_vars_bag(keep);
        out.distinct = distinct;
        out
    }

    /// Remove duplicate rows, keeping the first of each.
    pub fn dedup(self) -> Rel {
        let vars = self.vars.clone();
        self.project(&vars)
    }

    /// The natural join of two relations (hash join on their shared variables; a cross
    /// product when they share none).
    pub fn join(&self, other: &Rel) -> Rel {
        let shape = JoinShape::of(self, other);
        if shape.left_cols.is_empty() || self.len.min(other.len) <= 1 || self.len * other.len <= 64
        {
            // A cross product, or a side of one row (a query's inputs and constants join
            // the unit relation every run): comparing the rows costs less than indexing one
            // side. The rows and their equality are the index's.
            let mut out = shape.output(self, other);
            for lrow in self.rows() {
                for rrow in other.rows() {
                    let same = shape
                        .left_cols
                        .iter()
                        .zip(&shape.right_cols)
                        .all(|(l, r)| values_equal(&lrow[*l], &rrow[*r]));
                    if same {
                        shape.push(&mut out, lrow, rrow);
                    }
                }
            }
            return out;
        }
        if other.len > self.len {
            // Index the smaller side by its shared columns (each key chains its rows).
            let index = ChainIndex::build(self, &shape.left_cols);
            return self.join_indexed(&index, other, &shape);
        }
        let index = ChainIndex::build(other, &shape.right_cols);
        let mut out = shape.output(self, other);
        for lrow in self.rows() {
            for j in index.matches(other, &shape.right_cols, lrow, &shape.left_cols) {
                shape.push(&mut out, lrow, other.row(j));
            }
        }
        out
    }

    /// `self.join(other)` with `self` already indexed by its columns shared with `other`
    /// (`shape.left_cols`), probed with each row of `other`. The rows are `join`'s; their
    /// order follows `other`.
    pub(crate) fn join_indexed(&self, index: &ChainIndex, other: &Rel, shape: &JoinShape) -> Rel {
        let mut out = shape.output(self, other);
        for rrow in other.rows() {
            for j in index.matches(self, &shape.left_cols, rrow, &shape.right_cols) {
                shape.push(&mut out, self.row(j), rrow);
            }
        }
        out
    }

    /// Append the rows of `other`, which has the same variables in any order.
    pub fn union_in(&mut self, other: &Rel) {
        let cols: Vec<usize> = self
            .vars
            .iter()
            .map(|v| other.col(*v).expect("union over the same variables"))
            .collect();
        for row in other.rows() {
            for c in &cols {
                self.data.push(row[*c].clone());
            }
            self.len += 1;
        }
        self.distinct = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A `VarSet` holds exactly the ids put in it, below and past its inline 128 bits.
        #[test]
        fn a_var_set_holds_what_was_inserted(ids in proptest::collection::vec(0usize..300, 0..40)) {
            let set: VarSet = ids.iter().copied().collect();
            for v in 0..320 {
                prop_assert_eq!(set.contains(v), ids.contains(&v), "id {}", v);
            }
        }
    }

    /// A distinct relation of `rows` rows over variables `0..width`, longs and strings.
    fn distinct_rel(width: usize, rows: usize) -> Rel {
        let mut rel = Rel::empty((0..width).collect());
        for r in 0..rows {
            let row: Vec<Value> = (0..width)
                .map(|c| {
                    if c % 2 == 0 {
                        Value::Long((r * 10 + c) as i64)
                    } else {
                        Value::string(&format!("{r}-{c}"))
                    }
                })
                .collect();
            rel.push_row(&row);
        }
        rel.distinct = true;
        rel
    }

    proptest! {
        /// The in-place compaction keeps, in order, exactly the kept columns of every row.
        #[test]
        fn retain_vars_bag_keeps_the_kept_columns(
            width in 1usize..6,
            rows in 0usize..20,
            keep_mask in 0u32..64,
        ) {
            let rel = distinct_rel(width, rows);
            let keep = |v: VarId| keep_mask & (1 << v) != 0;
            let kept: Vec<usize> = (0..width).filter(|c| keep(*c)).collect();
            let expected: Vec<Vec<Value>> = rel
                .rows()
                .map(|row| kept.iter().map(|c| row[*c].clone()).collect())
                .collect();
            let out = rel.retain_vars_constant(keep);
            prop_assert_eq!(&out.vars, &kept);
            prop_assert_eq!(out.len, rows);
            prop_assert_eq!(out.data.len(), rows * kept.len());
            prop_assert!(out.distinct);
            let got: Vec<Vec<Value>> = (0..out.len).map(|i| out.row(i).to_vec()).collect();
            prop_assert_eq!(got, expected);
        }

        /// Reordering every column of a distinct relation in place gives each row's values
        /// in the new order, as the copying projection does.
        #[test]
        fn into_projection_reorders_the_columns_in_place(
            width in 1usize..7,
            rows in 0usize..12,
            order in Just(()).prop_perturb(|_, mut rng| rng.random::<u64>()),
        ) {
            let mut vars: Vec<VarId> = (0..width).collect();
            // A permutation of the columns from `order`'s bits (Fisher-Yates).
            let mut bits = order;
            for i in (1..width).rev() {
                let j = (bits % (i as u64 + 1)) as usize;
                bits /= i as u64 + 1;
                vars.swap(i, j);
            }
            let rel = distinct_rel(width, rows);
            let want = rel.project(&vars);
            let got = rel.into_projection(&vars);
            prop_assert_eq!(&got.vars, &vars);
            prop_assert_eq!(got.len, rows);
            let rows_of = |r: &Rel| (0..r.len).map(|i| r.row(i).to_vec()).collect::<Vec<_>>();
            prop_assert_eq!(rows_of(&got), rows_of(&want));
        }

        /// `join` gives every pair of rows that agree on the shared variables, with the
        /// left row's values then the right one's others, whatever the sizes (a nested loop
        /// for one-row sides, cross products and small ones; a hash join otherwise). Values
        /// are few, of several types (a ref and a long of one number differ), so keys repeat.
        #[test]
        fn join_pairs_the_rows_that_agree(
            left in proptest::collection::vec(proptest::collection::vec(0u8..6, 3), 0..30),
            right in proptest::collection::vec(proptest::collection::vec(0u8..6, 3), 0..30),
            shared in 0usize..3,
        ) {
            let value = |x: u8| match x % 3 {
                0 => Value::Long(i64::from(x)),
                1 => Value::Ref(u64::from(x)),
                _ => Value::string(&x.to_string()),
            };
            // Left vars 0, 1, 2; right vars: the first `shared` of them, then 10, 11, ...
            let lvars: Vec<VarId> = vec![0, 1, 2];
            let rvars: Vec<VarId> = (0..3).map(|i| if i < shared { i } else { 10 + i }).collect();
            let mut l = Rel::empty(lvars.clone());
            for row in &left {
                l.push_row(&row.iter().map(|x| value(*x)).collect::<Vec<_>>());
            }
            let mut r = Rel::empty(rvars.clone());
            for row in &right {
                r.push_row(&row.iter().map(|x| value(*x)).collect::<Vec<_>>());
            }
            let mut expected: Vec<Vec<Value>> = Vec::new();
            for lrow in l.rows() {
                for rrow in r.rows() {
                    if (0..shared).all(|i| lrow[i] == rrow[i]) {
                        let mut row = lrow.to_vec();
                        row.extend(rrow[shared..].iter().cloned());
                        expected.push(row);
                    }
                }
            }
            let out = l.join(&r);
            let mut vars = lvars.clone();
            vars.extend(&rvars[shared..]);
            prop_assert_eq!(&out.vars, &vars);
            let mut got: Vec<Vec<Value>> = (0..out.len).map(|i| out.row(i).to_vec()).collect();
            got.sort();
            expected.sort();
            prop_assert_eq!(got, expected);
        }
    }
}
