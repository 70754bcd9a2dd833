//! What a path given as a database is, told apart before and after SQLite fails on it, so
//! that each cause has its own error: a directory (`storage/is-directory`), a file that is
//! not SQLite at all (`storage/not-vev`), a SQLite file cut short (`storage/truncated`), a
//! directory SQLite cannot create the `-wal` and `-shm` files in
//! (`storage/read-only-directory`).
//!
//! SQLite's own findings name none of these ("disk I/O error", "file is not a database",
//! "database disk image is malformed"). The checks read only the file's first 100 bytes, the
//! SQLite header (magic string, page size at 16, page count at 28, valid when the change
//! counter at 24 equals the version-valid-for number at 92).
//!
//! The length check before SQLite opens the file runs only when no `-wal` file holds frames:
//! a checkpoint in another process writes page 1 (with the new page count) before the pages
//! that extend the file, so while one runs the header may briefly claim more than the file
//! has. After SQLite failed, the same check explains the failure.

use std::path::Path;

use vev_core::StorageError;

const MAGIC: &[u8; 16] = b"SQLite format 3\0";
const HEADER_BYTES: u64 = 100;

/// Checks, before SQLite opens it, that an existing `path` can be a database file. A path
/// that does not exist, or an empty file, passes (a writer creates the database there).
pub(crate) fn check_file(path: &Path, display: &str) -> Result<(), StorageError> {
    let io = |e: std::io::Error| StorageError::from_io("open", display, &e);
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    if meta.is_dir() {
        return Err(StorageError::IsDirectory {
            path: display.to_owned(),
        });
    }
    let size = meta.len();
    if size == 0 {
        return Ok(());
    }
    let header = read_header(path).map_err(io)?;
    if !MAGIC.starts_with(&header[..header.len().min(MAGIC.len())]) {
        return Err(StorageError::NotVev {
            path: display.to_owned(),
            reason: "it is not a SQLite file (its first bytes are not SQLite's header)".into(),
        });
    }
    if size < HEADER_BYTES {
        return Err(truncated(display, size, HEADER_BYTES));
    }
    if !wal_has_frames(path) {
        if let Some(expected) = header_size(&header).filter(|&n| n > size) {
            return Err(truncated(display, size, expected));
        }
    }
    Ok(())
}

/// The error to report for `err`, a failure to open `path`: a truncation or a read-only
/// directory when the file or its directory shows one, else `err` itself.
pub(crate) fn explain_failure(path: &Path, display: &str, err: StorageError) -> StorageError {
    if matches!(
        err,
        StorageError::Locked { .. } | StorageError::FormatVersion { .. }
    ) {
        return err;
    }
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    if let Some(expected) = read_header(path)
        .ok()
        .and_then(|h| header_size(&h))
        .filter(|&n| n > size)
    {
        return truncated(display, size, expected);
    }
    // A writer creates the `-wal` and `-shm` files; a reader of a WAL database needs the
    // `-shm` file too (SQLite says "attempt to write a readonly database").
    if matches!(err, StorageError::Io { .. }) {
        if let Some(reason) = unwritable_dir(path) {
            return StorageError::ReadOnlyDirectory {
                path: display.to_owned(),
                dir: dir_of(path).display().to_string(),
                reason,
            };
        }
    }
    err
}

fn truncated(display: &str, size: u64, expected: u64) -> StorageError {
    StorageError::Truncated {
        path: display.to_owned(),
        size,
        expected,
    }
}

/// Up to the first 100 bytes of the file.
/// The file's first `HEADER_BYTES`, read without opening and closing a descriptor of the
/// file (which would drop the locks this process's SQLite connections hold on it; see
/// `lock.rs`).
fn read_header(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::lock::read_prefix(path, HEADER_BYTES as usize)
}

