//! Why a benchmark run failed.

use std::path::PathBuf;
use std::process::ExitStatus;

#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum BenchError {
    /// Boxed: `vev::Error` is large, and every bench function returns this type.
    #[error("vev failed: {0}")]
    Vev(Box<vev::Error>),
    #[error("the pull root {root} is not an entity of the fixture")]
    MissingRoot { root: u64 },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{command}` in {dir} exited with {status}")]
    Command {
        command: &'static str,
        dir: PathBuf,
        status: ExitStatus,
    },
    #[error("a peer runner (node or JVM) printed invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("/proc/self/status has no numeric field {name}")]
    StatusField { name: &'static str },
    #[error("a peer runner's output has no field {field:?} of the expected type")]
    MissingField { field: &'static str },
    #[error("{cells} row counts differ from the naive count (marked ✗ in the table)")]
    RowMismatch { cells: usize },
    #[error("the SQLite floor failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("Vev's full-text search returned something other than [id score] rows")]
    SearchRows,
    #[error("tantivy failed: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("the storage benchmark's schema has no attribute :{ident}")]
    MissingAttribute { ident: &'static str },
    #[error("account {id} is missing from the storage benchmark's database")]
    MissingAccount { id: u64 },
    #[error("shape {shape} transacted {first} datoms at first and {now} later")]
    ShapeDatoms {
        shape: &'static str,
        first: usize,
        now: usize,
    },
    #[error("the open query for account {id} returned {rows} rows, not 5")]
    OpenQueryRows { id: u64, rows: usize },
    #[error("`{command}` exited with {status}: {stderr}")]
    Tool {
        command: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error("{path} is missing (PostgreSQL 15: `apt-get install postgresql-15`, or --pg-bin DIR)")]
    MissingProgram { path: PathBuf },
    #[error("pgbench's output has no line {line:?} with a number")]
    PgbenchOutput { line: &'static str },
    #[error("psql answered {output:?} to `{sql}`, not one integer")]
    PsqlValue { sql: String, output: String },
    #[error("cannot handle Ctrl-C: {0}")]
    Interrupt(#[from] ctrlc::Error),
    #[error("scripts/duckdb-extension.sh printed no path of vev.duckdb_extension")]
    ExtensionPath,
    #[error(
        "entity {e} is outside the user partition: the mbrainz export cannot give it a peer id"
    )]
    ExportEntity { e: u64 },
    #[error("attribute :{attr} holds a value type the mbrainz export does not write")]
    ExportValue { attr: String },
    #[error("the mbrainz rule set has no track-search clause in the form the Datalevin variant replaces")]
    RulesShape,
    #[error("{queries} of the peers' mbrainz answers differ from Vev's (marked ✗ in the report)")]
    AnswersDiffer { queries: usize },
    #[error("vev serve did not start: {0}")]
    Serve(#[from] vev_pg::ServeError),
    #[error("the throwaway postgresql failed: {message}")]
    Server { message: String },
    #[error("postgresql refused the benchmark's statement: {0}")]
    Postgres(#[from] postgres::Error),
}

impl From<vev::Error> for BenchError {
    fn from(e: vev::Error) -> BenchError {
        BenchError::Vev(Box::new(e))
    }
}

impl From<vev::StorageError> for BenchError {
    fn from(e: vev::StorageError) -> BenchError {
        BenchError::Vev(Box::new(e.into()))
    }
}

impl BenchError {
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> BenchError {
        let path = path.into();
        move |source| BenchError::Io {
            action,
            path,
            source,
        }
    }
}
