//! The datom-shaped functions: `vev_datoms` (an index, from its leading components),
//! `vev_log` (the transaction log) and `vev_transact` (a transaction's datoms). Their rows
//! are `e`, `a` (the attribute's ident), `v` (the value's EDN text: `"Ann"`, `42`,
//! `:color/red`), `tx` and `added`; `vev_log` puts the transaction's `t` first.

use std::sync::{Arc, Mutex};

use duckdb::core::LogicalTypeId;
use vev::{Component, Datom, Db, Edn, EntityId, IndexOrder};

use crate::args::{attribute, coerce, entity, to_edn, Args, TimeView};
use crate::column::ColType;
use crate::dbs::{self, lock, Handle};
use crate::error::{ExtError, Result};
use crate::table::{time_parameters, Chunk, Columns, Function, Producer, CHUNK_ROWS};

/// The columns of a datom row.
fn datom_columns() -> Vec<(String, ColType)> {
    [
        ("e", ColType::BigInt),
        ("a", ColType::Varchar),
        ("v", ColType::Varchar),
        ("tx", ColType::BigInt),
        ("added", ColType::Boolean),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_owned(), t))
    .collect()
}

/// Datoms, each with an optional leading `t`, streamed into chunks.
pub struct DatomRows {
    state: Mutex<RowsState>,
    /// Whether column 0 is `t` (the datom's columns follow).
    with_t: bool,
}

/// A `DatomRows`' position.
struct RowsState {
    db: Db,
    rows: Box<dyn Iterator<Item = Result<(u64, Datom)>> + Send>,
    /// The last attribute's id and ident text: datoms come grouped by attribute often.
    last_attr: Option<(EntityId, String)>,
}

impl DatomRows {
    fn boxed(
        db: Db,
        rows: Box<dyn Iterator<Item = Result<(u64, Datom)>> + Send>,
        with_t: bool,
    ) -> Box<dyn Producer> {
        Box::new(DatomRows {
            state: Mutex::new(RowsState {
                db,
                rows,
                last_attr: None,
            }),
            with_t,
        })
    }
}

impl RowsState {
    fn ident(&mut self, a: EntityId) -> &str {
        if self.last_attr.as_ref().is_none_or(|(id, _)| *id != a) {
            let text = match self.db.ident(a) {
                Some(k) => k.to_string(),
                None => a.to_string(),
            };
            self.last_attr = Some((a, text));
        }
        self.last_attr.as_ref().map_or("", |(_, s)| s.as_str())
    }
}

impl Producer for DatomRows {
    fn fill(&self, chunk: &mut Chunk<'_>) -> Result<usize> {
        let base = usize::from(self.with_t);
        let mut state = lock(&self.state);
        let mut n = 0;
        while n < CHUNK_ROWS {
            let Some(next) = state.rows.next() else { break };
            let (t, d) = next?;
            if let Some(c) = chunk.col(0).filter(|_| self.with_t) {
                c.id(n, t as i64)?;
            }
            if let Some(c) = chunk.col(base) {
                c.id(n, d.e as i64)?;
            }
            if chunk.wants(base + 1) {
                let ident = state.ident(d.a).to_owned();
                if let Some(c) = chunk.col(base + 1) {
                    c.text(n, &ident);
                }
            }
            if let Some(c) = chunk.col(base + 2) {
                c.text(n, &d.v.to_string());
            }
            if let Some(c) = chunk.col(base + 3) {
                c.id(n, d.tx as i64)?;
            }
            if let Some(c) = chunk.col(base + 4) {
                c.flag(n, d.added)?;
            }
            n += 1;
        }
        Ok(n)
    }
}

/// `vev_datoms(path, index, components)`: the datoms of an index whose leading components
/// are `components`: one component (an id, or the EDN text of an ident, attribute, value or
/// lookup ref: `':person/age'`), a vector of them as EDN text (`'[42 :person/age]'`; a
/// lookup ref in it is a vector of its own), a DuckDB list of them, or NULL (`'[]'`) for the
/// whole index. (Three positional arguments always: DuckDB's C API has no optional ones.)
pub struct VevDatoms;

/// A bound `vev_datoms` call.
pub struct DatomsSpec {
    handle: Arc<Handle>,
    view: TimeView,
    order: IndexOrder,
    /// The components as given, resolved against the database at each scan.
    components: Vec<Edn>,
}

impl Function for VevDatoms {
    const NAME: &'static str = "vev_datoms";
    type Spec = DatomsSpec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![
            LogicalTypeId::Varchar,
            LogicalTypeId::Varchar,
            LogicalTypeId::Any,
        ]
    }

    fn named() -> Vec<(String, LogicalTypeId)> {
        time_parameters()
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, DatomsSpec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let index = args.text(1, "index")?;
        let order = match index.trim_start_matches(':').to_ascii_lowercase().as_str() {
            "eavt" => IndexOrder::Eavt,
            "aevt" => IndexOrder::Aevt,
            "avet" => IndexOrder::Avet,
            "vaet" => IndexOrder::Vaet,
            _ => {
                return Err(ExtError::argument(format!(
                    "vev_datoms: index {index:?} is not one of eavt, aevt, avet, vaet"
                )))
            }
        };
        let components = match to_edn(&args.get(2))? {
            Edn::Nil => Vec::new(),
            Edn::String(text) => match vev::edn::parse(&text)? {
                Edn::Vector(items) => items,
                one => vec![one],
            },
            Edn::Vector(items) => items,
            one => vec![one],
        };
        let spec = DatomsSpec {
            handle,
            view: args.time_view()?,
            order,
            components,
        };
        // Resolve once now, so that a bad component fails at bind, before any row.
        prefix(&spec.view.apply(spec.handle.db()?), order, &spec.components)?;
        Ok((datom_columns(), spec))
    }

    fn start(spec: &DatomsSpec) -> Result<Box<dyn Producer>> {
        let db = spec.view.apply(spec.handle.db()?);
        let rows: Box<dyn Iterator<Item = Result<(u64, Datom)>> + Send> =
            match prefix(&db, spec.order, &spec.components)? {
                Some(prefix) => Box::new(
                    db.datoms(spec.order, &prefix)
                        .map(|d| d.map(|d| (0, d)).map_err(ExtError::from)),
                ),
                None => Box::new(std::iter::empty()),
            };
        Ok(DatomRows::boxed(db, rows, false))
    }
}

