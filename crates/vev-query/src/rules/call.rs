//! A rule call in the executor: the call's bound arguments become seeds of its table (or,
//! at the top level, of a fresh set of tables filled to a fixpoint, or the `closure`
//! evaluation when it binds nothing), and the rows join the table's answers by key, or by
//! hashing for a table that binds nothing.

use std::cell::RefCell;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use vev_core::Value;
use vev_edn::{Span, Symbol};

use super::{fixpoint, Key, Mode, Pass, PrefixSlot, Rows, RuleCtx, Table, Tables};
use crate::compile::{CArg, CClause};
use crate::error::QueryError;
use crate::exec::{Ctx, Env};
use crate::rel::{
    finish, hasher, mix, value_word, values_equal, ChainIndex, JoinShape, Rel, RowIndex, VarId,
    VarSet,
};
use crate::values::edn_to_value;

/// A rule call as the executor applies it.
pub(crate) struct Site<'a> {
    pub src: Option<usize>,
    pub name: &'a Symbol,
    pub args: &'a [CArg],
    pub span: Span,
    pub clause: &'a CClause,
    /// The variables a later clause or the caller needs: the step's projection keeps only
    /// these, so a join by key leaves the others out as it goes (`join_by_key_projected`).
    pub needed: &'a VarSet,
}

/// Evaluate a rule call and join its answers with `rel`.
pub(crate) fn call(
    ctx: &Ctx<'_>,
    env: &Env<'_>,
    rel: Rel,
    site: Site<'_>,
) -> Result<Rel, QueryError> {
    let Site {
        src,
        name,
        args,
        span,
        clause,
        needed,
    } = site;
    let arity = checked_arity(ctx, name, args, span)?;
    let mut bound: Vec<bool> = args
        .iter()
        .map(|a| match a {
            CArg::Var(v) => rel.has(*v),
            CArg::Blank => false,
            _ => true,
        })
        .collect();
    let unseeded = match env.rule.tables() {
        Some(t) => {
            t.borrow().unseeded
                && !args
                    .iter()
                    .any(|a| matches!(a, CArg::Const(_) | CArg::Src(_)))
        }
        None => !bound.iter().any(|b| *b),
    };
    if env.rule.tables().is_none() && unseeded {
        // The whole relation of linear rules, on interned values (see `closure`).
        if let Some(answers) = crate::closure::whole_relation(ctx, src, name, args)? {
            ctx.check(answers.len)?;
            if rel.width() == 0 && rel.len == 1 {
                return Ok(answers);
            }
            return Ok(rel.join(&answers));
        }
    }
    if env.rule.tables().is_none() && !unseeded {
        // Linear recursion from the bound values (see `linear`).
        if let Some(out) = super::linear::bound_call(ctx, src, name, args, &rel)? {
            return Ok(out);
        }
    }
    let join_by_hash = unseeded && bound.iter().any(|b| *b);
    if unseeded {
        bound.iter_mut().for_each(|b| *b = false);
    }
    let bound_pos: Vec<usize> = (0..arity).filter(|p| bound[*p]).collect();
    let seed_of = SeedOf::new(args, &rel, &bound_pos);
    let key: Key = (name.clone(), bound, src);

    let owned;
    let (tables, mode) = match env.rule.tables() {
        Some(t) => (t, site_mode(env, clause)),
        None => {
            owned = RefCell::new(Tables {
                unseeded,
                ..Tables::default()
            });
            (&owned, Mode::All)
        }
    };
    {
        let mut t = tables.borrow_mut();
        let table = t
            .tables
            .entry(key.clone())
            .or_insert_with(|| Table::new(arity, bound_pos.clone()));
        let mut probe = Vec::with_capacity(bound_pos.len());
        for row in rel.rows() {
            seed_of.fill(row, &mut probe);
            table.add_seed(&probe);
        }
    }
    if env.rule.tables().is_none() {
        fixpoint(ctx, tables)?;
        if let Some(answers) = take_answers(ctx, tables, &key, &rel, args)? {
            return Ok(answers);
        }
    }

    if join_by_hash {
        let t = tables.borrow();
        let answers = answers_rel(&t.tables[&key], args, mode);
        if let Some(out) = env
            .rule
            .prefix()
            .and_then(|slot| prefix_join(slot, &rel, &answers))
        {
            return Ok(out);
        }
        return Ok(rel.join(&answers));
    }
    let t = tables.borrow();
    let by_key = ByKey {
        table: &t.tables[&key],
        mode,
        seed_of: &seed_of,
    };
    join_answers(ctx, &rel, args, &by_key, needed)
}

