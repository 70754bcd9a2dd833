//! The set operations of SELECTs: `UNION`, `INTERSECT` and `EXCEPT`, each with or without
//! `ALL`.
//!
//! Each branch is a SELECT compiled as any other (its own Datalog query); the session runs
//! the branches on one view of the database and combines their rows in the order the set
//! operations nest (as sqlparser parses them: `INTERSECT` binds tighter than `UNION` and
//! `EXCEPT`, which nest left to right, so `a UNION b EXCEPT c` is `(a UNION b) EXCEPT c`).
//! Rows are equal as PostgreSQL compares them there (NULLs equal to each other, numbers by
//! value). `UNION ALL` concatenates; `INTERSECT ALL` keeps a row as many times as the
//! fewer of its copies on either side, `EXCEPT ALL` as many times as its copies on the
//! left outnumber those on the right; without `ALL` each operation's result has no
//! duplicates. Then the statement's ORDER BY (by output column name or position), OFFSET
//! and LIMIT. Column names come from the first branch; each column's type is the one its
//! branches' types resolve to, operation by operation (integers widen to the widest, then
//! numeric, then floating point; text types to text), and values are converted to it, so
//! that `1` and `1.0` are one row of a numeric column.

use std::sync::Arc;

use sqlparser::ast::{Expr, OrderByKind, Query, SetExpr, SetOperator, SetQuantifier};
use vev::Edn;

use super::expr::ident_name;
use super::select::{self, Count, OutCol, Post, SelectPlan};
use crate::catalog::Catalog;
use crate::error::SqlError;
use crate::types::SqlType;

/// A compiled set operation (`UNION`, `INTERSECT`, `EXCEPT`).
#[derive(Clone, Debug)]
pub struct UnionPlan {
    pub tree: Node,
    pub columns: Arc<Vec<OutCol>>,
    pub params: Vec<Option<SqlType>>,
    /// ORDER BY, OFFSET and LIMIT over the combined rows (`select` is every column).
    pub post: Post,
}

/// Add the parameter types of one part of a statement (`from`) to those of the others
/// (`into`): a parameter two parts type differently is `42P08`, as in PostgreSQL.
pub fn merge_params(
    into: &mut Vec<Option<SqlType>>,
    from: &[Option<SqlType>],
) -> Result<(), SqlError> {
    for (i, ty) in from.iter().enumerate() {
        if into.len() <= i {
            into.resize(i + 1, None);
        }
        match (&into[i], ty) {
            (None, _) => into[i] = *ty,
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
    Ok(())
}

/// The set operations as they nest.
#[derive(Clone, Debug)]
pub enum Node {
    Branch(Arc<SelectPlan>),
    Set {
        op: SetOp,
        /// `ALL`: duplicates counted, not removed.
        all: bool,
        left: Box<Node>,
        right: Box<Node>,
    },
}

/// A set operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Intersect,
    Except,
}

impl SetOp {
    /// The keyword, as PostgreSQL's messages name the operation.
    pub fn keyword(self) -> &'static str {
        match self {
            SetOp::Union => "UNION",
            SetOp::Intersect => "INTERSECT",
            SetOp::Except => "EXCEPT",
        }
    }
}

impl Node {
    /// The branches, left to right.
    pub fn branches(&self) -> Vec<&Arc<SelectPlan>> {
        match self {
            Node::Branch(p) => vec![p],
            Node::Set { left, right, .. } => {
                let mut all = left.branches();
                all.extend(right.branches());
                all
            }
        }
    }

    /// Each branch's Datalog, between them the operations (what `EXPLAIN` shows).
    pub fn explain(&self) -> String {
        match self {
            Node::Branch(p) => p.datalog.clone(),
            Node::Set {
                op,
                all,
                left,
                right,
            } => format!(
                "{}\n{}{}\n{}",
                left.explain(),
                op.keyword(),
                if *all { " ALL" } else { "" },
                right.explain()
            ),
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
        return Err(for_update());
    }
    if q.fetch.is_some() {
        return Err(SqlError::unsupported("FETCH"));
    }
    let tree = node(q, &q.body, catalog)?;
    let branches = tree.branches();
    let columns = resolve(&tree)?;
    let mut params: Vec<Option<SqlType>> = Vec::new();
    for b in &branches {
        merge_params(&mut params, &b.params)?;
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
            op,
            set_quantifier,
            right,
        } => {
            let op = match op {
                SetOperator::Union => SetOp::Union,
                SetOperator::Intersect => SetOp::Intersect,
                SetOperator::Except => SetOp::Except,
                other => return Err(SqlError::unsupported(other.to_string())),
            };
            let all = match set_quantifier {
                SetQuantifier::All => true,
                SetQuantifier::Distinct | SetQuantifier::None => false,
                other => return Err(SqlError::unsupported(format!("{} {other}", op.keyword()))),
            };
            Ok(Node::Set {
                op,
                all,
                left: Box::new(node(outer, left, catalog)?),
                right: Box::new(node(outer, right, catalog)?),
            })
        }
        SetExpr::Select(_) => {
            let mut q = outer.clone();
            *q.body = body.clone();
            q.order_by = None;
            q.limit_clause = None;
            branch(&q, catalog)
        }
        SetExpr::Query(q) if matches!(&*q.body, SetExpr::Select(_)) => branch(q, catalog),
        // A parenthesized set operation nests as written.
        SetExpr::Query(q)
            if matches!(&*q.body, SetExpr::SetOperation { .. })
                && q.with.is_none()
                && q.order_by.is_none()
                && q.limit_clause.is_none()
                && q.fetch.is_none()
                && q.locks.is_empty() =>
        {
            node(q, &q.body, catalog)
        }
        other => Err(SqlError::unsupported(format!(
            "{other} in a UNION, INTERSECT or EXCEPT"
        ))),
    }
}

