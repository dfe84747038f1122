//! Incremental RESP request parser: multibulk (`*N\r\n$len\r\n...`) and inline commands,
//! resumable across reads, with Redis's limits and error texts.
//!
//! Arguments are returned as byte ranges into the caller's query buffer (no copy), except
//! for inline commands, whose arguments may contain escapes and are unescaped into
//! `inline_scratch`.

/// Longest line (multibulk count, bulk length, inline request) accepted without a newline
/// (Redis's PROTO_INLINE_MAX_SIZE).
pub const INLINE_MAX_BYTES: usize = 64 * 1024;
/// Before AUTH, at most this many arguments and bytes per argument (as Redis 7).
pub const UNAUTH_MAX_ARGS: i64 = 10;
pub const UNAUTH_MAX_BULK_BYTES: i64 = 16 * 1024;
/// Largest multibulk count (Redis: INT_MAX).
pub const MULTIBULK_MAX: i64 = i32::MAX as i64;
/// An argument range whose start has this bit set is not in the query buffer: the low
/// bits index the connection's big arguments, read straight into arena blocks
/// ([`Parse::BigBulk`]).
pub const BIG_ARG_FLAG: usize = 1 << (usize::BITS - 1);

#[derive(Debug, Clone, Copy)]
pub struct ParseLimits {
    pub proto_max_bulk_len: i64,
    pub auth_required: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parse {
    /// A whole command is in `args` (empty commands are skipped, never returned).
    Command,
    /// More bytes are needed.
    Incomplete,
    /// The client sent something Redis rejects; the text follows `-ERR ` and the connection
    /// is closed after it is sent.
    Error(String),
    /// The header of a bulk of `len` bytes (at least `big_arg_min`, not the command name,
    /// not yet all buffered) was parsed: its bytes start at `data_start()` in the buffer.
    /// The caller moves them out of the buffer, reads the rest of the bulk elsewhere and
    /// then calls [`RequestParser::big_bulk_filled`].
    BigBulk { len: usize },
}

/// Where a parsed command's argument bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgSource {
    QueryBuffer,
    InlineScratch,
}

#[derive(Debug, Default)]
pub struct RequestParser {
    /// Parse position in the query buffer.
    pos: usize,
    /// Arguments still to read in the current multibulk; 0 at a command boundary.
    multibulk_left: i64,
    /// Length of the bulk being read, or -1 when its `$` header comes next.
    bulk_len: i64,
    pub args: Vec<(usize, usize)>,
    pub source: Option<ArgSource>,
    pub inline_scratch: Vec<u8>,
    /// Bulks at least this long that are not yet buffered are returned as
    /// [`Parse::BigBulk`] (0: never).
    big_arg_min: usize,
    /// The two bytes after a big bulk (read into the buffer, not the block) come next.
    skip_crlf: bool,
    /// The caller had no block for the current big bulk: it is read into the buffer.
    big_declined: bool,
}

/// A request argument read straight into an arena block instead of the query buffer.
#[derive(Debug, Clone, Copy)]
pub struct BigArg {
    pub block: crate::arena::Ref,
    /// Address of the block's bytes (valid while the connection holds the block).
    pub addr: usize,
    pub len: usize,
    /// Bytes read so far.
    pub filled: usize,
}

/// How far `bulks` got.
enum Bulks {
    Complete,
    NeedMore,
    /// A big bulk's header: the caller reads its bytes (`Parse::BigBulk`).
    Big,
}

/// The '\r' ending a `*N` or `$N` header line. Redis looks for it with strchr, which
/// stops at a NUL byte, so a NUL before the '\r' means "no line end yet" (the header then
/// waits for more bytes until it exceeds the inline limit), not "invalid length".
fn find_crlf_or_cr(buf: &[u8]) -> Option<usize> {
    match buf.iter().position(|&b| b == b'\r' || b == 0) {
        Some(i) if buf[i] == b'\r' => Some(i),
        _ => None,
    }
}

/// The common header line `<type byte><1..9 digits>\r\n` read in one pass: the count and
/// the offset of its `\r`, when the line is complete and has exactly that shape (no sign,
/// no leading zero but `0` itself). Anything else is None and goes the general way, which
/// gives the same value for these lines and the errors for the rest.
#[inline]
fn short_count_line(rest: &[u8]) -> Option<(i64, usize)> {
    let mut v = 0i64;
    for i in 1..rest.len().min(11) {
        let b = rest[i];
        if b == b'\r' {
            let canonical = i == 2 || (i > 2 && rest[1] != b'0');
            return (canonical && i + 1 < rest.len()).then_some((v, i));
        }
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (b - b'0') as i64;
    }
    None
}

impl RequestParser {
    pub fn new() -> RequestParser {
        RequestParser {
            bulk_len: -1,
            ..Default::default()
        }
    }

    /// A parser that hands bulks of at least `big_arg_min` bytes to the caller
    /// ([`Parse::BigBulk`]).
    pub fn with_big_args(big_arg_min: usize) -> RequestParser {
        RequestParser {
            big_arg_min,
            ..RequestParser::new()
        }
    }

    /// Bytes of the buffer fully consumed by returned commands (safe to drain).
    pub fn consumed(&self) -> usize {
        if !self.in_command() {
            self.pos
        } else {
            // Mid-command: nothing before the command start may go, as args point there.
            self.args
                .first()
                .map(|a| a.0)
                .unwrap_or(self.pos)
                .min(self.pos)
        }
    }

    /// The caller removed `n` bytes (n <= consumed()) from the front of the buffer.
    pub fn shift(&mut self, n: usize) {
        debug_assert!(n <= self.consumed());
        self.pos -= n;
        if self.in_command() {
            for a in &mut self.args {
                if a.0 & BIG_ARG_FLAG == 0 {
                    a.0 -= n;
                }
            }
        }
    }

