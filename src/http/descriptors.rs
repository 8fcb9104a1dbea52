//! Fitting the connection limits to the file descriptors the process may open.
//!
//! Every open connection is a descriptor, and so is everything else the process opens: the
//! snapshot and blocklist files it reloads, an aggregator's connections to its replicas, the
//! follower's downloads. Rust leaves the soft limit on open files as it was given, often 1024
//! (systemd services, login shells, containerd 2 containers), far below the 4,096 connections
//! a listener accepts by default. So a client that opened about a thousand idle connections
//! ran the process out of descriptors before the connection limit ever applied: `accept`
//! failed on every listener (the admin one included, so the operator was locked out too),
//! reloads could not open their files, and an aggregator ejected healthy replicas it could no
//! longer connect to. Go's runtime raises the soft limit for the same reason.

use super::Limits;

/// Descriptors kept for everything but connections: snapshot and blocklist files, downloads,
/// logs, the runtime's own.
const RESERVED: u64 = 64;

impl Limits {
    /// Raises the soft limit on open files to the hard one, then lowers `max_connections`, and
    /// `max_concurrency` with it, to one of `shares` equal shares of what is left after
    /// [`RESERVED`]: one per listener for a server (its requests open nothing); for an
    /// aggregator one for its listener and one per partition, since each request in flight may
    /// hold a pooled connection to a replica of every partition (hedges come on top, rarely
    /// many). `also` descriptors are set aside first besides [`RESERVED`]: an aggregator's
    /// exchanges it finishes after giving up on them
    /// ([`crate::aggregator::backends::MAX_DETACHED`]). Returns the connections each listener
    /// may hold when it had to lower them.
    pub fn fit_to_descriptors(&mut self, shares: usize, also: usize) -> Option<usize> {
        let available = raise_open_file_limit()?;
        let kept = RESERVED.saturating_add(also as u64);
        let share = available.saturating_sub(kept) / shares.max(1) as u64;
        let share = usize::try_from(share).unwrap_or(usize::MAX).max(1);
        (share < self.conn.max_connections.max(self.max_concurrency)).then(|| {
            self.conn.max_connections = self.conn.max_connections.min(share);
            self.max_concurrency = self.max_concurrency.min(share);
            share
        })
    }
}

/// The soft limit on open files after raising it to the hard limit (`None` when it cannot be
/// read: nothing is changed then).
fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    #[allow(unsafe_code)]
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        #[allow(unsafe_code)]
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Some(if limit.rlim_cur == libc::RLIM_INFINITY { u64::MAX } else { limit.rlim_cur })
}
