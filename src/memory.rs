//! Memory the process keeps: only what is live, not what an allocator or the
//! kernel rounds it up to.

/// Blocks from this size are mapped and unmapped on their own.
const MMAP_THRESHOLD: i32 = 1024 * 1024;
/// Free memory at the top of the heap beyond this is returned.
const TRIM_THRESHOLD: i32 = 4 * 1024 * 1024;

/// glibc's allocator (a library user's, the tests'; the binary uses mimalloc)
/// serves large blocks with `mmap` and returns them on free, but only below a
/// threshold that it raises to the size of every large block freed (up to 32 MiB):
/// after a few 16 MB messages, each later one comes from the heap and its pages
/// stay with the process. Fixing the thresholds keeps the resident size near what
/// is live, which the tap's byte budget bounds. Once per process; harmless to repeat.
pub fn give_large_blocks_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

/// No transparent huge pages for this process, from now on. mimalloc asks for them
/// on its arenas (`madvise(MADV_HUGEPAGE)`), so each thread's first small
/// allocation faulted in a whole 2 MiB page: an idle proxy was 25 MiB resident
/// instead of 10, and 1,000 connections over 10,000 shapes peaked 18 MiB higher
/// (bench/proxy.sh's memory step). `mongotap analyze` goes without them too: a 10
/// MB capture faulted in 13 of them, each zeroed whole, and right after another
/// program's run (tshark's, in bench/offline.sh) that took 51.8 ms with them and
/// 23.5 ms without (medians of 9; back to back 21.3 and 21.5 ms). The kernel
/// counted no compaction stall in those runs: the time is in the faults themselves.
pub fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes integers only and changes a flag of
    // this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Ends the process now, successfully, leaving its memory to the kernel: what is
/// written to stdout is flushed first (stderr is not buffered). Nothing is
/// dropped: a finished `mongotap analyze` holds all of its analysis, and freeing
/// it piece by piece, then the allocator handing every page back one `madvise` at a
/// time (mimalloc's exit handler), is work the kernel does at once when the
/// process ends (a 10 MB capture: 17.1 ms with it, 16.0 without; medians of 50
/// runs taking turns). Only for a command whose outputs are all written and closed.
pub fn exit_without_freeing() -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // SAFETY: _exit ends the process; it takes an integer and never returns.
    unsafe { libc::_exit(0) }
}
