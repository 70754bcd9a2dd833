//! Writes `tests/fixtures/format-vN.vev`, a small database in the current file format, which
//! `tests/format_fixture.rs` opens, queries and verifies: a later format change must read it
//! (migrate) or refuse it with `storage/format-version`. Run once per format version:
//!
//! ```text
//! cargo run -p vev --example format_fixture -- crates/vev/tests/fixtures/format-v6.vev
//! ```
//!
//! The transactions carry their own `:db/txInstant`, so the content is deterministic and the
//! test can compare the file with the same transactions run in memory. A checkpoint after
//! `CHECKPOINTED` transactions puts the indexes in segments; the rest stay in the log tail.

use std::path::Path;

use vev::{Connection, OpenOptions};

/// People in the bulk transaction (enough datoms for the indexes to reach their segments).
pub const PEOPLE: usize = 80;

/// How many of `transactions()` the checkpoint covers; the others are the log tail.
pub const CHECKPOINTED: usize = 3;

/// The fixture's transactions as EDN, in order (basis-t 1, 2, ...).
pub fn transactions() -> Vec<String> {
    let tx = |n: usize| {
        format!(r#"{{:db/id "datomic.tx" :db/txInstant #inst "2024-01-0{n}T12:00:00.000-00:00"}}"#)
    };
    let schema = r#"
      {:db/ident :person/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
       :db/unique :db.unique/identity}
      {:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
      {:db/ident :person/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
      {:db/ident :person/tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
      {:db/ident :person/score :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
      {:db/ident :person/active :db/valueType :db.type/boolean :db/cardinality :db.cardinality/one}
      {:db/ident :person/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}"#;
    let people: String = (0..PEOPLE)
        .map(|i| {
            format!(
                r#" {{:person/email "p{i}@example.com" :person/name "Person {i}" :person/age {}
                    :person/tag [:tag/t{} :tag/all] :person/score {}.5 :person/active {}}}"#,
                20 + i % 50,
                i % 4,
                i,
                i % 2 == 0
            )
        })
        .collect();
    let friends: String = (0..PEOPLE)
        .map(|i| {
            format!(
                r#" [:db/add [:person/email "p{i}@example.com"] :person/friend [:person/email "p{}@example.com"]]"#,
                (i + 1) % PEOPLE
            )
        })
        .collect();
    vec![
        format!("[{}{schema}]", tx(1)),
        format!("[{}{people}]", tx(2)),
        format!("[{}{friends}]", tx(3)),
        // The log tail: an update (a retraction and an assertion), a retracted value, a
        // retracted entity, a new entity that refers to an old one.
        format!(
            r#"[{} [:db/add [:person/email "p0@example.com"] :person/age 99]
                   [:db/retract [:person/email "p1@example.com"] :person/tag :tag/all]]"#,
            tx(4)
        ),
        format!(
            r#"[{} [:db/retractEntity [:person/email "p2@example.com"]]]"#,
            tx(5)
        ),
        format!(
            r#"[{} {{:person/email "zed@example.com" :person/name "Zed" :person/age 7
                    :person/friend [:person/email "p0@example.com"]}}]"#,
            tx(6)
        ),
    ]
}

/// The transactions of the version-4 fixture: those of version 3, then full text: the
/// alteration that makes `:person/name` full-text (indexing the names so far), a new name,
/// and a replaced one.
pub fn transactions_v4() -> Vec<String> {
    let tx = |n: usize| {
        format!(r#"{{:db/id "datomic.tx" :db/txInstant #inst "2024-01-0{n}T12:00:00.000-00:00"}}"#)
    };
    let mut all = transactions();
    all.push(format!(
        "[{} {{:db/id :person/name :db/fulltext true}}]",
        tx(7)
    ));
    all.push(format!(
        r#"[{} {{:person/email "yoko@example.com" :person/name "Yoko Ono"}}
               {{:person/email "p3@example.com" :person/name "Café Person"}}]"#,
        tx(8)
    ));
    all
}

/// Run `transactions()` on `conn`, checkpointing after the first `CHECKPOINTED`.
pub fn fill(conn: &Connection, checkpoint: bool) -> Result<(), Box<vev::Error>> {
    fill_with(conn, &transactions(), checkpoint)
}

/// Run `txs` on `conn`, checkpointing after the first `CHECKPOINTED`.
pub fn fill_with(
    conn: &Connection,
    txs: &[String],
    checkpoint: bool,
) -> Result<(), Box<vev::Error>> {
    for (n, text) in txs.iter().enumerate() {
        conn.transact_edn(text)?;
        if checkpoint && n + 1 == CHECKPOINTED {
            conn.checkpoint()?;
        }
    }
    Ok(())
}

/// Write the fixture of the current version (`transactions_v4`) at `path` (which must not
/// exist): one self-contained file, its SQLite
/// write-ahead log checkpointed into it, compacted.
pub fn write(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    if path.exists() {
        return Err(format!("{} exists; remove it first", path.display()).into());
    }
    let opts = OpenOptions {
        checkpoint_on_close: false,
        checkpoint_datoms: usize::MAX,
        ..OpenOptions::default()
    };
    let conn = Connection::open_with(path, &opts)?;
    fill_with(&conn, &transactions_v4(), true)?;
    drop(conn);
    let sqlite = rusqlite::Connection::open(path)?;
    sqlite.execute_batch(
        "PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);",
    )?;
    Ok(())
}

#[allow(dead_code)] // the test includes this file for `transactions` and `fill`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: format_fixture PATH")?;
    write(Path::new(&path))?;
    println!("wrote {path}");
    Ok(())
}
