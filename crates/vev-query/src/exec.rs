//! The executor: evaluates a clause list against a relation, choosing the next clause by cost.
//!
//! The loop: apply every filter that is ready (predicates, functions and `not` whose inputs are
//! bound) as soon as it is; otherwise pick the pattern, `or` or rule call that the source's
//! real index counts say yields the fewest rows given what is bound now. After each step, the
//! variables no later clause needs are projected away. This greedy order is what makes `q2`
//! and `q2-switch` the same plan.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::time::Instant;

use vev_core::{Cardinality, Component, IndexOrder, Value};
use vev_edn::Symbol;

use crate::compile::{CArg, CBinding, CClause, CTerm, Scope};
use crate::error::QueryError;
use crate::funcs::{self, Registry};
use crate::pattern::{Prepared, Range};
use crate::rel::{Rel, VarId};
use crate::rules::{RuleCtx, RuleSet};
use crate::source::Source;
use crate::values::{edn_to_value, resolve_entity, truthy};

/// Limits a query runs under.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// Stop with `query/timeout` after this long.
    pub timeout: Option<std::time::Duration>,
    /// Stop with `query/too-many-rows` when any intermediate relation passes this many rows.
    pub max_rows: Option<usize>,
    /// Run the naive plan: clauses in written order (each as soon as its inputs are bound),
    /// one index lookup per row, no range scans. The reference the optimized plan is tested
    /// against.
    pub naive: bool,
}

/// One step of the chosen plan, for `explain`.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanStep {
    /// The clause, as written.
    pub clause: String,
    /// How it ran: the index and prefix of a pattern, "filter", "function", ...
    pub method: String,
    /// The planner's estimate of the rows after this step (patterns only).
    pub estimated_rows: Option<u64>,
    /// The rows after this step.
    pub actual_rows: u64,
    /// How long the step took.
    pub elapsed: std::time::Duration,
}

/// The clause order a prepared query chose, and the pattern estimates it chose it on.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlanCache {
    pub order: Vec<usize>,
    pub stats: Vec<u64>,
}

/// Everything a query evaluation shares.
pub(crate) struct Ctx<'a> {
    pub sources: Vec<Option<&'a dyn Source>>,
    /// Sources given as collections of tuples (`:in $c` bound to `[[1 :likes "pizza"] ...]`).
    pub collections: Vec<Option<Vec<Vec<Value>>>>,
    pub rules: &'a RuleSet,
    pub registry: &'a Registry,
    pub limits: Limits,
    pub started: Instant,
    pub plan: RefCell<Vec<PlanStep>>,
    pub source_text: &'a dyn Fn(&CClause) -> String,
    /// Whether the top-level clause order came from the plan cache.
    pub replayed: std::cell::Cell<bool>,
    /// When the current top-level step started (for `explain`).
    pub step_started: std::cell::Cell<Instant>,
    /// Comparison predicates a range scan already enforced (they are dropped unevaluated).
    pub implied: RefCell<HashSet<*const CClause>>,
}

/// The state of one evaluation: its scope (for names), scalar constants, default source, and
/// the rule tables when evaluating inside a rule fixpoint.
#[derive(Clone, Copy)]
pub(crate) struct Env<'e> {
    pub scope: &'e Scope,
    pub consts: &'e HashMap<VarId, Value>,
    pub default_src: Option<usize>,
    /// Whether to record plan steps (the query's own body only).
    pub record: bool,
    /// The prepared query's plan cache (the query's own body only).
    pub cache: Option<&'e std::sync::Mutex<Option<PlanCache>>>,
    /// The rule body this evaluation is, if any, and its fixpoint round (see `rules`).
    pub rule: RuleCtx<'e>,
}

impl<'a> Ctx<'a> {
    pub fn check(&self, rows: usize) -> Result<(), QueryError> {
        if let Some(max) = self.limits.max_rows {
            if rows > max {
                return Err(QueryError::TooManyRows { limit: max });
            }
        }
        if let Some(t) = self.limits.timeout {
            if self.started.elapsed() > t {
                return Err(QueryError::Timeout {
                    limit_ms: t.as_millis() as u64,
                });
            }
        }
        Ok(())
    }

