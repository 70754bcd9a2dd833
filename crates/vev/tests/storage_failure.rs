//! The corruption matrix: one flipped byte in a segment of each index (the four current
//! orders, the four orders of retired datoms) or in a log row of a real database file, against
//! every public read API. Each read either reports `storage/corruption` or gives exactly the
//! answer of the intact file (it did not need that segment or row); none answers with less.
//! The reads that must touch it (a full scan of its index, `tx_range` for a log row,
//! `verify`) report the error.

use std::path::{Path, PathBuf};

use vev::{
    Component, Connection, Db, EntityId, IndexOrder, Keyword, OpenOptions, TimePoint, Value,
};

use vev::testing::{write_corruption_fixture, CORRUPTION_PEOPLE as PEOPLE};

/// The fixture, checked: every tree is in segments (two or more where it matters).
fn build(path: &Path) {
    write_corruption_fixture(path).unwrap();
    let conn = Connection::open_with(path, &OpenOptions::read_only()).unwrap();
    let db = conn.db();
    for (tree, ids) in db.tree_segment_ids() {
        assert!(
            ids.len() >= 2 || tree.starts_with("retired"),
            "{tree}: {ids:?}"
        );
        assert!(!ids.is_empty(), "{tree} has no segments");
    }
}

/// What the probes need to know of the intact database.
struct Known {
    people: Vec<EntityId>,
    email: EntityId,
    age: EntityId,
    /// A basis-t in the middle, and its transaction's instant.
    mid_t: u64,
    mid_ms: i64,
}

fn known(db: &Db) -> Known {
    let email = db.entid(&Keyword::new("p/email")).unwrap();
    let people = db
        .datoms(IndexOrder::Aevt, &[Component::Entity(email)])
        .map(|d| d.unwrap().e)
        .collect::<Vec<_>>();
    assert_eq!(people.len(), PEOPLE);
    let log = db.tx_range(None, None).unwrap();
    let mid = &log[log.len() - 2];
    let instant = db.entid(&Keyword::new("db/txInstant")).unwrap();
    let mid_ms = mid
        .datoms
        .iter()
        .find(|d| d.a == instant)
        .and_then(|d| match d.v {
            Value::Instant(ms) => Some(ms),
            _ => None,
        })
        .unwrap();
    Known {
        people,
        email,
        age: db.entid(&Keyword::new("p/age")).unwrap(),
        mid_t: mid.t,
        mid_ms,
    }
}

/// A read's answer as text, or its error code.
type Answer = Result<String, String>;

fn text<T: std::fmt::Debug, E: std::fmt::Display + HasCode>(r: Result<T, E>) -> Answer {
    r.map(|x| format!("{x:?}"))
        .map_err(|e| format!("{}: {e}", e.code()))
}

trait HasCode {
    fn code(&self) -> &'static str;
}
impl HasCode for vev::StorageError {
    fn code(&self) -> &'static str {
        vev::StorageError::code(self)
    }
}
impl HasCode for vev::Error {
    fn code(&self) -> &'static str {
        vev::Error::code(self)
    }
}
impl HasCode for vev::QueryError {
    fn code(&self) -> &'static str {
        vev::QueryError::code(self)
    }
}
impl HasCode for vev::PullError {
    fn code(&self) -> &'static str {
        vev::PullError::code(self)
    }
}

fn all(scan: vev::Datoms) -> Answer {
    text(scan.collect::<Result<Vec<_>, _>>())
}

/// Each entity through `read`, stopping at the first error.
fn each<T: std::fmt::Debug>(
    k: &Known,
    read: impl Fn(EntityId) -> Result<T, vev::StorageError>,
) -> Answer {
    text(
        k.people
            .iter()
            .map(|&e| read(e))
            .collect::<Result<Vec<_>, _>>(),
    )
}

type Probe = Box<dyn Fn(&Connection, &Known) -> Answer>;

