//! A full-text segment: the documents one transaction (or one compaction) indexed, and the
//! postings of their terms.
//!
//! A segment is immutable. Its documents are numbered from the manifest entry's first
//! document number on (the *local* id is the offset), and each keeps what a search binds:
//! entity, attribute, the transaction that asserted the value, the value itself, and its
//! length in terms. The term dictionary is sorted by (attribute, term), so one attribute's
//! terms are one run and a prefix is a range of it; each term's postings list the local
//! ids holding it (increasing) and, per document, the positions (increasing), which phrase
//! queries use and whose count is the term frequency.

use std::cmp::Ordering;

use vev_core::{EntityId, SmolStr};
use vev_query::fulltext::analyze;

use crate::codec::{err, DecodeResult, Reader, Writer};

const KIND_FT_SEGMENT: u8 = 5;

/// An (attribute, term) key of the dictionary being built.
type TermKey = (EntityId, Box<str>);
/// A (local document id, position) occurrence of a term.
type Hit = (u32, u32);

/// One indexed value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Doc {
    pub e: EntityId,
    pub a: EntityId,
    /// The transaction that asserted the value.
    pub tx: EntityId,
    /// Terms in the value.
    pub len: u32,
    pub value: SmolStr,
}

/// The postings of one (attribute, term).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Postings {
    pub a: EntityId,
    pub term: Box<str>,
    /// Local ids of the documents holding the term, increasing.
    pub docs: Vec<u32>,
    /// `positions[offsets[i]..offsets[i + 1]]` are the positions in `docs[i]`.
    pub offsets: Vec<u32>,
    pub positions: Vec<u32>,
}

impl Postings {
    /// How often `docs[i]` holds the term.
    pub fn tf(&self, i: usize) -> u32 {
        self.offsets[i + 1] - self.offsets[i]
    }

    pub fn positions_of(&self, i: usize) -> &[u32] {
        &self.positions[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// A decoded segment.
#[derive(Debug, PartialEq)]
pub(crate) struct Segment {
    pub docs: Vec<Doc>,
    /// Each document's entity, transaction and length again, as columns: scoring and the
    /// hits of a large search read these of one document in three (or fewer), and a doc of
    /// 56 bytes apiece costs a cache miss per document where the columns share lines.
    pub cols: DocCols,
    /// Sorted by (attribute, term), no duplicates.
    pub terms: Vec<Postings>,
    /// Local ids ordered by (entity, attribute, tx): a retraction finds its document here.
    by_entity: Vec<u32>,
}

/// A segment's documents' entity, transaction and length (`Segment::cols`), by local id.
#[derive(Debug, PartialEq, Default)]
pub(crate) struct DocCols {
    pub e: Vec<EntityId>,
    pub tx: Vec<EntityId>,
    pub len: Vec<u32>,
}

fn key_cmp(p: &Postings, a: EntityId, term: &str) -> Ordering {
    p.a.cmp(&a).then_with(|| (*p.term).cmp(term))
}

/// A part's next term in `Segment::merge`: ordered so that a max-heap pops the least
/// (attribute, term) first and, among equal ones, the earliest part.
struct Head<'s> {
    p: &'s Postings,
    part: usize,
    /// The term's index in its part's dictionary.
    at: usize,
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Head<'_>) -> Ordering {
        key_cmp(other.p, self.p.a, &self.p.term).then_with(|| other.part.cmp(&self.part))
    }
}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Head<'_>) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Head<'_>) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head<'_> {}

