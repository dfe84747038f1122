//! Startup: open (or create) the AOF directory, replay the base and incremental files
//! through `Server::execute`, cut a torn tail, start the writer thread. Also
//! `cairn-server --check-aof FILE [--fix [-y]]`.

use super::format::{self, Bad, Damage, ScanOutcome};
use super::manifest::Layout;
use super::storage::{FsDir, LogDir};
use super::writer::{FsyncMode, Writer};
use crate::commands::Args;
use crate::server::{Client, Server};
use crate::{notice, warning};
use std::path::{Path, PathBuf};

/// A file mapped read-only (the loader parses it in place, without copying GBs).
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    pub fn open(path: &Path) -> std::io::Result<Mapped> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len() as usize;
        if len == 0 {
            return Ok(Mapped {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: a private read-only mapping of a whole regular file; unmapped on drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapped { ptr, len })
    }
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the mapping is live and `len` bytes long for the lifetime of self.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping exactly what open() mapped.
            unsafe {
                libc::munmap(self.ptr, self.len);
            }
        }
    }
}

/// Where an unfinished `MULTI` block starts: the entry's offset, and the log position
/// (LSN, replication offset) just before it.
#[derive(Clone, Copy, Debug)]
struct OpenMulti {
    offset: u64,
    /// None in a file without LSN headers (written by Redis).
    prev_lsn: Option<u64>,
    prev_reploff: u64,
}

/// Replays one file. Returns the scan outcome (the caller decides about a bad tail) and,
/// when the file ends inside a transaction, where its `MULTI` starts: the queued
/// commands were not applied (a transaction replays all or nothing).
fn replay(
    srv: &mut Server,
    client: &mut Client,
    bytes: &[u8],
    first: Option<u64>,
) -> (ScanOutcome, Option<OpenMulti>) {
    let base = bytes.as_ptr() as usize;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    let mut open: Option<OpenMulti> = None;
    let mut prev_reploff: Option<u64> = None;
    let o = format::scan(bytes, first, |e| {
        ranges.clear();
        ranges.extend(e.args.iter().map(|a| (a.as_ptr() as usize - base, a.len())));
        let name = e.args[0];
        if srv.commands.lookup(name).is_none() {
            return Err(format!(
                "Unknown command '{}' reading the append only file",
                String::from_utf8_lossy(name)
            ));
        }
        out.clear();
        let was_open = client.multi.is_some();
        let oom_before = srv.stats.arena_oom_refusals;
        srv.execute(client, Args::new(bytes, &ranges), &mut out);
        if srv.stats.arena_oom_refusals != oom_before {
            // Replay must reach the state the log recorded: a write the arena has no room
            // for stops the load rather than being skipped.
            return Err(format!(
                "The dataset does not fit the arena's address space ({} bytes reserved) at '{}' reading the append only file; raise arena-reserve-bytes",
                srv.ks.arena.reserved_bytes(),
                String::from_utf8_lossy(name)
            ));
        }
        if client.multi.is_none() {
            open = None;
        } else if !was_open {
            // `*1\r\n$5\r\nMULTI\r\n` is 15 bytes of replication offset.
            open = Some(OpenMulti {
                offset: e.offset,
                prev_lsn: e.lsn.map(|l| l.saturating_sub(1)),
                prev_reploff: prev_reploff.unwrap_or(e.reploff.saturating_sub(15)),
            });
        }
        prev_reploff = Some(e.reploff);
        Ok(())
    });
    (o, open)
}

/// How startup treats the end of one incremental file's log: the one rule the loader and
/// `--check-aof` both apply, so they always agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    /// The whole file is log (or the log ends at unused filler).
    Whole,
    /// A recycled file's old content follows the log: cut, whatever `aof-load-truncated`
    /// says.
    Recycled,
    /// An interrupted write follows the log (nothing after it was acknowledged): cut with
    /// `aof-load-truncated yes`, startup stops with `no`.
    TornTail,
    /// Damage that may hide acknowledged writes, or a tail where this file may not end:
    /// startup stops and leaves the file as it is.
    Refused,
}

/// The [`LogEnd`] of a scanned incremental file (`last`: the last one listed).
pub fn end_of_log(o: &ScanOutcome, last: bool) -> LogEnd {
    let Some(bad) = &o.bad else {
        return LogEnd::Whole;
    };
    // A tail (torn, or a recycled file's old content) ends *this* file's log, whether or
    // not the file is the last one listed: since a rewrite's start the manifest lists the
    // next incremental file while this one is still written (`writer::Job::Prepare`), and
    // at the cut this one keeps whatever followed its log. Nothing acknowledged can be lost
    // that way unnoticed: the next file's first entry must continue from the LSN this one
    // ends at (`replay` checks it), and a later file gets entries only after this one was
    // synced whole at the cut. Only for a file whose entries carry LSNs (cairn's): in one
    // written by Redis no LSN would show a loss, so there, as in Redis, only the last file
    // may end early.
    let may_end_early = last || (o.headed && bad.expected_lsn.is_some());
    match bad.damage {
        _ if !may_end_early => LogEnd::Refused,
        Damage::RecycledEnd => LogEnd::Recycled,
        Damage::TornTail => LogEnd::TornTail,
        Damage::Corruption => LogEnd::Refused,
    }
}

fn describe(path: &Path, bad: &Bad) -> String {
    format!(
        "{} at offset {} of {}{}",
        bad.reason,
        bad.offset,
        path.display(),
        match bad.expected_lsn {
            Some(l) => format!(" (expected LSN {l})"),
            None => String::new(),
        }
    )
}

