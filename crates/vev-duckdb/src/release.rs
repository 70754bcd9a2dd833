//! `vev_release(path)`: close this process's connections to a database file (see
//! `dbs::release`), when the statement executes. One row: `released`, whether any was open.

use duckdb::core::LogicalTypeId;
use vev::Edn;

use crate::args::Args;
use crate::column::ColType;
use crate::dbs;
use crate::error::Result;
use crate::table::{Columns, Function, Materialized, Producer};

/// `vev_release`.
pub struct VevRelease;

impl Function for VevRelease {
    const NAME: &'static str = "vev_release";
    /// The path as given.
    type Spec = String;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![LogicalTypeId::Varchar]
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, String)> {
        let path = args.text(0, "database path")?;
        Ok((vec![("released".to_owned(), ColType::Boolean)], path))
    }

    fn start(path: &String) -> Result<Box<dyn Producer>> {
        let released = dbs::release(path)?;
        Ok(Materialized::boxed(vec![vec![Edn::Bool(released)]]))
    }
}
