//! The one way snapshot threads read the arena's region: copies made by the kernel
//! (`process_vm_readv` on our own process), never loads from Rust code.
//!
//! **Why a kernel copy.** A snapshot thread reads pages that other threads may be writing
//! at that moment: the executor during every live pass (a torn page was written after it
//! was protected, so the next harvest re-sends it), and an I/O thread receiving a big
//! argument straight into its arena block at any time, the pause and SAVE included (the
//! pause gate stops only the executor). Those writers use plain stores. In Rust's memory
//! model (C++20's) two conflicting accesses of which at least one is non-atomic, without a
//! happens-before between them, are a data race, and a data race is undefined behaviour
//! whatever the *reader* uses:
//! - `AtomicU64::from_ptr(..).load(Relaxed)` is atomic only on our side; its documentation
//!   forbids mixing atomic and non-atomic accesses to the same bytes without
//!   synchronisation, which is exactly what the executor's plain stores would be;
//! - `ptr::read_volatile` "behaves exactly like non-atomic accesses" with respect to
//!   concurrency (its documentation: a race between a volatile read and any write is UB);
//! - making the writers atomic would mean every store of the allocator, the dict and the
//!   collections, and the kernel's own writes into argument blocks — not possible.
//!
//! What remains defined is to leave the racing read to something outside the Rust
//! abstract machine: the kernel. `process_vm_readv` copies the bytes with the kernel's own
//! routines (pin the page, `copy_to_user` into our buffer), which Linux defines for memory
//! that user threads write concurrently — the same guarantee every `read(2)` of a page
//! another process is writing relies on. For the Rust program the call is an opaque
//! operation that writes *our* buffer: its bytes may mix old and new contents (a torn page)
//! but every byte pattern is a valid `u8`, and the protocol above never trusts a page that
//! was written after its protection. No Rust code in the snapshot dereferences an address
//! of the region, so no `&`/`&mut` the executor holds is aliased either.
//!
//! **Why `process_vm_readv` among the kernel copies.** It is the cheapest: one call moves up
//! to `IOV_MAX` scattered runs straight into their destinations (`pread` of
//! `/proc/self/mem` copies through a one-page bounce buffer, one call per run; a memfd
//! would make the arena a shared mapping, which changes how userfaultfd tracks it and how
//! freed pages are given back). Measured on this VM (2 vCPU, Linux 6.18, a throwaway C
//! program, 512 MiB): 1 MiB runs 3.0–4.0 GB/s against memcpy's 5.8–7.0; scattered 4 KiB
//! pages 1.7–3.9 GB/s against 3.8–7.7. The live passes compress what they copy (LZ4 is
//! slower than either), so the cost shows mostly in the pause's raw copy (BENCHMARKS.md).
//! Reading our own process needs no privilege (`ptrace_may_access` accepts the caller's
//! own thread group whatever Yama says); where a seccomp filter refuses the call
//! (`EPERM`/`ENOSYS`), the copies go through `/proc/self/mem` instead, which is as defined
//! and slower.
//!
//! **Checked with ThreadSanitizer** (by hand, not in CI: instrumenting std and the crate
//! takes ~15 minutes on this VM): `RUSTFLAGS=-Zsanitizer=thread cargo +nightly test
//! -Zbuild-std --target x86_64-unknown-linux-gnu --lib persistence::snapshot` (and `--test
//! snapshot`, whose servers are instrumented too; give `TSAN_OPTIONS=log_path=...`, the
//! tests drop the servers' stderr) reports nothing, and the test that copies while
//! another thread writes is reported as soon as its copy is a plain one. The server from
//! before this module was reported in four of the snapshot tests: the workers' chunk
//! copies and the freeze-free handler's copy-outs against the executor's stores.
//!
//! **The high-water mark** (how much of the region is in use) is not read from the arena
//! header either: the arena publishes it in an atomic beside the region
//! ([`crate::arena::Arena::published_high_water`]) every time it moves, and the view reads
//! that atomic.

