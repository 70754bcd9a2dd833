//! SQL text to plans: each statement becomes a Datalog query, transaction data, or a
//! session command. Nothing here runs a statement (`session` does).

pub mod compare;
pub mod computed;
pub mod consts;
pub mod derived;
pub mod expr;
pub mod having;
pub mod returning;
pub mod scalar;
pub mod select;
pub mod subquery;
pub mod union;
pub mod upsert;
pub mod using;
pub mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlparser::ast::{
    AlterTableOperation, ColumnOption, GeneratedAs, ObjectType, Query, SetExpr, Statement,
    TableConstraint,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::{Catalog, ColumnDef};
use crate::error::SqlError;
use crate::types::SqlType;
use expr::ident_name;
use select::{table_name, SelectPlan};
use write::{CopyPlan, InsertPlan, RowsPlan};

/// What a statement does.
#[derive(Clone, Debug)]
pub enum Plan {
    Select(Arc<SelectPlan>),
    /// `UNION`, `INTERSECT` or `EXCEPT` (each `[ALL]`) of SELECTs.
    Union(Arc<union::UnionPlan>),
    /// A SELECT without FROM: its items, evaluated when it runs.
    Values(Arc<ValuesPlan>),
    /// A query over derived tables (`WITH`, subqueries in FROM), made when it runs.
    With(Arc<derived::WithPlan>),
    /// A statement with scalar subqueries, run first as parameters of it.
    Scalars(Arc<scalar::ScalarPlan>),
    Insert(Arc<InsertPlan>),
    Update(Arc<RowsPlan>),
    Delete(Arc<RowsPlan>),
    CopyFrom(Arc<CopyPlan>),
    CreateTable {
        name: String,
        columns: Vec<ColumnDef>,
        if_not_exists: bool,
    },
    DropTables {
        names: Vec<String>,
        if_exists: bool,
    },
    Truncate(Vec<String>),
    AddPrimaryKey {
        table: String,
        columns: Vec<String>,
    },
    /// `BEGIN`: `serializable` from its isolation level (`None`: the session's default).
    Begin {
        serializable: Option<bool>,
    },
    /// `SET TRANSACTION` (`session`: `SET SESSION CHARACTERISTICS AS TRANSACTION`).
    SetIsolation {
        serializable: Option<bool>,
        session: bool,
    },
    Commit,
    Rollback,
    /// `SET name = value` (`None`: `SET name TO DEFAULT` / `RESET`).
    Set {
        name: String,
        value: Option<String>,
    },
    Show(String),
    /// The Datalog a statement translates to.
    Explain(String),
    /// A statement accepted and ignored (VACUUM, ANALYZE, ...): its command tag.
    Noop(&'static str),
    /// A client's catalog query (psql's describe commands, JDBC's `DatabaseMetaData`),
    /// answered from the catalog when it runs (`pgcatalog.rs`); its result columns.
    Catalog {
        sql: Arc<str>,
        columns: Arc<Vec<crate::sql::select::OutCol>>,
    },
    Empty,
}

/// `SELECT <constant items>`.
#[derive(Clone, Debug)]
pub struct ValuesPlan {
    pub items: Vec<(String, sqlparser::ast::Expr)>,
    /// The parameters' types: a parameter under a cast takes the cast's type.
    pub params: Vec<Option<SqlType>>,
}

/// The types of the parameters in constant expressions (`$1::int4`), by number.
fn const_params(exprs: &[&sqlparser::ast::Expr]) -> Vec<Option<SqlType>> {
    use sqlparser::ast::{Expr, Visit, Visitor};
    use std::ops::ControlFlow;
    struct Params(Vec<Option<SqlType>>);
    impl Params {
        fn note(&mut self, p: &str, ty: Option<SqlType>) {
            if let Ok(n) = expr::placeholder(p) {
                if self.0.len() < n {
                    self.0.resize(n, None);
                }
                if self.0[n - 1].is_none() {
                    self.0[n - 1] = ty;
                }
            }
        }
    }
    impl Visitor for Params {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Cast {
                    expr, data_type, ..
                } => {
                    if let Expr::Value(v) = &**expr {
                        if let sqlparser::ast::Value::Placeholder(p) = &v.value {
                            self.note(p, SqlType::from_ast(data_type).ok());
                        }
                    }
                }
                Expr::Value(v) => {
                    if let sqlparser::ast::Value::Placeholder(p) = &v.value {
                        self.note(p, None);
                    }
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let mut v = Params(Vec::new());
    for e in exprs {
        let _ = e.visit(&mut v);
    }
    v.0
}

/// Parse SQL text into statements (PostgreSQL's dialect).
pub fn parse(text: &str) -> Result<Vec<Statement>, SqlError> {
    let text = copy_options(text)?;
    Parser::parse_sql(&PostgreSqlDialect {}, &text).map_err(|e| {
        SqlError::syntax(
            e.to_string()
                .trim_start_matches("sql parser error: ")
                .to_owned(),
        )
    })
}

/// `COPY ... FROM STDIN [WITH] (options)`: the options PostgreSQL takes that the SQL parser
/// does not (`FREEZE ON`), checked here and cut off. Text format is the one supported.
fn copy_options(text: &str) -> Result<std::borrow::Cow<'_, str>, SqlError> {
    let lower = text.trim_start().to_ascii_lowercase();
    if !lower.starts_with("copy") {
        return Ok(text.into());
    }
    let Some(at) = text.to_ascii_lowercase().find("from stdin") else {
        return Ok(text.into());
    };
    let head = &text[..at + "from stdin".len()];
    let mut tail = text[head.len()..].trim().trim_end_matches(';').trim();
    if let Some(rest) = tail
        .strip_prefix("with")
        .or_else(|| tail.strip_prefix("WITH"))
    {
        tail = rest.trim();
    }
    if tail.is_empty() {
        return Ok(head.to_owned().into());
    }
    let inner = tail
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| SqlError::syntax(format!("invalid COPY options: {tail}")))?;
    for opt in inner.split(',') {
        let words: Vec<String> = opt
            .split_whitespace()
            .map(|w| w.trim_matches('\'').to_ascii_lowercase())
            .collect();
        match words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["freeze"] | ["freeze", "on" | "off" | "true" | "false" | "1" | "0"] => {}
            ["format", "text"] => {}
            _ => {
                return Err(SqlError::unsupported(format!(
                    "the COPY option {}",
                    opt.trim()
                )))
            }
        }
    }
    Ok(head.to_owned().into())
}

impl Plan {
    /// The parameter types the statement implies (`$n` is `params()[n - 1]`; `None`:
    /// nothing implies one, it is text).
    pub fn params(&self) -> Vec<Option<SqlType>> {
        match self {
            Plan::Select(s) => s.params.clone(),
            Plan::Union(u) => u.params.clone(),
            Plan::Insert(i) => i.params.clone(),
            Plan::Update(r) | Plan::Delete(r) => r.params.clone(),
            Plan::Values(v) => v.params.clone(),
            Plan::With(w) => w.params.clone(),
            Plan::Scalars(s) => s.params(),
            _ => Vec::new(),
        }
    }

    /// Whether the statement writes (refused under `vev.as_of`).
    pub fn writes(&self) -> bool {
        if let Plan::Scalars(s) = self {
            return s.body.writes();
        }
        matches!(
            self,
            Plan::Insert(_)
                | Plan::Update(_)
                | Plan::Delete(_)
                | Plan::CopyFrom(_)
                | Plan::CreateTable { .. }
                | Plan::DropTables { .. }
                | Plan::Truncate(_)
                | Plan::AddPrimaryKey { .. }
        )
    }
}

/// Plan one statement against the tables of `catalog`.
pub fn plan(stmt: &Statement, catalog: &Catalog) -> Result<Plan, SqlError> {
    if matches!(
        stmt,
        Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)
    ) {
        if let Some(s) = scalar::compile(stmt, catalog)? {
            return Ok(Plan::Scalars(Arc::new(s)));
        }
    }
    Ok(match stmt {
        Statement::Query(q) => query(q, catalog)?,
        Statement::Insert(i) => Plan::Insert(Arc::new(write::insert(i, catalog)?)),
        Statement::Update(u) => Plan::Update(Arc::new(write::update(u, catalog)?)),
        Statement::Delete(d) => Plan::Delete(Arc::new(write::delete(d, catalog)?)),
        Statement::Copy {
            source,
            to: false,
            target: sqlparser::ast::CopyTarget::Stdin,
            ..
        } => Plan::CopyFrom(Arc::new(write::copy_from(source, catalog)?)),
        Statement::Copy { .. } => return Err(SqlError::unsupported("COPY other than FROM STDIN")),
        Statement::CreateTable(ct) => create_table(ct)?,
        Statement::Drop {
            object_type: ObjectType::Table,
            if_exists,
            names,
            ..
        } => Plan::DropTables {
            names: names.iter().map(table_name).collect::<Result<_, _>>()?,
            if_exists: *if_exists,
        },
        Statement::Truncate(t) => Plan::Truncate(
            t.table_names
                .iter()
                .map(|t| table_name(&t.name))
                .collect::<Result<_, _>>()?,
        ),
        Statement::AlterTable(at) => alter_table(at)?,
        Statement::StartTransaction { modes, .. } => Plan::Begin {
            serializable: isolation(modes),
        },
        Statement::Commit { .. } => Plan::Commit,
        Statement::Rollback {
            savepoint: None, ..
        } => Plan::Rollback,
        Statement::Set(s) => set(s)?,
        Statement::ShowVariable { variable } => Plan::Show(
            variable
                .iter()
                .map(ident_name)
                .collect::<Vec<_>>()
                .join("."),
        ),
        Statement::Reset(r) => match &r.reset {
            sqlparser::ast::Reset::ConfigurationParameter(name) => Plan::Set {
                name: name.to_string().to_ascii_lowercase(),
                value: None,
            },
            _ => return Err(SqlError::unsupported("RESET ALL / SESSION AUTHORIZATION")),
        },
        Statement::Explain { statement, .. } => Plan::Explain(explain(statement, catalog)?),
        Statement::Vacuum(_) => Plan::Noop("VACUUM"),
        // Prepared statements live in the protocol's statement store, which the client
        // replaces by name; DEALLOCATE (psycopg sends DEALLOCATE ALL after a failed
        // transaction) has nothing to drop on the SQL side.
        Statement::Deallocate { name, .. } if name.value.eq_ignore_ascii_case("all") => {
            Plan::Noop("DEALLOCATE ALL")
        }
        Statement::Deallocate { .. } => Plan::Noop("DEALLOCATE"),
        Statement::Analyze(_) => Plan::Noop("ANALYZE"),
        other => {
            let text = other.to_string();
            let head: String = text
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            return Err(SqlError::unsupported(format!("the statement {head}")));
        }
    })
}

