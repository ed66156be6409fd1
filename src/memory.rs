//! Memory given back after large messages. glibc's allocator serves large blocks
//! with `mmap` and returns them on free, but only below a threshold that it raises
//! to the size of every large block freed (up to 32 MiB): after a few 16 MB
//! messages, each later one comes from the heap and its pages stay with the
//! process. Fixing the thresholds keeps the resident size near what is live, which
//! the tap's byte budget bounds.

/// Blocks from this size are mapped and unmapped on their own.
const MMAP_THRESHOLD: i32 = 1024 * 1024;
/// Free memory at the top of the heap beyond this is returned.
const TRIM_THRESHOLD: i32 = 4 * 1024 * 1024;

/// Sets the allocator's thresholds (once per process; harmless to repeat).
pub fn give_large_blocks_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
