//! A search over the index: the same rows and scores as `vev_query::fulltext::scan_search`,
//! from postings instead of a scan of every value.
//!
//! Two passes over the segments that hold the attribute: the first gathers the statistics
//! (documents and total length of the view, unless the plain current view's running totals
//! apply; the prefix terms; each scoring term's document frequency among the view's
//! documents), the second finds each segment's matching documents (postings intersected,
//! unioned and subtracted as sorted lists of local ids; phrases checked on positions) and
//! scores them, adding the scoring terms' contributions in the order of the scoring terms,
//! as the reference does.

use std::borrow::Cow;
use std::sync::Arc;

use vev_core::{EntityId, StorageError};
use vev_query::fulltext::{scoring_terms, Atom, FtQuery, Hit, Scoring};

use super::segment::{Postings, Segment};
use super::{load, visible, Entry, ViewBounds};
use crate::tree::gallop;
use crate::Db;

/// Documents of attribute `a` in `db`'s view that match `query`, scored.
pub(crate) fn search(
    db: &Db,
    a: EntityId,
    query: &FtQuery,
    values: bool,
) -> Result<Vec<Hit>, StorageError> {
    let state = &db.state;
    let ft = &state.fulltext;
    let view = db.view;
    let bounds = ViewBounds {
        basis: view.as_of.map_or(state.basis_t, |t| t.min(state.basis_t)),
        since: view.since,
        history: view.history,
        latest: view.as_of.is_none_or(|t| t >= state.basis_t)
            && view.since.is_none()
            && !view.history,
    };
    let mark = db.storage_mark();
    let mut parts: Vec<(&Entry, Arc<Segment>)> = Vec::new();
    for entry in ft.entries.iter().filter(|e| e.has_attr(a)) {
        if let Some(seg) = load(entry, state.segments.as_ref()) {
            parts.push((&**entry, seg));
        }
    }
    db.storage_check(mark)?;
    let (docs, total_len) = if bounds.latest {
        ft.live.get(&a).copied().unwrap_or((0, 0))
    } else {
        view_totals(&parts, a, &bounds)
    };
    let vocabulary: Vec<&str> = prefix_vocabulary(&parts, a, query);
    let terms = scoring_terms(query, vocabulary);
    // Each part's postings of each scoring term, found once in its dictionary and read by
    // the statistics, the matching and the scoring alike (a one-word query over the
    // uncompacted segments of a busy attribute looked each up three times).
    let found: Vec<Vec<Option<&Postings>>> = parts
        .iter()
        .map(|(_, s)| terms.iter().map(|t| s.postings(a, t)).collect())
        .collect();
    let df: Vec<u64> = (0..terms.len())
        .map(|i| {
            parts
                .iter()
                .zip(&found)
                .filter_map(|((e, s), ps)| ps[i].map(|p| count_visible(e, s, p, &bounds)))
                .sum()
        })
        .collect();
    let scoring = Scoring::new(terms, &df, docs, total_len);
    let mut hits = Vec::new();
    for ((entry, seg), ps) in parts.iter().zip(&found) {
        let lookup = Lookup {
            seg,
            a,
            terms: &scoring.terms,
            found: ps,
        };
        let mut matched = matching(&lookup, query);
        if !(bounds.latest && entry.deleted.is_empty()) {
            matched
                .to_mut()
                .retain(|&l| is_visible(entry, seg, l, &bounds));
        }
        if matched.is_empty() {
            continue;
        }
        score_segment(seg, ps, &scoring, &matched, values, &mut hits);
    }
    Ok(hits)
}

