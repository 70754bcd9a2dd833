//! `vev export`: the whole database as EDN transactions that `vev import` replays into an
//! empty database, giving back the same datoms with the same entity ids, txs and instants.
//!
//! The file is a header map (format version, basis-t, next entity number, the schema) and
//! then one vector per transaction of the log, oldest first. Replaying a transaction's
//! datoms literally is enough for the transactor to produce them again, because:
//!
//! - every transaction states its own `:db/txInstant` on `"datomic.tx"`, so instants (and
//!   with them as-of by instant) survive; instants in the log never go backwards;
//! - basis-t advances by one per transaction in both databases, so tx ids are equal and
//!   references to earlier tx entities are written as plain ids;
//! - new user entities get ids from a counter, in the order their tempids first appear in
//!   entity position. Each transaction names the entities it creates with the string tempid
//!   `"e<ID>"` in ascending order of the original ids, before any other datom, so the
//!   importing transactor hands out the same numbers. A number the original database
//!   consumed without writing a datom (a tempid whose datoms were all dropped) is consumed
//!   again by `[:db/retract "e<ID>" :db/doc ""]`, which allocates the tempid and writes
//!   nothing. Entities that already exist are plain ids from then on;
//! - attributes are written by the ident they had before the transaction (an ident can be
//!   renamed later), which is what the importing transactor resolves against;
//! - an explicit retraction next to the assertion that replaces a cardinality-one value
//!   yields the one retraction the original transaction had; retractions of cardinality-many
//!   values and of old values are written as they are;
//! - composite tuple datoms are left out: the transactor recomputes them from their parts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use vev::ids::{self, EntityId};
use vev::schema::sys;
use vev::{Datom, Db, Edn, Keyword, Value};

use crate::commands::{attribute_edn, attributes, kw, open_read};
use crate::error::{CliError, CliResult};

/// The version written in an export's header; `import` refuses other versions.
pub const FORMAT_VERSION: i64 = 1;
/// Transactions read from the log at a time.
const TX_CHUNK: u64 = 1_000;

/// The header's keys.
pub mod key {
    pub const VERSION: &str = "vev.export/version";
    pub const BASIS_T: &str = "vev.export/basis-t";
    pub const NEXT_USER: &str = "vev.export/next-user";
    pub const DATOMS: &str = "vev.export/datoms";
    pub const SCHEMA: &str = "vev.export/schema";
}

pub fn export(path: &Path, out_path: Option<&Path>) -> CliResult<()> {
    let conn = open_read(path)?;
    let db = conn.sync()?;
    let out: Box<dyn Write> = match out_path {
        Some(p) => Box::new(File::create(p).map_err(|err| CliError::Io {
            path: p.display().to_string(),
            err,
        })?),
        None => Box::new(io::stdout().lock()),
    };
    let mut out = BufWriter::new(out);
    let io_error = |err| CliError::Io {
        path: out_path.map_or("stdout".into(), |p| p.display().to_string()),
        err,
    };
    write_header(&header(&db)?, &mut out).map_err(io_error)?;
    let mut state = Replay::new()?;
    let last_t = db.basis_t();
    let mut t = 1;
    while t <= last_t {
        for entry in db.tx_range(Some(t), Some(t + TX_CHUNK))? {
            // The last transaction also consumes the numbers the database handed out
            // after its last datom, so that the next new entity gets the same id.
            let next_user = (entry.t == last_t).then(|| db.next_user());
            let ops = state.transaction(&db, entry.tx, &entry.datoms, next_user);
            let ops: Vec<String> = ops.iter().map(Edn::to_string).collect();
            writeln!(out, "[{}]", ops.join("\n ")).map_err(io_error)?;
        }
        t += TX_CHUNK;
    }
    out.flush().map_err(io_error)
}

/// The header map: what an import checks its result against.
pub fn header(db: &Db) -> Result<Edn, vev::StorageError> {
    let attrs = attributes(db, false);
    let datoms = db.count(vev::IndexOrder::Eavt, &[])?;
    Ok(Edn::Map(BTreeMap::from([
        (kw(key::VERSION), Edn::Integer(FORMAT_VERSION)),
        (kw(key::BASIS_T), Edn::Integer(db.basis_t() as i64)),
        (kw(key::NEXT_USER), Edn::Integer(db.next_user() as i64)),
        (kw(key::DATOMS), Edn::Integer(datoms as i64)),
        (
            kw(key::SCHEMA),
            Edn::Vector(attrs.iter().map(|a| attribute_edn(a)).collect()),
        ),
    ])))
}

fn write_header(header: &Edn, out: &mut impl Write) -> io::Result<()> {
    let Edn::Map(h) = header else {
        unreachable!("header is a map")
    };
    // The header one key a line, so the schema reads as a list of attributes.
    writeln!(
        out,
        ";; vev export: a header, then one vector per transaction (vev import)"
    )?;
    let mut first = true;
    for (k, v) in h {
        let open = if first { "{" } else { " " };
        first = false;
        match v {
            Edn::Vector(items) if !items.is_empty() => {
                let items: Vec<String> = items.iter().map(Edn::to_string).collect();
                write!(out, "{open}{k} [{}]", items.join("\n   "))?;
            }
            _ => write!(out, "{open}{k} {v}")?,
        }
        writeln!(out)?;
    }
    writeln!(out, "}}")
}

