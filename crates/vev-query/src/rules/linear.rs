//! Linear recursive rules called with a bound argument, evaluated from the bound values
//! outward: the cost is the part of the graph the call reaches.
//!
//! The general evaluation in `rules` gives every (rule, bound positions) pair one table, and
//! a recursive call inside the rule adds its bound values to that table as new seeds. For
//! `(reach ?a ?b)` written right-linear (`[?a :f ?x] (reach ?x ?b)`) and called with `?a`
//! bound, that makes every node the first one reaches a seed, and each seed's table rows hold
//! that node's whole reachable set: work quadratic in the reachable part. Here a rule whose
//! branches are non-recursive *bases* plus one recursive branch with exactly one call of the
//! rule itself is evaluated by what the recursive call does with the
//! bound positions `B` of the top-level call (head `h`, the call's arguments `t`, the
//! branch's other clauses `C`):
//!
//! - **Same seed**: `t` repeats `h` at every bound position (`(reach ?a ?x) [?x :f ?b]` with
//!   `?a` bound, or the right-linear form with `?b` bound). The recursive call then seeds
//!   nothing new, so the general evaluation already costs what the call reaches (its one
//!   table, semi-naive, with `delta_step`); it is left to it (measured: this module's own
//!   semi-naive loop over sets of tuples was slower than it on the demo graph).
//! - **New seed**: `t` repeats `h` at every free position, and `C` does not mention the free
//!   head variables (the right-linear form with `?a` bound, the left-linear one with `?b`
//!   bound). Then `r(s, y)` holds exactly when a chain of steps `s -> s'` (`C` from `h_B` to
//!   `t_B`) leads from `s` to a seed `s*` with `base(s*, y)`: each seed's reachable seeds are
//!   found by a breadth-first search (each seed's steps evaluated once, for all searches
//!   together, a round's new seeds in one evaluation), the bases are evaluated once for every
//!   seed reached, and each search's answers are its seeds' base answers, without repeats.
//!
//! When neither applies to all of `B`, each single bound position is tried in turn (the
//! others then filter the answers in the final join). Everything else goes to the general
//! evaluation: rules whose recursion is not of that shape (two calls, mutual recursion, a
//! call inside `not`/`or`), a recursive branch with `not`/`or` or a function binding one of
//! the call's variables (its meaning could depend on where the call sits), constants,
//! sources or blanks as the recursive call's arguments, repeated head variables, the naive
//! plan (the reference the differential tests compare this with), and any evaluation here
//! that fails (the general evaluation then reports the error where it belongs).

use vev_core::Value;
use vev_edn::Symbol;

use super::{call_columns, CRule, FastMap, FastSet, RuleCtx};
use crate::compile::{CArg, CClause, CTerm};
use crate::error::QueryError;
use crate::exec::{Ctx, Env};
use crate::rel::{Rel, VarId};
use crate::values::edn_to_value;

/// The answers of the top-level call `(name args...)` joined with `rel`, evaluated as a
/// linear recursion from its bound arguments, or `None` when the rule is not of a shape
/// this module evaluates (see the module doc).
pub(crate) fn bound_call(
    ctx: &Ctx<'_>,
    src: Option<usize>,
    name: &Symbol,
    args: &[CArg],
    rel: &Rel,
) -> Result<Option<Rel>, QueryError> {
    if ctx.limits.naive || args.iter().any(|a| matches!(a, CArg::Src(_))) {
        return Ok(None);
    }
    let bound: Vec<usize> = (0..args.len())
        .filter(|p| match &args[*p] {
            CArg::Var(v) => rel.has(*v),
            CArg::Blank => false,
            _ => true,
        })
        .collect();
    if bound.is_empty() {
        return Ok(None);
    }
    let Some(shape) = Shape::of(ctx, src, name) else {
        return Ok(None);
    };
    let mut candidates: Vec<Vec<usize>> = vec![bound.clone()];
    if bound.len() > 1 {
        candidates.extend(bound.iter().map(|p| vec![*p]));
    }
    for b in candidates {
        if shape.required > 0 && !(0..shape.required).all(|p| b.contains(&p)) {
            continue;
        }
        match shape.how(&b) {
            // The general evaluation's one table already serves it from the call's seeds.
            Some(How::SameSeed) => return Ok(None),
            Some(How::NewSeed) => {}
            None => continue,
        }
        let seeds = distinct_seeds(args, rel, &b);
        let Some(tuples) = new_seed(ctx, src, &shape, &b, &seeds)? else {
            return Ok(None);
        };
        let answers = answers_rel(args, tuples);
        ctx.check(answers.len)?;
        if rel.width() == 0 && rel.len == 1 {
            return Ok(Some(answers));
        }
        return Ok(Some(rel.join(&answers)));
    }
    Ok(None)
}

