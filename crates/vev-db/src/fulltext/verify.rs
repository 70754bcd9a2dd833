//! `Db::verify_fulltext`: the full-text index checked against the database it indexes.
//!
//! The database itself is the log replayed (or a root checked the same way), so this is
//! the index checked against the log: every live document is a current value of its
//! attribute and every current value of a full-text attribute is exactly one live
//! document; every deleted document is a retracted value whose retraction is its mark;
//! each segment's postings are what analyzing its documents gives; the entries cover the
//! document numbers without gap or overlap; the running statistics add up.

use std::collections::BTreeMap;

use vev_core::{EntityId, StorageError};

use super::load;
use super::segment::Segment;
use crate::Db;

/// What `verify_fulltext` checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FulltextVerify {
    /// Manifest entries (segments) checked.
    pub segments: u64,
    /// Documents in them.
    pub documents: u64,
}

/// (attribute, entity, value, asserting tx).
type Fact = (EntityId, EntityId, String, EntityId);
/// A retracted fact and the retracting tx.
type Retired = (Fact, EntityId);

impl Db {
    /// Check the full-text index against the database's datoms (loading every segment).
    pub fn verify_fulltext(&self) -> Result<FulltextVerify, StorageError> {
        let ft = &self.state.fulltext;
        let bad = |what: String| StorageError::corruption("full-text index", what);
        let mark = self.storage_mark();
        let (mut live, mut retired): (Vec<Fact>, Vec<(Fact, EntityId)>) = (Vec::new(), Vec::new());
        let mut stats: BTreeMap<EntityId, (u64, u64)> = BTreeMap::new();
        let mut expect = 0;
        for entry in ft.entries.iter() {
            if entry.doc_first != expect {
                return Err(bad(format!(
                    "an entry starts at document {}, not {expect}",
                    entry.doc_first
                )));
            }
            expect = entry.doc_end;
            let Some(seg) = load(entry, self.state.segments.as_ref()) else {
                self.storage_check(mark)?;
                return Err(bad("a segment has no store to load from".into()));
            };
            if seg.docs.len() as u64 != entry.docs() {
                return Err(bad(format!(
                    "the segment of documents {}..{} holds {}",
                    entry.doc_first,
                    entry.doc_end,
                    seg.docs.len()
                )));
            }
            let rebuilt = Segment::build(seg.docs.clone());
            if rebuilt.terms != seg.terms || rebuilt.docs != seg.docs {
                return Err(bad(format!(
                    "the postings of documents {}..{} are not those of their text",
                    entry.doc_first, entry.doc_end
                )));
            }
            for (local, d) in seg.docs.iter().enumerate() {
                let fact = (d.a, d.e, d.value.to_string(), d.tx);
                match entry.deleted_at(local as u32) {
                    None => {
                        let s = stats.entry(d.a).or_default();
                        s.0 += 1;
                        s.1 += u64::from(d.len);
                        live.push(fact);
                    }
                    Some(0) => {}
                    Some(at) => retired.push((fact, at)),
                }
            }
        }
        self.storage_check(mark)?;
        if expect != ft.next_doc {
            return Err(bad(format!(
                "entries end at document {expect}, the index at {}",
                ft.next_doc
            )));
        }
        let nonzero = |m: &BTreeMap<EntityId, (u64, u64)>| -> Vec<(EntityId, (u64, u64))> {
            m.iter()
                .filter(|(_, v)| v.0 > 0)
                .map(|(k, v)| (*k, *v))
                .collect()
        };
        if nonzero(&stats) != nonzero(&ft.live) {
            return Err(bad("the live document statistics do not add up".into()));
        }
        let (want_live, want_retired) = self.fulltext_facts()?;
        live.sort();
        retired.sort();
        if live != want_live {
            return Err(bad(mismatch("live documents", &live, &want_live)));
        }
        if retired != want_retired {
            return Err(bad(format!(
                "{} retracted documents, the database has {} retracted values",
                retired.len(),
                want_retired.len()
            )));
        }
        Ok(FulltextVerify {
            segments: ft.entries.len() as u64,
            documents: ft.next_doc,
        })
    }

    /// The current values of the full-text attributes and their retracted ones (with the
    /// retracting tx), sorted, from the indexes.
    fn fulltext_facts(&self) -> Result<(Vec<Fact>, Vec<Retired>), StorageError> {
        let state = &self.state;
        let mark = self.storage_mark();
        let mut live = Vec::new();
        let mut retired = Vec::new();
        for a in super::fulltext_attrs(&state.schema) {
            super::visit_values(state, a, &mut |e, value, tx, retracted| {
                let fact = (a, e, value.to_string(), tx);
                match retracted {
                    None => live.push(fact),
                    Some(at) => retired.push((fact, at)),
                }
            });
        }
        self.storage_check(mark)?;
        live.sort();
        retired.sort();
        Ok((live, retired))
    }
}

fn mismatch(what: &str, have: &[Fact], want: &[Fact]) -> String {
    let missing = want.iter().find(|f| have.binary_search(f).is_err());
    let extra = have.iter().find(|f| want.binary_search(f).is_err());
    match (missing, extra) {
        (Some(f), _) => format!(
            "{what}: the value {:?} of entity {} (attribute {}, tx {}) is not indexed",
            f.2, f.1, f.0, f.3
        ),
        (None, Some(f)) => format!(
            "{what}: the index holds {:?} of entity {} (attribute {}, tx {}), which is not a current value",
            f.2, f.1, f.0, f.3
        ),
        (None, None) => format!("{what}: {} indexed, {} in the database", have.len(), want.len()),
    }
}
