//! The snapshot image file: a fixed header (with the layout fingerprint and the replication
//! position at the cut), then a log of records that each carry compressed arena bytes for a
//! list of extents, then a trailer. Byte layouts: `docs/formats/snapshot.md`.
//!
//! Records are applied in file order and a later record overwrites an earlier one where
//! their extents overlap: the live snapshot streams every page once, then re-sends pages
//! that were written meanwhile. Every record header and payload carries a crc32c, the
//! header a crc32c of its own, and the trailer the record count — so a flipped byte,
//! a truncated file and an image from another build are each told apart, with where.

use super::direct::DirectWriter;
use crate::arena::{self, RawRegion};
use crate::persistence::write_behind::WriteBehind;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub const FILE_MAGIC: [u8; 8] = *b"CAIRNIMG";
pub const FORMAT_VERSION: u32 = 2;
pub const HEADER_BYTES: usize = 256;
pub const RECORD_MAGIC: [u8; 4] = *b"CREC";
pub const RECORD_HEADER_BYTES: usize = 32;
pub const EXTENT_BYTES: usize = 16;
pub const TRAILER_MAGIC: [u8; 4] = *b"CEND";
pub const TRAILER_BYTES: usize = 32;
/// The function libraries' section, just before the trailer when the header says it is
/// there: magic, 4 reserved bytes, length u64, then the libraries as RDB function records.
pub const FUNCTIONS_MAGIC: [u8; 4] = *b"CFUN";
pub const FUNCTIONS_SECTION_HEADER_BYTES: usize = 16;
/// The full sync's wire form of an image (`+CAIRNIMAGE`, the streamed order: see
/// [`load_streamed`]), folded into [`Fingerprint::replication_capa`] so that only a replica
/// that reads this form is sent it.
pub const STREAMED_FORM_VERSION: u32 = 1;

/// Record flag: the payload is one LZ4 block (else the raw bytes).
pub const REC_LZ4: u16 = 1;
/// Record flag: the extents are all zero bytes; no payload.
pub const REC_ZERO: u16 = 2;

/// Uncompressed bytes per record: big enough for LZ4 to find long matches and for the
/// per-record overhead (32 + 16 bytes) to vanish, small enough to keep workers' buffers
/// and the loader's reads modest.
pub const CHUNK_BYTES: usize = 1 << 20;
/// The most extents one record may list (scattered dirty pages: 1 MiB of 4 KiB pages).
pub const MAX_EXTENTS: usize = CHUNK_BYTES / arena::PAGE_BYTES;

/// How the image was taken (header field, reported by INFO `snapshot_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutMode {
    /// Live streaming with userfaultfd write-protect tracking and a final pause.
    UffdLive = 1,
    /// The executor was stopped for the whole copy (SAVE, SHUTDOWN, fallback).
    StopTheWorld = 2,
    /// Freeze-free: synchronous write-protect faults copy a page out before its first
    /// change after the cut.
    UffdSync = 3,
    /// Freeze-free by copy-before-write: the arena's write hook copies a page out before
    /// its first change after the cut. Records as mode 3's.
    Cow = 4,
}

impl CutMode {
    /// Every page of the image is in exactly one record, written in completion order:
    /// records never overlap, so the loader writes them all in one wave.
    pub fn single_wave(self) -> bool {
        matches!(self, CutMode::UffdSync | CutMode::Cow)
    }
}

/// What must match between the binary and an image for the raw arena bytes to mean the
/// same thing. Each field is checked on its own so a refusal names what differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub arena_layout_version: u32,
    pub arena_header_bytes: u32,
    pub entry_header_bytes: u32,
    pub db_header_bytes: u32,
    pub ref_bytes: u32,
    pub ref_unit_bytes: u32,
    pub page_bytes: u32,
    pub size_classes: u32,
    pub size_class_table_crc: u32,
    pub root_slots: u32,
    pub large_block_bytes: u32,
}

impl Fingerprint {
    pub fn current() -> Fingerprint {
        Fingerprint {
            arena_layout_version: arena::ARENA_LAYOUT_VERSION,
            arena_header_bytes: arena::HEADER_BYTES as u32,
            entry_header_bytes: crate::keyspace::ENTRY_HEADER_BYTES as u32,
            db_header_bytes: crate::keyspace::DB_HEADER_BYTES as u32,
            ref_bytes: std::mem::size_of::<arena::Ref>() as u32,
            ref_unit_bytes: arena::ALIGN_BYTES as u32,
            page_bytes: arena::PAGE_BYTES as u32,
            size_classes: arena::NUM_CLASSES as u32,
            size_class_table_crc: arena::size_class_table_crc(),
            root_slots: arena::ROOT_SLOTS as u32,
            large_block_bytes: arena::LARGE_BLOCK_BYTES as u32,
        }
    }
    fn fields(&self) -> [(&'static str, u32); 11] {
        [
            ("arena layout version", self.arena_layout_version),
            ("arena header bytes", self.arena_header_bytes),
            ("entry header bytes", self.entry_header_bytes),
            ("database header bytes", self.db_header_bytes),
            ("ref width", self.ref_bytes),
            ("ref unit", self.ref_unit_bytes),
            ("page size", self.page_bytes),
            ("size-class count", self.size_classes),
            ("size-class table crc32c", self.size_class_table_crc),
            ("root slots", self.root_slots),
            ("large block bytes", self.large_block_bytes),
        ]
    }
    /// The `REPLCONF capa` token a cairn replica offers and a cairn primary matches to send
    /// its image instead of an RDB: the file format and every fingerprint field folded
    /// (FNV-1a), so two binaries whose images would not load in each other never agree and
    /// fall back to the RDB.
    pub fn replication_capa(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let fields = self.fields();
        let words = [FORMAT_VERSION, STREAMED_FORM_VERSION]
            .into_iter()
            .chain(fields.iter().map(|f| f.1));
        for w in words {
            for b in w.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        format!("cairn-image-{h:016x}")
    }

    /// The first field that differs: (name, image value, binary value).
    pub fn mismatch(&self, binary: &Fingerprint) -> Option<(&'static str, u32, u32)> {
        self.fields()
            .iter()
            .zip(binary.fields().iter())
            .find(|(a, b)| a.1 != b.1)
            .map(|(a, b)| (a.0, a.1, b.1))
    }
}

/// The image header (see the doc for offsets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageHeader {
    pub fingerprint: Fingerprint,
    /// Length of the arena region the image restores (its high-water mark at the cut,
    /// rounded up to a page).
    pub arena_bytes: u64,
    pub chunk_bytes: u32,
    pub databases: u32,
    pub created_ms: i64,
    pub keys: u64,
    pub repl_id: [u8; 40],
    pub repl_offset: u64,
    /// The db the replication stream's next command runs in at `repl_offset`, plus 1
    /// (0: unknown): a replica restarted from the image continues in it.
    pub repl_stream_db: u32,
    /// The AOF's last LSN at the cut (0: none). An AOF base image stands for the log up
    /// to this entry.
    pub aof_lsn: u64,
    pub mode: CutMode,
    pub passes: u32,
    /// The function libraries at the cut, as RDB function records (FUNCTION DUMP's body;
    /// empty: none). The header holds their length and CRC-32C, the section their bytes.
    pub functions: Vec<u8>,
    /// On load: the section's length and CRC-32C as the header states them (the loader
    /// checks the section against them). Ignored by `encode`.
    pub functions_stated: (u64, u32),
    /// The tier companion file holding the records of the image's cold entries
    /// (`persistence::tiered::companion`): its random id and page count (0 and 0: none,
    /// the image holds no tiered value).
    pub companion_id: u64,
    pub companion_pages: u64,
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
fn get64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

impl ImageHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(&FILE_MAGIC);
        put32(&mut b, 8, FORMAT_VERSION);
        put32(&mut b, 12, HEADER_BYTES as u32);
        for (i, (_, v)) in self.fingerprint.fields().iter().enumerate() {
            put32(&mut b, 16 + 4 * i, *v);
        }
        // 60..64 reserved (zero)
        put64(&mut b, 64, self.arena_bytes);
        put32(&mut b, 72, self.chunk_bytes);
        put32(&mut b, 76, self.databases);
        put64(&mut b, 80, self.created_ms as u64);
        put64(&mut b, 88, self.keys);
        b[96..136].copy_from_slice(&self.repl_id);
        put64(&mut b, 136, self.repl_offset);
        put32(&mut b, 144, self.mode as u32);
        put32(&mut b, 148, self.passes);
        put64(&mut b, 152, self.aof_lsn);
        put64(&mut b, 160, self.functions.len() as u64);
        put32(&mut b, 168, crc32c::crc32c(&self.functions));
        put32(&mut b, 172, self.repl_stream_db);
        put64(&mut b, 176, self.companion_id);
        put64(&mut b, 184, self.companion_pages);
        let crc = crc32c::crc32c(&b[..HEADER_BYTES - 4]);
        put32(&mut b, HEADER_BYTES - 4, crc);
        b
    }

