//! Database files of the format versions this build reads (`tests/fixtures/format-v3.vev`
//! to `format-v6.vev`, written by `examples/format_fixture.rs` when each was current) must
//! keep opening with the same answers: a format change has to migrate them or refuse them
//! with `storage/format-version`, as files of other versions are refused now. A writer
//! migrates a version-3 to 6 file to version 7 (version 4 added the full-text tables;
//! version 5 roots have no log tree, so the old root's log segments become garbage; version
//! 6 may store segments and log records LZ4-compressed, and reads raw ones as they are;
//! version 7 may keep a small full-text segment in its manifest row).

use std::path::{Path, PathBuf};

use vev::{Component, Connection, Db, Edn, IndexOrder, Keyword, OpenOptions, TimePoint, Value};

#[allow(dead_code)]
#[path = "../examples/format_fixture.rs"]
mod generator;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/format-v3.vev");

/// A copy of the fixture in a temporary directory (opening a file may add `-wal`/`-shm`
/// files beside it; the committed one stays untouched).
fn copy(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("format-v3.vev");
    std::fs::copy(FIXTURE, &path).unwrap();
    path
}

fn open(path: &Path) -> Connection {
    Connection::open_with(path, &OpenOptions::read_only()).unwrap()
}

fn q(db: &Db, query: &str, args: &[Edn]) -> String {
    db.q(query, args).unwrap().to_edn().to_string()
}

fn email(i: &str) -> Edn {
    Edn::String(format!("{i}@example.com"))
}

/// Every index, current and history, and the log.
fn everything(db: &Db) -> Vec<Vec<vev::Datom>> {
    let mut out = Vec::new();
    for view in [db.current(), db.history()] {
        for order in IndexOrder::ALL {
            out.push(view.datoms(order, &[]).collect::<Result<_, _>>().unwrap());
        }
    }
    out.push(
        db.tx_range(None, None)
            .unwrap()
            .into_iter()
            .flat_map(|e| e.datoms)
            .collect(),
    );
    out
}

#[test]
fn the_fixture_has_segments_and_a_log_tail() {
    let sqlite =
        rusqlite::Connection::open_with_flags(FIXTURE, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let one = |sql: &str| -> i64 { sqlite.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("PRAGMA user_version"), 3);
    assert!(one("SELECT count(*) FROM vev_segment") > 0);
    assert_eq!(
        one("SELECT t FROM vev_root"),
        generator::CHECKPOINTED as i64
    );
    assert_eq!(
        one("SELECT max(t) FROM vev_log"),
        generator::transactions().len() as i64
    );
    let wal = PathBuf::from(format!("{FIXTURE}-wal"));
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
}

#[test]
fn the_fixture_opens_with_the_same_datoms_as_its_transactions_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&copy(&dir));
    let db = conn.db();
    assert_eq!(db.basis_t(), 6);
    let memory = Connection::open_in_memory();
    generator::fill(&memory, false).unwrap();
    assert!(everything(&db) == everything(&memory.db()));
    assert_eq!(db.next_user(), memory.db().next_user());
    assert!(db.tree_segment_ids().iter().any(|(_, ids)| !ids.is_empty()));
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.log_rows, 6);
    assert!(report.segments > 0);
}

