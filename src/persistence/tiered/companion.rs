//! A snapshot's companion file: the tier file's pages that the image's cold entries
//! point at, so that an image taken while tiering is on is complete on its own.
//!
//! Layout (`docs/formats/snapshot.md`, "Tiered values: the companion file"): one 4 KiB
//! header page (magic `CAIRNTCP`, version, the snapshot's random id, the page count,
//! a CRC-32C of the header), then tier page `i` at file offset `4096 × (i + 1)`, exactly
//! as in the tier file (its own page checksum included). Pages never written (all zero)
//! are holes. The image header names the companion by its id and page count; the file is
//! `<image>.tier-<id, 16 hex digits>`, so a new snapshot's companion never replaces the
//! one the current image needs: it is written and synced before the image is renamed
//! into place, and older companions are removed after.
//!
//! Capture copies pages `0 .. high water` of the tier file (every page a record was ever
//! placed in; free pages among them are copied too, which is simpler than listing the
//! live extents at the cut and costs only the file's fragmentation) through a 1 MiB
//! buffer, on the snapshot's thread. The tier store keeps every page it frees from being
//! reused until the copy is done (`TierStore::begin_capture`).

use super::page::PAGE_BYTES;
use crate::keyspace::tiered::ColdStub;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const MAGIC: [u8; 8] = *b"CAIRNTCP";
pub const VERSION: u32 = 1;
/// Pages copied per read.
const COPY_PAGES: usize = 256;

/// The companion of the image at `image` with snapshot id `id`.
pub fn path_for(image: &Path, id: u64) -> PathBuf {
    let name = image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dump".into());
    image.with_file_name(format!("{name}.tier-{id:016x}"))
}

fn header(id: u64, pages: u64) -> [u8; PAGE_BYTES] {
    let mut h = [0u8; PAGE_BYTES];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&id.to_le_bytes());
    h[24..32].copy_from_slice(&pages.to_le_bytes());
    let crc = crc32c::crc32c(&h[..32]);
    h[32..36].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Copies pages `0 .. pages` of the tier file at `tier` into a new companion at `out`