    pub fn decode(b: &[u8; HEADER_BYTES]) -> Result<ImageHeader, LoadError> {
        if b[0..8] != FILE_MAGIC {
            return Err(LoadError::NotAnImage {
                magic: b[0..8].to_vec(),
            });
        }
        let version = get32(b, 8);
        if version != FORMAT_VERSION {
            return Err(LoadError::Version { found: version });
        }
        let want = get32(b, HEADER_BYTES - 4);
        let got = crc32c::crc32c(&b[..HEADER_BYTES - 4]);
        if want != got || get32(b, 12) != HEADER_BYTES as u32 {
            return Err(LoadError::HeaderChecksum);
        }
        let f = |i: usize| get32(b, 16 + 4 * i);
        let fingerprint = Fingerprint {
            arena_layout_version: f(0),
            arena_header_bytes: f(1),
            entry_header_bytes: f(2),
            db_header_bytes: f(3),
            ref_bytes: f(4),
            ref_unit_bytes: f(5),
            page_bytes: f(6),
            size_classes: f(7),
            size_class_table_crc: f(8),
            root_slots: f(9),
            large_block_bytes: f(10),
        };
        let mode = match get32(b, 144) {
            1 => CutMode::UffdLive,
            3 => CutMode::UffdSync,
            4 => CutMode::Cow,
            _ => CutMode::StopTheWorld,
        };
        let mut repl_id = [0u8; 40];
        repl_id.copy_from_slice(&b[96..136]);
        Ok(ImageHeader {
            fingerprint,
            arena_bytes: get64(b, 64),
            chunk_bytes: get32(b, 72),
            databases: get32(b, 76),
            created_ms: get64(b, 80) as i64,
            keys: get64(b, 88),
            repl_id,
            repl_offset: get64(b, 136),
            repl_stream_db: get32(b, 172),
            aof_lsn: get64(b, 152),
            mode,
            passes: get32(b, 148),
            // Read from the section (`read_records`), checked against these two fields.
            functions: Vec::new(),
            functions_stated: ImageHeader::functions_fields(b),
            companion_id: get64(b, 176),
            companion_pages: get64(b, 184),
        })
    }

    /// The function section's length and CRC-32C as the header states them.
    fn functions_fields(b: &[u8; HEADER_BYTES]) -> (u64, u32) {
        (get64(b, 160), get32(b, 168))
    }
}

/// One contiguous run of arena bytes carried by a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub len: u32,
}

/// A record ready to be written: its extents and its encoded payload.
pub struct Record {
    pub extents: Vec<Extent>,
    pub flags: u16,
    pub payload: Vec<u8>,
    /// Sum of the extents' lengths.
    pub raw_bytes: u32,
}

fn all_zero(b: &[u8]) -> bool {
    let (head, mid, tail) = unsafe { b.align_to::<u64>() };
    head.iter().all(|&x| x == 0) && mid.iter().all(|&x| x == 0) && tail.iter().all(|&x| x == 0)
}

/// Bytes of each sample [`worth_compressing`] compresses.
const SAMPLE_BYTES: usize = 4096;
/// Samples taken from a chunk, spread evenly over it.
const SAMPLES: usize = 8;

/// Whether LZ4 is worth running on `raw`: a few evenly spread 4 KiB samples (3 % of a
/// 1 MiB chunk) are compressed, and the whole is compressed only if they shrink by at
/// least a quarter. Why: an arena of incompressible values (compressed payloads, random
/// tokens) is most real data, and LZ4 over it costs CPU time per GiB that a snapshot pass
/// on the one CPU it shares with the clients cannot spare, for a saving of a few percent
/// (figures: BENCHMARKS.md, "Snapshot stages per GiB"). A chunk whose samples miss its
/// compressible parts is stored raw: larger, never wrong (raw records are part of the
/// format). Input shorter than the samples is always tried.
pub fn worth_compressing(raw: &[u8]) -> bool {
    if raw.len() < SAMPLES * SAMPLE_BYTES * 2 {
        return true;
    }
    let stride = (raw.len() - SAMPLE_BYTES) / (SAMPLES - 1);
    let mut packed = 0usize;
    for i in 0..SAMPLES {
        let at = i * stride;
        packed += lz4_flex::block::compress(&raw[at..at + SAMPLE_BYTES]).len();
    }
    packed * 4 <= SAMPLES * SAMPLE_BYTES * 3
}

impl Record {
    /// Encodes `raw` (the concatenated bytes of `extents`): a zero record when it is all
    /// zeros, LZ4 when samples say it compresses ([`worth_compressing`]) and the whole
    /// is smaller, the raw bytes otherwise.
    pub fn encode(extents: Vec<Extent>, raw: &[u8]) -> Record {
        let raw_bytes = Record::checked_len(&extents, raw);
        let (flags, payload) = Record::packed(raw).unwrap_or_else(|| (0, raw.to_vec()));
        Record {
            extents,
            flags,
            payload,
            raw_bytes,
        }
    }

    /// [`Record::encode`] of a buffer the caller gives up: a raw record takes it as its
    /// payload (no copy: most of an incompressible arena is stored this way); otherwise
    /// the buffer is handed back with the record, for reuse.
    pub fn encode_owned(extents: Vec<Extent>, raw: Vec<u8>) -> (Record, Option<Vec<u8>>) {
        let raw_bytes = Record::checked_len(&extents, &raw);
        let (flags, payload, back) = match Record::packed(&raw) {
            Some((flags, payload)) => (flags, payload, Some(raw)),
            None => (0, raw, None),
        };
        let r = Record {
            extents,
            flags,
            payload,
            raw_bytes,
        };
        (r, back)
    }

    fn checked_len(extents: &[Extent], raw: &[u8]) -> u32 {
        debug_assert_eq!(
            extents.iter().map(|e| e.len as usize).sum::<usize>(),
            raw.len()
        );
        raw.len() as u32
    }

    /// The zero form or the LZ4 form of `raw` (flags, payload), when one applies.
    fn packed(raw: &[u8]) -> Option<(u16, Vec<u8>)> {
        if all_zero(raw) {
            return Some((REC_ZERO, Vec::new()));
        }
        if !worth_compressing(raw) {
            return None;
        }
        let c = lz4_flex::block::compress(raw);
        (c.len() < raw.len()).then_some((REC_LZ4, c))
    }

    fn extent_table(&self) -> Vec<u8> {
        let mut t = vec![0u8; self.extents.len() * EXTENT_BYTES];
        for (i, e) in self.extents.iter().enumerate() {
            put64(&mut t, i * EXTENT_BYTES, e.offset);
            put32(&mut t, i * EXTENT_BYTES + 8, e.len);
        }
        t
    }

    fn header(&self, table: &[u8]) -> [u8; RECORD_HEADER_BYTES] {
        let mut h = [0u8; RECORD_HEADER_BYTES];
        h[0..4].copy_from_slice(&RECORD_MAGIC);
        h[4..6].copy_from_slice(&self.flags.to_le_bytes());
        put32(&mut h, 8, self.extents.len() as u32);
        put32(&mut h, 12, self.raw_bytes);
        put32(&mut h, 16, self.payload.len() as u32);
        let crc = crc32c::crc32c_append(crc32c::crc32c(table), &self.payload);
        put32(&mut h, 20, crc);
        let hcrc = crc32c::crc32c(&h[..28]);
        put32(&mut h, 28, hcrc);
        h
    }

    /// Bytes this record takes in the file.
    pub fn file_bytes(&self) -> u64 {
        (RECORD_HEADER_BYTES + self.extents.len() * EXTENT_BYTES + self.payload.len()) as u64
    }
}

/// Writes an image to `<final>.tmp-<pid>`; [`ImageWriter::commit`] makes it the image.
pub struct ImageWriter {
    file: Sink,
    tmp: PathBuf,
    path: PathBuf,
    records: u64,
    /// crc32c over every record header, in order (the trailer carries it).
    chain_crc: u32,
    pub bytes_written: u64,
    /// A reader following the image as it is written (a replica's full sync).
    follow: Option<Published>,
    /// A pause after each record (µs; `SnapParams::record_delay_us`).
    pub record_delay_us: u64,
}