#[test]
fn the_fixture_answers_queries_as_of_its_past_and_through_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&copy(&dir)).db();
    let age_of = "[:find ?a . :in $ ?m :where [?e :person/email ?m] [?e :person/age ?a]]";
    assert_eq!(q(&db, age_of, &[email("p0")]), "99");
    assert_eq!(q(&db.as_of(3), age_of, &[email("p0")]), "20");
    // p2 was retracted at t 5: gone now, there as of t 4, and no one's friend any more.
    assert_eq!(q(&db, age_of, &[email("p2")]), "nil");
    assert_eq!(q(&db.as_of(4), age_of, &[email("p2")]), "22");
    let friends_of = "[:find [?m ...] :in $ ?f :where [?x :person/email ?f] [?e :person/friend ?x] [?e :person/email ?m]]";
    assert_eq!(q(&db, friends_of, &[email("p2")]), "[]");
    assert_eq!(
        q(&db.as_of(4), friends_of, &[email("p2")]),
        r#"["p1@example.com"]"#
    );
    let people = "[:find (count ?e) . :where [?e :person/email]]";
    assert_eq!(q(&db, people, &[]), "80");
    let total = "[:find (sum ?a) . :with ?e :where [?e :person/age ?a]]";
    let want: i64 = (0..80)
        .filter(|&i| i != 0 && i != 2)
        .map(|i| 20 + i % 50)
        .sum::<i64>()
        + 99
        + 7;
    assert_eq!(q(&db, total, &[]), want.to_string());
    // p1's :tag/all was retracted at t 4; the history shows the assertion and the retraction.
    let tags = "[:find [?t ...] :in $ ?m :where [?e :person/email ?m] [?e :person/tag ?t]]";
    assert_eq!(q(&db, tags, &[email("p1")]), "[:tag/t1]");
    let history =
        "[:find ?v ?tx ?op :in $ ?m :where [?e :person/email ?m] [?e :person/age ?v ?tx ?op]]";
    let ages = db.history().q(history, &[email("p0")]).unwrap().to_edn();
    let (tx2, tx4) = (vev::ids::tx_id(2), vev::ids::tx_id(4));
    let want = format!("#{{[20 {tx2} true] [20 {tx4} false] [99 {tx4} true]}}");
    assert_eq!(ages, vev::edn::parse(&want).unwrap());
    let since = "[:find [?n ...] :where [?e :person/name ?n]]";
    assert_eq!(q(&db.since(5), since, &[]), r#"["Zed"]"#);
    // Time points: an instant resolves to its transaction's t.
    let jan4 = 1_704_369_600_000; // 2024-01-04T12:00:00Z
    assert_eq!(db.t_of(TimePoint::Instant(jan4)).unwrap(), 4);
    assert_eq!(
        q(
            &db.as_of(TimePoint::Instant(jan4 - 1)),
            age_of,
            &[email("p0")]
        ),
        "20"
    );
    // Entities, lookup refs, pull.
    let email_attr = db.entid(&Keyword::new("person/email")).unwrap();
    let p0 = db
        .entity_with_value(email_attr, &Value::string("p0@example.com"))
        .unwrap()
        .unwrap();
    let friend = Keyword::new("person/friend");
    let back = db.entity(p0).reverse(&friend).unwrap();
    assert_eq!(back.len(), 2, "p79 and Zed point at p0");
    assert_eq!(
        db.pull("[:person/name {:person/friend [:person/email]}]", p0)
            .unwrap()
            .to_string(),
        r#"{:person/friend [{:person/email "p1@example.com"}], :person/name "Person 0"}"#
    );
    let n = db
        .count(IndexOrder::Aevt, &[Component::Entity(email_attr)])
        .unwrap();
    assert_eq!(n, 80);
}

#[test]
fn a_file_of_another_format_version_is_refused_with_format_version() {
    let dir = tempfile::tempdir().unwrap();
    for version in [99, 2] {
        let path = copy(&dir);
        rusqlite::Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", version)
            .unwrap();
        for opts in [OpenOptions::read_only(), OpenOptions::default()] {
            let Err(e) = Connection::open_with(&path, &opts) else {
                panic!("a file of version {version} opened");
            };
            assert_eq!(e.code(), "storage/format-version", "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("version {version}")) && msg.contains("version 7"),
                "{msg}"
            );
        }
    }
}

// ---- version 4 (full text) and the migration from version 3 ----

const FIXTURE_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/format-v4.vev");

