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

/// Where and why a scan stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad {
    /// Offset of the first byte that is not part of a valid entry.
    pub offset: u64,
    /// The LSN the log expected there (last valid + 1), if known.
    pub expected_lsn: Option<u64>,
    pub reason: String,
    /// True when no valid entry follows: a torn tail (the end of an interrupted write),
    /// which recovery may cut. False: corruption in the middle of the log.
    pub torn_tail: bool,
    /// Valid entries older than the expected LSN follow: the rest is a recycled segment's
    /// old content (the log's normal end there, not damage).
    pub stale_follows: bool,
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

/// True if something after `from` proves that the bad spot before it lies in the middle of
/// the acknowledged log: a valid headed entry (LSN not below `expected`, so not a stale
/// entry of a recycled segment) written by a batch issued when `expected` was already
/// durable. Entries of batches issued earlier (their marker's durable LSN is below
/// `expected`) were in flight together with the missing one and never acknowledged, so a
/// hole before them is a torn tail. `batch_d` is the marker of the batch the bad spot is in.
/// Also returns whether stale entries were seen.
fn evidence_after(
    b: &[u8],
    from: usize,
    expected: Option<u64>,
    batch_d: Option<u64>,
) -> (bool, bool) {
    let mut pos = from;
    let mut marker = batch_d;
    let mut stale_seen = false;
    while pos < b.len() {
        let Some(p) = b[pos..].iter().position(|&c| c == b'#') else {
            return (false, stale_seen);
        };
        let at = pos + p;
        match step(b, at, true) {
            Step::Batch(d, next) => {
                marker = Some(d);
                pos = next;
                continue;
            }
            Step::Zero | Step::Fill => {
                if only_filler(&b[at..]) {
                    return (false, stale_seen);
                }
                let mut p = at;
                while b[p..].starts_with(FILL_LINE) {
                    p += FILL_LINE.len();
                }
                pos = p.max(at + 1);
                continue;
            }
            Step::Entry(e, _) => {
                let stale = matches!((e.lsn, expected), (Some(l), Some(x)) if l < x);
                let unacked = matches!((marker, expected), (Some(d), Some(x)) if d < x);
                stale_seen |= stale;
                if !stale && !unacked {
                    return (true, stale_seen);
                }
            }
            _ => {}
        }
        pos = at + 1;
    }
    (false, stale_seen)
}

