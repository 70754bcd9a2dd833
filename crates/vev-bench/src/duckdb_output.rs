//! The JSON that `bench/duckdb/bench.py` prints, read into the results the report renders.
//! Every engine-keyed object has the three engines, under the driver's labels `Vev`, `DuckDB`
//! and `SQLite`.

use serde_json::Value as Json;

use crate::error::BenchError;

/// One value per engine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerEngine<T> {
    pub vev: T,
    /// (a): a `datoms` table in a DuckDB file.
    pub duckdb: T,
    /// (b): a `datoms` table in a SQLite file.
    pub sqlite: T,
}

impl<T> PerEngine<T> {
    fn read(doc: &Json, one: impl Fn(&Json) -> Result<T, BenchError>) -> Result<Self, BenchError> {
        Ok(PerEngine {
            vev: one(field(doc, "Vev")?)?,
            duckdb: one(field(doc, "DuckDB")?)?,
            sqlite: one(field(doc, "SQLite")?)?,
        })
    }
}

/// Bytes on disk after the bulk load.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StoreBytes {
    pub file: u64,
    /// Vev's and SQLite's `-wal`, DuckDB's `.wal`.
    pub wal: u64,
}

impl StoreBytes {
    pub fn total(self) -> u64 {
        self.file + self.wal
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct QueryResult {
    pub name: String,
    /// The Datalog (and how Vev is called), as the report shows it.
    pub shown: String,
    /// Rows per call, the mean over the calls' probe values.
    pub rows: f64,
    /// Different calls taken in turn (the probe values).
    pub calls: u64,
    pub samples_ms: PerEngine<Vec<f64>>,
}

/// One trivial call per engine: DuckDB's table-function floor on Vev's connection and on (a),
/// a one-value SELECT on (b).
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    pub duckdb_sql: String,
    pub sqlite_sql: String,
    pub samples_ms: PerEngine<Vec<f64>>,
}

/// `vev_attribute` read whole by one aggregate.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanResult {
    pub attribute: String,
    /// `sum(v)` or `count(*)`.
    pub aggregate: String,
    pub sql: String,
    pub values: u64,
    pub samples_ms: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SizeResult {
    pub target_datoms: u64,
    /// Datoms of the log as the peers hold them (transaction instants included).
    pub datoms: u64,
    pub people: u64,
    pub transactions: u64,
    pub load_transactions: u64,
    pub people_per_tx: u64,
    pub bulk_load_s: PerEngine<f64>,
    /// After the load; Vev's once its background checkpoint has finished.
    pub store: PerEngine<StoreBytes>,
    /// Vev's files right after its last transaction, before that checkpoint.
    pub vev_store_before_checkpoint: StoreBytes,
    /// How long Vev's files took to settle after the load.
    pub vev_checkpoint_s: f64,
    pub queries: Vec<QueryResult>,
    /// The cost of one trivial call on each engine's connection.
    pub floor: Floor,
    /// Milliseconds of each single-datom transaction.
    pub transactions_ms: PerEngine<Vec<f64>>,
    pub scans: Vec<ScanResult>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DriverOutput {
    pub duckdb_version: String,
    pub sqlite_version: String,
    pub python_version: String,
    pub seed: u64,
    pub rounds: u64,
    pub reps: u64,
    pub warmup_ms: f64,
    pub budget_ms: f64,
    pub txs: u64,
    pub sizes: Vec<SizeResult>,
}

fn field<'a>(doc: &'a Json, name: &'static str) -> Result<&'a Json, BenchError> {
    doc.get(name)
        .ok_or(BenchError::MissingField { field: name })
}

fn text(doc: &Json, name: &'static str) -> Result<String, BenchError> {
    let s = field(doc, name)?.as_str();
    s.map(str::to_string)
        .ok_or(BenchError::MissingField { field: name })
}

fn uint(doc: &Json, name: &'static str) -> Result<u64, BenchError> {
    field(doc, name)?
        .as_u64()
        .ok_or(BenchError::MissingField { field: name })
}

fn float(doc: &Json, name: &'static str) -> Result<f64, BenchError> {
    field(doc, name)?
        .as_f64()
        .ok_or(BenchError::MissingField { field: name })
}

fn array<'a>(doc: &'a Json, name: &'static str) -> Result<&'a [Json], BenchError> {
    field(doc, name)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or(BenchError::MissingField { field: name })
}

/// A non-empty array of numbers.
fn samples(doc: &Json) -> Result<Vec<f64>, BenchError> {
    let missing = BenchError::MissingField {
        field: "samples_ms",
    };
    let items = doc.as_array().filter(|a| !a.is_empty());
    let Some(items) = items else {
        return Err(missing);
    };
    items
        .iter()
        .map(|x| {
            x.as_f64().ok_or(BenchError::MissingField {
                field: "samples_ms",
            })
        })
        .collect()
}

fn query(doc: &Json) -> Result<QueryResult, BenchError> {
    Ok(QueryResult {
        name: text(doc, "name")?,
        shown: text(doc, "shown")?,
        rows: float(doc, "rows")?,
        calls: uint(doc, "calls")?,
        samples_ms: PerEngine::read(field(doc, "samples_ms")?, samples)?,
    })
}

fn scan(doc: &Json) -> Result<ScanResult, BenchError> {
    Ok(ScanResult {
        attribute: text(doc, "attribute")?,
        aggregate: text(doc, "aggregate")?,
        sql: text(doc, "sql")?,
        values: uint(doc, "values")?,
        samples_ms: samples(field(doc, "samples_ms")?)?,
    })
}

fn floor(doc: &Json) -> Result<Floor, BenchError> {
    let sql = field(doc, "sql")?;
    Ok(Floor {
        duckdb_sql: text(sql, "DuckDB")?,
        sqlite_sql: text(sql, "SQLite")?,
        samples_ms: PerEngine::read(field(doc, "samples_ms")?, samples)?,
    })
}

fn store(doc: &Json) -> Result<StoreBytes, BenchError> {
    Ok(StoreBytes {
        file: uint(doc, "file")?,
        wal: uint(doc, "wal")?,
    })
}

fn size(doc: &Json) -> Result<SizeResult, BenchError> {
    let seconds = |d: &Json| {
        d.as_f64().ok_or(BenchError::MissingField {
            field: "bulk_load_s",
        })
    };
    Ok(SizeResult {
        target_datoms: uint(doc, "target_datoms")?,
        datoms: uint(doc, "datoms")?,
        people: uint(doc, "people")?,
        transactions: uint(doc, "transactions")?,
        load_transactions: uint(doc, "load_transactions")?,
        people_per_tx: uint(doc, "people_per_tx")?,
        bulk_load_s: PerEngine::read(field(doc, "bulk_load_s")?, seconds)?,
        store: PerEngine::read(field(doc, "store_bytes")?, store)?,
        vev_store_before_checkpoint: store(field(field(doc, "vev_checkpoint")?, "before")?)?,
        vev_checkpoint_s: float(field(doc, "vev_checkpoint")?, "seconds")?,
        queries: array(doc, "queries")?
            .iter()
            .map(query)
            .collect::<Result<_, _>>()?,
        floor: floor(field(doc, "floor")?)?,
        transactions_ms: PerEngine::read(field(doc, "transactions_ms")?, samples)?,
        scans: array(doc, "scans")?
            .iter()
            .map(scan)
            .collect::<Result<_, _>>()?,
    })
}

/// The driver's stdout: one JSON document.
pub fn parse(stdout: &[u8]) -> Result<DriverOutput, BenchError> {
    let doc: Json = serde_json::from_slice(stdout)?;
    Ok(DriverOutput {
        duckdb_version: text(&doc, "duckdb_version")?,
        sqlite_version: text(&doc, "sqlite_version")?,
        python_version: text(&doc, "python_version")?,
        seed: uint(&doc, "seed")?,
        rounds: uint(&doc, "rounds")?,
        reps: uint(&doc, "reps")?,
        warmup_ms: float(&doc, "warmup_ms")?,
        budget_ms: float(&doc, "budget_ms")?,
        txs: uint(&doc, "txs")?,
        sizes: array(&doc, "sizes")?
            .iter()
            .map(size)
            .collect::<Result<_, _>>()?,
    })
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A driver output of one size with every field, in the driver's shape.
    pub fn sample() -> serde_json::Value {
        let engines = |v: serde_json::Value, d: serde_json::Value, s: serde_json::Value| serde_json::json!({"Vev": v, "DuckDB": d, "SQLite": s});
        let query = |name: &str, vev: f64, duck: f64, lite: f64| {
            serde_json::json!({
                "name": name, "shown": format!("[:find ?x ...] ({name})"), "rows": 1.0,
                "calls": 16, "samples_ms": engines(vev.into(), duck.into(), lite.into()),
            })
        };
        let mut queries = vec![
            query("point_lookup", 0.1, 9.0, 0.02),
            query("aggregate", 1.0, 6.0, 140.0),
        ];
        for q in &mut queries {
            for e in ["Vev", "DuckDB", "SQLite"] {
                let x = q["samples_ms"][e].as_f64().unwrap();
                q["samples_ms"][e] = serde_json::json!([x, x, x * 2.0]);
            }
        }
        serde_json::json!({
            "duckdb_version": "2.0.1", "sqlite_version": "3.40.1", "python_version": "3.11.7",
            "seed": 21, "rounds": 2, "reps": 50, "warmup_ms": 100.0, "budget_ms": 1000.0,
            "txs": 4,
            "sizes": [{
                "target_datoms": 1_000_000, "datoms": 1_000_152, "people": 163_934,
                "transactions": 174, "load_transactions": 164, "people_per_tx": 1000,
                "bulk_load_s": engines(10.0.into(), 0.5.into(), 4.0.into()),
                "store_bytes": engines(
                    serde_json::json!({"file": 4_000_000, "wal": 1_000_000}),
                    serde_json::json!({"file": 5_000_000, "wal": 0}),
                    serde_json::json!({"file": 74_000_000, "wal": 0}),
                ),
                "vev_checkpoint": {"before": {"file": 3_000_000, "wal": 4_000_000}, "seconds": 2.5},
                "queries": queries,
                "floor": {
                    "samples_ms": engines(
                        serde_json::json!([0.05]), serde_json::json!([0.06]), serde_json::json!([0.002]),
                    ),
                    "sql": {"DuckDB": "SELECT * FROM range(1)", "SQLite": "SELECT 1"},
                },
                "transactions_ms": engines(
                    serde_json::json!([0.4, 0.4, 0.5, 0.5]),
                    serde_json::json!([2.0, 2.0, 2.0, 2.0]),
                    serde_json::json!([1.0, 1.0, 1.0, 1.0]),
                ),
                "scans": [{
                    "attribute": ":person/age", "aggregate": "sum(v)", "sql": "SELECT sum(v) FROM vev_attribute(path, ':person/age')",
                    "values": 163_934, "samples_ms": [2.0, 2.0, 3.0],
                }],
            }],
        })
    }

    #[test]
    fn every_field_is_read_by_engine() {
        let out = parse(sample().to_string().as_bytes()).unwrap();
        assert_eq!(out.duckdb_version, "2.0.1");
        assert_eq!(out.rounds, 2);
        let size = &out.sizes[0];
        assert_eq!(size.datoms, 1_000_152);
        assert_eq!(size.bulk_load_s.duckdb, 0.5);
        assert_eq!(size.store.vev.total(), 5_000_000);
        assert_eq!(size.vev_store_before_checkpoint.total(), 7_000_000);
        assert_eq!(size.vev_checkpoint_s, 2.5);
        assert_eq!(size.queries[1].name, "aggregate");
        assert_eq!(size.queries[1].samples_ms.sqlite, [140.0, 140.0, 280.0]);
        assert_eq!(size.transactions_ms.vev.len(), 4);
        assert_eq!(size.floor.sqlite_sql, "SELECT 1");
        assert_eq!(size.floor.samples_ms.duckdb, [0.06]);
        assert_eq!(size.scans[0].values, 163_934);
    }

    #[test]
    fn a_missing_engine_or_empty_samples_name_the_field() {
        let mut doc = sample();
        doc["sizes"][0]["bulk_load_s"]
            .as_object_mut()
            .unwrap()
            .remove("SQLite");
        let err = parse(doc.to_string().as_bytes()).unwrap_err();
        assert!(
            matches!(err, BenchError::MissingField { field: "SQLite" }),
            "{err}"
        );

        let mut doc = sample();
        doc["sizes"][0]["scans"][0]["samples_ms"] = serde_json::json!([]);
        let err = parse(doc.to_string().as_bytes()).unwrap_err();
        assert!(
            matches!(
                err,
                BenchError::MissingField {
                    field: "samples_ms"
                }
            ),
            "{err}"
        );
    }
}
