//! The inbound side of a client connection, shared by the single-thread event loop
//! (`event_loop.rs`) and the I/O threads (`io_threads.rs`): one `read(2)` of request
//! bytes, into the arena block of the big argument being filled, else into the query
//! buffer's spare room. What to do with the bytes (parse, run, hand to the executor) and
//! the read budgets stay with each loop.
//!
//! Must not touch: the keyspace, replies, the executor's state.

use super::stream::Stream;
use crate::protocol::parser::{BigArg, RequestParser};
use std::io;
use std::os::fd::AsRawFd;

/// The most plaintext one read of a TLS connection asks for.
const TLS_READ_CHUNK_BYTES: usize = 64 * 1024;

/// What one read brought.
pub enum ReadStep {
    /// `n` bytes arrived of the `asked` the read was for (`n == asked`: the socket may
    /// hold more). `block_pending`: they went into a big argument's block that still
    /// waits for more (no new command can be complete yet).
    Bytes {
        n: usize,
        asked: usize,
        block_pending: bool,
    },
    /// The peer closed the connection, or the socket failed.
    Closed,
    /// Nothing to read now.
    WouldBlock,
}

/// The connection's request bytes: the query buffer, its parser, and the blocks of big
/// arguments read straight into the arena.
pub struct Inbound<'a> {
    pub qbuf: &'a mut Vec<u8>,
    pub parser: &'a mut RequestParser,
    pub big_args: &'a mut Vec<BigArg>,
}

impl Inbound<'_> {
    /// The big argument whose block is being filled, if any.
    pub fn filling(&self) -> Option<BigArg> {
        self.big_args.last().filter(|a| a.filled < a.len).copied()
    }

    /// One `read(2)` from `stream` (over TLS: what the records read decrypt to): up to
    /// `block_max` bytes into the block being filled, else up to `qbuf_want` bytes into
    /// the query buffer (grown for them). Retries on EINTR.
    pub fn read_once(
        &mut self,
        stream: &mut Stream,
        qbuf_want: usize,
        block_max: usize,
    ) -> ReadStep {
        let fd = stream.as_raw_fd();
        loop {
            let filling = self.filling();
            let (dst, len) = match filling {
                Some(a) => (
                    (a.addr + a.filled) as *mut u8,
                    (a.len - a.filled).min(block_max),
                ),
                None => {
                    self.qbuf.reserve(qbuf_want);
                    let spare = self.qbuf.spare_capacity_mut();
                    (spare.as_mut_ptr() as *mut u8, spare.len().min(qbuf_want))
                }
            };
            // `dst` has room for `len` bytes (the block's unread tail — nothing else
            // writes a block a connection is filling — or the Vec's spare capacity); only
            // bytes the read wrote are marked as read below.
            // Over TLS the buffer is zeroed before each read: a bounded chunk keeps that
            // proportional to the bytes read (a full chunk reads as "maybe more").
            let len = if matches!(stream, Stream::Tls(_)) {
                len.min(TLS_READ_CHUNK_BYTES)
            } else {
                len
            };
            let mut read = || match stream {
                Stream::Tls(t) => {
                    // SAFETY: `dst` has room for `len` bytes (above), zeroed first so the
                    // slice rustls decrypts into is initialised memory.
                    let buf = unsafe {
                        std::ptr::write_bytes(dst, 0, len);
                        if filling.is_some() {
                            crate::arena::dirty::mark_written(dst as usize, len);
                        }
                        std::slice::from_raw_parts_mut(dst, len)
                    };
                    match t.read_plain(buf) {
                        Ok(n) => Ok(n as isize),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            Err(ReadStep::WouldBlock)
                        }
                        Err(_) => Err(ReadStep::Closed),
                    }
                }
                // SAFETY: `dst` has room for `len` bytes (above).
                _ => Ok(unsafe { libc::read(fd, dst as *mut libc::c_void, len) }),
            };
            // Into an arena block: a copy-before-write snapshot copies out the pages
            // first (see `arena::cow`).
            let n = if filling.is_some() {
                crate::arena::cow::external_write(dst as usize, len, read)
            } else {
                read()
            };
            let n = match n {
                Ok(n) => n,
                Err(step) => return step,
            };
            if filling.is_some() && n > 0 {
                // Into an arena block: a snapshot tracking the arena must learn of it.
                crate::arena::dirty::mark_written(dst as usize, n as usize);
            }
            if n > 0 {
                let n = n as usize;
                let mut block_pending = false;
                match filling {
                    Some(a) => {
                        let last = self.big_args.len() - 1;
                        self.big_args[last].filled += n;
                        if self.big_args[last].filled == a.len {
                            self.parser.big_bulk_filled(last, a.len);
                        } else {
                            block_pending = true;
                        }
                    }
                    // SAFETY: the kernel initialised n bytes.
                    None => unsafe { self.qbuf.set_len(self.qbuf.len() + n) },
                }
                return ReadStep::Bytes {
                    n,
                    asked: len,
                    block_pending,
                };
            }
            if n == 0 {
                return ReadStep::Closed;
            }
            match io::Error::last_os_error().kind() {
                io::ErrorKind::WouldBlock => return ReadStep::WouldBlock,
                io::ErrorKind::Interrupted => continue,
                _ => return ReadStep::Closed,
            }
        }
    }
}
