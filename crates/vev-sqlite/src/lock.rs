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
//! would succeed). For the same reason anything else that reads the database file
//! (`probe`'s look at its header) reads it through that kept descriptor (`read_prefix`).
//!
//! Unix only: elsewhere (`lock_portable.rs`) a lock is a descriptor closed on release.

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
        let mut locks = vev_core::sync::lock(locks());
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

/// The key of `path`'s descriptor in `LOCKS`, opening it (and creating the file when
/// `create`) if the process has none yet. A descriptor opened here is kept, never closed.
fn descriptor(
    locks: &mut HashMap<FileKey, Entry>,
    path: &Path,
    create: bool,
) -> std::io::Result<FileKey> {
    // Descriptors of deleted files go (no path reaches them, so no connection can lock
    // them any more); while one is open its inode number is not reused, so keys stay unique.
    locks.retain(|_, e| e.held || e.file.metadata().is_ok_and(|m| m.nlink() > 0));
    let known = std::fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
        .filter(|key| locks.contains_key(key));
    if let Some(key) = known {
        return Ok(key);
    }
    let file = File::options()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .open(path)?;
    let meta = file.metadata()?;
    let key = (meta.dev(), meta.ino());
    match locks.entry(key) {
        // Another path to a file already here (a race with a rename): the descriptor
        // just opened must not be closed either, for the reason above.
        std::collections::hash_map::Entry::Occupied(_) => std::mem::forget(file),
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(Entry { file, held: false });
        }
    }
    Ok(key)
}

/// Read up to `len` bytes from the start of the file at `path` (fewer if it is shorter),
/// through the process's kept descriptor of it, so that reading it drops no lock a SQLite
/// connection of this process holds on it (`probe` reads the header before an open).
pub(crate) fn read_prefix(path: &Path, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut locks = vev_core::sync::lock(locks());
    let key = descriptor(&mut locks, path, false)?;
    let file = &locks
        .get(&key)
        .unwrap_or_else(|| unreachable!("the entry was found or inserted above"))
        .file;
    let mut buf = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// Take the writer lock of the file at `path` (created if missing) if it is free.
pub(crate) fn try_lock(path: &Path) -> Result<WriterLock, TryLock> {
    let mut locks = vev_core::sync::lock(locks());
    let key = descriptor(&mut locks, path, true).map_err(TryLock::Failed)?;
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
