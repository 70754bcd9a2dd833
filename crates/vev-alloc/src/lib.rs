//! mimalloc as a global allocator for programs that embed Vev (the `mimalloc` feature; the
//! `vev` and `vev-bench` binaries use it). The library itself sets no allocator.
//!
//! Why: Vev's trees copy and free many small nodes per transaction, and glibc's allocator
//! spends more time on that churn than the transactor does once the heap holds millions of
//! datoms (`bench/history/2026-11-30-1845-allocator.md`).
//!
//! Through the facade it is `vev::alloc` (the `vev` crate's `mimalloc` feature):
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOCATOR: vev_alloc::MiMalloc = vev_alloc::MiMalloc;
//!
//! fn main() {
//!     vev_alloc::keep_freed_memory();
//!     // ...
//! }
//! ```
//!
//! This is the one crate of the workspace with `unsafe` code (every block with a
//! `// SAFETY:` comment); the others forbid it.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every mimalloc block has (a machine word: the smallest block is one, and
/// blocks of a size class lie end to end). Layouts that ask for no more go through
/// `mi_malloc`, whose paths for blocks over 1 KiB are much shorter than `mi_malloc_aligned`'s
/// (which over-allocates for them).
const MIN_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc's `MI_MAX_ALIGN_SIZE`: blocks whose size is a multiple of it are aligned to it
/// (their size classes are too, and a page's blocks start at an address aligned to it).
const MAX_ALIGN: usize = 16;

/// mimalloc behind Rust's `GlobalAlloc`.
pub struct MiMalloc;

/// Whether `mi_malloc` gives a block of `size` bytes the alignment `align`. Types of
/// alignment 16 (`u128`, and enums and collections holding them) have sizes that are
/// multiples of 16, so their allocations take this path too.
fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN || (align == MAX_ALIGN && size.is_multiple_of(MAX_ALIGN))
}

// SAFETY: every block comes from mimalloc with at least the layout's size and alignment
// (`mi_malloc` gives every block `MIN_ALIGN`, and `MAX_ALIGN` to blocks of a multiple of
// it; `plain` sends nothing else its way), and goes back to `mi_free`, which takes any
// mimalloc block.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions have no preconditions.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_malloc(layout.size()) as *mut u8
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_zalloc(layout.size()) as *mut u8
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract).
        unsafe { mi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract).
        unsafe {
            if plain(layout.align(), layout.size()) && plain(layout.align(), new_size) {
                mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

/// mimalloc's number for its `purge_delay` option (`mi_option_purge_delay` in the `mimalloc.h`
/// of the pinned libmimalloc-sys, whose Rust bindings name no constant for it).
const MI_OPTION_PURGE_DELAY: mi::mi_option_t = 15;

/// Keep freed memory for reuse instead of returning it to the OS a second after it is freed.
/// Transactions free and allocate index nodes all the time; with purging on, an in-memory bulk
/// load spent much of its time faulting zeroed pages back in
/// (`bench/history/2026-11-30-1845-allocator.md`).
pub fn keep_freed_memory() {
    // SAFETY: `mi_option_set` stores one integer option of the allocator; any value is valid
    // for `purge_delay` (-1 turns purging off) and the call has no other preconditions.
    unsafe { mi::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

#[cfg(test)]
mod tests {
    use std::ffi::{c_char, c_void, CStr};

    extern "C" {
        /// mimalloc's `mi_options_print_out` (v3), which libmimalloc-sys does not bind.
        fn mi_options_print_out(out: libmimalloc_sys::mi_output_fun, arg: *mut c_void);
    }

    unsafe extern "C" fn collect(msg: *const c_char, arg: *mut c_void) {
        // SAFETY: `arg` is the `String` passed below, alive for the whole call; mimalloc
        // hands over a NUL-terminated message.
        let out = unsafe { &mut *(arg as *mut String) };
        // SAFETY: mimalloc passes a NUL-terminated message that lives for this call.
        out.push_str(&unsafe { CStr::from_ptr(msg) }.to_string_lossy());
    }

    /// The option number `keep_freed_memory` sets is the purge delay: mimalloc's own listing
    /// of its options names it (a libmimalloc-sys upgrade that renumbers options fails here).
    #[test]
    fn keep_freed_memory_sets_the_purge_delay() {
        super::keep_freed_memory();
        let mut listing = String::new();
        // SAFETY: `collect` matches `mi_output_fun` and only writes to `listing`.
        unsafe { mi_options_print_out(Some(collect), &mut listing as *mut String as *mut c_void) };
        assert!(
            listing.contains("option 'purge_delay': -1"),
            "mimalloc's options: {listing}"
        );
    }

    /// Blocks of 16-byte alignment through `mi_malloc`: many of every size class up to
    /// 2 KiB and of sizes up to 1 MiB, live at once so that they spread over whole pages,
    /// are all aligned.
    #[test]
    fn sixteen_byte_multiples_are_sixteen_byte_aligned() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = super::MiMalloc;
        let sizes = (16..=2048)
            .step_by(16)
            .chain((2064..=1 << 20).step_by(16 * 331));
        for size in sizes {
            let layout = Layout::from_size_align(size, 16).unwrap();
            assert!(super::plain(16, size));
            // SAFETY: a non-zero size; every block is freed with its layout.
            unsafe {
                let blocks: Vec<*mut u8> = (0..300).map(|_| a.alloc(layout)).collect();
                for &p in &blocks {
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(16),
                        "size {size}: {p:?}"
                    );
                }
                for p in blocks {
                    a.dealloc(p, layout);
                }
            }
        }
    }

    /// Blocks of every size and alignment come back aligned, keep their bytes through
    /// `realloc`, and zeroed ones are zero.
    #[test]
    fn blocks_have_their_layouts() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = super::MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 15, 16, 17, 100, 1024, 1500, 40_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; every block is freed with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    p.write_bytes(0xAB, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert!((q as usize).is_multiple_of(align), "realloc {size} {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xAB));
                    a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(
                        (z as usize).is_multiple_of(align) && (0..size).all(|i| *z.add(i) == 0)
                    );
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
