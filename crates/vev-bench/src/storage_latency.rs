//! Durable small transactions in Vev and the raw SQLite floor, measured interleaved.
//!
//! For each database size a fresh Vev file gets the schema and `n` resident accounts through
//! `Connection::bulk_load` (not timed). Then each shape runs in two rounds over the same
//! accounts (`Round::First`, `Round::Cached`: after a bulk load the index segments of a
//! large database are loaded on first touch), each round `warmup + measurements` times on
//! every size, the sizes taking turns. Measurement `k` builds its transaction data and
//! resolves entity ids first (untimed), times `Connection::transact` (dropping the report
//! included, as for a caller), then times one SQLite write batch of as many rows as the Vev
//! transaction had datoms in a separate file with Vev's pragmas (WAL, `synchronous=FULL`),
//! then restores what a removing shape removed (untimed). Interleaving puts Vev, the floor and
//! every size under the same load and the same disk. A last pass times `Connection::with` on
//! the same accounts, each followed by an untimed floor commit: the in-memory part of a
//! transaction alone, without its commit.

use std::path::Path;
use std::time::Instant;

use vev::{BulkProgress, Connection, IndexOrder};

use crate::error::BenchError;
use crate::latency::status_field;
use crate::stats::us;
use crate::storage_fixture::{self as fx, Round, Shape};

/// Accounts per transaction when building a resident database.
pub const BUILD_ACCOUNTS_PER_TX: u64 = 1_000;

/// One round of one shape on one database: samples in µs.
#[derive(Default)]
pub struct Samples {
    pub vev_us: Vec<f64>,
    pub floor_us: Vec<f64>,
}

/// One shape on one database.
pub struct ShapeRun {
    pub shape: Shape,
    /// Datoms of each Vev transaction (its `:db/txInstant` included).
    pub datoms: usize,
    pub first: Samples,
    pub cached: Samples,
    /// `Connection::with` on the same accounts after the two rounds: the in-memory
    /// transactor alone (the next `Db` built, nothing written), report dropped, in µs.
    pub with_us: Vec<f64>,
}

impl ShapeRun {
    pub fn round(&self, round: Round) -> &Samples {
        match round {
            Round::First => &self.first,
            Round::Cached => &self.cached,
        }
    }

    fn round_mut(&mut self, round: Round) -> &mut Samples {
        match round {
            Round::First => &mut self.first,
            Round::Cached => &mut self.cached,
        }
    }

    /// Every measurement of a shape must transact as many datoms as the first one did: a
    /// different count means the shape did not do what it says (e.g. a value did not change).
    fn check_datoms(&mut self, datoms: usize) -> Result<(), BenchError> {
        if self.datoms == 0 {
            self.datoms = datoms;
        }
        if datoms != self.datoms {
            return Err(BenchError::ShapeDatoms {
                shape: self.shape.name(),
                first: self.datoms,
                now: datoms,
            });
        }
        Ok(())
    }
}

/// One database size.
pub struct SizeRun {
    pub entities: u64,
    /// Datoms of the resident database (schema and transaction datoms included).
    pub datoms: usize,
    pub build_s: f64,
    pub shapes: Vec<ShapeRun>,
}

impl SizeRun {
    pub fn shape(&self, shape: Shape) -> Option<&ShapeRun> {
        self.shapes.iter().find(|s| s.shape == shape)
    }
}

/// The floor: a plain table in its own SQLite file with Vev's durability pragmas.
pub struct Floor {
    conn: rusqlite::Connection,
    next_e: i64,
}

impl Floor {
    pub fn open(path: &Path) -> Result<Floor, BenchError> {
        let conn = rusqlite::Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS datoms (
                 e INTEGER NOT NULL, a INTEGER NOT NULL, v BLOB NOT NULL,
                 tx INTEGER NOT NULL, added INTEGER NOT NULL)",
        )?;
        Ok(Floor { conn, next_e: 1 })
    }

    /// Insert `rows` rows in one write batch (`BEGIN IMMEDIATE` .. `COMMIT`); its µs.
    pub fn commit(&mut self, rows: usize) -> Result<f64, BenchError> {
        let e = self.next_e;
        self.next_e += 1;
        let start = Instant::now();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO datoms (e, a, v, tx, added) VALUES (?1, ?2, ?3, ?4, 1)",
            )?;
            for a in 0..rows as i64 {
                st.execute(rusqlite::params![e, 100 + a, format!("value-{e}-{a}"), e])?;
            }
        }
        tx.commit()?;
        Ok(us(start.elapsed()))
    }
}

/// A durable Vev database at `path` with the schema and `n` resident accounts.
pub fn build_resident(path: &Path, n: u64) -> Result<(Connection, BulkProgress), BenchError> {
    let conn = Connection::open(path)?;
    conn.transact_edn(fx::SCHEMA_EDN)?;
    let mut report_at = 1_000_000;
    let done = conn.bulk_load(
        fx::account_txs(1, n, BUILD_ACCOUNTS_PER_TX),
        &mut |p: &BulkProgress| {
            if p.datoms >= report_at {
                eprintln!(
                    "  {} datoms loaded, {:.1} s",
                    p.datoms,
                    p.elapsed.as_secs_f64()
                );
                report_at += 1_000_000;
            }
        },
    )?;
    Ok((conn, done))
}

