//! `vev_attribute(path, attribute)`: one attribute as a typed table `e`, `v` (with
//! `history := true` also `tx` and `added`), straight from the AEVT index: the fast path
//! for analytics. Values go into DuckDB's vectors as themselves (no EDN, no text for the
//! number, boolean, instant and UUID types), and only the columns the query reads are
//! written; `count(*)` reads the index's count without visiting its datoms.

use std::sync::{Arc, Mutex};

use duckdb::core::LogicalTypeId;
use vev::{Component, Datom, Db, Edn, IndexOrder, ValueType};

use crate::args::{attribute, Args, TimeView};
use crate::column::{ColType, Out};
use crate::dbs::{self, lock, Handle};
use crate::error::Result;
use crate::table::{time_parameters, Chunk, Columns, Function, Producer, CHUNK_ROWS};

/// `vev_attribute`.
pub struct VevAttribute;

/// A bound `vev_attribute` call.
pub struct Spec {
    handle: Arc<Handle>,
    view: TimeView,
    attr: Edn,
    /// The attribute's datom count at bind (on the latest database).
    rows: Option<usize>,
}

impl Function for VevAttribute {
    const NAME: &'static str = "vev_attribute";
    type Spec = Spec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![LogicalTypeId::Varchar, LogicalTypeId::Varchar]
    }

    fn named() -> Vec<(String, LogicalTypeId)> {
        time_parameters()
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, Spec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let attr = Edn::String(args.text(1, "attribute")?);
        let view = args.time_view()?;
        let db = view.apply(handle.db()?);
        let a = attribute(&db, &attr)?;
        let v_type = match a.value_type {
            // A bigint's or bigdec's column is DECIMAL at the scale its values need.
            ValueType::BigInt | ValueType::BigDec => {
                let values = db
                    .datoms(IndexOrder::Aevt, &[Component::Entity(a.id)])
                    .map(|d| d.map(|d| d.v.to_edn()))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                match ColType::for_values(&values) {
                    Some(t) if values.iter().all(|v| t.fits(v)) => t,
                    _ => ColType::Varchar,
                }
            }
            vt => ColType::of_value_type(vt),
        };
        let mut columns = vec![("e".to_owned(), ColType::BigInt), ("v".to_owned(), v_type)];
        if view.is_history() {
            columns.push(("tx".to_owned(), ColType::BigInt));
            columns.push(("added".to_owned(), ColType::Boolean));
        }
        // The count is logarithmic on the latest database; through a view it is a scan.
        let rows = match view.is_latest() {
            true => Some(db.count(IndexOrder::Aevt, &[Component::Entity(a.id)])?),
            false => None,
        };
        Ok((
            columns,
            Spec {
                handle,
                view,
                attr,
                rows,
            },
        ))
    }

    fn rows(spec: &Spec) -> Option<usize> {
        spec.rows
    }

    fn start(spec: &Spec) -> Result<Box<dyn Producer>> {
        let db = spec.view.apply(spec.handle.db()?);
        let a = attribute(&db, &spec.attr)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        Ok(Box::new(Scan {
            db,
            prefix: vec![Component::Entity(a.id)],
            threads,
            count_left: Mutex::new(None),
            cursors: Mutex::new(None),
        }))
    }
}

/// One scan of one attribute: its range cut into a part a thread, each a cursor that a
/// `fill` takes from the pool, reads one chunk from, and puts back.
struct Scan {
    db: Db,
    prefix: Vec<Component>,
    threads: usize,
    /// Rows still to hand out when no column is read (a count), from the index's count.
    count_left: Mutex<Option<usize>>,
    /// The idle cursors, made by the first chunk that reads a column.
    cursors: Mutex<Option<Vec<vev::DatomBatches>>>,
}

impl Producer for Scan {
    fn fill(&self, chunk: &mut Chunk<'_>) -> Result<usize> {
        if (0..4).all(|i| !chunk.wants(i)) {
            // Nothing is read but the number of rows.
            let mut left = lock(&self.count_left);
            let n = match *left {
                Some(n) => n,
                None => self.db.count(IndexOrder::Aevt, &self.prefix)?,
            };
            let take = n.min(CHUNK_ROWS);
            *left = Some(n - take);
            return Ok(take);
        }
        loop {
            let cursor = lock(&self.cursors)
                .get_or_insert_with(|| {
                    self.db
                        .datom_batches_split(IndexOrder::Aevt, &self.prefix, self.threads)
                })
                .pop();
            let Some(mut cursor) = cursor else {
                return Ok(0);
            };
            let rows = read_chunk(&mut cursor, chunk)?;
            if rows > 0 {
                if let Some(pool) = lock(&self.cursors).as_mut() {
                    pool.push(cursor);
                }
                return Ok(rows);
            }
            // That part is done: try another.
        }
    }

    fn threads(&self) -> u64 {
        self.threads as u64
    }
}

/// One chunk from `cursor`.
fn read_chunk(cursor: &mut vev::DatomBatches, chunk: &mut Chunk<'_>) -> Result<usize> {
    let mut cols = chunk.columns();
    let mut row = 0;
    let mut failed = None;
    cursor.next_batch(CHUNK_ROWS, |d| {
        if failed.is_none() {
            failed = write(&mut cols, row, d).err();
        }
        row += 1;
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(row),
    }
}

/// Write one datom's row: `e`, `v`, and in a history `tx` and `added`.
fn write(cols: &mut [Option<&mut Out<'_>>], row: usize, d: &Datom) -> Result<()> {
    if let Some(Some(c)) = cols.get_mut(0) {
        c.id(row, d.e as i64)?;
    }
    if let Some(Some(c)) = cols.get_mut(1) {
        c.value(row, &d.v)?;
    }
    if let Some(Some(c)) = cols.get_mut(2) {
        c.id(row, d.tx as i64)?;
    }
    if let Some(Some(c)) = cols.get_mut(3) {
        c.flag(row, d.added)?;
    }
    Ok(())
}
