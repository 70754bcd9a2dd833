//! `UNION` and `UNION ALL` of SELECTs.
//!
//! Each branch is a SELECT compiled as any other (its own Datalog query); the session runs
//! the branches on one view of the database and combines their rows: concatenated for
//! `UNION ALL`, without duplicates for `UNION` (NULLs equal to each other, numbers by value,
//! as PostgreSQL compares rows there), in the order the set operations nest (`a UNION b
//! UNION ALL c` is `(a UNION b) UNION ALL c`). Then the statement's ORDER BY (by output
//! column name or position), OFFSET and LIMIT. Column names come from the first branch;
//! each column's type is the one its branches' types resolve to (integers widen to the
//! widest, then numeric, then floating point; text types to text), and values are
//! converted to it, so that `1` and `1.0` are one row of a numeric column.

use std::sync::Arc;

use sqlparser::ast::{Expr, OrderByKind, Query, SetExpr, SetOperator, SetQuantifier};
use vev::Edn;

use super::expr::ident_name;
use super::select::{self, Count, OutCol, Post, SelectPlan};
use crate::catalog::Catalog;
use crate::error::SqlError;
use crate::types::SqlType;

/// A compiled UNION.
#[derive(Clone, Debug)]
pub struct UnionPlan {
    pub tree: Node,
    pub columns: Arc<Vec<OutCol>>,
    pub params: Vec<Option<SqlType>>,
    /// ORDER BY, OFFSET and LIMIT over the combined rows (`select` is every column).
    pub post: Post,
}

/// The set operations as they nest.
#[derive(Clone, Debug)]
pub enum Node {
    Branch(Arc<SelectPlan>),
    Union {
        /// `UNION ALL`: duplicates kept.
        all: bool,
        left: Box<Node>,
        right: Box<Node>,
    },
}

impl Node {
    /// The branches, left to right.
    pub fn branches(&self) -> Vec<&Arc<SelectPlan>> {
        match self {
            Node::Branch(p) => vec![p],
            Node::Union { left, right, .. } => {
                let mut all = left.branches();
                all.extend(right.branches());
                all
            }
        }
    }
}

/// Compile a query whose body is a set operation; `None` for any other query.
pub fn compile(q: &Query, catalog: &Catalog) -> Result<Option<UnionPlan>, SqlError> {
    let SetExpr::SetOperation { .. } = &*q.body else {
        return Ok(None);
    };
    if q.with.is_some() {
        return Err(SqlError::unsupported("WITH"));
    }
    if !q.locks.is_empty() {
        return Err(SqlError::unsupported(
            "FOR UPDATE is not allowed with UNION",
        ));
    }
    if q.fetch.is_some() {
        return Err(SqlError::unsupported("FETCH"));
    }
    let tree = node(q, &q.body, catalog)?;
    let branches = tree.branches();
    let first = &branches[0].columns;
    let mut types: Vec<SqlType> = first.iter().map(|c| c.ty).collect();
    for b in &branches[1..] {
        if b.columns.len() != first.len() {
            return Err(SqlError::syntax(
                "each UNION query must have the same number of columns",
            ));
        }
        for (ty, col) in types.iter_mut().zip(b.columns.iter()) {
            *ty = common(ty, &col.ty).ok_or_else(|| {
                SqlError::new(
                    "42804",
                    format!(
                        "UNION types {} and {} cannot be matched",
                        ty.name(),
                        col.ty.name()
                    ),
                )
            })?;
        }
    }
    let columns: Vec<OutCol> = first
        .iter()
        .zip(types)
        .map(|(c, ty)| OutCol {
            name: c.name.clone(),
            ty,
        })
        .collect();
    let mut params: Vec<Option<SqlType>> = Vec::new();
    for b in &branches {
        for (i, ty) in b.params.iter().enumerate() {
            if params.len() <= i {
                params.resize(i + 1, None);
            }
            match (&params[i], ty) {
                (None, _) => params[i] = *ty,
                (Some(a), Some(t)) if a != t => {
                    return Err(SqlError::new(
                        "42P08",
                        format!(
                            "inconsistent types deduced for parameter ${}: {} and {}",
                            i + 1,
                            a.name(),
                            t.name()
                        ),
                    ))
                }
                _ => {}
            }
        }
    }
    let mut post = Post {
        select: (0..columns.len()).collect(),
        ..Post::default()
    };
    if let Some(ob) = &q.order_by {
        order_by(ob, &columns, &mut post)?;
    }
    let (limit, offset) = select::limit_clause(&q.limit_clause)?;
    for c in [&limit, &offset] {
        if let Some(Count::Param(n)) = c {
            if params.len() < *n {
                params.resize(*n, None);
            }
            params[n - 1] = Some(SqlType::Int8);
        }
    }
    post.limit = limit;
    post.offset = offset;
    Ok(Some(UnionPlan {
        tree,
        columns: Arc::new(columns),
        params,
        post,
    }))
}

