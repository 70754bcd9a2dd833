//! The search side of the `fulltext` benchmark: the query set against Vev, FTS5 and tantivy,
//! every matching document with its score, timed per query.
//!
//! Each engine gets the query in its own syntax (`FtQuerySpec`) and returns all of its
//! matches as `(id, score)` rows, materialized, as a caller would consume them: Vev through a
//! prepared Datalog query (`[(fulltext $ :doc/text ?q) ..]` joined to `:doc/id`), FTS5
//! through `SELECT rowid, bm25(docs) .. MATCH ?`, tantivy through a collector that keeps every
//! scored document with its id from the fast field. Timing as in the `query` suite: untimed
//! runs for at least `warmup` runs and `warmup_ms`, then up to `reps` timed runs, stopping
//! once they add up to `budget_ms` (never before 3).

use std::time::Instant;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::{BooleanQuery, Occur, PhraseQuery, Query, RegexQuery, TermQuery};
use tantivy::schema::IndexRecordOption;
use tantivy::tokenizer::TokenStream;
use tantivy::{DocId, Score, SegmentOrdinal, SegmentReader, Term};

use crate::error::BenchError;
use crate::fulltext_corpus::{Atom, FtQuerySpec};
use crate::fulltext_insert::TantivyIndex;
use crate::stats::ms;

/// Vev's search: every matching document's id and score.
pub const VEV_QUERY: &str = "[:find ?id ?score :in $ ?q \
     :where [(fulltext $ :doc/text ?q) [[?e _ _ ?score]]] [?e :doc/id ?id]]";

/// FTS5's search: every matching row's id and BM25 rank (FTS5's is negated: lower is better).
pub const FTS5_QUERY: &str = "SELECT rowid, bm25(docs) FROM docs WHERE docs MATCH ?1";

/// How long each query runs.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub warmup: usize,
    pub warmup_ms: u64,
    pub reps: usize,
    pub budget_ms: u64,
}

/// One query on one engine: its rows (from the last run) and the timed runs' ms.
pub struct Measured {
    pub rows: Vec<(u64, f64)>,
    pub samples_ms: Vec<f64>,
}

/// Run `search` as `timing` says; the rows of its last run.
pub fn measure(
    timing: &Timing,
    search: &mut dyn FnMut() -> Result<Vec<(u64, f64)>, BenchError>,
) -> Result<Measured, BenchError> {
    let start = Instant::now();
    let mut warm = 0;
    while warm < timing.warmup || ms(start.elapsed()) < timing.warmup_ms as f64 {
        search()?;
        warm += 1;
    }
    let mut samples_ms = Vec::with_capacity(timing.reps);
    let mut rows = Vec::new();
    let mut spent = 0.0;
    while samples_ms.len() < timing.reps.max(1)
        && (samples_ms.len() < 3 || spent < timing.budget_ms as f64)
    {
        let t = Instant::now();
        rows = search()?;
        let took = ms(t.elapsed());
        spent += took;
        samples_ms.push(took);
    }
    Ok(Measured { rows, samples_ms })
}

/// Vev's rows of one search on `db`.
pub fn vev_search(
    db: &vev::Db,
    query: &vev::Query,
    text: &str,
) -> Result<Vec<(u64, f64)>, BenchError> {
    let args = [vev::Edn::String(text.to_owned())];
    let result = db
        .q_prepared(query, &args, &vev::QueryOptions::default())
        .map_err(vev::Error::from)?;
    let vev::QueryResult::Rel(rows) = result else {
        return Err(BenchError::SearchRows);
    };
    rows.iter()
        .map(|row| match row {
            [vev::Edn::Integer(id), vev::Edn::Float(score)] => Ok((*id as u64, *score)),
            _ => Err(BenchError::SearchRows),
        })
        .collect()
}

