//! The frame every table function shares: the DuckDB callbacks (bind, init, scan), the
//! projection DuckDB pushes down, the 2048-row chunks, and the boundary no panic crosses.
//!
//! A function says how it binds (its columns, from its arguments) and how it starts a scan (a
//! `Producer` that fills chunks); `Table<F, N>` turns that into DuckDB's `VTab`, with `N`
//! extra arguments of any type (DuckDB's C API has no variadic table functions, so
//! `vev_query` is registered once per argument count).

use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use duckdb::core::{DataChunkHandle, LogicalTypeHandle, LogicalTypeId};
use duckdb::vtab::{BindInfo, InitInfo, TableFunctionInfo, VTab};

use crate::args::Args;
use crate::column::{ColType, Out};
use crate::dbs::lock;
use crate::error::{ExtError, Result};

/// A function's output columns: names and types.
pub type Columns = Vec<(String, ColType)>;

/// Rows a chunk holds (DuckDB's vector size).
pub const CHUNK_ROWS: usize = 2048;

/// One table function.
pub trait Function: 'static {
    /// Its SQL name.
    const NAME: &'static str;
    /// What bind decided, kept for the scans.
    type Spec: Send + Sync;
    /// The fixed positional parameters' types (the path first).
    fn parameters() -> Vec<LogicalTypeId>;
    /// The named parameters.
    fn named() -> Vec<(String, LogicalTypeId)> {
        Vec::new()
    }
    /// The output columns and what the scans need, from the arguments.
    fn bind(args: &Args<'_>) -> Result<(Columns, Self::Spec)>;
    /// A new scan: called once per execution of the statement.
    fn start(spec: &Self::Spec) -> Result<Box<dyn Producer>>;

    /// How many rows the scan gives, if bind knows (DuckDB plans joins and threads by it).
    fn rows(_spec: &Self::Spec) -> Option<usize> {
        None
    }
}

/// What fills a scan's chunks. DuckDB may call `fill` from several threads at once (up to
/// `threads`); a call that returns 0 ends that thread's part of the scan.
pub trait Producer: Send + Sync {
    /// Write up to `CHUNK_ROWS` rows into `chunk`; return how many.
    fn fill(&self, chunk: &mut Chunk<'_>) -> Result<usize>;

    /// How many threads may fill at once.
    fn threads(&self) -> u64 {
        1
    }
}

/// The output columns of one chunk, reached by the function's own column numbers.
pub struct Chunk<'a> {
    outs: Vec<Out<'a>>,
    /// Function column → position in `outs`, `None` when DuckDB did not ask for it.
    slot: &'a [Option<usize>],
}

impl<'a> Chunk<'a> {
    /// Column `i` of the function, if the query reads it.
    pub fn col(&mut self, i: usize) -> Option<&mut Out<'a>> {
        let s = self.slot.get(i).copied().flatten()?;
        self.outs.get_mut(s)
    }

    /// Every column of the function, by its number: `None` for those the query does not read.
    pub fn columns(&mut self) -> Vec<Option<&mut Out<'a>>> {
        let mut by_pos: Vec<Option<&mut Out<'a>>> = self.outs.iter_mut().map(Some).collect();
        self.slot
            .iter()
            .map(|s| s.and_then(|pos| by_pos.get_mut(pos).and_then(Option::take)))
            .collect()
    }

    /// Whether the query reads column `i`.
    pub fn wants(&self, i: usize) -> bool {
        self.slot.get(i).copied().flatten().is_some()
    }
}

/// Bind's result.
pub struct Bound<S> {
    columns: Vec<ColType>,
    /// `None` only for the `testing` feature's panicking scan.
    spec: Option<S>,
}

/// One scan's state.
pub struct Scan {
    /// The function's column number of each output vector, in order.
    outputs: Vec<usize>,
    /// The inverse of `outputs`.
    slot: Vec<Option<usize>>,
    producer: Box<dyn Producer>,
}

/// Run `f`, turning a panic into an error: no unwinding reaches DuckDB.
pub fn guard<T>(function: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(ExtError::new(
                "duckdb/panic",
                format!("{function} failed inside Vev (a bug; please report it): {what}"),
            ))
        }
    }
}

/// A table function as DuckDB sees it.
pub struct Table<F>(PhantomData<F>);

impl<F: Function> VTab for Table<F> {
    type InitData = Scan;
    type BindData = Bound<F::Spec>;