    /// Where the big bulk's bytes start in the buffer (after [`Parse::BigBulk`]).
    pub fn data_start(&self) -> usize {
        self.pos
    }

    /// The caller removed the big bulk's buffered bytes (everything from `data_start()`
    /// up to at most the bulk's end) and holds all `len` bytes as its big argument `index`.
    pub fn big_bulk_filled(&mut self, index: usize, len: usize) {
        debug_assert!(self.multibulk_left > 0 && self.bulk_len == len as i64);
        self.args.push((BIG_ARG_FLAG | index, len));
        self.bulk_len = -1;
        self.multibulk_left -= 1;
        self.skip_crlf = true;
    }

    /// The caller will not read the big bulk just announced ([`Parse::BigBulk`]) into a
    /// block of its own: its bytes are buffered like any other bulk's.
    pub fn decline_big_bulk(&mut self) {
        debug_assert!(self.multibulk_left > 0 && self.bulk_len >= 0);
        self.big_declined = true;
    }

    /// Bytes the current bulk still needs beyond what is buffered (to size a read).
    pub fn pending_bulk_bytes(&self, buf_len: usize) -> usize {
        if self.multibulk_left > 0 && self.bulk_len >= 0 {
            (self.pos + self.bulk_len as usize + 2).saturating_sub(buf_len)
        } else {
            0
        }
    }

    /// Query-buffer bytes not yet parsed into a complete argument: the measure Redis
    /// compares with `client-query-buffer-limit` (its query buffer holds only what it has
    /// not turned into arguments; a big bulk being read counts from its first byte).
    pub fn unparsed_bytes(&self, buf_len: usize) -> usize {
        buf_len.saturating_sub(self.pos)
    }

    /// True while a command is half-read.
    pub fn in_command(&self) -> bool {
        self.multibulk_left != 0 || self.skip_crlf
    }

    /// Parses the next command from `buf[self.pos..]`.
    pub fn next(&mut self, buf: &[u8], limits: &ParseLimits) -> Parse {
        if self.skip_crlf {
            // Like Redis, the two bytes after a bulk are skipped, not checked.
            if buf.len() - self.pos < 2 {
                return Parse::Incomplete;
            }
            self.pos += 2;
            self.skip_crlf = false;
            if self.multibulk_left == 0 {
                self.source = Some(ArgSource::QueryBuffer);
                return Parse::Command;
            }
        }
        loop {
            if self.multibulk_left == 0 {
                if self.pos >= buf.len() {
                    return Parse::Incomplete;
                }
                self.args.clear();
                if buf[self.pos] == b'*' {
                    match self.multibulk_header(buf, limits) {
                        Ok(true) => {}
                        Ok(false) => return Parse::Incomplete,
                        Err(e) => return Parse::Error(e),
                    }
                    if self.multibulk_left == 0 {
                        continue; // "*0" or "*-1": nothing to run
                    }
                } else {
                    match self.inline(buf) {
                        Ok(Some(true)) => return Parse::Command,
                        Ok(Some(false)) => continue, // empty line
                        Ok(None) => return Parse::Incomplete,
                        Err(e) => return Parse::Error(e),
                    }
                }
            }
            match self.bulks(buf, limits) {
                Ok(Bulks::Complete) => {
                    self.source = Some(ArgSource::QueryBuffer);
                    return Parse::Command;
                }
                Ok(Bulks::NeedMore) => return Parse::Incomplete,
                Ok(Bulks::Big) => {
                    return Parse::BigBulk {
                        len: self.bulk_len as usize,
                    }
                }
                Err(e) => return Parse::Error(e),
            }
        }
    }

    fn multibulk_header(&mut self, buf: &[u8], limits: &ParseLimits) -> Result<bool, String> {
        let rest = &buf[self.pos..];
        let (n, cr) = match short_count_line(rest) {
            Some((n, cr)) => (Some(n), cr),
            None => {
                let Some(cr) = find_crlf_or_cr(rest) else {
                    if rest.len() > INLINE_MAX_BYTES {
                        return Err("Protocol error: too big mbulk count string".into());
                    }
                    return Ok(false);
                };
                if cr + 1 >= rest.len() {
                    return Ok(false); // need the '\n'
                }
                (crate::util::parse_i64(&rest[1..cr]), cr)
            }
        };
        let n = match n {
            Some(n) if n <= MULTIBULK_MAX => n,
            _ => return Err("Protocol error: invalid multibulk length".into()),
        };
        if n > UNAUTH_MAX_ARGS && limits.auth_required {
            return Err("Protocol error: unauthenticated multibulk length".into());
        }
        self.pos += cr + 2;
        self.multibulk_left = n.max(0);
        self.bulk_len = -1;
        if n > 0 {
            self.args.reserve(n.min(1024) as usize);
        }
        Ok(true)
    }

