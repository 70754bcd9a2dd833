//! Every use of the full-text index's own API, in one place: its counters, compaction, and
//! the synthetic delay per segment write.

use std::path::Path;
use std::time::Duration;

use vev::Connection;

use crate::error::BenchError;

/// The index's cumulative counters (from `vev::FulltextStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FulltextStats {
    pub segments_written: u64,
    pub manifest_appends: u64,
    pub live_segments: u64,
    pub compactions: u64,
    pub bytes_written: u64,
}

impl FulltextStats {
    /// What happened between `before` and `self` (the cumulative counters' differences;
    /// `live_segments` is a level, so it is `self`'s).
    pub fn since(&self, before: &FulltextStats) -> FulltextStats {
        FulltextStats {
            segments_written: self.segments_written - before.segments_written,
            manifest_appends: self.manifest_appends - before.manifest_appends,
            live_segments: self.live_segments,
            compactions: self.compactions - before.compactions,
            bytes_written: self.bytes_written - before.bytes_written,
        }
    }

    /// Segments written by transactions: every segment but the one each compaction wrote
    /// (a background compaction is adopted by whichever transaction comes next).
    pub fn transaction_segments(&self) -> u64 {
        self.segments_written - self.compactions
    }
}

/// The connection's full-text counters now.
pub fn stats(conn: &Connection) -> FulltextStats {
    let s = conn.fulltext_stats();
    FulltextStats {
        segments_written: s.segments_written,
        manifest_appends: s.manifest_appends,
        live_segments: s.live_segments,
        compactions: s.compactions,
        bytes_written: s.bytes_written,
    }
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
