//! `INSERT ... ON CONFLICT`: what a row whose primary key exists becomes.
//!
//! - `DO NOTHING`: the row is left out (`InsertPlan::split_conflicts`).
//! - `DO UPDATE SET ... [WHERE ...]`: the row's existing entity is updated by an UPDATE of
//!   the table `WHERE key = <the row's key> [AND (condition)]`, planned and run as any
//!   UPDATE (row lock, READ COMMITTED's re-check), with `EXCLUDED.col` (the proposed row)
//!   as parameters after the statement's own. The new rows and the updates are one
//!   transaction (an implicit one outside a transaction block).
//!
//! The conflict target is the primary key, the only unique constraint a table has here.

use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_expressions_mut, Assignment, ConflictTarget, Expr, Insert, OnConflictAction, OnInsert,
    Value as SqlValue,
};
use vev::Edn;

use super::consts::Param;
use super::expr::ident_name;
use crate::catalog::Table;
use crate::error::SqlError;

/// What an INSERT does with a row whose primary key exists (or repeats an earlier row's).
#[derive(Clone, Debug)]
pub enum OnConflict {
    /// No ON CONFLICT: the statement fails with 23505.
    Refuse,
    /// `DO NOTHING`: the row is skipped.
    Skip,
    /// `DO UPDATE SET ... [WHERE ...]`.
    Update(Box<DoUpdate>),
}

/// `DO UPDATE`'s assignments and condition, as written.
#[derive(Clone, Debug)]
pub struct DoUpdate {
    pub assignments: Vec<Assignment>,
    pub selection: Option<Expr>,
}

/// The ON CONFLICT clause of `ins` into `table`.
pub fn on_conflict(ins: &Insert, table: &Table) -> Result<OnConflict, SqlError> {
    let Some(on) = &ins.on else {
        return Ok(OnConflict::Refuse);
    };
    let OnInsert::OnConflict(c) = on else {
        return Err(SqlError::unsupported("INSERT ... ON DUPLICATE KEY UPDATE"));
    };
    match &c.action {
        OnConflictAction::DoNothing => {
            if let Some(t) = &c.conflict_target {
                target_is_key(t, table)?;
            }
            Ok(OnConflict::Skip)
        }
        OnConflictAction::DoUpdate(u) => {
            let Some(t) = &c.conflict_target else {
                return Err(SqlError::new(
                    "42601",
                    "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                ));
            };
            target_is_key(t, table)?;
            if ins.table_alias.is_some() {
                return Err(SqlError::unsupported(
                    "INSERT INTO t AS alias ... DO UPDATE",
                ));
            }
            Ok(OnConflict::Update(Box::new(DoUpdate {
                assignments: u.assignments.clone(),
                selection: u.selection.clone(),
            })))
        }
    }
}

/// ON CONFLICT's target must name the primary key: anything else matches no constraint
/// (PostgreSQL's 42P10).
fn target_is_key(target: &ConflictTarget, table: &Table) -> Result<(), SqlError> {
    let ConflictTarget::Columns {
        columns,
        predicate: None,
    } = target
    else {
        return Err(SqlError::unsupported(format!("ON CONFLICT {target}")));
    };
    let named: Vec<Option<usize>> = columns
        .iter()
        .map(|c| table.column(&ident_name(c)).map(|(i, _)| i))
        .collect();
    let key: Vec<Option<usize>> = table.primary_key.iter().map(|&c| Some(c)).collect();
    if key.is_empty() || named != key {
        return Err(SqlError::new(
            "42P10",
            "there is no unique or exclusion constraint matching the ON CONFLICT specification",
        ));
    }
    Ok(())
}

/// 21000: a statement that would update one row twice (two rows with one key).
pub fn twice() -> SqlError {
    SqlError::new(
        "21000",
        "ON CONFLICT DO UPDATE command cannot affect row a second time",
    )
}

/// A row's value per table column (`None`: NULL).
pub type Row = Vec<Option<Edn>>;

/// The UPDATE that `DO UPDATE` makes of a proposed row whose key exists, as SQL text: the
/// same for every row of the statement, whose values it reads as parameters after the
/// statement's `given` ones, `EXCLUDED.col` being `$(given + 1 + col)` (`excluded`).
pub fn update_sql(table: &Table, on: &OnConflict, given: usize) -> Result<String, SqlError> {
    let OnConflict::Update(update) = on else {
        return Err(SqlError::internal("update_sql without DO UPDATE"));
    };
    let param = |ci: usize| format!("${}", given + 1 + ci);
    let mut unknown = None;
    let mut excluded = |e: &mut Expr| {
        if let Expr::CompoundIdentifier(parts) = e {
            if let [t, c] = parts.as_slice() {
                if ident_name(t) == "excluded" {
                    let name = ident_name(c);
                    match table.column(&name) {
                        Some((ci, _)) => {
                            *e = Expr::Value(SqlValue::Placeholder(param(ci)).into());
                        }
                        None => unknown = Some(name),
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    };
    let mut assignments = update.assignments.clone();
    let _ = visit_expressions_mut(&mut assignments, &mut excluded);
    let mut selection = update.selection.clone();
    let _ = visit_expressions_mut(&mut selection, &mut excluded);
    if let Some(name) = unknown {
        return Err(SqlError::new(
            "42703",
            format!("column excluded.{name} does not exist"),
        ));
    }
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut sql = format!(
        "UPDATE {} SET {} WHERE ",
        quote(&table.name),
        assignments
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let keys: Vec<String> = table
        .primary_key
        .iter()
        .map(|&c| format!("{} = {}", quote(&table.columns[c].name), param(c)))
        .collect();
    sql.push_str(&keys.join(" AND "));
    if let Some(w) = selection {
        sql.push_str(&format!(" AND ({w})"));
    }
    Ok(sql)
}

/// `update_sql`'s parameters for the proposed `row`: its value of each table column.
pub fn excluded(table: &Table, row: &[Option<Edn>]) -> Vec<Param> {
    table
        .columns
        .iter()
        .zip(row)
        .map(|(col, v)| match v {
            Some(v) => Param::Typed(v.clone(), col.ty),
            None => Param::Null,
        })
        .collect()
}
