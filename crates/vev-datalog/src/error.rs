//! Syntax errors of queries, rules and pull patterns.
//!
//! Every variant has a stable code ([`SyntaxError::code`]) and the span of the offending form,
//! so a front end can point at it. Messages are lowercase and quote the offending form, printed
//! as EDN and shortened to [`EXCERPT_CHARS_MAX`] characters; when the form came from text the
//! message ends with its line and column.
//!
//! Forms that arrive as values (a rule set or pull pattern passed as a query input) have no
//! text: their span is [`NO_SPAN`], which [`SyntaxError::span`] reports as `None`.

use std::fmt;

use vev_edn::{Edn, Keyword, ParseError, Pos, Span, Spanned, Symbol};

/// The span of forms that did not come from text.
pub(crate) const NO_SPAN: Span = Span {
    start: Pos::START,
    end: Pos::START,
};

/// Longest excerpt of a form quoted in an error message, in chars.
const EXCERPT_CHARS_MAX: usize = 60;

/// A query, rule set or pull pattern that does not follow Datomic's grammar.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SyntaxError {
    /// The text is not EDN; [`SyntaxError::code`] is the reader's own `edn/...` code.
    #[error(transparent)]
    Edn(#[from] ParseError),
    /// The query is not a vector or a map, or its sections are malformed.
    #[error("invalid query {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidQuery {
        form: Edn,
        reason: String,
        span: Span,
    },
    #[error("query has no :find section{}", At(.span))]
    MissingFind { span: Span },
    #[error(
        "unknown query section {}: expected :find, :keys, :strs, :syms, :with, :in or :where{}",
        excerpt(.section),
        At(.span)
    )]
    UnknownSection { section: Edn, span: Span },
    #[error("invalid :find {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidFind {
        form: Edn,
        reason: String,
        span: Span,
    },
    /// `:keys`, `:strs` or `:syms` (named by `section`) is malformed.
    #[error("invalid {section} {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidKeys {
        section: Keyword,
        form: Edn,
        reason: String,
        span: Span,
    },
    #[error("invalid :with {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidWith {
        form: Edn,
        reason: String,
        span: Span,
    },
    #[error("invalid :in {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidIn {
        form: Edn,
        reason: String,
        span: Span,
    },
    /// A variable, source or `%` appears twice in `:in`.
    #[error("input {name} appears more than once in :in{}", At(.span))]
    DuplicateInput { name: Symbol, span: Span },
    #[error("invalid clause {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidClause {
        form: Edn,
        reason: String,
        span: Span,
    },
    /// A data pattern; `span` points at the offending term.
    #[error("invalid data pattern {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidPattern {
        form: Edn,
        reason: String,
        span: Span,
    },
    #[error("invalid rule {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidRule {
        form: Edn,
        reason: String,
        span: Span,
    },
    /// Two branches of rule `name` have different numbers of head variables.
    #[error(
        "rule {name} has {found} head variables in this branch but {expected} in its first branch{}",
        At(.span)
    )]
    RuleArity {
        name: Symbol,
        expected: usize,
        found: usize,
        span: Span,
    },
    /// `not`, `or` and `and` clauses, or pull sub-patterns, nest more than `max` levels.
    #[error("nested more than {max} levels deep{}", At(.span))]
    TooDeep { max: usize, span: Span },
    #[error("invalid pull pattern {}: {reason}{}", excerpt(.form), At(.span))]
    InvalidPull {
        form: Edn,
        reason: String,
        span: Span,
    },
}

