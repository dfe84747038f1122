//! HyperLogLog values in Redis's exact byte format (the format of `hyperloglog.c` in Redis
//! 7.0), on byte slices: the keyspace stores an HLL as an ordinary string, so DUMP,
//! RESTORE, RDB files and GET carry these bytes unchanged and counts match Redis's.
//!
//! Layout: a 16-byte header — `HYLL`, the encoding byte (0 dense, 1 sparse), three unused
//! bytes, the cached cardinality as a little-endian u64 whose top bit set means "stale" —
//! then the registers. Dense: 16384 registers of 6 bits packed from the low bits of each
//! byte upwards (12288 bytes). Sparse: run-length opcodes — ZERO `00xxxxxx` (1..64 zero
//! registers), XZERO `01xxxxxx yyyyyyyy` (1..16384 zero registers), VAL `1vvvvvxx` (1..4
//! registers of value 1..32).
//!
//! Every reader here takes bytes a client may have crafted with SET or RESTORE: walks are
//! bounded by the slice, register indexes by 16384, and a byte past the end reads as 0 —
//! Redis reads the string's NUL terminator there, so a truncated XZERO at the very end
//! decodes as it does in Redis. Inconsistent opcode runs are [`Corrupt`] (Redis's
//! `-INVALIDOBJ`), never an out-of-bounds access.

/// Header bytes before the registers.
pub const HDR_BYTES: usize = 16;
/// log2 of the register count (Redis's HLL_P).
const P: u32 = 14;
/// Bits of the hash left after the register index (Redis's HLL_Q).
const Q: u32 = 64 - P;
pub const REGISTERS: usize = 1 << P;
const REGISTER_MAX: u8 = 63;
/// Dense registers' bytes.
const DENSE_REG_BYTES: usize = REGISTERS * 6 / 8;
/// A dense HLL's exact length.
pub const DENSE_BYTES: usize = HDR_BYTES + DENSE_REG_BYTES;
pub const ENC_DENSE: u8 = 0;
pub const ENC_SPARSE: u8 = 1;
/// The largest value a sparse VAL opcode holds; a bigger register forces dense.
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// Redis's seed for MurmurHash64A over HLL elements.
const HASH_SEED: u64 = 0xadc8_3b19;
/// 0.5 / ln 2: the estimator's alpha for m → ∞.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// A sparse HLL whose opcodes do not cover exactly 16384 registers, or that a write cannot
/// walk (Redis answers `-INVALIDOBJ Corrupted HLL object detected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Which representation a value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

/// Redis's isHLLObjectOrReply on the bytes: the magic, a known encoding byte, and for
/// dense the exact length. None: not an HLL (the caller answers WRONGTYPE's HLL text).
pub fn encoding_of(v: &[u8]) -> Option<Encoding> {
    if v.len() < HDR_BYTES || &v[..4] != b"HYLL" {
        return None;
    }
    match v[4] {
        ENC_DENSE if v.len() == DENSE_BYTES => Some(Encoding::Dense),
        ENC_SPARSE => Some(Encoding::Sparse),
        _ => None,
    }
}

/// A new, empty HLL: sparse, one XZERO opcode covering all registers, cached count 0.
pub fn new_sparse() -> Vec<u8> {
    let mut v = vec![0u8; HDR_BYTES];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = ENC_SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        let (a, b) = xzero_op(run);
        v.push(a);
        v.push(b);
        left -= run;
    }
    v
}

/// The cached cardinality, when it is not marked stale.
pub fn cached_card(v: &[u8]) -> Option<u64> {
    let c = u64::from_le_bytes(v[8..16].try_into().ok()?);
    (c >> 63 == 0).then_some(c)
}

