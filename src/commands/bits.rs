//! Bit and string-algorithm commands (Redis's `bitops.c`, LCS): SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD, BITFIELD_RO, LCS.
//!
//! Bits are numbered MSB first: bit 0 is the top bit of byte 0, as in Redis. Writes grow the
//! string with zero bytes and never past `proto-max-bulk-len`, which bounds every
//! allocation a client number can cause.

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_STRING};
use super::strings::{read_string, write_string};
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::arena::Ref;
use crate::keyspace::{Kind, StrEnc, Ttl};
use crate::util::parse_i64;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("setbit", 4, WRITE | DENYOOM, "bitmap", setbit)
        .keys(1, 1, 1)
        .doc(
            "Sets or clears the bit at offset in the string value stored at key",
            "2.2.0",
        ),
    CommandSpec::new("getbit", 3, READONLY | FAST, "bitmap", getbit)
        .keys(1, 1, 1)
        .doc(
            "Returns the bit value at offset in the string value stored at key",
            "2.2.0",
        ),
    CommandSpec::new("bitcount", -2, READONLY, "bitmap", bitcount)
        .keys(1, 1, 1)
        .doc("Count set bits in a string", "2.6.0"),
    CommandSpec::new("bitpos", -3, READONLY, "bitmap", bitpos)
        .keys(1, 1, 1)
        .doc("Find first bit set or clear in a string", "2.8.7"),
    CommandSpec::new("bitop", -4, WRITE | DENYOOM, "bitmap", bitop)
        .keys(2, -1, 1)
        .doc("Perform bitwise operations between strings", "2.6.0"),
    CommandSpec::new("bitfield", -2, WRITE | DENYOOM, "bitmap", bitfield)
        .keys(1, 1, 1)
        .doc(
            "Perform arbitrary bitfield integer operations on strings",
            "3.2.0",
        ),
    CommandSpec::new("bitfield_ro", -2, READONLY | FAST, "bitmap", bitfield_ro)
        .keys(1, 1, 1)
        .doc(
            "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
            "6.0.0",
        ),
    CommandSpec::new("lcs", -3, READONLY, "string", lcs)
        .keys(1, 2, 1)
        .doc("Find longest common substring", "7.0.0"),
];

const ERR_BIT_OFFSET: &str = "bit offset is not an integer or out of range";
const ERR_BIT_VALUE: &str = "bit is not an integer or out of range";
const ERR_BITFIELD_TYPE: &str =
    "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// The largest string a bit command may produce: `proto-max-bulk-len`, and never more
/// than an entry can hold (value lengths are 32-bit in the arena).
fn max_string_bytes(ctx: &Ctx) -> u64 {
    let proto = ctx.srv.config.settings().proto_max_bulk_len.max(0) as u64;
    proto.min(super::strings::MAX_STRING_BYTES)
}

/// Parses a bit offset (Redis's getBitOffsetFromArgument). With `hash_bits` > 0 the
/// `#N` form means N * bits (BITFIELD). The byte holding the bit must stay below the
/// string size limit.
fn parse_bit_offset(ctx: &Ctx, arg: &[u8], hash_bits: u32) -> Result<u64, CmdError> {
    let (digits, hash) = match arg.first() {
        Some(b'#') if hash_bits > 0 => (&arg[1..], true),
        _ => (arg, false),
    };
    let mut off = parse_i64(digits).ok_or_else(|| CmdError::err(ERR_BIT_OFFSET))?;
    if hash {
        // Redis multiplies in C and lets it wrap; the range check below still applies.
        off = off.wrapping_mul(hash_bits as i64);
    }
    if off < 0 || (off as u64 >> 3) >= max_string_bytes(ctx) {
        return Err(CmdError::err(ERR_BIT_OFFSET));
    }
    Ok(off as u64)
}

/// Looks up (or creates) a string for a bit write and grows it with zeros so that bit
/// `maxbit` exists. The value becomes `raw`, as Redis unshares it. Returns the entry and
/// whether the string was created or grown.
fn string_for_bit_write(ctx: &mut Ctx, maxbit: u64) -> Result<(Ref, bool), CmdError> {
    let key = ctx.args.get(1);
    let db = ctx.client.db;
    // `maxbit >> 3` is below max_string_bytes (checked when parsing the offset).
    let need = (maxbit >> 3) as usize + 1;
    let existing = write_string(ctx, key)?;
    let old = existing.map_or(0, |e| ctx.srv.ks.value(e).len());
    if old < need {
        ctx.ensure_arena_room(need as u64)?;
    }
    match existing {
        None => {
            let e = ctx.srv.ks.set_string(db, key, b"", StrEnc::Raw, Ttl::Clear);
            Ok((ctx.srv.ks.resize_value(db, e, need), true))
        }
        Some(e) => {
            let old = ctx.srv.ks.value(e).len();
            let e = if old < need {
                ctx.srv.ks.resize_value(db, e, need)
            } else {
                e
            };
            ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
            Ok((e, old < need))
        }
    }
}

