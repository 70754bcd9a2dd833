//! INSERT, UPDATE, DELETE and COPY FROM as transaction data.
//!
//! - INSERT: each row is a new entity (a tempid) with a value per non-NULL column; a
//!   table's primary key is a `:db.unique/identity` attribute, so a guard call
//!   (`:vev.sql/absent`) inside the transaction refuses a key that exists already (an
//!   identity would otherwise upsert, which is not what INSERT means). A key deleted
//!   earlier in the same transaction is the one exception: the row's entity is reused
//!   (`reinsert_deleted`). `ON CONFLICT` is `upsert.rs`'s.
//! - UPDATE and DELETE first find their rows with a Datalog query (the WHERE compiled as for
//!   SELECT, the SET expressions as find elements computed by the `vev.sql/*` functions),
//!   then assert the new values (or retract for NULL) and retract the rows' entities.

use std::sync::Arc;

use sqlparser::ast::{
    AssignmentTarget, Expr, FromTable, ObjectName, SetExpr, TableObject, UpdateTableFromKind,
};
use vev::{Edn, EntityId, EntityRef, Keyword, TxMap, TxOp, TxValue};

use super::consts::{self, Ctx};
use super::expr::{ident_name, Builder};
use super::returning::{self, Returning};
use super::select::{inputs, scope_of, table_name, Input};
use super::upsert::{OnConflict, Row};
use crate::catalog::{Catalog, Column, ColumnDefault, Rows, Table};
use crate::error::SqlError;
use crate::types::SqlType;

/// The name of the transaction function that guards INSERT's primary keys.
pub const ABSENT_FN: &str = "vev.sql/absent";

#[derive(Clone, Debug)]
pub struct InsertPlan {
    pub table: Arc<Table>,
    /// The target columns (indexes into the table's columns).
    pub columns: Vec<usize>,
    /// The VALUES rows: one expression per target column.
    pub rows: Vec<Vec<Expr>>,
    pub params: Vec<Option<SqlType>>,
    /// What a row whose primary key exists becomes (`upsert.rs`).
    pub on_conflict: OnConflict,
    pub returning: Option<Returning>,
    /// `INSERT ... SELECT`: the query whose rows are inserted (`rows` is then empty).
    pub select: Option<Arc<super::select::SelectPlan>>,
}

/// A statement that finds rows with a query, then writes to them.
#[derive(Clone, Debug)]
pub struct RowsPlan {
    pub table: Arc<Table>,
    pub datalog: String,
    pub query: Arc<vev::Query>,
    pub inputs: Vec<Input>,
    pub null_rejecting: Vec<usize>,
    pub params: Vec<Option<SqlType>>,
    /// UPDATE: the columns each further find element assigns. Empty for DELETE.
    pub sets: Vec<usize>,
    /// How long its query took lately.
    pub cost: Arc<super::QueryCost>,
    /// RETURNING's columns (its further find elements come after the assigned values).
    pub returning: Option<Returning>,
    /// The tables the query reads: the target, then those of UPDATE's FROM or DELETE's
    /// USING.
    pub reads: Vec<String>,
    /// Whether a target row may be found more than once (joined to several rows of FROM
    /// or USING): the session then keeps the first row found for each, as PostgreSQL
    /// updates a row once with one of its join rows.
    pub joined: bool,
}

pub fn insert(ins: &sqlparser::ast::Insert, catalog: &Catalog) -> Result<InsertPlan, SqlError> {
    let TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::unsupported("INSERT into a table function"));
    };
    let table = catalog.table(&table_name(name)?)?.clone();
    let on_conflict = super::upsert::on_conflict(ins, &table)?;
    let returning = match &ins.returning {
        None => None,
        Some(_) if matches!(on_conflict, OnConflict::Update(_)) => {
            return Err(SqlError::unsupported(
                "INSERT ... ON CONFLICT DO UPDATE ... RETURNING",
            ))
        }
        Some(items) => Some(returning::plan(
            items,
            &table,
            &table.name,
            returning::Kind::Insert,
            None,
        )?),
    };
    let columns = target_columns(ins, &table)?;
    if let Some(c) = columns.iter().find(|c| table.columns[**c].attr.is_none()) {
        return Err(SqlError::new(
            "428C9",
            format!(
                "cannot insert a non-DEFAULT value into column \"{}\"",
                table.columns[*c].name
            ),
        ));
    }
    let Some(source) = &ins.source else {
        // `DEFAULT VALUES`: one row of defaults.
        if !ins.columns.is_empty() {
            return Err(SqlError::syntax("DEFAULT VALUES with a column list"));
        }
        return Ok(InsertPlan {
            table,
            columns: Vec::new(),
            rows: vec![Vec::new()],
            params: Vec::new(),
            on_conflict,
            returning,
            select: None,
        });
    };
    let SetExpr::Values(values) = &*source.body else {
        let select = super::select::compile(source, catalog)?
            .ok_or_else(|| SqlError::unsupported("INSERT ... SELECT without FROM"))?;
        let mut columns = columns;
        if ins.columns.is_empty() {
            columns.truncate(select.columns.len().max(1));
        }
        if select.columns.len() != columns.len() {
            return Err(SqlError::syntax(format!(
                "INSERT has {} target columns but its SELECT {} expressions",
                columns.len(),
                select.columns.len()
            )));
        }
        return Ok(InsertPlan {
            table,
            columns,
            rows: Vec::new(),
            params: select.params.clone(),
            on_conflict,
            returning,
            select: Some(Arc::new(select)),
        });
    };
    let mut columns = columns;
    if ins.columns.is_empty() {
        // Without a column list, N values fill the first N columns (PostgreSQL's rule).
        let given = values.rows.first().map_or(0, |r| r.content.len());
        columns.truncate(given.max(1));
    }
    let mut params = Vec::new();
    for row in values.rows.iter().map(|r| &r.content) {
        if row.len() != columns.len() {
            return Err(SqlError::syntax(format!(
                "INSERT has {} target columns but {} expressions",
                columns.len(),
                row.len()
            )));
        }
        for (e, c) in row.iter().zip(&columns) {
            note_param_type(e, table.columns[*c].ty, &mut params);
        }
    }
    Ok(InsertPlan {
        table,
        columns,
        rows: values.rows.iter().map(|r| r.content.clone()).collect(),
        params,
        on_conflict,
        returning,
        select: None,
    })
}

