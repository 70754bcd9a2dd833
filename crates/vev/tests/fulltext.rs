//! Full-text search: the index against the reference scan, structure (one segment and one
//! manifest entry per transaction, none for a delete-only one), compaction and reopening
//! that change no result.

use std::sync::Arc;

use vev::{Connection, Db, EntityId, FtQuery, OpenOptions, Source};

const SCHEMA: &str = r#"[{:db/ident :doc/id :db/valueType :db.type/long
                           :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
                          {:db/ident :doc/text :db/valueType :db.type/string
                           :db/cardinality :db.cardinality/one :db/fulltext true}
                          {:db/ident :doc/tags :db/valueType :db.type/string
                           :db/cardinality :db.cardinality/many :db/fulltext true}]"#;

fn attr(db: &Db, ident: &str) -> EntityId {
    db.schema()
        .attribute_by_ident(&vev::Keyword::new(ident))
        .unwrap()
        .id
}

/// Index and reference rows, sorted, with scores compared within a tolerance.
fn check_same(db: &Db, ident: &str, q: &str) -> usize {
    let a = attr(db, ident);
    let query = FtQuery::parse(q).unwrap();
    let mut got = db.fulltext(a, &query, true).unwrap();
    let mut want = vev_query_reference(db, a, &query);
    let key = |h: &vev::FulltextHit| (h.e, h.tx, h.value.clone());
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got.len(), want.len(), "{q:?}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(key(g), key(w), "{q:?}");
        assert!(
            (g.score - w.score).abs() <= 1e-9 * w.score.abs().max(1.0),
            "{q:?}: {g:?} {w:?}"
        );
    }
    got.len()
}

fn vev_query_reference(db: &Db, a: EntityId, q: &FtQuery) -> Vec<vev::FulltextHit> {
    vev_query::fulltext::scan_search(db, a, q)
}