fn setbit(ctx: &mut Ctx) -> CmdResult {
    let off = parse_bit_offset(ctx, ctx.args.get(2), 0)?;
    let on = parse_i64(ctx.args.get(3)).ok_or_else(|| CmdError::err(ERR_BIT_VALUE))?;
    if on & !1 != 0 {
        return Err(CmdError::err(ERR_BIT_VALUE));
    }
    let (e, grown) = string_for_bit_write(ctx, off)?;
    let byte = (off >> 3) as usize;
    let mask = 0x80u8 >> (off & 7);
    let v = &mut ctx.srv.ks.value_mut(e)[byte];
    let old = *v & mask != 0;
    if on == 1 {
        *v |= mask;
    } else {
        *v &= !mask;
    }
    if grown || old != (on == 1) {
        ctx.dirty(1);
        notify(ctx, NOTIFY_STRING, "setbit", ctx.args.get(1));
    }
    ctx.out.int(old as i64);
    Ok(())
}

fn getbit(ctx: &mut Ctx) -> CmdResult {
    let off = parse_bit_offset(ctx, ctx.args.get(2), 0)?;
    let key = ctx.args.get(1);
    let bit = match read_string(ctx, key)? {
        Some(e) => {
            let v = ctx.srv.ks.value(e);
            let byte = (off >> 3) as usize;
            byte < v.len() && v[byte] & (0x80 >> (off & 7)) != 0
        }
        None => false,
    };
    ctx.out.int(bit as i64);
    Ok(())
}

/// A byte or bit range normalised like Redis's BITCOUNT/BITPOS: inclusive byte bounds
/// plus masks of the out-of-range bits in the first and last byte (BIT mode).
struct ByteRange {
    start: i64,
    end: i64,
    /// Bits of byte `start` before the range (BIT mode), as a mask.
    first_out: u8,
    /// Bits of byte `end` after the range (BIT mode), as a mask.
    last_out: u8,
}

/// Resolves negative indexes and clamps to the string (`len` bytes); `isbit` means the
/// bounds count bits. The caller has already handled the "both negative, start > end" case.
fn normalise_range(len: i64, mut start: i64, mut end: i64, isbit: bool) -> ByteRange {
    let total = if isbit { len << 3 } else { len };
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    let (mut first_out, mut last_out) = (0u8, 0u8);
    if isbit && start <= end {
        first_out = !(0xFFu8 >> (start & 7));
        last_out = (0xFFu8 >> (end & 7)) >> 1;
        start >>= 3;
        end >>= 3;
    }
    ByteRange {
        start,
        end,
        first_out,
        last_out,
    }
}

fn parse_bit_unit(arg: &[u8]) -> Result<bool, CmdError> {
    if arg.eq_ignore_ascii_case(b"BIT") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"BYTE") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

fn popcount(b: &[u8]) -> i64 {
    let mut chunks = b.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        n += u64::from_ne_bytes(w).count_ones() as u64;
    }
    n += chunks
        .remainder()
        .iter()
        .map(|x| x.count_ones() as u64)
        .sum::<u64>();
    n as i64
}

fn bitcount(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    // Redis answers 0 for a missing key before looking at the other arguments.
    let Some(e) = read_string(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let argc = ctx.args.len();
    let len = ctx.srv.ks.value(e).len() as i64;
    let r = match argc {
        2 => ByteRange {
            start: 0,
            end: len - 1,
            first_out: 0,
            last_out: 0,
        },
        4 | 5 => {
            let start = ctx.args.i64(2)?;
            let end = ctx.args.i64(3)?;
            if start < 0 && end < 0 && start > end {
                ctx.out.int(0);
                return Ok(());
            }
            let isbit = if argc == 5 {
                parse_bit_unit(ctx.args.get(4))?
            } else {
                false
            };
            normalise_range(len, start, end, isbit)
        }
        _ => return Err(CmdError::Syntax),
    };
    if r.start > r.end {
        ctx.out.int(0);
        return Ok(());
    }
    let v = ctx.srv.ks.value(e);
    let (s, t) = (r.start as usize, r.end as usize);
    let mut n = popcount(&v[s..=t]);
    n -= (v[s] & r.first_out).count_ones() as i64;
    n -= (v[t] & r.last_out).count_ones() as i64;
    ctx.out.int(n);
    Ok(())
}

/// Position of the first `bit` in `b` (Redis's redisBitpos): for bit 0 with none found it
/// answers `8 * len` (the string is taken as zero padded), for bit 1 it answers -1.
fn first_bit(b: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0u8 } else { 0xFF };
    match b.iter().position(|&x| x != skip) {
        Some(i) => {
            let x = if bit { b[i] } else { !b[i] };
            (i as i64) * 8 + x.leading_zeros() as i64
        }
        None if bit => -1,
        None => (b.len() as i64) * 8,
    }
}