    /// Reads bulks until the command is complete (true) or bytes run out (false).
    fn bulks(&mut self, buf: &[u8], limits: &ParseLimits) -> Result<Bulks, String> {
        while self.multibulk_left > 0 {
            if self.bulk_len < 0 {
                let rest = &buf[self.pos..];
                let short = match rest.first() {
                    Some(b'$') => short_count_line(rest),
                    _ => None,
                };
                let (parsed, cr) = match short {
                    Some((len, cr)) => (Some(len), cr),
                    None => {
                        let Some(cr) = find_crlf_or_cr(rest) else {
                            if rest.len() > INLINE_MAX_BYTES {
                                return Err("Protocol error: too big bulk count string".into());
                            }
                            return Ok(Bulks::NeedMore);
                        };
                        if cr + 1 >= rest.len() {
                            return Ok(Bulks::NeedMore);
                        }
                        if rest[0] != b'$' {
                            return Err(format!(
                                "Protocol error: expected '$', got '{}'",
                                rest[0] as char
                            ));
                        }
                        (crate::util::parse_i64(&rest[1..cr]), cr)
                    }
                };
                let len = match parsed {
                    Some(l) if l >= 0 && l <= limits.proto_max_bulk_len => l,
                    _ => return Err("Protocol error: invalid bulk length".into()),
                };
                if len > UNAUTH_MAX_BULK_BYTES && limits.auth_required {
                    return Err("Protocol error: unauthenticated bulk length".into());
                }
                self.pos += cr + 2;
                self.bulk_len = len;
            }
            let len = self.bulk_len as usize;
            // Like Redis, the two bytes after the bulk are skipped, not checked.
            if buf.len() - self.pos < len + 2 {
                if self.big_arg_min > 0
                    && len >= self.big_arg_min
                    && !self.args.is_empty()
                    && !self.big_declined
                {
                    return Ok(Bulks::Big);
                }
                return Ok(Bulks::NeedMore);
            }
            self.big_declined = false;
            self.args.push((self.pos, len));
            self.pos += len + 2;
            self.bulk_len = -1;
            self.multibulk_left -= 1;
        }
        Ok(Bulks::Complete)
    }

    /// Parses an inline command line. Some(true): a command; Some(false): an empty line.
    fn inline(&mut self, buf: &[u8]) -> Result<Option<bool>, String> {
        let rest = &buf[self.pos..];
        // Redis finds the end of an inline line with strchr, which stops at a NUL byte: a
        // NUL before the newline makes the line "incomplete" until it grows past the
        // inline limit. Matching that keeps replies identical for such input.
        let nl = match rest.iter().position(|&b| b == b'\n' || b == 0) {
            Some(i) if rest[i] == b'\n' => Some(i),
            _ => None,
        };
        let Some(nl) = nl else {
            if rest.len() > INLINE_MAX_BYTES {
                return Err("Protocol error: too big inline request".into());
            }
            return Ok(None);
        };
        let mut line = &rest[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        self.inline_scratch.clear();
        self.args.clear();
        split_args(line, &mut self.inline_scratch, &mut self.args)
            .map_err(|_| "Protocol error: unbalanced quotes in request".to_string())?;
        self.pos += nl + 1;
        if self.args.is_empty() {
            return Ok(Some(false));
        }
        self.source = Some(ArgSource::InlineScratch);
        Ok(Some(true))
    }
}

pub use crate::util::{split_args, UnbalancedQuotes};

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: ParseLimits = ParseLimits {
        proto_max_bulk_len: 512 * 1024 * 1024,
        auth_required: false,
    };

    /// The one-pass header read agrees with the general one wherever it answers.
    #[test]
    fn short_count_line_matches_the_general_read() {
        let cases: &[&[u8]] = &[
            b"$5\r\n",
            b"*3\r\n",
            b"$0\r\n",
            b"$00\r\n",
            b"$05\r\n",
            b"$-1\r\n",
            b"$123456789\r\n",
            b"$1234567890\r\n",
            b"$12\r",
            b"$12",
            b"$\r\n",
            b"$1a\r\n",
            b"$1\0\r\n",
            b"$+1\r\n",
        ];
        for &c in cases {
            let general = find_crlf_or_cr(c)
                .filter(|&cr| cr + 1 < c.len())
                .map(|cr| (crate::util::parse_i64(&c[1..cr]), cr));
            if let Some((v, cr)) = short_count_line(c) {
                assert_eq!(general, Some((Some(v), cr)), "{c:?}");
            }
        }
        assert_eq!(short_count_line(b"$5\r\n"), Some((5, 2)));
        assert_eq!(short_count_line(b"$123456789\r\n"), Some((123456789, 10)));
        assert_eq!(short_count_line(b"$05\r\n"), None);
        assert_eq!(short_count_line(b"$12\r"), None);
    }

    fn args_of(p: &RequestParser, buf: &[u8]) -> Vec<Vec<u8>> {
        let src = match p.source {
            Some(ArgSource::InlineScratch) => &p.inline_scratch[..],
            _ => buf,
        };
        p.args
            .iter()
            .map(|&(s, l)| src[s..s + l].to_vec())
            .collect()
    }

