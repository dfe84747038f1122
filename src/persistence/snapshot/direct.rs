//! The image's bytes go to the file with `O_DIRECT`, in 4 MiB aligned writes made by an
//! I/O thread while the snapshot thread fills the next buffer.
//!
//! Why not the page cache: an image is written once and not read back by this process,
//! yet through the page cache every byte costs a copy into a freshly allocated page, the
//! write-back (`rdb-save-incremental-fsync` waits for every other 4 MiB window) and, once
//! the image outgrows free memory, reclaiming as many older pages (kswapd's CPU, or the
//! writer's own in direct reclaim). On the 2-CPU machine a snapshot shares with the
//! executor, that CPU is what a live pass lacks (BENCHMARKS.md, "What bounds an 8M-key
//! pass"). Direct writes hold no dirty page either, so a concurrent log `fdatasync` never
//! waits behind the image (the reason for incremental fsync).
//!
//! The file's format is unchanged: every full buffer is written whole at its offset; at
//! [`DirectWriter::finish`] the last buffer's whole blocks are written directly and its
//! unaligned tail through an ordinary descriptor, so no padding reaches the file. The
//! caller then writes the header through that descriptor and fsyncs it (which also
//! makes the direct writes' metadata — the file size — durable).
//!
//! Where the file system refuses `O_DIRECT` (tmpfs, some FUSE), [`DirectWriter::create`]
//! says so at once (a probe write of the first block) and the image is written buffered.

