//! Expressions over aggregates, computed on each grouped row after the query: select items
//! (`sum(v) * 100 / count(*)`, `round(avg(v), 2)`, `grp || ': ' || count(*)`), HAVING
//! operands (`HAVING sum(v) / count(*) > 2`) and ORDER BY keys. Each aggregate in the
//! expression, and each part that reads columns outside an aggregate (a GROUP BY key),
//! becomes a find element of the query (hidden when the select list does not show it) and
//! a slot of the expression; literals and parameters stay as they are. The expression is
//! then evaluated on each row by the evaluator of constant expressions (`consts`), with
//! the slots bound to the row's values, as PostgreSQL evaluates a projection over an
//! aggregate's output.

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, UnaryOperator,
    Value as SqlValue, ValueWithSpan,
};
use vev::Edn;

use super::consts::{Ctx, Param};
use super::expr::Builder;
use super::select::Find;
use crate::error::SqlError;
use crate::types::SqlType;

/// The placeholder text of a slot: `$slot0`, `$slot1`, ... (never a statement's parameter,
/// which is `$` and digits).
pub const SLOT: &str = "$slot";

/// An expression over a grouped row's find elements.
#[derive(Clone, Debug)]
pub struct Computed {
    /// The expression with each slot's part replaced by its placeholder.
    expr: Expr,
    /// Each slot's find element and type.
    slots: Vec<(usize, Option<SqlType>)>,
    /// The value's type (from the expression, as PostgreSQL types it).
    pub ty: Option<SqlType>,
}

/// Whether `e` calls an aggregate outside a subquery (so it is computed on grouped rows).
pub fn has_aggregate(e: &Expr) -> bool {
    match e {
        Expr::Function(f) => {
            let name = f.name.to_string().to_ascii_lowercase();
            matches!(name.as_str(), "count" | "sum" | "avg" | "min" | "max")
                || function_exprs(&f.args).any(has_aggregate)
        }
        Expr::Nested(x) | Expr::Cast { expr: x, .. } | Expr::UnaryOp { expr: x, .. } => {
            has_aggregate(x)
        }
        Expr::BinaryOp { left, right, .. } => has_aggregate(left) || has_aggregate(right),
        Expr::IsNull(x) | Expr::IsNotNull(x) => has_aggregate(x),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(has_aggregate)
                || conditions
                    .iter()
                    .any(|w| has_aggregate(&w.condition) || has_aggregate(&w.result))
                || else_result.as_deref().is_some_and(has_aggregate)
        }
        _ => false,
    }
}

fn function_exprs(args: &FunctionArguments) -> impl Iterator<Item = &Expr> {
    let list = match args {
        FunctionArguments::List(l) => l.args.as_slice(),
        _ => &[],
    };
    list.iter().filter_map(|a| match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Some(x),
        _ => None,
    })
}

/// Compile `e`, an expression with an aggregate in it. `keys`: whether a part that reads
/// columns outside an aggregate may become a find element (a grouping key) when it is not
/// one yet: in the select list, where GROUP BY then checks it; not in HAVING and ORDER BY,
/// which run after GROUP BY (PostgreSQL's `42803` there).
pub(crate) fn compile(
    b: &mut Builder,
    e: &Expr,
    finds: &mut Vec<Find>,
    keys: bool,
) -> Result<Computed, SqlError> {
    let mut slots = Vec::new();
    let expr = lift(b, e, finds, &mut slots, keys)?;
    // The type: the expression evaluated with a NULL of each slot's type (as a VALUES
    // item's type is found), which also refuses what the evaluator cannot compute.
    let nulls: Vec<Param> = slots
        .iter()
        .map(|(_, ty)| Param::Typed(crate::sqlfns::null_edn(), ty.unwrap_or(SqlType::Text)))
        .collect();
    let params: Vec<Param> = vec![Param::Null; b.params.len()];
    let ctx = Ctx {
        params: &params,
        now_ms: 0,
        user: "",
        database: "",
        setting: &|_| Some(String::new()),
        slots: &nulls,
    };
    let (_, ty) = super::consts::eval(&expr, None, &ctx)?;
    Ok(Computed { expr, slots, ty })
}

