//! One client connection's state and the execution of its statements.
//!
//! Outside BEGIN every statement is its own transaction. Inside, writes collect as pending
//! transaction data, which the statements of the transaction read through (`with`, applied
//! to the latest committed database: READ COMMITTED plus the transaction's own writes), and
//! COMMIT transacts them at once, durably, before it answers. Rows written are locked to
//! the end of the transaction (`locks`). Nothing is visible to other sessions before COMMIT.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use vev::{Connection, Db, Edn, EntityId, EntityRef, TxOp};

use crate::catalog::{self, Catalog, Table};
use crate::error::SqlError;
use crate::locks::{LockTable, SessionId};
use crate::sql::consts::{self, Param};
use crate::sql::select::{Agg, Count, Input, OutCol, Post, SelectPlan};
use crate::sql::union::{self, UnionPlan};
use crate::sql::write::{CopyPlan, RowsPlan};
use crate::sql::{self, Plan, QueryCost};
use crate::types::SqlType;

mod copy;
mod derived;
mod insert;
mod pending;
mod rowlock;
mod sequence;
mod serial;

use pending::{merge_ops, note_tempids, resolve_tempids};
use rowlock::Found;

/// What a write changes, so that later reads know whether they must see it.
enum Touch<'a> {
    Tables(&'a [String]),
    Schema,
}

/// What every session of one server shares.
pub struct Shared {
    pub conn: Connection,
    pub locks: LockTable,
    /// The sessions a cancel request can reach.
    pub cancels: Arc<crate::cancel::Registry>,
    pub options: vev::QueryOptions,
    /// The latest catalog, with the basis-t of the committed database it was read from.
    catalog: std::sync::Mutex<Option<(Option<vev::BasisT>, Arc<Catalog>)>>,
    next_session: std::sync::atomic::AtomicU64,
    /// Commits hold it shared; a SERIALIZABLE commit holds it alone between its validation
    /// and its write.
    commit_gate: tokio::sync::RwLock<()>,
    /// The sequences of serial and identity columns.
    sequences: sequence::Sequences,
}

impl Shared {
    pub fn new(conn: Connection) -> Shared {
        conn.register_fn(sql::write::ABSENT_FN, sql::write::absent_fn);
        Shared {
            conn,
            locks: LockTable::default(),
            cancels: Arc::default(),
            options: vev::QueryOptions {
                registry: crate::sqlfns::registry(),
                ..vev::QueryOptions::default()
            },
            catalog: std::sync::Mutex::new(None),
            next_session: std::sync::atomic::AtomicU64::new(1),
            commit_gate: tokio::sync::RwLock::new(()),
            sequences: sequence::Sequences::default(),
        }
    }

    /// The tables of `db` (cached while its schema stays the same). `committed`: `db` is a
    /// committed database (not a transaction's view), whose basis-t alone tells whether
    /// its schema is the one cached.
    pub fn catalog(&self, db: &Db, committed: bool) -> Result<Arc<Catalog>, SqlError> {
        let mut slot = self
            .catalog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((Some(basis), c)) = slot.as_ref() {
            if committed && *basis == db.basis_t() {
                return Ok(c.clone());
            }
        }
        let cached = slot.as_ref().map(|(_, c)| c.clone());
        let c = Catalog::current(&cached, db)?;
        *slot = Some((committed.then(|| db.basis_t()), c.clone()));
        Ok(c)
    }
}

