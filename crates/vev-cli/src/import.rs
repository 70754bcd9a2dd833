//! `vev import`: EDN transaction streams (what `export` writes), JSON Lines and CSV, loaded
//! through `Connection::bulk_load`.
//!
//! The whole file is read and turned into transactions before the first is committed, so a
//! record that cannot be read or typed by the schema stops the import with nothing written
//! and an error naming its line and column. A transaction the transactor refuses (a unique
//! conflict, say) stops the import where it is: `bulk_load` keeps the write batches committed
//! before it, and the error says how many transactions those were.
//!
//! JSON Lines and CSV records are grouped into transactions of `batch_records` records; an
//! EDN stream keeps its transactions as written (one top-level vector each), since tempids
//! and `"datomic.tx"` are scoped to one. `bulk_load` writes either in large write batches.

use std::cell::Cell;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use vev::{Connection, Db, Edn, EntityRef, Keyword, TxMap, TxOp, TxValue};

use crate::commands::{kw, read_file};
use crate::error::{CliError, CliResult, InputError, InputErrorKind, WithSource};
use crate::export;
use crate::typed;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// EDN transactions, one top-level vector each (what `vev export` writes).
    Edn,
    /// JSON Lines: one object of attributes a line.
    Jsonl,
    /// CSV with a header row of attributes.
    Csv,
}

pub struct ImportArgs<'a> {
    pub file: &'a str,
    pub format: Option<InputFormat>,
    pub attr_prefix: Option<&'a str>,
    pub batch_records: usize,
    /// What to do when another process holds the writer lock (`--wait`).
    pub lock: vev::LockMode,
}

/// The transactions to load and where each came from.
struct Parsed {
    txs: Vec<Vec<TxOp>>,
    origins: Vec<Origin>,
    /// An export's header.
    header: Option<Edn>,
}

/// Where a transaction starts in the file: its byte offset and first and last lines.
#[derive(Clone, Copy)]
struct Origin {
    offset: usize,
    first_line: usize,
    last_line: usize,
}

fn detect(file: &str) -> Option<InputFormat> {
    let ext = Path::new(file).extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "edn" => Some(InputFormat::Edn),
        "jsonl" | "ndjson" => Some(InputFormat::Jsonl),
        "csv" => Some(InputFormat::Csv),
        _ => None,
    }
}

pub fn import(path: &Path, args: &ImportArgs<'_>) -> CliResult<()> {
    let format = match args.format.or_else(|| detect(args.file)) {
        Some(f) => f,
        None => {
            return Err(CliError::argument(format!(
                "cannot tell the format of {} from its extension (.edn, .jsonl, .ndjson, .csv): \
                 give --format edn|jsonl|csv",
                args.file
            )))
        }
    };
    let text = read_file(args.file)?;
    let conn = crate::commands::open_write(path, args.lock)?;
    let db = conn.db();
    let progress = Progress::new();
    let parsed = match format {
        InputFormat::Edn => edn_stream(args.file, &text)?,
        InputFormat::Jsonl => json_lines(&db, args, &text, &progress)?,
        InputFormat::Csv => csv(&db, args, &text, &progress)?,
    };
    if parsed.header.is_some() && db.basis_t() != 0 {
        return Err(CliError::Argument {
            code: "import/not-empty",
            message: format!(
                "{} is an export, which keeps its entity ids and needs an empty database; \
                 {} is at basis-t {}",
                args.file,
                path.display(),
                db.basis_t()
            ),
        });
    }
    let loaded = load(&conn, &parsed, args.file, &text, &progress)?;
    progress.bar.finish_and_clear();
    let db = conn.db();
    if let Some(header) = &parsed.header {
        check_header(&db, header)?;
    }
    println!(
        "{}",
        Edn::Map(
            [
                (kw("basis-t"), Edn::Integer(db.basis_t() as i64)),
                (kw("txs"), Edn::Integer(loaded.txs as i64)),
                (kw("datoms"), Edn::Integer(loaded.datoms as i64)),
            ]
            .into_iter()
            .collect()
        )
    );
    Ok(())
}

