//! Giving freed heap memory back to the system.
//!
//! glibc's allocator keeps freed memory for reuse instead of returning it, except at the very top of a heap. After
//! a large simulated world is built (parsing a scenario of 20,000 pods allocates and frees hundreds of megabytes),
//! after a watch's initial list (pages of objects parsed into JSON trees, then typed) and after each burst of
//! engine passes, that memory would stay resident for the rest of the session although nothing uses it.

use std::time::{Duration, Instant};

/// Returns free heap pages to the system (all arenas). A no-op where the allocator is not glibc's.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointer from us.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Keeps glibc's allocator to one arena, set before any thread starts (by `main`, for every command but `simulate`). By default it gives every thread that
/// allocates concurrently an arena of its own (up to eight per core), and memory freed in one arena is only reused
/// there: the watchers' tasks parse objects on every tokio worker, the picture is built on another, and each arena
/// keeps its own high-water mark resident. Measured at 1,000 nodes / 20,000 pods with objects as an API server sends
/// them (`cargo bench --bench live_dashboard`): 382 → 240 MiB resident with a picture on screen, the live heap
/// unchanged. Allocation is not this program's bottleneck, so the shared arena's lock costs nothing measurable.
/// A no-op where the allocator is not glibc's.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator tunable; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        // A fixed threshold: blocks from 256 KiB up (a page of listed objects, a picture's vectors) are mapped
        // and unmapped on their own. glibc otherwise raises the threshold to the largest block freed, and such
        // blocks then come from the heap, where the small objects allocated among them keep their pages resident.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

/// Calls [`release_free_memory`] at most once per period.
#[derive(Debug)]
pub struct Trimmer {
    period: Duration,
    last: Instant,
}

impl Trimmer {
    pub fn new(period: Duration) -> Trimmer {
        Trimmer { period, last: Instant::now() }
    }

    /// Trims if the period has passed since the last trim.
    pub fn tick(&mut self) {
        if self.last.elapsed() >= self.period {
            release_free_memory();
            self.last = Instant::now();
        }
    }
}
