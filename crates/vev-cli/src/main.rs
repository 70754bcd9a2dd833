//! `vev`: the command line of the Vev database. The only crate that prints.

// clap turns the doc comments below into `--help` text, where brackets are EDN (lookup refs,
// patterns), not intra-doc links.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod backup;
mod batch;
mod commands;
mod copy;
mod csv;
mod demo;
mod error;
mod export;
mod import;
mod mbrainz;
mod output;
mod repl;
mod typed;

use output::Format;

/// mimalloc, with freed memory kept for reuse (see `vev::alloc`).
#[global_allocator]
static ALLOCATOR: vev::alloc::MiMalloc = vev::alloc::MiMalloc;

/// Vev: an embedded database of immutable facts with Datomic's data model.
///
/// DB is a database file. Commands that only read open it read-only, so they work while
/// another process writes. EDN arguments (queries, inputs, patterns, components) are EDN
/// text; a QUERY or PATTERN of the form @FILE is read from FILE.
#[derive(Parser, Debug)]
#[command(name = "vev", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// When another process holds the writer lock, wait for it to be released (up to SECS
    /// seconds; --wait alone: without limit) instead of failing at once with storage/locked.
    /// For the commands that write: transact, import, repl, copy (its DEST).
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        num_args = 0..=1,
        require_equals = true,
        value_parser = parse_wait
    )]
    wait: Option<Option<std::time::Duration>>,
}

/// `--wait=SECS`: a non-negative number of seconds.
fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("{text:?} is not a number of seconds"))
}

impl Cli {
    /// What a writer does when the lock is taken.
    fn lock_mode(&self) -> vev::LockMode {
        match self.wait {
            None => vev::LockMode::Fail,
            Some(None) => vev::LockMode::Wait(std::time::Duration::MAX),
            Some(Some(limit)) => vev::LockMode::Wait(limit),
        }
    }
}

/// Which database value a read command sees.
/// `vev serve`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The database file (created if missing).
    db: PathBuf,
    /// The address to listen on. Only loopback unless this says otherwise.
    #[arg(long, default_value = "127.0.0.1")]
    listen: std::net::IpAddr,
    /// The port (0: any free port, printed at start).
    #[arg(long, default_value_t = 5432)]
    port: u16,
    /// Require this password from every client (SCRAM-SHA-256); without it, any
    /// client that can connect is trusted.
    #[arg(long)]
    password: Option<String>,
    /// Decoded index datoms the server keeps in memory (its segment cache); past it, the
    /// least recently used segments are read from the file again when needed.
    #[arg(long, value_name = "N")]
    cache_datoms: Option<usize>,
}

