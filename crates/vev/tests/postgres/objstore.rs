//! The object store's own scenarios (run by `objstore_storage` in `postgres.rs`): segments
//! stored as objects and collected after the grace period, a reader in another connection
//! loading them lazily, a missing object found by `verify`, the typed errors of the object
//! store, a database copied from a file into the object store and back, and the objects
//! of a writer that never committed them swept by the next one.

use std::path::Path;
use std::time::Duration;

use vev::{Connection, CopyOptions, OpenOptions};
use vev_objstore::testing::MotoServer;
use vev_objstore::{S3Objects, Target};
use vev_postgres::testing::TempServer;
use vev_postgres::SegmentObjects;

use super::{ns, tx_n, writer_opts, BUCKET, SCHEMA};

/// The keys under `url`'s prefix, sorted.
fn keys(url: &str) -> Vec<String> {
    let objects = S3Objects::new(&Target::parse(url).unwrap()).unwrap();
    let mut keys = objects.keys(100_000).unwrap();
    keys.sort();
    keys
}

fn segment_keys(url: &str) -> Vec<String> {
    keys(url)
        .into_iter()
        .filter(|k| k.starts_with("segments/"))
        .collect()
}

/// Transact `:k/n` for every n in `ns`, 100 entities a transaction (enough datoms that a
/// checkpoint writes segments rather than a root alone).
fn tx_many(conn: &Connection, ns: std::ops::Range<i64>) {
    let ns: Vec<i64> = ns.collect();
    for chunk in ns.chunks(100) {
        let maps: Vec<String> = chunk
            .iter()
            .map(|n| format!("{{:k/n {n} :k/name \"n{n}\"}}"))
            .collect();
        conn.transact_edn(&format!("[{}]", maps.join(" "))).unwrap();
    }
}

/// A full-text search of `conn`'s database for "fox" finds the quick brown fox.
fn assert_fox_found(conn: &Connection) {
    let found = conn
        .db()
        .q(
            r#"[:find ?v . :where [(fulltext $ :k/text "fox") [[?e ?v]]]]"#,
            &[],
        )
        .unwrap();
    assert!(
        found.to_edn().to_string().contains("quick"),
        "{}",
        found.to_edn()
    );
}

const FULLTEXT: &str = r#"[{:db/ident :k/text :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/fulltext true}]"#;

pub fn segments_are_objects_and_collected(pg: &TempServer, moto: &MotoServer) {
    let url = moto.url(BUCKET, "objects", &pg.create_db("objects").unwrap());
    let opts = OpenOptions {
        checkpoint_on_close: false,
        gc_grace: Some(Duration::ZERO),
        ..writer_opts(2000)
    };
    let conn = Connection::open_with(&url, &opts).unwrap();
    conn.transact_edn(super::SCHEMA).unwrap();
    conn.transact_edn(FULLTEXT).unwrap();
    tx_many(&conn, 0..3000);
    conn.transact_edn(r#"[{:k/text "the quick brown fox"} {:k/text "a lazy dog"}]"#)
        .unwrap();
    conn.checkpoint().unwrap();
    let first = segment_keys(&url);
    assert!(!first.is_empty(), "{:?}", keys(&url));
    assert!(keys(&url).contains(&"vev-database".to_owned()));
    assert!(
        keys(&url).iter().any(|k| k.starts_with("fulltext/")),
        "{:?}",
        keys(&url)
    );
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.segments as usize, first.len());
    assert!(report.fulltext_segments >= 1);
    // A reader in another connection: the root from PostgreSQL, segments from objects.
    let reader = Connection::open_with(&url, &OpenOptions::read_only()).unwrap();
    assert_eq!(ns(&reader.db()), (0..3000).collect::<Vec<_>>());
    assert_fox_found(&reader);
    // Rewritten segments: with no grace period the next checkpoint deletes the old objects.
    tx_many(&conn, 3000..6000);
    conn.checkpoint().unwrap();
    conn.checkpoint().unwrap();
    let second = segment_keys(&url);
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.garbage_segments, 0);
    assert_eq!(report.segments as usize, second.len(), "{second:?}");
    assert!(
        first.iter().any(|k| !second.contains(k)),
        "no segment object was collected: {first:?} {second:?}"
    );
    assert_eq!(ns(&reader.sync().unwrap()), (0..6000).collect::<Vec<_>>());
    // An object gone from the store: verify names it.
    let objects = S3Objects::new(&Target::parse(&url).unwrap()).unwrap();
    objects.delete_all(vec![second[0].clone()]).unwrap();
    let e = conn.verify().unwrap_err();
    assert_eq!(e.code(), "storage/corruption", "{e}");
    assert!(e.to_string().contains("is missing"), "{e}");
}

