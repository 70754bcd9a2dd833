//! HAVING: a condition on a grouped row, compiled to a test of the query's find elements
//! (its aggregates, which become hidden find elements when the select list does not show
//! them, and its GROUP BY keys), constants and parameters, applied to the query's rows
//! before ORDER BY and LIMIT. SQL's three-valued logic: a comparison with NULL is unknown,
//! and a row is kept only when the condition is true.

use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value as SqlValue};
use vev::Edn;

use super::consts::Param;
use super::expr::{literal_edn, placeholder, Builder};
use super::select::Find;
use crate::error::SqlError;
use crate::types::SqlType;

/// A compiled HAVING condition.
#[derive(Clone, Debug)]
pub enum Having {
    And(Box<Having>, Box<Having>),
    Or(Box<Having>, Box<Having>),
    Not(Box<Having>),
    Compare(Operand, Cmp, Operand),
    /// `IS NULL` (`false`) or `IS NOT NULL` (`true`).
    IsNull(Operand, bool),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

/// A value a HAVING condition reads.
#[derive(Clone, Debug)]
pub enum Operand {
    /// A find element of the query's rows.
    Find(usize),
    Const(Edn),
    /// `$n`, as a value of its type.
    Param(usize, Option<SqlType>),
    /// Arithmetic over literals and parameters (`$1 - 1`), evaluated with the parameters.
    Expr(Box<Expr>, Option<SqlType>),
    /// An expression over aggregates (`sum(v) / count(*)`).
    Computed(Box<super::computed::Computed>),
}

/// Compile `e`; aggregates it names that are not find elements yet are added to `finds`.
pub(crate) fn compile(
    b: &mut Builder,
    e: &Expr,
    finds: &mut Vec<Find>,
) -> Result<Having, SqlError> {
    Ok(match e {
        Expr::Nested(x) => compile(b, x, finds)?,
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And => Having::And(
                Box::new(compile(b, left, finds)?),
                Box::new(compile(b, right, finds)?),
            ),
            BinaryOperator::Or => Having::Or(
                Box::new(compile(b, left, finds)?),
                Box::new(compile(b, right, finds)?),
            ),
            _ => {
                let cmp = match op {
                    BinaryOperator::Eq => Cmp::Eq,
                    BinaryOperator::NotEq => Cmp::NotEq,
                    BinaryOperator::Lt => Cmp::Lt,
                    BinaryOperator::LtEq => Cmp::LtEq,
                    BinaryOperator::Gt => Cmp::Gt,
                    BinaryOperator::GtEq => Cmp::GtEq,
                    other => return Err(SqlError::unsupported(format!("{other} in HAVING"))),
                };
                // The side that reads the rows types the other (a literal or a parameter).
                let (l, lt) = operand(b, left, None, finds)?;
                let (r, rt) = operand(b, right, lt, finds)?;
                let l = match (l, lt) {
                    (Operand::Param(n, None), None) => Operand::Param(n, rt),
                    (l, _) => l,
                };
                Having::Compare(l, cmp, r)
            }
        },
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => Having::Not(Box::new(compile(b, expr, finds)?)),
        Expr::IsNull(x) => Having::IsNull(operand(b, x, None, finds)?.0, false),
        Expr::IsNotNull(x) => Having::IsNull(operand(b, x, None, finds)?.0, true),
        other => return Err(SqlError::unsupported(format!("HAVING {other}"))),
    })
}

/// One side of a comparison: an aggregate, a GROUP BY key, a literal or a parameter.
fn operand(
    b: &mut Builder,
    e: &Expr,
    expected: Option<SqlType>,
    finds: &mut Vec<Find>,
) -> Result<(Operand, Option<SqlType>), SqlError> {
    if let Some((text, ty, agg)) = super::select::aggregate(b, e)? {
        let at = aggregate_find(finds, text, agg);
        return Ok((Operand::Find(at), Some(ty)));
    }
    match e {
        Expr::Nested(x) => operand(b, x, expected, finds),
        Expr::Value(v) => match &v.value {
            SqlValue::Placeholder(p) => {
                let n = placeholder(p)?;
                let ty = note_param(b, n, expected);
                Ok((Operand::Param(n, ty), ty))
            }
            other => {
                let (edn, ty) = literal_edn(other, expected)?;
                Ok((Operand::Const(edn), ty))
            }
        },
        // A typed parameter (a scalar subquery's value is one, `sql/scalar.rs`).
        Expr::Cast {
            expr, data_type, ..
        } if matches!(&**expr, Expr::Value(v) if matches!(v.value, SqlValue::Placeholder(_))) => {
            let ty = SqlType::from_ast(data_type)?;
            let (param, _) = operand(b, expr, Some(ty), finds)?;
            let Operand::Param(n, _) = param else {
                unreachable!("a placeholder is a parameter")
            };
            Ok((Operand::Param(n, Some(ty)), Some(ty)))
        }
        e if super::computed::has_aggregate(e) => {
            let c = super::computed::compile(b, e, finds, false)?;
            let ty = c.ty;
            Ok((Operand::Computed(Box::new(c)), ty))
        }
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match &**expr {
            Expr::Value(v) if matches!(v.value, SqlValue::Number(..)) => {
                let SqlValue::Number(n, long) = &v.value else {
                    unreachable!("matched a number")
                };
                let negative = SqlValue::Number(format!("-{n}"), *long);
                let (edn, ty) = literal_edn(&negative, expected)?;
                Ok((Operand::Const(edn), ty))
            }
            other => Err(SqlError::unsupported(format!("HAVING -{other}"))),
        },
        e if constant(e) => {
            note_params(b, e);
            Ok((Operand::Expr(Box::new(e.clone()), expected), expected))
        }

        _ => {
            let t = b.expr(e, expected)?;
            let at = finds
                .iter()
                .position(|f| f.agg.is_none() && f.text == t.text)
                .ok_or_else(|| {
                    SqlError::new(
                        "42803",
                        format!(
                            "{e} in HAVING must appear in the GROUP BY clause or be used in an \
                             aggregate function"
                        ),
                    )
                })?;
            Ok((Operand::Find(at), t.ty))
        }
    }
}