    fn bind(bind: &BindInfo) -> std::result::Result<Self::BindData, Box<dyn std::error::Error>> {
        let (columns, spec) = guard(F::NAME, || {
            let args = Args::new(bind, F::NAME);
            #[cfg(feature = "testing")]
            if let crate::testing::Hook::PanicInScan(columns) = crate::testing::hook(&args) {
                return Ok((columns, None));
            }
            F::bind(&args).map(|(columns, spec)| (columns, Some(spec)))
        })?;
        for (name, ty) in &columns {
            bind.add_result_column(name, ty.logical());
        }
        if let Some(n) = spec.as_ref().and_then(F::rows) {
            bind.set_cardinality(n as u64, true);
        }
        Ok(Bound {
            columns: columns.into_iter().map(|(_, t)| t).collect(),
            spec,
        })
    }

    fn init(init: &InitInfo) -> std::result::Result<Self::InitData, Box<dyn std::error::Error>> {
        let bound = init.get_bind_data::<Bound<F::Spec>>();
        // SAFETY: DuckDB hands init the bind data bind set (a `Bound<F::Spec>`, by this very
        // `VTab`), which lives until the statement is done, after every init and scan.
        let Some(bound) = (unsafe { bound.as_ref() }) else {
            return Err(ExtError::new("duckdb/internal", "init without bind data").into());
        };
        let n = bound.columns.len();
        let outputs: Vec<usize> = init
            .get_column_indices()
            .into_iter()
            .map(|i| usize::try_from(i).unwrap_or(usize::MAX))
            .collect();
        let mut slot = vec![None; n];
        for (pos, &col) in outputs.iter().enumerate() {
            if let Some(s) = slot.get_mut(col) {
                *s = Some(pos);
            }
        }
        let producer = match &bound.spec {
            Some(spec) => guard(F::NAME, || F::start(spec))?,
            #[cfg(feature = "testing")]
            None => Box::new(crate::testing::PanicOnScan),
            #[cfg(not(feature = "testing"))]
            None => return Err(ExtError::new("duckdb/internal", "bind made no spec").into()),
        };
        init.set_max_threads(producer.threads());
        Ok(Scan {
            outputs,
            slot,
            producer,
        })
    }

    fn func(
        func: &TableFunctionInfo<Self>,
        output: &mut DataChunkHandle,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        let bound = func.get_bind_data();
        let scan = func.get_init_data();
        let rows = guard(F::NAME, || {
            let mut outs = Vec::with_capacity(scan.outputs.len());
            for (pos, &col) in scan.outputs.iter().enumerate() {
                // A column DuckDB asks for beyond the function's own (its row id) gets no
                // values: nothing reads it.
                let ty = bound.columns.get(col).copied().unwrap_or(ColType::BigInt);
                outs.push(Out::new(output.flat_vector(pos), ty));
            }
            let mut chunk = Chunk {
                outs,
                slot: &scan.slot,
            };
            scan.producer.fill(&mut chunk)
        })?;
        output.set_len(rows);
        Ok(())
    }

    fn supports_pushdown() -> bool {
        true
    }

    fn parameters() -> Option<Vec<LogicalTypeHandle>> {
        Some(
            F::parameters()
                .into_iter()
                .map(LogicalTypeHandle::from)
                .collect(),
        )
    }

    fn named_parameters() -> Option<Vec<(String, LogicalTypeHandle)>> {
        Some(
            F::named()
                .into_iter()
                .map(|(name, ty)| (name, LogicalTypeHandle::from(ty)))
                .collect(),
        )
    }
}

/// The named parameters of every reading function: a past, a since, or the whole history.
pub fn time_parameters() -> Vec<(String, LogicalTypeId)> {
    vec![
        ("as_of".to_owned(), LogicalTypeId::Any),
        ("since".to_owned(), LogicalTypeId::Any),
        ("history".to_owned(), LogicalTypeId::Boolean),
    ]
}

/// Rows computed whole (a query's result, a pull, a transaction's datoms), handed out a chunk
/// at a time.
pub struct Materialized {
    rows: Mutex<std::vec::IntoIter<Vec<vev::Edn>>>,
}

impl Materialized {
    /// A producer over `rows`, each with one value per function column.
    pub fn boxed(rows: Vec<Vec<vev::Edn>>) -> Box<dyn Producer> {
        Box::new(Materialized {
            rows: Mutex::new(rows.into_iter()),
        })
    }
}

impl Producer for Materialized {
    fn fill(&self, chunk: &mut Chunk<'_>) -> Result<usize> {
        let mut rows = lock(&self.rows);
        let mut n = 0;
        while n < CHUNK_ROWS {
            let Some(row) = rows.next() else { break };
            for (i, v) in row.iter().enumerate() {
                if let Some(out) = chunk.col(i) {
                    out.edn(n, v)?;
                }
            }
            n += 1;
        }
        Ok(n)
    }
}
