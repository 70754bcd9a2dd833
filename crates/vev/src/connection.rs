//! `Connection`: the one writer of a database and the source of its latest `Db`.
//!
//! The writer lock serialises transactions; the latest `Db` sits behind a read-write lock that
//! is held only to clone or replace an `Arc`, so readers never wait for a transaction to be
//! computed. Subscribers get every report in commit order because reports are sent while the
//! writer lock is still held.

use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use vev_core::{Edn, Keyword, TxOp};
use vev_db::{Db, TxContext, TxFunctions, TxReport};

use crate::error::Error;

/// A transaction function: gets db-before and the arguments of its list form, returns the
/// transaction data to use in its place (or an error message that aborts the transaction).
pub type TxFn = Arc<dyn Fn(&Db, &[Edn]) -> Result<Vec<TxOp>, String> + Send + Sync>;

struct Writer {
    listeners: Vec<Sender<TxReport>>,
}

struct Inner {
    latest: RwLock<Db>,
    writer: Mutex<Writer>,
    functions: RwLock<HashMap<Keyword, TxFn>>,
}

/// A connection to one database. Cheap to clone; clones share the database.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Registry<'a>(&'a HashMap<Keyword, TxFn>);

impl TxFunctions for Registry<'_> {
    fn call(&self, name: &Keyword, db: &Db, args: &[Edn]) -> Option<Result<Vec<TxOp>, String>> {
        self.0.get(name).map(|f| f(db, args))
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Connection {
    /// A new, empty in-memory database.
    pub fn open_in_memory() -> Connection {
        Connection::from_db(Db::empty())
    }

    /// A connection whose database starts as `db` (e.g. one built with `with`).
    pub fn from_db(db: Db) -> Connection {
        Connection {
            inner: Arc::new(Inner {
                latest: RwLock::new(db.current()),
                writer: Mutex::new(Writer {
                    listeners: Vec::new(),
                }),
                functions: RwLock::new(HashMap::new()),
            }),
        }
    }

    /// The latest database value.
    pub fn db(&self) -> Db {
        self.inner
            .latest
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Transact EDN transaction data.
    pub fn transact_edn(&self, text: &str) -> Result<TxReport, Error> {
        let ops: Vec<TxOp> = vev_core::parse_tx(text)?
            .into_iter()
            .map(|s| s.op)
            .collect();
        self.transact(&ops)
    }

    /// Transact operations built in Rust.
    pub fn transact(&self, ops: &[TxOp]) -> Result<TxReport, Error> {
        let mut writer = self.inner.writer.lock().unwrap_or_else(|p| p.into_inner());
        let before = self.db();
        let report = self.apply(&before, ops)?;
        *self.inner.latest.write().unwrap_or_else(|p| p.into_inner()) = report.db_after.clone();
        writer
            .listeners
            .retain(|tx| tx.send(report.clone()).is_ok());
        Ok(report)
    }

    /// Apply operations to `db` without committing them (Datomic's `with`).
    pub fn with(&self, db: &Db, ops: &[TxOp]) -> Result<TxReport, Error> {
        self.apply(db, ops)
    }

    /// `with` for EDN transaction data.
    pub fn with_edn(&self, db: &Db, text: &str) -> Result<TxReport, Error> {
        let ops: Vec<TxOp> = vev_core::parse_tx(text)?
            .into_iter()
            .map(|s| s.op)
            .collect();
        self.with(db, &ops)
    }

    fn apply(&self, db: &Db, ops: &[TxOp]) -> Result<TxReport, Error> {
        let functions = self
            .inner
            .functions
            .read()
            .unwrap_or_else(|p| p.into_inner());
        let ctx = TxContext {
            functions: &Registry(&functions),
            now_ms: now_ms(),
        };
        Ok(vev_db::transact(db, ops, &ctx)?)
    }

    /// Register a transaction function under an ident: `[:my/transfer from to amount]`.
    pub fn register_fn(
        &self,
        ident: &str,
        f: impl Fn(&Db, &[Edn]) -> Result<Vec<TxOp>, String> + Send + Sync + 'static,
    ) {
        let key = Keyword::new(ident.trim_start_matches(':'));
        self.inner
            .functions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Arc::new(f));
    }

    /// A feed of every transaction report committed from now on, in commit order.
    pub fn subscribe(&self) -> Receiver<TxReport> {
        let (tx, rx) = channel();
        self.inner
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .listeners
            .push(tx);
        rx
    }
}