/// The index components for `given` in `order`'s positions; `None` when one names nothing
/// (an ident or lookup ref no entity has), so the result is empty.
fn prefix(db: &Db, order: IndexOrder, given: &[Edn]) -> Result<Option<Vec<Component>>> {
    #[derive(Clone, Copy)]
    enum Pos {
        E,
        A,
        V,
        Tx,
    }
    let positions = match order {
        IndexOrder::Eavt => [Pos::E, Pos::A, Pos::V, Pos::Tx],
        IndexOrder::Aevt => [Pos::A, Pos::E, Pos::V, Pos::Tx],
        IndexOrder::Avet => [Pos::A, Pos::V, Pos::E, Pos::Tx],
        IndexOrder::Vaet | IndexOrder::Log => [Pos::V, Pos::A, Pos::E, Pos::Tx],
    };
    if given.len() > 4 {
        return Err(ExtError::argument("vev_datoms takes at most 4 components"));
    }
    let mut attr = None;
    let mut out = Vec::with_capacity(given.len());
    for (pos, v) in positions.iter().zip(given) {
        let c = match pos {
            Pos::E | Pos::Tx => match entity(db, v)? {
                Some(id) => Component::Entity(id),
                None => return Ok(None),
            },
            Pos::A => {
                let a = attribute(db, v)?;
                let id = a.id;
                attr = Some(a);
                Component::Entity(id)
            }
            // In VAET the value comes first and is always a ref.
            Pos::V => match &attr {
                Some(a) => Component::Value(coerce(db, a, v)?),
                None => match entity(db, v)? {
                    Some(id) => Component::Entity(id),
                    None => return Ok(None),
                },
            },
        };
        out.push(c);
    }
    Ok(Some(out))
}

/// `vev_log(path)`, named `start` and `end`: the log's transactions with start ≤ t < end.
pub struct VevLog;

/// A bound `vev_log` call.
pub struct LogSpec {
    handle: Arc<Handle>,
    start: Option<Edn>,
    end: Option<Edn>,
}

impl Function for VevLog {
    const NAME: &'static str = "vev_log";
    type Spec = LogSpec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![LogicalTypeId::Varchar]
    }

    fn named() -> Vec<(String, LogicalTypeId)> {
        vec![
            ("start".to_owned(), LogicalTypeId::Any),
            ("end".to_owned(), LogicalTypeId::Any),
        ]
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, LogSpec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let mut columns = vec![("t".to_owned(), ColType::BigInt)];
        columns.extend(datom_columns());
        Ok((
            columns,
            LogSpec {
                handle,
                start: args.named_edn("start")?,
                end: args.named_edn("end")?,
            },
        ))
    }

    fn start(spec: &LogSpec) -> Result<Box<dyn Producer>> {
        let db = spec.handle.db()?;
        let bound = |v: &Option<Edn>| -> Result<Option<u64>> {
            let Some(v) = v else { return Ok(None) };
            let point = match v {
                Edn::Integer(n) => vev::TimePoint::from_long(*n),
                Edn::Inst(ms) => Ok(vev::TimePoint::Instant(*ms)),
                Edn::String(s) => vev::TimePoint::parse(s),
                other => {
                    return Err(ExtError::argument(format!(
                        "vev_log: {other} is not a basis-t, a transaction id or an instant"
                    )))
                }
            }
            .map_err(|e| ExtError::new(e.code(), e.to_string()))?;
            Ok(Some(db.log_t_of(point)?))
        };
        let entries = db.tx_range(bound(&spec.start)?, bound(&spec.end)?)?;
        let rows = entries
            .into_iter()
            .flat_map(|entry| {
                let t = entry.t;
                entry.datoms.into_iter().map(move |d| Ok((t, d)))
            })
            .collect::<Vec<_>>();
        Ok(DatomRows::boxed(db, Box::new(rows.into_iter()), true))
    }
}

/// `vev_transact(path, tx_data)`: commit the transaction (durably) and return its datoms.
/// The transaction runs when the statement executes, once per execution, never at bind.
pub struct VevTransact;

/// A bound `vev_transact` call.
pub struct TransactSpec {
    handle: Arc<Handle>,
    text: String,
}

impl Function for VevTransact {
    const NAME: &'static str = "vev_transact";
    type Spec = TransactSpec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![LogicalTypeId::Varchar, LogicalTypeId::Varchar]
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, TransactSpec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let text = args.text(1, "transaction data")?;
        // Read now so that text that is not EDN fails before the statement runs.
        vev::edn::parse(&text)?;
        Ok((datom_columns(), TransactSpec { handle, text }))
    }

    fn start(spec: &TransactSpec) -> Result<Box<dyn Producer>> {
        let report = spec.handle.writer()?.transact_edn(&spec.text)?;
        let rows = report
            .tx_data
            .into_iter()
            .map(|d| Ok((0, d)))
            .collect::<Vec<_>>();
        Ok(DatomRows::boxed(
            report.db_after,
            Box::new(rows.into_iter()),
            false,
        ))
    }
}