/// Whether a value (conformed to a column of type `ty`) is of the column's value type.
fn fits(v: &Edn, ty: SqlType) -> bool {
    use vev::ValueType as T;
    matches!(
        (ty.value_type(), v),
        (T::Long | T::Ref, Edn::Integer(_))
            | (T::Double | T::Float, Edn::Float(_))
            | (T::BigDec, Edn::BigDec(_))
            | (T::BigInt, Edn::BigInt(_) | Edn::Integer(_))
            | (T::String, Edn::String(_))
            | (T::Boolean, Edn::Bool(_))
            | (T::Instant, Edn::Inst(_))
            | (T::Uuid, Edn::Uuid(_))
            | (T::Keyword, Edn::Keyword(_))
            | (T::Bytes | T::Uri | T::Symbol | T::Tuple, _)
    )
}

/// Whether a VALUES item is the keyword `DEFAULT`.
fn is_default(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// Column `ci`'s DEFAULT for a new row (`None`: NULL, also for a column without one):
/// `next` gives a serial column's next number.
pub fn default_value(
    table: &Table,
    ci: usize,
    ctx: &Ctx,
    next: &dyn Fn(&Column) -> Result<i64, SqlError>,
) -> Result<Option<Edn>, SqlError> {
    let col = &table.columns[ci];
    match &col.default {
        None => Ok(None),
        Some(ColumnDefault::Expr(e)) => conform(consts::eval(e, Some(col.ty), ctx)?.0, col),
        Some(ColumnDefault::Serial(_)) => Ok(Some(Edn::Integer(next(col)?))),
    }
}

/// An INSERT's target columns: its column list, or every column with an attribute.
fn target_columns(ins: &sqlparser::ast::Insert, table: &Table) -> Result<Vec<usize>, SqlError> {
    if ins.columns.is_empty() {
        return Ok((0..table.columns.len())
            .filter(|c| table.columns[*c].attr.is_some())
            .collect());
    }
    ins.columns
        .iter()
        .map(|c| {
            let n = object_column(c);
            table.column(&n).map(|(i, _)| i).ok_or_else(|| {
                SqlError::new(
                    "42703",
                    format!(
                        "column \"{n}\" of relation \"{}\" does not exist",
                        table.name
                    ),
                )
            })
        })
        .collect()
}

/// A column name of an INSERT's column list.
fn object_column(n: &ObjectName) -> String {
    n.0.last()
        .and_then(|p| p.as_ident())
        .map(ident_name)
        .unwrap_or_default()
}

/// `$n` used as a value of type `ty` (directly or under a sign) takes that type.
fn note_param_type(e: &Expr, ty: SqlType, params: &mut Vec<Option<SqlType>>) {
    if let Expr::Value(v) = e {
        if let sqlparser::ast::Value::Placeholder(p) = &v.value {
            if let Ok(n) = super::expr::placeholder(p) {
                if params.len() < n {
                    params.resize(n, None);
                }
                params[n - 1].get_or_insert(ty);
            }
        }
    }
}

impl InsertPlan {
    /// RETURNING's rows for the rows inserted (`values`), none without RETURNING.
    pub fn returned(&self, rows: &[Vec<Option<Edn>>]) -> Result<Vec<Vec<Edn>>, SqlError> {
        let Some(r) = &self.returning else {
            return Ok(Vec::new());
        };
        rows.iter()
            .map(|values| r.row(&|ci| Ok(values.get(ci).cloned().flatten()), &[]))
            .collect()
    }

    /// Each VALUES row's value per table column (`None`: NULL or not given), with `ctx`
    /// for parameters and the time.
    /// The columns with a DEFAULT that the statement leaves out.
    fn left_out(&self) -> Vec<usize> {
        (0..self.table.columns.len())
            .filter(|c| self.table.columns[*c].default.is_some() && !self.columns.contains(c))
            .collect()
    }

    /// The rows' values, by table column; `default(ci)` gives column `ci`'s DEFAULT, for
    /// the columns the statement leaves out and the values written `DEFAULT`.
    pub fn values(
        &self,
        ctx: &Ctx,
        default: &dyn Fn(usize) -> Result<Option<Edn>, SqlError>,
    ) -> Result<Vec<Vec<Option<Edn>>>, SqlError> {
        let left_out = self.left_out();
        let mut rows = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            let mut values: Vec<Option<Edn>> = vec![None; self.table.columns.len()];
            for (e, c) in row.iter().zip(&self.columns) {
                if is_default(e) {
                    values[*c] = default(*c)?;
                    continue;
                }
                let col = &self.table.columns[*c];
                let (v, _) = consts::eval(e, Some(col.ty), ctx)?;
                values[*c] = conform(v, col)?;
            }
            for &c in &left_out {
                values[c] = default(c)?;
            }
            rows.push(values);
        }
        Ok(rows)
    }

    /// `INSERT ... SELECT`: the query's rows as the new rows' values, by table column (the
    /// SELECT's columns in the target columns' order, conformed to them; `default` for the
    /// others, as in `values`).
    pub fn selected(
        &self,
        found: Vec<Vec<Edn>>,
        default: &dyn Fn(usize) -> Result<Option<Edn>, SqlError>,
    ) -> Result<Vec<Vec<Option<Edn>>>, SqlError> {
        let left_out = self.left_out();
        let mut rows = Vec::with_capacity(found.len());
        for row in found {
            let mut values: Vec<Option<Edn>> = vec![None; self.table.columns.len()];
            for (v, c) in row.into_iter().zip(&self.columns) {
                let col = &self.table.columns[*c];
                let v = conform(v, col)?;
                if let Some(v) = &v {
                    if !fits(v, col.ty) {
                        return Err(SqlError::new(
                            "42804",
                            format!(
                                "column \"{}\" is of type {} but the SELECT gives {v}",
                                col.name,
                                col.ty.name()
                            ),
                        ));
                    }
                }
                values[*c] = v;
            }
            for &c in &left_out {
                values[c] = default(c)?;
            }
            rows.push(values);
        }
        Ok(rows)
    }

    /// The transaction data of new rows: a map each under a tempid (`next_row` numbers
    /// them, unique within the session's transaction), and the guard of their keys.
    pub fn ops(
        &self,
        rows: &[Vec<Option<Edn>>],
        next_row: &mut u64,
    ) -> Result<Vec<TxOp>, SqlError> {
        rows_ops(&self.table, rows.to_vec(), next_row)
    }

    /// `rows` split into those whose primary key neither `db` (the database the statement
    /// sees) nor an earlier row holds, and the others, each in order. The guard still
    /// covers the first, so a key another transaction commits meanwhile is refused at this
    /// one's commit (23505).
    pub fn split_conflicts(&self, db: &vev::Db, rows: Vec<Row>) -> Split {
        let mut earlier: Vec<Vec<Edn>> = vec![Vec::new(); self.table.primary_key.len()];
        let mut split = Split::default();
        for values in rows {
            let repeats = self.repeats(&values, &earlier);
            split.repeated |= repeats;
            let exists = repeats || self.held(db, &values);
            collect_keys(&self.table, &values, &mut earlier);
            if exists {
                split.old.push(values);
            } else {
                split.new.push(values);
            }
        }
        split
    }

    /// Whether a row's primary key is among `earlier` (the statement's rows before it).
    fn repeats(&self, values: &[Option<Edn>], earlier: &[Vec<Edn>]) -> bool {
        self.table
            .primary_key
            .iter()
            .zip(earlier)
            .any(|(c, seen)| values[*c].as_ref().is_some_and(|v| seen.contains(v)))
    }

    /// Whether a row's primary key is in `db`.
    fn held(&self, db: &vev::Db, values: &[Option<Edn>]) -> bool {
        self.table.primary_key.iter().any(|c| {
            let (Some(v), Some(attr)) = (&values[*c], &self.table.columns[*c].attr) else {
                return false;
            };
            let Some(a) = db.schema().attribute_by_ident(attr) else {
                return false;
            };
            vev::coerce_value(db, a, v).is_some_and(|value| key_held(db, a.id, value))
        })
    }
}