/// How the recursion treats the bound positions (see the module doc): only `NewSeed` is
/// evaluated here.
enum How {
    SameSeed,
    NewSeed,
}

/// A rule of the linear shape: its bases, its recursive branch, and the recursive call.
struct Shape<'r> {
    bases: Vec<&'r CRule>,
    rec: &'r CRule,
    /// The call's arguments, each a variable of the recursive branch.
    call_vars: Vec<VarId>,
    /// The recursive branch's clauses but the call.
    rest: Vec<CClause>,
    required: usize,
}

impl<'r> Shape<'r> {
    fn of(ctx: &Ctx<'r>, src: Option<usize>, name: &Symbol) -> Option<Shape<'r>> {
        let branches = ctx.rules.branches(name)?;
        let mut bases = Vec::new();
        let mut rec: Option<(&CRule, usize)> = None;
        for b in branches {
            if b.nested_calls || !distinct(&b.head) {
                return None;
            }
            let mut own =
                b.clauses.iter().enumerate().filter(
                    |(_, c)| matches!(c, CClause::Rule { name: callee, .. } if callee == name),
                );
            let first = own.next();
            if own.next().is_some() {
                return None;
            }
            // Any other call must not lead back to this rule (mutual recursion).
            let others_reach = b
                .clauses
                .iter()
                .enumerate()
                .any(|(i, c)| Some(i) != first.map(|(j, _)| j) && clause_reaches(ctx, c, name));
            if others_reach {
                return None;
            }
            match first {
                None => bases.push(b),
                Some((i, _)) if rec.is_none() => rec = Some((b, i)),
                Some(_) => return None,
            }
        }
        let (rec, call_at) = rec?;
        if bases.is_empty() {
            return None;
        }
        let CClause::Rule {
            src: call_src,
            args,
            ..
        } = &rec.clauses[call_at]
        else {
            return None;
        };
        if call_src.is_some() && *call_src != src {
            return None;
        }
        let call_vars: Vec<VarId> = args
            .iter()
            .map(|a| match a {
                CArg::Var(v) => Some(*v),
                _ => None,
            })
            .collect::<Option<_>>()?;
        if call_vars.len() != rec.head.len() || !distinct(&call_vars) {
            return None;
        }
        let mut rest = Vec::with_capacity(rec.clauses.len() - 1);
        for (i, c) in rec.clauses.iter().enumerate() {
            if i == call_at {
                continue;
            }
            match c {
                CClause::Pattern { .. } | CClause::Pred { .. } | CClause::Rule { .. } => {}
                CClause::Fn { binding, .. } => {
                    if binding.vars().iter().any(|v| call_vars.contains(v)) {
                        return None;
                    }
                }
                CClause::Not { .. } | CClause::Or { .. } => return None,
            }
            rest.push(c.clone());
        }
        let required = branches.iter().map(|b| b.required).max().unwrap_or(0);
        Some(Shape {
            bases,
            rec,
            call_vars,
            rest,
            required,
        })
    }

    /// Which evaluation serves a call binding the positions `bound`, if one does.
    fn how(&self, bound: &[usize]) -> Option<How> {
        let h = &self.rec.head;
        let t = &self.call_vars;
        if bound.iter().all(|p| h[*p] == t[*p]) {
            return Some(How::SameSeed);
        }
        let free: Vec<usize> = (0..h.len()).filter(|p| !bound.contains(p)).collect();
        let free_vars: Vec<VarId> = free.iter().map(|p| h[*p]).collect();
        let rest_vars: Vec<VarId> = self.rest.iter().flat_map(|c| c.vars()).collect();
        let passes_free = free.iter().all(|p| h[*p] == t[*p]);
        let free_untouched = free_vars.iter().all(|v| !rest_vars.contains(v));
        // Each new seed comes from the old one or from the step's clauses.
        let seeds_bound = bound.iter().all(|p| {
            let v = t[*p];
            !free_vars.contains(&v) && (bound.iter().any(|q| h[*q] == v) || rest_vars.contains(&v))
        });
        (passes_free && free_untouched && seeds_bound).then_some(How::NewSeed)
    }
}

impl Shape<'_> {
    /// Whether the rule's one base relates a seed to its free values exactly as the
    /// recursive branch's step relates a seed to the next (`[?a :f ?b]` and `[?a :f ?x]`
    /// with `?a` bound): one pattern each, equal once the base's bound head variables are
    /// renamed to the step's and its free ones to the step's next seed. The new-seed
    /// evaluation then takes the base answers from the steps it already found.
    fn base_is_step(&self, bound: &[usize]) -> bool {
        let ([base], [step]) = (self.bases.as_slice(), self.rest.as_slice()) else {
            return false;
        };
        let (
            [CClause::Pattern {
                src: base_src,
                terms: base_terms,
                ..
            }],
            CClause::Pattern {
                src: step_src,
                terms: step_terms,
                ..
            },
        ) = (base.clauses.as_slice(), step)
        else {
            return false;
        };
        let free: Vec<usize> = (0..base.head.len())
            .filter(|p| !bound.contains(p))
            .collect();
        if base_src != step_src || free.len() != bound.len() {
            return false;
        }
        // Base variable -> step variable.
        let mut rename: Vec<(VarId, VarId)> = bound
            .iter()
            .map(|p| (base.head[*p], self.rec.head[*p]))
            .collect();
        rename.extend(
            free.iter()
                .zip(bound)
                .map(|(f, b)| (base.head[*f], self.call_vars[*b])),
        );
        let images: Vec<VarId> = rename.iter().map(|(_, to)| *to).collect();
        if !distinct(&images) {
            return false;
        }
        base_terms
            .iter()
            .zip(step_terms)
            .all(|(a, b)| match (a, b) {
                (CTerm::Var(a), CTerm::Var(b)) => rename.iter().any(|(x, y)| x == a && y == b),
                (CTerm::Blank, CTerm::Blank) => true,
                (CTerm::Const(a), CTerm::Const(b)) => a == b,
                _ => false,
            })
    }
}