/// Join `rel` with the answers for each row's key: projected as it goes when the step's
/// projection would drop some of the columns.
fn join_answers(
    ctx: &Ctx<'_>,
    rel: &Rel,
    args: &[CArg],
    by_key: &ByKey<'_>,
    needed: &VarSet,
) -> Result<Rel, QueryError> {
    let keep_row: Vec<usize> = (0..rel.width())
        .filter(|c| needed.contains(rel.vars[*c]))
        .collect();
    let all_new_kept = args.iter().all(|a| match a {
        CArg::Var(v) => rel.has(*v) || needed.contains(*v),
        _ => true,
    });
    if keep_row.len() == rel.width() && all_new_kept {
        return join_by_key(ctx, rel, args, by_key.table, by_key.mode, by_key.seed_of);
    }
    join_by_key_projected(ctx, rel, args, by_key, &keep_row, needed)
}

/// The arity of rule `name`, checked against the call's arguments.
fn checked_arity(
    ctx: &Ctx<'_>,
    name: &Symbol,
    args: &[CArg],
    span: Span,
) -> Result<usize, QueryError> {
    let Some(branches) = ctx.rules.rules.get(name) else {
        return Err(QueryError::UnknownRule {
            rule: name.to_string(),
            span: Some(span),
        });
    };
    let arity = branches[0].head.len();
    if args.len() != arity {
        return Err(QueryError::RuleArity {
            rule: name.to_string(),
            given: args.len(),
            expected: arity,
            span: Some(span),
        });
    }
    Ok(arity)
}

/// Where each bound argument of a call takes its value from, resolved once per call: a
/// column of the relation, or a constant. A row's values of them are its seed, and the key
/// its answers are looked up by.
struct SeedOf {
    parts: Vec<Result<usize, Value>>,
}

impl SeedOf {
    fn new(args: &[CArg], rel: &Rel, bound_pos: &[usize]) -> SeedOf {
        SeedOf {
            parts: bound_pos
                .iter()
                .map(|p| match &args[*p] {
                    CArg::Var(v) => Ok(rel.col(*v).expect("bound")),
                    CArg::Const(c) => Err(edn_to_value(c)),
                    CArg::Src(i) => Err(Value::Long(*i as i64)),
                    CArg::Blank => unreachable!("blank arguments are never bound"),
                })
                .collect(),
        }
    }

    /// The seed of `row`, into `out`.
    #[inline]
    fn fill(&self, row: &[Value], out: &mut Vec<Value>) {
        out.clear();
        out.extend(self.parts.iter().map(|s| match s {
            Ok(col) => row[*col].clone(),
            Err(v) => v.clone(),
        }));
    }
}

/// A top-level call that binds nothing, with distinct variables for arguments, on the unit
/// relation (a query's only clause so far): its result is the table's answers, which no one
/// reads after this, so they move out instead of being copied row by row. `None` for any
/// other call.
fn take_answers(
    ctx: &Ctx<'_>,
    tables: &RefCell<Tables>,
    key: &Key,
    rel: &Rel,
    args: &[CArg],
) -> Result<Option<Rel>, QueryError> {
    let vars: Vec<VarId> = args
        .iter()
        .filter_map(|a| match a {
            CArg::Var(v) => Some(*v),
            _ => None,
        })
        .collect();
    let arity = args.len();
    let distinct_vars = vars.len() == arity && (1..arity).all(|i| !vars[..i].contains(&vars[i]));
    if rel.width() != 0 || rel.len != 1 || !distinct_vars {
        return Ok(None);
    }
    let Some(table) = tables.borrow_mut().tables.remove(key) else {
        return Ok(None);
    };
    let Rows {
        rel: mut answers,
        delta_end,
        ..
    } = table.answers;
    debug_assert_eq!(answers.len, delta_end, "a finished table has no new rows");
    answers.vars = vars;
    answers.distinct = true;
    ctx.check(answers.len)?;
    Ok(Some(answers))
}