/// An INSERT's rows by whether their primary key exists.
#[derive(Debug, Default)]
pub struct Split {
    /// Rows whose key neither the database nor an earlier row holds.
    pub new: Vec<Row>,
    /// The others.
    pub old: Vec<Row>,
    /// Whether some row's key repeats an earlier row's.
    pub repeated: bool,
}

/// Whether some entity holds `value` of the unique attribute `a` in `db` (a storage failure
/// counts as held: the key is refused rather than written twice).
fn key_held(db: &vev::Db, a: EntityId, value: vev::Value) -> bool {
    db.entity_with_value(a, &value)
        .map_or(true, |e| e.is_some())
}

/// A value made to fit its column: `None` for NULL, an error for NULL in a NOT NULL column
/// is raised by `row_map`; integers are range-checked by the parse already.
pub fn conform(v: Edn, col: &Column) -> Result<Option<Edn>, SqlError> {
    if crate::sqlfns::is_null_edn(&v) {
        return Ok(None);
    }
    match (&v, col.ty) {
        (Edn::String(s), SqlType::Char(_) | SqlType::Varchar(Some(_))) => {
            Ok(Some(col.ty.parse_text(s)?))
        }
        (Edn::Integer(n), t) if t.is_integer() => Ok(Some(t.parse_text(&n.to_string())?)),
        (Edn::Integer(n), SqlType::Float4 | SqlType::Float8) => Ok(Some(Edn::Float(*n as f64))),
        (Edn::Integer(n), SqlType::Numeric) => {
            Ok(Some(SqlType::Numeric.parse_text(&n.to_string())?))
        }
        (Edn::Float(f), SqlType::Numeric) => Ok(Some(SqlType::Numeric.parse_text(&f.to_string())?)),
        (Edn::Float(f), SqlType::Float4 | SqlType::Float8) => {
            Ok(Some(Edn::Float(crate::types::positive_zero(*f))))
        }
        // One scale per value, as every stored numeric (`numeric::normalize`).
        (Edn::BigDec(d), SqlType::Numeric) => Ok(Some(Edn::BigDec(Box::new(
            crate::numeric::normalize((**d).clone()),
        )))),
        (Edn::BigDec(d), t @ (SqlType::Float4 | SqlType::Float8)) => {
            Ok(Some(t.parse_text(&d.to_string())?))
        }
        // PostgreSQL rounds a double to an integer half to even (`rint`), a numeric half
        // away from zero.
        (Edn::Float(f), t) if t.is_integer() => {
            Ok(Some(t.parse_text(&format!("{}", f.round_ties_even()))?))
        }
        (Edn::BigDec(d), t) if t.is_integer() => {
            let text = d.to_string();
            let n = round_numeric(&text).ok_or_else(|| SqlError::invalid_text(t, &text))?;
            Ok(Some(t.parse_text(&n.to_string())?))
        }
        _ => Ok(Some(v)),
    }
}

