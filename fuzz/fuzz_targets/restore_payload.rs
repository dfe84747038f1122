//! RESTORE's decoder on untrusted payloads. The input is a DUMP body (type byte and
//! value); the target appends the version and CRC-64 footer itself so every input gets
//! past `verify_dump_payload` to `read_object` (the raw input is also checked as a whole
//! payload). A value that decodes is stored the way RESTORE stores it, and the arena
//! must then pass the image validation: decoding may refuse, never panic, and what it
//! accepts must build only structures the server could have built itself. The same
//! bytes also go through FUNCTION RESTORE's record reader (`read_function_payload`).
#![no_main]

use cairn::arena::Arena;
use cairn::collections::{hash, list, set, stream, zset};
use cairn::config::Config;
use cairn::keyspace::{StrEnc, Ttl};
use cairn::persistence::rdb_value::{
    dump_payload, read_function_payload, read_object, verify_dump_payload, Reader, Value,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Some(inner) = verify_dump_payload(body) {
        let _ = read_object(&mut Reader::new(inner));
    }
    let payload = dump_payload(body.to_vec());
    let _ = read_function_payload(&payload);
    let inner = verify_dump_payload(&payload).expect("a payload with its own footer verifies");
    let Ok(value) = read_object(&mut Reader::new(inner).with_max_string_len(1 << 20)) else {
        return;
    };
    if value.arena_bytes_estimate() > 32 << 20 {
        return;
    }
    let config = Config::default();
    let mut ks = cairn::collections::new_keyspace(Arena::new(256 << 20, [1, 2]).unwrap(), 1);
    let key = b"k";
    match value {
        Value::String(s) => {
            ks.set_string(0, key, &s, StrEnc::for_value(&s), Ttl::Clear);
        }
        Value::List(lps) => {
            list::create_from(&mut ks, 0, key, &lps, Ttl::Clear);
        }
        Value::Hash(pairs) => {
            let lim = hash::Limits::from_config(&config);
            hash::create_from(&mut ks, 0, key, &pairs, Ttl::Clear, lim);
        }
        Value::ZSet(pairs) => {
            let lim = zset::Limits::from_config(&config);
            zset::create_from(&mut ks, 0, key, pairs, Ttl::Clear, lim);
        }
        Value::Set(members) => {
            let lim = set::Limits::from_config(&config);
            set::create_from(&mut ks, 0, key, &members, Ttl::Clear, lim);
        }
        Value::SetIntset(is) => {
            let lim = set::Limits::from_config(&config);
            set::create_from_intset(&mut ks, 0, key, &is, Ttl::Clear, lim);
        }
        Value::Stream(s) => {
            stream::create_from(&mut ks, 0, key, &s, Ttl::Clear);
        }
    }
    if let Err(e) = cairn::collections::validate_image(&mut ks.arena) {
        panic!("a restored value left an arena that does not validate: {e}");
    }
});
