//! The query error family: one enum, a stable code per variant.

use vev_datalog::SyntaxError;
use vev_edn::Span;

use crate::pull::PullError;

/// Why a query could not run. Every variant has a stable [`code`](QueryError::code); messages
/// quote the offending name or value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The query, rule set or pull pattern text does not parse (its own codes, `syntax/...`).
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// A pattern or database function names an attribute the database does not have.
    #[error("unknown attribute {attr}")]
    UnknownAttribute {
        /// The attribute as written.
        attr: String,
        /// Where in the query text.
        span: Option<Span>,
    },
    /// A variable must be bound where it is used (a predicate argument, a `not`, a rule's
    /// required variable, a `:find` element) but nothing binds it there.
    #[error("variable {var} is not bound {context}")]
    UnboundVariable {
        /// The variable's name.
        var: String,
        /// Where it needed to be bound, as a phrase ("in predicate").
        context: &'static str,
        /// The clause that needs it.
        span: Option<Span>,
    },
    /// A rule call's argument count differs from the rule head's (or two branches of a rule
    /// have heads of different lengths).
    #[error("rule {rule} is called with {given} arguments but its head has {expected}")]
    RuleArity {
        /// The rule's name.
        rule: String,
        /// The arguments of the call (or of the later branch's head).
        given: usize,
        /// The arguments of the rule's (first) head.
        expected: usize,
        /// The call or branch.
        span: Option<Span>,
    },
    /// A clause calls a rule the rule set (`%`) does not define.
    #[error("unknown rule {rule}")]
    UnknownRule {
        /// The rule's name.
        rule: String,
        /// The call.
        span: Option<Span>,
    },
    /// A predicate or function clause names neither a built-in nor a registered function.
    #[error("unknown function {name}")]
    UnknownFunction {
        /// The function's name.
        name: String,
        /// The clause.
        span: Option<Span>,
    },
    /// A `:find` aggregate names neither a built-in nor a registered aggregate.
    #[error("unknown aggregate {name}")]
    UnknownAggregate {
        /// The aggregate's name.
        name: String,
        /// The `:find` element.
        span: Option<Span>,
    },
    /// A run was given a different number of inputs than the query's `:in` declares.
    #[error("the query has {expected} inputs (:in {names}) but {given} were given")]
    InputCount {
        /// The inputs `:in` declares.
        expected: usize,
        /// The inputs given.
        given: usize,
        /// The `:in` declaration, as text.
        names: String,
    },
    /// An input does not have the shape its `:in` binding needs (a database for `$`, a
    /// collection for `[?x ...]`, ...).
    #[error("input {name} expects {expected}, got {got}")]
    InputShape {
        /// The input as declared in `:in`.
        name: String,
        /// What it needs, as a phrase ("a collection of tuples").
        expected: &'static str,
        /// What was given, printed.
        got: String,
    },
    /// A clause or pull names a source (`$name`) that `:in` does not declare.
    #[error("unknown source {name}")]
    UnknownSource {
        /// The source's name.
        name: String,
        /// Where it is named.
        span: Option<Span>,
    },
    /// A function, predicate or aggregate was given arguments it cannot take (wrong types,
    /// wrong count, a bad regex, ...).
    #[error("{name}: {message}")]
    Type {
        /// The function's name.
        name: String,
        /// What was wrong, quoting the offending value.
        message: String,
        /// The clause.
        span: Option<Span>,
    },
    /// Integer arithmetic whose result does not fit a long, e.g. `(/ -9223372036854775808 -1)`
    /// or a `sum` past `i64::MAX` (Clojure's `+` throws here too; Vev does not promote).
    #[error("integer overflow in {call}")]
    Overflow {
        /// The call, printed with its arguments.
        call: String,
        /// The clause.
        span: Option<Span>,
    },
    /// A lookup ref (`[:attr value]`) given as an entity is malformed or names an attribute
    /// that is not unique.
    #[error("lookup ref {lookup} is invalid: {reason}")]
    InvalidLookupRef {
        /// The lookup ref, printed.
        lookup: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A query that parses but cannot mean anything (say, `or` branches that bind different
    /// variables).
    #[error("{message}")]
    Invalid {
        /// What is wrong, naming the offending variable or clause.
        message: String,
        /// The clause.
        span: Option<Span>,
    },
    /// The run passed `Limits::timeout`.
    #[error("the query ran past its time limit of {limit_ms} ms")]
    Timeout {
        /// The limit, in milliseconds.
        limit_ms: u64,
    },
    /// `Limits::cancel` was set while the query ran.
    #[error("the query was canceled")]
    Canceled,
    /// An intermediate relation passed `Limits::max_rows`.
    #[error("the query produced more than {limit} rows")]
    TooManyRows {
        /// The limit.
        limit: usize,
    },
    /// A pull in `:find` was refused.
    #[error(transparent)]
    Pull(#[from] PullError),
    /// The database's storage failed while the query read it (the rows would be
    /// incomplete, so none are returned).
    #[error(transparent)]
    Storage(#[from] vev_core::StorageError),
    /// A `fulltext` call was refused: malformed query text, or an attribute without
    /// `:db/fulltext`.
    #[error(transparent)]
    Fulltext(#[from] crate::fulltext::FulltextError),
}

impl QueryError {
    /// The stable code of this error (`query/unbound-variable`, ...), for matching and for
    /// the pg server's SQLSTATE table.
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::Syntax(e) => e.code(),
            QueryError::UnknownAttribute { .. } => "query/unknown-attribute",
            QueryError::UnboundVariable { .. } => "query/unbound-variable",
            QueryError::RuleArity { .. } => "query/rule-arity",
            QueryError::UnknownRule { .. } => "query/unknown-rule",
            QueryError::UnknownFunction { .. } => "query/unknown-function",
            QueryError::UnknownAggregate { .. } => "query/unknown-aggregate",
            QueryError::InputCount { .. } => "query/input-count",
            QueryError::InputShape { .. } => "query/input-shape",
            QueryError::UnknownSource { .. } => "query/unknown-source",
            QueryError::Type { .. } => "query/type-error",
            QueryError::Overflow { .. } => "query/overflow",
            QueryError::InvalidLookupRef { .. } => "query/invalid-lookup-ref",
            QueryError::Invalid { .. } => "query/invalid",
            QueryError::Timeout { .. } => "query/timeout",
            QueryError::Canceled => "query/canceled",
            QueryError::TooManyRows { .. } => "query/too-many-rows",
            QueryError::Pull(e) => e.code(),
            QueryError::Storage(e) => e.code(),
            QueryError::Fulltext(e) => e.code(),
        }
    }

    /// Whether the run was stopped by its `Limits` (time, cancel flag, rows): a path that
    /// falls back to another evaluation on other errors must pass these on, since the other
    /// evaluation would be stopped the same way.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            QueryError::Timeout { .. } | QueryError::Canceled | QueryError::TooManyRows { .. }
        )
    }

    /// Where in the query text the error points, when known.
    pub fn span(&self) -> Option<Span> {
        match self {
            QueryError::Syntax(e) => e.span(),
            QueryError::UnknownAttribute { span, .. }
            | QueryError::UnboundVariable { span, .. }
            | QueryError::RuleArity { span, .. }
            | QueryError::UnknownRule { span, .. }
            | QueryError::UnknownFunction { span, .. }
            | QueryError::UnknownAggregate { span, .. }
            | QueryError::UnknownSource { span, .. }
            | QueryError::Type { span, .. }
            | QueryError::Overflow { span, .. }
            | QueryError::Invalid { span, .. } => *span,
            _ => None,
        }
    }

    pub(crate) fn type_error(name: &str, message: String) -> QueryError {
        QueryError::Type {
            name: name.to_owned(),
            message,
            span: None,
        }
    }
}
