//! The MusicBrainz workload (`../shared/reference/mbrainz.md`, `docs/mbrainz.md`): the
//! sample's schema, a deterministic generator of a data set of its shape at four scales, and
//! its rules and queries, shared by `vev demo mbrainz`, the benchmark and the tests.
//!
//! ```no_run
//! let conn = vev::Connection::open("mbrainz.vev")?;
//! vev_mbrainz::load(&conn, vev_mbrainz::Scale::Small, &mut |_| {})?;
//! # Ok::<(), vev::Error>(())
//! ```

#![warn(missing_docs)]

mod gen;
mod names;
mod queries;
mod rng;
pub mod schema;

pub use gen::{Counts, Generator, Scale, SEED};
pub use queries::{all as all_queries, NamedQuery, EXTRA, NINE, RULES};

use vev::{BulkProgress, Connection, Edn, Error, Query, QueryOptions, QueryResult, TxOp};

/// What `load` wrote.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The bulk load's transactions, datoms and time (the schema's transactions not included).
    pub progress: BulkProgress,
    /// The entities generated.
    pub counts: Counts,
}

/// Transact the schema and the enums, then bulk-load the data set of `scale`; `progress` is
/// called after each committed batch.
pub fn load(
    conn: &Connection,
    scale: Scale,
    progress: &mut dyn FnMut(&BulkProgress),
) -> Result<Loaded, Error> {
    let mut generator = Generator::new(scale);
    let done = load_transactions(conn, generator.by_ref(), progress)?;
    Ok(Loaded {
        progress: done,
        counts: generator.counts(),
    })
}

/// The data set of `scale` generated whole into memory: its transactions and entity counts
/// (for a load timed without the generation, as `vev-bench mbrainz` times it).
pub fn generate(scale: Scale) -> (Vec<Vec<TxOp>>, Counts) {
    let mut generator = Generator::new(scale);
    let txs: Vec<Vec<TxOp>> = generator.by_ref().collect();
    (txs, generator.counts())
}

/// Transact the schema and the enums, then bulk-load `txs` (a `Generator`'s output);
/// `progress` is called after each committed batch.
pub fn load_transactions(
    conn: &Connection,
    txs: impl IntoIterator<Item = Vec<TxOp>>,
    progress: &mut dyn FnMut(&BulkProgress),
) -> Result<BulkProgress, Error> {
    conn.transact_edn(schema::SCHEMA)?;
    conn.transact_edn(&schema::enums_tx())?;
    conn.bulk_load(txs, progress)
}

/// Run a named query against `db` with its reference inputs (query 8 twice: the second run
/// on the first's result); the final result.
pub fn run(db: &vev::Db, query: &NamedQuery) -> Result<QueryResult, Error> {
    run_opts(db, query, &QueryOptions::default())
}

/// `run` with options: the naive plan (`Limits::naive`), limits, functions.
pub fn run_opts(
    db: &vev::Db,
    query: &NamedQuery,
    opts: &QueryOptions,
) -> Result<QueryResult, Error> {
    let prepared = Query::parse(query.text)?;
    let mut args = Vec::with_capacity(2);
    if query.rules {
        args.push(vev::edn::parse(RULES)?);
    }
    if let Some(input) = query.input {
        args.push(vev::edn::parse(input)?);
    }
    let result = db.q_prepared(&prepared, &args, opts)?;
    if !query.feeds_itself {
        return Ok(result);
    }
    if let Some(last) = args.last_mut() {
        *last = relation_of(&result);
    }
    Ok(db.q_prepared(&prepared, &args, opts)?)
}

/// A result's rows as a relation input (`[[a b] ...]`).
pub fn relation_of(result: &QueryResult) -> Edn {
    match result.to_edn() {
        Edn::Set(rows) => Edn::Vector(rows.into_iter().collect()),
        other => other,
    }
}

/// A result's row count and a digest of its rows: FNV-1a (64 bits, hex) of their EDN texts
/// sorted and joined by newlines, so two engines' answers compare by two short values. A
/// scalar result is one row (none when `nil`).
pub fn digest(result: &QueryResult) -> (usize, String) {
    let mut rows: Vec<String> = match result.to_edn() {
        Edn::Set(rows) => rows.iter().map(Edn::to_string).collect(),
        Edn::Vector(rows) | Edn::List(rows) => rows.iter().map(Edn::to_string).collect(),
        Edn::Nil => Vec::new(),
        scalar => vec![scalar.to_string()],
    };
    rows.sort_unstable();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            h = fnv(h, b"\n");
        }
        h = fnv(h, row.as_bytes());
    }
    (rows.len(), format!("{h:016x}"))
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