fn io_kind(e: &vev::Error) -> Option<std::io::ErrorKind> {
    match e {
        vev::Error::Storage(vev::StorageError::Io { kind, .. }) => Some(*kind),
        _ => None,
    }
}

pub fn typed_errors(pg: &TempServer, moto: &MotoServer, dir: &Path) {
    let log = pg.create_db("objerrors").unwrap();
    let secret_free = |e: &vev::Error| {
        let text = e.to_string();
        assert!(
            !text.contains("vevtestsecret") && !text.contains("vevtestkey"),
            "{text}"
        );
    };
    // Nothing listens on the endpoint: unavailable (after the client's retries).
    let port = vev_objstore::testing::free_port();
    let url = format!("s3://{BUCKET}/x?endpoint=http://127.0.0.1:{port}&allow_http=true&log={log}");
    let e = Connection::open(&url).unwrap_err();
    assert_eq!(e.code(), "storage/unavailable", "{e}");
    secret_free(&e);
    // A bucket that does not exist.
    let e = Connection::open(moto.url("no-such-bucket", "p", &log)).unwrap_err();
    assert_eq!(io_kind(&e), Some(std::io::ErrorKind::NotFound), "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
    // A prefix holding someone else's objects, for a writer and a reader.
    let foreign = moto.url(BUCKET, "foreign", &log);
    let objects = S3Objects::new(&Target::parse(&foreign).unwrap()).unwrap();
    objects
        .put_all(vec![("notes.txt".to_owned(), b"hello".to_vec())])
        .unwrap();
    let e = Connection::open(&foreign).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    let e = Connection::open_with(&foreign, &OpenOptions::read_only()).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    // An empty prefix, read only: nothing there.
    let e = Connection::open_with(moto.url(BUCKET, "empty", &log), &OpenOptions::read_only())
        .unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    // A PostgreSQL-stored database named as the log of an object store, and the other way.
    let plain = pg.create_db("objplain").unwrap();
    Connection::open(&plain)
        .unwrap()
        .transact_edn(SCHEMA)
        .unwrap();
    let e = Connection::open(moto.url(BUCKET, "plain", &plain)).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    let split = pg.create_db("objsplit").unwrap();
    Connection::open(moto.url(BUCKET, "split", &split))
        .unwrap()
        .transact_edn(SCHEMA)
        .unwrap();
    let e = Connection::open(&split).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    assert!(e.to_string().contains("s3://"), "{e}");
    // The same log under another prefix: not the objects it names.
    let e = Connection::open(moto.url(BUCKET, "split2", &split)).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    // Credentials the server refuses: permission denied.
    let strict = MotoServer::start(dir, &[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]).unwrap();
    let e = Connection::open(strict.url(BUCKET, "p", &log)).unwrap_err();
    assert_eq!(
        io_kind(&e),
        Some(std::io::ErrorKind::PermissionDenied),
        "{e}"
    );
    secret_free(&e);
}

pub fn copy_there_and_back(pg: &TempServer, moto: &MotoServer) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.vev");
    let source = Connection::open(&file).unwrap();
    source.transact_edn(SCHEMA).unwrap();
    source.transact_edn(FULLTEXT).unwrap();
    for n in 0..30 {
        tx_n(&source, n).unwrap();
    }
    source
        .transact_edn(r#"[{:k/text "copied with its history"}]"#)
        .unwrap();
    let url = moto.url(BUCKET, "copy", &pg.create_db("objcopy").unwrap());
    let report = source
        .copy_to(&url, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.records, source.db().basis_t());
    assert!(report.verified_datoms > 0);
    let there = Connection::open_with(&url, &OpenOptions::read_only()).unwrap();
    assert_eq!(ns(&there.db()), (0..30).collect::<Vec<_>>());
    assert_eq!(there.db().basis_t(), source.db().basis_t());
    there.verify().unwrap();
    let back = dir.path().join("back.vev");
    there
        .copy_to(&back, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    let back = Connection::open(&back).unwrap();
    assert_eq!(ns(&back.db()), (0..30).collect::<Vec<_>>());
    assert_eq!(
        back.db().tx_range(Some(1), None).unwrap().len(),
        source.db().tx_range(Some(1), None).unwrap().len()
    );
}

/// The lease generation of a segment or full-text key (`segments/ID-GENERATION`).
fn generation(key: &str) -> i64 {
    key.rsplit('-').next().unwrap().parse().unwrap()
}

pub fn orphans_are_swept(pg: &TempServer, moto: &MotoServer) {
    let url = moto.url(BUCKET, "orphans", &pg.create_db("orphans").unwrap());
    // The default grace period: no garbage is deleted here, only orphans.
    let opts = OpenOptions {
        checkpoint_on_close: false,
        ..writer_opts(2000)
    };
    {
        let conn = Connection::open_with(&url, &opts).unwrap();
        conn.transact_edn(super::SCHEMA).unwrap();
        conn.transact_edn(FULLTEXT).unwrap();
        tx_many(&conn, 0..3000);
        conn.transact_edn(r#"[{:k/text "the quick brown fox"}]"#)
            .unwrap();
        conn.checkpoint().unwrap();
    }
    let named = keys(&url);
    let first = segment_keys(&url);
    let g1 = generation(&first[0]);
    let (id, _) = first[0]["segments/".len()..].split_once('-').unwrap();
    // What a writer of generation g1 (or before) that died before its rows committed left,
    // one of them with the id of a named segment; what the next writer (g1 + 1) is about to
    // name; a later generation's; an object that is not a segment.
    let dead = vec![
        format!("segments/900001-{g1}"),
        format!("fulltext/900002-{g1}"),
        format!("segments/{id}-{}", g1 - 1),
    ];
    let alive = vec![
        format!("segments/900003-{}", g1 + 1),
        format!("segments/900004-{}", g1 + 7),
        "segments/notes.txt".to_owned(),
    ];
    let objects = S3Objects::new(&Target::parse(&url).unwrap()).unwrap();
    let junk = dead
        .iter()
        .chain(&alive)
        .map(|k| (k.clone(), b"junk".to_vec()));
    objects.put_all(junk.collect()).unwrap();
    // The next writer sweeps after its first checkpoint, on a thread of its own.
    let conn = Connection::open_with(&url, &opts).unwrap();
    tx_many(&conn, 3000..3500);
    conn.checkpoint().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut after = keys(&url);
    while dead.iter().any(|k| after.contains(k)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        after = keys(&url);
    }
    let new: Vec<&String> = after
        .iter()
        .filter(|k| k.starts_with("segments/") && !named.contains(k) && !alive.contains(k))
        .collect();
    assert!(!new.is_empty(), "{after:?}");
    assert!(new.iter().all(|k| generation(k) == g1 + 1), "{new:?}");
    for k in &dead {
        assert!(!after.contains(k), "orphan {k} was not swept: {after:?}");
    }
    for k in alive.iter().chain(&named) {
        assert!(after.contains(k), "{k} was deleted: {after:?}");
    }
    // Every object a row names is still there.
    conn.verify().unwrap().unwrap();
    let reader = Connection::open_with(&url, &OpenOptions::read_only()).unwrap();
    assert_eq!(ns(&reader.db()), (0..3500).collect::<Vec<_>>());
    assert_fox_found(&reader);
}
