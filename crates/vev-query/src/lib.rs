//! Vev's Datalog engine: Datomic's query dialect and pull API over any [`Source`].
//!
//! Layers, each its own module:
//! - [`source`]: the one trait through which the engine reads indexes (scans and counts).
//! - `compile`: the syntax tree (from `vev-datalog`) to numbered variables and resolved sources.
//! - `exec`: the evaluation loop and clause application, with `exec::plan` (the greedy,
//!   count-driven choice of the next clause and of join strategies) and `exec::call`
//!   (predicate and function clauses); `pattern`: one pattern joined with the rows, over
//!   compact row relations (`rel`).
//! - `rules`: semi-naive, seeded evaluation of (mutually) recursive rules (`rules::call`: a
//!   rule call in the executor); `closure`: the whole relation of linear rules on interned
//!   values.
//! - `funcs` and `agg`: built-in functions, predicates and aggregates, plus user-registered
//!   ones.
//! - [`fulltext`]: the analyzer, query grammar, BM25 scoring and reference search of
//!   `fulltext`, whose index each `Source` provides.
//! - [`pull`](mod@pull): Datomic's pull patterns.
//! - `query`: the API: [`Query`] (prepare once, run many times), [`q`], `explain`; with
//!   `query::inputs` (binding a run's inputs), `query::checks` (errors found before a run)
//!   and `query::emit` (shaping the result by `:find`).
//! - `testing` (feature `testing`): `VecSource`, the naive reference source the oracles
//!   compare the engine against.

#![warn(missing_docs)]

mod agg;
mod closure;
mod compile;
mod error;
mod exec;
mod fsum;
pub mod fulltext;
mod funcs;
mod inline;
mod pattern;
pub mod pull;
mod query;
mod rel;
pub mod rows;
mod rules;
pub mod source;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod values;

#[cfg(test)]
mod props;

pub use error::QueryError;
pub use exec::{Limits, PlanStep};
pub use funcs::Registry;
pub use pull::{pull, pull_many, PullError};
pub use query::{q, Input, Query, QueryOptions, QueryResult, ResultKind};
pub use rows::Rows;
pub use source::Source;
