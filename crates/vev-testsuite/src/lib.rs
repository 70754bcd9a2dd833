//! The conformance suite runner: reads case files (`cases/<area>/<feature>.edn`, format in
//! README.md) and runs each case against a fresh database.
//!
//! Expectations name entities symbolically (tempid names, `"txN"`, idents, lookup refs), so
//! the runner resolves them to ids of the database under test and then compares exactly.

mod checks;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use vev::{Connection, Db, Edn, EntityId, Keyword, TempId, TxOp, TxReport};

pub use checks::check;

/// One case read from a file.
#[derive(Clone)]
pub struct Case {
    pub file: String,
    pub name: String,
    schema: Option<Edn>,
    txs: Vec<Edn>,
    checks: Vec<Edn>,
}

/// Everything a case run knows about the entities it made.
pub struct Run {
    pub conn: Connection,
    /// Tempid names (strings, negative integers) to entities.
    pub tempids: HashMap<Edn, EntityId>,
    /// Transaction number to its report.
    pub txs: BTreeMap<usize, TxReport>,
}

pub fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}

/// Every case file under `dir`, sorted.
pub fn case_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "edn") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn kw(s: &str) -> Edn {
    Edn::keyword(s)
}

fn get<'a>(m: &'a BTreeMap<Edn, Edn>, k: &str) -> Option<&'a Edn> {
    m.get(&kw(k))
}

