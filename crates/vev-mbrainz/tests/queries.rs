//! Every query of the workload on the tiny data set, checked four ways: the planned run
//! against the naive plan (clauses in written order, the full-text function by a scan of
//! every track name), the durable file against the same data set loaded in memory, the file
//! reopened against the connection that loaded it, and row counts and digests against
//! `tests/expected/tiny.edn` (the generator is deterministic, so a change of data or of
//! answers shows there). `VEV_MBRAINZ_BLESS=1 cargo test -p vev-mbrainz --test queries`
//! rewrites that file after a deliberate change of the generator.

use std::collections::BTreeMap;
use std::path::Path;

use vev::{Connection, Limits, OpenOptions, QueryOptions};
use vev_mbrainz::{all_queries, digest, load, run, run_opts, Scale};

const EXPECTED: &str = "tests/expected/tiny.edn";

fn naive() -> QueryOptions {
    QueryOptions {
        limits: Limits {
            naive: true,
            ..Limits::default()
        },
        ..QueryOptions::default()
    }
}

#[test]
fn every_query_agrees_with_the_naive_plan_memory_and_the_reopened_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mbrainz.vev");
    let durable = Connection::open(&path).unwrap();
    let loaded = load(&durable, Scale::Tiny, &mut |_| {}).unwrap();
    assert!(loaded.progress.datoms > 50_000, "{loaded:?}");
    let memory = Connection::open_in_memory();
    load(&memory, Scale::Tiny, &mut |_| {}).unwrap();
    let reopened = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();

    let mut found = BTreeMap::new();
    for q in all_queries() {
        let planned = digest(&run(&durable.db(), q).unwrap());
        let by_naive = digest(&run_opts(&durable.db(), q, &naive()).unwrap());
        assert_eq!(planned, by_naive, "{}: planned vs naive", q.name);
        let in_memory = digest(&run(&memory.db(), q).unwrap());
        assert_eq!(planned, in_memory, "{}: file vs memory", q.name);
        let after_reopen = digest(&run(&reopened.db(), q).unwrap());
        assert_eq!(planned, after_reopen, "{}: reopened", q.name);
        found.insert(q.name, planned);
    }

    let text: String = found
        .iter()
        .map(|(name, (rows, digest))| format!(" {name:?} {{:rows {rows} :digest {digest:?}}}\n"))
        .collect();
    let text = format!(
        ";; Row counts and digests (vev_mbrainz::digest) of every query on the tiny data set.\n{{\n{text}}}\n"
    );
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXPECTED);
    if std::env::var_os("VEV_MBRAINZ_BLESS").is_some() {
        std::fs::write(&file, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        text, expected,
        "answers differ from {EXPECTED}; after a deliberate change, rerun with VEV_MBRAINZ_BLESS=1"
    );
}

/// Queries that must find something on the tiny data set, so the comparisons above compare
/// answers rather than empty sets.
#[test]
fn the_reference_inputs_find_rows() {
    let conn = Connection::open_in_memory();
    load(&conn, Scale::Tiny, &mut |_| {}).unwrap();
    let db = conn.db();
    for q in all_queries() {
        let (rows, _) = digest(&run(&db, q).unwrap());
        assert!(rows > 0, "{} found nothing", q.name);
    }
    // The Janis Joplin query of Datomic's documentation answers one row, as on the real data.
    let artist = all_queries().find(|q| q.name == "artist").unwrap();
    assert_eq!(digest(&run(&db, artist).unwrap()).0, 1);
}
