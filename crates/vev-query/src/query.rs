//! The query API: prepare once, run many times with new inputs and newer databases.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use vev_datalog::ast::{self, FindElem, FindSpec, PullSource, ReturnMapKind};
use vev_edn::{Edn, Keyword, Symbol};

use crate::compile::{CBinding, CClause, Compiler, Scope};
use crate::error::QueryError;
use crate::exec::{Ctx, Env, Limits, PlanStep};
use crate::funcs::Registry;
use crate::rel::{Rel, VarId};
use crate::rows::Rows;
use crate::rules::{RuleCtx, RuleSet};
use crate::source::Source;

mod checks;
mod emit;
mod inputs;
mod star_acc;
mod star_agg;

use emit::FnSink;
use inputs::{storage_failure, storage_marks, BoundInputs};

/// One input of a query, in `:in` order.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    /// A database, for `$` or `$name`.
    Db(&'a dyn Source),
    /// A value for a binding (`?x`, `[?x ...]`, ...), a rule set for `%`, or a pull pattern.
    Edn(&'a Edn),
}

/// How to run a query.
#[derive(Clone, Debug, Default)]
pub struct QueryOptions {
    /// The time and row limits the run stops at, and whether to run the naive plan.
    pub limits: Limits,
    /// The user functions and aggregates the query may call, besides the built-ins.
    pub registry: Registry,
}

/// A query's result, shaped by its `:find` (and `:keys`/`:strs`/`:syms`).
#[derive(Clone, Debug, PartialEq)]
pub enum QueryResult {
    /// `:find ?a ?b`: distinct tuples.
    Rel(Rows),
    /// `:find [?a ...]`
    Coll(Vec<Edn>),
    /// `:find ?a .`
    Scalar(Option<Edn>),
    /// `:find [?a ?b]`
    Tuple(Option<Vec<Edn>>),
    /// A relation find with `:keys`, `:strs` or `:syms`: one map per row.
    Maps(Vec<Edn>),
    /// A relation find with `:with`: a bag of tuples (duplicates kept).
    Bag(Rows),
}

impl QueryResult {
    /// The number of rows (1 or 0 for a scalar or tuple).
    pub fn len(&self) -> usize {
        match self {
            QueryResult::Rel(r) | QueryResult::Bag(r) => r.len(),
            QueryResult::Coll(c) | QueryResult::Maps(c) => c.len(),
            QueryResult::Scalar(s) => usize::from(s.is_some()),
            QueryResult::Tuple(t) => usize::from(t.is_some()),
        }
    }

    /// Whether the result has no rows (`nil` for a scalar or tuple find).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The result as Datomic prints it: a set of vectors, a vector, a value, or `nil`.
    pub fn to_edn(&self) -> Edn {
        match self {
            QueryResult::Rel(rows) => {
                Edn::Set(rows.iter().map(|r| Edn::Vector(r.to_vec())).collect())
            }
            QueryResult::Coll(items) => Edn::Vector(items.clone()),
            QueryResult::Bag(rows) => {
                Edn::Vector(rows.iter().map(|r| Edn::Vector(r.to_vec())).collect())
            }
            QueryResult::Maps(items) => Edn::Vector(items.clone()),
            QueryResult::Scalar(v) => v.clone().unwrap_or(Edn::Nil),
            QueryResult::Tuple(t) => t.clone().map_or(Edn::Nil, Edn::Vector),
        }
    }
}

/// The shape of a query's result, from its `:find` (see [`Query::run_rows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    /// `:find ?a ?b`: a set of tuples.
    Rel,
    /// `:find ?a ?b :with ?c`: a bag of tuples (duplicates kept).
    Bag,
    /// `:find [?a ...]`: a collection of distinct values, one per row.
    Coll,
    /// `:find ?a .`: at most one row of one value.
    Scalar,
    /// `:find [?a ?b]`: at most one row.
    Tuple,
    /// A relation find with `:keys`, `:strs` or `:syms`: a collection of maps.
    Maps,
    /// A tuple find with `:keys`, `:strs` or `:syms`: at most one map.
    Map,
}

