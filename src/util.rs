//! Small helpers shared by the command families: Redis's strict number parsing, glob
//! matching, a fast PRNG and clocks.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Wall-clock microseconds since the Unix epoch.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// xorshift64* — fast, good enough for sampling; never for anything secret.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn from_time() -> Rng {
        Rng::new(now_us() as u64 ^ (std::process::id() as u64) << 32)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Redis's `string2ll`: strict decimal i64 — no spaces, no '+', no leading zeros, no "-0".
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Redis's `string2ull`-style unsigned parse (used by a few commands).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || s[0] == b'-' || s[0] == b'+' {
        return None;
    }
    if s.len() > 1 && s[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Redis's `strtod`-based float parsing for commands such as INCRBYFLOAT's argument and
/// score arguments: rejects empty strings, leading spaces, trailing garbage and NaN.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() {
        return None;
    }
    let st = std::str::from_utf8(s).ok()?;
    let lower = st.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust accepts forms strtod would not ("1_0" no, but "infinity" handled above);
            // reject anything but [+-]digits[.digits][e[+-]digits] and hex is not needed.
            if !st
                .bytes()
                .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'))
            {
                return None;
            }
            st.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// Formats an i64 into `buf` without allocating; returns the written slice.
pub fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    // |i64::MIN| has 19 digits: with the sign it still fits the 20 bytes.
    let digits = fmt_u64(v.unsigned_abs(), buf).len();
    let mut i = buf.len() - digits;
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Formats a u64 into `buf` without allocating; returns the written slice.
pub fn fmt_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Redis's `stringmatchlen`: glob-style matching with `*`, `?`, `[...]`, `[^...]`, ranges
/// and `\` escapes. `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    glob_match_impl(pattern, string, nocase, &mut skip_longer, 0)
}

const GLOB_MAX_DEPTH: usize = 1000;

/// `skip_longer` is Redis's skipLongerMatches (7.0.9, CVE-2022-36021): once a `*` has
/// tried every suffix of the string and failed, an outer `*` giving it a shorter suffix
/// cannot succeed either, so the search stops instead of going exponential on patterns
/// like `a*a*a*a*...b` (reachable per PUBLISH through PSUBSCRIBE, and by KEYS/SCAN).
fn glob_match_impl(
    mut p: &[u8],
    mut s: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    depth: usize,
) -> bool {
    // Redis bounds the recursion too (pathological patterns like "a*a*a*...").
    if depth > GLOB_MAX_DEPTH {
        return false;
    }
    let fold = |c: u8| if nocase { c.to_ascii_lowercase() } else { c };
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if glob_match_impl(&p[1..], s, nocase, skip_longer, depth + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = !p.is_empty() && p[0] == b'^';
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        // Unterminated class: Redis steps back so the '[' is consumed.
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == s[0] {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = fold(s[0]);
                        if c >= fold(start) && c <= fold(end) {
                            matched = true;
                        }
                        p = &p[2..];
                    } else if fold(p[0]) == fold(s[0]) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if p.is_empty() {
                    // Pattern ended inside the class; keep Redis's lenient behaviour.
                    if not {
                        matched = !matched;
                    }
                    if !matched {
                        return false;
                    }
                    s = &s[1..];
                    return s.is_empty();
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if fold(p[0]) != fold(s[0]) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if fold(c) != fold(s[0]) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while !p.is_empty() && p[0] == b'*' {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// ASCII-lowercases into a stack buffer when short (command names), else allocates.
pub fn eq_ignore_case(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// `split_args` found a quote that is not closed, or closed but followed by a non-space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnbalancedQuotes;

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|v| v as u8)
}

/// Redis's `sdssplitargs`: whitespace-separated words, "double quotes" with C escapes and
/// \xHH, 'single quotes' with only \' escaped. A closing quote must be followed by a
/// space or the end of the line.
pub fn split_args(
    line: &[u8],
    out: &mut Vec<u8>,
    ranges: &mut Vec<(usize, usize)>,
) -> Result<(), UnbalancedQuotes> {
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Ok(());
        }
        let start = out.len();
        let (mut inq, mut insq, mut done) = (false, false, false);
        while !done {
            if inq {
                if i >= n {
                    return Err(UnbalancedQuotes);
                }
                if line[i] == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(line[i + 2]), hex_val(line[i + 3])) {
                        out.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if line[i] == b'\\' && i + 1 < n {
                    i += 1;
                    out.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        c => c,
                    });
                } else if line[i] == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return Err(UnbalancedQuotes);
                    }
                    done = true;
                } else {
                    out.push(line[i]);
                }
            } else if insq {
                if i >= n {
                    return Err(UnbalancedQuotes);
                }
                if line[i] == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    out.push(b'\'');
                } else if line[i] == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return Err(UnbalancedQuotes);
                    }
                    done = true;
                } else {
                    out.push(line[i]);
                }
            } else if i >= n {
                done = true;
            } else {
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => out.push(c),
                }
            }
            if i < n {
                i += 1;
            }
        }
        ranges.push((start, out.len() - start));
    }
}

/// 127.0.0.0/8 and ::1, and an IPv4 loopback peer seen through a dual-stack IPv6 socket
/// (`::ffff:127.x.y.z`, which a `bind ::` listener receives for IPv4 connections).
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod glob_tests {
    use super::glob_match;

    #[test]
    fn pathological_patterns_finish_fast() {
        let pat = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let s = vec![b'a'; 5000];
        let t = std::time::Instant::now();
        assert!(!glob_match(pat, &s, false));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        assert!(glob_match(b"a*b*c", b"axxbyyc", false));
        assert!(glob_match(b"*a*b", b"zzazzb", false));
        assert!(!glob_match(b"*a*b", b"zzazzbc", false));
        assert!(glob_match(b"h*llo*", b"hello world", false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_is_strict_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1.0",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }

    #[test]
    fn glob_matches_like_redis() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h\\*llo", b"h*llo", false));
        assert!(!glob_match(b"h\\*llo", b"hello", false));
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(glob_match(b"a*", b"a", false));
        assert!(!glob_match(b"a*b", b"a", false));
        assert!(glob_match(b"*a*a*a*b", b"aaaaaaab", false));
    }

    #[test]
    fn fmt_i64_round_trips() {
        let mut b = [0u8; 20];
        for v in [0, 1, -1, 42, i64::MAX, i64::MIN, 1000] {
            assert_eq!(fmt_i64(v, &mut b), v.to_string().as_bytes());
        }
        for v in [0, 9, 10, u64::MAX, 1 << 63] {
            assert_eq!(fmt_u64(v, &mut b), v.to_string().as_bytes());
        }
    }
}
