//! The manifest of a multi-part AOF, in Redis 7's syntax so `redis-server` 7 loads a cairn
//! directory: one line per file, `file <name> seq <n> type <b|h|i>`, base first, then
//! history, then incremental files in sequence order.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub name: String,
    pub seq: u64,
}

/// The files of the log, as the manifest lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// `<appendfilename>` (prefix of every file name).
    pub prefix: String,
    pub base: Option<FileInfo>,
    /// Files a finished rewrite made obsolete and not yet deleted (Redis's type `h`).
    pub history: Vec<FileInfo>,
    pub incrs: Vec<FileInfo>,
}

/// Longest manifest accepted (a corrupt one must not be read into memory unbounded).
pub const MANIFEST_MAX_BYTES: u64 = 1 << 20;

impl Layout {
    pub fn manifest_name(&self) -> String {
        format!("{}.manifest", self.prefix)
    }
    /// A base of commands (`create_fresh`'s empty base, and older directories').
    pub fn base_name(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.base.aof")
    }
    /// An RDB base (`aof-use-rdb-preamble yes`; Redis 7's name for it).
    pub fn base_rdb_name(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.base.rdb")
    }
    /// A snapshot-image base (`aof-use-rdb-preamble no`; cairn's own).
    pub fn base_image_name(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.base.cimg")
    }
    pub fn incr_name(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.incr.aof")
    }
    /// A new log: base 1 (empty) and incremental file 1.
    pub fn fresh(prefix: &str) -> Layout {
        Layout {
            prefix: prefix.into(),
            base: Some(FileInfo {
                name: Self::base_name(prefix, 1),
                seq: 1,
            }),
            history: vec![],
            incrs: vec![FileInfo {
                name: Self::incr_name(prefix, 1),
                seq: 1,
            }],
        }
    }
    pub fn next_base_seq(&self) -> u64 {
        self.base.as_ref().map_or(1, |b| b.seq + 1)
    }
    pub fn next_incr_seq(&self) -> u64 {
        self.incrs.iter().map(|f| f.seq).max().unwrap_or(0) + 1
    }

    pub fn render(&self) -> Vec<u8> {
        let mut s = String::new();
        let mut line = |f: &FileInfo, t: char| {
            s.push_str(&format!("file {} seq {} type {t}\n", quote(&f.name), f.seq));
        };
        if let Some(b) = &self.base {
            line(b, 'b');
        }
        for h in &self.history {
            line(h, 'h');
        }
        for i in &self.incrs {
            line(i, 'i');
        }
        s.into_bytes()
    }

    /// Parses a manifest. Errors name the problem as Redis's loader does.
    pub fn parse(prefix: &str, text: &[u8]) -> Result<Layout, String> {
        let text = std::str::from_utf8(text).map_err(|_| "Invalid AOF manifest file format")?;
        let mut l = Layout {
            prefix: prefix.into(),
            ..Layout::default()
        };
        for raw in text.lines() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = split_words(line).ok_or("Invalid AOF manifest file format")?;
            let (mut name, mut seq, mut ty) = (None, None, None);
            let mut it = words.chunks(2);
            for kv in &mut it {
                if kv.len() != 2 {
                    return Err("Invalid AOF manifest file format".into());
                }
                match kv[0].as_str() {
                    "file" => name = Some(kv[1].clone()),
                    "seq" => seq = kv[1].parse::<u64>().ok(),
                    "type" => ty = Some(kv[1].clone()),
                    _ => {} // Unknown keys are reserved for later versions (as Redis).
                }
            }
            let (Some(name), Some(seq), Some(ty)) = (name, seq, ty) else {
                return Err("Invalid AOF manifest file format".into());
            };
            if name.contains('/') {
                return Err(format!("Invalid AOF file name in manifest: {name}"));
            }
            let f = FileInfo { name, seq };
            match ty.as_str() {
                "b" => {
                    if l.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    l.base = Some(f)
                }
                "h" => l.history.push(f),
                "i" => {
                    if l.incrs.last().is_some_and(|p| p.seq >= f.seq) {
                        return Err("Found a non-monotonic sequence number".into());
                    }
                    l.incrs.push(f)
                }
                _ => return Err("Unknown AOF file type".into()),
            }
        }
        if l.base.is_none() && l.incrs.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(l)
    }
}

fn quote(name: &str) -> String {
    if name
        .bytes()
        .all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\\')
    {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// Splits on whitespace, honouring double quotes with backslash escapes.
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else {
            return Some(out);
        };
        let mut w = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => w.push(chars.next()?),
                    ch => w.push(ch),
                }
            }
        } else {
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() {
                    break;
                }
                w.push(ch);
                chars.next();
            }
        }
        out.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_syntax_round_trip() {
        let l = Layout::fresh("appendonly.aof");
        let text = String::from_utf8(l.render()).unwrap();
        assert_eq!(
            text,
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
        );
        assert_eq!(Layout::parse("appendonly.aof", text.as_bytes()).unwrap(), l);
    }

    #[test]
    fn rejects_bad_manifests() {
        assert!(Layout::parse("a", b"").is_err());
        assert!(Layout::parse("a", b"file x seq 1").is_err());
        assert!(Layout::parse("a", b"file ../x seq 1 type i").is_err());
        assert!(Layout::parse("a", b"file x seq 2 type i\nfile y seq 1 type i\n").is_err());
        let l = Layout::parse("a", b"file \"a b\" seq 3 type i\n").unwrap();
        assert_eq!(l.incrs[0].name, "a b");
    }
}
