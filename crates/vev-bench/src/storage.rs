//! `vev-bench storage`: durable small transactions in Vev against the raw SQLite
//! floor and Datalevin, the same from several threads at once (group commit), then bulk
//! load, file size and open time.
//!
//! Everything lives in one scratch directory under the system temp dir (`/tmp`, on the same
//! disk as everything else: fsync is measured as it is), removed at the end. The phases run one
//! after the other, never concurrently: Vev and the floor interleaved per size
//! (`storage_latency`), Datalevin in its own JVM (`clj/storage.clj`), concurrent committers
//! (`storage_concurrent`), then the bulk loads (`storage_bulk`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

use crate::error::BenchError;
use crate::peers;
use crate::report::Machine;
use crate::storage_bulk::{self, BulkRun};
use crate::storage_concurrent::{self, ConcurrentRun};
use crate::storage_fixture::{Round, Shape, CITIES};
use crate::storage_latency::{self, Floor, SizeRun};

/// What `vev-bench storage` runs.
pub struct StorageConfig {
    pub sizes: Vec<u64>,
    pub warmup: usize,
    pub measurements: usize,
    pub bulk_datoms: Vec<u64>,
    pub datalevin: bool,
    pub jvm_warmup: usize,
    /// Transactions of each concurrent-committers cell (0 skips them).
    pub concurrent_txs: usize,
}

/// Datalevin's run: its samples per size and shape.
pub struct DatalevinRun {
    pub label: String,
    pub env_flags: Vec<String>,
    /// (entities, build ms)
    pub builds: Vec<(u64, f64)>,
    pub shapes: Vec<DatalevinShape>,
}

pub struct DatalevinShape {
    pub entities: u64,
    pub shape: String,
    pub round: String,
    /// Distinct tx-data counts of the timed transactions.
    pub datoms: Vec<u64>,
    pub samples_us: Vec<f64>,
}

impl DatalevinRun {
    pub fn shape(&self, entities: u64, shape: Shape, round: Round) -> Option<&DatalevinShape> {
        self.shapes
            .iter()
            .find(|s| s.entities == entities && s.shape == shape.name() && s.round == round.name())
    }
}

pub struct StorageResults {
    pub machine: Machine,
    pub cfg: StorageConfig,
    pub sizes: Vec<SizeRun>,
    /// Times the kernel preempted the bench while it measured Vev and the floor.
    pub preemptions: u64,
    pub datalevin: Option<DatalevinRun>,
    pub concurrent: Vec<ConcurrentRun>,
    pub bulk: Vec<BulkRun>,
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let name = format!(
            "{}{suffix}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("")
        );
        let _ = std::fs::remove_file(path.with_file_name(name));
    }
}