    #[test]
    fn multibulk_in_pieces() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..full.len() {
            let mut p = RequestParser::new();
            let mut buf = full[..cut].to_vec();
            let mut got = vec![];
            let mut fed = false;
            loop {
                match p.next(&buf, &LIM) {
                    Parse::Command => got.push(args_of(&p, &buf)),
                    Parse::Incomplete if !fed => {
                        let n = p.consumed();
                        buf.drain(..n);
                        p.shift(n);
                        buf.extend_from_slice(&full[cut..]);
                        fed = true;
                    }
                    Parse::Incomplete => break,
                    Parse::Error(e) => panic!("{e}"),
                    Parse::BigBulk { .. } => unreachable!("big bulks are off"),
                }
            }
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(
                got[0],
                vec![b"SET".to_vec(), b"k".to_vec(), b"hello".to_vec()]
            );
            assert_eq!(got[1], vec![b"PING".to_vec()]);
        }
    }

    #[test]
    fn inline_with_quotes() {
        let buf = b"set \"a b\\x41\" 'it\\'s'\r\n\r\nPING\n";
        let mut p = RequestParser::new();
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(
            args_of(&p, buf),
            vec![b"set".to_vec(), b"a bA".to_vec(), b"it's".to_vec()]
        );
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, buf), vec![b"PING".to_vec()]);
        let mut p = RequestParser::new();
        assert!(matches!(p.next(b"set \"a b\r\n", &LIM), Parse::Error(_)));
        let mut p = RequestParser::new();
        assert!(matches!(p.next(b"set \"a\"b\r\n", &LIM), Parse::Error(_)));
    }

    #[test]
    fn limits_and_errors() {
        let err = |input: &[u8], lim: &ParseLimits| {
            let mut p = RequestParser::new();
            match p.next(input, lim) {
                Parse::Error(e) => e,
                other => panic!("{other:?} for {:?}", String::from_utf8_lossy(input)),
            }
        };
        assert_eq!(
            err(b"*1\r\nx\r\n", &LIM),
            "Protocol error: expected '$', got 'x'"
        );
        assert_eq!(
            err(b"*1\r\n$-1\r\n", &LIM),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            err(b"*a\r\n", &LIM),
            "Protocol error: invalid multibulk length"
        );
        let small = ParseLimits {
            proto_max_bulk_len: 10,
            auth_required: false,
        };
        // N accepted, N+1 refused.
        let mut p = RequestParser::new();
        assert_eq!(
            p.next(b"*1\r\n$10\r\n0123456789\r\n", &small),
            Parse::Command
        );
        assert_eq!(
            err(b"*1\r\n$11\r\n", &small),
            "Protocol error: invalid bulk length"
        );
        let unauth = ParseLimits {
            proto_max_bulk_len: 1 << 29,
            auth_required: true,
        };
        let mut p = RequestParser::new();
        assert_eq!(p.next(b"*10\r\n", &unauth), Parse::Incomplete);
        assert_eq!(
            err(b"*11\r\n", &unauth),
            "Protocol error: unauthenticated multibulk length"
        );
        let mut p = RequestParser::new();
        assert_eq!(p.next(b"*1\r\n$16384\r\n", &unauth), Parse::Incomplete);
        assert_eq!(
            err(b"*1\r\n$16385\r\n", &unauth),
            "Protocol error: unauthenticated bulk length"
        );
        let long = vec![b'a'; INLINE_MAX_BYTES + 1];
        assert_eq!(err(&long, &LIM), "Protocol error: too big inline request");
        let mut p = RequestParser::new();
        assert_eq!(p.next(&long[..INLINE_MAX_BYTES], &LIM), Parse::Incomplete);
        let mut star = b"*".to_vec();
        star.extend(std::iter::repeat_n(b'1', INLINE_MAX_BYTES + 1));
        assert_eq!(
            err(&star, &LIM),
            "Protocol error: too big mbulk count string"
        );
    }

    /// Feeds `stream` in the pieces `cuts` gives (sorted offsets), the way the connection
    /// does: append, parse until Incomplete, drain what is consumed. Returns the commands.
    fn drive(
        stream: &[u8],
        cuts: &[usize],
        lim: &ParseLimits,
    ) -> Result<Vec<Vec<Vec<u8>>>, String> {
        let mut p = RequestParser::new();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        let mut fed = 0;
        for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
            buf.extend_from_slice(&stream[fed..cut]);
            fed = cut;
            loop {
                match p.next(&buf, lim) {
                    Parse::Command => got.push(args_of(&p, &buf)),
                    Parse::Incomplete => break,
                    Parse::Error(e) => return Err(e),
                    Parse::BigBulk { .. } => unreachable!("big bulks are off"),
                }
            }
            let n = p.consumed();
            assert!(n <= buf.len());
            buf.drain(..n);
            p.shift(n);
        }
        assert!(!p.in_command(), "stream ends mid-command");
        assert!(buf.is_empty(), "unconsumed bytes left: {buf:?}");
        Ok(got)
    }

    fn strs(v: &[&[u8]]) -> Vec<Vec<u8>> {
        v.iter().map(|a| a.to_vec()).collect()
    }

    /// Inline and multibulk commands, empty lines, `*0`, `*-1`, an empty bulk, LF-only
    /// line ends: one pipelined buffer.
    const PIPELINE: &[u8] = b"PING\r\n\r\n*0\r\n*-1\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n\
set \"a\\tb\" 'c d'\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n   \t \r\n\
*1\r\n$4\r\nQUIT\r\n";

    fn pipeline_commands() -> Vec<Vec<Vec<u8>>> {
        vec![
            strs(&[b"PING"]),
            strs(&[b"ECHO", b""]),
            strs(&[b"set", b"a\tb", b"c d"]),
            strs(&[b"SET", b"k", b"0123456789"]),
            strs(&[b"QUIT"]),
        ]
    }

    #[test]
    fn pipelined_buffer_parses_the_same_whole_or_split_at_any_one_or_two_points() {
        let want = pipeline_commands();
        assert_eq!(drive(PIPELINE, &[], &LIM).unwrap(), want);
        for a in 0..=PIPELINE.len() {
            assert_eq!(drive(PIPELINE, &[a], &LIM).unwrap(), want, "cut at {a}");
            for b in a..=PIPELINE.len() {
                assert_eq!(
                    drive(PIPELINE, &[a, b], &LIM).unwrap(),
                    want,
                    "cuts at {a} and {b}"
                );
            }
        }
    }

    #[test]
    fn pipelined_buffer_fed_one_byte_at_a_time() {
        let cuts: Vec<usize> = (1..PIPELINE.len()).collect();
        assert_eq!(drive(PIPELINE, &cuts, &LIM).unwrap(), pipeline_commands());
    }

    #[test]
    fn empty_and_null_multibulks_are_consumed_without_a_command() {
        for hdr in [&b"*0\r\n"[..], b"*-1\r\n", b"*-7\r\n"] {
            let mut p = RequestParser::new();
            assert_eq!(p.next(hdr, &LIM), Parse::Incomplete);
            assert_eq!(p.consumed(), hdr.len(), "{hdr:?} not consumed");
            assert!(!p.in_command());
            // Before AUTH too (a count <= 0 is under the unauthenticated limit).
            let unauth = ParseLimits {
                auth_required: true,
                ..LIM
            };
            let mut p = RequestParser::new();
            assert_eq!(p.next(hdr, &unauth), Parse::Incomplete);
            assert_eq!(p.consumed(), hdr.len());
            // The command after it is the one returned.
            let mut buf = hdr.to_vec();
            buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            let mut p = RequestParser::new();
            assert_eq!(p.next(&buf, &LIM), Parse::Command);
            assert_eq!(args_of(&p, &buf), strs(&[b"PING"]));
            assert_eq!(p.consumed(), buf.len());
        }
        // Without its '\n' the header is not consumed yet.
        let mut p = RequestParser::new();
        assert_eq!(p.next(b"*0\r", &LIM), Parse::Incomplete);
        assert_eq!(p.consumed(), 0);
    }

    #[test]
    fn empty_bulk_is_an_empty_argument() {
        let buf = b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$0\r\n\r\n";
        let mut p = RequestParser::new();
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, buf), strs(&[b"SET", b"", b""]));
        assert_eq!(p.consumed(), buf.len());
    }

    #[test]
    fn inline_escapes_in_double_quotes_and_literal_single_quotes() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (
                b"x \"\\n\\r\\t\\b\\a\\\\\\\"\"\r\n",
                &[b"x", b"\n\r\t\x08\x07\\\""],
            ),
            (b"x \"\\x41\\x4a\\xff\\x00\"\r\n", &[b"x", b"AJ\xff\x00"]),
            // An invalid hex escape is the escaped character itself.
            (b"x \"\\x4g\" \"\\q\"\r\n", &[b"x", b"x4g", b"q"]),
            // Single quotes: only \' is an escape.
            (b"x 'a\\nb' 'it\\'s'\r\n", &[b"x", b"a\\nb", b"it's"]),
            (b"x \"\" ''\r\n", &[b"x", b"", b""]),
            // A quote may open inside a word; it must close at a word end.
            (b"x ab\"c d\"\r\n", &[b"x", b"abc d"]),
            (b"  get \t  k  \r\n", &[b"get", b"k"]),
            // LF alone ends a line; only one CR before it is the line end.
            (b"get k\n", &[b"get", b"k"]),
            (b"get k\r\r\n", &[b"get", b"k"]),
        ];
        for (line, want) in cases {
            let mut p = RequestParser::new();
            assert_eq!(p.next(line, &LIM), Parse::Command, "{line:?}");
            assert_eq!(p.source, Some(ArgSource::InlineScratch));
            assert_eq!(args_of(&p, line), strs(want), "{line:?}");
            assert_eq!(p.consumed(), line.len());
        }
        for bad in [
            &b"x \"abc\r\n"[..],
            b"x 'abc\r\n",
            b"x \"a\"b\r\n",
            b"x 'a'b\r\n",
            b"x \"a\\\"\r\n",
        ] {
            let mut p = RequestParser::new();
            assert_eq!(
                p.next(bad, &LIM),
                Parse::Error("Protocol error: unbalanced quotes in request".into()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn blank_inline_lines_are_skipped_and_the_source_follows_each_command() {
        let buf = b" \t \r\n\n\r\nget k\r\n*1\r\n$4\r\nPING\r\n";
        let mut p = RequestParser::new();
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(p.source, Some(ArgSource::InlineScratch));
        assert_eq!(args_of(&p, buf), strs(&[b"get", b"k"]));
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(p.source, Some(ArgSource::QueryBuffer));
        assert_eq!(args_of(&p, buf), strs(&[b"PING"]));
        assert_eq!(p.next(buf, &LIM), Parse::Incomplete);
        assert_eq!(p.consumed(), buf.len());
    }

    #[test]
    fn nul_before_a_line_end_waits_for_more_like_redis_strchr() {
        for input in [
            &b"*1\0\r\n$4\r\nPING\r\n"[..],
            b"*1\r\n$4\0\r\nPING\r\n",
            b"PI\0NG\r\n",
        ] {
            let mut p = RequestParser::new();
            assert_eq!(p.next(input, &LIM), Parse::Incomplete, "{input:?}");
        }
        // ... until the line outgrows the inline limit.
        let mut long = b"GET \0".to_vec();
        long.resize(INLINE_MAX_BYTES + 2, b'a');
        long.extend_from_slice(b"\r\n");
        let mut p = RequestParser::new();
        assert_eq!(
            p.next(&long, &LIM),
            Parse::Error("Protocol error: too big inline request".into())
        );
    }

    #[test]
    fn count_and_length_limits_at_their_edges() {
        let first = |input: &[u8], lim: &ParseLimits| RequestParser::new().next(input, lim);
        let invalid_mb = Parse::Error("Protocol error: invalid multibulk length".into());
        let invalid_bulk = Parse::Error("Protocol error: invalid bulk length".into());
        assert_eq!(first(b"*2147483647\r\n", &LIM), Parse::Incomplete);
        assert_eq!(first(b"*2147483648\r\n", &LIM), invalid_mb);
        assert_eq!(first(b"*99999999999999999999999\r\n", &LIM), invalid_mb);
        // string2ll's rules: no leading zeros, no sign but '-', no spaces.
        assert_eq!(first(b"*01\r\n", &LIM), invalid_mb);
        assert_eq!(first(b"*+1\r\n", &LIM), invalid_mb);
        assert_eq!(first(b"* 1\r\n", &LIM), invalid_mb);
        assert_eq!(first(b"*\r\n", &LIM), invalid_mb);
        assert_eq!(first(b"*1\r\n$01\r\n", &LIM), invalid_bulk);
        assert_eq!(first(b"*1\r\n$\r\n", &LIM), invalid_bulk);
        assert_eq!(first(b"*1\r\n$-0\r\n", &LIM), invalid_bulk);
        // Long header lines: up to the limit they wait, beyond it they are refused.
        let mut hdr = b"*1\r\n$".to_vec();
        hdr.resize(4 + INLINE_MAX_BYTES, b'1');
        assert_eq!(first(&hdr, &LIM), Parse::Incomplete);
        hdr.push(b'1');
        assert_eq!(
            first(&hdr, &LIM),
            Parse::Error("Protocol error: too big bulk count string".into())
        );
        let mut star = b"*".to_vec();
        star.resize(INLINE_MAX_BYTES, b'1');
        assert_eq!(first(&star, &LIM), Parse::Incomplete);
        // Unauthenticated: a bulk's limit applies to its header, before any data.
        let unauth = ParseLimits {
            proto_max_bulk_len: 1 << 29,
            auth_required: true,
        };
        assert_eq!(
            first(b"*2\r\n$3\r\nGET\r\n$16385\r\n", &unauth),
            Parse::Error("Protocol error: unauthenticated bulk length".into())
        );
        assert_eq!(first(b"*-1\r\n", &unauth), Parse::Incomplete);
    }

    #[test]
    fn the_two_bytes_after_a_bulk_are_skipped_unchecked() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nkXY*1\r\n$4\r\nPING\r\n";
        let mut p = RequestParser::new();
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, buf), strs(&[b"GET", b"k"]));
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, buf), strs(&[b"PING"]));
    }

    #[test]
    fn half_read_command_keeps_its_arguments_and_reports_what_it_needs() {
        let full = b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\n";
        let mut buf = full.to_vec();
        buf.extend_from_slice(b"0123456789");
        let mut p = RequestParser::new();
        assert_eq!(p.next(&buf, &LIM), Parse::Command);
        assert_eq!(p.next(&buf, &LIM), Parse::Incomplete);
        assert!(p.in_command());
        // Only the finished PING and the header bytes before SET's first argument may go.
        let set_arg = 14 + 8;
        assert_eq!(&buf[set_arg..set_arg + 3], b"SET");
        assert_eq!(p.consumed(), set_arg);
        // The 100-byte bulk: its header is parsed, 10 bytes are here, 92 more (CRLF too)
        // are needed; the query-buffer measure counts the 10 data bytes.
        assert_eq!(p.pending_bulk_bytes(buf.len()), 92);
        assert_eq!(p.unparsed_bytes(buf.len()), 10);
        let n = p.consumed();
        buf.drain(..n);
        p.shift(n);
        assert_eq!(p.pending_bulk_bytes(buf.len()), 92);
        buf.extend(std::iter::repeat_n(b'v', 90));
        buf.extend_from_slice(b"\r\n");
        assert_eq!(p.pending_bulk_bytes(buf.len()), 0);
        assert_eq!(p.next(&buf, &LIM), Parse::Command);
        let args = args_of(&p, &buf);
        assert_eq!(args[..2], strs(&[b"SET", b"k"])[..]);
        assert_eq!(&args[2][..10], b"0123456789");
        assert_eq!(args[2].len(), 100);
        assert!(!p.in_command());
        assert_eq!(p.pending_bulk_bytes(buf.len()), 0);
    }

    #[test]
    fn declined_big_bulk_is_buffered_and_the_next_one_announced_again() {
        let first = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n";
        let second = b"*2\r\n$4\r\nECHO\r\n$12\r\nabcdefghijkl\r\n";
        let mut stream = first.to_vec();
        stream.extend_from_slice(b"01234567890123456789\r\n");
        stream.extend_from_slice(second);
        let mut p = RequestParser::with_big_args(8);
        let mut buf = stream[..first.len() + 5].to_vec();
        assert_eq!(p.next(&buf, &LIM), Parse::BigBulk { len: 20 });
        assert_eq!(p.data_start(), first.len());
        p.decline_big_bulk();
        // Declined: it waits in the buffer like a small bulk, not announced again.
        assert_eq!(p.next(&buf, &LIM), Parse::Incomplete);
        assert_eq!(p.pending_bulk_bytes(buf.len()), 17);
        assert_eq!(p.next(&buf, &LIM), Parse::Incomplete);
        // The rest of it, and part of the next command's 12-byte bulk.
        let part = stream.len() - 10;
        buf.extend_from_slice(&stream[first.len() + 5..part]);
        assert_eq!(p.next(&buf, &LIM), Parse::Command);
        assert_eq!(p.source, Some(ArgSource::QueryBuffer));
        assert!(p.args.iter().all(|a| a.0 & BIG_ARG_FLAG == 0));
        assert_eq!(
            args_of(&p, &buf),
            strs(&[b"SET", b"k", b"01234567890123456789"])
        );
        // The decline was for that bulk only.
        assert_eq!(p.next(&buf, &LIM), Parse::BigBulk { len: 12 });
        p.decline_big_bulk();
        buf.extend_from_slice(&stream[part..]);
        assert_eq!(p.next(&buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, &buf), strs(&[b"ECHO", b"abcdefghijkl"]));
        assert_eq!(p.consumed(), buf.len());
    }

    #[test]
    fn big_bulk_is_announced_only_when_long_unbuffered_and_not_the_name() {
        // The command name is never handed over, however long.
        let mut p = RequestParser::with_big_args(8);
        assert_eq!(p.next(b"*2\r\n$10\r\nabcd", &LIM), Parse::Incomplete);
        // A bulk under the threshold waits in the buffer.
        let mut p = RequestParser::with_big_args(8);
        assert_eq!(
            p.next(b"*2\r\n$3\r\nSET\r\n$7\r\nab", &LIM),
            Parse::Incomplete
        );
        // At the threshold, not all buffered: announced.
        let mut p = RequestParser::with_big_args(8);
        assert_eq!(
            p.next(b"*2\r\n$3\r\nSET\r\n$8\r\nab", &LIM),
            Parse::BigBulk { len: 8 }
        );
        // Wholly buffered (with its CRLF): a plain argument.
        let buf = b"*2\r\n$3\r\nSET\r\n$8\r\nabcdefgh\r\n";
        let mut p = RequestParser::with_big_args(8);
        assert_eq!(p.next(buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, buf), strs(&[b"SET", b"abcdefgh"]));
        // Big args off: never announced.
        let mut p = RequestParser::new();
        assert_eq!(
            p.next(b"*2\r\n$3\r\nSET\r\n$1000\r\nab", &LIM),
            Parse::Incomplete
        );
    }

    #[test]
    fn filled_big_bulk_skips_its_crlf_and_shifts_around_the_big_argument() {
        let mut p = RequestParser::with_big_args(4);
        let mut buf = b"*2\r\n$3\r\nGET\r\n$5\r\nab".to_vec();
        assert_eq!(p.next(&buf, &LIM), Parse::BigBulk { len: 5 });
        let start = p.data_start();
        buf.truncate(start); // the caller moved "ab" out and reads the rest itself
        p.big_bulk_filled(7, 5);
        assert!(p.in_command());
        // The CRLF after the bulk comes through the buffer; one byte is not enough.
        buf.push(b'\r');
        assert_eq!(p.next(&buf, &LIM), Parse::Incomplete);
        assert!(p.in_command());
        // Draining moves the buffered argument, not the big one.
        let n = p.consumed();
        assert_eq!(n, 8, "only the bytes before GET may go");
        buf.drain(..n);
        p.shift(n);
        buf.extend_from_slice(b"\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(p.next(&buf, &LIM), Parse::Command);
        assert_eq!(p.args, vec![(0, 3), (BIG_ARG_FLAG | 7, 5)]);
        assert_eq!(&buf[..3], b"GET");
        assert!(!p.in_command());
        assert_eq!(p.next(&buf, &LIM), Parse::Command);
        assert_eq!(args_of(&p, &buf), strs(&[b"PING"]));
        assert_eq!(p.consumed(), buf.len());
    }
}