/// (synced), pausing `delay_us` after each 1 MiB read (tests). Returns the bytes of
/// pages written (holes excluded).
pub fn write(
    tier: &Path,
    pages: u32,
    out: &Path,
    id: u64,
    delay_us: u64,
    cancel: &std::sync::atomic::AtomicBool,
) -> io::Result<u64> {
    let src = File::open(tier)?;
    let dst = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(out)?;
    let copied = (|| {
        dst.write_all_at(&header(id, pages as u64), 0)?;
        let mut buf = vec![0u8; COPY_PAGES * PAGE_BYTES];
        let mut written = 0u64;
        let mut page = 0u64;
        while page < pages as u64 {
            if cancel.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
            }
            let n = (pages as u64 - page).min(COPY_PAGES as u64) as usize;
            let want = &mut buf[..n * PAGE_BYTES];
            let got = read_full_at(&src, want, page * PAGE_BYTES as u64)?;
            // Past the end of the tier file (cut under the server): nothing to copy;
            // records there fail to read, as they would from the tier file.
            for (i, p) in want[..got - got % PAGE_BYTES]
                .chunks_exact(PAGE_BYTES)
                .enumerate()
            {
                if p.iter().all(|&b| b == 0) {
                    continue;
                }
                dst.write_all_at(p, (page + i as u64 + 1) * PAGE_BYTES as u64)?;
                written += PAGE_BYTES as u64;
            }
            if got < want.len() {
                break;
            }
            page += n as u64;
            if delay_us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(delay_us));
            }
        }
        dst.set_len((pages as u64 + 1) * PAGE_BYTES as u64)?;
        dst.sync_all()?;
        Ok(written)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(out);
    }
    copied
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Removes the companions of `image` other than the one with id `keep` (after a new
/// image was renamed into place).
pub fn remove_others(image: &Path, keep: Option<u64>) {
    let Some(name) = image.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let keep = keep.map(|id| format!("{name}.tier-{id:016x}"));
    for n in names_for(image) {
        if Some(&n) != keep.as_ref() {
            let _ = std::fs::remove_file(image.with_file_name(n));
        }
    }
}

/// The file names of every companion of the image at `image` present in its directory
/// (an AOF rewrite lists them with the base they belong to when that base is retired).
pub fn names_for(image: &Path) -> Vec<String> {
    let Some(name) = image.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let prefix = format!("{name}.tier-");
    let dir = match image.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(list) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    list.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// An opened and checked companion.
pub struct Companion {
    file: File,
    pub path: PathBuf,
    pub pages: u64,
}

impl Companion {
    /// Opens the companion the image at `image` names (`id`, `pages`), checking its
    /// header and length: a missing file, another snapshot's, or a truncated one is
    /// refused, naming the file.
    pub fn open(image: &Path, id: u64, pages: u64) -> Result<Companion, String> {
        let path = path_for(image, id);
        let bad = |why: String| {
            format!(
                "the tier companion file {} of snapshot image {}: {why}",
                path.display(),
                image.display()
            )
        };
        let file = File::open(&path).map_err(|e| bad(e.to_string()))?;
        let mut h = [0u8; PAGE_BYTES];
        let got = read_full_at(&file, &mut h, 0).map_err(|e| bad(e.to_string()))?;
        if got < PAGE_BYTES || h[0..8] != MAGIC {
            return Err(bad("not a companion file".into()));
        }
        let crc = u32::from_le_bytes([h[32], h[33], h[34], h[35]]);
        if crc != crc32c::crc32c(&h[..32])
            || u32::from_le_bytes([h[8], h[9], h[10], h[11]]) != VERSION
        {
            return Err(bad("its header is damaged or of another version".into()));
        }
        let fid = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
        let fpages = u64::from_le_bytes(h[24..32].try_into().expect("8 bytes"));
        if fid != id || fpages != pages {
            return Err(bad(format!(
                "it belongs to another snapshot (id {fid:016x}, {fpages} pages; the image names {id:016x}, {pages} pages)"
            )));
        }
        let len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
        let want = (pages + 1) * PAGE_BYTES as u64;
        if len != want {
            return Err(bad(format!(
                "it is {len} bytes long, {want} expected (truncated?)"
            )));
        }
        Ok(Companion { file, path, pages })
    }

    /// Whether every page of `stub`'s record is inside the companion.
    pub fn holds(&self, stub: ColdStub) -> bool {
        stub.page as u64 + stub.pages() <= self.pages
    }

    /// The value of `key`'s record at `stub`, checked as a tier read is (every page's
    /// checksum, the record's key and lengths).
    pub fn read_value(&self, key: &[u8], stub: ColdStub) -> Result<Vec<u8>, String> {
        if !self.holds(stub) {
            return Err(format!(
                "its record (page {}) lies past the end of {}",
                stub.page,
                self.path.display()
            ));
        }
        let len = stub.pages() as usize * PAGE_BYTES;
        let mut buf = vec![0u8; len];
        let off = (stub.page as u64 + 1) * PAGE_BYTES as u64;
        let got = read_full_at(&self.file, &mut buf, off).map_err(|e| e.to_string())?;
        if got < len {
            return Err(format!("short read of {}", self.path.display()));
        }
        super::page::decode_value(&buf, stub, key)
            .map_err(|e| format!("{e} (in {})", self.path.display()))
    }

    /// Copies the first `pages` pages (at most the companion's) into the tier file at
    /// `tier`, at their own offsets, synced, so the restored stubs point at them.
    pub fn copy_into(&self, tier: &Path, pages: u64) -> Result<(), String> {
        let fail = |e: io::Error| {
            format!(
                "copying {} into the tier file {}: {e}",
                self.path.display(),
                tier.display()
            )
        };
        let dst = OpenOptions::new().write(true).open(tier).map_err(fail)?;
        let total = self.pages.min(pages) * PAGE_BYTES as u64;
        let mut done = 0u64;
        use std::os::fd::AsRawFd;
        while done < total {
            let mut off_in = (PAGE_BYTES as u64 + done) as libc::loff_t;
            let mut off_out = done as libc::loff_t;
            let chunk = (total - done).min(1 << 30) as usize;
            // SAFETY: two open descriptors and offsets we own.
            let n = unsafe {
                libc::copy_file_range(
                    self.file.as_raw_fd(),
                    &mut off_in,
                    dst.as_raw_fd(),
                    &mut off_out,
                    chunk,
                    0,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP)
                ) {
                    return self.copy_by_reads(&dst, done, total).map_err(fail);
                }
                return Err(fail(e));
            }
            if n == 0 {
                return Err(fail(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the companion ended early",
                )));
            }
            done += n as u64;
        }
        dst.sync_data().map_err(fail)
    }

    /// `copy_into` where the kernel cannot copy between the two files.
    fn copy_by_reads(&self, dst: &File, from: u64, total: u64) -> io::Result<()> {
        let mut buf = vec![0u8; COPY_PAGES * PAGE_BYTES];
        let mut done = from;
        while done < total {
            let n = (total - done).min(buf.len() as u64) as usize;
            let got = read_full_at(&self.file, &mut buf[..n], PAGE_BYTES as u64 + done)?;
            if got < n {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the companion ended early",
                ));
            }
            dst.write_all_at(&buf[..n], done)?;
            done += n as u64;
        }
        dst.sync_data()
    }
}
