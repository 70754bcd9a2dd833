//! The peers of the `mbrainz` benchmark: `js/mbrainz.js` under node and `clj/mbrainz.clj` on
//! Datalevin's JVM (memory and disk), installed and started as `peers.rs` does for the query
//! suite, and read line by line as they run.
//!
//! A peer that fails (cannot load the data set, runs out of memory) or falls silent for longer
//! than the timeout (a query that does not finish) does not end the benchmark: its child
//! process is stopped and the report says what happened, query by query. What the runners
//! print is documented at the top of each.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::datascript::{self, js_dir};
use crate::error::BenchError;
use crate::mbrainz_rows::peer_lines;
use crate::peers::{self, text};

/// A peer engine of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    DataScript,
    DatalevinMemory,
    DatalevinDisk,
}

impl Peer {
    /// The column header.
    pub fn short(self) -> &'static str {
        match self {
            Peer::DataScript => "DataScript",
            Peer::DatalevinMemory => "Datalevin mem",
            Peer::DatalevinDisk => "Datalevin disk",
        }
    }

    pub fn is_datalevin(self) -> bool {
        self != Peer::DataScript
    }

    /// How the runner loads the data set, for the report.
    pub fn load_path(self) -> &'static str {
        match self {
            Peer::DataScript => "`d.init_db(datoms, schema)` (JS API)",
            Peer::DatalevinMemory => {
                "`d/init-db datoms nil schema` (a temporary directory), then `d/fill-db` of the full-text datoms in runs of 1,000"
            }
            Peer::DatalevinDisk => {
                "`d/init-db datoms dir schema`, then `d/fill-db` of the full-text datoms in runs of 1,000"
            }
        }
    }
}

/// Memory and patience given to the peers.
#[derive(Clone, Copy, Debug)]
pub struct PeerLimits {
    /// A peer silent this long (no line printed) is stopped.
    pub timeout: Duration,
    /// node's `--max-old-space-size`.
    pub node_heap_mb: u64,
    /// The JVM's `-Xmx` (Datalevin keeps its data off the heap, in LMDB).
    pub jvm_heap_mb: u64,
}

/// What became of one query in one peer.
#[derive(Clone, Debug, PartialEq)]
pub enum PeerOutcome {
    Timed {
        rows: usize,
        samples_ms: Vec<f64>,
        /// The last timed run's rows, as `mbrainz_rows` lines, sorted.
        lines: Vec<String>,
    },
    /// The engine cannot run the query (DataScript has no full-text search).
    CannotRun(String),
    /// Started and not finished within the timeout; the runner was stopped.
    TimedOut { after_s: u64 },
    /// Not reached: the runner failed or was stopped before it.
    NotReached,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PeerQuery {
    pub name: String,
    pub outcome: PeerOutcome,
}

/// One peer's run.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRun {
    pub peer: Peer,
    /// Engine, version and runtime; empty when the runner never said.
    pub label: String,
    pub load_ms: Option<f64>,
    pub datoms: Option<usize>,
    /// The store's size on disk after the run (Datalevin).
    pub store_bytes: Option<u64>,
    pub queries: Vec<PeerQuery>,
    /// Why the runner ended early, if it did.
    pub failure: Option<String>,
}

impl PeerRun {
    pub fn query(&self, name: &str) -> Option<&PeerOutcome> {
        self.queries
            .iter()
            .find(|q| q.name == name)
            .map(|q| &q.outcome)
    }
}

fn command(
    peer: Peer,
    fixture: &Path,
    scratch: &Path,
    limits: &PeerLimits,
) -> Result<(Command, Option<PathBuf>), BenchError> {
    match peer {
        Peer::DataScript => {
            let dir = js_dir();
            datascript::ensure_installed(&dir)?;
            let mut cmd = Command::new("node");
            cmd.arg(format!("--max-old-space-size={}", limits.node_heap_mb))
                .arg("mbrainz.js")
                .arg(fixture)
                .current_dir(dir);
            Ok((cmd, None))
        }
        Peer::DatalevinMemory | Peer::DatalevinDisk => {
            let (mode, dir) = if peer == Peer::DatalevinDisk {
                ("disk", scratch.join("datalevin-disk"))
            } else {
                ("memory", scratch.join("datalevin-tmp"))
            };
            std::fs::create_dir_all(&dir).map_err(BenchError::io("create", &dir))?;
            let jvm: Vec<OsString> = vec![
                format!("-Xmx{}m", limits.jvm_heap_mb).into(),
                format!("-Djava.io.tmpdir={}", dir.display()).into(),
            ];
            let mut cmd = peers::datalevin_command(&jvm)?;
            cmd.arg("clj/mbrainz.clj").arg(fixture).arg(mode).arg(&dir);
            Ok((cmd, Some(dir)))
        }
    }
}

