//! Giving freed heap memory back to the system.
//!
//! glibc's allocator keeps freed memory for reuse instead of returning it, except at the very top of a heap. After
//! a large simulated world is built (parsing a scenario of 20,000 pods allocates and frees hundreds of megabytes),
//! after a watch's initial list (pages of 500 objects parsed into JSON trees, then typed) and after each burst of
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