/// Where an image's bytes go: direct writes where the file system takes them (see
/// `snapshot::direct`), else the page cache (with `rdb-save-incremental-fsync`'s
/// write-behind, or `CAIRN_SNAPSHOT_BUFFERED=1`).
enum Sink {
    Direct(DirectWriter),
    Buffered(BufWriter<WriteBehind>),
}

impl Sink {
    fn open(tmp: &Path, write_behind: bool) -> io::Result<Sink> {
        if std::env::var_os("CAIRN_SNAPSHOT_BUFFERED").is_none_or(|v| v != "1") {
            match DirectWriter::create(tmp)? {
                Some(d) => return Ok(Sink::Direct(d)),
                None => crate::verbose!(
                    "Snapshot: {} refuses O_DIRECT; writing the image through the page cache",
                    tmp.display()
                ),
            }
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)?;
        Ok(Sink::Buffered(BufWriter::with_capacity(
            1 << 20,
            WriteBehind::new(file, 0, write_behind),
        )))
    }

    /// Bytes from the file's start that are in the file, of `written` handed to the sink.
    fn in_file(&self, written: u64) -> u64 {
        match self {
            Sink::Direct(d) => d.done(),
            Sink::Buffered(b) => written - b.buffer().len() as u64,
        }
    }

    /// Everything written; the file, for positional writes and the fsync.
    fn finish(self) -> io::Result<File> {
        match self {
            Sink::Direct(d) => d.finish(),
            Sink::Buffered(b) => Ok(b.into_inner().map_err(|e| e.into_error())?.into_inner()),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Direct(d) => d.write(buf),
            Sink::Buffered(b) => b.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::Direct(d) => d.write_all(buf),
            Sink::Buffered(b) => b.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Direct(d) => d.flush(),
            Sink::Buffered(b) => b.flush(),
        }
    }
}

/// An image being written, followed by a reader in another thread (the full sync's sender
/// streams the capture to replicas while it is taken). The writer only appends after its
/// placeholder header, so every byte below [`Follow::wait_past`]'s mark is final; the
/// real header is written at offset 0 last and is published with the image's end.
#[derive(Default)]
pub struct Follow {
    state: std::sync::Mutex<FollowState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct FollowState {
    /// The image's file, opened again for the reader once the writer made it.
    file: Option<File>,
    /// Bytes from the file's start that are written and will not change (the header's
    /// 256 bytes excepted: they are final only at the end).
    final_bytes: u64,
    /// `Some(Ok(len))`: the image is complete, `len` bytes, header included; `Some(Err)`:
    /// the writer gave up (the capture failed or was cancelled).
    end: Option<Result<u64, String>>,
}

/// What [`Follow::wait_past`] found.
pub enum Followed {
    /// The bytes `[from, final_bytes)` can be read; more will come.
    More(u64),
    /// The image is complete: `len` bytes; its header (offset 0) is final now too.
    Complete(u64),
}

impl Follow {
    /// The image file for reading (a descriptor of its own), once the writer created it.
    pub fn file(&self) -> Result<File, String> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(f) = &st.file {
                return f.try_clone().map_err(|e| e.to_string());
            }
            if let Some(Err(e)) = &st.end {
                return Err(e.clone());
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until bytes at or past `from` are final, or the image ended.
    pub fn wait_past(&self, from: u64) -> Result<Followed, String> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match &st.end {
                Some(Ok(len)) => return Ok(Followed::Complete(*len)),
                Some(Err(e)) => return Err(e.clone()),
                None if st.final_bytes > from => return Ok(Followed::More(st.final_bytes)),
                None => st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    fn update(&self, f: impl FnOnce(&mut FollowState)) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
        self.cv.notify_all();
    }
}

/// The writer's end of a [`Follow`]: dropped without [`Published::complete`] (an abort,
/// an error, a cancel), it tells the reader the image will not be completed.
struct Published(std::sync::Arc<Follow>);

impl Published {
    fn complete(self, len: u64) {
        self.0.update(|st| st.end = Some(Ok(len)));
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.0.update(|st| {
            if st.end.is_none() {
                st.end = Some(Err("the capture was abandoned".into()));
            }
        });
    }
}

impl ImageWriter {
    /// `write_behind`: start the write-back every few MiB as the image is written
    /// (`rdb-save-incremental-fsync`, see `persistence::write_behind`).
    pub fn create(path: &Path, write_behind: bool) -> io::Result<ImageWriter> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dump".into());
        let tmp = path.with_file_name(format!("temp-{}-{name}", std::process::id()));
        let mut w = ImageWriter {
            file: Sink::open(&tmp, write_behind)?,
            tmp,
            path: path.to_path_buf(),
            records: 0,
            chain_crc: 0,
            bytes_written: 0,
            follow: None,
            record_delay_us: 0,
        };
        // A placeholder header whose magic is zero: an image torn before `commit` rewrote
        // it can never be mistaken for a complete one (it never reaches the final name
        // anyway, but a temp file may be inspected by hand).
        w.file.write_all(&[0u8; HEADER_BYTES])?;
        w.bytes_written = HEADER_BYTES as u64;
        Ok(w)
    }

    /// Lets `f`'s reader follow this image as it is written.
    pub fn follow(&mut self, f: std::sync::Arc<Follow>) -> io::Result<()> {
        // A descriptor of its own, for reading (the writer's is write-only); the name
        // stays valid until the rename, the descriptor after it.
        let file = File::open(&self.tmp)?;
        f.update(|st| st.file = Some(file));
        self.follow = Some(Published(f));
        Ok(())
    }

    pub fn write_record(&mut self, r: &Record) -> io::Result<()> {
        let table = r.extent_table();
        let h = r.header(&table);
        self.chain_crc = crc32c::crc32c_append(self.chain_crc, &h);
        self.file.write_all(&h)?;
        self.file.write_all(&table)?;
        self.file.write_all(&r.payload)?;
        self.records += 1;
        self.bytes_written += r.file_bytes();
        if let Some(p) = &self.follow {
            // What the buffer still holds is not in the file yet.
            let written = self.file.in_file(self.bytes_written);
            p.0.update(|st| st.final_bytes = written);
        }
        if self.record_delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.record_delay_us));
        }
        Ok(())
    }

    /// Writes the trailer and the real header, fsyncs, renames over the previous image and
    /// fsyncs the directory. Until the rename the previous image is untouched; after it the
    /// new one is complete on disk.
    pub fn commit(mut self, header: &ImageHeader) -> io::Result<u64> {
        if !header.functions.is_empty() {
            let mut h = [0u8; FUNCTIONS_SECTION_HEADER_BYTES];
            h[0..4].copy_from_slice(&FUNCTIONS_MAGIC);
            put64(&mut h, 8, header.functions.len() as u64);
            self.file.write_all(&h)?;
            self.file.write_all(&header.functions)?;
            self.bytes_written += (h.len() + header.functions.len()) as u64;
        }
        let mut t = [0u8; TRAILER_BYTES];
        t[0..4].copy_from_slice(&TRAILER_MAGIC);
        put64(&mut t, 8, self.records);
        put64(&mut t, 16, header.arena_bytes);
        put32(&mut t, 24, self.chain_crc);
        let crc = crc32c::crc32c(&t[..28]);
        put32(&mut t, 28, crc);
        self.file.write_all(&t)?;
        self.bytes_written += TRAILER_BYTES as u64;
        let file = self.file.finish()?;
        std::os::unix::fs::FileExt::write_all_at(&file, &header.encode(), 0)?;
        file.sync_all()?;
        drop(file);
        // The image this one replaces is freed at the rename, whole: a backup copying it
        // meanwhile must keep reading every byte (Redis's promise that a dump file is
        // never modified once written), so it is not cut stepwise as retired logs are.
        std::fs::rename(&self.tmp, &self.path)?;
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(dir)?.sync_all()?;
        if let Some(p) = self.follow.take() {
            p.complete(self.bytes_written);
        }
        Ok(self.bytes_written)
    }

    /// Gives up: removes the temp file (the previous image stays as it was).
    pub fn abort(self) {
        let tmp = self.tmp.clone();
        drop(self);
        let _ = std::fs::remove_file(tmp);
    }
}