/// Every public read API, each over the whole database where it can be.
// One short probe per read API, listed in one place so that none is left out.
#[allow(clippy::too_many_lines)]
fn probes() -> Vec<(String, Probe)> {
    let mut out: Vec<(String, Probe)> = Vec::new();
    let mut add = |name: String, p: Probe| out.push((name, p));
    for order in IndexOrder::ALL {
        let n = order.name();
        add(
            format!("datoms {n}"),
            Box::new(move |c, _| all(c.db().datoms(order, &[]))),
        );
        add(
            format!("history datoms {n}"),
            Box::new(move |c, _| all(c.db().history().datoms(order, &[]))),
        );
        add(
            format!("seek_datoms {n}"),
            Box::new(move |c, _| all(c.db().seek_datoms(order, &[]))),
        );
        add(
            format!("count {n}"),
            Box::new(move |c, _| text(c.db().count(order, &[]))),
        );
        add(
            format!("history count {n}"),
            Box::new(move |c, _| text(c.db().history().count(order, &[]))),
        );
    }
    add(
        "as_of datoms".into(),
        Box::new(|c, k| all(c.db().as_of(k.mid_t).datoms(IndexOrder::Eavt, &[]))),
    );
    add(
        "since datoms".into(),
        Box::new(|c, k| all(c.db().since(k.mid_t).datoms(IndexOrder::Aevt, &[]))),
    );
    add(
        "index_range".into(),
        Box::new(|c, k| all(c.db().index_range(k.age, None, None))),
    );
    add(
        "t_of instant".into(),
        Box::new(|c, k| text(c.db().t_of(TimePoint::Instant(k.mid_ms)))),
    );
    add(
        "as_of instant".into(),
        Box::new(|c, k| {
            all(c
                .db()
                .as_of(TimePoint::Instant(k.mid_ms))
                .datoms(IndexOrder::Avet, &[]))
        }),
    );
    add(
        "tx_range".into(),
        Box::new(|c, _| text(c.db().tx_range(None, None))),
    );
    add(
        "values".into(),
        Box::new(|c, k| each(k, |e| c.db().values(e, k.age))),
    );
    add(
        "entity_with_value".into(),
        Box::new(|c, k| {
            let db = c.db();
            let holders: Result<Vec<_>, _> = (0..PEOPLE)
                .map(|i| db.entity_with_value(k.email, &Value::string(&format!("p{i}@x"))))
                .collect();
            text(holders)
        }),
    );
    let kw = Keyword::new;
    add(
        "entity get".into(),
        Box::new(move |c, k| each(k, |e| c.db().entity(e).get(&kw("p/name")))),
    );
    add(
        "entity get_all".into(),
        Box::new(move |c, k| each(k, |e| c.db().entity(e).get_all(&kw("p/tag")))),
    );
    add(
        "entity get_ref".into(),
        Box::new(move |c, k| {
            each(k, |e| {
                Ok(c.db().entity(e).get_ref(&kw("p/friend"))?.map(|x| x.id()))
            })
        }),
    );
    add(
        "entity reverse".into(),
        Box::new(move |c, k| each(k, |e| c.db().entity(e).reverse(&kw("p/friend")))),
    );
    add(
        "entity attrs".into(),
        Box::new(|c, k| each(k, |e| c.db().entity(e).attrs())),
    );
    add(
        "entity is_empty".into(),
        Box::new(|c, k| each(k, |e| c.db().entity(e).is_empty())),
    );
    add(
        "query".into(),
        Box::new(|c, _| {
            text(c.db().q(
                "[:find ?e ?n ?a ?t ?f :where [?e :p/name ?n] [?e :p/age ?a] [?e :p/tag ?t] [?e :p/friend ?f]]",
                &[],
            ))
        }),
    );
    add(
        "history query".into(),
        Box::new(|c, _| {
            text(
                c.db()
                    .history()
                    .q("[:find ?e ?a ?v ?op :where [?e ?a ?v _ ?op]]", &[]),
            )
        }),
    );
    add(
        "pull".into(),
        Box::new(|c, k| {
            let db = c.db();
            let pulled: Result<Vec<_>, _> = k
                .people
                .iter()
                .map(|&e| db.pull("[* {:p/_friend [:p/email]}]", e))
                .collect();
            text(pulled)
        }),
    );
    add(
        "pull_many".into(),
        Box::new(|c, k| {
            let pattern = vev::parse_pull("[*]").unwrap();
            text(vev::pull_many(&c.db(), &pattern, &k.people))
        }),
    );
    add(
        "verify".into(),
        Box::new(|c, _| text(c.verify().map(|r| r.map(|r| r.index_datoms)))),
    );
    out
}

