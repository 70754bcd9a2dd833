//! The planner's half of the executor: which clause runs next, and how a pattern is best
//! joined, from the source's real index counts.
//!
//! - Filters (predicates, functions, `not`) are ready as soon as their inputs are bound
//!   (`filter_ready`); otherwise `choose` picks the generator (pattern, `or`, rule call) with
//!   the fewest estimated rows given what is bound now. The naive plan (`first_ready`) takes
//!   the first clause in written order that can run.
//! - A prepared query replays the order it chose last time while every pattern's starting
//!   estimate stays close to the one it was chosen on (`cached_order`, `PlanCache`).
//! - Comparison predicates against constants become a range scan of the pattern's value
//!   (`value_range`); the predicates the scan enforces are then skipped (`range_preds`).
//! - Two join strategies besides a lookup per row: the star join (`star`: several patterns
//!   on one bound entity in one pass) and the scan join (`scan_for_hash_join`: one scan of
//!   the pattern probing the rows), each chosen when the counts say it reads less.
//!
//! **Invariant:** planning never changes a result, only its cost: every choice here is
//! compared against the naive plan by the differential tests.

use std::collections::HashSet;
use std::ops::Bound;

use vev_core::{Component, Value};

use super::{Ctx, Env};
use crate::compile::{CArg, CClause, CTerm};
use crate::error::QueryError;
use crate::pattern::{Prepared, Range};
use crate::rel::{Rel, VarId};
use crate::source::Source;
use crate::values::edn_to_value;

impl<'a> Ctx<'a> {
    /// The cached clause order, if the statistics it was chosen on still hold (every
    /// pattern's starting estimate within a factor of 2, or within 64 rows), and this run's
    /// statistics.
    #[allow(clippy::type_complexity)]
    pub(super) fn cached_order(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        clauses: &[CClause],
        cache: &std::sync::Mutex<Option<PlanCache>>,
    ) -> Result<(Option<Vec<usize>>, Vec<u64>), QueryError> {
        // With one pattern there is no join order to get wrong: a cached order is replayed
        // without estimating (the estimate, two index ranks, would cost as much as the
        // lookup of a point query).
        let patterns = clauses
            .iter()
            .filter(|c| matches!(c, CClause::Pattern { .. }))
            .count();
        if patterns <= 1 {
            let c = vev_core::sync::lock(cache);
            if let Some(c) = c.as_ref().filter(|c| c.stats.len() == patterns) {
                self.replayed.set(true);
                return Ok((Some(c.order.clone()), c.stats.clone()));
            }
        }
        let mut stats = Vec::new();
        for c in clauses {
            if let CClause::Pattern { src, terms, span } = c {
                if let Some(tuples) = self.collection(env, *src) {
                    stats.push(tuples.len() as u64);
                    continue;
                }
                let source = self.source(env, *src, *span)?;
                let p = Prepared::new(source, terms, rel, *span)?;
                stats.push(p.estimate(rel)?.round() as u64);
            }
        }
        let c = vev_core::sync::lock(cache);
        let close =
            |a: u64, b: u64| a.abs_diff(b) <= 64 || (a.max(b) as f64) <= 2.0 * a.min(b) as f64;
        let replay = c.as_ref().and_then(|c| {
            (c.stats.len() == stats.len() && c.stats.iter().zip(&stats).all(|(a, b)| close(*a, *b)))
                .then(|| c.order.clone())
        });
        if replay.is_some() {
            self.replayed.set(true);
        }
        Ok((replay, stats))
    }

    /// Predicates, functions and `not` run as soon as their inputs are bound.
    pub(super) fn filter_ready(&self, rel: &Rel, c: &CClause, remaining: &[&CClause]) -> bool {
        let bound = |v: &VarId| rel.has(*v);
        match c {
            CClause::Pred { args, .. } | CClause::Fn { args, .. } => args.iter().all(|a| match a {
                CArg::Var(v) => bound(v),
                _ => true,
            }),
            CClause::Not {
                join: Some(vars), ..
            } => vars.iter().all(bound),
            CClause::Not { .. } => {
                let others: HashSet<VarId> = remaining
                    .iter()
                    .filter(|o| !std::ptr::eq(**o, c))
                    .flat_map(|o| o.vars())
                    .collect();
                let vars = c.vars();
                vars.iter().any(bound) && vars.iter().all(|v| bound(v) || !others.contains(v))
            }
            _ => false,
        }
    }

