//! `cairn-bench uffd-probe`: what one synchronous write-protect fault costs the thread
//! that writes, depending on which thread — and which *process* — handles the fault and
//! streams the region meanwhile. This is the measurement behind the freeze-free
//! snapshot's design (ARCHITECTURE.md, "Snapshots"; BENCHMARKS.md, "Where a write fault's
//! time goes"): it needs no server.
//!
//! A populated anonymous region is registered with a userfaultfd in synchronous
//! write-protect mode (no `WP_ASYNC`) and protected whole. A writer thread, pinned to
//! `--writer-cpu`, stores one byte into a page it has not written yet at a fixed rate
//! (open loop, `clock_nanosleep` to absolute deadlines) and times each store: every store
//! faults, so its time is the writer's view of one fault's round trip. A handler reads
//! the fault messages, copies the faulting page out (`process_vm_readv`) and lifts its
//! protection (`UFFDIO_WRITEPROTECT`, which wakes the writer). A reader streams the
//! region in 1 MiB chunks (`process_vm_readv`, then a pass over the bytes in user space,
//! standing in for compression) at nice 10, over and over until the run ends. Placements:
//!
//! - `a`: handler and reader are threads of the writer's process, the handler free to run
//!   on any CPU, the reader kept off the writer's CPU (the freeze-free variant today);
//! - `a0`: as `a`, the handler pinned to the writer's CPU; `a1`: to another CPU (the
//!   reader, kept off the writer's CPU, shares it);
//! - `b`: handler a thread of the writer's process pinned to the writer's CPU, reader in a
//!   helper process (this binary again, spawned by `std::process::Command`: posix_spawn,
//!   no fork) reading the writer's memory with `process_vm_readv`;
//! - `c`: handler and reader both in the helper process, which inherits the userfaultfd
//!   (`UFFDIO_WRITEPROTECT` acts on the registering process's memory whoever calls it);
//!   the handler free to run on any CPU;
//! - `c0`: as `c`, the helper's handler pinned to the writer's CPU; `c1`: to another CPU;
//! - `n`: handler as in `a`, no reader (the round trip without a stream beside it);
//! - `u`, `us`, `ur`: no faults; one thread on the writer's CPU lifts and sets the
//!   protection of one page at a time and times the lift, alone (`u`), with a thread of
//!   ours spinning on another CPU (`us`) or streaming the region there (`ur`); `v`, `vs`,
//!   `vr` time setting the protection instead.
//!
//! `--split-wake` makes the handler lift the protection without waking the writer and
//! wake it with `UFFDIO_WAKE`, timing that apart.
//!
//! The helper is started per run; where Yama restricts `process_vm_readv` to ancestors,
//! the writer's process names it with `prctl(PR_SET_PTRACER)` before it starts reading.

use crate::cli::{UffdProbeArgs, UffdProbeChildArgs};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAGE: usize = 4096;
const CHUNK: usize = 1 << 20;
const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xC018_AA06;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFDIO_WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;
const UFFDIO_WAKE: libc::c_ulong = 0x8010_AA02;
const UFFD_MSG_BYTES: usize = 32;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const READER_NICE: libc::c_int = 10;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}
#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn writeprotect(uffd: libc::c_int, start: u64, len: u64, mode: u64) -> Result<(), String> {
    let mut wp = UffdioWriteprotect {
        range: UffdioRange { start, len },
        mode,
    };
    // SAFETY: a correctly laid out struct; the kernel checks the range.
    if unsafe { libc::ioctl(uffd, UFFDIO_WRITEPROTECT, &mut wp) } < 0 {
        return Err(os_err("UFFDIO_WRITEPROTECT"));
    }
    Ok(())
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Every CPU but `cpu` (all of them where there is only one).
fn pin_away(cpu: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 {
        return;
    }
    // SAFETY: as in `pin`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in (0..n).filter(|&c| c != cpu) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn nice_thread(n: libc::c_int) {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, n);
    }
}

/// Copies `dst.len()` bytes at `addr` of process `pid` into `dst`.
fn vm_read(pid: libc::pid_t, addr: u64, dst: &mut [u8]) -> Result<(), String> {
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr() as *mut libc::c_void,
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: dst.len(),
    };
    // SAFETY: one local iovec over a buffer we own; the kernel checks the remote one.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n != dst.len() as isize {
        return Err(os_err("process_vm_readv"));
    }
    Ok(())
}

