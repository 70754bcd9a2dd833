//! The databases this process has opened, one entry per file, shared by every DuckDB thread.
//!
//! A path is opened once: reads go through a read-only connection that follows the writer's
//! commits (another process's, or this one's), so a call costs a map lookup and a check of the
//! file's data version, not an open. A writer is opened only for `vev_transact` and then kept:
//! once this process holds it, reads use it too (it is always current). Like any Vev writer it
//! holds the file's writer lock until the process exits, so another process's writer fails
//! with `storage/locked` meanwhile.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use vev::{Connection, Db, OpenOptions};

use crate::error::{ExtError, Result};

/// One database file and its connections.
pub struct Handle {
    path: PathBuf,
    reader: Mutex<Option<Connection>>,
    writer: Mutex<Option<Connection>>,
}

/// The open databases: by the path as given (the fast path) and by canonical path (so two
/// spellings of one file share one entry).
#[derive(Default)]
struct Cache {
    by_given: HashMap<String, Arc<Handle>>,
    by_canonical: HashMap<PathBuf, Arc<Handle>>,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Locks a mutex, recovering it if a panicking call poisoned it: every value behind these
/// locks is replaced whole, never left half-updated, so the data stays valid.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The entry for `path`, made on first use. The file need not exist yet (`vev_transact`
/// creates it); reading a missing file fails in `Handle::db`.
pub fn handle(path: &str) -> Result<Arc<Handle>> {
    if path.is_empty() {
        return Err(ExtError::argument("the database path is empty"));
    }
    if let Some(h) = lock(cache()).by_given.get(path) {
        return Ok(h.clone());
    }
    let canonical = canonical(Path::new(path))?;
    let mut cache = lock(cache());
    let h = cache
        .by_canonical
        .entry(canonical.clone())
        .or_insert_with(|| {
            Arc::new(Handle {
                path: canonical,
                reader: Mutex::new(None),
                writer: Mutex::new(None),
            })
        })
        .clone();
    cache.by_given.insert(path.to_owned(), h.clone());
    Ok(h)
}

/// The absolute, symlink-free form of `path`; for a file not made yet, its parent's.
fn canonical(path: &Path) -> Result<PathBuf> {
    let not_found = |e: std::io::Error| {
        ExtError::new(
            "duckdb/bad-path",
            format!("database path {}: {e}", path.display()),
        )
    };
    match std::fs::canonicalize(path) {
        Ok(p) => Ok(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = path.file_name().ok_or_else(|| not_found(e))?;
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let dir = std::fs::canonicalize(parent).map_err(not_found)?;
            Ok(dir.join(name))
        }
        Err(e) => Err(not_found(e)),
    }
}

impl Handle {
    /// The latest database: the writer's, if this process has one; otherwise the reader's,
    /// caught up with every commit to the file.
    pub fn db(&self) -> Result<Db> {
        if let Some(w) = lock(&self.writer).as_ref() {
            return Ok(w.db());
        }
        let mut reader = lock(&self.reader);
        if reader.is_none() {
            if !self.path.exists() {
                return Err(ExtError::new(
                    "duckdb/no-database",
                    format!(
                        "no Vev database at {} (vev_transact creates one)",
                        self.path.display()
                    ),
                ));
            }
            *reader = Some(Connection::open_with(
                &self.path,
                &OpenOptions::read_only(),
            )?);
        }
        let conn = reader.as_ref().expect("opened above").clone();
        drop(reader);
        Ok(conn.sync()?)
    }

    /// The writer, opened (and the file created) on first use.
    pub fn writer(&self) -> Result<Connection> {
        let mut writer = lock(&self.writer);
        if let Some(w) = writer.as_ref() {
            return Ok(w.clone());
        }
        let conn = Connection::open(&self.path)?;
        *writer = Some(conn.clone());
        Ok(conn)
    }
}

/// Close this process's connections to `path` (Datomic's `release`): the writer, if
/// `vev_transact` opened one, checkpoints its log tail and empties its WAL into the file as it
/// closes, and its lock is freed for other processes. A later call opens the file again.
/// Returns whether anything was open. A call still running on the file keeps its connection
/// until it ends.
pub fn release(path: &str) -> Result<bool> {
    let canonical = canonical(Path::new(path))?;
    let handle = {
        let mut cache = lock(cache());
        let handle = cache.by_canonical.remove(&canonical);
        if let Some(h) = &handle {
            cache.by_given.retain(|_, v| !Arc::ptr_eq(v, h));
        }
        handle
    };
    let Some(handle) = handle else {
        return Ok(false);
    };
    let writer = lock(&handle.writer).take();
    let reader = lock(&handle.reader).take();
    let open = writer.is_some() || reader.is_some();
    // Dropped here, outside every lock: closing a writer may checkpoint.
    drop(writer);
    drop(reader);
    Ok(open)
}
