//! A client connection accepted on `tls-port`: the TCP socket and its rustls session.
//!
//! Both socket loops are edge-triggered and rely on one rule: a read that returns fewer
//! bytes than asked left the socket empty (a new event will come for later bytes). TLS
//! keeps that rule: [`TlsStream::read_plain`] decrypts records until the caller's buffer
//! is full or the socket says EAGAIN, so plaintext rustls still holds is never stranded.
//!
//! Writes encrypt straight from the caller's slices (reply buffer and the arena blocks of
//! large values, as the plain path writes them with writev) into rustls's record buffer,
//! at most [`crate::tls::SEND_BUFFER_BYTES`] ahead of the socket. Records the socket did
//! not take yet are the *backlog* ([`TlsStream::backlog`]): the loops keep a writable
//! interest while there is one, as they do for unsent reply bytes.
//!
//! Must not touch: the keyspace, replies, the executor's state.

use crate::warning;
use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct TlsStream {
    pub tcp: TcpStream,
    conn: ServerConnection,
    accepted: Instant,
    /// The error was logged and the connection is to be closed.
    failed: bool,
}

impl TlsStream {
    pub fn accept(tcp: TcpStream, config: Arc<ServerConfig>) -> io::Result<TlsStream> {
        let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
        conn.set_buffer_limit(Some(crate::tls::SEND_BUFFER_BYTES));
        Ok(TlsStream {
            tcp,
            conn,
            accepted: Instant::now(),
            failed: false,
        })
    }

    fn peer(&self) -> String {
        self.tcp
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into())
    }

    /// The handshake has not finished within [`crate::tls::HANDSHAKE_TIMEOUT_MS`]: the
    /// loop closes the connection (logged here).
    pub fn handshake_overdue(&mut self) -> bool {
        let late = self.conn.is_handshaking()
            && self.accepted.elapsed() > Duration::from_millis(crate::tls::HANDSHAKE_TIMEOUT_MS);
        if late && !self.failed {
            self.failed = true;
            warning!(
                "Error accepting a client connection: TLS handshake timed out (conn: {})",
                self.peer()
            );
        }
        late
    }

    /// The handshake is not finished yet (no plaintext either way).
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// TLS records waiting for room in the socket.
    pub fn backlog(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes the backlog to the socket (WouldBlock when it does not all fit).
    pub fn flush_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Up to `dst.len()` plaintext bytes; Ok(0) when the peer closed. Fewer than asked
    /// only when the socket had nothing more (WouldBlock when nothing at all).
    pub fn read_plain(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if self.failed {
            return Ok(0);
        }
        let mut got = 0;
        loop {
            got += match self.take_plain(&mut dst[got..]) {
                Some(n) => n,
                // Closed by the peer (close_notify, or the TCP stream ended).
                None => return Ok(got),
            };
            if got == dst.len() {
                return Ok(got);
            }
            match self.conn.read_tls(&mut self.tcp) {
                Ok(0) => {
                    // EOF: what rustls decrypted before it is still handed over.
                    if let Some(n) = self.take_plain(&mut dst[got..]) {
                        got += n;
                    }
                    return Ok(got);
                }
                Ok(_) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        self.failed = true;
                        warning!(
                            "Error accepting a client connection: {e} (conn: {})",
                            self.peer()
                        );
                        // The alert rustls queued, best effort.
                        let _ = self.flush_tls();
                        return Ok(0);
                    }
                    // Handshake messages, session tickets, key updates.
                    match self.flush_tls() {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if got > 0 { Ok(got) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Decrypted bytes rustls holds, into `dst` (non-empty); None when the peer closed.
    fn take_plain(&mut self, dst: &mut [u8]) -> Option<usize> {
        if dst.is_empty() {
            return Some(0);
        }
        match self.conn.reader().read(dst) {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Some(0),
            Err(_) => None,
        }
    }

    /// Encrypts from `bufs` and sends, until all is taken or the socket is full; Ok(n)
    /// counts the plaintext bytes taken (sent, or in the backlog). As with a plain
    /// socket, taking fewer than offered means the socket is full (a writable event will
    /// come): rustls's buffer limit alone never stops it.
    pub fn write_plain(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.failed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.flush_tls()?;
        let mut taken = 0;
        loop {
            let rest = slices_after(bufs, taken);
            if rest.is_empty() {
                return Ok(taken);
            }
            let n = self.conn.writer().write_vectored(&rest)?;
            taken += n;
            match self.flush_tls() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(taken),
                // Reported by the next write.
                Err(_) if taken > 0 => return Ok(taken),
                Err(e) => return Err(e),
            }
            if n == 0 {
                // Still handshaking with a full plaintext buffer: wait for the peer.
                return if taken > 0 {
                    Ok(taken)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
        }
    }
}

/// The slices of `bufs` after their first `skip` bytes.
fn slices_after<'a>(bufs: &'a [IoSlice<'a>], mut skip: usize) -> Vec<IoSlice<'a>> {
    let mut out = Vec::with_capacity(bufs.len());
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        let bytes: &'a [u8] = b;
        out.push(IoSlice::new(&bytes[skip..]));
        skip = 0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_after_skips_whole_and_partial_slices() {
        let (a, b, c) = (b"abc".as_slice(), b"de".as_slice(), b"fgh".as_slice());
        let bufs = [IoSlice::new(a), IoSlice::new(b), IoSlice::new(c)];
        let joined = |v: Vec<IoSlice<'_>>| v.iter().flat_map(|s| s.to_vec()).collect::<Vec<u8>>();
        assert_eq!(joined(slices_after(&bufs, 0)), b"abcdefgh");
        assert_eq!(joined(slices_after(&bufs, 4)), b"efgh");
        assert_eq!(joined(slices_after(&bufs, 5)), b"fgh");
        assert!(slices_after(&bufs, 8).is_empty());
    }
}