/// A parsed and compiled query, ready to run many times.
#[derive(Clone)]
pub struct Query {
    ast: Arc<ast::Query>,
    text: Option<Arc<str>>,
    scope: Arc<Scope>,
    clauses: Arc<Vec<CClause>>,
    /// Source name → input position.
    sources: Arc<HashMap<Symbol, usize>>,
    /// The input position of `$`, the default source, if the query has one.
    default_src: Option<usize>,
    /// Binding inputs: input position → compiled binding.
    bindings: Arc<Vec<(usize, CBinding)>>,
    find: Arc<Vec<Find>>,
    with: Vec<VarId>,
    /// The clause order of the last run and the statistics it was chosen on; reused while
    /// they hold (shared by clones of this query).
    plan: Arc<std::sync::Mutex<Option<crate::exec::PlanCache>>>,
    /// The last run's rule set (`%`), compiled, with the EDN it came from: a run given an
    /// equal one reuses it rather than parsing and compiling it again (shared by clones).
    rules: Arc<std::sync::Mutex<Option<KeptRules>>>,
    /// The empty rule set of a run given none, kept so that its `checked` flag lets later
    /// runs skip the binding checks, as a kept rule set's does.
    no_rules: Arc<CompiledRules>,
}

/// A rule set's EDN and what it compiled to.
type KeptRules = (Edn, Arc<CompiledRules>);

/// A rule set as a run uses it, and whether the query's clauses and the rules' bodies
/// passed the binding checks with it (each `CompiledRules` belongs to one query: the checks
/// depend only on the two, so they run until they pass once).
#[derive(Default)]
struct CompiledRules {
    set: RuleSet,
    checked: std::sync::atomic::AtomicBool,
    /// The query with the calls it can inline replaced by the rules' bodies (`inline`), if
    /// any can be: what a run with this rule set evaluates, but for the naive plan.
    inlined: Option<Query>,
}

#[derive(Clone, Debug)]
enum Find {
    Var(VarId),
    Agg {
        name: String,
        args: Vec<Edn>,
        var: VarId,
    },
    Pull {
        src: usize,
        var: VarId,
        pattern: PullPat,
    },
}

#[derive(Clone, Debug)]
enum PullPat {
    Fixed(Arc<ast::PullPattern>),
    Input(VarId),
}

impl std::fmt::Debug for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query").field("ast", &self.ast).finish()
    }
}