/// Read the cases of one file. `label` names the file in case names (`tx/upsert`).
pub fn load_file(path: &Path, label: &str) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let data = vev::edn::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = data
        .as_map()
        .ok_or_else(|| format!("{label}: a case file is a map"))?;
    let schema = get(file, "schema").cloned();
    let cases = get(file, "cases")
        .and_then(Edn::as_seq)
        .ok_or_else(|| format!("{label}: no :cases"))?;
    let mut out = Vec::new();
    for c in cases {
        let m = c
            .as_map()
            .ok_or_else(|| format!("{label}: a case is a map"))?;
        let name = get(m, "name")
            .and_then(Edn::as_str)
            .ok_or_else(|| format!("{label}: case without :name"))?;
        out.push(Case {
            file: label.to_string(),
            name: name.to_string(),
            schema: get(m, "schema").cloned().or_else(|| schema.clone()),
            txs: get(m, "txs")
                .and_then(Edn::as_seq)
                .map(<[Edn]>::to_vec)
                .unwrap_or_default(),
            checks: get(m, "checks")
                .and_then(Edn::as_seq)
                .map(<[Edn]>::to_vec)
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

fn ops_of(data: &Edn) -> Result<Vec<TxOp>, String> {
    vev::tx_from_edn(data).map_err(|e| format!("cannot read tx data {data}: {e}"))
}

impl Run {
    fn record(&mut self, k: usize, report: TxReport) -> Result<(), String> {
        for (t, id) in &report.tempids {
            let name = match t {
                TempId::Str(s) => Edn::String(s.to_string()),
                TempId::Num(n) => Edn::Integer(*n),
                TempId::Tx => {
                    self.tempids.insert(Edn::string("datomic.tx"), *id);
                    continue;
                }
                _ => continue,
            };
            if let Some(prev) = self.tempids.insert(name.clone(), *id) {
                if prev != *id {
                    return Err(format!("tempid {name} names entity {prev} and then {id}"));
                }
            }
        }
        self.txs.insert(k, report);
        Ok(())
    }

    /// The basis-t of transaction number k.
    pub fn t_of(&self, k: usize) -> Result<u64, String> {
        self.txs
            .get(&k)
            .map(|r| r.db_after.basis_t())
            .ok_or_else(|| format!("no successful tx {k}"))
    }
}

/// Where a case's database lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    /// A SQLite file, checkpointed every few datoms, closed and reopened (replaying its log
    /// tail), then checkpointed and reopened again (from the root alone) before the final
    /// checks, which then read that database; both reopened databases must equal the live
    /// one in every index.
    Sqlite,
    /// As `Sqlite`, in a schema of its own of the PostgreSQL database whose URL was given
    /// to `set_postgres_url` (the conformance runner starts a throwaway server).
    Postgres,
    /// As `Postgres`, with the segments under a prefix of their own in the S3-compatible
    /// object store given to `set_objstore_url` (the runner starts moto).
    Objstore,
}

/// The object-store URL before its prefix (`s3://BUCKET`) and its query before `log=`
/// (`endpoint=...&allow_http=true`), for the `Objstore` backend.
static OBJSTORE_URL: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

/// Give the `Objstore` backend its bucket (`s3://BUCKET`) and the endpoint parameters
/// (`endpoint=URL&allow_http=true`); its logs go in the `Postgres` backend's database.
pub fn set_objstore_url(bucket_url: String, params: String) {
    let _ = OBJSTORE_URL.set((bucket_url, params));
}

/// The PostgreSQL database the `Postgres` backend puts each case's schema in.
static POSTGRES_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Give the `Postgres` backend its database (once per process).
pub fn set_postgres_url(url: String) {
    let _ = POSTGRES_URL.set(url);
}

/// A database for one case: a file (removed afterwards) or a PostgreSQL URL naming a schema
/// of its own (left in the throwaway server, which goes as a whole).
struct CaseFile(std::path::PathBuf);

impl Drop for CaseFile {
    fn drop(&mut self) {
        if self.0.to_str().is_some_and(vev::is_storage_url) {
            return;
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

fn case_file() -> CaseFile {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    CaseFile(std::env::temp_dir().join(format!("vev-case-{}-{n}.vev", std::process::id())))
}

fn case_schema() -> Result<CaseFile, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = POSTGRES_URL
        .get()
        .ok_or("the postgres backend has no server (set_postgres_url)")?;
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    Ok(CaseFile(format!("{base}?schema=case_{n}").into()))
}

fn case_objstore() -> Result<CaseFile, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = POSTGRES_URL
        .get()
        .ok_or("the objstore backend has no postgresql (set_postgres_url)")?;
    let (bucket, params) = OBJSTORE_URL
        .get()
        .ok_or("the objstore backend has no object store (set_objstore_url)")?;
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    Ok(CaseFile(
        format!("{bucket}/case_{n}?{params}&log={base}?schema=objcase_{n}").into(),
    ))
}

fn sqlite_options() -> vev::OpenOptions {
    vev::OpenOptions {
        checkpoint_datoms: 40,
        // Keep the tail, so that reopening replays it.
        checkpoint_on_close: false,
        lock: vev::LockMode::Wait(std::time::Duration::from_secs(10)),
        // Every checkpoint deletes what the one before named and it does not, so reopening
        // from the root checks that nothing still needed was collected.
        gc_grace: Some(std::time::Duration::ZERO),
        ..vev::OpenOptions::default()
    }
}

/// Run one case in memory: its transactions, then its checks.
pub fn run_case(case: &Case) -> Result<(), String> {
    run_case_on(case, Backend::Memory)
}

/// Run one case on a backend.
pub fn run_case_on(case: &Case, backend: Backend) -> Result<(), String> {
    let file = match backend {
        Backend::Memory => None,
        Backend::Sqlite => Some(case_file()),
        Backend::Postgres => Some(case_schema()?),
        Backend::Objstore => Some(case_objstore()?),
    };
    let conn = match &file {
        None => Connection::open_in_memory(),
        Some(f) => Connection::open_with(&f.0, &sqlite_options())
            .map_err(|e| format!("open {}: {e}", f.0.display()))?,
    };
    let mut run = Run {
        conn: conn.clone(),
        tempids: HashMap::new(),
        txs: BTreeMap::new(),
    };
    if let Some(schema) = &case.schema {
        let report = conn
            .transact(&ops_of(schema)?)
            .map_err(|e| format!("schema tx failed: {e}"))?;
        run.record(0, report)?;
    }
    for (i, tx) in case.txs.iter().enumerate() {
        run_tx(&mut run, i + 1, tx)?;
    }
    let mut db = conn.db();
    if let Some(f) = &file {
        run.conn = Connection::open_in_memory();
        drop(conn);
        run.conn =
            Connection::open_with(&f.0, &sqlite_options()).map_err(|e| format!("reopen: {e}"))?;
        let reopened = run.conn.db();
        if reopened.basis_t() != db.basis_t() || !same_indexes(&reopened, &db) {
            return Err("the reopened database differs from the one written".into());
        }
        run.conn
            .verify()
            .map_err(|e| format!("verify after reopen: {e}"))?;
        // Then from a checkpoint of everything: the root alone must give the same database.
        run.conn
            .checkpoint()
            .map_err(|e| format!("checkpoint: {e}"))?;
        run.conn = Connection::open_in_memory();
        run.conn = Connection::open_with(&f.0, &sqlite_options())
            .map_err(|e| format!("reopen after a checkpoint: {e}"))?;
        let reopened = run.conn.db();
        if reopened.basis_t() != db.basis_t() || !same_indexes(&reopened, &db) {
            return Err("the database reopened from its checkpoint differs".into());
        }
        db = reopened;
    }
    for c in &case.checks {
        check(&run, &db, c).map_err(|e| format!("check {c}: {e}"))?;
    }
    Ok(())
}

fn run_tx(run: &mut Run, k: usize, tx: &Edn) -> Result<(), String> {
    let (data, spec) = match tx {
        Edn::Map(m) => (get(m, "tx").ok_or("a tx map needs :tx")?.clone(), Some(m)),
        other => (other.clone(), None),
    };
    let expected_error = spec.and_then(|m| get(m, "error")).and_then(Edn::as_keyword);
    let before: Db = run.conn.db();
    let result = vev::tx_from_edn(&data)
        .map_err(vev::Error::Tx)
        .and_then(|ops| run.conn.transact(&ops));
    match (result, expected_error) {
        (Ok(report), None) => run.record(k, report)?,
        (Ok(_), Some(code)) => return Err(format!("tx {k} succeeded, expected error {code}")),
        (Err(e), None) => return Err(format!("tx {k} failed: [{}] {e}", e.code())),
        (Err(e), Some(code)) => {
            if e.code() != code.as_str() {
                return Err(format!(
                    "tx {k}: expected error {code}, got [{}] {e}",
                    e.code()
                ));
            }
            let message = e.to_string();
            let wanted = spec
                .and_then(|m| get(m, "message-includes"))
                .and_then(Edn::as_seq)
                .unwrap_or(&[]);
            for w in wanted {
                let w = w.as_str().ok_or("message-includes holds strings")?;
                if !message.contains(w) {
                    return Err(format!(
                        "tx {k}: error message {message:?} does not include {w:?}"
                    ));
                }
            }
            let after = run.conn.db();
            if after.basis_t() != before.basis_t() || !same_datoms(&before, &after) {
                return Err(format!("tx {k} failed but changed the database"));
            }
        }
    }
    if let Some(checks) = spec.and_then(|m| get(m, "checks")).and_then(Edn::as_seq) {
        let db = run.conn.db();
        for c in checks {
            check(run, &db, c).map_err(|e| format!("after tx {k}, check {c}: {e}"))?;
        }
    }
    Ok(())
}

fn same_datoms(x: &Db, y: &Db) -> bool {
    let all = |db: &Db| {
        db.history()
            .datoms(vev::IndexOrder::Eavt, &[])
            .collect::<Result<Vec<_>, _>>()
    };
    all(x) == all(y)
}

/// Every index, current and history, and the log.
fn same_indexes(x: &Db, y: &Db) -> bool {
    let all = |db: &Db| {
        let mut out = Vec::new();
        for view in [db.current(), db.history()] {
            for order in vev::IndexOrder::ALL {
                out.push(view.datoms(order, &[]).collect::<Result<Vec<_>, _>>());
            }
        }
        out.push(
            db.tx_range(None, None)
                .map(|txs| txs.into_iter().flat_map(|e| e.datoms).collect()),
        );
        out
    };
    all(x) == all(y)
}

pub fn keyword_of(e: &Edn) -> Result<&Keyword, String> {
    e.as_keyword()
        .ok_or_else(|| format!("expected a keyword, got {e}"))
}