use crate::arena::{Arena, PAGE_BYTES};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Most iovecs one `process_vm_readv` takes (`IOV_MAX` on Linux).
const MAX_IOVECS: usize = 1024;

/// The arena's region as snapshot threads see it: an address range handed to the kernel
/// (for userfaultfd registration and for copies), and the published high-water mark. It
/// never dereferences the range, so a view that outlives its arena is harmless: a copy
/// from an unmapped range fails with `EFAULT`.
#[derive(Clone)]
pub(super) struct RegionView {
    base: usize,
    reserved: usize,
    high_water: Arc<AtomicU64>,
}

impl RegionView {
    pub(super) fn of(a: &Arena) -> RegionView {
        RegionView {
            base: a.base_addr(),
            reserved: a.reserved_bytes(),
            high_water: a.published_high_water(),
        }
    }

    /// A view of a buffer of ours standing in for the region (tests).
    #[cfg(test)]
    pub(super) fn over_buffer(mem: &[u8]) -> RegionView {
        RegionView::over_range(mem.as_ptr() as usize, mem.len())
    }

    /// A view of `len` bytes at `base`, a mapping of a test's own (never dereferenced
    /// here, so no borrow of it is needed while other threads write it).
    #[cfg(test)]
    pub(super) fn over_range(base: usize, len: usize) -> RegionView {
        RegionView {
            base,
            reserved: len,
            high_water: Arc::new(AtomicU64::new(len as u64)),
        }
    }

    /// The region's address, for system calls that name it (userfaultfd registration);
    /// not to be dereferenced.
    pub(super) fn base_addr(&self) -> usize {
        self.base
    }

    pub(super) fn reserved_bytes(&self) -> usize {
        self.reserved
    }

    /// The arena's high-water mark rounded up to a page. Relaxed is enough: a stale value
    /// is an earlier, smaller mark (the next pass takes the growth), and at the pause the
    /// gate's SeqCst hand-over orders the executor's last store before this load.
    pub(super) fn end(&self) -> u64 {
        let bump = self.high_water.load(Ordering::Relaxed);
        (bump.next_multiple_of(PAGE_BYTES as u64)).min(self.reserved as u64)
    }

    /// Copies `dst.len()` bytes of the region at `offset` into `dst`.
    pub(super) fn copy(&self, offset: u64, dst: &mut [u8]) -> io::Result<()> {
        self.copy_scattered(&mut [(offset, dst)])
    }