impl Query {
    /// Parse and compile query text.
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        let ast = vev_datalog::parse_query(text)?;
        let mut q = Query::from_ast(ast)?;
        q.text = Some(Arc::from(text));
        Ok(q)
    }

    /// Compile an already-parsed query.
    pub fn from_ast(ast: ast::Query) -> Result<Query, QueryError> {
        let mut sources = HashMap::new();
        for (i, input) in ast.inputs.iter().enumerate() {
            if let ast::Input::Src(s, _) = input {
                sources.insert(s.0.clone(), i);
            }
        }
        let mut c = Compiler::new(&sources);
        let mut bindings = Vec::new();
        for (i, input) in ast.inputs.iter().enumerate() {
            if let ast::Input::Binding(b, _) = input {
                bindings.push((i, c.binding(b)));
            }
        }
        let clauses = c.clauses(&ast.clauses)?;
        let default_src = sources.get(&Symbol::new("$")).copied();
        let mut find = Vec::new();
        for elem in ast.find.elems() {
            find.push(match elem {
                FindElem::Var(v, _) => Find::Var(c.scope.var(v)),
                FindElem::Aggregate {
                    name, args, var, ..
                } => Find::Agg {
                    name: name.to_string(),
                    args: args.clone(),
                    var: c.scope.var(var),
                },
                FindElem::Pull {
                    src,
                    var,
                    pattern,
                    span,
                } => {
                    let src_idx = if src.name() == "$" {
                        default_src
                    } else {
                        sources.get(&src.0).copied()
                    };
                    let Some(src_idx) = src_idx else {
                        return Err(QueryError::UnknownSource {
                            name: src.name().to_owned(),
                            span: Some(*span),
                        });
                    };
                    let pattern = match pattern {
                        PullSource::Pattern(p) => PullPat::Fixed(p.clone()),
                        PullSource::Input(v) => PullPat::Input(c.scope.var(v)),
                    };
                    Find::Pull {
                        src: src_idx,
                        var: c.scope.var(var),
                        pattern,
                    }
                }
            });
        }
        let with: Vec<VarId> = ast.with.iter().map(|v| c.scope.var(v)).collect();
        if let Some(v) = with
            .iter()
            .find(|v| find.iter().any(|f| find_var(f) == **v))
        {
            return Err(QueryError::Syntax(vev_datalog::SyntaxError::InvalidWith {
                form: Edn::Symbol(Symbol::new(c.scope.name(*v))),
                reason: "the variable is also in :find".to_owned(),
                span: ast.span,
            }));
        }
        Ok(Query {
            text: None,
            scope: Arc::new(c.scope),
            clauses: Arc::new(clauses),
            default_src,
            sources: Arc::new(sources),
            bindings: Arc::new(bindings),
            find: Arc::new(find),
            with,
            ast: Arc::new(ast),
            plan: Arc::default(),
            rules: Arc::default(),
            no_rules: Arc::default(),
        })
    }

    /// The syntax tree the query was compiled from.
    pub fn ast(&self) -> &ast::Query {
        &self.ast
    }

    /// Run with these inputs.
    pub fn run(
        &self,
        inputs: &[Input<'_>],
        opts: &QueryOptions,
    ) -> Result<QueryResult, QueryError> {
        self.execute(inputs, opts, false, |q, ctx, rel| q.shape(ctx, rel))
            .map(|(r, _)| r)
    }

    /// Run, and return the plan that ran with estimated and actual row counts.
    pub fn explain(
        &self,
        inputs: &[Input<'_>],
        opts: &QueryOptions,
    ) -> Result<(QueryResult, Vec<PlanStep>), QueryError> {
        self.execute(inputs, opts, true, |q, ctx, rel| q.shape(ctx, rel))
    }

    /// Run, handing the result to `sink` a row at a time instead of collecting it: the final
    /// relation stays in its compact form and each row becomes EDN (pulled entities
    /// included) only as it is handed over, so a large result costs its compact rows, not
    /// those plus a copy as EDN. A row is the `:find` elements' values in order (see
    /// [`Query::result_kind`] for how many rows each shape gives; [`Query::row_map`] makes
    /// the map of a `:keys`/`:strs`/`:syms` row). With `sorted`, the rows of a set
    /// (relations, collections, maps; not `:with` bags) come in the order of their values
    /// (entities by id), so the output is deterministic; otherwise in the engine's order.
    /// Returns the number of rows handed over. An error from `sink` stops the run.
    pub fn run_rows<E: From<QueryError>>(
        &self,
        inputs: &[Input<'_>],
        opts: &QueryOptions,
        sorted: bool,
        mut sink: impl FnMut(Vec<Edn>) -> Result<(), E>,
    ) -> Result<usize, E> {
        let marks = storage_marks(inputs);
        self.execute(inputs, opts, false, |q, ctx, rel| {
            // Every scan is done: a storage failure now means the rows are incomplete, so
            // none may be handed over (`execute` checks again after the pulls).
            storage_failure(inputs, &marks)?;
            q.emit(ctx, rel, sorted, &mut FnSink(&mut sink))
        })
        .map(|(n, _)| n)
    }

    /// The compiled rule set of a `%` input: the last run's when `edn` equals its input.
    fn rules_of(&self, edn: &Edn) -> Result<Arc<CompiledRules>, QueryError> {
        let mut cache = vev_core::sync::lock(&self.rules);
        if let Some((cached, compiled)) = cache.as_ref() {
            if cached == edn {
                return Ok(compiled.clone());
            }
        }
        let parsed = vev_datalog::parse_rules_value(edn)?;
        let set = RuleSet::compile(&parsed, &self.sources)?;
        // A rewritten query that does not compile is not run: the calls stay calls.
        let inlined = crate::inline::inline_rules(&self.ast, &parsed)
            .and_then(|ast| Query::from_ast(ast).ok())
            .map(|q| Query {
                text: self.text.clone(),
                ..q
            });
        let compiled = Arc::new(CompiledRules {
            set,
            checked: Default::default(),
            inlined,
        });
        *cache = Some((edn.clone(), compiled.clone()));
        Ok(compiled)
    }

    /// How this query's result is shaped, known before it runs.
    pub fn result_kind(&self) -> ResultKind {
        let has_agg = self.find.iter().any(|f| matches!(f, Find::Agg { .. }));
        let maps = self.ast.return_maps.is_some();
        match &self.ast.find {
            FindSpec::Rel(_) if maps => ResultKind::Maps,
            FindSpec::Rel(_) if !self.with.is_empty() && !has_agg => ResultKind::Bag,
            FindSpec::Rel(_) => ResultKind::Rel,
            FindSpec::Coll(_) => ResultKind::Coll,
            FindSpec::Scalar(_) => ResultKind::Scalar,
            FindSpec::Tuple(_) if maps => ResultKind::Map,
            FindSpec::Tuple(_) => ResultKind::Tuple,
        }
    }

    /// The map of one row of a `:keys`, `:strs` or `:syms` query (the row itself as a
    /// vector for any other query).
    pub fn row_map(&self, row: Vec<Edn>) -> Edn {
        let Some(maps) = self.ast.return_maps.as_ref() else {
            return Edn::Vector(row);
        };
        Edn::Map(
            maps.names
                .iter()
                .zip(row)
                .map(|(n, v)| {
                    let key = match maps.kind {
                        ReturnMapKind::Keys => Edn::Keyword(Keyword::new(n.as_str())),
                        ReturnMapKind::Strs => Edn::String(n.to_string()),
                        ReturnMapKind::Syms => Edn::Symbol(n.clone()),
                    };
                    (key, v)
                })
                .collect::<BTreeMap<_, _>>(),
        )
    }

    /// `execute_inner`, failed as a whole when any database input met a storage failure
    /// (its scans then saw less than the data, so the result cannot be trusted).
    fn execute<T, E: From<QueryError>>(
        &self,
        inputs: &[Input<'_>],
        opts: &QueryOptions,
        explain: bool,
        finish: impl FnOnce(&Query, &Ctx<'_>, Rel) -> Result<T, E>,
    ) -> Result<(T, Vec<PlanStep>), E> {
        let marks = storage_marks(inputs);
        let out = self.execute_inner(inputs, opts, explain, finish);
        storage_failure(inputs, &marks)?;
        let (result, plan) = out?;
        Ok((result?, plan))
    }

    fn clause_text(&self, c: &CClause) -> String {
        let span = c.span();
        match &self.text {
            Some(t) if span.end.offset <= t.len() && span.start.offset < span.end.offset => t
                .get(span.start.offset..span.end.offset)
                .unwrap_or("?")
                .to_owned(),
            _ => format!("clause at {}:{}", span.start.line, span.start.column),
        }
    }

    /// Run; with `explain`, also record each step of the plan (otherwise nothing is spent on
    /// estimates, clause texts or clocks that only `explain` shows).
    fn execute_inner<T>(
        &self,
        inputs: &[Input<'_>],
        opts: &QueryOptions,
        explain: bool,
        finish: impl FnOnce(&Query, &Ctx<'_>, Rel) -> T,
    ) -> Result<(T, Vec<PlanStep>), QueryError> {
        let started = Instant::now();
        let BoundInputs {
            sources,
            collections,
            rules: compiled,
            rel,
            consts,
        } = self.bind_inputs(inputs)?;
        self.check(&compiled, opts, &sources)?;
        // What is evaluated: this query, or the one with rule calls inlined (whose inputs,
        // and so the bound relation and constants, are this one's, compiled alike).
        let body = match &compiled.inlined {
            Some(inlined) if !opts.limits.naive => inlined,
            _ => self,
        };
        let default_src = self.default_src;
        let text = |c: &CClause| body.clause_text(c);
        let ctx = Ctx {
            sources,
            collections,
            rules: &compiled.set,
            registry: &opts.registry,
            limits: opts.limits.clone(),
            started,
            plan: RefCell::new(Vec::new()),
            source_text: &text,
            replayed: std::cell::Cell::new(false),
            step_started: std::cell::Cell::new(Instant::now()),
            implied: RefCell::new(HashSet::new()),
            grouped: RefCell::new(None),
        };
        let env = Env {
            scope: &body.scope,
            consts: &consts,
            default_src,
            record: explain,
            cache: Some(&body.plan),
            rule: RuleCtx::None,
        };
        // The variables the result is made of: the `:find` elements' and the `:with` ones.
        let mut keep = body.find_vars();
        for v in &body.with {
            if !keep.contains(v) {
                keep.push(*v);
            }
        }
        // A star aggregate is answered from the sorted index runs, with no relation: its
        // rows wait in the context for `emit` (the relation handed on is empty).
        if compiled.inlined.is_none() {
            if let Some(rows) = body.star_aggregate(&ctx, explain) {
                *ctx.grouped.borrow_mut() = Some(rows);
                let result = finish(body, &ctx, Rel::empty(keep));
                return Ok((result, ctx.plan.take()));
            }
        }
        let rel = ctx.eval(&env, rel, &body.clauses, &keep)?;
        if let Some(v) = keep.iter().find(|v| !rel.has(**v)) {
            return Err(QueryError::UnboundVariable {
                var: body.scope.name(*v).to_owned(),
                context: "in :find or :with: no clause binds it",
                span: Some(
                    self.ast
                        .find
                        .elems()
                        .first()
                        .map_or(self.ast.span, |e| e.span()),
                ),
            });
        }
        let rel = rel.into_projection(&keep);
        let result = finish(body, &ctx, rel);
        let mut plan = ctx.plan.take();
        if ctx.replayed.get() {
            for step in &mut plan {
                step.method.push_str(" (cached plan)");
            }
        }
        Ok((result, plan))
    }
}

/// The variable a find element reads.
fn find_var(f: &Find) -> VarId {
    match f {
        Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => *v,
    }
}

/// Parse, compile and run a query once.
pub fn q(text: &str, inputs: &[Input<'_>]) -> Result<QueryResult, QueryError> {
    Query::parse(text)?.run(inputs, &QueryOptions::default())
}
