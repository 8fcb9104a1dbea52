//! Buffers in transparent huge pages, and only for as long as they live.
//!
//! A snapshot's file and the lists decoded from it are read at random by every lookup, so they
//! ask the kernel for 2 MiB pages (`madvise(MADV_HUGEPAGE)`): with 4 KiB pages each place a
//! lookup touches also misses the TLB (docs/performance.md, "Huge pages"). The advice belongs
//! to the address range, not to the allocation, and it stays until the range is unmapped. The
//! allocator does not unmap what a snapshot frees: mimalloc keeps it in its arena and hands it
//! out again. So without more, the range of every replaced snapshot went on asking for huge
//! pages, and whatever the allocator put there next (a request's buffers, entries of the
//! answer cache) faulted 2 MiB pages in, each zeroed inside a request, which is what the
//! serving processes turn huge pages off to avoid (`typeahead::huge_pages`). Measured on Linux
//! 6.18 with a 10M-completion server (`scripts/thp_reuse.py`): one reload, then 10 s of
//! requests filling the answer cache took 88 and 90 huge-page faults and 165 MB of huge pages
//! outside any snapshot.
//!
//! [`Huge`] owns such a buffer and withdraws the advice (`MADV_NOHUGEPAGE`) before the buffer
//! is freed. Serving processes take huge pages only where advised, so the withdrawn range then
//! behaves as the rest of their memory does; the next snapshot read there advises it again.
//! Linux has no advice that restores the default, so in a process that does not restrict huge
//! pages (`query`, `eval`, the builder) on a kernel set to `always`, a withdrawn range stays
//! without them: a batch process loses a little speed there, never a request its latency.
//!
//! A buffer must not grow after it was advised: growing frees the advised range while it
//! still asks. Callers reserve exactly what they fill (`file::read_regular_random` reads the
//! one byte that tells a file grew into a buffer of its own).

/// A range advised for huge pages by [`advise`], to be handed to [`Huge::new`] with the
/// buffer once it is filled. Empty when nothing was advised (too small, or not Linux).
/// Dropped on its own (a read that failed half-way), it withdraws the advice: declared after
/// the buffer it was made for, it is dropped before the buffer is freed.
#[derive(Debug, Default)]
#[must_use = "dropping the advice withdraws it"]
pub struct Advice {
    range: Option<(usize, usize)>,
}

impl Drop for Advice {
    fn drop(&mut self) {
        withdraw(self);
    }
}

/// Advises huge pages for the whole 2 MiB pages inside `buf`'s spare capacity. Advice only:
/// the kernel honours it when huge pages are enabled as `madvise` or `always` and memory
/// allows, and otherwise nothing changes. It must come before the pages are first written,
/// which is when the kernel picks their size.
pub fn advise<B: Span>(buf: &B) -> Advice {
    const HUGE: usize = 2 << 20;
    let (start, capacity) = buf.span();
    let spare = start + buf.used();
    let (lo, hi) = (spare.next_multiple_of(HUGE), (start + capacity) / HUGE * HUGE);
    if hi <= lo {
        return Advice::default();
    }
    match set(lo, hi - lo, Setting::Huge) {
        true => Advice { range: Some((lo, hi - lo)) },
        false => Advice::default(),
    }
}

/// A buffer whose memory asked for huge pages; the advice is withdrawn before it is freed.
#[derive(Debug, Default)]
pub struct Huge<B: Span> {
    /// Declared before `buf`: fields are dropped in declaration order, so the advice is
    /// withdrawn (its `Drop`) while the range is still this buffer's.
    advice: Advice,
    buf: B,
}

impl<B: Span> Huge<B> {
    /// Takes `buf` with the advice given for its memory. When `buf` moved since (a vector that
    /// grew past the capacity advised, which callers avoid), the advised range is memory it
    /// freed and may be someone else's by now: the advice is withdrawn at once, the lesser
    /// harm, and `buf` holds none.
    pub fn new(buf: B, mut advice: Advice) -> Huge<B> {
        let (start, len) = buf.span();
        if let Some((at, n)) = advice.range
            && (at < start || at + n > start + len)
        {
            withdraw(&mut advice);
        }
        Huge { advice, buf }
    }

    /// A buffer that never asked for huge pages.
    pub fn plain(buf: B) -> Huge<B> {
        Huge { advice: Advice::default(), buf }
    }

    /// Whether some of the buffer's memory asks for huge pages.
    pub fn is_advised(&self) -> bool {
        self.advice.range.is_some()
    }
}

impl<B: Span> std::ops::Deref for Huge<B> {
    type Target = B;

    fn deref(&self) -> &B {
        &self.buf
    }
}

/// Buffers whose memory can be advised: where their allocation starts, how many bytes it has
/// room for, and how many of those are in use. Sealed: the advice goes to whatever addresses
/// an implementation reports, so only this module's own, which report their allocation, exist.
pub trait Span: sealed::Sealed {
    /// The allocation's address and capacity in bytes.
    fn span(&self) -> (usize, usize);
    /// Bytes in use, from the start.
    fn used(&self) -> usize;
}

impl<T> Span for Vec<T> {
    fn span(&self) -> (usize, usize) {
        (self.as_ptr() as usize, self.capacity() * std::mem::size_of::<T>())
    }

    fn used(&self) -> usize {
        std::mem::size_of_val(self.as_slice())
    }
}

impl Span for String {
    fn span(&self) -> (usize, usize) {
        (self.as_ptr() as usize, self.capacity())
    }

