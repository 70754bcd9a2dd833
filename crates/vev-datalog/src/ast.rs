//! The typed tree of a Datalog query, its rules and pull patterns.
//!
//! Every node a user wrote carries the [`Span`] of its source text, so that errors found later
//! (an unbound variable, an unknown attribute) can still point at the offending form. Constants
//! stay [`Edn`]: turning them into database values needs a schema, which is the engine's job.

use std::sync::Arc;

use vev_edn::{Edn, Keyword, Span, Symbol};

/// A variable, `?name`. Compared by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub Symbol);

impl Var {
    pub fn name(&self) -> &str {
        self.0.as_str()
    }
}

/// A source variable, `$` or `$name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrcVar(pub Symbol);

impl SrcVar {
    /// The default source, `$`.
    pub fn default_src() -> SrcVar {
        SrcVar(Symbol::new("$"))
    }

    pub fn name(&self) -> &str {
        self.0.as_str()
    }
}

/// A parsed query: `[:find ... :keys ... :with ... :in ... :where ...]` or the map form.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub find: FindSpec,
    /// `:keys`, `:strs` or `:syms`: rows come back as maps with these keys.
    pub return_maps: Option<ReturnMaps>,
    /// `:with` variables: kept while aggregating, not returned.
    pub with: Vec<Var>,
    /// `:in`; `[$]` when the query has no `:in`.
    pub inputs: Vec<Input>,
    pub clauses: Vec<Clause>,
    /// The span of the whole query form.
    pub span: Span,
}

/// The shape of `:find`.
#[derive(Clone, Debug, PartialEq)]
pub enum FindSpec {
    /// `:find ?a ?b`: a set of tuples.
    Rel(Vec<FindElem>),
    /// `:find ?a .`: one value (or nothing).
    Scalar(FindElem),
    /// `:find [?a ...]`: a collection of values.
    Coll(FindElem),
    /// `:find [?a ?b]`: one tuple (or nothing).
    Tuple(Vec<FindElem>),
}

impl FindSpec {
    pub fn elems(&self) -> &[FindElem] {
        match self {
            FindSpec::Rel(e) | FindSpec::Tuple(e) => e,
            FindSpec::Scalar(e) | FindSpec::Coll(e) => std::slice::from_ref(e),
        }
    }
}

/// One element of `:find`.
#[derive(Clone, Debug, PartialEq)]
pub enum FindElem {
    Var(Var, Span),
    /// `(count ?x)`, `(min 3 ?x)`, `(my-agg ?x)`: constant arguments first, the variable last.
    Aggregate {
        name: Symbol,
        args: Vec<Edn>,
        var: Var,
        span: Span,
    },
    /// `(pull ?e [...])`, `(pull $src ?e [...])`, `(pull ?e ?pattern)`.
    Pull {
        src: SrcVar,
        var: Var,
        pattern: PullSource,
        span: Span,
    },
}

impl FindElem {
    pub fn span(&self) -> Span {
        match self {
            FindElem::Var(_, span)
            | FindElem::Aggregate { span, .. }
            | FindElem::Pull { span, .. } => *span,
        }
    }
}

/// Where a pull expression in `:find` gets its pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum PullSource {
    Pattern(Arc<PullPattern>),
    /// A pattern passed as an input bound to this variable.
    Input(Var),
}

/// `:keys`, `:strs` or `:syms` and the names given.
#[derive(Clone, Debug, PartialEq)]
pub struct ReturnMaps {
    pub kind: ReturnMapKind,
    pub names: Vec<Symbol>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnMapKind {
    Keys,
    Strs,
    Syms,
}

/// One element of `:in`.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Src(SrcVar, Span),
    /// `%`: the rule set.
    Rules(Span),
    Binding(Binding, Span),
}

/// A binding form, in `:in` or as the output of a function expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// `?x`
    Scalar(Var),
    /// `[?a ?b]` (elements may be `_`)
    Tuple(Vec<BindElem>),
    /// `[?x ...]`
    Coll(BindElem),
    /// `[[?a ?b]]`
    Rel(Vec<BindElem>),
}

/// A position of a tuple, collection or relation binding.
#[derive(Clone, Debug, PartialEq)]
pub enum BindElem {
    Var(Var),
    /// `_`: the position is ignored.
    Blank,
}

/// A term of a data pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Var(Var),
    /// `_`
    Blank,
    /// A constant: a number, string, keyword (an ident in entity or attribute position), a
    /// lookup ref `[:attr value]`, ...
    Const(Edn),
}

