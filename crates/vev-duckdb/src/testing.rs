//! Test hooks (the `testing` feature, never in a release build): a call whose database path
//! is `!panic-in-bind` panics in bind, and one whose path is `!panic-in-scan` binds one
//! BIGINT column `x` and panics in its scan, so that the tests can check that a panic comes
//! back to DuckDB as an error and the host process lives on.

use crate::args::Args;
use crate::column::ColType;
use crate::error::Result;
use crate::table::{Chunk, Producer};

/// What the hook does with a call.
pub enum Hook {
    /// Not a test path: bind as usual.
    None,
    /// Bind these columns and no spec; the scan panics.
    PanicInScan(Vec<(String, ColType)>),
}

/// Panic in bind, or ask for a panicking scan, when the path says so.
pub fn hook(args: &Args<'_>) -> Hook {
    match args.text(0, "path").ok().as_deref() {
        Some("!panic-in-bind") => panic!("test panic in {} bind", args.function),
        Some("!panic-in-scan") => Hook::PanicInScan(vec![("x".to_owned(), ColType::BigInt)]),
        _ => Hook::None,
    }
}

/// A scan that panics.
pub struct PanicOnScan;

impl Producer for PanicOnScan {
    fn fill(&self, _chunk: &mut Chunk<'_>) -> Result<usize> {
        panic!("test panic in a scan")
    }
}
