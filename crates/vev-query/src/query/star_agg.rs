//! The star aggregate: `:find` grouping variables and aggregates over a `:where` of data
//! patterns that all share one entity variable, answered by merging the attributes' AEVT runs
//! in one pass and folding each joined row into typed accumulators (`star_acc`).
//!
//! ```text
//! [:find ?city (count ?p) (avg ?age) :where [?p :person/city ?city] [?p :person/age ?age]]
//! ```
//!
//! Why: such a query joins every pattern on the entity, and each pattern's datoms already lie
//! sorted by entity in AEVT. The general path scans one pattern into a relation, joins the
//! next by hash, projects, then groups rows of `Value`s; this walks the sorted runs side by
//! side (a merge join, galloping within a run where one attribute is sparser), builds no
//! relation, and reads each datom in place. Large inputs are cut at an entity into two ranges
//! read on two threads; the parts' groups are merged in entity order.
//!
//! Semantics are the general path's exactly: the rows aggregated are the distinct bindings of
//! the `:find` and `:with` variables. That is why the entity variable must be among them (each
//! entity's rows are then distinct from every other's, and an entity's values of an attribute
//! are a set, so the product of its values is distinct too); a pattern whose variable is
//! dropped (or is `_`) only requires the entity to have a value. Anything else, and any view
//! but a plain current database (the source gives no runs), any row or time limit, and any
//! accumulator that meets what it cannot fold exactly, leave the query to the general path.
//! Sums and averages are exact until rounded once (`fsum::ExactSum`, as the general path
//! keeps them), so the answer is the general path's to the last bit, whatever the order.

use std::ops::Range;
use std::time::Instant;

use smallvec::SmallVec;
use vev_core::{Datom, EntityId, IndexOrder};
use vev_edn::Edn;

use super::star_acc::{key_word, Abort, Acc, AccKind, Cell, Dict, GroupIndex, Groups, Key};
use super::{find_var, Find, Query};
use crate::compile::{CClause, CTerm};
use crate::exec::{Ctx, PlanStep};
use crate::funcs::Registry;
use crate::rel::VarId;
use crate::source::{AttrRuns, Source};

/// Below this many datoms in the leading attribute, one thread reads everything.
const PARALLEL_MIN: usize = 100_000;

/// Entities between checks of the time limit.
const CHECK_EVERY: u32 = 1 << 14;

/// A recognized star aggregate.
struct Star {
    src: usize,
    /// Per pattern: its attribute, and the slot of its value variable when that is kept.
    attrs: Vec<(EntityId, Option<usize>)>,
    /// Slot 0 is the entity; slot `s > 0` a kept value variable.
    slots: usize,
    /// The patterns whose variable is kept, with its slot.
    kept: Vec<(usize, usize)>,
    /// Per slot: whether it is a grouping variable (its values are then interned).
    grouped: Vec<bool>,
    /// The slots of the grouping `:find` elements, in order.
    keys: Vec<usize>,
    /// The aggregates: slot read, kind, name and arguments.
    aggs: Vec<(usize, AccKind, String, Vec<Edn>)>,
    /// Per `:find` element: a key (index in `keys`) or an aggregate (index in `aggs`).
    out: Vec<Result<usize, usize>>,
}

/// What one part of the entities aggregated to.
struct Part {
    dicts: Vec<Dict>,
    groups: Groups,
    rows: u64,
}

