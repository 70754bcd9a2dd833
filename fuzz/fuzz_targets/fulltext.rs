//! Fuzz full text: the query grammar, the index against the reference search, and the
//! decoders of stored full-text bytes. The first byte picks the mode:
//! - 0: the rest as query text: parsing never panics, and a query that parses gives the
//!   same rows and scores through the index as through the reference scan, in the current,
//!   as-of and history views of a small database with retractions and compactions;
//! - 1: the rest as a stored segment under a real manifest entry;
//! - 2: the rest as a manifest entry's record over a real segment.
//!
//! Bad bytes are errors (`storage/corruption`), never a panic.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vev::{FtQuery, Source};
use vev_db::persist::{self, SegmentCache, SegmentStore, StoredEntry};

const SCHEMA: &str = r#"[{:db/ident :d/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :d/text :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/fulltext true}]"#;

const TEXTS: &[&str] = &[
    "Crazy in Love", "Love Me Do", "Always on My Mind", "Café del Mar", "naïve love song",
    "intro", "e-mail me, don't", "the love of the night", "Ωmega straße 3.14", "blue moon",
];

fn base() -> &'static (vev::Db, u64, Vec<u8>, Vec<u8>) {
    static DB: OnceLock<(vev::Db, u64, Vec<u8>, Vec<u8>)> = OnceLock::new();
    DB.get_or_init(|| {
        let conn = vev::Connection::open_in_memory();
        conn.transact_edn(SCHEMA).expect("schema");
        let first = conn.db();
        for (i, t) in TEXTS.iter().enumerate() {
            conn.transact_edn(&format!("[{{:d/id {i} :d/text {t:?}}}]"))
                .expect("doc");
            if i == 4 {
                conn.compact_fulltext().expect("compact");
            }
        }
        let entry = conn
            .db()
            .fulltext_unstored()
            .into_iter()
            .next()
            .expect("an entry");
        let _ = first;
        conn.transact_edn(r#"[[:db/retract [:d/id 1] :d/text "Love Me Do"] {:d/id 2 :d/text "love again"}]"#)
            .expect("retract");
        let db = conn.db();
        let a = db
            .schema()
            .attribute_by_ident(&vev::Keyword::new("d/text"))
            .expect("attribute")
            .id;
        (db, a, entry.record, entry.segment.to_vec())
    })
}

struct Fixed(Vec<u8>);

impl SegmentStore for Fixed {
    fn read_segment(&self, _id: u64) -> Result<Vec<u8>, vev::StorageError> {
        Ok(Vec::new())
    }

    fn read_fulltext_segment(
        &self,
        _id: u64,
        _doc_first: u64,
    ) -> Result<Vec<u8>, vev::StorageError> {
        Ok(self.0.clone())
    }
}

fn stored(record: Vec<u8>, segment: Vec<u8>) {
    let (_, a, _, _) = base();
    let cache = SegmentCache::new(Arc::new(Fixed(segment)), 10_000);
    let manifest = vec![StoredEntry { segment: 1, record }];
    if let Ok(db) = persist::open_root_with(None, &cache, manifest) {
        let _ = db.fulltext(*a, &FtQuery::parse("love OR moo*").expect("parses"), true);
        let _ = db.history().fulltext(*a, &FtQuery::parse("\"in love\"").expect("parses"), true);
        let _ = db.verify_fulltext();
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (db, a, record, segment) = base();
    match mode % 3 {
        0 => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            let Ok(q) = FtQuery::parse(text) else {
                return;
            };
            for view in [db.clone(), db.as_of(4), db.history(), db.since(3)] {
                let mut got = view.fulltext(*a, &q, true).expect("an in-memory index answers");
                let mut want = vev_query::fulltext::scan_search(&view, *a, &q);
                let key = |h: &vev::FulltextHit| (h.e, h.tx);
                got.sort_by_key(key);
                want.sort_by_key(key);
                assert_eq!(
                    got.iter().map(key).collect::<Vec<_>>(),
                    want.iter().map(key).collect::<Vec<_>>(),
                    "{text:?}"
                );
                for (g, w) in got.iter().zip(&want) {
                    assert!((g.score - w.score).abs() <= 1e-9 * w.score.abs().max(1.0));
                }
            }
        }
        1 => stored(record.clone(), rest.to_vec()),
        _ => stored(rest.to_vec(), segment.clone()),
    }
});
