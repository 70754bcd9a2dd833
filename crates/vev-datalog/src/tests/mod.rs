//! Tests of the parser, named by feature: one module per part of the grammar, one for the
//! error codes (each checks the code and where the span points), and a property test that no
//! input makes the parser panic.

mod clauses;
mod errors;
mod find;
mod inputs;
mod no_panic;
mod pull;
mod rules;

use vev_edn::{Edn, Keyword, Symbol};

use crate::ast::*;
use crate::error::SyntaxError;

fn query(text: &str) -> Query {
    crate::parse_query(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn query_err(text: &str) -> SyntaxError {
    match crate::parse_query(text) {
        Ok(q) => panic!("{text} parsed: {q:?}"),
        Err(e) => e,
    }
}

/// The clauses of `[:find ?x :where <where>]`.
fn clauses(where_: &str) -> Vec<Clause> {
    query(&format!("[:find ?x :where {where_}]")).clauses
}

fn clause(text: &str) -> Clause {
    let mut all = clauses(text);
    assert_eq!(all.len(), 1, "{text}");
    all.remove(0)
}

fn var(name: &str) -> Var {
    Var(Symbol::new(name))
}

fn src(name: &str) -> SrcVar {
    SrcVar(Symbol::new(name))
}

fn sym(name: &str) -> Symbol {
    Symbol::new(name)
}

fn kw(name: &str) -> Keyword {
    Keyword::new(name)
}

fn edn(text: &str) -> Edn {
    vev_edn::parse(text).unwrap()
}

fn var_term(name: &str) -> Term {
    Term::Var(var(name))
}

fn const_term(text: &str) -> Term {
    Term::Const(edn(text))
}

fn arg_var(name: &str) -> Arg {
    Arg::Var(var(name))
}

fn arg_const(text: &str) -> Arg {
    Arg::Const(edn(text))
}

/// The start of an error's span as (line, column).
fn at(err: &SyntaxError) -> (u32, u32) {
    let span = err.span().unwrap_or_else(|| panic!("no span: {err}"));
    (span.start.line, span.start.column)
}
