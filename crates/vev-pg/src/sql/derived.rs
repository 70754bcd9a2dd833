//! `WITH name AS (SELECT ...)` (common table expressions) and subqueries in FROM
//! (`FROM (SELECT ...) AS s`): derived tables, materialized.
//!
//! Each derived table is planned as any query (a SELECT, a set operation, a SELECT without
//! FROM, or another WITH), in order: a CTE sees the CTEs before it, a subquery in FROM sees
//! every CTE. The statement's own query is then planned against the catalog with the derived
//! tables in it, as tables like any other: a CTE by its name (shadowing a table of that
//! name, as in PostgreSQL), a subquery by a key made of its alias and text, which `scope_of`
//! finds. When the statement runs, the session runs each derived table's plan on the
//! statement's database and asserts its rows, in a speculative transaction (`with`), as new
//! entities of attributes of their own (`:vev.derived.N/cK`, typed from the columns, a
//! NULL an absent value, plus a row marker), then runs the query on that database. So joins,
//! WHERE, GROUP BY, outer joins and every expression work on derived tables unchanged, at
//! the cost of writing their rows (proportional to their size). Not supported (`0A000`):
//! `WITH RECURSIVE`, `LATERAL`, a WITH around INSERT, UPDATE or DELETE, row locks, a
//! subquery in FROM inside a WHERE subquery, and reading the past (`vev.as_of`: the
//! speculative transaction applies to the current database).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sqlparser::ast::{Query, SetExpr, TableAlias, TableFactor};
use vev::{Edn, Keyword, TxMap, TxOp, TxValue};

use super::expr::ident_name;
use super::select::OutCol;
use super::Plan;
use crate::catalog::{Catalog, Column, Rows, Table};
use crate::error::SqlError;
use crate::types::SqlType;

/// A query with derived tables.
#[derive(Clone, Debug)]
pub struct WithPlan {
    /// The derived tables in the order they are made (each may read those before it).
    pub derived: Vec<Derived>,
    /// The query over them.
    pub body: Plan,
    pub params: Vec<Option<SqlType>>,
    /// The tables of the database the statement reads (not the derived ones).
    pub tables: Vec<String>,
}

/// One derived table: the table the query sees, and the plan of its rows.
#[derive(Clone, Debug)]
pub struct Derived {
    pub table: Arc<Table>,
    pub plan: Plan,
}

/// The catalog key of a subquery in FROM: its alias (with column names) and its text.
pub fn subquery_key(alias: &TableAlias, subquery: &Query) -> String {
    format!("\u{1}{alias}\u{1}{subquery}")
}

/// The subqueries in the FROM lists of `body`'s SELECTs (through set operations).
fn from_subqueries<'a>(body: &'a SetExpr, out: &mut Vec<(&'a TableFactor, &'a Query)>) {
    match body {
        SetExpr::Select(sel) => {
            for twj in &sel.from {
                let factors =
                    std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation));
                for t in factors {
                    if let TableFactor::Derived { subquery, .. } = t {
                        out.push((t, subquery));
                    }
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            from_subqueries(left, out);
            from_subqueries(right, out);
        }
        SetExpr::Query(q) => from_subqueries(&q.body, out),
        _ => {}
    }
}

/// The plan of a query with a WITH or subqueries in FROM; `None` for one with neither (or
/// whose subqueries `catalog` has already: the body of a `WithPlan`, planned here).
pub fn compile(q: &Query, catalog: &Catalog) -> Result<Option<WithPlan>, SqlError> {
    let mut subqueries = Vec::new();
    from_subqueries(&q.body, &mut subqueries);
    let mut pending = Vec::new();
    for (t, sub) in subqueries {
        let TableFactor::Derived { lateral, alias, .. } = t else {
            continue;
        };
        if *lateral {
            return Err(SqlError::unsupported("LATERAL"));
        }
        let Some(alias) = alias else {
            return Err(SqlError::syntax("subquery in FROM must have an alias"));
        };
        let key = subquery_key(alias, sub);
        if !catalog.tables.contains_key(&key) && !pending.iter().any(|(k, _, _)| *k == key) {
            pending.push((key, alias, sub));
        }
    }
    if q.with.is_none() && pending.is_empty() {
        return Ok(None);
    }
    if !q.locks.is_empty() {
        return Err(SqlError::unsupported(
            "FOR UPDATE or FOR SHARE with WITH or a subquery in FROM",
        ));
    }
    let mut cat = catalog.clone();
    let mut derived: Vec<Derived> = Vec::new();
    if let Some(w) = &q.with {
        if w.recursive {
            return Err(SqlError::unsupported("WITH RECURSIVE"));
        }
        for cte in &w.cte_tables {
            let name = ident_name(&cte.alias.name);
            if derived.iter().any(|d| d.table.name == name) {
                return Err(SqlError::new(
                    "42712",
                    format!("WITH query name \"{name}\" specified more than once"),
                ));
            }
            let plan = super::query(&cte.query, &cat)?;
            let table = table_of(&name, &name, &cte.alias, &plan)?;
            cat.tables.insert(name, table.clone());
            derived.push(Derived { table, plan });
        }
    }
    for (key, alias, sub) in pending {
        let plan = super::query(sub, &cat)?;
        let table = table_of(&key, &ident_name(&alias.name), alias, &plan)?;
        cat.tables.insert(key, table.clone());
        derived.push(Derived { table, plan });
    }
    let mut body = q.clone();
    body.with = None;
    let body = super::query(&body, &cat)?;
    let mut params = Vec::new();
    let mut tables = Vec::new();
    for p in derived.iter().map(|d| &d.plan).chain([&body]) {
        super::union::merge_params(&mut params, &p.params())?;
        for t in read_tables(p) {
            if !tables.contains(&t) {
                tables.push(t);
            }
        }
    }
    let made: Vec<&str> = derived.iter().map(|d| d.table.name.as_str()).collect();
    tables.retain(|t| !made.contains(&t.as_str()));
    Ok(Some(WithPlan {
        derived,
        body,
        params,
        tables,
    }))
}