/// Whether no variable repeats in `vars`.
fn distinct(vars: &[VarId]) -> bool {
    (1..vars.len()).all(|i| !vars[..i].contains(&vars[i]))
}

/// Whether evaluating `c` may call `target`, directly or through other rules.
fn clause_reaches(ctx: &Ctx<'_>, c: &CClause, target: &Symbol) -> bool {
    let mut stack: Vec<&Symbol> = Vec::new();
    collect_calls(c, &mut stack);
    let mut seen: FastSet<&Symbol> = FastSet::default();
    while let Some(rule) = stack.pop() {
        if rule == target {
            return true;
        }
        if !seen.insert(rule) {
            continue;
        }
        for b in ctx.rules.branches(rule).unwrap_or(&[]) {
            for c in &b.clauses {
                collect_calls(c, &mut stack);
            }
        }
    }
    false
}

/// The rules `c` calls, into `out`.
fn collect_calls<'c>(c: &'c CClause, out: &mut Vec<&'c Symbol>) {
    match c {
        CClause::Rule { name, .. } => out.push(name),
        CClause::Not { clauses, .. } => clauses.iter().for_each(|c| collect_calls(c, out)),
        CClause::Or { branches, .. } => branches
            .iter()
            .flatten()
            .for_each(|c| collect_calls(c, out)),
        _ => {}
    }
}

/// The distinct values of the positions `bound` over the rows of `rel` (a constant argument
/// gives the same value to every row).
fn distinct_seeds(args: &[CArg], rel: &Rel, bound: &[usize]) -> Vec<Vec<Value>> {
    let parts: Vec<Result<usize, Value>> = bound
        .iter()
        .map(|p| match &args[*p] {
            CArg::Var(v) => Ok(rel.col(*v).expect("bound")),
            CArg::Const(c) => Err(edn_to_value(c)),
            CArg::Src(i) => Err(Value::Long(*i as i64)),
            CArg::Blank => unreachable!("blank arguments are never bound"),
        })
        .collect();
    let mut seen: FastSet<Vec<Value>> = FastSet::default();
    let mut out = Vec::new();
    for row in rel.rows() {
        let seed: Vec<Value> = parts
            .iter()
            .map(|s| match s {
                Ok(c) => row[*c].clone(),
                Err(v) => v.clone(),
            })
            .collect();
        if seen.insert(seed.clone()) {
            out.push(seed);
        }
    }
    out
}

