//! Expressions without columns, evaluated when the statement runs: INSERT's VALUES, a
//! SELECT without FROM (`SELECT 1`, `SELECT version()`, what drivers ask on connect), LIMIT.

use sqlparser::ast::{BinaryOperator, CastKind, Expr, UnaryOperator, Value as SqlValue};
use vev::{Edn, Value};

use super::expr::{function_args, literal_edn, placeholder};
use crate::error::SqlError;
use crate::types::SqlType;

/// What a constant expression may read.
pub struct Ctx<'a> {
    /// Each parameter's value as text (`None`: NULL), or already typed.
    pub params: &'a [Param],
    /// The statement's time, milliseconds since the epoch.
    pub now_ms: i64,
    pub user: &'a str,
    pub database: &'a str,
    /// A session setting's value (`current_setting`).
    pub setting: &'a dyn Fn(&str) -> Option<String>,
    /// The values of a grouped row an expression over aggregates reads (`$slotK` is
    /// `slots[K]`, `sql/computed.rs`); empty elsewhere.
    pub slots: &'a [Param],
}

/// A bound parameter value.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Null,
    /// Text format: typed where it is used.
    Text(String),
    /// Already a value (binary format, decoded by its declared type).
    Typed(Edn, SqlType),
}

impl Param {
    /// The parameter as a value of type `ty` (text if none).
    pub fn typed(&self, ty: Option<SqlType>) -> Result<(Edn, Option<SqlType>), SqlError> {
        match self {
            Param::Null => Ok((crate::sqlfns::null_edn(), ty)),
            Param::Text(s) => {
                let t = ty.unwrap_or(SqlType::Text);
                Ok((t.parse_text(s)?, Some(t)))
            }
            Param::Typed(e, t) => Ok((e.clone(), Some(*t))),
        }
    }
}

/// The value of `e` (of type `expected` where its own type is open).
pub fn eval(
    e: &Expr,
    expected: Option<SqlType>,
    ctx: &Ctx,
) -> Result<(Edn, Option<SqlType>), SqlError> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Placeholder(p) if p.starts_with(super::computed::SLOT) => {
                super::computed::slot(p, ctx.slots)?.typed(expected)
            }
            SqlValue::Placeholder(p) => {
                let n = placeholder(p)?;
                let param = ctx
                    .params
                    .get(n - 1)
                    .ok_or_else(|| SqlError::new("08P01", format!("there is no parameter ${n}")))?;
                param.typed(expected)
            }
            other => literal_edn(other, expected),
        },
        Expr::Nested(x) => eval(x, expected, ctx),
        Expr::Cast {
            kind: CastKind::Cast | CastKind::DoubleColon,
            expr,
            data_type,
            ..
        } => {
            let ty = SqlType::from_ast(data_type)?;
            let (v, from) = eval(expr, Some(ty), ctx)?;
            Ok((convert(v, from, ty)?, Some(ty)))
        }
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => {
            if let Expr::Value(v) = &**expr {
                if let SqlValue::Number(n, _) = &v.value {
                    return literal_edn(&SqlValue::Number(format!("-{n}"), false), expected);
                }
            }
            let (v, t) = eval(expr, expected, ctx)?;
            Ok((apply("neg", &[v])?, t))
        }
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => eval(expr, expected, ctx),
        Expr::BinaryOp { left, op, right } => binary(left, op, right, expected, ctx),
        Expr::Function(f) => function(f, ctx),
        Expr::TypedString(ts) => {
            let ty = SqlType::from_ast(&ts.data_type)?;
            let text = match &ts.value.value {
                SqlValue::SingleQuotedString(s) => s.clone(),
                other => other.to_string(),
            };
            Ok((ty.parse_text(&text)?, Some(ty)))
        }
        Expr::Identifier(i) if i.quote_style.is_none() => {
            match i.value.to_ascii_lowercase().as_str() {
                "current_timestamp" | "localtimestamp" => {
                    Ok((Edn::Inst(ctx.now_ms), Some(SqlType::Timestamptz)))
                }
                "current_user" | "session_user" | "user" => {
                    Ok((Edn::String(ctx.user.into()), Some(SqlType::Text)))
                }
                "current_catalog" => Ok((Edn::String(ctx.database.into()), Some(SqlType::Text))),
                "current_schema" => Ok((Edn::String("public".into()), Some(SqlType::Text))),
                _ => Err(SqlError::undefined_column(&i.value)),
            }
        }
        other => Err(SqlError::unsupported(format!(
            "the expression {other} here"
        ))),
    }
}

