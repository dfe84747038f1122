//! Where the log's bytes go: a small trait so the writer thread can run against real files
//! (`pwrite` + `fdatasync`) or a fault-injecting backend in tests (torn writes, EIO,
//! ENOSPC). The io_uring engine (`uring.rs`) drives the real file's descriptor directly
//! (`LogFile::real_file`); a backend that returns None there runs the thread engine, where
//! every write and sync goes through this trait. The fault injector can do either: by
//! default it hides its file (thread engine); with `Faults::through_uring` it hands the
//! real descriptor to the io_uring engine and the executor's lease and injects its faults
//! through [`FaultHook`], which those paths consult around each write and fsync.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One open log file.
pub trait LogFile: Send {
    /// Writes all of `data` at `offset`. On error a prefix may have reached the file.
    fn write_all_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Writes `parts` one after the other at `offset` (as one write of their
    /// concatenation: on error a prefix may have reached the file). A real file writes
    /// them with `pwritev`, so large values logged by reference go from the arena to the
    /// page cache without a copy in between; the default joins them and calls
    /// [`LogFile::write_all_at`] (what a test backend sees is the same either way).
    fn write_all_vectored_at(&mut self, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.write_all_at(offset, &parts.concat())
    }
    /// Makes written data durable (fdatasync).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Cuts the file to `len` bytes (drops a torn tail after a failed write).
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// The real file behind this handle, for the io_uring engine and the pre-allocation
    /// helper (None: a backend that must see every call, e.g. fault injection).
    fn real_file(&self) -> Option<&File> {
        None
    }
    /// Current size in bytes.
    fn file_len(&mut self) -> io::Result<u64>;
    /// Faults to inject where the file is driven through its descriptor (the io_uring
    /// engine, the executor's lease); None for a real file.
    fn fault_hook(&self) -> Option<Arc<dyn FaultHook>> {
        None
    }
}

/// How a test backend makes the descriptor-driven paths fail (see the module doc).
pub trait FaultHook: Send + Sync {
    /// Before a write of `len` bytes: `Some((errno, prefix))` makes the caller write only
    /// the first `prefix` bytes and then fail with `errno` (a torn write).
    fn before_write(&self, len: usize) -> Option<(i32, usize)>;
    /// After an fsync that succeeded: `Some(errno)` turns it into that failure.
    fn after_sync(&self) -> Option<i32>;
}

/// Opens, creates and replaces the files of one AOF directory.
pub trait LogDir: Send {
    fn open_append(&mut self, name: &str) -> io::Result<Box<dyn LogFile>>;
    /// Writes a small file atomically (temp file, fsync, rename, fsync of the directory).
    fn write_atomic(&mut self, name: &str, data: &[u8]) -> io::Result<()>;
    fn remove(&mut self, name: &str) -> io::Result<()>;
    /// Free bytes for an unprivileged user (statvfs f_bavail × f_frsize).
    fn free_bytes(&mut self) -> io::Result<u64>;
    fn size_of(&mut self, name: &str) -> io::Result<u64>;
    /// Size of the filesystem (statvfs f_blocks × f_frsize), for a percentage watermark.
    fn total_bytes(&mut self) -> io::Result<u64> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// Path of a file in this directory, when it is a real directory (direct I/O opens
    /// its own handle).
    fn path_of(&self, _name: &str) -> Option<PathBuf> {
        None
    }
    /// Renames `from` to `to` (replacing it) durably and opens it: recycling a retired
    /// incremental file as the new one.
    fn recycle(&mut self, _from: &str, _to: &str) -> io::Result<Box<dyn LogFile>> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// Deletes a file no manifest lists any more: its name goes now, its blocks may be
    /// freed later (see [`free_gradually`]).
    fn retire(&mut self, name: &str) -> io::Result<()> {
        self.remove(name)
    }
}

/// Bytes freed per step when a retired file is released (see [`free_gradually`]).
const FREE_STEP_BYTES: u64 = 4 << 20;
/// After each step the thread rests this many times as long as the step took, leaving
/// the device to the log most of the time.
const FREE_REST_PER_BUSY: u32 = 2;

/// Frees an unlinked (or replaced) file's blocks a few MiB at a time, each step made
/// durable and followed by a rest, on a thread of its own; the file is gone when the last
/// step closes it.
///
/// Why: on a filesystem mounted with `discard`, freeing a file's blocks sends the device
/// a discard for every extent at the journal commit, and a big file unlinked at once makes
/// a concurrent log `fdatasync` wait behind them all; freed stepwise, the wait stays short
/// (figures: BENCHMARKS.md, "AOF rewrite stall"). Under `appendfsync always` that wait is
/// a held reply.
pub fn free_gradually(file: File) {
    let spawned = std::thread::Builder::new()
        .name("cairn-file-free".into())
        .spawn(move || {
            use std::os::unix::fs::MetadataExt;
            // Only a file with no name left: a hard link elsewhere (a backup made with
            // `ln` or `cp -al`) keeps its data, and the blocks go when that link does.
            let Ok(mut len) = file
                .metadata()
                .map(|m| if m.nlink() == 0 { m.len() } else { 0 })
            else {
                return;
            };
            while len > 0 {
                let t = std::time::Instant::now();
                len = len.saturating_sub(FREE_STEP_BYTES);
                if file.set_len(len).and_then(|_| file.sync_data()).is_err() {
                    return;
                }
                std::thread::sleep(t.elapsed() * FREE_REST_PER_BUSY);
            }
        });
    if let Err(e) = spawned {
        crate::warning!("Can't start a thread to free a retired file gradually: {e}");
    }
}

pub struct FsFile(File);

impl LogFile for FsFile {
    fn write_all_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_all_at(data, offset)
    }
    fn write_all_vectored_at(&mut self, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        pwritev_all(&self.0, parts, offset)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn real_file(&self) -> Option<&File> {
        Some(&self.0)
    }
    fn file_len(&mut self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

/// The real directory.
pub struct FsDir {
    pub path: PathBuf,
}

impl FsDir {
    pub fn new(path: impl AsRef<Path>) -> FsDir {
        FsDir {
            path: path.as_ref().to_path_buf(),
        }
    }
    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.path)?.sync_all()
    }
}

impl LogDir for FsDir {
    fn open_append(&mut self, name: &str) -> io::Result<Box<dyn LogFile>> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(self.path.join(name))?;
        // A new file's directory entry must be durable before its data counts.
        self.sync_dir()?;
        Ok(Box::new(FsFile(f)))
    }
    fn write_atomic(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        let tmp = self.path.join(format!("temp-{name}"));
        {
            let f = File::create(&tmp)?;
            f.write_all_at(data, 0)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.path.join(name))?;
        self.sync_dir()
    }
    fn remove(&mut self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.path.join(name))
    }
    fn free_bytes(&mut self) -> io::Result<u64> {
        free_bytes(&self.path)
    }
    fn size_of(&mut self, name: &str) -> io::Result<u64> {
        Ok(std::fs::metadata(self.path.join(name))?.len())
    }
    fn total_bytes(&mut self) -> io::Result<u64> {
        statvfs(&self.path).map(|st| st.f_blocks.saturating_mul(st.f_frsize))
    }
    fn path_of(&self, name: &str) -> Option<PathBuf> {
        Some(self.path.join(name))
    }
    fn recycle(&mut self, from: &str, to: &str) -> io::Result<Box<dyn LogFile>> {
        std::fs::rename(self.path.join(from), self.path.join(to))?;
        self.sync_dir()?;
        self.open_append(to)
    }
    fn retire(&mut self, name: &str) -> io::Result<()> {
        let path = self.path.join(name);
        // Held open across the unlink, the inode keeps its blocks until they are freed
        // step by step.
        let file = OpenOptions::new().write(true).open(&path);
        std::fs::remove_file(&path)?;
        if let Ok(f) = file {
            free_gradually(f);
        }
        Ok(())
    }
}