    /// When `clause` and other remaining patterns all read constant attributes of one bound
    /// entity, one pass over each entity's datoms answers them together.
    #[allow(clippy::type_complexity)]
    pub(super) fn star(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        clause: &CClause,
        remaining: &[&CClause],
    ) -> Result<Option<(crate::pattern::Star<'a>, Vec<usize>)>, QueryError> {
        use crate::pattern::{Star, StarValue};
        if self.limits.naive {
            return Ok(None);
        }
        let CClause::Pattern { src, terms, span } = clause else {
            return Ok(None);
        };
        if self.collection(env, *src).is_some() {
            return Ok(None);
        }
        let source = self.source(env, *src, *span)?;
        if source.is_history() {
            return Ok(None);
        }
        let CTerm::Var(e) = &terms[0] else {
            return Ok(None);
        };
        let Some(e_col) = rel.col(*e) else {
            return Ok(None);
        };
        let mut used: Vec<VarId> = Vec::new();
        let member = |terms: &[CTerm; 5], used: &mut Vec<VarId>| -> Option<(u64, StarValue)> {
            if !matches!(terms[0], CTerm::Var(x) if x == *e)
                || !matches!(terms[3], CTerm::Blank)
                || !matches!(terms[4], CTerm::Blank)
            {
                return None;
            }
            let CTerm::Const(vev_edn::Edn::Keyword(k)) = &terms[1] else {
                return None;
            };
            let attr = source.schema().attribute_by_ident(k)?;
            let v = match &terms[2] {
                CTerm::Var(v) if !rel.has(*v) && !used.contains(v) && *v != *e => {
                    used.push(*v);
                    StarValue::Free(*v)
                }
                CTerm::Const(c) if !attr.is_ref() => {
                    StarValue::Const(crate::values::coerce_to(attr, edn_to_value(c))?)
                }
                _ => return None,
            };
            Some((attr.id, v))
        };
        let Some(first) = member(terms, &mut used) else {
            return Ok(None);
        };
        let mut members = vec![first];
        let mut picked = Vec::new();
        for (i, c) in remaining.iter().enumerate() {
            if let CClause::Pattern {
                src: s2, terms: t2, ..
            } = c
            {
                if s2 == src {
                    if let Some(m) = member(t2, &mut used) {
                        members.push(m);
                        picked.push(i);
                    }
                }
            }
        }
        if picked.is_empty() {
            return Ok(None);
        }
        // With many rows, a scan of a member's whole attribute (to hash-join) is cheaper than
        // a random visit to every row's entity.
        let small = |a: u64, v: &StarValue| {
            let factor = if matches!(v, StarValue::Free(_)) && boxed_values(source, a) {
                4
            } else {
                24
            };
            source.count_estimate(vev_core::IndexOrder::Aevt, &[Component::Entity(a)])
                < rel.len * factor
        };
        if rel.len >= 64 && members.iter().any(|(a, v)| small(*a, v)) {
            return Ok(None);
        }
        Ok(Some((Star::new(source, e_col, members), picked)))
    }

    /// The first clause in written order that can run now (the naive plan).
    pub(super) fn first_ready(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        remaining: &[&CClause],
    ) -> Result<usize, QueryError> {
        for (i, c) in remaining.iter().enumerate() {
            let ready = match c {
                CClause::Pattern { .. } => true,
                CClause::Or { .. } => c.or_required().iter().all(|v| rel.has(*v)),
                CClause::Rule { name, args, .. } => self.rules.required_bound(name, args, rel),
                _ => self.filter_ready(rel, c, remaining),
            };
            if ready {
                return Ok(i);
            }
        }
        Err(self.unbound_error(env, rel, remaining[0]))
    }

    /// Pick the cheapest generator (pattern, or, rule call); error if nothing can run.
    pub(super) fn choose(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        remaining: &[&CClause],
    ) -> Result<usize, QueryError> {
        let mut best: Option<(f64, usize)> = None;
        for (i, c) in remaining.iter().enumerate() {
            let cost = match c {
                CClause::Pattern { src, .. } if self.collection(env, *src).is_some() => {
                    let n = self.collection(env, *src).map_or(0, Vec::len);
                    n as f64 * rel.len as f64
                }
                CClause::Pattern { src, terms, span } => {
                    let source = self.source(env, *src, *span)?;
                    let mut p = Prepared::new(source, terms, rel, *span)?;
                    p.range = value_range(env, terms, rel, remaining).filter(|r| p.range_fits(r));
                    p.estimate(rel)?
                }
                CClause::Or { .. } => {
                    let vars = c.vars();
                    if !c.or_required().iter().all(|v| rel.has(*v)) {
                        continue;
                    }
                    if vars.iter().any(|v| rel.has(*v)) {
                        rel.len as f64 * 4.0
                    } else {
                        1e12
                    }
                }
                CClause::Rule { args, name, .. } => {
                    if !self.rules.required_bound(name, args, rel) {
                        continue;
                    }
                    let bound = args.iter().any(|a| match a {
                        CArg::Var(v) => rel.has(*v),
                        _ => true,
                    });
                    if bound {
                        rel.len as f64 * 8.0
                    } else {
                        1e12
                    }
                }
                _ => continue,
            };
            if best.is_none_or(|(b, _)| cost < b) {
                best = Some((cost, i));
            }
        }
        match best {
            Some((_, i)) => Ok(i),
            None => Err(self.unbound_error(env, rel, remaining[0])),
        }
    }

