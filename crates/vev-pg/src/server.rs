//! The wire protocol side (pgwire): startup, the simple and extended query protocols and
//! COPY, each turned into calls on the connection's `Session`.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, BytesMut};
use futures::{stream, Sink, SinkExt, StreamExt};
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramAuth};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, AuthSource,
    DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DataRowEncoder, DescribePortalResponse, DescribeStatementResponse, FieldFormat,
    FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::Entry;
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, PgWireConnectionState, PgWireServerHandlers,
    PidSecretKeyGenerator, RandomPidSecretKeyGenerator, Type, DEFAULT_NAME,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Bind, BindComplete, Describe, Execute, Parse, ParseComplete,
};
use pgwire::messages::response::EmptyQueryResponse;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::types::format::FormatOptions;
use pgwire::types::ToSqlText;
use postgres_types::{IsNull, ToSql};
use sqlparser::ast::Statement;
use tokio::sync::Mutex;
use vev::Edn;

use crate::error::SqlError;
use crate::session::{Outcome, Session, Shared};
use crate::sql::consts::Param;
use crate::sql::select::OutCol;
use crate::sql::{self, Plan};
use crate::types::SqlType;

/// The session of a connection, kept in its pgwire session extensions.
type SessionCell = Mutex<Session>;

/// Every handler, shared by all connections.
pub struct Handlers {
    pub shared: Arc<Shared>,
    params: DefaultServerParameterProvider,
    pids: RandomPidSecretKeyGenerator,
    parser: Arc<Parser>,
    /// SCRAM-SHA-256 when the server has a password; trust otherwise.
    scram: Option<SASLAuthStartupHandler<DefaultServerParameterProvider>>,
}

/// The parameters a session starts with (ParameterStatus).
fn server_params() -> DefaultServerParameterProvider {
    let mut params = DefaultServerParameterProvider::default();
    params.server_version = crate::SERVER_VERSION.to_owned();
    params.date_style = "ISO, MDY".to_owned();
    params.time_zone = "UTC".to_owned();
    params
}

/// SCRAM's iteration count (PostgreSQL's default).
const SCRAM_ITERATIONS: usize = 4096;

/// The server's one password, salted once (every user name is accepted with it).
#[derive(Debug)]
struct ServerPassword {
    salt: Vec<u8>,
    salted: Vec<u8>,
}

#[async_trait]
impl AuthSource for ServerPassword {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(Some(self.salt.clone()), self.salted.clone()))
    }
}

impl Handlers {
    pub fn new(shared: Arc<Shared>, password: Option<&str>) -> Handlers {
        let scram = password.map(|pw| {
            let salt = salt();
            let salted = gen_salted_password(pw, &salt, SCRAM_ITERATIONS);
            let mut auth = ScramAuth::new(Arc::new(ServerPassword { salt, salted }));
            auth.set_iterations(SCRAM_ITERATIONS);
            SASLAuthStartupHandler::new(Arc::new(server_params())).with_scram(auth)
        });
        Handlers {
            shared,
            params: server_params(),
            pids: RandomPidSecretKeyGenerator::default(),
            parser: Arc::new(Parser),
            scram,
        }
    }
}

/// 16 random bytes for the password's salt, from the process's randomly seeded hasher
/// keys (each `RandomState` draws new ones): no extra dependency.
fn salt() -> Vec<u8> {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    [state.hash_one(1u8), state.hash_one(2u8)]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

fn session<C: ClientInfo>(client: &C) -> PgWireResult<Arc<SessionCell>> {
    client
        .session_extensions()
        .get::<SessionCell>()
        .ok_or_else(|| SqlError::new("08P01", "no session: the startup did not finish").into())
}

#[async_trait]
impl StartupHandler for Handlers {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(scram) = &self.scram {
            let starting = matches!(message, PgWireFrontendMessage::Startup(_));
            scram.on_startup(client, message).await?;
            if starting {
                self.new_session(client);
            }
            return Ok(());
        }
        let PgWireFrontendMessage::Startup(startup) = message else {
            return Ok(());
        };
        protocol_negotiation(client, &startup).await?;
        save_startup_parameters_to_metadata(client, &startup);
        let (pid, key) = self.pids.generate(client);
        client.set_pid_and_secret_key(pid, key);
        self.new_session(client);
        finish_authentication(client, &self.params).await
    }
}

