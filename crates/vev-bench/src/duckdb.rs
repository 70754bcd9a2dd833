//! The `duckdb` suite: Vev through its DuckDB extension against a `datoms` table in DuckDB (a)
//! and in SQLite (b), the reference extension's two designs, from one Python client.
//!
//! Rust only prepares and reports: it builds the extension with `scripts/duckdb-extension.sh`
//! (release; the script prints the file's path last), makes a virtual environment with the
//! pinned `duckdb` wheel of `scripts/duckdb-requirements.txt` beside it in the target directory
//! (reused while it has that version), and runs `bench/duckdb/bench.py`, which generates the
//! dataset, loads and times all three engines from Python (every call
//! `con.execute(sql, params).fetchall()`), checks that they give the same answers, and prints
//! JSON (`duckdb_output.rs`) that `duckdb_report.rs` renders.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::duckdb_output::{self, DriverOutput};
use crate::error::BenchError;
use crate::report::Machine;

pub struct DuckdbConfig {
    /// Datoms of each dataset, about.
    pub sizes: Vec<u64>,
    pub rounds: u32,
    pub reps: u32,
    pub warmup_ms: u32,
    pub budget_ms: u32,
    pub txs: u32,
}

pub struct DuckdbResults {
    pub machine: Machine,
    pub driver: DriverOutput,
    /// The command line as given (`vev-bench duckdb ...`), for the report.
    pub command: String,
}

pub(crate) fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run `cmd` with stdin closed and stderr passed through; its stdout if it succeeded.
fn stdout_of(cmd: &mut Command, command: &'static str) -> Result<Vec<u8>, BenchError> {
    let dir = workspace_dir();
    let out = cmd
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(BenchError::io("start a child process in", &dir))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command,
            dir,
            status: out.status,
        });
    }
    Ok(out.stdout)
}

/// The last non-empty line of `stdout`, trimmed.
pub fn last_line(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.to_string())
}

/// Build the extension (release); the path of `vev.duckdb_extension`.
fn build_extension() -> Result<PathBuf, BenchError> {
    eprintln!("building the extension (scripts/duckdb-extension.sh)");
    let script = "scripts/duckdb-extension.sh";
    let stdout = stdout_of(&mut Command::new(script), script)?;
    let path = last_line(&stdout).ok_or(BenchError::ExtensionPath)?;
    Ok(PathBuf::from(path))
}

/// The version `scripts/duckdb-requirements.txt` pins (`duckdb==X`).
pub fn pinned_version(requirements: &str) -> Option<&str> {
    requirements
        .lines()
        .find_map(|l| l.trim().strip_prefix("duckdb=="))
        .map(str::trim)
}

/// The virtual environment's Python, made (or remade) unless it already has the pinned wheel.
pub(crate) fn venv_python(dir: &Path) -> Result<PathBuf, BenchError> {
    let requirements = workspace_dir().join("scripts/duckdb-requirements.txt");
    let pinned =
        std::fs::read_to_string(&requirements).map_err(BenchError::io("read", &requirements))?;
    let pinned = pinned_version(&pinned).ok_or(BenchError::MissingField {
        field: "duckdb== in scripts/duckdb-requirements.txt",
    })?;
    let python = dir.join("bin/python");
    let probe = Command::new(&python)
        .args(["-c", "import duckdb; print(duckdb.__version__)"])
        .stderr(Stdio::null())
        .output();
    if probe.is_ok_and(|o| o.status.success() && last_line(&o.stdout).as_deref() == Some(pinned)) {
        return Ok(python);
    }
    eprintln!("making {} with duckdb {pinned}", dir.display());
    stdout_of(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(dir),
        "python3 -m venv",
    )?;
    stdout_of(
        Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "-r"])
            .arg(&requirements),
        "pip install -r scripts/duckdb-requirements.txt",
    )?;
    Ok(python)
}

fn joined<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub fn run(cfg: &DuckdbConfig, command: String) -> Result<DuckdbResults, BenchError> {
    let mut machine = Machine::probe();
    let extension = build_extension()?;
    // The script prints `<target>/release/vev.duckdb_extension`: the venv goes in <target>.
    let target = extension
        .parent()
        .and_then(Path::parent)
        .ok_or(BenchError::ExtensionPath)?;
    let python = venv_python(&target.join("duckdb-venv"))?;
    let work = tempfile::Builder::new()
        .prefix("vev-bench-duckdb-")
        .tempdir()
        .map_err(BenchError::io("create", std::env::temp_dir()))?;
    let mut cmd = Command::new(python);
    cmd.arg("bench/duckdb/bench.py")
        .arg("--extension")
        .arg(&extension)
        .arg("--work")
        .arg(work.path())
        .args(["--sizes", &joined(&cfg.sizes)])
        .args(["--rounds", &cfg.rounds.to_string()])
        .args(["--reps", &cfg.reps.to_string()])
        .args(["--warmup-ms", &cfg.warmup_ms.to_string()])
        .args(["--budget-ms", &cfg.budget_ms.to_string()])
        .args(["--txs", &cfg.txs.to_string()]);
    let stdout = stdout_of(&mut cmd, "bench/duckdb/bench.py")?;
    machine.finish();
    Ok(DuckdbResults {
        machine,
        driver: duckdb_output::parse(&stdout)?,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_path_is_the_scripts_last_line() {
        let out = b"warning: something\n/t/release/vev.duckdb_extension\n\n";
        assert_eq!(
            last_line(out).as_deref(),
            Some("/t/release/vev.duckdb_extension")
        );
        assert_eq!(last_line(b"\n \n"), None);
    }

    #[test]
    fn the_pinned_wheel_version_is_read_from_the_requirements() {
        assert_eq!(
            pinned_version("# the wheel\nduckdb==2.0.1\n"),
            Some("2.0.1")
        );
        assert_eq!(pinned_version("duckdb>=2\n"), None);
    }
}
