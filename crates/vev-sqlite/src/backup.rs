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
//!
//! `check_wal_sibling` (part of `verify`) looks at the `-wal` beside a file: SQLite ignores
//! one whose header is damaged, silently, and with it every transaction it holds.

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
            return Err(StorageError::io_kind(
                "wal checkpoint",
                std::io::ErrorKind::WouldBlock,
                "a reader in another connection kept it from finishing",
            ));
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
        crate::create::sync_dir(dest);
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
    StorageError::from_io("backup", &path.display().to_string(), &e)
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

/// SQLite's write-ahead log magic numbers (checksums in little- or big-endian words).
const WAL_MAGIC_LE: u32 = 0x377f_0682;
const WAL_MAGIC_BE: u32 = 0x377f_0683;

/// SQLite's WAL checksum over `bytes` (a multiple of 8), words in the byte order `big`.
fn wal_checksum(bytes: &[u8], big: bool) -> (u32, u32) {
    let (mut s0, mut s1) = (0u32, 0u32);
    for pair in bytes.chunks_exact(8) {
        let word = |b: &[u8]| {
            let b = [b[0], b[1], b[2], b[3]];
            if big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        s0 = s0.wrapping_add(word(&pair[..4])).wrapping_add(s1);
        s1 = s1.wrapping_add(word(&pair[4..])).wrapping_add(s0);
    }
    (s0, s1)
}

/// Whether a write-ahead log header is one SQLite reads: its magic number and checksum.
/// All zeros (a log a writer's open preallocated, or one it reset) holds nothing.
fn wal_header_ok(header: &[u8; 32]) -> bool {
    if header.iter().all(|b| *b == 0) {
        return true;
    }
    let field = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let big = match field(0) {
        WAL_MAGIC_LE => false,
        WAL_MAGIC_BE => true,
        _ => return false,
    };
    wal_checksum(&header[..24], big) == (field(24), field(28))
}

/// The `-wal` beside `path`, if there is one that is not empty, must be a log SQLite uses:
/// one with a damaged header is ignored, and the transactions in it are not in the
/// database `path` opens as (a `-wal` copied half-way, say).
pub(crate) fn check_wal_sibling(path: &Path) -> Result<(), StorageError> {
    use std::io::Read;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let Ok(mut file) = std::fs::File::open(&wal) else {
        return Ok(());
    };
    let mut header = [0u8; 32];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => return Err(backup_io(Path::new(&wal), e)),
        }
    }
    if read == 0 || (read == header.len() && wal_header_ok(&header)) {
        return Ok(());
    }
    Err(StorageError::corruption(
        format!("write-ahead log {}", Path::new(&wal).display()),
        format!(
            "its {read}-byte header is not one SQLite reads, so it ignores the file and any \
             transactions in it are not in {}",
            path.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_headers_are_checked_like_sqlite() {
        let mut header = [0u8; 32];
        assert!(wal_header_ok(&header), "zeros: a preallocated log");
        header[..4].copy_from_slice(&WAL_MAGIC_LE.to_be_bytes());
        header[4..8].copy_from_slice(&3_007_000u32.to_be_bytes());
        header[8..12].copy_from_slice(&4096u32.to_be_bytes());
        header[16..24].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let (s0, s1) = wal_checksum(&header[..24], false);
        header[24..28].copy_from_slice(&s0.to_be_bytes());
        header[28..32].copy_from_slice(&s1.to_be_bytes());
        assert!(wal_header_ok(&header));
        for i in 0..32 {
            let mut bad = header;
            bad[i] ^= 0x40;
            assert!(!wal_header_ok(&bad), "byte {i} flipped");
        }
    }
}