fn bitpos(ctx: &mut Ctx) -> CmdResult {
    let bit = ctx.args.i64(2)?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    let key = ctx.args.get(1);
    let Some(e) = read_string(ctx, key)? else {
        // A missing key is an infinite run of zeros.
        ctx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let argc = ctx.args.len();
    let len = ctx.srv.ks.value(e).len() as i64;
    let mut end_given = false;
    let r = match argc {
        3 => ByteRange {
            start: 0,
            end: len - 1,
            first_out: 0,
            last_out: 0,
        },
        4..=6 => {
            let start = ctx.args.i64(3)?;
            let isbit = if argc == 6 {
                parse_bit_unit(ctx.args.get(5))?
            } else {
                false
            };
            let end = if argc >= 5 {
                end_given = true;
                ctx.args.i64(4)?
            } else if isbit {
                (len << 3) + 7
            } else {
                len - 1
            };
            normalise_range(len, start, end, isbit)
        }
        _ => return Err(CmdError::Syntax),
    };
    if r.start > r.end {
        ctx.out.int(-1);
        return Ok(());
    }
    let v = ctx.srv.ks.value(e);
    let (mut start, end) = (r.start as usize, r.end as usize);
    let mut bytes = end - start + 1;
    // Bits outside the range are forced to the value we are not looking for.
    let force = |x: u8, out: u8| if bit { x & !out } else { x | out };
    let pos = 'found: {
        if r.first_out != 0 {
            let mut c = force(v[start], r.first_out);
            if r.last_out != 0 && bytes == 1 {
                c = force(c, r.last_out);
            }
            let p = first_bit(&[c], bit);
            if bytes == 1 || (p != -1 && p != 8) {
                break 'found p;
            }
            start += 1;
            bytes -= 1;
        }
        let whole = bytes - (r.last_out != 0) as usize;
        if whole > 0 {
            let p = first_bit(&v[start..start + whole], bit);
            if bytes == whole || (p != -1 && p != (whole as i64) << 3) {
                break 'found p;
            }
            start += whole;
            bytes -= whole;
        }
        first_bit(&[force(v[end], r.last_out)], bit)
    };
    // With an explicit end, a clear bit "past the range" is not in the range.
    if end_given && !bit && pos == (bytes as i64) << 3 {
        ctx.out.int(-1);
        return Ok(());
    }
    ctx.out.int(if pos == -1 {
        -1
    } else {
        pos + ((start as i64) << 3)
    });
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args.get(1);
    let op = if name.eq_ignore_ascii_case(b"AND") {
        BitOp::And
    } else if name.eq_ignore_ascii_case(b"OR") {
        BitOp::Or
    } else if name.eq_ignore_ascii_case(b"XOR") {
        BitOp::Xor
    } else if name.eq_ignore_ascii_case(b"NOT") {
        BitOp::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if op == BitOp::Not && ctx.args.len() != 4 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    let db = ctx.client.db;
    // Pass 1: expiry, type checks, stats and the longest length. Lookups may free expired
    // keys, so no entry reference is kept across them.
    let mut maxlen = 0usize;
    for i in 3..ctx.args.len() {
        if let Some(e) = read_string(ctx, ctx.args.get(i))? {
            maxlen = maxlen.max(ctx.srv.ks.value(e).len());
        }
    }
    // Pass 2: fold each source into the result (missing bytes count as zero). The result
    // is no longer than the longest existing string, so this allocation is bounded.
    let mut res = vec![0u8; maxlen];
    if maxlen > 0 {
        for i in 3..ctx.args.len() {
            let src: &[u8] = match ctx.srv.ks.find_raw(db, ctx.args.get(i)) {
                Some(e) if ctx.srv.ks.kind(e) == Kind::String => ctx.srv.ks.value(e),
                _ => b"",
            };
            if i == 3 {
                res[..src.len()].copy_from_slice(src);
                if op == BitOp::Not {
                    res.iter_mut().for_each(|b| *b = !*b);
                }
                continue;
            }
            match op {
                BitOp::And => {
                    res[src.len()..].fill(0);
                    res.iter_mut().zip(src).for_each(|(r, s)| *r &= s);
                }
                BitOp::Or => res.iter_mut().zip(src).for_each(|(r, s)| *r |= s),
                BitOp::Xor => res.iter_mut().zip(src).for_each(|(r, s)| *r ^= s),
                BitOp::Not => {}
            }
        }
    }
    let target = ctx.args.get(2);
    if maxlen > 0 {
        ctx.ensure_arena_room(res.len() as u64)?;
        ctx.srv.ks.find(db, target, ctx.now_ms);
        ctx.srv
            .ks
            .set_string(db, target, &res, StrEnc::Raw, Ttl::Clear);
        ctx.dirty(1);
        notify(ctx, NOTIFY_STRING, "set", target);
    } else if ctx.srv.ks.delete_no_lookup(db, target) {
        ctx.dirty(1);
        notify(ctx, NOTIFY_GENERIC, "del", target);
    }
    ctx.out.int(maxlen as i64);
    Ok(())
}

// ---- BITFIELD ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

#[derive(Clone, Copy)]
struct FieldCmd {
    op: FieldOp,
    offset: u64,
    /// SET value or INCRBY increment.
    arg: i64,
    overflow: Overflow,
    bits: u32,
    signed: bool,
}

/// Parses `i<1..64>` or `u<1..63>` (u64 cannot be returned as a RESP integer).
fn parse_field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(CmdError::err(ERR_BITFIELD_TYPE)),
    };
    match parse_i64(&arg[1..]) {
        Some(b) if b >= 1 && b <= if signed { 64 } else { 63 } => Ok((signed, b as u32)),
        _ => Err(CmdError::err(ERR_BITFIELD_TYPE)),
    }
}

