//! (a) DataScript's side of the fixture load, run by `node js/core.js <fixture.json>`.
//!
//! The npm package is pinned by `js/package-lock.json` and installed with `npm ci` the first
//! time; the runner prints one JSON object with the milliseconds of each repetition.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::BenchError;

/// Milliseconds of each timed repetition, and the versions that produced them.
pub struct DataScriptTimes {
    pub version: String,
    pub node_version: String,
    pub one_tx_ms: Vec<f64>,
    pub many_tx_ms: Vec<f64>,
}

pub fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("js")
}

fn run_checked(
    cmd: &mut Command,
    command: &'static str,
    dir: &Path,
) -> Result<Vec<u8>, BenchError> {
    let out = cmd
        .current_dir(dir)
        .output()
        .map_err(BenchError::io("run `node`/`npm` in", dir))?;
    if !out.status.success() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        return Err(BenchError::Command {
            command,
            dir: dir.to_path_buf(),
            status: out.status,
        });
    }
    Ok(out.stdout)
}

/// Install the pinned DataScript unless it is already there.
pub fn ensure_installed(dir: &Path) -> Result<(), BenchError> {
    if dir.join("node_modules/datascript").is_dir() {
        return Ok(());
    }
    eprintln!("installing DataScript with `npm ci` in {}", dir.display());
    run_checked(
        Command::new("npm").args(["ci", "--silent"]),
        "npm ci --silent",
        dir,
    )?;
    Ok(())
}

fn numbers(doc: &serde_json::Value, field: &'static str) -> Result<Vec<f64>, BenchError> {
    let list = doc
        .get(field)
        .and_then(|v| v.as_array())
        .ok_or(BenchError::MissingField { field })?;
    list.iter()
        .map(|x| x.as_f64().ok_or(BenchError::MissingField { field }))
        .collect()
}

fn text(doc: &serde_json::Value, field: &'static str) -> String {
    doc.get(field)
        .and_then(|v| v.as_str())
        .unwrap_or("?")
        .to_string()
}

pub fn run(fixture: &Path, reps: usize) -> Result<DataScriptTimes, BenchError> {
    let dir = js_dir();
    ensure_installed(&dir)?;
    let mut cmd = Command::new("node");
    cmd.arg("core.js").arg(fixture).arg(reps.to_string());
    let stdout = run_checked(&mut cmd, "node core.js", &dir)?;
    let doc: serde_json::Value = serde_json::from_slice(&stdout)?;
    Ok(DataScriptTimes {
        version: text(&doc, "datascript_version"),
        node_version: text(&doc, "node_version"),
        one_tx_ms: numbers(&doc, "one_tx_ms")?,
        many_tx_ms: numbers(&doc, "many_tx_ms")?,
    })
}