/// FTS5's rows of one search.
pub fn fts5_search(conn: &rusqlite::Connection, text: &str) -> Result<Vec<(u64, f64)>, BenchError> {
    let mut st = conn.prepare_cached(FTS5_QUERY)?;
    let rows = st.query_map([text], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, f64>(1)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every matching document with its id (from the `id` fast field) and score.
pub struct AllMatches;

pub struct SegmentMatches {
    ids: tantivy::columnar::Column<u64>,
    rows: Vec<(u64, f64)>,
}

impl Collector for AllMatches {
    type Fruit = Vec<(u64, f64)>;
    type Child = SegmentMatches;

    fn for_segment(
        &self,
        _segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SegmentMatches> {
        Ok(SegmentMatches {
            ids: reader.fast_fields().u64("id")?,
            rows: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(u64, f64)>>) -> tantivy::Result<Vec<(u64, f64)>> {
        Ok(fruits.concat())
    }
}

impl SegmentCollector for SegmentMatches {
    type Fruit = Vec<(u64, f64)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        // Every document has an id: the writer sets it on each.
        let id = self.ids.first(doc).unwrap_or(u64::MAX);
        self.rows.push((id, f64::from(score)));
    }

    fn harvest(self) -> Vec<(u64, f64)> {
        self.rows
    }
}

/// tantivy's query for `spec`: each atom through the field's own analyzer (so `Beyoncé`
/// becomes `beyonce` as it did in the documents); a group is a `BooleanQuery` of `Must` and
/// `MustNot` clauses, several groups are `Should` clauses. A prefix is a `RegexQuery`
/// (`lov.*`), which tantivy scores as a constant, unlike Vev's BM25 over the expanded terms.
pub fn tantivy_query(t: &TantivyIndex, spec: &FtQuerySpec) -> Result<Box<dyn Query>, BenchError> {
    let mut analyzer = t.index.tokenizer_for_field(t.text)?;
    let mut tokens = |text: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut stream = analyzer.token_stream(text);
        while let Some(token) = stream.next() {
            out.push(token.text.clone());
        }
        out
    };
    let mut atom = |a: &Atom| -> Result<Box<dyn Query>, BenchError> {
        Ok(match a {
            Atom::Term(w) | Atom::Phrase(w) => {
                let mut ts: Vec<Term> = tokens(w)
                    .iter()
                    .map(|w| Term::from_field_text(t.text, w))
                    .collect();
                if ts.len() == 1 {
                    Box::new(TermQuery::new(ts.remove(0), IndexRecordOption::WithFreqs))
                } else {
                    Box::new(PhraseQuery::new(ts))
                }
            }
            Atom::Prefix(p) => {
                let folded = tokens(p).concat();
                Box::new(RegexQuery::from_pattern(&format!("{folded}.*"), t.text)?)
            }
        })
    };
    let mut groups: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for g in &spec.groups {
        let mut clauses = Vec::new();
        for a in &g.must {
            clauses.push((Occur::Must, atom(a)?));
        }
        for a in &g.not {
            clauses.push((Occur::MustNot, atom(a)?));
        }
        groups.push((Occur::Should, Box::new(BooleanQuery::new(clauses))));
    }
    Ok(if groups.len() == 1 {
        groups.remove(0).1
    } else {
        Box::new(BooleanQuery::new(groups))
    })
}

/// FNV-1a (64 bits) of `rows` sorted by id, each as `id:score` with the score rounded to
/// 1e-9: the same rows with the same scores give the same digest.
pub fn digest(rows: &[(u64, f64)]) -> u64 {
    let mut sorted: Vec<(u64, i64)> = rows
        .iter()
        .map(|&(id, score)| (id, (score * 1e9).round() as i64))
        .collect();
    sorted.sort_unstable();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (id, score) in sorted {
        for byte in format!("{id}:{score};").bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fulltext_corpus as corpus;
    use crate::fulltext_insert::{self as insert, Peer, Writer};

    fn sorted_ids(rows: &[(u64, f64)]) -> Vec<u64> {
        let mut ids: Vec<u64> = rows.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        ids
    }

    /// The query set's translations mean the same in the three engines: on a small corpus
    /// each query finds the same documents in Vev, FTS5 and tantivy, and finds some.
    #[test]
    fn engines_agree_on_the_query_set() {
        let c = corpus::generate(corpus::SEED, 1_500);
        let docs: Vec<(u64, &str)> = c
            .texts
            .iter()
            .enumerate()
            .map(|(i, t)| (corpus::Corpus::id(i), t.as_str()))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let open = |peer: Peer| {
            let mut w = insert::open(peer, &insert::dir_of(dir.path(), peer, 500)).unwrap();
            for chunk in docs.chunks(500) {
                w.write(chunk).unwrap();
            }
            w
        };
        let (Writer::Vev(vev), Writer::Fts5(fts5), Writer::Tantivy(t)) = (
            open(Peer::VevFulltext),
            open(Peer::Fts5),
            open(Peer::Tantivy),
        ) else {
            panic!("each peer has its own kind of writer");
        };
        let db = vev.db();
        let prepared = vev::Query::parse(VEV_QUERY).unwrap();
        let reader = t.index.index.reader().unwrap();
        let searcher = reader.searcher();
        for spec in corpus::query_set(&c) {
            let v = sorted_ids(&vev_search(&db, &prepared, &spec.vev_text()).unwrap());
            let f = sorted_ids(&fts5_search(&fts5, &spec.fts5_text()).unwrap());
            let query = tantivy_query(&t.index, &spec).unwrap();
            let tv = sorted_ids(&searcher.search(query.as_ref(), &AllMatches).unwrap());
            assert!(!v.is_empty(), "{}: no match", spec.name);
            assert_eq!(v, f, "{}: Vev and FTS5", spec.name);
            assert_eq!(v, tv, "{}: Vev and tantivy", spec.name);
        }
    }

    #[test]
    fn digest_ignores_order_and_sub_nanounit_noise() {
        let a = [(2, 1.5), (1, 0.25)];
        let b = [(1, 0.25 + 1e-12), (2, 1.5)];
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&[(1, 0.25), (2, 1.500_001)]));
        assert_ne!(digest(&a), digest(&[(1, 0.25)]));
    }
}