/// Counters the handler and reader keep (their process prints them for the parent).
#[derive(Default)]
struct SideStats {
    faults: AtomicU64,
    handler_ns: AtomicU64,
    /// Of `handler_ns`, the time in the page's copy.
    copy_ns: AtomicU64,
    /// Of `handler_ns`, the time in the `UFFDIO_WAKE` (`--split-wake` only).
    wake_ns: AtomicU64,
    read_bytes: AtomicU64,
    sink: AtomicU64,
}

/// Handles write faults on `uffd` until `stop`: copies the page out of `pid`'s memory,
/// then lifts its protection.
/// `split_wake`: lift the protection without waking (`MODE_DONTWAKE`), then wake the
/// writer with `UFFDIO_WAKE`, timing the two apart.
fn handler_loop(
    uffd: libc::c_int,
    pid: libc::pid_t,
    split_wake: bool,
    stop: &AtomicBool,
    st: &SideStats,
) {
    let mut page = vec![0u8; PAGE];
    let mut buf = [0u8; UFFD_MSG_BYTES * 64];
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd: uffd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 20) } <= 0 {
            continue;
        }
        // SAFETY: reading into a buffer we own; the descriptor is non-blocking.
        let got = unsafe { libc::read(uffd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if got <= 0 {
            continue;
        }
        for m in buf[..got as usize].chunks_exact(UFFD_MSG_BYTES) {
            if m[0] != UFFD_EVENT_PAGEFAULT {
                continue;
            }
            let t0 = Instant::now();
            let addr =
                u64::from_le_bytes(m[16..24].try_into().expect("8 bytes")) & !(PAGE as u64 - 1);
            if let Err(e) = vm_read(pid, addr, &mut page) {
                eprintln!("uffd-probe handler: {e}");
            }
            st.copy_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if split_wake {
                if let Err(e) =
                    writeprotect(uffd, addr, PAGE as u64, UFFDIO_WRITEPROTECT_MODE_DONTWAKE)
                {
                    eprintln!("uffd-probe handler: {e}");
                }
                let tw = Instant::now();
                let mut range = UffdioRange {
                    start: addr,
                    len: PAGE as u64,
                };
                // SAFETY: a correctly laid out struct; the kernel checks the range.
                if unsafe { libc::ioctl(uffd, UFFDIO_WAKE, &mut range) } < 0 {
                    eprintln!("uffd-probe handler: {}", os_err("UFFDIO_WAKE"));
                }
                st.wake_ns
                    .fetch_add(tw.elapsed().as_nanos() as u64, Ordering::Relaxed);
            } else if let Err(e) = writeprotect(uffd, addr, PAGE as u64, 0) {
                eprintln!("uffd-probe handler: {e}");
            }
            st.faults.fetch_add(1, Ordering::Relaxed);
            st.handler_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// Streams `[base, base+len)` of `pid` in 1 MiB chunks until `stop`.
fn reader_loop(pid: libc::pid_t, base: u64, len: u64, stop: &AtomicBool, st: &SideStats) {
    nice_thread(READER_NICE);
    let mut buf = vec![0u8; CHUNK];
    let mut h = 0u64;
    'outer: loop {
        let mut off = 0;
        while off < len {
            if stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            let n = (len - off).min(CHUNK as u64) as usize;
            if let Err(e) = vm_read(pid, base + off, &mut buf[..n]) {
                eprintln!("uffd-probe reader: {e}");
                break 'outer;
            }
            // User-mode work on the bytes, as compression would do.
            for w in buf[..n].chunks_exact(8) {
                h = (h ^ u64::from_le_bytes(w.try_into().expect("8 bytes")))
                    .rotate_left(5)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            }
            st.read_bytes.fetch_add(n as u64, Ordering::Relaxed);
            off += n as u64;
        }
    }
    st.sink.store(h, Ordering::Relaxed);
}

/// The region: a private anonymous mapping, every page written once (resident).
struct Region {
    base: u64,
    len: u64,
}

impl Region {
    fn new(len: u64) -> Result<Region, String> {
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap"));
        }
        // SAFETY: advice on our own mapping; 4 KiB pages, as the arena uses.
        unsafe { libc::madvise(p, len as usize, libc::MADV_NOHUGEPAGE) };
        let base = p as u64;
        let mut x = 0x1234_5678_9abc_def1u64;
        for off in (0..len).step_by(PAGE) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // SAFETY: inside our mapping, no other thread yet.
            unsafe { std::ptr::write_volatile((base + off) as *mut u64, x) };
        }
        Ok(Region { base, len })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len as usize) };
    }
}