/// One operand: a set operation, or a SELECT (parenthesized, with its own ORDER BY and
/// LIMIT, or bare).
fn node(outer: &Query, body: &SetExpr, catalog: &Catalog) -> Result<Node, SqlError> {
    match body {
        SetExpr::SetOperation {
            left,
            op: SetOperator::Union,
            set_quantifier,
            right,
        } => {
            let all = match set_quantifier {
                SetQuantifier::All => true,
                SetQuantifier::Distinct | SetQuantifier::None => false,
                other => return Err(SqlError::unsupported(format!("UNION {other}"))),
            };
            Ok(Node::Union {
                all,
                left: Box::new(node(outer, left, catalog)?),
                right: Box::new(node(outer, right, catalog)?),
            })
        }
        SetExpr::SetOperation { op, .. } => Err(SqlError::unsupported(op.to_string())),
        SetExpr::Select(_) => {
            let mut q = outer.clone();
            *q.body = body.clone();
            q.order_by = None;
            q.limit_clause = None;
            branch(&q, catalog)
        }
        SetExpr::Query(q) if matches!(&*q.body, SetExpr::Select(_)) => branch(q, catalog),
        other => Err(SqlError::unsupported(format!("{other} in a UNION"))),
    }
}

fn branch(q: &Query, catalog: &Catalog) -> Result<Node, SqlError> {
    match select::compile(q, catalog)? {
        Some(p) if p.lock.is_some() => Err(SqlError::unsupported(
            "FOR UPDATE is not allowed with UNION",
        )),
        Some(p) => Ok(Node::Branch(Arc::new(p))),
        None => Err(SqlError::unsupported("a SELECT without FROM in a UNION")),
    }
}

/// ORDER BY over a UNION's output: a column by name or position, as PostgreSQL allows.
fn order_by(
    ob: &sqlparser::ast::OrderBy,
    columns: &[OutCol],
    post: &mut Post,
) -> Result<(), SqlError> {
    let OrderByKind::Expressions(exprs) = &ob.kind else {
        return Err(SqlError::unsupported("ORDER BY ALL"));
    };
    for o in exprs {
        let (position, desc, nulls_first) = select::order_item(o, columns.len())?;
        let at = match (position, &o.expr) {
            (Some(k), _) => k,
            (None, Expr::Identifier(i)) => {
                let name = ident_name(i);
                columns.iter().position(|c| c.name == name).ok_or_else(|| {
                    SqlError::new(
                        "42703",
                        format!("column \"{name}\" does not exist in the UNION's result"),
                    )
                })?
            }
            (None, other) => return Err(not_a_column(other)),
        };
        post.order.push((at, desc, nulls_first));
    }
    Ok(())
}

fn not_a_column(e: &Expr) -> SqlError {
    SqlError::unsupported(format!(
        "ORDER BY {e} on a UNION: only its result columns, by name or position"
    ))
}

/// The type two branches' column types resolve to, as PostgreSQL's UNION resolves them
/// (`None`: they cannot be matched).
fn common(a: &SqlType, b: &SqlType) -> Option<SqlType> {
    use SqlType::*;
    if a == b {
        return Some(*a);
    }
    let numeric = |t: &SqlType| match t {
        Int2 => Some(0),
        Int4 => Some(1),
        Int8 => Some(2),
        Numeric => Some(3),
        Float4 => Some(4),
        Float8 => Some(5),
        _ => None,
    };
    let text = |t: &SqlType| matches!(t, Text | Varchar(_) | Char(_));
    match (numeric(a), numeric(b)) {
        (Some(x), Some(y)) => return Some(if x >= y { *a } else { *b }),
        (None, None) => {}
        _ => return None,
    }
    if text(a) && text(b) {
        return Some(Text);
    }
    match (a, b) {
        (Timestamp, Timestamptz) | (Timestamptz, Timestamp) => Some(Timestamptz),
        _ => None,
    }
}

/// A branch's rows with each value as a value of its column's resolved type.
pub fn conform_rows(rows: Vec<Vec<Edn>>, columns: &[OutCol]) -> Vec<Vec<Edn>> {
    rows.into_iter()
        .map(|r| {
            r.into_iter()
                .zip(columns)
                .map(|(v, c)| conform(v, c.ty))
                .collect()
        })
        .collect()
}

/// The rows of `node`, taking its branches' rows in order from `branches`.
pub fn combine(node: &Node, branches: &mut impl Iterator<Item = Vec<Vec<Edn>>>) -> Vec<Vec<Edn>> {
    match node {
        Node::Branch(_) => branches.next().unwrap_or_default(),
        Node::Union { all, left, right } => {
            let mut rows = combine(left, branches);
            rows.extend(combine(right, branches));
            if *all {
                rows
            } else {
                distinct(rows)
            }
        }
    }
}

/// A branch's value as a value of its column's resolved type.
fn conform(v: Edn, to: SqlType) -> Edn {
    match (to, v) {
        (SqlType::Numeric, Edn::Integer(x)) => Edn::BigDec(Box::new(x.into())),
        (SqlType::Float4 | SqlType::Float8, Edn::Integer(x)) => Edn::Float(x as f64),
        (SqlType::Float4 | SqlType::Float8, Edn::BigDec(x)) => {
            use bigdecimal::ToPrimitive;
            Edn::Float(x.to_f64().unwrap_or(f64::NAN))
        }
        (_, v) => v,
    }
}

/// Rows without duplicates (SQL's row equality for UNION: NULLs equal, numbers by value).
/// Their order is not kept (a UNION's rows have none).
pub fn distinct(mut rows: Vec<Vec<Edn>>) -> Vec<Vec<Edn>> {
    let cmp = |a: &Vec<Edn>, b: &Vec<Edn>| {
        for (x, y) in a.iter().zip(b) {
            let o = super::compare::compare_sql(x, y, false, false);
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    };
    rows.sort_by(cmp);
    rows.dedup_by(|a, b| cmp(a, b) == std::cmp::Ordering::Equal);
    rows
}