/// The file's format version.
fn user_version(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn search(db: &Db, q: &str) -> Vec<(u64, String, u64)> {
    let a = db.entid(&Keyword::new("person/name")).unwrap();
    let mut rows: Vec<(u64, String, u64)> =
        vev::Source::fulltext(db, a, &vev::FtQuery::parse(q).unwrap(), true)
            .unwrap()
            .into_iter()
            .map(|h| (h.e, format!("{:?}", h.value), h.score.to_bits()))
            .collect();
    rows.sort();
    rows
}

#[test]
fn the_v4_fixture_has_full_text_entries_and_answers_as_its_transactions_in_memory() {
    let sqlite = rusqlite::Connection::open_with_flags(
        FIXTURE_V4,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let one = |sql: &str| -> i64 { sqlite.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("PRAGMA user_version"), 4);
    assert_eq!(one("SELECT count(*) FROM vev_ft_manifest"), 2);
    drop(sqlite);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("format-v4.vev");
    std::fs::copy(FIXTURE_V4, &path).unwrap();
    let conn = open(&path);
    let db = conn.db();
    let memory = Connection::open_in_memory();
    generator::fill_with(&memory, &generator::transactions_v4(), false).unwrap();
    assert!(everything(&db) == everything(&memory.db()));
    for q in ["person", "yoko OR cafe", "\"person 7\"", "pers* -person"] {
        assert_eq!(search(&db, q), search(&memory.db(), q), "{q}");
    }
    // 80 names indexed by the alteration, less p2's (retracted before) and p3's (replaced).
    assert_eq!(search(&db, "person").len(), 79);
    assert_eq!(search(&db.as_of(7), "cafe").len(), 0);
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.fulltext_segments, 2);
}

#[test]
fn a_writer_migrates_a_v3_file_to_v7_and_full_text_works_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(&dir);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&path), 7);
    conn.transact_edn("[{:db/id :person/name :db/fulltext true}]")
        .unwrap();
    assert_eq!(search(&conn.db(), "person").len(), 79);
    conn.verify().unwrap();
    drop(conn);
    let db = open(&path).db();
    assert_eq!(search(&db, "\"person 12\"").len(), 1);
    let memory = Connection::open_in_memory();
    generator::fill(&memory, false).unwrap();
    memory
        .transact_edn("[{:db/id :person/name :db/fulltext true}]")
        .unwrap();
    assert_eq!(search(&db, "person 1*"), search(&memory.db(), "person 1*"));
}

#[test]
fn a_writer_migrates_a_v4_file_to_v7_and_its_old_log_segments_become_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("format-v4.vev");
    std::fs::copy(FIXTURE_V4, &path).unwrap();
    let segments = |path: &Path| -> Vec<i64> {
        let sqlite = rusqlite::Connection::open(path).unwrap();
        let mut st = sqlite.prepare("SELECT id FROM vev_segment").unwrap();
        let ids = st.query_map([], |r| r.get(0)).unwrap();
        ids.collect::<Result<_, _>>().unwrap()
    };
    let before = segments(&path);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&path), 7);
    let memory = Connection::open_in_memory();
    generator::fill_with(&memory, &generator::transactions_v4(), false).unwrap();
    for c in [&conn, &memory] {
        c.transact_edn(
            r#"[{:person/email "late@example.com" :person/name "Late"}
                {:db/id "datomic.tx" :db/txInstant #inst "2025-01-01T12:00:00.000-00:00"}]"#,
        )
        .unwrap();
    }
    conn.checkpoint().unwrap();
    assert!(everything(&conn.db()) == everything(&memory.db()));
    let named: std::collections::HashSet<i64> = conn
        .db()
        .tree_segment_ids()
        .into_iter()
        .flat_map(|(_, ids)| ids)
        .map(|id| id as i64)
        .collect();
    conn.verify().unwrap();
    drop(conn);
    let sqlite = rusqlite::Connection::open(&path).unwrap();
    let garbage: std::collections::HashSet<i64> = sqlite
        .prepare("SELECT id FROM vev_garbage")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // Every segment of the old file is named by the new root or is garbage: the old log
    // tree's segments (which no v5 or v6 root names) do not stay in the file for good.
    let leaked: Vec<i64> = before
        .iter()
        .filter(|id| !named.contains(id) && !garbage.contains(id))
        .copied()
        .collect();
    assert!(
        leaked.is_empty(),
        "segments neither named nor garbage: {leaked:?}"
    );
    assert!(
        before.iter().any(|id| garbage.contains(id)),
        "the old log tree's segments are garbage"
    );
    drop(sqlite);
    let db = open(&path).db();
    assert!(everything(&db) == everything(&memory.db()));
}

