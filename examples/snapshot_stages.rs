//! CPU time per GiB of each stage a live snapshot pass puts an arena page through, over a
//! real arena of string keys: the kernel copy out of the region (`process_vm_readv`, as
//! `racy_copy` does), the zero check, LZ4 (what `Record::encode` tries on every record),
//! the sampled compressibility check (`format::worth_compressing`), `Record::encode`
//! whole, CRC-32C, and the image writer (buffered writes with the write-back kicks of
//! `rdb-save-incremental-fsync`). Each stage runs alone on this thread, timed with the
//! thread's CPU clock, so other work on a shared machine inflates wall time, not these.
//!
//! `cargo run --release --example snapshot_stages -- [keys] [value-bytes] [random|text|repeat] [dir]`
//! (defaults: 1700000 keys of 500 random bytes, about 1 GiB of arena; the image is
//! written to `dir`, default the current directory, and removed).

use cairn::arena::Arena;
use cairn::keyspace::{StrEnc, Ttl};
use cairn::persistence::snapshot::format::{self, Extent, ImageWriter, Record, CHUNK_BYTES};
use std::time::Instant;

fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec of ours.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// xorshift64*: distinct bytes per key, as `cairn-bench --value-entropy random`.
fn fill(state: &mut u64, out: &mut [u8], text: bool) {
    const WORDS: [&[u8]; 8] = [
        b"alpha ", b"delta ", b"omega ", b"kilo ", b"tango ", b"lima ", b"echo ", b"zulu ",
    ];
    let mut next = || {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    if text {
        let mut at = 0;
        while at < out.len() {
            let w = WORDS[(next() % 8) as usize];
            let n = w.len().min(out.len() - at);
            out[at..at + n].copy_from_slice(&w[..n]);
            at += n;
        }
    } else {
        for c in out.chunks_mut(8) {
            let w = next().to_le_bytes();
            c.copy_from_slice(&w[..c.len()]);
        }
    }
}

fn copy_out(base: usize, off: usize, dst: &mut [u8]) {
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr() as *mut libc::c_void,
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: (base + off) as *mut libc::c_void,
        iov_len: dst.len(),
    };
    // SAFETY: `dst` is ours; the remote range is inside the arena's mapping.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    assert_eq!(n, dst.len() as isize, "process_vm_readv");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: u64 = args.get(1).map_or(1_700_000, |s| s.parse().unwrap());
    let vlen: usize = args.get(2).map_or(500, |s| s.parse().unwrap());
    let kind = args.get(3).map_or("random", String::as_str);
    let dir = args.get(4).map_or(".", String::as_str);
    let mut ks = cairn::collections::new_keyspace(Arena::new(32 << 30, [1, 2]).unwrap(), 16);
    let mut v = vec![0u8; vlen];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..keys {
        match kind {
            "repeat" => v.fill(b'x'),
            "text" => fill(&mut state, &mut v, true),
            _ => fill(&mut state, &mut v, false),
        }
        let key = format!("key:{i:012}");
        ks.set_string(0, key.as_bytes(), &v, StrEnc::Raw, Ttl::Clear);
    }
    let base = ks.arena.base_addr();
    let end = (ks.arena.bump_bytes() as usize).next_multiple_of(CHUNK_BYTES);
    let chunks = end / CHUNK_BYTES;
    let gib = end as f64 / (1u64 << 30) as f64;
    println!("{keys} keys of {vlen} {kind} bytes: {end} bytes of arena, {chunks} chunks of 1 MiB");
    let report = |stage: &str, cpu: f64, wall: f64, extra: &str| {
        println!(
            "{stage:<34} cpu {:>7.3} s/GiB ({:>6.0} MB/s of one CPU), wall {:>7.3} s/GiB {extra}",
            cpu / gib,
            end as f64 / cpu / 1e6,
            wall / gib
        );
    };
    let mut buf = vec![0u8; CHUNK_BYTES];
    let stage = |name: &str, f: &mut dyn FnMut(usize) -> u64| {
        let (c0, w0) = (thread_cpu_s(), Instant::now());
        let mut acc = 0u64;
        for i in 0..chunks {
            acc += f(i);
        }
        (
            name.to_string(),
            thread_cpu_s() - c0,
            w0.elapsed().as_secs_f64(),
            acc,
        )
    };
    let (n, c, w, _) = stage("kernel copy (process_vm_readv)", &mut |i| {
        copy_out(base, i * CHUNK_BYTES, &mut buf);
        0
    });
    report(&n, c, w, "");
    // A later pass's shape: scattered 4 KiB pages (every 7th page, wrapping), 256 per
    // call as a worker's job of scattered runs copies them.
    let pages = end / 4096;
    let (n, c, w, _) = stage("kernel copy, scattered 4 KiB pages", &mut |i| {
        let mut local = Vec::with_capacity(256);
        let mut remote = Vec::with_capacity(256);
        for (k, dst) in buf.chunks_mut(4096).enumerate() {
            let page = (i * 256 + k) * 7 % pages;
            local.push(libc::iovec {
                iov_base: dst.as_mut_ptr() as *mut libc::c_void,
                iov_len: 4096,
            });
            remote.push(libc::iovec {
                iov_base: (base + page * 4096) as *mut libc::c_void,
                iov_len: 4096,
            });
        }
        // SAFETY: every local iovec is a page of `buf`; the remote ones lie in the arena.
        let n = unsafe {
            libc::process_vm_readv(libc::getpid(), local.as_ptr(), 256, remote.as_ptr(), 256, 0)
        };
        assert_eq!(n, CHUNK_BYTES as isize, "process_vm_readv");
        0
    });
    report(&n, c, w, "");
    // The other stages read from copies of ours, one chunk at a time (as the workers do).
    let copies: Vec<Vec<u8>> = (0..chunks.min(256))
        .map(|i| {
            let mut b = vec![0u8; CHUNK_BYTES];
            copy_out(base, i * CHUNK_BYTES, &mut b);
            b
        })
        .collect();
    let pick = |i: usize| &copies[i % copies.len()][..];
    let (n, c, w, out) = stage("lz4_flex block compress", &mut |i| {
        lz4_flex::block::compress(pick(i)).len() as u64
    });
    report(
        &n,
        c,
        w,
        &format!("(output {:.3} of input)", out as f64 / end as f64),
    );
    let (n, c, w, yes) = stage("sampled check (worth_compressing)", &mut |i| {
        format::worth_compressing(pick(i)) as u64
    });
    report(&n, c, w, &format!("({yes} of {chunks} chunks worth it)"));
    let (n, c, w, out) = stage("Record::encode", &mut |i| {
        let r = Record::encode(
            vec![Extent {
                offset: (i * CHUNK_BYTES) as u64,
                len: CHUNK_BYTES as u32,
            }],
            pick(i),
        );
        r.payload.len() as u64
    });
    report(
        &n,
        c,
        w,
        &format!("(output {:.3} of input)", out as f64 / end as f64),
    );
    let (n, c, w, _) = stage("crc32c", &mut |i| crc32c::crc32c(pick(i)) as u64);
    report(&n, c, w, "");
    let (n, c, w, _) = stage("memcpy (to_vec)", &mut |i| {
        std::hint::black_box(pick(i).to_vec()).len() as u64
    });
    report(&n, c, w, "");
    // The writer: raw records (what an incompressible pass writes), with the write-back
    // kicks, then the final fsync.
    let path = std::path::Path::new(dir).join("snapshot_stages.cimg");
    let mut wr = ImageWriter::create(&path, true).unwrap();
    let recs: Vec<Record> = (0..copies.len())
        .map(|i| Record {
            extents: vec![Extent {
                offset: (i * CHUNK_BYTES) as u64,
                len: CHUNK_BYTES as u32,
            }],
            flags: 0,
            payload: copies[i].clone(),
            raw_bytes: CHUNK_BYTES as u32,
        })
        .collect();
    let (n, c, w, _) = stage("image writer (raw records)", &mut |i| {
        wr.write_record(&recs[i % recs.len()]).unwrap();
        0
    });
    let fsync = Instant::now();
    wr.abort();
    report(
        &n,
        c,
        w,
        &format!("(abort {:.3} s)", fsync.elapsed().as_secs_f64()),
    );
    let _ = std::fs::remove_file(&path);
    // The same bytes written with O_DIRECT from a page-aligned buffer, 1 MiB per write:
    // what bypassing the page cache would save the writer (no image format change needed
    // for the measurement; the writer does not do this).
    let layout = std::alloc::Layout::from_size_align(CHUNK_BYTES, 4096).unwrap();
    // SAFETY: a non-zero-sized layout; the buffer is filled before it is read and freed
    // with the same layout below.
    let aligned = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!aligned.is_null());
    // SAFETY: `aligned` is CHUNK_BYTES long and ours alone.
    let abuf = unsafe { std::slice::from_raw_parts_mut(aligned, CHUNK_BYTES) };
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    use std::os::unix::fs::FileExt;
    let (n, c, w, _) = stage("O_DIRECT writes (aligned copy + write)", &mut |i| {
        abuf.copy_from_slice(pick(i));
        f.write_all_at(abuf, (i * CHUNK_BYTES) as u64).unwrap();
        0
    });
    let fsync = Instant::now();
    f.sync_all().unwrap();
    report(
        &n,
        c,
        w,
        &format!("(fsync {:.3} s)", fsync.elapsed().as_secs_f64()),
    );
    drop(f);
    // SAFETY: allocated above with `layout`.
    unsafe { std::alloc::dealloc(aligned, layout) };
    let _ = std::fs::remove_file(&path);
}
