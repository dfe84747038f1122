//! Entry framing of the append-only log and the forward scanner used by recovery and
//! `--check-aof`. The byte layout is documented in `docs/formats/aof.md`.
//!
//! An entry is one header line then one RESP command:
//!
//! ```text
//! #HDR:len:<len>;lsn:<lsn>;replid:<replid>;reploff:<reploff>;cksum:<crc64 hex>\r\n
//! *<argc>\r\n$<n>\r\n<arg>\r\n...
//! ```
//!
//! `len` is the byte length of the RESP command; the CRC-64 (Redis's Jones polynomial)
//! covers the header text from `#HDR:` up to (not including) `;cksum:` followed by the
//! command bytes, so a flipped bit in any field or argument is detected. Redis 7 loaders
//! skip lines that start with `#`, so they load the commands and ignore the headers.

use std::fmt::Write as _;

pub const HDR_PREFIX: &[u8] = b"#HDR:";
/// Trailer of a base file: the log position (LSN, replid, reploff) the base stands for.
pub const BASE_END_PREFIX: &[u8] = b"#BASE-END:";
/// A header line is never longer than this (all fields at their maximum width).
pub const HDR_LINE_MAX_BYTES: usize = 256;
/// Most arguments one logged command may have (a corrupt count must not allocate).
pub const ARGC_MAX: usize = 1 << 20;
/// Replication ids are 40 hex characters, as Redis's.
pub const REPLID_LEN: usize = 40;
/// Batch marker: the writer starts every write with one (see [`encode_batch_marker`]).
pub const BATCH_PREFIX: &[u8] = b"#BATCH:";
/// Padding annotation: `#PAD:<n>\r\n` then `n` filler bytes (direct I/O alignment).
pub const PAD_PREFIX: &[u8] = b"#PAD:";
/// Largest `n` a `#PAD:` may announce (a pad never spans more than one 4 KiB block plus
/// a line; a larger value is corruption, not padding).
pub const PAD_MAX_BYTES: u64 = 8192;

use crate::persistence::rdb_value::{crc64, crc64_digest};

/// Appends a RESP multibulk command.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    let _ = write!(Hex(out), "*{}\r\n", args.len());
    for a in args {
        let a = a.as_ref();
        let _ = write!(Hex(out), "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The length of [`encode_command`]'s encoding of `args`, without encoding them.
pub fn command_len<A: AsRef<[u8]>>(args: &[A]) -> usize {
    let digits = |n: usize| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    let mut len = 3 + digits(args.len());
    for a in args {
        let n = a.as_ref().len();
        len += 1 + digits(n) + 2 + n + 2;
    }
    len
}

/// `fmt::Write` into a byte vector (format numbers without a temporary String).
struct Hex<'a>(&'a mut Vec<u8>);
impl std::fmt::Write for Hex<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Appends one framed entry: header line + `payload` (an encoded RESP command).
pub fn encode_entry(out: &mut Vec<u8>, lsn: u64, replid: &str, reploff: u64, payload: &[u8]) {
    let start = out.len();
    let _ = write!(
        Hex(out),
        "#HDR:len:{};lsn:{lsn};replid:{replid};reploff:{reploff}",
        payload.len()
    );
    let mut d = crc64_digest();
    d.update(&out[start..]);
    d.update(payload);
    let _ = write!(Hex(out), ";cksum:{:016x}\r\n", d.finalize());
    out.extend_from_slice(payload);
}

/// The checksum field that ends a header line; its value is always 16 hex digits, so a
/// header can be framed before its checksum is known ([`encode_entry_ref`]).
const CKSUM_FIELD: &[u8] = b";cksum:";

/// An entry framed by [`encode_entry_ref`] without its large value: positions in the
/// framed bytes, and the value's address and length. [`fill_ref_checksums`] and
/// [`spliced`] complete it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRef {
    /// Start of the entry's header line.
    pub hdr: usize,
    /// End of the header's checksummed text (where `;cksum:` starts).
    pub hdr_text_end: usize,
    /// Start of the RESP command (after the header line).
    pub cmd: usize,
    /// Where the value's bytes go (the `$<len>\r\n` before it is framed).
    pub at: usize,
    /// End of the entry (the value's `\r\n` and the arguments after it are framed).
    pub end: usize,
    /// The value's address and length.
    pub addr: usize,
    pub len: usize,
}

/// Appends one entry for `args` whose argument `value_at` is left out: the header (its
/// checksum field zeroes, to be filled by [`fill_ref_checksums`]) and the command's bytes
/// before and after the value. The header's `len`, `lsn`, `replid` and `reploff` are
/// final. The value is referred to by address: the caller keeps those bytes unchanged
/// until it has been written.
pub fn encode_entry_ref<A: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    lsn: u64,
    replid: &str,
    reploff: u64,
    args: &[A],
    value_at: usize,
) -> ValueRef {
    let value = args[value_at].as_ref();
    let mut before = Vec::with_capacity(64);
    let _ = write!(Hex(&mut before), "*{}\r\n", args.len());
    let mut after = Vec::with_capacity(64);
    for (i, a) in args.iter().enumerate() {
        let a = a.as_ref();
        match i.cmp(&value_at) {
            std::cmp::Ordering::Less => {
                let _ = write!(Hex(&mut before), "${}\r\n", a.len());
                before.extend_from_slice(a);
                before.extend_from_slice(b"\r\n");
            }
            std::cmp::Ordering::Equal => {
                let _ = write!(Hex(&mut before), "${}\r\n", a.len());
                after.extend_from_slice(b"\r\n");
            }
            std::cmp::Ordering::Greater => {
                let _ = write!(Hex(&mut after), "${}\r\n", a.len());
                after.extend_from_slice(a);
                after.extend_from_slice(b"\r\n");
            }
        }
    }
    let hdr = out.len();
    let _ = write!(
        Hex(out),
        "#HDR:len:{};lsn:{lsn};replid:{replid};reploff:{reploff}",
        before.len() + value.len() + after.len()
    );
    let hdr_text_end = out.len();
    out.extend_from_slice(CKSUM_FIELD);
    out.extend_from_slice(&[b'0'; 16]);
    out.extend_from_slice(b"\r\n");
    let cmd = out.len();
    out.extend_from_slice(&before);
    let at = out.len();
    out.extend_from_slice(&after);
    ValueRef {
        hdr,
        hdr_text_end,
        cmd,
        at,
        end: out.len(),
        addr: value.as_ptr() as usize,
        len: value.len(),
    }
}

/// Fills in the checksum of every entry of `refs` (framed by [`encode_entry_ref`] into
/// `data`), reading each value (`values[i]`, `refs[i].len` bytes) where it is: the writer
/// thread then writes the value from there ([`spliced`]), so a 10 MB value is read once
/// for its checksum and copied once, by the kernel into the page cache.
pub fn fill_ref_checksums(data: &mut [u8], refs: &[ValueRef], values: &[&[u8]]) {
    debug_assert_eq!(refs.len(), values.len());
    for (r, value) in refs.iter().zip(values) {
        debug_assert!(r.hdr <= r.at && r.at <= r.end && value.len() == r.len);
        let mut d = crc64_digest();
        d.update(&data[r.hdr..r.hdr_text_end]);
        d.update(&data[r.cmd..r.at]);
        d.update(value);
        d.update(&data[r.at..r.end]);
        let digits = format!("{:016x}", d.finalize());
        let pos = r.hdr_text_end + CKSUM_FIELD.len();
        data[pos..pos + 16].copy_from_slice(digits.as_bytes());
    }
}