/// Property tests: the same checks as the cargo-fuzz target (`fuzz/fuzz_targets/
/// resp_parser.rs`), bounded so they run in CI on stable in a few seconds.
#[cfg(test)]
mod big_bulk_tests {
    use super::*;

    const LIM: ParseLimits = ParseLimits {
        proto_max_bulk_len: 512 * 1024 * 1024,
        auth_required: false,
    };

    /// Plays the connection's part: big bulks go to side buffers, fed in small pieces.
    fn run(stream: &[u8], piece: usize) -> Vec<Vec<Vec<u8>>> {
        let mut p = RequestParser::with_big_args(8);
        let mut buf = Vec::new();
        let mut big: Vec<(Vec<u8>, usize)> = Vec::new(); // (bytes, len wanted)
        let mut cmds = Vec::new();
        let mut fed = 0;
        while fed < stream.len() {
            let n = piece.min(stream.len() - fed);
            match big.last_mut().filter(|b| b.0.len() < b.1) {
                Some(b) => {
                    let n = n.min(b.1 - b.0.len());
                    b.0.extend_from_slice(&stream[fed..fed + n]);
                    fed += n;
                    if b.0.len() == b.1 {
                        p.big_bulk_filled(big.len() - 1, big.last().unwrap().1);
                    }
                }
                None => {
                    buf.extend_from_slice(&stream[fed..fed + n]);
                    fed += n;
                }
            }
            loop {
                if big.last().is_some_and(|b| b.0.len() < b.1) {
                    break;
                }
                match p.next(&buf, &LIM) {
                    Parse::BigBulk { len } => {
                        let start = p.data_start();
                        let have = (buf.len() - start).min(len);
                        big.push((buf.drain(start..start + have).collect(), len));
                        if have == len {
                            p.big_bulk_filled(big.len() - 1, len);
                        }
                    }
                    Parse::Command => {
                        let src = match p.source {
                            Some(ArgSource::InlineScratch) => p.inline_scratch.clone(),
                            _ => buf.clone(),
                        };
                        let args = p
                            .args
                            .iter()
                            .map(|&(s, l)| {
                                if s & BIG_ARG_FLAG != 0 {
                                    big[s & !BIG_ARG_FLAG].0.clone()
                                } else {
                                    src[s..s + l].to_vec()
                                }
                            })
                            .collect();
                        cmds.push(args);
                        big.clear();
                    }
                    Parse::Incomplete => break,
                    Parse::Error(e) => panic!("{e}"),
                }
            }
            let c = p.consumed();
            buf.drain(..c);
            p.shift(c);
        }
        cmds
    }

