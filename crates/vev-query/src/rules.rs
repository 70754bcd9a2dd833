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
//! inside `or`/`not` are re-evaluated whole each round (naive, still correct). A table whose
//! calls bind nothing has one seed (the empty row), so a body evaluated for it in every round
//! reaches its first rule call with the same relation each time: that prefix is kept
//! (`Prefix`) and later rounds start from it rather than scanning its patterns again. Negation through
//! recursion (a rule that reaches itself through `not`) is not stratified here.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use vev_core::Value;
use vev_datalog::ast;
use vev_edn::Symbol;

use crate::compile::{CArg, CClause, Compiler, Scope};
use crate::error::QueryError;
use crate::exec::{Ctx, Env};
use crate::rel::{ChainIndex, Rel, RowIndex, VarId};

mod call;
mod linear;

pub(crate) use call::{call, call_columns, Site};

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
    rules: FastMap<Symbol, Vec<CRule>>,
}

impl RuleSet {
    pub fn compile(
        rules: &[ast::Rule],
        sources: &HashMap<Symbol, usize>,
    ) -> Result<RuleSet, QueryError> {
        let mut set = RuleSet::default();
        for r in rules {
            let mut c = Compiler::new(sources);
            let head: Vec<VarId> = r.vars.all().map(|v| c.scope.var(v)).collect();
            let clauses = c.clauses(&r.clauses)?;
            let nested_calls = clauses.iter().any(|cl| {
                matches!(cl, CClause::Not { .. } | CClause::Or { .. }) && has_rule_call(cl)
            });
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

    pub fn arity(&self, name: &Symbol) -> Option<usize> {
        self.rules
            .get(name)
            .and_then(|b| b.first())
            .map(|r| r.head.len())
    }

    /// The branches of a rule, in the order written.
    pub fn branches(&self, name: &Symbol) -> Option<&[CRule]> {
        self.rules.get(name).map(Vec::as_slice)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Symbol, &Vec<CRule>)> {
        self.rules.iter()
    }

    pub fn contains(&self, name: &Symbol) -> bool {
        self.rules.contains_key(name)
    }

    /// Whether the call binds every required head variable (unknown rules report later).
    pub fn required_bound(&self, name: &Symbol, args: &[CArg], rel: &Rel) -> bool {
        let required = self
            .rules
            .get(name)
            .map_or(0, |b| b.iter().map(|r| r.required).max().unwrap_or(0));
        args.iter().take(required).all(|a| match a {
            CArg::Var(v) => rel.has(*v),
            CArg::Blank => false,
            _ => true,
        })
    }
}

/// Whether evaluating `c` reads rule answers (a rule call, or one inside `not`/`or`).
pub(crate) fn has_rule_call(c: &CClause) -> bool {
    match c {
        CClause::Rule { .. } => true,
        CClause::Not { clauses, .. } => clauses.iter().any(has_rule_call),
        CClause::Or { branches, .. } => branches.iter().flatten().any(has_rule_call),
        _ => false,
    }
}

/// Where an evaluation of a rule body stood when it reached its first clause that reads rule
/// answers: the relation so far and the clauses (by position) it had applied. When a body is
/// evaluated once per round from the same seeds (a call that binds nothing: its seed is the
/// one empty row), that prefix is the same every round, so later rounds start from here
/// instead of scanning its patterns again.
pub(crate) struct Prefix {
    pub rel: Rel,
    pub consumed: Vec<usize>,
    /// Set when an evaluation restarts from this prefix, until its next clause runs: the
    /// rule call that ended the prefix then joins the call's new answers against `index`
    /// rather than hashing the delta and probing it with every row of the prefix.
    pub restored: std::cell::Cell<bool>,
    /// `rel` indexed by the columns it shares with the call's answers (built on first use).
    pub index: RefCell<Option<(Vec<usize>, ChainIndex)>>,
}

impl Prefix {
    pub fn new(rel: Rel, consumed: Vec<usize>) -> Prefix {
        Prefix {
            rel,
            consumed,
            restored: std::cell::Cell::new(false),
            index: RefCell::new(None),
        }
    }
}

pub(crate) type PrefixSlot = RefCell<Option<Prefix>>;

/// What an evaluation is as part of rule evaluation: the side channels a rule body's
/// evaluation reads (the executor's `Env` carries one).
#[derive(Clone, Copy)]
pub(crate) enum RuleCtx<'e> {
    /// Not a rule body: the query's own clauses.
    None,
    /// A rule body evaluated once, outside any fixpoint (a base in `closure`): its last
    /// projection keeps duplicates, which the caller's table removes.
    Base { body: &'e [CClause] },
    /// A rule body evaluated in a round of the fixpoint (or clauses inside its `not`/`or`).
    Round {
        /// The body, to tell its last step and to number its rule calls.
        body: &'e [CClause],
        /// The tables its rule calls add seeds to and read answers from.
        tables: &'e RefCell<Tables>,
        /// Which position of the body sees only the last round's new facts.
        pass: Pass,
        /// The body's rule-free prefix, kept from one round to the next (see `Prefix`).
        prefix: Option<&'e PrefixSlot>,
    },
}

impl<'e> RuleCtx<'e> {
    /// The rule body being evaluated.
    pub fn body(&self) -> Option<&'e [CClause]> {
        match *self {
            RuleCtx::None => None,
            RuleCtx::Base { body } | RuleCtx::Round { body, .. } => Some(body),
        }
    }

    /// The fixpoint's tables, inside a round.
    pub fn tables(&self) -> Option<&'e RefCell<Tables>> {
        match *self {
            RuleCtx::Round { tables, .. } => Some(tables),
            _ => None,
        }
    }