/// statvfs: blocks available to unprivileged users × fragment size.
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    statvfs(path).map(|st| st.f_bavail.saturating_mul(st.f_frsize))
}

fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs fills a zeroed struct; the path is a valid C string.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// What the fault-injecting backend does next (shared with the test that drives it).
#[derive(Default, Debug)]
pub struct Faults {
    /// The next write fails with this errno after writing `torn_prefix` bytes of it.
    pub fail_write: Option<(i32, usize)>,
    /// The next sync fails with this errno.
    pub fail_sync: Option<i32>,
    /// Reported free space (None: the real value).
    pub free_bytes: Option<u64>,
    /// Expose the real file so the io_uring engine and the executor's lease drive it
    /// (faults then come through [`FaultHook`]); read when a file is opened.
    pub through_uring: bool,
    /// Every failure so far, for assertions.
    pub injected: u32,
}

/// Wraps a real directory; its files fail as `faults` says.
pub struct FaultyDir {
    pub inner: FsDir,
    pub faults: Arc<Mutex<Faults>>,
}

struct FaultyFile {
    inner: Box<dyn LogFile>,
    faults: Arc<Mutex<Faults>>,
}

fn lock(f: &Mutex<Faults>) -> std::sync::MutexGuard<'_, Faults> {
    f.lock().unwrap_or_else(|e| e.into_inner())
}

impl FaultHook for Mutex<Faults> {
    fn before_write(&self, len: usize) -> Option<(i32, usize)> {
        let mut f = lock(self);
        let (errno, prefix) = f.fail_write.take()?;
        f.injected += 1;
        Some((errno, prefix.min(len)))
    }
    fn after_sync(&self) -> Option<i32> {
        let mut f = lock(self);
        let errno = f.fail_sync.take()?;
        f.injected += 1;
        Some(errno)
    }
}

