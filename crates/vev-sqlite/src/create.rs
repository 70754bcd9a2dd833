//! Creating a new database file in one step (see `create_file`), and syncing a directory
//! after a new name appears in it.

use std::path::Path;

use vev_core::StorageError;

use crate::faults::FaultPlan;
use crate::{check_or_init_format, io, open_sqlite};

/// Create a new, empty database at `path`, which did not exist, in one step: the file is
/// made and given Vev's tables under a temporary name in the same directory, synced, and
/// then linked to `path`. A process killed meanwhile leaves no file at `path` (only the
/// temporary one, named `.NAME.creating-PID`), never an empty or half-made one that readers
/// would refuse (`storage/not-vev`). When another process created `path` first, its file
/// stays and is opened. Where the file system has no hard links, the database is created at
/// `path` directly, as SQLite would.
pub(crate) fn create_file(
    path: &Path,
    display: &str,
    faults: Option<&FaultPlan>,
) -> Result<(), StorageError> {
    let name = path
        .file_name()
        .map_or_else(|| std::ffi::OsString::from("vev"), |n| n.to_os_string());
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(&name);
    temp_name.push(format!(".creating-{}", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let _ = std::fs::remove_file(&temp); // left by a killed process that had our pid
    let made = (|| {
        let conn = open_sqlite(&temp, false)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(io("set journal mode"))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(io("set synchronous"))?;
        check_or_init_format(&conn, display, false)?;
        // The last connection's close checkpoints the write-ahead log into the file.
        conn.close().map_err(|(_, e)| io("create")(e))?;
        std::fs::File::open(&temp)
            .and_then(|f| f.sync_all())
            .map_err(|e| StorageError::from_io("create", display, &e))
    })();
    let made = made.and_then(|()| faults.map_or(Ok(()), |f| f.hit_uncounted("create link")));
    // A link fails when `path` appeared meanwhile (that file stays) and where the file
    // system has no hard links (`open_file` then creates the database in place).
    let linked = made.map(|()| {
        if std::fs::hard_link(&temp, path).is_ok() {
            sync_dir(path);
        }
    });
    for suffix in ["", "-wal", "-shm"] {
        let mut f = temp.as_os_str().to_owned();
        f.push(suffix);
        let _ = std::fs::remove_file(f);
    }
    linked
}

/// Sync `path`'s directory, so that a new name in it survives a crash (best effort: not
/// every platform can open a directory).
pub(crate) fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreOptions};

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_database_appears_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.vev");
        let display = path.display().to_string();
        // Stopped before it takes its name: nothing at `path`, nothing left beside it.
        let faults = FaultPlan::new(0, false);
        faults.fail_next("create link");
        let e = create_file(&path, &display, Some(&faults)).unwrap_err();
        assert_eq!(e.code(), "storage/injected");
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        // Completed: a database a reader opens (before, a reader met an empty file while the
        // writer that created it had not yet made its tables).
        create_file(&path, &display, None).unwrap();
        assert_eq!(names(dir.path()), ["new.vev"]);
        let read_only = StoreOptions {
            read_only: true,
            ..StoreOptions::default()
        };
        let opened = Store::open(&path, &read_only).unwrap();
        assert_eq!(opened.db.basis_t(), 0);
        drop(opened);
        // Created meanwhile by another process: that file stays.
        let before = std::fs::read(&path).unwrap();
        create_file(&path, &display, None).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert!(
            names(dir.path()).iter().all(|n| n.starts_with("new.vev")),
            "{:?}",
            names(dir.path())
        );
    }
}