/// Whether `row` passes `h`: `Some(true)` keeps it; `None` is SQL's unknown.
pub fn test(h: &Having, row: &[Edn], params: &[Param]) -> Result<Option<bool>, SqlError> {
    Ok(match h {
        Having::And(a, b) => match (test(a, row, params)?, test(b, row, params)?) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Having::Or(a, b) => match (test(a, row, params)?, test(b, row, params)?) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Having::Not(a) => test(a, row, params)?.map(|v| !v),
        Having::IsNull(x, negated) => {
            Some(crate::sqlfns::is_null_edn(&value(x, row, params)?) != *negated)
        }
        Having::Compare(l, cmp, r) => {
            let (l, r) = (value(l, row, params)?, value(r, row, params)?);
            if crate::sqlfns::is_null_edn(&l) || crate::sqlfns::is_null_edn(&r) {
                return Ok(None);
            }
            let ord = super::compare::compare_values(&l, &r);
            Some(match cmp {
                Cmp::Eq => ord.is_eq(),
                Cmp::NotEq => ord.is_ne(),
                Cmp::Lt => ord.is_lt(),
                Cmp::LtEq => ord.is_le(),
                Cmp::Gt => ord.is_gt(),
                Cmp::GtEq => ord.is_ge(),
            })
        }
    })
}

/// Whether `e` is arithmetic over literals and parameters only (no column, no function).
pub(super) fn constant(e: &Expr) -> bool {
    match e {
        Expr::Value(_) => true,
        Expr::Nested(x) | Expr::Cast { expr: x, .. } => constant(x),
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => constant(expr),
        Expr::BinaryOp { left, op, right } => arithmetic(op) && constant(left) && constant(right),
        _ => false,
    }
}

/// `+ - * / %`.
pub(super) fn arithmetic(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo
    )
}

/// Note the parameters of `e`, arithmetic over literals and parameters (`constant`).
pub(super) fn note_params(b: &mut Builder, e: &Expr) {
    for (i, ty) in super::const_params(&[e]).into_iter().enumerate() {
        note_param(b, i + 1, ty);
    }
}

/// Note `$n` (of type `ty` if it has none yet) as a parameter of the statement that HAVING
/// reads when the groups are tested: not an input of the query, unless the query reads it
/// too (in WHERE, say). Its type.
fn note_param(b: &mut Builder, n: usize, ty: Option<SqlType>) -> Option<SqlType> {
    let input = b.used_params.contains(&n);
    let ty = b.param(n, ty).ty;
    if !input {
        b.used_params.remove(&n);
    }
    ty
}

fn value(o: &Operand, row: &[Edn], params: &[Param]) -> Result<Edn, SqlError> {
    Ok(match o {
        Operand::Expr(e, ty) => {
            let ctx = super::consts::Ctx {
                params,
                now_ms: 0,
                user: "",
                database: "",
                setting: &|_| None,
                slots: &[],
            };
            super::consts::eval(e, *ty, &ctx)?.0
        }
        Operand::Computed(c) => c.eval(row, params)?,
        Operand::Find(i) => row[*i].clone(),
        Operand::Const(e) => e.clone(),
        Operand::Param(n, ty) => match params.get(n - 1) {
            Some(p) => p.typed(*ty)?.0,
            None => {
                return Err(SqlError::new(
                    "08P01",
                    format!("there is no parameter ${n}"),
                ))
            }
        },
    })
}

/// The find element of an aggregate (`text`), added when it is not one yet.
pub(super) fn aggregate_find(
    finds: &mut Vec<Find>,
    text: String,
    agg: Option<super::select::Agg>,
) -> usize {
    match finds.iter().position(|f| f.text == text) {
        Some(at) => at,
        None => {
            finds.push(Find {
                text,
                agg: Some(agg.unwrap_or(super::select::Agg::Other)),
            });
            finds.len() - 1
        }
    }
}
