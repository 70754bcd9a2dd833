//! A test hook that fails a chosen storage operation (the `testing` feature makes it public):
//! fault injection for the durability tests, which check that every acknowledged
//! transaction survives a failure and nothing else does. The group commit tests also hold
//! an operation (`pause_next`) so that other transactions queue behind it, and fail a chosen
//! later one (`fail_next`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use vev_core::StorageError;

/// A test hook that fails the `fail_at`-th storage operation (1-based): a log write, a sync
/// (commit), a segment write or the root write. With `after_commit`, a failing sync happens
/// first and then reports the failure (the "did it commit?" case).
#[derive(Debug, Default)]
pub struct FaultPlan {
    pub fail_at: u64,
    pub after_commit: bool,
    seen: AtomicU64,
    named: Mutex<Named>,
    changed: Condvar,
}

/// Operations chosen by name (`"log sync"`, `"log write"`, ...) rather than by count.
#[derive(Debug, Default)]
struct Named {
    /// The next operation of this name waits until `resume`.
    pause: Option<String>,
    /// An operation is waiting now.
    paused: bool,
    /// The next operation of this name fails.
    fail: Option<String>,
}

// Without the `testing` feature nothing outside this crate can make one.
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
impl FaultPlan {
    pub fn new(fail_at: u64, after_commit: bool) -> Arc<FaultPlan> {
        Arc::new(FaultPlan {
            fail_at,
            after_commit,
            ..FaultPlan::default()
        })
    }

    /// Make the next operation named `op` wait, once it is reached, until `resume` is called.
    pub fn pause_next(&self, op: &str) {
        self.named().pause = Some(op.to_owned());
    }

    /// Wait until an operation is held by `pause_next`.
    pub fn wait_paused(&self) {
        let mut named = self.named();
        while !named.paused {
            named = self
                .changed
                .wait(named)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Let the held operation go on.
    pub fn resume(&self) {
        self.named().paused = false;
        self.changed.notify_all();
    }

    /// Make the next operation named `op` fail (an operation held by `pause_next` is not it).
    pub fn fail_next(&self, op: &str) {
        self.named().fail = Some(op.to_owned());
    }

    fn named(&self) -> std::sync::MutexGuard<'_, Named> {
        self.named.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Operations counted so far.
    pub fn seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    pub(crate) fn hit(&self, op: &str) -> Result<(), StorageError> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at {
            return Err(StorageError::Injected {
                op: op.to_owned(),
                n,
            });
        }
        self.hit_named(op, n)
    }

    /// An operation that only `pause_next` and `fail_next` reach (not counted for
    /// `fail_at`): creating a database, which the counted plans of the durability tests
    /// predate.
    pub(crate) fn hit_uncounted(&self, op: &str) -> Result<(), StorageError> {
        self.hit_named(op, 0)
    }

    fn hit_named(&self, op: &str, n: u64) -> Result<(), StorageError> {
        let mut named = self.named();
        if named.pause.as_deref() == Some(op) {
            named.pause = None;
            named.paused = true;
            self.changed.notify_all();
            while named.paused {
                named = self
                    .changed
                    .wait(named)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        } else if named.fail.as_deref() == Some(op) {
            named.fail = None;
            return Err(StorageError::Injected {
                op: op.to_owned(),
                n,
            });
        }
        Ok(())
    }
}

/// Flip one byte in the middle of segment `id` of the database file at `path` (no Vev
/// connection may have it open): the corruption tests' way to damage exactly one segment,
/// which its checksum must then catch.
#[cfg(feature = "testing")]
pub fn flip_segment_byte(path: &std::path::Path, id: u64) -> Result<(), StorageError> {
    flip_byte(path, "vev_segment", "payload", "id", id)
}

/// Flip one byte in the middle of log row `t`'s record (in a closed file): the corruption
/// tests' way to damage exactly one transaction's record, which its checksum must catch.
#[cfg(feature = "testing")]
pub fn flip_log_byte(path: &std::path::Path, t: u64) -> Result<(), StorageError> {
    flip_byte(path, "vev_log", "record", "t", t)
}

/// Flip the middle byte of the blob in `column` of the `table` row whose `key` is `at`.
#[cfg(feature = "testing")]
fn flip_byte(
    path: &std::path::Path,
    table: &str,
    column: &str,
    key: &str,
    at: u64,
) -> Result<(), StorageError> {
    let io = crate::io("flip byte");
    let conn = rusqlite::Connection::open(path).map_err(&io)?;
    let mut blob: Vec<u8> = conn
        .query_row(
            &format!("SELECT {column} FROM {table} WHERE {key} = ?1"),
            [at as i64],
            |r| r.get(0),
        )
        .map_err(&io)?;
    let mid = blob.len() / 2;
    blob[mid] ^= 0x5a;
    conn.execute(
        &format!("UPDATE {table} SET {column} = ?1 WHERE {key} = ?2"),
        rusqlite::params![blob, at as i64],
    )
    .map_err(&io)?;
    Ok(())
}