impl Handlers {
    /// The connection's session, for the user and database of its startup message.
    fn new_session<C: ClientInfo>(&self, client: &C) {
        let user = client
            .metadata()
            .get("user")
            .cloned()
            .unwrap_or_else(|| "vev".into());
        let database = client
            .metadata()
            .get("database")
            .cloned()
            .unwrap_or_else(|| user.clone());
        client.session_extensions().insert(Mutex::new(Session::new(
            self.shared.clone(),
            user,
            database,
        )));
    }
}

/// A prepared statement: its text, parse, and the plan made at Parse (made again at run
/// time when the schema changed since).
#[derive(Debug)]
pub struct Prepared {
    pub stmt: Option<Statement>,
    pub plan: Result<Plan, SqlError>,
    /// The catalog the plan was made against.
    pub catalog: Option<Arc<crate::catalog::Catalog>>,
    /// Parameter types the client declared at Parse (`None`: to infer).
    pub declared: Vec<Option<Type>>,
}

impl Prepared {
    /// The type of parameter `i` (declared, else inferred, else text).
    fn param_type(&self, i: usize) -> Type {
        if let Some(Some(t)) = self.declared.get(i) {
            if t.oid() != 0 {
                return t.clone();
            }
        }
        match &self.plan {
            Ok(p) => p
                .params()
                .get(i)
                .copied()
                .flatten()
                .map_or(Type::TEXT, SqlType::pg_type),
            Err(_) => Type::TEXT,
        }
    }

    fn param_count(&self) -> usize {
        let inferred = self.plan.as_ref().map_or(0, |p| p.params().len());
        inferred.max(self.declared.len())
    }
}

pub struct Parser;

#[async_trait]
impl QueryParser for Parser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql_text: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Arc<Prepared>>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        // A client's catalog query is answered from the catalog when it runs.
        if sql_text.contains("pg_catalog.") {
            let cell = session(client)?;
            let mut s = cell.lock().await;
            match s.psql_describe(sql_text) {
                Some(Ok(Outcome::Rows { columns, .. })) => {
                    return Ok(Some(Arc::new(Prepared {
                        stmt: None,
                        plan: Ok(Plan::Catalog {
                            sql: sql_text.into(),
                            columns,
                        }),
                        catalog: None,
                        declared: types.to_vec(),
                    })));
                }
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(_)) | None => {}
            }
        }
        let mut stmts = sql::parse(sql_text)?;
        let stmt = match stmts.len() {
            0 => return Ok(None),
            1 => stmts.pop(),
            _ => {
                return Err(SqlError::syntax(
                    "cannot insert multiple commands into a prepared statement",
                )
                .into())
            }
        };
        let cell = session(client)?;
        let mut s = cell.lock().await;
        // A statement that does not plan (an unknown table, say) is an error at Parse, as
        // in PostgreSQL.
        let (plan, catalog) = match &stmt {
            Some(st) => {
                let (p, c) = s.plan_with_catalog(st)?;
                (p, Some(c))
            }
            None => (Plan::Empty, None),
        };
        Ok(Some(Arc::new(Prepared {
            stmt,
            plan: Ok(plan),
            catalog,
            declared: types.to_vec(),
        })))
    }

    fn get_parameter_types(&self, stmt: &Arc<Prepared>) -> PgWireResult<Vec<Type>> {
        Ok((0..stmt.param_count())
            .map(|i| stmt.param_type(i))
            .collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Arc<Prepared>,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(match &stmt.plan {
            Ok(plan) => fields(&result_columns(plan), format),
            Err(_) => Vec::new(),
        })
    }
}

