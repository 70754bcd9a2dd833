//! Every use of the full-text index's own API, in one place: its counters, compaction, and
//! the synthetic delay per segment write.
//!
//! LEAD: this branch was written before the index landed, against the API the index will
//! have: `Connection::fulltext_stats() -> vev::FulltextStats` (cumulative counters),
//! `Connection::compact_fulltext() -> Result<(), vev::Error>` (merge every live segment now,
//! blocking) and `vev::OpenOptions::segment_write_delay: Option<Duration>`. Until then the
//! three functions below do nothing and [`WIRED`] is false, and the report says that the
//! counter targets were not checked, that "after compaction" searched the uncompacted index,
//! and that the delay mode ran without a delay. Wiring it: set `WIRED` to true and replace the
//! three marked bodies; nothing else in the benchmark needs to change.

use std::path::Path;
use std::time::Duration;

use vev::Connection;

use crate::error::BenchError;

/// Whether this build of Vev has the full-text index's API (see the module doc).
pub const WIRED: bool = false; // LEAD: true once the three bodies below are wired.

/// The index's cumulative counters (`vev::FulltextStats`).
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
}

/// The connection's full-text counters now.
pub fn stats(conn: &Connection) -> FulltextStats {
    let _ = conn;
    // LEAD: wire to `conn.fulltext_stats()`, field by field.
    FulltextStats::default()
}

/// Merge every live segment now (blocking).
pub fn compact(conn: &Connection) -> Result<(), BenchError> {
    let _ = conn;
    // LEAD: wire to `conn.compact_fulltext()?`.
    Ok(())
}

/// Open (creating) the database at `path`, with `delay` added to each full-text segment
/// write when given.
pub fn open(path: &Path, delay: Option<Duration>) -> Result<Connection, BenchError> {
    let _ = delay;
    // LEAD: wire to `Connection::open_with(path, &vev::OpenOptions { segment_write_delay:
    // delay, ..vev::OpenOptions::default() })`.
    Ok(Connection::open(path)?)
}
