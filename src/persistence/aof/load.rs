//! Reading the log back: a file mapped for parsing in place, the verdict on how a file
//! ends (torn tail, recycled end, corruption), the cut, a fresh layout, and
//! `cairn-server --check-aof FILE [--fix [-y]]`. The executor's startup replay that uses
//! them is `src/commands/executor/aof_startup.rs`.

use super::format::{self, Bad, Damage, ScanOutcome};
use super::manifest::Layout;
use super::storage::{FsDir, LogDir};
use crate::notice;
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

pub(crate) fn describe(path: &Path, bad: &Bad) -> String {
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

pub(crate) fn create_fresh(dir: &Path, prefix: &str, replid: &str) -> Result<Layout, String> {
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

pub(crate) fn truncate(path: &Path, len: u64) -> Result<(), String> {
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
    use super::*;
    use crate::persistence::aof::format::{encode_batch_marker, encode_command, encode_entry};
    use crate::persistence::aof::testing::{temp_dir, Log, RID};

    fn check(p: &Path, first: Option<u64>, role: FileRole, fix: Fix<'_>) -> (FileCheck, String) {
        let mut out = Vec::new();
        let c = check_file(p, first, role, fix, &mut out).unwrap();
        (c, String::from_utf8(out).unwrap())
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