/// Join each row of `rel` with the answers (of the part `mode` names) for its key.
fn join_by_key(
    ctx: &Ctx<'_>,
    rel: &Rel,
    args: &[CArg],
    table: &Table,
    mode: Mode,
    seed_of: &SeedOf,
) -> Result<Rel, QueryError> {
    let NewColumns {
        vars: new_vars,
        positions,
        eq_pos,
    } = NewColumns::of(args, rel, |_| true);
    // (argument position, output column)
    let new_pos: Vec<(usize, usize)> = positions
        .iter()
        .enumerate()
        .map(|(k, p)| (*p, rel.width() + k))
        .collect();
    let mut vars = rel.vars.clone();
    vars.extend(new_vars.iter().copied());
    let mut out = Rel::empty(vars);
    out.distinct =
        rel.distinct && eq_pos.is_empty() && !args.iter().any(|a| matches!(a, CArg::Blank));
    if rel.len == 1 {
        // The top-level call of a query: every answer of its part, at most.
        out.data
            .reserve(table.answers.ids(mode).len() * out.width());
    }
    let mut buf = Vec::with_capacity(out.width());
    let mut probe = Vec::with_capacity(seed_of.parts.len());
    for row in rel.rows() {
        seed_of.fill(row, &mut probe);
        for ans in table.answers(&probe, mode) {
            if eq_pos.iter().any(|(p, f)| ans[*p] != ans[*f]) {
                continue;
            }
            buf.clear();
            buf.extend_from_slice(row);
            buf.extend(new_pos.iter().map(|(p, _)| ans[*p].clone()));
            out.push_row(&buf);
        }
        ctx.check(out.len)?;
    }
    Ok(out)
}

/// The variables a call adds to `rel`: those `keep` accepts of its first occurrences, with
/// their argument positions, and the pairs of positions (repeat, first) a repeated new
/// variable requires to be equal.
struct NewColumns {
    vars: Vec<VarId>,
    positions: Vec<usize>,
    eq_pos: Vec<(usize, usize)>,
}

impl NewColumns {
    fn of(args: &[CArg], rel: &Rel, keep: impl Fn(VarId) -> bool) -> NewColumns {
        let mut new = NewColumns {
            vars: Vec::new(),
            positions: Vec::new(),
            eq_pos: Vec::new(),
        };
        for (p, a) in args.iter().enumerate() {
            let CArg::Var(v) = a else { continue };
            if rel.has(*v) {
                continue;
            }
            if let Some(first) = args[..p]
                .iter()
                .position(|x| matches!(x, CArg::Var(w) if w == v))
            {
                new.eq_pos.push((p, first));
            } else if keep(*v) {
                new.positions.push(p);
                new.vars.push(*v);
            }
        }
        new
    }
}

/// A table's answers as a join by key reads them.
struct ByKey<'a> {
    table: &'a Table,
    mode: Mode,
    seed_of: &'a SeedOf,
}

/// `join_by_key` followed by the step's projection, in one pass: each output row holds the
/// kept columns of `rel` (`keep_row`) and the new variables in `needed`, and repeats of an
/// output row are dropped as they are found, so the joined rows that the projection would
/// have merged are never built. Rows of `rel` with equal kept columns form a group; an output
/// row is keyed by its group's number and its new values, so a probe hashes a word or two
/// rather than whole rows (a rule body such as `(net ?a ?x) (net ?x ?b)` that drops `?x`
/// meets each `(?a, ?b)` once per `?x` between them).
fn join_by_key_projected(
    ctx: &Ctx<'_>,
    rel: &Rel,
    args: &[CArg],
    by_key: &ByKey<'_>,
    keep_row: &[usize],
    needed: &VarSet,
) -> Result<Rel, QueryError> {
    let NewColumns {
        vars: new_vars,
        positions: new_pos,
        eq_pos,
    } = NewColumns::of(args, rel, |v| needed.contains(v));
    let mut vars: Vec<VarId> = keep_row.iter().map(|c| rel.vars[*c]).collect();
    vars.extend(new_vars.iter().copied());
    let mut out = Rel::empty(vars);
    out.distinct = true;
    // The distinct kept parts of `rel`'s rows, numbered.
    let mut groups = Rel::empty(keep_row.iter().map(|c| rel.vars[*c]).collect());
    let group_cols: Vec<usize> = (0..keep_row.len()).collect();
    let mut group_index = RowIndex::with_capacity(rel.len.min(1 << 16));
    // Output rows by (group, new values): (hash, output row); each output row's group.
    let state = hasher();
    let seed = state.hash_one(0x6a0b_u64);
    let mut seen: HashTable<(u64, usize)> = HashTable::new();
    let mut group_of: Vec<usize> = Vec::new();
    let w = out.width();
    let tail = keep_row.len();
    let mut probe = Vec::with_capacity(by_key.seed_of.parts.len());
    for row in rel.rows() {
        groups.data.extend(keep_row.iter().map(|c| row[*c].clone()));
        groups.len += 1;
        let (g, new_group) = group_index.insert(&groups, &group_cols, groups.len - 1);
        if !new_group {
            groups.len -= 1;
            groups.data.truncate(groups.len * tail);
        }
        let group_hash = mix(seed, g as u64);
        by_key.seed_of.fill(row, &mut probe);
        for ans in by_key.table.answers(&probe, by_key.mode) {
            if eq_pos.iter().any(|(p, f)| ans[*p] != ans[*f]) {
                continue;
            }
            let h = finish(
                new_pos
                    .iter()
                    .fold(group_hash, |h, p| mix(h, value_word(&state, &ans[*p]))),
            );
            let data = &out.data;
            let found = seen.find(h, |&(hh, j)| {
                hh == h
                    && group_of[j] == g
                    && new_pos
                        .iter()
                        .enumerate()
                        .all(|(k, p)| values_equal(&data[j * w + tail + k], &ans[*p]))
            });
            if found.is_some() {
                continue;
            }
            let j = out.len;
            out.data.extend_from_slice(groups.row(g));
            out.data.extend(new_pos.iter().map(|p| ans[*p].clone()));
            out.len += 1;
            group_of.push(g);
            seen.insert_unique(h, (h, j), |&(hh, _)| hh);
        }
        ctx.check(out.len)?;
    }
    Ok(out)
}

