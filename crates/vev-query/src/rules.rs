//! Rules: compiled per branch, evaluated bottom-up and semi-naively, with the call's bound
//! arguments pushed in as seeds.
//!
//! A call `(r ?a ?b)` with `?a` bound evaluates `r` only for the values `?a` takes (its
//! seeds), not for the whole database. Each (rule, which-arguments-are-bound, source) gets a
//! table of seeds and answers. A rule call inside a rule body does not recurse: it adds its
//! seeds to the callee's table and joins with the answers found so far. The tables are filled
//! to a fixpoint by rounds; in each round a body is evaluated once per "delta position" (the
//! seeds, or one of its rule calls), where that position sees only what the previous round
//! found, calls before it only older facts, and calls after it everything, so every new
//! combination is derived exactly once (semi-naive evaluation). Bodies with rule calls nested
//! inside `or`/`not` are re-evaluated whole each round (naive, still correct). Negation through
//! recursion (a rule that reaches itself through `not`) is not stratified here.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

type Fast = foldhash::fast::RandomState;
type FastSet<T> = HashSet<T, Fast>;
type FastMap<K, V> = HashMap<K, V, Fast>;

use vev_core::Value;
use vev_datalog::ast;
use vev_edn::{Span, Symbol};

use crate::compile::{CArg, CClause, Compiler, Scope};
use crate::error::QueryError;
use crate::exec::{Ctx, Env};
use crate::rel::{Rel, VarId};
use crate::values::edn_to_value;

pub(crate) struct CRule {
    pub head: Vec<VarId>,
    pub required: usize,
    pub clauses: Vec<CClause>,
    pub scope: Scope,
    /// Whether a rule call hides inside `or`/`not` (the body is then evaluated naively).
    pub nested_calls: bool,
}

#[derive(Default)]
pub(crate) struct RuleSet {
    rules: HashMap<Symbol, Vec<CRule>>,
}

impl RuleSet {
    pub fn compile(rules: &[ast::Rule], sources: &HashMap<Symbol, usize>) -> Result<RuleSet, QueryError> {
        let mut set = RuleSet::default();
        for r in rules {
            let mut c = Compiler::new(sources);
            let head: Vec<VarId> = r.vars.all().map(|v| c.scope.var(v)).collect();
            let clauses = c.clauses(&r.clauses)?;
            let nested_calls = clauses.iter().any(|cl| matches!(cl, CClause::Not { .. } | CClause::Or { .. }) && has_rule_call(cl));
            let branches = set.rules.entry(r.name.clone()).or_default();
            if let Some(first) = branches.first() {
                if first.head.len() != head.len() {
                    return Err(QueryError::RuleArity {
                        rule: r.name.to_string(),
                        given: head.len(),
                        expected: first.head.len(),
                        span: Some(r.span),
                    });
                }
            }
            branches.push(CRule {
                head,
                required: r.vars.required.len(),
                clauses,
                scope: c.scope,
                nested_calls,
            });
        }
        Ok(set)
    }

    pub fn contains(&self, name: &Symbol) -> bool {
        self.rules.contains_key(name)
    }

    /// Whether the call binds every required head variable (unknown rules report later).
    pub fn required_bound(&self, name: &Symbol, args: &[CArg], rel: &Rel) -> bool {
        let required = self.rules.get(name).map_or(0, |b| b.iter().map(|r| r.required).max().unwrap_or(0));
        args.iter().take(required).all(|a| match a {
            CArg::Var(v) => rel.has(*v),
            CArg::Blank => false,
            _ => true,
        })
    }
}

fn has_rule_call(c: &CClause) -> bool {
    match c {
        CClause::Rule { .. } => true,
        CClause::Not { clauses, .. } => clauses.iter().any(has_rule_call),
        CClause::Or { branches, .. } => branches.iter().flatten().any(has_rule_call),
        _ => false,
    }
}

/// Which position of a body sees only the previous round's new facts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pass {
    /// New seeds; every call sees all answers.
    Seeds,
    /// The n-th rule call of the body (in written order).
    Site(usize),
    /// Everything sees everything (bodies with nested calls).
    Naive,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Old,
    Delta,
    All,
}

type Key = (Symbol, Vec<bool>, Option<usize>);

#[derive(Default)]
struct Table {
    /// The argument positions bound by callers.
    bound: Vec<usize>,
    seeds_old: FastSet<Vec<Value>>,
    seeds_delta: FastSet<Vec<Value>>,
    seeds_new: FastSet<Vec<Value>>,
    all_answers: FastSet<Vec<Value>>,
    old: FastMap<Vec<Value>, Vec<Vec<Value>>>,
    delta: FastMap<Vec<Value>, Vec<Vec<Value>>>,
    new: Vec<Vec<Value>>,
}

impl Table {
    fn add_seed(&mut self, s: &[Value]) {
        if !self.seeds_old.contains(s) && !self.seeds_delta.contains(s) && !self.seeds_new.contains(s) {
            self.seeds_new.insert(s.to_vec());
        }
    }

