//! The `mbrainz` data set handed to the peers: Vev's datoms, schemas in each peer's terms, the
//! rule set in each peer's form, and the queries, in two files.
//!
//! The datoms file has one JSON array `[e, "ns/attr", v]` per line (10M datoms do not fit one
//! JSON string in node), in EAVT order, which Datalevin's bulk path expects. It holds the
//! current datoms of every user entity that is not an attribute: the data and the enum
//! entities' `:db/ident`s, nothing of the schema or of transactions. An entity id is Vev's
//! with the user-partition bits cleared (`e & (2^42 - 1)`), the same in both peers, so a small
//! number in DataScript's and Datalevin's id ranges; refs are mapped the same way.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{json, Value as Json};
use vev::{ids, Attribute, Cardinality, Db, IndexOrder, Unique, Value, ValueType};

use crate::error::BenchError;
use crate::query_fixture::RunnerConfig;

/// What the export wrote.
pub struct Export {
    pub datoms: usize,
    /// Attribute ident (no colon) to how the runners decode its JSON values.
    pub attributes: BTreeMap<String, &'static str>,
    pub datascript_schema: String,
    pub datalevin_schema: String,
    /// `:track/name` datoms: the `:top` of Datalevin's full-text search, so it returns all.
    pub track_names: usize,
}

/// The peers' id of a Vev entity id, which must be in the user partition.
pub fn peer_id(e: u64) -> Result<u64, BenchError> {
    if ids::partition(e) != ids::PART_USER {
        return Err(BenchError::ExportEntity { e });
    }
    Ok(e & ((1 << ids::PARTITION_SHIFT) - 1))
}

fn json_type(t: ValueType) -> Option<&'static str> {
    match t {
        ValueType::String => Some("string"),
        ValueType::Long => Some("long"),
        ValueType::Ref => Some("ref"),
        ValueType::Keyword => Some("keyword"),
        ValueType::Uuid => Some("uuid"),
        _ => None,
    }
}

fn value_json(v: &Value, ident: &str) -> Result<Json, BenchError> {
    Ok(match v {
        Value::String(s) => json!(s.as_str()),
        Value::Long(n) => json!(n),
        Value::Ref(e) => json!(peer_id(*e)?),
        Value::Keyword(k) => json!(k.as_str()),
        Value::Uuid(b) => {
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            json!(format!(
                "{}-{}-{}-{}-{}",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            ))
        }
        _ => {
            return Err(BenchError::ExportValue {
                attr: ident.to_string(),
            })
        }
    })
}

/// Write the datoms file at `path`; the schemas of the attributes it holds.
pub fn write_datoms(db: &Db, path: &Path) -> Result<Export, BenchError> {
    let file = std::fs::File::create(path).map_err(BenchError::io("create", path))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let schema = db.schema();
    let mut used: BTreeMap<u64, (String, Option<&Attribute>)> = BTreeMap::new();
    let (mut datoms, mut track_names) = (0, 0);
    for d in db.datoms(IndexOrder::Eavt, &[]) {
        let d = d?;
        if ids::partition(d.e) != ids::PART_USER || schema.attribute(d.e).is_some() {
            continue;
        }
        let entry = used.entry(d.a).or_insert_with(|| {
            let attr = schema.attribute(d.a).map(|a| &**a);
            let ident = schema
                .ident(d.a)
                .map_or_else(String::new, |k| k.as_str().to_string());
            (ident, attr)
        });
        let ident = entry.0.as_str();
        if ident.starts_with("db/") && ident != "db/ident" {
            continue;
        }
        if ident == "track/name" {
            track_names += 1;
        }
        let line = json!([peer_id(d.e)?, ident, value_json(&d.v, ident)?]);
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")
            .map_err(BenchError::io("write", path))?;
        datoms += 1;
    }
    out.flush().map_err(BenchError::io("write", path))?;
    let mut attributes = BTreeMap::new();
    let mut attrs: Vec<&Attribute> = Vec::new();
    for (ident, attr) in used.values() {
        if ident.starts_with("db/") && ident != "db/ident" {
            continue;
        }
        let t = attr.map_or(ValueType::Keyword, |a| a.value_type);
        let json = json_type(t).ok_or_else(|| BenchError::ExportValue {
            attr: ident.clone(),
        })?;
        attributes.insert(ident.clone(), json);
        if let Some(a) = attr.filter(|_| ident != "db/ident") {
            attrs.push(a);
        }
    }
    Ok(Export {
        datoms,
        attributes,
        datascript_schema: datascript_schema(&attrs),
        datalevin_schema: datalevin_schema(&attrs),
        track_names,
    })
}

/// The properties both peers share: cardinality many, uniqueness, components, `:db/index`.
fn common_props(a: &Attribute) -> String {
    let mut p = String::new();
    if a.cardinality == Cardinality::Many {
        p.push_str(" :db/cardinality :db.cardinality/many");
    }
    match a.unique {
        Some(Unique::Identity) => p.push_str(" :db/unique :db.unique/identity"),
        Some(Unique::Value) => p.push_str(" :db/unique :db.unique/value"),
        None => {}
    }
    if a.is_component {
        p.push_str(" :db/isComponent true");
    }
    if a.index {
        p.push_str(" :db/index true");
    }
    p
}