/// Opens the log at startup when `appendonly yes`: loads it into `srv` and starts the writer.
pub fn startup(srv: &mut Server) -> Result<(), String> {
    let s = srv.config.settings().clone();
    srv.aof.apply_settings(&s);
    srv.aof.replid = srv.master_replid.clone();
    if !s.appendonly {
        return Ok(());
    }
    if s.appendfilename.contains('/') || s.appenddirname.contains('/') {
        return Err("appendfilename and appenddirname can't be paths, just names".into());
    }
    let dir = PathBuf::from(&s.appenddirname);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let prefix = s.appendfilename.clone();
    let mname = format!("{prefix}.manifest");
    let mpath = dir.join(&mname);
    let layout = if mpath.exists() {
        let len = std::fs::metadata(&mpath).map(|m| m.len()).unwrap_or(0);
        if len > super::manifest::MANIFEST_MAX_BYTES {
            return Err(format!("The AOF manifest file {mname} is too large"));
        }
        let text = std::fs::read(&mpath).map_err(|e| format!("Can't read {mname}: {e}"))?;
        Layout::parse(&prefix, &text).map_err(|e| format!("{e} ({})", mpath.display()))?
    } else {
        create_fresh(&dir, &prefix, &srv.master_replid)?
    };
    let log_end = load_layout(srv, &dir, &layout, s.aof_load_truncated)?;
    let mut fsdir = FsDir::new(&dir);
    let Some(last) = layout.incrs.last().cloned() else {
        return Err("The AOF manifest lists no incremental file".into());
    };
    let incr = fsdir
        .open_append(&last.name)
        .map_err(|e| format!("Can't open the append-only file {}: {e}", last.name))?;
    // The log's end: a pre-allocated file is longer (zeroes after it).
    let incr_len = match log_end {
        Some(n) => n,
        None => fsdir.size_of(&last.name).unwrap_or(0),
    };
    let base_len = layout
        .base
        .as_ref()
        .and_then(|b| fsdir.size_of(&b.name).ok())
        .unwrap_or(0);
    let w = Writer::start_opts(
        Box::new(fsdir),
        incr,
        Some(&last.name),
        incr_len,
        srv.aof.last_lsn,
        FsyncMode::parse(&s.appendfsync),
        s.aof_disk_min_free,
        super::io_opts(&s),
    )
    .map_err(|e| format!("Can't start the AOF writer thread: {e}"))?;
    w.set_params(
        FsyncMode::parse(&s.appendfsync),
        s.aof_disk_min_free,
        s.aof_disk_min_free_pct,
    );
    w.shared
        .base_bytes
        .store(base_len, std::sync::atomic::Ordering::Relaxed);
    srv.aof.writer = Some(w);
    srv.aof.enabled = true;
    srv.ks.deletions = Some(Vec::new());
    let image_base = layout
        .base
        .as_ref()
        .is_some_and(|b| BaseKind::of(&dir.join(&b.name)).is_ok_and(|k| k == BaseKind::Image));
    let arena_bytes = srv.ks.arena.used_bytes();
    srv.aof.reset_growth_basis(image_base, arena_bytes);
    srv.aof.layout = Some(layout);
    notice!(
        "Opening AOF incr file {} on server start (LSN {})",
        last.name,
        srv.aof.last_lsn
    );
    Ok(())
}

fn create_fresh(dir: &Path, prefix: &str, replid: &str) -> Result<Layout, String> {
    let l = Layout::fresh(prefix);
    let mut d = FsDir::new(dir);
    let mut base = Vec::new();
    format::encode_base_end(&mut base, 0, replid, 0, 0);
    let err = |e: std::io::Error| format!("Can't create the append-only files: {e}");
    if let Some(b) = &l.base {
        d.write_atomic(&b.name, &base).map_err(err)?;
    }
    for i in &l.incrs {
        d.write_atomic(&i.name, b"").map_err(err)?;
    }
    d.write_atomic(&l.manifest_name(), &l.render())
        .map_err(err)?;
    notice!(
        "Creating AOF base file {} on server start",
        Layout::base_name(prefix, 1)
    );
    notice!(
        "Creating AOF incr file {} on server start",
        Layout::incr_name(prefix, 1)
    );
    Ok(l)
}