impl Segment {
    /// Index `docs` (their `len` is computed here).
    ///
    /// Each distinct (attribute, term) is interned once (its text allocated once); every
    /// occurrence is then a (term, document, position) triple in one list, dealt by a
    /// counting sort into the terms' dictionary order, so that each term's postings are
    /// allocated at their final sizes: four allocations per distinct term, none per
    /// occurrence (a transaction's segment is built inside its commit).
    pub fn build(mut docs: Vec<Doc>) -> Segment {
        use std::hash::BuildHasher;
        let hasher = foldhash::fast::RandomState::default();
        let hash = |a: EntityId, term: &str| hasher.hash_one((a, term));
        let mut table: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
        let mut keys: Vec<TermKey> = Vec::new();
        // (term number, local document id, position), in document and position order.
        let mut hits: Vec<(u32, Hit)> = Vec::new();
        for (i, doc) in docs.iter_mut().enumerate() {
            let mut len = 0;
            let a = doc.a;
            analyze::visit_terms(&doc.value, &mut |pos, term| {
                len = pos + 1;
                let h = hash(a, term);
                let number = match table.find(h, |&k| {
                    let key = &keys[k as usize];
                    key.0 == a && *key.1 == *term
                }) {
                    Some(&k) => k,
                    None => {
                        let k = keys.len() as u32;
                        keys.push((a, term.into()));
                        table.insert_unique(h, k, |&k| {
                            let key = &keys[k as usize];
                            hash(key.0, &key.1)
                        });
                        k
                    }
                };
                hits.push((number, (i as u32, pos)));
            });
            doc.len = len;
        }
        // The terms in (attribute, term) order, each with its number; a number's rank.
        let mut sorted: Vec<(TermKey, u32)> = keys.into_iter().zip(0u32..).collect();
        sorted.sort_unstable_by(|x, y| x.0.cmp(&y.0));
        let mut rank = vec![0u32; sorted.len()];
        for (r, (_, k)) in sorted.iter().enumerate() {
            rank[*k as usize] = r as u32;
        }
        // Per rank: occurrences and distinct documents (occurrences of one document are
        // adjacent, since `hits` is in document order).
        let mut counts = vec![(0u32, 0u32, u32::MAX); sorted.len()];
        for &(k, (doc, _)) in &hits {
            let c = &mut counts[rank[k as usize] as usize];
            c.0 += 1;
            if c.2 != doc {
                c.1 += 1;
                c.2 = doc;
            }
        }
        // Each rank's next free slot, from its first; stable, so each term's hits keep their
        // document and position order, and a rank's slot ends one past its last hit.
        let mut next = Vec::with_capacity(sorted.len());
        let mut at = 0u32;
        for c in &counts {
            next.push(at);
            at += c.0;
        }
        let mut dealt: Vec<Hit> = vec![(0, 0); hits.len()];
        for (k, hit) in hits {
            let slot = &mut next[rank[k as usize] as usize];
            dealt[*slot as usize] = hit;
            *slot += 1;
        }
        let terms = sorted
            .into_iter()
            .enumerate()
            .map(|(r, ((a, term), _))| {
                let (occurrences, distinct, _) = counts[r];
                let end = next[r] as usize;
                let term_hits = &dealt[end - occurrences as usize..end];
                let mut p = Postings {
                    a,
                    term,
                    docs: Vec::with_capacity(distinct as usize),
                    offsets: Vec::with_capacity(distinct as usize + 1),
                    positions: Vec::with_capacity(occurrences as usize),
                };
                for &(doc, pos) in term_hits {
                    if p.docs.last() != Some(&doc) {
                        p.offsets.push(p.positions.len() as u32);
                        p.docs.push(doc);
                    }
                    p.positions.push(pos);
                }
                p.offsets.push(p.positions.len() as u32);
                p
            })
            .collect();
        Segment::with_terms(docs, terms)
    }

    fn with_terms(docs: Vec<Doc>, terms: Vec<Postings>) -> Segment {
        let mut by_entity: Vec<u32> = (0..docs.len() as u32).collect();
        by_entity.sort_by_key(|&i| {
            let d = &docs[i as usize];
            (d.e, d.a, d.tx)
        });
        let cols = DocCols {
            e: docs.iter().map(|d| d.e).collect(),
            tx: docs.iter().map(|d| d.tx).collect(),
            len: docs.iter().map(|d| d.len).collect(),
        };
        Segment {
            docs,
            cols,
            terms,
            by_entity,
        }
    }

