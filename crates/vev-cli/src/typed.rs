//! Values of import records typed by the schema: the text of a CSV cell or a JSON value
//! becomes a value of the attribute's type, or `None` when it is not one.

use vev::{Attribute, Db, Edn, EntityRef, Keyword, TxValue, Value, ValueType};

/// A value from text: a CSV cell, or a JSON string.
pub fn from_text(db: &Db, attr: &Attribute, text: &str) -> Option<TxValue> {
    let value = match attr.value_type {
        ValueType::String => Value::String(text.into()),
        ValueType::Uri => Value::Uri(text.into()),
        ValueType::Keyword => {
            let name = text.trim().trim_start_matches(':');
            if name.is_empty() || name.contains(char::is_whitespace) {
                return None;
            }
            Value::Keyword(Keyword::new(name))
        }
        ValueType::Boolean => match text.trim() {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => return None,
        },
        ValueType::Long => Value::Long(text.trim().parse().ok()?),
        ValueType::Double => Value::Double(text.trim().parse().ok()?),
        ValueType::Float => Value::Float(text.trim().parse().ok()?),
        ValueType::Instant => match text.trim().parse::<i64>() {
            Ok(ms) => Value::Instant(ms),
            Err(_) => return edn_text(db, attr, &format!("#inst {:?}", text.trim())),
        },
        ValueType::Uuid => return edn_text(db, attr, &format!("#uuid {:?}", text.trim())),
        ValueType::BigDec => {
            let t = text.trim();
            let t = if t.ends_with('M') {
                t.to_string()
            } else {
                format!("{t}M")
            };
            return edn_text(db, attr, &t);
        }
        ValueType::Ref => return ref_from_text(text.trim()),
        // BigInt, Symbol, Bytes (#bytes "hex"), tuples ([1 "a"]): their EDN text.
        _ => return edn_text(db, attr, text.trim()),
    };
    Some(TxValue::Value(value))
}

/// A ref from text: an entity id, an ident (`:color/red`) or a lookup ref in EDN.
fn ref_from_text(text: &str) -> Option<TxValue> {
    if let Ok(id) = text.parse::<u64>() {
        return (id > 0).then_some(TxValue::Entity(EntityRef::Id(id)));
    }
    match vev::edn::parse(text).ok()? {
        form @ (Edn::Keyword(_) | Edn::Vector(_)) => {
            EntityRef::from_edn(&form).ok().map(TxValue::Entity)
        }
        _ => None,
    }
}

fn edn_text(db: &Db, attr: &Attribute, text: &str) -> Option<TxValue> {
    let form = vev::edn::parse(text).ok()?;
    vev::coerce_value(db, attr, &form).map(TxValue::Value)
}

/// A JSON value of one attribute (one element of a cardinality-many array).
pub fn from_json(db: &Db, attr: &Attribute, json: &serde_json::Value) -> Option<TxValue> {
    use serde_json::Value as J;
    if let J::String(s) = json {
        return from_text(db, attr, s);
    }
    if attr.is_ref() {
        return match json {
            J::Number(n) => n
                .as_u64()
                .filter(|id| *id > 0)
                .map(|id| TxValue::Entity(EntityRef::Id(id))),
            // A lookup ref: [":person/email", "ann@x"].
            J::Array(items) => match items.as_slice() {
                [J::String(a), v] => Some(TxValue::Entity(EntityRef::LookupRef(
                    Keyword::new(a.trim_start_matches(':')),
                    Box::new(TxValue::Edn(generic(v)?)),
                ))),
                _ => None,
            },
            _ => None,
        };
    }
    let form = match (attr.value_type, json) {
        (ValueType::Double | ValueType::Float, J::Number(n)) => Edn::Float(n.as_f64()?),
        (ValueType::BigDec, J::Number(n)) => vev::edn::parse(&format!("{n}M")).ok()?,
        (ValueType::Instant, J::Number(n)) => Edn::Inst(n.as_i64()?),
        _ => generic(json)?,
    };
    vev::coerce_value(db, attr, &form).map(TxValue::Value)
}

/// JSON as EDN without a type to go by (tuple elements, lookup ref values).
fn generic(json: &serde_json::Value) -> Option<Edn> {
    use serde_json::Value as J;
    Some(match json {
        J::Null => Edn::Nil,
        J::Bool(b) => Edn::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Edn::Integer(i),
            None => Edn::Float(n.as_f64()?),
        },
        J::String(s) => match s.strip_prefix(':') {
            Some(k) if !k.is_empty() => Edn::Keyword(Keyword::new(k)),
            _ => Edn::String(s.clone()),
        },
        J::Array(items) => Edn::Vector(items.iter().map(generic).collect::<Option<_>>()?),
        J::Object(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(db: &Db, ident: &str) -> std::sync::Arc<Attribute> {
        db.attribute(&Keyword::new(ident))
            .expect("system attribute")
            .clone()
    }

    #[test]
    fn text_is_typed_by_the_attribute() {
        let db = Db::empty();
        let instant = attr(&db, "db/txInstant");
        let ident = attr(&db, "db/ident");
        assert_eq!(
            from_text(&db, &instant, "1970-01-01T00:00:01Z"),
            Some(TxValue::Value(Value::Instant(1000)))
        );
        assert_eq!(
            from_text(&db, &instant, "5"),
            Some(TxValue::Value(Value::Instant(5)))
        );
        assert_eq!(from_text(&db, &instant, "yesterday"), None);
        assert_eq!(
            from_text(&db, &ident, ":a/b"),
            Some(TxValue::Value(Value::Keyword(Keyword::new("a/b"))))
        );
        assert_eq!(from_text(&db, &ident, "a b"), None);
    }
}