pub fn set_cached_card(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale (its top bit), as every register change does.
pub fn invalidate_cache(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// MurmurHash64A (Austin Appleby's 64-bit MurmurHash2), reading 8-byte blocks little
/// endian as Redis's endian-neutral variant does.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for b in &mut blocks {
        let mut k = u64::from_le_bytes(b.try_into().expect("8-byte chunk"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element hashes to and the length of its `0...01` pattern (1..=Q+1).
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The sentinel bit bounds the run at Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `i` of dense registers `regs` (12288 bytes); the byte after the last reads 0.
#[inline]
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = regs[byte] as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u32) as u8
}

#[inline]
pub fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = val as u32;
    regs[byte] &= !((REGISTER_MAX as u32) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    // The last register ends inside its byte: nothing of it spills into the next one.
    if let Some(b1) = regs.get_mut(byte + 1) {
        *b1 &= !((REGISTER_MAX as u32) >> (8 - fb)) as u8;
        *b1 |= (v >> (8 - fb)) as u8;
    }
}

/// Raises dense register `i` to `count`; true when it changed.
#[inline]
pub fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

/// The registers of a value whose encoding was checked dense.
pub fn dense_regs_mut(v: &mut [u8]) -> &mut [u8] {
    &mut v[HDR_BYTES..DENSE_BYTES]
}

/// Appends a ZERO opcode (runs up to 64) or an XZERO one to `seq` at `n`.
fn push_zeros(seq: &mut [u8; 5], n: &mut usize, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        let (a, b) = xzero_op(len);
        seq[*n] = a;
        seq[*n + 1] = b;
        *n += 2;
    } else {
        seq[*n] = (len - 1) as u8;
        *n += 1;
    }
}

fn xzero_op(len: usize) -> (u8, u8) {
    let l = len - 1;
    (((l >> 8) as u8 & 0x3f) | 0x40, (l & 0xff) as u8)
}

fn val_op(val: u8, len: usize) -> u8 {
    (((val - 1) << 2) | (len as u8 - 1)) | 0x80
}

/// One sparse opcode at `p` of `bytes` (the byte after the end reads 0).
#[derive(Clone, Copy)]
enum Op {
    Zero(usize),
    Xzero(usize),
    Val(u8, usize),
}

impl Op {
    #[inline]
    fn at(bytes: &[u8], p: usize) -> Op {
        let b = bytes.get(p).copied().unwrap_or(0);
        if b & 0xc0 == 0 {
            Op::Zero((b & 0x3f) as usize + 1)
        } else if b & 0x80 == 0 {
            let lo = bytes.get(p + 1).copied().unwrap_or(0) as usize;
            Op::Xzero(((((b & 0x3f) as usize) << 8) | lo) + 1)
        } else {
            Op::Val(((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1)
        }
    }
    fn bytes(self) -> usize {
        match self {
            Op::Xzero(_) => 2,
            _ => 1,
        }
    }
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::Xzero(n) | Op::Val(_, n) => n,
        }
    }
}

/// Register `index` of a sparse HLL's value, read without copying it: None when the
/// opcodes end (or are damaged) before reaching it. The opcodes past it are not read, as
/// [`Writer::raise`] does not read them either.
pub fn sparse_register(v: &[u8], index: usize) -> Option<u8> {
    let ops = v.get(HDR_BYTES..)?;
    let (mut p, mut first) = (0usize, 0usize);
    while p < ops.len() {
        let op = Op::at(ops, p);
        let span = op.span();
        if index < first + span {
            return Some(match op {
                Op::Val(value, _) => value,
                _ => 0,
            });
        }
        first += span;
        p += op.bytes();
    }
    None
}

/// Walks sparse registers `ops` calling `f(first_register, run, value)` for each VAL run;
/// Corrupt unless the runs cover exactly 16384 registers (a run crossing the end is
/// refused before anything past it is read, as patched Redis 7.0.15 does).
fn walk_sparse(ops: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let mut idx = 0usize;
    let mut p = 0usize;
    while p < ops.len() {
        let op = Op::at(ops, p);
        let n = op.span();
        if idx + n > REGISTERS {
            return Err(Corrupt);
        }
        if let Op::Val(v, _) = op {
            f(idx, n, v);
        }
        idx += n;
        p += op.bytes();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The dense form of a sparse value (header copied, encoding set to dense).
pub fn sparse_to_dense(v: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut d = vec![0u8; DENSE_BYTES];
    d[..HDR_BYTES].copy_from_slice(&v[..HDR_BYTES]);
    d[4] = ENC_DENSE;
    let regs = &mut d[HDR_BYTES..];
    walk_sparse(&v[HDR_BYTES..], |first, n, val| {
        for i in first..first + n {
            dense_set(regs, i, val);
        }
    })?;
    Ok(d)
}

/// Folds a checked HLL into `max` (one byte per register): max[i] = max(max[i], reg[i]).
pub fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    match encoding_of(v) {
        Some(Encoding::Dense) => {
            let regs = &v[HDR_BYTES..];
            for (i, m) in max.iter_mut().enumerate() {
                let r = dense_get(regs, i);
                if r > *m {
                    *m = r;
                }
            }
            Ok(())
        }
        Some(Encoding::Sparse) => walk_sparse(&v[HDR_BYTES..], |first, n, val| {
            for m in &mut max[first..first + n] {
                if val > *m {
                    *m = val;
                }
            }
        }),
        None => Err(Corrupt),
    }
}

type Histogram = [u64; 64];

fn dense_histogram(regs: &[u8]) -> Histogram {
    let mut h = [0u64; 64];
    // Four bytes hold four registers... three bytes hold four: 12 bytes, 16 registers.
    for c in regs.chunks_exact(12) {
        for t in c.chunks_exact(3) {
            let w = t[0] as u32 | (t[1] as u32) << 8 | (t[2] as u32) << 16;
            h[(w & 63) as usize] += 1;
            h[((w >> 6) & 63) as usize] += 1;
            h[((w >> 12) & 63) as usize] += 1;
            h[((w >> 18) & 63) as usize] += 1;
        }
    }
    h
}

/// Ertl's sigma (arXiv:1702.01284), iterated until the sum stops changing.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

/// Ertl's tau (arXiv:1702.01284).
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// Redis 5+'s improved estimator over a register histogram; the same floating-point
/// operations in the same order, so the result matches Redis to the unit.
fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    let e = (ALPHA_INF * m * m / z).round();
    // Registers no hash can produce (above Q + 1, in a crafted dense value) can leave z at
    // 0: Redis's llroundl of infinity gives x86's "integer indefinite", i64::MIN, which
    // it then reads as 2^63 (and so caches with the stale bit set).
    if e.is_finite() && e < i64::MAX as f64 {
        e as u64
    } else {
        1 << 63
    }
}

/// The estimated cardinality of a checked HLL's registers (the cache is not consulted).
pub fn count(v: &[u8]) -> Result<u64, Corrupt> {
    match encoding_of(v) {
        Some(Encoding::Dense) => Ok(estimate(&dense_histogram(&v[HDR_BYTES..]))),
        Some(Encoding::Sparse) => {
            let mut h = [0u64; 64];
            let mut idx = 0u64;
            let ops = &v[HDR_BYTES..];
            let mut p = 0;
            while p < ops.len() {
                let op = Op::at(ops, p);
                match op {
                    Op::Zero(n) | Op::Xzero(n) => h[0] += n as u64,
                    Op::Val(val, n) => h[val as usize] += n as u64,
                }
                idx += op.span() as u64;
                p += op.bytes();
            }
            if idx != REGISTERS as u64 {
                return Err(Corrupt);
            }
            Ok(estimate(&h))
        }
        None => Err(Corrupt),
    }
}

/// The estimated cardinality of one-byte-per-register registers (PFCOUNT of many keys).
pub fn count_raw(max: &[u8; REGISTERS]) -> u64 {
    let mut h = [0u64; 64];
    for &r in max.iter() {
        h[(r & 63) as usize] += 1;
    }
    estimate(&h)
}

/// PFDEBUG DECODE's text of a sparse value: `z:N`, `Z:N`, `v:VAL,N` separated by spaces.
pub fn decode_sparse(v: &[u8]) -> String {
    use std::fmt::Write;
    let ops = &v[HDR_BYTES..];
    let mut s = String::new();
    let mut p = 0;
    while p < ops.len() {
        let op = Op::at(ops, p);
        let _ = match op {
            Op::Zero(n) => write!(s, "z:{n} "),
            Op::Xzero(n) => write!(s, "Z:{n} "),
            Op::Val(val, n) => write!(s, "v:{val},{n} "),
        };
        p += op.bytes();
    }
    s.truncate(s.trim_end_matches(' ').len());
    s
}

/// A working copy of an HLL being written (PFADD on a sparse value, PFMERGE's
/// destination). Sparse edits work as Redis's in-place ones do — including a truncated
/// XZERO at the end — on a buffer with spare zero bytes past `len` standing for the
/// string's terminator and spare room, so nothing is ever read or written out of bounds.
pub struct Writer {
    buf: Vec<u8>,
    len: usize,
}

impl Writer {
    /// `v` must have passed [`encoding_of`].
    pub fn new(v: &[u8]) -> Writer {
        let mut buf = Vec::with_capacity(v.len() + 8);
        buf.extend_from_slice(v);
        buf.extend_from_slice(&[0; 8]);
        Writer { buf, len: v.len() }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn into_bytes(mut self) -> Vec<u8> {
        self.buf.truncate(self.len);
        self.buf
    }

    pub fn is_dense(&self) -> bool {
        self.buf[4] == ENC_DENSE
    }

    pub fn invalidate_cache(&mut self) {
        invalidate_cache(&mut self.buf);
    }

    /// Converts to dense (no-op if dense already).
    pub fn to_dense(&mut self) -> Result<(), Corrupt> {
        if self.is_dense() {
            return Ok(());
        }
        let d = sparse_to_dense(&self.buf[..self.len])?;
        *self = Writer::new(&d);
        Ok(())
    }

    /// Adds an element: raises its register; true when a register changed.
    pub fn add(&mut self, ele: &[u8], sparse_max_bytes: u64) -> Result<bool, Corrupt> {
        let (index, count) = pat_len(ele);
        self.raise(index, count, sparse_max_bytes)
    }

    /// Raises register `index` to `count` (1..=63). A sparse value turns dense when the
    /// value does not fit a VAL opcode or its length would pass `sparse_max_bytes`.
    pub fn raise(
        &mut self,
        index: usize,
        count: u8,
        sparse_max_bytes: u64,
    ) -> Result<bool, Corrupt> {
        if self.is_dense() {
            return Ok(dense_raise(
                &mut self.buf[HDR_BYTES..DENSE_BYTES],
                index,
                count,
            ));
        }
        if count > SPARSE_VAL_MAX_VALUE {
            return self.promote(index, count);
        }
        let end = self.len;
        // Find the opcode covering `index`.
        let (mut p, mut first, mut span) = (HDR_BYTES, 0usize, 0usize);
        let mut prev = None;
        while p < end {
            let op = Op::at(&self.buf, p);
            span = op.span();
            if index < first + span {
                break;
            }
            prev = Some(p);
            p += op.bytes();
            first += span;
        }
        if span == 0 || p >= end {
            return Err(Corrupt);
        }
        let op = Op::at(&self.buf, p);
        let next = Some(p + op.bytes()).filter(|&n| n < end);
        match op {
            Op::Val(old, _) if old >= count => return Ok(false),
            Op::Val(_, 1) | Op::Zero(1) => {
                self.buf[p] = val_op(count, 1);
                self.merge_vals(prev.unwrap_or(HDR_BYTES));
                return Ok(true);
            }
            _ => {}
        }
        // Split the run into up to three opcodes around `index`.
        let last = first + span - 1;
        let mut seq = [0u8; 5];
        let mut n = 0;
        match op {
            Op::Zero(_) | Op::Xzero(_) => {
                if index != first {
                    push_zeros(&mut seq, &mut n, index - first);
                }
                seq[n] = val_op(count, 1);
                n += 1;
                if index != last {
                    push_zeros(&mut seq, &mut n, last - index);
                }
            }
            Op::Val(cur, _) => {
                if index != first {
                    seq[n] = val_op(cur, index - first);
                    n += 1;
                }
                seq[n] = val_op(count, 1);
                n += 1;
                if index != last {
                    seq[n] = val_op(cur, last - index);
                    n += 1;
                }
            }
        }
        let old_len = op.bytes();
        if n > old_len && (self.len + n - old_len) as u64 > sparse_max_bytes {
            return self.promote(index, count);
        }
        let new_len = self.len + n - old_len;
        self.reserve(new_len.max(p + n) + 1);
        if n != old_len {
            if let Some(next) = next {
                let to = next + n - old_len;
                self.buf.copy_within(next..end, to);
            }
        }
        self.len = new_len;
        self.buf[new_len] = 0;
        self.buf[p..p + n].copy_from_slice(&seq[..n]);
        self.merge_vals(prev.unwrap_or(HDR_BYTES));
        Ok(true)
    }

    fn reserve(&mut self, len: usize) {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
    }

    /// After a sparse edit: merges adjacent VAL opcodes of equal value (up to 4 registers)
    /// among the five opcodes from `p`, then marks the cached count stale.
    fn merge_vals(&mut self, mut p: usize) {
        let mut end = self.len;
        let mut scan = 5;
        while p < end && scan > 0 {
            scan -= 1;
            match Op::at(&self.buf, p) {
                Op::Xzero(_) => {
                    p += 2;
                    continue;
                }
                Op::Zero(_) => {
                    p += 1;
                    continue;
                }
                Op::Val(v1, l1) => {
                    if p + 1 < end {
                        if let Op::Val(v2, l2) = Op::at(&self.buf, p + 1) {
                            if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                                self.buf[p + 1] = val_op(v1, l1 + l2);
                                self.reserve(end + 1);
                                self.buf.copy_within(p + 1..end + 1, p);
                                end -= 1;
                                self.len = end;
                                self.buf[end] = 0;
                                continue;
                            }
                        }
                    }
                }
            }
            p += 1;
        }
        self.invalidate_cache();
    }

    fn promote(&mut self, index: usize, count: u8) -> Result<bool, Corrupt> {
        self.to_dense()?;
        Ok(dense_raise(
            &mut self.buf[HDR_BYTES..DENSE_BYTES],
            index,
            count,
        ))
    }
}

/// PFSELFTEST: dense registers keep what is written to them without disturbing their
/// neighbours; dense and sparse counts agree and stay within six standard errors of the
/// true cardinality up to 10M elements. Err: Redis's TESTFAILED text.
pub fn selftest(rng: &mut crate::util::Rng, sparse_max_bytes: u64) -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_REG_BYTES];
    let mut expect = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, e) in expect.iter_mut().enumerate() {
            let r = (rng.next_u64() & REGISTER_MAX as u64) as u8;
            *e = r;
            dense_set(&mut regs, i, r);
        }
        for (i, &e) in expect.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != e {
                return Err(format!(
                    "TESTFAILED Register {i} should be {e} but is {got}"
                ));
            }
        }
    }
    let mut dense = vec![0u8; DENSE_BYTES];
    dense[..4].copy_from_slice(b"HYLL");
    let mut sparse = Writer::new(&new_sparse());
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = rng.next_u64();
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let (index, cnt) = pat_len(&ele);
        dense_raise(&mut dense[HDR_BYTES..], index, cnt);
        sparse
            .add(&ele, sparse_max_bytes)
            .map_err(|_| "TESTFAILED sparse HLL corrupted".to_string())?;
        if j != checkpoint {
            continue;
        }
        if j < sparse_max_bytes / 2 && sparse.is_dense() {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let d = count(&dense).unwrap_or(u64::MAX);
        if count(sparse.bytes()) != Ok(d) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - d as i64).unsigned_abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(v: &[u8]) -> String {
        decode_sparse(v)
    }

    /// The in-place register read sees what a raise wrote, and nothing past damage.
    #[test]
    fn sparse_register_reads_what_raise_wrote() {
        let mut w = Writer::new(&new_sparse());
        assert_eq!(w.raise(5, 3, 3000), Ok(true));
        assert_eq!(w.raise(9000, 7, 3000), Ok(true));
        let v = w.into_bytes();
        assert_eq!(sparse_register(&v, 5), Some(3));
        assert_eq!(sparse_register(&v, 9000), Some(7));
        assert_eq!(sparse_register(&v, 4), Some(0));
        assert_eq!(sparse_register(&v, REGISTERS - 1), Some(0));
        assert_eq!(sparse_register(&v, REGISTERS), None);
        assert_eq!(sparse_register(&v[..HDR_BYTES + 2], 9000), None);
        assert_eq!(sparse_register(&v[..4], 0), None);
    }

    #[test]
    fn empty_sparse_layout() {
        let v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(&v[16..], &[0x7f, 0xff]);
        assert_eq!(ops(&v), "Z:16384");
        assert_eq!(encoding_of(&v), Some(Encoding::Sparse));
        assert_eq!(count(&v), Ok(0));
        assert_eq!(cached_card(&v), Some(0));
    }

    #[test]
    fn elements_land_where_redis_puts_them() {
        // Register and run length of each element as redis-server 7.0's PFDEBUG DECODE
        // shows them after one PFADD: tails of 1 and 0 bytes past a block, and one block.
        assert_eq!(pat_len(b"a"), (12711, 2));
        assert_eq!(pat_len(b"abcdefgh"), (1383, 1));
        assert_eq!(pat_len(b"abcdefghi"), (6903, 1));
        assert_eq!(pat_len(b"hello"), (9216, 1));
        let mut w = Writer::new(&new_sparse());
        assert_eq!(w.add(b"a", 3000), Ok(true));
        assert_eq!(ops(w.bytes()), "Z:12711 v:2,1 Z:3672");
    }

    #[test]
    fn dense_registers_roundtrip_without_touching_neighbours() {
        let mut regs = vec![0u8; DENSE_REG_BYTES];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
        dense_set(&mut regs, REGISTERS - 1, 63);
        assert_eq!(dense_get(&regs, REGISTERS - 1), 63);
        assert_eq!(
            dense_get(&regs, REGISTERS - 2),
            ((REGISTERS - 2) % 64) as u8
        );
    }

    #[test]
    fn sparse_split_and_merge() {
        let mut w = Writer::new(&new_sparse());
        assert_eq!(w.raise(100, 3, 3000), Ok(true));
        assert_eq!(ops(w.bytes()), "Z:100 v:3,1 Z:16283");
        assert_eq!(w.raise(101, 3, 3000), Ok(true));
        assert_eq!(ops(w.bytes()), "Z:100 v:3,2 Z:16282");
        assert_eq!(w.raise(100, 2, 3000), Ok(false));
        assert_eq!(w.raise(100, 5, 3000), Ok(true));
        assert_eq!(ops(w.bytes()), "Z:100 v:5,1 v:3,1 Z:16282");
        assert_eq!(w.raise(0, 1, 3000), Ok(true));
        assert_eq!(ops(w.bytes()), "v:1,1 Z:99 v:5,1 v:3,1 Z:16282");
        assert_eq!(w.raise(16383, 2, 3000), Ok(true));
        assert_eq!(ops(w.bytes()), "v:1,1 Z:99 v:5,1 v:3,1 Z:16281 v:2,1");
        assert_eq!(cached_card(w.bytes()), None);
        // The registers read back the same through both representations.
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, w.bytes()).unwrap();
        let d = sparse_to_dense(w.bytes()).unwrap();
        for (i, &m) in max.iter().enumerate() {
            assert_eq!(dense_get(&d[HDR_BYTES..], i), m);
        }
        assert_eq!(count(w.bytes()), count(&d));
        assert_eq!(count(&d).unwrap(), count_raw(&max));
    }

    #[test]
    fn sparse_promotes_on_big_value_and_on_size() {
        let mut w = Writer::new(&new_sparse());
        assert_eq!(w.raise(7, 33, 3000), Ok(true));
        assert!(w.is_dense());
        assert_eq!(w.bytes().len(), DENSE_BYTES);
        assert_eq!(dense_get(&w.bytes()[HDR_BYTES..], 7), 33);
        // A tiny limit: the first split that grows the value promotes it.
        let mut w = Writer::new(&new_sparse());
        assert_eq!(w.raise(5000, 1, 18), Ok(true));
        assert!(w.is_dense());
    }

    #[test]
    fn corrupt_sparse_is_an_error_not_a_panic() {
        let mut short = new_sparse();
        short[17] = 0x00; // XZERO of 16128 + ... now covers fewer registers
        short[16] = 0x40;
        assert_eq!(count(&short), Err(Corrupt));
        assert_eq!(sparse_to_dense(&short), Err(Corrupt));
        assert_eq!(Writer::new(&short).raise(16000, 1, 3000), Err(Corrupt));
        // Runs past 16384 registers.
        let mut long = new_sparse();
        long.extend_from_slice(&[0x7f, 0xff, 0x80]);
        assert_eq!(count(&long), Err(Corrupt));
        let mut max = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &long), Err(Corrupt));
        // A truncated XZERO at the end reads a zero byte, as Redis reads the terminator.
        let mut trunc = new_sparse();
        trunc.truncate(17);
        assert_eq!(ops(&trunc), "Z:16129");
        // Every single-byte opcode sequence is handled without panicking.
        for b in 0..=255u8 {
            let mut v = new_sparse();
            v.truncate(16);
            v.extend_from_slice(&[b; 40]);
            let _ = count(&v);
            let _ = sparse_to_dense(&v);
            let _ = merge_into(&mut max, &v);
            let mut w = Writer::new(&v);
            for i in [0, 1, 100, 16383] {
                let _ = w.raise(i, 1 + b % 60, 3000);
            }
            let _ = decode_sparse(&v);
        }
        // Not HLLs at all.
        assert_eq!(encoding_of(b"HYLL"), None);
        assert_eq!(
            encoding_of(b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
            None
        );
        assert_eq!(
            encoding_of(b"HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
            None
        );
        assert_eq!(
            encoding_of(b"HYLX\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
            None
        );
    }

    #[test]
    fn estimates_are_close_and_dense_equals_sparse() {
        let mut w = Writer::new(&new_sparse());
        let mut d = sparse_to_dense(&new_sparse()).unwrap();
        for i in 0..20_000u32 {
            let e = format!("ele:{i}");
            w.add(e.as_bytes(), 3000).unwrap();
            let (idx, c) = pat_len(e.as_bytes());
            dense_raise(&mut d[HDR_BYTES..], idx, c);
            if i == 99 {
                assert!(!w.is_dense());
                let n = count(w.bytes()).unwrap();
                assert_eq!(count(&d).unwrap(), n);
                assert!((95..=105).contains(&n), "{n}");
            }
        }
        assert!(w.is_dense());
        let n = count(w.bytes()).unwrap();
        assert_eq!(n, count(&d).unwrap());
        assert!((19_000..=21_000).contains(&n), "{n}");
    }
}
