//! RETURNING: the rows an INSERT, UPDATE or DELETE wrote, returned as a SELECT returns rows
//! (with the write's command tag: `INSERT 0 n`, `UPDATE n`, `DELETE n`).
//!
//! Each output column's value comes from one of two places: a table column's value as the
//! statement writes it (an INSERT's row, or a column an UPDATE assigns, conformed to the
//! column's type as it is stored: `SET n = 2.5` on an integer column returns 2), or a find
//! element of the UPDATE's or DELETE's row query (the row as it was: every value of a
//! DELETE, the columns an UPDATE leaves alone, and expressions over them). An expression
//! over a column an UPDATE assigns, an expression in an INSERT's RETURNING, and RETURNING
//! with `ON CONFLICT ... DO UPDATE` are refused with `0A000` (they would need the row as
//! written, evaluated after the write).

use std::ops::ControlFlow;
use std::sync::Arc;

use sqlparser::ast::{Expr, SelectItem, SelectItemQualifiedWildcardKind, Visit, Visitor};
use vev::Edn;

use super::expr::{ident_name, Builder};
use super::select::{output_name, table_name, OutCol};
use crate::catalog::Table;
use crate::error::SqlError;
use crate::types::SqlType;

/// A planned RETURNING clause.
#[derive(Clone, Debug)]
pub struct Returning {
    pub columns: Arc<Vec<OutCol>>,
    items: Vec<Item>,
}

/// Where one output column's value comes from.
#[derive(Clone, Copy, Debug)]
enum Item {
    /// Table column `ci` as the statement writes it.
    Written(usize),
    /// Find element `k` of the row query.
    Found(usize),
}

/// The statement a RETURNING belongs to.
#[derive(Clone, Copy)]
pub enum Kind<'a> {
    Insert,
    /// The columns the UPDATE assigns.
    Update(&'a [usize]),
    Delete,
}

/// The row query a RETURNING of an UPDATE or DELETE adds find elements to.
pub struct Query<'a> {
    pub builder: &'a mut Builder,
    pub finds: &'a mut Vec<String>,
}

/// Plan RETURNING `items` of a statement on `table` (named `alias` in it). `query`: the
/// UPDATE's or DELETE's row query (`None` for an INSERT).
pub fn plan(
    items: &[SelectItem],
    table: &Arc<Table>,
    alias: &str,
    kind: Kind<'_>,
    mut query: Option<Query<'_>>,
) -> Result<Returning, SqlError> {
    let mut columns = Vec::new();
    let mut out = Vec::new();
    for item in items {
        let (expr, name) = match item {
            SelectItem::Wildcard(_)
            | SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(_), _) => {
                if let SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) = item
                {
                    let named = table_name(n)?;
                    if named != alias {
                        return Err(SqlError::undefined_table(&named));
                    }
                }
                for (ci, c) in table.columns.iter().enumerate() {
                    out.push(column(ci, table, kind, query.as_mut())?);
                    columns.push(OutCol {
                        name: c.name.clone(),
                        ty: c.ty,
                    });
                }
                continue;
            }
            SelectItem::UnnamedExpr(e) => (e, output_name(e)),
            SelectItem::ExprWithAlias { expr, alias } => (expr, ident_name(alias)),
            other => return Err(SqlError::unsupported(format!("the RETURNING item {other}"))),
        };
        if let Some(ci) = plain_column(expr, table, alias) {
            out.push(column(ci, table, kind, query.as_mut())?);
            columns.push(OutCol {
                name,
                ty: table.columns[ci].ty,
            });
            continue;
        }
        let (item, ty) = expression(expr, table, kind, query.as_mut())?;
        out.push(item);
        columns.push(OutCol { name, ty });
    }
    Ok(Returning {
        columns: Arc::new(columns),
        items: out,
    })
}

