//! Shaping the final relation by the `:find`: the one place rows become EDN (aggregated,
//! pulled), a row at a time, into a `RowSink`: `Query::run` collects them into a
//! `QueryResult` (`shape`), `Query::run_rows` hands each to the caller's function.
//!
//! **Invariant:** every result shape goes through `emit`, so `run` and `run_rows` give the
//! same rows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use vev_core::Value;
use vev_edn::Edn;

use super::{find_var, Find, PullPat, Query, QueryResult, ResultKind};
use crate::agg;
use crate::error::QueryError;
use crate::exec::Ctx;
use crate::pull::pull;
use crate::rel::{Rel, VarId};
use crate::rows::Rows;
use crate::values::resolve_entity;

/// Where [`Query::emit`] hands the result's rows.
pub(super) trait RowSink<E> {
    /// One row.
    fn row(&mut self, cells: Vec<Edn>) -> Result<(), E>;
    /// `len` rows of `width` values each, given row after row.
    fn rows(&mut self, width: usize, len: usize, values: Vec<Value>) -> Result<(), E>;
}

/// A value as EDN, taken by value (entity ids and longs without a call).
#[inline]
fn into_edn(v: Value) -> Edn {
    match v {
        Value::Ref(e) => Edn::Integer(e as i64),
        Value::Long(n) => Edn::Integer(n),
        v => v.to_edn(),
    }
}

/// Rows collected into one flat table.
impl RowSink<QueryError> for Rows {
    fn row(&mut self, cells: Vec<Edn>) -> Result<(), QueryError> {
        self.push(cells);
        Ok(())
    }

    fn rows(&mut self, _width: usize, len: usize, values: Vec<Value>) -> Result<(), QueryError> {
        self.extend_flat(len, values.len(), |cells| {
            if values
                .iter()
                .all(|v| matches!(v, Value::Ref(_) | Value::Long(_)))
            {
                // Only entity ids and longs (the common result):
                // - one `Edn::Integer` per cell lets LLVM write each cell straight into place;
                //   through `into_edn` it builds the cell on the stack, its tag a lone byte
                //   store that the 16-byte copy out cannot be forwarded from, so each cell
                //   waits for every store before it (a large share of a closure query's time);
                // - the values are moved out and forgotten: ids and longs own nothing, and
                //   dropping them would be a call per value.
                cells.extend(values.into_iter().map(|v| {
                    let n = match &v {
                        Value::Ref(e) => *e as i64,
                        Value::Long(n) => *n,
                        _ => 0,
                    };
                    std::mem::forget(v);
                    Edn::Integer(n)
                }));
            } else {
                cells.extend(values.into_iter().map(into_edn));
            }
        });
        Ok(())
    }
}

/// Rows handed one at a time, each as its own vector, to a caller's function.
pub(super) struct FnSink<F>(pub(super) F);

impl<E, F: FnMut(Vec<Edn>) -> Result<(), E>> RowSink<E> for FnSink<F> {
    fn row(&mut self, cells: Vec<Edn>) -> Result<(), E> {
        (self.0)(cells)
    }

    fn rows(&mut self, width: usize, len: usize, values: Vec<Value>) -> Result<(), E> {
        let mut values = values.into_iter();
        for _ in 0..len {
            (self.0)(values.by_ref().take(width).map(into_edn).collect())?;
        }
        Ok(())
    }
}

impl Query {
    /// Turn the final relation into the find shape, aggregating and pulling.
    pub(super) fn shape(&self, ctx: &Ctx<'_>, rel: Rel) -> Result<QueryResult, QueryError> {
        let mut rows = Rows::new(self.find.len());
        self.emit(ctx, rel, false, &mut rows)?;
        let first = |rows: Rows| rows.into_vecs().into_iter().next();
        Ok(match self.result_kind() {
            ResultKind::Rel => QueryResult::Rel(rows),
            ResultKind::Bag => QueryResult::Bag(rows),
            ResultKind::Maps => QueryResult::Maps(
                rows.into_vecs()
                    .into_iter()
                    .map(|r| self.row_map(r))
                    .collect(),
            ),
            // One element: the cells are the values.
            ResultKind::Coll => QueryResult::Coll(rows.into_cells()),
            ResultKind::Scalar => QueryResult::Scalar(rows.into_cells().into_iter().next()),
            ResultKind::Map => QueryResult::Scalar(first(rows).map(|r| self.row_map(r))),
            ResultKind::Tuple => QueryResult::Tuple(first(rows)),
        })
    }

