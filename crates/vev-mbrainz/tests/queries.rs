//! Every query of the workload on the tiny and the small data set (0.1M and 1M datoms),
//! checked four ways: the planned run against the naive plan (clauses in written order, the
//! full-text function by a scan of every track name), the durable file against the same data
//! set loaded in memory, the file reopened against the connection that loaded it, and row
//! counts and digests against `tests/expected/tiny.edn` and `small.edn` (the generator is
//! deterministic, so a change of data or of answers shows there). Every query must find
//! rows, so the comparisons compare answers rather than empty sets.
//! `VEV_MBRAINZ_BLESS=1 cargo test -p vev-mbrainz --test queries` rewrites those files after
//! a deliberate change of the generator.

use std::collections::BTreeMap;
use std::path::Path;

use vev::{Connection, Limits, OpenOptions, QueryOptions};
use vev_mbrainz::{all_queries, digest, load, run, run_opts, Scale};

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
fn every_query_agrees_with_the_naive_plan_memory_and_the_reopened_file_tiny() {
    agree_four_ways(Scale::Tiny);
}

#[test]
fn every_query_agrees_with_the_naive_plan_memory_and_the_reopened_file_small() {
    agree_four_ways(Scale::Small);
}

fn agree_four_ways(scale: Scale) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mbrainz.vev");
    let durable = Connection::open(&path).unwrap();
    let loaded = load(&durable, scale, &mut |_| {}).unwrap();
    assert!(loaded.progress.datoms > 50_000, "{loaded:?}");
    let memory = Connection::open_in_memory();
    load(&memory, scale, &mut |_| {}).unwrap();
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
        assert!(planned.0 > 0, "{} found nothing", q.name);
        found.insert(q.name, planned);
    }
    // The Janis Joplin query of Datomic's documentation answers one row, as on the real data.
    assert_eq!(found["artist"].0, 1);

    let text: String = found
        .iter()
        .map(|(name, (rows, digest))| format!(" {name:?} {{:rows {rows} :digest {digest:?}}}\n"))
        .collect();
    let name = scale.name();
    let text = format!(
        ";; Row counts and digests (vev_mbrainz::digest) of every query on the {name} data set.\n{{\n{text}}}\n"
    );
    let expected_file = format!("tests/expected/{name}.edn");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(&expected_file);
    if std::env::var_os("VEV_MBRAINZ_BLESS").is_some() {
        std::fs::write(&file, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        text, expected,
        "answers differ from {expected_file}; after a deliberate change, rerun with VEV_MBRAINZ_BLESS=1"
    );
}