/// `e` with its aggregates and column-reading parts replaced by slots.
fn lift(
    b: &mut Builder,
    e: &Expr,
    finds: &mut Vec<Find>,
    slots: &mut Vec<(usize, Option<SqlType>)>,
    keys: bool,
) -> Result<Expr, SqlError> {
    let mut slot = |at: usize, ty: Option<SqlType>| {
        let k = slots.len();
        slots.push((at, ty));
        Expr::Value(ValueWithSpan::from(SqlValue::Placeholder(format!(
            "{SLOT}{k}"
        ))))
    };
    if let Some((text, ty, agg)) = super::select::aggregate(b, e)? {
        let at = super::having::aggregate_find(finds, text, agg);
        return Ok(slot(at, Some(ty)));
    }
    if !has_aggregate(e) {
        if super::having::constant(e) {
            // Literals and parameters stay: the evaluator types them from the other side.
            super::having::note_params(b, e);
            return Ok(e.clone());
        }
        let t = b.expr(e, None)?;
        let t = b.as_var(t);
        let at = match finds
            .iter()
            .position(|f| f.agg.is_none() && f.text == t.text)
        {
            Some(at) => at,
            None if keys => {
                finds.push(Find {
                    text: t.text,
                    agg: None,
                });
                finds.len() - 1
            }
            None => {
                return Err(SqlError::new(
                    "42803",
                    format!(
                        "{e} must appear in the GROUP BY clause or be used in an aggregate \
                         function"
                    ),
                ))
            }
        };
        return Ok(slot(at, t.ty));
    }
    let mut lift = |x: &Expr| lift(b, x, finds, slots, keys).map(Box::new);
    Ok(match e {
        Expr::Nested(x) => Expr::Nested(lift(x)?),
        Expr::UnaryOp {
            op: op @ (UnaryOperator::Minus | UnaryOperator::Plus),
            expr,
        } => Expr::UnaryOp {
            op: *op,
            expr: lift(expr)?,
        },
        Expr::BinaryOp { left, op, right } if evaluated(op) => Expr::BinaryOp {
            left: lift(left)?,
            op: op.clone(),
            right: lift(right)?,
        },
        Expr::Cast {
            kind,
            expr,
            data_type,
            format,
        } => Expr::Cast {
            kind: kind.clone(),
            expr: lift(expr)?,
            data_type: data_type.clone(),
            format: format.clone(),
        },
        Expr::Function(f) => {
            let mut f = f.clone();
            if let FunctionArguments::List(l) = &mut f.args {
                for a in &mut l.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                        *x = *lift(x)?;
                    }
                }
            }
            Expr::Function(f)
        }
        other => {
            return Err(SqlError::unsupported(format!(
                "the expression {other} over aggregates"
            )))
        }
    })
}

/// The operators the evaluator computes (arithmetic, comparisons, `||`, AND, OR).
fn evaluated(op: &BinaryOperator) -> bool {
    super::having::arithmetic(op)
        || matches!(
            op,
            BinaryOperator::StringConcat | BinaryOperator::And | BinaryOperator::Or
        )
        || super::expr::comparison(op).is_some()
}

impl Computed {
    /// The value on `row` (the query's find elements), with the statement's parameters.
    pub fn eval(&self, row: &[Edn], params: &[Param]) -> Result<Edn, SqlError> {
        let slots: Vec<Param> = self
            .slots
            .iter()
            .map(|&(at, ty)| {
                let v = &row[at];
                if crate::sqlfns::is_null_edn(v) {
                    return Param::Null;
                }
                let ty = ty.unwrap_or(match v {
                    Edn::Integer(_) => SqlType::Int8,
                    Edn::Float(_) => SqlType::Float8,
                    Edn::Bool(_) => SqlType::Bool,
                    _ => SqlType::Text,
                });
                Param::Typed(v.clone(), ty)
            })
            .collect();
        let ctx = Ctx {
            params,
            now_ms: 0,
            user: "",
            database: "",
            setting: &|_| None,
            slots: &slots,
        };
        Ok(super::consts::eval(&self.expr, None, &ctx)?.0)
    }
}

/// Slot `p` (`$slotK`) of `slots`.
pub fn slot<'a>(p: &str, slots: &'a [Param]) -> Result<&'a Param, SqlError> {
    p.strip_prefix(SLOT)
        .and_then(|k| k.parse::<usize>().ok())
        .and_then(|k| slots.get(k))
        .ok_or_else(|| SqlError::syntax(format!("invalid parameter {p}")))
}
