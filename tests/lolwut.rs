//! LOLWUT against Debian's redis-server 7.0.15: the default and every form without
//! randomness byte for byte (RESP2 and RESP3); the random drawings by shape (lines, cells
//! per line, the closing text).
mod common;
use common::*;

const SAME: &[&[&str]] = &[
    &["LOLWUT"],
    &["LOLWUT", "VERSION", "7"],
    &["LOLWUT", "VERSION", "4"],
    &["LOLWUT", "VERSION", "59"],
    &["LOLWUT", "VERSION", "x"],
    &["LOLWUT", "VERSION"],
    &["LOLWUT", "foo"],
    &["LOLWUT", "VERSION", "5", "66", "8", "2"],
    &["LOLWUT", "VERSION", "5", "10", "3", "1"],
    &["LOLWUT", "VERSION", "5", "1", "1", "1"],
    &["LOLWUT", "VERSION", "5", "1000", "200", "2"],
    &["LOLWUT", "VERSION", "5", "-5", "0", "-1"],
    &["LOLWUT", "VERSION", "5", "x"],
    &["LOLWUT", "VERSION", "6", "10", "1"],
    &["LOLWUT", "VERSION", "6", "2000", "-3"],
    &["LOLWUT", "VERSION", "6", "x"],
    &["LOLWUT", "VERSION", "6", "5", "y"],
    &["LOLWUT", "VERSION", "4294967301", "40", "4", "2"],
];

#[test]
fn deterministic_forms_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for resp3 in [false, true] {
        if resp3 {
            rc.call(&["HELLO", "3"]);
            rr.call(&["HELLO", "3"]);
        }
        for cmd in SAME {
            same_str(&mut rc, &mut rr, cmd);
        }
    }
}

/// Lines of a drawing and, per line, its cells (ANSI escapes or Braille characters).
fn shape(reply: &[u8]) -> (Vec<usize>, String) {
    let text = String::from_utf8(bulk_payload(reply)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let tail = lines.split_off(lines.len().saturating_sub(2)).join("\n");
    let cells = lines
        .iter()
        .map(|l| {
            l.matches("\x1b[0m")
                .count()
                .max(l.chars().count() * usize::from(!l.contains('\x1b')))
        })
        .collect();
    (cells, tail)
}

#[test]
fn random_drawings_have_redis_shape() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for cmd in [
        &["LOLWUT", "VERSION", "6"][..],
        &["LOLWUT", "VERSION", "6", "33", "7"],
        &["LOLWUT", "VERSION", "5"],
        &["LOLWUT", "VERSION", "5", "40", "5", "9"],
    ] {
        let (want, got) = (shape(&rr.call(cmd)), shape(&rc.call(cmd)));
        assert_eq!(got, want, "{cmd:?}");
        assert!(!want.0.is_empty());
    }
}

#[test]
fn an_oversized_schotter_is_refused() {
    let c = start_cairn(&[]);
    let mut raw = Raw::connect(c.port);
    let r = raw.call(&["LOLWUT", "VERSION", "5", "1000", "1", "200"]);
    assert_eq!(r, b"-ERR LOLWUT canvas too large\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
}