/// The pieces of `data` with each value inserted at its position (`(at, value)`, in
/// increasing position), in file order. For entries framed by [`encode_entry_ref`] (at
/// `ValueRef::at`, after [`fill_ref_checksums`]) they are, written one after the other,
/// what [`encode_entry`] would have framed.
pub fn spliced<'a>(
    data: &'a [u8],
    values: impl IntoIterator<Item = (usize, &'a [u8])>,
) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut from = 0;
    for (at, value) in values {
        debug_assert!(from <= at);
        out.push(&data[from..at]);
        out.push(value);
        from = at;
    }
    out.push(&data[from..]);
    out
}

/// The marker that starts each write of the writer thread:
/// `#BATCH:durable:<lsn>;cksum:<crc64 hex>\r\n`, where `<lsn>` is the highest LSN that
/// was durable when the write was issued. Every entry after it (up to the next marker) was
/// not yet acknowledged then. Recovery uses it to tell a hole left by concurrent writes that
/// were in flight at a crash (harmless: nothing in or after it was acknowledged) from
/// corruption of acknowledged entries (see [`scan`]).
pub fn encode_batch_marker(out: &mut Vec<u8>, durable: u64) {
    let start = out.len();
    let _ = write!(Hex(out), "#BATCH:durable:{durable}");
    let c = crc64(&out[start..]);
    let _ = write!(Hex(out), ";cksum:{c:016x}\r\n");
}

/// Appends a `#PAD:` annotation that fills exactly `total` bytes (`total` ≥
/// [`PAD_MIN_BYTES`]): the line, then zero filler.
pub fn encode_pad(out: &mut Vec<u8>, total: usize) {
    debug_assert!(total >= PAD_MIN_BYTES);
    // The line's length depends on the digits of n; not every total has an n that fits
    // exactly (18 bytes: n = 9 gives 17, n = 10 gives 19), so the number may be written
    // with leading zeros: take the fewest digits `w` that can hold n = total − 7 − w.
    let mut w = 1;
    while (total - 7 - w).to_string().len() > w {
        w += 1;
    }
    let n = total - 7 - w;
    let _ = write!(Hex(out), "#PAD:{n:0w$}\r\n");
    out.resize(out.len() + n, 0);
}

/// One line of a pre-allocated segment's filler (64 bytes): an annotation short enough
/// for Redis 7's loader (which reads lines of up to 127 bytes and skips those starting
/// with `#`), so a segment killed with its filler in place still loads there.
pub const FILL_LINE: &[u8; 64] =
    b"#FILL                                                         \r\n";

/// Appends an alignment annotation of exactly `total` bytes (≥ 3): `#`, spaces, CRLF.
/// A write into a pre-allocated segment ends with one so that the log always ends where a
/// filler line starts (offsets that are multiples of 64): Redis 7 never meets half a line.
pub fn encode_align(out: &mut Vec<u8>, total: usize) {
    debug_assert!((3..=127).contains(&total));
    out.push(b'#');
    out.resize(out.len() + total - 3, b' ');
    out.extend_from_slice(b"\r\n");
}

/// The alignment annotation that brings `end` to a multiple of 64 (0 when it is one;
/// never 1 or 2 bytes, too short for a line: 65 or 66 then).
pub fn align_gap(end: u64) -> usize {
    let gap = ((64 - end % 64) % 64) as usize;
    if gap != 0 && gap < 3 {
        gap + 64
    } else {
        gap
    }
}

/// True if `b` is whole [`FILL_LINE`]s (the last may be cut short) then only zeroes.
fn only_filler(b: &[u8]) -> bool {
    let mut chunks = b.chunks(FILL_LINE.len());
    for c in chunks.by_ref() {
        if c == &FILL_LINE[..c.len()] {
            continue;
        }
        // Zeroes from here on (a segment whose filler stopped, e.g. on ENOSPC).
        let at = c
            .iter()
            .zip(FILL_LINE.iter())
            .take_while(|(a, b)| a == b)
            .count();
        return c[at..].iter().all(|&x| x == 0) && chunks.all(|c| c.iter().all(|&x| x == 0));
    }
    true
}

/// Smallest `#PAD:` annotation (`#PAD:0\r\n`).
pub const PAD_MIN_BYTES: usize = 8;

/// A base file's trailer line.
pub fn encode_base_end(out: &mut Vec<u8>, lsn: u64, replid: &str, reploff: u64, keys: u64) {
    let _ = write!(
        Hex(out),
        "#BASE-END:lsn:{lsn};replid:{replid};reploff:{reploff};keys:{keys}\r\n"
    );
}

/// One decoded entry (borrowing the file's bytes).
#[derive(Debug)]
pub struct Entry<'a> {
    /// Byte offset of the entry (its header, or its command for a header-less entry).
    pub offset: u64,
    /// None for a command written without a header (a plain Redis AOF).
    pub lsn: Option<u64>,
    pub replid: &'a [u8],
    pub reploff: u64,
    pub args: Vec<&'a [u8]>,
}

/// What the bytes from a scan's first bad spot on are, as recovery judges them (the rules
/// are in `docs/formats/aof.md`, "Recovery rules").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The end of an interrupted write: the bytes run out inside an item (at the file's
    /// end, or where unwritten space — zeroes, filler lines — starts), possibly followed by
    /// writes that were in flight with it. Nothing after it was acknowledged: recovery may
    /// cut it.
    TornTail,
    /// A recycled segment's old content (entries with LSNs below the expected one) follows
    /// the log: the log's normal end in such a file.
    RecycledEnd,
    /// Damage followed by more of the log, or a whole item that fails its checks: the
    /// bytes may hide acknowledged writes, so startup stops.
    Corruption,
}

/// Where and why a scan stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad {
    /// Offset of the first byte that is not part of a valid entry.
    pub offset: u64,
    /// The LSN the log expected there (last valid + 1), if known.
    pub expected_lsn: Option<u64>,
    pub reason: String,
    pub damage: Damage,
}

/// The log position stated by a base file's trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseEnd {
    pub lsn: u64,
    pub replid: String,
    pub reploff: u64,
}

#[derive(Debug, Default)]
pub struct ScanOutcome {
    /// Bytes of valid entries from the start (the longest valid prefix).
    pub valid_len: u64,
    pub entries: u64,
    pub last_lsn: Option<u64>,
    pub last_replid: Option<String>,
    pub last_reploff: Option<u64>,
    pub base_end: Option<BaseEnd>,
    pub bad: Option<Bad>,
    /// The log ended at filler lines or zero bytes that run to the end of the file: the
    /// unused part of a pre-allocated segment (a clean end, not an error).
    pub zero_tail: bool,
    /// The file has `#HDR:` lines (cairn's): every entry carries an LSN.
    pub headed: bool,
}

