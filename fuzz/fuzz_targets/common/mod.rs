//! What the query targets share: running one query through both plans and comparing rows.

// Each target uses a part of it.
#![allow(dead_code)]

use std::time::Duration;

use vev::{Edn, Input, Limits, Query, QueryOptions};

/// What one run gave, in a form that compares regardless of row order.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Rows(Edn),
    Error(&'static str),
    /// Stopped by the row or time limit: where a plan hits them depends on the plan.
    OverLimit,
}

pub use vev_query::testing::canonical;

pub fn run(query: &Query, inputs: &[Input<'_>], naive: bool) -> Outcome {
    let opts = QueryOptions {
        limits: Limits {
            timeout: Some(Duration::from_millis(500)),
            max_rows: Some(20_000),
            naive,
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    match query.run(inputs, &opts) {
        Ok(result) => Outcome::Rows(canonical(result)),
        Err(e) if matches!(e.code(), "query/timeout" | "query/too-many-rows") => Outcome::OverLimit,
        Err(e) => Outcome::Error(e.code()),
    }
}

/// Whether plans must agree on the rows, not only on success: not when the result is random
/// by design (`rand`, `sample`), nor when a scalar or tuple find picks one of several rows.
pub fn rows_comparable(query: &Query) -> bool {
    use vev::query_ast::{FindElem, FindSpec};
    let find = &query.ast().find;
    let random = find.elems().iter().any(|e| {
        matches!(e, FindElem::Aggregate { name, .. } if matches!(name.name(), "rand" | "sample"))
    });
    let picks_one = matches!(find, FindSpec::Scalar(_) | FindSpec::Tuple(_))
        && find
            .elems()
            .iter()
            .any(|e| !matches!(e, FindElem::Aggregate { .. }));
    !random && !picks_one
}

/// Equal, but doubles within a relative 1e-9 (a `sum` or `avg` of doubles may add them in
/// another order in another plan) and NaN equal to NaN.
fn approx_eq(a: &Edn, b: &Edn) -> bool {
    match (a, b) {
        (Edn::Float(x), Edn::Float(y)) => {
            x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (Edn::Vector(xs), Edn::Vector(ys)) | (Edn::List(xs), Edn::List(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| approx_eq(x, y))
        }
        _ => a == b,
    }
}

/// How strictly two runs must agree.
#[derive(Clone, Copy)]
pub struct Strictness {
    /// The rows, not only success (see [`rows_comparable`]).
    pub rows: bool,
    /// A type or overflow error in one plan only is a disagreement. Such errors depend on the
    /// rows that reach a function, which depend on the clause order; generated queries are
    /// typed and cannot raise them, arbitrary text can.
    pub eval_errors: bool,
}

/// Panic (a crash for libFuzzer) when the optimized and naive runs disagree.
pub fn assert_same(what: &str, optimized: &Outcome, naive: &Outcome, strict: Strictness) {
    let eval_error =
        |o: &Outcome| matches!(o, Outcome::Error("query/type-error" | "query/overflow"));
    match (optimized, naive) {
        (Outcome::OverLimit, _) | (_, Outcome::OverLimit) => {}
        (Outcome::Rows(_), Outcome::Rows(_)) if !strict.rows => {}
        (Outcome::Rows(a), Outcome::Rows(b)) if approx_eq(a, b) => {}
        (a, b) if a == b => {}
        (a, b) if !strict.eval_errors && (eval_error(a) || eval_error(b)) => {}
        (a, b) => panic!("plans disagree on {what}\n  optimized: {a:?}\n  naive:     {b:?}"),
    }
}
