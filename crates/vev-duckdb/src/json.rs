//! EDN as JSON, for pulled entities and collections (`ColType::Json`).
//!
//! Map keys that are keywords lose their colon (`:person/name` → `"person/name"`, as
//! DataScript's JavaScript API writes them), so DuckDB's JSON paths reach them as
//! `'$."person/name"'`. Keyword *values* keep it (`":color/red"`), so they stay apart from
//! strings. Integers and decimals are JSON numbers (bigints and bigdecs with every digit),
//! NaN and infinities `null`, instants RFC 3339 text, UUIDs their text, sets and lists arrays,
//! other keys and tagged values their EDN text.

use std::fmt::Write;

use vev::Edn;

/// `v` as JSON text.
pub fn to_json(v: &Edn) -> String {
    let mut out = String::new();
    write_json(&mut out, v);
    out
}

fn write_json(out: &mut String, v: &Edn) {
    match v {
        Edn::Nil => out.push_str("null"),
        Edn::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Edn::Integer(n) => {
            let _ = write!(out, "{n}");
        }
        Edn::Float(x) if x.is_finite() => {
            let _ = write!(out, "{x:?}");
        }
        Edn::Float(_) => out.push_str("null"),
        Edn::BigInt(n) => {
            let _ = write!(out, "{n}");
        }
        Edn::BigDec(d) => {
            let _ = write!(out, "{d}");
        }
        Edn::String(s) => string(out, s),
        Edn::Char(c) => string(out, c.encode_utf8(&mut [0; 4])),
        Edn::Keyword(k) => string(out, &k.to_string()),
        Edn::Symbol(s) => string(out, s.as_str()),
        Edn::Inst(ms) => string(out, &vev::edn::format_inst(*ms)),
        Edn::Uuid(u) => string(out, &vev::edn::format_uuid(*u)),
        Edn::Tagged(..) => string(out, &v.to_string()),
        Edn::Vector(items) | Edn::List(items) => array(out, items.iter()),
        Edn::Set(items) => array(out, items.iter()),
        Edn::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match k {
                    Edn::Keyword(k) => string(out, k.as_str()),
                    Edn::String(s) => string(out, s),
                    other => string(out, &other.to_string()),
                }
                out.push(':');
                write_json(out, v);
            }
            out.push('}');
        }
    }
}

fn array<'a>(out: &mut String, items: impl Iterator<Item = &'a Edn>) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json(out, item);
    }
    out.push(']');
}

fn string(out: &mut String, s: &str) {
    // serde_json escapes exactly as JSON requires; a string always serializes.
    out.push_str(&serde_json::Value::from(s).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pulled_entity_as_json() {
        let v = vev::edn::parse(
            r#"{:db/id 7 :person/name "Ann \"A\"" :person/tags #{:a :b} :person/born #inst "2020-01-02T00:00:00.000Z" :x ##NaN :d 1.50M}"#,
        )
        .unwrap();
        let json = to_json(&v);
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["db/id"], 7);
        assert_eq!(back["person/name"], "Ann \"A\"");
        assert_eq!(back["person/tags"], serde_json::json!([":a", ":b"]));
        assert_eq!(back["person/born"], "2020-01-02T00:00:00.000Z");
        assert!(back["x"].is_null());
        assert!(json.contains("\"d\":1.50"), "{json}");
    }
}