    /// The kept prefix of the body, inside a round of a table that binds nothing.
    pub fn prefix(&self) -> Option<&'e PrefixSlot> {
        match *self {
            RuleCtx::Round { prefix, .. } => prefix,
            _ => None,
        }
    }

    /// The context of clauses nested inside `not`/`or` of this body: the same, but no kept
    /// prefix (that is the body's own).
    pub fn inner(self) -> RuleCtx<'e> {
        match self {
            RuleCtx::Round {
                body, tables, pass, ..
            } => RuleCtx::Round {
                body,
                tables,
                pass,
                prefix: None,
            },
            other => other,
        }
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

/// The maps of rule tables, looked up several times per round: foldhash, not SipHash.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// Rows of one width, deduplicated, kept in insertion order and split by two marks into
/// old (before the last round), delta (found in the last round) and new (this round).
struct Rows {
    rel: Rel,
    cols: Vec<usize>,
    index: RowIndex,
    old_end: usize,
    delta_end: usize,
}

impl Rows {
    fn new(width: usize) -> Rows {
        let mut rel = Rel::empty((0..width).collect());
        rel.distinct = true;
        Rows {
            rel,
            cols: (0..width).collect(),
            index: RowIndex::with_capacity(16),
            old_end: 0,
            delta_end: 0,
        }
    }

    /// Room for `n` more rows without growing.
    fn reserve(&mut self, n: usize) {
        self.rel.data.reserve(n * self.cols.len());
        self.index.reserve(n);
    }

    /// `insert` of the next row's values from `values` (moved, not cloned).
    fn insert_from(&mut self, values: &mut impl Iterator<Item = Value>) -> bool {
        let i = self.rel.len;
        self.rel.data.extend(values.take(self.cols.len()));
        self.rel.len += 1;
        self.keep_if_new(i)
    }

    /// Add a row unless present; whether it was added (its id is then `len - 1`).
    fn insert(&mut self, row: &[Value]) -> bool {
        let i = self.rel.len;
        self.rel.push_row(row);
        self.keep_if_new(i)
    }

    /// Keep row `i`, the last, if no other row equals it; whether it was kept.
    fn keep_if_new(&mut self, i: usize) -> bool {
        if self.index.insert(&self.rel, &self.cols, i).1 {
            return true;
        }
        self.rel.len -= 1;
        self.rel.data.truncate(i * self.cols.len());
        false
    }

