//! `vev-bench fulltext`: full-text indexing and search in Vev against SQLite FTS5 and
//! tantivy (issue 19).
//!
//! One process, phases one after the other, every file in one scratch directory under the
//! system temp dir, removed at the end:
//! 1. inserts: for each batch size (1, 10, 100, 500 documents per transaction), each peer
//!    (`fulltext_insert::Peer`) writes the first `min(docs, max_txs × batch)` documents of
//!    the corpus into a fresh database, one durable transaction per batch, each timed. After
//!    the batch-1 run of Vev with full text, a delete-only transaction (the text of three
//!    documents retracted) checks that the counters do not move and that the documents stop
//!    matching;
//!    Each database is closed (and measured) and removed after its run;
//! 2. search: fresh databases of Vev with full text, FTS5 and tantivy get the whole corpus,
//!    untimed, in transactions of the largest batch size, and answer the query set
//!    (`fulltext_search`); Vev three times: as written, after `compact`, and after closing
//!    and reopening the file, with a digest of each state's rows.

use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::fulltext_corpus::{self as corpus, FtQuerySpec};
use crate::fulltext_insert::{self as insert, InsertRun, Peer, Writer};
use crate::fulltext_search::{self as search, Measured, Timing};
use crate::fulltext_vev::{self as ftv, FulltextStats, StatsExt};
use crate::report::Machine;

/// What `vev-bench fulltext` runs.
pub struct FulltextConfig {
    pub docs: usize,
    pub batches: Vec<usize>,
    pub max_txs: usize,
    pub timing: Timing,
}

/// The delete-only transaction's check.
pub struct DeleteCheck {
    pub ids: Vec<u64>,
    /// The counters' growth over the delete-only transaction.
    pub stats: FulltextStats,
    /// Of `ids`, how many a search for a word of their text found before and after.
    pub matched_before: usize,
    pub matched_after: usize,
}

/// One query's results on every engine.
pub struct QueryRun {
    pub spec: FtQuerySpec,
    /// Vev as written, after compaction, after reopening.
    pub vev: [Measured; 3],
    pub fts5: Measured,
    pub tantivy: Measured,
}

pub struct FulltextResults {
    pub machine: Machine,
    pub cfg: FulltextConfig,
    pub inserts: Vec<InsertRun>,
    pub delete: Option<DeleteCheck>,
    pub search_docs: usize,
    pub queries: Vec<QueryRun>,
    /// Vev's counters on the search database, as written and after compaction.
    pub search_stats: [FulltextStats; 2],
}

/// Run the benchmark.
pub fn run(cfg: FulltextConfig) -> Result<FulltextResults, BenchError> {
    assert!(
        cfg.docs > 0 && cfg.max_txs > 0 && cfg.batches.iter().all(|&b| b > 0),
        "--docs, --max-txs and the batch sizes must be positive"
    );
    let mut machine = Machine::probe();
    eprintln!("generating {} documents", cfg.docs);
    let corpus = corpus::generate(corpus::SEED, cfg.docs);
    let docs: Vec<(u64, &str)> = corpus
        .texts
        .iter()
        .enumerate()
        .map(|(i, t)| (corpus::Corpus::id(i), t.as_str()))
        .collect();
    let scratch = tempfile::Builder::new()
        .prefix("vev-bench-fulltext-")
        .tempdir()
        .map_err(BenchError::io("create", std::env::temp_dir()))?;
    let (inserts, delete) = run_inserts(&cfg, &docs, scratch.path())?;
    let largest = cfg.batches.iter().copied().max().unwrap_or(1);
    let dbs = build_search_dbs(&docs, scratch.path(), largest)?;
    let specs = corpus::query_set(&corpus);
    let (queries, search_stats) = run_searches(&cfg.timing, dbs, &specs)?;
    machine.finish();
    Ok(FulltextResults {
        machine,
        search_docs: docs.len(),
        cfg,
        inserts,
        delete,
        queries,
        search_stats,
    })
}

/// The search databases: Vev with full text, FTS5 and tantivy, each holding the whole corpus.
struct SearchDbs {
    vev_path: PathBuf,
    vev: vev::Connection,
    fts5: rusqlite::Connection,
    tantivy: insert::TantivyIndex,
}

/// Every peer at every batch size, each in a fresh database, closed and removed afterwards.
fn run_inserts(
    cfg: &FulltextConfig,
    docs: &[(u64, &str)],
    root: &Path,
) -> Result<(Vec<InsertRun>, Option<DeleteCheck>), BenchError> {
    let smallest = cfg.batches.iter().copied().min().unwrap_or(1);
    let mut runs = Vec::new();
    let mut delete = None;
    for &batch in &cfg.batches {
        let n = docs.len().min(cfg.max_txs.saturating_mul(batch));
        for peer in Peer::ALL {
            eprintln!(
                "insert: {} in transactions of {batch} ({n} documents)",
                peer.label()
            );
            let dir = insert::dir_of(root, peer, batch);
            let mut writer = insert::open(peer, &dir)?;
            let mut run = insert::run(&mut writer, peer, batch, &docs[..n])?;
            if peer == Peer::VevFulltext && batch == smallest {
                if let Writer::Vev(conn) = &writer {
                    delete = Some(delete_only(conn, &docs[..n])?);
                }
            }
            insert::close(writer, &dir, &mut run)?;
            std::fs::remove_dir_all(&dir).map_err(BenchError::io("remove", &dir))?;
            runs.push(run);
        }
    }
    Ok((runs, delete))
}

