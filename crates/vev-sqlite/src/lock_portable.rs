//! The writer lock where there are no POSIX `fcntl` locks (Windows): an exclusive lock on
//! the database file through a descriptor of its own, released by closing it. Closing a
//! descriptor there drops only the locks taken through it, so nothing needs to stay open
//! (see `lock.rs` for why Unix differs). Built on Unix too, for its tests.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The writer lock of one file; dropping it closes the descriptor, which releases the lock.
pub(crate) struct WriterLock {
    _file: File,
}

/// Why `try_lock` did not take the lock.
// On Unix only the tests build this, and they do not read the error.
#[cfg_attr(unix, allow(dead_code))]
pub(crate) enum TryLock {
    /// Another writer, in this process or another, holds it.
    Taken,
    Failed(std::io::Error),
}

/// Read up to `len` bytes from the start of the file at `path` (fewer if it is shorter).
pub(crate) fn read_prefix(path: &Path, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    File::open(path)?.take(len as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Take the writer lock of the file at `path` (created if missing) if it is free.
pub(crate) fn try_lock(path: &Path) -> Result<WriterLock, TryLock> {
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(TryLock::Failed)?;
    match file.try_lock() {
        Ok(()) => Ok(WriterLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(TryLock::Taken),
        Err(std::fs::TryLockError::Error(e)) => Err(TryLock::Failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_at_a_time_and_the_lock_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let first = try_lock(&path).ok().expect("a free lock");
        assert!(matches!(try_lock(&path), Err(TryLock::Taken)));
        drop(first);
        let again = try_lock(&path).ok().expect("free again once dropped");
        drop(again);
        std::fs::write(&path, b"SQLite format 3\0rest").unwrap();
        assert_eq!(read_prefix(&path, 16).unwrap(), b"SQLite format 3\0");
        assert_eq!(read_prefix(&path, 100).unwrap().len(), 20);
    }
}