/// DataScript needs refs, cardinality, uniqueness and components; `:db/index` puts an
/// attribute into its AVET index (the sample indexes the names the queries look up).
pub fn datascript_schema(attrs: &[&Attribute]) -> String {
    let mut s = String::from("{");
    for a in attrs {
        let mut p = common_props(a);
        if a.is_ref() {
            p.insert_str(0, " :db/valueType :db.type/ref");
        }
        if !p.is_empty() {
            s.push_str(&format!("\n {} {{{}}}", a.ident, p.trim_start()));
        }
    }
    s.push('}');
    s
}

/// Datalevin stores typed values: every attribute with its type; full-text attributes with
/// `:db/fulltext true`, and `:track/name` also in a domain of its own
/// (`:db.fulltext/autoDomain`), which the attribute form of its `fulltext` function needs.
pub fn datalevin_schema(attrs: &[&Attribute]) -> String {
    let mut s = String::from("{");
    for a in attrs {
        let mut p = format!(":db/valueType {}{}", a.value_type.ident(), common_props(a));
        if a.fulltext {
            p.push_str(" :db/fulltext true");
        }
        if a.ident.as_str() == "track/name" {
            p.push_str(" :db.fulltext/autoDomain true :db.fulltext/domains [\"track/name\"]");
        }
        s.push_str(&format!("\n {} {{{p}}}", a.ident));
    }
    s.push('}');
    s
}

/// The sample's `track-search` rule as Vev (and the reference) writes it.
pub const TRACK_SEARCH_VEV: &str = "[(fulltext $ :track/name ?q) [[?track ?tname]]]";

/// Datalevin's form of the `track-search` rule's clause: its `fulltext` binds `[e a v]` and
/// returns its 10 best hits unless given a `:top`.
pub fn track_search_datalevin(track_names: usize) -> String {
    format!(
        "[(fulltext $ :track/name ?q {{:top {}}}) [[?track _ ?tname]]]",
        track_names.max(1)
    )
}

/// The rule set with `track-search` in Datalevin's form.
pub fn datalevin_rules(track_names: usize) -> Result<String, BenchError> {
    let rules = vev_mbrainz::RULES;
    if !rules.contains(TRACK_SEARCH_VEV) {
        return Err(BenchError::RulesShape);
    }
    Ok(rules.replace(TRACK_SEARCH_VEV, &track_search_datalevin(track_names)))
}

/// Write the runners' fixture: timing, schemas, rules, the datoms file's path, the queries.
pub fn write_fixture(
    path: &Path,
    export: &Export,
    datoms_path: &Path,
    runner: &RunnerConfig,
    queries: &[&vev_mbrainz::NamedQuery],
) -> Result<(), BenchError> {
    let specs: Vec<Json> = queries
        .iter()
        .map(|q| {
            let mut spec = json!({
                "name": q.name,
                "query": q.text,
                "rules": q.rules,
                "input": q.input,
                "feeds_itself": q.feeds_itself,
            });
            if q.text.contains("track-search") {
                spec["cannot_run"] = json!({"datascript": "DataScript has no full-text search"});
            }
            spec
        })
        .collect();
    let doc = json!({
        "warmup": runner.warmup,
        "warmup_ms": runner.warmup_ms,
        "reps": runner.reps,
        "budget_ms": runner.budget_ms,
        "datoms_path": datoms_path,
        "datoms": export.datoms,
        "attributes": export.attributes,
        "schemas": {"datascript": export.datascript_schema, "datalevin": export.datalevin_schema},
        "rules": {"datascript": vev_mbrainz::RULES, "datalevin": datalevin_rules(export.track_names)?},
        "queries": specs,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&doc)?).map_err(BenchError::io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_ids_clear_the_user_partition() {
        assert_eq!(peer_id(ids::user_id(17)).unwrap(), 17);
        assert!(peer_id(ids::tx_id(3)).is_err());
    }

    #[test]
    fn datalevin_rules_swap_only_track_search() {
        let rules = datalevin_rules(42).unwrap();
        assert!(rules.contains("[(fulltext $ :track/name ?q {:top 42}) [[?track _ ?tname]]]"));
        assert!(!rules.contains(TRACK_SEARCH_VEV));
        assert_eq!(
            rules.len(),
            vev_mbrainz::RULES.len() + track_search_datalevin(42).len() - TRACK_SEARCH_VEV.len()
        );
    }

    #[test]
    fn export_holds_data_and_enums_but_no_schema() {
        let conn = vev::Connection::open_in_memory();
        vev_mbrainz::load(&conn, vev_mbrainz::Scale::Tiny, &mut |_| {}).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("datoms.jsonl");
        let export = write_datoms(&conn.db(), &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), export.datoms);
        assert!(text.contains(r#""db/ident","artist.type/person"]"#));
        assert!(!text.contains("db/valueType") && !text.contains("db/txInstant"));
        assert_eq!(export.attributes["artist/gid"], "uuid");
        assert_eq!(export.attributes["db/ident"], "keyword");
        assert!(export
            .datascript_schema
            .contains(":medium/tracks {:db/valueType :db.type/ref :db/cardinality :db.cardinality/many :db/isComponent true}"));
        assert!(export
            .datalevin_schema
            .contains(":db.fulltext/autoDomain true"));
        assert!(export.track_names > 0);
    }
}
