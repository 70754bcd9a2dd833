//! Matching one data pattern against a source, joined with the bindings so far.
//!
//! A pattern's positions are constants (resolved once against the source's schema), variables
//! bound by the relation (resolved per row), new variables, or blanks. The known positions pick
//! the index: `[e a]` → EAVT, `[a v]` → AVET, `[a]` → AEVT (or an AVET range when predicates
//! bound the value), `[v]` of a ref → VAET. When rows supply part of the prefix, all rows'
//! prefixes are sorted and handed to the source as one batch, so the index is walked once.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use vev_core::{ids, Attribute, Component, Datom, EntityId, IndexOrder, Value};
use vev_edn::{Edn, Span};

use crate::compile::CTerm;
use crate::error::QueryError;
use crate::funcs::values_equal;
use crate::rel::{ChainIndex, Rel, VarId};
use crate::source::Source;
use crate::values::{coerce_to, edn_to_value, resolve_entity};

mod star;

pub(crate) use star::{Star, StarValue};

const E: usize = 0;
const A: usize = 1;
const V: usize = 2;
const T: usize = 3;
const ADDED: usize = 4;

/// What one position of the pattern is, for this execution.
#[derive(Clone, Debug)]
enum Slot {
    /// A constant, as the datom holds it.
    Const(Value),
    /// A variable bound by the relation: its column.
    Bound(usize),
    /// A new variable (its first position in the pattern).
    Free(VarId),
    /// The same new variable as an earlier position.
    Same(usize),
    Blank,
}

/// A value range on the pattern's value, from predicates on it.
pub(crate) type Range = (Bound<Value>, Bound<Value>);

/// How a prepared pattern is scanned.
struct ScanPlan {
    /// The index read.
    order: IndexOrder,
    /// The positions (in the index's order) whose values form the scan prefix.
    prefix: Vec<usize>,
    /// The positions checked per datom: known but not in the prefix, and repeats.
    checks: Vec<usize>,
    /// The positions of new variables, whose values each match adds.
    free_pos: Vec<usize>,
}

/// A pattern prepared against one source and the current relation.
pub(crate) struct Prepared<'s> {
    src: &'s dyn Source,
    slots: [Slot; 5],
    /// The attribute, when the pattern names one.
    attr: Option<Arc<Attribute>>,
    /// The new variables, in the order their columns are appended.
    pub new_vars: Vec<VarId>,
    /// A constant names nothing in the source: the pattern matches nothing.
    pub impossible: bool,
    pub range: Option<Range>,
    /// One lookup per row instead of one batch (the naive plan).
    pub naive: bool,
}

/// At most this many values are reserved ahead of a scan from its estimate (more grow as
/// usual), so a wrong estimate cannot claim much memory.
const SCAN_RESERVE_MAX: usize = 1 << 20;

