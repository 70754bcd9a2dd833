//! Compaction: merging a run of small segments into one, so a search visits few segments.
//!
//! Tiered merging: an entry's tier is the base-8 logarithm of its document count; a run
//! of `FANOUT` (8) consecutive stored entries of one tier merges into one entry of the next
//! tier up, so each document is rewritten about once per tier (log₈ of the index size in
//! all): bounded write amplification. A merge keeps every document and its number (only
//! the division into segments changes), so no search result and no score changes.
//!
//! A compaction is computed from one database value (on a thread of its own), written by
//! the storage backend in one commit that replaces the run's manifest entries with the new
//! one, and then adopted by the latest value: the run's entries are still there (only
//! compaction removes entries), and the deletion marks transactions added meanwhile carry
//! over to the merged entry.

use std::sync::Arc;

use vev_core::StorageError;

use super::{load, merged_entry, merged_marks, Counts, Entry, FtState, NewEntry, SegRef};
use crate::Db;

/// Entries merged by one compaction.
pub const FANOUT: usize = 8;

/// A merged segment and the entries it replaces.
pub struct Compaction {
    /// What the compaction itself adds to the counters.
    own: Counts,
    /// Document ranges of the entries replaced, in order.
    replaced: Vec<(u64, u64)>,
    entry: Entry,
}

impl Compaction {
    /// The first and one-past-last document numbers of the entries it replaces.
    pub fn range(&self) -> (u64, u64) {
        (self.entry.doc_first, self.entry.doc_end)
    }

    /// How many entries it replaces.
    pub fn replaces(&self) -> usize {
        self.replaced.len()
    }

    /// The merged entry to store.
    pub fn new_entry(&self) -> NewEntry {
        let SegRef::Memory { bytes, .. } = &self.entry.seg else {
            unreachable!("a compaction's segment is built in memory")
        };
        NewEntry {
            doc_first: self.entry.doc_first,
            doc_end: self.entry.doc_end,
            record: self.entry.record(),
            segment: bytes.clone(),
        }
    }
}

fn tier(docs: u64) -> u32 {
    docs.max(1).ilog(FANOUT as u64)
}

/// The run of entries to merge next: the oldest `FANOUT` consecutive eligible entries of
/// one tier (every entry, with `all`, if there are two or more). Entries not yet in storage
/// are not eligible when `durable`.
fn plan(ft: &FtState, all: bool, durable: bool) -> Option<std::ops::Range<usize>> {
    let eligible = |e: &Entry| e.stored || !durable;
    let entries = &ft.entries;
    if all {
        let n = entries.iter().take_while(|e| eligible(e)).count();
        return (n >= 2).then_some(0..n);
    }
    let mut start = 0;
    for i in 0..entries.len() {
        if !eligible(&entries[i]) {
            break;
        }
        if tier(entries[i].docs()) != tier(entries[start].docs()) {
            start = i;
        }
        if i + 1 - start == FANOUT {
            return Some(start..i + 1);
        }
    }
    None
}

impl Db {
    /// Whether `fulltext_compaction` has something to merge (nothing is loaded to tell).
    pub fn fulltext_compaction_due(&self, all: bool, durable: bool) -> bool {
        plan(&self.state.fulltext, all, durable).is_some()
    }

    /// The next compaction of the full-text index, merged (loading the segments it
    /// merges): `all` merges every entry into one, otherwise the tiered policy picks a run.
    /// `None` when there is nothing to merge. `durable`: only entries already in storage.
    pub fn fulltext_compaction(
        &self,
        all: bool,
        durable: bool,
    ) -> Result<Option<Compaction>, StorageError> {
        let ft = &self.state.fulltext;
        let Some(run) = plan(ft, all, durable) else {
            return Ok(None);
        };
        let mark = self.storage_mark();
        let entries = &ft.entries[run];
        let mut segs = Vec::with_capacity(entries.len());
        for e in entries {
            match load(e, self.state.segments.as_ref()) {
                Some(s) => segs.push(s),
                None => break,
            }
        }
        self.storage_check(mark)?;
        if segs.len() != entries.len() {
            return Err(StorageError::corruption(
                "full-text segment",
                "a stored entry has no segment cache to load from",
            ));
        }
        let entry = merged_entry(entries, &segs, |bytes| {
            entries
                .iter()
                .fold(compaction_counts(bytes), |c, e| c.add(e.counts))
        });
        let own = compaction_counts(entry_bytes(&entry));
        Ok(Some(Compaction {
            own,
            replaced: entries.iter().map(|e| (e.doc_first, e.doc_end)).collect(),
            entry,
        }))
    }

    /// This database with a compaction adopted: the entries it replaced (all still here)
    /// become its entry, with every deletion mark they have now. `stored`: the backend
    /// wrote it (as segment `id`, which then loads through the cache instead of staying in
    /// memory), or `None` in memory.
    pub fn fulltext_adopt(&self, c: &Compaction, stored: Option<u64>) -> Db {
        let ft = &self.state.fulltext;
        let Some(start) = ft
            .entries
            .iter()
            .position(|e| e.doc_first == c.replaced[0].0)
        else {
            return self.clone();
        };
        let end = start + c.replaced.len();
        let same = ft.entries.get(start..end).is_some_and(|run| {
            run.iter()
                .zip(&c.replaced)
                .all(|(e, r)| (e.doc_first, e.doc_end) == *r)
        });
        if !same {
            return self.clone();
        }
        let mut entry = c.entry.clone();
        entry.deleted = Arc::new(merged_marks(&ft.entries[start..end], entry.doc_first));
        if let (Some(id), SegRef::Memory { seg, .. }) = (stored, &entry.seg) {
            if let Some(cache) = &self.state.segments {
                cache.insert_fulltext(id, seg.clone());
                entry.seg = SegRef::Stored(id);
            }
            entry.stored = true;
        }
        let mut next = ft.clone();
        let entries = Arc::make_mut(&mut next.entries);
        entries.splice(start..end, [Arc::new(entry)]);
        next.counters = next.counters.add(c.own);
        let mut state = (*self.state).clone();
        state.fulltext = next;
        Db {
            state: Arc::new(state),
            view: self.view,
            failed: self.failed.clone(),
        }
    }
}

/// What a compaction writing a segment of `bytes` bytes adds to the counters.
fn compaction_counts(bytes: u64) -> Counts {
    Counts {
        segments_written: 1,
        manifest_appends: 0,
        compactions: 1,
        bytes_written: bytes,
    }
}

/// The size of an entry's segment built in memory.
fn entry_bytes(entry: &Entry) -> u64 {
    match &entry.seg {
        SegRef::Memory { bytes, .. } => bytes.len() as u64,
        SegRef::Stored(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_base_eight() {
        assert_eq!(
            [tier(0), tier(1), tier(7), tier(8), tier(63), tier(64)],
            [0, 0, 0, 1, 1, 2]
        );
    }
}