use crate::persistence::aof::uring::{AlignedBuf, BLOCK};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Bytes per direct write (the disk here takes ~710 MB/s in 4 MiB writes one at a time,
/// ~330 MB/s in 1 MiB ones).
pub const BUF_BYTES: usize = 4 << 20;
/// Buffers: one being filled, one in the I/O thread's write (8 MiB: they count in the
/// snapshot's extra memory). Filling 4 MiB takes longer than writing it at any rate a pass
/// reaches here, so a third buffer would seldom be waited for less.
const BUFFERS: usize = 2;

type Done = (AlignedBuf, io::Result<()>);

/// A sequential writer of one file, from offset 0, with `O_DIRECT`.
pub struct DirectWriter {
    /// The same file opened without O_DIRECT: the unaligned tail, then the caller's header.
    plain: File,
    cur: Option<AlignedBuf>,
    /// Bytes of `cur` filled.
    fill: usize,
    /// File offset of `cur[0]`.
    base: u64,
    /// Buffers back from the I/O thread, ready to fill.
    free: Vec<AlignedBuf>,
    /// End offsets of the writes handed to the I/O thread and not back yet, in order.
    queued: VecDeque<u64>,
    /// Bytes from offset 0 that are in the file (every write below it completed).
    done: u64,
    to_io: Option<mpsc::SyncSender<(AlignedBuf, u64)>>,
    from_io: mpsc::Receiver<Done>,
    io: Option<JoinHandle<()>>,
    /// The first write error; every later call reports it.
    failed: Option<io::ErrorKind>,
}

impl DirectWriter {
    /// Creates `path` (emptied if it exists) and opens it for direct writes. `Ok(None)`:
    /// the file system does not take them; the caller writes buffered.
    pub fn create(path: &Path) -> io::Result<Option<DirectWriter>> {
        let direct = match OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
            Err(e) => return Err(e),
        };
        // Some file systems accept the flag and refuse the write: find out now, with the
        // first block (zeros: the header's placeholder is zeros, and the first buffer
        // rewrites the block anyway).
        let cur = AlignedBuf::zeroed(BUF_BYTES);
        if let Err(e) = direct.write_all_at(&cur.as_slice()[..BLOCK], 0) {
            if e.raw_os_error() == Some(libc::EINVAL) {
                return Ok(None);
            }
            return Err(e);
        }
        let plain = OpenOptions::new().write(true).open(path)?;
        let (to_io, io_rx) = mpsc::sync_channel::<(AlignedBuf, u64)>(BUFFERS);
        let (io_tx, from_io) = mpsc::channel::<Done>();
        let io = std::thread::Builder::new()
            .name("cairn-snap-io".into())
            .spawn(move || {
                for (buf, offset) in io_rx {
                    let r = direct.write_all_at(buf.as_slice(), offset);
                    if io_tx.send((buf, r)).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Some(DirectWriter {
            plain,
            cur: Some(cur),
            fill: 0,
            base: 0,
            free: Vec::new(),
            queued: VecDeque::new(),
            done: 0,
            to_io: Some(to_io),
            from_io,
            io: Some(io),
            failed: None,
        }))
    }

    /// Bytes from the file's start that are written (a reader following the file may read
    /// below this).
    pub fn done(&self) -> u64 {
        self.done
    }

    fn check(&self) -> io::Result<()> {
        match self.failed {
            Some(kind) => Err(io::Error::new(kind, "an earlier image write failed")),
            None => Ok(()),
        }
    }

    /// Takes back one buffer from the I/O thread (waiting for its write).
    fn reap_one(&mut self) -> io::Result<()> {
        let (buf, r) = self
            .from_io
            .recv()
            .map_err(|_| io::Error::other("the image's I/O thread stopped"))?;
        self.returned(buf, r)
    }

    /// A buffer back from the I/O thread: the thread writes in order, so its write ends
    /// the oldest queued one and extends the written prefix.
    fn returned(&mut self, buf: AlignedBuf, r: io::Result<()>) -> io::Result<()> {
        let end = self.queued.pop_front().expect("a queued write");
        if let Err(e) = r {
            self.failed = Some(e.kind());
            return Err(e);
        }
        self.done = end;
        if buf.as_slice().len() == BUF_BYTES {
            self.free.push(buf);
        }
        Ok(())
    }

    fn send(&mut self, buf: AlignedBuf, offset: u64) -> io::Result<()> {
        let end = offset + buf.as_slice().len() as u64;
        self.to_io
            .as_ref()
            .expect("the I/O thread runs")
            .send((buf, offset))
            .map_err(|_| io::Error::other("the image's I/O thread stopped"))?;
        self.queued.push_back(end);
        Ok(())
    }

    /// Hands the full current buffer to the I/O thread and takes an empty one.
    fn submit(&mut self) -> io::Result<()> {
        let buf = self.cur.take().expect("a current buffer");
        self.send(buf, self.base)?;
        self.base += BUF_BYTES as u64;
        self.fill = 0;
        // Take back what has completed meanwhile (no wait), then wait only if no
        // buffer is free.
        while let Ok((buf, r)) = self.from_io.try_recv() {
            self.returned(buf, r)?;
        }
        if self.free.is_empty() && self.queued.len() >= BUFFERS {
            self.reap_one()?;
        }
        self.cur = Some(
            self.free
                .pop()
                .unwrap_or_else(|| AlignedBuf::zeroed(BUF_BYTES)),
        );
        Ok(())
    }

    /// Writes the rest, waits for every write, stops the I/O thread and returns the
    /// ordinary descriptor (positioned nowhere in particular: use positional writes).
    pub fn finish(mut self) -> io::Result<File> {
        self.check()?;
        let whole = self.fill / BLOCK * BLOCK;
        let tail_at = self.base + whole as u64;
        let cur = self.cur.take().expect("a current buffer");
        let tail = cur.as_slice()[whole..self.fill].to_vec();
        if whole > 0 {
            // Only the whole blocks: a direct write's length must be aligned.
            let mut head = AlignedBuf::zeroed(whole);
            head.as_mut_slice()
                .copy_from_slice(&cur.as_slice()[..whole]);
            self.send(head, self.base)?;
        }
        while !self.queued.is_empty() {
            self.reap_one()?;
        }
        self.stop();
        self.plain.write_all_at(&tail, tail_at)?;
        // The probe wrote a whole first block: an image shorter than that ends here.
        self.plain.set_len(tail_at + tail.len() as u64)?;
        self.plain.try_clone()
    }

    fn stop(&mut self) {
        self.to_io = None;
        if let Some(h) = self.io.take() {
            let _ = h.join();
        }
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Write for DirectWriter {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        self.check()?;
        let n = data.len();
        while !data.is_empty() {
            let cur = self.cur.as_mut().expect("a current buffer");
            let take = data.len().min(BUF_BYTES - self.fill);
            cur.as_mut_slice()[self.fill..self.fill + take].copy_from_slice(&data[..take]);
            self.fill += take;
            data = &data[take..];
            if self.fill == BUF_BYTES {
                self.submit()?;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the write sizes, the file holds exactly the bytes written, in order,
    /// including an unaligned tail; `done` never passes what was written.
    #[test]
    fn direct_writes_land_in_order_with_an_unaligned_tail() {
        let dir =
            std::path::PathBuf::from("target").join(format!("cairn-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        File::create(&path).unwrap();
        let Some(mut w) = DirectWriter::create(&path).unwrap() else {
            eprintln!("O_DIRECT refused here: nothing to check");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        };
        let mut expect = Vec::new();
        let mut seed = 11u64;
        while expect.len() < 3 * BUF_BYTES + 4321 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let n = (seed >> 40) as usize % 1_500_000 + 1;
            let chunk: Vec<u8> = (0..n).map(|i| (i as u64 ^ (seed >> 7)) as u8).collect();
            w.write_all(&chunk).unwrap();
            expect.extend_from_slice(&chunk);
            assert!(w.done() <= expect.len() as u64);
        }
        assert!(w.done() > 0, "earlier buffers completed");
        let f = w.finish().unwrap();
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expect);
        // Shorter than the block the probe writes: the file is exactly what was written.
        File::create(&path).unwrap();
        let mut w = DirectWriter::create(&path)
            .unwrap()
            .expect("direct writes here");
        w.write_all(b"short image").unwrap();
        w.finish().unwrap().sync_all().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short image");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
