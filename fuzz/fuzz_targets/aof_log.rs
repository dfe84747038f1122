//! An append-only log file as startup and `--check-aof` read it: the entry scanner (with
//! and without an expected first LSN), the verdict on how the file ends, and
//! `--check-aof --fix -y` on a copy (cut only where the rules allow; never a panic).
#![no_main]

use cairn::persistence::aof::{format, load};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for first_lsn in [None, Some(1)] {
        let outcome = format::scan(data, first_lsn, |e| {
            // Every argument the scanner hands out lies inside the input.
            for a in &e.args {
                let start = a.as_ptr() as usize;
                let base = data.as_ptr() as usize;
                assert!(start >= base && start + a.len() <= base + data.len());
            }
            Ok(())
        });
        for last in [false, true] {
            let _ = load::end_of_log(&outcome, last);
        }
    }
    let dir = std::env::temp_dir().join(format!("cairn-fuzz-aof-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("appendonly.aof.1.incr.aof");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let mut sink = Vec::new();
    for role in [
        load::FileRole::Base,
        load::FileRole::Incr { last: false },
        load::FileRole::Incr { last: true },
    ] {
        let _ = load::check_file(&path, None, role, load::Fix::No, &mut sink);
    }
    // The fix cuts at most the damaged tail: what remains is a prefix of the input.
    if load::check_file(&path, None, load::FileRole::Incr { last: true }, load::Fix::Yes, &mut sink)
        .is_ok()
    {
        let after = std::fs::read(&path).unwrap_or_default();
        assert!(data.starts_with(&after), "--check-aof --fix changed bytes it kept");
    }
});