impl Query {
    /// The star aggregate's result rows (one per group, `:find` order), or `None` when the
    /// query is not one or the source cannot serve it (the general path runs).
    pub(super) fn star_aggregate(&self, ctx: &Ctx<'_>, explain: bool) -> Option<Vec<Vec<Edn>>> {
        if ctx.limits.naive || ctx.limits.max_rows.is_some() || !self.bindings.is_empty() {
            return None;
        }
        let started = Instant::now();
        let star = self.recognize(ctx)?;
        let src = ctx.sources.get(star.src).copied().flatten()?;
        let (lead, _) = star.attrs[0];
        let big = src.count_estimate(IndexOrder::Aevt, &[vev_core::Component::Entity(lead)])
            >= PARALLEL_MIN;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cuts = if big && threads >= 2 {
            src.entity_cuts(lead, 2)
        } else {
            Vec::new()
        };
        let mut bounds = vec![0];
        bounds.extend(cuts);
        bounds.push(EntityId::MAX);
        let ranges: Vec<Range<EntityId>> = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        let deadline = ctx.limits.timeout.map(|t| ctx.started + t);
        let parts: Vec<Result<Part, Abort>> = if ranges.len() == 1 {
            vec![scan_part(&star, src, ranges[0].clone(), deadline)]
        } else {
            std::thread::scope(|s| {
                let star = &star;
                let handles: Vec<_> = ranges[1..]
                    .iter()
                    .map(|r| s.spawn(move || scan_part(star, src, r.clone(), deadline)))
                    .collect();
                let mut parts = vec![scan_part(star, src, ranges[0].clone(), deadline)];
                parts.extend(handles.into_iter().map(|h| h.join().unwrap_or(Err(Abort))));
                parts
            })
        };
        let mut parts = parts
            .into_iter()
            .collect::<Result<Vec<Part>, Abort>>()
            .ok()?;
        let mut first = parts.remove(0);
        for later in parts {
            merge(&star, &mut first, later).ok()?;
        }
        let rows = finish(&star, ctx.registry, first).ok()?;
        if explain {
            self.record_star(ctx, &star, ranges.len(), rows.len(), started);
        }
        Some(rows)
    }

    /// The plan step `explain` shows for a star aggregate.
    fn record_star(&self, ctx: &Ctx<'_>, star: &Star, threads: usize, groups: usize, t: Instant) {
        ctx.plan.borrow_mut().push(PlanStep {
            clause: self
                .clauses
                .iter()
                .map(|c| (ctx.source_text)(c))
                .collect::<Vec<_>>()
                .join(" "),
            method: format!(
                "star aggregate: merge of {} AEVT runs by entity on {threads} thread(s)",
                star.attrs.len()
            ),
            estimated_rows: None,
            actual_rows: groups as u64,
            elapsed: t.elapsed(),
        });
    }

    /// The star shape of this query, if it has one (see the module doc).
    fn recognize(&self, ctx: &Ctx<'_>) -> Option<Star> {
        let default_src = self.default_src;
        let mut entity: Option<VarId> = None;
        let mut src_idx: Option<usize> = None;
        // Per pattern: attribute and value variable.
        let mut pats: Vec<(EntityId, Option<VarId>)> = Vec::new();
        for c in self.clauses.iter() {
            let CClause::Pattern { src, terms, .. } = c else {
                return None;
            };
            let s = src.or(default_src)?;
            if *src_idx.get_or_insert(s) != s {
                return None;
            }
            let source = ctx.sources.get(s).copied().flatten()?;
            let CTerm::Var(e) = terms[0] else {
                return None;
            };
            if *entity.get_or_insert(e) != e {
                return None;
            }
            let CTerm::Const(Edn::Keyword(k)) = &terms[1] else {
                return None;
            };
            let a = source.schema().attribute_by_ident(k)?.id;
            let v = match terms[2] {
                CTerm::Var(v) if v != e && !pats.iter().any(|(_, x)| *x == Some(v)) => Some(v),
                CTerm::Blank => None,
                _ => return None,
            };
            if !matches!(terms[3], CTerm::Blank) || !matches!(terms[4], CTerm::Blank) {
                return None;
            }
            pats.push((a, v));
        }
        let (entity, src) = (entity?, src_idx?);
        let mut keep = self.find_vars();
        keep.extend(self.with.iter().copied());
        if !keep.contains(&entity) {
            return None;
        }
        // Every kept variable is the entity or one pattern's value.
        let mut slot_of: Vec<(VarId, usize)> = vec![(entity, 0)];
        let mut attrs = Vec::new();
        for (a, v) in &pats {
            let slot = v.filter(|v| keep.contains(v)).map(|v| {
                slot_of.push((v, slot_of.len()));
                slot_of.len() - 1
            });
            attrs.push((*a, slot));
        }
        let slot = |v: VarId| slot_of.iter().find(|(x, _)| *x == v).map(|(_, s)| *s);
        if keep.iter().any(|v| slot(*v).is_none()) {
            return None;
        }
        let kept = (attrs.iter().enumerate())
            .filter_map(|(i, (_, s))| s.map(|s| (i, s)))
            .collect();
        let mut star = Star {
            src,
            kept,
            attrs,
            slots: slot_of.len(),
            grouped: vec![false; slot_of.len()],
            keys: Vec::new(),
            aggs: Vec::new(),
            out: Vec::new(),
        };
        for f in self.find.iter() {
            let s = slot(find_var(f))?;
            match f {
                Find::Var(_) => {
                    star.out.push(Ok(star.keys.len()));
                    star.keys.push(s);
                    // The entity's cells are its id already.
                    star.grouped[s] = s != 0;
                }
                Find::Agg { name, args, .. } => {
                    let kind = AccKind::of(ctx.registry, name, args)?;
                    star.out.push(Err(star.aggs.len()));
                    star.aggs.push((s, kind, name.clone(), args.clone()));
                }
                Find::Pull { .. } => return None,
            }
        }
        if star.aggs.is_empty() {
            return None;
        }
        Some(star)
    }
}