/// The search databases, written untimed in transactions of `batch` documents (tantivy's
/// merges then finished).
fn build_search_dbs(
    docs: &[(u64, &str)],
    root: &Path,
    batch: usize,
) -> Result<SearchDbs, BenchError> {
    let dir = |peer: Peer| insert::dir_of(&root.join("search"), peer, batch);
    let open = |peer: Peer| -> Result<Writer, BenchError> {
        eprintln!("search: building the {} database", peer.label());
        let mut writer = insert::open(peer, &dir(peer))?;
        for chunk in docs.chunks(batch) {
            writer.write(chunk)?;
        }
        Ok(writer)
    };
    let (Writer::Vev(vev), Writer::Fts5(fts5), Writer::Tantivy(tantivy)) = (
        open(Peer::VevFulltext)?,
        open(Peer::Fts5)?,
        open(Peer::Tantivy)?,
    ) else {
        unreachable!("insert::open gives each peer its own kind of writer");
    };
    let insert::TantivyWriter { index, writer } = *tantivy;
    writer.wait_merging_threads()?;
    Ok(SearchDbs {
        vev_path: dir(Peer::VevFulltext).join(insert::VEV_FILE),
        vev,
        fts5,
        tantivy: index,
    })
}

/// EDN's string literal of `s`.
fn edn_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Retract the text of up to three documents (ids 7, 8, 9, or the first ones of a smaller
/// run) in one transaction; see `DeleteCheck`.
fn delete_only(conn: &vev::Connection, docs: &[(u64, &str)]) -> Result<DeleteCheck, BenchError> {
    let start = docs.len().saturating_sub(3).min(6);
    let targets = &docs[start..docs.len().min(start + 3)];
    let ids: Vec<u64> = targets.iter().map(|d| d.0).collect();
    let query = vev::Query::parse(search::VEV_QUERY).map_err(vev::Error::from)?;
    let matched = |conn: &vev::Connection| -> Result<usize, BenchError> {
        let db = conn.db();
        let mut found = 0;
        for &(id, text) in targets {
            let word: String = text
                .split(' ')
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| c.is_alphanumeric())
                .collect();
            let rows = search::vev_search(&db, &query, &word)?;
            found += usize::from(rows.iter().any(|r| r.0 == id));
        }
        Ok(found)
    };
    let matched_before = matched(conn)?;
    let tx: Vec<String> = targets
        .iter()
        .map(|&(id, text)| {
            format!(
                "[:db/retract [:doc/id {id}] :doc/text {}]",
                edn_string(text)
            )
        })
        .collect();
    let before = ftv::stats(conn);
    conn.transact_edn(&format!("[{}]", tx.join("\n")))?;
    let stats = ftv::stats(conn).since(&before);
    Ok(DeleteCheck {
        ids,
        stats,
        matched_before,
        matched_after: matched(conn)?,
    })
}

/// The query set on every engine; Vev in its three states.
fn run_searches(
    timing: &Timing,
    dbs: SearchDbs,
    specs: &[FtQuerySpec],
) -> Result<(Vec<QueryRun>, [FulltextStats; 2]), BenchError> {
    let SearchDbs {
        vev_path,
        vev: conn,
        fts5,
        tantivy: index,
    } = dbs;
    let reader = index
        .index
        .reader_builder()
        .reload_policy(tantivy::ReloadPolicy::Manual)
        .try_into()?;
    let searcher = reader.searcher();
    let mut others = Vec::with_capacity(specs.len());
    for spec in specs {
        eprintln!("search: FTS5 and tantivy: {}", spec.name);
        let fts5_text = spec.fts5_text();
        let fts5_run = search::measure(timing, &mut || search::fts5_search(&fts5, &fts5_text))?;
        let query = search::tantivy_query(&index, spec)?;
        let tantivy_run = search::measure(timing, &mut || {
            Ok(searcher.search(query.as_ref(), &search::AllMatches)?)
        })?;
        others.push((fts5_run, tantivy_run));
    }
    let prepared = vev::Query::parse(search::VEV_QUERY).map_err(vev::Error::from)?;
    let vev_states = |conn: &vev::Connection, state: &str| -> Result<Vec<Measured>, BenchError> {
        let db = conn.db();
        specs
            .iter()
            .map(|spec| {
                eprintln!("search: Vev {state}: {}", spec.name);
                let text = spec.vev_text();
                search::measure(timing, &mut || search::vev_search(&db, &prepared, &text))
            })
            .collect()
    };
    let written = vev_states(&conn, "as written")?;
    let stats_written = ftv::stats(&conn);
    ftv::compact(&conn)?;
    let stats_compacted = ftv::stats(&conn);
    let compacted = vev_states(&conn, "after compaction")?;
    drop(conn);
    let reopened = vev_states(&ftv::open(&vev_path, None)?, "after reopening")?;
    let queries = specs
        .iter()
        .zip(others)
        .zip(written.into_iter().zip(compacted).zip(reopened))
        .map(|((spec, (fts5, tantivy)), ((w, c), r))| QueryRun {
            spec: spec.clone(),
            vev: [w, c, r],
            fts5,
            tantivy,
        })
        .collect();
    Ok((queries, [stats_written, stats_compacted]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edn_strings_escape() {
        assert_eq!(edn_string(r#"a "b" \c"#), r#""a \"b\" \\c""#);
    }
}