/// Evaluate `clauses` (of `rule`'s scope) on `input`, keeping `keep`; `None` when the
/// evaluation fails for a reason other than the query's limits, or leaves a kept variable
/// unbound (the general evaluation reports those).
fn eval(
    ctx: &Ctx<'_>,
    src: Option<usize>,
    rule: &CRule,
    input: Rel,
    clauses: &[CClause],
    keep: &[VarId],
) -> Result<Option<Rel>, QueryError> {
    let consts = crate::rel::Consts::default();
    let env = Env {
        scope: &rule.scope,
        consts: &consts,
        default_src: src,
        record: false,
        cache: None,
        rule: RuleCtx::None,
    };
    match ctx.eval(&env, input, clauses, keep) {
        Ok(out) if out.len == 0 || keep.iter().all(|v| out.has(*v)) => Ok(Some(out)),
        Ok(_) => Ok(None),
        Err(e) if e.is_limit() => Err(e),
        Err(_) => Ok(None),
    }
}

/// A relation over `vars` whose rows are `rows`.
fn rel_of<'a>(vars: Vec<VarId>, rows: impl Iterator<Item = &'a [Value]>) -> Rel {
    let mut rel = Rel::empty(vars);
    for r in rows {
        rel.push_row(r);
    }
    rel
}

/// The full head tuples of `rule`'s bases evaluated for `seeds` (values of the positions
/// `bound`).
fn bases(
    ctx: &Ctx<'_>,
    src: Option<usize>,
    shape: &Shape<'_>,
    bound: &[usize],
    seeds: &[Vec<Value>],
) -> Result<Option<Vec<Vec<Value>>>, QueryError> {
    let mut out = Vec::new();
    for base in &shape.bases {
        let vars: Vec<VarId> = bound.iter().map(|p| base.head[*p]).collect();
        let input = rel_of(vars, seeds.iter().map(Vec::as_slice));
        let Some(rows) = eval(ctx, src, base, input, &base.clauses, &base.head)? else {
            return Ok(None);
        };
        push_tuples(&rows, &base.head, &mut out);
    }
    Ok(Some(out))
}

/// Each row of `rel` as the tuple of its values of `head`, onto `out`.
fn push_tuples(rel: &Rel, head: &[VarId], out: &mut Vec<Vec<Value>>) {
    if rel.len == 0 {
        return;
    }
    let cols: Vec<usize> = head.iter().map(|v| rel.col(*v).expect("kept")).collect();
    out.extend(
        rel.rows()
            .map(|r| cols.iter().map(|c| r[*c].clone()).collect()),
    );
}