/// One cursor per pattern over its entity range, merged by entity.
fn scan_part(
    star: &Star,
    src: &dyn Source,
    range: Range<EntityId>,
    deadline: Option<Instant>,
) -> Result<Part, Abort> {
    let mut curs: Vec<Box<dyn AttrRuns + '_>> = Vec::with_capacity(star.attrs.len());
    for (a, _) in &star.attrs {
        curs.push(src.attr_runs(*a, range.clone()).ok_or(Abort)?);
    }
    let kinds: Vec<AccKind> = star.aggs.iter().map(|a| a.1).collect();
    let index = match star.keys.as_slice() {
        [] => GroupIndex::One,
        [s] if *s != 0 => GroupIndex::Dense(Vec::new()),
        _ => GroupIndex::Hashed(Default::default()),
    };
    let mut part = Part {
        dicts: (0..star.slots).map(|_| Dict::default()).collect(),
        groups: Groups {
            index,
            keys: Vec::new(),
            accs: Vec::new(),
        },
        rows: 0,
    };
    let n = curs.len();
    let mut pos = vec![0usize; n];
    for c in curs.iter_mut() {
        if !c.advance() {
            return Ok(part);
        }
    }
    // Per pattern, the current entity's cells (kept patterns only).
    let mut cells: Vec<SmallVec<[Cell; 4]>> = vec![SmallVec::new(); n];
    let mut row: SmallVec<[Cell; 8]> = SmallVec::from_elem(Cell::Ref(0), star.slots);
    let mut key: Key = SmallVec::new();
    let mut since_check = 0u32;
    let mut target: EntityId = 0;
    'merge: loop {
        target = in_runs(
            star, &kinds, &mut part, &curs, &mut pos, target, &mut cells, &mut row, &mut key,
        )?;
        // Move every cursor to its first datom at or after `target`; a larger entity found
        // becomes the target, until all cursors stand on the same one.
        loop {
            let mut agree = true;
            for i in 0..n {
                match seek(curs[i].as_mut(), &mut pos[i], target) {
                    None => break 'merge,
                    Some(e) if e > target => {
                        target = e;
                        agree = false;
                    }
                    Some(_) => {}
                }
            }
            if agree {
                break;
            }
        }
        // Every cursor is at `target`: read its datoms there.
        let mut done = false;
        for i in 0..n {
            let slot = star.attrs[i].1;
            cells[i].clear();
            loop {
                let run = curs[i].run();
                while pos[i] < run.len() && run[pos[i]].e == target {
                    if let Some(s) = slot {
                        let c = part.dicts[s].cell(&run[pos[i]].v, star.grouped[s]);
                        cells[i].push(c);
                    }
                    pos[i] += 1;
                }
                if pos[i] < run.len() {
                    break;
                }
                pos[i] = 0;
                if !curs[i].advance() {
                    done = true;
                    break;
                }
            }
        }
        row[0] = Cell::Ref(target);
        emit_rows(star, &kinds, &mut part, &cells, &mut row, &mut key)?;
        if done {
            break;
        }
        target = target.saturating_add(1);
        since_check += 1;
        if since_check == CHECK_EVERY {
            since_check = 0;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Abort);
            }
        }
    }
    Ok(part)
}

