//! Full-text search: the analyzer, the query grammar, BM25 scoring, and the reference search.
//!
//! Everything here is pure: the index itself lives beside the database's covering indexes
//! (`vev-db`'s `fulltext` module), and reaches the engine through [`Source::fulltext`]. This
//! module states once what a search means, so the index and the reference agree by
//! construction:
//! - which documents there are: the values of the attribute that the source's view shows
//!   (the current values, those as of a time, since a time, or every assertion in a
//!   history view), each with the entity and the transaction that asserted it;
//! - which documents match ([`FtQuery`] and [`matches()`]);
//! - their scores ([`Scoring`]): BM25 with statistics (document count, average length,
//!   document frequency of each term) over those same documents of the attribute, so a
//!   score depends only on the view, never on how the index happens to be divided into
//!   segments.
//!
//! [`scan_search`] is the reference: it reads every value of the attribute through the
//! source's scans and analyzes each. The naive query plan uses it, and the differential
//! tests compare the index with it (same rows, same scores).

pub mod analyze;
mod parse;

use vev_core::{Component, EntityId, IndexOrder, Value};

pub use parse::{Atom, FtQuery, Group, QUERY_CHARS_MAX};

use crate::source::Source;

/// Why a full-text search could not run. Each variant has a stable [`code`](Self::code).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FulltextError {
    /// The query text does not parse.
    #[error("invalid full-text query {query:?} at position {position}: {reason}")]
    InvalidQuery {
        /// The query text.
        query: String,
        /// The offending character's position (0-based, in characters).
        position: usize,
        /// What is wrong there.
        reason: String,
    },
    /// The attribute is not full-text indexed.
    #[error("attribute {attr} is not full-text indexed (it needs :db/fulltext true)")]
    NotIndexed {
        /// The attribute's ident.
        attr: String,
    },
}

impl FulltextError {
    /// The stable code: `fulltext/invalid-query` or `fulltext/not-indexed`.
    pub fn code(&self) -> &'static str {
        match self {
            FulltextError::InvalidQuery { .. } => "fulltext/invalid-query",
            FulltextError::NotIndexed { .. } => "fulltext/not-indexed",
        }
    }
}

/// One matching document: the entity, the value, the transaction that asserted it, and its
/// score.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The entity whose value matched.
    pub e: EntityId,
    /// The value (the document's text), when the search was asked for values.
    pub value: Option<vev_core::SmolStr>,
    /// The transaction that asserted the value.
    pub tx: EntityId,
    /// Its BM25 score (higher is better).
    pub score: f64,
}

/// BM25's term-frequency saturation.
pub const BM25_K1: f64 = 1.2;
/// BM25's length normalization.
pub const BM25_B: f64 = 0.75;

/// The statistics a search scores with, over the documents the view shows of one attribute.
#[derive(Clone, Debug)]
pub struct Scoring {
    /// The terms that score, sorted and distinct: each term and phrase word of the query's
    /// positive atoms, and each term in the documents that a positive prefix matches.
    pub terms: Vec<String>,
    /// The inverse document frequency of each of `terms`.
    pub idf: Vec<f64>,
    /// Documents of the attribute in the view.
    pub docs: u64,
    /// Their average length in terms.
    pub avg_len: f64,
    /// `length_norm` of the short lengths, computed once.
    norms: Vec<f64>,
}

/// Lengths below this have their `Scoring::length_norm` in a table.
const NORM_TABLE: u32 = 128;

impl Scoring {
    /// The statistics from counts: `df[i]` documents contain `terms[i]`; `docs` documents
    /// hold `total_len` terms in all.
    pub fn new(terms: Vec<String>, df: &[u64], docs: u64, total_len: u64) -> Scoring {
        let idf = df
            .iter()
            .map(|&df| ((docs as f64 - df as f64 + 0.5) / (df as f64 + 0.5)).ln_1p())
            .collect();
        let avg_len = if docs == 0 {
            0.0
        } else {
            total_len as f64 / docs as f64
        };
        let mut scoring = Scoring {
            terms,
            idf,
            docs,
            avg_len,
            norms: Vec::new(),
        };
        scoring.norms = (0..NORM_TABLE).map(|n| scoring.norm_of(n)).collect();
        scoring
    }

    /// BM25's length normalization of a document of `len` terms: `k1 (1 - b + b len/avg)`.
    #[inline]
    pub fn length_norm(&self, len: u32) -> f64 {
        match self.norms.get(len as usize) {
            Some(n) => *n,
            None => self.norm_of(len),
        }
    }

    fn norm_of(&self, len: u32) -> f64 {
        let norm = if self.avg_len > 0.0 {
            f64::from(len) / self.avg_len
        } else {
            1.0
        };
        BM25_K1 * (1.0 - BM25_B + BM25_B * norm)
    }

    /// What term `i` adds to the score of a document of `len` terms that holds it `tf`
    /// times. A document's score is the sum of these over the terms it holds, added in the
    /// order of `terms` (so every implementation gets the same floating-point result).
    #[inline]
    pub fn term_score(&self, i: usize, tf: u32, len: u32) -> f64 {
        self.term_score_normed(i, tf, self.length_norm(len))
    }