    /// Copies the region's `runs` (offset, length), one after another, into `dst`, which
    /// must be exactly as long as the runs together.
    pub(super) fn copy_runs(&self, runs: &[(u64, u64)], dst: &mut [u8]) -> io::Result<()> {
        let total: u64 = runs.iter().map(|r| r.1).sum();
        if total != dst.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{total} bytes of runs into a buffer of {}", dst.len()),
            ));
        }
        let mut parts = Vec::with_capacity(runs.len().min(MAX_IOVECS));
        let mut rest = dst;
        for (i, &(off, len)) in runs.iter().enumerate() {
            let (part, tail) = rest.split_at_mut(len as usize);
            rest = tail;
            parts.push((off, part));
            if parts.len() == MAX_IOVECS || i + 1 == runs.len() {
                self.copy_scattered(&mut parts)?;
                parts.clear();
            }
        }
        Ok(())
    }

    /// Copies, for each `(offset, dst)`, `dst.len()` bytes of the region at `offset`.
    pub(super) fn copy_scattered(&self, parts: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        for (off, dst) in parts.iter() {
            let inside = off
                .checked_add(dst.len() as u64)
                .is_some_and(|end| end <= self.reserved as u64);
            if !inside {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "copy of {} bytes at {off} outside the region ({} bytes)",
                        dst.len(),
                        self.reserved
                    ),
                ));
            }
        }
        match kernel_copier() {
            Copier::ProcessVmReadv => {
                for batch in parts.chunks_mut(MAX_IOVECS) {
                    self.copy_batch_vm_readv(batch)?;
                }
                Ok(())
            }
            Copier::ProcMem(f) => {
                for (off, dst) in parts.iter_mut() {
                    read_exact_at(f, dst, (self.base as u64) + *off)?;
                }
                Ok(())
            }
            Copier::Refused(e) => Err(io::Error::other(e.clone())),
        }
    }

    /// One batch (≤ `MAX_IOVECS` parts) through `process_vm_readv`. The kernel stops at
    /// the first part it cannot read whole and reports the bytes before it: the call is
    /// repeated from there, and a call that moves nothing is an error.
    fn copy_batch_vm_readv(&self, parts: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        let mut first = 0usize; // first part not yet copied whole
        let mut done_in_first = 0usize; // bytes of it already copied
        while first < parts.len() {
            let mut local = Vec::with_capacity(parts.len() - first);
            let mut remote = Vec::with_capacity(parts.len() - first);
            let mut wanted = 0usize;
            for (k, (off, dst)) in parts[first..].iter_mut().enumerate() {
                let skip = if k == 0 { done_in_first } else { 0 };
                let len = dst.len() - skip;
                if len == 0 {
                    continue;
                }
                local.push(libc::iovec {
                    iov_base: dst[skip..].as_mut_ptr() as *mut libc::c_void,
                    iov_len: len,
                });
                remote.push(libc::iovec {
                    iov_base: (self.base + *off as usize + skip) as *mut libc::c_void,
                    iov_len: len,
                });
                wanted += len;
            }
            if wanted == 0 {
                return Ok(());
            }
            // SAFETY: every local iovec is a live `&mut [u8]` of ours, exclusively
            // borrowed for this call, which the kernel only writes within its length. The
            // remote iovecs are only read, by the kernel, and an address it cannot read
            // makes the call fail (EFAULT) rather than touch anything.
            let n = unsafe {
                libc::process_vm_readv(
                    libc::getpid(),
                    local.as_ptr(),
                    local.len() as libc::c_ulong,
                    remote.as_ptr(),
                    remote.len() as libc::c_ulong,
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "process_vm_readv copied nothing from the arena",
                ));
            }
            // Advance past the `n` bytes copied.
            let mut n = n as usize;
            while n > 0 && first < parts.len() {
                let left = parts[first].1.len() - done_in_first;
                if n >= left {
                    n -= left;
                    first += 1;
                    done_in_first = 0;
                } else {
                    done_in_first += n;
                    n = 0;
                }
            }
            // Skip empty parts.
            while first < parts.len() && parts[first].1.len() == done_in_first {
                first += 1;
                done_in_first = 0;
            }
        }
        Ok(())
    }
}

/// How the kernel is asked for the copies, decided once per process.
enum Copier {
    ProcessVmReadv,
    /// `process_vm_readv` is refused here (a seccomp filter): `/proc/self/mem`.
    ProcMem(std::fs::File),
    /// Neither is available: snapshots fail with this reason (no plain reads instead).
    Refused(String),
}

fn kernel_copier() -> &'static Copier {
    static COPIER: OnceLock<Copier> = OnceLock::new();
    COPIER.get_or_init(|| {
        let probe = [0x5au8; 8];
        let mut got = [0u8; 8];
        let local = libc::iovec {
            iov_base: got.as_mut_ptr() as *mut libc::c_void,
            iov_len: got.len(),
        };
        let remote = libc::iovec {
            iov_base: probe.as_ptr() as *mut libc::c_void,
            iov_len: probe.len(),
        };
        // SAFETY: `got` is ours and 8 bytes long; `probe` is only read.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n == probe.len() as isize && got == probe {
            return Copier::ProcessVmReadv;
        }
        let why = io::Error::last_os_error();
        match std::fs::File::open("/proc/self/mem") {
            Ok(f) => {
                crate::notice!("Snapshot copies read the arena through /proc/self/mem (process_vm_readv: {why})");
                Copier::ProcMem(f)
            }
            Err(e) => Copier::Refused(format!(
                "the arena cannot be copied by the kernel (process_vm_readv: {why}; /proc/self/mem: {e})"
            )),
        }
    })
}