    #[test]
    fn big_bulks_anywhere_in_a_command_in_any_pieces() {
        let stream = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n01234567890123456789\r\n\
*4\r\n$4\r\nMSET\r\n$10\r\nkkkkkkkkkk\r\n$9\r\nvvvvvvvvv\r\n$2\r\nab\r\nPING\r\n";
        let want: Vec<Vec<Vec<u8>>> = vec![
            vec![
                b"SET".to_vec(),
                b"k".to_vec(),
                b"01234567890123456789".to_vec(),
            ],
            vec![
                b"MSET".to_vec(),
                b"kkkkkkkkkk".to_vec(),
                b"vvvvvvvvv".to_vec(),
                b"ab".to_vec(),
            ],
            vec![b"PING".to_vec()],
        ];
        for piece in [1, 2, 3, 5, 7, 11, 64, 1000] {
            assert_eq!(run(stream, piece), want, "piece {piece}");
        }
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Feeds `data` to a parser in the chunks given by `cuts`, the way the event loop does
    /// (append, parse until Incomplete, drain what was consumed), checking the invariants
    /// after every step. Returns the commands parsed, and the protocol error if any.
    fn drive(
        data: &[u8],
        cuts: &[usize],
        limits: &ParseLimits,
    ) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        cuts.push(data.len());
        cuts.sort_unstable();
        let mut p = RequestParser::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        let mut out = Vec::new();
        for &cut in &cuts {
            buf.extend_from_slice(&data[fed..cut]);
            fed = cut;
            // Each Command consumes at least one byte, so this bounds the loop.
            let mut steps = 0;
            loop {
                steps += 1;
                assert!(steps <= buf.len() + 2, "parser does not make progress");
                let r = p.next(&buf, limits);
                assert!(p.consumed() <= buf.len(), "consumed past the buffer");
                match r {
                    Parse::Command => {
                        assert!(!p.args.is_empty(), "empty command returned");
                        let src: &[u8] = match p.source {
                            Some(ArgSource::InlineScratch) => &p.inline_scratch,
                            _ => &buf,
                        };
                        let mut cmd = Vec::new();
                        for &(s, l) in &p.args {
                            assert!(s.checked_add(l).is_some_and(|e| e <= src.len()));
                            cmd.push(src[s..s + l].to_vec());
                        }
                        out.push(cmd);
                    }
                    Parse::Incomplete => break,
                    Parse::Error(e) => return (out, Some(e)),
                    Parse::BigBulk { .. } => unreachable!("big bulks are off"),
                }
            }
            let n = p.consumed();
            buf.drain(..n);
            p.shift(n);
            assert!(p.pending_bulk_bytes(buf.len()) <= limits.proto_max_bulk_len as usize + 2);
        }
        (out, None)
    }