#[derive(clap::Args, Debug, Default)]
pub struct TimeArgs {
    /// The database as of T: a basis-t, a transaction id (as ?tx binds) or an instant
    /// (#inst "2024-01-31T12:00:00Z", or the same without #inst).
    #[arg(long, value_name = "T")]
    pub as_of: Option<String>,
    /// Only what was asserted or retracted after T (a basis-t, a transaction id or an
    /// instant).
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Every assertion and retraction, past and present.
    #[arg(long)]
    pub history: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Transact EDN transaction data from FILE (or stdin when FILE is - or absent) and print
    /// the report as EDN: {:basis-t T :tx ID :tempids {...} :datoms N}.
    Transact {
        /// The database file (created if missing).
        db: PathBuf,
        /// The EDN transaction data (a vector of operations; with --batch, a stream of them);
        /// - or absent for stdin.
        file: Option<String>,
        /// The input is a stream of transactions, one top-level vector each: each is committed
        /// and its report line printed as soon as it has arrived (the writer lock is held
        /// until the input ends). The first failing one stops the stream.
        #[arg(long)]
        batch: bool,
    },
    /// Run a Datalog query. Each INPUT is EDN, bound to the query's :in after $.
    Query {
        /// The database file.
        db: PathBuf,
        /// The query as EDN text, or @FILE.
        query: String,
        /// The query's inputs after $, in :in order, each as EDN text (a scalar, a collection
        /// [?x ...], a tuple or a relation, or a rule set for %).
        inputs: Vec<String>,
        #[command(flatten)]
        time: TimeArgs,
        /// Output format (default: table on a terminal, edn otherwise).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// Run the query and print the plan that ran (estimated and actual rows per step)
        /// instead of the result.
        #[arg(long)]
        explain: bool,
        /// Print the elapsed time to stderr.
        #[arg(long)]
        timing: bool,
    },
    /// Pull PATTERN for one entity: an entity id, an ident, or a lookup ref [:attr value].
    Pull {
        /// The database file.
        db: PathBuf,
        /// The pull pattern as EDN text, or @FILE.
        pattern: String,
        /// The entity: an entity id (17592186045418), an ident (:person/name) or a lookup
        /// ref ('[:person/email "ann@example.com"]').
        entity: String,
        #[command(flatten)]
        time: TimeArgs,
        /// Output format (default: edn; table shows one row of the top-level attributes).
        #[arg(long, value_enum, default_value = "edn")]
        format: Format,
    },
    /// Print the datoms of an index (eavt, aevt, avet, vaet) whose leading components match.
    /// Components are EDN: entity ids, idents or lookup refs, then values.
    Datoms {
        /// The database file.
        db: PathBuf,
        /// The index, which also sets the order of the components.
        #[arg(value_enum)]
        index: Index,
        /// Leading components in the index's order (eavt: entity, attribute, value, tx), each
        /// EDN: an entity id, ident or lookup ref for an entity, a value for the value.
        components: Vec<String>,
        #[command(flatten)]
        time: TimeArgs,
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// Stop after N datoms.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Print the transaction log, one datom a row: basis-t, entity, attribute, value, added.
    Log {
        /// The database file.
        db: PathBuf,
        /// First transaction (inclusive): a basis-t, a transaction id, or an instant (the
        /// first transaction at or after it).
        #[arg(long, value_name = "T")]
        from: Option<String>,
        /// End (exclusive): a basis-t, a transaction id, or an instant (the transactions
        /// before it).
        #[arg(long, value_name = "T")]
        to: Option<String>,
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Print the installed attributes (add --system for Vev's own).
    Schema {
        /// The database file.
        db: PathBuf,
        #[arg(long)]
        system: bool,
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Serve the database over PostgreSQL's wire protocol, for psql, drivers and pgbench
    /// (docs/sql.md): tables are attribute namespaces, rows are entities. Runs until SIGTERM or SIGINT (Ctrl-C),
    /// then closes its connections and checkpoints the database.
    Serve(ServeArgs),
    /// Print counts: datoms, entities, attributes, size on disk, datoms per attribute.
    Stats {
        /// The database file.
        db: PathBuf,
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Write the whole database as EDN: a header map (version, basis-t, schema), then every
    /// transaction of the log as one vector, with its :db/txInstant. `vev import` of the file
    /// into an empty database gives back the same datoms, entity ids and instants.
    Export {
        /// The database file.
        db: PathBuf,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Load FILE into DB: EDN transactions (one top-level vector each, as `export` writes),
    /// JSON Lines (one object of attributes a line) or CSV (a header row of attributes).
    /// The format comes from the extension (.edn, .jsonl/.ndjson, .csv) or --format.
    /// Values are typed by the schema; a bad record stops the import before anything is
    /// written, with its line and column. Prints {:basis-t T :txs N :datoms N}.
    Import {
        /// The database file (created if missing).
        db: PathBuf,
        /// The file to load (.edn, .jsonl/.ndjson or .csv).
        file: String,
        #[arg(long, value_enum)]
        format: Option<import::InputFormat>,
        /// CSV: the namespace of header cells without one (`name` with `person` is
        /// :person/name).
        #[arg(long, value_name = "NS")]
        attr_prefix: Option<String>,
        /// JSON Lines and CSV: records per transaction.
        #[arg(long, value_name = "N", default_value_t = 1_000)]
        batch_records: usize,
    },
    /// An interactive session on DB (created if missing): queries printed as tables, `:tx`
    /// to transact, `:as-of`/`:since`/`:history` views, `:timing`, `:explain`, `:help`.
    /// An entry ends where its brackets balance. History is kept in $VEV_HISTORY, else
    /// ~/.vev_history. When stdin is not a terminal, entries are read from it without
    /// prompts or line editing.
    Repl {
        /// The database file (created if missing).
        db: PathBuf,
    },
    /// Check every log row and index segment of a database file.
    Verify {
        /// The database file.
        db: PathBuf,
    },
    /// Copy the database SRC to a new file DEST (or into the directory DEST), consistently,
    /// while another process may be writing to it (SQLite's online backup; a progress bar on
    /// a terminal). The copy is one complete file. Prints {:backup DEST :basis-t T :bytes N}.
    Backup {
        /// The database to copy.
        src: PathBuf,
        /// The new file (it must not exist), or a directory to copy into.
        dest: PathBuf,
    },
    /// Copy the database SRC, with its whole history, into the empty database DEST in
    /// another store: a file or a postgres:// URL on either side (docs/storage-postgres.md).
    /// The log records move as they are (same basis-t values, entity ids and instants) in
    /// one write batch of DEST, so a failed or killed copy leaves DEST empty and can be run
    /// again; then DEST is checkpointed, read back and compared with SRC (unless
    /// --no-verify). DEST must hold no transaction (storage/not-empty); a missing file is
    /// created. SRC is opened read-only.
    /// Prints {:copy DEST :basis-t T :records N :datoms N :bytes N :verified-datoms N
    /// :seconds S}.
    Copy {
        /// The database to copy: a file or a postgres:// URL.
        src: PathBuf,
        /// The empty database to copy into: a file (created if missing) or a postgres://
        /// URL.
        dest: PathBuf,
        /// Skip reading DEST back and comparing it with SRC after the copy.
        #[arg(long)]
        no_verify: bool,
    },
    /// Create a database in DIR (default: a temporary directory), load a generated data set of
    /// people and friendships, and run example queries with their timings.
    Demo {
        #[command(subcommand)]
        data: Option<DemoData>,
        /// The directory to create the database in (demo.vev inside it; a name not taken is
        /// used, so an existing file is never replaced). Default: a new temporary directory.
        dir: Option<PathBuf>,
        /// How many people to generate (about 8 datoms each).
        #[arg(long, default_value_t = 20_000)]
        people: usize,
    },
}

/// Other demo data sets.
#[derive(Subcommand, Debug)]
enum DemoData {
    /// Create mbrainz.vev in DIR (default: a new temporary directory) with a generated data
    /// set of the MusicBrainz sample's schema and shape (artists, releases, media, tracks;
    /// deterministic), loaded through bulk_load, and run some of its queries. The queries,
    /// rules and what the data looks like: docs/mbrainz.md and queries/mbrainz/.
    Mbrainz {
        /// The directory to create mbrainz.vev in (a name not taken is used, so an existing
        /// file is never replaced). Default: a new temporary directory.
        dir: Option<PathBuf>,
        /// How much data: tiny (about 0.1M datoms), small (1M), medium (10M), large (50M).
        #[arg(long, value_enum, default_value_t = ScaleArg::Small)]
        scale: ScaleArg,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ScaleArg {
    Tiny,
    Small,
    Medium,
    Large,
}

impl From<ScaleArg> for vev_mbrainz::Scale {
    fn from(s: ScaleArg) -> vev_mbrainz::Scale {
        match s {
            ScaleArg::Tiny => vev_mbrainz::Scale::Tiny,
            ScaleArg::Small => vev_mbrainz::Scale::Small,
            ScaleArg::Medium => vev_mbrainz::Scale::Medium,
            ScaleArg::Large => vev_mbrainz::Scale::Large,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Index {
    Eavt,
    Aevt,
    Avet,
    Vaet,
}

fn run(cli: Cli) -> error::CliResult<ExitCode> {
    let lock = cli.lock_mode();
    let done = match cli.command {
        Command::Transact { db, file, batch } => {
            commands::transact(&db, file.as_deref(), batch, lock)
        }
        Command::Query {
            db,
            query,
            inputs,
            time,
            format,
            explain,
            timing,
        } => commands::query(
            &db,
            &commands::QueryArgs {
                query: &query,
                inputs: &inputs,
                time: &time,
                format: Format::resolve(format),
                explain,
                timing,
            },
        ),
        Command::Pull {
            db,
            pattern,
            entity,
            time,
            format,
        } => commands::pull(&db, &pattern, &entity, &time, format),
        Command::Datoms {
            db,
            index,
            components,
            time,
            format,
            limit,
        } => commands::datoms(
            &db,
            index,
            &components,
            &time,
            Format::resolve(format),
            limit,
        ),
        Command::Log {
            db,
            from,
            to,
            format,
        } => commands::log(&db, from.as_deref(), to.as_deref(), Format::resolve(format)),
        Command::Schema { db, system, format } => {
            commands::schema(&db, system, Format::resolve(format))
        }
        Command::Stats { db, format } => commands::stats(&db, Format::resolve(format)),
        Command::Serve(args) => commands::serve(args, lock),
        // The one command whose failures (of entries) are printed as they happen.
        Command::Repl { db } => return repl::repl(&db, lock),
        Command::Verify { db } => commands::verify(&db),
        Command::Backup { src, dest } => backup::backup(&src, &dest),
        Command::Copy {
            src,
            dest,
            no_verify,
        } => copy::copy(&src, &dest, !no_verify, lock),
        Command::Export { db, out } => export::export(&db, out.as_deref()),
        Command::Import {
            db,
            file,
            format,
            attr_prefix,
            batch_records,
        } => import::import(
            &db,
            &import::ImportArgs {
                file: &file,
                format,
                attr_prefix: attr_prefix.as_deref(),
                batch_records,
                lock,
            },
        ),
        Command::Demo {
            data: Some(DemoData::Mbrainz { dir, scale }),
            ..
        } => mbrainz::run(dir, scale.into()),
        Command::Demo {
            data: None,
            dir,
            people,
        } => demo::run(dir, people),
    };
    done.map(|()| ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    vev::alloc::keep_freed_memory();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", e.render());
            ExitCode::FAILURE
        }
    }
}
