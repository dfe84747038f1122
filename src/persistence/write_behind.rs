//! Progressive write-back of a large file written sequentially (a snapshot image, an RDB
//! base): `rdb-save-incremental-fsync` / `aof-rewrite-incremental-fsync`, as Redis.
//!
//! Why: left to the page cache, a big image stays dirty until its final `fsync`, which
//! then pushes all of it to the device at once. On a disk with a write-back cache (a flush
//! makes the host write back everything written before it) every log `fdatasync` issued
//! meanwhile waits behind that burst. Here the image's write-back is started every 4 MiB
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`) and the window before it waited for, so
//! never more than two windows are dirty and a concurrent flush stays short. Under
//! `appendfsync always` those flushes are held replies (figures: BENCHMARKS.md, "AOF
//! rewrite stall"). `sync_file_range` makes nothing durable: the final `fsync` does.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;

/// Bytes between write-back kicks (Redis's REDIS_AUTOSYNC_BYTES is 4 MB too).
pub const WINDOW_BYTES: u64 = 4 << 20;

/// A file written sequentially from `start`, its write-back started every `window` bytes.
pub struct WriteBehind {
    file: File,
    /// File offset of the next byte written.
    pos: u64,
    /// Write-back was started for [.., kicked).
    kicked: u64,
    /// Write-back is complete for [.., waited).
    waited: u64,
    /// 0: plain writes, no write-back (the option is off).
    window: u64,
}

impl WriteBehind {
    /// `start`: the file offset sequential writes begin at; `enabled`: the option.
    pub fn new(file: File, start: u64, enabled: bool) -> WriteBehind {
        WriteBehind {
            file,
            pos: start,
            kicked: start,
            waited: start,
            window: if enabled { WINDOW_BYTES } else { 0 },
        }
    }

    pub fn into_inner(self) -> File {
        self.file
    }

    /// Starts the write-back of what was written since the last kick, then waits for the
    /// window before it (errors are left to the final fsync, which reports them).
    fn kick(&mut self) {
        let fd = self.file.as_raw_fd();
        let (from, to) = (self.kicked, self.pos);
        sync_range(fd, from, to - from, libc::SYNC_FILE_RANGE_WRITE);
        if from > self.waited {
            sync_range(
                fd,
                self.waited,
                from - self.waited,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            );
            self.waited = from;
        }
        self.kicked = to;
    }
}

fn sync_range(fd: i32, off: u64, len: u64, flags: libc::c_uint) {
    if len == 0 {
        return;
    }
    // SAFETY: sync_file_range only reads its integer arguments; a bad fd is an error return.
    unsafe {
        libc::sync_file_range(fd, off as libc::off64_t, len as libc::off64_t, flags);
    }
}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.pos += n as u64;
        if self.window > 0 && self.pos - self.kicked >= self.window {
            self.kick();
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte arrives in order whatever the write sizes, and the kicks walk the file
    /// in windows: what was waited for is never past what was kicked or written.
    #[test]
    fn writes_pass_through_and_windows_advance() {
        let dir = std::env::temp_dir().join(format!("cairn-wb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut expect = Vec::new();
        {
            let f = File::create(&path).unwrap();
            let mut w = WriteBehind::new(f, 0, true);
            let mut seed = 7u64;
            while expect.len() < 3 * WINDOW_BYTES as usize + 12345 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                let n = (seed >> 40) as usize % 300_000 + 1;
                let chunk: Vec<u8> = (0..n).map(|i| (i as u64 ^ seed) as u8).collect();
                w.write_all(&chunk).unwrap();
                expect.extend_from_slice(&chunk);
                assert!(w.waited <= w.kicked && w.kicked <= w.pos);
                assert!(w.pos - w.kicked < WINDOW_BYTES);
            }
            assert!(w.waited >= WINDOW_BYTES, "earlier windows were waited for");
            w.into_inner().sync_all().unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), expect);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
