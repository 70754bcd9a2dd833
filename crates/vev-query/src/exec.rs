//! The executor: evaluates a clause list against a relation, choosing the next clause by cost.
//!
//! The loop: apply every filter that is ready (predicates, functions and `not` whose inputs are
//! bound) as soon as it is; otherwise pick the pattern, `or` or rule call that the source's
//! real index counts say yields the fewest rows given what is bound now. After each step, the
//! variables no later clause needs are projected away. This greedy order is what makes `q2`
//! and `q2-switch` the same plan.
//!
//! This module keeps the loop (`Ctx::eval`) and the application of each kind of clause
//! (`apply`); the choice of the next clause and its cost estimates are `plan`, predicate
//! and function clauses `call`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Instant;

use vev_core::Value;

use crate::compile::{CBinding, CClause, CTerm, Scope};
use crate::error::QueryError;
use crate::funcs::{self, Registry};
use crate::pattern::Prepared;
use crate::rel::{Consts, Rel, VarId, VarSet};
use crate::rules::{RuleCtx, RuleSet};
use crate::source::Source;
use crate::values::edn_to_value;

mod call;
pub(crate) use call::{fn_attribute, fulltext_args};
mod fd;
mod plan;

pub(crate) use plan::PlanCache;
use plan::{float_range, range_preds, value_range};

/// Limits a query runs under.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// Stop with `query/timeout` after this long.
    pub timeout: Option<std::time::Duration>,
    /// Stop with `query/canceled` once this flag is set (by another thread: a server's
    /// cancel request). The run looks at it where it looks at the clock.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
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
    /// The result rows of a star aggregate (`query::star_agg`), one per group, when it
    /// answered the query: `emit` hands these on instead of aggregating a relation.
    pub grouped: RefCell<Option<Vec<Vec<vev_edn::Edn>>>>,
}

/// The state of one evaluation: its scope (for names), scalar constants, default source, and
/// the rule tables when evaluating inside a rule fixpoint.
#[derive(Clone, Copy)]
pub(crate) struct Env<'e> {
    pub scope: &'e Scope,
    pub consts: &'e Consts,
    pub default_src: Option<usize>,
    /// Whether to record plan steps (the query's own body only).
    pub record: bool,
    /// The prepared query's plan cache (the query's own body only).
    pub cache: Option<&'e std::sync::Mutex<Option<PlanCache>>>,
    /// The rule body this evaluation is, if any, and its fixpoint round (see `rules`).
    pub rule: RuleCtx<'e>,
}

