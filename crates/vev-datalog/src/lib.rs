//! Vev's Datalog syntax: queries, rules and pull patterns, parsed from EDN.
//!
//! This crate turns text (or already-read EDN) into the typed tree of [`ast`]; it knows nothing
//! about databases. Errors are [`SyntaxError`]s with a stable code and the span of the
//! offending form.
//!
//! Rule sets and pull patterns can also arrive as values (query inputs) rather than text:
//! [`parse_rules_value`] and [`parse_pull_value`] read those, and their errors have no span.
//!
//! ```
//! use vev_datalog::{parse_query, Clause, FindSpec};
//!
//! let query = parse_query("[:find ?name . :in $ ?e :where [?e :person/name ?name]]").unwrap();
//! assert!(matches!(query.find, FindSpec::Scalar(_)));
//! assert!(matches!(query.clauses[0], Clause::Pattern(_)));
//!
//! let err = parse_query("[:find ?x :where (not)]").unwrap_err();
//! assert_eq!(err.code(), "query/invalid-clause");
//! assert_eq!(err.span().unwrap().start.column, 18);
//! ```

pub mod ast;
mod binding;
mod clause;
mod error;
mod form;
mod parse;
mod pull;
mod rules;

pub use ast::*;
pub use clause::CLAUSE_DEPTH_MAX;
pub use error::SyntaxError;
pub use form::spanned_from_edn;
pub use parse::{parse_query, parse_query_edn};
pub use pull::{parse_pull, parse_pull_edn, parse_pull_value, PULL_DEPTH_MAX};
pub use rules::{parse_rules, parse_rules_edn, parse_rules_value};

#[cfg(test)]
mod tests;