fn binary(
    l: &Expr,
    op: &BinaryOperator,
    r: &Expr,
    expected: Option<SqlType>,
    ctx: &Ctx,
) -> Result<(Edn, Option<SqlType>), SqlError> {
    let (lv, lt) = eval(l, expected, ctx)?;
    let (rv, rt) = eval(r, lt.or(expected), ctx)?;
    let f = match op {
        BinaryOperator::Plus => "add",
        BinaryOperator::Minus => "sub",
        BinaryOperator::Multiply => "mul",
        BinaryOperator::Divide => "div",
        BinaryOperator::Modulo => "mod",
        BinaryOperator::StringConcat => "concat",
        op if super::expr::comparison(op).is_some() => {
            super::expr::comparison(op).unwrap_or_default()
        }
        BinaryOperator::And => "and",
        BinaryOperator::Or => "or",
        other => return Err(SqlError::unsupported(format!("the operator {other}"))),
    };
    let ty = match f {
        "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "and" | "or" => Some(SqlType::Bool),
        "concat" => Some(SqlType::Text),
        _ => lt.or(rt),
    };
    Ok((apply(f, &[lv, rv])?, ty))
}

/// Call a `vev.sql/*` function on constant values.
fn apply(f: &str, args: &[Edn]) -> Result<Edn, SqlError> {
    let vals: Vec<Value> = args.iter().map(edn_value).collect::<Result<_, _>>()?;
    let result = crate::sqlfns::call(f, &vals)
        .map_err(|m| crate::sqlfns::coded_message(&m).unwrap_or_else(|| SqlError::internal(m)))?;
    Ok(value_edn(&result))
}

fn function(f: &sqlparser::ast::Function, ctx: &Ctx) -> Result<(Edn, Option<SqlType>), SqlError> {
    let name = f.name.to_string().to_ascii_lowercase();
    let name = name.trim_start_matches("pg_catalog.");
    let args = function_args(f)?;
    let text = |s: String| Ok((Edn::String(s), Some(SqlType::Text)));
    match (name, args.as_slice()) {
        (
            "now"
            | "current_timestamp"
            | "transaction_timestamp"
            | "statement_timestamp"
            | "clock_timestamp",
            [],
        ) => Ok((Edn::Inst(ctx.now_ms), Some(SqlType::Timestamptz))),
        ("version", []) => text(format!(
            "PostgreSQL {} (Vev {}), a Datalog database speaking PostgreSQL's protocol",
            crate::SERVER_VERSION,
            env!("CARGO_PKG_VERSION")
        )),
        ("current_database", []) => text(ctx.database.to_owned()),
        ("current_schema", []) => text("public".into()),
        ("current_user" | "session_user", []) => text(ctx.user.to_owned()),
        ("pg_backend_pid", []) => Ok((
            Edn::Integer(i64::from(std::process::id())),
            Some(SqlType::Int4),
        )),
        ("current_setting", [x, ..]) => {
            let (v, _) = eval(x, Some(SqlType::Text), ctx)?;
            let Edn::String(name) = v else {
                return Err(SqlError::new(
                    "22023",
                    "current_setting takes a setting name",
                ));
            };
            match (ctx.setting)(&name.to_ascii_lowercase()) {
                Some(v) => text(v),
                None => Err(SqlError::new(
                    "42704",
                    format!("unrecognized configuration parameter \"{name}\""),
                )),
            }
        }
        ("round", [_] | [_, _]) | ("nullif", [_, _]) | ("greatest" | "least", [_, ..]) => {
            let vals: Vec<(Edn, Option<SqlType>)> = args
                .iter()
                .map(|x| eval(x, None, ctx))
                .collect::<Result<_, _>>()?;
            let first = vals.iter().find_map(|(_, t)| *t);
            let ty = match (name, args.len()) {
                ("round", 2) => Some(SqlType::Numeric),
                ("round", _) if first == Some(SqlType::Numeric) => Some(SqlType::Numeric),
                ("round", _) => Some(SqlType::Float8),
                _ => first,
            };
            let edns: Vec<Edn> = vals.into_iter().map(|(e, _)| e).collect();
            Ok((apply(name, &edns)?, ty))
        }
        ("lower" | "upper" | "length" | "abs" | "coalesce", xs) => {
            let vals: Vec<(Edn, Option<SqlType>)> = xs
                .iter()
                .map(|x| eval(x, None, ctx))
                .collect::<Result<_, _>>()?;
            let ty = match name {
                "length" => Some(SqlType::Int4),
                "lower" | "upper" => Some(SqlType::Text),
                _ => vals.iter().find_map(|(_, t)| *t),
            };
            let edns: Vec<Edn> = vals.into_iter().map(|(e, _)| e).collect();
            Ok((apply(name, &edns)?, ty))
        }
        _ => Err(SqlError::new(
            "42883",
            format!("function {name}({} arguments) does not exist", args.len()),
        )),
    }
}

