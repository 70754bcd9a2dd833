//! Subqueries in WHERE: `EXISTS (SELECT ...)`, `NOT EXISTS (SELECT ...)` and
//! `x IN (SELECT y ...)` as conjuncts of the condition, compiled into the same query.
//!
//! A subquery's tables become scopes of the builder, visible first to its own condition
//! (a column name resolves in the subquery's tables before the enclosing query's, so a
//! correlated subquery reads the outer row through the names only the outer tables have or
//! through their aliases). Its clauses go into one nested clause: `(or-join [[<bound>]]
//! (and ...))` for EXISTS and IN (a semi-join: an outer row passes once, however many rows
//! the subquery has), `(not-join [<bound>] ...)` for NOT EXISTS, where `<bound>` are the
//! variables bound outside that the subquery reads. `x IN (SELECT y ...)` is EXISTS with
//! `y = x` added to the subquery's condition, `x` computed outside first (it names the
//! outer row's columns). `x NOT IN (SELECT y ...)` is NOT EXISTS with `(y = x OR y IS NULL
//! OR x IS NULL)` added, which is SQL's rule: a row passes when no subquery row equals `x`
//! and none is NULL (either makes the test false or unknown), and a NULL `x` passes only
//! when the subquery has no rows. Not supported (0A000): subqueries elsewhere than as a
//! conjunct of WHERE, and grouping, limits or outer joins inside one.

use sqlparser::ast::{BinaryOperator, Expr, GroupByExpr, Ident, InTarget, Query, SetExpr};

use super::expr::{conjuncts, Builder, OUTER_TERM};
use super::select::{bound_outside, find_rows, join_condition, row_clause, scope_of, variables};
use crate::catalog::Catalog;
use crate::error::SqlError;

/// A WHERE condition whose conjuncts may be subqueries.
pub fn condition(b: &mut Builder, e: &Expr, catalog: &Catalog) -> Result<(), SqlError> {
    let mut terms = Vec::new();
    conjuncts(e, &mut terms);
    let (subs, rest): (Vec<&Expr>, Vec<&Expr>) = terms.into_iter().partition(|t| {
        matches!(
            t,
            Expr::Exists { .. }
                | Expr::In {
                    target: InTarget::Subquery(_),
                    ..
                }
        )
    });
    if let Some(all) = rest.into_iter().cloned().reduce(|l, r| Expr::BinaryOp {
        left: Box::new(l),
        op: BinaryOperator::And,
        right: Box::new(r),
    }) {
        b.condition(&all)?;
    }
    for s in subs {
        subquery(b, s, catalog)?;
    }
    Ok(())
}

fn subquery(b: &mut Builder, e: &Expr, catalog: &Catalog) -> Result<(), SqlError> {
    let (query, negated, lhs): (&Query, bool, Option<&Expr>) = match e {
        Expr::Exists { subquery, negated } => (subquery, *negated, None),
        Expr::In {
            expr,
            target: InTarget::Subquery(subquery),
            negated,
            ..
        } => (subquery, *negated, Some(expr)),
        _ => return Err(SqlError::unsupported(format!("the subquery {e}"))),
    };
    if query.with.is_some() || query.limit_clause.is_some() {
        return Err(SqlError::unsupported("WITH or LIMIT in a subquery"));
    }
    let SetExpr::Select(sel) = &*query.body else {
        return Err(SqlError::unsupported(format!(
            "the subquery {}",
            query.body
        )));
    };
    if sel.having.is_some()
        || !matches!(&sel.group_by, GroupByExpr::Expressions(g, _) if g.is_empty())
    {
        return Err(SqlError::unsupported("GROUP BY or HAVING in a subquery"));
    }
    if sel.from.is_empty() {
        return Err(SqlError::unsupported("a subquery without FROM"));
    }
    // IN's left side names the outer row: computed outside the subquery.
    let outer_term = match lhs {
        Some(x) => {
            let t = b.expr(x, None)?;
            Some(b.as_var(t))
        }
        None => None,
    };
    // The outer tables' rows are found before the subquery reads them.
    let present = variables(&b.clauses.join(" "));
    for si in 0..b.scopes.len() {
        let var = b.scopes[si].var.clone();
        if !b.outer.contains(&si) && !present.contains(&var) {
            let clause = row_clause(&b.scopes[si]);
            b.clauses.push(clause);
        }
    }
    let frame = b.scopes.len();
    for twj in &sel.from {
        let scope = scope_of(&twj.relation, catalog, b.scopes.len())?;
        b.scopes.push(scope);
        for j in &twj.joins {
            let scope = scope_of(&j.relation, catalog, b.scopes.len())?;
            b.scopes.push(scope);
        }
    }
    b.frames.push(frame);
    let inner = b.nested(|b| subquery_clauses(b, sel, frame, outer_term, negated));
    b.frames.pop();
    b.scopes.truncate(frame);
    let inner = inner?;
    let bound = bound_outside(b, &inner);
    if bound.is_empty() {
        return Err(SqlError::unsupported(
            "a subquery that reads nothing of the outer query",
        ));
    }
    let bound = bound.join(" ");
    b.clauses.push(if negated {
        format!("(not-join [{bound}] {inner})")
    } else {
        format!("(or-join [[{bound}]] (and {inner}))")
    });
    Ok(())
}

/// The subquery's clauses: its joins, its WHERE, `item = outer` for IN (`item = outer OR
/// item IS NULL OR outer IS NULL` for NOT IN, whose clauses go in a `not-join`), and its
/// tables' row clauses.
fn subquery_clauses(
    b: &mut Builder,
    sel: &sqlparser::ast::Select,
    frame: usize,
    outer_term: Option<super::expr::Term>,
    negated: bool,
) -> Result<(), SqlError> {
    for twj in &sel.from {
        for j in &twj.joins {
            join_condition(b, j)?;
        }
    }
    if let Some(w) = &sel.selection {
        b.condition(w)?;
    }
    if let Some(t) = outer_term {
        let item = match sel.projection.as_slice() {
            [sqlparser::ast::SelectItem::UnnamedExpr(e)]
            | [sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. }] => e,
            _ => return Err(SqlError::syntax("subquery has too many columns")),
        };
        b.outer_term = Some(t);
        let outer = || Expr::Identifier(Ident::with_quote('"', OUTER_TERM));
        let mut test = Expr::BinaryOp {
            left: Box::new(item.clone()),
            op: BinaryOperator::Eq,
            right: Box::new(outer()),
        };
        if negated {
            let or = |l: Expr, r: Expr| Expr::BinaryOp {
                left: Box::new(l),
                op: BinaryOperator::Or,
                right: Box::new(r),
            };
            test = Expr::Nested(Box::new(or(
                or(test, Expr::IsNull(Box::new(item.clone()))),
                Expr::IsNull(Box::new(outer())),
            )));
        }
        let result = b.condition(&test);
        b.outer_term = None;
        result?;
    }
    for si in frame..b.scopes.len() {
        find_rows(b, si);
    }
    Ok(())
}