/// Replays base then incremental files, checking that LSNs continue across files.
/// Returns where the log ends in the last incremental file (None: it does not exist).
pub fn load_layout(
    srv: &mut Server,
    dir: &Path,
    layout: &Layout,
    load_truncated: bool,
) -> Result<Option<u64>, String> {
    let start = std::time::Instant::now();
    let mut client = Client::new(0, "aof".into(), String::new(), crate::util::now_ms());
    client.authenticated = true;
    srv.loading = true;
    srv.ks.loading = true;
    let result = (|| -> Result<Option<u64>, String> {
        let mut next_lsn: Option<u64> = None;
        let mut log_end = None;
        // Files to cut at their log's end: applied only once the whole layout has loaded,
        // so a load that fails on a later file leaves every byte as it found it.
        let mut cuts: Vec<(std::path::PathBuf, u64)> = Vec::new();
        if let Some(b) = &layout.base {
            let path = dir.join(&b.name);
            let kind = BaseKind::of(&path).map_err(|e| format!("Can't open {}: {e}", b.name))?;
            if let Some(lsn) = load_base(srv, &mut client, &path, kind)? {
                next_lsn = Some(lsn + 1);
                srv.aof.last_lsn = lsn;
            }
        }
        for (i, f) in layout.incrs.iter().enumerate() {
            let last = i + 1 == layout.incrs.len();
            let path = dir.join(&f.name);
            let m = match Mapped::open(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && last => {
                    // Created by the manifest commit but never written: empty.
                    continue;
                }
                Err(e) => return Err(format!("Can't open {}: {e}", f.name)),
            };
            let (o, open) = replay(srv, &mut client, m.bytes(), next_lsn);
            if let Some(l) = o.last_lsn {
                srv.aof.last_lsn = l;
                next_lsn = Some(l + 1);
            }
            if let Some(r) = &o.last_replid {
                srv.aof.replid = r.clone();
            }
            if let Some(r) = o.last_reploff {
                srv.aof.reploff = r;
            }
            if last {
                log_end = Some(o.valid_len);
            }
            match (end_of_log(&o, last), &o.bad) {
                (LogEnd::Whole, _) | (_, None) => {}
                (LogEnd::Recycled, Some(_)) => {
                    // A recycled file's old content after the new log: its normal end. It
                    // is cut all the same: later bytes may hold entries of writes that
                    // were in flight, whose LSNs the next entries will reuse.
                    notice!(
                        "AOF {} ends at offset {} (LSN {}): the rest is a recycled file's old content",
                        f.name,
                        o.valid_len,
                        srv.aof.last_lsn
                    );
                    cuts.push((path.clone(), o.valid_len));
                }
                (LogEnd::TornTail, Some(bad)) if load_truncated => {
                    warning!(
                        "!!! Warning: short read while loading the AOF file {}!!! {}",
                        f.name,
                        describe(&path, bad)
                    );
                    warning!(
                        "AOF {} loaded anyway because aof-load-truncated is enabled: truncated to {} bytes ({} bytes dropped, last LSN {})",
                        f.name,
                        o.valid_len,
                        m.bytes().len() as u64 - o.valid_len,
                        srv.aof.last_lsn
                    );
                    cuts.push((path.clone(), o.valid_len));
                    srv.aof.loaded_truncated = true;
                }
                (LogEnd::TornTail, Some(bad)) => {
                    return Err(format!(
                        "Unexpected end of file reading the append only file {}: {}. You can: 1) Make a backup of your AOF file, then use ./cairn-server --check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                        f.name,
                        describe(&path, bad)
                    ));
                }
                (LogEnd::Refused, Some(bad)) => {
                    return Err(format!(
                        "Bad file format reading the append only file {}: {}. The file was left unchanged. Make a backup of your AOF file, then use ./cairn-server --check-aof --fix <filename.manifest>",
                        f.name,
                        describe(&path, bad)
                    ));
                }
            }
            // An unfinished MULTI ends a file as a tail does (same condition).
            let open = open.filter(|om| last || om.prev_lsn.is_some());
            if let Some(om) = open {
                // The log ends inside MULTI (a crash while the block was being written):
                // none of it was applied; cut it so later appends do not land inside it.
                // In any file, as a torn tail above: a later file must continue from the
                // LSN before the block.
                if !load_truncated {
                    return Err(format!(
                        "Unexpected end of file reading the append only file {}: a MULTI block at offset {} has no EXEC. You can: 1) Make a backup of your AOF file, then use ./cairn-server --check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                        f.name, om.offset
                    ));
                }
                warning!(
                    "Revert incomplete MULTI/EXEC transaction in AOF file {} (cut at offset {}, last LSN {})",
                    f.name,
                    om.offset,
                    om.prev_lsn.map_or("-".to_string(), |l| l.to_string())
                );
                cuts.push((path.clone(), om.offset));
                // The writer appends where the kept log now ends.
                if last {
                    log_end = Some(om.offset);
                }
                if let Some(prev) = om.prev_lsn {
                    next_lsn = Some(prev + 1);
                    srv.aof.last_lsn = prev;
                }
                srv.aof.reploff = om.prev_reploff;
                srv.aof.loaded_truncated = true;
                client.multi = None;
            }
            notice!("DB loaded from incr file {}: {} entries", f.name, o.entries);
        }
        for (path, len) in cuts {
            truncate(&path, len)?;
        }
        Ok(log_end)
    })();
    srv.loading = false;
    srv.ks.loading = false;
    // Whatever db the last entry selected, the next entry states its own.
    notice!(
        "DB loaded from append only file: {:.3} seconds",
        start.elapsed().as_secs_f64()
    );
    result
}

/// What a base file holds, told by its first bytes (as Redis tells an RDB preamble).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseKind {
    /// `REDIS00xx`: an RDB file (cairn's `.base.rdb`, or one Redis wrote).
    Rdb,
    /// `CAIRNIMG`: a snapshot image (`.base.cimg`).
    Image,
    /// Commands with `#HDR:` lines and a `#BASE-END` trailer (older `.base.aof`), or an
    /// empty file.
    Commands,
}

impl BaseKind {
    pub fn of(path: &Path) -> std::io::Result<BaseKind> {
        use std::io::Read;
        let mut head = [0u8; 9];
        let mut f = std::fs::File::open(path)?;
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..])? {
                0 => break,
                k => n += k,
            }
        }
        Ok(
            if crate::persistence::rdb_file::looks_like_rdb(&head[..n]) {
                BaseKind::Rdb
            } else if head[..n.min(8)] == crate::persistence::snapshot::format::FILE_MAGIC[..] {
                BaseKind::Image
            } else {
                BaseKind::Commands
            },
        )
    }
}

/// Loads the base file into `srv` and sets the log position it stands for (replication
/// id and offset). Returns its LSN when the file says it (None: a base Redis wrote).
fn load_base(
    srv: &mut Server,
    client: &mut Client,
    path: &Path,
    kind: BaseKind,
) -> Result<Option<u64>, String> {
    let name = path.display();
    match kind {
        BaseKind::Commands => {
            let m = Mapped::open(path).map_err(|e| format!("Can't open {name}: {e}"))?;
            // The base's entries are numbered 1.. by themselves; its trailer gives the log
            // position it stands for.
            let (o, _) = replay(srv, client, m.bytes(), Some(1));
            if let Some(bad) = &o.bad {
                return Err(format!("Bad base file: {}", describe(path, bad)));
            }
            notice!("DB loaded from base file {name}: {} entries", o.entries);
            Ok(o.base_end.map(|be| {
                srv.aof.replid = be.replid.clone();
                srv.aof.reploff = be.reploff;
                be.lsn
            }))
        }
        BaseKind::Rdb => {
            let m = Mapped::open(path).map_err(|e| format!("Can't open {name}: {e}"))?;
            // Expired keys are kept: the log after the base may still name them (Redis
            // loads a preamble the same way).
            let st = crate::persistence::rdb_file::load_rdb(
                m.bytes(),
                &mut srv.ks,
                &srv.config,
                i64::MIN,
            )
            .map_err(|e| format!("Bad RDB base file {name}: {e}"))?;
            notice!(
                "DB loaded from base file {name} (RDB version {}): {} keys",
                st.version,
                st.keys_loaded
            );
            if let Some(r) = st.repl_id.filter(|r| r.len() == 40) {
                srv.aof.replid = r;
            }
            if let Some(o) = st.repl_offset {
                srv.aof.reploff = o;
            }
            Ok(st.aof_lsn)
        }
        BaseKind::Image => {
            let reserve = srv.config.settings().arena_reserve_bytes;
            let progress = crate::persistence::snapshot::format::LoadProgress::default();
            let (arena, header) =
                crate::persistence::snapshot::load_image(path, reserve, &progress)?
                    .ok_or_else(|| format!("Can't open {name}: no such file"))?;
            let databases = srv.config.settings().databases;
            let ks = crate::keyspace::Keyspace::from_arena(arena, databases)
                .map_err(|e| format!("snapshot image {name}: {e}"))?;
            srv.install_keyspace(ks);
            srv.ks.loading = true;
            notice!(
                "DB loaded from base file {name} (snapshot image): {} keys, {} bytes of arena",
                srv.ks.total_keys(),
                header.arena_bytes
            );
            let id = String::from_utf8_lossy(&header.repl_id).into_owned();
            if id.bytes().all(|c| c.is_ascii_hexdigit()) {
                srv.aof.replid = id;
            }
            srv.aof.reploff = header.repl_offset;
            Ok(Some(header.aof_lsn))
        }
    }
}