/// Score one segment's matched documents (`matched`: local ids, increasing) into `hits`,
/// adding the scoring terms' contributions in the order of the scoring terms.
fn score_segment(
    seg: &Segment,
    found: &[Option<&Postings>],
    scoring: &Scoring,
    matched: &[u32],
    values: bool,
    hits: &mut Vec<Hit>,
) {
    hits.reserve(matched.len());
    if let [Some(p)] = found {
        // One scoring term holding every matched document (a one-word query): each
        // document's score is that term's contribution, found by a walk along both.
        let mut pi = 0;
        for &local in matched.iter() {
            pi = gallop(&p.docs, pi, |&d| d < local);
            let l = local as usize;
            let score = if p.docs.get(pi) == Some(&local) {
                scoring.term_score(0, p.tf(pi), seg.cols.len[l])
            } else {
                0.0
            };
            hits.push(Hit {
                e: seg.cols.e[l],
                value: values.then(|| seg.docs[l].value.clone()),
                tx: seg.cols.tx[l],
                score,
            });
        }
        return;
    }
    let mut scores = vec![0.0f64; matched.len()];
    // Many scoring terms (a prefix's): each term's postings find their documents'
    // places in `matched` through a table by local id instead of a merge apiece.
    let slots: Option<Vec<u32>> = (scoring.terms.len() > 2).then(|| {
        let mut slots = vec![u32::MAX; seg.docs.len()];
        for (k, &l) in matched.iter().enumerate() {
            slots[l as usize] = k as u32;
        }
        slots
    });
    for (i, p) in found.iter().enumerate() {
        let Some(p) = *p else {
            continue;
        };
        if let Some(slots) = &slots {
            for (pi, &l) in p.docs.iter().enumerate() {
                let k = slots[l as usize];
                if k != u32::MAX {
                    let len = seg.cols.len[l as usize];
                    scores[k as usize] += scoring.term_score(i, p.tf(pi), len);
                }
            }
            continue;
        }
        if p.docs.as_slice() == matched {
            // One term's documents (a one-word query): no merge needed.
            for (pi, s) in scores.iter_mut().enumerate() {
                *s += scoring.term_score(i, p.tf(pi), seg.cols.len[p.docs[pi] as usize]);
            }
            continue;
        }
        for_each_common(matched, &p.docs, |mi, pi| {
            let len = seg.cols.len[matched[mi] as usize];
            scores[mi] += scoring.term_score(i, p.tf(pi), len);
        });
    }
    for (&local, score) in matched.iter().zip(scores) {
        let l = local as usize;
        hits.push(Hit {
            e: seg.cols.e[l],
            value: values.then(|| seg.docs[l].value.clone()),
            tx: seg.cols.tx[l],
            score,
        });
    }
}

fn is_visible(entry: &Entry, seg: &Segment, local: u32, bounds: &ViewBounds) -> bool {
    if bounds.latest && entry.deleted.is_empty() {
        return true;
    }
    visible(seg.cols.tx[local as usize], entry.deleted_at(local), bounds)
}

fn count_visible(entry: &Entry, seg: &Segment, p: &Postings, bounds: &ViewBounds) -> u64 {
    if bounds.latest && entry.deleted.is_empty() {
        return p.docs.len() as u64;
    }
    p.docs
        .iter()
        .filter(|&&l| is_visible(entry, seg, l, bounds))
        .count() as u64
}

/// Documents and total length of attribute `a` in the view.
fn view_totals(parts: &[(&Entry, Arc<Segment>)], a: EntityId, bounds: &ViewBounds) -> (u64, u64) {
    let (mut n, mut len) = (0, 0);
    for (entry, seg) in parts {
        for (local, d) in seg.docs.iter().enumerate() {
            if d.a == a && is_visible(entry, seg, local as u32, bounds) {
                n += 1;
                len += u64::from(d.len);
            }
        }
    }
    (n, len)
}

/// The terms of `a` that the query's prefixes match, in every segment.
fn prefix_vocabulary<'s>(
    parts: &'s [(&Entry, Arc<Segment>)],
    a: EntityId,
    query: &FtQuery,
) -> Vec<&'s str> {
    let mut out = Vec::new();
    for atom in query.positive_atoms() {
        if let Atom::Prefix(p) = atom {
            for (_, seg) in parts {
                out.extend(seg.with_prefix(a, p).iter().map(|x| &*x.term));
            }
        }
    }
    out
}

/// One segment's postings of attribute `a`, through the scoring terms' ones already found.
struct Lookup<'s, 'q> {
    seg: &'s Segment,
    a: EntityId,
    /// The scoring terms, sorted, and their postings in this segment.
    terms: &'q [String],
    found: &'q [Option<&'s Postings>],
}

impl<'s> Lookup<'s, '_> {
    fn postings(&self, term: &str) -> Option<&'s Postings> {
        match self.terms.binary_search_by(|t| t.as_str().cmp(term)) {
            Ok(i) => self.found[i],
            Err(_) => self.seg.postings(self.a, term),
        }
    }
}

/// Local ids of the segment's documents of `a` that match the query (visibility aside),
/// increasing. A one-word query borrows the term's postings.
fn matching<'s>(seg: &Lookup<'s, '_>, query: &FtQuery) -> Cow<'s, [u32]> {
    if let [group] = query.groups.as_slice() {
        if let ([Atom::Term(t)], []) = (group.must.as_slice(), group.not.as_slice()) {
            return seg
                .postings(t)
                .map_or(Cow::Borrowed(&[]), |p| Cow::Borrowed(&p.docs));
        }
    }
    let mut out: Vec<u32> = Vec::new();
    for group in &query.groups {
        // The shortest list first: each intersection is then at most that long.
        let mut lists: Vec<Cow<'s, [u32]>> =
            group.must.iter().map(|atom| atom_docs(seg, atom)).collect();
        lists.sort_by_key(|l| l.len());
        let mut lists = lists.into_iter();
        let Some(first) = lists.next() else { continue };
        let mut docs = first.into_owned();
        for list in lists {
            if docs.is_empty() {
                break;
            }
            docs = intersect(&docs, &list);
        }
        for atom in &group.not {
            if docs.is_empty() {
                break;
            }
            docs = subtract(&docs, &atom_docs(seg, atom));
        }
        out = if out.is_empty() {
            docs
        } else {
            union(&out, &docs)
        };
    }
    Cow::Owned(out)
}