/// Why an image cannot be loaded. Every variant says which check failed and where.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the snapshot image: {0}")]
    Io(#[from] io::Error),
    #[error("not a cairn snapshot image (magic {magic:?})")]
    NotAnImage { magic: Vec<u8> },
    #[error("snapshot image format version {found} is not supported (this binary reads {FORMAT_VERSION})")]
    Version { found: u32 },
    #[error("snapshot image header checksum mismatch (bytes 0..{HEADER_BYTES})")]
    HeaderChecksum,
    #[error("snapshot image layout fingerprint mismatch: {field} is {image} in the image but {binary} in this binary")]
    Fingerprint {
        field: &'static str,
        image: u32,
        binary: u32,
    },
    #[error(
        "snapshot image is truncated: {what} at file offset {offset} ends past the end of the file"
    )]
    Truncated { what: &'static str, offset: u64 },
    #[error("snapshot image record {record} at file offset {offset}: {what}")]
    Record {
        record: u64,
        offset: u64,
        what: String,
    },
    #[error("snapshot image trailer at file offset {offset}: {what}")]
    Trailer { offset: u64, what: String },
    #[error("snapshot image function libraries at file offset {offset}: {what}")]
    Functions { offset: u64, what: String },
    #[error(
        "snapshot image needs {need} bytes of arena but {have} are reserved (arena-reserve-bytes)"
    )]
    TooLarge { need: u64, have: u64 },
    #[error("{0}")]
    Arena(String),
}

/// Recomputes every checksum of an image in place (header, record headers, payloads,
/// the trailer's record count, chain and own CRC) as far as its structure can be
/// followed, so that a deliberately altered image reaches the checks behind them: the
/// crafted-image tests and the `snapshot_image` fuzz target. The CRCs guard against
/// damage, not against a file made to be wrong; this is what such a file looks like.
pub fn reseal(img: &mut [u8]) {
    if img.len() < HEADER_BYTES {
        return;
    }
    // Images of an earlier format version are brought to this one (the fields version 2
    // added were reserved zeros before, meaning "no function libraries").
    put32(img, 8, FORMAT_VERSION);
    let seal_header = |img: &mut [u8]| {
        let crc = crc32c::crc32c(&img[..HEADER_BYTES - 4]);
        put32(img, HEADER_BYTES - 4, crc);
    };
    seal_header(img);
    let (mut pos, mut records, mut chain) = (HEADER_BYTES, 0u64, 0u32);
    while pos + 4 <= img.len() {
        if img[pos..pos + 4] == TRAILER_MAGIC && pos + TRAILER_BYTES <= img.len() {
            put64(img, pos + 8, records);
            put32(img, pos + 24, chain);
            let crc = crc32c::crc32c(&img[pos..pos + 28]);
            put32(img, pos + 28, crc);
            return;
        }
        if img[pos..pos + 4] == FUNCTIONS_MAGIC && pos + FUNCTIONS_SECTION_HEADER_BYTES <= img.len()
        {
            let start = pos + FUNCTIONS_SECTION_HEADER_BYTES;
            let len = get64(img, pos + 8);
            if len > (img.len() - start) as u64 {
                return;
            }
            let crc = crc32c::crc32c(&img[start..start + len as usize]);
            put64(img, 160, len);
            put32(img, 168, crc);
            seal_header(img);
            pos = start + len as usize;
            continue;
        }
        if img[pos..pos + 4] != RECORD_MAGIC || pos + RECORD_HEADER_BYTES > img.len() {
            return;
        }
        let n = get32(img, pos + 8) as usize;
        let stored = get32(img, pos + 16) as usize;
        let body = n.saturating_mul(EXTENT_BYTES).saturating_add(stored);
        let start = pos + RECORD_HEADER_BYTES;
        if body > img.len() - start {
            return;
        }
        let crc = crc32c::crc32c(&img[start..start + body]);
        put32(img, pos + 20, crc);
        let hcrc = crc32c::crc32c(&img[pos..pos + 28]);
        put32(img, pos + 28, hcrc);
        chain = crc32c::crc32c_append(chain, &img[pos..pos + RECORD_HEADER_BYTES]);
        records += 1;
        pos = start + body;
    }
}

/// Reads exactly `buf.len()` bytes or reports a truncation of `what` at `offset`.
fn read_exact_at<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    what: &'static str,
    offset: u64,
) -> Result<(), LoadError> {
    match r.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Err(LoadError::Truncated { what, offset })
        }
        Err(e) => Err(LoadError::Io(e)),
    }
}

/// Reads the header block: a short file whose first bytes are not our magic is "not an
/// image" (e.g. a Redis RDB file), one that starts like an image is truncated.
fn read_header_block<R: Read>(r: &mut R) -> Result<ImageHeader, LoadError> {
    let mut hb = [0u8; HEADER_BYTES];
    let mut n = 0;
    while n < HEADER_BYTES {
        match r.read(&mut hb[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LoadError::Io(e)),
        }
    }
    let m = n.min(FILE_MAGIC.len());
    if hb[..m] != FILE_MAGIC[..m] || n == 0 {
        return Err(LoadError::NotAnImage {
            magic: hb[..m].to_vec(),
        });
    }
    if n < HEADER_BYTES {
        return Err(LoadError::Truncated {
            what: "the header",
            offset: 0,
        });
    }
    ImageHeader::decode(&hb)
}

/// Reads and checks only the header (INFO, tools, tests).
pub fn read_header(path: &Path) -> Result<ImageHeader, LoadError> {
    read_header_block(&mut File::open(path)?)
}

/// Restores an image into a fresh region of `reserve_bytes`. Every check runs before the
/// region is handed over: nothing partial or unchecked is ever served.
pub fn load(path: &Path, reserve_bytes: usize) -> Result<(RawRegion, ImageHeader), LoadError> {
    load_with_progress(path, reserve_bytes, &LoadProgress::default())
}

/// What a loader thread reports while it works (INFO `loading_*`).
#[derive(Default)]
pub struct LoadProgress {
    pub loaded_bytes: std::sync::atomic::AtomicU64,
    /// Test hook (`key-load-delay`, µs): sleep this long after each record.
    pub record_delay_us: std::sync::atomic::AtomicU64,
}

/// Threads that decompress records at load (the reader is one more).
pub fn load_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
}

/// A record read and checked by the reader, handed to a decompression worker.
struct LoadRec {
    index: u64,
    pos: u64,
    flags: u16,
    extents: Vec<Extent>,
    raw_bytes: usize,
    payload: Vec<u8>,
    want_crc: u32,
    table_crc: u32,
    /// No record before it in the file wrote its extents (fresh zero pages).
    first_wave: bool,
}

/// Where the workers write: the region's base, shared by address. Records of one wave
/// are pairwise disjoint, so no two threads write the same byte.
#[derive(Clone, Copy)]
struct RegionPtr(usize);

/// The workers' shared state: records in flight (for the wave barrier) and the first
/// failure, by record index.
struct LoadShared {
    in_flight: std::sync::Mutex<usize>,
    cv: std::sync::Condvar,
    failed: std::sync::Mutex<Option<(u64, LoadError)>>,
    abort: std::sync::atomic::AtomicBool,
}

