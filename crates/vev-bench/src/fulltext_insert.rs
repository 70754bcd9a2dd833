//! The insert side of the `fulltext` benchmark: one writer per peer, each on a fresh
//! database in its own directory, timed per transaction (write batch, commit).
//!
//! Each peer's transaction is durable when its clock stops: Vev's `transact` (WAL,
//! `synchronous=FULL`, one log row per transaction); FTS5's `BEGIN IMMEDIATE` .. `COMMIT`
//! with the same pragmas; tantivy's `add_document`s then `commit()`, which writes the new
//! segment's files and `meta.json` and syncs them. The documents are turned into each
//! engine's input (Vev's `TxOp`s, tantivy's documents) before the clock starts, as an
//! embedding application would hold them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, STORED};
use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, SimpleTokenizer, TextAnalyzer};
use tantivy::{Index, IndexWriter, TantivyDocument};
use vev::{Connection, TxMap, TxOp};

use crate::error::BenchError;
use crate::fulltext_vev::{self as ftv, FulltextStats, StatsExt};
use crate::stats::us;

/// Vev's schema for the corpus, with or without `:db/fulltext` on `:doc/text`.
pub fn vev_schema(fulltext: bool) -> String {
    format!(
        "[{{:db/ident :doc/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}}
          {{:db/ident :doc/text :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/fulltext {fulltext}}}]"
    )
}

/// FTS5's table: the text with unicode61 (lower case, diacritics removed), the id its rowid.
pub const FTS5_SCHEMA: &str =
    "CREATE VIRTUAL TABLE docs USING fts5(text, tokenize='unicode61 remove_diacritics 2')";

/// Vev's database file in a peer's directory.
pub const VEV_FILE: &str = "docs.vev";

/// The name tantivy's folding analyzer is registered under.
pub const TANTIVY_TOKENIZER: &str = "fold";

/// The engines the benchmark writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Vev, `:doc/text` without `:db/fulltext`.
    VevPlain,
    /// Vev, `:doc/text` with `:db/fulltext true`.
    VevFulltext,
    /// The same, with a synthetic 1 ms delay on each full-text segment write.
    VevFulltextDelay,
    Fts5,
    Tantivy,
}

impl Peer {
    pub const ALL: [Peer; 5] = [
        Peer::VevPlain,
        Peer::VevFulltext,
        Peer::VevFulltextDelay,
        Peer::Fts5,
        Peer::Tantivy,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Peer::VevPlain => "Vev, no full text",
            Peer::VevFulltext => "Vev, :db/fulltext",
            Peer::VevFulltextDelay => "Vev, :db/fulltext, 1 ms per segment write",
            Peer::Fts5 => "SQLite FTS5",
            Peer::Tantivy => "tantivy",
        }
    }

    fn dir_name(self) -> &'static str {
        match self {
            Peer::VevPlain => "vev-plain",
            Peer::VevFulltext => "vev-fulltext",
            Peer::VevFulltextDelay => "vev-fulltext-delay",
            Peer::Fts5 => "fts5",
            Peer::Tantivy => "tantivy",
        }
    }

    pub fn is_vev_fulltext(self) -> bool {
        matches!(self, Peer::VevFulltext | Peer::VevFulltextDelay)
    }
}

/// The synthetic delay of the delay mode.
pub const SEGMENT_WRITE_DELAY: Duration = Duration::from_millis(1);

/// tantivy's index: the schema's two fields and the folding analyzer registered.
pub struct TantivyIndex {
    pub index: Index,
    pub id: tantivy::schema::Field,
    pub text: tantivy::schema::Field,
}

impl TantivyIndex {
    fn create(dir: &Path) -> Result<TantivyIndex, BenchError> {
        let mut schema = Schema::builder();
        let indexing = TextFieldIndexing::default()
            .set_tokenizer(TANTIVY_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions);
        let text = schema.add_text_field(
            "text",
            TextOptions::default()
                .set_indexing_options(indexing)
                .set_stored(),
        );
        let id = schema.add_u64_field("id", FAST | STORED);
        let index = Index::create_in_dir(dir, schema.build())?;
        Self::register(&index);
        Ok(TantivyIndex { index, id, text })
    }

    /// SimpleTokenizer (runs of alphanumerics), lower case, diacritics folded to ASCII.
    fn register(index: &Index) {
        let analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(LowerCaser)
            .filter(AsciiFoldingFilter)
            .build();
        index.tokenizers().register(TANTIVY_TOKENIZER, analyzer);
    }
}

/// tantivy's index and its writer.
pub struct TantivyWriter {
    pub index: TantivyIndex,
    pub writer: IndexWriter,
}

/// An open database of one peer.
pub enum Writer {
    Vev(Connection),
    Fts5(rusqlite::Connection),
    /// Boxed: the writer is large.
    Tantivy(Box<TantivyWriter>),
}

/// A peer's database in `dir`, created fresh, with the schema in place.
pub fn open(peer: Peer, dir: &Path) -> Result<Writer, BenchError> {
    std::fs::create_dir_all(dir).map_err(BenchError::io("create", dir))?;
    Ok(match peer {
        Peer::VevPlain | Peer::VevFulltext | Peer::VevFulltextDelay => {
            let delay = (peer == Peer::VevFulltextDelay).then_some(SEGMENT_WRITE_DELAY);
            let conn = ftv::open(&dir.join(VEV_FILE), delay)?;
            conn.transact_edn(&vev_schema(peer != Peer::VevPlain))?;
            Writer::Vev(conn)
        }
        Peer::Fts5 => {
            let conn = rusqlite::Connection::open(dir.join("docs.sqlite"))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.execute_batch(FTS5_SCHEMA)?;
            Writer::Fts5(conn)
        }
        Peer::Tantivy => {
            let index = TantivyIndex::create(dir)?;
            // One indexing thread: one new segment per commit, as Vev writes one per
            // transaction (more threads would split each commit into several segments).
            let writer = index.index.writer_with_num_threads(1, 50_000_000)?;
            Writer::Tantivy(Box::new(TantivyWriter { index, writer }))
        }
    })
}