/// The database size in bytes that a SQLite header records, when it records one validly.
pub(crate) fn header_size(header: &[u8]) -> Option<u64> {
    let field = |at: usize| -> Option<[u8; 4]> { header.get(at..at + 4)?.try_into().ok() };
    let page_size = match u16::from_be_bytes(header.get(16..18)?.try_into().ok()?) {
        1 => 65536,
        n if n >= 512 && n.is_power_of_two() => u64::from(n),
        _ => return None,
    };
    let pages = u64::from(u32::from_be_bytes(field(28)?));
    let valid = field(24)? == field(92)? && pages > 0;
    valid.then_some(page_size * pages)
}

/// Whether `path`'s `-wal` file exists with more than its header.
fn wal_has_frames(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).is_ok_and(|m| m.len() > 32)
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Why no file can be created in `path`'s directory, if it cannot: tried by creating and
/// removing one, as SQLite must for the `-wal` and `-shm` files.
fn unwritable_dir(path: &Path) -> Option<String> {
    let dir = dir_of(path);
    if !dir.is_dir() {
        return None;
    }
    let probe = dir.join(format!(".vev-write-probe-{}", std::process::id()));
    match std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            Some(e.to_string())
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(page_size: u16, pages: u32, valid: bool) -> Vec<u8> {
        let mut h = vec![0u8; 100];
        h[..16].copy_from_slice(MAGIC);
        h[16..18].copy_from_slice(&page_size.to_be_bytes());
        h[24..28].copy_from_slice(&7u32.to_be_bytes());
        h[28..32].copy_from_slice(&pages.to_be_bytes());
        let version_valid_for: u32 = if valid { 7 } else { 6 };
        h[92..96].copy_from_slice(&version_valid_for.to_be_bytes());
        h
    }

    #[test]
    fn header_size_reads_page_size_and_count() {
        assert_eq!(header_size(&header(4096, 7, true)), Some(7 * 4096));
        assert_eq!(header_size(&header(1, 2, true)), Some(2 * 65536));
        assert_eq!(header_size(&header(4096, 7, false)), None);
        assert_eq!(header_size(&header(1000, 7, true)), None);
        assert_eq!(header_size(&header(4096, 7, true)[..50]), None);
    }

    fn dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "vev-probe-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn each_kind_of_file_has_its_own_code() {
        let dir = dir();
        let code = |path: &Path| check_file(path, "f").err().map(|e| e.code());
        assert_eq!(code(&dir), Some("storage/is-directory"));
        assert_eq!(code(&dir.join("missing.vev")), None);
        let file = dir.join("f.vev");
        let cases: [(&[u8], Option<&str>); 5] = [
            (b"", None),
            (b"hello, this is text\n", Some("storage/not-vev")),
            (b"SQLite for", Some("storage/truncated")),
            (&header(4096, 7, true), Some("storage/truncated")),
            (&header(4096, 7, false), None),
        ];
        for (bytes, expected) in cases {
            std::fs::write(&file, bytes).unwrap();
            assert_eq!(code(&file), expected, "{bytes:?}");
        }
        let e = check_file(&file_with(&dir, &header(4096, 7, true)), "f").unwrap_err();
        assert_eq!(
            e.to_string(),
            "database f is truncated: the file has 100 bytes but its header says 28672"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn file_with(dir: &Path, bytes: &[u8]) -> std::path::PathBuf {
        let path = dir.join("g.vev");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_failure_is_explained_by_a_truncated_header() {
        let dir = dir().join("explain");
        std::fs::create_dir_all(&dir).unwrap();
        let path = file_with(&dir, &header(4096, 3, true));
        let io = StorageError::io_kind("open", std::io::ErrorKind::Other, "disk I/O error");
        let e = explain_failure(&path, "g", io.clone());
        assert_eq!(e.code(), "storage/truncated");
        // A whole file: the failure stays what it was (this directory is writable).
        let mut whole = header(4096, 1, true);
        whole.resize(4096, 0);
        let path = file_with(&dir, &whole);
        assert_eq!(explain_failure(&path, "g", io.clone()), io);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