/// New-seed evaluation (see the module doc): the answers, as full tuples.
fn new_seed(
    ctx: &Ctx<'_>,
    src: Option<usize>,
    shape: &Shape<'_>,
    bound: &[usize],
    seeds: &[Vec<Value>],
) -> Result<Option<Vec<Vec<Value>>>, QueryError> {
    let rec = shape.rec;
    let from: Vec<VarId> = bound.iter().map(|p| rec.head[*p]).collect();
    let to: Vec<VarId> = bound.iter().map(|p| shape.call_vars[*p]).collect();
    let mut keep = from.clone();
    keep.extend(to.iter().filter(|v| !from.contains(v)));
    // Each seed's steps, evaluated once for all searches.
    let mut steps: FastMap<Vec<Value>, Vec<Vec<Value>>> = FastMap::default();
    // One search per seed of the call: the seeds it reached, and its frontier.
    let mut reached: Vec<FastSet<Vec<Value>>> = Vec::with_capacity(seeds.len());
    let mut frontiers: Vec<Vec<Vec<Value>>> = Vec::with_capacity(seeds.len());
    for s in seeds {
        reached.push(std::iter::once(s.clone()).collect());
        frontiers.push(vec![s.clone()]);
    }
    loop {
        let mut pending: FastSet<&Vec<Value>> = FastSet::default();
        for f in frontiers.iter().flatten() {
            if !steps.contains_key(f) {
                pending.insert(f);
            }
        }
        if !pending.is_empty() {
            let asked: Vec<Vec<Value>> = pending.into_iter().cloned().collect();
            let input = rel_of(from.clone(), asked.iter().map(Vec::as_slice));
            let Some(rows) = eval(ctx, src, rec, input, &shape.rest, &keep)? else {
                return Ok(None);
            };
            for s in asked {
                steps.entry(s).or_default();
            }
            if rows.len > 0 {
                let from_cols: Vec<usize> =
                    from.iter().map(|v| rows.col(*v).expect("kept")).collect();
                let to_cols: Vec<usize> = to.iter().map(|v| rows.col(*v).expect("kept")).collect();
                for r in rows.rows() {
                    let s: Vec<Value> = from_cols.iter().map(|c| r[*c].clone()).collect();
                    let next: Vec<Value> = to_cols.iter().map(|c| r[*c].clone()).collect();
                    steps.entry(s).or_default().push(next);
                }
            }
        }
        let mut moved = false;
        for (frontier, seen) in frontiers.iter_mut().zip(reached.iter_mut()) {
            let mut next = Vec::new();
            for s in frontier.iter() {
                for n in &steps[s] {
                    if seen.insert(n.clone()) {
                        next.push(n.clone());
                    }
                }
            }
            moved |= !next.is_empty();
            *frontier = next;
        }
        ctx.check(reached.iter().map(FastSet::len).sum())?;
        if !moved {
            break;
        }
    }
    let arity = rec.head.len();
    let free: Vec<usize> = (0..arity).filter(|p| !bound.contains(p)).collect();
    let by_seed = if shape.base_is_step(bound) {
        // Every seed reached was stepped from, and its steps are its base answers.
        steps
    } else {
        // The bases, once for every seed any search reached.
        let mut every: FastSet<&Vec<Value>> = FastSet::default();
        for seen in &reached {
            every.extend(seen.iter());
        }
        let every: Vec<Vec<Value>> = every.into_iter().cloned().collect();
        let Some(base_tuples) = bases(ctx, src, shape, bound, &every)? else {
            return Ok(None);
        };
        let mut by_seed: FastMap<Vec<Value>, Vec<Vec<Value>>> = FastMap::default();
        for t in base_tuples {
            let s: Vec<Value> = bound.iter().map(|p| t[*p].clone()).collect();
            let rest: Vec<Value> = free.iter().map(|p| t[*p].clone()).collect();
            by_seed.entry(s).or_default().push(rest);
        }
        by_seed
    };
    let mut out = Vec::new();
    for (origin, seen) in seeds.iter().zip(&reached) {
        let mut mine: FastSet<&Vec<Value>> = FastSet::default();
        for s in seen {
            for rest in by_seed.get(s).into_iter().flatten() {
                if mine.insert(rest) {
                    let mut t = vec![Value::Nil; arity];
                    for (p, v) in bound.iter().zip(origin) {
                        t[*p] = v.clone();
                    }
                    for (p, v) in free.iter().zip(rest) {
                        t[*p] = v.clone();
                    }
                    out.push(t);
                }
            }
        }
        ctx.check(out.len())?;
    }
    Ok(Some(out))
}

/// Answer tuples as a relation over the call's variables (first occurrences), without the
/// tuples a repeated variable or a constant argument rules out.
fn answers_rel(args: &[CArg], tuples: Vec<Vec<Value>>) -> Rel {
    let (vars, cols, repeats) = call_columns(args);
    let consts: Vec<(usize, Value)> = args
        .iter()
        .enumerate()
        .filter_map(|(p, a)| match a {
            CArg::Const(c) => Some((p, edn_to_value(c))),
            _ => None,
        })
        .collect();
    let mut rel = Rel::empty(vars);
    for t in tuples {
        if repeats.iter().any(|(p, q)| t[*p] != t[*q]) || consts.iter().any(|(p, v)| t[*p] != *v) {
            continue;
        }
        rel.data.extend(cols.iter().map(|c| t[*c].clone()));
        rel.len += 1;
    }
    rel
}
