//! Work split over two threads: the one place Vev runs two closures at once and waits for
//! both (an index sort, a checkpoint's trees, a large transaction's halves, a COPY's lines).

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

#[cfg(test)]
mod tests {
    use super::join;

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
}
