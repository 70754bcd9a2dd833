//! Test hooks (the `testing` feature): fault injection, damage to a file on purpose, and the
//! database the corruption tests damage. Not for applications.

use std::path::Path;

use crate::{Connection, Error};

pub use vev_sqlite::{flip_log_byte, flip_segment_byte, FaultPlan};

const CORRUPTION_SCHEMA: &str = r#"[
 {:db/ident :p/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity}
 {:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :p/tag :db/valueType :db.type/string :db/cardinality :db.cardinality/many}
 {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

/// People in the corruption fixture (`write_corruption_fixture`): emails `p0@x` to `p899@x`.
pub const CORRUPTION_PEOPLE: usize = 900;

/// Write the corruption tests' database at `path`: a schema (`:p/email` unique, `:p/name`,
/// `:p/age`, `:p/tag` many, `:p/friend` refs), `CORRUPTION_PEOPLE` people, friendships,
/// then retractions and renames (so the retired datoms' four indexes hold something),
/// checkpointed and closed: every tree is in segments, the log tail is empty and the file
/// is complete on its own.
pub fn write_corruption_fixture(path: &Path) -> Result<(), Error> {
    let conn = Connection::open(path)?;
    conn.transact_edn(CORRUPTION_SCHEMA)?;
    let people: Vec<String> = (0..CORRUPTION_PEOPLE)
        .map(|i| {
            format!(
                r#"{{:p/email "p{i}@x" :p/name "name {i}" :p/age {} :p/tag ["t{}" "u{}"]}}"#,
                i % 90,
                i % 7,
                i % 3
            )
        })
        .collect();
    conn.transact_edn(&format!("[{}]", people.join(" ")))?;
    let friends: Vec<String> = (0..CORRUPTION_PEOPLE)
        .map(|i| {
            format!(
                r#"[:db/add [:p/email "p{i}@x"] :p/friend [:p/email "p{}@x"]]"#,
                (i * 7 + 1) % CORRUPTION_PEOPLE
            )
        })
        .collect();
    conn.transact_edn(&format!("[{}]", friends.join(" ")))?;
    let changes: Vec<String> = (0..CORRUPTION_PEOPLE)
        .step_by(3)
        .map(|i| {
            format!(
                r#"[:db/retract [:p/email "p{i}@x"] :p/friend [:p/email "p{}@x"]]
                   [:db/retract [:p/email "p{i}@x"] :p/tag "t{}"]
                   [:db/add [:p/email "p{i}@x"] :p/name "renamed {i}"]"#,
                (i * 7 + 1) % CORRUPTION_PEOPLE,
                i % 7
            )
        })
        .collect();
    conn.transact_edn(&format!("[{}]", changes.join(" ")))?;
    conn.checkpoint()?;
    Ok(())
}