/// A synchronous write-protect userfaultfd over the whole region, everything protected.
fn register(r: &Region) -> Result<OwnedFd, String> {
    // SAFETY: plain syscall; checked.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) }
        as libc::c_int;
    if fd < 0 {
        return Err(os_err("userfaultfd"));
    }
    // SAFETY: a fresh descriptor we own.
    let uffd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut api = UffdioApi {
        api: UFFD_API,
        features: UFFD_FEATURE_WP_UNPOPULATED,
        ioctls: 0,
    };
    // SAFETY: correctly laid out structs over our own mapping.
    unsafe {
        if libc::ioctl(fd, UFFDIO_API, &mut api) < 0 {
            return Err(os_err("UFFDIO_API"));
        }
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: r.base,
                len: r.len,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        if libc::ioctl(fd, UFFDIO_REGISTER, &mut reg) < 0 {
            return Err(os_err("UFFDIO_REGISTER"));
        }
    }
    writeprotect(fd, r.base, r.len, UFFDIO_WRITEPROTECT_MODE_WP)?;
    Ok(uffd)
}

/// What the writer saw: each faulting store's time (ns), and how far behind its schedule
/// it ended.
struct WriterOut {
    store_ns: Vec<u64>,
    behind: Duration,
}

fn writer(r: &Region, cpu: usize, rate: u64, secs: f64) -> WriterOut {
    pin(cpu);
    let pages = (r.len as usize) / PAGE;
    // Never more than half the pages: a random pick of an unwritten page stays cheap.
    let want = ((rate as f64 * secs) as usize).min(pages / 2);
    let mut written = vec![false; pages];
    let mut store_ns = Vec::with_capacity(want);
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (r.base.rotate_left(17));
    let period = 1e9 / rate.max(1) as f64;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: reading the monotonic clock into our struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let t0 = ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64;
    let started = Instant::now();
    for i in 0..want {
        let due = t0 + period * i as f64;
        let due_ts = libc::timespec {
            tv_sec: (due / 1e9) as libc::time_t,
            tv_nsec: (due % 1e9) as libc::c_long,
        };
        // SAFETY: an absolute sleep on the monotonic clock.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &due_ts,
                std::ptr::null_mut(),
            )
        };
        let p = loop {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let p = (x % pages as u64) as usize;
            if !written[p] {
                break p;
            }
        };
        written[p] = true;
        let addr = (r.base + (p * PAGE) as u64 + 64) as *mut u64;
        let t = Instant::now();
        // SAFETY: inside our mapping; the page is protected, so the store faults and waits
        // for the handler, then completes.
        unsafe { std::ptr::write_volatile(addr, i as u64) };
        store_ns.push(t.elapsed().as_nanos() as u64);
    }
    let planned = Duration::from_nanos((period * want as f64) as u64);
    WriterOut {
        store_ns,
        behind: started.elapsed().saturating_sub(planned),
    }
}

/// One placement's result.
pub struct RunOut {
    pub placement: String,
    pub faults: usize,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub handler_us: f64,
    pub copy_us: f64,
    pub wake_us: f64,
    pub read_mbps: f64,
    pub behind_ms: f64,
}