fn find_crlf(b: &[u8], from: usize, max: usize) -> Option<usize> {
    let end = b.len().min(from.saturating_add(max));
    b[from..end]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Parses `key:value;key:value` fields in order; returns the values.
fn fields<'a, const N: usize>(line: &'a [u8], keys: [&str; N]) -> Option<[&'a [u8]; N]> {
    let mut out: [&[u8]; N] = [&[]; N];
    let mut parts = line.split(|&c| c == b';');
    for (i, k) in keys.iter().enumerate() {
        let p = parts.next()?;
        let v = p.strip_prefix(k.as_bytes())?.strip_prefix(b":")?;
        out[i] = v;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(out)
}

/// Parses a RESP multibulk command occupying exactly `b` (or its prefix when `exact` is
/// false, returning the bytes used). Err(true) means "incomplete", Err(false) "malformed".
pub fn parse_command(b: &[u8], exact: bool) -> Result<(Vec<&[u8]>, usize), bool> {
    let line = |from: usize| -> Result<(usize, usize), bool> {
        // (value end, next line start)
        match find_crlf(b, from, 32) {
            Some(p) => Ok((p, p + 2)),
            None if b.len() - from < 32 => Err(true),
            None => Err(false),
        }
    };
    if b.is_empty() {
        return Err(true);
    }
    if b[0] != b'*' {
        return Err(false);
    }
    let (e, mut pos) = line(1)?;
    let argc = parse_u64(&b[1..e]).ok_or(false)? as usize;
    if argc == 0 || argc > ARGC_MAX {
        return Err(false);
    }
    let mut args = Vec::with_capacity(argc.min(64));
    for _ in 0..argc {
        if pos >= b.len() {
            return Err(true);
        }
        if b[pos] != b'$' {
            return Err(false);
        }
        let (e, start) = line(pos + 1)?;
        let n = parse_u64(&b[pos + 1..e]).ok_or(false)? as usize;
        let end = start.checked_add(n).ok_or(false)?;
        if end + 2 > b.len() {
            return Err(true);
        }
        if &b[end..end + 2] != b"\r\n" {
            return Err(false);
        }
        args.push(&b[start..end]);
        pos = end + 2;
    }
    if exact && pos != b.len() {
        return Err(false);
    }
    Ok((args, pos))
}

enum Step<'a> {
    Entry(Entry<'a>, usize),
    Annotation(usize),
    BaseEnd(BaseEnd, usize),
    /// A valid `#BATCH:` marker: the durable LSN when that write was issued.
    Batch(u64, usize),
    /// A zero byte where an entry should start.
    Zero,
    /// A pre-allocated segment's filler line.
    Fill,
    /// Ran out of bytes inside an entry.
    Incomplete(String),
    Malformed(String),
}

/// Decodes the item at `pos`. `strict`: the file is cairn's (it has headers), so a
/// command without a header is corruption (e.g. a flipped bit in `#HDR:`), not a plain
/// Redis command.
fn step(b: &[u8], pos: usize, strict: bool) -> Step<'_> {
    let rest = &b[pos..];
    if rest.starts_with(HDR_PREFIX) {
        let Some(eol) = find_crlf(b, pos, HDR_LINE_MAX_BYTES) else {
            return if b.len() - pos < HDR_LINE_MAX_BYTES {
                Step::Incomplete("header line cut short".into())
            } else {
                Step::Malformed("header line without an end".into())
            };
        };
        let line = &b[pos + HDR_PREFIX.len()..eol];
        let Some([len, lsn, replid, reploff, cksum]) =
            fields(line, ["len", "lsn", "replid", "reploff", "cksum"])
        else {
            return Step::Malformed("malformed header line".into());
        };
        let (Some(len), Some(lsn), Some(reploff)) =
            (parse_u64(len), parse_u64(lsn), parse_u64(reploff))
        else {
            return Step::Malformed("malformed number in header".into());
        };
        // Exactly 16 lowercase hex digits: one spelling per value, so no flip goes unseen.
        let canonical = cksum.len() == 16
            && cksum
                .iter()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
        let Ok(Ok(cksum)) = std::str::from_utf8(cksum).map_err(|_| ()).and_then(|s| {
            if canonical {
                Ok(u64::from_str_radix(s, 16))
            } else {
                Err(())
            }
        }) else {
            return Step::Malformed("malformed checksum in header".into());
        };
        let start = eol + 2;
        let Some(end) = start
            .checked_add(len as usize)
            .filter(|_| len <= usize::MAX as u64)
        else {
            return Step::Malformed("entry length out of range".into());
        };
        if end > b.len() {
            // A torn entry's bytes are a proper prefix of its command, which never parses
            // whole: a whole command in fewer bytes than `len` means `len` is damaged.
            if parse_command(&b[start..], false).is_ok() {
                return Step::Malformed(format!(
                    "entry lsn {lsn} declares {len} bytes but its command is shorter"
                ));
            }
            return Step::Incomplete(format!(
                "entry lsn {lsn} needs {len} bytes, {} present",
                b.len() - start
            ));
        }
        // Checksum: header text before ";cksum:" then the payload.
        let covered_end = eol - ";cksum:".len() - cksum_text_len(&b[pos..eol]);
        let mut d = crc64_digest();
        d.update(&b[pos..covered_end]);
        d.update(&b[start..end]);
        if d.finalize() != cksum {
            return Step::Malformed(format!("checksum mismatch in entry lsn {lsn}"));
        }
        let args = match parse_command(&b[start..end], true) {
            Ok((a, _)) => a,
            Err(_) => return Step::Malformed(format!("entry lsn {lsn} is not a RESP command")),
        };
        return Step::Entry(
            Entry {
                offset: pos as u64,
                lsn: Some(lsn),
                replid,
                reploff,
                args,
            },
            end,
        );
    }
    if rest.starts_with(BASE_END_PREFIX) {
        let Some(eol) = find_crlf(b, pos, HDR_LINE_MAX_BYTES) else {
            return Step::Incomplete("base trailer cut short".into());
        };
        let line = &b[pos + BASE_END_PREFIX.len()..eol];
        let parsed = fields(line, ["lsn", "replid", "reploff", "keys"]).and_then(
            |[lsn, replid, reploff, _keys]| {
                Some(BaseEnd {
                    lsn: parse_u64(lsn)?,
                    replid: String::from_utf8(replid.to_vec()).ok()?,
                    reploff: parse_u64(reploff)?,
                })
            },
        );
        return match parsed {
            Some(be) => Step::BaseEnd(be, eol + 2),
            None => Step::Malformed("malformed base trailer".into()),
        };
    }
    if rest[0] == 0 {
        return Step::Zero;
    }
    if rest.starts_with(FILL_LINE) {
        return Step::Fill;
    }
    if rest.starts_with(BATCH_PREFIX) {
        let Some(eol) = find_crlf(b, pos, HDR_LINE_MAX_BYTES) else {
            return Step::Incomplete("batch marker cut short".into());
        };
        let line = &b[pos..eol];
        let covered = line.len() - ";cksum:".len() - cksum_text_len(line);
        let parsed = fields(&line[BATCH_PREFIX.len()..], ["durable", "cksum"]).and_then(|[d, c]| {
            let d = parse_u64(d)?;
            let canonical = c.len() == 16
                && c.iter()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
            let c = u64::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok()?;
            (canonical && crc64(&line[..covered]) == c).then_some(d)
        });
        return match parsed {
            Some(d) => Step::Batch(d, eol + 2),
            None => Step::Malformed("bad batch marker".into()),
        };
    }
    if rest.starts_with(PAD_PREFIX) {
        let Some(eol) = find_crlf(b, pos, 32) else {
            return if b.len() - pos < 32 {
                Step::Incomplete("pad cut short".into())
            } else {
                Step::Malformed("pad line without an end".into())
            };
        };
        let Some(n) = parse_u64(&b[pos + PAD_PREFIX.len()..eol]).filter(|&n| n <= PAD_MAX_BYTES)
        else {
            return Step::Malformed("malformed pad".into());
        };
        let end = eol + 2 + n as usize;
        if end > b.len() {
            return Step::Incomplete("pad runs past the end".into());
        }
        return Step::Annotation(end);
    }
    if rest[0] == b'#' {
        // Another annotation (Redis's `#TS:`): skipped, as Redis does.
        return match find_crlf(b, pos, 4096) {
            Some(eol) => Step::Annotation(eol + 2),
            None if b.len() - pos < 4096 => Step::Incomplete("annotation cut short".into()),
            None => Step::Malformed("annotation without an end".into()),
        };
    }
    if strict {
        return Step::Malformed("command without a header".into());
    }
    // A command without a header (an AOF written by Redis).
    match parse_command(rest, false) {
        Ok((args, used)) => Step::Entry(
            Entry {
                offset: pos as u64,
                lsn: None,
                replid: &[],
                reploff: 0,
                args,
            },
            pos + used,
        ),
        Err(true) => Step::Incomplete("command cut short".into()),
        Err(false) => Step::Malformed("not a RESP command nor an annotation".into()),
    }
}

