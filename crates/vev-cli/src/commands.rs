//! The commands that work on a database file: transact, query, pull, datoms, log, schema,
//! stats, verify. `vev repl` reuses `run_query`, `report_edn` and `view`.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use vev::{
    Attribute, Component, Connection, Datom, Db, Edn, EntityId, IndexOrder, Keyword, LockMode,
    OpenOptions, Query, ResultKind, TempId, TimePoint, Value,
};

use crate::error::{CliError, CliResult, WithSource};
use crate::output::{self, Format, Rows};
use crate::{Index, TimeArgs};

fn stdout() -> BufWriter<io::StdoutLock<'static>> {
    BufWriter::new(io::stdout().lock())
}

/// Open a database file that must exist, read-only (no writer lock). A `postgres://` URL
/// opens a database stored in PostgreSQL (read only, without the writer lease).
pub fn open_read(path: &Path) -> CliResult<Connection> {
    if !is_storage_url(path) && !path.exists() {
        return Err(CliError::Argument {
            code: "cli/not-found",
            message: format!("database file {} does not exist", path.display()),
        });
    }
    Ok(Connection::open_with(path, &OpenOptions::read_only())?)
}

/// Whether the database argument is a storage URL (`postgres://...`, `s3://...`) rather
/// than a file.
pub fn is_storage_url(path: &Path) -> bool {
    path.to_str().is_some_and(vev::is_storage_url)
}

/// `@FILE` is read from FILE; anything else is the text itself. Returns (name, text).
fn text_arg(arg: &str, what: &str) -> CliResult<(String, String)> {
    match arg.strip_prefix('@') {
        Some(file) => Ok((file.to_string(), read_file(file)?)),
        None => Ok((what.to_string(), arg.to_string())),
    }
}

pub fn read_file(path: &str) -> CliResult<String> {
    let bytes = std::fs::read(path).map_err(|err| CliError::Io {
        path: path.to_string(),
        err,
    })?;
    crate::error::utf8_text(path, bytes)
}

fn read_input(file: Option<&str>) -> CliResult<(String, String)> {
    match file {
        None | Some("-") => {
            let mut bytes = Vec::new();
            io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|err| CliError::Io {
                    path: "stdin".into(),
                    err,
                })?;
            Ok(("stdin".into(), crate::error::utf8_text("stdin", bytes)?))
        }
        Some(path) => Ok((path.to_string(), read_file(path)?)),
    }
}

/// A time point as the flags and the REPL take it: a basis-t, a transaction id or an instant
/// (`TimePoint::parse`).
pub fn time_point(arg: &str) -> CliResult<TimePoint> {
    Ok(TimePoint::parse(arg).map_err(vev::Error::from)?)
}

/// The database value the time flags select.
pub fn view(db: Db, time: &TimeArgs) -> CliResult<Db> {
    let mut db = db;
    if let Some(t) = &time.as_of {
        db = db.as_of(time_point(t)?);
    }
    if let Some(t) = &time.since {
        db = db.since(time_point(t)?);
    }
    if time.history {
        db = db.history();
    }
    Ok(db)
}

pub fn kw(s: &str) -> Edn {
    Edn::Keyword(Keyword::new(s))
}

pub fn report_edn(report: &vev::TxReport) -> Edn {
    let mut tempids = BTreeMap::new();
    for (temp, id) in &report.tempids {
        let key = match temp {
            TempId::Str(s) => Edn::String(s.to_string()),
            TempId::Num(n) => Edn::Integer(*n),
            TempId::Tx => Edn::String("datomic.tx".into()),
            _ => continue,
        };
        tempids.insert(key, Edn::Integer(*id as i64));
    }
    Edn::Map(BTreeMap::from([
        (
            kw("basis-t"),
            Edn::Integer(report.db_after.basis_t() as i64),
        ),
        (kw("tx"), Edn::Integer(report.tx() as i64)),
        (kw("tempids"), Edn::Map(tempids)),
        (kw("datoms"), Edn::Integer(report.tx_data.len() as i64)),
    ]))
}

/// Open a database file as its writer (created if missing); `lock` says what to do when
/// another process holds the writer lock (`--wait`).
pub fn open_write(path: &Path, lock: LockMode) -> CliResult<Connection> {
    let opts = OpenOptions {
        lock,
        ..OpenOptions::default()
    };
    Ok(Connection::open_with(path, &opts)?)
}