impl LoadShared {
    fn fail(&self, index: u64, e: LoadError) {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if f.as_ref().is_none_or(|(i, _)| index < *i) {
            *f = Some((index, e));
        }
        self.abort.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    fn done_one(&self) {
        let mut n = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        if *n == 0 {
            self.cv.notify_all();
        }
    }
    fn wait_idle(&self) {
        let mut n = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        while *n > 0 {
            n = self.cv.wait(n).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Checks a record's payload and writes its bytes into the region.
fn apply_record(r: &LoadRec, region: RegionPtr, scratch: &mut Vec<u8>) -> Result<(), LoadError> {
    let rec_err = |what: String| LoadError::Record {
        record: r.index,
        offset: r.pos,
        what,
    };
    let got_crc = crc32c::crc32c_append(r.table_crc, &r.payload);
    if got_crc != r.want_crc {
        return Err(rec_err(format!(
            "payload checksum mismatch (crc32c {got_crc:#010x}, expected {:#010x})",
            r.want_crc
        )));
    }
    // SAFETY (all slices below): every extent was checked to lie inside the arena bytes,
    // which fit the region's reservation; records applied concurrently are disjoint.
    let dst = |e: &Extent| unsafe {
        std::slice::from_raw_parts_mut((region.0 + e.offset as usize) as *mut u8, e.len as usize)
    };
    if r.flags & REC_ZERO != 0 {
        if !r.first_wave {
            for e in &r.extents {
                dst(e).fill(0);
            }
        }
        return Ok(());
    }
    let data: &[u8] = if r.flags & REC_LZ4 != 0 {
        let single = r.extents.len() == 1;
        let out: &mut [u8] = if single {
            dst(&r.extents[0])
        } else {
            scratch.resize(r.raw_bytes, 0);
            &mut scratch[..]
        };
        match lz4_flex::block::decompress_into(&r.payload, out) {
            Ok(k) if k == r.raw_bytes => {}
            Ok(k) => {
                return Err(rec_err(format!(
                    "decompressed to {k} bytes, not {}",
                    r.raw_bytes
                )))
            }
            Err(e) => return Err(rec_err(format!("LZ4 payload does not decompress: {e}"))),
        }
        if single {
            return Ok(());
        }
        scratch
    } else {
        if r.payload.len() != r.raw_bytes {
            return Err(rec_err("raw payload of the wrong length".into()));
        }
        &r.payload
    };
    let mut at = 0usize;
    for e in &r.extents {
        dst(e).copy_from_slice(&data[at..at + e.len as usize]);
        at += e.len as usize;
    }
    Ok(())
}

/// [`load`], publishing the file bytes consumed so far. One reader thread reads and checks
/// the record headers in file order; [`load_threads`] workers check the payloads and
/// decompress them straight into the region. Records are applied in *waves*: a record
/// whose extents start below the end of the wave's furthest extent may overlap an
/// earlier one (a re-sent page), so the reader first waits for everything in flight —
/// later records still win, as the format requires. A snapshot's passes each write
/// ascending offsets, so a wave is a pass.
pub fn load_with_progress(
    path: &Path,
    reserve_bytes: usize,
    progress: &LoadProgress,
) -> Result<(RawRegion, ImageHeader), LoadError> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let f = io::BufReader::with_capacity(1 << 20, file);
    load_from_reader(f, file_len, reserve_bytes, progress)
}

/// [`load`] from an image held in memory (tests and fuzzing).
pub fn load_from_bytes(
    image: &[u8],
    reserve_bytes: usize,
) -> Result<(RawRegion, ImageHeader), LoadError> {
    load_from_reader(
        image,
        image.len() as u64,
        reserve_bytes,
        &LoadProgress::default(),
    )
}

/// Loads an image in its streamed order (`docs/formats/snapshot.md`, "Streamed form"):
/// the file's bytes after the header, then the header, as a full sync sends a capture
/// while it is taken. Its length is not known up front: the trailer and the header end
/// it, and nothing past them is read. Records are bounded by the region until the header
/// arrives, then checked against it: the outcome is the same as loading the file.
pub fn load_streamed<R: Read>(
    mut f: R,
    reserve_bytes: usize,
) -> Result<(RawRegion, ImageHeader), LoadError> {
    let mut region = RawRegion::new(reserve_bytes).map_err(|e| LoadError::Arena(e.to_string()))?;
    let expect = Expect {
        arena_bytes: region.reserved_bytes() as u64,
        functions_stated: None,
        mode: None,
        file_len: u64::MAX,
    };
    let (end, header_at) = apply_records(&mut f, &mut region, &expect, &LoadProgress::default())?;
    let header = read_header_block(&mut f)?;
    check_fingerprint(&header)?;
    if header.arena_bytes > region.reserved_bytes() as u64 {
        return Err(LoadError::TooLarge {
            need: header.arena_bytes,
            have: region.reserved_bytes() as u64,
        });
    }
    let bad = |what: String| LoadError::Trailer {
        offset: header_at,
        what,
    };
    if end.trailer_arena_bytes != header.arena_bytes {
        return Err(bad("arena size differs from the header's".into()));
    }
    if end.extents_end > header.arena_bytes {
        return Err(bad(format!(
            "records reach arena offset {}, the header's arena is {} bytes",
            end.extents_end, header.arena_bytes
        )));
    }
    if header.mode.single_wave() {
        if let Some((record, offset, what)) = end.first_overlap {
            return Err(LoadError::Record {
                record,
                offset,
                what,
            });
        }
    }
    let functions_seen = (end.functions.len() as u64, crc32c::crc32c(&end.functions));
    let stated = header.functions_stated;
    if functions_seen != stated {
        return Err(LoadError::Functions {
            offset: header_at,
            what: format!(
                "{} bytes with crc32c {:#010x}, the header says {} bytes with {:#010x}",
                functions_seen.0, functions_seen.1, stated.0, stated.1
            ),
        });
    }
    Ok((
        region,
        ImageHeader {
            functions: end.functions,
            ..header
        },
    ))
}

/// What [`read_records`] checks records against: the header's figures, or for a streamed
/// image (whose header comes last) the region's size, with the header checked at the end.
struct Expect {
    arena_bytes: u64,
    /// The function section's (length, crc32c), `None` until the header is known.
    functions_stated: Option<(u64, u32)>,
    mode: Option<CutMode>,
    /// Bytes the image holds (`u64::MAX`: unknown, the trailer ends it).
    file_len: u64,
}

/// What [`read_records`] found once it reached the trailer.
#[derive(Default)]
struct RecordsEnd {
    functions: Vec<u8>,
    /// The trailer's arena size.
    trailer_arena_bytes: u64,
    /// The furthest arena byte a record wrote.
    extents_end: u64,
    /// A streamed image's first record whose extents overlap an earlier one's: (record,
    /// its offset in the image, what): an error once the header says freeze-free.
    first_overlap: Option<(u64, u64, String)>,
}

fn overlap_what(i: usize, e: &Extent) -> String {
    format!(
        "extent {i} ({} bytes at arena offset {}) overlaps an earlier extent of this freeze-free image",
        e.len, e.offset
    )
}

fn check_fingerprint(header: &ImageHeader) -> Result<(), LoadError> {
    match header.fingerprint.mismatch(&Fingerprint::current()) {
        Some((field, image, binary)) => Err(LoadError::Fingerprint {
            field,
            image,
            binary,
        }),
        None => Ok(()),
    }
}

fn load_from_reader<R: Read>(
    mut f: R,
    file_len: u64,
    reserve_bytes: usize,
    progress: &LoadProgress,
) -> Result<(RawRegion, ImageHeader), LoadError> {
    let header = read_header_block(&mut f)?;
    check_fingerprint(&header)?;
    let mut region = RawRegion::new(reserve_bytes).map_err(|e| LoadError::Arena(e.to_string()))?;
    if header.arena_bytes > region.reserved_bytes() as u64 {
        return Err(LoadError::TooLarge {
            need: header.arena_bytes,
            have: region.reserved_bytes() as u64,
        });
    }
    let expect = Expect {
        arena_bytes: header.arena_bytes,
        functions_stated: Some(header.functions_stated),
        mode: Some(header.mode),
        file_len,
    };
    let (end, _) = apply_records(&mut f, &mut region, &expect, progress)?;
    Ok((
        region,
        ImageHeader {
            functions: end.functions,
            ..header
        },
    ))
}

/// Reads the records up to and with the trailer, applying them into `region` on
/// [`load_threads`] workers. Returns what the trailer closed and the offset after it.
fn apply_records<R: Read>(
    f: &mut R,
    region: &mut RawRegion,
    expect: &Expect,
    progress: &LoadProgress,
) -> Result<(RecordsEnd, u64), LoadError> {
    let base = RegionPtr(
        region
            .slice_mut(0, 0)
            .map(|s| s.as_mut_ptr() as usize)
            .ok_or_else(|| LoadError::Arena("empty region".into()))?,
    );
    let threads = load_threads();
    let shared = LoadShared {
        in_flight: std::sync::Mutex::new(0),
        cv: std::sync::Condvar::new(),
        failed: std::sync::Mutex::new(None),
        abort: std::sync::atomic::AtomicBool::new(false),
    };
    // Bounded: the reader runs at most a few records ahead of the workers.
    let (tx, rx) = std::sync::mpsc::sync_channel::<LoadRec>(threads * 2);
    let rx = std::sync::Mutex::new(rx);
    let read = std::thread::scope(|s| {
        for _ in 0..threads {
            let (rx, shared) = (&rx, &shared);
            s.spawn(move || {
                let mut scratch = Vec::new();
                loop {
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(r) = next else { break };
                    if !shared.abort.load(std::sync::atomic::Ordering::SeqCst) {
                        if let Err(e) = apply_record(&r, base, &mut scratch) {
                            shared.fail(r.index, e);
                        }
                    }
                    shared.done_one();
                }
            });
        }
        let r = read_records(f, expect, progress, &shared, &tx);
        drop(tx);
        r
    });
    let worker_err = shared
        .failed
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    match (read, worker_err) {
        (Err((ri, re)), Some((wi, we))) => Err(if wi < ri { we } else { re }),
        (Err((_, e)), None) | (Ok(_), Some((_, e))) => Err(e),
        (Ok(end), None) => Ok(end),
    }
}

/// The byte ranges written so far by a single-wave (mode 3) image, merged where they
/// touch, so a chunked image stays a handful of ranges.
#[derive(Default)]
struct DisjointExtents {
    /// start -> end
    ranges: std::collections::BTreeMap<u64, u64>,
}

impl DisjointExtents {
    /// Records `[offset, offset + len)`; false (and nothing recorded) when it overlaps a
    /// range already recorded.
    fn insert(&mut self, offset: u64, len: u64) -> bool {
        let end = offset + len;
        if len == 0 {
            return true;
        }
        let before = self
            .ranges
            .range(..=offset)
            .next_back()
            .map(|(&s, &e)| (s, e));
        if before.is_some_and(|(_, e)| e > offset) {
            return false;
        }
        let after = self.ranges.range(offset..).next().map(|(&s, &e)| (s, e));
        if after.is_some_and(|(s, _)| s < end) {
            return false;
        }
        let (mut start, mut stop) = (offset, end);
        if let Some((s, e)) = before.filter(|&(_, e)| e == offset) {
            self.ranges.remove(&s);
            start = s;
            debug_assert_eq!(e, offset);
        }
        if let Some((s, e)) = after.filter(|&(s, _)| s == end) {
            self.ranges.remove(&s);
            stop = e;
        }
        self.ranges.insert(start, stop);
        true
    }
}

/// The reader's half of [`load_with_progress`]: every header-level check, in file order.
/// Errors carry the record index they concern (for choosing the first failure).
fn read_records<R: Read>(
    f: &mut R,
    expect: &Expect,
    progress: &LoadProgress,
    shared: &LoadShared,
    tx: &std::sync::mpsc::SyncSender<LoadRec>,
) -> Result<(RecordsEnd, u64), (u64, LoadError)> {
    use std::sync::atomic::Ordering::Relaxed;
    let file_len = expect.file_len;
    let mut extents_end = 0u64;
    let mut pos = HEADER_BYTES as u64;
    let mut functions: Option<Vec<u8>> = None;
    let mut records = 0u64;
    let mut chain_crc = 0u32;
    let mut wave_end = 0u64;
    let mut first_wave = true;
    let mut single_wave = DisjointExtents::default();
    let mut first_overlap = None;
    loop {
        if shared.abort.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(Default::default());
        }
        let at = records;
        let err = |e: LoadError| (at, e);
        let mut rh = [0u8; RECORD_HEADER_BYTES];
        if pos + 4 > file_len {
            return Err(err(LoadError::Truncated {
                what: "the trailer",
                offset: pos,
            }));
        }
        read_exact_at(f, &mut rh[..4], "a record header", pos).map_err(err)?;
        if rh[..4] == FUNCTIONS_MAGIC {
            let bad = |what: String| err(LoadError::Functions { offset: pos, what });
            if functions.is_some() || expect.functions_stated.is_some_and(|s| s.0 == 0) {
                return Err(bad("a section the header does not announce".into()));
            }
            let mut h = [0u8; FUNCTIONS_SECTION_HEADER_BYTES];
            read_exact_at(f, &mut h[4..], "the function libraries", pos).map_err(err)?;
            let len = get64(&h, 8);
            if let Some((stated_len, _)) = expect.functions_stated {
                if len != stated_len {
                    return Err(bad(format!("{len} bytes, the header says {stated_len}")));
                }
            }
            // Libraries live in memory beside the dataset: a section larger than the
            // arena the image may fill is no image this binary could have written, and a
            // streamed one would otherwise be buffered for as long as a sender sends.
            if len > expect.arena_bytes {
                return Err(bad(format!(
                    "{len} bytes, more than the arena's {} bytes",
                    expect.arena_bytes
                )));
            }
            let end = (pos + FUNCTIONS_SECTION_HEADER_BYTES as u64).saturating_add(len);
            if end > file_len {
                return Err(err(LoadError::Truncated {
                    what: "the function libraries",
                    offset: pos,
                }));
            }
            // A streamed image states the length only here: the buffer grows with what
            // arrives, never by the declared size.
            let mut blob = Vec::new();
            match f.take(len).read_to_end(&mut blob) {
                Ok(n) if n as u64 == len => {}
                Ok(_) => {
                    return Err(err(LoadError::Truncated {
                        what: "the function libraries",
                        offset: pos,
                    }))
                }
                Err(e) => return Err(err(LoadError::Io(e))),
            }
            if let Some((_, stated_crc)) = expect.functions_stated {
                if crc32c::crc32c(&blob) != stated_crc {
                    return Err(bad("checksum mismatch".into()));
                }
            }
            functions = Some(blob);
            pos = end;
            continue;
        }
        if rh[..4] == TRAILER_MAGIC {
            let mut t = [0u8; TRAILER_BYTES];
            t[..4].copy_from_slice(&rh[..4]);
            read_exact_at(f, &mut t[4..], "the trailer", pos).map_err(err)?;
            let bad = |what: String| err(LoadError::Trailer { offset: pos, what });
            if get32(&t, 28) != crc32c::crc32c(&t[..28]) {
                return Err(bad("checksum mismatch".into()));
            }
            if get64(&t, 8) != records {
                return Err(bad(format!(
                    "says {} records, the file holds {records}",
                    get64(&t, 8)
                )));
            }
            let streamed = expect.file_len == u64::MAX;
            if !streamed && get64(&t, 16) != expect.arena_bytes {
                return Err(bad("arena size differs from the header's".into()));
            }
            if get32(&t, 24) != chain_crc {
                return Err(bad("record header chain checksum mismatch".into()));
            }
            if !streamed && pos + TRAILER_BYTES as u64 != file_len {
                return Err(bad(format!(
                    "{} unexpected bytes after it",
                    file_len - pos - TRAILER_BYTES as u64
                )));
            }
            // No section: the header must state none, length and checksum alike (the
            // streamed loader compares both, and the two forms must agree).
            if let (Some(stated), None) = (expect.functions_stated, &functions) {
                if stated != (0, 0) {
                    return Err(err(LoadError::Functions {
                        offset: pos,
                        what: format!(
                            "the header announces {} bytes with crc32c {:#010x}, the file has none",
                            stated.0, stated.1
                        ),
                    }));
                }
            }
            shared.wait_idle();
            let end = RecordsEnd {
                functions: functions.unwrap_or_default(),
                trailer_arena_bytes: get64(&t, 16),
                extents_end,
                first_overlap,
            };
            return Ok((end, pos + TRAILER_BYTES as u64));
        }
        read_exact_at(f, &mut rh[4..], "a record header", pos).map_err(err)?;
        let rec_err = |what: String| {
            err(LoadError::Record {
                record: at,
                offset: pos,
                what,
            })
        };
        if rh[..4] != RECORD_MAGIC {
            return Err(rec_err(format!("bad record magic {:?}", &rh[..4])));
        }
        if get32(&rh, 28) != crc32c::crc32c(&rh[..28]) {
            return Err(rec_err("record header checksum mismatch".into()));
        }
        chain_crc = crc32c::crc32c_append(chain_crc, &rh);
        let flags = get16(&rh, 4);
        let n = get32(&rh, 8) as usize;
        let raw_bytes = get32(&rh, 12) as usize;
        let stored = get32(&rh, 16) as usize;
        let want_crc = get32(&rh, 20);
        if n == 0 || n > MAX_EXTENTS || raw_bytes > CHUNK_BYTES || stored > CHUNK_BYTES + 4096 {
            return Err(rec_err(format!(
                "implausible sizes ({n} extents, {raw_bytes} bytes, {stored} stored)"
            )));
        }
        let body = (n * EXTENT_BYTES + stored) as u64;
        if pos + RECORD_HEADER_BYTES as u64 + body > file_len {
            return Err(err(LoadError::Truncated {
                what: "a record",
                offset: pos,
            }));
        }
        let mut table = vec![0u8; n * EXTENT_BYTES];
        read_exact_at(f, &mut table, "a record's extents", pos).map_err(err)?;
        let mut payload = vec![0u8; stored];
        read_exact_at(f, &mut payload, "a record's payload", pos).map_err(err)?;
        let mut extents = Vec::with_capacity(n);
        let mut sum = 0usize;
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for i in 0..n {
            let e = Extent {
                offset: get64(&table, i * EXTENT_BYTES),
                len: get32(&table, i * EXTENT_BYTES + 8),
            };
            let end = e.offset.checked_add(e.len as u64);
            if end.is_none_or(|end| end > expect.arena_bytes) {
                return Err(rec_err(format!(
                    "extent {i} ({} bytes at arena offset {}) lies outside the arena ({} bytes)",
                    e.len, e.offset, expect.arena_bytes
                )));
            }
            extents_end = extents_end.max(end.unwrap_or(0));
            lo = lo.min(e.offset);
            hi = hi.max(end.unwrap_or(0));
            sum += e.len as usize;
            extents.push(e);
        }
        if sum != raw_bytes {
            return Err(rec_err("extent lengths do not add up".into()));
        }
        if expect.mode.is_some_and(CutMode::single_wave) {
            // One wave: the workers write these extents concurrently with every other
            // record's, which is only sound if no two of them share a byte.
            for (i, e) in extents.iter().enumerate() {
                if !single_wave.insert(e.offset, e.len as u64) {
                    return Err(rec_err(overlap_what(i, e)));
                }
            }
        } else if expect.mode.is_none() && first_overlap.is_none() {
            // Streamed: the mode comes with the header, last. The first overlap is kept
            // so that a freeze-free image is refused as the file loader refuses it (an
            // image of another mode overlaps early, and tracking stops there).
            for (i, e) in extents.iter().enumerate() {
                if !single_wave.insert(e.offset, e.len as u64) {
                    first_overlap = Some((at, pos, overlap_what(i, e)));
                    single_wave = DisjointExtents::default();
                    break;
                }
            }
        }
        if flags & (REC_ZERO | REC_LZ4) == 0 && stored != raw_bytes {
            return Err(rec_err("raw payload of the wrong length".into()));
        }
        // A freeze-free image (mode 3) holds every page once: its records are disjoint
        // whatever their order, so it is one wave.
        if lo < wave_end && !expect.mode.is_some_and(CutMode::single_wave) {
            // May overlap a record still in flight: finish the wave first.
            shared.wait_idle();
            wave_end = 0;
            first_wave = false;
        }
        wave_end = wave_end.max(hi);
        let rec = LoadRec {
            index: at,
            pos,
            flags,
            extents,
            raw_bytes,
            payload,
            want_crc,
            table_crc: crc32c::crc32c(&table),
            first_wave,
        };
        *shared.in_flight.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        if tx.send(rec).is_err() {
            shared.done_one();
            return Ok(Default::default());
        }
        pos += RECORD_HEADER_BYTES as u64 + body;
        progress.loaded_bytes.store(pos, Relaxed);
        let delay = progress.record_delay_us.load(Relaxed);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        records += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(arena_bytes: u64) -> ImageHeader {
        ImageHeader {
            fingerprint: Fingerprint::current(),
            arena_bytes,
            chunk_bytes: CHUNK_BYTES as u32,
            databases: 16,
            created_ms: 1,
            keys: 0,
            repl_id: [b'a'; 40],
            repl_offset: 7,
            repl_stream_db: 4,
            aof_lsn: 0x0102_0304_0506,
            mode: CutMode::StopTheWorld,
            passes: 1,
            functions: Vec::new(),
            functions_stated: (0, 0),
            companion_id: 0x1122_3344_5566_7788,
            companion_pages: 99,
        }
    }

    #[test]
    fn header_round_trips() {
        let h = header(1 << 20);
        assert_eq!(ImageHeader::decode(&h.encode()).unwrap(), h);
        let mut b = h.encode();
        b[70] ^= 1;
        assert!(matches!(
            ImageHeader::decode(&b),
            Err(LoadError::HeaderChecksum)
        ));
    }

    #[test]
    fn later_records_overwrite_earlier_ones() {
        let dir = std::env::temp_dir().join(format!("cairn-fmt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let mut w = ImageWriter::create(&path, true).unwrap();
        let a = vec![7u8; 8192];
        w.write_record(&Record::encode(
            vec![Extent {
                offset: 0,
                len: 8192,
            }],
            &a,
        ))
        .unwrap();
        let mut b = vec![0u8; 4096];
        b[..5].copy_from_slice(b"hello");
        w.write_record(&Record::encode(
            vec![Extent {
                offset: 4096,
                len: 4096,
            }],
            &b,
        ))
        .unwrap();
        w.write_record(&Record::encode(
            vec![Extent {
                offset: 100,
                len: 4,
            }],
            &[0, 0, 0, 0],
        ))
        .unwrap();
        w.commit(&header(8192)).unwrap();
        let (mut region, h) = load(&path, 1 << 20).unwrap();
        assert_eq!(h.arena_bytes, 8192);
        let s = region.slice_mut(0, 8192).unwrap();
        assert_eq!(&s[96..104], &[7, 7, 7, 7, 0, 0, 0, 0]);
        assert_eq!(&s[4096..4101], b"hello");
        assert!(s[4101..].iter().all(|&x| x == 0));
        // Truncation anywhere is reported as such.
        let full = std::fs::read(&path).unwrap();
        for cut in [10, HEADER_BYTES + 3, full.len() - 40, full.len() - 1] {
            std::fs::write(&path, &full[..cut]).unwrap();
            let e = load(&path, 1 << 20).err().unwrap();
            assert!(
                matches!(e, LoadError::Truncated { .. }),
                "cut at {cut}: {e}"
            );
        }
        // Any flipped byte after the header is caught.
        for at in (HEADER_BYTES..full.len()).step_by(7) {
            let mut bad = full.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            assert!(load(&path, 1 << 20).is_err(), "flip at {at} not detected");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The function libraries' section round-trips; its absence, a changed byte, a cut,
    /// a length that differs from the header's and a section the header does not
    /// announce are each refused, naming the section.
    #[test]
    fn function_libraries_section_is_checked() {
        let dir = std::env::temp_dir().join(format!("cairn-fmt-fn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let write = |functions: &[u8]| {
            let mut w = ImageWriter::create(&path, false).unwrap();
            w.write_record(&Record::encode(
                vec![Extent {
                    offset: 0,
                    len: 4096,
                }],
                &[3u8; 4096],
            ))
            .unwrap();
            let h = ImageHeader {
                functions: functions.to_vec(),
                ..header(4096)
            };
            w.commit(&h).unwrap();
            std::fs::read(&path).unwrap()
        };
        let libs = b"\xf5\x05hello".to_vec();
        let full = write(&libs);
        let (_, h) = load_from_bytes(&full, 1 << 20).unwrap();
        assert_eq!(h.functions, libs);
        let none = write(b"");
        let (_, h) = load_from_bytes(&none, 1 << 20).unwrap();
        assert!(h.functions.is_empty());
        let section = none.len() - TRAILER_BYTES;
        let fails = |img: &[u8]| load_from_bytes(img, 1 << 20).err().unwrap().to_string();
        // The header announces libraries the file lacks.
        let mut lacking = none.clone();
        put64(&mut lacking, 160, 7);
        let crc = crc32c::crc32c(&lacking[..HEADER_BYTES - 4]);
        put32(&mut lacking, HEADER_BYTES - 4, crc);
        assert!(
            fails(&lacking).contains("function libraries"),
            "{}",
            fails(&lacking)
        );
        // A changed byte in the libraries.
        let mut flipped = full.clone();
        flipped[section + FUNCTIONS_SECTION_HEADER_BYTES + 2] ^= 1;
        assert!(
            fails(&flipped).contains("checksum mismatch"),
            "{}",
            fails(&flipped)
        );
        // A section length other than the header's.
        let mut longer = full.clone();
        put64(&mut longer, section + 8, libs.len() as u64 + 1);
        assert!(
            fails(&longer).contains("the header says"),
            "{}",
            fails(&longer)
        );
        // A section the header does not announce.
        let mut unannounced = full.clone();
        put64(&mut unannounced, 160, 0);
        let crc = crc32c::crc32c(&unannounced[..HEADER_BYTES - 4]);
        put32(&mut unannounced, HEADER_BYTES - 4, crc);
        assert!(
            fails(&unannounced).contains("does not announce"),
            "{}",
            fails(&unannounced)
        );
        // Cut inside the section.
        assert!(fails(&full[..section + 20]).contains("truncated"));
        // reseal makes an altered section consistent again.
        let mut resealed = flipped.clone();
        reseal(&mut resealed);
        assert!(load_from_bytes(&resealed, 1 << 20).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A chunk of incompressible values is stored raw (LZ4 is not run on it whole), one
    /// that compresses is still compressed, and the image loads the same bytes either way.
    #[test]
    fn incompressible_chunks_are_stored_raw_and_load_the_same() {
        let mut rng = crate::util::Rng::new(42);
        let random: Vec<u8> = (0..CHUNK_BYTES / 8)
            .flat_map(|_| rng.next_u64().to_le_bytes())
            .collect();
        // As an arena of 500-byte random values looks: an entry's key and header, then
        // the value. LZ4 shrinks the whole by about a tenth; stored raw all the same.
        let mut entries = Vec::with_capacity(CHUNK_BYTES);
        for i in 0.. {
            if entries.len() >= CHUNK_BYTES {
                break;
            }
            entries.extend_from_slice(format!("\x01\x00\x10key:{i:012}\x00\x00").as_bytes());
            entries.extend((0..63).flat_map(|_| rng.next_u64().to_le_bytes()));
        }
        entries.truncate(CHUNK_BYTES);
        assert!(lz4_flex::block::compress(&entries).len() < entries.len());
        let text: Vec<u8> = (0..CHUNK_BYTES)
            .map(|i| b"alpha beta gamma delta "[(i * 7 / 5) % 23])
            .collect();
        let chunks = [&random, &entries, &text];
        let mut records = Vec::new();
        for (k, raw) in chunks.iter().enumerate() {
            let ext = vec![Extent {
                offset: (k * CHUNK_BYTES) as u64,
                len: CHUNK_BYTES as u32,
            }];
            let r = Record::encode(ext.clone(), raw);
            let (owned, back) = Record::encode_owned(ext, raw.to_vec());
            assert_eq!((r.flags, &r.payload), (owned.flags, &owned.payload));
            // The caller's buffer comes back exactly when the record does not take it.
            assert_eq!(back.is_some(), r.flags != 0);
            records.push(r);
        }
        assert_eq!(records[0].flags, 0);
        assert_eq!(records[1].flags, 0);
        assert_eq!(records[0].payload, random);
        assert_eq!(records[2].flags, REC_LZ4);
        assert!(records[2].payload.len() < CHUNK_BYTES / 4);
        let dir = std::env::temp_dir().join(format!("cairn-fmt-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let mut w = ImageWriter::create(&path, false).unwrap();
        for r in &records {
            w.write_record(r).unwrap();
        }
        let arena = (3 * CHUNK_BYTES) as u64;
        w.commit(&header(arena)).unwrap();
        let (mut region, _) = load(&path, 4 * CHUNK_BYTES).unwrap();
        let s = region.slice_mut(0, arena as usize).unwrap();
        for (k, raw) in chunks.iter().enumerate() {
            assert!(
                s[k * CHUNK_BYTES..(k + 1) * CHUNK_BYTES] == raw[..],
                "chunk {k}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Many records over several overlapping passes, loaded by the parallel loader, give
    /// exactly what applying them one by one in file order gives; a freeze-free image
    /// (mode 3) with disjoint records in any order loads as one wave.
    #[test]
    fn parallel_load_matches_sequential_application() {
        let dir = std::env::temp_dir().join(format!("cairn-fmt-par-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let arena = 24 * 4096u64;
        let mut want = vec![0u8; arena as usize];
        let mut w = ImageWriter::create(&path, true).unwrap();
        let mut seed = 7u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Pass 1: every 2-page chunk, ascending; later passes: scattered pages, ascending
        // within the pass (as the writer emits them).
        let mut passes: Vec<Vec<(u64, u32)>> = vec![(0..12).map(|c| (c * 8192, 8192)).collect()];
        for _ in 0..3 {
            let mut pages: Vec<u64> = (0..24).filter(|_| rnd() % 3 == 0).collect();
            pages.sort_unstable();
            passes.push(pages.iter().map(|&p| (p * 4096, 4096)).collect());
        }
        for pass in &passes {
            for &(off, len) in pass {
                let fill = (rnd() % 4) as u8; // some all-zero records too
                let bytes: Vec<u8> = (0..len).map(|i| fill.wrapping_mul(i as u8)).collect();
                want[off as usize..off as usize + len as usize].copy_from_slice(&bytes);
                w.write_record(&Record::encode(vec![Extent { offset: off, len }], &bytes))
                    .unwrap();
            }
        }
        w.commit(&header(arena)).unwrap();
        let (mut region, _) = load(&path, 1 << 20).unwrap();
        assert_eq!(region.slice_mut(0, arena as usize).unwrap(), &want[..]);
        // Modes 3 and 4: disjoint records, descending offsets.
        for mode in [CutMode::UffdSync, CutMode::Cow] {
            let mut w = ImageWriter::create(&path, true).unwrap();
            let mut want = vec![0u8; arena as usize];
            for p in (0..24u64).rev() {
                let bytes = vec![p as u8 + 1; 4096];
                want[(p * 4096) as usize..((p + 1) * 4096) as usize].copy_from_slice(&bytes);
                w.write_record(&Record::encode(
                    vec![Extent {
                        offset: p * 4096,
                        len: 4096,
                    }],
                    &bytes,
                ))
                .unwrap();
            }
            let mut h = header(arena);
            h.mode = mode;
            w.commit(&h).unwrap();
            let (mut region, got) = load(&path, 1 << 20).unwrap();
            assert_eq!(got.mode, mode);
            assert_eq!(region.slice_mut(0, arena as usize).unwrap(), &want[..]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Records whose extents overlap: across records, partly, and inside one record.
    fn overlapping_records() -> [Vec<Vec<Extent>>; 3] {
        let page = |offset: u64, len: u32| Extent { offset, len };
        [
            vec![vec![page(0, 8192)], vec![page(4096, 4096)]],
            vec![
                vec![page(8192, 4096)],
                vec![page(0, 4096)],
                vec![page(4000, 200)],
            ],
            vec![vec![page(0, 4096), page(2048, 4096)]],
        ]
    }

    /// Writes `records` as an image of `mode` at `path`, record n's bytes all n + 1.
    fn write_image_of(path: &Path, records: &[Vec<Extent>], mode: CutMode, arena: u64) {
        let mut w = ImageWriter::create(path, true).unwrap();
        for (n, extents) in records.iter().enumerate() {
            let bytes = vec![n as u8 + 1; extents.iter().map(|e| e.len as usize).sum()];
            w.write_record(&Record::encode(extents.clone(), &bytes))
                .unwrap();
        }
        let mut h = header(arena);
        h.mode = mode;
        w.commit(&h).unwrap();
    }

    /// A freeze-free image is loaded as one wave, so its records' extents must be
    /// disjoint: one that overlaps an earlier record's (even partly, even inside one
    /// record) is refused before any worker writes it.
    #[test]
    fn a_freeze_free_image_with_overlapping_extents_is_refused() {
        let dir = std::env::temp_dir().join(format!("cairn-fmt-ovl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let arena = 8 * 4096u64;
        let cases = overlapping_records();
        for records in cases {
            for mode in [CutMode::UffdSync, CutMode::Cow] {
                write_image_of(&path, &records, mode, arena);
                let err = load(&path, 1 << 20)
                    .err()
                    .expect("overlapping extents load");
                assert!(
                    err.to_string().contains("overlaps an earlier extent"),
                    "{err}"
                );
            }
        }
        // Touching extents are fine.
        let mut d = DisjointExtents::default();
        assert!(d.insert(4096, 4096) && d.insert(0, 4096) && d.insert(8192, 10));
        assert_eq!(d.ranges.len(), 1);
        assert!(!d.insert(8000, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The streamed form (records, then the header) is refused for the same overlaps
    /// once its header says freeze-free, and the same records load under a mode whose
    /// passes re-send pages.
    #[test]
    fn a_streamed_freeze_free_image_with_overlapping_extents_is_refused() {
        let dir = std::env::temp_dir().join(format!("cairn-fmt-sovl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let arena = 8 * 4096u64;
        let cases = overlapping_records();
        for records in cases {
            for mode in [CutMode::UffdSync, CutMode::Cow, CutMode::UffdLive] {
                write_image_of(&path, &records, mode, arena);
                let file = std::fs::read(&path).unwrap();
                let mut streamed = file[HEADER_BYTES..].to_vec();
                streamed.extend_from_slice(&file[..HEADER_BYTES]);
                let got = load_streamed(&streamed[..], 1 << 20);
                match mode {
                    CutMode::UffdSync | CutMode::Cow => {
                        let err = got.err().expect("overlapping extents load streamed");
                        assert!(
                            err.to_string().contains("overlaps an earlier extent"),
                            "{err}"
                        );
                    }
                    _ => {
                        let (mut region, h) = got.expect("a live image loads streamed");
                        assert_eq!(h.mode, mode);
                        // Applied in order: the last record's bytes win where they overlap.
                        let last = records.last().unwrap();
                        let e = &last[last.len() - 1];
                        let at = region.slice_mut(e.offset, e.len as usize).unwrap().to_vec();
                        assert!(at.iter().all(|&b| b == records.len() as u8), "{records:?}");
                    }
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
