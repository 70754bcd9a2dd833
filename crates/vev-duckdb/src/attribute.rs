//! `vev_attribute(path, attribute)`: one attribute as a typed table `e`, `v` (with
//! `history := true` also `tx` and `added`), straight from the AEVT index: the fast path
//! for analytics. Values go into DuckDB's vectors as themselves (no EDN, no text for the
//! number, boolean, instant and UUID types), and only the columns the query reads are
//! written; `count(*)` reads the index's count without visiting its datoms.

use std::sync::Arc;

use duckdb::core::LogicalTypeId;
use vev::{Component, Datom, Db, Edn, IndexOrder, ValueType};

use crate::args::{attribute, Args, TimeView};
use crate::column::{ColType, Out};
use crate::dbs::{self, Handle};
use crate::error::{ExtError, Result};
use crate::table::{time_parameters, Chunk, Columns, Function, Producer, CHUNK_ROWS};

/// `vev_attribute`.
pub struct VevAttribute;

/// A bound `vev_attribute` call.
pub struct Spec {
    handle: Arc<Handle>,
    view: TimeView,
    attr: Edn,
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
        Ok((columns, Spec { handle, view, attr }))
    }

    fn start(spec: &Spec) -> Result<Box<dyn Producer>> {
        let db = spec.view.apply(spec.handle.db()?);
        let a = attribute(&db, &spec.attr)?;
        Ok(Box::new(Scan {
            db: db.clone(),
            prefix: vec![Component::Entity(a.id)],
            datoms: None,
            left: None,
        }))
    }
}

/// One scan of one attribute.
struct Scan {
    db: Db,
    prefix: Vec<Component>,
    /// The datoms, from the first chunk that reads a column.
    datoms: Option<vev::DatomBatches>,
    /// Rows still to hand out when no column is read (a count).
    left: Option<usize>,
}

impl Producer for Scan {
    fn fill(&mut self, chunk: &mut Chunk<'_>) -> Result<usize> {
        if (0..4).all(|i| !chunk.wants(i)) && self.datoms.is_none() {
            // Nothing is read but the number of rows.
            let left = match self.left {
                Some(n) => n,
                None => self.db.count(IndexOrder::Aevt, &self.prefix)?,
            };
            let n = left.min(CHUNK_ROWS);
            self.left = Some(left - n);
            return Ok(n);
        }
        if self.left.is_some() {
            return Err(ExtError::new(
                "duckdb/internal",
                "vev_attribute: the columns read changed during a scan",
            ));
        }
        let batches = self
            .datoms
            .get_or_insert_with(|| self.db.datom_batches(IndexOrder::Aevt, &self.prefix));
        let mut cols = chunk.columns();
        let mut row = 0;
        let mut failed = None;
        batches.next_batch(CHUNK_ROWS, |d| {
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