    /// Start a round: delta becomes old, new becomes delta. Whether delta is non-empty.
    fn advance(&mut self) -> bool {
        self.old_end = self.delta_end;
        self.delta_end = self.rel.len;
        self.delta_end > self.old_end
    }

    fn has_delta(&self) -> bool {
        self.delta_end > self.old_end
    }

    fn ids(&self, mode: Mode) -> std::ops::Range<usize> {
        match mode {
            Mode::Old => 0..self.old_end,
            Mode::Delta => self.old_end..self.delta_end,
            Mode::All => 0..self.delta_end,
        }
    }

    /// The rows of one part, as a relation over `vars`.
    fn part(&self, mode: Mode, vars: Vec<VarId>) -> Rel {
        let w = self.cols.len();
        let ids = self.ids(mode);
        let mut rel = Rel::empty(vars);
        rel.data
            .extend_from_slice(&self.rel.data[ids.start * w..ids.end * w]);
        rel.len = ids.len();
        rel.distinct = true;
        rel
    }
}

struct Table {
    /// The argument positions bound by callers.
    bound: Vec<usize>,
    seeds: Rows,
    answers: Rows,
    /// Answers chained by their bound values: head answer per key, then `next`.
    by_key: RowIndex,
    next: Vec<usize>,
    last: Vec<usize>,
}

impl Table {
    fn new(arity: usize, bound: Vec<usize>) -> Table {
        Table {
            seeds: Rows::new(bound.len()),
            answers: Rows::new(arity),
            bound,
            by_key: RowIndex::with_capacity(16),
            next: Vec::new(),
            last: Vec::new(),
        }
    }

    fn add_seed(&mut self, s: &[Value]) {
        self.seeds.insert(s);
    }

    /// Add each row of `rel` (full argument tuples) not yet among the answers, moving the
    /// values.
    fn add_answers(&mut self, rel: Rel) {
        let w = self.answers.cols.len();
        debug_assert_eq!(rel.width(), w);
        self.answers.reserve(rel.len);
        let mut values = rel.data.into_iter();
        for _ in 0..rel.len {
            if self.answers.insert_from(&mut values) {
                self.chain_last();
            }
        }
    }

    /// Chain the answer just added after the others with its bound values.
    fn chain_last(&mut self) {
        if self.bound.is_empty() {
            // One key for every answer: `answers` walks the part's ids instead of a chain.
            return;
        }
        let i = self.answers.rel.len - 1;
        self.next.push(usize::MAX);
        self.last.push(i);
        let (head, fresh) = self.by_key.insert(&self.answers.rel, &self.bound, i);
        if !fresh {
            let tail = self.last[head];
            self.next[tail] = i;
            self.last[head] = i;
        }
    }

    /// Start a round; whether anything changed in the last one.
    fn advance(&mut self) -> bool {
        let a = self.answers.advance();
        let s = self.seeds.advance();
        a || s
    }

    /// The answers whose bound values equal `key`, within the part `mode` names.
    fn answers<'t>(&'t self, key: &[Value], mode: Mode) -> impl Iterator<Item = &'t [Value]> + 't {
        let ids = self.answers.ids(mode);
        let mut all = self.bound.is_empty().then(|| ids.clone());
        let head = if all.is_some() {
            None
        } else {
            let probe_cols: Vec<usize> = (0..key.len()).collect();
            self.by_key
                .find(&self.answers.rel, &self.bound, key, &probe_cols)
        };
        let mut at = head.unwrap_or(usize::MAX);
        std::iter::from_fn(move || loop {
            if let Some(all) = all.as_mut() {
                return all.next().map(|i| self.answers.rel.row(i));
            }
            if at == usize::MAX || at >= ids.end {
                return None;
            }
            let i = at;
            at = self.next[i];
            if i >= ids.start {
                return Some(self.answers.rel.row(i));
            }
        })
    }
}