/// The columns a plan's rows have, when it returns rows.
fn result_columns(plan: &Plan) -> Vec<OutCol> {
    match plan {
        Plan::Select(_) | Plan::Union(_) | Plan::Values(_) | Plan::With(_) => {
            crate::sql::result_columns(plan).unwrap_or_default()
        }
        Plan::Scalars(s) => result_columns(&s.body),
        Plan::Insert(i) => i
            .returning
            .as_ref()
            .map_or_else(Vec::new, |r| r.columns.to_vec()),
        Plan::Update(r) | Plan::Delete(r) => r
            .returning
            .as_ref()
            .map_or_else(Vec::new, |r| r.columns.to_vec()),
        Plan::Catalog { columns, .. } => columns.to_vec(),
        Plan::Show(name) => vec![OutCol {
            name: name.clone(),
            ty: SqlType::Text,
        }],
        Plan::Explain(_) => vec![OutCol {
            name: "QUERY PLAN".into(),
            ty: SqlType::Text,
        }],
        _ => Vec::new(),
    }
}

fn fields(columns: &[OutCol], format: Option<&Format>) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = format.map_or(FieldFormat::Text, |f| format_at(f, i));
            FieldInfo::new(c.name.clone(), None, None, c.ty.pg_type(), f)
        })
        .collect()
}

/// The format of column `i` (a short format list means text, never a panic).
fn format_at(f: &Format, i: usize) -> FieldFormat {
    match f {
        Format::Individual(v) if i >= v.len() => FieldFormat::Text,
        f => f.format_for(i),
    }
}

/// Rows as pgwire's response to a query (its tag `SELECT n`).
fn rows_response(
    columns: &[OutCol],
    rows: &[Vec<Edn>],
    format: Option<&Format>,
) -> PgWireResult<QueryResponse> {
    let schema = Arc::new(fields(columns, format));
    let mut encoder = DataRowEncoder::new(schema.clone());
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        for (v, c) in row.iter().zip(columns.iter()) {
            encoder.encode_field(&Cell(v, c.ty))?;
        }
        out.push(Ok(encoder.take_row()));
    }
    Ok(QueryResponse::new(schema, stream::iter(out)))
}

/// Turn a statement's outcome into pgwire's response.
fn response(outcome: Outcome, format: Option<&Format>) -> PgWireResult<Response> {
    Ok(match outcome {
        Outcome::Rows { columns, rows } => Response::Query(rows_response(&columns, &rows, format)?),
        Outcome::Returned {
            columns,
            rows,
            command,
        } => {
            let mut response = rows_response(&columns, &rows, format)?;
            response.set_command_tag(command);
            Response::Query(response)
        }
        Outcome::Command(tag) if tag.is_empty() => Response::EmptyQuery,
        Outcome::Command(tag) => Response::Execution(Tag::new(&tag)),
        Outcome::Begin => Response::TransactionStart(Tag::new("BEGIN")),
        Outcome::End(tag) => Response::TransactionEnd(Tag::new(tag)),
        Outcome::CopyIn(columns) => {
            Response::CopyIn(CopyResponse::new(0, columns, stream::empty()))
        }
    })
}

