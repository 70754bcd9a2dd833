//! Cancel requests (PostgreSQL's `CancelRequest`: psql's Ctrl-C, a driver's `cancel()`).
//!
//! A client cancels on a new connection that sends only the backend's process id and the
//! secret key the server gave the session at startup. The server looks the pair up here
//! and, when the session is running a statement, sets its flag: the query engine looks at
//! the flag where it looks at the clock (`vev::Limits::cancel`) and stops with
//! `query/canceled`; a wait for a row lock wakes. Either way the statement fails with
//! `57014` ("canceling statement due to user request") and the session stays usable, as in
//! PostgreSQL. A request for a session between statements, with a wrong key or for no
//! session, does nothing (PostgreSQL answers neither on the cancel connection). A durable
//! commit that has started is not interrupted: it either lands or fails on its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use bytes::Bytes;
use pgwire::api::cancel::CancelHandler;
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::startup::SecretKey;
use tokio::sync::Notify;

use crate::error::SqlError;

/// One session's cancel state.
#[derive(Debug, Default)]
pub struct Canceler {
    /// Set by a cancel request while a statement runs; the engine's limits hold it.
    requested: Arc<AtomicBool>,
    /// A statement is running (a request between statements does nothing).
    running: AtomicBool,
    /// Wakes a statement waiting for a row lock.
    wake: Notify,
}

impl Canceler {
    /// The flag the query engine watches (`vev::Limits::cancel`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.requested.clone()
    }

    /// A statement starts: earlier requests are forgotten.
    pub fn start(&self) {
        self.requested.store(false, Ordering::SeqCst);
        self.running.store(true, Ordering::SeqCst);
    }

    /// The statement ended.
    pub fn finish(&self) {
        self.running.store(false, Ordering::SeqCst);
        self.requested.store(false, Ordering::SeqCst);
    }

    /// A cancel request for this session: effective only while a statement runs.
    fn cancel(&self) {
        if self.running.load(Ordering::SeqCst) {
            self.requested.store(true, Ordering::SeqCst);
            self.wake.notify_waiters();
        }
    }

    /// Whether the running statement was canceled.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Resolves once the running statement is canceled.
    pub async fn canceled(&self) {
        loop {
            let woken = self.wake.notified();
            if self.requested() {
                return;
            }
            woken.await;
        }
    }

    /// The error a canceled statement fails with.
    pub fn error() -> SqlError {
        SqlError::canceled("canceling statement due to user request")
    }
}

/// The sessions that can be canceled, by process id, with their secret keys.
#[derive(Debug, Default)]
pub struct Registry {
    sessions: Mutex<HashMap<i32, (Bytes, Weak<Canceler>)>>,
}

impl Registry {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i32, (Bytes, Weak<Canceler>)>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Make `canceler` reachable by `pid` and `key` (a session's startup values).
    pub fn register(&self, pid: i32, key: &SecretKey, canceler: &Arc<Canceler>) {
        let mut map = self.map();
        map.retain(|_, (_, c)| c.strong_count() > 0);
        map.insert(pid, (key.to_bytes(), Arc::downgrade(canceler)));
    }

    /// Forget `pid` (its session ended).
    pub fn unregister(&self, pid: i32) {
        self.map().remove(&pid);
    }

    /// Cancel what the session of `pid` runs, if `key` is its key.
    pub fn cancel(&self, pid: i32, key: &SecretKey) {
        let target = {
            let map = self.map();
            map.get(&pid)
                .filter(|(k, _)| SecretKey::Bytes(k.clone()).eq_value(key))
                .and_then(|(_, c)| c.upgrade())
        };
        if let Some(c) = target {
            c.cancel();
        }
    }
}

/// pgwire's cancel handler: a request goes to the registry.
#[derive(Debug)]
pub struct Handler(pub Arc<Registry>);

#[async_trait]
impl CancelHandler for Handler {
    async fn on_cancel_request(&self, request: CancelRequest) {
        self.0.cancel(request.pid, &request.secret_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reaches_only_a_running_statement_with_the_right_key() {
        let registry = Registry::default();
        let c = Arc::new(Canceler::default());
        let key = SecretKey::I32(1234);
        registry.register(7, &key, &c);
        registry.cancel(7, &key);
        assert!(!c.requested(), "between statements a request does nothing");
        c.start();
        registry.cancel(7, &SecretKey::I32(99));
        registry.cancel(8, &key);
        assert!(!c.requested(), "a wrong key or pid does nothing");
        registry.cancel(
            7,
            &SecretKey::Bytes(Bytes::copy_from_slice(&1234i32.to_be_bytes())),
        );
        assert!(c.requested(), "the key compares by value");
        c.finish();
        c.start();
        assert!(!c.requested(), "the next statement starts clean");
        registry.unregister(7);
        registry.cancel(7, &key);
        assert!(!c.requested());
    }

    #[tokio::test]
    async fn a_waiting_statement_wakes() {
        let c = Arc::new(Canceler::default());
        c.start();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.canceled().await }
        });
        tokio::task::yield_now().await;
        c.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("task");
    }
}
