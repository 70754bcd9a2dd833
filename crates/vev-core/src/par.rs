//! Work split over two threads: the one place Vev runs two closures at once and waits for
//! both (an index sort, a checkpoint's trees, a large transaction's halves, a COPY's lines),
//! and the one thread that frees large values beside the work that made them garbage.

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;

/// Run `beside` on a scoped thread of its own while `here` runs on this thread; both
/// results, once both have finished. A panic in `beside` is re-raised here, as if it had
/// run inline.
pub fn join<A, B>(here: impl FnOnce() -> A, beside: impl FnOnce() -> B + Send) -> (A, B)
where
    B: Send,
{
    std::thread::scope(|scope| {
        let other = scope.spawn(beside);
        let a = here();
        let b = other
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (a, b)
    })
}

/// A value to be dropped by the reclaiming thread.
type Garbage = Box<dyn Send>;

/// Values waiting for the reclaiming thread at most; past that, `drop_beside` drops here
/// (the caller then waits for the freeing it made, so garbage cannot pile up faster than
/// one thread frees it).
const RECLAIM_QUEUE: usize = 8;

/// Drop `value` on a thread of its own ("vev-reclaim", started at the first call and kept
/// for the process), so the caller does not wait for a large structure to be freed: the
/// nodes a large transaction replaced, its resolved terms. When that thread is behind (or
/// could not be started), `value` is dropped here.
pub fn drop_beside<T: Send + 'static>(value: T) {
    static RECLAIMER: OnceLock<Option<SyncSender<Garbage>>> = OnceLock::new();
    let sender = RECLAIMER.get_or_init(|| {
        let (send, receive) = sync_channel::<Garbage>(RECLAIM_QUEUE);
        std::thread::Builder::new()
            .name("vev-reclaim".into())
            .spawn(move || receive.into_iter().for_each(drop))
            .ok()
            .map(|_| send)
    });
    let garbage: Garbage = Box::new(value);
    if let Some(sender) = sender {
        match sender.try_send(garbage) {
            Ok(()) => {}
            Err(TrySendError::Full(g) | TrySendError::Disconnected(g)) => drop(g),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{drop_beside, join};

    #[test]
    fn both_results_come_back_in_place() {
        let data: Vec<u64> = (0..1000).collect();
        let (low, high) = data.split_at(500);
        let (a, b) = join(|| low.iter().sum::<u64>(), || high.iter().sum::<u64>());
        assert_eq!((a, b), (124_750, 374_750));
    }

    #[test]
    fn a_panic_beside_is_raised_here() {
        let caught = std::panic::catch_unwind(|| join(|| 1, || -> u32 { panic!("beside") }));
        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"beside"));
    }

    #[test]
    fn values_dropped_beside_are_dropped_on_another_thread() {
        struct Tell(std::sync::mpsc::Sender<std::thread::ThreadId>);
        impl Drop for Tell {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().id());
            }
        }
        let (send, receive) = std::sync::mpsc::channel();
        // More than the queue holds: the ones it cannot take are dropped here, none is lost.
        let n = 3 * super::RECLAIM_QUEUE;
        for _ in 0..n {
            drop_beside(Tell(send.clone()));
        }
        drop(send);
        let threads: Vec<_> = receive.iter().collect();
        assert_eq!(threads.len(), n);
        let here = std::thread::current().id();
        assert!(threads.iter().any(|t| *t != here));
    }
}
