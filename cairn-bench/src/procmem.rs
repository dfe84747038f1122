//! Memory of a local server from /proc: RSS (VmRSS) and PSS (smaps_rollup), and finding the
//! server's pid from its listening port (/proc/net/tcp{,6} inode -> /proc/*/fd).

use std::fs;

/// Resident set size in KiB.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    field_kb(&s, "VmRSS:")
}

/// Proportional set size in KiB (shared pages divided among sharers: after a fork the
/// parent's and child's PSS add up to the real footprint, which RSS double counts).
pub fn pss_kb(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    field_kb(&s, "Pss:")
}

fn field_kb(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Direct children of `pid` (e.g. a fork-based BGSAVE child), from /proc/*/stat.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces and parens, so split after
        // the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if rest
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<u32>().ok())
            == Some(pid)
        {
            out.push(p);
        }
    }
    out
}

/// PSS of `pid` plus its children in KiB: the real footprint of a server and a forked
/// snapshot child together (their shared pages counted once).
pub fn tree_pss_kb(pid: u32) -> Option<u64> {
    let own = pss_kb(pid)?;
    Some(own + children(pid).into_iter().filter_map(pss_kb).sum::<u64>())
}

/// Socket inodes listening on `port` (any address, IPv4 or IPv6).
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || cols[3] != "0A" {
                continue; // 0A = TCP_LISTEN
            }
            let Some((_, p)) = cols[1].rsplit_once(':') else {
                continue;
            };
            if u16::from_str_radix(p, 16).ok() == Some(port) {
                if let Ok(ino) = cols[9].parse() {
                    out.push(ino);
                }
            }
        }
    }
    out
}

/// The pid of the process that owns the socket listening on `port`, if it is on this
/// machine and we may read its fds.
pub fn find_pid_by_port(port: u16) -> Option<u32> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for e in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = fs::read_link(fd.path()) {
                if wanted.iter().any(|w| link.as_os_str() == w.as_str()) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_own_listener_and_memory() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(find_pid_by_port(port), Some(std::process::id()));
        assert!(rss_kb(std::process::id()).unwrap() > 0);
        assert!(pss_kb(std::process::id()).is_some());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let kids = children(std::process::id());
        assert!(kids.contains(&child.id()), "{kids:?}");
        assert!(tree_pss_kb(std::process::id()).unwrap() > 0);
        child.kill().unwrap();
        child.wait().unwrap();
        drop(l);
    }
}
