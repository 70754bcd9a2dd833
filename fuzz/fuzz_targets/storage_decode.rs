//! Fuzz the decoders of stored bytes: log records, root records and segments. The first byte
//! picks what the rest is: a log record (decoded, then replayed on a small database), a root
//! record whose every segment read returns the same bytes, or a real checkpoint with one
//! segment replaced by the input. Nothing may panic: bad bytes are errors (and a database
//! that met an undecodable segment reports it as an error).
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vev_db::persist::{self, SegmentCache, SegmentStore};

const SCHEMA: &str = r#"[
 {:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

struct Fixed(Vec<u8>);

impl SegmentStore for Fixed {
    fn read_segment(&self, _id: u64) -> Result<Vec<u8>, vev::StorageError> {
        Ok(self.0.clone())
    }
}

/// Segments of a real checkpoint, with one of them replaced.
struct Patched {
    segments: Vec<(u64, Vec<u8>)>,
    patch: Vec<u8>,
}

impl SegmentStore for Patched {
    fn read_segment(&self, id: u64) -> Result<Vec<u8>, vev::StorageError> {
        if self.segments.first().map(|s| s.0) == Some(id) {
            return Ok(self.patch.clone());
        }
        match self.segments.iter().find(|s| s.0 == id) {
            Some(s) => Ok(s.1.clone()),
            None => Err(vev::StorageError::corruption(
                format!("segment {id}"),
                "missing",
            )),
        }
    }
}

fn base() -> &'static vev::Db {
    static DB: OnceLock<vev::Db> = OnceLock::new();
    DB.get_or_init(|| {
        let conn = vev::Connection::open_in_memory();
        conn.transact_edn(SCHEMA).expect("schema");
        let mut tx = String::from("[");
        for i in 0..400 {
            tx.push_str(&format!(
                "{{:db/id \"p{i}\" :p/name \"n{i}\" :p/age {} :p/friend \"p{}\"}}",
                i % 50,
                (i * 7) % 400
            ));
        }
        tx.push(']');
        conn.transact_edn(&tx).expect("data");
        conn.transact_edn("[[:db/retract [:p/name \"n3\"] :p/age 3]]")
            .expect("retract");
        conn.db()
    })
}

fn exercise(db: &vev::Db) {
    let _ = db.verify_segments();
    let _ = db.q(
        "[:find (count ?e) . :where [?e :p/name] [?e :p/age ?a] [(> ?a 10)]]",
        &[],
    );
    let _ = db.history().datoms(vev::IndexOrder::Aevt, &[]).count();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Ok(record) = persist::LogRecord::decode(rest) {
                let _ = persist::replay(base(), &record);
                let at_zero = persist::replay(&vev::Db::empty(), &record);
                if let Ok(db) = at_zero {
                    exercise(&db);
                }
            }
        }
        1 => {
            let cache = SegmentCache::new(Arc::new(Fixed(rest.to_vec())), 100_000);
            if let Ok(db) = persist::open_root(rest, &cache) {
                exercise(&db);
            }
        }
        _ => {
            let mut next = 1;
            let fresh = SegmentCache::new(Arc::new(Fixed(Vec::new())), 1_000_000);
            let cp = persist::checkpoint(base(), &fresh, &mut next);
            let segments = cp.segments.into_iter().map(|s| (s.id, s.payload)).collect();
            let store = Patched {
                segments,
                patch: rest.to_vec(),
            };
            let cache = SegmentCache::new(Arc::new(store), 1_000_000);
            let db = persist::open_root(&cp.root, &cache).expect("a real root decodes");
            exercise(&db);
        }
    }
});
