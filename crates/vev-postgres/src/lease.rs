//! The writer lease: one row (`owner`, `generation`, `expires_at`) that names the one writer
//! of a database (protocol: `docs/design/lease.md`).
//!
//! - Taking it: under `SELECT ... FOR UPDATE`, a lease that has not expired and has an owner
//!   refuses (`storage/locked`); otherwise the taker writes itself as owner, bumps the
//!   generation and sets the expiry. Expiry is PostgreSQL's clock (`clock_timestamp()`), so
//!   the clocks of the writers' hosts do not matter.
//! - Fencing: every write transaction of a writer starts with `fence_sql`, an `UPDATE` of the
//!   lease row guarded by the generation it took (and renewing the expiry). After a takeover
//!   the guard matches no row, the transaction writes nothing, and the writer is fenced for
//!   good (`storage/fenced`). The row lock the `UPDATE` takes orders each commit against a
//!   takeover: a commit either lands before the taker reads the log, or is fenced.
//! - Renewing: a thread with its own connection renews the expiry every third of the lease
//!   duration; each commit renews it too.
//! - Releasing: closing a writer sets the expiry in the past (generation unchanged), so the
//!   next writer need not wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use postgres::Client;
use vev_core::StorageError;

use crate::session::{pg_error, Session};

/// What a second writer does while another holds a live lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseWait {
    /// Fail at once with `storage/locked`.
    Fail,
    /// Retry until the lease is free or expires, or the timeout passes.
    Wait(Duration),
}

/// The lease a writer holds.
pub(crate) struct Lease {
    pub(crate) generation: i64,
    pub(crate) duration: Duration,
    /// Set once a fence check or renewal found the generation taken over.
    pub(crate) fenced: Arc<AtomicBool>,
    /// Dropping it stops the renewing thread.
    stop: Option<Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

/// The statement that checks the generation and renews the expiry: `$1` the generation,
/// `$2` the lease in milliseconds. Used as a CTE (`WITH fence AS (...)`) in a transaction's
/// first statement, so the check costs no round trip of its own.
pub(crate) fn fence_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.lease SET expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond' \
         WHERE slot = 0 AND generation = $1 RETURNING generation"
    )
}

/// The generation the lease row holds now (`-1` if the row is gone).
pub(crate) fn current_generation(
    client: &mut impl postgres::GenericClient,
    schema: &str,
    location: &str,
) -> Result<i64, StorageError> {
    let row = client
        .query_opt(
            &format!("SELECT generation FROM {schema}.lease WHERE slot = 0"),
            &[],
        )
        .map_err(|e| pg_error(location, "lease read", &e))?;
    Ok(row.map_or(-1, |r| r.get(0)))
}

/// A name for this writer: host, process and a per-open nonce (for people reading the
/// lease row; fencing goes by generation only).
fn owner_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_owned());
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host} pid {} ({nonce:08x})", std::process::id())
}

/// Take the lease, waiting as `wait` says while another writer holds a live one.
pub(crate) fn acquire(
    session: &Session,
    schema: &str,
    duration: Duration,
    wait: LeaseWait,
) -> Result<i64, StorageError> {
    let started = Instant::now();
    let owner = owner_name();
    let location = session.location().to_owned();
    loop {
        let taken = session.with("lease", |client| {
            try_acquire(client, schema, &owner, duration, &location)
        })?;
        if let Some(generation) = taken {
            return Ok(generation);
        }
        match wait {
            LeaseWait::Wait(limit) if started.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(20));
            }
            LeaseWait::Wait(limit) => {
                return Err(StorageError::Locked {
                    path: location,
                    waited: Some(limit),
                })
            }
            LeaseWait::Fail => {
                return Err(StorageError::Locked {
                    path: location,
                    waited: None,
                })
            }
        }
    }
}

/// One attempt: the new generation, or `None` while another writer's lease is live.
fn try_acquire(
    client: &mut Client,
    schema: &str,
    owner: &str,
    duration: Duration,
    location: &str,
) -> Result<Option<i64>, StorageError> {
    let err = |e: postgres::Error| pg_error(location, "lease", &e);
    let mut tx = client.transaction().map_err(err)?;
    let row = tx
        .query_opt(
            &format!(
                "SELECT owner <> '' AND expires_at > clock_timestamp() FROM {schema}.lease \
                 WHERE slot = 0 FOR UPDATE"
            ),
            &[],
        )
        .map_err(err)?;
    let Some(row) = row else {
        return Err(StorageError::corruption(
            format!("{location} lease row"),
            "it is missing",
        ));
    };
    let live: bool = row.get(0);
    if live {
        return Ok(None);
    }
    let ms = duration.as_millis() as i64;
    let generation: i64 = tx
        .query_one(
            &format!(
                "UPDATE {schema}.lease SET owner = $1, generation = generation + 1, \
                 expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond' \
                 WHERE slot = 0 RETURNING generation"
            ),
            &[&owner, &ms],
        )
        .map_err(err)?
        .get(0);
    tx.commit().map_err(err)?;
    Ok(Some(generation))
}

impl Lease {
    /// Start renewing `generation` on a connection of its own.
    pub(crate) fn start(
        renew: Session,
        schema: String,
        generation: i64,
        duration: Duration,
    ) -> Lease {
        let fenced = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = std::sync::mpsc::channel();
        let flag = fenced.clone();
        let renewer = std::thread::Builder::new()
            .name("vev-lease".to_owned())
            .spawn(move || renew_loop(&renew, &schema, generation, duration, &flag, &stopped))
            .ok();
        Lease {
            generation,
            duration,
            fenced,
            stop: Some(stop),
            renewer,
        }
    }

    pub(crate) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    pub(crate) fn ms(&self) -> i64 {
        self.duration.as_millis() as i64
    }

    /// Stop the renewing thread (before releasing the lease).
    pub(crate) fn stop(&mut self) {
        self.stop.take();
        if let Some(h) = self.renewer.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Renew every third of the lease until stopped or fenced. A failed renewal (the server
/// unreachable) is retried at the next tick; the commits check the generation themselves.
fn renew_loop(
    session: &Session,
    schema: &str,
    generation: i64,
    duration: Duration,
    fenced: &AtomicBool,
    stopped: &Receiver<()>,
) {
    let sql = fence_sql(schema);
    let ms = duration.as_millis() as i64;
    let tick = (duration / 3).max(Duration::from_millis(10));
    loop {
        match stopped.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let renewed = session.with("lease renewal", |client| {
            client
                .query_opt(&sql, &[&generation, &ms])
                .map_err(|e| pg_error(session.location(), "lease renewal", &e))
        });
        if let Ok(None) = renewed {
            fenced.store(true, Ordering::SeqCst);
            return;
        }
    }
}

/// Give the lease up: an expiry in the past, the generation unchanged (a writer that took
/// over meanwhile is not touched).
pub(crate) fn release(session: &Session, schema: &str, generation: i64) {
    let _ = session.with("lease release", |client| {
        client
            .execute(
                &format!(
                    "UPDATE {schema}.lease SET owner = '', expires_at = '-infinity' \
                     WHERE slot = 0 AND generation = $1"
                ),
                &[&generation],
            )
            .map(|_| ())
            .map_err(|e| pg_error(session.location(), "lease release", &e))
    });
}
