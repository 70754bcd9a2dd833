//! Online backup and the clean close: what makes the `.vev` file alone a complete database.
//!
//! A writer's commits land in the `-wal` file beside the database; SQLite copies them into
//! the main file at its automatic checkpoints and when the last connection closes. A Vev
//! writer's last connection to close is usually the segment reader, which is read-only and
//! cannot checkpoint, so without `checkpoint_wal` a cleanly closed database kept its latest
//! transactions (and the close's own index checkpoint) only in the `-wal`: a copy of the
//! `.vev` file alone silently lost them.
//!
//! `backup` copies a database while a writer keeps committing: SQLite's online backup API,
//! from one read transaction on a connection of its own (so the copy is one committed state,
//! and the writer never waits for it), into a temporary file beside the destination that is
//! synced and then linked to the destination's name (so a failure or a crash leaves no
//! half-written destination, and an existing file is never replaced).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use vev_core::{BasisT, StorageError};

use crate::{io, open_sqlite, Store};

/// Pages copied per backup step (one progress report each).
const BACKUP_STEP_PAGES: i32 = 1024;
/// How long the close's log checkpoint waits for readers in other processes to move on.
const CLOSE_CHECKPOINT_WAIT: Duration = Duration::from_millis(500);

/// Progress of a `Store::backup`: pages copied so far of the database's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupProgress {
    pub pages_done: u64,
    pub pages_total: u64,
}

/// What a finished `Store::backup` copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupReport {
    /// The basis-t of the copy: the latest transaction committed when it began.
    pub basis_t: BasisT,
    pub pages: u64,
    pub bytes: u64,
}

impl Store {
    /// Copy every committed transaction from the `-wal` into the main file and empty the
    /// `-wal` (SQLite's `wal_checkpoint(TRUNCATE)`), so that the `.vev` file alone is the
    /// whole database. Run by a writer's close. Best effort: a reader in another process
    /// that holds an old snapshot for longer than `CLOSE_CHECKPOINT_WAIT` keeps the frames it
    /// reads in the `-wal` (nothing is lost: the `-wal` still holds them). The next writer's
    /// open preallocates the emptied `-wal` again.
    pub fn checkpoint_wal(&self) -> Result<(), StorageError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        let conn = self.conn();
        conn.busy_timeout(CLOSE_CHECKPOINT_WAIT)
            .map_err(io("wal checkpoint"))?;
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(io("wal checkpoint"))?;
        conn.busy_timeout(crate::BUSY_TIMEOUT)
            .map_err(io("wal checkpoint"))?;
        if busy != 0 {
            return Err(StorageError::Io {
                op: "wal checkpoint".into(),
                reason: "a reader in another connection kept it from finishing".into(),
            });
        }
        Ok(())
    }

    /// Copy the database, as of its latest commit, to a new file at `dest` (which must not
    /// exist), while writers and readers go on. `progress` is called after each step.
    pub fn backup(
        &self,
        dest: &Path,
        progress: &mut dyn FnMut(&BackupProgress),
    ) -> Result<BackupReport, StorageError> {
        let exists = || StorageError::Exists {
            path: dest.display().to_string(),
        };
        if dest.exists() {
            return Err(exists());
        }
        let partial = partial_path(dest);
        // Left by a backup that crashed: only a backup writes a file of this name.
        let _ = std::fs::remove_file(&partial);
        let copied = copy_into(&self.path, &partial, progress).and_then(|done| {
            sync_file(&partial)?;
            Ok(done)
        });
        let done = match copied {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        // A link fails if `dest` appeared meanwhile, where a rename would replace it.
        let linked = std::fs::hard_link(&partial, dest);
        let _ = std::fs::remove_file(&partial);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(exists()),
            Err(e) => return Err(backup_io(dest, e)),
        }
        if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The new name, durable (best effort: some file systems cannot sync a directory).
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(done)
    }
}

/// The temporary file a backup to `dest` writes before it takes `dest`'s name.
fn partial_path(dest: &Path) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(".backup-partial");
    PathBuf::from(name)
}

fn backup_io(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Io {
        op: "backup".into(),
        reason: format!("{}: {e}", path.display()),
    }
}

fn sync_file(path: &Path) -> Result<(), StorageError> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| backup_io(path, e))
}

/// SQLite's online backup of `src` into a new file `to`, inside one read transaction on
/// `src` (so the pages are one committed state, however the writer goes on meanwhile).
fn copy_into(
    src: &Path,
    to: &Path,
    progress: &mut dyn FnMut(&BackupProgress),
) -> Result<BackupReport, StorageError> {
    let source = open_sqlite(src, true)?;
    source.execute_batch("BEGIN;").map_err(io("backup"))?;
    // The first read starts the snapshot the backup copies.
    let basis_t: Option<i64> = source
        .query_row("SELECT max(t) FROM vev_log", [], |r| r.get(0))
        .map_err(io("backup"))?;
    let mut target = rusqlite::Connection::open(to).map_err(io("backup"))?;
    let mut done = BackupProgress {
        pages_done: 0,
        pages_total: 0,
    };
    {
        let backup = Backup::new(&source, &mut target).map_err(io("backup"))?;
        loop {
            let step = backup.step(BACKUP_STEP_PAGES).map_err(io("backup"))?;
            let p = backup.progress();
            done.pages_total = p.pagecount.max(0) as u64;
            done.pages_done = (p.pagecount - p.remaining).max(0) as u64;
            progress(&done);
            match step {
                StepResult::Done => break,
                StepResult::More => {}
                // Another connection holds a lock SQLite needs for a moment.
                StepResult::Busy | StepResult::Locked => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {}
            }
        }
    }
    source.execute_batch("COMMIT;").map_err(io("backup"))?;
    let page_size: i64 = target
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .map_err(io("backup"))?;
    target.close().map_err(|(_, e)| io("backup")(e))?;
    Ok(BackupReport {
        basis_t: basis_t.map_or(0, |t| t.max(0) as BasisT),
        pages: done.pages_total,
        bytes: done.pages_total * page_size.max(0) as u64,
    })
}
