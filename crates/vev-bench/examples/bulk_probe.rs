// Temporary probe (not committed): where bulk_load's time goes.
use std::time::Instant;
use vev::{Connection, TxMap, TxOp};

fn account(j: u64) -> TxOp {
    TxOp::Map(
        TxMap::new(None)
            .with("acct/id", j as i64)
            .with("acct/name", format!("name-{j}"))
            .with("acct/balance", (j * 7919 % 100_000) as i64)
            .with("acct/city", "Oslo")
            .with("acct/score", (j % 1000) as i64),
    )
}
const SCHEMA: &str = r#"[
 {:db/ident :acct/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :acct/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :acct/balance :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :acct/city :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :acct/score :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;

fn txs(n: u64, per: u64) -> impl Iterator<Item = Vec<TxOp>> {
    (1..=n)
        .step_by(per as usize)
        .map(move |s| (s..(s + per).min(n + 1)).map(account).collect())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let accounts: u64 = args[1].parse().unwrap();
    let per: u64 = args[2].parse().unwrap();
    let mode = &args[3];
    let conn = if mode.starts_with("mem") {
        Connection::open_in_memory()
    } else {
        let p = format!("/tmp/bulk-probe-{}.vev", std::process::id());
        Connection::open(&p).unwrap()
    };
    conn.transact_edn(&if mode == "mem-noid" {
        SCHEMA.replace(" :db/unique :db.unique/identity", "")
    } else {
        SCHEMA.to_string()
    })
    .unwrap();
    let t = Instant::now();
    let mut last = 0.0;
    let done = conn
        .bulk_load(txs(accounts, per), &mut |p| {
            let s = p.elapsed.as_secs_f64();
            if s - last > 2.0 {
                eprintln!("{} datoms {:.1}s", p.datoms, s);
                last = s;
            }
        })
        .unwrap();
    println!(
        "{mode} {accounts} accounts per-tx {per}: {:.2}s ({} datoms)",
        t.elapsed().as_secs_f64(),
        done.datoms
    );
    if let Some(p) = conn.path() {
        let p = p.to_owned();
        drop(conn);
        for s in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{s}", p.display()));
        }
    }
}
