//! Every use of the full-text index's own API, in one place: its counters, compaction, and
//! the synthetic delay per segment write.

use std::path::Path;
use std::time::Duration;

use vev::Connection;

use crate::error::BenchError;

/// The index's counters (cumulative, but `live_segments`, `documents` and
/// `deleted_documents`, which are levels).
pub use vev::FulltextStats;

/// What the benchmark computes from the counters.
pub trait StatsExt {
    /// What happened between `before` and `self` (the cumulative counters' differences;
    /// the levels are `self`'s).
    fn since(&self, before: &FulltextStats) -> FulltextStats;
    /// Segments written by transactions: every segment but the one each compaction wrote
    /// (a background compaction is adopted by whichever transaction comes next).
    fn transaction_segments(&self) -> u64;
}

impl StatsExt for FulltextStats {
    fn since(&self, before: &FulltextStats) -> FulltextStats {
        FulltextStats {
            segments_written: self.segments_written - before.segments_written,
            manifest_appends: self.manifest_appends - before.manifest_appends,
            compactions: self.compactions - before.compactions,
            bytes_written: self.bytes_written - before.bytes_written,
            ..*self
        }
    }

    fn transaction_segments(&self) -> u64 {
        self.segments_written - self.compactions
    }
}

/// The connection's full-text counters now.
pub fn stats(conn: &Connection) -> FulltextStats {
    conn.fulltext_stats()
}

/// Merge every live segment now (blocking).
pub fn compact(conn: &Connection) -> Result<(), BenchError> {
    Ok(conn.compact_fulltext()?)
}

/// Open (creating) the database at `path`, with `delay` added to each full-text segment
/// write when given.
pub fn open(path: &Path, delay: Option<Duration>) -> Result<Connection, BenchError> {
    Ok(Connection::open_with(
        path,
        &vev::OpenOptions {
            segment_write_delay: delay,
            ..vev::OpenOptions::default()
        },
    )?)
}
