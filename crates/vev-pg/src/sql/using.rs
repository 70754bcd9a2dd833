//! `JOIN ... USING (c, ...)` of inner joins: `a JOIN b USING (k)` is `a JOIN b ON a.k =
//! b.k` with the two `k` columns merged into one, as in PostgreSQL: an unqualified `k`
//! names the left side's (`Builder::hidden` hides the right's from unqualified names; the
//! join is inner, so they are equal), `b.k` is still b's, and `SELECT *` shows the merged
//! columns first, then the left side's others, then the right's (`Builder::star`, kept per
//! join chain). A USING column must be in the right table and exactly once on the left
//! (`42703`, `42702`). LEFT and RIGHT joins with USING are not done (`0A000`).

use sqlparser::ast::{BinaryOperator, Expr, Ident, Join, JoinConstraint, JoinOperator};

use super::expr::{ident_name, Builder};
use crate::error::SqlError;

/// The USING columns of a join, if it has them.
pub fn columns(j: &Join) -> Result<Option<Vec<String>>, SqlError> {
    let (inner, c) = match &j.join_operator {
        JoinOperator::Join(c) | JoinOperator::Inner(c) => (true, c),
        JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c) => (false, c),
        _ => return Ok(None),
    };
    let JoinConstraint::Using(names) = c else {
        return Ok(None);
    };
    if !inner {
        return Err(SqlError::unsupported("LEFT or RIGHT JOIN ... USING"));
    }
    let mut out = Vec::new();
    for n in names {
        let name = match n.0.as_slice() {
            [part] => part.as_ident().map(ident_name),
            _ => None,
        }
        .ok_or_else(|| SqlError::syntax(format!("a USING column is a column name: {n}")))?;
        out.push(name);
    }
    Ok(Some(out))
}

/// Join scope `right` to the chain whose output columns (scope, column) are `chain` on
/// the columns `names`, and reorder the chain's columns as the merged join shows them.
pub fn join(
    b: &mut Builder,
    chain: &mut Vec<(usize, usize)>,
    right: usize,
    names: &[String],
) -> Result<(), SqlError> {
    let name_of = |b: &Builder, (s, c): (usize, usize)| b.scopes[s].table.columns[c].name.clone();
    let mut merged = Vec::new();
    for name in names {
        let left: Vec<(usize, usize)> = chain
            .iter()
            .copied()
            .filter(|e| name_of(b, *e) == *name)
            .collect();
        let l = match left.as_slice() {
            [one] => *one,
            [] => {
                return Err(SqlError::new(
                    "42703",
                    format!(
                        "column \"{name}\" specified in USING clause does not exist in left table"
                    ),
                ))
            }
            _ => {
                return Err(SqlError::new(
                    "42702",
                    format!("common column name \"{name}\" appears more than once in left table"),
                ))
            }
        };
        if b.scopes[right].table.column(name).is_none() {
            return Err(SqlError::new(
                "42703",
                format!(
                    "column \"{name}\" specified in USING clause does not exist in right table"
                ),
            ));
        }
        let qualified = |s: usize| {
            Expr::CompoundIdentifier(vec![
                Ident::with_quote('"', b.scopes[s].alias.clone()),
                Ident::with_quote('"', name.clone()),
            ])
        };
        let on = Expr::BinaryOp {
            left: Box::new(qualified(l.0)),
            op: BinaryOperator::Eq,
            right: Box::new(qualified(right)),
        };
        b.condition(&on)?;
        b.hidden.insert((right, name.clone()));
        merged.push(l);
    }
    let mut next = merged.clone();
    next.extend(chain.iter().copied().filter(|e| !merged.contains(e)));
    let width = b.scopes[right].table.columns.len();
    next.extend(
        (0..width)
            .map(|c| (right, c))
            .filter(|e| !names.contains(&name_of(b, *e))),
    );
    *chain = next;
    Ok(())
}
