//! The query API: prepare once, run many times with new inputs and newer databases.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use vev_core::Value;
use vev_datalog::ast::{self, FindElem, FindSpec, PullSource, ReturnMapKind};
use vev_edn::{Edn, Keyword, Symbol};

use crate::agg;
use crate::compile::{CBinding, CClause, CTerm, Compiler, Scope};
use crate::error::QueryError;
use crate::exec::{Ctx, Env, Limits, PlanStep};
use crate::funcs::{self, Registry};
use crate::pull::pull;
use crate::rel::{Rel, VarId};
use crate::rows::Rows;
use crate::rules::{RuleCtx, RuleSet};
use crate::source::Source;
use crate::values::{edn_to_value, resolve_entity};

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
    pub limits: Limits,
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

/// Where [`Query::emit`] hands the result's rows.
trait RowSink<E> {
    /// One row.
    fn row(&mut self, cells: Vec<Edn>) -> Result<(), E>;
    /// `len` rows of `width` values each, given row after row.
    fn rows(&mut self, width: usize, len: usize, values: Vec<Value>) -> Result<(), E>;
}

/// A value as EDN, taken by value (entity ids and longs without a call).
#[inline]
fn into_edn(v: Value) -> Edn {
    match v {
        Value::Ref(e) => Edn::Integer(e as i64),
        Value::Long(n) => Edn::Integer(n),
        v => v.to_edn(),
    }
}

/// Rows collected into one flat table.
impl RowSink<QueryError> for Rows {
    fn row(&mut self, cells: Vec<Edn>) -> Result<(), QueryError> {
        self.push(cells);
        Ok(())
    }

    fn rows(&mut self, _width: usize, len: usize, values: Vec<Value>) -> Result<(), QueryError> {
        self.extend_flat(len, values.len(), |cells| {
            if values
                .iter()
                .all(|v| matches!(v, Value::Ref(_) | Value::Long(_)))
            {
                // Only entity ids and longs (the common result):
                // - one `Edn::Integer` per cell lets LLVM write each cell straight into place;
                //   through `into_edn` it builds the cell on the stack, its tag a lone byte
                //   store that the 16-byte copy out cannot be forwarded from, so each cell
                //   waits for every store before it (a large share of a closure query's time);
                // - the values are moved out and forgotten: ids and longs own nothing, and
                //   dropping them would be a call per value.
                cells.extend(values.into_iter().map(|v| {
                    let n = match &v {
                        Value::Ref(e) => *e as i64,
                        Value::Long(n) => *n,
                        _ => 0,
                    };
                    std::mem::forget(v);
                    Edn::Integer(n)
                }));
            } else {
                cells.extend(values.into_iter().map(into_edn));
            }
        });
        Ok(())
    }
}

/// Rows handed one at a time, each as its own vector, to a caller's function.
struct FnSink<F>(F);

impl<E, F: FnMut(Vec<Edn>) -> Result<(), E>> RowSink<E> for FnSink<F> {
    fn row(&mut self, cells: Vec<Edn>) -> Result<(), E> {
        (self.0)(cells)
    }

    fn rows(&mut self, width: usize, len: usize, values: Vec<Value>) -> Result<(), E> {
        let mut values = values.into_iter();
        for _ in 0..len {
            (self.0)(values.by_ref().take(width).map(into_edn).collect())?;
        }
        Ok(())
    }
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
}

/// A rule set's EDN and what it compiled to.
type KeptRules = (Edn, Arc<CompiledRules>);

