//! `Store` directly, on a throwaway PostgreSQL 15: the fence refuses every write after the
//! lease generation moved (as a takeover moves it), and nothing of a fenced write lands; a
//! reader's data version moves with the writer's commits.

use vev_core::TxOp;
use vev_db::Db;
use vev_postgres::testing::{self, TempServer};
use vev_postgres::{Store, StoreOptions};

fn commit(store: &Store, db: &Db, edn: &str) -> Result<Db, vev_core::StorageError> {
    let ops: Vec<TxOp> = vev_core::parse_tx(edn)
        .unwrap()
        .into_iter()
        .map(|s| s.op)
        .collect();
    let ctx = vev_db::TxContext {
        functions: &vev_db::NoFunctions,
        now_ms: 0,
        speculative: false,
    };
    let report = vev_db::transact(db, &ops, &ctx).unwrap();
    store.append(&[(&report.db_after, report.tx_data.as_slice())])?;
    Ok(report.db_after)
}

#[test]
fn fenced_writes_land_nowhere() {
    if !testing::available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "PostgreSQL 15 is not installed"
        );
        return;
    }
    let pg = TempServer::start().unwrap();
    let url = pg.create_db("store").unwrap();
    let opened = Store::open(&url, &StoreOptions::default()).unwrap();
    let writer = opened.store;
    let generation = writer.lease_generation().unwrap();
    let schema =
        r#"[{:db/ident :k/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;
    let db = commit(&writer, &opened.db, schema).unwrap();
    let reader = Store::open(
        &url,
        &StoreOptions {
            read_only: true,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let v1 = reader.store.data_version().unwrap();
    let db = commit(&writer, &db, "[{:k/n 1}]").unwrap();
    let v2 = reader.store.data_version().unwrap();
    assert_ne!(v1, v2);
    assert_eq!(
        reader.store.catch_up(&reader.db).unwrap().basis_t(),
        db.basis_t()
    );
    // A takeover moves the generation (here by hand, as `lease::acquire` does).
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.execute("UPDATE vev.lease SET generation = generation + 1", &[])
        .unwrap();
    let e = commit(&writer, &db, "[{:k/n 2}]").unwrap_err();
    assert_eq!(e.code(), "storage/fenced", "{e}");
    assert!(
        matches!(e, vev_core::StorageError::Fenced { held, current, .. }
            if held == generation && current == generation + 1),
        "{e:?}"
    );
    // For good: checkpoints and later commits too.
    assert_eq!(writer.checkpoint(&db).unwrap_err().code(), "storage/fenced");
    assert_eq!(
        commit(&writer, &db, "[{:k/n 3}]").unwrap_err().code(),
        "storage/fenced"
    );
    let max_t: i64 = c
        .query_one("SELECT max(t) FROM vev.log", &[])
        .unwrap()
        .get(0);
    assert_eq!(max_t as u64, db.basis_t(), "no fenced write landed");
    // The fenced writer's close leaves the new holder's lease alone.
    drop(writer);
    let g: i64 = c
        .query_one("SELECT generation FROM vev.lease", &[])
        .unwrap()
        .get(0);
    assert_eq!(g, generation + 1);
}
