//! A minimal blocking RESP2 client: enough to drive load and poll INFO.
//!
//! Every socket operation has a timeout so that a server that stops answering turns into
//! an error the caller can report, never a hang.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A parsed reply. Bulk contents are only kept when the caller asks (INFO); load replies
/// are skipped so that a 10 MB GET costs no allocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    /// A bulk whose bytes were skipped: its length (or -1 for nil).
    Skipped(i64),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
    pub fn error_text(&self) -> Option<&str> {
        match self {
            Reply::Error(s) => Some(s),
            _ => None,
        }
    }
}

/// Largest bulk or array header we accept from the server (a bound on what a broken peer
/// can make us allocate or skip).
const MAX_BULK: i64 = 512 * 1024 * 1024;
const MAX_ARRAY: i64 = 64 * 1024 * 1024;

pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    pub addr: SocketAddr,
}

pub fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot resolve {host}:{port}"),
        )
    })
}

impl Conn {
    /// Connects with a timeout, sets read/write timeouts and authenticates if asked.
    pub fn connect(
        addr: SocketAddr,
        password: Option<&str>,
        timeout: Duration,
    ) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {addr}: {e}")))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let writer = s.try_clone()?;
        let mut c = Conn {
            reader: BufReader::with_capacity(64 * 1024, s),
            writer,
            addr,
        };
        if let Some(pw) = password {
            let r = c.call(&[b"AUTH", pw.as_bytes()])?;
            if let Reply::Error(e) = r {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("AUTH failed: {e}"),
                ));
            }
        }
        Ok(c)
    }

    pub fn set_read_timeout(&self, d: Duration) -> io::Result<()> {
        self.reader.get_ref().set_read_timeout(Some(d))
    }

    /// Sends one command and reads its reply, keeping bulk contents.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        let mut buf = Vec::new();
        encode(&mut buf, args);
        self.writer.write_all(&buf)?;
        self.read_reply(true)
    }

    pub fn call_str(&mut self, args: &[&str]) -> io::Result<Reply> {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.call(&v)
    }

    pub fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer.write_all(buf)
    }

    /// Reads one reply. With `keep` false, bulk payloads are read and dropped.
    pub fn read_reply(&mut self, keep: bool) -> io::Result<Reply> {
        read_reply(&mut self.reader, keep, 0)
    }
}

/// Appends a RESP multibulk command.
pub fn encode(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

fn proto(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("protocol error: {msg}"))
}

fn read_line<R: BufRead>(r: &mut R) -> io::Result<String> {
    let mut line = Vec::with_capacity(64);
    // Bound the line so a peer sending garbage without CRLF cannot grow it forever.
    let n = r.take(64 * 1024).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "server closed the connection",
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(proto("line without CRLF"));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| proto("non UTF-8 line"))
}

fn parse_len(s: &str, max: i64) -> io::Result<i64> {
    let n: i64 = s.parse().map_err(|_| proto(&format!("bad length {s:?}")))?;
    if n < -1 || n > max {
        return Err(proto(&format!("length out of range {n}")));
    }
    Ok(n)
}

fn read_reply<R: BufRead>(r: &mut R, keep: bool, depth: usize) -> io::Result<Reply> {
    if depth > 64 {
        return Err(proto("nesting too deep"));
    }
    let line = read_line(r)?;
    let (t, rest) = line.split_at(line.len().min(1));
    Ok(match t {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(rest.parse().map_err(|_| proto("bad integer"))?),
        "$" => {
            let n = parse_len(rest, MAX_BULK)?;
            if n < 0 {
                return Ok(if keep {
                    Reply::Bulk(None)
                } else {
                    Reply::Skipped(-1)
                });
            }
            let n = n as usize;
            if keep {
                let mut v = vec![0u8; n + 2];
                r.read_exact(&mut v)?;
                v.truncate(n);
                Reply::Bulk(Some(v))
            } else {
                skip(r, n + 2)?;
                Reply::Skipped(n as i64)
            }
        }
        "*" => {
            let n = parse_len(rest, MAX_ARRAY)?;
            if n < 0 {
                return Ok(Reply::Array(None));
            }
            let mut v = Vec::with_capacity((n as usize).min(1024));
            for _ in 0..n {
                v.push(read_reply(r, keep, depth + 1)?);
            }
            Reply::Array(Some(v))
        }
        _ => return Err(proto(&format!("unexpected reply type in {line:?}"))),
    })
}

/// Discards `n` bytes from the reader without allocating them.
fn skip<R: BufRead>(r: &mut R, mut n: usize) -> io::Result<()> {
    while n > 0 {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed the connection mid-reply",
            ));
        }
        let k = buf.len().min(n);
        r.consume(k);
        n -= k;
    }
    Ok(())
}

/// Parses an INFO reply into (field, value) pairs.
pub fn parse_info(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn parses_replies() {
        let mut c = Cursor::new(
            b"+OK\r\n-ERR x\r\n:5\r\n$3\r\nabc\r\n$-1\r\n*2\r\n$1\r\na\r\n:1\r\n$4\r\nabcd\r\n"
                .to_vec(),
        );
        assert_eq!(
            read_reply(&mut c, true, 0).unwrap(),
            Reply::Simple("OK".into())
        );
        assert_eq!(
            read_reply(&mut c, true, 0).unwrap(),
            Reply::Error("ERR x".into())
        );
        assert_eq!(read_reply(&mut c, true, 0).unwrap(), Reply::Int(5));
        assert_eq!(
            read_reply(&mut c, true, 0).unwrap(),
            Reply::Bulk(Some(b"abc".to_vec()))
        );
        assert_eq!(read_reply(&mut c, true, 0).unwrap(), Reply::Bulk(None));
        assert_eq!(
            read_reply(&mut c, true, 0).unwrap(),
            Reply::Array(Some(vec![Reply::Bulk(Some(b"a".to_vec())), Reply::Int(1)]))
        );
        assert_eq!(read_reply(&mut c, false, 0).unwrap(), Reply::Skipped(4));
        assert!(read_reply(&mut c, true, 0).is_err());
    }

    #[test]
    fn rejects_garbage() {
        let mut c = Cursor::new(b"$99999999999\r\n".to_vec());
        assert!(read_reply(&mut c, true, 0).is_err());
        let mut c = Cursor::new(b"?x\r\n".to_vec());
        assert!(read_reply(&mut c, true, 0).is_err());
    }

    #[test]
    fn info_fields() {
        let f = parse_info("# Persistence\r\nrdb_bgsave_in_progress:1\r\nx:y\r\n");
        assert_eq!(f[0], ("rdb_bgsave_in_progress".into(), "1".into()));
        assert_eq!(f.len(), 2);
    }
}