/// The latency runs: one per database size, and the preemptions over all measurements.
pub struct LatencyRuns {
    pub sizes: Vec<SizeRun>,
    /// Times the kernel preempted the bench while it measured.
    pub preemptions: u64,
}

/// A resident database under measurement.
struct Resident {
    n: u64,
    conn: Connection,
    attrs: fx::Attrs,
    run: SizeRun,
}

/// Build a fresh database of each size in `dir`, then run every shape on all of them,
/// interleaved: measurement `k` of a shape runs on each size in turn, so that a change of
/// load or disk state during the run hits every size (and the floor) alike.
pub fn run_sizes(
    dir: &Path,
    sizes: &[u64],
    warmup: usize,
    measurements: usize,
    floor: &mut Floor,
) -> Result<LatencyRuns, BenchError> {
    let mut residents = Vec::new();
    for &n in sizes {
        eprintln!("vev: building {n} resident accounts");
        let (conn, built) = build_resident(&dir.join(format!("accounts-{n}.vev")), n)?;
        let datoms = conn.db().count(IndexOrder::Eavt, &[])?;
        eprintln!(
            "vev: {datoms} datoms in {:.1} s",
            built.elapsed.as_secs_f64()
        );
        residents.push(Resident {
            n,
            attrs: fx::Attrs::of(&conn.db())?,
            conn,
            run: SizeRun {
                entities: n,
                datoms,
                build_s: built.elapsed.as_secs_f64(),
                shapes: Vec::new(),
            },
        });
    }
    let preempted_before = status_field("nonvoluntary_ctxt_switches")?;
    for shape in Shape::RUN_ORDER {
        eprintln!("vev: measuring {}", shape.name());
        for r in &mut residents {
            r.run.shapes.push(ShapeRun {
                shape,
                datoms: 0,
                first: Samples::default(),
                cached: Samples::default(),
                with_us: Vec::with_capacity(measurements),
            });
        }
        for round in Round::ALL {
            for k in 0..warmup + measurements {
                for r in &mut residents {
                    let (vev_us, floor_us, datoms) = measure(r, shape, round, k as u64, floor)?;
                    let run = r.run.shapes.last_mut().expect("pushed above");
                    run.check_datoms(datoms)?;
                    if k >= warmup {
                        let samples = run.round_mut(round);
                        samples.vev_us.push(vev_us);
                        samples.floor_us.push(floor_us);
                    }
                }
            }
        }
        for k in 0..warmup + measurements {
            for r in &mut residents {
                let (with_us, datoms) = measure_with(r, shape, k as u64, floor)?;
                let run = r.run.shapes.last_mut().expect("pushed above");
                run.check_datoms(datoms)?;
                if k >= warmup {
                    run.with_us.push(with_us);
                }
            }
        }
    }
    let preemptions = status_field("nonvoluntary_ctxt_switches")? - preempted_before;
    Ok(LatencyRuns {
        sizes: residents.into_iter().map(|r| r.run).collect(),
        preemptions,
    })
}

/// One measurement: Vev's µs, the floor's µs, and the datoms of the Vev transaction.
fn measure(
    r: &Resident,
    shape: Shape,
    round: Round,
    k: u64,
    floor: &mut Floor,
) -> Result<(f64, f64, usize), BenchError> {
    let tx = fx::shape_tx(shape, k, round.value_offset(), r.n, &r.conn.db(), &r.attrs)?;
    let start = Instant::now();
    let report = r.conn.transact(&tx.ops)?;
    let datoms = report.tx_data.len();
    drop(report);
    let vev_us = us(start.elapsed());
    let floor_us = floor.commit(datoms)?;
    if let Some(restore) = &tx.restore {
        // Untimed on both sides, so that each timed commit, Vev's and the floor's, follows
        // a commit to the other file: the two see the same sequence of syncs.
        let restored = r.conn.transact(restore)?.tx_data.len();
        floor.commit(restored)?;
    }
    Ok((vev_us, floor_us, datoms))
}

/// One `Connection::with` measurement: its µs and the datoms it would have transacted. An
/// untimed floor commit follows, so that, as inside `transact`, the transactor runs after a
/// durable commit has been through the kernel (and through the CPU's caches).
fn measure_with(
    r: &Resident,
    shape: Shape,
    k: u64,
    floor: &mut Floor,
) -> Result<(f64, usize), BenchError> {
    let db = r.conn.db();
    let tx = fx::shape_tx(shape, k, fx::WITH_VALUE_OFFSET, r.n, &db, &r.attrs)?;
    let start = Instant::now();
    let report = r.conn.with(&db, &tx.ops)?;
    let datoms = report.tx_data.len();
    drop(report);
    let with_us = us(start.elapsed());
    floor.commit(datoms)?;
    Ok((with_us, datoms))
}