impl WithPlan {
    /// Each derived table's plan, then the query's, one per line.
    pub fn explain(&self) -> String {
        let mut lines: Vec<String> = self
            .derived
            .iter()
            .map(|d| {
                format!(
                    "{} := {}",
                    shown(&d.table.name),
                    super::explain_plan(&d.plan)
                )
            })
            .collect();
        lines.push(super::explain_plan(&self.body));
        lines.join("\n")
    }
}

/// A derived table's name as a user wrote it (a subquery's alias).
pub fn shown(name: &str) -> &str {
    name.strip_prefix('\u{1}')
        .and_then(|rest| rest.split('\u{1}').next())
        .unwrap_or(name)
}

/// The tables a row-returning plan reads.
fn read_tables(p: &Plan) -> Vec<String> {
    match p {
        Plan::Select(s) => s.tables.clone(),
        Plan::Union(u) => u
            .tree
            .branches()
            .iter()
            .flat_map(|b| b.tables.clone())
            .collect(),
        Plan::With(w) => w.tables.clone(),
        Plan::Scalars(s) => {
            let mut t = read_tables(&s.body);
            t.extend(s.scalars.iter().flat_map(|(p, _)| read_tables(p)));
            t
        }
        _ => Vec::new(),
    }
}

/// Namespaces of derived tables' attributes, unique in the process (a plan's derived
/// tables are made in a database of their own each time it runs, but a derived table
/// inside another's plan must not reuse its names).
static NEXT_NAMESPACE: AtomicU64 = AtomicU64::new(0);

/// The table `name` (shown as `shown` in messages) with `plan`'s columns, renamed by the
/// alias's column list.
fn table_of(
    name: &str,
    shown: &str,
    alias: &TableAlias,
    plan: &Plan,
) -> Result<Arc<Table>, SqlError> {
    let columns = super::result_columns(plan).ok_or_else(|| {
        SqlError::unsupported(format!("\"{shown}\": a derived table of this statement"))
    })?;
    if alias.columns.len() > columns.len() {
        return Err(SqlError::new(
            "42P10",
            format!(
                "table \"{shown}\" has {} columns available but {} columns specified",
                columns.len(),
                alias.columns.len()
            ),
        ));
    }
    let ns = format!(
        "vev.derived.{}",
        NEXT_NAMESPACE.fetch_add(1, Ordering::Relaxed)
    );
    let columns = columns
        .iter()
        .enumerate()
        .map(|(i, c)| Column {
            name: alias
                .columns
                .get(i)
                .map_or_else(|| c.name.clone(), |a| ident_name(&a.name)),
            attr: Some(Keyword::new(&format!("{ns}/c{i}"))),
            ty: c.ty,
            not_null: false,
            many: false,
            unique: false,
            default: None,
        })
        .collect();
    Ok(Arc::new(Table {
        name: name.to_owned(),
        columns,
        rows: Rows::Attr(Keyword::new(&format!("{ns}/row"))),
        sql: true,
        primary_key: Vec::new(),
    }))
}

/// The schema transaction of a derived table's attributes.
pub fn schema_tx(table: &Table) -> String {
    let mut tx = String::from("[");
    for c in &table.columns {
        if let Some(attr) = &c.attr {
            tx.push_str(&format!(
                "{{:db/ident {attr} :db/valueType :db.type/{} :db/cardinality :db.cardinality/one}}\n",
                crate::catalog::value_type_name(c.ty.value_type())
            ));
        }
    }
    if let Rows::Attr(row) = &table.rows {
        tx.push_str(&format!(
            "{{:db/ident {row} :db/valueType :db.type/boolean :db/cardinality :db.cardinality/one}}"
        ));
    }
    tx.push(']');
    tx
}

/// The transaction data of a derived table's rows: an entity each, with its row marker
/// and its non-NULL values, converted to the columns' types.
pub fn rows_tx(table: &Table, rows: Vec<Vec<Edn>>) -> Vec<TxOp> {
    let Rows::Attr(row) = &table.rows else {
        return Vec::new();
    };
    let columns: Vec<OutCol> = table
        .columns
        .iter()
        .map(|c| OutCol {
            name: c.name.clone(),
            ty: c.ty,
        })
        .collect();
    super::union::conform_rows(rows, &columns)
        .into_iter()
        .map(|r| {
            let mut m = TxMap::new(None);
            m.attrs.push((row.clone(), TxValue::Edn(Edn::Bool(true))));
            for (c, v) in table.columns.iter().zip(r) {
                if let (Some(attr), false) = (&c.attr, crate::sqlfns::is_null_edn(&v)) {
                    m.attrs.push((attr.clone(), TxValue::Edn(v)));
                }
            }
            TxOp::Map(m)
        })
        .collect()
}