    /// Hand the result's rows to `sink` (see `run_rows`): each row the `:find` elements'
    /// values, aggregated and pulled; at most one row for a scalar or tuple find; distinct
    /// values for a collection find.
    pub(super) fn emit<E: From<QueryError>>(
        &self,
        ctx: &Ctx<'_>,
        rel: Rel,
        sorted: bool,
        sink: &mut impl RowSink<E>,
    ) -> Result<usize, E> {
        let kind = self.result_kind();
        let single = matches!(
            kind,
            ResultKind::Scalar | ResultKind::Tuple | ResultKind::Map
        );
        if self.find.iter().any(|f| matches!(f, Find::Agg { .. })) {
            // One row per group: as many as the distinct grouping values, no more.
            let mut rows = match ctx.grouped.take() {
                Some(rows) => rows,
                None => self.aggregate(ctx, &rel)?,
            };
            if sorted && kind != ResultKind::Bag {
                rows.sort();
            }
            if single {
                rows.truncate(1);
            }
            let n = rows.len();
            rows.into_iter().try_for_each(|r| sink.row(r))?;
            return Ok(n);
        }
        // Distinct over the find variables (`:with` variables keep duplicates).
        let find_vars: Vec<VarId> = self.find_vars();
        let rel = if self.with.is_empty() {
            rel.into_projection(&find_vars)
        } else {
            rel
        };
        let cols: Vec<usize> = self
            .find
            .iter()
            .map(|f| rel.col(find_var(f)).expect("bound"))
            .collect();
        if !sorted
            && !single
            && kind != ResultKind::Coll
            && cols.iter().copied().eq(0..rel.width())
            && self.find.iter().all(|f| matches!(f, Find::Var(_)))
        {
            // Each row is its relation row, in order: the values move out of the relation
            // as they become EDN, in one pass (no second pass to drop them).
            let (w, len) = (rel.width(), rel.len);
            let mut data = rel.data;
            data.truncate(w * len);
            sink.rows(w, len, data)?;
            return Ok(len);
        }
        let mut order: Vec<usize> = (0..rel.len).collect();
        if sorted && kind != ResultKind::Bag {
            order.sort_by(|a, b| {
                let (a, b) = (rel.row(*a), rel.row(*b));
                cols.iter()
                    .map(|c| a[*c].cmp(&b[*c]))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        }
        if single {
            order.truncate(1);
        }
        // A collection find is distinct over its one element; the relation may also hold a
        // pull pattern's variable.
        let mut seen = (kind == ResultKind::Coll && find_vars.len() > 1).then(HashSet::new);
        let mut n = 0;
        for i in order {
            let row = rel.row(i);
            if let Some(seen) = &mut seen {
                if !seen.insert(row[cols[0]].clone()) {
                    continue;
                }
            }
            let mut cells = Vec::with_capacity(self.find.len());
            for (f, col) in self.find.iter().zip(&cols) {
                cells.push(match f {
                    // The common case without `cell`'s `Result` (its error type is large).
                    Find::Var(_) => row[*col].to_edn(),
                    _ => self.cell(ctx, f, &rel, row, *col)?,
                });
            }
            sink.row(cells)?;
            n += 1;
        }
        Ok(n)
    }

    /// The variables of the `:find` elements (and of pull patterns given as inputs), each
    /// once, in order.
    pub(super) fn find_vars(&self) -> Vec<VarId> {
        let mut vars = Vec::new();
        for f in self.find.iter() {
            match f {
                Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => {
                    vars.push(*v)
                }
            }
            if let Find::Pull {
                pattern: PullPat::Input(p),
                ..
            } = f
            {
                vars.push(*p);
            }
        }
        let mut uniq = Vec::new();
        for v in vars {
            if !uniq.contains(&v) {
                uniq.push(v);
            }
        }
        uniq
    }

    fn cell(
        &self,
        ctx: &Ctx<'_>,
        f: &Find,
        rel: &Rel,
        row: &[vev_core::Value],
        col: usize,
    ) -> Result<Edn, QueryError> {
        match f {
            Find::Var(_) | Find::Agg { .. } => Ok(row[col].to_edn()),
            Find::Pull { src, pattern, .. } => {
                let source = ctx.sources.get(*src).copied().flatten().ok_or_else(|| {
                    QueryError::UnknownSource {
                        name: "$".to_owned(),
                        span: None,
                    }
                })?;
                let pattern = match pattern {
                    PullPat::Fixed(p) => p.clone(),
                    PullPat::Input(v) => {
                        let edn = row[rel.col(*v).expect("pattern bound")].to_edn();
                        Arc::new(vev_datalog::parse_pull_value(&edn)?)
                    }
                };
                match resolve_entity(source, &row[col])? {
                    Some(e) => Ok(pull(source, &pattern, e)?),
                    None => Ok(Edn::Nil),
                }
            }
        }
    }

    fn aggregate(&self, ctx: &Ctx<'_>, rel: &Rel) -> Result<Vec<Vec<Edn>>, QueryError> {
        // Group by the non-aggregate elements, in first-seen order.
        let key_elems: Vec<usize> = (0..self.find.len())
            .filter(|i| !matches!(self.find[*i], Find::Agg { .. }))
            .collect();
        let var_of = |f: &Find| match f {
            Find::Var(v) | Find::Agg { var: v, .. } | Find::Pull { var: v, .. } => *v,
        };
        let key_cols: Vec<usize> = key_elems
            .iter()
            .map(|i| rel.col(var_of(&self.find[*i])).expect("bound"))
            .collect();
        let mut groups: Vec<(Vec<vev_core::Value>, Vec<usize>)> = Vec::new();
        let mut index: HashMap<Vec<vev_core::Value>, usize> = HashMap::new();
        for (r, row) in rel.rows().enumerate() {
            let key: Vec<vev_core::Value> = key_cols.iter().map(|c| row[*c].clone()).collect();
            let g = *index.entry(key.clone()).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(r);
        }
        let mut out = Vec::with_capacity(groups.len());
        for (_, rows) in groups {
            let first = rel.row(rows[0]);
            let mut cells = Vec::with_capacity(self.find.len());
            for f in self.find.iter() {
                let col = rel.col(var_of(f)).expect("bound");
                cells.push(match f {
                    Find::Agg { name, args, .. } => {
                        let vals = rows.iter().map(|r| rel.row(*r)[col].clone()).collect();
                        agg::aggregate(ctx.registry, name, args, vals)?
                    }
                    other => self.cell(ctx, other, rel, first, col)?,
                });
            }
            out.push(cells);
        }
        Ok(out)
    }
}