/// What the exporter knows of the database before the transaction it writes.
struct Replay {
    /// Idents as of now (attributes are written by the ident they had then).
    idents: HashMap<EntityId, Keyword>,
    /// The user-partition counter of the importing database.
    next_user: u64,
}

fn counter(id: EntityId) -> u64 {
    id & ((1 << ids::PARTITION_SHIFT) - 1)
}

fn tempid(id: EntityId) -> Edn {
    Edn::String(format!("e{id}"))
}

impl Replay {
    fn new() -> Result<Replay, vev::StorageError> {
        let empty = Db::empty();
        let idents = empty
            .tx_range(Some(0), Some(1))?
            .iter()
            .flat_map(|entry| entry.datoms.iter())
            .filter_map(|d| match (&d.v, d.a == sys::IDENT && d.added) {
                (Value::Keyword(k), true) => Some((d.e, k.clone())),
                _ => None,
            })
            .collect();
        Ok(Replay {
            idents,
            next_user: empty.next_user(),
        })
    }

    /// The operations that make the transactor produce `datoms` again at tx `tx`.
    fn transaction(
        &mut self,
        db: &Db,
        tx: EntityId,
        datoms: &[Datom],
        next_user_after: Option<u64>,
    ) -> Vec<Edn> {
        let schema = db.schema();
        let is_ref = |a| schema.attribute(a).is_some_and(|x| x.is_ref());
        let kept: Vec<&Datom> = datoms
            .iter()
            .filter(|d| !(d.e == tx && d.a == sys::TX_INSTANT))
            .filter(|d| !schema.attribute(d.a).is_some_and(|x| x.is_composite()))
            .collect();
        // Entities this transaction creates: user ids at or past the counter.
        let is_new =
            |id: EntityId| ids::partition(id) == ids::PART_USER && counter(id) >= self.next_user;
        let mut new: BTreeSet<u64> = BTreeSet::new();
        for d in &kept {
            if is_new(d.e) {
                new.insert(counter(d.e));
            }
            if let Value::Ref(v) = d.v {
                if is_ref(d.a) && is_new(v) {
                    new.insert(counter(v));
                }
            }
        }
        let end = new
            .last()
            .map_or(self.next_user, |n| n + 1)
            .max(next_user_after.unwrap_or(0));
        let entity = |id: EntityId| -> Edn {
            if id == tx {
                Edn::String("datomic.tx".into())
            } else if ids::partition(id) == ids::PART_USER && counter(id) >= self.next_user {
                tempid(id)
            } else {
                Edn::Integer(id as i64)
            }
        };
        let op = |d: &Datom| -> Edn {
            let a = self
                .idents
                .get(&d.a)
                .map_or(Edn::Integer(d.a as i64), |k| Edn::Keyword(k.clone()));
            let v = match &d.v {
                Value::Ref(r) if is_ref(d.a) => match self.idents.get(r) {
                    Some(k) if ids::partition(*r) == ids::PART_DB => Edn::Keyword(k.clone()),
                    _ => entity(*r),
                },
                other => other.to_edn(),
            };
            let verb = if d.added { "db/add" } else { "db/retract" };
            Edn::Vector(vec![kw(verb), entity(d.e), a, v])
        };
        let instant = datoms
            .iter()
            .find(|d| d.e == tx && d.a == sys::TX_INSTANT)
            .map_or(Edn::Nil, |d| d.v.to_edn());
        let mut ops = vec![Edn::Vector(vec![
            kw("db/add"),
            Edn::String("datomic.tx".into()),
            kw("db/txInstant"),
            instant,
        ])];
        let mut by_entity: BTreeMap<EntityId, Vec<&Datom>> = BTreeMap::new();
        for d in &kept {
            by_entity.entry(d.e).or_default().push(d);
        }
        // New entities first, in id order, so the importer's counter hands out the same ids.
        for n in self.next_user..end {
            let id = ids::user_id(n);
            match by_entity.remove(&id) {
                Some(ds) => ops.extend(ds.into_iter().map(op)),
                None => ops.push(Edn::Vector(vec![
                    kw("db/retract"),
                    tempid(id),
                    kw("db/doc"),
                    Edn::String(String::new()),
                ])),
            }
        }
        ops.extend(by_entity.values().flatten().map(|d| op(d)));
        self.next_user = end;
        for d in datoms.iter().filter(|d| d.a == sys::IDENT) {
            match (&d.v, d.added) {
                (Value::Keyword(k), true) => {
                    self.idents.insert(d.e, k.clone());
                }
                (Value::Keyword(k), false) if self.idents.get(&d.e) == Some(k) => {
                    self.idents.remove(&d.e);
                }
                _ => {}
            }
        }
        ops
    }
}