/// The directory of `peer`'s database for batches of `batch` documents.
pub fn dir_of(root: &Path, peer: Peer, batch: usize) -> PathBuf {
    root.join(format!("{}-{batch}", peer.dir_name()))
}

impl Writer {
    /// Write `docs` (`(id, text)`) as one durable transaction; its µs.
    pub fn write(&mut self, docs: &[(u64, &str)]) -> Result<f64, BenchError> {
        match self {
            Writer::Vev(conn) => {
                let ops: Vec<TxOp> = docs
                    .iter()
                    .map(|&(id, text)| {
                        TxOp::Map(
                            TxMap::new(None)
                                .with("doc/id", id as i64)
                                .with("doc/text", text),
                        )
                    })
                    .collect();
                let start = Instant::now();
                drop(conn.transact(&ops)?);
                Ok(us(start.elapsed()))
            }
            Writer::Fts5(conn) => {
                let start = Instant::now();
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                {
                    let mut st =
                        tx.prepare_cached("INSERT INTO docs (rowid, text) VALUES (?1, ?2)")?;
                    for &(id, text) in docs {
                        st.execute(rusqlite::params![id as i64, text])?;
                    }
                }
                tx.commit()?;
                Ok(us(start.elapsed()))
            }
            Writer::Tantivy(t) => {
                let TantivyWriter { index, writer } = t.as_mut();
                let batch: Vec<TantivyDocument> = docs
                    .iter()
                    .map(|&(id, text)| tantivy::doc!(index.id => id, index.text => text))
                    .collect();
                let start = Instant::now();
                for doc in batch {
                    writer.add_document(doc)?;
                }
                writer.commit()?;
                Ok(us(start.elapsed()))
            }
        }
    }

    /// Vev's full-text counters (zero for the other peers).
    pub fn fulltext_stats(&self) -> FulltextStats {
        match self {
            Writer::Vev(conn) => ftv::stats(conn),
            _ => FulltextStats::default(),
        }
    }
}

/// Bytes of every file under `dir` (recursively).
pub fn dir_bytes(dir: &Path) -> Result<u64, BenchError> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(BenchError::io("list", dir))? {
        let entry = entry.map_err(BenchError::io("list", dir))?;
        let meta = entry
            .metadata()
            .map_err(BenchError::io("stat", entry.path()))?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Bytes this process has handed to `write` and friends so far, all threads (tantivy writes
/// from its indexing and merging threads): `wchar` of `/proc/self/io`.
pub fn written_bytes() -> Result<u64, BenchError> {
    let path = "/proc/self/io";
    let text = std::fs::read_to_string(path).map_err(BenchError::io("read", path))?;
    text.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(BenchError::StatusField { name: "wchar" })
}

/// One peer at one batch size.
pub struct InsertRun {
    pub peer: Peer,
    pub batch: usize,
    pub txs: usize,
    pub docs: usize,
    pub samples_us: Vec<f64>,
    /// The database directory's size once closed (Vev's checkpoint on close and FTS5's WAL
    /// checkpoint done, tantivy's merges finished): what stays on disk.
    pub closed_bytes: u64,
    /// Bytes written through `write` calls by the transactions and the close (all files, all
    /// threads), WAL and checkpoint copies included.
    pub written_bytes: u64,
    /// Vev with full text: the counters' growth over the run.
    pub stats: FulltextStats,
    /// Vev with full text: transactions that did not add exactly one segment and one
    /// manifest entry.
    pub irregular_txs: usize,
}

/// Insert `docs` into `writer` in transactions of `batch`. `closed_bytes` is left zero and
/// `written_bytes` covers the transactions: [`close`] adds the rest.
pub fn run(
    writer: &mut Writer,
    peer: Peer,
    batch: usize,
    docs: &[(u64, &str)],
) -> Result<InsertRun, BenchError> {
    let written_before = written_bytes()?;
    let stats_before = writer.fulltext_stats();
    let mut samples_us = Vec::with_capacity(docs.len().div_ceil(batch));
    let mut irregular_txs = 0;
    for chunk in docs.chunks(batch) {
        let before = writer.fulltext_stats();
        samples_us.push(writer.write(chunk)?);
        let delta = writer.fulltext_stats().since(&before);
        if peer.is_vev_fulltext()
            && (delta.transaction_segments(), delta.manifest_appends) != (1, 1)
        {
            irregular_txs += 1;
        }
    }
    Ok(InsertRun {
        peer,
        batch,
        txs: samples_us.len(),
        docs: docs.len(),
        samples_us,
        closed_bytes: 0,
        written_bytes: written_bytes()? - written_before,
        stats: writer.fulltext_stats().since(&stats_before),
        irregular_txs,
    })
}

/// Close `writer` (the database in `dir`) and complete `run` with the bytes the close wrote
/// and the directory's size after it.
pub fn close(writer: Writer, dir: &Path, run: &mut InsertRun) -> Result<(), BenchError> {
    let written_before = written_bytes()?;
    match writer {
        Writer::Vev(conn) => drop(conn),
        Writer::Fts5(conn) => conn.close().map_err(|(_, e)| e)?,
        Writer::Tantivy(t) => t.writer.wait_merging_threads()?,
    }
    run.written_bytes += written_bytes()? - written_before;
    run.closed_bytes = dir_bytes(dir)?;
    Ok(())
}