fn pct(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// A helper process (this binary, `uffd-probe-child`), connected by a socket pair.
struct Helper {
    child: std::process::Child,
    ctl: BufReader<UnixStream>,
}

impl Helper {
    fn spawn(
        r: &Region,
        uffd: Option<libc::c_int>,
        handler_cpu: Option<usize>,
        reader: bool,
        reader_away_from: usize,
        split_wake: bool,
    ) -> Result<Helper, String> {
        let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
        // Inherited descriptors: duplicates without close-on-exec, closed here once the
        // helper has started (Command spawns with posix_spawn: no fork, no pre_exec).
        let inherit = |fd: libc::c_int| -> Result<libc::c_int, String> {
            // SAFETY: F_DUPFD of a descriptor we own; the duplicate has no FD_CLOEXEC.
            let d = unsafe { libc::fcntl(fd, libc::F_DUPFD, 3) };
            if d < 0 {
                return Err(os_err("fcntl(F_DUPFD)"));
            }
            Ok(d)
        };
        let ctl_fd = inherit(theirs.as_raw_fd())?;
        let uffd_fd = match uffd {
            Some(u) => Some(inherit(u)?),
            None => None,
        };
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("uffd-probe-child")
            .arg("--ctl-fd")
            .arg(ctl_fd.to_string())
            .arg("--parent")
            .arg(std::process::id().to_string())
            .arg("--base")
            .arg(r.base.to_string())
            .arg("--len")
            .arg(r.len.to_string())
            .arg("--reader-away-from")
            .arg(reader_away_from.to_string());
        if let Some(u) = uffd_fd {
            cmd.arg("--uffd-fd").arg(u.to_string());
        }
        if let Some(c) = handler_cpu {
            cmd.arg("--handler-cpu").arg(c.to_string());
        }
        if !reader {
            cmd.arg("--no-reader");
        }
        if split_wake {
            cmd.arg("--split-wake");
        }
        let spawned = cmd.spawn();
        // SAFETY: closing our duplicates (the helper has its own copies now).
        unsafe {
            libc::close(ctl_fd);
            if let Some(u) = uffd_fd {
                libc::close(u);
            }
        }
        drop(theirs);
        let child = spawned.map_err(|e| format!("spawn helper: {e}"))?;
        // Yama (ptrace_scope 1) lets a process read only its descendants' memory unless
        // named as their tracer: name the helper. EINVAL where Yama is absent.
        // SAFETY: plain prctl.
        unsafe { libc::prctl(libc::PR_SET_PTRACER, child.id() as libc::c_ulong, 0, 0, 0) };
        let mut h = Helper {
            child,
            ctl: BufReader::new(ours),
        };
        h.send("go")?;
        let line = h.recv()?;
        if line != "ready" {
            return Err(format!("helper said {line:?}"));
        }
        Ok(h)
    }

    fn send(&mut self, s: &str) -> Result<(), String> {
        writeln!(self.ctl.get_mut(), "{s}").map_err(|e| format!("helper control: {e}"))
    }

    fn recv(&mut self) -> Result<String, String> {
        let mut line = String::new();
        self.ctl
            .read_line(&mut line)
            .map_err(|e| format!("helper control: {e}"))?;
        if line.is_empty() {
            return Err("helper closed its control socket".into());
        }
        Ok(line.trim().to_string())
    }

    /// Stops the helper; returns its (faults, handler ns, copy ns, wake ns, bytes read).
    fn finish(mut self) -> Result<[u64; 5], String> {
        self.send("stop")?;
        let line = self.recv()?;
        let _ = self.child.wait();
        let v: Vec<u64> = line
            .split_whitespace()
            .filter_map(|s| s.parse().ok())
            .collect();
        v.try_into().map_err(|_| format!("helper stats {line:?}"))
    }
}

fn run_one(a: &UffdProbeArgs, placement: &str) -> Result<RunOut, String> {
    let r = Region::new((a.mib as u64) << 20)?;
    let uffd = register(&r)?;
    let ufd = uffd.as_raw_fd();
    let me = std::process::id() as libc::pid_t;
    let wcpu = a.writer_cpu;
    if let Some(other) = placement.strip_prefix('u') {
        return micro(a, &r, ufd, placement, other, false);
    }
    if let Some(other) = placement.strip_prefix('v') {
        return micro(a, &r, ufd, placement, other, true);
    }
    let st = Arc::new(SideStats::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Threads of this process (handler, reader), per placement.
    // Another CPU than the writer's, for the `1` placements.
    let ocpu = usize::from(wcpu == 0);
    let (local_handler, handler_cpu, local_reader, helper_mode) = match placement {
        "a" => (true, None, true, None),
        "a0" => (true, Some(wcpu), true, None),
        "a1" => (true, Some(ocpu), true, None),
        "n" => (true, None, false, None),
        "b" => (true, Some(wcpu), false, Some((None, true))),
        "c" => (false, None, false, Some((Some(ufd), true))),
        "c0" => (false, Some(wcpu), false, Some((Some(ufd), true))),
        "c1" => (false, Some(ocpu), false, Some((Some(ufd), true))),
        other => {
            return Err(format!(
                "unknown placement {other:?} (a, a0, a1, n, b, c, c0, c1, u, us, ur, v, vs, vr)"
            ))
        }
    };
    let mut threads = Vec::new();
    if local_handler {
        let (stop, st, split) = (stop.clone(), st.clone(), a.split_wake);
        threads.push(std::thread::spawn(move || {
            if let Some(c) = handler_cpu {
                pin(c);
            }
            handler_loop(ufd, me, split, &stop, &st)
        }));
    }
    if local_reader {
        let (stop, st) = (stop.clone(), st.clone());
        let (base, len) = (r.base, r.len);
        threads.push(std::thread::spawn(move || {
            pin_away(wcpu);
            reader_loop(me, base, len, &stop, &st)
        }));
    }
    let helper = match helper_mode {
        Some((hu, reader)) => Some(Helper::spawn(
            &r,
            hu,
            if local_handler { None } else { handler_cpu },
            reader,
            wcpu,
            a.split_wake,
        )?),
        None => None,
    };
    let started = Instant::now();
    let w = std::thread::scope(|s| {
        s.spawn(|| writer(&r, wcpu, a.rate, a.secs))
            .join()
            .expect("writer")
    });
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let (mut faults, mut hns, mut cns, mut wns, mut rbytes) = (
        st.faults.load(Ordering::Relaxed),
        st.handler_ns.load(Ordering::Relaxed),
        st.copy_ns.load(Ordering::Relaxed),
        st.wake_ns.load(Ordering::Relaxed),
        st.read_bytes.load(Ordering::Relaxed),
    );
    if let Some(h) = helper {
        let [f, n, c, w, b] = h.finish()?;
        faults += f;
        hns += n;
        cns += c;
        wns += w;
        rbytes += b;
    }
    drop(uffd);
    let mut s = w.store_ns;
    s.sort_unstable();
    Ok(RunOut {
        placement: placement.to_string(),
        faults: faults as usize,
        median_us: pct(&s, 0.5),
        p99_us: pct(&s, 0.99),
        max_us: pct(&s, 1.0),
        handler_us: hns as f64 / faults.max(1) as f64 / 1000.0,
        copy_us: cns as f64 / faults.max(1) as f64 / 1000.0,
        wake_us: wns as f64 / faults.max(1) as f64 / 1000.0,
        read_mbps: rbytes as f64 / elapsed / 1e6,
        behind_ms: w.behind.as_secs_f64() * 1e3,
    })
}

/// No faults: one thread on the writer's CPU lifts and sets the protection of one page
/// at a time and times the lift (`UFFDIO_WRITEPROTECT`, mode 0; `time_set`: the
/// protection, `MODE_WP`), with nothing else of
/// ours running (`u`), a thread of ours spinning in user mode on another CPU (`us`), or
/// a thread of ours streaming the region on another CPU (`ur`).
fn micro(
    a: &UffdProbeArgs,
    r: &Region,
    ufd: libc::c_int,
    placement: &str,
    other: &str,
    time_set: bool,
) -> Result<RunOut, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::new(SideStats::default());
    let wcpu = a.writer_cpu;
    let me = std::process::id() as libc::pid_t;
    let companion = match other {
        "" => None,
        "s" => {
            let stop = stop.clone();
            Some(std::thread::spawn(move || {
                pin_away(wcpu);
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                }
                std::hint::black_box(x);
            }))
        }
        "r" => {
            let (stop, st, base, len) = (stop.clone(), st.clone(), r.base, r.len);
            Some(std::thread::spawn(move || {
                pin_away(wcpu);
                reader_loop(me, base, len, &stop, &st)
            }))
        }
        _ => return Err(format!("unknown placement {placement:?}")),
    };
    let n = ((a.rate as f64 * a.secs) as usize).min(200_000);
    let pages = r.len / PAGE as u64;
    let started = Instant::now();
    let ns = std::thread::scope(|s| {
        s.spawn(|| {
            pin(wcpu);
            // Let the companion start.
            std::thread::sleep(Duration::from_millis(50));
            let mut ns = Vec::with_capacity(n);
            for i in 0..n as u64 {
                let addr = r.base + (i * 7919 % pages) * PAGE as u64;
                let t = Instant::now();
                if let Err(e) = writeprotect(ufd, addr, PAGE as u64, 0) {
                    eprintln!("uffd-probe: {e}");
                    break;
                }
                let lift = t.elapsed();
                let t = Instant::now();
                if let Err(e) = writeprotect(ufd, addr, PAGE as u64, UFFDIO_WRITEPROTECT_MODE_WP) {
                    eprintln!("uffd-probe: {e}");
                    break;
                }
                let set = t.elapsed();
                ns.push(if time_set { set } else { lift }.as_nanos() as u64);
            }
            ns
        })
        .join()
        .expect("micro")
    });
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = companion {
        let _ = t.join();
    }
    let mut s = ns;
    s.sort_unstable();
    Ok(RunOut {
        placement: placement.to_string(),
        faults: s.len(),
        median_us: pct(&s, 0.5),
        p99_us: pct(&s, 0.99),
        max_us: pct(&s, 1.0),
        handler_us: 0.0,
        copy_us: 0.0,
        wake_us: 0.0,
        read_mbps: st.read_bytes.load(Ordering::Relaxed) as f64 / elapsed / 1e6,
        behind_ms: 0.0,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// Runs every placement once per round (interleaved) and prints each run and the
/// medians over rounds.
pub fn run(a: &UffdProbeArgs) -> Result<(), String> {
    let placements: Vec<&str> = a.placements.split(',').map(str::trim).collect();
    println!(
        "uffd-probe: {} MiB region, {} faults/s for {} s, writer on CPU {}, {} rounds, placements {}",
        a.mib,
        a.rate,
        a.secs,
        a.writer_cpu,
        a.rounds,
        placements.join(",")
    );
    println!("round placement faults store_median_us store_p99_us store_max_us handler_us_mean copy_us_mean wake_us_mean reader_MB/s writer_behind_ms");
    let mut all: Vec<Vec<RunOut>> = placements.iter().map(|_| Vec::new()).collect();
    for round in 1..=a.rounds {
        for (i, p) in placements.iter().enumerate() {
            let o = run_one(a, p)?;
            println!(
                "{round} {} {} {:.2} {:.2} {:.1} {:.2} {:.2} {:.2} {:.0} {:.1}",
                o.placement,
                o.faults,
                o.median_us,
                o.p99_us,
                o.max_us,
                o.handler_us,
                o.copy_us,
                o.wake_us,
                o.read_mbps,
                o.behind_ms
            );
            all[i].push(o);
        }
    }
    println!("medians over rounds:");
    println!("placement store_median_us store_p99_us store_max_us handler_us_mean copy_us_mean wake_us_mean reader_MB/s");
    for (p, runs) in placements.iter().zip(&all) {
        let m = |f: &dyn Fn(&RunOut) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        println!(
            "{p} {:.2} {:.2} {:.1} {:.2} {:.2} {:.2} {:.0}",
            m(&|o| o.median_us),
            m(&|o| o.p99_us),
            m(&|o| o.max_us),
            m(&|o| o.handler_us),
            m(&|o| o.copy_us),
            m(&|o| o.wake_us),
            m(&|o| o.read_mbps)
        );
    }
    Ok(())
}

/// The helper process's side: handler and/or reader over the parent's region.
pub fn child(a: &UffdProbeChildArgs) -> Result<(), String> {
    // SAFETY: the descriptor number our parent passed us, inherited and ours alone.
    let sock = unsafe { UnixStream::from_raw_fd(a.ctl_fd) };
    let mut ctl = BufReader::new(sock);
    let mut line = String::new();
    ctl.read_line(&mut line).map_err(|e| e.to_string())?;
    if line.trim() != "go" {
        return Err(format!("parent said {line:?}"));
    }
    let parent = a.parent as libc::pid_t;
    let st = Arc::new(SideStats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    if let Some(u) = a.uffd_fd {
        let (stop, st, cpu, split) = (stop.clone(), st.clone(), a.handler_cpu, a.split_wake);
        threads.push(std::thread::spawn(move || {
            if let Some(c) = cpu {
                pin(c);
            }
            handler_loop(u, parent, split, &stop, &st)
        }));
    }
    if !a.no_reader {
        let (stop, st, away, base, len) =
            (stop.clone(), st.clone(), a.reader_away_from, a.base, a.len);
        threads.push(std::thread::spawn(move || {
            pin_away(away);
            reader_loop(parent, base, len, &stop, &st)
        }));
    }
    writeln!(ctl.get_mut(), "ready").map_err(|e| e.to_string())?;
    line.clear();
    ctl.read_line(&mut line).map_err(|e| e.to_string())?;
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    writeln!(
        ctl.get_mut(),
        "{} {} {} {} {}",
        st.faults.load(Ordering::Relaxed),
        st.handler_ns.load(Ordering::Relaxed),
        st.copy_ns.load(Ordering::Relaxed),
        st.wake_ns.load(Ordering::Relaxed),
        st.read_bytes.load(Ordering::Relaxed)
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}