/// What a statement answers.
#[derive(Debug)]
pub enum Outcome {
    Rows {
        columns: Arc<Vec<OutCol>>,
        rows: Vec<Vec<Edn>>,
    },
    /// A write's RETURNING rows: the tag is `command` and the number of rows (`UPDATE 2`).
    Returned {
        columns: Arc<Vec<OutCol>>,
        rows: Vec<Vec<Edn>>,
        command: &'static str,
    },
    /// A command tag (`INSERT 0 1`, `CREATE TABLE`, ...).
    Command(String),
    Begin,
    /// The end of a transaction: `COMMIT`, or `ROLLBACK` (also for a COMMIT of a failed
    /// transaction).
    End(&'static str),
    /// COPY FROM STDIN: the client sends the data next.
    CopyIn(usize),
}

/// The view a transaction reads: the latest database with its pending writes applied.
struct View {
    /// The basis of the database the writes were applied to.
    basis: vev::BasisT,
    /// How many of the pending operations are applied.
    applied: usize,
    db: Db,
    /// The pending operations applied at once to the latest database (`db` is its result),
    /// for COMMIT to commit as it is if nothing was committed since; `None` once the view
    /// was extended by a later statement's operations.
    prepared: Option<vev::Prepared>,
    /// Entities the pending writes created, by their tempid, both ways.
    tempids: HashMap<EntityId, Arc<str>>,
    ids: HashMap<Arc<str>, EntityId>,
}

#[derive(Default)]
struct Txn {
    pending: Vec<TxOp>,
    locks: Vec<EntityId>,
    view: Option<View>,
    /// The pending operations changed other than at their end (a write folded into an
    /// earlier one): the view is rebuilt rather than extended.
    folded: bool,
    /// The tables the pending writes touch.
    touched: std::collections::BTreeSet<String>,
    /// The pending writes change the schema (and may touch any table).
    schema: bool,
    /// An error ended the transaction's usefulness: only ROLLBACK (or COMMIT) is taken.
    failed: bool,
    /// Statements that read so far (SET TRANSACTION must come before them).
    reads: u32,
    /// SERIALIZABLE: what it read, validated at COMMIT.
    serial: Option<serial::Serial>,
}

impl Txn {
    /// Whether statements reading `tables` must read through the pending writes.
    fn affects(&self, tables: &[String]) -> bool {
        self.schema || tables.iter().any(|t| self.touched.contains(t))
    }
}

/// COPY in progress.
struct Copying {
    plan: Arc<CopyPlan>,
    /// The COPY data received so far, parsed at CopyDone (on two threads when it is large).
    raw: Vec<u8>,
}

pub struct Session {
    pub id: SessionId,
    shared: Arc<Shared>,
    /// The query options statements run with (the SQL functions; `statement_timeout`).
    options: vev::QueryOptions,
    txn: Option<Txn>,
    settings: BTreeMap<String, String>,
    next_row: u64,
    copying: Option<Copying>,
    /// Cancel requests for this session's statements.
    canceler: Arc<crate::cancel::Canceler>,
    /// The process id a cancel request names, once registered.
    cancel_pid: Option<i32>,
    pub user: String,
    pub database: String,
    /// The database every part of the running statement reads (a set operation's
    /// branches), when it has more than one query.
    pinned: Option<Db>,
    /// The database with the derived tables (`WITH`, subqueries in FROM) of the running
    /// statement made so far: every part of it reads this one (`session/derived.rs`).
    derived: Option<Db>,
}

impl Drop for Session {
    /// A client gone mid-transaction: its writes are dropped, its locks released.
    fn drop(&mut self) {
        if let Some(t) = self.txn.take() {
            self.shared.locks.release(self.id, &t.locks);
        }
        if let Some(pid) = self.cancel_pid {
            self.shared.cancels.unregister(pid);
        }
    }
}

/// The settings a session starts with (what SHOW and current_setting give).
fn default_settings() -> BTreeMap<String, String> {
    [
        ("server_version", crate::SERVER_VERSION),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("timezone", "UTC"),
        ("intervalstyle", "postgres"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("statement_timeout", "0"),
        ("lock_timeout", "0"),
        ("transaction_isolation", "read committed"),
        ("default_transaction_isolation", "read committed"),
        ("search_path", "\"$user\", public"),
        ("extra_float_digits", "1"),
        ("application_name", ""),
        ("max_identifier_length", "63"),
        ("vev.as_of", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

impl Session {
    pub fn new(shared: Arc<Shared>, user: String, database: String) -> Session {
        let id = shared
            .next_session
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let canceler = Arc::new(crate::cancel::Canceler::default());
        let mut options = shared.options.clone();
        options.limits.cancel = Some(canceler.flag());
        Session {
            id,
            options,
            canceler,
            cancel_pid: None,
            shared,
            txn: None,
            settings: default_settings(),
            next_row: 0,
            copying: None,
            user,
            database,
            pinned: None,
            derived: None,
        }
    }

    /// Let cancel requests naming `pid` and `key` (the values the client got at startup)
    /// reach this session's statements; the first call registers, later ones do nothing.
    pub fn register_cancel(&mut self, pid: i32, key: &pgwire::messages::startup::SecretKey) {
        if self.cancel_pid.is_none() {
            self.shared.cancels.register(pid, key, &self.canceler);
            self.cancel_pid = Some(pid);
        }
    }

    pub fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// A statement failed before it ran (it did not plan): the transaction is failed.
    pub fn fail_transaction(&mut self) {
        if let Some(t) = &mut self.txn {
            t.failed = true;
        }
    }

    pub fn in_failed_transaction(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| t.failed)
    }

    pub fn setting(&self, name: &str) -> Option<String> {
        self.settings.get(name).cloned()
    }

    fn timeout(&self, name: &str) -> Option<Duration> {
        let ms: u64 = self
            .settings
            .get(name)?
            .trim_end_matches("ms")
            .trim()
            .parse()
            .ok()?;
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// The database reads start from: the latest, or the past `vev.as_of` names.
    fn base_db(&self) -> Result<Db, SqlError> {
        let db = self.pinned.clone().unwrap_or_else(|| self.shared.conn.db());
        match self.settings.get("vev.as_of").map(String::as_str) {
            None | Some("") => Ok(db),
            Some(t) => {
                let point = vev::TimePoint::parse(t)
                    .map_err(|e| SqlError::new("22023", format!("invalid vev.as_of {t:?}: {e}")))?;
                Ok(db.as_of(point))
            }
        }
    }

    fn reading_the_past(&self) -> bool {
        self.settings
            .get("vev.as_of")
            .is_some_and(|v| !v.is_empty())
    }

    /// The database this session's next statement reads.
    pub fn view(&mut self) -> Result<Db, SqlError> {
        self.view_for(None)
    }

    /// The database a statement reading `tables` sees: the latest one when the
    /// transaction's writes touch none of them (`None`: any table).
    pub fn view_for(&mut self, tables: Option<&[String]>) -> Result<Db, SqlError> {
        if let Some(db) = &self.derived {
            return Ok(db.clone());
        }
        let latest = self.base_db()?;
        let Some(txn) = &mut self.txn else {
            return Ok(latest);
        };
        txn.reads = txn.reads.saturating_add(1);
        // Statements read through `view_for(Some(tables))`; `view()` (no tables) checks
        // pending writes and serves DDL, which reads no rows for the client.
        if let (Some(s), Some(tables)) = (&mut txn.serial, tables) {
            s.note_read(&latest, tables);
        }
        // A failed transaction runs nothing more: its writes are not worth applying.
        if txn.pending.is_empty() || txn.failed || tables.is_some_and(|t| !txn.affects(t)) {
            return Ok(latest);
        }
        let conn = &self.shared.conn;
        if let Some(v) = &mut txn.view {
            if v.basis == latest.basis_t() && !txn.folded {
                if v.applied < txn.pending.len() && !rebuild_view(v.applied, txn.pending.len()) {
                    let ops: Vec<TxOp> = txn.pending[v.applied..]
                        .iter()
                        .map(|op| resolve_tempids(op, &v.ids))
                        .collect();
                    let report = conn.with(&v.db, &ops).map_err(|e| SqlError::from_vev(&e))?;
                    note_tempids(&report, &mut v.tempids, &mut v.ids);
                    v.db = report.db_after;
                    v.applied = txn.pending.len();
                    v.prepared = None;
                }
                if v.applied == txn.pending.len() {
                    return Ok(v.db.clone());
                }
            }
        }
        let prepared = conn
            .prepare(&latest, &txn.pending)
            .map_err(|e| SqlError::from_vev(&e))?;
        let report = prepared.report();
        let (mut tempids, mut ids) = (HashMap::new(), HashMap::new());
        note_tempids(report, &mut tempids, &mut ids);
        let db = report.db_after.clone();
        txn.folded = false;
        txn.view = Some(View {
            basis: latest.basis_t(),
            applied: txn.pending.len(),
            db: db.clone(),
            prepared: Some(prepared),
            tempids,
            ids,
        });
        Ok(db)
    }

    /// The catalog of the session's view (the latest database's, unless the transaction
    /// changes the schema).
    pub fn catalog(&mut self) -> Result<Arc<Catalog>, SqlError> {
        let schema_changed = self.txn.as_ref().is_some_and(|t| t.schema);
        let db = if schema_changed {
            self.view()?
        } else {
            self.base_db()?
        };
        self.shared
            .catalog(&db, !schema_changed && !self.reading_the_past())
    }

    /// psql's answer to one of its describe queries (`\\d`, `\\dt`), if `sql` is one.
    pub fn psql_describe(&mut self, sql: &str) -> Option<Result<Outcome, SqlError>> {
        if !sql.contains("pg_catalog.") {
            return None;
        }
        let catalog = match self.catalog() {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        crate::pgcatalog::answer(sql, &catalog, &self.user).map(Ok)
    }

    /// Plan a statement against the session's tables.
    pub fn plan(&mut self, stmt: &sqlparser::ast::Statement) -> Result<Plan, SqlError> {
        Ok(self.plan_with_catalog(stmt)?.0)
    }

    /// `plan`, with the catalog it was planned against (a prepared statement's plan stays
    /// good while the session's catalog is that one).
    pub fn plan_with_catalog(
        &mut self,
        stmt: &sqlparser::ast::Statement,
    ) -> Result<(Plan, Arc<Catalog>), SqlError> {
        let catalog = self.catalog()?;
        Ok((sql::plan(stmt, &catalog)?, catalog))
    }

    /// Run a planned statement with its parameters.
    pub async fn execute(&mut self, plan: &Plan, params: &[Param]) -> Result<Outcome, SqlError> {
        if self.in_failed_transaction() && !matches!(plan, Plan::Commit | Plan::Rollback) {
            return Err(SqlError::in_failed_transaction());
        }
        if plan.writes() && self.reading_the_past() {
            return Err(SqlError::new(
                "25006",
                "cannot write while vev.as_of reads the past (SET vev.as_of TO DEFAULT first)",
            ));
        }
        self.canceler.start();
        // A statement's pinned database is its own (one whose future was dropped midway
        // leaves nothing behind for the next).
        self.pinned = None;
        self.derived = None;
        let result = self.execute_inner(plan, params).await;
        self.pinned = None;
        self.derived = None;
        self.canceler.finish();
        if result.is_err() {
            if let Some(t) = &mut self.txn {
                t.failed = true;
            }
        }
        result
    }

    async fn execute_inner(&mut self, plan: &Plan, params: &[Param]) -> Result<Outcome, SqlError> {
        match plan {
            Plan::Select(p) => self.select(p, params).await,
            Plan::Union(u) => self.union(u, params).await,
            Plan::With(w) => self.with_derived(w, params).await,
            Plan::Scalars(s) => self.with_scalars(s, params).await,
            Plan::Catalog { sql, .. } => self.psql_describe(sql).unwrap_or_else(|| {
                Err(SqlError::new(
                    "XX000",
                    "a catalog query is no longer recognized",
                ))
            }),
            Plan::Values(v) => self.values(v, params),
            Plan::Insert(p) => self.insert(p, params).await,
            Plan::Update(p) => {
                let (n, rows) = self.write_rows(p, params).await?;
                Ok(written(p.returning.as_ref(), "UPDATE", n, rows))
            }
            Plan::Delete(p) => {
                let (n, rows) = self.write_rows(p, params).await?;
                Ok(written(p.returning.as_ref(), "DELETE", n, rows))
            }
            Plan::CopyFrom(p) => {
                self.copying = Some(Copying {
                    plan: p.clone(),
                    raw: Vec::new(),
                });
                Ok(Outcome::CopyIn(p.columns.len()))
            }
            Plan::CreateTable { .. } | Plan::DropTables { .. } | Plan::AddPrimaryKey { .. }
                if self.txn.is_some() =>
            {
                Err(SqlError::unsupported(
                    "CREATE TABLE, DROP TABLE and ALTER TABLE inside a transaction block (a \
                     table's schema and its rows cannot commit in one Vev transaction; run \
                     the DDL outside BEGIN ... COMMIT)",
                ))
            }
            Plan::CreateTable {
                name,
                columns,
                if_not_exists,
            } => self.create_table(name, columns, *if_not_exists).await,
            Plan::DropTables { names, if_exists } => self.drop_tables(names, *if_exists).await,
            Plan::Truncate(names) => self.truncate(names).await,
            Plan::AddPrimaryKey { table, columns } => self.add_primary_key(table, columns).await,
            Plan::Begin { serializable } => {
                self.begin(*serializable);
                Ok(Outcome::Begin)
            }
            Plan::SetIsolation {
                serializable,
                session,
            } => self.set_isolation(*serializable, *session),
            Plan::Commit => self.commit().await,
            Plan::Rollback => {
                self.rollback();
                Ok(Outcome::End("ROLLBACK"))
            }
            Plan::Set { .. } | Plan::Show(_) | Plan::Explain(_) => self.setting_command(plan),
            Plan::Noop(tag) => Ok(Outcome::Command((*tag).to_owned())),
            Plan::Empty => Ok(Outcome::Command(String::new())),
        }
    }

    /// SET, SHOW and EXPLAIN: the session's settings, and the Datalog of a statement.
    fn setting_command(&mut self, plan: &Plan) -> Result<Outcome, SqlError> {
        match plan {
            Plan::Set { name, value } => {
                let value = value
                    .clone()
                    .unwrap_or_else(|| default_settings().get(name).cloned().unwrap_or_default());
                if name == "vev.as_of" && !value.is_empty() {
                    vev::TimePoint::parse(&value).map_err(|e| {
                        SqlError::new("22023", format!("invalid vev.as_of {value:?}: {e}"))
                    })?;
                }
                self.settings.insert(name.clone(), value);
                self.options.limits.timeout = self.timeout("statement_timeout");
                Ok(Outcome::Command("SET".into()))
            }
            Plan::Show(name) => {
                let value = self
                    .settings
                    .get(&name.to_ascii_lowercase())
                    .cloned()
                    .ok_or_else(|| {
                        SqlError::new(
                            "42704",
                            format!("unrecognized configuration parameter \"{name}\""),
                        )
                    })?;
                Ok(Outcome::Rows {
                    columns: Arc::new(vec![OutCol {
                        name: name.clone(),
                        ty: SqlType::Text,
                    }]),
                    rows: vec![vec![Edn::String(value)]],
                })
            }
            Plan::Explain(text) => Ok(Outcome::Rows {
                columns: Arc::new(vec![OutCol {
                    name: "QUERY PLAN".into(),
                    ty: SqlType::Text,
                }]),
                rows: vec![vec![Edn::String(text.clone())]],
            }),
            _ => Err(SqlError::internal("not a setting command")),
        }
    }

    fn ctx<'a>(&'a self, params: &'a [Param], now_ms: i64) -> consts::Ctx<'a> {
        consts::Ctx {
            params,
            now_ms,
            user: &self.user,
            database: &self.database,
            setting: &|_| None,
            slots: &[],
        }
    }

    fn values(&self, v: &sql::ValuesPlan, params: &[Param]) -> Result<Outcome, SqlError> {
        let now = now_ms();
        let settings = &self.settings;
        let lookup = |name: &str| settings.get(name).cloned();
        let ctx = consts::Ctx {
            params,
            now_ms: now,
            user: &self.user,
            database: &self.database,
            setting: &lookup,
            slots: &[],
        };
        let mut columns = Vec::new();
        let mut row = Vec::new();
        for (name, e) in &v.items {
            let (val, ty) = consts::eval(e, None, &ctx)?;
            columns.push(OutCol {
                name: name.clone(),
                ty: ty.unwrap_or(SqlType::Text),
            });
            row.push(val);
        }
        Ok(Outcome::Rows {
            columns: Arc::new(columns),
            rows: vec![row],
        })
    }

    /// The query inputs of a plan's parameters; `None` when a NULL parameter makes the
    /// result empty.
    fn inputs(
        inputs: &[Input],
        types: &[Option<SqlType>],
        null_rejecting: &[usize],
        params: &[Param],
    ) -> Result<Option<Vec<Edn>>, SqlError> {
        let mut args = Vec::with_capacity(inputs.len());
        for i in inputs {
            match i {
                Input::Param(n) => {
                    let p = params.get(n - 1).ok_or_else(|| {
                        SqlError::new(
                            "08P01",
                            format!(
                                "bind message supplies {} parameters, but the statement needs ${n}",
                                params.len()
                            ),
                        )
                    })?;
                    if *p == Param::Null && null_rejecting.contains(n) {
                        return Ok(None);
                    }
                    args.push(p.typed(types.get(n - 1).copied().flatten())?.0);
                }
                Input::Now => args.push(Edn::Inst(now_ms())),
            }
        }
        Ok(Some(args))
    }

    fn query_rows(
        &self,
        db: &Db,
        query: &vev::Query,
        args: &[Edn],
        cost: &QueryCost,
    ) -> Result<Vec<Vec<Edn>>, SqlError> {
        let run = || {
            let start = Instant::now();
            let result = db.q_prepared(query, args, &self.options);
            cost.record(start.elapsed());
            result
        };
        // A query is CPU work on this async worker: unless it is known to be short,
        // `block_in_place` hands the worker's other tasks (the listener, other sessions, a
        // cancel request's connection) to another thread while it runs, so a long query
        // cannot starve them. A short one runs here: the hand-off would cost more.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let result = if multi_thread && !cost.short() {
            tokio::task::block_in_place(run)
        } else {
            run()
        }
        .map_err(|e| SqlError::from_vev(&vev::Error::from(e)))?;
        Ok(match result {
            vev::QueryResult::Rel(rows) | vev::QueryResult::Bag(rows) => rows.into_vecs(),
            other => {
                return Err(SqlError::internal(format!(
                    "unexpected query result {other:?}"
                )))
            }
        })
    }

    async fn select(&mut self, p: &SelectPlan, params: &[Param]) -> Result<Outcome, SqlError> {
        let Some(args) = Self::inputs(&p.inputs, &p.params, &p.null_rejecting, params)? else {
            return Ok(Outcome::Rows {
                columns: p.columns.clone(),
                rows: post(Vec::new(), &p.post, params)?,
            });
        };
        let rows = match &p.lock {
            None => {
                let db = self.view_for(Some(&p.tables))?;
                arrange(
                    self.query_rows(&db, &p.query, &args, &p.cost)?,
                    &p.post,
                    params,
                )?
            }
            Some(lock) => {
                let mut held = Vec::new();
                let arranged = |rows| arrange(rows, &p.post, params);
                let found = Found {
                    tables: &p.tables,
                    query: &p.query,
                    cost: &p.cost,
                    args: &args,
                    arrange: &arranged,
                    entities: &lock.columns,
                    nowait: lock.nowait,
                };
                let result = self.find_and_lock(&found, &mut held).await;
                self.keep_locks(held);
                result?
            }
        };
        Ok(Outcome::Rows {
            columns: p.columns.clone(),
            rows: project(rows, &p.post),
        })
    }

    /// UNION, INTERSECT, EXCEPT (each [ALL]): each branch's rows conformed to the resolved
    /// column types, combined as the set operations nest, then ORDER BY, OFFSET and LIMIT.
    /// The branches read one database, as one statement does.
    async fn union(&mut self, u: &UnionPlan, params: &[Param]) -> Result<Outcome, SqlError> {
        self.pinned = Some(self.shared.conn.db());
        let mut results = Vec::new();
        for p in u.tree.branches() {
            let Outcome::Rows { rows, .. } = self.select(p, params).await? else {
                unreachable!("a SELECT returns rows")
            };
            results.push(union::conform_rows(rows, &u.columns));
        }
        let rows = union::combine(&u.tree, &mut results.into_iter());
        Ok(Outcome::Rows {
            columns: u.columns.clone(),
            rows: post(rows, &u.post, params)?,
        })
    }

    /// UPDATE or DELETE: find the rows, lock them, find them again if a lock had to wait
    /// (another transaction may have changed them: READ COMMITTED's re-check), then write.
    /// The rows written, and RETURNING's rows for them.
    async fn write_rows(
        &mut self,
        p: &RowsPlan,
        params: &[Param],
    ) -> Result<(usize, Vec<Vec<Edn>>), SqlError> {
        let Some(args) = Self::inputs(&p.inputs, &p.params, &p.null_rejecting, params)? else {
            return Ok((0, Vec::new()));
        };
        let mut held = Vec::new();
        let result = self.write_rows_locked(p, &args, &mut held).await;
        self.keep_locks(held);
        result
    }

    /// Transaction data: pending in a transaction, transacted now outside one.
    async fn write(&mut self, ops: Vec<TxOp>, touch: Touch<'_>) -> Result<(), SqlError> {
        if ops.is_empty() {
            return Ok(());
        }
        match &mut self.txn {
            Some(t) => {
                let mut ops = ops;
                let db = self.shared.conn.db();
                let mut folded = sql::write::reinsert_deleted(&db, &mut t.pending, &mut ops);
                let sure = !folded
                    && matches!(touch, Touch::Tables(_))
                    && pending::sure_to_apply(&db, &ops);
                folded |= merge_ops(&mut t.pending, ops);
                t.folded |= folded;
                match touch {
                    Touch::Tables(names) => t.touched.extend(names.iter().cloned()),
                    Touch::Schema => t.schema = true,
                }
                // The view catches up (and checks the new data) before the next statement
                // that reads these tables; unless the data cannot fail, check it now so the
                // error belongs to this statement.
                if !sure || folded {
                    self.view()?;
                }
                Ok(())
            }
            None => {
                let _gate = self.shared.commit_gate.read().await;
                transact(&self.shared.conn, ops).await
            }
        }
    }

    /// Start a transaction block unless one is open (`serializable`: its isolation, else
    /// the session's default).
    fn begin(&mut self, serializable: Option<bool>) {
        if self.txn.is_none() {
            let serializable = serializable.unwrap_or_else(|| self.default_serializable());
            self.txn = Some(Txn {
                serial: serializable.then(serial::Serial::default),
                ..Txn::default()
            });
        }
    }

    /// End the transaction block, if any, writing nothing and releasing its row locks.
    fn rollback(&mut self) {
        if let Some(t) = self.txn.take() {
            self.shared.locks.release(self.id, &t.locks);
        }
    }

    async fn commit(&mut self) -> Result<Outcome, SqlError> {
        let Some(t) = self.txn.take() else {
            return Ok(Outcome::End("COMMIT"));
        };
        if t.failed {
            self.shared.locks.release(self.id, &t.locks);
            return Ok(Outcome::End("ROLLBACK"));
        }
        // The view, when it is the pending operations applied at once, is what committing
        // them gives if nothing was committed since (`Connection::transact_prepared`).
        let (prepared, view) = match t.view {
            Some(mut v) if v.applied == t.pending.len() && !t.folded => {
                (v.prepared.take(), Some(v))
            }
            view => (None, view),
        };
        let result = match &t.serial {
            None => {
                let _gate = self.shared.commit_gate.read().await;
                commit_ops(&self.shared.conn, t.pending, prepared, view).await
            }
            Some(serial) => {
                let _gate = self.shared.commit_gate.write().await;
                match serial.validate(&self.shared.conn.db(), &t.touched, t.schema) {
                    Ok(()) => commit_ops(&self.shared.conn, t.pending, prepared, view).await,
                    Err(e) => Err(e),
                }
            }
        };
        self.shared.locks.release(self.id, &t.locks);
        result.map(|()| Outcome::End("COMMIT"))
    }

    async fn create_table(
        &mut self,
        name: &str,
        columns: &[catalog::ColumnDef],
        if_not_exists: bool,
    ) -> Result<Outcome, SqlError> {
        if self.catalog()?.tables.contains_key(name) {
            if if_not_exists {
                return Ok(Outcome::Command("CREATE TABLE".into()));
            }
            return Err(SqlError::duplicate_table(name));
        }
        let db = self.shared.conn.db();
        let meta = [
            (!Catalog::has_meta(&db)).then_some(catalog::META_SCHEMA),
            (!Catalog::has_defaults(&db) && columns.iter().any(|c| c.default.is_some()))
                .then_some(catalog::DEFAULT_SCHEMA),
        ];
        for schema in meta.into_iter().flatten() {
            let conn = self.shared.conn.clone();
            let _gate = self.shared.commit_gate.read().await;
            run_blocking(move || conn.transact_edn(schema)).await?;
        }
        let text = catalog::create_table_tx(name, columns)?;
        let ops = tx_ops(&text)?;
        self.write(ops, Touch::Schema).await?;
        Ok(Outcome::Command("CREATE TABLE".into()))
    }

    async fn drop_tables(
        &mut self,
        names: &[String],
        if_exists: bool,
    ) -> Result<Outcome, SqlError> {
        let catalog = self.catalog()?;
        let db = self.view()?;
        let mut ops = Vec::new();
        for name in names {
            let Some(table) = catalog.tables.get(name) else {
                if if_exists {
                    continue;
                }
                return Err(SqlError::undefined_table(name));
            };
            if !table.sql {
                return Err(SqlError::unsupported(format!(
                    "DROP TABLE of \"{name}\", whose attributes were defined in EDN"
                )));
            }
            ops.extend(drop_table_ops(&db, table)?);
        }
        self.write(ops, Touch::Schema).await?;
        Ok(Outcome::Command("DROP TABLE".into()))
    }

    async fn truncate(&mut self, names: &[String]) -> Result<Outcome, SqlError> {
        let catalog = self.catalog()?;
        let db = self.view()?;
        let mut ops = Vec::new();
        for name in names {
            let table = catalog.table(name)?;
            for e in catalog::row_ids(&db, table)? {
                ops.push(TxOp::RetractEntity {
                    e: self.entity_ref(e),
                });
            }
        }
        self.write(ops, Touch::Tables(names)).await?;
        Ok(Outcome::Command("TRUNCATE TABLE".into()))
    }

    fn entity_ref(&self, e: EntityId) -> EntityRef {
        match self
            .txn
            .as_ref()
            .and_then(|t| t.view.as_ref())
            .and_then(|v| v.tempids.get(&e))
        {
            Some(name) => EntityRef::TempId(vev::TempId::Str(name.clone())),
            None => EntityRef::Id(e),
        }
    }

    async fn add_primary_key(
        &mut self,
        table: &str,
        columns: &[String],
    ) -> Result<Outcome, SqlError> {
        let catalog = self.catalog()?;
        let t = catalog.table(table)?.clone();
        if !t.sql {
            return Err(SqlError::unsupported(
                "ALTER TABLE on a table defined in EDN",
            ));
        }
        if !t.primary_key.is_empty() {
            return Err(SqlError::new(
                "42P16",
                format!("multiple primary keys for table \"{table}\" are not allowed"),
            ));
        }
        let [col] = columns else {
            return Err(SqlError::unsupported("a primary key over several columns"));
        };
        let (_, c) = t
            .column(col)
            .ok_or_else(|| SqlError::undefined_column(col))?;
        let attr = c
            .attr
            .clone()
            .ok_or_else(|| SqlError::undefined_column(col))?;
        let db = self.view()?;
        let rows = catalog::row_ids(&db, &t)?.len();
        let a = db
            .schema()
            .attribute_by_ident(&attr)
            .map(|a| a.id)
            .unwrap_or_default();
        let with_value = db
            .datoms(vev::IndexOrder::Aevt, &[vev::Component::Entity(a)])
            .count();
        if with_value < rows {
            return Err(SqlError::new(
                "23502",
                format!("column \"{col}\" of relation \"{table}\" contains null values"),
            ));
        }
        let text = format!(
            "[[:db/add {attr} :db/unique :db.unique/identity] [:db/add {attr} :vev.sql/not-null true] \
              [:db/add [:vev.sql/table {table:?}] :vev.sql/primary-key {attr}]]"
        );
        let ops = tx_ops(&text)?;
        self.write(ops, Touch::Schema).await?;
        Ok(Outcome::Command("ALTER TABLE".into()))
    }
}

/// The transaction data dropping a table: its rows retracted, its column attributes
/// renamed out of the way (`:vev.sql.dropped.<table>/<column>-<t>`, so that the name can be
/// created again) and stripped of their SQL facts, the table entity retracted.
fn drop_table_ops(db: &Db, table: &Table) -> Result<Vec<TxOp>, SqlError> {
    let mut text = String::from("[");
    let stamp = db.basis_t() + 1;
    let mut attrs: Vec<vev::Keyword> = table
        .columns
        .iter()
        .filter_map(|c| c.attr.clone())
        .collect();
    let marker = Table::marker_attr(&table.name);
    if db.schema().attribute_by_ident(&marker).is_some() {
        attrs.push(marker);
    }
    for a in &attrs {
        text.push_str(&format!(
            "[:db/add {a} :db/ident :vev.sql.dropped.{t}/{n}-{stamp}] [:db/retract {a} :vev.sql/type] \
             [:db/retract {a} :vev.sql/position] [:db/retract {a} :vev.sql/not-null] ",
            t = table.name,
            n = a.name(),
        ));
    }
    text.push_str(&format!(
        "[:db/retractEntity [:vev.sql/table {:?}]]]",
        table.name
    ));
    let mut ops = tx_ops(&text)?;
    for e in catalog::row_ids(db, table)? {
        ops.push(TxOp::RetractEntity {
            e: EntityRef::Id(e),
        });
    }
    Ok(ops)
}

/// The operations of transaction data Vev itself writes as text (DDL).
fn tx_ops(text: &str) -> Result<Vec<TxOp>, SqlError> {
    Ok(vev::parse_tx(text)
        .map_err(SqlError::internal)?
        .into_iter()
        .map(|s| s.op)
        .collect())
}

async fn transact(conn: &Connection, ops: Vec<TxOp>) -> Result<(), SqlError> {
    if ops.is_empty() {
        return Ok(());
    }
    let conn = conn.clone();
    run_blocking(move || conn.transact(&ops)).await.map(|_| ())
}

/// Commit a transaction block's operations, through what `view_for` prepared of them when
/// there is that. The block's `view` is dropped while the commit runs on its blocking
/// thread: freeing the tree nodes its writes copied was 6% of the server's time in
/// pgbench's tpcb-like transaction, before the commit.
async fn commit_ops(
    conn: &Connection,
    ops: Vec<TxOp>,
    prepared: Option<vev::Prepared>,
    view: Option<View>,
) -> Result<(), SqlError> {
    if ops.is_empty() {
        return Ok(());
    }
    let conn = conn.clone();
    let (answer, answered) = tokio::sync::oneshot::channel();
    let commit = tokio::task::spawn_blocking(move || {
        let result = match prepared {
            Some(prepared) => conn.transact_prepared(&ops, prepared),
            None => conn.transact(&ops),
        };
        let (outcome, report) = match result {
            Ok(report) => (Ok(()), Some(report)),
            Err(e) => (Err(e), None),
        };
        // The client has its answer before the operations and the report are freed here:
        // for a COPY of 800,000 rows that took a tenth of a second or more.
        let _ = answer.send(outcome);
        drop(report);
        drop(ops);
    });
    drop(view);
    match answered.await {
        Ok(outcome) => outcome.map_err(|e| SqlError::from_vev(&e)),
        // The task ended without answering: it panicked (`finished` says so).
        Err(_) => finished(commit.await.map(Ok)),
    }
}

/// Whether a transaction block's view, `applied` of its `pending` operations, is made
/// anew from the latest database rather than extended by the rest: when the new operations
/// are many (a `COPY`, a large multi-row INSERT) and at least as many as the applied ones.
/// Rebuilding then costs at most twice the block's operations, and the view is what COMMIT
/// can commit without applying them again (`commit_ops`), which is what saves time on a
/// large block. A small statement extends the view: rebuilding for it would apply the
/// block's earlier statements again at every statement, for a saving at COMMIT that other
/// clients' commits in between usually cancel.
fn rebuild_view(applied: usize, pending: usize) -> bool {
    const MANY: usize = 1_000;
    let new = pending - applied;
    new >= MANY && new >= applied
}

/// A blocking Vev call (a durable commit waits for its sync) off the async workers.
async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, vev::Error> + Send + 'static,
) -> Result<T, SqlError> {
    finished(tokio::task::spawn_blocking(f).await)
}

/// What a blocking task gave, as the statement's result.
fn finished<T>(
    joined: Result<Result<T, vev::Error>, tokio::task::JoinError>,
) -> Result<T, SqlError> {
    joined
        .map_err(|e| SqlError::internal(format!("a storage task failed: {e}")))?
        .map_err(|e| SqlError::from_vev(&e))
}

/// A write's outcome: its command tag with the rows written, or RETURNING's rows under it.
fn written(
    returning: Option<&crate::sql::returning::Returning>,
    command: &'static str,
    n: usize,
    rows: Vec<Vec<Edn>>,
) -> Outcome {
    match returning {
        None => Outcome::Command(format!("{command} {n}")),
        Some(r) => Outcome::Returned {
            columns: r.columns.clone(),
            rows,
            command,
        },
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// ORDER BY, LIMIT, OFFSET and the output columns, on the query's rows.
pub fn post(rows: Vec<Vec<Edn>>, p: &Post, params: &[Param]) -> Result<Vec<Vec<Edn>>, SqlError> {
    Ok(project(arrange(rows, p, params)?, p))
}

/// The rows of a query a SELECT returns, in its order, before the projection to its
/// output columns: the one row of an aggregate over nothing, HAVING, ORDER BY, OFFSET and
/// LIMIT.
fn arrange(mut rows: Vec<Vec<Edn>>, p: &Post, params: &[Param]) -> Result<Vec<Vec<Edn>>, SqlError> {
    if let Some(aggs) = &p.global {
        if rows.is_empty() {
            rows.push(
                aggs.iter()
                    .map(|a| match a {
                        Agg::Count => Edn::Integer(0),
                        Agg::Other => crate::sqlfns::null_edn(),
                    })
                    .collect(),
            );
        }
    }
    if !p.computed.is_empty() {
        for row in &mut rows {
            for c in &p.computed {
                let v = c.eval(row, params)?;
                row.push(v);
            }
        }
    }
    if let Some(h) = &p.having {
        let mut kept = Vec::with_capacity(rows.len());
        for row in rows {
            if crate::sql::having::test(h, &row, params)? == Some(true) {
                kept.push(row);
            }
        }
        rows = kept;
    }
    if !p.order.is_empty() {
        rows.sort_by(|a, b| {
            for &(k, desc, nulls_first) in &p.order {
                let ord = crate::sql::compare::compare_sql(&a[k], &b[k], nulls_first, desc);
                if ord != std::cmp::Ordering::Equal {
                    return ord;
                }
            }
            std::cmp::Ordering::Equal
        });
    }
    let count = |c: &Option<Count>| -> Result<Option<usize>, SqlError> {
        Ok(match c {
            None => None,
            Some(Count::Const(n)) => Some(*n as usize),
            Some(Count::Param(n)) => match params.get(n - 1) {
                Some(Param::Null) | None => None,
                Some(p) => match p.typed(Some(SqlType::Int8))?.0 {
                    Edn::Integer(x) if x >= 0 => Some(x as usize),
                    other => {
                        return Err(SqlError::new(
                            "2201W",
                            format!("LIMIT/OFFSET must not be negative: {other}"),
                        ))
                    }
                },
            },
        })
    };
    if p.distinct_output {
        let mut seen = std::collections::HashSet::new();
        rows.retain(|r| seen.insert(p.select.iter().map(|k| r[*k].clone()).collect::<Vec<Edn>>()));
    }
    if let Some(keys) = &p.distinct_on {
        let mut seen = std::collections::HashSet::new();
        rows.retain(|r| seen.insert(keys.iter().map(|k| r[*k].clone()).collect::<Vec<Edn>>()));
    }
    let offset = count(&p.offset)?.unwrap_or(0);
    let limit = count(&p.limit)?.unwrap_or(usize::MAX);
    Ok(rows.into_iter().skip(offset).take(limit).collect())
}

/// The output columns of arranged rows.
fn project(rows: Vec<Vec<Edn>>, p: &Post) -> Vec<Vec<Edn>> {
    // Rows that are the output as they are (no hidden sort, group or lock column, in
    // order) move through; others are projected.
    let as_is = p.select.iter().enumerate().all(|(i, k)| i == *k);
    rows.into_iter()
        .map(|r| {
            if as_is && r.len() == p.select.len() {
                r
            } else {
                p.select.iter().map(|k| r[*k].clone()).collect()
            }
        })
        .collect()
}