    fn add_answer(&mut self, a: Vec<Value>) {
        if !self.all_answers.contains(&a) {
            self.all_answers.insert(a.clone());
            self.new.push(a);
        }
    }

    /// Move this round's findings to delta and the previous delta to old; any change?
    fn advance(&mut self) -> bool {
        for (k, mut v) in self.delta.drain() {
            self.old.entry(k).or_default().append(&mut v);
        }
        for a in self.new.drain(..) {
            let key = self.bound.iter().map(|p| a[*p].clone()).collect();
            self.delta.entry(key).or_default().push(a);
        }
        self.seeds_old.extend(self.seeds_delta.drain());
        self.seeds_delta = std::mem::take(&mut self.seeds_new);
        !self.delta.is_empty() || !self.seeds_delta.is_empty()
    }

    fn answers(&self, key: &[Value], mode: Mode, out: &mut Vec<Vec<Value>>) {
        if mode != Mode::Delta {
            if let Some(v) = self.old.get(key) {
                out.extend(v.iter().cloned());
            }
        }
        if mode != Mode::Old {
            if let Some(v) = self.delta.get(key) {
                out.extend(v.iter().cloned());
            }
        }
    }
}

/// The rule tables of one top-level rule call.
#[derive(Default)]
pub(crate) struct Tables {
    tables: HashMap<Key, Table>,
}

