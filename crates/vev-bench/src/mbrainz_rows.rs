//! The answer check of the `mbrainz` benchmark: Vev's rows and a peer's rows in one text form.
//!
//! Each row becomes one line of canonical cell texts, and the lines of a result are sorted,
//! so two answers are equal when their sorted lines are. A cell's text: a string quoted as
//! JSON, an integer in digits, a float in digits when it is a whole number (an average may be
//! `12` in one engine and `12.0` in another) or else to ten significant digits (engines sum in
//! different orders), a keyword as `:ns/name`, a UUID as `#uuid "…"`. DataScript's JS API hands
//! a keyword back as its name alone (`clj->js`), a string: against it, Vev's keywords are
//! written the same way ([`KeywordForm::Name`]).

use serde_json::Value as Json;
use vev::{Edn, QueryResult};

use crate::error::BenchError;

/// How Vev's keyword cells are written for the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeywordForm {
    /// `:artist.type/person` (Datalevin's runner writes keywords as `{"kw": …}`).
    Full,
    /// `"person"`, as DataScript's JS API returns it.
    Name,
}

fn number(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.9e}")
    }
}

fn uuid_text(u: u128) -> String {
    let h = format!("{u:032x}");
    format!(
        "#uuid \"{}-{}-{}-{}-{}\"",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn quoted(s: &str) -> String {
    Json::String(s.to_string()).to_string()
}

fn edn_cell(e: &Edn, kw: KeywordForm) -> String {
    match e {
        Edn::String(s) => quoted(s),
        Edn::Integer(n) => n.to_string(),
        Edn::Float(x) => number(*x),
        Edn::Keyword(k) => match kw {
            KeywordForm::Full => k.to_string(),
            KeywordForm::Name => quoted(k.name()),
        },
        Edn::Uuid(u) => uuid_text(*u),
        Edn::Nil => "nil".to_string(),
        other => other.to_string(),
    }
}

fn json_cell(j: &Json) -> String {
    match j {
        Json::String(s) => quoted(s),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::Null => "nil".to_string(),
        Json::Object(m) => match (m.get("kw"), m.get("uuid")) {
            (Some(Json::String(k)), _) => format!(":{k}"),
            (_, Some(Json::String(u))) => format!("#uuid \"{}\"", u.to_lowercase()),
            _ => j.to_string(),
        },
        other => other.to_string(),
    }
}

fn line(cells: impl Iterator<Item = String>) -> String {
    cells.collect::<Vec<_>>().join(" ")
}

/// Vev's result as sorted canonical lines: a relation's rows, a collection's or a scalar's
/// values as one-cell rows (`nil`: none).
pub fn vev_lines(result: &QueryResult, kw: KeywordForm) -> Vec<String> {
    let row = |r: &Edn| match r {
        Edn::Vector(cells) | Edn::List(cells) => line(cells.iter().map(|c| edn_cell(c, kw))),
        scalar => edn_cell(scalar, kw),
    };
    let mut lines: Vec<String> = match result.to_edn() {
        Edn::Set(rows) => rows.iter().map(row).collect(),
        Edn::Vector(rows) | Edn::List(rows) => rows.iter().map(row).collect(),
        Edn::Nil => Vec::new(),
        scalar => vec![edn_cell(&scalar, kw)],
    };
    lines.sort_unstable();
    lines
}

/// A peer's `result` field (an array of rows, each an array of cells) as sorted lines.
pub fn peer_lines(result: &Json) -> Result<Vec<String>, BenchError> {
    let rows = result
        .as_array()
        .ok_or(BenchError::MissingField { field: "result" })?;
    let mut lines = rows
        .iter()
        .map(|r| {
            let cells = r
                .as_array()
                .ok_or(BenchError::MissingField { field: "result" })?;
            Ok(line(cells.iter().map(json_cell)))
        })
        .collect::<Result<Vec<String>, BenchError>>()?;
    lines.sort_unstable();
    Ok(lines)
}

/// How a peer's answer compares with Vev's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    Same,
    Differ {
        /// Lines only Vev has, and only the peer has (as multisets).
        only_vev: usize,
        only_peer: usize,
        /// The first line either side lacks, for the report.
        example: String,
    },
}

/// Compare two sorted line lists as multisets.
pub fn compare(vev: &[String], peer: &[String]) -> Check {
    let (mut i, mut j) = (0, 0);
    let (mut only_vev, mut only_peer) = (0, 0);
    let mut example = None;
    while i < vev.len() || j < peer.len() {
        let ord = match (vev.get(i), peer.get(j)) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => {
                example.get_or_insert_with(|| format!("only Vev: {}", vev[i]));
                only_vev += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                example.get_or_insert_with(|| format!("only the peer: {}", peer[j]));
                only_peer += 1;
                j += 1;
            }
        }
    }
    match example {
        None => Check::Same,
        Some(example) => Check::Differ {
            only_vev,
            only_peer,
            example,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(text: &str) -> QueryResult {
        let conn = vev::Connection::open_in_memory();
        conn.transact_edn(
            r#"[{:db/ident :t/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
                {:db/ident :t/len :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
                {:db/ident :t/gid :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one}
                {:db/ident :t/kind :db/valueType :db.type/keyword :db/cardinality :db.cardinality/one}]"#,
        )
        .unwrap();
        conn.transact_edn(
            r#"[{:t/name "Intro" :t/len 3 :t/kind :kind/a :t/gid #uuid "6c2a5b8e-3f70-4b1a-9d0e-2f4c1a2b3c4d"}
                {:t/name "Outro \"x\"" :t/len 4 :t/kind :kind/b}]"#,
        )
        .unwrap();
        conn.db().q(text, &[]).unwrap()
    }

    #[test]
    fn vev_and_peer_rows_meet_in_one_form() {
        let r = result("[:find ?n ?l ?k :where [?e :t/name ?n] [?e :t/len ?l] [?e :t/kind ?k]]");
        let full = vev_lines(&r, KeywordForm::Full);
        assert_eq!(full, [r#""Intro" 3 :kind/a"#, r#""Outro \"x\"" 4 :kind/b"#]);
        let datalevin =
            json!([["Outro \"x\"", 4, {"kw": "kind/b"}], ["Intro", 3, {"kw": "kind/a"}]]);
        assert_eq!(
            compare(&full, &peer_lines(&datalevin).unwrap()),
            Check::Same
        );
        let datascript = json!([["Intro", 3, "a"], ["Outro \"x\"", 4, "b"]]);
        let names = vev_lines(&r, KeywordForm::Name);
        assert_eq!(
            compare(&names, &peer_lines(&datascript).unwrap()),
            Check::Same
        );
    }

    #[test]
    fn uuids_scalars_and_floats_compare_by_value() {
        let r = result("[:find ?g :where [_ :t/gid ?g]]");
        let peer = json!([[{"uuid": "6C2A5B8E-3F70-4B1A-9D0E-2F4C1A2B3C4D"}]]);
        assert_eq!(
            compare(
                &vev_lines(&r, KeywordForm::Full),
                &peer_lines(&peer).unwrap()
            ),
            Check::Same
        );
        let sum = result("[:find (sum ?l) . :where [_ :t/len ?l]]");
        assert_eq!(vev_lines(&sum, KeywordForm::Full), ["7"]);
        assert_eq!(peer_lines(&json!([[7.0]])).unwrap(), ["7"]);
        let avg = result("[:find (avg ?l) . :where [_ :t/len ?l]]");
        let third = json!([[3.5000000000001]]);
        assert_eq!(
            compare(
                &vev_lines(&avg, KeywordForm::Full),
                &peer_lines(&third).unwrap()
            ),
            Check::Same
        );
    }

    #[test]
    fn differences_count_each_side() {
        let vev = ["a".to_string(), "b".to_string(), "b".to_string()];
        let peer = ["b".to_string(), "c".to_string()];
        assert_eq!(
            compare(&vev, &peer),
            Check::Differ {
                only_vev: 2,
                only_peer: 1,
                example: "only Vev: a".to_string()
            }
        );
        assert!(peer_lines(&json!({"not": "rows"})).is_err());
    }
}