/// A rule set as a run uses it, and whether its bodies passed the binding checks.
#[derive(Default)]
struct CompiledRules {
    set: RuleSet,
    checked: std::sync::atomic::AtomicBool,
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
            sources: Arc::new(sources),
            bindings: Arc::new(bindings),
            find: Arc::new(find),
            with,
            ast: Arc::new(ast),
            plan: Arc::default(),
            rules: Arc::default(),
        })
    }

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
        let compiled = Arc::new(CompiledRules {
            set: RuleSet::compile(&parsed, &self.sources)?,
            checked: Default::default(),
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
        if inputs.len() != self.ast.inputs.len() {
            return Err(QueryError::InputCount {
                expected: self.ast.inputs.len(),
                given: inputs.len(),
                names: self.input_names(),
            });
        }
        let mut sources: Vec<Option<&dyn Source>> = vec![None; inputs.len()];
        let mut collections: Vec<Option<Vec<Vec<vev_core::Value>>>> = vec![None; inputs.len()];
        let mut compiled: Arc<CompiledRules> = Arc::default();
        let mut rel = Rel::unit();
        let mut consts: HashMap<VarId, vev_core::Value> = HashMap::new();
        for (i, (decl, given)) in self.ast.inputs.iter().zip(inputs).enumerate() {
            match (decl, given) {
                (ast::Input::Src(..), Input::Db(db)) => sources[i] = Some(*db),
                (ast::Input::Src(..), Input::Edn(edn)) if collection_of_tuples(edn).is_some() => {
                    collections[i] = collection_of_tuples(edn);
                }
                (ast::Input::Rules(_), Input::Edn(edn)) => compiled = self.rules_of(edn)?,
                (ast::Input::Binding(..), Input::Edn(edn)) => {
                    let binding = &self
                        .bindings
                        .iter()
                        .find(|(p, _)| *p == i)
                        .expect("compiled binding")
                        .1;
                    let input_rel = bind_input(&self.scope, binding, edn, &mut consts)?;
                    rel = rel.join(&input_rel);
                }
                (decl, given) => {
                    return Err(QueryError::InputShape {
                        name: input_name(decl),
                        expected: match decl {
                            ast::Input::Src(..) => "a database",
                            ast::Input::Rules(_) => "a rule set",
                            ast::Input::Binding(..) => "a value",
                        },
                        got: match given {
                            Input::Db(_) => "a database".to_owned(),
                            Input::Edn(e) => e.to_string(),
                        },
                    })
                }
            }
        }
        let rules = &compiled.set;
        self.check_static(rules, opts, &sources)?;
        let input_vars: HashSet<VarId> = self.bindings.iter().flat_map(|(_, b)| b.vars()).collect();
        check_bindings(&self.scope, &self.clauses, &input_vars, rules)?;
        if !compiled.checked.load(std::sync::atomic::Ordering::Relaxed) {
            for (_, branches) in rules.iter() {
                for r in branches {
                    check_bindings(
                        &r.scope,
                        &r.clauses,
                        &r.head.iter().copied().collect(),
                        rules,
                    )?;
                }
            }
            compiled
                .checked
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let bindable = bindable_vars(&self.clauses, &input_vars);
        for f in self.find.iter() {
            let v = find_var(f);
            if !bindable.contains(&v) {
                return Err(QueryError::UnboundVariable {
                    var: self.scope.name(v).to_owned(),
                    context: "in :find: no clause binds it",
                    span: Some(f_span(&self.ast, f, &self.find)),
                });
            }
        }
        let default_src = self.sources.get(&Symbol::new("$")).copied();
        let text = |c: &CClause| self.clause_text(c);
        let ctx = Ctx {
            sources,
            collections,
            rules,
            registry: &opts.registry,
            limits: opts.limits,
            started,
            plan: RefCell::new(Vec::new()),
            source_text: &text,
            replayed: std::cell::Cell::new(false),
            step_started: std::cell::Cell::new(Instant::now()),
            implied: RefCell::new(HashSet::new()),
        };
        let env = Env {
            scope: &self.scope,
            consts: &consts,
            default_src,
            record: explain,
            cache: Some(&self.plan),
            rule: RuleCtx::None,
        };
        let mut keep: Vec<VarId> = Vec::new();
        for f in self.find.iter() {
            let v = match f {
                Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => *v,
            };
            keep.push(v);
            if let Find::Pull {
                pattern: PullPat::Input(p),
                ..
            } = f
            {
                keep.push(*p);
            }
        }
        keep.extend(self.with.iter().copied());
        let mut uniq = Vec::new();
        for v in keep {
            if !uniq.contains(&v) {
                uniq.push(v);
            }
        }
        let rel = ctx.eval(&env, rel, &self.clauses, &uniq)?;
        if let Some(v) = uniq.iter().find(|v| !rel.has(**v)) {
            return Err(QueryError::UnboundVariable {
                var: self.scope.name(*v).to_owned(),
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
        let rel = rel.into_projection(&uniq);
        let result = finish(self, &ctx, rel);
        let mut plan = ctx.plan.take();
        if ctx.replayed.get() {
            for step in &mut plan {
                step.method.push_str(" (cached plan)");
            }
        }
        Ok((result, plan))
    }

    fn input_names(&self) -> String {
        let names: Vec<String> = self.ast.inputs.iter().map(input_name).collect();
        format!("[{}]", names.join(" "))
    }

    /// Errors that must not depend on the data: unknown functions, rules, aggregates, attributes.
    fn check_static(
        &self,
        rules: &RuleSet,
        opts: &QueryOptions,
        sources: &[Option<&dyn Source>],
    ) -> Result<(), QueryError> {
        fn walk(
            c: &CClause,
            f: &mut dyn FnMut(&CClause) -> Result<(), QueryError>,
        ) -> Result<(), QueryError> {
            f(c)?;
            match c {
                CClause::Not { clauses, .. } => clauses.iter().try_for_each(|x| walk(x, f)),
                CClause::Or { branches, .. } => {
                    branches.iter().flatten().try_for_each(|x| walk(x, f))
                }
                _ => Ok(()),
            }
        }
        let default_src = self.sources.get(&Symbol::new("$")).copied();
        let mut check = |c: &CClause| -> Result<(), QueryError> {
            match c {
                CClause::Pred { name, span, .. } | CClause::Fn { name, span, .. }
                    if !funcs::exists(&opts.registry, name.as_str()) =>
                {
                    return Err(QueryError::UnknownFunction {
                        name: name.to_string(),
                        span: Some(*span),
                    });
                }
                CClause::Rule { name, span, .. } if !rules.contains(name) => {
                    return Err(QueryError::UnknownRule {
                        rule: name.to_string(),
                        span: Some(*span),
                    });
                }
                CClause::Pattern { src, terms, span } => {
                    let source = src
                        .or(default_src)
                        .and_then(|i| sources.get(i).copied().flatten());
                    if let (Some(source), CTerm::Const(Edn::Keyword(k))) = (source, &terms[1]) {
                        if source.schema().entid(k).is_none() {
                            return Err(QueryError::UnknownAttribute {
                                attr: k.to_string(),
                                span: Some(*span),
                            });
                        }
                    }
                }
                _ => {}
            }
            Ok(())
        };
        for c in self.clauses.iter() {
            walk(c, &mut check)?;
        }
        for f in self.find.iter() {
            if let Find::Agg { name, .. } = f {
                if !agg::exists(&opts.registry, name) {
                    return Err(QueryError::UnknownAggregate {
                        name: name.clone(),
                        span: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// Turn the final relation into the find shape, aggregating and pulling.
    fn shape(&self, ctx: &Ctx<'_>, rel: Rel) -> Result<QueryResult, QueryError> {
        let mut rows = Rows::new(self.find.len());
        self.emit(ctx, rel, false, &mut rows)?;
        let first = |rows: Rows| rows.into_vecs().into_iter().next();
        Ok(match self.result_kind() {
            ResultKind::Rel => QueryResult::Rel(rows),
            ResultKind::Bag => QueryResult::Bag(rows),
            ResultKind::Maps => QueryResult::Maps(
                rows.into_vecs()
                    .into_iter()
                    .map(|r| self.row_map(r))
                    .collect(),
            ),
            // One element: the cells are the values.
            ResultKind::Coll => QueryResult::Coll(rows.into_cells()),
            ResultKind::Scalar => QueryResult::Scalar(rows.into_cells().into_iter().next()),
            ResultKind::Map => QueryResult::Scalar(first(rows).map(|r| self.row_map(r))),
            ResultKind::Tuple => QueryResult::Tuple(first(rows)),
        })
    }

    /// Hand the result's rows to `sink` (see `run_rows`): each row the `:find` elements'
    /// values, aggregated and pulled; at most one row for a scalar or tuple find; distinct
    /// values for a collection find.
    fn emit<E: From<QueryError>>(
        &self,
        ctx: &Ctx<'_>,
        rel: Rel,
        sorted: bool,
        sink: &mut impl RowSink<E>,
    ) -> Result<usize, E> {
        let kind = self.result_kind();
        let single = matches!(
            kind,
            ResultKind::Scalar | ResultKind::Tuple | ResultKind::Map
        );
        if self.find.iter().any(|f| matches!(f, Find::Agg { .. })) {
            // One row per group: as many as the distinct grouping values, no more.
            let mut rows = self.aggregate(ctx, &rel)?;
            if sorted && kind != ResultKind::Bag {
                rows.sort();
            }
            if single {
                rows.truncate(1);
            }
            let n = rows.len();
            rows.into_iter().try_for_each(|r| sink.row(r))?;
            return Ok(n);
        }
        // Distinct over the find variables (`:with` variables keep duplicates).
        let find_vars: Vec<VarId> = self.find_vars();
        let rel = if self.with.is_empty() {
            rel.into_projection(&find_vars)
        } else {
            rel
        };
        let cols: Vec<usize> = self
            .find
            .iter()
            .map(|f| rel.col(find_var(f)).expect("bound"))
            .collect();
        if !sorted
            && !single
            && kind != ResultKind::Coll
            && cols.iter().copied().eq(0..rel.width())
            && self.find.iter().all(|f| matches!(f, Find::Var(_)))
        {
            // Each row is its relation row, in order: the values move out of the relation
            // as they become EDN, in one pass (no second pass to drop them).
            let (w, len) = (rel.width(), rel.len);
            let mut data = rel.data;
            data.truncate(w * len);
            sink.rows(w, len, data)?;
            return Ok(len);
        }
        let mut order: Vec<usize> = (0..rel.len).collect();
        if sorted && kind != ResultKind::Bag {
            order.sort_by(|a, b| {
                let (a, b) = (rel.row(*a), rel.row(*b));
                cols.iter()
                    .map(|c| a[*c].cmp(&b[*c]))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        }
        if single {
            order.truncate(1);
        }
        // A collection find is distinct over its one element; the relation may also hold a
        // pull pattern's variable.
        let mut seen = (kind == ResultKind::Coll && find_vars.len() > 1).then(HashSet::new);
        let mut n = 0;
        for i in order {
            let row = rel.row(i);
            if let Some(seen) = &mut seen {
                if !seen.insert(row[cols[0]].clone()) {
                    continue;
                }
            }
            let mut cells = Vec::with_capacity(self.find.len());
            for (f, col) in self.find.iter().zip(&cols) {
                cells.push(match f {
                    // The common case without `cell`'s `Result` (its error type is large).
                    Find::Var(_) => row[*col].to_edn(),
                    _ => self.cell(ctx, f, &rel, row, *col)?,
                });
            }
            sink.row(cells)?;
            n += 1;
        }
        Ok(n)
    }

    fn find_vars(&self) -> Vec<VarId> {
        let mut vars = Vec::new();
        for f in self.find.iter() {
            match f {
                Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => {
                    vars.push(*v)
                }
            }
            if let Find::Pull {
                pattern: PullPat::Input(p),
                ..
            } = f
            {
                vars.push(*p);
            }
        }
        let mut uniq = Vec::new();
        for v in vars {
            if !uniq.contains(&v) {
                uniq.push(v);
            }
        }
        uniq
    }

    fn cell(
        &self,
        ctx: &Ctx<'_>,
        f: &Find,
        rel: &Rel,
        row: &[vev_core::Value],
        col: usize,
    ) -> Result<Edn, QueryError> {
        match f {
            Find::Var(_) | Find::Agg { .. } => Ok(row[col].to_edn()),
            Find::Pull { src, pattern, .. } => {
                let source = ctx.sources.get(*src).copied().flatten().ok_or_else(|| {
                    QueryError::UnknownSource {
                        name: "$".to_owned(),
                        span: None,
                    }
                })?;
                let pattern = match pattern {
                    PullPat::Fixed(p) => p.clone(),
                    PullPat::Input(v) => {
                        let edn = row[rel.col(*v).expect("pattern bound")].to_edn();
                        Arc::new(vev_datalog::parse_pull_value(&edn)?)
                    }
                };
                match resolve_entity(source, &row[col])? {
                    Some(e) => Ok(pull(source, &pattern, e)?),
                    None => Ok(Edn::Nil),
                }
            }
        }
    }

    fn aggregate(&self, ctx: &Ctx<'_>, rel: &Rel) -> Result<Vec<Vec<Edn>>, QueryError> {
        // Group by the non-aggregate elements, in first-seen order.
        let key_elems: Vec<usize> = (0..self.find.len())
            .filter(|i| !matches!(self.find[*i], Find::Agg { .. }))
            .collect();
        let var_of = |f: &Find| match f {
            Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => *v,
        };
        let key_cols: Vec<usize> = key_elems
            .iter()
            .map(|i| rel.col(var_of(&self.find[*i])).expect("bound"))
            .collect();
        let mut groups: Vec<(Vec<vev_core::Value>, Vec<usize>)> = Vec::new();
        let mut index: HashMap<Vec<vev_core::Value>, usize> = HashMap::new();
        for (r, row) in rel.rows().enumerate() {
            let key: Vec<vev_core::Value> = key_cols.iter().map(|c| row[*c].clone()).collect();
            let g = *index.entry(key.clone()).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(r);
        }
        let mut out = Vec::with_capacity(groups.len());
        for (_, rows) in groups {
            let first = rel.row(rows[0]);
            let mut cells = Vec::with_capacity(self.find.len());
            for f in self.find.iter() {
                let col = rel.col(var_of(f)).expect("bound");
                cells.push(match f {
                    Find::Agg { name, args, .. } => {
                        let vals = rows.iter().map(|r| rel.row(*r)[col].clone()).collect();
                        agg::aggregate(ctx.registry, name, args, vals)?
                    }
                    other => self.cell(ctx, other, rel, first, col)?,
                });
            }
            out.push(cells);
        }
        Ok(out)
    }
}

/// A collection of tuples given as a source, as values.
fn collection_of_tuples(edn: &Edn) -> Option<Vec<Vec<vev_core::Value>>> {
    let items: Vec<&Edn> = match edn {
        Edn::Vector(v) | Edn::List(v) => v.iter().collect(),
        Edn::Set(s) => s.iter().collect(),
        _ => return None,
    };
    items
        .into_iter()
        .map(|t| match t {
            Edn::Vector(v) | Edn::List(v) => Some(v.iter().map(edn_to_value).collect()),
            _ => None,
        })
        .collect()
}

/// The span of a find element.
fn f_span(ast: &ast::Query, f: &Find, all: &[Find]) -> vev_edn::Span {
    let i = all.iter().position(|x| std::ptr::eq(x, f)).unwrap_or(0);
    ast.find.elems().get(i).map_or(ast.span, |e| e.span())
}

/// The variables some clause of the list (or an input) can bind.
fn bindable_vars(clauses: &[CClause], inputs: &HashSet<VarId>) -> HashSet<VarId> {
    let mut out = inputs.clone();
    for c in clauses {
        match c {
            CClause::Pred { .. } | CClause::Not { .. } => {}
            CClause::Fn { binding, .. } => out.extend(binding.vars()),
            // A plain `or` binds only what every branch uses; the rest it needs bound.
            CClause::Or { .. } => {
                let required = c.or_required();
                out.extend(c.vars().into_iter().filter(|v| !required.contains(v)));
            }
            other => out.extend(other.vars()),
        }
    }
    out
}

/// Checks that do not depend on the data: every predicate and function argument, `not`
/// variable and `not-join`/`or-join` required variable can be bound; a variable only some
/// branches of an `or`/`or-join` use is bound outside it (`CClause::or_required`); rule
/// calls have their rule's arity.
fn check_bindings(
    scope: &Scope,
    clauses: &[CClause],
    outer: &HashSet<VarId>,
    rules: &RuleSet,
) -> Result<(), QueryError> {
    let bindable = bindable_vars(clauses, outer);
    let unbound = |v: VarId, context: &'static str, span| QueryError::UnboundVariable {
        var: scope.name(v).to_owned(),
        context,
        span: Some(span),
    };
    for c in clauses {
        match c {
            CClause::Pred { args, span, .. } | CClause::Fn { args, span, .. } => {
                for a in args {
                    if let crate::compile::CArg::Var(v) = a {
                        if !bindable.contains(v) {
                            let context = if matches!(c, CClause::Pred { .. }) {
                                "in predicate"
                            } else {
                                "in function call"
                            };
                            return Err(unbound(*v, context, *span));
                        }
                    }
                }
            }
            CClause::Not {
                join,
                clauses: inner,
                span,
                ..
            } => {
                let vars = c.vars();
                match join {
                    Some(j) => {
                        if let Some(v) = j.iter().find(|v| !bindable.contains(v)) {
                            return Err(unbound(
                                *v,
                                "in not-join: the query never binds it",
                                *span,
                            ));
                        }
                    }
                    None => {
                        if !vars.iter().any(|v| bindable.contains(v)) {
                            if let Some(v) = vars.first() {
                                return Err(unbound(
                                    *v,
                                    "in not clause: none of its variables is bound outside it",
                                    *span,
                                ));
                            }
                        }
                    }
                }
                check_bindings(scope, inner, &bindable, rules)?;
            }
            CClause::Or {
                join,
                branches,
                span,
                ..
            } => {
                let missing = c.or_required().into_iter().find(|v| !bindable.contains(v));
                if let (Some((req, _)), Some(v)) = (join, missing) {
                    let context = if req.contains(&v) {
                        "in or-join's required variables"
                    } else {
                        "in or-join: a branch does not use it and nothing outside binds it"
                    };
                    return Err(unbound(v, context, *span));
                } else if let Some(v) = missing {
                    return Err(QueryError::Invalid {
                        message: format!(
                            "every branch of or must use the same variables, but {} is not in all of them and nothing outside the or binds it",
                            scope.name(v)
                        ),
                        span: Some(*span),
                    });
                }
                for b in branches {
                    check_bindings(scope, b, &bindable, rules)?;
                }
            }
            CClause::Rule {
                name, args, span, ..
            } => {
                if let Some(expected) = rules.arity(name) {
                    if expected != args.len() {
                        return Err(QueryError::RuleArity {
                            rule: name.to_string(),
                            given: args.len(),
                            expected,
                            span: Some(*span),
                        });
                    }
                }
            }
            CClause::Pattern { .. } => {}
        }
    }
    Ok(())
}

/// The variable a find element reads.
fn find_var(f: &Find) -> VarId {
    match f {
        Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => *v,
    }
}

fn input_name(i: &ast::Input) -> String {
    match i {
        ast::Input::Src(s, _) => s.name().to_owned(),
        ast::Input::Rules(_) => "%".to_owned(),
        ast::Input::Binding(b, _) => binding_text(b),
    }
}

fn binding_text(b: &ast::Binding) -> String {
    let elem = |e: &ast::BindElem| match e {
        ast::BindElem::Var(v) => v.name().to_owned(),
        ast::BindElem::Blank => "_".to_owned(),
    };
    match b {
        ast::Binding::Scalar(v) => v.name().to_owned(),
        ast::Binding::Tuple(es) => {
            format!("[{}]", es.iter().map(elem).collect::<Vec<_>>().join(" "))
        }
        ast::Binding::Coll(e) => format!("[{} ...]", elem(e)),
        ast::Binding::Rel(es) => {
            format!("[[{}]]", es.iter().map(elem).collect::<Vec<_>>().join(" "))
        }
    }
}

/// The relation an input value makes under its binding; scalars are also recorded as
/// constants so the planner can inline them (e.g. as range bounds).
fn bind_input(
    scope: &Scope,
    binding: &CBinding,
    edn: &Edn,
    consts: &mut HashMap<VarId, vev_core::Value>,
) -> Result<Rel, QueryError> {
    let shape_err = |expected: &'static str| QueryError::InputShape {
        name: match binding {
            CBinding::Scalar(v) => scope.name(*v).to_owned(),
            other => format!(
                "{:?}",
                other
                    .vars()
                    .iter()
                    .map(|v| scope.name(*v))
                    .collect::<Vec<_>>()
            ),
        },
        expected,
        got: edn.to_string(),
    };
    let seq = |e: &Edn| -> Option<Vec<Edn>> {
        match e {
            Edn::Vector(items) | Edn::List(items) => Some(items.clone()),
            Edn::Set(items) => Some(items.iter().cloned().collect()),
            _ => None,
        }
    };
    let tuple_row = |vars: &[Option<VarId>], e: &Edn| -> Option<Vec<(VarId, vev_core::Value)>> {
        let items = seq(e)?;
        if items.len() != vars.len() {
            return None;
        }
        Some(
            vars.iter()
                .zip(items)
                .filter_map(|(v, x)| v.map(|v| (v, edn_to_value(&x))))
                .collect(),
        )
    };
    let rel_of = |vars: Vec<VarId>, rows: Vec<Vec<(VarId, vev_core::Value)>>| -> Rel {
        let mut rel = Rel::empty(vars.clone());
        for row in rows {
            let vals: Vec<vev_core::Value> = vars
                .iter()
                .map(|v| row.iter().find(|(x, _)| x == v).expect("bound").1.clone())
                .collect();
            rel.push_row(&vals);
        }
        rel.dedup()
    };
    match binding {
        CBinding::Scalar(v) => {
            let value = edn_to_value(edn);
            consts.insert(*v, value.clone());
            let mut rel = Rel::empty(vec![*v]);
            rel.push_row(&[value]);
            rel.distinct = true;
            Ok(rel)
        }
        CBinding::Tuple(vars) => {
            let row =
                tuple_row(vars, edn).ok_or_else(|| shape_err("a tuple of matching length"))?;
            for (v, x) in &row {
                consts.insert(*v, x.clone());
            }
            Ok(rel_of(vars.iter().flatten().copied().collect(), vec![row]))
        }
        CBinding::Coll(var) => {
            let items = seq(edn).ok_or_else(|| shape_err("a collection"))?;
            let vars: Vec<VarId> = var.iter().copied().collect();
            let rows = items
                .iter()
                .map(|x| var.map(|v| vec![(v, edn_to_value(x))]).unwrap_or_default())
                .collect();
            let mut rel = rel_of(vars, rows);
            if var.is_none() {
                rel.len = usize::from(!items.is_empty());
            }
            Ok(rel)
        }
        CBinding::Rel(vars) => {
            let items = seq(edn).ok_or_else(|| shape_err("a collection of tuples"))?;
            let rows = items
                .iter()
                .map(|x| {
                    tuple_row(vars, x)
                        .ok_or_else(|| shape_err("a collection of tuples of matching length"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rel_of(vars.iter().flatten().copied().collect(), rows))
        }
    }
}

/// The storage failure marks of the database inputs, taken before a run (one per input).
fn storage_marks(inputs: &[Input<'_>]) -> Vec<u64> {
    inputs
        .iter()
        .map(|i| match i {
            Input::Db(src) => src.storage_mark(),
            Input::Edn(_) => 0,
        })
        .collect()
}

/// The storage failure any database input met since its mark, as an error.
fn storage_failure(inputs: &[Input<'_>], marks: &[u64]) -> Result<(), QueryError> {
    let failure = inputs.iter().zip(marks).find_map(|(i, &mark)| match i {
        Input::Db(src) => src.storage_failure_since(mark),
        Input::Edn(_) => None,
    });
    match failure {
        Some(f) => Err(QueryError::Storage(f)),
        None => Ok(()),
    }
}

/// Parse, compile and run a query once.
pub fn q(text: &str, inputs: &[Input<'_>]) -> Result<QueryResult, QueryError> {
    Query::parse(text)?.run(inputs, &QueryOptions::default())
}