#[async_trait]
impl SimpleQueryHandler for Handlers {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let cell = session(client)?;
        let mut s = cell.lock().await;
        let (pid, key) = client.pid_and_secret_key();
        s.register_cancel(pid, &key);
        match s.psql_describe(query) {
            Some(Ok(outcome)) => return Ok(vec![response(outcome, None)?]),
            Some(Err(e)) => return Ok(vec![Response::Error(Box::new(e.into()))]),
            None => {}
        }
        let stmts = match sql::parse(query) {
            Ok(stmts) => stmts,
            Err(e) => return Ok(vec![Response::Error(Box::new(e.into()))]),
        };
        // Several statements in one Query are one transaction, as in PostgreSQL (unless
        // they manage transactions themselves, copy, or change the schema, which Vev
        // commits on its own).
        let implicit = stmts.len() > 1
            && !s.in_transaction()
            && !stmts.iter().any(|st| {
                matches!(
                    st,
                    Statement::StartTransaction { .. }
                        | Statement::Commit { .. }
                        | Statement::Rollback { .. }
                        | Statement::Copy { .. }
                        | Statement::CreateTable(_)
                        | Statement::Drop { .. }
                        | Statement::AlterTable(_)
                )
            });
        if implicit {
            s.execute(&Plan::Begin { serializable: None }, &[]).await?;
        }
        let mut out = Vec::with_capacity(stmts.len());
        let mut failed = false;
        for stmt in &stmts {
            let result = match s.plan(stmt) {
                Ok(plan) => s.execute(&plan, &[]).await,
                Err(e) => {
                    s.fail_transaction();
                    Err(e)
                }
            };
            match result {
                Ok(outcome) => {
                    let copy = matches!(outcome, Outcome::CopyIn(_));
                    out.push(response(outcome, None)?);
                    if copy {
                        break;
                    }
                }
                Err(e) => {
                    out.push(Response::Error(Box::new(e.into())));
                    failed = true;
                    break;
                }
            }
        }
        if implicit {
            let end = if failed { Plan::Rollback } else { Plan::Commit };
            if let Err(e) = s.execute(&end, &[]).await {
                out.push(Response::Error(Box::new(e.into())));
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl ExtendedQueryHandler for Handlers {
    type Statement = Arc<Prepared>;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        self.parser.clone()
    }

    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message
            .name
            .clone()
            .unwrap_or_else(|| DEFAULT_NAME.to_owned());
        match StoredStatement::parse(client, &message, self.query_parser()).await? {
            Some(stmt) => client.portal_store().put_statement(Arc::new(stmt)),
            None => client.portal_store().put_empty_statement(&name),
        }
        // Fed, not sent: the replies to a pipeline go out in one write at Sync.
        client
            .feed(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
            .await?;
        Ok(())
    }

    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
        match client.portal_store().get_statement(statement_name) {
            Some(Entry::Value(statement)) => {
                let portal = Portal::try_new(&message, statement)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(Entry::Empty) if message.parameters.is_empty() => {
                client.portal_store().put_empty_portal(portal_name);
            }
            Some(Entry::Empty) => {
                return Err(SqlError::new(
                    "08P01",
                    format!(
                        "bind message supplies {} parameters, but prepared statement \"{statement_name}\" requires 0",
                        message.parameters.len()
                    ),
                )
                .into());
            }
            None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
        }
        client
            .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
            .await?;
        Ok(())
    }

    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let (params, fields) = match message.target_type {
            b'S' => match client.portal_store().get_statement(name) {
                Some(Entry::Value(stmt)) => {
                    let r = self.do_describe_statement(client, &stmt).await?;
                    (Some(r.parameters), r.fields)
                }
                Some(Entry::Empty) => (Some(Vec::new()), Vec::new()),
                None => return Err(PgWireError::StatementNotFound(name.to_owned())),
            },
            b'P' => match client.portal_store().get_portal(name) {
                Some(Entry::Value(portal)) => {
                    (None, self.do_describe_portal(client, &portal).await?.fields)
                }
                Some(Entry::Empty) => (None, Vec::new()),
                None => return Err(PgWireError::PortalNotFound(name.to_owned())),
            },
            other => return Err(PgWireError::InvalidTargetType(other)),
        };
        if let Some(params) = params {
            let oids = params.iter().map(Type::oid).collect();
            client
                .feed(PgWireBackendMessage::ParameterDescription(
                    ParameterDescription::new(oids),
                ))
                .await?;
        }
        if fields.is_empty() {
            client
                .feed(PgWireBackendMessage::NoData(NoData::new()))
                .await?;
        } else {
            let desc = RowDescription::new(fields.iter().map(Into::into).collect());
            client
                .feed(PgWireBackendMessage::RowDescription(desc))
                .await?;
        }
        Ok(())
    }

    /// Execute with every reply fed (one write at Sync). A portal asked for part of its
    /// rows (`max_rows > 0`) goes through pgwire's own execution, which keeps it suspended.
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let portal_name = message.name.as_deref().unwrap_or(DEFAULT_NAME).to_owned();
        let portal = match client.portal_store().get_portal(&portal_name) {
            Some(Entry::Value(p)) if message.max_rows == 0 => p,
            _ => return self._on_execute(client, message).await,
        };
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        let mut status = client.transaction_status();
        client.set_state(PgWireConnectionState::QueryInProgress);
        let response = ExtendedQueryHandler::do_query(self, client, &portal, 0).await;
        if response.is_err() {
            client.set_state(PgWireConnectionState::ReadyForQuery);
        }
        match response? {
            Response::Query(mut results) => {
                let tag = results.command_tag().to_owned();
                let mut n = 0;
                while let Some(row) = results.data_rows().next().await {
                    client.feed(PgWireBackendMessage::DataRow(row?)).await?;
                    n += 1;
                }
                let done = Tag::new(&tag).with_rows(n);
                client
                    .feed(PgWireBackendMessage::CommandComplete(done.into()))
                    .await?;
            }
            Response::EmptyQuery => {
                client
                    .feed(PgWireBackendMessage::EmptyQueryResponse(
                        EmptyQueryResponse::new(),
                    ))
                    .await?;
            }
            Response::Execution(tag) => {
                client
                    .feed(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
            }
            Response::TransactionStart(tag) => {
                client
                    .feed(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
                status = status.to_in_transaction_state();
            }
            Response::TransactionEnd(tag) => {
                client
                    .feed(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
                status = status.to_idle_state();
                client.portal_store().rm_portal(DEFAULT_NAME);
            }
            Response::Error(e) => {
                client
                    .feed(PgWireBackendMessage::ErrorResponse((*e).into()))
                    .await?;
                status = status.to_error_state();
            }
            Response::CopyIn(result) => {
                client.set_state(PgWireConnectionState::CopyInProgress(true));
                pgwire::api::copy::send_copy_in_response(client, result).await?;
                return Ok(());
            }
            Response::CopyOut(_) | Response::CopyBoth(_) => {
                return Err(SqlError::unsupported("COPY TO").into());
            }
        }
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        Ok(())
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Arc<Prepared>>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &portal.statement.statement;
        let cell = session(client)?;
        let mut s = cell.lock().await;
        let (pid, key) = client.pid_and_secret_key();
        s.register_cancel(pid, &key);
        let params = bind_params(portal)?;
        let current = s.catalog().inspect_err(|_| s.fail_transaction())?;
        let plan = match (&prepared.stmt, &prepared.plan) {
            // The plan made at Parse, while the tables are the same.
            (Some(_), Ok(p))
                if prepared
                    .catalog
                    .as_ref()
                    .is_some_and(|c| Arc::ptr_eq(c, &current)) =>
            {
                p.clone()
            }
            // Planned again: the schema changed since Parse.
            (Some(stmt), Ok(_)) => match s.plan(stmt) {
                Ok(p) => p,
                Err(e) => {
                    s.fail_transaction();
                    return Err(e.into());
                }
            },
            (None, Ok(p @ Plan::Catalog { .. })) => p.clone(),
            (None, _) => Plan::Empty,
            (_, Err(e)) => return Err(e.clone().into()),
        };
        let outcome = s.execute(&plan, &params).await?;
        response(outcome, Some(&portal.result_column_format))
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        stmt: &StoredStatement<Arc<Prepared>>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let p = &stmt.statement;
        let params = (0..p.param_count()).map(|i| p.param_type(i)).collect();
        let columns = p.plan.as_ref().map(result_columns).unwrap_or_default();
        Ok(DescribeStatementResponse::new(
            params,
            fields(&columns, None),
        ))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Arc<Prepared>>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let p = &portal.statement.statement;
        let columns = p.plan.as_ref().map(result_columns).unwrap_or_default();
        Ok(DescribePortalResponse::new(fields(
            &columns,
            Some(&portal.result_column_format),
        )))
    }
}

/// A portal's parameters as values: text ones typed where used, binary ones decoded by
/// their declared (or inferred) type.
fn bind_params(portal: &Portal<Arc<Prepared>>) -> Result<Vec<Param>, SqlError> {
    let p = &portal.statement.statement;
    portal
        .parameters
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let Some(bytes) = raw else {
                return Ok(Param::Null);
            };
            if format_at(&portal.parameter_format, i) == FieldFormat::Text {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    SqlError::new("22021", format!("parameter ${} is not valid UTF-8", i + 1))
                })?;
                return Ok(Param::Text(text.to_owned()));
            }
            decode_binary(bytes, &p.param_type(i), i + 1)
        })
        .collect()
}