/// How a rule call's answers become a relation over its variables: the variables (first
/// occurrences, in argument order), the argument position of each, and the pairs of
/// positions a repeated variable requires to be equal.
pub(crate) fn call_columns(args: &[CArg]) -> (Vec<VarId>, Vec<usize>, Vec<(usize, usize)>) {
    let mut vars: Vec<VarId> = Vec::new();
    let mut cols: Vec<usize> = Vec::new();
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for (p, a) in args.iter().enumerate() {
        if let CArg::Var(v) = a {
            match vars.iter().position(|x| x == v) {
                Some(i) => repeats.push((p, cols[i])),
                None => {
                    vars.push(*v);
                    cols.push(p);
                }
            }
        }
    }
    (vars, cols, repeats)
}

/// A whole-relation table's answers (one part of them) as a relation over the call's
/// variables, for a join that matches the bound arguments by hashing.
fn answers_rel(table: &Table, args: &[CArg], mode: Mode) -> Rel {
    let (vars, cols, repeats) = call_columns(args);
    let mut answers = Rel::empty(vars);
    answers.distinct = repeats.is_empty() && !args.iter().any(|a| matches!(a, CArg::Blank));
    let w = table.answers.cols.len();
    for i in table.answers.ids(mode) {
        let row = &table.answers.rel.data[i * w..(i + 1) * w];
        if repeats.iter().any(|(p, q)| row[*p] != row[*q]) {
            continue;
        }
        answers.data.extend(cols.iter().map(|c| row[*c].clone()));
        answers.len += 1;
    }
    answers
}

/// `rel.join(answers)` when `rel` is the prefix an evaluation just restarted from: the prefix
/// is indexed once by the shared columns and probed with each answer, so a round costs what
/// its new answers cost, not what the prefix does. The rows are `rel.join`'s, in another
/// order. `None` when `rel` is not that prefix.
fn prefix_join(slot: &PrefixSlot, rel: &Rel, answers: &Rel) -> Option<Rel> {
    let cached = slot.borrow();
    let prefix = cached.as_ref()?;
    if !prefix.restored.replace(false) || prefix.rel.len != rel.len || prefix.rel.vars != rel.vars {
        return None;
    }
    let shape = JoinShape::of(rel, answers);
    let mut index = prefix.index.borrow_mut();
    if index
        .as_ref()
        .is_none_or(|(cols, _)| *cols != shape.left_cols)
    {
        *index = Some((
            shape.left_cols.clone(),
            ChainIndex::build(&prefix.rel, &shape.left_cols),
        ));
    }
    let (_, index) = index.as_ref().expect("just built");
    Some(prefix.rel.join_indexed(index, answers, &shape))
}

/// The mode of a call site under the current pass.
fn site_mode(env: &Env<'_>, clause: &CClause) -> Mode {
    let RuleCtx::Round { pass, body, .. } = env.rule else {
        return Mode::All;
    };
    let site = body
        .iter()
        .filter(|c| matches!(c, CClause::Rule { .. }))
        .position(|c| std::ptr::eq(c, clause));
    match (pass, site) {
        (Pass::Site(d), Some(k)) if k < d => Mode::Old,
        (Pass::Site(d), Some(k)) if k == d => Mode::Delta,
        _ => Mode::All,
    }
}