/// An argument of a predicate, function or rule call.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Var(Var),
    Src(SrcVar),
    Const(Edn),
    /// `_`: only in rule calls (`(friends ?a _)`), where that position of the rule is left
    /// unconstrained. The parser rejects it in predicates and functions.
    Blank,
}

/// A `:where` clause.
#[derive(Clone, Debug, PartialEq)]
pub enum Clause {
    /// `[$src? e a v tx added]`, from one to five terms after the optional source.
    Pattern(Pattern),
    /// `[(pred ?x 1)]`
    Pred {
        name: Symbol,
        args: Vec<Arg>,
        span: Span,
    },
    /// `[(f ?x) binding]`
    Fn {
        name: Symbol,
        args: Vec<Arg>,
        binding: Binding,
        span: Span,
    },
    /// `(not ...)` (`vars` is `None`) or `(not-join [?a ?b] ...)`; with an optional `$src`.
    Not {
        src: Option<SrcVar>,
        vars: Option<Vec<Var>>,
        clauses: Vec<Clause>,
        span: Span,
    },
    /// `(or ...)` or `(or-join [?a] ...)` / `(or-join [[?req] ?b] ...)`. Each branch is a
    /// clause list: a single clause, or the clauses of an `(and ...)`.
    Or {
        src: Option<SrcVar>,
        vars: Option<RuleVars>,
        branches: Vec<Vec<Clause>>,
        span: Span,
    },
    /// `($src? rule-name args...)`
    Rule {
        src: Option<SrcVar>,
        name: Symbol,
        args: Vec<Arg>,
        span: Span,
    },
}

impl Clause {
    pub fn span(&self) -> Span {
        match self {
            Clause::Pattern(p) => p.span,
            Clause::Pred { span, .. }
            | Clause::Fn { span, .. }
            | Clause::Not { span, .. }
            | Clause::Or { span, .. }
            | Clause::Rule { span, .. } => *span,
        }
    }
}

/// A data pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Pattern {
    /// `None` means the default source `$`.
    pub src: Option<SrcVar>,
    /// Entity, attribute, value, tx, added; positions not written are `Term::Blank`.
    pub terms: [Term; 5],
    pub span: Span,
}

/// The variables of a rule head or an `or-join`: required (bound on call) then free.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleVars {
    pub required: Vec<Var>,
    pub free: Vec<Var>,
}

impl RuleVars {
    /// All variables, required first.
    pub fn all(&self) -> impl Iterator<Item = &Var> {
        self.required.iter().chain(self.free.iter())
    }

    pub fn len(&self) -> usize {
        self.required.len() + self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One branch of a rule: `[(name ?a [?req] ?b) clause ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub name: Symbol,
    pub vars: RuleVars,
    pub clauses: Vec<Clause>,
    pub span: Span,
}

/// A pull pattern: `[:a :b {:c [...]} *]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PullPattern {
    pub elems: Vec<PullElem>,
}

/// One element of a pull pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum PullElem {
    /// `*` (or `'*`): every attribute of the entity.
    Wildcard,
    /// `:attr`, `:ns/_rev`, `[:attr :limit 5 :as "x" :default 0]`, `(:attr :limit 5)`,
    /// `(limit :attr 5)`, `(default :attr 0)`, `:db/id`.
    Attr(PullAttr),
    /// `{attr-spec subpattern-or-recursion, ...}`
    Map(Vec<(PullAttr, PullSub)>),
}

/// An attribute of a pull pattern with its options.
#[derive(Clone, Debug, PartialEq)]
pub struct PullAttr {
    /// As written; `:ns/_name` for a reverse attribute.
    pub attr: Keyword,
    /// The key under which the result appears (`:as`); the attribute itself when `None`.
    pub as_key: Option<Edn>,
    /// `:limit n`; `Some(None)` is `:limit nil` (no limit). `None` means the default (1000).
    pub limit: Option<Option<usize>>,
    /// `:default value`.
    pub default: Option<Edn>,
}

impl PullAttr {
    pub fn new(attr: Keyword) -> PullAttr {
        PullAttr {
            attr,
            as_key: None,
            limit: None,
            default: None,
        }
    }
}

/// What follows an attribute in a pull map.
#[derive(Clone, Debug, PartialEq)]
pub enum PullSub {
    Pattern(PullPattern),
    /// `...` (`None`: unbounded, with cycle detection) or a depth limit `n`.
    Recurse(Option<usize>),
}
