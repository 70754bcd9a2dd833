//! The query error family: one enum, a stable code per variant.

use vev_datalog::SyntaxError;
use vev_edn::Span;

use crate::pull::PullError;

/// Why a query could not run. Every variant has a stable [`code`](QueryError::code); messages
/// quote the offending name or value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    #[error("unknown attribute {attr}")]
    UnknownAttribute { attr: String, span: Option<Span> },
    #[error("variable {var} is not bound {context}")]
    UnboundVariable {
        var: String,
        context: &'static str,
        span: Option<Span>,
    },
    #[error("rule {rule} is called with {given} arguments but its head has {expected}")]
    RuleArity {
        rule: String,
        given: usize,
        expected: usize,
        span: Option<Span>,
    },
    #[error("unknown rule {rule}")]
    UnknownRule { rule: String, span: Option<Span> },
    #[error("unknown function {name}")]
    UnknownFunction { name: String, span: Option<Span> },
    #[error("unknown aggregate {name}")]
    UnknownAggregate { name: String, span: Option<Span> },
    #[error("the query has {expected} inputs (:in {names}) but {given} were given")]
    InputCount {
        expected: usize,
        given: usize,
        names: String,
    },
    #[error("input {name} expects {expected}, got {got}")]
    InputShape {
        name: String,
        expected: &'static str,
        got: String,
    },
    #[error("unknown source {name}")]
    UnknownSource { name: String, span: Option<Span> },
    #[error("{name}: {message}")]
    Type {
        name: String,
        message: String,
        span: Option<Span>,
    },
    /// Integer arithmetic whose result does not fit a long, e.g. `(/ -9223372036854775808 -1)`
    /// or a `sum` past `i64::MAX` (Clojure's `+` throws here too; Vev does not promote).
    #[error("integer overflow in {call}")]
    Overflow { call: String, span: Option<Span> },
    #[error("lookup ref {lookup} is invalid: {reason}")]
    InvalidLookupRef { lookup: String, reason: String },
    #[error("{message}")]
    Invalid { message: String, span: Option<Span> },
    #[error("the query ran past its time limit of {limit_ms} ms")]
    Timeout { limit_ms: u64 },
    #[error("the query produced more than {limit} rows")]
    TooManyRows { limit: usize },
    #[error(transparent)]
    Pull(#[from] PullError),
    #[error(transparent)]
    Storage(#[from] vev_core::StorageError),
}

impl QueryError {
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
            QueryError::TooManyRows { .. } => "query/too-many-rows",
            QueryError::Pull(e) => e.code(),
            QueryError::Storage(e) => e.code(),
        }
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