    fn unbound_error(&self, env: &Env<'_>, rel: &Rel, c: &CClause) -> QueryError {
        let (vars, context) = match c {
            CClause::Pred { args, .. } => (arg_vars(args), "in predicate"),
            CClause::Fn { args, .. } => (arg_vars(args), "in function call"),
            CClause::Not { .. } => (c.vars(), "in not clause"),
            CClause::Or { join: Some(_), .. } => {
                (c.or_required(), "for or-join's required variables")
            }
            CClause::Or { .. } => (
                c.or_required(),
                "for or's variables that not every branch uses",
            ),
            CClause::Rule { args, .. } => (arg_vars(args), "for rule's required variables"),
            _ => (c.vars(), "in clause"),
        };
        let var = vars
            .into_iter()
            .find(|v| !rel.has(*v))
            .map(|v| env.scope.name(v).to_owned())
            .unwrap_or_default();
        QueryError::UnboundVariable {
            var,
            context,
            span: Some(c.span()),
        }
    }

    /// When the rows would each look up a pattern whose whole match is small next to the
    /// number of rows, scan it once instead, probing the rows by hash (returns the joined rows): sequential leaves beat a random
    /// descent per row. Only when every value the rows supply for e, a or tx is an entity id,
    /// so that equality is exact.
    pub(super) fn scan_for_hash_join(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        terms: &[CTerm; 5],
        span: vev_edn::Span,
        source: &'a dyn Source,
        remaining: &[&CClause],
    ) -> Result<Option<(Rel, String)>, QueryError> {
        if self.limits.naive || rel.len < 64 {
            return Ok(None);
        }
        let mut bound_any = false;
        for (pos, t) in terms.iter().enumerate() {
            if let CTerm::Var(v) = t {
                if let Some(col) = rel.col(*v) {
                    bound_any = true;
                    let exact = match pos {
                        0 | 1 | 3 => rel.rows().take(8).all(|r| matches!(r[col], Value::Ref(_))),
                        _ => false,
                    };
                    if !exact {
                        return Ok(None);
                    }
                }
            }
        }
        if !bound_any {
            return Ok(None);
        }
        let unit = Rel::unit();
        let mut all = Prepared::new(source, terms, &unit, span)?;
        all.range = value_range(env, terms, &unit, remaining).filter(|r| all.range_fits(r));
        let scan_rows = all.estimate(&unit)?;
        // Copying values that live behind a pointer (strings, keywords, ...) out of every
        // scanned datom costs a cache miss each: scan only when far fewer datoms than rows.
        // Not when the rows are sorted by the one shared variable: then a datom's values are
        // copied only when some row has its key.
        let sorted = all.sorted_shared_column(rel);
        let boxed = sorted.is_none()
            && match (&terms[1], &terms[2]) {
                (CTerm::Const(vev_edn::Edn::Keyword(k)), CTerm::Var(v)) if !rel.has(*v) => source
                    .schema()
                    .entid(k)
                    .is_some_and(|a| boxed_values(source, a)),
                _ => false,
            };
        // A looked-up row costs about what scanning 4 datoms does when values must be copied
        // out of each, 8 otherwise (entity ids in sorted batches walk AEVT in one pass;
        // measured on the query suite's people fixture).
        let factor = if boxed { 4.0 } else { 8.0 };
        if scan_rows > rel.len as f64 * factor {
            return Ok(None);
        }
        let index = all.index_name();
        let out = all.scan_probe_join(rel, sorted, |n| self.check(n))?;
        let method = if sorted.is_some() {
            "merge join"
        } else {
            "hash join"
        };
        Ok(Some((out, format!("{method} over {index}"))))
    }
}

/// The clause order a prepared query chose, and the pattern estimates it chose it on.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlanCache {
    pub order: Vec<usize>,
    pub stats: Vec<u64>,
}

fn arg_vars(args: &[CArg]) -> Vec<VarId> {
    args.iter()
        .filter_map(|a| match a {
            CArg::Var(v) => Some(*v),
            _ => None,
        })
        .collect()
}

