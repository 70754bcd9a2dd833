//! Storage failures through the read APIs, on a database whose segments come from a store
//! that fails on purpose: a read error (`storage/io`) is reported by the reads it met and the
//! next read loads the segment again; a corrupt segment (`storage/corruption`) fails every
//! later read. No read returns fewer datoms than the database holds without an error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use vev_core::{parse_tx, Component, Datom, IndexOrder, Keyword, StorageError, Value};
use vev_db::persist::{self, SegmentCache, SegmentStore};
use vev_db::{transact, Db, NoFunctions, TxContext};

/// What the store does with the reads it is asked for.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// The next `n` reads fail with `storage/io`.
    Io(u64),
    /// Every read returns bytes that do not decode.
    Corrupt,
}

struct FlakyStore {
    segments: Mutex<HashMap<u64, Vec<u8>>>,
    fault: Mutex<Fault>,
    reads: AtomicU64,
}

impl FlakyStore {
    fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }
}

impl SegmentStore for FlakyStore {
    fn read_segment(&self, id: u64) -> Result<Vec<u8>, StorageError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let mut fault = self.fault.lock().unwrap();
        match *fault {
            Fault::Io(n) => {
                *fault = if n > 1 { Fault::Io(n - 1) } else { Fault::None };
                return Err(StorageError::io_kind(
                    format!("read segment {id}"),
                    std::io::ErrorKind::Other,
                    "injected read error",
                ));
            }
            Fault::Corrupt => return Ok(vec![0xff; 8]),
            Fault::None => {}
        }
        Ok(self.segments.lock().unwrap()[&id].clone())
    }
}

fn ctx() -> TxContext<'static> {
    TxContext {
        functions: &NoFunctions,
        now_ms: 1_700_000_000_000,
    }
}

/// A few hundred entities with a unique string, a long and refs, some of them retracted.
fn memory_db() -> Db {
    let mut db = Db::empty();
    let mut txs = vec![String::from(
        r#"[{:db/ident :p/key :db/valueType :db.type/string :db/cardinality :db.cardinality/one
             :db/unique :db.unique/identity}
            {:db/ident :p/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
            {:db/ident :p/ref :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#,
    )];
    let people: Vec<String> = (0..400)
        .map(|i| {
            format!(
                r#"{{:db/id "e{i}" :p/key "k{i}" :p/n {i} :p/ref "e{}"}}"#,
                i / 2
            )
        })
        .collect();
    txs.push(format!("[{}]", people.join(" ")));
    txs.push(
        (0..400)
            .step_by(7)
            .map(|i| format!(r#"[:db/retract [:p/key "k{i}"] :p/n {i}]"#))
            .collect(),
    );
    txs.last_mut().unwrap().insert(0, '[');
    txs.last_mut().unwrap().push(']');
    for text in txs {
        let ops: Vec<_> = parse_tx(&text).unwrap().into_iter().map(|s| s.op).collect();
        db = transact(&db, &ops, &ctx()).unwrap().db_after;
    }
    db
}

/// `db` checkpointed into a fresh flaky store and opened from it (nothing loaded yet).
fn stored(db: &Db) -> (Db, Arc<FlakyStore>) {
    let store = Arc::new(FlakyStore {
        segments: Mutex::new(HashMap::new()),
        fault: Mutex::new(Fault::None),
        reads: AtomicU64::new(0),
    });
    let cache = SegmentCache::new(store.clone(), 1_000_000);
    let cp = persist::checkpoint(db, &cache, &mut 1);
    assert!(cp.segments.len() > 9, "every tree has segments");
    for s in cp.segments {
        store.segments.lock().unwrap().insert(s.id, s.payload);
    }
    let fresh = SegmentCache::new(store.clone(), 1_000_000);
    (persist::open_root(&cp.root, &fresh).unwrap(), store)
}

fn all(db: &Db, order: IndexOrder) -> Result<Vec<Datom>, StorageError> {
    db.datoms(order, &[]).collect()
}

#[test]
fn a_read_error_is_reported_and_the_next_read_loads_the_segment_again() {
    let memory = memory_db();
    let (db, store) = stored(&memory);
    store.set(Fault::Io(1));
    let e = all(&db, IndexOrder::Eavt).unwrap_err();
    assert_eq!(e.code(), "storage/io", "{e}");
    // Not kept: the same value reads everything now, and so does every other read API.
    assert_eq!(
        all(&db, IndexOrder::Eavt).unwrap(),
        all(&memory, IndexOrder::Eavt).unwrap()
    );
    let q = "[:find (count ?e) . :where [?e :p/n ?n]]";
    store.set(Fault::Io(1));
    let e = db.q(q, &[]).unwrap_err();
    assert_eq!(e.code(), "storage/io", "{e}");
    assert_eq!(db.q(q, &[]).unwrap(), memory.q(q, &[]).unwrap());
    let k = db.entid(&Keyword::new("p/key")).unwrap();
    store.set(Fault::Io(1));
    let e = db.entity_with_value(k, &Value::string("k399")).unwrap_err();
    assert_eq!(e.code(), "storage/io", "{e}");
    let e399 = db.entity_with_value(k, &Value::string("k399")).unwrap();
    assert_eq!(
        e399,
        memory.entity_with_value(k, &Value::string("k399")).unwrap()
    );
    assert!(e399.is_some());
    store.set(Fault::Io(1));
    assert_eq!(db.tx_range(None, None).unwrap_err().code(), "storage/io");
    assert_eq!(db.tx_range(None, None), memory.tx_range(None, None));
}

#[test]
fn a_read_error_fails_a_scan_in_the_middle_with_an_error_item_not_a_short_answer() {
    let memory = memory_db();
    let (db, store) = stored(&memory);
    let want = all(&memory, IndexOrder::Avet).unwrap();
    // Start the scan, then let the next segment it needs fail.
    let mut scan = db.datoms(IndexOrder::Avet, &[]);
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first, want[0]);
    store.set(Fault::Io(u64::MAX));
    let rest: Vec<Result<Datom, StorageError>> = scan.collect();
    let (last, ok) = rest.split_last().expect("an error item");
    assert_eq!(last.as_ref().unwrap_err().code(), "storage/io");
    assert!(ok.iter().all(Result::is_ok));
    assert!(ok.len() + 1 < want.len(), "the scan stopped at the failure");
    store.set(Fault::None);
    assert_eq!(all(&db, IndexOrder::Avet).unwrap(), want);
}

#[test]
fn a_corrupt_segment_fails_every_later_read() {
    let memory = memory_db();
    let (db, store) = stored(&memory);
    store.set(Fault::Corrupt);
    let e = all(&db, IndexOrder::Aevt).unwrap_err();
    assert_eq!(e.code(), "storage/corruption", "{e}");
    store.set(Fault::None);
    let reads = store.reads.load(Ordering::SeqCst);
    for order in IndexOrder::ALL {
        let e = all(&db, order).unwrap_err();
        assert_eq!(e.code(), "storage/corruption", "{order:?}: {e}");
    }
    assert_eq!(
        db.count(IndexOrder::Eavt, &[Component::Entity(1)])
            .unwrap_err()
            .code(),
        "storage/corruption"
    );
    assert!(store.reads.load(Ordering::SeqCst) >= reads);
}