pub fn transact(path: &Path, file: Option<&str>, batch: bool, lock: LockMode) -> CliResult<()> {
    if batch {
        return crate::batch::transact_stream(path, file, lock);
    }
    let (name, text) = read_input(file)?;
    let conn = open_write(path, lock)?;
    let mut out = stdout();
    let report = conn.transact_edn(&text).in_text(&name, &text, 0)?;
    writeln!(out, "{}", report_edn(&report))?;
    Ok(out.flush()?)
}

pub struct QueryArgs<'a> {
    pub query: &'a str,
    pub inputs: &'a [String],
    pub time: &'a TimeArgs,
    pub format: Format,
    pub explain: bool,
    pub timing: bool,
}

/// Column names: the `:keys` names, or each `:find` element as written.
fn query_header(query: &Query, text: &str) -> Vec<String> {
    use vev::query_ast::FindElem;
    let ast = query.ast();
    if let Some(maps) = &ast.return_maps {
        return maps.names.iter().map(|n| n.as_str().to_string()).collect();
    }
    ast.find
        .elems()
        .iter()
        .map(|e| {
            let span = match e {
                FindElem::Var(_, span)
                | FindElem::Aggregate { span, .. }
                | FindElem::Pull { span, .. } => *span,
            };
            text.get(span.start.offset..span.end.offset)
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

pub fn query(path: &Path, args: &QueryArgs<'_>) -> CliResult<()> {
    let (name, text) = text_arg(args.query, "query")?;
    let query = Query::parse(&text).in_text(&name, &text, 0)?;
    let mut inputs_edn = Vec::with_capacity(args.inputs.len());
    for (i, input) in args.inputs.iter().enumerate() {
        let (name, text) = text_arg(input, &format!("input {}", i + 1))?;
        inputs_edn.push(vev::edn::parse(&text).in_text(&name, &text, 0)?);
    }
    let conn = open_read(path)?;
    let db = view(conn.sync()?, args.time)?;
    let source = QuerySource {
        name: &name,
        text: &text,
        query: &query,
        inputs: &inputs_edn,
    };
    run_query(
        &mut stdout(),
        &db,
        &source,
        args.format,
        args.explain,
        args.timing,
    )
}

/// A parsed query, the text it came from (for carets) and its inputs after `$`.
pub struct QuerySource<'a> {
    pub name: &'a str,
    pub text: &'a str,
    pub query: &'a Query,
    pub inputs: &'a [Edn],
}

/// Run a query against `db` and write its result, or with `explain` the plan that ran, in
/// `format`; with `timing`, the row count and elapsed time go to stderr. Shared by
/// `vev query` and `vev repl`.
pub fn run_query(
    out: &mut impl Write,
    db: &Db,
    source: &QuerySource<'_>,
    format: Format,
    explain: bool,
    timing: bool,
) -> CliResult<()> {
    let (name, text, query) = (source.name, source.text, source.query);
    let mut inputs = vec![vev::Input::Db(db)];
    inputs.extend(source.inputs.iter().map(vev::Input::Edn));
    let started = Instant::now();
    let opts = vev::QueryOptions::default();
    if explain {
        let (result, plan) = query.explain(&inputs, &opts).in_text(name, text, 0)?;
        let elapsed = started.elapsed();
        let header = ["step", "clause", "method", "estimated", "rows", "ms"];
        let mut rows = Rows::new(&mut *out, format, header.map(String::from).to_vec())?;
        for (i, step) in plan.iter().enumerate() {
            rows.row(&[
                Edn::Integer(i as i64 + 1),
                Edn::String(step.clause.clone()),
                Edn::String(step.method.clone()),
                step.estimated_rows
                    .map_or(Edn::Nil, |n| Edn::Integer(n as i64)),
                Edn::Integer(step.actual_rows as i64),
                Edn::Float((step.elapsed.as_secs_f64() * 1e6).round() / 1e3),
            ])?;
        }
        rows.finish()?;
        if timing {
            eprintln!("{} rows in {elapsed:?}", result.len());
        }
        return Ok(());
    }
    let header = query_header(query, text);
    let mut writer = ResultWriter::new(&mut *out, format, query.result_kind(), header)?;
    let streamed = query.run_rows(&inputs, &opts, true, |row| {
        let row = match writer.kind {
            ResultKind::Maps | ResultKind::Map if matches!(format, Format::Edn | Format::Json) => {
                vec![query.row_map(row)]
            }
            _ => row,
        };
        writer.row(row).map_err(StreamError::Io)
    });
    let n = match streamed {
        Ok(n) => n,
        Err(StreamError::Io(e)) => return Err(e.into()),
        Err(StreamError::Query(e)) => return Err(e).in_text(name, text, 0),
    };
    writer.finish()?;
    if timing {
        eprintln!("{n} rows in {:?}", started.elapsed());
    }
    Ok(())
}

/// Why streaming a result stopped: the query failed, or writing did.
enum StreamError {
    Query(vev::QueryError),
    Io(io::Error),
}

impl From<vev::QueryError> for StreamError {
    fn from(e: vev::QueryError) -> StreamError {
        StreamError::Query(e)
    }
}

/// Writes a query result a row at a time, in any format: `edn` and `json` as one value
/// (`#{...}` or `[...]` for sets and collections, one row a line), `table` and `csv` as rows
/// under the `:find` header. Rows of a `:keys` query come as one map for `edn` and `json`
/// and as cells in key order for `table` and `csv`.
struct ResultWriter<W: Write> {
    kind: ResultKind,
    format: Format,
    out: ResultOut<W>,
    count: usize,
}

enum ResultOut<W: Write> {
    Value(W),
    Rows(Rows<W>),
}

impl<W: Write> ResultWriter<W> {
    fn new(out: W, format: Format, kind: ResultKind, header: Vec<String>) -> io::Result<Self> {
        let out = match format {
            Format::Edn | Format::Json => ResultOut::Value(out),
            Format::Table | Format::Csv => ResultOut::Rows(Rows::new(out, format, header)?),
        };
        Ok(ResultWriter {
            kind,
            format,
            out,
            count: 0,
        })
    }

    /// Several rows make one value of a collection; a scalar, tuple or map is the row.
    fn many(&self) -> bool {
        !matches!(
            self.kind,
            ResultKind::Scalar | ResultKind::Tuple | ResultKind::Map
        )
    }

    /// A collection's opening and closing brackets (JSON's opening one ends its line).
    fn brackets(&self) -> (&'static str, &'static str) {
        match (self.format, self.kind) {
            (Format::Json, _) => ("[\n", "\n]"),
            (_, ResultKind::Rel) => ("#{", "}"),
            _ => ("[", "]"),
        }
    }

    fn row(&mut self, row: Vec<Edn>) -> io::Result<()> {
        let first = self.count == 0;
        self.count += 1;
        let (many, kind, json) = (self.many(), self.kind, self.format == Format::Json);
        let (open, _) = self.brackets();
        let out = match &mut self.out {
            ResultOut::Rows(rows) => return rows.row(&row),
            ResultOut::Value(out) => out,
        };
        // One row as one value: a tuple as a vector, a collection's element or a scalar as
        // itself.
        let item = match kind {
            ResultKind::Rel | ResultKind::Bag | ResultKind::Tuple => Edn::Vector(row),
            _ => row.into_iter().next().unwrap_or(Edn::Nil),
        };
        let sep = match (many, first, json) {
            (false, ..) => "",
            (true, true, _) => open,
            (true, false, true) => ",\n",
            (true, false, false) => "\n ",
        };
        if json {
            write!(out, "{sep}{}", output::edn_to_json(&item))
        } else {
            write!(out, "{sep}{item}")
        }
    }

    fn finish(self) -> io::Result<()> {
        let (many, (open, close)) = (self.many(), self.brackets());
        let json = self.format == Format::Json;
        match self.out {
            ResultOut::Rows(rows) => rows.finish(),
            ResultOut::Value(mut out) => {
                match (many, self.count) {
                    (true, 0) => writeln!(out, "{}{}", open.trim_end(), close.trim_start())?,
                    (true, _) => writeln!(out, "{close}")?,
                    (false, 0) => writeln!(out, "{}", if json { "null" } else { "nil" })?,
                    (false, _) => writeln!(out)?,
                }
                out.flush()
            }
        }
    }
}

/// An entity given as an id, an ident or a lookup ref `[:attr value]`.
fn resolve_entity(db: &Db, arg: &str) -> CliResult<EntityId> {
    let form = vev::edn::parse(arg).in_text("entity", arg, 0)?;
    resolve_entity_edn(db, &form)?.ok_or_else(|| CliError::Argument {
        code: "cli/not-found",
        message: format!("no entity {arg}"),
    })
}

fn resolve_entity_edn(db: &Db, form: &Edn) -> CliResult<Option<EntityId>> {
    match form {
        Edn::Integer(n) if *n >= 0 => Ok(Some(*n as EntityId)),
        Edn::Keyword(k) => Ok(db.entid(k)),
        Edn::Vector(items) if items.len() == 2 => {
            let attr = attribute_of(db, &items[0])?;
            if attr.unique.is_none() {
                return Err(CliError::argument(format!(
                    "lookup ref {form}: attribute {} is not :db/unique",
                    attr.ident
                )));
            }
            let value = coerce(db, &attr, &items[1])?;
            Ok(db.entity_with_value(attr.id, &value)?)
        }
        other => Err(CliError::argument(format!(
            "{other} is not an entity id, an ident or a lookup ref"
        ))),
    }
}

fn attribute_of(db: &Db, form: &Edn) -> CliResult<std::sync::Arc<Attribute>> {
    let attr = match form {
        Edn::Keyword(k) => db.attribute(k).cloned(),
        Edn::Integer(n) => db.schema().attribute(*n as EntityId).cloned(),
        _ => None,
    };
    attr.ok_or_else(|| CliError::Argument {
        code: "cli/not-found",
        message: format!("unknown attribute {form}"),
    })
}

fn coerce(db: &Db, attr: &Attribute, form: &Edn) -> CliResult<Value> {
    vev::coerce_value(db, attr, form).ok_or_else(|| {
        CliError::argument(format!(
            "{form} is not a value of {} (type {})",
            attr.ident,
            attr.value_type.ident()
        ))
    })
}

pub fn pull(
    path: &Path,
    pattern: &str,
    entity: &str,
    time: &TimeArgs,
    format: Format,
) -> CliResult<()> {
    let (name, text) = text_arg(pattern, "pattern")?;
    let conn = open_read(path)?;
    let db = view(conn.sync()?, time)?;
    let e = resolve_entity(&db, entity).map_err(crate::error::in_pull)?;
    let pulled = db.pull(&text, e).in_text(&name, &text, 0)?;
    let mut out = stdout();
    if matches!(format, Format::Table | Format::Csv) {
        let (header, cells): (Vec<String>, Vec<Edn>) = match &pulled {
            Edn::Map(m) => m.iter().map(|(k, v)| (output::cell(k), v.clone())).unzip(),
            other => (vec!["value".into()], vec![other.clone()]),
        };
        let mut rows = Rows::new(&mut out, format, header)?;
        rows.row(&cells)?;
        return Ok(rows.finish()?);
    }
    output::write_value(&mut out, format, "", &pulled)?;
    Ok(out.flush()?)
}

/// A datom as `[e :attr v tx added]` (refs as entity ids).
fn datom_row(db: &Db, d: &Datom) -> Vec<Edn> {
    let attr = db
        .ident(d.a)
        .map_or(Edn::Integer(d.a as i64), |k| Edn::Keyword(k.clone()));
    vec![
        Edn::Integer(d.e as i64),
        attr,
        d.v.to_edn(),
        Edn::Integer(d.tx as i64),
        Edn::Bool(d.added),
    ]
}

/// The index prefix from the components as given, in the index's order.
fn prefix(db: &Db, index: Index, components: &[String]) -> CliResult<Vec<Component>> {
    #[derive(Clone, Copy)]
    enum Pos {
        E,
        A,
        V,
        T,
    }
    let order = match index {
        Index::Eavt => [Pos::E, Pos::A, Pos::V, Pos::T],
        Index::Aevt => [Pos::A, Pos::E, Pos::V, Pos::T],
        Index::Avet => [Pos::A, Pos::V, Pos::E, Pos::T],
        Index::Vaet => [Pos::V, Pos::A, Pos::E, Pos::T],
    };
    if components.len() > 4 {
        return Err(CliError::argument(
            "an index prefix has at most 4 components",
        ));
    }
    let forms = components
        .iter()
        .enumerate()
        .map(|(i, c)| vev::edn::parse(c).in_text(&format!("component {}", i + 1), c, 0))
        .collect::<CliResult<Vec<Edn>>>()?;
    // The attribute, when given, types the value.
    let attr = match order.iter().position(|p| matches!(p, Pos::A)) {
        Some(i) if i < forms.len() => Some(attribute_of(db, &forms[i])?),
        _ => None,
    };
    let entity = |form: &Edn| -> CliResult<EntityId> {
        resolve_entity_edn(db, form)?.ok_or_else(|| CliError::Argument {
            code: "cli/not-found",
            message: format!("no entity {form}"),
        })
    };
    let mut out = Vec::with_capacity(forms.len());
    for (pos, form) in order.iter().zip(&forms) {
        out.push(match pos {
            Pos::E | Pos::T => Component::Entity(entity(form)?),
            Pos::A => Component::Entity(attr.as_ref().map_or(0, |a| a.id)),
            Pos::V => match &attr {
                _ if matches!(index, Index::Vaet) => Component::Entity(entity(form)?),
                Some(a) if a.is_ref() => Component::Entity(entity(form)?),
                Some(a) => Component::Value(coerce(db, a, form)?),
                None => Component::Value(untyped_value(form)?),
            },
        });
    }
    Ok(out)
}

fn untyped_value(form: &Edn) -> CliResult<Value> {
    Ok(match form {
        Edn::String(s) => Value::String(s.as_str().into()),
        Edn::Integer(n) => Value::Long(*n),
        Edn::Bool(b) => Value::Boolean(*b),
        Edn::Keyword(k) => Value::Keyword(k.clone()),
        Edn::Float(f) => Value::Double(*f),
        Edn::Inst(ms) => Value::Instant(*ms),
        other => {
            return Err(CliError::argument(format!(
                "give the attribute before value {other}"
            )))
        }
    })
}

pub fn datoms(
    path: &Path,
    index: Index,
    components: &[String],
    time: &TimeArgs,
    format: Format,
    limit: Option<usize>,
) -> CliResult<()> {
    let conn = open_read(path)?;
    let db = view(conn.sync()?, time)?;
    let prefix = prefix(&db, index, components)?;
    let order = match index {
        Index::Eavt => IndexOrder::Eavt,
        Index::Aevt => IndexOrder::Aevt,
        Index::Avet => IndexOrder::Avet,
        Index::Vaet => IndexOrder::Vaet,
    };
    let header = ["e", "a", "v", "tx", "added"].map(String::from).to_vec();
    let mut rows = Rows::new(stdout(), format, header)?;
    for d in db.datoms(order, &prefix).take(limit.unwrap_or(usize::MAX)) {
        rows.row(&datom_row(&db, &d?))?;
    }
    Ok(rows.finish()?)
}

pub fn log(path: &Path, from: Option<&str>, to: Option<&str>, format: Format) -> CliResult<()> {
    let conn = open_read(path)?;
    let db = conn.sync()?;
    let bound = |arg: Option<&str>| -> CliResult<Option<u64>> {
        arg.map(|a| Ok(db.log_t_of(time_point(a)?)?)).transpose()
    };
    let (from, to) = (bound(from)?, bound(to)?);
    let header = ["t", "e", "a", "v", "added"].map(String::from).to_vec();
    let mut rows = Rows::new(stdout(), format, header)?;
    for entry in db.tx_range(from, to)? {
        for d in &entry.datoms {
            let [e, a, v, _, added]: [Edn; 5] = datom_row(&db, d)
                .try_into()
                .unwrap_or_else(|_| unreachable!("datom_row has five cells"));
            rows.row(&[Edn::Integer(entry.t as i64), e, a, v, added])?;
        }
    }
    Ok(rows.finish()?)
}

/// The installed attributes sorted by ident: the user's, and Vev's own with `system`.
pub fn attributes(db: &Db, system: bool) -> Vec<std::sync::Arc<Attribute>> {
    let own = vev::Schema::system();
    let mut attrs: Vec<_> = db
        .schema()
        .attributes()
        .filter(|a| system || own.attribute(a.id).is_none())
        .cloned()
        .collect();
    attrs.sort_by(|a, b| a.ident.cmp(&b.ident));
    attrs
}

pub fn attribute_edn(attr: &Attribute) -> Edn {
    let mut m = BTreeMap::from([
        (kw("db/ident"), Edn::Keyword(attr.ident.clone())),
        (kw("db/valueType"), Edn::Keyword(attr.value_type.ident())),
        (
            kw("db/cardinality"),
            kw(if attr.is_many() {
                "db.cardinality/many"
            } else {
                "db.cardinality/one"
            }),
        ),
    ]);
    if let Some(u) = attr.unique {
        let unique = match u {
            vev::Unique::Identity => "db.unique/identity",
            vev::Unique::Value => "db.unique/value",
        };
        m.insert(kw("db/unique"), kw(unique));
    }
    for (flag, name) in [
        (attr.index, "db/index"),
        (attr.is_component, "db/isComponent"),
        (attr.no_history, "db/noHistory"),
        (attr.fulltext, "db/fulltext"),
    ] {
        if flag {
            m.insert(kw(name), Edn::Bool(true));
        }
    }
    Edn::Map(m)
}

pub fn schema(path: &Path, system: bool, format: Format) -> CliResult<()> {
    let conn = open_read(path)?;
    let db = conn.sync()?;
    let attrs = attributes(&db, system);
    let mut out = stdout();
    match format {
        Format::Edn => {
            let maps: Vec<String> = attrs.iter().map(|a| attribute_edn(a).to_string()).collect();
            writeln!(out, "[{}]", maps.join("\n "))?;
        }
        Format::Json => {
            let all = Edn::Vector(attrs.iter().map(|a| attribute_edn(a)).collect());
            output::write_value(&mut out, format, "", &all)?;
        }
        Format::Table | Format::Csv => {
            let header = ["ident", "valueType", "cardinality", "unique", "flags"];
            let mut rows = Rows::new(&mut out, format, header.map(String::from).to_vec())?;
            for a in &attrs {
                let Edn::Map(m) = attribute_edn(a) else {
                    continue;
                };
                let get = |k: &str| m.get(&kw(k)).cloned().unwrap_or(Edn::Nil);
                let flags: Vec<&str> = [
                    (a.index, "index"),
                    (a.is_component, "component"),
                    (a.no_history, "noHistory"),
                    (a.fulltext, "fulltext"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| *n)
                .collect();
                rows.row(&[
                    get("db/ident"),
                    get("db/valueType"),
                    get("db/cardinality"),
                    m.get(&kw("db/unique"))
                        .cloned()
                        .unwrap_or(Edn::String(String::new())),
                    Edn::String(flags.join(" ")),
                ])?;
            }
            rows.finish()?;
        }
    }
    Ok(out.flush()?)
}

fn size_on_disk(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .map(|suffix| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            std::fs::metadata(p).map_or(0, |m| m.len())
        })
        .sum()
}

pub fn stats(path: &Path, format: Format) -> CliResult<()> {
    let conn = open_read(path)?;
    let db = conn.sync()?;
    let datoms = db.count(IndexOrder::Eavt, &[])?;
    let mut entities = 0u64;
    let mut last = None;
    for d in db.datoms(IndexOrder::Eavt, &[]) {
        let d = d?;
        if last != Some(d.e) {
            entities += 1;
            last = Some(d.e);
        }
    }
    let attrs = attributes(&db, false);
    let per_attr: BTreeMap<Edn, Edn> = attrs
        .iter()
        .map(|a| {
            let n = db.count(IndexOrder::Aevt, &[Component::Entity(a.id)])?;
            Ok((Edn::Keyword(a.ident.clone()), Edn::Integer(n as i64)))
        })
        .collect::<Result<_, vev::StorageError>>()?;
    let summary = [
        ("basis-t", db.basis_t() as i64),
        ("datoms", datoms as i64),
        ("entities", entities as i64),
        ("attributes", attrs.len() as i64),
        ("size-bytes", size_on_disk(path) as i64),
    ];
    let ft = db.fulltext_stats();
    let fulltext = [
        ("segments-written", ft.segments_written),
        ("manifest-appends", ft.manifest_appends),
        ("live-segments", ft.live_segments),
        ("compactions", ft.compactions),
        ("bytes-written", ft.bytes_written),
        ("documents", ft.documents),
        ("deleted-documents", ft.deleted_documents),
    ];
    let mut out = stdout();
    match format {
        Format::Edn | Format::Json => {
            let mut m: BTreeMap<Edn, Edn> = summary
                .iter()
                .map(|(k, v)| (kw(k), Edn::Integer(*v)))
                .collect();
            m.insert(kw("attribute-datoms"), Edn::Map(per_attr));
            let ft: BTreeMap<Edn, Edn> = fulltext
                .iter()
                .map(|(k, v)| (kw(k), Edn::Integer(*v as i64)))
                .collect();
            m.insert(kw("fulltext"), Edn::Map(ft));
            output::write_value(&mut out, format, "", &Edn::Map(m))?;
        }
        Format::Table | Format::Csv => {
            let header = vec!["stat".to_string(), "value".to_string()];
            let mut rows = Rows::new(&mut out, format, header)?;
            for (k, v) in summary {
                rows.row(&[Edn::String(k.into()), Edn::Integer(v)])?;
            }
            for (k, v) in per_attr {
                rows.row(&[Edn::String(k.to_string()), v])?;
            }
            for (k, v) in fulltext {
                rows.row(&[Edn::String(format!("fulltext {k}")), Edn::Integer(v as i64)])?;
            }
            rows.finish()?;
        }
    }
    Ok(out.flush()?)
}

pub fn verify(path: &Path) -> CliResult<()> {
    let conn = open_read(path)?;
    let report = conn.verify()?;
    let mut out = stdout();
    if let Some(r) = report {
        let m = BTreeMap::from([
            (kw("ok"), Edn::Bool(true)),
            (kw("log-rows"), Edn::Integer(r.log_rows as i64)),
            (kw("log-datoms"), Edn::Integer(r.log_datoms as i64)),
            (kw("segments"), Edn::Integer(r.segments as i64)),
            (
                kw("garbage-segments"),
                Edn::Integer(r.garbage_segments as i64),
            ),
            (kw("index-datoms"), Edn::Integer(r.index_datoms as i64)),
            (
                kw("fulltext-segments"),
                Edn::Integer(r.fulltext_segments as i64),
            ),
            (
                kw("fulltext-garbage-segments"),
                Edn::Integer(r.fulltext_garbage_segments as i64),
            ),
            (
                kw("fulltext-documents"),
                Edn::Integer(r.fulltext_documents as i64),
            ),
        ]);
        writeln!(out, "{}", Edn::Map(m))?;
    }
    Ok(out.flush()?)
}

/// `vev serve`: the PostgreSQL server on the database, until SIGTERM or SIGINT; then every
/// connection is closed and the database checkpointed.
pub fn serve(args: crate::ServeArgs, lock: LockMode) -> CliResult<()> {
    let path = args.db.as_path();
    let mut opts = OpenOptions {
        lock,
        ..OpenOptions::default()
    };
    if let Some(n) = args.cache_datoms {
        opts.cache_datoms_max = n;
    }
    let conn = Connection::open_with(path, &opts)?;
    let listen = std::net::SocketAddr::new(args.listen, args.port);
    let opts = vev_pg::ServeOptions {
        listen,
        password: args.password,
    };
    let server = vev_pg::Server::start(conn.clone(), &opts).map_err(|e| CliError::Argument {
        code: e.code(),
        message: e.to_string(),
    })?;
    println!(
        "vev serve: {} on postgresql://{}/ (psql -h {} -p {} -U vev)",
        path.display(),
        server.local_addr(),
        server.local_addr().ip(),
        server.local_addr().port()
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let Some(signal) = server.wait_for_signal() else {
        return Ok(());
    };
    // Every session is closed: checkpoint, so that the next start replays no log.
    println!("vev serve: {signal}: connections closed, checkpointing");
    let _ = std::io::stdout().flush();
    conn.checkpoint()?;
    println!("vev serve: stopped");
    Ok(())
}