/// Length of the hex checksum text at the end of a header line.
fn cksum_text_len(line: &[u8]) -> usize {
    match line.windows(7).rposition(|w| w == b";cksum:") {
        Some(p) => line.len() - p - 7,
        None => 0,
    }
}

/// The smallest unit a write reaches the disk in: direct I/O writes are whole sectors, and
/// page-cache pages are whole sectors too. What a torn or missing write leaves behind (the
/// bytes that were there before it) therefore starts at a multiple of it.
const SECTOR: usize = 512;

/// What the scan met at its first bad spot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BadSpot {
    /// The bytes ran out inside an item.
    Cut,
    /// An item that fails its checks, or a zero byte where one should start.
    Broken,
    /// An item that fails its checks right after the writer's padding past a write
    /// (filler lines, or a `#PAD:`).
    BrokenAfterPadding,
    /// A whole entry whose LSN is above the expected one: entries are missing before it.
    Ahead,
    /// A whole entry whose LSN is below the expected one: a recycled segment's old content.
    Behind,
}

/// A whole entry found past a bad spot.
#[derive(Clone, Copy, Debug)]
struct Found {
    offset: usize,
    /// None for a command without a header (a file written by Redis).
    lsn: Option<u64>,
    /// The durable LSN of the last batch marker before it.
    marker: Option<u64>,
}

/// The whole entries in `b` from `pos` on, found by trying every place one could start (a
/// `#` for cairn's headed entries and batch markers; in a file without headers, a `*` at a
/// line start for a Redis-written command). Tracks the batch markers passed.
struct Resync<'a> {
    b: &'a [u8],
    pos: usize,
    strict: bool,
    marker: Option<u64>,
}

impl Iterator for Resync<'_> {
    type Item = Found;
    fn next(&mut self) -> Option<Found> {
        let b = self.b;
        while self.pos < b.len() {
            let strict = self.strict;
            let at = self.pos
                + b[self.pos..]
                    .iter()
                    .position(|&c| c == b'#' || (!strict && c == b'*'))?;
            self.pos = at + 1;
            if b[at] == b'*' {
                if at > 0 && b[at - 1] != b'\n' {
                    continue;
                }
                if let Ok((_, used)) = parse_command(&b[at..], false) {
                    self.pos = at + used;
                    return Some(Found {
                        offset: at,
                        lsn: None,
                        marker: self.marker,
                    });
                }
                continue;
            }
            match step(b, at, true) {
                Step::Batch(d, next) => {
                    self.marker = Some(d);
                    self.pos = next;
                }
                Step::Entry(e, next) => {
                    self.pos = next;
                    return Some(Found {
                        offset: at,
                        lsn: e.lsn,
                        marker: self.marker,
                    });
                }
                Step::Fill => {
                    let mut p = at;
                    while b[p..].starts_with(FILL_LINE) {
                        p += FILL_LINE.len();
                    }
                    self.pos = p;
                }
                _ => {}
            }
        }
        None
    }
}

/// Where the unwritten space at the end of `b` starts (not before `from`): zero bytes and
/// filler lines (one possibly cut short where zeroes begin), in any order, running to the
/// end of the file. `b.len()` when the file ends with other bytes.
fn unwritten_from(b: &[u8], from: usize) -> usize {
    let mut q = b.len();
    while q > from {
        if b[q - 1] == 0 {
            q = from
                + b[from..q]
                    .iter()
                    .rposition(|&c| c != 0)
                    .map_or(0, |p| p + 1);
            continue;
        }
        let Some(k) = (1..=FILL_LINE.len().min(q - from))
            .rev()
            .find(|&k| b[q - k..q] == FILL_LINE[..k])
        else {
            break;
        };
        q -= k;
    }
    q
}

/// True if `sector` holds what a write that never reached it leaves there: zeroes, filler
/// lines, or the end of an old `#PAD:` line and its zeroes (a direct I/O block whose
/// rewrite was torn).
fn old_content(sector: &[u8]) -> bool {
    if only_filler(sector) {
        return true;
    }
    let head = &sector[..sector.len().min(16)];
    let Some(nl) = head.iter().position(|&c| c == b'\n') else {
        return false;
    };
    head[..nl].iter().all(|c| b"#PAD:0123456789\r".contains(c))
        && sector[nl + 1..].iter().all(|&c| c == 0)
}

/// The first sector boundary at or after `from` where a whole sector (ending by `limit`)
/// is old content.
fn first_old_sector(b: &[u8], from: usize, limit: usize) -> Option<usize> {
    let mut s = from.div_ceil(SECTOR) * SECTOR;
    while s + SECTOR <= limit {
        if old_content(&b[s..s + SECTOR]) {
            return Some(s);
        }
        s += SECTOR;
    }
    None
}

/// True if the item at `pos` is a header line followed by a whole RESP command: an entry
/// that is all there, so only a changed byte can make it fail (a torn entry's command runs
/// into old content and does not parse).
fn whole_headed_entry(b: &[u8], pos: usize) -> bool {
    if !b[pos..].starts_with(HDR_PREFIX) {
        return false;
    }
    find_crlf(b, pos, HDR_LINE_MAX_BYTES)
        .is_some_and(|eol| parse_command(&b[eol + 2..], false).is_ok())
}