fn texts(n: usize) -> Vec<String> {
    let words = [
        "love", "always", "crazy", "night", "Beyoncé", "café", "intro", "song", "blue", "moon",
        "river", "dance", "heart", "rain", "gold",
    ];
    (0..n)
        .map(|i| {
            let len = 1 + (i * 7 + 3) % 6;
            (0..len)
                .map(|k| words[(i * 31 + k * 17 + k * k) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn tx_docs(from: usize, texts: &[String]) -> String {
    let mut s = String::from("[");
    for (i, t) in texts.iter().enumerate() {
        s.push_str(&format!("{{:doc/id {} :doc/text {:?}}}", from + i, t));
    }
    s.push(']');
    s
}

const QUERIES: &[&str] = &[
    "love",
    "crazy love",
    "\"blue moon\"",
    "lov*",
    "beyonce OR cafe",
    "night -rain",
    "d* heart",
    "gold OR \"river dance\" -love",
];

fn check_all(db: &Db) -> Vec<usize> {
    QUERIES
        .iter()
        .map(|q| check_same(db, ":doc/text".trim_start_matches(':'), q))
        .collect()
}

/// A new database file at `path` with the schema, compacted only when a test says so.
fn open_with_schema(path: &std::path::Path) -> Connection {
    let opts = OpenOptions {
        fulltext_compaction: vev::FulltextCompaction::Manual,
        ..OpenOptions::default()
    };
    let conn = Connection::open_with(path, &opts).unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    conn
}

#[test]
fn one_segment_and_one_manifest_entry_per_transaction_none_when_delete_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ft.vev");
    let conn = open_with_schema(&path);
    let all = texts(611);
    let mut at = 0;
    for batch in [1, 10, 100, 500] {
        let before = conn.fulltext_stats();
        conn.transact_edn(&tx_docs(at, &all[at..at + batch]))
            .unwrap();
        at += batch;
        let after = conn.fulltext_stats();
        assert_eq!(
            after.segments_written - before.segments_written,
            1,
            "batch {batch}"
        );
        assert_eq!(
            after.manifest_appends - before.manifest_appends,
            1,
            "batch {batch}"
        );
        assert_eq!(
            after.live_segments - before.live_segments,
            1,
            "batch {batch}"
        );
        assert_eq!(after.documents - before.documents, batch as u64);
    }
    let counts = check_all(&conn.db());
    // A delete-only transaction: no segment, no manifest entry, and the documents stop
    // matching.
    let before = conn.fulltext_stats();
    let db = conn.db();
    let hits_before = check_same(&db, "doc/text", "love");
    conn.transact_edn(r#"[[:db/retract [:doc/id 0] :doc/text] [:db/retractEntity [:doc/id 5]]]"#)
        .unwrap_or_else(|_| {
            // Retract by value: look the values up.
            let t0 = &all[0];
            conn.transact_edn(&format!(
                "[[:db/retract [:doc/id 0] :doc/text {t0:?}] [:db/retractEntity [:doc/id 5]]]"
            ))
            .unwrap()
        });
    let after = conn.fulltext_stats();
    assert_eq!(after.segments_written, before.segments_written);
    assert_eq!(after.manifest_appends, before.manifest_appends);
    assert_eq!(after.live_segments, before.live_segments);
    assert_eq!(after.deleted_documents, before.deleted_documents + 2);
    let db = conn.db();
    let n = check_same(&db, "doc/text", "love");
    let removed = [0usize, 5]
        .iter()
        .filter(|&&i| all[i].split(' ').any(|w| w == "love"))
        .count();
    assert_eq!(n, hits_before - removed);
    // Compaction and reopening change no row and no score.
    let digest_before = digest(&conn.db());
    conn.compact_fulltext().unwrap();
    assert_eq!(conn.fulltext_stats().live_segments, 1);
    assert_eq!(digest(&conn.db()), digest_before);
    check_all(&conn.db());
    conn.verify().unwrap();
    drop(conn);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(digest(&conn.db()), digest_before);
    assert_eq!(conn.fulltext_stats().compactions, 1);
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.fulltext_documents, 611);
    let _ = counts;
}

/// Rows and scores of every query, through the index, as one comparable value.
fn digest(db: &Db) -> Vec<Vec<(EntityId, String, u64)>> {
    let a = attr(db, "doc/text");
    QUERIES
        .iter()
        .map(|q| {
            let mut rows: Vec<(EntityId, String, u64)> = db
                .fulltext(a, &FtQuery::parse(q).unwrap(), true)
                .unwrap()
                .into_iter()
                .map(|h| (h.e, format!("{:?}", h.value), h.score.to_bits()))
                .collect();
            rows.sort();
            rows
        })
        .collect()
}

#[test]
fn time_travel_replacement_and_alteration() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).unwrap();
    conn.transact_edn(
        r#"[{:doc/id 1 :doc/text "crazy in love"} {:doc/id 2 :doc/text "love me do"}]"#,
    )
    .unwrap();
    let t1 = conn.db().basis_t();
    conn.transact_edn(r#"[{:doc/id 1 :doc/text "always on my mind"}]"#)
        .unwrap();
    let db = conn.db();
    assert_eq!(check_same(&db, "doc/text", "love"), 1);
    assert_eq!(check_same(&db.as_of(t1), "doc/text", "love"), 2);
    assert_eq!(check_same(&db.history(), "doc/text", "love"), 2);
    assert_eq!(check_same(&db.since(t1), "doc/text", "always"), 1);
    assert_eq!(check_same(&db.since(t1), "doc/text", "love"), 0);
    // Alteration: an existing attribute becomes full-text, with its history.
    conn.transact_edn(r#"[{:db/ident :doc/title :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#)
        .unwrap();
    conn.transact_edn(r#"[{:doc/id 1 :doc/title "Blue Moon"}]"#)
        .unwrap();
    let t2 = conn.db().basis_t();
    conn.transact_edn(r#"[{:doc/id 1 :doc/title "Moon River"}]"#)
        .unwrap();
    conn.transact_edn(r#"[{:db/id :doc/title :db/fulltext true}]"#)
        .unwrap();
    let db = conn.db();
    assert_eq!(check_same(&db, "doc/title", "moon"), 1);
    assert_eq!(check_same(&db, "doc/title", "blue"), 0);
    assert_eq!(check_same(&db.as_of(t2), "doc/title", "blue"), 1);
    assert_eq!(check_same(&db.history(), "doc/title", "moon"), 2);
    // Card-many values.
    conn.transact_edn(r#"[{:doc/id 3 :doc/tags ["rock" "jazz fusion"]}]"#)
        .unwrap();
    conn.transact_edn(r#"[[:db/retract [:doc/id 3] :doc/tags "rock"]]"#)
        .unwrap();
    let db = conn.db();
    assert_eq!(check_same(&db, "doc/tags", "rock OR jazz"), 1);
    assert_eq!(check_same(&db.history(), "doc/tags", "rock OR jazz"), 2);
    let _ = Arc::new(0);
}

// ---- differential: the index against the reference scan ----

mod differential {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const WORDS: &[&str] = &[
        "love", "Love", "LOVE", "lovely", "always", "crazy", "café", "Cafe", "naïve", "intro",
        "night", "blue", "moon", "river", "don't", "e-mail", "3.14", "Ωmega", "straße", "la",
    ];

    fn text(rng: &mut StdRng) -> String {
        let n = rng.random_range(0..7);
        let mut words: Vec<&str> = (0..n)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect();
        if rng.random_bool(0.2) {
            words.push(",");
        }
        words.join(" ")
    }

    fn word(rng: &mut StdRng) -> String {
        WORDS[rng.random_range(0..WORDS.len())].to_owned()
    }

    fn query(rng: &mut StdRng) -> String {
        let groups = rng.random_range(1..3);
        let mut out = Vec::new();
        for g in 0..groups {
            if g > 0 {
                out.push("OR".to_owned());
            }
            out.push(atom(rng));
            for _ in 0..rng.random_range(0..3) {
                let a = atom(rng);
                out.push(if rng.random_bool(0.25) {
                    format!("-{a}")
                } else {
                    a
                });
            }
        }
        out.join(" ")
    }

    fn atom(rng: &mut StdRng) -> String {
        match rng.random_range(0..6) {
            0 => format!("\"{} {}\"", word(rng), word(rng)),
            1 => {
                let w = vev_query::fulltext::analyze::fold(&word(rng));
                let cut = w
                    .char_indices()
                    .nth(rng.random_range(1..3))
                    .map_or(w.len(), |c| c.0);
                let p = &w[..cut];
                if p.chars().all(char::is_alphanumeric) {
                    format!("{p}*")
                } else {
                    w
                }
            }
            _ => word(rng),
        }
    }

    const SCHEMA: &str = r#"[{:db/ident :d/id :db/valueType :db.type/long
                                :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
                               {:db/ident :d/one :db/valueType :db.type/string
                                :db/cardinality :db.cardinality/one :db/fulltext true}
                               {:db/ident :d/many :db/valueType :db.type/string
                                :db/cardinality :db.cardinality/many :db/fulltext true}
                               {:db/ident :d/gone :db/valueType :db.type/string
                                :db/cardinality :db.cardinality/one :db/fulltext true :db/noHistory true}
                               {:db/ident :d/late :db/valueType :db.type/string
                                :db/cardinality :db.cardinality/one}]"#;

    /// One random transaction: assertions, replacements, retractions, entity retractions,
    /// and (once) the alteration that makes `:d/late` full-text.
    fn random_tx(rng: &mut StdRng, db: &Db, altered: &mut bool) -> String {
        if !*altered && rng.random_bool(0.08) {
            *altered = true;
            return "[{:db/id :d/late :db/fulltext true}]".into();
        }
        let mut ops = Vec::new();
        let mut ids: Vec<i64> = (0..12).collect();
        for _ in 0..rng.random_range(1..6) {
            // Each entity once per transaction, so no two operations conflict.
            let id = ids.swap_remove(rng.random_range(0..ids.len()));
            match rng.random_range(0..10) {
                0..=4 => {
                    let attr = [":d/one", ":d/many", ":d/gone", ":d/late"][rng.random_range(0..4)];
                    ops.push(format!("{{:d/id {id} {attr} {:?}}}", text(rng)));
                }
                5 | 6 => {
                    // Retract one current value of some attribute, if the entity has one.
                    let attr = ["d/one", "d/many", "d/gone", "d/late"][rng.random_range(0..4)];
                    let id_edn = vev::Edn::Integer(id);
                    let found = vev::q(
                        &format!("[:find ?v . :in $ ?id :where [?e :d/id ?id] [?e :{attr} ?v]]"),
                        &[vev::Input::Db(db), vev::Input::Edn(&id_edn)],
                    );
                    if let Ok(vev::QueryResult::Scalar(Some(v))) = found {
                        ops.push(format!("[:db/retract [:d/id {id}] :{attr} {v}]"));
                    }
                }
                7 => {
                    if db
                        .entity_with_value(attr(db, "d/id"), &vev::Value::Long(id))
                        .unwrap()
                        .is_some()
                    {
                        ops.push(format!("[:db/retractEntity [:d/id {id}]]"));
                    }
                }
                _ => ops.push(format!("{{:d/id {id}}}")),
            }
        }
        format!("[{}]", ops.join(" "))
    }

    fn views(rng: &mut StdRng, db: &Db) -> Vec<Db> {
        let t = db.basis_t();
        let mut out = vec![db.clone(), db.history()];
        for _ in 0..3 {
            let a = rng.random_range(0..=t);
            let b = rng.random_range(0..=t);
            out.push(db.as_of(a));
            out.push(db.since(a));
            out.push(db.as_of(a.max(b)).since(a.min(b)));
            out.push(db.as_of(a).history());
        }
        out
    }

    fn compare(db: &Db, rng: &mut StdRng, seed: u64) {
        for view in views(rng, db) {
            for ident in ["d/one", "d/many", "d/gone", "d/late"] {
                let a = attr(&view, ident);
                if !view.schema().attribute(a).unwrap().fulltext {
                    continue;
                }
                for _ in 0..4 {
                    let q = query(rng);
                    let Ok(parsed) = FtQuery::parse(&q) else {
                        continue;
                    };
                    let mut got = view.fulltext(a, &parsed, true).unwrap();
                    let mut want = vev_query::fulltext::scan_search(&view, a, &parsed);
                    let key = |h: &vev::FulltextHit| (h.e, h.tx, h.value.clone());
                    got.sort_by_key(key);
                    want.sort_by_key(key);
                    let ctx = || format!("seed {seed}, {ident}, query {q:?}, view {view:?}");
                    assert_eq!(
                        got.iter().map(key).collect::<Vec<_>>(),
                        want.iter().map(key).collect::<Vec<_>>(),
                        "{}",
                        ctx()
                    );
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (g.score - w.score).abs() <= 1e-9 * w.score.abs().max(1.0),
                            "{}: {g:?} {w:?}",
                            ctx()
                        );
                    }
                }
            }
        }
    }

    fn cases() -> u64 {
        std::env::var("VEV_PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(24)
    }

    /// Random transactions in memory, compacted now and then; every few transactions every
    /// view is searched through the index and through the reference.
    #[test]
    fn index_matches_the_reference_scan_in_every_view() {
        for seed in 0..cases() {
            let mut rng = StdRng::seed_from_u64(seed);
            let conn = Connection::open_in_memory();
            conn.transact_edn(SCHEMA).unwrap();
            let mut altered = false;
            for i in 0..30 {
                let tx = random_tx(&mut rng, &conn.db(), &mut altered);
                conn.transact_edn(&tx)
                    .unwrap_or_else(|e| panic!("seed {seed}: {tx}: {e}"));
                if rng.random_bool(0.15) {
                    conn.compact_fulltext().unwrap();
                }
                if i % 6 == 5 {
                    compare(&conn.db(), &mut rng, seed);
                }
            }
            compare(&conn.db(), &mut rng, seed);
        }
    }

    /// The same on a file: checkpoints, compactions and reopening on the way, and `verify`
    /// (the index against the log) at the end.
    #[test]
    fn index_on_a_file_matches_the_reference_after_reopening() {
        for seed in 0..cases().div_ceil(4) {
            let mut rng = StdRng::seed_from_u64(1000 + seed);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("d.vev");
            let mut conn = Connection::open(&path).unwrap();
            conn.transact_edn(SCHEMA).unwrap();
            let mut altered = false;
            for i in 0..40 {
                let tx = random_tx(&mut rng, &conn.db(), &mut altered);
                conn.transact_edn(&tx)
                    .unwrap_or_else(|e| panic!("seed {seed}: {tx}: {e}"));
                match rng.random_range(0..12) {
                    0 => conn.checkpoint().unwrap(),
                    1 => conn.compact_fulltext().unwrap(),
                    2 => {
                        drop(conn);
                        conn = Connection::open(&path).unwrap();
                    }
                    _ => {}
                }
                conn.verify()
                    .unwrap_or_else(|e| panic!("seed {seed} step {i}: {e}"));
                if i % 10 == 9 {
                    compare(&conn.db(), &mut rng, seed);
                }
            }
            conn.verify().unwrap();
            let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
            reader.verify().unwrap();
            compare(&reader.db(), &mut rng, seed);
        }
    }
}

/// `bulk_load` writes one segment per write batch (not per transaction), with and without
/// a subscriber, and the result searches as the reference does, after reopening too.
#[test]
fn bulk_load_writes_a_segment_per_write_batch() {
    let all = texts(900);
    for subscribed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bulk.vev");
        let opts = OpenOptions {
            bulk_batch_datoms: 400,
            fulltext_compaction: vev::FulltextCompaction::Manual,
            ..OpenOptions::default()
        };
        let conn = Connection::open_with(&path, &opts).unwrap();
        conn.transact_edn(SCHEMA).unwrap();
        let _feed = subscribed.then(|| conn.subscribe());
        let txs: Vec<Vec<vev::TxOp>> = all
            .chunks(3)
            .enumerate()
            .map(|(i, chunk)| {
                vev::parse_tx(&tx_docs(i * 3, chunk))
                    .unwrap()
                    .into_iter()
                    .map(|s| s.op)
                    .collect()
            })
            .collect();
        let n_txs = txs.len() as u64;
        conn.bulk_load(txs, &mut |_| {}).unwrap();
        let stats = conn.fulltext_stats();
        assert_eq!(stats.documents, 900);
        assert!(
            stats.manifest_appends > 1 && stats.manifest_appends < n_txs / 4,
            "{subscribed}: {stats:?} for {n_txs} transactions"
        );
        assert_eq!(stats.segments_written, stats.manifest_appends);
        check_all(&conn.db());
        conn.verify().unwrap();
        drop(conn);
        let conn = Connection::open(&path).unwrap();
        check_all(&conn.db());
        assert_eq!(conn.fulltext_stats(), stats);
    }
}

/// A transaction with many full-text values indexes them on another thread while the
/// trees change (`tx::apply`): its new documents, and the replaced values it marks deleted,
/// answer as the reference scan does, now and as of before it, in memory and reopened.
#[test]
fn a_large_transaction_indexed_beside_the_trees() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ft.vev");
    let conn = open_with_schema(&path);
    let all = texts(900);
    conn.transact_edn(&tx_docs(0, &all[..300])).unwrap();
    let t1 = conn.db().basis_t();
    // 300 new values for the same documents (each replaces one: a deletion mark) and 300
    // new documents, in one transaction.
    let replaced: Vec<String> = all[..300].iter().map(|t| format!("{t} remix")).collect();
    let mut tx = tx_docs(0, &replaced);
    tx.pop();
    tx.push_str(&tx_docs(300, &all[600..])[1..]);
    conn.transact_edn(&tx).unwrap();
    let db = conn.db();
    let counts = check_all(&db);
    assert!(counts.iter().filter(|&&n| n > 0).count() >= 4, "{counts:?}");
    check_all(&db.as_of(t1));
    // 900 indexed, 300 of them replaced.
    assert_eq!(conn.fulltext_stats().documents, 900);
    assert_eq!(check_same(&conn.db(), "doc/text", "remix"), 300);
    assert_eq!(conn.fulltext_stats().deleted_documents, 300);
    conn.verify().unwrap();
    let digest_before = digest(&db);
    conn.compact_fulltext().unwrap();
    assert_eq!(conn.fulltext_stats().live_segments, 1);
    assert_eq!(digest(&conn.db()), digest_before);
    check_all(&conn.db().as_of(t1));
    drop((db, conn));
    let conn = Connection::open(&path).unwrap();
    assert_eq!(digest(&conn.db()), digest_before);
    check_all(&conn.db());
}