/// A binary-format parameter.
fn decode_binary(b: &[u8], ty: &Type, n: usize) -> Result<Param, SqlError> {
    let bad = || {
        SqlError::new(
            "22P03",
            format!("incorrect binary data format in bind parameter {n}"),
        )
    };
    let int = |len: usize| -> Result<i64, SqlError> {
        if b.len() != len {
            return Err(bad());
        }
        Ok(match len {
            2 => i64::from(i16::from_be_bytes([b[0], b[1]])),
            4 => i64::from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            _ => i64::from_be_bytes(b.try_into().map_err(|_| bad())?),
        })
    };
    Ok(match *ty {
        Type::INT2 => Param::Typed(Edn::Integer(int(2)?), SqlType::Int2),
        Type::INT4 => Param::Typed(Edn::Integer(int(4)?), SqlType::Int4),
        Type::INT8 => Param::Typed(Edn::Integer(int(8)?), SqlType::Int8),
        Type::FLOAT4 => Param::Typed(
            Edn::Float(f64::from(f32::from_bits(int(4)? as u32))),
            SqlType::Float4,
        ),
        Type::FLOAT8 => Param::Typed(Edn::Float(f64::from_bits(int(8)? as u64)), SqlType::Float8),
        Type::BOOL if b.len() == 1 => Param::Typed(Edn::Bool(b[0] != 0), SqlType::Bool),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let micros = int(8)?;
            let ty = if *ty == Type::TIMESTAMP {
                SqlType::Timestamp
            } else {
                SqlType::Timestamptz
            };
            Param::Typed(Edn::Inst(micros.div_euclid(1000) + PG_EPOCH_MS), ty)
        }
        Type::UUID if b.len() == 16 => Param::Typed(
            Edn::Uuid(u128::from_be_bytes(b.try_into().map_err(|_| bad())?)),
            SqlType::Uuid,
        ),
        Type::BYTEA => Param::Typed(
            Edn::Tagged(
                vev::Symbol::new("bytes"),
                Box::new(Edn::String(b.iter().map(|x| format!("{x:02x}")).collect())),
            ),
            SqlType::Bytea,
        ),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            Param::Text(String::from_utf8(b.to_vec()).map_err(|_| bad())?)
        }
        ref other => {
            return Err(SqlError::unsupported(format!(
                "a binary parameter of type {other}"
            )))
        }
    })
}