impl SyntaxError {
    /// The stable code of this error, e.g. `query/invalid-clause`; for [`SyntaxError::Edn`] the
    /// reader's code, e.g. `edn/unexpected-eof`.
    pub fn code(&self) -> &'static str {
        match self {
            SyntaxError::Edn(e) => e.code(),
            SyntaxError::InvalidQuery { .. } => "query/invalid-query",
            SyntaxError::MissingFind { .. } => "query/missing-find",
            SyntaxError::UnknownSection { .. } => "query/unknown-section",
            SyntaxError::InvalidFind { .. } => "query/invalid-find",
            SyntaxError::InvalidKeys { .. } => "query/invalid-keys",
            SyntaxError::InvalidWith { .. } => "query/invalid-with",
            SyntaxError::InvalidIn { .. } => "query/invalid-in",
            SyntaxError::DuplicateInput { .. } => "query/duplicate-input",
            SyntaxError::InvalidClause { .. } => "query/invalid-clause",
            SyntaxError::InvalidPattern { .. } => "query/invalid-pattern",
            SyntaxError::InvalidRule { .. } => "query/invalid-rule",
            SyntaxError::RuleArity { .. } => "query/rule-arity",
            SyntaxError::TooDeep { .. } => "query/too-deep",
            SyntaxError::InvalidPull { .. } => "pull/invalid-pattern",
        }
    }

    /// The span of the offending form; `None` when the form did not come from text.
    pub fn span(&self) -> Option<Span> {
        let span = match self {
            SyntaxError::Edn(e) => return Some(e.span),
            SyntaxError::InvalidQuery { span, .. }
            | SyntaxError::MissingFind { span }
            | SyntaxError::UnknownSection { span, .. }
            | SyntaxError::InvalidFind { span, .. }
            | SyntaxError::InvalidKeys { span, .. }
            | SyntaxError::InvalidWith { span, .. }
            | SyntaxError::InvalidIn { span, .. }
            | SyntaxError::DuplicateInput { span, .. }
            | SyntaxError::InvalidClause { span, .. }
            | SyntaxError::InvalidPattern { span, .. }
            | SyntaxError::InvalidRule { span, .. }
            | SyntaxError::RuleArity { span, .. }
            | SyntaxError::TooDeep { span, .. }
            | SyntaxError::InvalidPull { span, .. } => *span,
        };
        (span != NO_SPAN).then_some(span)
    }
}

/// Prints a form for an error message, shortened to [`EXCERPT_CHARS_MAX`] characters.
pub(crate) fn excerpt(form: &Edn) -> String {
    let text = form.to_string();
    match text.char_indices().nth(EXCERPT_CHARS_MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// ` at line L, column C` for a span from text; nothing for [`NO_SPAN`].
struct At<'a>(&'a Span);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self.0 == NO_SPAN {
            return Ok(());
        }
        write!(f, " at {}", self.0.start)
    }
}

/// Which of the form-and-reason variants of [`SyntaxError`] to build, so that shared parsing
/// code (bindings, rule variables) reports in the family of its caller.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Invalid {
    Query,
    Find,
    With,
    In,
    Clause,
    Pattern,
    Rule,
    Pull,
}

impl Invalid {
    /// The error for `form`, pointing at it.
    pub(crate) fn at(self, form: &Spanned, reason: impl Into<String>) -> SyntaxError {
        self.error(form.value.clone(), form.span, reason)
    }

    /// The error quoting `form` and pointing at `span` (a part of it, or the section it
    /// stands for).
    pub(crate) fn error(self, form: Edn, span: Span, reason: impl Into<String>) -> SyntaxError {
        let reason = reason.into();
        match self {
            Invalid::Query => SyntaxError::InvalidQuery { form, reason, span },
            Invalid::Find => SyntaxError::InvalidFind { form, reason, span },
            Invalid::With => SyntaxError::InvalidWith { form, reason, span },
            Invalid::In => SyntaxError::InvalidIn { form, reason, span },
            Invalid::Clause => SyntaxError::InvalidClause { form, reason, span },
            Invalid::Pattern => SyntaxError::InvalidPattern { form, reason, span },
            Invalid::Rule => SyntaxError::InvalidRule { form, reason, span },
            Invalid::Pull => SyntaxError::InvalidPull { form, reason, span },
        }
    }
}