fn query(q: &Query, catalog: &Catalog) -> Result<Plan, SqlError> {
    if let Some(w) = derived::compile(q, catalog)? {
        return Ok(Plan::With(Arc::new(w)));
    }
    if let Some(u) = union::compile(q, catalog)? {
        return Ok(Plan::Union(Arc::new(u)));
    }
    if let Some(p) = select::compile(q, catalog)? {
        return Ok(Plan::Select(Arc::new(p)));
    }
    let SetExpr::Select(sel) = &*q.body else {
        return Err(SqlError::unsupported("this query"));
    };
    let mut items = Vec::new();
    for item in &sel.projection {
        match item {
            sqlparser::ast::SelectItem::UnnamedExpr(e) => {
                let name = match e {
                    sqlparser::ast::Expr::Function(f) => f
                        .name
                        .0
                        .last()
                        .and_then(|p| p.as_ident())
                        .map(ident_name)
                        .unwrap_or_default(),
                    sqlparser::ast::Expr::Identifier(i) => ident_name(i),
                    _ => "?column?".into(),
                };
                items.push((name, e.clone()));
            }
            sqlparser::ast::SelectItem::ExprWithAlias { expr, alias } => {
                items.push((ident_name(alias), expr.clone()))
            }
            other => {
                return Err(SqlError::unsupported(format!(
                    "the select item {other} without FROM"
                )))
            }
        }
    }
    let params = const_params(&items.iter().map(|(_, e)| e).collect::<Vec<_>>());
    Ok(Plan::Values(Arc::new(ValuesPlan { items, params })))
}

