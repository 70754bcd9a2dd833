//! `vev.duckdb_extension`: a DuckDB loadable extension that reads and writes Vev databases
//! from DuckDB SQL.
//!
//! ```sql
//! LOAD 'vev.duckdb_extension';
//! SELECT * FROM vev_query('app.vev', '[:find ?name ?age :where [?e :person/name ?name] [?e :person/age ?age]]');
//! SELECT avg(v) FROM vev_attribute('app.vev', ':person/age', as_of := 1000);
//! ```
//!
//! Table functions (each in its module): `vev_query`, `vev_pull`, `vev_datoms`,
//! `vev_attribute`, `vev_transact`, `vev_schema`, `vev_log`, `vev_release`. The reading ones take the named
//! parameters `as_of`, `since` and `history`. `table` is the frame they share (bind, init,
//! scan, projection, panic containment); `column` maps Vev values to DuckDB types; `dbs`
//! caches opened databases per path; `footer` makes the metadata DuckDB requires at the end
//! of the file (`scripts/duckdb-extension.sh` builds and packages the extension).
//!
//! The crate binds DuckDB's C API through the function table DuckDB hands over at `LOAD`
//! (the `duckdb` crate's `loadable-extension` feature): no DuckDB code is compiled or linked,
//! and one binary loads in DuckDB 1.5.6 and 2.0.x.

mod args;
mod attribute;
mod column;
mod datoms;
mod dbs;
mod error;
pub mod footer;
mod json;
mod pull;
mod query;
mod release;
mod schema;
mod table;
#[cfg(feature = "testing")]
mod testing;
mod vector;

pub use error::ExtError;

use duckdb::Connection;

use crate::table::Table;

// No `#[global_allocator]`: with mimalloc as the extension's own allocator (statically
// linked), Python running the extension's tests died with SIGSEGV in about half the runs
// (2026-12-06), though a million-datom predicate scan was 15-25% faster; the system
// allocator stays until that is understood.

/// Register the table functions on the connection DuckDB loads the extension with.
fn register(con: &Connection) -> duckdb::Result<()> {
    con.register_table_function::<Table<query::VevQuery>>("vev_query")?;
    con.register_table_function::<Table<pull::VevPull>>("vev_pull")?;
    con.register_table_function::<Table<datoms::VevDatoms>>("vev_datoms")?;
    con.register_table_function::<Table<attribute::VevAttribute>>("vev_attribute")?;
    con.register_table_function::<Table<datoms::VevTransact>>("vev_transact")?;
    con.register_table_function::<Table<schema::VevSchema>>("vev_schema")?;
    con.register_table_function::<Table<datoms::VevLog>>("vev_log")?;
    con.register_table_function::<Table<release::VevRelease>>("vev_release")?;
    Ok(())
}

/// The entry point DuckDB calls at `LOAD` (exported as `vev_init_c_api`).
#[duckdb::duckdb_entrypoint_c_api(ext_name = "vev", min_duckdb_version = "v1.2.0")]
pub fn vev_init(con: Connection) -> Result<(), Box<dyn std::error::Error>> {
    let registered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| register(&con)));
    match registered {
        Ok(r) => Ok(r?),
        Err(_) => Err(Box::new(ExtError::new(
            "duckdb/panic",
            "registering Vev's table functions failed (a bug; please report it)",
        ))),
    }
}