pub fn run(cfg: StorageConfig) -> Result<StorageResults, BenchError> {
    assert!(
        cfg.measurements > 0 && cfg.sizes.iter().all(|&n| n > 0),
        "--measurements and the sizes must be positive"
    );
    let mut machine = Machine::probe();
    let scratch =
        Scratch(std::env::temp_dir().join(format!("vev-bench-storage-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).map_err(BenchError::io("create", &scratch.0))?;

    let floor_path = scratch.0.join("floor.sqlite");
    let mut floor = Floor::open(&floor_path)?;
    let latency = storage_latency::run_sizes(
        &scratch.0,
        &cfg.sizes,
        cfg.warmup,
        cfg.measurements,
        &mut floor,
    )?;
    drop(floor);
    remove_db(&floor_path);
    for &n in &cfg.sizes {
        remove_db(&scratch.0.join(format!("accounts-{n}.vev")));
    }

    let datalevin = if cfg.datalevin {
        Some(run_datalevin(&cfg, &scratch.0)?)
    } else {
        None
    };

    let concurrent = match cfg.concurrent_txs {
        0 => Vec::new(),
        txs => storage_concurrent::run(&scratch.0, txs)?,
    };

    let mut bulk = Vec::new();
    for &datoms in &cfg.bulk_datoms {
        let path = scratch.0.join(format!("bulk-{datoms}.vev"));
        bulk.push(storage_bulk::run(&path, datoms)?);
        remove_db(&path);
    }
    machine.finish();
    Ok(StorageResults {
        machine,
        cfg,
        sizes: latency.sizes,
        preemptions: latency.preemptions,
        datalevin,
        concurrent,
        bulk,
    })
}

fn run_datalevin(cfg: &StorageConfig, scratch: &Path) -> Result<DatalevinRun, BenchError> {
    eprintln!("running Datalevin");
    let dir = scratch.join("datalevin");
    std::fs::create_dir_all(&dir).map_err(BenchError::io("create", &dir))?;
    let spec = json!({
        "dir": dir,
        "warmup": cfg.warmup,
        "measurements": cfg.measurements,
        "jvm_warmup": cfg.jvm_warmup,
        "jvm_warmup_entities": 2_000,
        "cities": CITIES,
        "sizes": cfg.sizes.iter().map(|&n| json!({"entities": n})).collect::<Vec<_>>(),
        "shapes": Shape::RUN_ORDER.iter()
            .map(|s| json!({"name": s.name(), "offset": s.offset()}))
            .collect::<Vec<_>>(),
        "rounds": Round::ALL.iter()
            .map(|r| json!({"name": r.name(), "value_offset": r.value_offset()}))
            .collect::<Vec<_>>(),
    });
    let spec_path = scratch.join("datalevin-storage.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec)?)
        .map_err(BenchError::io("write", &spec_path))?;
    let stdout = peers::run_datalevin_script("clj/storage.clj", &[spec_path.into_os_string()])?;
    let result = parse_datalevin(&stdout);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn parse_datalevin(stdout: &[u8]) -> Result<DatalevinRun, BenchError> {
    let missing = |field: &'static str| BenchError::MissingField { field };
    let mut lines = stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let header: Json = serde_json::from_slice(lines.next().unwrap_or(b"{}"))?;
    let text = |doc: &Json, f: &'static str| -> Result<String, BenchError> {
        Ok(doc
            .get(f)
            .and_then(Json::as_str)
            .ok_or(missing(f))?
            .to_string())
    };
    let mut run = DatalevinRun {
        label: format!(
            "Datalevin {} (Java {})",
            text(&header, "version")?,
            text(&header, "java_version")?
        ),
        env_flags: header
            .get("env_flags")
            .and_then(Json::as_array)
            .ok_or(missing("env_flags"))?
            .iter()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect(),
        builds: Vec::new(),
        shapes: Vec::new(),
    };
    for line in lines {
        let doc: Json = serde_json::from_slice(line)?;
        let entities = doc
            .get("entities")
            .and_then(Json::as_u64)
            .ok_or(missing("entities"))?;
        let numbers = |f: &'static str| -> Result<Vec<f64>, BenchError> {
            doc.get(f)
                .and_then(Json::as_array)
                .ok_or(missing(f))?
                .iter()
                .map(|x| x.as_f64().ok_or(missing(f)))
                .collect()
        };
        match doc.get("build_ms").and_then(Json::as_f64) {
            Some(ms) => run.builds.push((entities, ms)),
            None => run.shapes.push(DatalevinShape {
                entities,
                shape: text(&doc, "shape")?,
                round: text(&doc, "round")?,
                datoms: numbers("datoms")?.into_iter().map(|d| d as u64).collect(),
                samples_us: numbers("samples_us")?,
            }),
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datalevin_output_parses() {
        let out = br#"{"engine":"datalevin","version":"1.2.8","java_version":"25","env_flags":["nordahead","notls"]}
{"entities":50,"build_ms":12.5}
{"entities":50,"shape":"append","round":"cached","datoms":[3],"samples_us":[100.0,200.5]}
"#;
        let run = parse_datalevin(out).unwrap();
        assert_eq!(run.label, "Datalevin 1.2.8 (Java 25)");
        assert_eq!(run.env_flags, ["nordahead", "notls"]);
        assert_eq!(run.builds, [(50, 12.5)]);
        assert!(run.shape(50, Shape::Append, Round::First).is_none());
        let s = run.shape(50, Shape::Append, Round::Cached).unwrap();
        assert_eq!(s.datoms, [3]);
        assert_eq!(s.samples_us, [100.0, 200.5]);
    }
}