    /// The segments' documents one after another (each renumbered past the ones before),
    /// with their postings merged: the same documents and terms, one segment.
    pub fn merge(parts: &[&Segment]) -> Segment {
        let mut docs = Vec::with_capacity(parts.iter().map(|s| s.docs.len()).sum());
        let mut bases = Vec::with_capacity(parts.len());
        for s in parts {
            bases.push(docs.len() as u32);
            docs.extend(s.docs.iter().cloned());
        }
        // A k-way merge of the sorted dictionaries through a heap of each part's next term
        // (least key, then least part, first), so merging many small segments (a bulk load's
        // or a copy's transactions, thousands at once) costs a logarithm per term rather
        // than a pass over every part. Equal keys append their postings in part order, so
        // documents stay increasing.
        let mut heads: std::collections::BinaryHeap<Head<'_>> = parts
            .iter()
            .enumerate()
            .filter_map(|(part, s)| s.terms.first().map(|p| Head { p, part, at: 0 }))
            .collect();
        let mut terms: Vec<Postings> = Vec::new();
        while let Some(first) = heads.pop() {
            let mut out = Postings {
                a: first.p.a,
                term: first.p.term.clone(),
                docs: Vec::new(),
                offsets: vec![0],
                positions: Vec::new(),
            };
            let mut next = Some(first);
            while let Some(h) = next {
                let p = h.p;
                for i in 0..p.docs.len() {
                    out.docs.push(p.docs[i] + bases[h.part]);
                    out.positions.extend_from_slice(p.positions_of(i));
                    out.offsets.push(out.positions.len() as u32);
                }
                if let Some(q) = parts[h.part].terms.get(h.at + 1) {
                    heads.push(Head {
                        p: q,
                        part: h.part,
                        at: h.at + 1,
                    });
                }
                next = if heads
                    .peek()
                    .is_some_and(|n| key_cmp(n.p, out.a, &out.term) == Ordering::Equal)
                {
                    heads.pop()
                } else {
                    None
                };
            }
            terms.push(out);
        }
        Segment::with_terms(docs, terms)
    }

    /// The postings of (a, term).
    pub fn postings(&self, a: EntityId, term: &str) -> Option<&Postings> {
        self.terms
            .binary_search_by(|p| key_cmp(p, a, term))
            .ok()
            .map(|i| &self.terms[i])
    }

    /// The postings of attribute `a`'s terms that start with `prefix`, in term order.
    pub fn with_prefix(&self, a: EntityId, prefix: &str) -> &[Postings] {
        let start = self
            .terms
            .partition_point(|p| key_cmp(p, a, prefix) == Ordering::Less);
        let len = self.terms[start..]
            .iter()
            .take_while(|p| p.a == a && p.term.starts_with(prefix))
            .count();
        &self.terms[start..start + len]
    }

    /// The local id of the document (e, a, value) asserted by `tx`, if this segment has it.
    pub fn find(&self, e: EntityId, a: EntityId, tx: EntityId, value: &str) -> Option<u32> {
        let start = self.by_entity.partition_point(|&i| {
            let d = &self.docs[i as usize];
            (d.e, d.a, d.tx) < (e, a, tx)
        });
        self.by_entity[start..]
            .iter()
            .copied()
            .take_while(|&i| {
                let d = &self.docs[i as usize];
                (d.e, d.a, d.tx) == (e, a, tx)
            })
            .find(|&i| &*self.docs[i as usize].value == value)
    }

    /// Approximate bytes the decoded segment holds (for the cache's bound).
    pub fn size_bytes(&self) -> usize {
        let docs: usize = self.docs.iter().map(|d| 48 + d.value.len()).sum();
        let terms: usize = self
            .terms
            .iter()
            .map(|p| 64 + p.term.len() + 4 * (p.docs.len() + p.offsets.len() + p.positions.len()))
            .sum();
        docs + terms + (4 + 20) * self.by_entity.len()
    }

