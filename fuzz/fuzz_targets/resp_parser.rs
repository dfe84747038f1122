//! Feeds arbitrary bytes, split at arbitrary points, to `RequestParser` the way the event
//! loop does, and checks its invariants: no panic, no endless loop, `consumed() <= len`,
//! every returned argument range inside its buffer.
//!
//! Input layout: byte 0 picks the limits (bit 0: auth required; bit 1: a tiny
//! proto-max-bulk-len taken from byte 1), byte 2 is the number of split points (mod 8),
//! then two bytes per split point, then the data.
#![no_main]

use cairn::protocol::parser::{ArgSource, Parse, ParseLimits, RequestParser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let limits = ParseLimits {
        auth_required: input[0] & 1 != 0,
        proto_max_bulk_len: if input[0] & 2 != 0 {
            input[1] as i64
        } else {
            512 * 1024 * 1024
        },
    };
    let ncuts = (input[2] % 8) as usize;
    let rest = &input[3..];
    if rest.len() < ncuts * 2 {
        return;
    }
    let (cut_bytes, data) = rest.split_at(ncuts * 2);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]) as usize % (data.len() + 1))
        .collect();
    cuts.push(data.len());
    cuts.sort_unstable();

    let mut p = RequestParser::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    for cut in cuts {
        buf.extend_from_slice(&data[fed..cut]);
        fed = cut;
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps <= buf.len() + 2, "parser does not make progress");
            let r = p.next(&buf, &limits);
            assert!(p.consumed() <= buf.len(), "consumed past the buffer");
            match r {
                Parse::Command => {
                    assert!(!p.args.is_empty());
                    let src: &[u8] = match p.source {
                        Some(ArgSource::InlineScratch) => &p.inline_scratch,
                        _ => &buf,
                    };
                    for &(s, l) in &p.args {
                        let end = s.checked_add(l).expect("range overflows");
                        assert!(end <= src.len(), "argument outside its buffer");
                    }
                }
                Parse::Incomplete => break,
                Parse::Error(e) => {
                    assert!(e.starts_with("Protocol error: "));
                    return;
                }
                Parse::BigBulk { .. } => unreachable!("big bulks are off"),
            }
        }
        let n = p.consumed();
        buf.drain(..n);
        p.shift(n);
    }
});