/// The columns of a query plan's rows (`None`: the plan is no query).
pub fn result_columns(plan: &Plan) -> Option<Vec<select::OutCol>> {
    Some(match plan {
        Plan::Select(s) => s.columns.to_vec(),
        Plan::Union(u) => u.columns.to_vec(),
        Plan::With(w) => return result_columns(&w.body),
        Plan::Scalars(s) => return result_columns(&s.body),
        Plan::Values(v) => v
            .items
            .iter()
            .map(|(name, e)| {
                // NULL parameters: the types come from the expressions (casts), not values.
                let nulls = vec![consts::Param::Null; v.params.len()];
                let ctx = consts::Ctx {
                    params: &nulls,
                    now_ms: 0,
                    user: "",
                    database: "",
                    setting: &|_| Some(String::new()),
                    slots: &[],
                };
                let ty = consts::eval(e, None, &ctx).ok().and_then(|(_, t)| t);
                select::OutCol {
                    name: name.clone(),
                    ty: ty.unwrap_or(SqlType::Text),
                }
            })
            .collect(),
        _ => return None,
    })
}

fn explain(stmt: &Statement, catalog: &Catalog) -> Result<String, SqlError> {
    Ok(explain_plan(&plan(stmt, catalog)?))
}

/// The Datalog a plan runs (each part's, one per line), or the plan.
fn explain_plan(p: &Plan) -> String {
    match p {
        Plan::Select(s) => s.datalog.clone(),
        Plan::Union(u) => u.tree.explain(),
        Plan::With(w) => w.explain(),
        Plan::Scalars(s) => s.explain(),
        Plan::Update(r) | Plan::Delete(r) => r.datalog.clone(),
        other => format!("{other:?}"),
    }
}