fn get_unsigned_field(p: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..bits as u64 {
        let o = offset + i;
        let bit = (p[(o >> 3) as usize] >> (7 - (o & 7))) & 1;
        v = (v << 1) | bit as u64;
    }
    v
}

fn get_signed_field(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned_field(p, offset, bits);
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

fn set_field(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let bit = (value >> (bits as u64 - 1 - i)) & 1;
        let o = offset + i;
        let byte = &mut p[(o >> 3) as usize];
        let mask = 0x80u8 >> (o & 7);
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Redis's checkUnsignedBitfieldOverflow: `Some(limit)` on overflow, where limit is the
/// value to store under WRAP/SAT (unused under FAIL).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1; // bits <= 63
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    if value > max || (incr > 0 && incr > maxincr) {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => max,
        })
    } else if incr < 0 && incr < minincr {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => 0,
        })
    } else {
        None
    }
}

/// Redis's checkSignedBitfieldOverflow, with its exact conditions (including for i64).
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => max,
        })
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => min,
        })
    } else {
        None
    }
}

fn bitfield(ctx: &mut Ctx) -> CmdResult {
    bitfield_generic(ctx, false)
}

fn bitfield_ro(ctx: &mut Ctx) -> CmdResult {
    bitfield_generic(ctx, true)
}