/// Table column `ci` as an output column.
fn column(
    ci: usize,
    table: &Table,
    kind: Kind<'_>,
    query: Option<&mut Query<'_>>,
) -> Result<Item, SqlError> {
    match kind {
        Kind::Insert if table.columns[ci].attr.is_none() => Err(SqlError::unsupported(format!(
            "RETURNING the entity id column \"{}\" of an INSERT",
            table.columns[ci].name
        ))),
        Kind::Insert => Ok(Item::Written(ci)),
        Kind::Update(sets) if sets.contains(&ci) => Ok(Item::Written(ci)),
        Kind::Update(_) | Kind::Delete => {
            let q = query.expect("UPDATE and DELETE have a row query");
            let t = q.builder.column(0, ci, false);
            q.finds.push(t.text);
            Ok(Item::Found(q.finds.len() - 1))
        }
    }
}

/// An expression over the row as it was, as an output column.
fn expression(
    e: &Expr,
    table: &Table,
    kind: Kind<'_>,
    query: Option<&mut Query<'_>>,
) -> Result<(Item, SqlType), SqlError> {
    match kind {
        Kind::Insert => {
            return Err(SqlError::unsupported(
                "an expression in INSERT ... RETURNING (return columns)",
            ))
        }
        Kind::Update(sets) => {
            let assigned: Vec<&str> = sets
                .iter()
                .map(|&c| table.columns[c].name.as_str())
                .collect();
            if let Some(name) = names_any(e, &assigned) {
                return Err(SqlError::unsupported(format!(
                    "a RETURNING expression over the assigned column \"{name}\" (return the column itself)"
                )));
            }
        }
        Kind::Delete => {}
    }
    let q = query.expect("UPDATE and DELETE have a row query");
    let t = q.builder.expr(e, None)?;
    let t = q.builder.as_var(t);
    q.finds.push(t.text);
    Ok((
        Item::Found(q.finds.len() - 1),
        t.ty.unwrap_or(SqlType::Text),
    ))
}

/// The column `e` names, when it is a bare column of `table` (`c` or `alias.c`).
fn plain_column(e: &Expr, table: &Table, alias: &str) -> Option<usize> {
    let name = match e {
        Expr::Identifier(i) => ident_name(i),
        Expr::CompoundIdentifier(p) if p.len() == 2 && ident_name(&p[0]) == alias => {
            ident_name(&p[1])
        }
        Expr::Nested(inner) => return plain_column(inner, table, alias),
        _ => return None,
    };
    table.column(&name).map(|(ci, _)| ci)
}

/// The first of `names` that `e` refers to as a column, if any.
fn names_any(e: &Expr, names: &[&str]) -> Option<String> {
    struct Find<'a>(&'a [&'a str]);
    impl Visitor for Find<'_> {
        type Break = String;
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<String> {
            let name = match e {
                Expr::Identifier(i) => ident_name(i),
                Expr::CompoundIdentifier(p) => p.last().map(ident_name).unwrap_or_default(),
                _ => return ControlFlow::Continue(()),
            };
            if self.0.contains(&name.as_str()) {
                return ControlFlow::Break(name);
            }
            ControlFlow::Continue(())
        }
    }
    match e.visit(&mut Find(names)) {
        ControlFlow::Break(name) => Some(name),
        ControlFlow::Continue(()) => None,
    }
}

impl Returning {
    /// One output row: `written(ci)` is column `ci`'s value as written (`None`: NULL),
    /// `found` the row query's row (empty for an INSERT).
    pub fn row(
        &self,
        written: &dyn Fn(usize) -> Result<Option<Edn>, SqlError>,
        found: &[Edn],
    ) -> Result<Vec<Edn>, SqlError> {
        self.items
            .iter()
            .map(|item| {
                Ok(match *item {
                    Item::Written(ci) => written(ci)?.unwrap_or_else(crate::sqlfns::null_edn),
                    Item::Found(k) => found
                        .get(k)
                        .cloned()
                        .unwrap_or_else(crate::sqlfns::null_edn),
                })
            })
            .collect()
    }
}