/// The merge inside the cursors' current runs: every entity below the least of the runs'
/// last entities has all its datoms there, so it is joined with no call on a cursor (the
/// common case, in steps of a leaf). Returns the entity to go on from; the caller's general
/// step takes the entity at the runs' edge, which may continue into a cursor's next run.
#[allow(clippy::too_many_arguments)]
fn in_runs(
    star: &Star,
    kinds: &[AccKind],
    part: &mut Part,
    curs: &[Box<dyn AttrRuns + '_>],
    pos: &mut [usize],
    mut target: EntityId,
    cells: &mut [SmallVec<[Cell; 4]>],
    row: &mut SmallVec<[Cell; 8]>,
    key: &mut Key,
) -> Result<EntityId, Abort> {
    let runs: SmallVec<[&[Datom]; 4]> = curs.iter().map(|c| c.run()).collect();
    let mut bound = EntityId::MAX;
    for (run, p) in runs.iter().zip(pos.iter()) {
        match run.last() {
            Some(d) if *p < run.len() => bound = bound.min(d.e),
            _ => return Ok(target),
        }
    }
    loop {
        // Agree on an entity, as the general step does, within the runs.
        let mut agree = false;
        while !agree {
            agree = true;
            for (run, p) in runs.iter().zip(pos.iter_mut()) {
                while run[*p].e < target {
                    *p += 1;
                    if *p == run.len() {
                        return Ok(target);
                    }
                }
                if run[*p].e > target {
                    target = run[*p].e;
                    agree = false;
                }
            }
            if target >= bound {
                return Ok(target);
            }
        }
        // `target < bound`: each run holds all of the entity's datoms, and more after.
        for (i, (run, p)) in runs.iter().zip(pos.iter_mut()).enumerate() {
            cells[i].clear();
            let slot = star.attrs[i].1;
            while run[*p].e == target {
                if let Some(s) = slot {
                    let c = part.dicts[s].cell(&run[*p].v, star.grouped[s]);
                    cells[i].push(c);
                }
                *p += 1;
            }
        }
        row[0] = Cell::Ref(target);
        emit_rows(star, kinds, part, cells, row, key)?;
        target += 1;
    }
}

/// Move a cursor to its first datom with entity at or after `target`: that entity, or
/// `None` at the end.
#[inline]
fn seek(cur: &mut dyn AttrRuns, pos: &mut usize, target: EntityId) -> Option<EntityId> {
    loop {
        let run = cur.run();
        if *pos < run.len() {
            if run[*pos].e >= target {
                return Some(run[*pos].e);
            }
            if run[run.len() - 1].e >= target {
                *pos += run[*pos..].partition_point(|d| d.e < target);
                return Some(run[*pos].e);
            }
        }
        *pos = 0;
        if !cur.advance() {
            return None;
        }
    }
}

/// Fold the current entity's rows (the product of its kept patterns' values) into the part.
#[inline]
fn emit_rows(
    star: &Star,
    kinds: &[AccKind],
    part: &mut Part,
    cells: &[SmallVec<[Cell; 4]>],
    row: &mut SmallVec<[Cell; 8]>,
    key: &mut Key,
) -> Result<(), Abort> {
    let kept = &star.kept;
    // The usual entity has one value of each attribute: one row.
    if kept.iter().all(|(i, _)| cells[*i].len() == 1) {
        for (i, s) in kept {
            row[*s] = cells[*i][0];
        }
        return fold_row(star, kinds, part, row, key);
    }
    let mut at: SmallVec<[usize; 8]> = SmallVec::from_elem(0, kept.len());
    loop {
        for (k, (i, s)) in kept.iter().enumerate() {
            row[*s] = cells[*i][at[k]];
        }
        fold_row(star, kinds, part, row, key)?;
        // The next combination, last pattern fastest.
        let mut k = kept.len();
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            at[k] += 1;
            if at[k] < cells[kept[k].0].len() {
                break;
            }
            at[k] = 0;
        }
    }
}