/// Evaluate a rule call and join its answers with `rel`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn call(
    ctx: &Ctx<'_>,
    env: &Env<'_>,
    rel: Rel,
    src: Option<usize>,
    name: &Symbol,
    args: &[CArg],
    span: Span,
    clause: &CClause,
) -> Result<Rel, QueryError> {
    let Some(branches) = ctx.rules.rules.get(name) else {
        return Err(QueryError::UnknownRule { rule: name.to_string(), span: Some(span) });
    };
    let arity = branches[0].head.len();
    if args.len() != arity {
        return Err(QueryError::RuleArity { rule: name.to_string(), given: args.len(), expected: arity, span: Some(span) });
    }
    let bound: Vec<bool> = args
        .iter()
        .map(|a| match a {
            CArg::Var(v) => rel.has(*v),
            CArg::Blank => false,
            _ => true,
        })
        .collect();
    let bound_pos: Vec<usize> = (0..arity).filter(|p| bound[*p]).collect();
    let key_of_row = |row: &[Value]| -> Vec<Value> {
        bound_pos
            .iter()
            .map(|p| match &args[*p] {
                CArg::Var(v) => row[rel.col(*v).expect("bound")].clone(),
                CArg::Const(c) => edn_to_value(c),
                CArg::Src(i) => Value::Long(*i as i64),
                CArg::Blank => unreachable!("blank arguments are never bound"),
            })
            .collect()
    };
    let key: Key = (name.clone(), bound.clone(), src);
    let seeds: FastSet<Vec<Value>> = rel.rows().map(key_of_row).collect();

    let owned;
    let (tables, mode) = match env.tables {
        Some(t) => (t, site_mode(env, clause)),
        None => {
            owned = RefCell::new(Tables::default());
            (&owned, Mode::All)
        }
    };
    {
        let mut t = tables.borrow_mut();
        let table = t.tables.entry(key.clone()).or_insert_with(|| Table { bound: bound_pos.clone(), ..Table::default() });
        for s in &seeds {
            table.add_seed(s);
        }
    }
    if env.tables.is_none() {
        fixpoint(ctx, tables)?;
    }

    // Join: each row with the answers for its key.
    let mut new_vars: Vec<VarId> = Vec::new();
    let mut new_pos: Vec<(usize, usize)> = Vec::new(); // (arg position, output column)
    let mut eq_pos: Vec<(usize, usize)> = Vec::new(); // repeated new variable: (position, first position)
    for (p, a) in args.iter().enumerate() {
        if let CArg::Var(v) = a {
            if rel.has(*v) {
                continue;
            }
            if let Some(first) = args[..p].iter().position(|x| matches!(x, CArg::Var(w) if w == v)) {
                eq_pos.push((p, first));
                continue;
            }
            new_pos.push((p, rel.width() + new_vars.len()));
            new_vars.push(*v);
        }
    }
    let mut vars = rel.vars.clone();
    vars.extend(new_vars.iter().copied());
    let mut out = Rel::empty(vars);
    out.distinct = rel.distinct && eq_pos.is_empty() && !args.iter().any(|a| matches!(a, CArg::Blank));
    let t = tables.borrow();
    let table = &t.tables[&key];
    let mut found = Vec::new();
    let mut buf = Vec::with_capacity(out.width());
    for row in rel.rows() {
        found.clear();
        table.answers(&key_of_row(row), mode, &mut found);
        for ans in &found {
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

/// The mode of a call site under the current pass.
fn site_mode(env: &Env<'_>, clause: &CClause) -> Mode {
    let (Some(pass), Some(body)) = (env.pass, env.body) else {
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

/// Fill the tables to a fixpoint, round by round.
fn fixpoint(ctx: &Ctx<'_>, tables: &RefCell<Tables>) -> Result<(), QueryError> {
    // The initial seeds become the first delta.
    tables.borrow_mut().tables.values_mut().for_each(|t| {
        t.advance();
    });
    loop {
        ctx.check(0)?;
        let keys: Vec<Key> = tables.borrow().tables.keys().cloned().collect();
        let delta_rules: HashSet<Symbol> = tables
            .borrow()
            .tables
            .iter()
            .filter(|(_, t)| !t.delta.is_empty())
            .map(|(k, _)| k.0.clone())
            .collect();
        for key in &keys {
            let branches = &ctx.rules.rules[&key.0];
            let (seeds_delta, seeds_old) = {
                let t = tables.borrow();
                let table = &t.tables[key];
                (table.seeds_delta.clone(), table.seeds_old.clone())
            };
            for branch in branches {
                let mut answers = Vec::new();
                if branch.nested_calls {
                    if !seeds_delta.is_empty() || !delta_rules.is_empty() {
                        let all: FastSet<Vec<Value>> = seeds_old.union(&seeds_delta).cloned().collect();
                        answers.extend(run_body(ctx, tables, key, branch, &all, Pass::Naive)?);
                    }
                } else {
                    if !seeds_delta.is_empty() {
                        answers.extend(run_body(ctx, tables, key, branch, &seeds_delta, Pass::Seeds)?);
                    }
                    let sites: Vec<&Symbol> = branch
                        .clauses
                        .iter()
                        .filter_map(|c| match c {
                            CClause::Rule { name, .. } => Some(name),
                            _ => None,
                        })
                        .collect();
                    for (d, callee) in sites.iter().enumerate() {
                        if delta_rules.contains(*callee) && !seeds_old.is_empty() {
                            answers.extend(run_body(ctx, tables, key, branch, &seeds_old, Pass::Site(d))?);
                        }
                    }
                }
                let mut t = tables.borrow_mut();
                let table = t.tables.get_mut(key).expect("table exists");
                for a in answers {
                    table.add_answer(a);
                }
            }
        }
        let mut changed = false;
        for t in tables.borrow_mut().tables.values_mut() {
            changed |= t.advance();
        }
        if !changed {
            return Ok(());
        }
    }
}

/// Evaluate one rule branch for the given seeds; its answers as full argument tuples.
fn run_body(
    ctx: &Ctx<'_>,
    tables: &RefCell<Tables>,
    key: &Key,
    branch: &CRule,
    seeds: &FastSet<Vec<Value>>,
    pass: Pass,
) -> Result<Vec<Vec<Value>>, QueryError> {
    let bound_pos: Vec<usize> = (0..branch.head.len()).filter(|p| key.1[*p]).collect();
    // Seed relation over the distinct bound head variables.
    let mut seed_vars: Vec<VarId> = Vec::new();
    let mut seed_cols: Vec<usize> = Vec::new(); // index into the seed tuple
    let mut seed_checks: Vec<(usize, usize)> = Vec::new();
    for (i, p) in bound_pos.iter().enumerate() {
        let v = branch.head[*p];
        match seed_vars.iter().position(|x| *x == v) {
            Some(j) => seed_checks.push((i, seed_cols[j])),
            None => {
                seed_vars.push(v);
                seed_cols.push(i);
            }
        }
    }
    let mut rel = Rel::empty(seed_vars);
    for s in seeds {
        if seed_checks.iter().any(|(i, j)| s[*i] != s[*j]) {
            continue;
        }
        let row: Vec<Value> = seed_cols.iter().map(|i| s[*i].clone()).collect();
        rel.push_row(&row);
    }
    let consts = HashMap::new();
    let env = Env {
        scope: &branch.scope,
        consts: &consts,
        default_src: key.2,
        tables: Some(tables),
        pass: Some(pass),
        body: Some(&branch.clauses),
        record: false,
        cache: None,
    };
    let mut head_unique: Vec<VarId> = Vec::new();
    for v in &branch.head {
        if !head_unique.contains(v) {
            head_unique.push(*v);
        }
    }
    let result = ctx.eval(&env, rel, &branch.clauses, &head_unique)?;
    if result.len == 0 {
        return Ok(Vec::new());
    }
    if let Some(v) = head_unique.iter().find(|v| !result.has(**v)) {
        return Err(QueryError::UnboundVariable {
            var: branch.scope.name(*v).to_owned(),
            context: "in the rule head: the rule body never binds it",
            span: None,
        });
    }
    let cols: Vec<usize> = branch.head.iter().map(|v| result.col(*v).expect("checked")).collect();
    Ok(result.rows().map(|row| cols.iter().map(|c| row[*c].clone()).collect()).collect())
}
