//! The redis.conf parser on untrusted text. `include` directives are skipped: they read
//! other files, which is not the parser's input (and the fuzzer could name a FIFO).
#![no_main]

use cairn::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.to_ascii_lowercase().contains("include") {
        return;
    }
    if let Ok(config) = Config::from_text(text) {
        let _ = config.get_matching(&[b"*"]);
    }
});