/// Judges the bytes from the scan's first bad spot `pos` on (`expected`: the LSN the log
/// expected there; `marker`: the durable LSN of the batch marker before it). Rules (see
/// `docs/formats/aof.md`, "Recovery rules"):
///
/// - A torn write leaves a proper prefix of itself followed by old content: the file's end,
///   unwritten space (zeroes, filler), or — past a sector boundary — old sectors. So the
///   bad item must be cut short where such old content starts, and nothing whole may lie
///   between. An entry that is all there (its command parses whole) is damaged, not torn.
/// - Whole entries after that old content are writes that were in flight with the torn one
///   (their batch marker says the expected LSN was not yet durable when they were issued),
///   or a recycled segment's old entries (LSNs below the expected one). Any other whole
///   entry — a Redis-written command included, which has no marker — means acknowledged
///   writes follow: corruption.
fn judge(
    b: &[u8],
    pos: usize,
    expected: Option<u64>,
    marker: Option<u64>,
    strict: bool,
    spot: BadSpot,
) -> Damage {
    let stale = |f: &Found| matches!((f.lsn, expected), (Some(l), Some(x)) if l < x);
    // Everything from `from` on must be old entries or writes that were in flight.
    let rest_unacknowledged = |from: usize, marker: Option<u64>| {
        let mut stale_seen = false;
        for f in (Resync {
            b,
            pos: from,
            strict,
            marker,
        }) {
            if stale(&f) {
                stale_seen = true;
                continue;
            }
            let in_flight = matches!((f.marker, expected), (Some(d), Some(x)) if d < x);
            if !in_flight {
                return Damage::Corruption;
            }
        }
        if stale_seen {
            Damage::RecycledEnd
        } else {
            Damage::TornTail
        }
    };
    if matches!(spot, BadSpot::Ahead | BadSpot::Behind) {
        return rest_unacknowledged(pos, marker);
    }
    let first = Resync {
        b,
        pos: pos + 1,
        strict,
        marker,
    }
    .next();
    if let Some(f) = first.filter(|f| stale(f)) {
        // A write torn over a recycled segment's old bytes: its old entries follow.
        return rest_unacknowledged(f.offset, f.marker);
    }
    if whole_headed_entry(b, pos) {
        return Damage::Corruption;
    }
    // In a recycled segment the new log stops inside its old bytes, usually inside one of
    // its old commands. The writer ends every write there with a filler line (direct I/O:
    // a `#PAD:`), which the next write overwrites: so a piece of an old command right
    // after such padding, with nothing whole after it, is old content. A changed byte
    // cannot make padding, and a batch damaged after it still leaves its headed entries.
    if strict
        && matches!(spot, BadSpot::BrokenAfterPadding)
        && !matches!(b[pos], b'#' | 0)
        && first.is_none()
    {
        return Damage::RecycledEnd;
    }
    // Where the old content may start: an old sector before the next whole entry; with
    // nothing whole after the item, also the file's end, or unwritten space running to it
    // from a sector boundary (writes land in whole sectors) or from the item's start.
    let limit = first.map_or(b.len(), |f| f.offset);
    let mut old_from: Vec<usize> = first_old_sector(b, pos, limit).into_iter().collect();
    if first.is_none() {
        let unwritten = unwritten_from(b, pos);
        if unwritten == pos || unwritten.is_multiple_of(SECTOR) {
            old_from.push(unwritten);
        }
        old_from.push(b.len());
    }
    let torn = old_from
        .into_iter()
        .any(|c| c == pos || matches!(step(&b[..c], pos, strict), Step::Incomplete(_)));
    match (torn, first) {
        (false, _) => Damage::Corruption,
        (true, None) => Damage::TornTail,
        (true, Some(f)) => rest_unacknowledged(f.offset, f.marker),
    }
}

/// Reads `b` forward, verifying each entry's CRC and that LSNs rise by exactly one (the
/// first entry's LSN must be `first_lsn` when given). Calls `f` for each valid entry; an
/// Err from `f` stops the scan (reported as a bad entry in the middle). Zero bytes where an
/// entry should start end the log cleanly when only zeroes follow (a pre-allocated
/// segment's unused part); an entry whose LSN is below the expected one is the stale
/// content of a recycled segment and ends the log too (see [`judge`]).
pub fn scan<'a>(
    b: &'a [u8],
    first_lsn: Option<u64>,
    mut f: impl FnMut(&Entry<'a>) -> Result<(), String>,
) -> ScanOutcome {
    let mut out = ScanOutcome::default();
    let mut expected = first_lsn;
    let mut batch_d: Option<u64> = None;
    let mut pos = 0usize;
    // A file with any header line is cairn's: every command in it must have one.
    let strict = b.starts_with(HDR_PREFIX) || b.windows(6).any(|w| w == b"\n#HDR:");
    out.headed = strict;
    // The item before `pos` was the writer's padding past a write (filler, `#PAD:`).
    let mut padded = false;
    while pos < b.len() {
        let was_padded = std::mem::replace(&mut padded, false);
        let (reason, spot) = match step(b, pos, strict) {
            Step::Entry(e, next) => {
                if let (Some(l), Some(want)) = (e.lsn, expected) {
                    if l != want {
                        let reason = if l < want {
                            format!("stale entry LSN {l} where {want} was expected")
                        } else {
                            format!("LSN {l} where {want} was expected")
                        };
                        let spot = if l < want {
                            BadSpot::Behind
                        } else {
                            BadSpot::Ahead
                        };
                        out.bad = Some(bad(b, pos, expected, batch_d, strict, reason, spot));
                        return out;
                    }
                }
                if let Err(reason) = f(&e) {
                    out.bad = Some(Bad {
                        offset: pos as u64,
                        expected_lsn: expected,
                        reason,
                        damage: Damage::Corruption,
                    });
                    return out;
                }
                if let Some(l) = e.lsn {
                    expected = Some(l + 1);
                    out.last_lsn = Some(l);
                    out.last_replid = Some(String::from_utf8_lossy(e.replid).into_owned());
                    out.last_reploff = Some(e.reploff);
                }
                out.entries += 1;
                pos = next;
                out.valid_len = pos as u64;
                continue;
            }
            Step::Annotation(next) => {
                padded = b[pos..].starts_with(PAD_PREFIX);
                pos = next;
                out.valid_len = pos as u64;
                continue;
            }
            Step::Batch(d, next) => {
                batch_d = Some(d);
                pos = next;
                out.valid_len = pos as u64;
                continue;
            }
            Step::BaseEnd(be, next) => {
                out.base_end = Some(be);
                pos = next;
                out.valid_len = pos as u64;
                continue;
            }
            Step::Zero | Step::Fill => {
                // Checked once per run of filler (not per line: a run can be 64 MiB).
                if only_filler(&b[pos..]) {
                    out.zero_tail = true;
                    return out;
                }
                if b[pos..].starts_with(FILL_LINE) {
                    // Filler with more data after it (a write in flight at a crash never
                    // landed here): skipped like annotations; what follows is checked.
                    while b[pos..].starts_with(FILL_LINE) {
                        pos += FILL_LINE.len();
                    }
                    padded = true;
                    continue;
                }
                ("zero bytes inside the log".to_string(), BadSpot::Broken)
            }
            Step::Incomplete(r) => (r, BadSpot::Cut),
            Step::Malformed(r) if was_padded => (r, BadSpot::BrokenAfterPadding),
            Step::Malformed(r) => (r, BadSpot::Broken),
        };
        out.bad = Some(bad(b, pos, expected, batch_d, strict, reason, spot));
        return out;
    }
    out
}