impl Env<'_> {
    /// The environment of the clauses inside a `not` or `or` (reading `src` when it names
    /// one): no plan recording or caching of its own, and the rule context one level in.
    fn nested(&self, src: Option<usize>) -> Self {
        Env {
            default_src: src.or(self.default_src),
            record: false,
            cache: None,
            rule: self.rule.inner(),
            ..*self
        }
    }
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
        if let Some(flag) = &self.limits.cancel {
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(QueryError::Canceled);
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
        // What the applied patterns say some variables determine (see `fd`).
        let mut applied: fd::Applied<'_> = fd::Applied::new();
        let mut prefix_open = restore_prefix(env, &mut rel, &mut remaining, &mut positions);
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
            let idx = self.next_clause(env, &rel, &remaining, &positions, &mut replay)?;
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
                    || "implied by the range scan".into(),
                    None,
                    rel.len,
                );
            } else if let Some((star, members)) = self.star(env, &rel, clause, &remaining)? {
                for m in std::iter::once(clause).chain(members.iter().map(|i| remaining[*i])) {
                    fd::note(&mut applied, m, &rel);
                }
                let out = star.join(&rel)?;
                for m in std::iter::once(clause).chain(members.iter().map(|i| remaining[*i])) {
                    self.record(
                        env,
                        m,
                        || "eavt[e] (one pass per entity)".into(),
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
                fd::note(&mut applied, clause, &rel);
                rel = self.apply(env, rel, clause, &remaining, keep)?;
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
            rel = self.project_step(env, rel, clauses, &remaining, keep, &applied);
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

    /// The position in `remaining` of the clause to run next: the cached order's next
    /// clause when replaying, else the naive plan's, else a ready filter or the planner's
    /// cheapest generator.
    fn next_clause(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        remaining: &[&CClause],
        positions: &[usize],
        replay: &mut Option<Vec<usize>>,
    ) -> Result<usize, QueryError> {
        let from_cache = replay.as_mut().and_then(|r| {
            while let Some(next) = r.first().copied() {
                r.remove(0);
                if let Some(i) = positions.iter().position(|p| *p == next) {
                    return Some(i);
                }
            }
            None
        });
        if let Some(i) = from_cache {
            return Ok(i);
        }
        if self.limits.naive {
            return self.first_ready(env, rel, remaining);
        }
        match remaining
            .iter()
            .position(|c| self.filter_ready(rel, c, remaining))
        {
            Some(i) => Ok(i),
            None => self.choose(env, rel, remaining),
        }
    }

    /// Note a step of the plan when the run records one (`method` is only made then).
    fn record(
        &self,
        env: &Env<'_>,
        c: &CClause,
        method: impl FnOnce() -> String,
        est: Option<f64>,
        rows: usize,
    ) {
        if env.record {
            self.plan.borrow_mut().push(PlanStep {
                clause: (self.source_text)(c),
                method: method(),
                estimated_rows: est.map(|e| e.round() as u64),
                actual_rows: rows as u64,
                elapsed: self.step_started.get().elapsed(),
            });
        }
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

    /// Run one clause against `rel`.
    fn apply(
        &self,
        env: &Env<'_>,
        rel: Rel,
        c: &CClause,
        remaining: &[&CClause],
        keep: &[VarId],
    ) -> Result<Rel, QueryError> {
        match c {
            CClause::Pattern { src, terms, .. } if self.collection(env, *src).is_some() => {
                let tuples = self.collection(env, *src).expect("checked");
                let out = self.collection_join(rel, tuples, terms);
                self.record(env, c, || "collection scan".into(), None, out.len);
                Ok(out)
            }
            CClause::Pattern { src, terms, span } => {
                let pattern = PatternClause {
                    clause: c,
                    src: *src,
                    terms,
                    span: *span,
                };
                self.apply_pattern(env, &rel, &pattern, remaining)
            }
            CClause::Pred { name, args, span } => {
                let out = self.apply_pred(env, rel, name, args, *span)?;
                self.record(env, c, || "filter".into(), None, out.len);
                Ok(out)
            }
            CClause::Fn {
                name,
                args,
                binding,
                span,
            } => {
                let out = match binding {
                    // Datomic's form, `[(fulltext $ :attr ?q) [[?e ?v ?tx ?score]]]`. What
                    // later steps read: a scalar input only this call reads need not be
                    // copied into every row the call makes.
                    CBinding::Rel(_) if name.as_str() == "fulltext" => {
                        let needed = needed_after(remaining, keep);
                        self.apply_fulltext(env, rel, args, binding, *span, &|v| {
                            needed.contains(v)
                        })?
                    }
                    _ => self.apply_fn(env, rel, name, args, binding, *span)?,
                };
                self.record(env, c, || "function".into(), None, out.len);
                Ok(out)
            }
            CClause::Not {
                src, join, clauses, ..
            } => self.apply_not(env, rel, c, *src, join.as_deref(), clauses),
            CClause::Or {
                src,
                join,
                branches,
                span,
            } => {
                let inner_env = env.nested(*src);
                let out = self.apply_or(&inner_env, rel, c, join.as_ref(), branches, *span)?;
                self.record(env, c, || "or".into(), None, out.len);
                Ok(out)
            }
            CClause::Rule {
                src,
                name,
                args,
                span,
            } => {
                // What the step's projection keeps, so the call can leave out the rest as
                // it joins (`rules::call`).
                let needed = needed_after(remaining, keep);
                let out = crate::rules::call(
                    self,
                    env,
                    rel,
                    crate::rules::Site {
                        src: src.or(env.default_src),
                        name,
                        args,
                        span: *span,
                        clause: c,
                        needed: &needed,
                    },
                )?;
                self.record(env, c, || "rule".into(), None, out.len);
                Ok(out)
            }
        }
    }

    /// Join a pattern of a database source with `rel`: a lookup per row (in batches), or
    /// one scan probing the rows when the planner finds that cheaper.
    fn apply_pattern(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        pattern: &PatternClause<'_>,
        remaining: &[&CClause],
    ) -> Result<Rel, QueryError> {
        let &PatternClause {
            clause: c,
            src,
            terms,
            span,
        } = pattern;
        let source = self.source(env, src, span)?;
        let mut p = Prepared::new(source, terms, rel, span)?;
        if !self.limits.naive {
            p.range = value_range(env, terms, rel, remaining).filter(|r| p.range_fits(r));
        }
        p.naive = self.limits.naive;
        let est = if env.record {
            Some(p.estimate(rel)?)
        } else {
            None
        };
        if let Some((out, method)) =
            self.scan_for_hash_join(env, rel, terms, span, source, remaining)?
        {
            self.record(env, c, || method, est, out.len);
            return Ok(out);
        }
        let out = p.join(rel, |n| self.check(n))?;
        // A double range also holds NaNs (above or below all numbers in the index
        // order), which no comparison accepts: there the predicates still filter.
        if p.range.as_ref().is_some_and(|r| !float_range(r)) && !p.depends_on_rows() {
            self.implied
                .borrow_mut()
                .extend(range_preds(env, terms, remaining));
        }
        self.record(env, c, || p.index_name(), est, out.len);
        Ok(out)
    }

    /// Remove the rows of `rel` for which the `not`'s clauses find a match.
    fn apply_not(
        &self,
        env: &Env<'_>,
        rel: Rel,
        c: &CClause,
        src: Option<usize>,
        join: Option<&[VarId]>,
        clauses: &[CClause],
    ) -> Result<Rel, QueryError> {
        let join: Vec<VarId> = match join {
            Some(j) => j.to_vec(),
            None => c.vars().into_iter().filter(|v| rel.has(*v)).collect(),
        };
        let input = rel.project(&join);
        let inner_env = env.nested(src);
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
        self.record(env, c, || "not".into(), None, rel.len);
        Ok(rel)
    }

    /// Join `rel` with the union of the `or`'s branches, each evaluated on the rows'
    /// values of the variables it shares with them (`inner_env`: the branches' `Env`).
    fn apply_or(
        &self,
        inner_env: &Env<'_>,
        rel: Rel,
        c: &CClause,
        join: Option<&(Vec<VarId>, Vec<VarId>)>,
        branches: &[Vec<CClause>],
        span: vev_edn::Span,
    ) -> Result<Rel, QueryError> {
        let out_vars: Vec<VarId> = match join {
            Some((req, free)) => req.iter().chain(free).copied().collect(),
            None => c.vars(),
        };
        let in_vars: Vec<VarId> = out_vars.iter().copied().filter(|v| rel.has(*v)).collect();
        let input = rel.project(&in_vars);
        let mut union = Rel::empty(out_vars.clone());
        for branch in branches {
            let r = self.eval(inner_env, input.clone(), branch, &out_vars)?;
            if r.len == 0 {
                continue;
            }
            if let Some(v) = out_vars.iter().find(|v| !r.has(**v)) {
                return Err(QueryError::Invalid {
                    message: format!(
                        "every branch of or must bind the same variables, but a branch does not bind {}",
                        inner_env.scope.name(*v)
                    ),
                    span: Some(span),
                });
            }
            union.union_in(&r.project(&out_vars));
        }
        Ok(rel.join(&union.dedup()))
    }
}

/// A data pattern clause, its parts borrowed.
struct PatternClause<'c> {
    clause: &'c CClause,
    src: Option<usize>,
    terms: &'c [CTerm; 5],
    span: vev_edn::Span,
}

/// A rule body evaluated again in a later round starts where the previous evaluation
/// reached its first clause that reads rule answers: what comes before does not change.
/// Restores that prefix into `rel` (dropping the clauses it consumed from `remaining` and
/// `positions`) when one is kept; whether the prefix is still to be recorded.
fn restore_prefix(
    env: &Env<'_>,
    rel: &mut Rel,
    remaining: &mut Vec<&CClause>,
    positions: &mut Vec<usize>,
) -> bool {
    let (Some(slot), false) = (env.rule.prefix(), env.record) else {
        return false;
    };
    match &*slot.borrow() {
        Some(p) => {
            *rel = p.rel.clone();
            p.restored.set(true);
            for done in &p.consumed {
                if let Some(i) = positions.iter().position(|x| x == done) {
                    positions.remove(i);
                    remaining.remove(i);
                }
            }
            false
        }
        None => true,
    }
}

impl Ctx<'_> {
    /// After a step, `rel` without the variables that neither a remaining clause nor `keep`
    /// needs (`applied`: the patterns applied so far, whose dependencies may spare the
    /// deduplication; see `fd`).
    fn project_step(
        &self,
        env: &Env<'_>,
        rel: Rel,
        clauses: &[CClause],
        remaining: &[&CClause],
        keep: &[VarId],
        applied: &[fd::Pattern<'_>],
    ) -> Rel {
        let needed = needed_after(remaining, keep);
        let body_end = remaining.is_empty()
            && env
                .rule
                .body()
                .is_some_and(|b| std::ptr::eq(b.as_ptr(), clauses.as_ptr()));
        if body_end {
            // A rule body's last step: its rows become answers, which the rule's table
            // deduplicates, so duplicates need not be removed here too.
            rel.retain_vars_bag(|v| needed.contains(v))
        } else if rel
            .vars
            .iter()
            .all(|v| needed.contains(*v) || env.consts.contains_key(v))
            || self.drop_keeps_distinct(env, &rel, |v| needed.contains(v), applied)
        {
            // Only scalar inputs go (every row holds the same value in their columns), or
            // variables the kept ones determine: the rows stay as distinct as they were.
            rel.retain_vars_constant(|v| needed.contains(v))
        } else {
            rel.retain_vars(|v| needed.contains(v))
        }
    }
}

/// The variables read after a step: by the clauses still to run, or kept for the result.
fn needed_after(remaining: &[&CClause], keep: &[VarId]) -> VarSet {
    let mut needed: VarSet = keep.iter().copied().collect();
    for c in remaining {
        c.each_var(&mut |v| needed.insert(v));
    }
    needed
}

/// The relation restricted to `vars`, dropping rows where one is missing (an empty result).
fn project_bound(rel: &Rel, vars: &[VarId]) -> Rel {
    if vars.iter().all(|v| rel.has(*v)) {
        rel.project(vars)
    } else {
        Rel::empty(vars.to_vec())
    }
}