impl LogFile for FaultyFile {
    fn write_all_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        if let Some((errno, prefix)) = self.faults.before_write(data.len()) {
            self.inner.write_all_at(offset, &data[..prefix])?;
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.inner.write_all_at(offset, data)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()?;
        match self.faults.after_sync() {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        }
    }
    fn real_file(&self) -> Option<&File> {
        if lock(&self.faults).through_uring {
            self.inner.real_file()
        } else {
            None
        }
    }
    fn fault_hook(&self) -> Option<Arc<dyn FaultHook>> {
        let hook: Arc<dyn FaultHook> = self.faults.clone();
        lock(&self.faults).through_uring.then_some(hook)
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn file_len(&mut self) -> io::Result<u64> {
        self.inner.file_len()
    }
}

impl LogDir for FaultyDir {
    fn open_append(&mut self, name: &str) -> io::Result<Box<dyn LogFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.inner.open_append(name)?,
            faults: self.faults.clone(),
        }))
    }
    fn write_atomic(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        self.inner.write_atomic(name, data)
    }
    fn remove(&mut self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn free_bytes(&mut self) -> io::Result<u64> {
        match lock(&self.faults).free_bytes {
            Some(n) => Ok(n),
            None => self.inner.free_bytes(),
        }
    }
    fn size_of(&mut self, name: &str) -> io::Result<u64> {
        self.inner.size_of(name)
    }
    fn path_of(&self, name: &str) -> Option<PathBuf> {
        // Only where the real file is exposed anyway (pre-allocation, direct I/O: the
        // engine applies the hook to the direct descriptor's writes too).
        if lock(&self.faults).through_uring {
            self.inner.path_of(name)
        } else {
            None
        }
    }
}

/// iovecs per `pwritev` call (the kernel's `UIO_MAXIOV`); more parts take more calls.
const IOVECS_PER_CALL: usize = 1024;

/// Writes every byte of `parts`, in order, at `offset` (pwritev, resumed after a short
/// write).
pub fn pwritev_all(file: &File, parts: &[&[u8]], offset: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut skip: usize = 0;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    while skip < total {
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(parts.len().min(IOVECS_PER_CALL));
        let mut before = 0;
        for p in parts {
            let (start, end) = (before, before + p.len());
            before = end;
            if end <= skip || p.is_empty() {
                continue;
            }
            if iov.len() == IOVECS_PER_CALL {
                break;
            }
            let from = skip.saturating_sub(start);
            iov.push(libc::iovec {
                iov_base: p[from..].as_ptr() as *mut libc::c_void,
                iov_len: p.len() - from,
            });
        }
        // SAFETY: every iovec points into a live slice of `parts` for its length.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                (offset + skip as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        skip += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod free_tests {
    use super::*;

    /// A vectored write of more parts than one `pwritev` takes (a batch of many values
    /// logged by reference) writes them all, in order, where the joined bytes would go.
    #[test]
    fn vectored_writes_take_more_parts_than_one_call_allows() {
        let dir = std::env::temp_dir().join(format!("cairn-pwritev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut d = FsDir::new(&dir);
        let mut f = d.open_append("v.aof").unwrap();
        let owned: Vec<Vec<u8>> = (0..3 * IOVECS_PER_CALL + 5)
            .map(|i| format!("{i},").into_bytes())
            .collect();
        let mut parts: Vec<&[u8]> = owned.iter().map(|p| p.as_slice()).collect();
        parts.insert(7, b"");
        f.write_all_at(0, b"head:").unwrap();
        f.write_all_vectored_at(5, &parts).unwrap();
        let got = std::fs::read(dir.join("v.aof")).unwrap();
        assert_eq!(got, [&b"head:"[..], &parts.concat()].concat());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A retired file's name goes at once; its blocks go step by step until none is left.
    #[test]
    fn retire_unlinks_now_and_frees_the_blocks_gradually() {
        let dir = std::env::temp_dir().join(format!("cairn-retire-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut d = FsDir::new(&dir);
        let f = File::create(dir.join("old.aof")).unwrap();
        f.set_len(3 * FREE_STEP_BYTES + 123).unwrap();
        let watch = f.try_clone().unwrap();
        drop(f);
        // The watcher holds the inode too: its length shows the steps.
        d.retire("old.aof").unwrap();
        assert!(!dir.join("old.aof").exists());
        let t = std::time::Instant::now();
        while watch.metadata().unwrap().len() > 0 {
            assert!(t.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // A file with another name (a hard-linked backup) keeps its data.
        let f = File::create(dir.join("linked.aof")).unwrap();
        f.set_len(FREE_STEP_BYTES + 7).unwrap();
        drop(f);
        std::fs::hard_link(dir.join("linked.aof"), dir.join("backup.aof")).unwrap();
        d.retire("linked.aof").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(
            std::fs::metadata(dir.join("backup.aof")).unwrap().len(),
            FREE_STEP_BYTES + 7
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