fn create_table(ct: &sqlparser::ast::CreateTable) -> Result<Plan, SqlError> {
    if ct.query.is_some() || ct.like.is_some() {
        return Err(SqlError::unsupported("CREATE TABLE AS / LIKE"));
    }
    let name = table_name(&ct.name)?;
    let mut columns = Vec::new();
    for c in &ct.columns {
        let mut def = ColumnDef {
            name: ident_name(&c.name),
            ty: SqlType::from_ast(&c.data_type)?,
            not_null: false,
            primary_key: false,
            unique: false,
            default: None,
        };
        let serial = matches!(
            c.data_type.to_string().to_ascii_lowercase().as_str(),
            "serial" | "serial4" | "bigserial" | "serial8" | "smallserial" | "serial2"
        );
        if serial {
            def.not_null = true;
            def.default = Some(format!("nextval('{name}_{}_seq'::regclass)", def.name));
        }
        for o in &c.options {
            match &o.option {
                ColumnOption::NotNull => def.not_null = true,
                ColumnOption::Null => {}
                ColumnOption::PrimaryKey(_) => def.primary_key = true,
                ColumnOption::Unique(_) => def.unique = true,
                ColumnOption::Default(e) if !serial => def.default = Some(column_default(e)?),
                ColumnOption::Generated {
                    generated_as: GeneratedAs::ByDefault,
                    generation_expr: None,
                    ..
                } if def.ty.is_integer() && !serial => {
                    def.not_null = true;
                    def.default = Some(format!("nextval('{name}_{}_seq'::regclass)", def.name));
                }
                other => return Err(SqlError::unsupported(format!("the column option {other}"))),
            }
        }
        columns.push(def);
    }
    for tc in &ct.constraints {
        let (cols, primary) = match tc {
            TableConstraint::PrimaryKey(pk) => (&pk.columns, true),
            TableConstraint::Unique(u) => (&u.columns, false),
            other => return Err(SqlError::unsupported(format!("the constraint {other}"))),
        };
        if cols.len() != 1 {
            return Err(SqlError::unsupported("a key over several columns"));
        }
        let n = cols[0].column.expr.to_string().to_ascii_lowercase();
        let def = columns
            .iter_mut()
            .find(|c| c.name == n)
            .ok_or_else(|| SqlError::undefined_column(&n))?;
        if primary {
            def.primary_key = true;
        } else {
            def.unique = true;
        }
    }
    if columns.iter().filter(|c| c.primary_key).count() > 1 {
        return Err(SqlError::new(
            "42P16",
            format!("multiple primary keys for table \"{name}\" are not allowed"),
        ));
    }
    Ok(Plan::CreateTable {
        name,
        columns,
        if_not_exists: ct.if_not_exists,
    })
}

/// A column's DEFAULT as the text stored: a constant expression (no column, no
/// parameter; `now()` is evaluated at each insert), checked by evaluating it once.
fn column_default(e: &sqlparser::ast::Expr) -> Result<String, SqlError> {
    let ctx = consts::Ctx {
        params: &[],
        now_ms: 0,
        user: "",
        database: "",
        setting: &|_| None,
        slots: &[],
    };
    consts::eval(e, None, &ctx)
        .map_err(|err| SqlError::unsupported(format!("the DEFAULT {e} ({})", err.message)))?;
    Ok(e.to_string())
}

fn alter_table(at: &sqlparser::ast::AlterTable) -> Result<Plan, SqlError> {
    let table = table_name(&at.name)?;
    let [AlterTableOperation::AddConstraint {
        constraint: TableConstraint::PrimaryKey(pk),
        ..
    }] = at.operations.as_slice()
    else {
        return Err(SqlError::unsupported(
            "this ALTER TABLE (only ADD PRIMARY KEY is)",
        ));
    };
    let columns = pk
        .columns
        .iter()
        .map(|c| c.column.expr.to_string().to_ascii_lowercase())
        .collect::<Vec<_>>();
    if columns.len() != 1 {
        return Err(SqlError::unsupported("a primary key over several columns"));
    }
    Ok(Plan::AddPrimaryKey { table, columns })
}