/// Fold one row into its group's accumulators.
#[inline]
fn fold_row(
    star: &Star,
    kinds: &[AccKind],
    part: &mut Part,
    row: &[Cell],
    key: &mut Key,
) -> Result<(), Abort> {
    let g = if let [s] = star.keys.as_slice() {
        part.groups.find(&[key_word(row[*s])], kinds)
    } else {
        key.clear();
        key.extend(star.keys.iter().map(|s| key_word(row[*s])));
        part.groups.find(key, kinds)
    };
    let base = g * kinds.len();
    for (j, (s, kind, _, _)) in star.aggs.iter().enumerate() {
        part.groups.accs[base + j].add(*kind, row[*s], &part.dicts[*s])?;
    }
    part.rows += 1;
    Ok(())
}

/// Fold a later part's groups into `first`'s.
fn merge(star: &Star, first: &mut Part, later: Part) -> Result<(), Abort> {
    let kinds: Vec<AccKind> = star.aggs.iter().map(|a| a.1).collect();
    let naggs = kinds.len();
    let mut accs = later.groups.accs.into_iter();
    for k in later.groups.keys {
        let key: Key = star
            .keys
            .iter()
            .zip(&k)
            .map(|(s, w)| {
                if *s == 0 {
                    *w
                } else {
                    u64::from(first.dicts[*s].intern(&later.dicts[*s].values[*w as usize]))
                }
            })
            .collect();
        let g = first.groups.find(&key, &kinds);
        for (j, (s, kind, _, _)) in star.aggs.iter().enumerate() {
            let other = accs.next().ok_or(Abort)?;
            first.groups.accs[g * naggs + j].merge(
                *kind,
                other,
                &mut first.dicts[*s],
                &later.dicts[*s],
            )?;
        }
    }
    first.rows += later.rows;
    Ok(())
}

/// The result rows: one per group, in first-seen order.
fn finish(star: &Star, registry: &Registry, part: Part) -> Result<Vec<Vec<Edn>>, Abort> {
    let naggs = star.aggs.len();
    let mut accs = part.groups.accs.into_iter();
    let mut out = Vec::with_capacity(part.groups.keys.len());
    for key in part.groups.keys {
        let mut results: Vec<Option<Edn>> = Vec::with_capacity(naggs);
        for (s, kind, name, args) in &star.aggs {
            let acc: Acc = accs.next().ok_or(Abort)?;
            results.push(Some(acc.finish(
                registry,
                name,
                args,
                *kind,
                &part.dicts[*s],
            )?));
        }
        let row = star
            .out
            .iter()
            .map(|o| match o {
                Ok(k) => {
                    let s = star.keys[*k];
                    if s == 0 {
                        Cell::Ref(key[*k]).value(&part.dicts[0]).to_edn()
                    } else {
                        part.dicts[s].values[key[*k] as usize].to_edn()
                    }
                }
                Err(j) => results[*j].take().unwrap_or(Edn::Nil),
            })
            .collect();
        out.push(row);
    }
    Ok(out)
}
