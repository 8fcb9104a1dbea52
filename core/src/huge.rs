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
//! 6.18 with a 10M-completion server: one reload, then 10 s of requests filling the answer
//! cache took 59 huge-page faults and 100 MB of huge pages outside any snapshot.
//!
//! [`Huge`] owns such a buffer and withdraws the advice (`MADV_NOHUGEPAGE`) before the buffer
//! is freed. Serving processes take huge pages only where advised, so the withdrawn range then
//! behaves as the rest of their memory does; the next snapshot read there advises it again.

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
    advice: Advice,
    buf: B,
}

impl<B: Span> Huge<B> {
    /// Takes `buf` with the advice given for its memory. When `buf` moved since (a vector that
    /// grew past the capacity advised), the advised range is memory it freed: the advice is
    /// withdrawn at once and `buf` holds none.
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

impl<B: Span> Drop for Huge<B> {
    // Runs before `buf` is dropped, so the range is still this buffer's.
    fn drop(&mut self) {
        withdraw(&mut self.advice);
    }
}

/// Buffers whose memory can be advised: where their allocation starts, how many bytes it has
/// room for, and how many of those are in use.
pub trait Span {
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

    /// The `VmFlags` of the mapping that holds address `at`, from `/proc/self/smaps`.
    fn flags_at(at: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
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

    /// Some pages asked for huge pages while the buffer lived, and none do once it is
    /// withdrawn: the range is marked `nh` (or gone). Needs a kernel with transparent huge
    /// pages; without them nothing was advised and there is nothing to check.
    #[test]
    fn the_advice_lasts_as_long_as_the_buffer() {
        let mut buf: Vec<u8> = Vec::with_capacity(8 << 20);
        let advice = advise(&buf);
        buf.resize(8 << 20, 7);
        let mut huge = Huge::new(buf, advice);
        let Some((at, _)) = huge.advice.range else {
            eprintln!("skipped: this kernel takes no huge-page advice");
            return;
        };
        assert!(has(&flags_at(at).unwrap(), "hg"), "{:?}", flags_at(at));
        withdraw(&mut huge.advice);
        assert!(!huge.is_advised());
        let flags = flags_at(at).unwrap();
        assert!(!has(&flags, "hg") && has(&flags, "nh"), "{flags}");
        assert!(huge.iter().all(|&b| b == 7));
    }

    /// Advice for a range the buffer does not hold (a vector that grew past the capacity
    /// advised lives elsewhere) is withdrawn at once rather than kept for a stranger's memory.
    #[test]
    fn advice_for_another_range_is_withdrawn() {
        let other: Vec<u8> = Vec::with_capacity(8 << 20);
        let advice = advise(&other);
        let Some((at, _)) = advice.range else {
            eprintln!("skipped: this kernel takes no huge-page advice");
            return;
        };
        let huge = Huge::new(vec![0u8; 16], advice);
        assert!(!huge.is_advised());
        let flags = flags_at(at).unwrap();
        assert!(!has(&flags, "hg") && has(&flags, "nh"), "{flags}");
        drop(other);
    }

    #[test]
    fn small_buffers_are_not_advised() {
        let buf: Vec<u64> = Vec::with_capacity(1024);
        let advice = advise(&buf);
        assert!(Huge::new(buf, advice).advice.range.is_none());
        assert!(!Huge::plain(String::from("x")).is_advised());
    }
}
