//! `snapshot-format rdb`: snapshots written as a Redis RDB file (`dbfilename`) instead of
//! the image. SAVE writes the live keyspace directly (it blocks by definition); BGSAVE
//! captures an image with the engine as usual (the executor's cost stays the capture's),
//! then the `cairn-rdb-save` thread loads that image into a private arena and streams it
//! as an RDB, as a replica's full sync does.

use super::Outcome;
use crate::keyspace::Keyspace;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// The RDB being written from a finished capture, while it runs.
pub struct RdbWrite {
    handle: JoinHandle<Result<u64, String>>,
    cancel: Arc<AtomicBool>,
    /// The capture's outcome: recorded once the RDB is durable.
    pub outcome: Outcome,
    /// When BGSAVE started (the capture's start).
    pub started: Instant,
}

impl RdbWrite {
    /// Starts the conversion of the finished capture at `image` into `out`; the image is
    /// removed when the thread ends, whatever the result.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        image: PathBuf,
        out: PathBuf,
        aux: Vec<(&'static str, String)>,
        reserve_bytes: usize,
        databases: usize,
        key_delay_us: u64,
        write_behind: bool,
        outcome: Outcome,
        started: Instant,
    ) -> std::io::Result<RdbWrite> {
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let handle = std::thread::Builder::new()
            .name("cairn-rdb-save".into())
            .spawn(move || {
                let r = image_to_rdb(
                    &image,
                    &out,
                    &aux,
                    reserve_bytes,
                    databases,
                    key_delay_us,
                    write_behind,
                    &c,
                );
                let _ = std::fs::remove_file(&image);
                crate::persistence::tiered::companion::remove_others(&image, None);
                r
            })?;
        Ok(RdbWrite {
            handle,
            cancel,
            outcome,
            started,
        })
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// The RDB's size in bytes, or why it was not written.
    pub fn join(self) -> Result<u64, String> {
        self.handle
            .join()
            .unwrap_or_else(|_| Err("the RDB writer thread panicked".into()))
    }

    /// Stops the conversion at its next write (the temp file is removed, `dbfilename`
    /// keeps its previous content) and waits for the thread.
    pub fn cancel(self) {
        self.cancel.store(true, Ordering::Relaxed);
        let _ = self.join();
    }
}

/// A sink that fails once `cancel` is set, so a cancelled conversion stops within one
/// write (the RDB writer hands over 1 MiB pieces).
struct Cancellable<'a, W> {
    inner: W,
    cancel: &'a AtomicBool,
}

impl<W: Write> Write for Cancellable<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("cancelled"));
        }
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Loads the image at `image` into a private arena and writes it to `out` as an RDB.
/// Tiered (cold) values are read from the image's companion file as the arena loads
/// (`load_image`), so the RDB holds every value.
#[allow(clippy::too_many_arguments)]
pub fn image_to_rdb(
    image: &Path,
    out: &Path,
    aux: &[(&str, String)],
    reserve_bytes: usize,
    databases: usize,
    key_delay_us: u64,
    write_behind: bool,
    cancel: &AtomicBool,
) -> Result<u64, String> {
    super::lower_priority();
    let progress = super::format::LoadProgress::default();
    let (arena, header) = super::load_image(image, reserve_bytes, &progress)?
        .ok_or_else(|| format!("the capture {} vanished", image.display()))?;
    if cancel.load(Ordering::Relaxed) {
        return Err("cancelled".into());
    }
    let mut ks = crate::collections::keyspace_from_arena(arena, databases)?;
    let mut aux = aux.to_vec();
    if let Some(db) = header.repl_stream_db.checked_sub(1) {
        aux.push(("repl-stream-db", db.to_string()));
    }
    aux.push(("repl-offset", header.repl_offset.to_string()));
    write_rdb_file(
        &mut ks,
        out,
        &aux,
        &header.functions,
        key_delay_us,
        write_behind,
        cancel,
    )
}

/// Writes `ks` as an RDB to a temp file beside `out`, syncs it, renames it to `out` and
/// syncs the directory: `out` is the previous file or the whole new one, never a part.
/// Returns the file's size.
pub fn write_rdb_file(
    ks: &mut Keyspace,
    out: &Path,
    aux: &[(&str, String)],
    functions: &[u8],
    key_delay_us: u64,
    write_behind: bool,
    cancel: &AtomicBool,
) -> Result<u64, String> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = out.with_file_name(format!("temp-rdb-{}-{name}", std::process::id()));
    let io = |e: std::io::Error| format!("{}: {e}", tmp.display());
    let written = (|| -> Result<u64, String> {
        let f = std::fs::File::create(&tmp).map_err(io)?;
        let mut sink = Cancellable {
            inner: crate::persistence::write_behind::WriteBehind::new(f, 0, write_behind),
            cancel,
        };
        crate::persistence::rdb_file::write_rdb_with_functions(
            ks,
            &mut sink,
            aux,
            functions,
            key_delay_us,
        )?;
        let f = sink.inner.into_inner();
        f.sync_all().map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
        if cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        std::fs::rename(&tmp, out).map_err(io)?;
        crate::persistence::aof::rewrite::sync_dir(out)?;
        Ok(len)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::Arena;
    use crate::keyspace::{StrEnc, Ttl};

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cairn-rdbsave-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_written_rdb_loads_back_and_a_cancelled_one_leaves_the_old_file() {
        let dir = temp_dir("w");
        let mut ks = crate::collections::new_keyspace(Arena::new(256 << 20, [1, 2]).unwrap(), 4);
        for i in 0..1000 {
            let v = format!("v{i}");
            ks.set_string(
                (i % 4) as usize,
                format!("k{i}").as_bytes(),
                v.as_bytes(),
                StrEnc::for_value(v.as_bytes()),
                Ttl::Clear,
            );
        }
        let out = dir.join("dump.rdb");
        let no = AtomicBool::new(false);
        let len =
            write_rdb_file(&mut ks, &out, &[("ctime", "1".into())], &[], 0, false, &no).unwrap();
        let data = std::fs::read(&out).unwrap();
        assert_eq!(data.len() as u64, len);
        assert!(crate::persistence::rdb_file::looks_like_rdb(&data));
        let mut back = crate::collections::new_keyspace(Arena::new(256 << 20, [3, 4]).unwrap(), 4);
        let config = crate::config::Config::default();
        let st = crate::persistence::rdb_file::load_rdb(&data, &mut back, &config, 0).unwrap();
        assert_eq!(st.keys_loaded, 1000);
        assert_eq!(back.dbsize(3), 250);

        let yes = AtomicBool::new(true);
        let e = write_rdb_file(&mut ks, &out, &[], &[], 0, false, &yes).unwrap_err();
        assert!(e.contains("cancelled"), "{e}");
        assert_eq!(std::fs::read(&out).unwrap(), data);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["dump.rdb".to_string()]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