/// A constant converted to another type (the casts drivers send: text to anything, numbers
/// between kinds).
fn convert(v: Edn, from: Option<SqlType>, to: SqlType) -> Result<Edn, SqlError> {
    if crate::sqlfns::is_null_edn(&v) || from == Some(to) {
        return Ok(v);
    }
    match (&v, to) {
        (Edn::String(s), _) => to.parse_text(s),
        (Edn::Integer(n), t) if t.is_integer() => t.parse_text(&n.to_string()),
        (Edn::Integer(n), SqlType::Float4 | SqlType::Float8) => Ok(Edn::Float(*n as f64)),
        (Edn::Float(f), t) if t.is_integer() => t.parse_text(&format!("{}", f.round())),
        (_, t) if t.is_text() => Ok(Edn::String(
            crate::types::edn_to_text(&v, from.unwrap_or(SqlType::Text)).unwrap_or_default(),
        )),
        _ => Err(SqlError::unsupported(format!(
            "a cast of {v} to {}",
            to.display()
        ))),
    }
}

/// EDN (as typed parameters and literals are) to a database value.
pub fn edn_value(e: &Edn) -> Result<Value, SqlError> {
    Ok(match e {
        Edn::Nil => crate::sqlfns::null(),
        Edn::Bool(b) => Value::Boolean(*b),
        Edn::Integer(n) => Value::Long(*n),
        Edn::Float(f) => Value::Double(*f),
        Edn::String(s) => Value::String(s.as_str().into()),
        Edn::Keyword(k) => Value::Keyword(k.clone()),
        Edn::Inst(ms) => Value::Instant(*ms),
        Edn::BigDec(d) => Value::BigDec(std::sync::Arc::new((**d).clone())),
        Edn::Uuid(u) => Value::Uuid(u.to_be_bytes()),
        other => {
            return Err(SqlError::unsupported(format!(
                "the value {other} in an expression"
            )))
        }
    })
}

/// A database value as EDN (for results of constant expressions).
pub fn value_edn(v: &Value) -> Edn {
    match v {
        Value::Nil => crate::sqlfns::null_edn(),
        Value::Boolean(b) => Edn::Bool(*b),
        Value::Long(n) => Edn::Integer(*n),
        Value::Ref(e) => Edn::Integer(*e as i64),
        Value::Double(f) => Edn::Float(*f),
        Value::Float(f) => Edn::Float(f64::from(*f)),
        Value::String(s) => Edn::String(s.to_string()),
        Value::Keyword(k) => Edn::Keyword(k.clone()),
        Value::Instant(ms) => Edn::Inst(*ms),
        Value::BigDec(d) => Edn::BigDec(Box::new((**d).clone())),
        Value::Uuid(u) => Edn::Uuid(u128::from_be_bytes(*u)),
        other => Edn::String(other.to_string()),
    }
}
