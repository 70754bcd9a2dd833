//! Running DataScript under node for the tests that take it as an outside reference
//! (`crates/vev/tests/query_datascript.rs`, `crates/vev-mbrainz/tests/datascript.rs`, which
//! includes this file by path).
//!
//! DataScript is the `datascript` package of `crates/vev-bench/js`, installed there with
//! `npm ci` when missing. When `node` is not on the PATH or `npm ci` fails, a test fails under
//! `CI=true` (CI must run DataScript); elsewhere it says on stderr that it is skipped, and
//! passes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vev-bench/js")
}

fn node_on_path() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `npm ci` in `crates/vev-bench/js` unless DataScript is there already; why not, if it
/// cannot be installed. Once per test binary, so that tests running side by side do not
/// install at the same time.
fn ensure_datascript() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let modules = js_dir().join("node_modules");
            if !modules.join("datascript/package.json").exists() {
                let status = Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund"])
                    .current_dir(js_dir())
                    .status()
                    .map_err(|e| format!("`npm` cannot run: {e}"))?;
                if !status.success() {
                    return Err(format!("`npm ci` in {} failed", js_dir().display()));
                }
            }
            Ok(modules)
        })
        .clone()
}

/// Whether the environment says this is CI (`CI` set to anything but empty, `0` or `false`,
/// as CI services set it), where DataScript must run.
pub fn in_ci(ci: Option<&str>) -> bool {
    ci.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// DataScript's `node_modules`, or `None` (with a note on stderr naming `test`) when it
/// cannot run here and this is not CI. Under CI that is a failure.
pub fn datascript_or_skip(test: &str) -> Option<PathBuf> {
    let found = if node_on_path() {
        ensure_datascript()
    } else {
        Err("`node` is not on the PATH".to_string())
    };
    match found {
        Ok(modules) => Some(modules),
        Err(why) if in_ci(std::env::var("CI").ok().as_deref()) => {
            panic!("{why}, so DataScript cannot run, and CI must run it (CI is set)")
        }
        Err(why) => {
            // Straight to stderr, not `eprintln!`, so the test harness does not swallow it.
            let _ = writeln!(
                std::io::stderr(),
                "{test}: SKIPPED: {why}, so DataScript cannot run"
            );
            None
        }
    }
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Run `node script fixture` with DataScript on `NODE_PATH`; its stdout. Panics when node
/// fails or runs past `timeout` (so a query that makes DataScript run away fails the test
/// instead of hanging the suite), saying how many lines it had printed. The fixture file is
/// removed when node succeeds and kept otherwise, for a look at what DataScript was given.
pub fn run_node(modules: &Path, script: &Path, fixture: &Path, timeout: Duration) -> String {
    let mut child = Command::new("node")
        .arg(script)
        .arg(fixture)
        .env("NODE_PATH", modules)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    // Read stdout and stderr on threads so that a full pipe cannot stall node.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stderr.read_to_string(&mut out);
        out
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let done = reader
                .join()
                .ok()
                .and_then(Result::ok)
                .map_or(0, |o| o.lines().count());
            panic!(
                "DataScript ran past {timeout:?}; it had answered {done} queries of {}",
                fixture.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = err_reader.join().unwrap_or_default();
    assert!(
        status.success(),
        "node {} failed: {stderr}",
        script.display()
    );
    let _ = std::fs::remove_file(fixture);
    reader
        .join()
        .expect("the reader thread")
        .expect("DataScript prints UTF-8")
}
