//! `vev_pull(path, pattern, entity)`: one row per entity, its pull as JSON.
//!
//! The entity is an id, an ident or lookup ref as text (`'[:person/email "a@b"]'`), or a
//! list of them (one row each, in order). A lookup ref that finds nothing gives a row with
//! NULLs, as Datomic's pull gives nil.

use std::sync::Arc;

use duckdb::core::LogicalTypeId;
use vev::query_ast::PullPattern;
use vev::Edn;

use crate::args::{entity, to_edn, Args, TimeView};
use crate::column::ColType;
use crate::dbs::{self, Handle};
use crate::error::{ExtError, Result};
use crate::table::{time_parameters, Columns, Function, Materialized, Producer};

/// `vev_pull`.
pub struct VevPull;

/// A bound pull call.
pub struct Spec {
    handle: Arc<Handle>,
    view: TimeView,
    pattern: PullPattern,
    /// The entities as given.
    entities: Vec<Edn>,
}

impl Function for VevPull {
    const NAME: &'static str = "vev_pull";
    type Spec = Spec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![
            LogicalTypeId::Varchar,
            LogicalTypeId::Varchar,
            LogicalTypeId::Any,
        ]
    }

    fn named() -> Vec<(String, LogicalTypeId)> {
        time_parameters()
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, Spec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let pattern = vev::parse_pull(&args.text(1, "pull pattern")?)
            .map_err(|e| ExtError::new(e.code(), e.to_string()))?;
        let entities = match to_edn(&args.get(2))? {
            Edn::Vector(items) => items,
            one => vec![one],
        };
        let columns = vec![
            ("e".to_owned(), ColType::BigInt),
            ("pull".to_owned(), ColType::Json),
        ];
        Ok((
            columns,
            Spec {
                handle,
                view: args.time_view()?,
                pattern,
                entities,
            },
        ))
    }

    fn start(spec: &Spec) -> Result<Box<dyn Producer>> {
        let db = spec.view.apply(spec.handle.db()?);
        let mut ids = Vec::with_capacity(spec.entities.len());
        for e in &spec.entities {
            ids.push(match e {
                Edn::Nil => None,
                e => entity(&db, e)?,
            });
        }
        let found: Vec<vev::EntityId> = ids.iter().flatten().copied().collect();
        let mut pulled = vev::pull_many(&db, &spec.pattern, &found)?.into_iter();
        let mut rows = Vec::with_capacity(ids.len());
        for id in ids {
            rows.push(match id {
                Some(id) => vec![Edn::Integer(id as i64), pulled.next().unwrap_or(Edn::Nil)],
                None => vec![Edn::Nil, Edn::Nil],
            });
        }
        Ok(Materialized::boxed(rows))
    }
}
