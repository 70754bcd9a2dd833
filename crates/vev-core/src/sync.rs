//! Locks that a panic elsewhere does not make unusable: the one place Vev recovers a
//! poisoned lock.
//!
//! A lock is poisoned when a thread panics while holding it. Recovering the value inside is
//! safe in Vev because every lock guards data that each critical section leaves consistent
//! at every step: the latest `Db` (an `Arc` swapped in one store), the writer's state (a
//! transaction builds the next value aside and publishes it last), the segment cache (an LRU
//! updated entry by entry), a SQLite connection (each statement is atomic, and a write batch
//! not committed is rolled back), counters and plan caches (any value is valid). Turning the
//! poison into a panic of every later caller would only spread one failure to every reader.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock `mutex`, recovering it if poisoned (see the module doc for why that is safe).
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The value inside an exclusively borrowed `mutex`, poisoned or not.
pub fn get_mut<T: ?Sized>(mutex: &mut Mutex<T>) -> &mut T {
    mutex.get_mut().unwrap_or_else(PoisonError::into_inner)
}

/// Read-lock `lock`, recovering it if poisoned.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-lock `lock`, recovering it if poisoned.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// The value inside an exclusively borrowed `lock`, poisoned or not.
pub fn get_mut_rw<T: ?Sized>(lock: &mut RwLock<T>) -> &mut T {
    lock.get_mut().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_value() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(2));
        let (m2, rw2) = (m.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _a = m2.lock().unwrap();
            let _b = rw2.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && rw.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
        *write(&rw) += 1;
        assert_eq!(*read(&rw), 3);
    }
}
