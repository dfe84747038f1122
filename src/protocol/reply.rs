//! RESP2/RESP3 reply encoding into a connection's output buffer.
//!
//! One writer for both protocols: the RESP3-only types degrade to their RESP2 shapes
//! (maps become flat arrays, doubles bulk strings, null `$-1` or `*-1`) as Redis does.

use crate::util::fmt_i64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resp {
    V2,
    V3,
}

pub struct Reply<'a> {
    pub buf: &'a mut Vec<u8>,
    pub resp: Resp,
}

impl<'a> Reply<'a> {
    pub fn new(buf: &'a mut Vec<u8>, resp: Resp) -> Reply<'a> {
        Reply { buf, resp }
    }

    #[inline]
    fn header(&mut self, prefix: u8, n: i64) {
        let mut tmp = [0u8; 20];
        self.buf.push(prefix);
        self.buf.extend_from_slice(fmt_i64(n, &mut tmp));
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error; `msg` carries its code (`ERR ...`, `WRONGTYPE ...`). CR/LF become spaces
    /// so a reply can never break the framing.
    pub fn error(&mut self, msg: &str) {
        self.error_bytes(msg.as_bytes());
    }

    /// An error reply from raw bytes (client arguments echoed back as Redis does); CR and
    /// LF become spaces so the reply stays one line.
    pub fn error_bytes(&mut self, msg: &[u8]) {
        self.buf.push(b'-');
        self.buf.extend(
            msg.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    #[inline]
    pub fn int(&mut self, v: i64) {
        self.header(b':', v);
    }

    #[inline]
    pub fn bulk(&mut self, b: &[u8]) {
        self.header(b'$', b.len() as i64);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Just the `$len` line of a bulk string whose bytes are sent from elsewhere.
    pub fn bulk_header(&mut self, len: usize) {
        self.header(b'$', len as i64);
    }

    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }

    pub fn bulk_i64(&mut self, v: i64) {
        let mut tmp = [0u8; 20];
        let s = fmt_i64(v, &mut tmp);
        self.header(b'$', s.len() as i64);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A null bulk string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        match self.resp {
            Resp::V2 => self.buf.extend_from_slice(b"$-1\r\n"),
            Resp::V3 => self.buf.extend_from_slice(b"_\r\n"),
        }
    }

    /// A null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        match self.resp {
            Resp::V2 => self.buf.extend_from_slice(b"*-1\r\n"),
            Resp::V3 => self.buf.extend_from_slice(b"_\r\n"),
        }
    }

    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// A map of `n` pairs: `%n` in RESP3, an array of 2n in RESP2.
    pub fn map(&mut self, n: usize) {
        match self.resp {
            Resp::V2 => self.header(b'*', 2 * n as i64),
            Resp::V3 => self.header(b'%', n as i64),
        }
    }

    /// A set: `~n` in RESP3, an array in RESP2.
    pub fn set(&mut self, n: usize) {
        match self.resp {
            Resp::V2 => self.header(b'*', n as i64),
            Resp::V3 => self.header(b'~', n as i64),
        }
    }

    /// A push frame (RESP3) or array (RESP2).
    pub fn push(&mut self, n: usize) {
        match self.resp {
            Resp::V2 => self.header(b'*', n as i64),
            Resp::V3 => self.header(b'>', n as i64),
        }
    }

    pub fn boolean(&mut self, v: bool) {
        match self.resp {
            Resp::V2 => self.int(v as i64),
            Resp::V3 => self
                .buf
                .extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" }),
        }
    }

    /// A double: `,` in RESP3, a bulk string in RESP2 (Redis 7.0's `%.17g` formatting).
    pub fn double(&mut self, v: f64) {
        let s = format_double(v);
        match self.resp {
            Resp::V2 => self.bulk(s.as_bytes()),
            Resp::V3 => {
                self.buf.push(b',');
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A verbatim string (`=len\r\ntxt:...`) in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, s: &[u8]) {
        match self.resp {
            Resp::V2 => self.bulk(s),
            Resp::V3 => {
                self.header(b'=', s.len() as i64 + 4);
                self.buf.extend_from_slice(b"txt:");
                self.buf.extend_from_slice(s);
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// Appends pre-encoded RESP.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

/// Formats a double as Redis 7.0 does in replies: `inf`/`-inf`, integers without a
/// fraction when exactly representable in 17 digits, else `%.17g`.
pub fn format_double(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.is_nan() {
        return "nan".into();
    }
    format_g17(v)
}

/// C's `%.17g`.
pub fn format_g17(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let exp = v.abs().log10().floor() as i32;
    // %.17g: scientific if exp < -4 or exp >= 17 (precision). Use Rust's exact formatting
    // of 17 significant digits, then strip trailing zeros as %g does.
    let sci = format!("{:.16e}", v);
    let (mant, e) = sci.split_once('e').expect("exponent");
    let e: i32 = e.parse().expect("exponent digits");
    let _ = exp;
    if !(-4..17).contains(&e) {
        let mant = strip_zeros(mant);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", e.abs())
    } else {
        let decimals = (16 - e).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp2_and_resp3_shapes() {
        let mut b = Vec::new();
        let mut r = Reply::new(&mut b, Resp::V2);
        r.map(2);
        r.null();
        r.null_array();
        r.double(1.5);
        r.boolean(true);
        assert_eq!(b, b"*4\r\n$-1\r\n*-1\r\n$3\r\n1.5\r\n:1\r\n");
        let mut b = Vec::new();
        let mut r = Reply::new(&mut b, Resp::V3);
        r.map(2);
        r.null();
        r.double(1.5);
        r.boolean(false);
        r.error("ERR a\r\nb");
        assert_eq!(b, b"%2\r\n_\r\n,1.5\r\n#f\r\n-ERR a  b\r\n");
    }

    #[test]
    fn g17_matches_c() {
        assert_eq!(format_g17(1.1), "1.1000000000000001");
        assert_eq!(format_g17(1.0), "1");
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(123456.0), "123456");
        assert_eq!(format_g17(1e-5), "1.0000000000000001e-05");
        assert_eq!(format_g17(-2.5), "-2.5");
        assert_eq!(format_g17(3.0e16), "30000000000000000");
        assert_eq!(format_g17(1.0e17), "1e+17");
    }
}