    fn resp(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut v = Vec::new();
        for c in cmds {
            v.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
            for a in c {
                v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                v.extend_from_slice(a);
                v.extend_from_slice(b"\r\n");
            }
        }
        v
    }

    /// Inline form with every byte escaped as \xHH inside double quotes.
    fn inline(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut v = Vec::new();
        for c in cmds {
            for (i, a) in c.iter().enumerate() {
                if i > 0 {
                    v.push(b' ');
                }
                v.push(b'"');
                for b in a {
                    v.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
                v.push(b'"');
            }
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    /// Bytes that look like RESP often enough to reach deep parser states.
    fn protocolish() -> impl Strategy<Value = Vec<u8>> {
        let atom = prop_oneof![
            any::<u8>().prop_map(|b| vec![b]),
            Just(b"\r\n".to_vec()),
            Just(b"*".to_vec()),
            Just(b"$".to_vec()),
            (-3i64..40).prop_map(|n| n.to_string().into_bytes()),
            Just(b"99999999999999999999".to_vec()),
            Just(b"\"".to_vec()),
            Just(b"'".to_vec()),
            Just(b"\\x4".to_vec()),
            Just(b" ".to_vec()),
            Just(b"\0".to_vec()),
        ];
        vec(atom, 0..120).prop_map(|v| v.concat())
    }

    fn limits() -> impl Strategy<Value = ParseLimits> {
        (
            prop_oneof![Just(512 * 1024 * 1024i64), 0i64..64],
            any::<bool>(),
        )
            .prop_map(|(proto_max_bulk_len, auth_required)| ParseLimits {
                proto_max_bulk_len,
                auth_required,
            })
    }

    fn args() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
        vec(vec(vec(any::<u8>(), 0..40), 1..6), 1..5)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]

        /// Arbitrary bytes split anywhere: no panic, no infinite loop, consumed <= len,
        /// every argument range inside its buffer.
        #[test]
        fn arbitrary_bytes_keep_the_invariants(
            data in prop_oneof![vec(any::<u8>(), 0..300), protocolish()],
            cuts in vec(any::<usize>(), 0..8),
            lim in limits(),
        ) {
            drive(&data, &cuts, &lim);
        }

        /// Random commands encoded as RESP multibulk, then parsed back in random chunks,
        /// give the same arguments.
        #[test]
        fn resp_round_trip(cmds in args(), cuts in vec(any::<usize>(), 0..10)) {
            let lim = ParseLimits { proto_max_bulk_len: 512 * 1024 * 1024, auth_required: false };
            let (got, err) = drive(&resp(&cmds), &cuts, &lim);
            prop_assert_eq!(err, None);
            prop_assert_eq!(got, cmds);
        }

        /// The same through inline commands with every byte \xHH-escaped.
        #[test]
        fn inline_round_trip(cmds in args(), cuts in vec(any::<usize>(), 0..10)) {
            let lim = ParseLimits { proto_max_bulk_len: 512 * 1024 * 1024, auth_required: false };
            let (got, err) = drive(&inline(&cmds), &cuts, &lim);
            prop_assert_eq!(err, None);
            prop_assert_eq!(got, cmds);
        }
    }
}