fn set(s: &sqlparser::ast::Set) -> Result<Plan, SqlError> {
    use sqlparser::ast::Set;
    Ok(match s {
        Set::SingleAssignment {
            variable, values, ..
        } => {
            let name = variable.to_string().to_ascii_lowercase();
            let value = match values.as_slice() {
                [sqlparser::ast::Expr::Identifier(i)]
                    if i.value.eq_ignore_ascii_case("default") =>
                {
                    None
                }
                vals => Some(vals.iter().map(setting_text).collect::<Vec<_>>().join(", ")),
            };
            Plan::Set { name, value }
        }
        Set::SetTimeZone { value, .. } => Plan::Set {
            name: "timezone".into(),
            value: Some(setting_text(value)),
        },
        Set::SetNames { charset_name, .. } => Plan::Set {
            name: "client_encoding".into(),
            value: Some(charset_name.value.clone()),
        },
        Set::SetTransaction { modes, session, .. } => Plan::SetIsolation {
            serializable: isolation(modes),
            session: *session,
        },
        other => return Err(SqlError::unsupported(format!("{other}"))),
    })
}

/// A SET value as the text SHOW gives back.
fn setting_text(e: &sqlparser::ast::Expr) -> String {
    match e {
        sqlparser::ast::Expr::Value(v) => match &v.value {
            sqlparser::ast::Value::SingleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        sqlparser::ast::Expr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

/// Whether transaction modes ask for validation at COMMIT: SERIALIZABLE, and REPEATABLE READ
/// (run as SERIALIZABLE, which the standard allows); `None` when they name no level.
fn isolation(modes: &[sqlparser::ast::TransactionMode]) -> Option<bool> {
    use sqlparser::ast::{TransactionIsolationLevel as L, TransactionMode};
    modes.iter().find_map(|m| match m {
        TransactionMode::IsolationLevel(l) => {
            Some(matches!(l, L::Serializable | L::RepeatableRead))
        }
        TransactionMode::AccessMode(_) => None,
    })
}

/// How long a statement's query took lately, kept with its plan (so with a prepared
/// statement) for the session to decide where the next run goes: a query known to be short
/// runs on its async worker, anything else through `block_in_place`, which hands the
/// worker's other tasks to another thread first. That hand-off wakes a thread per query;
/// for a point read (pgbench's select-only) it cost more than the query.
#[derive(Debug, Default)]
pub struct QueryCost {
    /// Nanoseconds, decaying towards shorter runs and jumping to longer ones; 0 before
    /// the first run.
    recent_ns: AtomicU64,
}

impl QueryCost {
    /// Runs up to this long may hold an async worker (tokio's guidance is to yield every
    /// 10-100 µs).
    pub const INLINE: Duration = Duration::from_micros(100);

    /// Whether the query ran before and lately took at most `INLINE`. A parameter that
    /// makes one run much longer than the ones before still runs once on the worker.
    pub fn short(&self) -> bool {
        let ns = self.recent_ns.load(Ordering::Relaxed);
        ns != 0 && ns <= Self::INLINE.as_nanos() as u64
    }

    /// Note one run's time: a longer run replaces the estimate at once, a shorter one
    /// moves it a quarter of the way.
    pub fn record(&self, took: Duration) {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        let old = self.recent_ns.load(Ordering::Relaxed);
        let new = if old == 0 || took >= old {
            took
        } else {
            old - (old - took) / 4
        };
        self.recent_ns.store(new, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::QueryCost;
    use std::time::Duration;

    #[test]
    fn a_query_is_short_only_after_short_runs() {
        let cost = QueryCost::default();
        assert!(!cost.short(), "never run: not known to be short");
        cost.record(Duration::from_micros(20));
        assert!(cost.short());
        // One long run makes it long at once ...
        cost.record(Duration::from_millis(50));
        assert!(!cost.short());
        // ... and short runs bring it back a quarter of the way each time.
        let mut runs = 0;
        while !cost.short() {
            cost.record(Duration::from_micros(20));
            runs += 1;
            assert!(runs < 100, "never short again");
        }
        assert!(runs > 10, "back to short after {runs} runs");
        cost.record(QueryCost::INLINE + Duration::from_nanos(1));
        assert!(!cost.short());
    }
}
