//! From the syntax tree to the engine's form: variables numbered per scope, sources resolved
//! to input positions, `not-join`/`or-join` locals renamed apart from the enclosing scope.

use std::collections::HashMap;

use vev_datalog::ast::{self, Arg, BindElem, Binding, Clause, Term, Var};
use vev_edn::{Edn, Span, Symbol};

use crate::error::QueryError;
use crate::rel::VarId;

#[derive(Clone, Debug)]
pub(crate) enum CTerm {
    Var(VarId),
    Blank,
    Const(Edn),
}

#[derive(Clone, Debug)]
pub(crate) enum CArg {
    Var(VarId),
    /// `_`: in a rule call, a position whose value is not wanted.
    Blank,
    Src(usize),
    Const(Edn),
}

#[derive(Clone, Debug)]
pub(crate) enum CBinding {
    Scalar(VarId),
    Tuple(Vec<Option<VarId>>),
    Coll(Option<VarId>),
    Rel(Vec<Option<VarId>>),
}

impl CBinding {
    pub fn vars(&self) -> Vec<VarId> {
        let mut out = Vec::new();
        self.each_var(&mut |v| out.push(v));
        out
    }

    /// Calls `f` with each variable the binding binds, in order, allocating nothing.
    pub fn each_var(&self, f: &mut dyn FnMut(VarId)) {
        match self {
            CBinding::Scalar(v) => f(*v),
            CBinding::Coll(v) => v.iter().for_each(|v| f(*v)),
            CBinding::Tuple(vs) | CBinding::Rel(vs) => vs.iter().flatten().for_each(|v| f(*v)),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum CClause {
    Pattern {
        src: Option<usize>,
        terms: [CTerm; 5],
        span: Span,
    },
    Pred {
        name: Symbol,
        args: Vec<CArg>,
        span: Span,
    },
    Fn {
        name: Symbol,
        args: Vec<CArg>,
        binding: CBinding,
        span: Span,
    },
    /// `join` is `None` for a plain `not`: it joins on whatever of its variables are bound.
    Not {
        src: Option<usize>,
        join: Option<Vec<VarId>>,
        clauses: Vec<CClause>,
        span: Span,
    },
    /// `join` is `None` for a plain `or`; for `or-join`, the required then free variables.
    Or {
        src: Option<usize>,
        join: Option<(Vec<VarId>, Vec<VarId>)>,
        branches: Vec<Vec<CClause>>,
        span: Span,
    },
    Rule {
        src: Option<usize>,
        name: Symbol,
        args: Vec<CArg>,
        span: Span,
    },
}

impl CClause {
    /// The variables this clause shares with its scope.
    pub fn vars(&self) -> Vec<VarId> {
        let mut out = Vec::new();
        self.each_var(&mut |v| out.push(v));
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Calls `f` with each variable this clause shares with its scope (some more than once),
    /// allocating nothing: what a step of a run needs to know of the clauses after it.
    pub fn each_var(&self, f: &mut dyn FnMut(VarId)) {
        let arg_vars = |args: &[CArg], f: &mut dyn FnMut(VarId)| {
            for a in args {
                if let CArg::Var(v) = a {
                    f(*v)
                }
            }
        };
        match self {
            CClause::Pattern { terms, .. } => {
                for t in terms {
                    if let CTerm::Var(v) = t {
                        f(*v)
                    }
                }
            }
            CClause::Pred { args, .. } | CClause::Rule { args, .. } => arg_vars(args, f),
            CClause::Fn { args, binding, .. } => {
                arg_vars(args, f);
                binding.each_var(f);
            }
            CClause::Not {
                join: Some(vars), ..
            } => vars.iter().for_each(|v| f(*v)),
            CClause::Or {
                join: Some((req, free)),
                ..
            } => req.iter().chain(free).for_each(|v| f(*v)),
            CClause::Not { clauses, .. } => clauses.iter().for_each(|c| c.each_var(f)),
            CClause::Or { branches, .. } => branches.iter().flatten().for_each(|c| c.each_var(f)),
        }
    }

    /// The variables of an `or`/`or-join` that must be bound before it runs: an `or-join`'s
    /// required variables, and any of its variables some branch does not use (Datomic: the
    /// branches must use the same *free* variables, so one a branch leaves out must come bound
    /// from outside). Empty for other clauses.
    pub fn or_required(&self) -> Vec<VarId> {
        let CClause::Or { join, branches, .. } = self else {
            return Vec::new();
        };
        let sets: Vec<Vec<VarId>> = branches
            .iter()
            .map(|b| {
                let mut vs: Vec<VarId> = b.iter().flat_map(CClause::vars).collect();
                vs.sort_unstable();
                vs.dedup();
                vs
            })
            .collect();
        let in_every = |v: &VarId| sets.iter().all(|s| s.binary_search(v).is_ok());
        let mut out: Vec<VarId> = match join {
            Some((req, _)) => req.clone(),
            None => Vec::new(),
        };
        for v in self.vars() {
            if !in_every(&v) && !out.contains(&v) {
                out.push(v);
            }
        }
        out
    }

    pub fn span(&self) -> Span {
        match self {
            CClause::Pattern { span, .. }
            | CClause::Pred { span, .. }
            | CClause::Fn { span, .. }
            | CClause::Not { span, .. }
            | CClause::Or { span, .. }
            | CClause::Rule { span, .. } => *span,
        }
    }
}

/// The variables of one scope (the query body, or one rule branch).
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    pub names: Vec<Symbol>,
    by_name: HashMap<Symbol, VarId>,
    /// `not-join`/`or-join` frames, innermost last: variables not shared by a frame are
    /// local to it and get their own ids.
    frames: Vec<Frame>,
}

#[derive(Clone, Debug, Default)]
struct Frame {
    shared: Vec<Symbol>,
    locals: HashMap<Symbol, VarId>,
}

impl Scope {
    pub fn var(&mut self, var: &Var) -> VarId {
        let name = &var.0;
        let mut depth = self.frames.len();
        while depth > 0 && self.frames[depth - 1].shared.contains(name) {
            depth -= 1;
        }
        if depth > 0 {
            if let Some(id) = self.frames[depth - 1].locals.get(name) {
                return *id;
            }
            let id = self.fresh(name.clone());
            self.frames[depth - 1].locals.insert(name.clone(), id);
            return id;
        }
        if let Some(id) = self.by_name.get(name) {
            return *id;
        }
        let id = self.fresh(name.clone());
        self.by_name.insert(name.clone(), id);
        id
    }

    fn fresh(&mut self, name: Symbol) -> VarId {
        self.names.push(name);
        self.names.len() - 1
    }

    pub fn name(&self, id: VarId) -> &str {
        self.names[id].as_str()
    }
}

/// Compiles clauses of one scope. `sources` maps source names to input positions.
pub(crate) struct Compiler<'a> {
    pub scope: Scope,
    pub sources: &'a HashMap<Symbol, usize>,
}

impl<'a> Compiler<'a> {
    pub fn new(sources: &'a HashMap<Symbol, usize>) -> Compiler<'a> {
        Compiler {
            scope: Scope::default(),
            sources,
        }
    }

    fn src(&self, src: &Option<ast::SrcVar>, span: Span) -> Result<Option<usize>, QueryError> {
        match src {
            None => Ok(None),
            Some(s) => {
                self.sources
                    .get(&s.0)
                    .copied()
                    .map(Some)
                    .ok_or_else(|| QueryError::UnknownSource {
                        name: s.name().to_owned(),
                        span: Some(span),
                    })
            }
        }
    }

    pub fn clauses(&mut self, clauses: &[Clause]) -> Result<Vec<CClause>, QueryError> {
        clauses.iter().map(|c| self.clause(c)).collect()
    }

    fn args(&mut self, args: &[Arg], span: Span) -> Result<Vec<CArg>, QueryError> {
        args.iter()
            .map(|a| {
                Ok(match a {
                    Arg::Var(v) => CArg::Var(self.scope.var(v)),
                    Arg::Blank => CArg::Blank,
                    Arg::Const(c) => CArg::Const(c.clone()),
                    Arg::Src(s) => match self.sources.get(&s.0) {
                        Some(i) => CArg::Src(*i),
                        None => {
                            return Err(QueryError::UnknownSource {
                                name: s.name().to_owned(),
                                span: Some(span),
                            })
                        }
                    },
                })
            })
            .collect()
    }

    pub fn binding(&mut self, b: &Binding) -> CBinding {
        let mut elem = |e: &BindElem| match e {
            BindElem::Var(v) => Some(self.scope.var(v)),
            BindElem::Blank => None,
        };
        match b {
            Binding::Scalar(v) => CBinding::Scalar(self.scope.var(v)),
            Binding::Tuple(es) => CBinding::Tuple(es.iter().map(&mut elem).collect()),
            Binding::Coll(e) => CBinding::Coll(elem(e)),
            Binding::Rel(es) => CBinding::Rel(es.iter().map(&mut elem).collect()),
        }
    }

    fn clause(&mut self, c: &Clause) -> Result<CClause, QueryError> {
        Ok(match c {
            Clause::Pattern(p) => self.pattern(p)?,
            Clause::Pred { name, args, span } => CClause::Pred {
                name: name.clone(),
                args: self.args(args, *span)?,
                span: *span,
            },
            Clause::Fn {
                name,
                args,
                binding,
                span,
            } => CClause::Fn {
                name: name.clone(),
                args: self.args(args, *span)?,
                binding: self.binding(binding),
                span: *span,
            },
            Clause::Not {
                src,
                vars,
                clauses,
                span,
            } => self.not(src, vars.as_deref(), clauses, *span)?,
            Clause::Or {
                src,
                vars,
                branches,
                span,
            } => self.or(src, vars.as_ref(), branches, *span)?,
            Clause::Rule {
                src,
                name,
                args,
                span,
            } => CClause::Rule {
                src: self.src(src, *span)?,
                name: name.clone(),
                args: self.args(args, *span)?,
                span: *span,
            },
        })
    }

    /// A data pattern, its variables numbered.
    fn pattern(&mut self, p: &ast::Pattern) -> Result<CClause, QueryError> {
        let term = |t: &Term, s: &mut Scope| match t {
            Term::Var(v) => CTerm::Var(s.var(v)),
            Term::Blank => CTerm::Blank,
            Term::Const(c) => CTerm::Const(c.clone()),
        };
        let terms = [
            term(&p.terms[0], &mut self.scope),
            term(&p.terms[1], &mut self.scope),
            term(&p.terms[2], &mut self.scope),
            term(&p.terms[3], &mut self.scope),
            term(&p.terms[4], &mut self.scope),
        ];
        Ok(CClause::Pattern {
            src: self.src(&p.src, p.span)?,
            terms,
            span: p.span,
        })
    }

    /// `not`, or `not-join` (whose other variables are local to it).
    fn not(
        &mut self,
        src: &Option<ast::SrcVar>,
        vars: Option<&[Var]>,
        clauses: &[Clause],
        span: Span,
    ) -> Result<CClause, QueryError> {
        let src = self.src(src, span)?;
        Ok(match vars {
            None => CClause::Not {
                src,
                join: None,
                clauses: self.clauses(clauses)?,
                span,
            },
            Some(vars) => {
                let join: Vec<VarId> = vars.iter().map(|v| self.scope.var(v)).collect();
                let inner = self.with_locals(vars, |c| c.clauses(clauses))?;
                CClause::Not {
                    src,
                    join: Some(join),
                    clauses: inner,
                    span,
                }
            }
        })
    }

    /// `or`, or `or-join` (whose other variables are local to each branch).
    fn or(
        &mut self,
        src: &Option<ast::SrcVar>,
        vars: Option<&ast::RuleVars>,
        branches: &[Vec<Clause>],
        span: Span,
    ) -> Result<CClause, QueryError> {
        let src = self.src(src, span)?;
        Ok(match vars {
            None => CClause::Or {
                src,
                join: None,
                branches: branches
                    .iter()
                    .map(|b| self.clauses(b))
                    .collect::<Result<_, _>>()?,
                span,
            },
            Some(rv) => {
                let req: Vec<VarId> = rv.required.iter().map(|v| self.scope.var(v)).collect();
                let free: Vec<VarId> = rv.free.iter().map(|v| self.scope.var(v)).collect();
                let all: Vec<Var> = rv.all().cloned().collect();
                let branches = branches
                    .iter()
                    .map(|b| self.with_locals(&all, |c| c.clauses(b)))
                    .collect::<Result<_, _>>()?;
                CClause::Or {
                    src,
                    join: Some((req, free)),
                    branches,
                    span,
                }
            }
        })
    }

    /// Compile with every variable except `shared` fresh (local to the construct).
    fn with_locals<T>(
        &mut self,
        shared: &[Var],
        f: impl FnOnce(&mut Compiler<'a>) -> Result<T, QueryError>,
    ) -> Result<T, QueryError> {
        self.scope.frames.push(Frame {
            shared: shared.iter().map(|v| v.0.clone()).collect(),
            locals: HashMap::new(),
        });
        let result = f(self);
        self.scope.frames.pop();
        result
    }
}