    /// `term_score` with the document's `length_norm` given.
    #[inline]
    pub fn term_score_normed(&self, i: usize, tf: u32, length_norm: f64) -> f64 {
        let tf = f64::from(tf);
        self.idf[i] * tf * (BM25_K1 + 1.0) / (tf + length_norm)
    }
}

/// The scoring terms of a query whose prefixes expand against `vocabulary` (any iterator of
/// terms, repeats allowed): sorted and distinct.
pub fn scoring_terms<'a>(
    query: &FtQuery,
    vocabulary: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut prefixes: Vec<&str> = Vec::new();
    for atom in query.positive_atoms() {
        match atom {
            Atom::Term(t) => out.push(t.clone()),
            Atom::Phrase(ws) => out.extend(ws.iter().cloned()),
            Atom::Prefix(p) => prefixes.push(p),
        }
    }
    if !prefixes.is_empty() {
        for term in vocabulary {
            if prefixes.iter().any(|p| term.starts_with(p)) {
                out.push(term.to_owned());
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a document whose terms are `terms` (in position order) matches the query.
pub fn matches(query: &FtQuery, terms: &[String]) -> bool {
    let has = |atom: &Atom| match atom {
        Atom::Term(t) => terms.iter().any(|x| x == t),
        Atom::Prefix(p) => terms.iter().any(|x| x.starts_with(p.as_str())),
        Atom::Phrase(ws) => terms.windows(ws.len()).any(|w| w == ws.as_slice()),
    };
    query
        .groups
        .iter()
        .any(|g| g.must.iter().all(has) && !g.not.iter().any(has))
}

/// The reference search: every value of attribute `a` the source's view shows (assertions
/// only, in a history view), analyzed one by one, matched and scored by the definitions
/// above.
pub fn scan_search<S: Source + ?Sized>(src: &S, a: EntityId, query: &FtQuery) -> Vec<Hit> {
    let mut docs: Vec<(EntityId, vev_core::SmolStr, EntityId)> = Vec::new();
    src.scan(IndexOrder::Aevt, &[Component::Entity(a)], &mut |d| {
        if let (true, Value::String(s)) = (d.added, &d.v) {
            docs.push((d.e, s.clone(), d.tx));
        }
        true
    });
    search_documents(&docs, query)
}

/// The reference search over a list of documents `(entity, text, tx)`.
pub fn search_documents(
    docs: &[(EntityId, vev_core::SmolStr, EntityId)],
    query: &FtQuery,
) -> Vec<Hit> {
    let analyzed: Vec<Vec<String>> = docs.iter().map(|d| analyze::terms(&d.1)).collect();
    let total_len: u64 = analyzed.iter().map(|t| t.len() as u64).sum();
    let terms = scoring_terms(query, analyzed.iter().flatten().map(String::as_str));
    let df: Vec<u64> = terms
        .iter()
        .map(|t| analyzed.iter().filter(|d| d.contains(t)).count() as u64)
        .collect();
    let scoring = Scoring::new(terms, &df, docs.len() as u64, total_len);
    let mut hits = Vec::new();
    for (doc, doc_terms) in docs.iter().zip(&analyzed) {
        if !matches(query, doc_terms) {
            continue;
        }
        let len = doc_terms.len() as u32;
        let mut score = 0.0;
        for (i, term) in scoring.terms.iter().enumerate() {
            let tf = doc_terms.iter().filter(|x| *x == term).count() as u32;
            if tf > 0 {
                score += scoring.term_score(i, tf, len);
            }
        }
        hits.push(Hit {
            e: doc.0,
            value: Some(doc.1.clone()),
            tx: doc.2,
            score,
        });
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(texts: &[&str]) -> Vec<(EntityId, vev_core::SmolStr, EntityId)> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64 + 1, vev_core::SmolStr::new(t), 100))
            .collect()
    }

    fn hit_ids(texts: &[&str], q: &str) -> Vec<u64> {
        let mut ids: Vec<u64> = search_documents(&docs(texts), &FtQuery::parse(q).unwrap())
            .iter()
            .map(|h| h.e)
            .collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn boolean_matching() {
        let texts = [
            "Crazy in Love",
            "Love Me Do",
            "Always on my mind",
            "Crazy little thing called love",
            "Intro",
        ];
        assert_eq!(hit_ids(&texts, "love"), [1, 2, 4]);
        assert_eq!(hit_ids(&texts, "love crazy"), [1, 4]);
        assert_eq!(hit_ids(&texts, "\"crazy in\""), [1]);
        assert_eq!(hit_ids(&texts, "love -crazy"), [2]);
        assert_eq!(hit_ids(&texts, "alw* OR intro"), [3, 5]);
        assert_eq!(hit_ids(&texts, "\"love crazy\""), Vec::<u64>::new());
    }

    #[test]
    fn scores_follow_bm25() {
        let texts = ["love love", "love song here now", "other"];
        let hits = search_documents(&docs(&texts), &FtQuery::parse("love").unwrap());
        assert_eq!(hits.len(), 2);
        // n = 3, df = 2: idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)).
        let idf = (1.5f64 / 2.5).ln_1p();
        let avg = 7.0 / 3.0;
        let s = |tf: f64, len: f64| idf * tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * len / avg));
        assert!((hits[0].score - s(2.0, 2.0)).abs() < 1e-12);
        assert!((hits[1].score - s(1.0, 4.0)).abs() < 1e-12);
        assert!(hits[0].score > hits[1].score);
    }
}