/// A value range for a pattern's value variable, from comparison predicates against constants
/// (including scalar inputs) among the remaining clauses.
pub(super) fn value_range(
    env: &Env<'_>,
    terms: &[CTerm; 5],
    rel: &Rel,
    remaining: &[&CClause],
) -> Option<Range> {
    let CTerm::Var(v) = &terms[2] else {
        return None;
    };
    if rel.has(*v) || !matches!(terms[1], CTerm::Const(_)) || matches!(terms[0], CTerm::Const(_)) {
        return None;
    }
    if let CTerm::Var(e) = &terms[0] {
        if rel.has(*e) {
            return None;
        }
    }
    let constant = |a: &CArg| -> Option<Value> {
        match a {
            CArg::Const(c) => Some(edn_to_value(c)),
            CArg::Var(x) => env.consts.get(x).cloned(),
            CArg::Src(_) | CArg::Blank => None,
        }
    };
    let mut lo: Bound<Value> = Bound::Unbounded;
    let mut hi: Bound<Value> = Bound::Unbounded;
    let mut found = false;
    for c in remaining {
        let CClause::Pred { name, args, .. } = c else {
            continue;
        };
        if args.len() != 2 {
            continue;
        }
        let (op, k) = match (&args[0], &args[1]) {
            (CArg::Var(x), other) if x == v => (name.as_str().to_owned(), constant(other)),
            (other, CArg::Var(x)) if x == v => (flip(name.as_str()), constant(other)),
            _ => continue,
        };
        let Some(k) = k else { continue };
        // The index orders doubles by `total_cmp`, where -0.0 < 0.0; `<` does not.
        if matches!(k, Value::Double(d) if d == 0.0) || matches!(k, Value::Float(f) if f == 0.0) {
            continue;
        }
        match op.as_str() {
            ">" => lo = tighter_lo(lo, Bound::Excluded(k)),
            ">=" => lo = tighter_lo(lo, Bound::Included(k)),
            "<" => hi = tighter_hi(hi, Bound::Excluded(k)),
            "<=" => hi = tighter_hi(hi, Bound::Included(k)),
            _ => continue,
        }
        found = true;
    }
    if !found {
        return None;
    }
    // Only same-typed bounds order like the index does.
    let kinds: Vec<&Value> = [&lo, &hi]
        .into_iter()
        .filter_map(|b| match b {
            Bound::Included(v) | Bound::Excluded(v) => Some(v),
            Bound::Unbounded => None,
        })
        .collect();
    if kinds
        .windows(2)
        .any(|p| std::mem::discriminant(p[0]) != std::mem::discriminant(p[1]))
    {
        return None;
    }
    Some((lo, hi))
}

/// Whether an attribute's values live behind a pointer (copying one touches its allocation).
fn boxed_values(source: &dyn Source, a: u64) -> bool {
    use vev_core::ValueType as T;
    source.schema().attribute(a).is_some_and(|attr| {
        !matches!(
            attr.value_type,
            T::Ref | T::Long | T::Boolean | T::Double | T::Float | T::Instant | T::Uuid
        )
    })
}

/// Whether a range's bounds are floating-point numbers.
pub(super) fn float_range(range: &Range) -> bool {
    [&range.0, &range.1].into_iter().any(|b| {
        matches!(
            b,
            Bound::Included(Value::Double(_) | Value::Float(_))
                | Bound::Excluded(Value::Double(_) | Value::Float(_))
        )
    })
}

/// The comparison predicates among `remaining` that `value_range` turned into bounds of
/// this pattern's value.
pub(super) fn range_preds(
    env: &Env<'_>,
    terms: &[CTerm; 5],
    remaining: &[&CClause],
) -> Vec<*const CClause> {
    let CTerm::Var(v) = &terms[2] else {
        return Vec::new();
    };
    let constant = |a: &CArg| match a {
        CArg::Const(_) => true,
        CArg::Var(x) => env.consts.contains_key(x),
        _ => false,
    };
    remaining
        .iter()
        .filter(|c| match c {
            CClause::Pred { name, args, .. } if args.len() == 2 && matches!(name.as_str(), "<" | "<=" | ">" | ">=") => {
                matches!((&args[0], &args[1]), (CArg::Var(x), o) | (o, CArg::Var(x)) if x == v && constant(o))
            }
            _ => false,
        })
        .map(|c| *c as *const CClause)
        .collect()
}

fn flip(op: &str) -> String {
    match op {
        ">" => "<",
        "<" => ">",
        ">=" => "<=",
        "<=" => ">=",
        other => other,
    }
    .to_owned()
}

fn tighter_lo(a: Bound<Value>, b: Bound<Value>) -> Bound<Value> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if y > x || (y == x && matches!(b, Bound::Excluded(_))) {
                b
            } else {
                a
            }
        }
    }
}

fn tighter_hi(a: Bound<Value>, b: Bound<Value>) -> Bound<Value> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if y < x || (y == x && matches!(b, Bound::Excluded(_))) {
                b
            } else {
                a
            }
        }
    }
}