fn bitfield_generic(ctx: &mut Ctx, ro: bool) -> CmdResult {
    let mut ops: Vec<FieldCmd> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest_write: Option<u64> = None;
    let argc = ctx.args.len();
    let mut j = 2;
    while j < argc {
        let rem = argc - j - 1;
        let sub = ctx.args.get(j);
        let op = if sub.eq_ignore_ascii_case(b"GET") && rem >= 2 {
            FieldOp::Get
        } else if sub.eq_ignore_ascii_case(b"SET") && rem >= 3 {
            FieldOp::Set
        } else if sub.eq_ignore_ascii_case(b"INCRBY") && rem >= 3 {
            FieldOp::IncrBy
        } else if sub.eq_ignore_ascii_case(b"OVERFLOW") && rem >= 1 {
            let t = ctx.args.get(j + 1);
            overflow = if t.eq_ignore_ascii_case(b"WRAP") {
                Overflow::Wrap
            } else if t.eq_ignore_ascii_case(b"SAT") {
                Overflow::Sat
            } else if t.eq_ignore_ascii_case(b"FAIL") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = parse_field_type(ctx.args.get(j + 1))?;
        let offset = parse_bit_offset(ctx, ctx.args.get(j + 2), bits)?;
        let mut arg = 0;
        if op != FieldOp::Get {
            let last = offset + bits as u64 - 1;
            highest_write = Some(highest_write.map_or(last, |h| h.max(last)));
            arg = ctx.args.i64(j + 3)?;
        }
        ops.push(FieldCmd {
            op,
            offset,
            arg,
            overflow,
            bits,
            signed,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }

    let key = ctx.args.get(1);
    let (entry, grown) = match highest_write {
        None => (read_string(ctx, key)?, false),
        Some(_) if ro => {
            return Err(CmdError::err(
                "BITFIELD_RO only supports the GET subcommand",
            ))
        }
        Some(h) => {
            // The last bit written may sit a few bits past the offset limit; the string
            // then is at most proto-max-bulk-len + 8 bytes, as in Redis.
            let (e, grown) = string_for_bit_write(ctx, h)?;
            (Some(e), grown)
        }
    };

    ctx.out.array(ops.len());
    let mut changes = 0u64;
    for f in &ops {
        match f.op {
            FieldOp::Get => {
                // Read through a zero-padded 9-byte window so fields may run past the end.
                let mut buf = [0u8; 9];
                let byte = f.offset >> 3;
                if let Some(e) = entry {
                    let v = ctx.srv.ks.value(e);
                    if (byte as usize) < v.len() {
                        let src = &v[byte as usize..];
                        let n = src.len().min(9);
                        buf[..n].copy_from_slice(&src[..n]);
                    }
                }
                let rel = f.offset - byte * 8;
                if f.signed {
                    ctx.out.int(get_signed_field(&buf, rel, f.bits));
                } else {
                    ctx.out.int(get_unsigned_field(&buf, rel, f.bits) as i64);
                }
            }
            FieldOp::Set | FieldOp::IncrBy => {
                // A write op implies the entry exists and is long enough.
                let Some(e) = entry else { continue };
                let v = ctx.srv.ks.value_mut(e);
                let (ret, old, new, failed) = if f.signed {
                    let old = get_signed_field(v, f.offset, f.bits);
                    let (newval, ov, ret) = if f.op == FieldOp::IncrBy {
                        let ov = signed_overflow(old, f.arg, f.bits, f.overflow);
                        let n = ov.unwrap_or(old.wrapping_add(f.arg));
                        (n, ov.is_some(), n)
                    } else {
                        let ov = signed_overflow(f.arg, 0, f.bits, f.overflow);
                        (ov.unwrap_or(f.arg), ov.is_some(), old)
                    };
                    (
                        ret,
                        old as u64,
                        newval as u64,
                        ov && f.overflow == Overflow::Fail,
                    )
                } else {
                    let old = get_unsigned_field(v, f.offset, f.bits);
                    let (newval, ov, ret) = if f.op == FieldOp::IncrBy {
                        let ov = unsigned_overflow(old, f.arg, f.bits, f.overflow);
                        let n = ov.unwrap_or(old.wrapping_add(f.arg as u64));
                        (n, ov.is_some(), n)
                    } else {
                        let ov = unsigned_overflow(f.arg as u64, 0, f.bits, f.overflow);
                        (ov.unwrap_or(f.arg as u64), ov.is_some(), old)
                    };
                    (ret as i64, old, newval, ov && f.overflow == Overflow::Fail)
                };
                if failed {
                    ctx.out.null();
                    continue;
                }
                set_field(v, f.offset, f.bits, new);
                if grown || old != new {
                    changes += 1;
                }
                ctx.out.int(ret);
            }
        }
    }
    ctx.dirty(changes);
    if changes > 0 {
        notify(ctx, NOTIFY_STRING, "setbit", ctx.args.get(1));
    }
    Ok(())
}

// ---- LCS --------------------------------------------------------------------------------

fn lcs(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let (ka, kb) = (ctx.args.get(1), ctx.args.get(2));
    let wrong = |ctx: &mut Ctx, k: &[u8]| match ctx.srv.ks.lookup_read(db, k, ctx.now_ms) {
        Some(e) => ctx.srv.ks.kind(e) != Kind::String,
        None => false,
    };
    let (wa, wb) = (wrong(ctx, ka), wrong(ctx, kb));
    if wa || wb {
        return Err(CmdError::err(
            "The specified keys must contain string values",
        ));
    }
    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut j = 3;
    while j < ctx.args.len() {
        let more = ctx.args.len() - 1 - j;
        if ctx.args.is(j, "IDX") {
            getidx = true;
        } else if ctx.args.is(j, "LEN") {
            getlen = true;
        } else if ctx.args.is(j, "WITHMATCHLEN") {
            withmatchlen = true;
        } else if ctx.args.is(j, "MINMATCHLEN") && more > 0 {
            minmatchlen = ctx.args.i64(j + 1)?.max(0);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if getlen && getidx {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    // Both keys were looked up above (expired ones are gone), so plain finds are enough
    // and nothing below allocates in the keyspace.
    let value = |k: &[u8]| -> &[u8] {
        match ctx.srv.ks.find_raw(db, k) {
            Some(e) => ctx.srv.ks.value(e),
            None => b"",
        }
    };
    let (a, b) = (value(ka), value(kb));
    if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
        return Err(CmdError::err("String too long for LCS"));
    }
    // The dynamic-programming table has (|a|+1)*(|b|+1) u32 cells. Like Redis, refuse a
    // table larger than proto-max-bulk-len instead of allocating without bound.
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    let table_bytes = cells.saturating_mul(4);
    let limit = ctx.srv.config.settings().proto_max_bulk_len.max(0) as u64;
    if table_bytes > limit {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let mut table: Vec<u32> = Vec::new();
    if usize::try_from(cells)
        .ok()
        .and_then(|n| table.try_reserve_exact(n).ok())
        .is_none()
    {
        return Err(CmdError::err(
            "Insufficient memory, failed allocating transient memory for LCS",
        ));
    }
    table.resize(cells as usize, 0);
    let w = blen + 1;
    for i in 1..=alen {
        for jj in 1..=blen {
            table[i * w + jj] = if a[i - 1] == b[jj - 1] {
                table[(i - 1) * w + jj - 1] + 1
            } else {
                table[(i - 1) * w + jj].max(table[i * w + jj - 1])
            };
        }
    }
    let total = table[alen * w + blen];

    // Walk back from the end, collecting the common subsequence and its contiguous ranges
    // (in the order Redis reports them: from the end of the strings).
    let computelcs = getidx || !getlen;
    let mut result = vec![0u8; if computelcs { total as usize } else { 0 }];
    let mut idx = total as usize;
    let mut ranges: Vec<(u32, u32, u32, u32)> = Vec::new();
    let (mut i, mut jj) = (alen, blen);
    let unset = alen as u32;
    let (mut as_, mut ae, mut bs, mut be) = (unset, 0u32, 0u32, 0u32);
    while computelcs && i > 0 && jj > 0 {
        let mut emit = false;
        if a[i - 1] == b[jj - 1] {
            result[idx - 1] = a[i - 1];
            if as_ == unset {
                as_ = (i - 1) as u32;
                ae = as_;
                bs = (jj - 1) as u32;
                be = bs;
            } else if as_ == i as u32 && bs == jj as u32 {
                as_ -= 1;
                bs -= 1;
            } else {
                emit = true;
            }
            if as_ == 0 || bs == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            jj -= 1;
        } else {
            if table[(i - 1) * w + jj] > table[i * w + jj - 1] {
                i -= 1;
            } else {
                jj -= 1;
            }
            if as_ != unset {
                emit = true;
            }
        }
        if emit {
            let match_len = ae - as_ + 1;
            if minmatchlen == 0 || match_len as i64 >= minmatchlen {
                ranges.push((as_, ae, bs, be));
            }
            as_ = unset;
        }
    }
    drop(table);

    if getidx {
        ctx.out.map(2);
        ctx.out.bulk(b"matches");
        ctx.out.array(ranges.len());
        for &(as_, ae, bs, be) in &ranges {
            ctx.out.array(2 + withmatchlen as usize);
            ctx.out.array(2);
            ctx.out.int(as_ as i64);
            ctx.out.int(ae as i64);
            ctx.out.array(2);
            ctx.out.int(bs as i64);
            ctx.out.int(be as i64);
            if withmatchlen {
                ctx.out.int((ae - as_ + 1) as i64);
            }
        }
        ctx.out.bulk(b"len");
        ctx.out.int(total as i64);
    } else if getlen {
        ctx.out.int(total as i64);
    } else {
        ctx.out.bulk(&result);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_roundtrip_msb_first() {
        let mut p = [0u8; 4];
        set_field(&mut p, 3, 5, 0b10110);
        assert_eq!(p[0], 0b0001_0110);
        assert_eq!(get_unsigned_field(&p, 3, 5), 0b10110);
        assert_eq!(get_signed_field(&p, 3, 5), -10);
        set_field(&mut p, 0, 32, u32::MAX as u64);
        assert_eq!(get_signed_field(&p, 0, 32), -1);
    }

    #[test]
    fn overflow_rules_match_redis() {
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_overflow(100, 27, 8, Overflow::Wrap), None);
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(
            signed_overflow(i64::MIN, -1, 64, Overflow::Sat),
            Some(i64::MIN)
        );
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), Some(0));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Overflow::Wrap), Some(255));
        assert_eq!(unsigned_overflow(5, -5, 8, Overflow::Wrap), None);
    }

    #[test]
    fn first_bit_pads_with_zeros() {
        assert_eq!(first_bit(&[0xFF, 0xFF], false), 16);
        assert_eq!(first_bit(&[0, 0], true), -1);
        assert_eq!(first_bit(&[0, 0x10], true), 11);
        assert_eq!(first_bit(&[0xFF, 0xF7], false), 12);
        assert_eq!(popcount(&[0xFF; 19]), 152);
    }

    // ---- whole-command checks of what the wire cannot show yet (encodings, TTLs) --------

    use crate::commands::executor::{Client, Server};
    use crate::config::Config;

    fn server(opts: &[(&str, &str)]) -> (Server, Box<Client>) {
        let mut cfg = Config::default();
        cfg.set_many(opts, false).unwrap();
        let mut srv = Server::new(cfg).unwrap();
        let c = srv.alloc_client("127.0.0.1:1".into(), "127.0.0.1:2".into());
        (srv, c)
    }

    use crate::commands::executor::testing::run;

    fn enc(srv: &Server, key: &str) -> StrEnc {
        srv.ks.str_enc(srv.ks.find_raw(0, key.as_bytes()).unwrap())
    }

    fn ttl(srv: &Server, key: &str) -> Option<i64> {
        srv.ks
            .expire_at(srv.ks.find_raw(0, key.as_bytes()).unwrap())
    }

    #[test]
    fn encodings_follow_redis() {
        let (mut s, mut c) = server(&[]);
        run(&mut s, &mut c, &["SET", "n", "12"]);
        assert_eq!(enc(&s, "n"), StrEnc::Int);
        // SETBIT unshares the value even when the bit does not change.
        assert_eq!(run(&mut s, &mut c, &["SETBIT", "n", "2", "1"]), ":1\r\n");
        assert_eq!(enc(&s, "n"), StrEnc::Raw);
        run(&mut s, &mut c, &["SET", "f", "1"]);
        assert_eq!(
            run(&mut s, &mut c, &["INCRBYFLOAT", "f", "0.5"]),
            "$3\r\n1.5\r\n"
        );
        assert_eq!(enc(&s, "f"), StrEnc::Embstr);
        run(&mut s, &mut c, &["INCRBYFLOAT", "f", "1e50"]);
        assert_eq!(enc(&s, "f"), StrEnc::Raw);
        run(&mut s, &mut c, &["APPEND", "a", "123"]);
        assert_eq!(enc(&s, "a"), StrEnc::Int);
        run(&mut s, &mut c, &["APPEND", "a", "4"]);
        assert_eq!(enc(&s, "a"), StrEnc::Raw);
        run(&mut s, &mut c, &["BITOP", "OR", "o", "n"]);
        assert_eq!(enc(&s, "o"), StrEnc::Raw);
        run(&mut s, &mut c, &["BITFIELD", "bf", "SET", "u8", "0", "65"]);
        assert_eq!(enc(&s, "bf"), StrEnc::Raw);
    }

    #[test]
    fn ttls_kept_or_cleared_as_redis() {
        let (mut s, mut c) = server(&[]);
        for k in ["f", "b", "d", "i"] {
            run(&mut s, &mut c, &["SET", k, "1", "EX", "1000"]);
        }
        run(&mut s, &mut c, &["INCRBYFLOAT", "f", "1.5"]);
        assert!(ttl(&s, "f").is_some());
        run(&mut s, &mut c, &["SETBIT", "b", "100", "1"]);
        assert!(ttl(&s, "b").is_some());
        run(&mut s, &mut c, &["INCR", "i"]);
        assert!(ttl(&s, "i").is_some());
        run(&mut s, &mut c, &["BITOP", "NOT", "d", "b"]);
        assert_eq!(ttl(&s, "d"), None);
    }

    #[test]
    fn limits_follow_proto_max_bulk_len() {
        let (mut s, mut c) = server(&[("proto-max-bulk-len", "2000000")]);
        let off_err = "-ERR bit offset is not an integer or out of range\r\n";
        assert_eq!(
            run(&mut s, &mut c, &["SETBIT", "q", "16000000", "1"]),
            off_err
        );
        assert_eq!(
            run(&mut s, &mut c, &["SETBIT", "q", "15999999", "1"]),
            ":0\r\n"
        );
        assert_eq!(run(&mut s, &mut c, &["STRLEN", "q"]), ":2000000\r\n");
        assert_eq!(
            run(
                &mut s,
                &mut c,
                &["BITFIELD", "q", "SET", "u8", "#2000000", "1"]
            ),
            off_err
        );
        // The last field may reach a few bits past the limit, as in Redis.
        assert_eq!(
            run(
                &mut s,
                &mut c,
                &["BITFIELD", "q", "SET", "u16", "15999999", "1"]
            ),
            "*1\r\n:32768\r\n"
        );
        assert_eq!(run(&mut s, &mut c, &["STRLEN", "q"]), ":2000002\r\n");
        assert_eq!(
            run(&mut s, &mut c, &["SETRANGE", "r", "2000000", "a"]),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        // LCS: a 708x708 table is 4 * 709 * 709 = 2 010 724 bytes, over the limit.
        let long = "a".repeat(708);
        run(&mut s, &mut c, &["SET", "x", &long]);
        run(&mut s, &mut c, &["SET", "y", &long]);
        assert_eq!(
            run(&mut s, &mut c, &["LCS", "x", "y", "LEN"]),
            "-ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len\r\n"
        );
        run(&mut s, &mut c, &["SET", "y", &long[..700]]);
        assert_eq!(run(&mut s, &mut c, &["LCS", "x", "y", "LEN"]), ":700\r\n");
    }

    /// Every string and bit command against a non-string key (no other type's commands
    /// exist in this crate yet, so the key is made through the keyspace API). Expected
    /// replies are Redis 7.0.15's.
    #[test]
    fn wrong_type_replies() {
        let (mut s, mut c) = server(&[]);
        let wt = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        let cases: &[(&[&str], &str)] = &[
            (&["SETBIT", "l", "1", "1"], wt),
            (
                &["SETBIT", "l", "x", "1"],
                "-ERR bit offset is not an integer or out of range\r\n",
            ),
            (&["GETBIT", "l", "1"], wt),
            (&["BITCOUNT", "l"], wt),
            (&["BITCOUNT", "l", "x"], wt),
            (&["BITPOS", "l", "1"], wt),
            (
                &["BITPOS", "l", "2"],
                "-ERR The bit argument must be 1 or 0.\r\n",
            ),
            (&["BITFIELD", "l", "GET", "u8", "0"], wt),
            (&["BITFIELD", "l", "SET", "u8", "0", "1"], wt),
            (&["BITFIELD_RO", "l", "GET", "u8", "0"], wt),
            (
                &["LCS", "l", "x"],
                "-ERR The specified keys must contain string values\r\n",
            ),
            (
                &["LCS", "x", "l", "LEN"],
                "-ERR The specified keys must contain string values\r\n",
            ),
            (&["INCRBYFLOAT", "l", "1"], wt),
            (&["INCRBYFLOAT", "l", "x"], wt),
            (&["SET", "l", "v", "GET"], wt),
            (&["GETEX", "l"], wt),
            (&["GETEX", "l", "EX", "x"], wt),
            (&["GETDEL", "l"], wt),
            (&["GETSET", "l", "v"], wt),
            (&["APPEND", "l", "x"], wt),
            (&["SETRANGE", "l", "0", ""], wt),
            (&["GETRANGE", "l", "0", "1"], wt),
            (
                &["GETRANGE", "l", "x", "1"],
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["STRLEN", "l"], wt),
            (&["INCR", "l"], wt),
            (
                &["INCRBY", "l", "x"],
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["MGET", "l"], "*1\r\n$-1\r\n"),
            (&["BITOP", "OR", "x", "l"], wt),
            (&["TYPE", "l"], "+list\r\n"),
        ];
        for (args, want) in cases {
            s.ks.set_value(0, b"l", Kind::List, 0, b"", Ttl::Clear);
            run(&mut s, &mut c, &["SET", "x", "abc"]);
            assert_eq!(run(&mut s, &mut c, args), *want, "{args:?}");
        }
        // A non-string destination is simply replaced.
        s.ks.set_value(0, b"l", Kind::List, 0, b"", Ttl::Clear);
        assert_eq!(run(&mut s, &mut c, &["BITOP", "OR", "l", "x"]), ":3\r\n");
        assert_eq!(run(&mut s, &mut c, &["GET", "l"]), "$3\r\nabc\r\n");
    }
}