/// A progress bar on stderr that appears once a phase has taken a second, and only on a
/// terminal.
struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: Cell<bool>,
    terminal: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            bar: ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()),
            started: Instant::now(),
            shown: Cell::new(false),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn phase(&self, len: u64, template: &str) {
        self.bar.set_length(len);
        self.bar.set_position(0);
        self.bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }

    fn set(&self, pos: u64) {
        if !self.shown.get() && self.terminal && self.started.elapsed() > Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown.set(true);
        }
        self.bar.set_position(pos);
    }
}

fn load(
    conn: &Connection,
    parsed: &Parsed,
    file: &str,
    text: &str,
    progress: &Progress,
) -> CliResult<vev::BulkProgress> {
    let total = parsed.txs.len();
    progress.phase(
        total as u64,
        "loading {bar:40} {pos}/{len} transactions ({elapsed}) {msg}",
    );
    let t_before = conn.db().basis_t();
    // bulk_load takes one transaction at a time and applies it before it takes the next, so
    // the last one handed over is the one an error is about.
    let fed = Cell::new(0usize);
    let txs = parsed.txs.iter().enumerate().map(|(i, ops)| {
        fed.set(i);
        progress.set(i as u64);
        ops.clone()
    });
    let result = conn.bulk_load(txs, &mut |p| {
        progress
            .bar
            .set_message(format!("{} datoms committed", p.datoms));
    });
    let err = match result {
        Ok(done) => return Ok(done),
        Err(err) => err,
    };
    progress.bar.finish_and_clear();
    let committed = conn.db().basis_t().saturating_sub(t_before);
    let origin = parsed.origins[fed.get()];
    let lines = if origin.first_line == origin.last_line {
        format!("line {}", origin.first_line)
    } else {
        format!("lines {}-{}", origin.first_line, origin.last_line)
    };
    let note = format!(
        "the transaction of {lines} (transaction {} of {total}) failed; the database keeps \
         the {committed} transactions committed before it",
        fed.get() + 1
    );
    let err = Err::<(), _>(err)
        .in_form(file, text, origin.offset)
        .unwrap_err();
    Err(CliError::Context {
        err: Box::new(err),
        note,
    })
}

fn edn_stream(file: &str, text: &str) -> CliResult<Parsed> {
    let forms = vev::edn::parse_all_spanned(text).in_text(file, text, 0)?;
    let mut parsed = Parsed {
        txs: Vec::with_capacity(forms.len()),
        origins: Vec::with_capacity(forms.len()),
        header: None,
    };
    for (i, form) in forms.iter().enumerate() {
        let (start, end) = (form.span.start.offset, form.span.end.offset);
        if let Edn::Map(m) = &form.value {
            if i == 0 && m.contains_key(&kw(export::key::VERSION)) {
                check_version(&form.value)?;
                parsed.header = Some(form.value.clone());
                continue;
            }
        }
        let ops = vev::parse_tx(&text[start..end]).in_form(file, text, start)?;
        parsed.txs.push(ops.into_iter().map(|s| s.op).collect());
        parsed.origins.push(Origin {
            offset: start,
            first_line: form.span.start.line as usize,
            last_line: form.span.end.line as usize,
        });
    }
    Ok(parsed)
}

fn check_version(header: &Edn) -> CliResult<()> {
    let version = header_get(header, export::key::VERSION);
    if version != Some(&Edn::Integer(export::FORMAT_VERSION)) {
        return Err(CliError::Argument {
            code: "import/version",
            message: format!(
                "export format version {} is not the one this vev reads ({})",
                version.map_or("nil".into(), Edn::to_string),
                export::FORMAT_VERSION
            ),
        });
    }
    Ok(())
}

fn header_get<'a>(header: &'a Edn, key: &str) -> Option<&'a Edn> {
    match header {
        Edn::Map(m) => m.get(&kw(key)),
        _ => None,
    }
}

/// After an export is imported: the same basis-t, entity counter, datom count and schema.
fn check_header(db: &Db, header: &Edn) -> CliResult<()> {
    let now = export::header(db)?;
    for key in [
        export::key::BASIS_T,
        export::key::NEXT_USER,
        export::key::DATOMS,
        export::key::SCHEMA,
    ] {
        let (want, got) = (header_get(header, key), header_get(&now, key));
        if want != got {
            return Err(CliError::Argument {
                code: "import/mismatch",
                message: format!(
                    "the imported database differs from the export's header: {key} is {} \
                     where the export says {}",
                    got.map_or("nil".into(), Edn::to_string),
                    want.map_or("nil".into(), Edn::to_string)
                ),
            });
        }
    }
    Ok(())
}

