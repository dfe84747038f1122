//! A client connection's socket: TCP, TLS over TCP (`tls-port`, see `tls_stream.rs`), or
//! a Unix domain socket (`unixsocket`). Both loops read, write and poll it the same way;
//! only naming, TCP options and TLS's own backlog and handshake deadline differ.

use super::tls_stream::TlsStream;
use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
    Unix(UnixStream),
}

/// Who connected: an address, or (Unix socket) the socket's path.
#[derive(Clone, Debug)]
pub enum Peer {
    Tcp(SocketAddr),
    Unix(String),
}

impl Peer {
    /// The peer's IP (None over a Unix socket, which is local by definition).
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Peer::Tcp(a) => Some(a.ip()),
            Peer::Unix(_) => None,
        }
    }
    /// As CLIENT LIST shows it: `ip:port`, or `<socket path>:0` as Redis does.
    pub fn name(&self) -> String {
        match self {
            Peer::Tcp(a) => a.to_string(),
            Peer::Unix(path) => format!("{path}:0"),
        }
    }
}

impl Stream {
    /// The local end as CLIENT LIST's `laddr` shows it.
    pub fn local_name(&self, unix_path: &str) -> String {
        match self {
            Stream::Tcp(s) => s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Stream::Tls(t) => t
                .tcp
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            Stream::Unix(_) => format!("{unix_path}:0"),
        }
    }
    /// TCP_NODELAY (TCP only: a Unix socket has no Nagle).
    pub fn set_nodelay(&self) {
        if let Some(s) = self.tcp() {
            let _ = s.set_nodelay(true);
        }
    }
    /// The TCP stream, for TCP-only options (keepalive).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Tcp(s) => Some(s),
            Stream::Tls(t) => Some(&t.tcp),
            Stream::Unix(_) => None,
        }
    }
    /// TLS records the socket has not taken yet: the loops keep waiting for writable
    /// events while there are, even with no reply bytes left.
    pub fn tls_backlog(&self) -> bool {
        matches!(self, Stream::Tls(t) if t.backlog())
    }
    /// A TLS connection whose handshake did not finish in time (to be closed).
    pub fn handshake_overdue(&mut self) -> bool {
        match self {
            Stream::Tls(t) => t.handshake_overdue(),
            _ => false,
        }
    }
    pub fn is_unix(&self) -> bool {
        matches!(self, Stream::Unix(_))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(t) => t.read_plain(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(t) => t.write_plain(&[IoSlice::new(buf)]),
            Stream::Unix(s) => s.write(buf),
        }
    }
    // Replies go out as one writev of many slices (out queue and value references).
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Tls(t) => t.write_plain(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            // The TLS backlog (WouldBlock while some is left).
            Stream::Tls(t) => t.flush_tls(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Tls(t) => t.tcp.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Tls(s) => s.tcp.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Tls(s) => s.tcp.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Tls(t) => t.tcp.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}
