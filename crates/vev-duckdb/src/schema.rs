//! `vev_schema(path)`: one row per attribute (the system's too), ordered by ident.

use std::sync::Arc;

use duckdb::core::LogicalTypeId;
use vev::{Cardinality, Edn, Unique};

use crate::args::{Args, TimeView};
use crate::column::ColType;
use crate::dbs::{self, Handle};
use crate::error::Result;
use crate::table::{time_parameters, Columns, Function, Materialized, Producer};

/// `vev_schema`.
pub struct VevSchema;

/// A bound `vev_schema` call.
pub struct Spec {
    handle: Arc<Handle>,
    view: TimeView,
}

const COLUMNS: [(&str, ColType); 9] = [
    ("ident", ColType::Varchar),
    ("value_type", ColType::Varchar),
    ("cardinality", ColType::Varchar),
    ("unique", ColType::Varchar),
    ("is_component", ColType::Boolean),
    ("index", ColType::Boolean),
    ("fulltext", ColType::Boolean),
    ("no_history", ColType::Boolean),
    ("id", ColType::BigInt),
];

impl Function for VevSchema {
    const NAME: &'static str = "vev_schema";
    type Spec = Spec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![LogicalTypeId::Varchar]
    }

    fn named() -> Vec<(String, LogicalTypeId)> {
        time_parameters()
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, Spec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let columns = COLUMNS.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect();
        Ok((
            columns,
            Spec {
                handle,
                view: args.time_view()?,
            },
        ))
    }

    fn start(spec: &Spec) -> Result<Box<dyn Producer>> {
        let db = spec.view.apply(spec.handle.db()?);
        let mut attrs: Vec<_> = db.schema().attributes().cloned().collect();
        attrs.sort_by(|a, b| a.ident.cmp(&b.ident));
        let text = |s: String| Edn::String(s);
        let rows = attrs
            .iter()
            .map(|a| {
                vec![
                    text(a.ident.to_string()),
                    text(a.value_type.ident().to_string()),
                    text(match a.cardinality {
                        Cardinality::One => ":db.cardinality/one".to_owned(),
                        Cardinality::Many => ":db.cardinality/many".to_owned(),
                    }),
                    match a.unique {
                        Some(Unique::Identity) => text(":db.unique/identity".to_owned()),
                        Some(Unique::Value) => text(":db.unique/value".to_owned()),
                        None => Edn::Nil,
                    },
                    Edn::Bool(a.is_component),
                    Edn::Bool(a.index),
                    Edn::Bool(a.fulltext),
                    Edn::Bool(a.no_history),
                    Edn::Integer(a.id as i64),
                ]
            })
            .collect();
        Ok(Materialized::boxed(rows))
    }
}