fn input_error(
    file: &str,
    text: &str,
    line: usize,
    column: Option<usize>,
    kind: InputErrorKind,
) -> CliError {
    CliError::Input(Box::new(InputError {
        kind,
        file: file.to_string(),
        line,
        column,
        line_text: text
            .lines()
            .nth(line.saturating_sub(1))
            .unwrap_or("")
            .trim_end_matches('\r')
            .to_string(),
    }))
}

/// Groups records into transactions of `batch_records`.
struct Batcher {
    parsed: Parsed,
    ops: Vec<TxOp>,
    origin: Option<Origin>,
    batch_records: usize,
}

impl Batcher {
    fn new(batch_records: usize) -> Batcher {
        Batcher {
            parsed: Parsed {
                txs: Vec::new(),
                origins: Vec::new(),
                header: None,
            },
            ops: Vec::new(),
            origin: None,
            batch_records: batch_records.max(1),
        }
    }

    fn push(&mut self, map: TxMap, offset: usize, line: usize) {
        if map.attrs.is_empty() {
            return;
        }
        self.ops.push(TxOp::Map(map));
        let origin = self.origin.get_or_insert(Origin {
            offset,
            first_line: line,
            last_line: line,
        });
        origin.last_line = line;
        if self.ops.len() >= self.batch_records {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if let Some(origin) = self.origin.take() {
            self.parsed.txs.push(std::mem::take(&mut self.ops));
            self.parsed.origins.push(origin);
        }
    }

    fn finish(mut self) -> Parsed {
        self.flush();
        self.parsed
    }
}

/// `:person/name` or `person/name`, as a keyword.
fn attr_name(key: &str) -> Keyword {
    Keyword::new(key.trim().trim_start_matches(':'))
}

/// A `:db/id`: a string tempid (scoped to its transaction) or an entity id.
fn db_id(json: &serde_json::Value) -> Option<EntityRef> {
    match json {
        serde_json::Value::String(s) => Some(EntityRef::tempid(s)),
        serde_json::Value::Number(n) => n.as_u64().filter(|n| *n > 0).map(EntityRef::Id),
        _ => None,
    }
}

fn json_lines(
    db: &Db,
    args: &ImportArgs<'_>,
    text: &str,
    progress: &Progress,
) -> CliResult<Parsed> {
    progress.phase(
        text.len() as u64,
        "reading {bar:40} {bytes}/{total_bytes} ({elapsed})",
    );
    let file = args.file;
    let mut batcher = Batcher::new(args.batch_records);
    let mut offset = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let (line_no, start) = (i + 1, offset);
        offset += raw.len();
        progress.set(offset as u64);
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        let err = |column: Option<usize>, kind| input_error(file, text, line_no, column, kind);
        let json: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            let reason = e.to_string();
            let reason = reason
                .rfind(" at line ")
                .map_or(reason.clone(), |i| reason[..i].to_string());
            err(Some(e.column().max(1)), InputErrorKind::Json { reason })
        })?;
        let serde_json::Value::Object(object) = json else {
            let found = match json {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::Bool(_) => "a boolean",
                _ => "null",
            };
            return Err(err(Some(1), InputErrorKind::NotAnObject { found }));
        };
        // The column of a key, for errors about its attribute or value.
        let key_column = |key: &str| {
            let quoted = serde_json::to_string(key).unwrap_or_default();
            line.find(&quoted).map(|b| line[..b].chars().count() + 1)
        };
        let mut map = TxMap::new(None);
        for (key, value) in &object {
            let name = attr_name(key);
            if name.as_str() == "db/id" {
                map.id = Some(db_id(value).ok_or_else(|| {
                    err(
                        key_column(key),
                        InputErrorKind::InvalidId {
                            value: value.to_string(),
                        },
                    )
                })?);
                continue;
            }
            let Some(attr) = db.attribute(&name) else {
                return Err(err(
                    key_column(key),
                    InputErrorKind::UnknownAttribute {
                        attribute: name.to_string(),
                    },
                ));
            };
            let values: Vec<&serde_json::Value> = match value {
                serde_json::Value::Null => continue,
                serde_json::Value::Array(items) if attr.is_many() => items.iter().collect(),
                one => vec![one],
            };
            let mut typed = Vec::with_capacity(values.len());
            for v in values {
                typed.push(typed::from_json(db, attr, v).ok_or_else(|| {
                    err(
                        key_column(key),
                        InputErrorKind::WrongType {
                            attribute: attr.ident.clone(),
                            value_type: attr.value_type.ident(),
                            value: v.to_string(),
                        },
                    )
                })?);
            }
            map.attrs.push((name, many_or_one(typed)));
        }
        batcher.push(map, start, line_no);
    }
    Ok(batcher.finish())
}