/// A numeric's text rounded to an integer half away from zero (PostgreSQL's numeric to
/// integer), on the digits so that no precision is lost.
fn round_numeric(text: &str) -> Option<i128> {
    if text.contains(['e', 'E']) {
        // An exponent form: through a double.
        return text.parse::<f64>().ok().map(|f| f.round() as i128);
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let mut n: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    if frac.starts_with(['5', '6', '7', '8', '9']) {
        n += 1;
    }
    Some(if negative { -n } else { n })
}

/// One new row: a map under a fresh tempid.
pub fn row_map(
    table: &Table,
    values: Vec<Option<Edn>>,
    next_row: &mut u64,
) -> Result<TxMap, SqlError> {
    *next_row += 1;
    let mut m = TxMap::new(Some(EntityRef::tempid(&format!("vev.sql.row-{next_row}"))));
    for (c, v) in table.columns.iter().zip(values) {
        let Some(attr) = &c.attr else { continue };
        match v {
            Some(v) => m.attrs.push((attr.clone(), TxValue::Edn(v))),
            None if c.not_null => return Err(SqlError::not_null(&table.name, &c.name)),
            None => {}
        }
    }
    if let Rows::Attr(row) = &table.rows {
        if table.is_marker(row) {
            m.attrs.push((row.clone(), TxValue::Edn(Edn::Bool(true))));
        }
    }
    if m.attrs.is_empty() {
        return Err(SqlError::unsupported(format!(
            "a row of \"{}\" with every column NULL",
            table.name
        )));
    }
    Ok(m)
}

/// The transaction data of many new rows, moved out of `rows`: a map each under a tempid
/// (`next_row` numbers them), then the guard of their keys. From `PARALLEL_ROWS_MIN` rows
/// (a large COPY) the two halves are made on two threads, numbered as one pass would.
pub fn rows_ops(
    table: &Table,
    mut rows: Vec<Vec<Option<Edn>>>,
    next_row: &mut u64,
) -> Result<Vec<TxOp>, SqlError> {
    // Each row's text values go as soon as its operation is made: a large COPY would
    // otherwise hold them all until the end of the transaction.
    let run = |rows: Vec<Vec<Option<Edn>>>, mut next: u64| {
        let mut ops = Vec::with_capacity(rows.len() + 1);
        let mut keys: Vec<Vec<Edn>> = vec![Vec::new(); table.primary_key.len()];
        for values in rows {
            collect_keys(table, &values, &mut keys);
            ops.push(TxOp::Map(row_map(table, values, &mut next)?));
        }
        Ok::<_, SqlError>((ops, keys))
    };
    let start = *next_row;
    *next_row += rows.len() as u64;
    let (mut ops, keys) = if rows.len() >= PARALLEL_ROWS_MIN {
        let second = rows.split_off(rows.len() / 2);
        let second_start = start + rows.len() as u64;
        let (first, second) = vev::par::join(|| run(rows, start), || run(second, second_start));
        // The first half's error is the one a single pass would have met first.
        let (mut ops, mut keys) = first?;
        let (mut more_ops, more_keys) = second?;
        ops.append(&mut more_ops);
        for (k, mut more) in keys.iter_mut().zip(more_keys) {
            k.append(&mut more);
        }
        (ops, keys)
    } else {
        run(rows, start)?
    };
    ops.extend(key_guards(table, keys));
    Ok(ops)
}

/// Rows from which `rows_ops` makes its operations on two threads.
const PARALLEL_ROWS_MIN: usize = 4096;

pub fn collect_keys(table: &Table, values: &[Option<Edn>], keys: &mut [Vec<Edn>]) {
    for (k, c) in table.primary_key.iter().enumerate() {
        if let Some(v) = &values[*c] {
            keys[k].push(v.clone());
        }
    }
}

/// The guard calls refusing primary-key values that exist (or repeat) when the
/// transaction applies.
pub fn key_guards(table: &Table, keys: Vec<Vec<Edn>>) -> Vec<TxOp> {
    table
        .primary_key
        .iter()
        .zip(keys)
        .filter(|(_, vals)| !vals.is_empty())
        .filter_map(|(c, vals)| {
            let attr = table.columns[*c].attr.clone()?;
            Some(TxOp::Call {
                name: Keyword::new(ABSENT_FN),
                args: vec![Edn::Keyword(attr), Edn::Vector(vals)],
            })
        })
        .collect()
}

/// The transaction function behind `ABSENT_FN`: fails with SQLSTATE 23505 when a value of
/// the unique attribute exists in `db` or repeats among `values`.
pub fn absent_fn(db: &vev::Db, args: &[Edn]) -> Result<Vec<TxOp>, String> {
    let [Edn::Keyword(attr), Edn::Vector(values)] = args else {
        return Err("expects an attribute and a vector of values".into());
    };
    let a = db
        .schema()
        .attribute_by_ident(attr)
        .ok_or_else(|| format!("unknown attribute {attr}"))?
        .clone();
    let mut seen = std::collections::HashSet::new();
    for v in values {
        let value = vev::coerce_value(db, &a, v)
            .ok_or_else(|| format!("22P02: invalid value {v} for column {attr}"))?;
        let dup = !seen.insert(value.clone()) || key_held(db, a.id, value);
        if dup {
            return Err(format!(
                "23505: duplicate key value violates unique constraint \"{}_pkey\": Key ({})=({}) already exists.",
                attr.namespace().unwrap_or_default(),
                attr.name(),
                crate::types::edn_to_text(v, SqlType::Text).unwrap_or_default()
            ));
        }
    }
    Ok(Vec::new())
}

/// A row deleted and then inserted again, by its primary key, in one transaction
/// (`DELETE ... WHERE id = 1; INSERT ... (1, ...)`). In one Vev transaction the new row
/// cannot be a new entity: its key still belongs to the deleted row in db-before (the
/// guard would refuse it, an identity would upsert to it). So the insert reuses that
/// entity: the pending `retractEntity` of it gives way to retracting the old row's
/// columns the new row does not set, the new row's map names the entity, and the guard
/// drops the key. `db` is the committed database, `pending` the transaction's writes,
/// `new` a statement's. Returns whether `pending` changed.
pub fn reinsert_deleted(db: &vev::Db, pending: &mut Vec<TxOp>, new: &mut Vec<TxOp>) -> bool {
    let guard = Keyword::new(ABSENT_FN);
    if !new
        .iter()
        .any(|op| matches!(op, TxOp::Call { name, .. } if *name == guard))
    {
        return false;
    }
    let deleted: std::collections::HashSet<EntityId> = pending
        .iter()
        .filter_map(|op| match op {
            TxOp::RetractEntity {
                e: EntityRef::Id(e),
            } => Some(*e),
            _ => None,
        })
        .collect();
    if deleted.is_empty() {
        return false;
    }
    let mut reused: Vec<(EntityId, Keyword, Edn)> = Vec::new();
    for op in new.iter_mut() {
        let TxOp::Call { name, args } = op else {
            continue;
        };
        let [Edn::Keyword(attr), Edn::Vector(values)] = args.as_mut_slice() else {
            continue;
        };
        let Some(a) = db
            .schema()
            .attribute_by_ident(attr)
            .filter(|_| *name == guard)
        else {
            continue;
        };
        values.retain(|v| {
            let Some(value) = vev::coerce_value(db, a, v) else {
                return true;
            };
            let key = [vev::Component::Entity(a.id), vev::Component::Value(value)];
            match db.datoms(vev::IndexOrder::Avet, &key).next() {
                Some(Ok(d)) if deleted.contains(&d.e) => {
                    reused.push((d.e, attr.clone(), v.clone()));
                    false
                }
                _ => true,
            }
        });
    }
    if reused.is_empty() {
        return false;
    }
    let by_key: std::collections::HashMap<(Keyword, Edn), EntityId> = reused
        .into_iter()
        .map(|(e, attr, v)| ((attr, v), e))
        .collect();
    let entities: std::collections::HashSet<EntityId> = by_key.values().copied().collect();
    pending.retain(
        |op| !matches!(op, TxOp::RetractEntity { e: EntityRef::Id(x) } if entities.contains(x)),
    );
    let mut retracts = Vec::new();
    for op in new.iter_mut() {
        let TxOp::Map(m) = op else { continue };
        let Some(e) = m.attrs.iter().find_map(|(a, v)| match v {
            TxValue::Edn(v) => by_key.get(&(a.clone(), v.clone())).copied(),
            _ => None,
        }) else {
            continue;
        };
        m.id = Some(EntityRef::Id(e));
        let mut old: Vec<Keyword> = db
            .datoms(vev::IndexOrder::Eavt, &[vev::Component::Entity(e)])
            .filter_map(|d| db.ident(d.ok()?.a).cloned())
            .filter(|a| !m.attrs.iter().any(|(set, _)| set == a))
            .collect();
        old.dedup();
        retracts.extend(old.into_iter().map(|a| TxOp::Retract {
            e: EntityRef::Id(e),
            a: vev::AttrRef::Ident(a),
            v: None,
        }));
    }
    new.splice(0..0, retracts);
    true
}

/// UPDATE: the rows and the new values, found by one query.
pub fn update(u: &sqlparser::ast::Update, catalog: &Catalog) -> Result<RowsPlan, SqlError> {
    if !u.table.joins.is_empty() {
        return Err(SqlError::unsupported("UPDATE of a join"));
    }
    let scope = scope_of(&u.table.relation, catalog, 0)?;
    let (table, alias) = (scope.table.clone(), scope.alias.clone());
    let from = match &u.from {
        None => &[][..],
        Some(UpdateTableFromKind::BeforeSet(f) | UpdateTableFromKind::AfterSet(f)) => &f[..],
    };
    if !from.is_empty() && u.returning.is_some() {
        return Err(returning_joined("UPDATE ... FROM"));
    }
    let mut b = Builder::new(with_joined(scope, from, catalog)?);
    if let Some(w) = &u.selection {
        super::subquery::condition(&mut b, w, catalog)?;
    }
    let mut finds = vec!["?t0".to_owned()];
    let mut sets = Vec::new();
    for a in &u.assignments {
        let AssignmentTarget::ColumnName(n) = &a.target else {
            return Err(SqlError::unsupported("assigning a tuple of columns"));
        };
        let name = object_column(n);
        let (ci, col) = table.column(&name).ok_or_else(|| {
            SqlError::new(
                "42703",
                format!(
                    "column \"{name}\" of relation \"{}\" does not exist",
                    table.name
                ),
            )
        })?;
        if col.attr.is_none() {
            return Err(SqlError::new(
                "428C9",
                format!("column \"{name}\" can only be updated to DEFAULT"),
            ));
        }
        // `SET c = DEFAULT`: the column's constant DEFAULT (NULL without one), as the
        // expression it is; a sequence's next number per row is not done.
        let null = Expr::Value(sqlparser::ast::Value::Null.into());
        let value = match (is_default(&a.value), &col.default) {
            (false, _) => &a.value,
            (true, None) => &null,
            (true, Some(ColumnDefault::Expr(e))) => &**e,
            (true, Some(ColumnDefault::Serial(_))) => {
                return Err(SqlError::unsupported(format!(
                    "SET {name} = DEFAULT for a column with a sequence"
                )))
            }
        };
        let t = b.expr(value, Some(col.ty))?;
        let t = b.as_var(t);
        finds.push(t.text);
        sets.push(ci);
    }
    let returning = match &u.returning {
        None => None,
        Some(items) => Some(returning::plan(
            items,
            &table,
            &alias,
            returning::Kind::Update(&sets),
            Some(returning::Query {
                builder: &mut b,
                finds: &mut finds,
            }),
        )?),
    };
    rows_plan(b, table, finds, sets, returning)
}

/// The scopes of an UPDATE or DELETE: its target (`?t0`), then each table of UPDATE's FROM
/// or DELETE's USING, whose rows the WHERE condition joins to the target's. A name given
/// twice is `42712`, as in PostgreSQL.
fn with_joined(
    target: super::expr::Scope,
    joined: &[sqlparser::ast::TableWithJoins],
    catalog: &Catalog,
) -> Result<Vec<super::expr::Scope>, SqlError> {
    let mut scopes = vec![target];
    for twj in joined {
        if !twj.joins.is_empty() {
            return Err(SqlError::unsupported(
                "JOIN in UPDATE ... FROM or DELETE ... USING (list the tables and join them \
                 in WHERE)",
            ));
        }
        let s = scope_of(&twj.relation, catalog, scopes.len())?;
        if scopes.iter().any(|o| o.alias == s.alias) {
            return Err(SqlError::new(
                "42712",
                format!("table name \"{}\" specified more than once", s.alias),
            ));
        }
        scopes.push(s);
    }
    Ok(scopes)
}

/// RETURNING after FROM or USING: PostgreSQL's sees the joined tables' columns (and finds
/// a name they share with the target ambiguous), Vev's only the target's, so it is refused
/// rather than answered differently.
fn returning_joined(what: &str) -> SqlError {
    SqlError::unsupported(format!("RETURNING with {what}"))
}

/// DELETE: the rows, found by one query.
pub fn delete(d: &sqlparser::ast::Delete, catalog: &Catalog) -> Result<RowsPlan, SqlError> {
    let from = match &d.from {
        FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
    };
    let [twj] = from.as_slice() else {
        return Err(SqlError::unsupported("DELETE from several tables"));
    };
    if !twj.joins.is_empty() {
        return Err(SqlError::unsupported("DELETE of a join"));
    }
    let scope = scope_of(&twj.relation, catalog, 0)?;
    let (table, alias) = (scope.table.clone(), scope.alias.clone());
    let using = d.using.as_deref().unwrap_or(&[]);
    if !using.is_empty() && d.returning.is_some() {
        return Err(returning_joined("DELETE ... USING"));
    }
    let mut b = Builder::new(with_joined(scope, using, catalog)?);
    if let Some(w) = &d.selection {
        super::subquery::condition(&mut b, w, catalog)?;
    }
    let mut finds = vec!["?t0".to_owned()];
    let returning = match &d.returning {
        None => None,
        Some(items) => Some(returning::plan(
            items,
            &table,
            &alias,
            returning::Kind::Delete,
            Some(returning::Query {
                builder: &mut b,
                finds: &mut finds,
            }),
        )?),
    };
    rows_plan(b, table, finds, Vec::new(), returning)
}

fn rows_plan(
    mut b: Builder,
    table: Arc<Table>,
    finds: Vec<String>,
    sets: Vec<usize>,
    returning: Option<Returning>,
) -> Result<RowsPlan, SqlError> {
    // The joined tables' rows, where no condition's pattern finds them already.
    for si in 1..b.scopes.len() {
        super::select::find_rows(&mut b, si);
    }
    if !b.clauses.iter().any(|c| c.starts_with("[?t0 :")) {
        b.clauses.insert(
            0,
            match &table.rows {
                Rows::Attr(a) => format!("[?t0 {a}]"),
                Rows::AnyOf(attrs) => {
                    let alts: Vec<String> = attrs.iter().map(|a| format!("[?t0 {a}]")).collect();
                    format!("(or-join [?t0] {})", alts.join(" "))
                }
            },
        );
    }
    let ins: Vec<String> = inputs(&b)
        .iter()
        .map(|i| match i {
            Input::Param(n) => format!("?p{n}"),
            Input::Now => "?now".into(),
        })
        .collect();
    let datalog = format!(
        "[:find {} :in $ {} :where {}]",
        finds.join(" "),
        ins.join(" "),
        b.clauses.join(" ")
    );
    let query = vev::Query::parse(&datalog).map_err(|e| {
        SqlError::internal(format!(
            "the translation is not valid Datalog ({e}): {datalog}"
        ))
    })?;
    Ok(RowsPlan {
        table,
        datalog,
        query: Arc::new(query),
        inputs: inputs(&b),
        null_rejecting: b.null_rejecting.iter().copied().collect(),
        params: b.params.clone(),
        sets,
        cost: Arc::default(),
        returning,
        reads: b.scopes.iter().map(|s| s.table.name.clone()).collect(),
        joined: b.scopes.len() > 1,
    })
}

impl RowsPlan {
    /// RETURNING's rows for the rows the query found (none without RETURNING).
    pub fn returned(&self, rows: &[Vec<Edn>]) -> Result<Vec<Vec<Edn>>, SqlError> {
        let Some(r) = &self.returning else {
            return Ok(Vec::new());
        };
        rows.iter()
            .map(|row| {
                let written = |ci: usize| {
                    let j = self.sets.iter().position(|&c| c == ci);
                    let v = j.and_then(|j| row.get(1 + j)).cloned();
                    let v =
                        v.ok_or_else(|| SqlError::internal("a RETURNING column not assigned"))?;
                    conform(v, &self.table.columns[ci])
                };
                r.row(&written, row)
            })
            .collect()
    }

    /// The transaction data for the rows the query found (`rows`: the entity, then each
    /// assigned value). `entity_ref` names an entity in the session's transaction (a row
    /// inserted earlier in it is still a tempid there).
    pub fn tx(
        &self,
        rows: &[Vec<Edn>],
        entity_ref: &dyn Fn(EntityId) -> EntityRef,
    ) -> Result<Vec<TxOp>, SqlError> {
        let mut ops = Vec::new();
        for row in rows {
            let Some(Edn::Integer(e)) = row.first() else {
                continue;
            };
            let e = entity_ref(*e as EntityId);
            if self.sets.is_empty() {
                ops.push(TxOp::RetractEntity { e });
                continue;
            }
            for (ci, v) in self.sets.iter().zip(&row[1..]) {
                let col = &self.table.columns[*ci];
                let attr = col.attr.clone().expect("assigned columns have attributes");
                match conform(v.clone(), col)? {
                    Some(v) => ops.push(TxOp::Add {
                        e: e.clone(),
                        a: vev::AttrRef::Ident(attr),
                        v: TxValue::Edn(v),
                    }),
                    None if col.not_null => {
                        return Err(SqlError::not_null(&self.table.name, &col.name))
                    }
                    None => ops.push(TxOp::Retract {
                        e: e.clone(),
                        a: vev::AttrRef::Ident(attr),
                        v: None,
                    }),
                }
            }
        }
        Ok(ops)
    }
}

/// COPY table [(columns)] FROM STDIN in text format.
#[derive(Clone, Debug)]
pub struct CopyPlan {
    pub table: Arc<Table>,
    pub columns: Vec<usize>,
}

pub fn copy_from(
    source: &sqlparser::ast::CopySource,
    catalog: &Catalog,
) -> Result<CopyPlan, SqlError> {
    let sqlparser::ast::CopySource::Table {
        table_name: name,
        columns,
    } = source
    else {
        return Err(SqlError::unsupported("COPY (query)"));
    };
    let table = catalog.table(&table_name(name)?)?.clone();
    let cols: Vec<usize> = if columns.is_empty() {
        (0..table.columns.len())
            .filter(|c| table.columns[*c].attr.is_some())
            .collect()
    } else {
        columns
            .iter()
            .map(|c| {
                let n = ident_name(c);
                table
                    .column(&n)
                    .map(|(i, _)| i)
                    .ok_or_else(|| SqlError::undefined_column(&n))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(CopyPlan {
        table,
        columns: cols,
    })
}

impl CopyPlan {
    /// One line of COPY's text format (tab-separated, `\N` for NULL, backslash escapes) as
    /// a row's values. `None` for the end-of-data marker `\.`.
    pub fn parse_line(
        &self,
        line: &str,
        lineno: u64,
    ) -> Result<Option<Vec<Option<Edn>>>, SqlError> {
        if line == "\\." {
            return Ok(None);
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != self.columns.len() {
            return Err(SqlError::new(
                "22P04",
                format!(
                    "COPY {}, line {lineno}: expected {} columns, got {}",
                    self.table.name,
                    self.columns.len(),
                    fields.len()
                ),
            ));
        }
        let mut values = vec![None; self.table.columns.len()];
        for (f, c) in fields.iter().zip(&self.columns) {
            if *f == "\\N" {
                continue;
            }
            let col = &self.table.columns[*c];
            let text = unescape(f);
            let v = col.ty.parse_text(&text).map_err(|e| {
                SqlError::new(
                    e.code,
                    format!(
                        "{}, COPY {}, line {lineno}, column {}",
                        e.message, self.table.name, col.name
                    ),
                )
            })?;
            values[*c] = Some(v);
        }
        Ok(Some(values))
    }
}

/// COPY text format's backslash escapes.
fn unescape(f: &str) -> std::borrow::Cow<'_, str> {
    if !f.contains('\\') {
        return std::borrow::Cow::Borrowed(f);
    }
    let mut out = String::with_capacity(f.len());
    let mut chars = f.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A COPY's rows made into operations on two threads are the operations one pass
    /// makes, tempids numbered alike; a row with every column NULL fails the COPY whichever
    /// half it is in.
    #[test]
    fn many_rows_make_the_operations_one_pass_makes() {
        let table = crate::catalog::test_table();
        let a = table.columns.iter().position(|c| c.name == "a").unwrap();
        let row = |i: usize| {
            let mut values = vec![None; table.columns.len()];
            values[a] = Some(Edn::Integer(i as i64));
            values
        };
        let n = PARALLEL_ROWS_MIN + 7;
        let rows: Vec<_> = (0..n).map(row).collect();
        let mut next = 40;
        let ops = rows_ops(&table, rows.clone(), &mut next).unwrap();
        let mut one_next = 40;
        let mut one_pass: Vec<TxOp> = Vec::new();
        for values in rows {
            one_pass.push(TxOp::Map(row_map(&table, values, &mut one_next).unwrap()));
        }
        assert_eq!((next, ops.len()), (one_next, one_pass.len()));
        let differ = ops.iter().zip(&one_pass).position(|(x, y)| x != y);
        assert_eq!(differ, None);
        for at in [5, n - 3] {
            let mut rows: Vec<_> = (0..n).map(row).collect();
            rows[at] = vec![None; table.columns.len()];
            let e = rows_ops(&table, rows, &mut next).unwrap_err();
            assert!(e.to_string().contains("every column NULL"), "{e}");
        }
    }

    #[test]
    fn numerics_round_half_away_from_zero() {
        assert_eq!(round_numeric("2.5"), Some(3));
        assert_eq!(round_numeric("-2.5"), Some(-3));
        assert_eq!(round_numeric("2.49"), Some(2));
        assert_eq!(round_numeric("-0.4"), Some(0));
        assert_eq!(round_numeric(".5"), Some(1));
        assert_eq!(round_numeric("9007199254740993.5"), Some(9007199254740994));
        assert_eq!(round_numeric("2.5E+1"), Some(25));
        assert_eq!(round_numeric("x"), None);
    }
}
