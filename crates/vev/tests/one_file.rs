//! One file is the database: after a clean close the `.vev` file alone holds every
//! transaction, and `Connection::backup` copies a live database into a file that opens and
//! verifies on its own.

use std::path::{Path, PathBuf};

use vev::{Connection, Db, IndexOrder, OpenOptions};

const SCHEMA: &str = r#"[{:db/ident :c/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :c/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;

fn tx(n: u64) -> String {
    format!(r#"[{{:c/n {n} :c/name "name {n} {}"}}]"#, "x".repeat(200))
}

/// Every datom of every index, current and history.
fn all_datoms(db: &Db) -> Vec<Vec<vev::Datom>> {
    let mut out = Vec::new();
    for view in [db.clone(), db.history()] {
        for order in [
            IndexOrder::Eavt,
            IndexOrder::Aevt,
            IndexOrder::Avet,
            IndexOrder::Vaet,
        ] {
            let datoms: Result<Vec<_>, _> = view.datoms(order, &[]).collect();
            out.push(datoms.expect("no storage failure"));
        }
    }
    out
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// A writer with index segments (a checkpoint) and a log tail after them.
fn write_with_segments(path: &Path, txs: u64) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    for n in 0..txs {
        conn.transact_edn(&tx(n)).unwrap();
        if n == txs / 2 {
            conn.checkpoint().unwrap();
        }
    }
    conn
}

#[test]
fn after_a_clean_close_the_database_file_alone_holds_every_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.vev");
    let conn = write_with_segments(&path, 300);
    let expected = all_datoms(&conn.db());
    let basis = conn.db().basis_t();
    // A reader open when the writer closes (`vev query` in another terminal, say): SQLite
    // leaves the -wal to the last connection, and a read-only one cannot empty it.
    let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    assert_eq!(reader.db().basis_t(), basis);
    drop(conn);
    drop(reader);
    let wal = std::fs::metadata(sibling(&path, "-wal")).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the -wal is emptied into the file");

    // What a user does for a backup: copy the .vev file, nothing else.
    let other = tempfile::tempdir().unwrap();
    let copy = other.path().join("a.vev");
    std::fs::copy(&path, &copy).unwrap();
    let reader = Connection::open_with(&copy, &OpenOptions::read_only()).unwrap();
    assert_eq!(reader.db().basis_t(), basis);
    assert_eq!(all_datoms(&reader.db()), expected);
    let report = reader.verify().unwrap().unwrap();
    assert_eq!(report.log_rows, basis);
    assert!(report.segments > 0, "the copy has index segments");
    drop(reader);
    // A read-only connection cannot remove the -wal and -shm SQLite made for it, but it
    // leaves nothing in them that the file lacks.
    let wal = std::fs::metadata(sibling(&copy, "-wal")).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "a reader writes nothing to the -wal");
    // The next writer preallocates the -wal again and commits through it.
    let writer = Connection::open(&path).unwrap();
    assert!(std::fs::metadata(sibling(&path, "-wal")).unwrap().len() > 1 << 20);
    writer.transact_edn(&tx(1_000)).unwrap();
    drop(writer);
    let reopened = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    assert_eq!(reopened.db().basis_t(), basis + 1);
}

#[test]
fn a_backup_taken_while_a_writer_commits_is_one_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.vev");
    let writer = write_with_segments(&path, 300);
    let dest = dir.path().join("backup.vev");
    let mut reports: Vec<vev::BackupProgress> = Vec::new();
    let mut basis = 0;
    std::thread::scope(|s| {
        // The writer goes on committing while the backup copies.
        let w = writer.clone();
        let busy = s.spawn(move || {
            for n in 300..400 {
                w.transact_edn(&tx(n)).unwrap();
            }
        });
        // From a read-only connection, as `vev backup` does, and from the writer's own.
        let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
        let done = reader.backup(&dest, &mut |p| reports.push(*p)).unwrap();
        assert!(done.pages > 0 && done.bytes == std::fs::metadata(&dest).unwrap().len());
        basis = done.basis_t;
        busy.join().unwrap();
    });
    let last = reports.last().expect("progress is reported");
    assert_eq!(last.pages_done, last.pages_total);
    let backup = Connection::open_with(&dest, &OpenOptions::read_only()).unwrap();
    let t = backup.db().basis_t();
    assert_eq!(t, basis, "the report names the copy's basis-t");
    assert!((301..=401).contains(&t), "a committed state: t={t}");
    // The writer's database as of the backup's basis holds the same datoms.
    let then = writer.db().as_of(t);
    let current = |db: &Db| -> Vec<vev::Datom> {
        db.datoms(IndexOrder::Eavt, &[])
            .collect::<Result<_, _>>()
            .expect("no storage failure")
    };
    assert_eq!(current(&backup.db()), current(&then));
    assert_eq!(backup.verify().unwrap().unwrap().log_rows, t);
    drop(backup);
    let wal = std::fs::metadata(sibling(&dest, "-wal")).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the backup is the .vev file alone");

    // The writer's own connection can take one too; an existing file is never replaced.
    let second = dir.path().join("second.vev");
    writer.backup(&second, &mut |_| {}).unwrap();
    let copy = Connection::open_with(&second, &OpenOptions::read_only()).unwrap();
    assert_eq!(all_datoms(&copy.db()), all_datoms(&writer.db()));
    let err = writer.backup(&second, &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "storage/exists");
    let err = Connection::open_in_memory()
        .backup(dir.path().join("mem.vev"), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "storage/io");
}

/// `verify` reads the -wal beside the file: a live writer's is fine; one with a damaged
/// header (SQLite ignores it, and the transactions in it) is reported, not passed as ok.
#[test]
fn verify_reports_a_write_ahead_log_sqlite_would_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.vev");
    drop(write_with_segments(&path, 50));
    // The first 51 transactions are in the file, the next ones in the live writer's -wal.
    let writer = Connection::open(&path).unwrap();
    for n in 50..60 {
        writer.transact_edn(&tx(n)).unwrap();
    }
    let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    assert_eq!(reader.verify().unwrap().unwrap().log_rows, 61);
    // A copy of both files whose -wal header got damaged on the way.
    let wal = std::fs::read(sibling(&path, "-wal")).unwrap();
    assert_ne!(&wal[..4], &[0, 0, 0, 0], "the writer's -wal has a header");
    let other = tempfile::tempdir().unwrap();
    let copy = other.path().join("a.vev");
    std::fs::copy(&path, &copy).unwrap();
    let mut damaged = wal.clone();
    damaged[12] ^= 1;
    std::fs::write(sibling(&copy, "-wal"), &damaged).unwrap();
    let opened = Connection::open_with(&copy, &OpenOptions::read_only()).unwrap();
    assert_eq!(opened.db().basis_t(), 51, "SQLite ignored the -wal");
    let err = opened.verify().unwrap_err();
    assert_eq!(err.code(), "storage/corruption");
    assert!(err.to_string().contains("-wal"), "{err}");
    drop((writer, reader));
}
