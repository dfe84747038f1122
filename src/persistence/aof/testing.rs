//! Helpers for the AOF modules' unit tests: logs framed as the writer frames them, and
//! scratch directories.

use super::format::{encode_command, encode_entry};
use std::path::PathBuf;

/// The replication id the test logs carry.
pub const RID: &str = "0123456789012345678901234567890123456789";

/// A fresh scratch directory for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cairn-load-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A log written as the writer frames it: one entry per command, LSNs rising by one.
pub struct Log {
    pub bytes: Vec<u8>,
    pub next_lsn: u64,
    pub reploff: u64,
    /// Offset and reploff of each entry.
    pub entries: Vec<(usize, u64)>,
}

impl Log {
    pub fn from(first_lsn: u64) -> Log {
        Log {
            bytes: Vec::new(),
            next_lsn: first_lsn,
            reploff: 0,
            entries: Vec::new(),
        }
    }
    pub fn cmd(mut self, args: &[&str]) -> Log {
        let mut p = Vec::new();
        encode_command(&mut p, args);
        self.reploff += p.len() as u64;
        self.entries.push((self.bytes.len(), self.reploff));
        encode_entry(&mut self.bytes, self.next_lsn, RID, self.reploff, &p);
        self.next_lsn += 1;
        self
    }
    pub fn sets(mut self, n: usize) -> Log {
        for _ in 0..n {
            let l = self.next_lsn.to_string();
            self = self.cmd(&["SET", &format!("k{l}"), &l]);
        }
        self
    }
}
