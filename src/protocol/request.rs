//! The parsed request a command runs with: its arguments as ranges into the connection's
//! buffer (zero copy), or arena blocks for big ones.

use super::parser::{BigArg, BIG_ARG_FLAG};

/// A command's arguments: ranges into a buffer (zero copy), or arena blocks for big ones.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    buf: &'a [u8],
    ranges: &'a [(usize, usize)],
    /// Arguments read into arena blocks (ranges flagged with `BIG_ARG_FLAG` index this).
    big: &'a [BigArg],
}

impl<'a> Args<'a> {
    pub fn new(buf: &'a [u8], ranges: &'a [(usize, usize)]) -> Args<'a> {
        Args {
            buf,
            ranges,
            big: &[],
        }
    }
    /// Arguments some of which were read straight into arena blocks: a range flagged with
    /// `BIG_ARG_FLAG` names `big[index]`, whose bytes [`Args::get`] reads at its `addr`.
    ///
    /// # Safety
    /// For every `BigArg` a flagged range names, `addr..addr + len` must be initialised
    /// bytes (`filled == len`, and the range's length is `len`) that stay valid and are
    /// written by no one for as long as the returned `Args` (or a slice it handed out)
    /// lives: in the server, an argument block that is allocated, pinned by its connection
    /// until the command is done (`Keyspace::try_alloc_arg_block`), and completely
    /// received before the command runs.
    pub unsafe fn with_big(
        buf: &'a [u8],
        ranges: &'a [(usize, usize)],
        big: &'a [BigArg],
    ) -> Args<'a> {
        Args { buf, ranges, big }
    }
    /// The arguments from the `n`th on (COMMAND GETKEYS looks at the command it names).
    pub fn skip(&self, n: usize) -> Args<'a> {
        Args {
            buf: self.buf,
            ranges: &self.ranges[n.min(self.ranges.len())..],
            big: self.big,
        }
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// The first 8 bytes of argument `i` as a little-endian word; None when it is
    /// shorter, a big argument or absent. The ACL check's prefix compare of a key on every
    /// command of a restricted user, without building the slice.
    #[inline(always)]
    pub fn first_word(&self, i: usize) -> Option<u64> {
        let &(s, l) = self.ranges.get(i)?;
        if s & BIG_ARG_FLAG != 0 || l < 8 {
            return None;
        }
        let bytes: [u8; 8] = self.buf.get(s..s + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(bytes))
    }
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (s, l) = self.ranges[i];
        if s & BIG_ARG_FLAG != 0 {
            let b = &self.big[s & !BIG_ARG_FLAG];
            assert!(b.filled == b.len && b.len == l, "big argument not complete");
            // SAFETY: `with_big`'s contract: `b.addr..b.addr + l` are initialised bytes
            // that stay valid and unwritten while `self` (lifetime 'a) lives.
            return unsafe { std::slice::from_raw_parts(b.addr as *const u8, l) };
        }
        &self.buf[s..s + l]
    }
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
    /// Argument `i` as UTF-8 (lossy), for messages and option names.
    pub fn str(&self, i: usize) -> String {
        String::from_utf8_lossy(self.get(i)).into_owned()
    }
    pub fn is(&self, i: usize, word: &str) -> bool {
        self.get(i).eq_ignore_ascii_case(word.as_bytes())
    }
    pub fn i64(&self, i: usize) -> Result<i64, NotAnInteger> {
        crate::util::parse_i64(self.get(i)).ok_or(NotAnInteger)
    }
}

/// An argument is not a base-10 64-bit integer (commands answer Redis's error for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAnInteger;