// ---- version 5 (raw blobs) and the migration from it (compressed blobs) ----

const FIXTURE_V5: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/format-v5.vev");

/// The kind byte of a compressed blob (`vev-db`'s compress.rs).
const KIND_LZ4: u8 = 7;

/// The file's format version and the first byte of every stored segment and log record (the
/// frame's checksum follows the blob, so the first byte is the blob's kind), read without
/// writing to the file.
fn blob_kinds(path: &Path) -> (i64, Vec<u8>) {
    let sqlite =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let version = sqlite
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let mut kinds = Vec::new();
    for sql in [
        "SELECT payload FROM vev_segment",
        "SELECT record FROM vev_log",
    ] {
        let mut st = sqlite.prepare(sql).unwrap();
        let rows = st.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
        for blob in rows {
            kinds.push(blob.unwrap()[0]);
        }
    }
    (version, kinds)
}

fn copy_v5(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("format-v5.vev");
    std::fs::copy(FIXTURE_V5, &path).unwrap();
    path
}

#[test]
fn the_v5_fixture_holds_raw_blobs_and_answers_as_its_transactions_in_memory() {
    let (version, kinds) = blob_kinds(Path::new(FIXTURE_V5));
    assert_eq!(version, 5);
    assert!(kinds.len() > 8, "{kinds:?}");
    assert!(!kinds.contains(&KIND_LZ4), "{kinds:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = copy_v5(&dir);
    let conn = open(&path);
    let db = conn.db();
    let memory = Connection::open_in_memory();
    generator::fill_with(&memory, &generator::transactions_v4(), false).unwrap();
    assert!(everything(&db) == everything(&memory.db()));
    assert_eq!(db.next_user(), memory.db().next_user());
    for q in ["person", "yoko OR cafe", "\"person 7\"", "pers* -person"] {
        assert_eq!(search(&db, q), search(&memory.db(), q), "{q}");
    }
    let age_of = "[:find ?a . :in $ ?m :where [?e :person/email ?m] [?e :person/age ?a]]";
    assert_eq!(q(&db, age_of, &[email("p0")]), "99");
    assert_eq!(q(&db.as_of(3), age_of, &[email("p0")]), "20");
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.log_rows, generator::transactions_v4().len() as u64);
    assert!(report.segments > 0);
    drop(conn);
    // Reading does not migrate.
    assert_eq!(user_version(&path), 5);
}

#[test]
fn a_writer_migrates_a_v5_file_to_v7_and_then_writes_compressed_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_v5(&dir);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&path), 7);
    let memory = Connection::open_in_memory();
    generator::fill_with(&memory, &generator::transactions_v4(), false).unwrap();
    // A transaction whose log record is long enough to compress, then a checkpoint that
    // rewrites segments: the file then holds raw blobs of version 5 and compressed ones.
    let many: String = (0..40)
        .map(|i| {
            format!(r#" {{:person/email "late{i}@example.com" :person/name "Late Person {i}"}}"#)
        })
        .collect();
    let tx = format!(
        r#"[{{:db/id "datomic.tx" :db/txInstant #inst "2025-01-01T12:00:00.000-00:00"}}{many}]"#
    );
    for c in [&conn, &memory] {
        c.transact_edn(&tx).unwrap();
    }
    conn.checkpoint().unwrap();
    assert!(everything(&conn.db()) == everything(&memory.db()));
    conn.verify().unwrap().unwrap();
    drop(conn);
    let (version, kinds) = blob_kinds(&path);
    assert_eq!(version, 7);
    assert!(kinds.contains(&KIND_LZ4), "{kinds:?}");
    assert!(kinds.iter().any(|k| *k != KIND_LZ4), "{kinds:?}");
    let conn = open(&path);
    let db = conn.db();
    assert!(everything(&db) == everything(&memory.db()));
    for q in ["person", "late", "yoko OR cafe"] {
        assert_eq!(search(&db, q), search(&memory.db(), q), "{q}");
    }
    conn.verify().unwrap().unwrap();
}