/// Run `peer` on the fixture; `names` are the queries, in the fixture's order.
pub fn run(
    peer: Peer,
    fixture: &Path,
    scratch: &Path,
    names: &[&str],
    limits: &PeerLimits,
) -> Result<PeerRun, BenchError> {
    let (mut cmd, store_dir) = command(peer, fixture, scratch, limits)?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(BenchError::io("start a peer runner for", fixture))?;
    let mut run = PeerRun {
        peer,
        label: String::new(),
        load_ms: None,
        datoms: None,
        store_bytes: None,
        queries: Vec::new(),
        failure: None,
    };
    let lines = spawn_reader(&mut child);
    let mut current: Option<(String, Instant)> = None;
    loop {
        match lines.recv_timeout(limits.timeout) {
            Ok(line) => {
                let read = serde_json::from_str::<Json>(&line)
                    .map_err(BenchError::from)
                    .and_then(|doc| read_line(&doc, &mut run, &mut current));
                if let Err(e) = read {
                    // A line cut off by a crash, or one we cannot read: stop this peer, say why.
                    let _ = child.kill();
                    let head: String = line.chars().take(120).collect();
                    run.failure = Some(format!("unreadable runner line ({e}): {head}…"));
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // Our own child, by its handle.
                let _ = child.kill();
                let what = match current.take() {
                    Some((name, started)) => {
                        let after_s = started.elapsed().as_secs();
                        run.queries.push(PeerQuery {
                            name: name.clone(),
                            outcome: PeerOutcome::TimedOut { after_s },
                        });
                        format!("{name} did not finish in {after_s} s; stopped")
                    }
                    None => format!(
                        "silent for {} s before any query; stopped",
                        limits.timeout.as_secs()
                    ),
                };
                run.failure = Some(what);
                break;
            }
        }
    }
    let status = child
        .wait()
        .map_err(BenchError::io("wait for a peer runner of", fixture))?;
    if run.failure.is_none() && !status.success() {
        let at = match &current {
            Some((name, _)) => format!(" during {name}"),
            None if run.load_ms.is_none() => " before its load finished".to_string(),
            None => String::new(),
        };
        run.failure = Some(format!("the runner exited with {status}{at}"));
    }
    for name in names {
        if run.query(name).is_none() {
            run.queries.push(PeerQuery {
                name: name.to_string(),
                outcome: PeerOutcome::NotReached,
            });
        }
    }
    run.store_bytes = match store_dir {
        Some(dir) => Some(dir_size(&dir)?),
        None => None,
    };
    Ok(run)
}

/// The child's stdout, a line at a time, on a channel (closed at its end).
fn spawn_reader(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !line.trim().is_empty() && tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

fn number(doc: &Json, name: &'static str) -> Result<f64, BenchError> {
    peers::field(doc, name)?
        .as_f64()
        .ok_or(BenchError::MissingField { field: name })
}

/// Apply one runner line to `run`.
fn read_line(
    doc: &Json,
    run: &mut PeerRun,
    current: &mut Option<(String, Instant)>,
) -> Result<(), BenchError> {
    if doc.get("engine").is_some() {
        let version = text(doc, "version")?;
        run.label = match run.peer {
            Peer::DataScript => {
                format!("DataScript {version} (node {})", text(doc, "node_version")?)
            }
            Peer::DatalevinMemory | Peer::DatalevinDisk => format!(
                "Datalevin {version} {} (Java {})",
                if run.peer == Peer::DatalevinDisk {
                    "disk"
                } else {
                    "memory"
                },
                text(doc, "java_version")?
            ),
        };
    } else if doc.get("load_ms").is_some() {
        run.load_ms = Some(number(doc, "load_ms")?);
        run.datoms = Some(number(doc, "datoms")? as usize);
    } else if doc.get("start").is_some() {
        *current = Some((text(doc, "start")?, Instant::now()));
    } else if doc.get("skipped").is_some() {
        run.queries.push(PeerQuery {
            name: text(doc, "name")?,
            outcome: PeerOutcome::CannotRun(text(doc, "skipped")?),
        });
    } else {
        let samples_ms = peers::field(doc, "samples_ms")?
            .as_array()
            .and_then(|xs| xs.iter().map(Json::as_f64).collect::<Option<Vec<f64>>>())
            .ok_or(BenchError::MissingField {
                field: "samples_ms",
            })?;
        run.queries.push(PeerQuery {
            name: text(doc, "name")?,
            outcome: PeerOutcome::Timed {
                rows: number(doc, "rows")? as usize,
                samples_ms,
                lines: peer_lines(peers::field(doc, "result")?)?,
            },
        });
        *current = None;
    }
    Ok(())
}

/// The bytes of the files under `dir`.
pub fn dir_size(dir: &Path) -> Result<u64, BenchError> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(BenchError::io("list", &d)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(BenchError::io("list", &d))?;
            let meta = entry
                .metadata()
                .map_err(BenchError::io("stat", entry.path()))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runner_lines_fill_a_run() {
        let mut run = PeerRun {
            peer: Peer::DatalevinDisk,
            label: String::new(),
            load_ms: None,
            datoms: None,
            store_bytes: None,
            queries: Vec::new(),
            failure: None,
        };
        let mut current = None;
        for doc in [
            json!({"engine": "datalevin-disk", "version": "1.2.8", "java_version": "25"}),
            json!({"load_ms": 1500.5, "datoms": 10}),
            json!({"name": "q5", "skipped": "no"}),
            json!({"start": "q1"}),
            json!({"name": "q1", "rows": 1, "samples_ms": [1.0, 2.0], "result": [["a"]]}),
        ] {
            read_line(&doc, &mut run, &mut current).unwrap();
        }
        assert_eq!(run.label, "Datalevin 1.2.8 disk (Java 25)");
        assert_eq!((run.load_ms, run.datoms), (Some(1500.5), Some(10)));
        assert_eq!(run.query("q5"), Some(&PeerOutcome::CannotRun("no".into())));
        assert_eq!(
            run.query("q1"),
            Some(&PeerOutcome::Timed {
                rows: 1,
                samples_ms: vec![1.0, 2.0],
                lines: vec!["\"a\"".into()]
            })
        );
        assert!(current.is_none());
        let bad = json!({"name": "q2", "rows": 1});
        assert!(read_line(&bad, &mut run, &mut current).is_err());
    }
}