fn many_or_one(mut values: Vec<TxValue>) -> TxValue {
    if values.len() == 1 {
        values.pop().unwrap_or(TxValue::Many(Vec::new()))
    } else {
        TxValue::Many(values)
    }
}

/// The attribute of each CSV column (`None` for `:db/id`).
fn csv_header(
    db: &Db,
    args: &ImportArgs<'_>,
    text: &str,
    header: &crate::csv::Record,
) -> CliResult<Vec<Option<std::sync::Arc<vev::Attribute>>>> {
    let prefix = args
        .attr_prefix
        .map(|p| p.trim_start_matches(':').trim_end_matches('/'));
    let mut columns = Vec::with_capacity(header.fields.len());
    for (i, field) in header.fields.iter().enumerate() {
        let name = field.text.trim().trim_start_matches(':');
        let err = |reason: String| {
            input_error(
                args.file,
                text,
                header.line,
                Some(field.column),
                InputErrorKind::BadHeader {
                    column: i + 1,
                    reason,
                },
            )
        };
        let full = match (name.contains('/'), prefix) {
            (true, _) => name.to_string(),
            (false, Some(p)) if !name.is_empty() => format!("{p}/{name}"),
            (false, _) if name.is_empty() => return Err(err("the cell is empty".into())),
            (false, None) => {
                return Err(err(format!(
                    "{name:?} has no namespace; write :ns/{name} or give --attr-prefix"
                )))
            }
            (false, Some(_)) => unreachable!("handled above"),
        };
        if full == "db/id" {
            columns.push(None);
            continue;
        }
        match db.attribute(&Keyword::new(&full)) {
            Some(a) => columns.push(Some(a.clone())),
            None => return Err(err(format!("unknown attribute :{full}"))),
        }
    }
    Ok(columns)
}

fn csv(db: &Db, args: &ImportArgs<'_>, text: &str, progress: &Progress) -> CliResult<Parsed> {
    let file = args.file;
    let records = crate::csv::records(text)
        .map_err(|(line, column, kind)| input_error(file, text, line, Some(column), kind))?;
    let Some((header, rows)) = records.split_first() else {
        return Ok(Batcher::new(1).finish());
    };
    let columns = csv_header(db, args, text, header)?;
    progress.phase(
        rows.len() as u64,
        "reading {bar:40} {pos}/{len} rows ({elapsed})",
    );
    let mut batcher = Batcher::new(args.batch_records);
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    for (n, row) in rows.iter().enumerate() {
        progress.set(n as u64);
        let err = |column, kind| input_error(file, text, row.line, Some(column), kind);
        if row.fields.len() != columns.len() {
            return Err(err(
                1,
                InputErrorKind::FieldCount {
                    expected: columns.len(),
                    found: row.fields.len(),
                },
            ));
        }
        let mut map = TxMap::new(None);
        for (field, column) in row.fields.iter().zip(&columns) {
            if field.text.is_empty() {
                continue;
            }
            let Some(attr) = column else {
                let id = match field.text.trim().parse::<u64>() {
                    Ok(n) if n > 0 => EntityRef::Id(n),
                    _ => EntityRef::tempid(field.text.trim()),
                };
                map.id = Some(id);
                continue;
            };
            let value = typed::from_text(db, attr, &field.text).ok_or_else(|| {
                err(
                    field.column,
                    InputErrorKind::WrongType {
                        attribute: attr.ident.clone(),
                        value_type: attr.value_type.ident(),
                        value: Edn::String(field.text.clone()).to_string(),
                    },
                )
            })?;
            map.attrs.push((attr.ident.clone(), value));
        }
        let offset = line_starts.get(row.line - 1).copied().unwrap_or(0);
        batcher.push(map, offset, row.line);
    }
    Ok(batcher.finish())
}
