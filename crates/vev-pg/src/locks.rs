//! Row locks: UPDATE, DELETE and SELECT ... FOR UPDATE lock the entities they write (or
//! will), held to the end of the transaction, so that two transactions never both compute
//! a row's new value from the same old one (PostgreSQL's READ COMMITTED, where a
//! `SET x = x + 1` never loses an update).
//!
//! A waiter is woken by any release (a version counter on a watch channel: no lost
//! wake-ups) and checks again. Before waiting it follows the chain of who waits for whom:
//! a chain back to itself is a deadlock, and the waiter fails with `40P01` as PostgreSQL
//! does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use vev::EntityId;

use crate::error::SqlError;

/// A session's id.
pub type SessionId = u64;

#[derive(Default)]
struct State {
    owners: HashMap<EntityId, SessionId>,
    /// Who each waiting session waits for.
    waits: HashMap<SessionId, SessionId>,
}

pub struct LockTable {
    state: Mutex<State>,
    released: watch::Sender<u64>,
}

impl Default for LockTable {
    fn default() -> LockTable {
        LockTable {
            state: Mutex::new(State::default()),
            released: watch::channel(0).0,
        }
    }
}

impl LockTable {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lock `ids` for `session` (in increasing order), waiting for other holders. `held`
    /// gets each id newly locked. Returns whether it had to wait. `timeout` bounds the
    /// whole wait (`57014` past it, as `lock_timeout`/`statement_timeout` do).
    pub async fn lock(
        &self,
        session: SessionId,
        ids: &[EntityId],
        held: &mut Vec<EntityId>,
        timeout: Option<Duration>,
        canceler: Option<&crate::cancel::Canceler>,
    ) -> Result<bool, SqlError> {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut waited = false;
        let mut next = 0;
        loop {
            let mut rx = self.released.subscribe();
            let blocker = {
                let mut st = self.state();
                let mut blocker = None;
                while next < sorted.len() {
                    let id = sorted[next];
                    match st.owners.get(&id) {
                        Some(&o) if o != session => {
                            blocker = Some(o);
                            break;
                        }
                        Some(_) => {}
                        None => {
                            st.owners.insert(id, session);
                            held.push(id);
                        }
                    }
                    next += 1;
                }
                match blocker {
                    None => {
                        st.waits.remove(&session);
                        return Ok(waited);
                    }
                    Some(o) => {
                        if waits_on(&st, o, session) {
                            st.waits.remove(&session);
                            return Err(SqlError::deadlock(format!(
                                "deadlock detected: this transaction waits for a row of entity {} that another transaction holds while it waits for this one",
                                sorted[next]
                            )));
                        }
                        st.waits.insert(session, o);
                        o
                    }
                }
            };
            let _ = blocker;
            waited = true;
            let changed = rx.changed();
            let wait = async {
                match deadline {
                    Some(d) => tokio::time::timeout_at(d, changed).await.is_ok(),
                    None => {
                        let _ = changed.await;
                        true
                    }
                }
            };
            let canceled = async {
                match canceler {
                    Some(c) => c.canceled().await,
                    None => std::future::pending().await,
                }
            };
            let ok = tokio::select! {
                ok = wait => ok,
                () = canceled => {
                    self.state().waits.remove(&session);
                    return Err(crate::cancel::Canceler::error());
                }
            };
            if !ok {
                self.state().waits.remove(&session);
                return Err(SqlError::canceled(
                    "canceling statement due to lock timeout",
                ));
            }
        }
    }

    /// Lock `ids` for `session` without waiting (`NOWAIT`): `55P03` if another session
    /// holds one of them. `held` gets each id newly locked, those taken before the failure
    /// too (the session releases them with the rest of its locks).
    pub fn try_lock(
        &self,
        session: SessionId,
        ids: &[EntityId],
        held: &mut Vec<EntityId>,
    ) -> Result<(), SqlError> {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut st = self.state();
        for id in sorted {
            match st.owners.get(&id) {
                Some(&o) if o != session => {
                    return Err(SqlError::new(
                        "55P03",
                        format!("could not obtain lock on the row of entity {id}: another transaction holds it"),
                    ))
                }
                Some(_) => {}
                None => {
                    st.owners.insert(id, session);
                    held.push(id);
                }
            }
        }
        Ok(())
    }