/// Local ids of the documents of `a` matching one atom, increasing.
fn atom_docs<'s>(seg: &Lookup<'s, '_>, atom: &Atom) -> Cow<'s, [u32]> {
    match atom {
        Atom::Term(t) => seg
            .postings(t)
            .map_or(Cow::Borrowed(&[]), |p| Cow::Borrowed(&p.docs)),
        Atom::Prefix(p) => {
            let mut out: Vec<u32> = seg
                .seg
                .with_prefix(seg.a, p)
                .iter()
                .flat_map(|postings| postings.docs.iter().copied())
                .collect();
            out.sort_unstable();
            out.dedup();
            Cow::Owned(out)
        }
        Atom::Phrase(words) => Cow::Owned(phrase_docs(seg, words)),
    }
}

fn phrase_docs(seg: &Lookup<'_, '_>, words: &[String]) -> Vec<u32> {
    let lists: Option<Vec<&Postings>> = words.iter().map(|w| seg.postings(w)).collect();
    let Some(lists) = lists else {
        return Vec::new();
    };
    let mut docs = lists[0].docs.clone();
    for p in &lists[1..] {
        docs = intersect(&docs, &p.docs);
    }
    // Every list holds every remaining document, in the same order: one cursor per list.
    let mut cursors = vec![0usize; lists.len()];
    let mut positions: Vec<&[u32]> = Vec::with_capacity(lists.len());
    docs.retain(|&doc| {
        positions.clear();
        for (p, c) in lists.iter().zip(cursors.iter_mut()) {
            *c += p.docs[*c..].partition_point(|&d| d < doc);
            positions.push(p.positions_of(*c));
        }
        positions[0].iter().any(|&start| {
            positions[1..]
                .iter()
                .enumerate()
                .all(|(k, ps)| ps.binary_search(&(start + k as u32 + 1)).is_ok())
        })
    });
    docs
}

/// Call `f(i, j)` for each `x[i] == y[j]` (both increasing).
fn for_each_common(x: &[u32], y: &[u32], mut f: impl FnMut(usize, usize)) {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                f(i, j);
                i += 1;
                j += 1;
            }
        }
    }
}

/// `x ∩ y`; when `x` is much shorter, each of its ids is found in `y` by galloping.
fn intersect(x: &[u32], y: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(x.len().min(y.len()));
    if x.len() * 16 < y.len() {
        let mut rest = y;
        for &v in x {
            let mut step = 1;
            while step < rest.len() && rest[step] < v {
                step *= 2;
            }
            let end = (step + 1).min(rest.len());
            let at = rest[..end].partition_point(|&w| w < v);
            rest = &rest[at..];
            if rest.first() == Some(&v) {
                out.push(v);
            }
        }
        return out;
    }
    for_each_common(x, y, |i, _| out.push(x[i]));
    out
}

fn subtract(x: &[u32], y: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(x.len());
    let mut j = 0;
    for &v in x {
        while j < y.len() && y[j] < v {
            j += 1;
        }
        if j == y.len() || y[j] != v {
            out.push(v);
        }
    }
    out
}

fn union(x: &[u32], y: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(x.len() + y.len());
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => {
                out.push(x[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(y[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(x[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&x[i..]);
    out.extend_from_slice(&y[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_set_operations() {
        assert_eq!(intersect(&[1, 3, 5, 7], &[3, 4, 7]), [3, 7]);
        let long: Vec<u32> = (0..1000).map(|i| i * 3).collect();
        assert_eq!(intersect(&[0, 4, 9, 2997, 3000], &long), [0, 9, 2997]);
        assert_eq!(intersect(&[], &long), Vec::<u32>::new());
        for target in 0..3005 {
            for from in [0, 1, 7, 500, 999, 1000] {
                let want = from
                    + long
                        .get(from..)
                        .map_or(0, |r| r.partition_point(|&d| d < target));
                assert_eq!(
                    gallop(&long, from, |&d| d < target),
                    want,
                    "from {from} target {target}"
                );
            }
        }
        assert_eq!(subtract(&[1, 3, 5, 7], &[3, 4, 7]), [1, 5]);
        assert_eq!(union(&[1, 3, 5], &[2, 3, 9]), [1, 2, 3, 5, 9]);
    }
}