    /// The segment as bytes (the storage backend adds its checksum).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(KIND_FT_SEGMENT);
        w.varint(self.docs.len() as u64);
        let (mut e0, mut tx0) = (0u64, 0u64);
        for d in &self.docs {
            w.zigzag(d.e.wrapping_sub(e0) as i64);
            w.varint(d.a);
            w.zigzag(d.tx.wrapping_sub(tx0) as i64);
            w.varint(u64::from(d.len));
            w.str(&d.value);
            (e0, tx0) = (d.e, d.tx);
        }
        w.varint(self.terms.len() as u64);
        for p in &self.terms {
            w.varint(p.a);
            w.str(&p.term);
            w.varint(p.docs.len() as u64);
            let mut prev = 0;
            for i in 0..p.docs.len() {
                w.varint(u64::from(p.docs[i] - prev));
                prev = p.docs[i];
                let ps = p.positions_of(i);
                w.varint(ps.len() as u64);
                let mut last = 0;
                for &pos in ps {
                    w.varint(u64::from(pos - last));
                    last = pos;
                }
            }
        }
        w.buf
    }

    /// Read a segment `encode` wrote. Never trusts the bytes: counts are checked against the
    /// bytes left, documents and positions must increase and stay in range, terms must be
    /// sorted, and every term must come from its document's text.
    pub fn decode(bytes: &[u8]) -> DecodeResult<Segment> {
        let mut r = Reader::new(bytes);
        if r.u8()? != KIND_FT_SEGMENT {
            return err("not a full-text segment");
        }
        let n = r.count()?;
        let mut docs = Vec::with_capacity(n);
        let (mut e0, mut tx0) = (0u64, 0u64);
        for _ in 0..n {
            let e = e0.wrapping_add(r.zigzag()? as u64);
            let a = r.varint()?;
            let tx = tx0.wrapping_add(r.zigzag()? as u64);
            let len = u32::try_from(r.varint()?).or_else(|_| err("document length"))?;
            let value = SmolStr::new(r.str()?);
            docs.push(Doc {
                e,
                a,
                tx,
                len,
                value,
            });
            (e0, tx0) = (e, tx);
        }
        let k = r.count()?;
        let mut terms: Vec<Postings> = Vec::with_capacity(k);
        for _ in 0..k {
            let p = read_postings(&mut r, &docs)?;
            if let Some(prev) = terms.last() {
                if key_cmp(prev, p.a, &p.term) != Ordering::Less {
                    return err(format!("term {:?} is out of order", p.term));
                }
            }
            terms.push(p);
        }
        if !r.is_at_end() {
            return err("trailing bytes after the terms");
        }
        Ok(Segment::with_terms(docs, terms))
    }
}

