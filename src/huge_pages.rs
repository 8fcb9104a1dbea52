//! Transparent huge pages off for the processes that answer requests.
//!
//! Faulting a transparent huge page in zeroes 2 MiB, or makes the kernel compact memory to
//! find it, inside whatever request happened to touch new memory. In the CI soak, a cluster's
//! first traffic spent about 40% of its CPU in `clear_page_erms` under
//! `do_huge_pmd_anonymous_page`, and tries to fresh replicas passed the aggregator's 50 ms
//! timeout (README, "Reliability"). Two measures, because either alone falls short:
//!
//! - The binary's allocator is built with mimalloc's `no_thp`, so no process asks for huge
//!   pages (`MADV_HUGEPAGE`). With the kernel's THP mode at `madvise` (Debian's default) that
//!   is enough, and it covers builds too: with builds still asking, the 8 s soak's p99 was
//!   4.7-17.9 ms against 4.6-7.1 ms (four alternating runs each), since a build shares the
//!   machine with servers there. A build pays for it: 36.1 s against 33.7 s at 10M completions
//!   (medians of four).
//! - With the mode at `always`, the kernel hands huge pages out unasked, so a process that
//!   answers requests also turns them off for itself here: `prctl(PR_SET_THP_DISABLE)` marks the
//!   whole process (children inherit it, across `execve` too).

/// Turns transparent huge pages off for this process (Linux; elsewhere nothing to do).
pub fn disable() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and touches no memory of
        // ours.
        #[allow(unsafe_code)]
        let status = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if status != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