/// Milliseconds from the Unix epoch to PostgreSQL's (2000-01-01).
const PG_EPOCH_MS: i64 = 946_684_800_000;

/// A result value of a column type, in either wire format.
#[derive(Debug)]
struct Cell<'a>(&'a Edn, SqlType);

impl ToSql for Cell<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let Cell(v, ty) = self;
        if crate::sqlfns::is_null_edn(v) {
            return Ok(IsNull::Yes);
        }
        let out_of_range = || -> Box<dyn std::error::Error + Sync + Send> {
            format!("value {v} out of range for {}", ty.display()).into()
        };
        match (ty, v) {
            (SqlType::Int2, Edn::Integer(n)) => {
                out.put_i16(i16::try_from(*n).map_err(|_| out_of_range())?)
            }
            (SqlType::Int4, Edn::Integer(n)) => {
                out.put_i32(i32::try_from(*n).map_err(|_| out_of_range())?)
            }
            (SqlType::Int8, Edn::Integer(n)) => out.put_i64(*n),
            (SqlType::Float4, Edn::Float(f)) => out.put_f32(*f as f32),
            (SqlType::Float4, Edn::Integer(n)) => out.put_f32(*n as f32),
            (SqlType::Float8, Edn::Float(f)) => out.put_f64(*f),
            (SqlType::Float8, Edn::Integer(n)) => out.put_f64(*n as f64),
            (SqlType::Bool, Edn::Bool(b)) => out.put_u8(u8::from(*b)),
            (SqlType::Timestamp | SqlType::Timestamptz, Edn::Inst(ms)) => {
                out.put_i64((ms - PG_EPOCH_MS) * 1000)
            }
            (SqlType::Uuid, Edn::Uuid(u)) => out.put_u128(*u),
            (SqlType::Bytea, Edn::Tagged(_, inner)) => match &**inner {
                Edn::String(hex) => {
                    for i in (0..hex.len()).step_by(2) {
                        out.put_u8(u8::from_str_radix(&hex[i..i + 2], 16)?);
                    }
                }
                _ => return Err("bytes value is not hex".into()),
            },
            (SqlType::Numeric, v) => {
                numeric_binary(&crate::types::edn_to_text(v, *ty).unwrap_or_default(), out)?
            }
            (t, v) if t.is_text() => out.extend_from_slice(
                crate::types::edn_to_text(v, *t)
                    .unwrap_or_default()
                    .as_bytes(),
            ),
            (t, v) => return Err(format!("cannot send {v} as {}", t.display()).into()),
        }
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    postgres_types::to_sql_checked!();
}