/// The rule tables of one top-level rule call.
#[derive(Default)]
pub(crate) struct Tables {
    tables: FastMap<Key, Table>,
    /// The top-level call bound nothing: every call computes its whole relation (no seeds),
    /// and calls join with answers by hashing, not per bound key.
    unseeded: bool,
}

/// Fill the tables to a fixpoint, round by round.
fn fixpoint(ctx: &Ctx<'_>, tables: &RefCell<Tables>) -> Result<(), QueryError> {
    // The initial seeds become the first delta.
    tables.borrow_mut().tables.values_mut().for_each(|t| {
        t.advance();
    });
    // Prefixes of (table, branch, rule-call site) evaluations, for tables whose seeds stay
    // the same from round to round.
    let mut prefixes: Prefixes = FastMap::default();
    loop {
        ctx.check(0)?;
        let keys: Vec<Key> = tables.borrow().tables.keys().cloned().collect();
        let delta_rules: FastSet<Symbol> = tables
            .borrow()
            .tables
            .iter()
            .filter(|(_, t)| t.answers.has_delta())
            .map(|(k, _)| k.0.clone())
            .collect();
        for key in &keys {
            let seeds = {
                let t = tables.borrow();
                let seeds = &t.tables[key].seeds;
                let vars: Vec<VarId> = (0..seeds.cols.len()).collect();
                SeedParts {
                    delta: seeds.part(Mode::Delta, vars.clone()),
                    old: seeds.part(Mode::Old, vars.clone()),
                    all: seeds.part(Mode::All, vars),
                }
            };
            for (b, branch) in ctx.rules.rules[&key.0].iter().enumerate() {
                let round = Round {
                    ctx,
                    tables,
                    key,
                    seeds: &seeds,
                    delta_rules: &delta_rules,
                };
                let found = round.branch(b, branch, &mut prefixes)?;
                let mut t = tables.borrow_mut();
                let table = t.tables.get_mut(key).expect("table exists");
                for rel in found {
                    table.add_answers(rel);
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

/// The kept prefixes of a fixpoint, by (table, branch, rule-call site).
type Prefixes = FastMap<(Key, usize, usize), PrefixSlot>;

/// A table's seeds split by round: those new in the last round, the older ones, and all.
struct SeedParts {
    delta: Rel,
    old: Rel,
    all: Rel,
}

/// One table's evaluation in one round of the fixpoint.
struct Round<'r, 'c> {
    ctx: &'r Ctx<'c>,
    tables: &'r RefCell<Tables>,
    key: &'r Key,
    seeds: &'r SeedParts,
    /// The rules whose answers changed in the last round.
    delta_rules: &'r FastSet<Symbol>,
}

impl Round<'_, '_> {
    /// The answers branch `b` of the table's rule derives this round: from the new seeds,
    /// and from each rule call whose callee found new answers (semi-naive; see the module
    /// doc), or from a whole evaluation for a body with calls inside `not`/`or`.
    fn branch(
        &self,
        b: usize,
        branch: &CRule,
        prefixes: &mut Prefixes,
    ) -> Result<Vec<Rel>, QueryError> {
        let (ctx, tables, key, seeds) = (self.ctx, self.tables, self.key, self.seeds);
        let mut found: Vec<Rel> = Vec::new();
        if branch.nested_calls {
            if seeds.delta.len > 0 || !self.delta_rules.is_empty() {
                found.push(run_body(
                    ctx,
                    tables,
                    key,
                    branch,
                    &seeds.all,
                    Pass::Naive,
                    None,
                )?);
            }
            return Ok(found);
        }
        if seeds.delta.len > 0 {
            // A table that binds nothing has the same seed, the empty row, in every round:
            // the prefix this evaluation reaches is the one the first rule call's later
            // rounds start from, so it is kept for them.
            let has_call = branch
                .clauses
                .iter()
                .any(|c| matches!(c, CClause::Rule { .. }));
            let slot = has_call.then(|| prefix_slot(prefixes, key, b, 0)).flatten();
            found.push(run_body(
                ctx,
                tables,
                key,
                branch,
                &seeds.delta,
                Pass::Seeds,
                slot,
            )?);
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
            if self.delta_rules.contains(*callee) && seeds.old.len > 0 {
                let slot = prefix_slot(prefixes, key, b, d);
                if let Some(rel) = slot
                    .map(|slot| delta_step(ctx, tables, key, branch, d, slot))
                    .transpose()?
                    .flatten()
                {
                    found.push(rel);
                    continue;
                }
                found.push(run_body(
                    ctx,
                    tables,
                    key,
                    branch,
                    &seeds.old,
                    Pass::Site(d),
                    slot,
                )?);
            }
        }
        Ok(found)
    }
}

/// The kept prefix of branch `b`'s evaluations up to rule call `d`, for a table that binds
/// nothing (its one seed, the empty row, is the same in every round, and so is the prefix);
/// `None` for other tables.
fn prefix_slot<'p>(
    prefixes: &'p mut Prefixes,
    key: &Key,
    b: usize,
    d: usize,
) -> Option<&'p PrefixSlot> {
    key.1.iter().all(|bound| !bound).then(|| {
        &*prefixes
            .entry((key.clone(), b, d))
            .or_insert_with(|| RefCell::new(None))
    })
}

/// Where a head value of a fused delta step comes from: a column of the prefix, or an
/// argument position of the rule call's answers.
#[derive(Clone, Copy)]
enum HeadFrom {
    Prefix(usize),
    Answer(usize),
}

/// `Pass::Site(d)` of a body that is a cached prefix and then the rule call at site `d`
/// alone (linear recursion, `[?x :follows ?t] (follows ?t ?y)`), computed directly: each of
/// the callee's new answers probes the prefix's index and the matches become head tuples,
/// without the relations that `run_body` builds on the way (the call's answers, the joined
/// rows, their projection onto the head). The rows are `run_body`'s, in another order.
/// `None` when the body is not of that form or its prefix is not cached yet (the first
/// evaluation caches it), and in the naive plan, which the differential tests compare with.
fn delta_step(
    ctx: &Ctx<'_>,
    tables: &RefCell<Tables>,
    key: &Key,
    branch: &CRule,
    d: usize,
    slot: &PrefixSlot,
) -> Result<Option<Rel>, QueryError> {
    if ctx.limits.naive {
        return Ok(None);
    }
    let cached = slot.borrow();
    let Some(prefix) = cached.as_ref() else {
        return Ok(None);
    };
    let mut rest = (0..branch.clauses.len()).filter(|i| !prefix.consumed.contains(i));
    let (Some(only), None) = (rest.next(), rest.next()) else {
        return Ok(None);
    };
    let CClause::Rule {
        src, name, args, ..
    } = &branch.clauses[only]
    else {
        return Ok(None);
    };
    let site = branch.clauses[..only]
        .iter()
        .filter(|c| matches!(c, CClause::Rule { .. }))
        .count();
    if site != d
        || args
            .iter()
            .any(|a| matches!(a, CArg::Const(_) | CArg::Src(_)))
    {
        return Ok(None);
    }
    let t = tables.borrow();
    let bound_any = args
        .iter()
        .any(|a| matches!(a, CArg::Var(v) if prefix.rel.has(*v)));
    if bound_any && !t.unseeded {
        // The call would seed a table of its own for the values it binds.
        return Ok(None);
    }
    let callee_key: Key = (name.clone(), vec![false; args.len()], src.or(key.2));
    let Some(callee) = t.tables.get(&callee_key) else {
        return Ok(None);
    };
    // The call's variables: shared with the prefix (the join), new, or repeated.
    let mut left_cols: Vec<usize> = Vec::new();
    let mut right_cols: Vec<usize> = Vec::new();
    let mut firsts: Vec<(VarId, usize)> = Vec::new();
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for (p, a) in args.iter().enumerate() {
        let CArg::Var(v) = a else { continue };
        if let Some(&(_, q)) = firsts.iter().find(|(w, _)| w == v) {
            repeats.push((p, q));
            continue;
        }
        firsts.push((*v, p));
        if let Some(c) = prefix.rel.col(*v) {
            left_cols.push(c);
            right_cols.push(p);
        }
    }
    let mut head: Vec<HeadFrom> = Vec::with_capacity(branch.head.len());
    for v in &branch.head {
        match prefix.rel.col(*v) {
            Some(c) => head.push(HeadFrom::Prefix(c)),
            None => match firsts.iter().find(|(w, _)| w == v) {
                Some(&(_, p)) => head.push(HeadFrom::Answer(p)),
                // An unbound head variable: `run_body` reports it.
                None => return Ok(None),
            },
        }
    }
    let mut index = prefix.index.borrow_mut();
    if index.as_ref().is_none_or(|(cols, _)| *cols != left_cols) {
        *index = Some((
            left_cols.clone(),
            ChainIndex::build(&prefix.rel, &left_cols),
        ));
    }
    let (_, index) = index.as_ref().expect("just built");
    let mut out = Rel::empty((0..head.len()).collect());
    let answers = &callee.answers;
    // At least one row per new answer when the prefix's keys are distinct (a tree, a chain).
    out.data
        .reserve(answers.ids(Mode::Delta).len() * head.len());
    for i in answers.ids(Mode::Delta) {
        let a = answers.rel.row(i);
        if repeats.iter().any(|(p, q)| a[*p] != a[*q]) {
            continue;
        }
        for j in index.matches(&prefix.rel, &left_cols, a, &right_cols) {
            let row = prefix.rel.row(j);
            out.data.extend(head.iter().map(|h| match h {
                HeadFrom::Prefix(c) => row[*c].clone(),
                HeadFrom::Answer(p) => a[*p].clone(),
            }));
            out.len += 1;
        }
        ctx.check(out.len)?;
    }
    Ok(Some(out))
}

/// Evaluate one rule branch for the given seeds (rows of the bound argument values); its
/// answers as rows of full argument tuples.
fn run_body(
    ctx: &Ctx<'_>,
    tables: &RefCell<Tables>,
    key: &Key,
    branch: &CRule,
    seeds: &Rel,
    pass: Pass,
    prefix: Option<&PrefixSlot>,
) -> Result<Rel, QueryError> {
    let arity = branch.head.len();
    let bound_pos: Vec<usize> = (0..arity).filter(|p| key.1[*p]).collect();
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
    rel.distinct = seed_checks.is_empty();
    let mut row: Vec<Value> = Vec::with_capacity(seed_cols.len());
    for s in seeds.rows() {
        if seed_checks.iter().any(|(i, j)| s[*i] != s[*j]) {
            continue;
        }
        row.clear();
        row.extend(seed_cols.iter().map(|i| s[*i].clone()));
        rel.push_row(&row);
    }
    let consts = crate::rel::Consts::default();
    let env = Env {
        scope: &branch.scope,
        consts: &consts,
        default_src: key.2,
        record: false,
        cache: None,
        rule: RuleCtx::Round {
            body: &branch.clauses,
            tables,
            pass,
            prefix,
        },
    };
    let mut head_unique: Vec<VarId> = Vec::new();
    for v in &branch.head {
        if !head_unique.contains(v) {
            head_unique.push(*v);
        }
    }
    let result = ctx.eval(&env, rel, &branch.clauses, &head_unique)?;
    let mut out = Rel::empty((0..arity).collect());
    if result.len == 0 {
        return Ok(out);
    }
    if let Some(v) = head_unique.iter().find(|v| !result.has(**v)) {
        return Err(QueryError::UnboundVariable {
            var: branch.scope.name(*v).to_owned(),
            context: "in the rule head: the rule body never binds it",
            span: None,
        });
    }
    let cols: Vec<usize> = branch
        .head
        .iter()
        .map(|v| result.col(*v).expect("checked"))
        .collect();
    out.data.reserve(result.len * arity);
    for r in result.rows() {
        out.data.extend(cols.iter().map(|c| r[*c].clone()));
    }
    out.len = result.len;
    Ok(out)
}