fn read_postings(r: &mut Reader<'_>, docs: &[Doc]) -> DecodeResult<Postings> {
    let a = r.varint()?;
    let term: Box<str> = r.str()?.into();
    let n = r.count()?;
    let mut p = Postings {
        a,
        term,
        docs: Vec::with_capacity(n),
        offsets: Vec::with_capacity(n + 1),
        positions: Vec::new(),
    };
    p.offsets.push(0);
    let mut prev: Option<u32> = None;
    for _ in 0..n {
        let delta = r.varint()?;
        let doc = match prev {
            None => delta,
            Some(x) if delta > 0 => u64::from(x) + delta,
            Some(_) => return err(format!("postings of {:?} repeat a document", p.term)),
        };
        let Some(d) = usize::try_from(doc).ok().and_then(|i| docs.get(i)) else {
            return err(format!("postings of {:?} name document {doc}", p.term));
        };
        if d.a != a {
            return err(format!("term {:?} of another attribute's document", p.term));
        }
        let m = r.count()?;
        if m == 0 {
            return err(format!("postings of {:?} with no position", p.term));
        }
        let mut last: Option<u32> = None;
        for _ in 0..m {
            let delta = r.varint()?;
            let pos = match last {
                None => delta,
                Some(x) if delta > 0 => u64::from(x) + delta,
                Some(_) => return err(format!("positions of {:?} repeat", p.term)),
            };
            if pos >= u64::from(d.len) {
                return err(format!("position {pos} past document {doc}'s length"));
            }
            last = Some(pos as u32);
            p.positions.push(pos as u32);
        }
        p.docs.push(doc as u32);
        p.offsets.push(p.positions.len() as u32);
        prev = Some(doc as u32);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(e: u64, a: u64, text: &str) -> Doc {
        Doc {
            e,
            a,
            tx: 1000 + e,
            len: 0,
            value: SmolStr::new(text),
        }
    }

    #[test]
    fn build_encode_decode_round_trip() {
        let seg = Segment::build(vec![
            doc(1, 10, "Crazy in Love, crazy!"),
            doc(2, 10, "Love Me Do"),
            doc(3, 11, "Love"),
        ]);
        assert_eq!(seg.docs[0].len, 4);
        let love = seg.postings(10, "love").unwrap();
        assert_eq!(love.docs, [0, 1]);
        let crazy = seg.postings(10, "crazy").unwrap();
        assert_eq!((crazy.tf(0), crazy.positions_of(0)), (2, &[0, 3][..]));
        assert_eq!(seg.postings(11, "love").unwrap().docs, [2]);
        assert_eq!(seg.with_prefix(10, "l").len(), 1);
        assert_eq!(seg.find(2, 10, 1002, "Love Me Do"), Some(1));
        assert_eq!(seg.find(2, 10, 1002, "other"), None);
        let bytes = seg.encode();
        assert_eq!(Segment::decode(&bytes).unwrap(), seg);
        for cut in 0..bytes.len() {
            assert!(Segment::decode(&bytes[..cut]).is_err());
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x41;
            let _ = Segment::decode(&bad); // never panics
        }
    }

    /// The postings of `docs` the plain way: a sorted map from (attribute, term) to its
    /// occurrences.
    fn build_by_map(docs: &[Doc]) -> Vec<Postings> {
        let mut map: std::collections::BTreeMap<TermKey, Vec<Hit>> = Default::default();
        for (i, d) in docs.iter().enumerate() {
            for (pos, term) in analyze::terms(&d.value).into_iter().enumerate() {
                let hits = map.entry((d.a, term.into())).or_default();
                hits.push((i as u32, pos as u32));
            }
        }
        map.into_iter()
            .map(|((a, term), hits)| {
                let mut docs: Vec<u32> = hits.iter().map(|h| h.0).collect();
                docs.dedup();
                let offsets = std::iter::once(0)
                    .chain(
                        docs.iter()
                            .map(|&d| hits.iter().filter(|h| h.0 <= d).count() as u32),
                    )
                    .collect();
                Postings {
                    a,
                    term,
                    docs,
                    offsets,
                    positions: hits.iter().map(|h| h.1).collect(),
                }
            })
            .collect()
    }

    /// The counting-sort build gives what a sorted map of every occurrence gives: terms
    /// repeated within and across documents and attributes, empty documents, folded forms.
    #[test]
    fn build_matches_a_sorted_map_of_occurrences() {
        let words = [
            "Love",
            "love",
            "Ångström",
            "angstrom",
            "do",
            "me",
            "zebra",
            "a",
            "B2",
        ];
        for n in [0usize, 1, 2, 7, 50, 300] {
            let docs: Vec<Doc> = (0..n as u64)
                .map(|i| {
                    let text: Vec<&str> = (0..(i * 5 % 9))
                        .map(|k| words[((i * 7 + k * k * 3) % words.len() as u64) as usize])
                        .collect();
                    doc(i, 10 + i % 3, &text.join(" "))
                })
                .collect();
            let seg = Segment::build(docs.clone());
            assert_eq!(seg.terms, build_by_map(&docs), "{n} documents");
            let lens: Vec<u32> = docs
                .iter()
                .map(|d| analyze::terms(&d.value).len() as u32)
                .collect();
            assert_eq!(seg.cols.len, lens);
        }
    }

    #[test]
    fn merge_renumbers_and_keeps_postings() {
        let a = Segment::build(vec![doc(1, 10, "love song"), doc(2, 10, "sad song")]);
        let b = Segment::build(vec![doc(3, 10, "love love"), doc(4, 11, "song")]);
        let m = Segment::merge(&[&a, &b]);
        let all = Segment::build(vec![
            doc(1, 10, "love song"),
            doc(2, 10, "sad song"),
            doc(3, 10, "love love"),
            doc(4, 11, "song"),
        ]);
        assert_eq!(m, all);
    }

    /// Many small parts (a copy's or a bulk load's transactions), some empty, terms shared
    /// by many of them and by two attributes: the heap merge gives what building one
    /// segment of all the documents gives.
    #[test]
    fn merge_of_many_parts_is_the_build_of_all_documents() {
        let words = ["love", "song", "sad", "crazy", "do", "me", "zebra", "a"];
        let docs: Vec<Doc> = (0..600u64)
            .map(|i| {
                let text: Vec<&str> = (0..(i % 5))
                    .map(|k| words[((i * 7 + k * 3) % words.len() as u64) as usize])
                    .collect();
                doc(i, 10 + i % 2, &text.join(" "))
            })
            .collect();
        let parts: Vec<Segment> = docs
            .chunks(3)
            .enumerate()
            .map(|(i, c)| Segment::build(if i % 11 == 0 { Vec::new() } else { c.to_vec() }))
            .collect();
        let kept: Vec<Doc> = docs
            .chunks(3)
            .enumerate()
            .filter(|(i, _)| i % 11 != 0)
            .flat_map(|(_, c)| c.to_vec())
            .collect();
        let refs: Vec<&Segment> = parts.iter().collect();
        assert_eq!(Segment::merge(&refs), Segment::build(kept));
    }
}