/// Reads `b` forward, verifying each entry's CRC and that LSNs rise by exactly one (the
/// first entry's LSN must be `first_lsn` when given). Calls `f` for each valid entry; an
/// Err from `f` stops the scan (reported as a bad entry in the middle). Zero bytes where an
/// entry should start end the log cleanly when only zeroes follow (a pre-allocated
/// segment's unused part); an entry whose LSN is below the expected one is the stale
/// content of a recycled segment and ends the log too (see [`evidence_after`]).
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
    while pos < b.len() {
        let (reason, incomplete) = match step(b, pos, strict) {
            Step::Entry(e, next) => {
                if let (Some(l), Some(want)) = (e.lsn, expected) {
                    if l != want {
                        let reason = if l < want {
                            format!("stale entry LSN {l} where {want} was expected")
                        } else {
                            format!("LSN {l} where {want} was expected")
                        };
                        out.bad = Some(bad(b, pos, expected, batch_d, reason, false));
                        return out;
                    }
                }
                if let Err(reason) = f(&e) {
                    out.bad = Some(Bad {
                        offset: pos as u64,
                        expected_lsn: expected,
                        reason,
                        torn_tail: false,
                        stale_follows: false,
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
                    continue;
                }
                ("zero bytes inside the log".to_string(), false)
            }
            Step::Incomplete(r) => (r, true),
            Step::Malformed(r) => (r, false),
        };
        out.bad = Some(bad(b, pos, expected, batch_d, reason, incomplete));
        return out;
    }
    out
}

fn bad(
    b: &[u8],
    pos: usize,
    expected: Option<u64>,
    batch_d: Option<u64>,
    reason: String,
    incomplete: bool,
) -> Bad {
    let (evidence, stale_follows) = if incomplete {
        (false, false)
    } else {
        evidence_after(b, pos, expected, batch_d)
    };
    Bad {
        offset: pos as u64,
        expected_lsn: expected,
        reason,
        torn_tail: !evidence,
        stale_follows,
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
                assert!(o.bad.as_ref().unwrap().torn_tail, "cut at {cut}");
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
        assert!(!bad.torn_tail);
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
    fn zero_tail_is_a_clean_end_and_every_truncation_into_it_a_torn_tail() {
        // A pre-allocated segment: the log, then zeroes. A write torn anywhere in the
        // last three entries (the rest of the segment still zero) loads the longest
        // valid prefix.
        let b = batch(1, 5, 0);
        let ends: Vec<usize> = {
            let mut v = Vec::new();
            scan(&b, Some(1), |e| {
                v.push(e.offset as usize);
                Ok(())
            });
            v.push(b.len());
            v
        };
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
        for cut in ends[2]..b.len() {
            let mut seg = b[..cut].to_vec();
            for _ in 0..100 {
                seg.extend_from_slice(FILL_LINE);
            }
            let o = scan(&seg, Some(1), |_| Ok(()));
            // The entries that were whole, and no more (a cut right after an entry may
            // leave a lone `#` that reads as an annotation together with the next filler
            // line: skipped, like any annotation).
            let whole = ends.iter().filter(|&&e| e <= cut).count() as u64 - 1;
            assert_eq!(o.last_lsn, Some(whole), "filler, cut at {cut}");
            assert!(o.bad.as_ref().is_none_or(|b| b.torn_tail), "cut at {cut}");
        }
        for cut in ends[2]..b.len() {
            let mut seg = b[..cut].to_vec();
            seg.resize(b.len() + 8192, 0);
            let o = scan(&seg, Some(1), |_| Ok(()));
            let want = *ends.iter().filter(|&&e| e <= cut).max().unwrap() as u64;
            assert_eq!(o.valid_len, want, "cut at {cut}");
            if let Some(bad) = &o.bad {
                assert!(bad.torn_tail, "cut at {cut}: {bad:?}");
            } else {
                assert!(o.zero_tail);
            }
        }
    }

    #[test]
    fn hole_left_by_writes_in_flight_is_a_torn_tail() {
        // Batches 1-2 durable; batches 3 and 4 were issued while only LSN 4 was durable
        // (in flight together); batch 3 never reached the disk (zeroes), batch 4 did.
        let mut b = batch(1, 2, 0);
        b.extend_from_slice(&batch(3, 2, 2));
        let hole_at = b.len();
        let b3 = batch(5, 3, 4);
        b.extend(std::iter::repeat_n(0u8, b3.len()));
        b.extend_from_slice(&batch(8, 2, 4));
        b.resize(b.len() + 4096, 0);
        let o = scan(&b, Some(1), |_| Ok(()));
        let bad = o.bad.expect("the hole");
        assert!(bad.torn_tail, "{bad:?}");
        assert_eq!(o.valid_len, hole_at as u64);
        assert_eq!(o.last_lsn, Some(4));
        // The same hole followed by a batch issued after LSN 5 was durable: entry 5 had
        // been acknowledged, so the hole is corruption in the middle.
        let mut c = batch(1, 4, 0);
        let b5 = batch(5, 1, 4);
        c.extend(std::iter::repeat_n(0u8, b5.len()));
        c.extend_from_slice(&batch(6, 2, 5));
        let o = scan(&c, Some(1), |_| Ok(()));
        let bad = o.bad.expect("the hole");
        assert!(!bad.torn_tail, "{bad:?}");
        assert_eq!(bad.expected_lsn, Some(5));
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
        assert!(bad.torn_tail, "{bad:?}");
        // Every cut of the new content (a torn write over old bytes) stops at the last
        // whole new entry, never accepting an old one.
        for cut in 0..new.len() {
            let mut seg = old.clone();
            seg[..cut].copy_from_slice(&new[..cut]);
            let o = scan(&seg, Some(41), |e| {
                assert!(e.lsn.unwrap() >= 41, "old entry accepted at cut {cut}");
                Ok(())
            });
            assert!(o.bad.as_ref().is_some_and(|b| b.torn_tail), "cut {cut}");
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