/// The probes that must read some segment of each tree.
fn must_fail(tree: &str) -> Vec<String> {
    let order = |name: &str| IndexOrder::from_name(name).unwrap().name();
    let mut out = vec!["verify".to_string()];
    match tree.split_once(' ') {
        Some(("retired", name)) => out.push(format!("history datoms {}", order(name))),
        _ => {
            out.push(format!("datoms {}", order(tree)));
            out.push(format!("seek_datoms {}", order(tree)));
            out.push(format!("history datoms {}", order(tree)));
        }
    }
    out
}

fn open(path: &Path) -> Connection {
    Connection::open_with(path, &OpenOptions::read_only()).unwrap()
}

/// A copy of the database file with one byte of segment `id` flipped.
fn corrupt_copy(intact: &Path, dir: &Path, name: &str, id: u64) -> PathBuf {
    let path = dir.join(format!("{}.vev", name.replace(' ', "-")));
    std::fs::copy(intact, &path).unwrap();
    vev::testing::flip_segment_byte(&path, id).unwrap();
    path
}

/// The intact fixture in `dir` as one file (nothing committed may wait in a -wal for the
/// copies to miss), what the probes need to know of it, and every probe's answer on it.
fn intact(dir: &Path) -> (PathBuf, Known, Vec<Answer>, Vec<(String, Probe)>) {
    let intact = dir.join("intact.vev");
    build(&intact);
    rusqlite::Connection::open(&intact)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let conn = open(&intact);
    let k = known(&conn.db());
    let probes = probes();
    let want: Vec<Answer> = probes.iter().map(|(_, p)| p(&conn, &k)).collect();
    for ((name, _), w) in probes.iter().zip(&want) {
        assert!(w.is_ok(), "{name} fails on the intact file: {w:?}");
    }
    (intact, k, want, probes)
}

#[test]
fn a_corrupt_segment_of_any_index_fails_every_read_that_needs_it_and_no_read_comes_up_short() {
    let dir = tempfile::tempdir().unwrap();
    let (intact, k, want, probes) = intact(dir.path());
    let trees = open(&intact).db().tree_segment_ids();
    assert_eq!(trees.len(), 8);
    for (tree, ids) in trees {
        let id = ids[ids.len() / 2];
        let path = corrupt_copy(&intact, dir.path(), tree, id);
        let required = must_fail(tree);
        let mut failed = 0;
        for ((name, probe), w) in probes.iter().zip(&want) {
            // A fresh connection each time: its segment cache has loaded nothing yet.
            let got = probe(&open(&path), &k);
            match &got {
                Err(code) => {
                    assert!(
                        code.starts_with("storage/corruption")
                            && code.contains(&format!("segment {id}")),
                        "{tree} segment {id}, {name}: {code}"
                    );
                    failed += 1;
                }
                Ok(_) => {
                    assert!(
                        !required.contains(name),
                        "{tree} segment {id}: {name} did not fail"
                    );
                    assert!(
                        &got == w,
                        "{tree} segment {id}: {name} answered differently"
                    );
                }
            }
        }
        assert!(failed >= required.len(), "{tree}: {failed} reads failed");
    }
}

#[test]
fn a_corrupt_log_row_fails_tx_range_and_verify_and_no_read_comes_up_short() {
    let dir = tempfile::tempdir().unwrap();
    let (intact, k, want, probes) = intact(dir.path());
    // A transaction the root covers: opening does not read its row, `tx_range` must.
    let path = dir.path().join("log.vev");
    std::fs::copy(&intact, &path).unwrap();
    vev::testing::flip_log_byte(&path, k.mid_t).unwrap();
    let required = ["tx_range", "verify"];
    for ((name, probe), w) in probes.iter().zip(&want) {
        let got = probe(&open(&path), &k);
        match &got {
            Err(code) => assert!(
                code.starts_with("storage/corruption")
                    && code.contains(&format!("log row t={}", k.mid_t)),
                "{name}: {code}"
            ),
            Ok(_) => {
                assert!(!required.contains(&name.as_str()), "{name} did not fail");
                assert!(&got == w, "{name} answered differently");
            }
        }
    }
}