    fn used(&self) -> usize {
        self.len()
    }
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for Vec<T> {}
    impl Sealed for String {}
}

fn withdraw(advice: &mut Advice) {
    if let Some((at, n)) = advice.range.take() {
        set(at, n, Setting::NotHuge);
    }
}

enum Setting {
    Huge,
    NotHuge,
}

/// `madvise` on whole pages; whether the kernel took it (a kernel without transparent huge
/// pages refuses both, and then nothing needs withdrawing).
fn set(at: usize, len: usize, setting: Setting) -> bool {
    #[cfg(target_os = "linux")]
    {
        let advice = match setting {
            Setting::Huge => libc::MADV_HUGEPAGE,
            Setting::NotHuge => libc::MADV_NOHUGEPAGE,
        };
        // SAFETY: callers pass whole pages of an allocation they own (or owned: a range freed
        // since may belong to someone else by now, see `Huge::new`), and these two advices
        // change only the size of the pages backing it, never what it holds.
        #[allow(unsafe_code)]
        let status = unsafe { libc::madvise(at as *mut libc::c_void, len, advice) };
        status == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (at, len, setting);
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The `VmFlags` of the mapping that holds address `at`, from `/proc/self/smaps`; `None`
    /// where the kernel does not say (then the tests have nothing to check).
    fn flags_at(at: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&at);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.to_owned());
            }
        }
        None
    }

    fn has(flags: &str, flag: &str) -> bool {
        flags.split_whitespace().any(|f| f == flag)
    }

    /// A buffer of 8 MiB advised, and where its advice starts; `None` (the test skips) where
    /// this kernel takes no huge-page advice or does not report mapping flags.
    fn advised_buffer() -> Option<(Vec<u8>, Advice, usize)> {
        let buf: Vec<u8> = Vec::with_capacity(8 << 20);
        let advice = advise(&buf);
        let Some((at, _)) = advice.range else {
            eprintln!("skipped: this kernel takes no huge-page advice");
            return None;
        };
        if flags_at(at).is_none() {
            eprintln!("skipped: no mapping flags in /proc/self/smaps");
            return None;
        }
        Some((buf, advice, at))
    }

    /// A buffer that notes its range's flags when it is dropped, before its memory is freed.
    struct Probe {
        buf: Vec<u8>,
        at: usize,
        seen: Arc<Mutex<Option<String>>>,
    }

    impl sealed::Sealed for Probe {}

    impl Span for Probe {
        fn span(&self) -> (usize, usize) {
            self.buf.span()
        }

        fn used(&self) -> usize {
            self.buf.used()
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            *self.seen.lock().unwrap() = flags_at(self.at);
        }
    }

    fn probe(buf: Vec<u8>, at: usize) -> (Probe, Arc<Mutex<Option<String>>>) {
        let seen = Arc::new(Mutex::new(None));
        (Probe { buf, at, seen: Arc::clone(&seen) }, seen)
    }

    /// The range asks for huge pages while the buffer lives and no longer (`nh`) when the
    /// buffer is about to be freed.
    #[test]
    fn the_advice_lasts_as_long_as_the_buffer() {
        let Some((mut buf, advice, at)) = advised_buffer() else { return };
        buf.resize(8 << 20, 7);
        let (buf, seen) = probe(buf, at);
        let huge = Huge::new(buf, advice);
        assert!(huge.is_advised());
        assert!(has(&flags_at(at).unwrap(), "hg"), "{:?}", flags_at(at));
        assert!(huge.buf.buf.iter().all(|&b| b == 7));
        drop(huge);
        let flags = seen.lock().unwrap().clone().unwrap();
        assert!(!has(&flags, "hg") && has(&flags, "nh"), "{flags}");
    }

    /// An advice dropped on its own (a read that failed before its buffer was wrapped) is
    /// withdrawn too, before a buffer declared ahead of it is freed.
    #[test]
    fn an_advice_dropped_on_its_own_is_withdrawn() {
        let Some((buf, advice, at)) = advised_buffer() else { return };
        let seen = {
            let (_buf, seen) = probe(buf, at);
            let _advice = advice;
            seen
        };
        let flags = seen.lock().unwrap().clone().unwrap();
        assert!(!has(&flags, "hg") && has(&flags, "nh"), "{flags}");
    }

    /// Advice for a range the buffer does not hold (a vector that grew past the capacity
    /// advised lives elsewhere) is withdrawn at once rather than kept for a stranger's memory.
    #[test]
    fn advice_for_another_range_is_withdrawn() {
        let Some((other, advice, at)) = advised_buffer() else { return };
        let huge = Huge::new(vec![0u8; 16], advice);
        assert!(!huge.is_advised());
        let flags = flags_at(at).unwrap();
        assert!(!has(&flags, "hg") && has(&flags, "nh"), "{flags}");
        drop(other);
    }

    /// A snapshot-sized file read for random access asks for huge pages wherever the kernel
    /// takes the advice.
    #[test]
    fn files_read_for_random_access_are_advised() {
        if advised_buffer().is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 9 << 20]).unwrap();
        let (bytes, _) = crate::file::read_regular_random(&path, u64::MAX).unwrap();
        assert!(bytes.is_advised());
        assert_eq!(bytes.len(), 9 << 20);
    }

    #[test]
    fn small_buffers_are_not_advised() {
        let buf: Vec<u64> = Vec::with_capacity(1024);
        let advice = advise(&buf);
        assert!(Huge::new(buf, advice).advice.range.is_none());
        assert!(!Huge::plain(String::from("x")).is_advised());
    }
}