fn branch(q: &Query, catalog: &Catalog) -> Result<Node, SqlError> {
    match select::compile(q, catalog)? {
        Some(p) if p.lock.is_some() => Err(for_update()),
        Some(p) => Ok(Node::Branch(Arc::new(p))),
        None => Err(SqlError::unsupported(
            "a SELECT without FROM in a UNION, INTERSECT or EXCEPT",
        )),
    }
}

fn for_update() -> SqlError {
    SqlError::unsupported("FOR UPDATE is not allowed with UNION/INTERSECT/EXCEPT")
}

/// The output columns of `node`: the names of its first branch's, each column's type
/// resolved operation by operation as PostgreSQL does (a different number of columns is
/// `42601`, types that do not match `42804`, each naming the operation).
fn resolve(node: &Node) -> Result<Vec<OutCol>, SqlError> {
    let (op, left, right) = match node {
        Node::Branch(p) => return Ok(p.columns.to_vec()),
        Node::Set {
            op, left, right, ..
        } => (op.keyword(), resolve(left)?, resolve(right)?),
    };
    if left.len() != right.len() {
        return Err(SqlError::syntax(format!(
            "each {op} query must have the same number of columns"
        )));
    }
    left.into_iter()
        .zip(right)
        .map(|(l, r)| {
            let ty = common(&l.ty, &r.ty).ok_or_else(|| {
                SqlError::new(
                    "42804",
                    format!(
                        "{op} types {} and {} cannot be matched",
                        l.ty.name(),
                        r.ty.name()
                    ),
                )
            })?;
            Ok(OutCol { name: l.name, ty })
        })
        .collect()
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
        Node::Set {
            op,
            all,
            left,
            right,
        } => {
            let mut rows = combine(left, branches);
            let right = combine(right, branches);
            match op {
                SetOp::Union => {
                    rows.extend(right);
                    if *all {
                        rows
                    } else {
                        distinct(rows)
                    }
                }
                SetOp::Intersect | SetOp::Except => counted(*op, *all, rows, right),
            }
        }
    }
}

/// SQL's row order for set operations: NULLs equal (and first), numbers by value.
fn row_cmp(a: &[Edn], b: &[Edn]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = super::compare::compare_sql(x, y, false, false);
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// `left INTERSECT [ALL] right` or `left EXCEPT [ALL] right`: each distinct row with `m`
/// copies on the left and `n` on the right is kept `min(m, n)` times (INTERSECT ALL) or
/// `m - n` times (EXCEPT ALL, none when `n >= m`), once when both have it (INTERSECT) or
/// only the left does (EXCEPT). The rows' order is not kept (a set operation's rows have
/// none).
fn counted(
    op: SetOp,
    all: bool,
    mut left: Vec<Vec<Edn>>,
    mut right: Vec<Vec<Edn>>,
) -> Vec<Vec<Edn>> {
    left.sort_by(|a, b| row_cmp(a, b));
    right.sort_by(|a, b| row_cmp(a, b));
    let mut out = Vec::new();
    let mut j = 0;
    let mut i = 0;
    while i < left.len() {
        let mut m = 1;
        while i + m < left.len() && row_cmp(&left[i], &left[i + m]).is_eq() {
            m += 1;
        }
        while j < right.len() && row_cmp(&right[j], &left[i]).is_lt() {
            j += 1;
        }
        let mut n = 0;
        while j + n < right.len() && row_cmp(&right[j + n], &left[i]).is_eq() {
            n += 1;
        }
        let keep = match (op, all) {
            (SetOp::Intersect, true) => m.min(n),
            (SetOp::Intersect, false) => usize::from(n > 0),
            (_, true) => m.saturating_sub(n),
            (_, false) => usize::from(n == 0),
        };
        out.extend(left[i..i + keep].iter().cloned());
        i += m;
        j += n;
    }
    out
}

/// A branch's value as a value of its column's resolved type.
pub(crate) fn conform(v: Edn, to: SqlType) -> Edn {
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
    rows.sort_by(|a, b| row_cmp(a, b));
    rows.dedup_by(|a, b| row_cmp(a, b).is_eq());
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(xs: &[Option<i64>]) -> Vec<Vec<Edn>> {
        xs.iter()
            .map(|x| vec![x.map_or(Edn::Nil, Edn::Integer)])
            .collect()
    }

    fn sorted(mut r: Vec<Vec<Edn>>) -> Vec<Vec<Edn>> {
        r.sort_by(|a, b| row_cmp(a, b));
        r
    }

    #[test]
    fn intersect_and_except_count_copies_and_treat_nulls_as_equal() {
        let left = rows(&[Some(1), Some(1), Some(1), Some(2), None, None, Some(3)]);
        let right = rows(&[Some(1), Some(1), None, Some(4), Some(4)]);
        let run = |op, all| sorted(counted(op, all, left.clone(), right.clone()));
        assert_eq!(run(SetOp::Intersect, false), sorted(rows(&[None, Some(1)])));
        assert_eq!(
            run(SetOp::Intersect, true),
            sorted(rows(&[None, Some(1), Some(1)]))
        );
        assert_eq!(run(SetOp::Except, false), sorted(rows(&[Some(2), Some(3)])));
        assert_eq!(
            run(SetOp::Except, true),
            sorted(rows(&[None, Some(1), Some(2), Some(3)]))
        );
        assert!(counted(SetOp::Intersect, true, left.clone(), Vec::new()).is_empty());
        assert_eq!(
            counted(SetOp::Except, true, left.clone(), Vec::new()).len(),
            7
        );
    }
}