    pub fn source(
        &self,
        env: &Env<'_>,
        src: Option<usize>,
        span: vev_edn::Span,
    ) -> Result<&'a dyn Source, QueryError> {
        let idx = src.or(env.default_src);
        match idx.and_then(|i| self.sources.get(i).copied().flatten()) {
            Some(s) => Ok(s),
            None => Err(QueryError::UnknownSource {
                name: "$".to_owned(),
                span: Some(span),
            }),
        }
    }

    /// Evaluate `clauses` starting from `rel`; the result binds at least the variables of
    /// `keep` that the clauses bind.
    pub fn eval(
        &self,
        env: &Env<'_>,
        mut rel: Rel,
        clauses: &[CClause],
        keep: &[VarId],
    ) -> Result<Rel, QueryError> {
        let mut remaining: Vec<&CClause> = clauses.iter().collect();
        // Original positions of `remaining`, for the plan cache.
        let mut positions: Vec<usize> = (0..clauses.len()).collect();
        let (mut replay, stats) = match env.cache {
            Some(cache) if !self.limits.naive => self.cached_order(env, &rel, clauses, cache)?,
            _ => (None, Vec::new()),
        };
        let mut order: Vec<usize> = Vec::new();
        // A rule body evaluated again in a later round starts where the previous evaluation
        // reached its first clause that reads rule answers: what comes before does not change.
        let mut prefix_open = false;
        if let (Some(slot), false) = (env.rule.prefix(), env.record) {
            match &*slot.borrow() {
                Some(p) => {
                    rel = p.rel.clone();
                    p.restored.set(true);
                    for done in &p.consumed {
                        if let Some(i) = positions.iter().position(|x| x == done) {
                            positions.remove(i);
                            remaining.remove(i);
                        }
                    }
                }
                None => prefix_open = true,
            }
        }
        while !remaining.is_empty() {
            self.check(rel.len)?;
            if rel.len == 0 {
                let mut vars = rel.vars.clone();
                for c in &remaining {
                    for v in c.vars() {
                        if !vars.contains(&v) {
                            vars.push(v);
                        }
                    }
                }
                return Ok(Rel::empty(vars));
            }
            let from_cache = replay.as_mut().and_then(|r| {
                while let Some(next) = r.first().copied() {
                    r.remove(0);
                    if let Some(i) = positions.iter().position(|p| *p == next) {
                        return Some(i);
                    }
                }
                None
            });
            let idx = if let Some(i) = from_cache {
                i
            } else if self.limits.naive {
                self.first_ready(env, &rel, &remaining)?
            } else {
                match remaining
                    .iter()
                    .position(|c| self.filter_ready(&rel, c, &remaining))
                {
                    Some(i) => i,
                    None => self.choose(env, &rel, &remaining)?,
                }
            };
            if prefix_open && crate::rules::has_rule_call(remaining[idx]) {
                prefix_open = false;
                if let Some(slot) = env.rule.prefix() {
                    *slot.borrow_mut() =
                        Some(crate::rules::Prefix::new(rel.clone(), order.clone()));
                }
            }
            let clause = remaining.remove(idx);
            order.push(positions.remove(idx));
            let implied = self.implied.borrow().contains(&(clause as *const CClause));
            if env.record && !implied {
                self.step_started.set(Instant::now());
            }
            if implied {
                // Nothing to run, but the variables only it needed can go now.
                self.record(
                    env,
                    clause,
                    "implied by the range scan".into(),
                    None,
                    rel.len,
                );
            } else if let Some((star, members)) = self.star(env, &rel, clause, &remaining)? {
                let out = star.join(&rel)?;
                for m in std::iter::once(clause).chain(members.iter().map(|i| remaining[*i])) {
                    self.record(
                        env,
                        m,
                        "eavt[e] (one pass per entity)".into(),
                        None,
                        out.len,
                    );
                }
                for i in members.into_iter().rev() {
                    remaining.remove(i);
                    order.push(positions.remove(i));
                }
                rel = out;
            } else {
                rel = self.apply(env, rel, clause, &remaining)?;
            }
            // Only the clause right after a restored prefix may use the prefix's index.
            if let Some(p) = env
                .rule
                .prefix()
                .filter(|_| !implied)
                .and_then(|slot| slot.try_borrow().ok())
            {
                if let Some(p) = p.as_ref() {
                    p.restored.set(false);
                }
            }
            let needed: HashSet<VarId> = remaining
                .iter()
                .flat_map(|c| c.vars())
                .chain(keep.iter().copied())
                .collect();
            let body_end = remaining.is_empty()
                && env
                    .rule
                    .body()
                    .is_some_and(|b| std::ptr::eq(b.as_ptr(), clauses.as_ptr()));
            rel = if body_end {
                // A rule body's last step: its rows become answers, which the rule's table
                // deduplicates, so duplicates need not be removed here too.
                rel.retain_vars_bag(|v| needed.contains(&v))
            } else if rel
                .vars
                .iter()
                .all(|v| needed.contains(v) || env.consts.contains_key(v))
            {
                // Only scalar inputs go: every row holds the same value in their columns, so
                // the rows stay as distinct as they were.
                rel.retain_vars_constant(|v| needed.contains(&v))
            } else {
                rel.retain_vars(|v| needed.contains(&v))
            };
        }
        if let (Some(cache), false) = (env.cache, stats.is_empty() && clauses.is_empty()) {
            if !self.limits.naive {
                let mut c = vev_core::sync::lock(cache);
                if c.as_ref()
                    .is_none_or(|c| c.stats != stats || c.order != order)
                {
                    *c = Some(PlanCache { order, stats });
                }
            }
        }
        Ok(rel)
    }

    /// The cached clause order, if the statistics it was chosen on still hold (every
    /// pattern's starting estimate within a factor of 2, or within 64 rows), and this run's
    /// statistics.
    #[allow(clippy::type_complexity)]
    fn cached_order(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        clauses: &[CClause],
        cache: &std::sync::Mutex<Option<PlanCache>>,
    ) -> Result<(Option<Vec<usize>>, Vec<u64>), QueryError> {
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
    fn filter_ready(&self, rel: &Rel, c: &CClause, remaining: &[&CClause]) -> bool {
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
    fn star(
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
    fn first_ready(
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
    fn choose(
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

    fn record(&self, env: &Env<'_>, c: &CClause, method: String, est: Option<f64>, rows: usize) {
        if env.record {
            self.plan.borrow_mut().push(PlanStep {
                clause: (self.source_text)(c),
                method,
                estimated_rows: est.map(|e| e.round() as u64),
                actual_rows: rows as u64,
                elapsed: self.step_started.get().elapsed(),
            });
        }
    }

    /// When the rows would each look up a pattern whose whole match is small next to the
    /// number of rows, scan it once instead, probing the rows by hash (returns the joined rows): sequential leaves beat a random
    /// descent per row. Only when every value the rows supply for e, a or tx is an entity id,
    /// so that equality is exact.
    fn scan_for_hash_join(
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

    /// The collection a pattern's source names, if it is one.
    fn collection(&self, env: &Env<'_>, src: Option<usize>) -> Option<&Vec<Vec<Value>>> {
        let idx = src.or(env.default_src)?;
        self.collections.get(idx)?.as_ref()
    }

    /// Match a pattern against a collection source: positions compared by value.
    fn collection_join(&self, rel: Rel, tuples: &[Vec<Value>], terms: &[CTerm; 5]) -> Rel {
        let mut vars: Vec<VarId> = Vec::new();
        let mut cols: Vec<usize> = Vec::new();
        let mut repeats: Vec<(usize, usize)> = Vec::new();
        let mut consts: Vec<(usize, Value)> = Vec::new();
        let mut width = 0;
        for (p, t) in terms.iter().enumerate() {
            match t {
                CTerm::Var(v) => {
                    width = p + 1;
                    match vars.iter().position(|x| x == v) {
                        Some(i) => repeats.push((p, cols[i])),
                        None => {
                            vars.push(*v);
                            cols.push(p);
                        }
                    }
                }
                CTerm::Const(c) => {
                    width = p + 1;
                    consts.push((p, edn_to_value(c)));
                }
                CTerm::Blank => {}
            }
        }
        let mut matched = Rel::empty(vars);
        for t in tuples {
            if t.len() < width
                || consts.iter().any(|(p, v)| !funcs::values_equal(&t[*p], v))
                || repeats.iter().any(|(p, q)| t[*p] != t[*q])
            {
                continue;
            }
            matched.data.extend(cols.iter().map(|c| t[*c].clone()));
            matched.len += 1;
        }
        rel.join(&matched.dedup())
    }

    fn apply(
        &self,
        env: &Env<'_>,
        rel: Rel,
        c: &CClause,
        remaining: &[&CClause],
    ) -> Result<Rel, QueryError> {
        match c {
            CClause::Pattern { src, terms, .. } if self.collection(env, *src).is_some() => {
                let tuples = self.collection(env, *src).expect("checked");
                let out = self.collection_join(rel, tuples, terms);
                self.record(env, c, "collection scan".into(), None, out.len);
                Ok(out)
            }
            CClause::Pattern { src, terms, span } => {
                let source = self.source(env, *src, *span)?;
                let mut p = Prepared::new(source, terms, &rel, *span)?;
                if !self.limits.naive {
                    p.range = value_range(env, terms, &rel, remaining).filter(|r| p.range_fits(r));
                }
                p.naive = self.limits.naive;
                let est = if env.record {
                    Some(p.estimate(&rel)?)
                } else {
                    None
                };
                if let Some((out, method)) =
                    self.scan_for_hash_join(env, &rel, terms, *span, source, remaining)?
                {
                    self.record(env, c, method, est, out.len);
                    return Ok(out);
                }
                let out = p.join(&rel, |n| self.check(n))?;
                // A double range also holds NaNs (above or below all numbers in the index
                // order), which no comparison accepts: there the predicates still filter.
                if p.range.as_ref().is_some_and(|r| !float_range(r)) && !p.depends_on_rows() {
                    self.implied
                        .borrow_mut()
                        .extend(range_preds(env, terms, remaining));
                }
                self.record(env, c, p.index_name(), est, out.len);
                Ok(out)
            }
            CClause::Pred { name, args, span } => {
                let out = self.apply_pred(env, rel, name, args, *span)?;
                self.record(env, c, "filter".into(), None, out.len);
                Ok(out)
            }
            CClause::Fn {
                name,
                args,
                binding,
                span,
            } => {
                let out = self.apply_fn(env, rel, name, args, binding, *span)?;
                self.record(env, c, "function".into(), None, out.len);
                Ok(out)
            }
            CClause::Not {
                src, join, clauses, ..
            } => {
                let join: Vec<VarId> = match join {
                    Some(j) => j.clone(),
                    None => c.vars().into_iter().filter(|v| rel.has(*v)).collect(),
                };
                let input = rel.project(&join);
                let inner_env = Env {
                    default_src: src.or(env.default_src),
                    record: false,
                    cache: None,
                    rule: env.rule.inner(),
                    ..*env
                };
                let matched = self.eval(&inner_env, input, clauses, &join)?;
                let matched = project_bound(&matched, &join);
                let all: Vec<usize> = (0..join.len()).collect();
                let mut index = crate::rel::RowIndex::with_capacity(matched.len);
                for i in 0..matched.len {
                    index.insert(&matched, &all, i);
                }
                let cols: Vec<usize> = join
                    .iter()
                    .map(|v| rel.col(*v).expect("join var bound"))
                    .collect();
                let mut rel = rel;
                rel.retain(|row| index.find(&matched, &all, row, &cols).is_none());
                self.record(env, c, "not".into(), None, rel.len);
                Ok(rel)
            }
            CClause::Or {
                src,
                join,
                branches,
                span,
            } => {
                let out_vars: Vec<VarId> = match join {
                    Some((req, free)) => req.iter().chain(free).copied().collect(),
                    None => c.vars(),
                };
                let in_vars: Vec<VarId> =
                    out_vars.iter().copied().filter(|v| rel.has(*v)).collect();
                let input = rel.project(&in_vars);
                let inner_env = Env {
                    default_src: src.or(env.default_src),
                    record: false,
                    cache: None,
                    rule: env.rule.inner(),
                    ..*env
                };
                let mut union = Rel::empty(out_vars.clone());
                for branch in branches {
                    let r = self.eval(&inner_env, input.clone(), branch, &out_vars)?;
                    if r.len == 0 {
                        continue;
                    }
                    if let Some(v) = out_vars.iter().find(|v| !r.has(**v)) {
                        return Err(QueryError::Invalid {
                            message: format!(
                                "every branch of or must bind the same variables, but a branch does not bind {}",
                                env.scope.name(*v)
                            ),
                            span: Some(*span),
                        });
                    }
                    union.union_in(&r.project(&out_vars));
                }
                let out = rel.join(&union.dedup());
                self.record(env, c, "or".into(), None, out.len);
                Ok(out)
            }
            CClause::Rule {
                src,
                name,
                args,
                span,
            } => {
                let out = crate::rules::call(
                    self,
                    env,
                    rel,
                    src.or(env.default_src),
                    name,
                    args,
                    *span,
                    c,
                )?;
                self.record(env, c, "rule".into(), None, out.len);
                Ok(out)
            }
        }
    }

    /// The values of arguments for one row (sources stay as their index).
    /// The function's name, if a built-in or registered function has it.
    fn known_function<'n>(
        &self,
        name: &'n Symbol,
        span: vev_edn::Span,
    ) -> Result<&'n str, QueryError> {
        let fname = name.as_str();
        if !funcs::exists(self.registry, fname) {
            return Err(QueryError::UnknownFunction {
                name: fname.to_owned(),
                span: Some(span),
            });
        }
        Ok(fname)
    }

    fn apply_pred(
        &self,
        env: &Env<'_>,
        mut rel: Rel,
        name: &Symbol,
        args: &[CArg],
        span: vev_edn::Span,
    ) -> Result<Rel, QueryError> {
        let fname = self.known_function(name, span)?;
        let mut err = None;
        let plan = ArgPlan::new(args, &rel);
        let mut vals: Vec<Value> = Vec::with_capacity(args.len());
        rel.retain(|row| {
            if err.is_some() {
                return false;
            }
            plan.fill(row, &mut vals);
            match self.call(env, fname, args, &vals, span) {
                Ok(v) => truthy(&v),
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        });
        match err {
            Some(e) => Err(with_span(e, span)),
            None => Ok(rel),
        }
    }

    fn apply_fn(
        &self,
        env: &Env<'_>,
        rel: Rel,
        name: &Symbol,
        args: &[CArg],
        binding: &CBinding,
        span: vev_edn::Span,
    ) -> Result<Rel, QueryError> {
        let fname = self.known_function(name, span)?;
        // Output variables already bound are checked for equality, not rebound.
        let bvars = binding.vars();
        let new_vars: Vec<VarId> = {
            let mut seen = Vec::new();
            for v in &bvars {
                if !rel.has(*v) && !seen.contains(v) {
                    seen.push(*v);
                }
            }
            seen
        };
        let mut vars = rel.vars.clone();
        vars.extend(new_vars.iter().copied());
        let mut out = Rel::empty(vars);
        out.distinct = rel.distinct && matches!(binding, CBinding::Scalar(_));
        let mut buf: Vec<Value> = Vec::new();
        let plan = ArgPlan::new(args, &rel);
        let mut vals: Vec<Value> = Vec::with_capacity(args.len());
        for row in rel.rows() {
            plan.fill(row, &mut vals);
            let result = self
                .call(env, fname, args, &vals, span)
                .map_err(|e| with_span(e, span))?;
            for tuple in bind_tuples(fname, binding, result, span)? {
                // tuple: one value per binding position (None for `_`).
                buf.clear();
                buf.extend_from_slice(row);
                buf.resize(out.width(), Value::Nil);
                let mut ok = true;
                for (var, val) in tuple {
                    if let Some(col) = rel.col(var) {
                        if !funcs::values_equal(&row[col], &val) {
                            ok = false;
                            break;
                        }
                        continue;
                    }
                    let col = out.col(var).expect("new var has a column");
                    if col < row.len() {
                        continue;
                    }
                    // A variable bound twice in one binding must get equal values.
                    if !matches!(buf[col], Value::Nil) && buf[col] != val {
                        ok = false;
                        break;
                    }
                    buf[col] = val;
                }
                if ok {
                    out.push_row(&buf);
                }
            }
            self.check(out.len)?;
        }
        Ok(out)
    }

    /// Call a function, handling those that read a database.
    fn call(
        &self,
        env: &Env<'_>,
        name: &str,
        args: &[CArg],
        vals: &[Value],
        span: vev_edn::Span,
    ) -> Result<Value, QueryError> {
        if funcs::DB_FNS.contains(&name) {
            return self.db_fn(env, name, args, vals, span);
        }
        funcs::call(self.registry, name, vals)
    }

    fn db_fn(
        &self,
        env: &Env<'_>,
        name: &str,
        args: &[CArg],
        vals: &[Value],
        span: vev_edn::Span,
    ) -> Result<Value, QueryError> {
        let src_idx = match args.first() {
            Some(CArg::Src(i)) => Some(*i),
            _ => {
                return Err(QueryError::type_error(
                    name,
                    "expects a source ($) as its first argument".to_owned(),
                ))
            }
        };
        let src = self.source(env, src_idx, span)?;
        let want = |n: usize| {
            if vals.len() < n {
                Err(QueryError::type_error(
                    name,
                    format!("expects at least {n} arguments, got {}", vals.len()),
                ))
            } else {
                Ok(())
            }
        };
        want(3)?;
        let Some(e) = resolve_entity(src, &vals[1])? else {
            return Ok(match name {
                "missing?" => Value::Boolean(true),
                "get-else" => vals.get(3).cloned().unwrap_or(Value::Nil),
                _ => Value::Nil,
            });
        };
        let attr_of = |v: &Value| -> Result<std::sync::Arc<vev_core::Attribute>, QueryError> {
            let found = match v {
                Value::Keyword(k) => src.schema().attribute_by_ident(k),
                other => resolve_entity(src, other)?.and_then(|id| src.schema().attribute(id)),
            };
            found.cloned().ok_or_else(|| QueryError::UnknownAttribute {
                attr: v.to_string(),
                span: Some(span),
            })
        };
        let first_value = |a: u64| {
            let mut found = None;
            src.scan(
                IndexOrder::Eavt,
                &[Component::Entity(e), Component::Entity(a)],
                &mut |d| {
                    if d.added {
                        found = Some(d.v.clone());
                        false
                    } else {
                        true
                    }
                },
            );
            found
        };
        match name {
            "missing?" => {
                let a = attr_of(&vals[2])?;
                Ok(Value::Boolean(first_value(a.id).is_none()))
            }
            "get-else" => {
                want(4)?;
                let a = attr_of(&vals[2])?;
                if a.cardinality == Cardinality::Many {
                    return Err(QueryError::type_error(
                        name,
                        format!(
                            "attribute {} is cardinality-many; get-else needs cardinality-one",
                            a.ident
                        ),
                    ));
                }
                if matches!(vals[3], Value::Nil) {
                    return Err(QueryError::type_error(
                        name,
                        "the default value must not be nil".to_owned(),
                    ));
                }
                Ok(first_value(a.id).unwrap_or_else(|| vals[3].clone()))
            }
            _ => {
                for v in &vals[2..] {
                    let a = attr_of(v)?;
                    if let Some(x) = first_value(a.id) {
                        return Ok(Value::Tuple(vec![Value::Ref(a.id), x].into()));
                    }
                }
                Ok(Value::Nil)
            }
        }
    }
}

/// Where each argument of a call comes from, resolved once per clause: a column of the
/// relation or a constant.
struct ArgPlan {
    parts: Vec<Result<usize, Value>>,
}

impl ArgPlan {
    fn new(args: &[CArg], rel: &Rel) -> ArgPlan {
        ArgPlan {
            parts: args
                .iter()
                .map(|a| match a {
                    CArg::Var(v) => Ok(rel.col(*v).expect("argument bound")),
                    CArg::Const(c) => Err(edn_to_value(c)),
                    CArg::Src(i) => Err(Value::Long(*i as i64)),
                    CArg::Blank => Err(Value::Nil),
                })
                .collect(),
        }
    }

    fn fill(&self, row: &[Value], out: &mut Vec<Value>) {
        out.clear();
        out.extend(self.parts.iter().map(|p| match p {
            Ok(col) => row[*col].clone(),
            Err(v) => v.clone(),
        }));
    }
}

fn with_span(e: QueryError, span: vev_edn::Span) -> QueryError {
    match e {
        QueryError::Type {
            name,
            message,
            span: None,
        } => QueryError::Type {
            name,
            message,
            span: Some(span),
        },
        QueryError::Overflow { call, span: None } => QueryError::Overflow {
            call,
            span: Some(span),
        },
        QueryError::UnknownFunction { name, span: None } => QueryError::UnknownFunction {
            name,
            span: Some(span),
        },
        other => other,
    }
}

fn arg_vars(args: &[CArg]) -> Vec<VarId> {
    args.iter()
        .filter_map(|a| match a {
            CArg::Var(v) => Some(*v),
            _ => None,
        })
        .collect()
}

/// The relation restricted to `vars`, dropping rows where one is missing (an empty result).
fn project_bound(rel: &Rel, vars: &[VarId]) -> Rel {
    if vars.iter().all(|v| rel.has(*v)) {
        rel.project(vars)
    } else {
        Rel::empty(vars.to_vec())
    }
}

/// The assignments a function result makes under a binding form: one list per output tuple.
fn bind_tuples(
    name: &str,
    binding: &CBinding,
    result: Value,
    span: vev_edn::Span,
) -> Result<Vec<Vec<(VarId, Value)>>, QueryError> {
    if matches!(result, Value::Nil) {
        return Ok(Vec::new());
    }
    let seq = |v: Value| -> Result<Vec<Value>, QueryError> {
        match v {
            Value::Tuple(items) => Ok(items.to_vec()),
            Value::Nil => Ok(Vec::new()),
            other => Err(QueryError::Type {
                name: name.to_owned(),
                message: format!(
                    "returned {other}, which cannot be bound to a collection or tuple"
                ),
                span: Some(span),
            }),
        }
    };
    let tuple =
        |vars: &[Option<VarId>], v: Value| -> Result<Option<Vec<(VarId, Value)>>, QueryError> {
            let items = seq(v)?;
            if items.len() < vars.len() {
                return Err(QueryError::Type {
                    name: name.to_owned(),
                    message: format!(
                        "returned a tuple of {} values, the binding needs {}",
                        items.len(),
                        vars.len()
                    ),
                    span: Some(span),
                });
            }
            Ok(Some(
                vars.iter()
                    .zip(items)
                    .filter_map(|(var, val)| var.map(|var| (var, val)))
                    .collect(),
            ))
        };
    Ok(match binding {
        CBinding::Scalar(v) => vec![vec![(*v, result)]],
        CBinding::Tuple(vars) => tuple(vars, result)?.into_iter().collect(),
        CBinding::Coll(var) => seq(result)?
            .into_iter()
            .map(|v| var.map(|var| vec![(var, v)]).unwrap_or_default())
            .collect(),
        CBinding::Rel(vars) => {
            let mut out = Vec::new();
            for row in seq(result)? {
                if let Some(t) = tuple(vars, row)? {
                    out.push(t);
                }
            }
            out
        }
    })
}

/// A value range for a pattern's value variable, from comparison predicates against constants
/// (including scalar inputs) among the remaining clauses.
fn value_range(
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
fn float_range(range: &Range) -> bool {
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
fn range_preds(env: &Env<'_>, terms: &[CTerm; 5], remaining: &[&CClause]) -> Vec<*const CClause> {
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