    /// Release `ids` (the session's locks) and wake the waiters.
    pub fn release(&self, session: SessionId, ids: &[EntityId]) {
        if ids.is_empty() {
            return;
        }
        {
            let mut st = self.state();
            for id in ids {
                if st.owners.get(id) == Some(&session) {
                    st.owners.remove(id);
                }
            }
            st.waits.remove(&session);
            // Whoever waited for this session wakes and looks again (finding a new
            // blocker, it records a new edge and checks for a cycle itself); until then,
            // its edge to this session is stale and would show a deadlock that is not.
            st.waits.retain(|_, blocker| *blocker != session);
        }
        self.released.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Rows locked now (for tests and `pg_locks`-like checks).
    pub fn held(&self) -> usize {
        self.state().owners.len()
    }
}

/// Whether `from`, following who waits for whom, reaches `target`.
fn waits_on(st: &State, mut from: SessionId, target: SessionId) -> bool {
    for _ in 0..st.waits.len() + 1 {
        if from == target {
            return true;
        }
        match st.waits.get(&from) {
            Some(&next) => from = next,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_second_locker_waits_for_the_release() {
        let t = Arc::new(LockTable::default());
        let mut a = Vec::new();
        assert!(!t.lock(1, &[10, 11], &mut a, None, None).await.unwrap());
        let t2 = t.clone();
        let waiter = tokio::spawn(async move {
            let mut b = Vec::new();
            let waited = t2.lock(2, &[11], &mut b, None, None).await.unwrap();
            (waited, b)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        t.release(1, &a);
        let (waited, b) = waiter.await.unwrap();
        assert!(waited);
        assert_eq!(b, vec![11]);
    }

    #[tokio::test]
    async fn a_cycle_is_a_deadlock() {
        let t = Arc::new(LockTable::default());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        t.lock(1, &[1], &mut a, None, None).await.unwrap();
        t.lock(2, &[2], &mut b, None, None).await.unwrap();
        let t2 = t.clone();
        let first = tokio::spawn(async move {
            let mut more = Vec::new();
            t2.lock(1, &[2], &mut more, None, None).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let err = t.lock(2, &[1], &mut b, None, None).await.unwrap_err();
        assert_eq!(err.code, "40P01");
        t.release(2, &b);
        assert!(first.await.unwrap().unwrap());
    }

    /// A waiter whose blocker released is not waiting for it any more: that session may
    /// lock a row the waiter holds without a deadlock (the waiter has not run since the
    /// release, so it has not yet taken the row it waited for).
    #[tokio::test]
    async fn a_released_blocker_is_no_deadlock() {
        let t = Arc::new(LockTable::default());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        t.lock(1, &[1], &mut a, None, None).await.unwrap();
        t.lock(2, &[2], &mut b, None, None).await.unwrap();
        let t2 = t.clone();
        let first = tokio::spawn(async move {
            let mut more = Vec::new();
            t2.lock(1, &[2], &mut more, None, None).await.map(|_| more)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        t.release(2, &b);
        // Session 1 has not run since: session 2 waits for it, which is no cycle.
        let err = t
            .lock(
                2,
                &[1],
                &mut Vec::new(),
                Some(Duration::from_millis(50)),
                None,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code, "57014", "a wait, not a deadlock: {err:?}");
        assert_eq!(first.await.unwrap().unwrap(), vec![2]);
    }

    #[tokio::test]
    async fn nowait_fails_on_a_held_row_and_keeps_what_it_took() {
        let t = LockTable::default();
        let mut a = Vec::new();
        t.lock(1, &[5], &mut a, None, None).await.unwrap();
        let mut b = Vec::new();
        t.try_lock(2, &[3, 4], &mut b).unwrap();
        assert_eq!(b, vec![3, 4]);
        t.try_lock(2, &[4], &mut b).unwrap();
        let err = t.try_lock(2, &[6, 5, 1], &mut b).unwrap_err();
        assert_eq!(err.code, "55P03");
        assert!(err.message.contains("entity 5"), "{}", err.message);
        assert_eq!(b, vec![3, 4, 1]);
        t.release(2, &b);
        assert_eq!(t.held(), 1);
    }

    #[tokio::test]
    async fn a_wait_past_the_timeout_fails() {
        let t = LockTable::default();
        let mut a = Vec::new();
        t.lock(1, &[5], &mut a, None, None).await.unwrap();
        let mut b = Vec::new();
        let err = t
            .lock(2, &[5], &mut b, Some(Duration::from_millis(20)), None)
            .await
            .unwrap_err();
        assert_eq!(err.code, "57014");
        assert_eq!(t.held(), 1);
    }

    #[tokio::test]
    async fn a_canceled_wait_fails_and_leaves_no_edge() {
        let t = std::sync::Arc::new(LockTable::default());
        let mut a = Vec::new();
        t.lock(1, &[5], &mut a, None, None).await.unwrap();
        let c = std::sync::Arc::new(crate::cancel::Canceler::default());
        c.start();
        let waiter = tokio::spawn({
            let (t, c) = (t.clone(), c.clone());
            async move { t.lock(2, &[5], &mut Vec::new(), None, Some(&c)).await }
        });
        while t.state().waits.is_empty() {
            tokio::task::yield_now().await;
        }
        let registry = crate::cancel::Registry::default();
        let key = pgwire::messages::startup::SecretKey::I32(3);
        registry.register(42, &key, &c);
        registry.cancel(42, &key);
        let err = waiter.await.unwrap().unwrap_err();
        assert_eq!(err.code, "57014");
        assert!(err.message.contains("user request"), "{}", err.message);
        assert!(t.state().waits.is_empty());
        assert_eq!(t.held(), 1);
    }
}