fn bad(
    b: &[u8],
    pos: usize,
    expected: Option<u64>,
    batch_d: Option<u64>,
    strict: bool,
    reason: String,
    spot: BadSpot,
) -> Bad {
    Bad {
        offset: pos as u64,
        expected_lsn: expected,
        reason,
        damage: judge(b, pos, expected, batch_d, strict, spot),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RID: &str = "0123456789012345678901234567890123456789";

    fn log(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut off = 0;
        for lsn in 1..=n {
            let mut p = Vec::new();
            encode_command(&mut p, &[&b"SET"[..], format!("k{lsn}").as_bytes(), b"v"]);
            off += p.len() as u64;
            encode_entry(&mut out, lsn, RID, off, &p);
        }
        out
    }

    /// Entries framed with their values left out and completed later are byte for byte
    /// what `encode_entry` frames, wherever the value sits and however many there are
    /// (values longer than one copy chunk included); a flipped value byte fails the scan.
    #[test]
    fn entries_framed_by_reference_match_copied_ones() {
        let big: Vec<u8> = (0..(512 << 10) + 7).map(|i| (i * 31 % 251) as u8).collect();
        let small = b"0123456789".repeat(7);
        let forms: Vec<(Vec<&[u8]>, usize)> = vec![
            (vec![b"SET", b"k", &big], 2),
            (vec![b"SET", b"key2", &small, b"PXAT", b"1700000000000"], 2),
            (vec![b"SET", b"", &big, b"GET"], 2),
            (vec![&big], 0),
        ];
        let (mut copied, mut framed, mut refs, mut values) =
            (Vec::new(), b"#TS:1\r\n".to_vec(), Vec::new(), Vec::new());
        copied.extend_from_slice(b"#TS:1\r\n");
        let mut lsn = 0;
        for (i, (args, at)) in forms.iter().enumerate() {
            let mut p = Vec::new();
            encode_command(&mut p, args);
            assert_eq!(command_len(args), p.len());
            lsn += 1;
            encode_entry(&mut copied, lsn, RID, 100 * i as u64, &p);
            let r = encode_entry_ref(&mut framed, lsn, RID, 100 * i as u64, args, *at);
            assert_eq!(
                (r.addr, r.len),
                (args[*at].as_ptr() as usize, args[*at].len())
            );
            refs.push(r);
            values.push(args[*at]);
            // An ordinary entry between two by reference.
            lsn += 1;
            encode_entry(&mut copied, lsn, RID, 1, b"*1\r\n$4\r\nPING\r\n");
            encode_entry(&mut framed, lsn, RID, 1, b"*1\r\n$4\r\nPING\r\n");
        }
        assert!(scan(&copied, Some(1), |_| Ok(())).bad.is_none());
        fill_ref_checksums(&mut framed, &refs, &values);
        let out = spliced(
            &framed,
            refs.iter().map(|r| r.at).zip(values.iter().copied()),
        )
        .concat();
        assert!(out == copied, "spliced entries differ from copied ones");

        let mut damaged = copied.clone();
        let at = copied.len() / 3;
        damaged[at] ^= 1;
        let o = scan(&damaged, Some(1), |_| Ok(()));
        assert!(
            o.bad.is_some(),
            "a flipped value byte must fail the checksum"
        );
    }

    #[test]
    fn round_trip() {
        let b = log(3);
        let mut seen = Vec::new();
        let o = scan(&b, Some(1), |e| {
            seen.push((e.lsn, e.args[1].to_vec()));
            Ok(())
        });
        assert!(o.bad.is_none());
        assert_eq!(o.valid_len, b.len() as u64);
        assert_eq!(o.last_lsn, Some(3));
        assert_eq!(seen[2], (Some(3), b"k3".to_vec()));
    }

    #[test]
    fn every_truncation_is_a_torn_tail_with_longest_prefix() {
        let b = log(4);
        let ends: Vec<u64> = {
            let mut v = vec![0];
            scan(&b, None, |_| Ok(()));
            let mut pos = 0;
            while pos < b.len() {
                match step(&b, pos, true) {
                    Step::Entry(_, n) => {
                        pos = n;
                        v.push(n as u64)
                    }
                    _ => unreachable!(),
                }
            }
            v
        };
        for cut in 0..b.len() {
            let o = scan(&b[..cut], Some(1), |_| Ok(()));
            let want = *ends.iter().filter(|&&e| e <= cut as u64).max().unwrap();
            assert_eq!(o.valid_len, want, "cut at {cut}");
            if want != cut as u64 {
                assert_eq!(
                    o.bad.as_ref().unwrap().damage,
                    Damage::TornTail,
                    "cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let b = log(3);
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                let o = scan(&c, Some(1), |_| Ok(()));
                assert!(o.bad.is_some(), "flip at byte {i} bit {bit} undetected");
            }
        }
    }

    #[test]
    fn flip_in_middle_is_corruption_not_tail() {
        let b = log(3);
        let mut c = b.clone();
        c[HDR_LINE_MAX_BYTES.min(60)] ^= 0x20; // inside the first entry
        let o = scan(&c, Some(1), |_| Ok(()));
        let bad = o.bad.unwrap();
        assert_eq!(bad.damage, Damage::Corruption);
        assert_eq!(bad.offset, 0);
        assert_eq!(bad.expected_lsn, Some(1));
    }

    #[test]
    fn lsn_gap_is_reported() {
        let mut b = log(1);
        let mut p = Vec::new();
        encode_command(&mut p, &[&b"DEL"[..], b"x"]);
        encode_entry(&mut b, 3, RID, 9, &p);
        let o = scan(&b, Some(1), |_| Ok(()));
        assert!(o.bad.unwrap().reason.contains("LSN 3 where 2"));
    }

    #[test]
    fn plain_redis_commands_and_annotations_load() {
        let b = b"#TS:123\r\n*2\r\n$3\r\nDEL\r\n$1\r\nx\r\n";
        let o = scan(b, None, |_| Ok(()));
        assert!(o.bad.is_none());
        assert_eq!(o.entries, 1);
    }

    /// `n` entries from `from`, as the writer lays them out: one batch marker (durable
    /// LSN `durable`) then the entries.
    fn batch(from: u64, n: u64, durable: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_batch_marker(&mut out, durable);
        for lsn in from..from + n {
            let mut p = Vec::new();
            encode_command(&mut p, &[&b"SET"[..], format!("k{lsn}").as_bytes(), b"v"]);
            encode_entry(&mut out, lsn, RID, lsn * 10, &p);
        }
        out
    }

    #[test]
    fn pad_fills_exactly_every_size_and_is_skipped() {
        for total in PAD_MIN_BYTES..6000 {
            let mut b = batch(1, 2, 0);
            let before = b.len();
            encode_pad(&mut b, total);
            assert_eq!(b.len() - before, total, "pad of {total}");
            b.extend_from_slice(&batch(3, 1, 0));
            let o = scan(&b, Some(1), |_| Ok(()));
            assert!(o.bad.is_none(), "pad of {total}: {:?}", o.bad);
            assert_eq!(o.last_lsn, Some(3));
        }
    }

    #[test]
    fn zero_tail_is_a_clean_end_and_a_write_torn_into_it_a_torn_tail() {
        // A pre-allocated segment: the log, then zeroes (or filler lines).
        let b = batch(1, 5, 0);
        let mut seg = b.clone();
        seg.resize(b.len() + 8192, 0);
        let o = scan(&seg, Some(1), |_| Ok(()));
        assert!(o.bad.is_none() && o.zero_tail);
        assert_eq!(o.valid_len, b.len() as u64);
        // The same with filler lines (the last one cut), then zeroes.
        let mut seg = b.clone();
        for _ in 0..100 {
            seg.extend_from_slice(FILL_LINE);
        }
        seg.extend_from_slice(&FILL_LINE[..10]);
        seg.resize(seg.len() + 100, 0);
        let o = scan(&seg, Some(1), |_| Ok(()));
        assert!(o.bad.is_none() && o.zero_tail, "{:?}", o.bad);
        assert_eq!(o.valid_len, b.len() as u64);
        // A write torn where a sector ends (writes land in whole sectors): the log up to
        // there, then what was there before, filler lines (at 64-byte offsets) or zeroes.
        let b = batch(1, 40, 0);
        let ends: Vec<usize> = {
            let mut v = Vec::new();
            scan(&b, Some(1), |e| {
                v.push(e.offset as usize);
                Ok(())
            });
            v.push(b.len());
            v
        };
        let filler: Vec<u8> = FILL_LINE.repeat(b.len() / FILL_LINE.len() + 128);
        let zeroes = vec![0u8; b.len() + 8192];
        for old in [&filler, &zeroes] {
            for tear in (SECTOR..b.len()).step_by(SECTOR) {
                let mut seg = old.clone();
                seg[..tear].copy_from_slice(&b[..tear]);
                let o = scan(&seg, Some(1), |_| Ok(()));
                let whole = ends.iter().filter(|&&e| e <= tear).count() as u64 - 1;
                assert_eq!(o.last_lsn, Some(whole), "torn at {tear}");
                assert!(
                    o.bad.as_ref().is_none_or(|b| b.damage == Damage::TornTail),
                    "torn at {tear}: {:?}",
                    o.bad
                );
            }
        }
    }

    /// `w` padded to the next 4 KiB boundary after `at` (where it is written), as a
    /// direct I/O write is.
    fn padded(mut w: Vec<u8>, at: usize) -> Vec<u8> {
        let end = at + w.len();
        let mut gap = (4096 - end % 4096) % 4096;
        if gap < PAD_MIN_BYTES {
            gap += 4096;
        }
        encode_pad(&mut w, gap);
        w
    }

    #[test]
    fn hole_left_by_writes_in_flight_is_a_torn_tail() {
        // Direct I/O, several writes in flight: batches 1-2 durable; batches 3 and 4 were
        // issued while only LSN 4 was durable (in flight together, each in its own
        // blocks); batch 3 never reached the disk (its block still zeroes, or filler),
        // batch 4 did.
        for old in [0u8, b'F'] {
            let mut b = padded(batch(1, 2, 0), 0);
            b.extend(padded(batch(3, 2, 2), b.len()));
            let hole_at = b.len();
            if old == 0 {
                b.resize(b.len() + 4096, 0);
            } else {
                for _ in 0..4096 / FILL_LINE.len() {
                    b.extend_from_slice(FILL_LINE);
                }
            }
            b.extend(padded(batch(8, 2, 4), b.len()));
            b.resize(b.len() + 4096, 0);
            let o = scan(&b, Some(1), |_| Ok(()));
            let bad = o.bad.expect("the hole");
            assert_eq!(bad.damage, Damage::TornTail, "{bad:?}");
            assert_eq!(o.last_lsn, Some(4));
            // Filler is skipped like an annotation, up to batch 4's marker; zeroes are not.
            let kept = scan(&b[..o.valid_len as usize], Some(1), |_| Ok(()));
            assert!(kept.bad.is_none() && kept.last_lsn == Some(4));
            assert!(old != 0 || o.valid_len == hole_at as u64);
        }
        // Batch 3 torn instead: its first sector landed, the rest of its block is zeroes.
        let mut b = padded(batch(1, 4, 0), 0);
        let torn_at = b.len();
        b.extend(padded(batch(5, 12, 4), b.len()));
        assert!(b.len() - torn_at > 1024, "batch 3 spans more than a sector");
        b[torn_at + 512..].fill(0);
        b.extend(padded(batch(17, 2, 4), b.len()));
        let o = scan(&b, Some(1), |_| Ok(()));
        assert_eq!(o.bad.expect("the tear").damage, Damage::TornTail);
        assert!(
            o.last_lsn.is_some_and(|l| (5..17).contains(&l)),
            "{:?}",
            o.last_lsn
        );
        // The same hole followed by a batch issued after LSN 5 was durable: entry 5 had
        // been acknowledged, so the hole is corruption in the middle.
        let mut c = padded(batch(1, 4, 0), 0);
        c.resize(c.len() + 4096, 0);
        c.extend(padded(batch(6, 2, 5), c.len()));
        let o = scan(&c, Some(1), |_| Ok(()));
        let bad = o.bad.expect("the hole");
        assert_eq!(bad.damage, Damage::Corruption, "{bad:?}");
        assert_eq!(bad.expected_lsn, Some(5));
    }

    /// Writes close together: every marker says nothing was durable yet (as under
    /// `appendfsync everysec`, or with syncs in flight), laid out as each writer path
    /// lays them out.
    fn close_together(layout: &str) -> Vec<u8> {
        let mut b = Vec::new();
        for (from, n) in [(1, 2), (3, 1), (4, 3)] {
            let w = batch(from, n, 0);
            match layout {
                "direct" => b.extend(padded(w, b.len())),
                "prealloc" => {
                    b.extend(w);
                    let gap = align_gap(b.len() as u64);
                    if gap > 0 {
                        encode_align(&mut b, gap);
                    }
                }
                _ => b.extend(w),
            }
        }
        if layout == "prealloc" {
            for _ in 0..128 {
                b.extend_from_slice(FILL_LINE);
            }
        }
        b
    }

    #[test]
    fn a_changed_byte_in_any_entry_is_corruption_whatever_the_markers_say() {
        for layout in ["plain", "direct", "prealloc"] {
            let b = close_together(layout);
            let mut entries = Vec::new();
            let o = scan(&b, Some(1), |e| {
                entries.push(e.offset as usize);
                Ok(())
            });
            assert!(
                o.bad.is_none() && o.last_lsn == Some(6),
                "{layout}: {:?}",
                o.bad
            );
            // Each entry's bytes: from its header to the next marker, entry or annotation.
            for (i, &start) in entries.iter().enumerate() {
                let end = entries.get(i + 1).copied().unwrap_or(b.len());
                let end = start
                    + b[start + 1..end]
                        .iter()
                        .position(|&c| c == b'#')
                        .map_or(end - start, |p| p + 1);
                for at in start..end {
                    for mask in [0x01u8, 0x20, 0x23, 0x80, 0xff] {
                        let mut c = b.clone();
                        c[at] ^= mask;
                        let o = scan(&c, Some(1), |_| Ok(()));
                        let bad = o.bad.unwrap_or_else(|| panic!("{layout}: {at} ^ {mask}"));
                        assert_eq!(
                            bad.damage,
                            Damage::Corruption,
                            "{layout}: byte {at} of entry {} ^ {mask:#x}: {bad:?}",
                            i + 1
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn random_damage_is_judged_without_panicking_and_a_changed_byte_is_never_cut() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n.max(1) as u64) as usize
        };
        let mut redis = Vec::new();
        for i in 0..20 {
            encode_command(&mut redis, &[&b"SET"[..], format!("k{i}").as_bytes(), b"v"]);
        }
        for layout in ["plain", "direct", "prealloc", "redis"] {
            let b = if layout == "redis" {
                redis.clone()
            } else {
                close_together(layout)
            };
            let first = (layout != "redis").then_some(1);
            // Past the log's last item: the pre-allocated filler, where a changed byte
            // loses nothing when the log is cut before it.
            let log_end = scan(&b, first, |_| Ok(())).valid_len as usize;
            for _ in 0..3000 {
                let mut c = b.clone();
                let at = next(c.len());
                match next(4) {
                    0 => c[at] ^= 1 << next(8),
                    1 => c.truncate(at),
                    2 => c[at..(at + next(600)).min(b.len())].fill(0),
                    _ => c[at] = next(256) as u8,
                }
                let o = scan(&c, first, |_| Ok(()));
                let one_byte_changed =
                    c.len() == b.len() && (0..c.len()).filter(|&i| c[i] != b[i]).count() == 1;
                if let (Some(bad), true, false) = (&o.bad, one_byte_changed, layout == "redis") {
                    // Markers aside, a changed byte in cairn's framing is never a tail to cut.
                    let in_marker = c[..at].iter().rposition(|&x| x == b'#').is_some_and(|p| {
                        c[p..].starts_with(b"#BATCH") || b[p..].starts_with(b"#BATCH")
                    });
                    let past_the_log = at >= log_end && o.valid_len as usize == log_end;
                    assert!(
                        in_marker || past_the_log || bad.damage == Damage::Corruption,
                        "{layout}: byte {at}: {bad:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn redis_written_damage_followed_by_commands_is_corruption_and_a_cut_end_a_torn_tail() {
        let mut b = Vec::new();
        for k in ["a", "b", "c"] {
            encode_command(&mut b, &[&b"SET"[..], k.as_bytes(), b"value"]);
        }
        let second = b.iter().skip(1).position(|&c| c == b'*').unwrap() + 1;
        // Its `*`, a length, the CRLF after a value: the third command still follows.
        for at in [second, second + 1, second + 16, second + 29] {
            let mut c = b.clone();
            c[at] ^= 0x41;
            let o = scan(&c, None, |_| Ok(()));
            let bad = o.bad.unwrap_or_else(|| panic!("{at}"));
            assert_eq!(bad.damage, Damage::Corruption, "{at}: {bad:?}");
        }
        // The last command's final byte: a whole command that ends wrong.
        let mut c = b.clone();
        *c.last_mut().unwrap() = b'x';
        let o = scan(&c, None, |_| Ok(()));
        assert_eq!(o.bad.unwrap().damage, Damage::Corruption);
        // The file ends inside the last command: a torn tail.
        for cut in b.len() - 20..b.len() {
            let o = scan(&b[..cut], None, |_| Ok(()));
            assert_eq!(o.bad.unwrap().damage, Damage::TornTail, "cut {cut}");
        }
    }

    #[test]
    fn recycled_segment_recovery_stops_at_the_first_stale_entry() {
        // The old life of the file: LSNs 1..=40. The new one starts at LSN 41 and wrote
        // 41..=45 over the beginning.
        let old = batch(1, 40, 0);
        let new = batch(41, 5, 40);
        let mut seg = old.clone();
        seg[..new.len()].copy_from_slice(&new);
        let o = scan(&seg, Some(41), |_| Ok(()));
        assert_eq!(o.last_lsn, Some(45));
        assert_eq!(o.valid_len, new.len() as u64);
        let bad = o.bad.expect("stale content");
        assert_eq!(bad.damage, Damage::RecycledEnd, "{bad:?}");
        // Every cut of the new content (a torn write over old bytes) stops at the last
        // whole new entry, never accepting an old one.
        for cut in 0..new.len() {
            let mut seg = old.clone();
            seg[..cut].copy_from_slice(&new[..cut]);
            let o = scan(&seg, Some(41), |e| {
                assert!(e.lsn.unwrap() >= 41, "old entry accepted at cut {cut}");
                Ok(())
            });
            assert!(
                o.bad
                    .as_ref()
                    .is_some_and(|b| b.damage != Damage::Corruption),
                "cut {cut}: {:?}",
                o.bad
            );
        }
        // A changed byte in a new entry that more new entries follow is corruption.
        for at in [new.len() / 3, new.len() / 2] {
            let mut seg = seg.clone();
            seg[at] ^= 0x10;
            let o = scan(&seg, Some(41), |_| Ok(()));
            assert_eq!(o.bad.unwrap().damage, Damage::Corruption, "byte {at}");
        }
    }

    /// A recycled segment whose new log stops inside one of its old commands: the writer's
    /// filler line after its last write, then the rest of the old command (and old filler).
    #[test]
    fn a_recycled_segment_ending_inside_an_old_command_is_its_end() {
        let mut old = Vec::new();
        encode_batch_marker(&mut old, 0);
        let mut p = Vec::new();
        encode_command(&mut p, &[&b"SET"[..], b"big", &[b'7'; 3000]]);
        encode_entry(&mut old, 40, RID, 400, &p);
        for _ in 0..8 {
            old.extend_from_slice(FILL_LINE);
        }
        for n in 1..=10 {
            let log = batch(41, n, 40);
            let mut new = log.clone();
            new.extend_from_slice(FILL_LINE);
            assert!(new.len() + 600 < old.len());
            let mut seg = old.clone();
            seg[..new.len()].copy_from_slice(&new);
            let o = scan(&seg, Some(41), |_| Ok(()));
            let bad = o.bad.expect("old content after the log");
            assert_eq!(bad.damage, Damage::RecycledEnd, "{n} entries: {bad:?}");
            assert_eq!(o.valid_len, log.len() as u64);
            assert_eq!(o.last_lsn, Some(40 + n));
            // Without the writer's filler line the piece could be a damaged entry.
            let mut bare = old.clone();
            bare[..log.len()].copy_from_slice(&log);
            let o = scan(&bare, Some(41), |_| Ok(()));
            assert_eq!(o.bad.unwrap().damage, Damage::Corruption, "{n} entries");
            // A whole new entry after the old piece proves acknowledged writes follow.
            let mut later = seg.clone();
            let after = batch(41 + n + 1, 1, 41 + n);
            let at = new.len() + 100;
            later[at..at + after.len()].copy_from_slice(&after);
            let o = scan(&later, Some(41), |_| Ok(()));
            assert_eq!(o.bad.unwrap().damage, Damage::Corruption, "{n} entries");
        }
    }

    #[test]
    fn every_bit_flip_in_an_entry_is_detected_and_a_marker_flip_changes_no_data() {
        let b = batch(1, 2, 0);
        let mut marker_len = 0;
        while !b[marker_len..].starts_with(HDR_PREFIX) {
            marker_len += 1;
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                let mut lsns = Vec::new();
                let o = scan(&c, Some(1), |e| {
                    lsns.push(e.lsn);
                    Ok(())
                });
                if i >= marker_len {
                    assert!(o.bad.is_some(), "flip at byte {i} bit {bit} undetected");
                } else if o.bad.is_none() {
                    // `#BATCH` flipped into another annotation name: skipped as such; the
                    // entries are intact and load as they are.
                    assert_eq!(lsns, vec![Some(1), Some(2)], "flip at byte {i} bit {bit}");
                }
            }
        }
    }
}