fn truncate(path: &Path, len: u64) -> Result<(), String> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("Can't open {} to truncate it: {e}", path.display()))?;
    f.set_len(len)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("Can't truncate {}: {e}", path.display()))
}

/// Which part of the log a checked file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// A base of commands (`.base.aof`): any damage is corruption, and it is never cut.
    Base,
    /// An incremental file; `last`: the last one listed (or a file checked on its own).
    Incr { last: bool },
}

/// Whether and how `--check-aof` may cut a file.
pub enum Fix<'a> {
    /// Report only.
    No,
    /// Cut after a yes from `confirm` (the question has been written out).
    Ask(&'a mut dyn FnMut() -> bool),
    /// Cut without asking (`-y`).
    Yes,
}

/// What `--check-aof` found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheck {
    /// Startup loads the file as it now is (cutting a torn or recycled tail if there is one).
    pub loadable: bool,
    /// The LSN of the last valid entry.
    pub last_lsn: Option<u64>,
    /// The LSN a base's trailer stands for.
    pub base_end_lsn: Option<u64>,
}

/// Checks one file and writes the findings to `out`; with `fix`, offers to cut it at the
/// first bad byte. The verdict is the loader's ([`end_of_log`]).
pub fn check_file(
    path: &Path,
    first_lsn: Option<u64>,
    role: FileRole,
    fix: Fix<'_>,
    out: &mut dyn std::io::Write,
) -> Result<FileCheck, String> {
    let m = Mapped::open(path).map_err(|e| format!("Cannot open file {}: {e}", path.display()))?;
    let size = m.bytes().len() as u64;
    let o = format::scan(m.bytes(), first_lsn, |_| Ok(()));
    drop(m);
    let name = path.display();
    let mut check = FileCheck {
        loadable: true,
        last_lsn: o.last_lsn,
        base_end_lsn: o.base_end.as_ref().map(|be| be.lsn),
    };
    let mut say = |text: String| -> Result<(), String> {
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| format!("Cannot write the report: {e}"))
    };
    say(format!(
        "AOF analyzed: filename={name}, size={size}, ok_up_to={}, entries={}, last_lsn={}, diff={}\n",
        o.valid_len,
        o.entries,
        o.last_lsn.map_or("-".into(), |l| l.to_string()),
        size - o.valid_len
    ))?;
    let Some(bad) = &o.bad else {
        say(format!("AOF {name} is valid\n"))?;
        return Ok(check);
    };
    let end = match role {
        FileRole::Base => LogEnd::Refused,
        FileRole::Incr { last } => end_of_log(&o, last),
    };
    let dropped = size - o.valid_len;
    match end {
        // Only a file without a bad spot is whole (returned above).
        LogEnd::Whole => return Ok(check),
        LogEnd::Recycled => say(format!(
            "AOF {name} is valid: its log ends at offset {} (LSN {}); the {dropped} bytes after it are a recycled file's old content, which startup cuts\n",
            o.valid_len,
            o.last_lsn.map_or("-".into(), |l| l.to_string()),
        ))?,
        LogEnd::TornTail => say(format!(
            "Torn tail (an interrupted write; nothing after it was acknowledged): {}\nAOF {name} loads: startup cuts its last {dropped} bytes when aof-load-truncated is yes (the default)\n",
            describe(path, bad)
        ))?,
        LogEnd::Refused => {
            check.loadable = false;
            let what = match bad.damage {
                Damage::Corruption => "Corruption in the middle of the log",
                Damage::TornTail | Damage::RecycledEnd => match role {
                    FileRole::Base => "Damage in a base file",
                    FileRole::Incr { .. } => "A tail in a file without LSNs before the last one",
                },
            };
            say(format!(
                "{what}: {}\nAOF {name} is not valid. Use the --fix option to try fixing it.\n",
                describe(path, bad)
            ))?;
        }
    }
    let mut confirm = match fix {
        Fix::No => return Ok(check),
        Fix::Ask(confirm) => Some(confirm),
        Fix::Yes => None,
    };
    // A cut may only end the log where startup could end it: cutting an earlier file (or
    // a base) would let the files after it replay on top of the hole.
    let last = matches!(role, FileRole::Incr { last: true });
    if end == LogEnd::Refused && !last {
        say(format!(
            "Cannot cut AOF {name}: only the last incremental file may be cut (the files after it would replay over the hole)\n"
        ))?;
        return Ok(check);
    }
    let after_damage = if bad.damage == Damage::Corruption {
        ", including valid entries after the damage"
    } else {
        ""
    };
    say(format!(
        "--fix cuts AOF {name} from {size} to {} bytes ({dropped} bytes dropped{after_damage})\n",
        o.valid_len
    ))?;
    if let Some(confirm) = confirm.as_mut() {
        say("Continue? [y/N]: ".into())?;
        if !confirm() {
            say(format!("Aborting: AOF {name} is unchanged\n"))?;
            return Ok(check);
        }
    }
    truncate(path, o.valid_len)?;
    say(format!(
        "Successfully truncated AOF {name} to {} bytes ({dropped} bytes dropped{after_damage})\n",
        o.valid_len
    ))?;
    check.loadable = true;
    Ok(check)
}

/// Reads the answer to "Continue? [y/N]" from stdin: yes only for `y` or `yes` (any case).
fn confirm_on_stdin() -> bool {
    let mut answer = String::new();
    match std::io::stdin().read_line(&mut answer) {
        Ok(_) => {
            let a = answer.trim();
            a.eq_ignore_ascii_case("y") || a.eq_ignore_ascii_case("yes")
        }
        Err(_) => false,
    }
}

const CHECK_AOF_USAGE: &str =
    "Usage: cairn-server --check-aof [--fix [-y|--yes]] <file.manifest|file.aof>";

