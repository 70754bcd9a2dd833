//! The writer lock: an exclusive `flock` on the database file, held for a writer's life.
//!
//! The file descriptor that holds it is never closed. On POSIX systems closing *any*
//! descriptor of a file drops every `fcntl` lock the process holds on that file, and SQLite
//! keeps its locks that way: a reader connection's shared lock on the database file is what
//! stops another process's writer, when it closes, from deleting the `-wal` and `-shm` that
//! reader has open. A writer that closed its lock's descriptor while a reader of the same
//! file stayed open in the process (`vev repl` opens a writer for each `:tx` beside its
//! reader) silently dropped the reader's lock: the next writer elsewhere deleted the `-wal`
//! under it, and the reader went on reading the unlinked one, never seeing a later commit.
//! So each file's descriptor stays open in `LOCKS` while the file exists; releasing the
//! lock is `flock(LOCK_UN)` on it, which leaves `fcntl` locks alone. The `held` flag
//! keeps a second writer in the same process out (a `flock` through the same descriptor
//! would succeed).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// A file's identity: device and inode.
type FileKey = (u64, u64);

struct Entry {
    file: File,
    held: bool,
}

fn locks() -> &'static Mutex<HashMap<FileKey, Entry>> {
    static LOCKS: OnceLock<Mutex<HashMap<FileKey, Entry>>> = OnceLock::new();
    LOCKS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The writer lock of one file; dropping it releases the lock (the descriptor stays open).
pub(crate) struct WriterLock {
    key: FileKey,
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let mut locks = locks().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = locks.get_mut(&self.key) {
            let _ = entry.file.unlock();
            entry.held = false;
        }
    }
}

/// Why `try_lock` did not take the lock.
pub(crate) enum TryLock {
    /// Another writer, in this process or another, holds it.
    Taken,
    Failed(std::io::Error),
}

/// Take the writer lock of the file at `path` (created if missing) if it is free.
pub(crate) fn try_lock(path: &Path) -> Result<WriterLock, TryLock> {
    let mut locks = locks().lock().unwrap_or_else(|p| p.into_inner());
    // Descriptors of deleted files go (no path reaches them, so no connection can lock
    // them any more); while one is open its inode number is not reused, so keys stay unique.
    locks.retain(|_, e| e.held || e.file.metadata().is_ok_and(|m| m.nlink() > 0));
    let known = std::fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
        .filter(|key| locks.contains_key(key));
    let key = match known {
        Some(key) => key,
        None => {
            let file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(TryLock::Failed)?;
            let meta = file.metadata().map_err(TryLock::Failed)?;
            let key = (meta.dev(), meta.ino());
            match locks.entry(key) {
                // Another path to a file already here (a race with a rename): the descriptor
                // just opened must not be closed either, for the reason above.
                std::collections::hash_map::Entry::Occupied(_) => std::mem::forget(file),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(Entry { file, held: false });
                }
            }
            key
        }
    };
    let entry = locks
        .get_mut(&key)
        .unwrap_or_else(|| unreachable!("the entry was found or inserted above"));
    if entry.held {
        return Err(TryLock::Taken);
    }
    match entry.file.try_lock() {
        Ok(()) => {
            entry.held = true;
            Ok(WriterLock { key })
        }
        Err(std::fs::TryLockError::WouldBlock) => Err(TryLock::Taken),
        Err(std::fs::TryLockError::Error(e)) => Err(TryLock::Failed(e)),
    }
}