impl<'s> Prepared<'s> {
    pub fn new(
        src: &'s dyn Source,
        terms: &[CTerm; 5],
        rel: &Rel,
        span: Span,
    ) -> Result<Prepared<'s>, QueryError> {
        let mut p = Prepared {
            src,
            slots: [
                Slot::Blank,
                Slot::Blank,
                Slot::Blank,
                Slot::Blank,
                Slot::Blank,
            ],
            attr: None,
            new_vars: Vec::new(),
            impossible: false,
            range: None,
            naive: false,
        };
        // The attribute first: constants in value position are typed by it.
        let order = [A, E, V, T, ADDED];
        let mut first_pos: Vec<(VarId, usize)> = Vec::new();
        for pos in order {
            p.slots[pos] = match &terms[pos] {
                CTerm::Blank => Slot::Blank,
                CTerm::Var(v) => {
                    if let Some(col) = rel.col(*v) {
                        Slot::Bound(col)
                    } else if let Some((_, at)) = first_pos.iter().find(|(x, _)| x == v) {
                        Slot::Same(*at)
                    } else {
                        first_pos.push((*v, pos));
                        Slot::Free(*v)
                    }
                }
                CTerm::Const(c) => match p.constant(pos, c, span)? {
                    Some(v) => Slot::Const(v),
                    None => {
                        p.impossible = true;
                        Slot::Blank
                    }
                },
            };
        }
        for pos in 0..5 {
            if let Slot::Free(v) = p.slots[pos] {
                p.new_vars.push(v);
            }
        }
        Ok(p)
    }

    /// A constant of position `pos` as a datom holds it; `None` if it names nothing.
    fn constant(&mut self, pos: usize, c: &Edn, span: Span) -> Result<Option<Value>, QueryError> {
        let v = edn_to_value(c);
        Ok(match pos {
            A => {
                let id = match &v {
                    Value::Keyword(k) => match self.src.schema().entid(k) {
                        Some(id) => id,
                        None => {
                            return Err(QueryError::UnknownAttribute {
                                attr: k.to_string(),
                                span: Some(span),
                            })
                        }
                    },
                    other => match resolve_entity(self.src, other)? {
                        Some(id) => id,
                        None => return Ok(None),
                    },
                };
                self.attr = self.src.schema().attribute(id).cloned();
                Some(Value::Ref(id))
            }
            E | T => {
                let id = resolve_entity(self.src, &v)?;
                id.map(|id| {
                    if pos == T && id < (1 << 42) && id > 0 {
                        Value::Ref(ids::tx_id(id))
                    } else {
                        Value::Ref(id)
                    }
                })
            }
            V => self.value_of(&v)?,
            _ => Some(v),
        })
    }

    /// A value for the value position, typed by the attribute when it is known.
    fn value_of(&self, v: &Value) -> Result<Option<Value>, QueryError> {
        match &self.attr {
            Some(a) if a.is_ref() => Ok(resolve_entity(self.src, v)?.map(Value::Ref)),
            Some(a) => Ok(coerce_to(a, v.clone())),
            None => Ok(Some(v.clone())),
        }
    }

    /// The value a bound column gives position `pos` in this row (`None`: matches nothing).
    fn bound_value(&self, pos: usize, v: &Value) -> Result<Option<Value>, QueryError> {
        match pos {
            E | A | T => Ok(resolve_entity(self.src, v)?.map(Value::Ref)),
            V => self.value_of(v),
            _ => Ok(Some(v.clone())),
        }
    }

    /// Whether a range's bounds have the attribute's value type (only then does the index
    /// order them as the comparison does).
    pub fn range_fits(&self, range: &Range) -> bool {
        let Some(attr) = &self.attr else {
            return false;
        };
        [&range.0, &range.1].into_iter().all(|b| match b {
            Bound::Included(v) | Bound::Excluded(v) => {
                v.value_type() == Some(attr.value_type) && !attr.is_ref()
            }
            Bound::Unbounded => true,
        })
    }

    fn known(&self, pos: usize) -> bool {
        matches!(self.slots[pos], Slot::Const(_) | Slot::Bound(_))
    }

    /// Whether distinct matching datoms always give distinct rows: no position that tells
    /// datoms apart is a blank.
    fn covers_datom(&self) -> bool {
        let identity: &[usize] = if self.src.is_history() {
            &[E, A, V, T, ADDED]
        } else {
            &[E, A, V]
        };
        identity
            .iter()
            .all(|p| !matches!(self.slots[*p], Slot::Blank))
    }

    /// Whether any position takes its value from the relation.
    pub fn depends_on_rows(&self) -> bool {
        self.slots.iter().any(|s| matches!(s, Slot::Bound(_)))
    }

    /// The index and the positions (in that index's order) that form the scan prefix.
    fn plan_index(&self) -> (IndexOrder, Vec<usize>) {
        let (e, a, v) = (self.known(E), self.known(A), self.known(V));
        let v_is_ref = self.attr.as_ref().is_some_and(|at| at.is_ref())
            || matches!(&self.slots[V], Slot::Const(Value::Ref(_)));
        match (e, a, v) {
            (true, true, true) => (IndexOrder::Eavt, vec![E, A, V]),
            (true, true, false) => (IndexOrder::Eavt, vec![E, A]),
            (true, false, _) => (IndexOrder::Eavt, vec![E]),
            (false, true, true) => (IndexOrder::Avet, vec![A, V]),
            (false, true, false) if self.range.is_some() => (IndexOrder::Avet, vec![A]),
            (false, true, false) => (IndexOrder::Aevt, vec![A]),
            (false, false, true) if v_is_ref => (IndexOrder::Vaet, vec![V]),
            _ => (IndexOrder::Eavt, vec![]),
        }
    }

    /// How this pattern is scanned (see `ScanPlan`).
    fn scan_plan(&self) -> ScanPlan {
        let (order, prefix) = self.plan_index();
        let checks: Vec<usize> = (0..5)
            .filter(|p| {
                !prefix.contains(p) && !matches!(self.slots[*p], Slot::Free(_) | Slot::Blank)
            })
            .collect();
        let free_pos: Vec<usize> = (0..5)
            .filter(|p| matches!(self.slots[*p], Slot::Free(_)))
            .collect();
        ScanPlan {
            order,
            prefix,
            checks,
            free_pos,
        }
    }

    /// The index this pattern reads, for `explain`.
    pub fn index_name(&self) -> String {
        let (order, prefix) = self.plan_index();
        let names: Vec<&str> = prefix
            .iter()
            .map(|p| ["e", "a", "v", "tx", "added"][*p])
            .collect();
        let range = if self.range.is_some() { " range" } else { "" };
        format!("{}[{}]{}", order.name(), names.join(" "), range)
    }

    /// The prefix components of positions `prefix` for a row (`None`: the row matches nothing).
    fn prefix_for(
        &self,
        prefix: &[usize],
        row: &[Value],
    ) -> Result<Option<Vec<Component>>, QueryError> {
        let mut out = Vec::with_capacity(prefix.len());
        for &pos in prefix {
            let v = match &self.slots[pos] {
                Slot::Const(v) => v.clone(),
                Slot::Bound(col) => match self.bound_value(pos, &row[*col])? {
                    Some(v) => v,
                    None => return Ok(None),
                },
                _ => unreachable!("prefix positions are known"),
            };
            out.push(match v {
                Value::Ref(id) if pos != V => Component::Entity(id),
                v => Component::Value(v),
            });
        }
        Ok(Some(out))
    }

    /// An estimate of the rows this pattern adds per row of `rel` (sampling real counts).
    pub fn estimate(&self, rel: &Rel) -> Result<f64, QueryError> {
        if self.impossible || rel.len == 0 {
            return Ok(0.0);
        }
        let (order, prefix) = self.plan_index();
        if let (Some((lo, hi)), false) = (&self.range, self.depends_on_rows()) {
            if let Some(Value::Ref(a)) = self.const_at(A) {
                let n = self.src.count_range_estimate(a, as_ref(lo), as_ref(hi));
                return Ok(n as f64 * rel.len as f64);
            }
        }
        if !self.depends_on_rows() {
            let Some(p) = self.prefix_for(&prefix, &[])? else {
                return Ok(0.0);
            };
            let n = self.src.count_estimate(order, &p) as f64;
            return Ok(n * rel.len as f64);
        }
        let samples = rel.len.min(16);
        let step = rel.len / samples;
        let mut total = 0.0;
        for i in 0..samples {
            if let Some(p) = self.prefix_for(&prefix, rel.row(i * step))? {
                total += self.src.count_estimate(order, &p) as f64;
            }
        }
        Ok(total / samples as f64 * rel.len as f64)
    }

    fn const_at(&self, pos: usize) -> Option<Value> {
        match &self.slots[pos] {
            Slot::Const(v) => Some(v.clone()),
            _ => None,
        }
    }

    /// Join the pattern with `rel`: each row extended by every matching datom.
    pub fn join(
        &self,
        rel: &Rel,
        mut check: impl FnMut(usize) -> Result<(), QueryError>,
    ) -> Result<Rel, QueryError> {
        let mut vars = rel.vars.clone();
        vars.extend(self.new_vars.iter().copied());
        let mut out = Rel::empty(vars);
        out.distinct = rel.distinct && self.covers_datom();
        if self.impossible || rel.len == 0 {
            return Ok(out);
        }
        let plan = self.scan_plan();
        if !self.depends_on_rows() {
            return self.cross_join(rel, out, &plan, check);
        }
        let ScanPlan {
            order,
            prefix,
            checks,
            free_pos,
        } = plan;
        let mut err = None;
        if self.naive {
            for row in rel.rows() {
                let mut visit = |d: &Datom| {
                    let result = self.emit(d, &checks, row, &free_pos, &mut out.data);
                    progress(result, &mut out.len, &mut check, &mut err)
                };
                self.run_scan(order, &prefix, row, &mut visit)?;
                if let Some(e) = err {
                    return Err(e);
                }
                check(out.len)?;
            }
            return Ok(out);
        }
        // Lookups by row usually find at most a datom or a few per row (an entity's value of
        // an attribute): room for one output row per input row, so the output does not grow
        // by copying itself over and over.
        out.data
            .reserve(rel.len.min(SCAN_RESERVE_MAX) * out.width());
        if let Some(mut keys) = self.id_keys(order, &prefix, rel) {
            // An entity's values of one constant attribute are the same datoms, in the same
            // order, in AEVT as in EAVT; AEVT holds the attribute's datoms together, so the
            // walk for many entities visits fewer nodes.
            let order = match (order, &prefix[..]) {
                (IndexOrder::Eavt, [E, A]) if matches!(self.slots[A], Slot::Const(_)) => {
                    for (k, _) in &mut keys {
                        k.swap(0, 1);
                    }
                    IndexOrder::Aevt
                }
                _ => order,
            };
            keys.sort_unstable();
            return self.join_grouped(
                rel,
                out,
                &keys,
                |x, y| x == y,
                &checks,
                &free_pos,
                check,
                |keys, visit| self.src.scan_id_batch(order, keys, prefix.len(), visit),
            );
        }
        // Per-row prefixes, sorted and grouped, scanned as one batch.
        let mut keyed: Vec<(Vec<Component>, usize)> = Vec::with_capacity(rel.len);
        for (i, row) in rel.rows().enumerate() {
            if let Some(p) = self.prefix_for(&prefix, row)? {
                keyed.push((p, i));
            }
        }
        keyed.sort_by(|x, y| cmp_components(&x.0, &y.0));
        self.join_grouped(
            rel,
            out,
            &keyed,
            |x, y| cmp_components(x, y) == Ordering::Equal,
            &checks,
            &free_pos,
            check,
            |prefixes, visit| self.src.scan_batch(order, prefixes, visit),
        )
    }

    /// `join` when no position takes its value from the rows: one scan, its matches crossed
    /// with every row.
    fn cross_join(
        &self,
        rel: &Rel,
        mut out: Rel,
        plan: &ScanPlan,
        mut check: impl FnMut(usize) -> Result<(), QueryError>,
    ) -> Result<Rel, QueryError> {
        let ScanPlan {
            order,
            prefix,
            checks,
            free_pos,
        } = plan;
        let (order, prefix, checks, free_pos) = (*order, &prefix[..], &checks[..], &free_pos[..]);
        let mut err = None;
        let mut matched: Vec<Value> =
            Vec::with_capacity(self.scan_estimate(order, prefix)?.min(SCAN_RESERVE_MAX));
        let mut n = 0usize;
        let mut visit = |d: &Datom| {
            let result = self.emit(d, checks, &[], free_pos, &mut matched);
            progress(result, &mut n, &mut check, &mut err)
        };
        self.run_scan(order, prefix, &[], &mut visit)?;
        if let Some(e) = err {
            return Err(e);
        }
        let w = free_pos.len();
        if rel.width() == 0 {
            // Crossed with the unit relation: the matches are the rows.
            out.data = matched;
            out.len = n;
            check(out.len)?;
            return Ok(out);
        }
        // The product can be far larger than memory (a query the limits will stop): reserve
        // at most what a scan would, and let the rows grow the relation past that.
        let rows = rel.len.saturating_mul(n).min(SCAN_RESERVE_MAX);
        out.data.reserve(rows * (rel.width() + w));
        let last = rel.len - 1;
        for row in rel.rows().take(last) {
            for i in 0..n {
                out.data.extend_from_slice(row);
                out.data.extend_from_slice(&matched[i * w..(i + 1) * w]);
            }
            out.len += n;
            check(out.len)?;
        }
        // The last row (often the only one: scalar inputs) takes the matches themselves.
        let row = rel.row(last);
        let mut values = matched.into_iter();
        for _ in 0..n {
            out.data.extend_from_slice(row);
            out.data.extend(values.by_ref().take(w));
        }
        out.len += n;
        check(out.len)?;
        Ok(out)
    }

    /// When this pattern's prefix is one or two entity ids in EAVT or AEVT and every row
    /// supplies them as ids: each row's key as machine words, with the row's index.
    fn id_keys(
        &self,
        order: IndexOrder,
        prefix: &[usize],
        rel: &Rel,
    ) -> Option<Vec<([EntityId; 2], usize)>> {
        if !matches!(order, IndexOrder::Eavt | IndexOrder::Aevt)
            || prefix.is_empty()
            || prefix.len() > 2
            || prefix.iter().any(|p| !matches!(*p, E | A))
        {
            return None;
        }
        let mut keys = Vec::with_capacity(rel.len);
        for (i, row) in rel.rows().enumerate() {
            let mut key = [0; 2];
            for (k, &pos) in prefix.iter().enumerate() {
                key[k] = match &self.slots[pos] {
                    Slot::Const(Value::Ref(id)) => *id,
                    Slot::Bound(col) => match &row[*col] {
                        Value::Ref(id) => *id,
                        _ => return None,
                    },
                    _ => return None,
                };
            }
            keys.push((key, i));
        }
        Some(keys)
    }

    /// Join the rows, grouped by equal keys (`keyed`: a key and a row index, sorted by key),
    /// with the datoms that one batch scan of the distinct keys visits (`scan` calls its
    /// visitor with the index of a key).
    #[allow(clippy::too_many_arguments)]
    fn join_grouped<K: Clone>(
        &self,
        rel: &Rel,
        mut out: Rel,
        keyed: &[(K, usize)],
        same: impl Fn(&K, &K) -> bool,
        checks: &[usize],
        free_pos: &[usize],
        mut check: impl FnMut(usize) -> Result<(), QueryError>,
        scan: impl FnOnce(&[K], &mut dyn FnMut(usize, &Datom) -> bool),
    ) -> Result<Rel, QueryError> {
        let mut keys: Vec<K> = Vec::new();
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for (i, (k, _)) in keyed.iter().enumerate() {
            if keys.last().is_some_and(|last| same(last, k)) {
                groups.last_mut().expect("a group per key").1 = i + 1;
            } else {
                keys.push(k.clone());
                groups.push((i, i + 1));
            }
        }
        let history = self.src.is_history();
        let mut err = None;
        let mut visit = |g: usize, d: &Datom| {
            if !history && !d.added {
                return true;
            }
            let (from, to) = groups[g];
            for (_, r) in &keyed[from..to] {
                let result = self.emit(d, checks, rel.row(*r), free_pos, &mut out.data);
                if !progress(result, &mut out.len, &mut check, &mut err) {
                    return false;
                }
            }
            true
        };
        scan(&keys, &mut visit);
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The values `run_scan` with no row will emit, from index counts (cheap: logarithmic).
    fn scan_estimate(&self, order: IndexOrder, prefix: &[usize]) -> Result<usize, QueryError> {
        let datoms = match (&self.range, self.const_at(A)) {
            (Some((lo, hi)), Some(Value::Ref(a))) if prefix == [A] => {
                self.src.count_range_estimate(a, as_ref(lo), as_ref(hi))
            }
            _ => match self.prefix_for(prefix, &[])? {
                Some(p) => self.src.count_estimate(order, &p),
                None => 0,
            },
        };
        Ok(datoms.saturating_mul(self.new_vars.len()))
    }

    fn run_scan(
        &self,
        order: IndexOrder,
        prefix: &[usize],
        row: &[Value],
        visit: &mut dyn FnMut(&Datom) -> bool,
    ) -> Result<(), QueryError> {
        if let (Some((lo, hi)), Some(Value::Ref(a))) = (&self.range, self.const_at(A)) {
            if prefix == [A] {
                self.src.scan_range(a, as_ref(lo), as_ref(hi), visit);
                return Ok(());
            }
        }
        if let Some(p) = self.prefix_for(prefix, row)? {
            self.src.scan(order, &p, visit);
        }
        Ok(())
    }

    /// The variables `rel` shares with this pattern (prepared against the unit relation):
    /// (index among the pattern's new variables, column in `rel`).
    fn shared_with(&self, rel: &Rel) -> Vec<(usize, usize)> {
        self.new_vars
            .iter()
            .enumerate()
            .filter_map(|(i, v)| rel.col(*v).map(|c| (i, c)))
            .collect()
    }

    /// The column of `rel` for a scan join by cursor: that of the one variable `rel` shares
    /// with this pattern, when `rel` is sorted by it (as a scan of one attribute leaves it).
    pub fn sorted_shared_column(&self, rel: &Rel) -> Option<usize> {
        match self.shared_with(rel)[..] {
            [(_, c)] if rel.sorted_by(c) => Some(c),
            _ => None,
        }
    }

    /// For a scan join with `rel`, which shares the variables `shared` with this pattern:
    /// the pattern's other new variables (by index), which extend the rows, and the empty
    /// output relation.
    fn probe_output(&self, rel: &Rel, shared: &[(usize, usize)]) -> (Vec<usize>, Rel) {
        let extra: Vec<usize> = (0..self.new_vars.len())
            .filter(|i| !shared.iter().any(|(s, _)| s == i))
            .collect();
        let mut vars = rel.vars.clone();
        vars.extend(extra.iter().map(|i| self.new_vars[*i]));
        let mut out = Rel::empty(vars);
        out.distinct = rel.distinct && self.covers_datom();
        (extra, out)
    }

    /// Join `rel` with this pattern (prepared against the unit relation, so the variables
    /// `rel` binds are new here) in one scan: `rel` is indexed by those variables and each
    /// matching datom probes it, so the pattern's matches are never materialized. With
    /// `sorted` (from `sorted_shared_column`), a cursor moving along `rel` replaces the hash
    /// index: a merge join when the scan is sorted the same way.
    pub fn scan_probe_join(
        &self,
        rel: &Rel,
        sorted: Option<usize>,
        mut check: impl FnMut(usize) -> Result<(), QueryError>,
    ) -> Result<Rel, QueryError> {
        let shared = self.shared_with(rel);
        let (extra, mut out) = self.probe_output(rel, &shared);
        // Room for a match per row (what a join on an entity's one value gives), so the
        // output is not copied as it doubles (as `join` reserves).
        out.data
            .reserve(rel.len.min(SCAN_RESERVE_MAX) * out.width());
        let rel_cols: Vec<usize> = shared.iter().map(|(_, c)| *c).collect();
        let probe_cols: Vec<usize> = shared.iter().map(|(i, _)| *i).collect();
        let sorted = sorted.map(|c| (c, probe_cols[0]));
        let index = match sorted {
            Some(_) => None,
            None => Some(ChainIndex::build(rel, &rel_cols)),
        };
        let ScanPlan {
            order,
            prefix,
            checks,
            free_pos,
        } = self.scan_plan();
        let mut vals: Vec<Value> = Vec::with_capacity(free_pos.len());
        let mut err = None;
        let mut cursor = SortedCursor::default();
        // When the key is the datom's entity and the sorted column holds only entity ids
        // (the usual merge join), the column as a dense array of words: most scanned datoms
        // match no row, and each is turned away by a comparison or two in this array.
        let ids = sorted
            .filter(|&(_, p)| free_pos[p] == E)
            .and_then(|(c, _)| id_column(rel, c));
        let mut visit = |d: &Datom| {
            if let Some((c, p)) = sorted {
                // Whether any row has this datom's key, before copying the datom's values:
                // most datoms of a scan usually have none.
                let found = match &ids {
                    Some(ids) => {
                        let j = cursor.seek_by(ids.len(), |i| ids[i] < d.e);
                        j < ids.len() && ids[j] == d.e
                    }
                    None => {
                        let key = datom_value(d, free_pos[p]);
                        let j = cursor.seek(rel, c, &key);
                        j < rel.len
                            && match (&rel.row(j)[c], &key) {
                                (Value::Ref(x), Value::Ref(k)) => x == k,
                                (x, k) => x == k,
                            }
                    }
                };
                if !found {
                    return true;
                }
            }
            vals.clear();
            match self.emit(d, &checks, &[], &free_pos, &mut vals) {
                Ok(true) => {}
                Ok(false) => return true,
                Err(e) => {
                    err = Some(e);
                    return false;
                }
            }
            let mut add = |j: usize, out: &mut Rel| -> bool {
                out.data.extend_from_slice(rel.row(j));
                out.data.extend(extra.iter().map(|i| vals[*i].clone()));
                out.len += 1;
                if out.len.is_multiple_of(4096) {
                    if let Err(e) = check(out.len) {
                        err = Some(e);
                        return false;
                    }
                }
                true
            };
            match (&index, sorted) {
                (Some(index), _) => {
                    for j in index.matches(rel, &rel_cols, &vals, &probe_cols) {
                        if !add(j, &mut out) {
                            return false;
                        }
                    }
                }
                (None, Some((c, p))) => {
                    // The check above left the cursor at the key's first row.
                    let same = |j: usize| match &ids {
                        Some(ids) => ids[j] == d.e,
                        None => rel.row(j)[c] == vals[p],
                    };
                    let mut j = cursor.at;
                    while j < rel.len && same(j) {
                        if !add(j, &mut out) {
                            return false;
                        }
                        j += 1;
                    }
                }
                (None, None) => unreachable!("an index or a sorted column"),
            }
            true
        };
        if !self.impossible {
            self.run_scan(order, &prefix, &[], &mut visit)?;
        }
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// When `d` is visible and matches this row, append the row and the datom's values for
    /// the new variables to `out`; whether it did.
    fn emit(
        &self,
        d: &Datom,
        checks: &[usize],
        row: &[Value],
        free_pos: &[usize],
        out: &mut Vec<Value>,
    ) -> Result<bool, QueryError> {
        if (!d.added && !self.src.is_history()) || !self.matches(d, checks, row)? {
            return Ok(false);
        }
        out.extend_from_slice(row);
        out.extend(free_pos.iter().map(|p| datom_value(d, *p)));
        Ok(true)
    }

    /// Whether datom `d` satisfies the positions in `checks` for this row.
    fn matches(&self, d: &Datom, checks: &[usize], row: &[Value]) -> Result<bool, QueryError> {
        for &pos in checks {
            let ok = match &self.slots[pos] {
                Slot::Const(v) => self.position_equals(d, pos, v),
                Slot::Bound(col) => match self.bound_value(pos, &row[*col])? {
                    Some(v) => self.position_equals(d, pos, &v),
                    None => false,
                },
                Slot::Same(first) => datom_value(d, *first) == datom_value(d, pos),
                _ => true,
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn position_equals(&self, d: &Datom, pos: usize, v: &Value) -> bool {
        match pos {
            E => v.as_ref() == Some(d.e),
            A => v.as_ref() == Some(d.a),
            T => v.as_ref() == Some(d.tx),
            ADDED => matches!(v, Value::Boolean(b) if *b == d.added),
            _ if self.attr.is_some() => d.v == *v,
            _ => values_equal(&d.v, v) || loose_ref_equal(self.src, &d.v, v),
        }
    }
}

/// Column `c` of `rel` as entity ids, when it holds only ids.
fn id_column(rel: &Rel, c: usize) -> Option<Vec<EntityId>> {
    rel.rows()
        .map(|r| match r[c] {
            Value::Ref(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// Count an emitted row and check the limits every 4096 rows; keep the first error. Whether
/// the scan should go on.
fn progress(
    emitted: Result<bool, QueryError>,
    n: &mut usize,
    check: &mut impl FnMut(usize) -> Result<(), QueryError>,
    err: &mut Option<QueryError>,
) -> bool {
    match emitted {
        Ok(true) => {
            *n += 1;
            if (*n).is_multiple_of(4096) {
                if let Err(e) = check(*n) {
                    *err = Some(e);
                    return false;
                }
            }
            true
        }
        Ok(false) => true,
        Err(e) => {
            *err = Some(e);
            false
        }
    }
}

/// With the attribute unknown, a ref value also equals an ident or lookup ref naming it.
fn loose_ref_equal(src: &dyn Source, datom_v: &Value, v: &Value) -> bool {
    match datom_v {
        Value::Ref(e) => matches!(resolve_entity(src, v), Ok(Some(x)) if x == *e),
        _ => false,
    }
}

/// The value a datom has at a pattern position.
fn datom_value(d: &Datom, pos: usize) -> Value {
    match pos {
        E => Value::Ref(d.e),
        A => Value::Ref(d.a),
        V => d.v.clone(),
        T => Value::Ref(d.tx),
        _ => Value::Boolean(d.added),
    }
}

fn as_ref(b: &Bound<Value>) -> Bound<&Value> {
    match b {
        Bound::Included(v) => Bound::Included(v),
        Bound::Excluded(v) => Bound::Excluded(v),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A position in a relation sorted by one column, moved to each key's first row in turn:
/// forward by galloping (keys usually come in order, from a scan sorted the same way),
/// back by binary search when one does not.
#[derive(Default)]
struct SortedCursor {
    at: usize,
}

impl SortedCursor {
    /// The first row whose column `c` is not below `key`.
    fn seek(&mut self, rel: &Rel, c: usize, key: &Value) -> usize {
        // Entity ids (the usual join key) compare as machine words.
        self.seek_by(rel.len, |i: usize| match (&rel.row(i)[c], key) {
            (Value::Ref(x), Value::Ref(k)) => x < k,
            (x, k) => x < k,
        })
    }

    /// The first of `len` rows for which `below` is false (it holds for a prefix).
    #[inline]
    fn seek_by(&mut self, len: usize, below: impl Fn(usize) -> bool) -> usize {
        let mut lo = self.at;
        if lo < len && below(lo) {
            // Gallop: find `hi` with row `hi` not below `key` (or the end), then search.
            let mut step = 1;
            let mut hi = lo + 1;
            while hi < len && below(hi) {
                lo = hi;
                step *= 2;
                hi = lo.saturating_add(step);
            }
            lo = first_not_below(lo + 1, hi.min(len), below);
        } else if lo > 0 && !below(lo - 1) {
            lo = first_not_below(0, lo, below);
        }
        self.at = lo;
        lo
    }
}

/// The first index in `lo..hi` for which `below` is false (`below` holds for a prefix).
fn first_not_below(mut lo: usize, mut hi: usize, below: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

fn cmp_components(x: &[Component], y: &[Component]) -> Ordering {
    for (a, b) in x.iter().zip(y) {
        let ord = match (a, b) {
            (Component::Entity(a), Component::Entity(b)) => a.cmp(b),
            (Component::Value(a), Component::Value(b)) => a.cmp(b),
            (Component::Entity(a), Component::Value(b)) => Value::Ref(*a).cmp(b),
            (Component::Value(a), Component::Entity(b)) => a.cmp(&Value::Ref(*b)),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}
