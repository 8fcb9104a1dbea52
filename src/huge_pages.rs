//! Transparent huge pages only where they are asked for, in the processes that answer requests.
//!
//! Faulting a transparent huge page in zeroes 2 MiB, or makes the kernel compact memory to
//! find it, inside whatever request happened to touch new memory. In the CI soak, a cluster's
//! first traffic spent about 40% of its CPU in `clear_page_erms` under
//! `do_huge_pmd_anonymous_page`, and tries to fresh replicas passed the aggregator's 50 ms
//! timeout (README, "Reliability"). Two measures, because either alone falls short:
//!
//! - The binary's allocator is built with mimalloc's `no_thp`, so its arenas never ask for
//!   huge pages (`MADV_HUGEPAGE`). With the kernel's THP mode at `madvise` (Debian's default)
//!   that is enough, and it covers builds too: with builds still asking, the 8 s soak's p99 was
//!   4.7-17.9 ms against 4.6-7.1 ms (four alternating runs each), since a build shares the
//!   machine with servers there. A build pays for it: 36.1 s against 33.7 s at 10M completions
//!   (medians of four).
//! - With the mode at `always`, the kernel hands huge pages out unasked, so a process that
//!   answers requests also turns them off for itself here with `prctl(PR_SET_THP_DISABLE)`
//!   (children inherit it, across `execve` too).
//!
//! What a snapshot is read into does ask, on purpose: the file's buffer
//! ([`typeahead_core::file::read_regular_random`]) and the top-k lists decoded from it. Both
//! are filled once, by the loader, off the request path, and lookups then read them at random,
//! so 2 MiB pages save them a TLB miss per place they touch (at 10M completions, 4-character
//! prefixes about 5% faster and the words tier 10-30% for the file's; 4-character prefixes
//! another 5-7% for the lists': docs/performance.md). Since Linux 6.18 the prctl takes
//! `PR_THP_DISABLE_EXCEPT_ADVISED`, which keeps exactly those; older kernels refuse the flag,
//! and there the process turns huge pages off altogether, the snapshot's included. When a
//! snapshot is freed, its buffers withdraw the advice first ([`typeahead_core::huge`]): the
//! allocator reuses their memory, requests' allocations included.

/// How far [`restrict`] could go on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Huge pages only for memory that asks for them (the snapshot): Linux 6.18 and later.
    AdvisedOnly,
    /// No huge pages at all: an older kernel, which has no way to keep the snapshot's.
    Off,
    /// Nothing was changed: not Linux.
    Unchanged,
}

/// `PR_THP_DISABLE_EXCEPT_ADVISED` (linux/prctl.h since 6.18; not in the `libc` crate yet).
#[cfg(target_os = "linux")]
const EXCEPT_ADVISED: libc::c_ulong = 1 << 1;

/// Turns transparent huge pages off for this process, except for memory that asks for them
/// where the kernel allows that exception.
pub fn restrict() -> std::io::Result<Policy> {
    #[cfg(target_os = "linux")]
    {
        if thp_disable(EXCEPT_ADVISED).is_ok() {
            return Ok(Policy::AdvisedOnly);
        }
        thp_disable(0)?;
        Ok(Policy::Off)
    }
    #[cfg(not(target_os = "linux"))]
    Ok(Policy::Unchanged)
}

#[cfg(target_os = "linux")]
fn thp_disable(flags: libc::c_ulong) -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    #[allow(unsafe_code)]
    let status = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1 as libc::c_ulong, flags, 0, 0) };
    if status != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// What the kernel reports back is what [`restrict`] says it did: 1 (off) or 1 | the
    /// exception. (It changes this test process's huge pages, which no other test depends on.)
    #[test]
    fn the_kernel_reports_the_policy_applied() {
        let policy = restrict().expect("PR_SET_THP_DISABLE exists since Linux 3.15");
        // SAFETY: PR_GET_THP_DISABLE reads a flag of this process; no memory is passed.
        #[allow(unsafe_code)]
        let reported = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        let expected = match policy {
            Policy::AdvisedOnly => 1 | EXCEPT_ADVISED as i32,
            Policy::Off => 1,
            Policy::Unchanged => unreachable!("this is Linux"),
        };
        assert_eq!(reported, expected, "{policy:?}");
    }
}
