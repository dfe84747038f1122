//! Startup's `dump.rdb` loader on untrusted files, into a small arena. A zero checksum
//! is accepted by the loader, so the fuzzer reaches every key without fixing one up.
//! Whatever loads must leave an arena that passes the image validation.
#![no_main]

use cairn::arena::Arena;
use cairn::config::Config;
use cairn::persistence::rdb_file::load_rdb;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let config = Config::default();
    let mut ks = cairn::collections::new_keyspace(Arena::new(256 << 20, [1, 2]).unwrap(), 16);
    let _ = load_rdb(data, &mut ks, &config, 0);
    if let Err(e) = cairn::collections::validate_image(&mut ks.arena) {
        panic!("an RDB load left an arena that does not validate: {e}");
    }
});