/// `cairn-server --check-aof [--fix [-y]] FILE`: FILE is one AOF file or a manifest (then
/// every file it lists is checked, LSNs continuing across them). `--fix` asks before it
/// cuts anything (`Continue? [y/N]:` on stdin, as redis-check-aof does); `-y` does not ask.
/// Returns the exit code: 0 when startup would load every file as it now is.
pub fn check_aof_cli(args: &[String]) -> i32 {
    let (mut fix, mut yes, mut file) = (false, false, None);
    for a in args {
        match a.as_str() {
            "--fix" => fix = true,
            "-y" | "--yes" => yes = true,
            _ if a.starts_with('-') || file.is_some() => {
                eprintln!("{CHECK_AOF_USAGE}");
                return 1;
            }
            _ => file = Some(a.as_str()),
        }
    }
    let Some(file) = file else {
        eprintln!("{CHECK_AOF_USAGE}");
        return 1;
    };
    let path = Path::new(file);
    let mut files: Vec<(PathBuf, bool)> = Vec::new();
    if file.ends_with(".manifest") {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("Cannot open file {file}: {e}");
                return 1;
            }
        };
        let prefix = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".manifest"))
            .unwrap_or("appendonly.aof");
        let l = match Layout::parse(prefix, &text) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("Invalid manifest {file}: {e}");
                return 1;
            }
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(b) = &l.base {
            files.push((dir.join(&b.name), true));
        }
        files.extend(l.incrs.iter().map(|f| (dir.join(&f.name), false)));
    } else {
        files.push((path.to_path_buf(), file.contains(".base.")));
    }
    let incrs = files.iter().filter(|(_, is_base)| !is_base).count();
    let mut ok = true;
    let mut next: Option<u64> = None;
    let mut seen_incrs = 0;
    for (p, is_base) in &files {
        let kind = match BaseKind::of(p) {
            Ok(k) if *is_base => k,
            Ok(_) => BaseKind::Commands,
            Err(e) => {
                eprintln!("Cannot open file {}: {e}", p.display());
                return 1;
            }
        };
        if kind != BaseKind::Commands {
            // Not a log of commands: its own loader checks it at startup (RDB CRC-64,
            // image CRC-32C records). Only its log position is needed here.
            let lsn = match kind {
                BaseKind::Rdb => Mapped::open(p)
                    .ok()
                    .and_then(|m| crate::persistence::rdb_file::base_aof_lsn(m.bytes())),
                _ => crate::persistence::snapshot::format::read_header(p)
                    .ok()
                    .map(|h| h.aof_lsn),
            };
            println!(
                "AOF base {} is {} (not checked as a log; stands for LSN {})",
                p.display(),
                if kind == BaseKind::Rdb {
                    "an RDB file"
                } else {
                    "a snapshot image"
                },
                lsn.map_or("-".into(), |l| l.to_string())
            );
            next = lsn.map(|l| l + 1);
            continue;
        }
        let role = if *is_base {
            FileRole::Base
        } else {
            seen_incrs += 1;
            FileRole::Incr {
                last: seen_incrs == incrs,
            }
        };
        let first = if *is_base { Some(1) } else { next };
        let mut ask = confirm_on_stdin;
        let mode = match (fix, yes) {
            (false, _) => Fix::No,
            (true, false) => Fix::Ask(&mut ask),
            (true, true) => Fix::Yes,
        };
        match check_file(p, first, role, mode, &mut std::io::stdout()) {
            Ok(c) => {
                ok &= c.loadable;
                // LSNs continue from the base's trailer or the previous file's last entry.
                next = match (is_base, c.base_end_lsn, c.last_lsn) {
                    (true, Some(be), _) => Some(be + 1),
                    (false, _, Some(l)) => Some(l + 1),
                    _ => next,
                };
            }
            Err(e) => {
                eprintln!("{e}");
                return 1;
            }
        }
    }
    if ok {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::{encode_batch_marker, encode_command, encode_entry, Bad};
    use super::super::manifest::FileInfo;
    use super::*;
    use crate::config::Config;

    const RID: &str = "0123456789012345678901234567890123456789";

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cairn-load-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A log written as the writer frames it: one entry per command, LSNs rising by one.
    struct Log {
        bytes: Vec<u8>,
        next_lsn: u64,
        reploff: u64,
        /// Offset and reploff of each entry.
        entries: Vec<(usize, u64)>,
    }

    impl Log {
        fn from(first_lsn: u64) -> Log {
            Log {
                bytes: Vec::new(),
                next_lsn: first_lsn,
                reploff: 0,
                entries: Vec::new(),
            }
        }
        fn cmd(mut self, args: &[&str]) -> Log {
            let mut p = Vec::new();
            encode_command(&mut p, args);
            self.reploff += p.len() as u64;
            self.entries.push((self.bytes.len(), self.reploff));
            encode_entry(&mut self.bytes, self.next_lsn, RID, self.reploff, &p);
            self.next_lsn += 1;
            self
        }
        fn sets(mut self, n: usize) -> Log {
            for _ in 0..n {
                let l = self.next_lsn.to_string();
                self = self.cmd(&["SET", &format!("k{l}"), &l]);
            }
            self
        }
    }

    fn layout(names: &[&str]) -> Layout {
        Layout {
            prefix: "t".into(),
            base: None,
            history: vec![],
            incrs: names
                .iter()
                .enumerate()
                .map(|(i, n)| FileInfo {
                    name: n.to_string(),
                    seq: i as u64 + 1,
                })
                .collect(),
        }
    }

    fn server() -> Server {
        Server::new(Config::default()).unwrap()
    }

    fn run(srv: &mut Server, args: &[&str]) -> String {
        let mut c = srv.alloc_client("127.0.0.1:1".into(), "127.0.0.1:2".into());
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for a in args {
            ranges.push((buf.len(), a.len()));
            buf.extend_from_slice(a.as_bytes());
        }
        let mut out = Vec::new();
        srv.execute(&mut c, Args::new(&buf, &ranges), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn len_of(p: &Path) -> u64 {
        std::fs::metadata(p).unwrap().len()
    }

    fn outcome(bad: Option<Damage>, headed: bool, expected_lsn: Option<u64>) -> ScanOutcome {
        ScanOutcome {
            headed,
            bad: bad.map(|damage| Bad {
                offset: 10,
                expected_lsn,
                reason: "x".into(),
                damage,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn end_of_log_verdicts() {
        use Damage::*;
        // No bad spot: whole, wherever the file is.
        for last in [false, true] {
            assert_eq!(end_of_log(&outcome(None, false, None), last), LogEnd::Whole);
        }
        // The last file, or an earlier one of cairn's (headed, LSN known), may end early.
        for (headed, lsn, last) in [
            (false, None, true),
            (true, Some(5), false),
            (true, Some(5), true),
        ] {
            let v = |d| end_of_log(&outcome(Some(d), headed, lsn), last);
            assert_eq!(v(RecycledEnd), LogEnd::Recycled);
            assert_eq!(v(TornTail), LogEnd::TornTail);
            assert_eq!(v(Corruption), LogEnd::Refused);
        }
        // An earlier file written by Redis (no LSNs), or one whose LSN is unknown: any
        // tail is refused.
        for (headed, lsn) in [(false, Some(5)), (true, None), (false, None)] {
            for d in [RecycledEnd, TornTail, Corruption] {
                assert_eq!(
                    end_of_log(&outcome(Some(d), headed, lsn), false),
                    LogEnd::Refused,
                    "{d:?} headed={headed} lsn={lsn:?}"
                );
            }
        }
    }

    #[test]
    fn base_kind_is_told_by_the_first_bytes() {
        let dir = temp_dir("kind");
        let cases: &[(&str, &[u8], BaseKind)] = &[
            ("rdb", b"REDIS0011\xfa\x00", BaseKind::Rdb),
            ("img", b"CAIRNIMG\x01\x02\x03", BaseKind::Image),
            ("cmds", b"*1\r\n$4\r\nPING\r\n", BaseKind::Commands),
            ("empty", b"", BaseKind::Commands),
            ("short", b"REDIS", BaseKind::Commands),
            ("notdigits", b"REDIS00x1", BaseKind::Commands),
        ];
        for (name, bytes, kind) in cases {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            assert_eq!(BaseKind::of(&p).unwrap(), *kind, "{name}");
        }
        let e = BaseKind::of(&dir.join("missing")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn mapped_file_gives_its_bytes_and_an_empty_file_none() {
        let dir = temp_dir("mapped");
        let p = dir.join("f");
        std::fs::write(&p, b"hello log").unwrap();
        assert_eq!(Mapped::open(&p).unwrap().bytes(), b"hello log");
        std::fs::write(&p, b"").unwrap();
        assert!(Mapped::open(&p).unwrap().bytes().is_empty());
        assert!(Mapped::open(&dir.join("missing")).is_err());
    }

    #[test]
    fn files_replay_in_order_with_lsns_continuing_across_them() {
        let dir = temp_dir("order");
        let a = Log::from(1).cmd(&["SET", "a", "1"]).cmd(&["SET", "b", "2"]);
        let b = Log::from(3).cmd(&["SET", "a", "3"]).cmd(&["DEL", "b"]);
        std::fs::write(dir.join("t.1.incr.aof"), &a.bytes).unwrap();
        std::fs::write(dir.join("t.2.incr.aof"), &b.bytes).unwrap();
        let mut srv = server();
        let end = load_layout(
            &mut srv,
            &dir,
            &layout(&["t.1.incr.aof", "t.2.incr.aof"]),
            false,
        );
        assert_eq!(end, Ok(Some(b.bytes.len() as u64)));
        assert!(!srv.loading && !srv.ks.loading);
        assert_eq!(run(&mut srv, &["GET", "a"]), "$1\r\n3\r\n");
        assert_eq!(run(&mut srv, &["EXISTS", "b"]), ":0\r\n");
        assert_eq!(srv.aof.last_lsn, 4);
        assert_eq!(srv.aof.reploff, b.reploff);
        assert_eq!(srv.aof.replid, RID);
        assert!(!srv.aof.loaded_truncated);
    }

    #[test]
    fn a_gap_in_lsns_between_files_refuses_the_load() {
        let dir = temp_dir("gap");
        std::fs::write(dir.join("t.1.incr.aof"), Log::from(1).sets(2).bytes).unwrap();
        let later = Log::from(4).sets(2).bytes;
        std::fs::write(dir.join("t.2.incr.aof"), &later).unwrap();
        let mut srv = server();
        let e = load_layout(
            &mut srv,
            &dir,
            &layout(&["t.1.incr.aof", "t.2.incr.aof"]),
            true,
        )
        .unwrap_err();
        assert!(
            e.contains("Bad file format") && e.contains("LSN 4 where 3"),
            "{e}"
        );
        assert_eq!(len_of(&dir.join("t.2.incr.aof")), later.len() as u64);
        assert!(!srv.loading);
    }

    #[test]
    fn a_torn_tail_of_the_last_file_is_cut_only_with_aof_load_truncated() {
        let dir = temp_dir("torn");
        let log = Log::from(1).sets(3);
        let whole = log.entries[2].0; // the third entry is torn
        let torn = &log.bytes[..log.bytes.len() - 5];
        let p = dir.join("t.1.incr.aof");
        std::fs::write(&p, torn).unwrap();
        let l = layout(&["t.1.incr.aof"]);
        let e = load_layout(&mut server(), &dir, &l, false).unwrap_err();
        assert!(e.starts_with("Unexpected end of file"), "{e}");
        assert_eq!(
            len_of(&p),
            torn.len() as u64,
            "refused: the file is left as it is"
        );
        let mut srv = server();
        assert_eq!(
            load_layout(&mut srv, &dir, &l, true),
            Ok(Some(whole as u64))
        );
        assert_eq!(len_of(&p), whole as u64);
        assert!(srv.aof.loaded_truncated);
        assert_eq!(srv.aof.last_lsn, 2);
        assert_eq!(run(&mut srv, &["EXISTS", "k1", "k2", "k3"]), ":2\r\n");
    }

    #[test]
    fn cuts_wait_until_every_file_loaded() {
        // File 1 ends with a torn write (a cut for later); file 2 is corrupt in the
        // middle: the load fails and file 1 keeps every byte.
        let dir = temp_dir("cuts");
        let a = Log::from(1).sets(2);
        let mut a_bytes = a.bytes.clone();
        let mut half = Vec::new();
        encode_command(&mut half, &["SET", "x", "y"]);
        encode_entry(&mut a_bytes, 3, RID, 999, &half);
        a_bytes.truncate(a_bytes.len() - 3);
        let mut b = Log::from(3).sets(3).bytes;
        b[40] ^= 0x01;
        std::fs::write(dir.join("t.1.incr.aof"), &a_bytes).unwrap();
        std::fs::write(dir.join("t.2.incr.aof"), &b).unwrap();
        let l = layout(&["t.1.incr.aof", "t.2.incr.aof"]);
        let e = load_layout(&mut server(), &dir, &l, true).unwrap_err();
        assert!(e.starts_with("Bad file format"), "{e}");
        assert_eq!(len_of(&dir.join("t.1.incr.aof")), a_bytes.len() as u64);
        // With file 2 intact, file 1's torn tail is its end (file 2 continues its LSNs).
        std::fs::write(dir.join("t.2.incr.aof"), Log::from(3).sets(3).bytes).unwrap();
        let mut srv = server();
        assert!(load_layout(&mut srv, &dir, &l, true).is_ok());
        assert_eq!(len_of(&dir.join("t.1.incr.aof")), a.bytes.len() as u64);
        assert_eq!(srv.aof.last_lsn, 5);
        assert_eq!(run(&mut srv, &["EXISTS", "x"]), ":0\r\n");
    }

    #[test]
    fn an_unfinished_multi_is_reverted_and_cut_at_its_start() {
        let dir = temp_dir("multi");
        let log = Log::from(1)
            .cmd(&["SET", "a", "1"])
            .cmd(&["MULTI"])
            .cmd(&["SET", "a", "2"])
            .cmd(&["SET", "b", "2"]);
        let (multi_at, _) = log.entries[1];
        let p = dir.join("t.1.incr.aof");
        std::fs::write(&p, &log.bytes).unwrap();
        let l = layout(&["t.1.incr.aof"]);
        let e = load_layout(&mut server(), &dir, &l, false).unwrap_err();
        assert!(
            e.contains("MULTI block at offset") && e.contains("has no EXEC"),
            "{e}"
        );
        assert_eq!(len_of(&p), log.bytes.len() as u64);
        let mut srv = server();
        assert_eq!(
            load_layout(&mut srv, &dir, &l, true),
            Ok(Some(multi_at as u64))
        );
        assert_eq!(len_of(&p), multi_at as u64);
        assert_eq!(run(&mut srv, &["GET", "a"]), "$1\r\n1\r\n");
        assert_eq!(run(&mut srv, &["EXISTS", "b"]), ":0\r\n");
        // The log position is the one before MULTI.
        assert_eq!(srv.aof.last_lsn, 1);
        assert_eq!(srv.aof.reploff, log.entries[0].1);
        assert!(srv.aof.loaded_truncated);
        // A finished transaction is applied whole.
        let done = Log::from(1)
            .cmd(&["MULTI"])
            .cmd(&["SET", "a", "9"])
            .cmd(&["EXEC"]);
        std::fs::write(&p, &done.bytes).unwrap();
        let mut srv = server();
        assert_eq!(
            load_layout(&mut srv, &dir, &l, false),
            Ok(Some(done.bytes.len() as u64))
        );
        assert_eq!(run(&mut srv, &["GET", "a"]), "$1\r\n9\r\n");
    }

    #[test]
    fn a_missing_last_file_is_empty_and_a_missing_earlier_one_an_error() {
        let dir = temp_dir("missing");
        std::fs::write(dir.join("t.1.incr.aof"), Log::from(1).sets(1).bytes).unwrap();
        let mut srv = server();
        assert_eq!(
            load_layout(
                &mut srv,
                &dir,
                &layout(&["t.1.incr.aof", "t.2.incr.aof"]),
                false
            ),
            Ok(None)
        );
        assert_eq!(srv.aof.last_lsn, 1);
        let e = load_layout(
            &mut server(),
            &dir,
            &layout(&["t.0.incr.aof", "t.1.incr.aof"]),
            false,
        )
        .unwrap_err();
        assert!(e.starts_with("Can't open t.0.incr.aof"), "{e}");
    }

    #[test]
    fn an_unknown_command_stops_the_load() {
        let dir = temp_dir("unknown");
        let log = Log::from(1)
            .cmd(&["SET", "a", "1"])
            .cmd(&["NOSUCHCMD", "x"])
            .sets(1);
        std::fs::write(dir.join("t.1.incr.aof"), &log.bytes).unwrap();
        let e = load_layout(&mut server(), &dir, &layout(&["t.1.incr.aof"]), true).unwrap_err();
        assert!(
            e.contains("Unknown command 'NOSUCHCMD' reading the append only file"),
            "{e}"
        );
    }

    #[test]
    fn a_fresh_directory_is_a_loadable_empty_log() {
        let dir = temp_dir("fresh");
        let l = create_fresh(&dir, "appendonly.aof", RID).unwrap();
        assert_eq!(l, Layout::fresh("appendonly.aof"));
        let manifest = std::fs::read(dir.join(l.manifest_name())).unwrap();
        assert_eq!(Layout::parse("appendonly.aof", &manifest).unwrap(), l);
        let base = dir.join(&l.base.as_ref().unwrap().name);
        assert_eq!(BaseKind::of(&base).unwrap(), BaseKind::Commands);
        assert_eq!(len_of(&dir.join(&l.incrs[0].name)), 0);
        let mut srv = server();
        srv.aof.replid = "other".into();
        assert_eq!(load_layout(&mut srv, &dir, &l, false), Ok(Some(0)));
        assert_eq!(srv.aof.last_lsn, 0);
        assert_eq!(
            srv.aof.replid, RID,
            "the base's trailer states the position"
        );
        // A base with entries then its trailer: the next file continues after its LSN.
        let mut b = Log::from(1).cmd(&["SET", "fromb", "1"]).bytes;
        super::super::format::encode_base_end(&mut b, 7, RID, 70, 1);
        std::fs::write(&base, &b).unwrap();
        std::fs::write(dir.join(&l.incrs[0].name), Log::from(8).sets(1).bytes).unwrap();
        let mut srv = server();
        assert!(load_layout(&mut srv, &dir, &l, false).is_ok());
        assert_eq!(srv.aof.last_lsn, 8);
        assert_eq!(run(&mut srv, &["EXISTS", "fromb", "k8"]), ":2\r\n");
    }

    fn check(p: &Path, first: Option<u64>, role: FileRole, fix: Fix<'_>) -> (FileCheck, String) {
        let mut out = Vec::new();
        let c = check_file(p, first, role, fix, &mut out).unwrap();
        (c, String::from_utf8(out).unwrap())
    }

    #[test]
    fn check_file_reports_a_valid_log_and_a_torn_tail_it_may_cut() {
        let dir = temp_dir("check-torn");
        let p = dir.join("t.1.incr.aof");
        let log = Log::from(1).sets(3);
        std::fs::write(&p, &log.bytes).unwrap();
        let (c, text) = check(&p, Some(1), FileRole::Incr { last: true }, Fix::No);
        assert!(c.loadable && text.contains("is valid"), "{text}");
        assert_eq!(c.last_lsn, Some(3));
        let torn = log.bytes.len() - 4;
        std::fs::write(&p, &log.bytes[..torn]).unwrap();
        let (c, text) = check(&p, Some(1), FileRole::Incr { last: true }, Fix::No);
        assert!(c.loadable && text.contains("Torn tail"), "{text}");
        assert_eq!(c.last_lsn, Some(2));
        assert_eq!(len_of(&p), torn as u64, "no --fix: unchanged");
        let (c, text) = check(&p, Some(1), FileRole::Incr { last: true }, Fix::Yes);
        assert!(
            c.loadable && text.contains("Successfully truncated"),
            "{text}"
        );
        assert_eq!(len_of(&p), log.entries[2].0 as u64);
    }

    #[test]
    fn check_file_cuts_corruption_only_in_the_last_file_and_after_a_yes() {
        let dir = temp_dir("check-corrupt");
        let p = dir.join("t.1.incr.aof");
        let mut bytes = Log::from(1).sets(4).bytes;
        let second = Log::from(1).sets(1).bytes.len();
        bytes[second + 30] ^= 0x04; // inside entry 2, entries 3 and 4 follow
        let last = FileRole::Incr { last: true };
        std::fs::write(&p, &bytes).unwrap();
        let (c, text) = check(&p, Some(1), last, Fix::No);
        assert!(
            !c.loadable && text.contains("Corruption in the middle"),
            "{text}"
        );
        let mut no = || false;
        let (c, text) = check(&p, Some(1), last, Fix::Ask(&mut no));
        assert!(!c.loadable && text.contains("Aborting"), "{text}");
        assert_eq!(len_of(&p), bytes.len() as u64);
        // Not the last file: never cut (the files after it would replay over the hole).
        let (c, text) = check(&p, Some(1), FileRole::Incr { last: false }, Fix::Yes);
        assert!(!c.loadable && text.contains("Cannot cut"), "{text}");
        assert_eq!(len_of(&p), bytes.len() as u64);
        let (c, text) = check(&p, Some(1), FileRole::Base, Fix::Yes);
        assert!(!c.loadable && text.contains("Cannot cut"), "{text}");
        let mut yes = || true;
        let (c, text) = check(&p, Some(1), last, Fix::Ask(&mut yes));
        assert!(c.loadable, "{text}");
        assert!(
            text.contains("including valid entries after the damage"),
            "{text}"
        );
        assert_eq!(len_of(&p), second as u64);
    }

    #[test]
    fn check_file_says_a_base_tail_is_damage_and_a_recycled_end_is_valid() {
        let dir = temp_dir("check-roles");
        let p = dir.join("t.1.base.aof");
        let log = Log::from(1).sets(2);
        std::fs::write(&p, &log.bytes[..log.bytes.len() - 3]).unwrap();
        let (c, text) = check(&p, Some(1), FileRole::Base, Fix::No);
        assert!(
            !c.loadable && text.contains("Damage in a base file"),
            "{text}"
        );
        // A recycled file: the new log (41..=45) written over the old one (1..=40).
        let batch = |from: u64, n: u64, durable: u64| {
            let mut out = Vec::new();
            encode_batch_marker(&mut out, durable);
            for lsn in from..from + n {
                let mut c = Vec::new();
                encode_command(&mut c, &["SET", &format!("k{lsn}"), "v"]);
                encode_entry(&mut out, lsn, RID, lsn * 10, &c);
            }
            out
        };
        let new = batch(41, 5, 40);
        let mut seg = batch(1, 40, 0);
        seg[..new.len()].copy_from_slice(&new);
        let p = dir.join("t.2.incr.aof");
        std::fs::write(&p, &seg).unwrap();
        let (c, text) = check(&p, Some(41), FileRole::Incr { last: false }, Fix::No);
        assert!(
            c.loadable && text.contains("recycled file's old content"),
            "{text}"
        );
        assert_eq!(c.last_lsn, Some(45));
        assert_eq!(len_of(&p), seg.len() as u64);
    }

    #[test]
    fn check_aof_cli_exit_codes() {
        let dir = temp_dir("cli");
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(check_aof_cli(&s(&[])), 1);
        assert_eq!(check_aof_cli(&s(&["--bogus", "x"])), 1);
        assert_eq!(check_aof_cli(&s(&["a", "b"])), 1);
        let l = create_fresh(&dir, "appendonly.aof", RID).unwrap();
        let incr = dir.join(&l.incrs[0].name);
        std::fs::write(&incr, Log::from(1).sets(2).bytes).unwrap();
        let manifest = dir.join(l.manifest_name()).to_string_lossy().into_owned();
        let incr_s = incr.to_string_lossy().into_owned();
        let nope = dir.join("nope.manifest").to_string_lossy().into_owned();
        assert_eq!(check_aof_cli(&s(&[manifest.as_str()])), 0);
        // The base's trailer says LSN 0: an incremental file starting at 2 is a gap.
        std::fs::write(&incr, Log::from(2).sets(2).bytes).unwrap();
        assert_eq!(check_aof_cli(&s(&[manifest.as_str()])), 1);
        assert_eq!(
            check_aof_cli(&s(&[incr_s.as_str()])),
            0,
            "alone, no LSN to continue"
        );
        assert_eq!(check_aof_cli(&s(&[nope.as_str()])), 1);
    }
}