/// `pread` until `dst` is full (a short read is continued; none at all is an error).
fn read_exact_at(f: &std::fs::File, dst: &mut [u8], mut at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut done = 0usize;
    while done < dst.len() {
        match f.read_at(&mut dst[done..], at) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "/proc/self/mem read nothing from the arena",
                ))
            }
            Ok(n) => {
                done += n;
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    #[test]
    fn scattered_copies_land_in_their_buffers() {
        let mem = pattern(64 * PAGE_BYTES);
        let view = RegionView::over_buffer(&mem);
        // More parts than one call takes, of uneven lengths, out of order.
        let mut bufs: Vec<Vec<u8>> = (0..1500).map(|i| vec![0u8; 1 + i % 97]).collect();
        let offs: Vec<u64> = (0..1500u64).map(|i| (i * 7919) % (60 * 4096)).collect();
        let mut parts: Vec<(u64, &mut [u8])> = offs
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&o, b)| (o, b.as_mut_slice()))
            .collect();
        view.copy_scattered(&mut parts).unwrap();
        for (o, b) in offs.iter().zip(&bufs) {
            assert_eq!(&mem[*o as usize..*o as usize + b.len()], &b[..]);
        }
    }

    #[test]
    fn runs_are_copied_one_after_another() {
        let mem = pattern(16 * PAGE_BYTES);
        let view = RegionView::over_buffer(&mem);
        let runs = [(3 * 4096u64, 4096u64), (0, 100), (9 * 4096, 3 * 4096)];
        let mut out = vec![0u8; 4096 + 100 + 3 * 4096];
        view.copy_runs(&runs, &mut out).unwrap();
        let mut want = Vec::new();
        for &(o, l) in &runs {
            want.extend_from_slice(&mem[o as usize..(o + l) as usize]);
        }
        assert_eq!(out, want);
        assert!(
            view.copy_runs(&runs, &mut out[1..]).is_err(),
            "wrong length"
        );
    }

    #[test]
    fn a_copy_outside_the_region_is_an_error() {
        let mem = pattern(2 * PAGE_BYTES);
        let view = RegionView::over_buffer(&mem);
        let mut buf = [0u8; 16];
        assert!(view.copy(2 * 4096 - 8, &mut buf).is_err());
        assert!(view.copy(u64::MAX - 4, &mut buf).is_err());
        view.copy(2 * 4096 - 16, &mut buf).unwrap();
        assert_eq!(buf[..], mem[2 * 4096 - 16..]);
    }

    /// The situation of every live pass: one thread writes the bytes with plain stores
    /// while another copies them. Through the kernel this is defined (each copied byte is
    /// one the writer stored); run under ThreadSanitizer it must report nothing, where a
    /// plain `copy_nonoverlapping` in place of `copy` is reported as a data race.
    #[test]
    fn copies_while_another_thread_writes_the_bytes() {
        use std::sync::atomic::AtomicBool;
        let mut mem = vec![0u8; 16 * PAGE_BYTES];
        let view = RegionView::over_buffer(&mem);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut round = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    round = round % 200 + 1;
                    for page in mem.chunks_mut(PAGE_BYTES) {
                        page.fill(round);
                    }
                }
            });
            let mut page = vec![0u8; PAGE_BYTES];
            for i in 0..2000u64 {
                view.copy((i % 16) * PAGE_BYTES as u64, &mut page).unwrap();
                // Torn or not, every byte is one some round stored (0 before the first).
                assert!(page.iter().all(|&b| b <= 200));
            }
            stop.store(true, Ordering::Relaxed);
            writer.join().unwrap();
        });
    }

    #[test]
    fn the_proc_mem_fallback_copies_the_same_bytes() {
        let mem = pattern(4 * PAGE_BYTES);
        let f = std::fs::File::open("/proc/self/mem").unwrap();
        let mut buf = vec![0u8; 5000];
        read_exact_at(&f, &mut buf, mem.as_ptr() as u64 + 1234).unwrap();
        assert_eq!(buf[..], mem[1234..1234 + 5000]);
    }
}