impl ToSqlText for Cell<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _options: &FormatOptions,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match crate::types::edn_to_text(self.0, self.1) {
            None => Ok(IsNull::Yes),
            Some(s) => {
                out.extend_from_slice(s.as_bytes());
                Ok(IsNull::No)
            }
        }
    }
}

/// PostgreSQL's binary `numeric`: base-10000 digits with a weight, a sign and a scale.
fn numeric_binary(
    text: &str,
    out: &mut BytesMut,
) -> Result<(), Box<dyn std::error::Error + Sync + Send>> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(format!("cannot send {text} as numeric").into());
    }
    let int = int.trim_start_matches('0');
    let pad_int = (4 - int.len() % 4) % 4;
    let int_digits: String = "0".repeat(pad_int) + int;
    let pad_frac = (4 - frac.len() % 4) % 4;
    let frac_digits: String = frac.to_owned() + &"0".repeat(pad_frac);
    let groups: Vec<i16> = int_digits
        .as_bytes()
        .chunks(4)
        .chain(frac_digits.as_bytes().chunks(4))
        .map(|c| {
            std::str::from_utf8(c)
                .unwrap_or("0")
                .parse::<i16>()
                .unwrap_or(0)
        })
        .collect();
    let weight = (int_digits.len() / 4) as i16 - 1;
    // Trailing zero groups need not be sent; leading ones shift the weight.
    let first = groups.iter().position(|g| *g != 0);
    let last = groups.iter().rposition(|g| *g != 0);
    let (groups, weight) = match (first, last) {
        (Some(f), Some(l)) => (&groups[f..=l], weight - f as i16),
        _ => (&groups[..0], 0),
    };
    out.put_i16(groups.len() as i16);
    out.put_i16(weight);
    out.put_u16(if neg && !groups.is_empty() { 0x4000 } else { 0 });
    out.put_i16(frac.len() as i16);
    for g in groups {
        out.put_i16(*g);
    }
    Ok(())
}

#[async_trait]
impl CopyHandler for Handlers {
    async fn on_copy_data<C>(&self, client: &mut C, data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        session(client)?.lock().await.copy_data(&data.data);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let cell = session(client)?;
        let outcome = cell.lock().await.copy_done().await?;
        if let Outcome::Command(tag) = outcome {
            client
                .send(PgWireBackendMessage::CommandComplete(Tag::new(&tag).into()))
                .await?;
        }
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Ok(cell) = session(client) {
            cell.lock().await.copy_fail();
        }
        SqlError::new("57014", format!("COPY from stdin failed: {}", fail.message)).into()
    }
}

/// What `process_socket` takes: every handler is the one shared `Handlers`.
pub struct Factory(pub Arc<Handlers>);

impl PgWireServerHandlers for Factory {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.0.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.0.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.0.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.0.clone()
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::new(crate::cancel::Handler(self.0.shared.cancels.clone()))
    }
}
