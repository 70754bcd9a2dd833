//! Storage failures through the read APIs, on a database whose segments come from a store
//! that fails on purpose: a read error (`storage/io`) is reported by the reads it met and the
//! next read loads the segment again; a corrupt segment (`storage/corruption`) fails every
//! later read. No read returns fewer datoms than the database holds without an error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use vev_core::{parse_tx, Component, Datom, IndexOrder, Keyword, StorageError, Value};
use vev_db::persist::{self, LogRecord, SegmentCache, SegmentStore};
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
    log: Mutex<Vec<LogRecord>>,
    fault: Mutex<Fault>,
    reads: AtomicU64,
}

impl FlakyStore {
    fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }
}

impl FlakyStore {
    /// The fault this read meets: an injected read error, whether to give corrupt bytes.
    fn fault(&self, what: &str) -> Result<bool, StorageError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let mut fault = self.fault.lock().unwrap();
        match *fault {
            Fault::Io(n) => {
                *fault = if n > 1 { Fault::Io(n - 1) } else { Fault::None };
                Err(StorageError::io_kind(
                    what,
                    std::io::ErrorKind::Other,
                    "injected read error",
                ))
            }
            Fault::Corrupt => Ok(true),
            Fault::None => Ok(false),
        }
    }
}

impl SegmentStore for FlakyStore {
    fn read_segment(&self, id: u64) -> Result<Vec<u8>, StorageError> {
        if self.fault(&format!("read segment {id}"))? {
            return Ok(vec![0xff; 8]);
        }
        Ok(self.segments.lock().unwrap()[&id].clone())
    }

    fn read_log(&self, first: u64, last: u64) -> Result<Vec<LogRecord>, StorageError> {
        let what = format!("read log {first} to {last}");
        if self.fault(&what)? {
            // As a backend reports a log record that does not decode.
            return Err(StorageError::corruption(what, "injected corrupt record"));
        }
        let log = self.log.lock().unwrap();
        Ok(log
            .iter()
            .filter(|r| (first..=last).contains(&r.t))
            .cloned()
            .collect())
    }
}

fn ctx() -> TxContext<'static> {
    TxContext {
        functions: &NoFunctions,
        now_ms: 1_700_000_000_000,
        speculative: false,
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

/// `db` (a database in memory, whose log is all in memory) checkpointed into a fresh flaky
/// store with its log records, and opened from it (nothing loaded yet).
fn stored(db: &Db) -> (Db, Arc<FlakyStore>) {
    let log = db
        .tx_range(Some(1), None)
        .unwrap()
        .into_iter()
        .map(|e| LogRecord {
            t: e.t,
            next_user: 0,
            datoms: e.datoms,
        })
        .collect();
    let store = Arc::new(FlakyStore {
        segments: Mutex::new(HashMap::new()),
        log: Mutex::new(log),
        fault: Mutex::new(Fault::None),
        reads: AtomicU64::new(0),
    });
    let cache = SegmentCache::new(store.clone(), 1_000_000);
    let cp = persist::checkpoint(db, &cache, &mut 1);
    assert!(cp.segments.len() > 8, "every tree has segments");
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
    // The log's records are read from the store too, and the corruption found stays.
    assert_eq!(
        db.tx_range(None, None).unwrap_err().code(),
        "storage/corruption"
    );
    assert!(store.reads.load(Ordering::SeqCst) >= reads);
}

#[test]
fn a_corrupt_log_record_fails_tx_range_and_every_later_read() {
    let memory = memory_db();
    let (db, store) = stored(&memory);
    store.set(Fault::Corrupt);
    let e = db.tx_range(Some(2), Some(3)).unwrap_err();
    assert_eq!(e.code(), "storage/corruption", "{e}");
    store.set(Fault::None);
    assert_eq!(
        all(&db, IndexOrder::Eavt).unwrap_err().code(),
        "storage/corruption"
    );
}

#[test]
fn a_store_that_gives_too_few_log_records_is_corrupt_not_a_short_log() {
    let memory = memory_db();
    let (db, store) = stored(&memory);
    store.log.lock().unwrap().retain(|r| r.t != 2);
    let e = db.tx_range(None, None).unwrap_err();
    assert_eq!(e.code(), "storage/corruption", "{e}");
}

#[test]
fn the_log_of_a_stored_database_is_the_bootstrap_the_store_records_and_the_tail() {
    let memory = memory_db();
    let (db, _store) = stored(&memory);
    let ops: Vec<_> = parse_tx(r#"[{:p/key "late" :p/n 1}]"#)
        .unwrap()
        .into_iter()
        .map(|s| s.op)
        .collect();
    let later = transact(&db, &ops, &ctx()).unwrap().db_after;
    let later_memory = transact(&memory, &ops, &ctx()).unwrap().db_after;
    assert_eq!(
        later.tx_range(None, None),
        later_memory.tx_range(None, None)
    );
    for (start, end) in [
        (0, 1),
        (0, 2),
        (1, 3),
        (2, 5),
        (3, 4),
        (4, 5),
        (5, 9),
        (3, 3),
    ] {
        assert_eq!(
            later.tx_range(Some(start), Some(end)),
            later_memory.tx_range(Some(start), Some(end)),
            "{start}..{end}"
        );
    }
}