// ---- version 6 (full-text segments in parts only) and the migration to version 7 ----

const FIXTURE_V6: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/format-v6.vev");

/// Manifest rows holding their segment, and rows of segment parts, read without writing
/// (`None` for the first where the column does not exist).
fn segment_rows(path: &Path) -> (Option<i64>, i64) {
    let sqlite =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let inline = sqlite
        .query_row(
            "SELECT count(*) FROM vev_ft_manifest WHERE payload IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .ok();
    let parts = sqlite
        .query_row("SELECT count(*) FROM vev_ft_segment", [], |r| r.get(0))
        .unwrap();
    (inline, parts)
}

#[test]
fn the_v6_fixture_keeps_segments_in_parts_and_answers_as_its_transactions_in_memory() {
    assert_eq!(user_version(Path::new(FIXTURE_V6)), 6);
    assert_eq!(segment_rows(Path::new(FIXTURE_V6)), (None, 2));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("format-v6.vev");
    std::fs::copy(FIXTURE_V6, &path).unwrap();
    let conn = open(&path);
    let db = conn.db();
    let memory = Connection::open_in_memory();
    generator::fill_with(&memory, &generator::transactions_v4(), false).unwrap();
    assert!(everything(&db) == everything(&memory.db()));
    for q in ["person", "yoko OR cafe", "\"person 7\"", "pers* -person"] {
        assert_eq!(search(&db, q), search(&memory.db(), q), "{q}");
    }
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.fulltext_segments, 2);
    drop(conn);
    assert_eq!(user_version(&path), 6, "reading does not migrate");
}

#[test]
fn a_writer_migrates_a_v6_file_to_v7_and_keeps_small_segments_in_their_manifest_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("format-v6.vev");
    std::fs::copy(FIXTURE_V6, &path).unwrap();
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            fulltext_compaction: vev::FulltextCompaction::Manual,
            gc_grace: None,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert_eq!(user_version(&path), 7);
    assert_eq!(
        segment_rows(&path),
        (Some(0), 2),
        "old segments stay in parts"
    );
    let memory = Connection::open_in_memory();
    generator::fill_with(&memory, &generator::transactions_v4(), false).unwrap();
    let old_db = conn.db();
    for i in 0..3 {
        let tx =
            format!(r#"[{{:person/email "new{i}@example.com" :person/name "Newcomer {i} café"}}]"#);
        for c in [&conn, &memory] {
            c.transact_edn(&tx).unwrap();
        }
    }
    // Each new transaction's small segment is in its manifest row, not in parts.
    assert_eq!(segment_rows(&path), (Some(3), 2));
    let queries = [
        "person",
        "newcomer",
        "cafe",
        "\"newcomer 2\"",
        "new* -person",
    ];
    for q in queries {
        assert_eq!(search(&conn.db(), q), search(&memory.db(), q), "{q}");
    }
    // A compaction merges them all (with the 80 names, more than a row holds: in parts);
    // the rows it replaces keep their bytes as (garbage) parts, which a reader holding the
    // old manifest still loads.
    conn.compact_fulltext().unwrap();
    assert_eq!(segment_rows(&path), (Some(0), 2 + 3 + 1));
    assert_eq!(conn.db().fulltext_stats().live_segments, 1);
    for q in queries {
        assert_eq!(search(&conn.db(), q), search(&memory.db(), q), "{q}");
    }
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.fulltext_segments, 2 + 3 + 1);
    drop(conn);
    assert_eq!(
        search(&old_db, "person"),
        search(&memory.db().as_of(8), "person")
    );
    // Reopened (a reader loads every segment from the file), and reopened by a writer.
    for opts in [OpenOptions::read_only(), OpenOptions::default()] {
        let conn = Connection::open_with(&path, &opts).unwrap();
        for q in queries {
            assert_eq!(search(&conn.db(), q), search(&memory.db(), q), "{q}");
        }
        conn.verify().unwrap().unwrap();
    }
}
