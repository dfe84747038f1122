//! The executor's timeline (`latency-trace-file`): one line per executor turn with its
//! start and length, what it read and wrote per connection, the time spent in `writev`
//! and page faults taken on the executor, and (io-threads > 1) the replies handed to the
//! I/O threads and their queue. Used to find where small requests wait while a large
//! reply is in flight (ARCHITECTURE.md "Large values").
//!
//! Off (the default) the loops hold `None` and pay one branch per turn. On, the executor
//! fills fixed-size records into a batch and hands full batches to the `cairn-trace`
//! thread, which formats and appends them to the file: no formatting and no file I/O on
//! the executor. The channel is bounded; when the writer falls behind, batches are
//! dropped and the next line written says how many turns were lost.

use std::io::Write;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Instant;

/// Connections whose writes (and reads) one record names; more are summed.
pub const TRACE_CONNS_PER_TURN: usize = 16;
/// Records per batch handed to the writer thread.
const BATCH_TURNS: usize = 512;
/// Batches that may wait for the writer thread (bounds the trace's memory).
const QUEUED_BATCHES: usize = 8;

/// One executor turn.
#[derive(Clone, Copy, Default)]
pub struct TurnRecord {
    /// Wall clock at the turn's start (µs since the epoch, to line up with clients' logs).
    pub start_us: u64,
    pub len_us: u32,
    /// Time the loop waited (poll / channel) before this turn.
    pub wait_us: u32,
    /// Time spent in polls that found nothing while spinning (`event-loop-spin-us`) since
    /// the previous recorded turn.
    pub spin_us: u32,
    /// Readiness events (io-threads 1) or messages from I/O threads handled.
    pub events: u32,
    pub commands: u32,
    /// Time in `writev` on the executor and how many calls.
    pub writev_us: u32,
    pub writev_calls: u32,
    /// The longest single `writev` of the turn.
    pub writev_max_us: u32,
    pub bytes_written: u64,
    /// Of `bytes_written`, bytes of large values sent by reference (from the arena).
    pub ref_bytes_written: u64,
    /// Connections cut at the per-turn write budget (written again next turn).
    pub budget_cut: u32,
    /// Minor page faults taken by the executor thread during the turn.
    pub minor_faults: u32,
    /// Times the executor was preempted (involuntary context switches) during the turn:
    /// a long `writev` with a preemption is time the thread spent off the CPU.
    pub preempted: u32,
    /// io-threads > 1: replies handed to I/O threads, of which with a large reference,
    /// and replies still waiting in the I/O threads' inboxes after the hand-off.
    pub replies_queued: u32,
    pub ref_replies_queued: u32,
    pub io_queue_depth: u32,
    /// (connection slot, bytes written) for the first connections written this turn.
    pub writes: [(u32, u32); TRACE_CONNS_PER_TURN],
    pub writes_n: u8,
    /// (connection slot, bytes read) for the first connections read this turn; a
    /// connection read more than once in the turn has one entry with the sum.
    pub reads: [(u32, u32); TRACE_CONNS_PER_TURN],
    pub reads_n: u8,
    pub reads_more: u32,
    pub writes_more: u32,
}

impl TurnRecord {
    pub fn wrote(&mut self, slot: usize, bytes: usize, ref_bytes: u64) {
        self.bytes_written += bytes as u64;
        self.ref_bytes_written += ref_bytes;
        let n = self.writes_n as usize;
        if let Some(w) = self.writes.get_mut(n) {
            *w = (slot as u32, bytes.min(u32::MAX as usize) as u32);
            self.writes_n += 1;
        } else {
            self.writes_more += 1;
        }
    }

    /// `bytes` more read from `slot` (0: a read handler ran for it).
    pub fn read(&mut self, slot: usize, bytes: usize) {
        let n = self.reads_n as usize;
        let bytes = bytes.min(u32::MAX as usize) as u32;
        if let Some(r) = self.reads[..n].iter_mut().find(|r| r.0 == slot as u32) {
            r.1 = r.1.saturating_add(bytes);
        } else if let Some(r) = self.reads.get_mut(n) {
            *r = (slot as u32, bytes);
            self.reads_n += 1;
        } else if bytes == 0 {
            self.reads_more += 1;
        }
    }

    pub fn writev_took(&mut self, us: u32) {
        self.writev_us = self.writev_us.saturating_add(us);
        self.writev_calls += 1;
        self.writev_max_us = self.writev_max_us.max(us);
    }

    fn format(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        write!(
            out,
            "turn start_us={} len_us={} wait_us={} spin_us={} events={} cmds={} writev_us={} writevs={} \
             writev_max_us={} bytes={} ref_bytes={} budget_cut={} minflt={} nivcsw={} queued={} \
             ref_queued={} io_depth={} w=",
            self.start_us,
            self.len_us,
            self.wait_us,
            self.spin_us,
            self.events,
            self.commands,
            self.writev_us,
            self.writev_calls,
            self.writev_max_us,
            self.bytes_written,
            self.ref_bytes_written,
            self.budget_cut,
            self.minor_faults,
            self.preempted,
            self.replies_queued,
            self.ref_replies_queued,
            self.io_queue_depth,
        )?;
        for (i, (slot, bytes)) in self.writes[..self.writes_n as usize].iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(out, "{sep}{slot}:{bytes}")?;
        }
        if self.writes_more > 0 {
            write!(out, ",+{}", self.writes_more)?;
        }
        out.extend_from_slice(b" r=");
        for (i, (slot, bytes)) in self.reads[..self.reads_n as usize].iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(out, "{sep}{slot}:{bytes}")?;
        }
        if self.reads_more > 0 {
            write!(out, ",+{}", self.reads_more)?;
        }
        out.push(b'\n');
        Ok(())
    }
}

/// Minor page faults and involuntary context switches of the calling thread so far.
fn thread_faults_and_preemptions() -> (u64, u64) {
    // SAFETY: getrusage writes the struct it is given; RUSAGE_THREAD is the caller's.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) == 0 {
            (ru.ru_minflt as u64, ru.ru_nivcsw as u64)
        } else {
            (0, 0)
        }
    }
}

/// The executor's side of an open trace.
pub struct LatencyTrace {
    path: String,
    batch: Vec<TurnRecord>,
    tx: Option<SyncSender<(Vec<TurnRecord>, u64)>>,
    writer: Option<JoinHandle<()>>,
    /// Turns lost since the last batch that got through.
    dropped: u64,
    /// The turn being recorded.
    pub cur: TurnRecord,
    turn_start: Instant,
    faults_at_start: (u64, u64),
    /// Idle spinning since the last recorded turn.
    spin_us: u64,
}

impl LatencyTrace {
    /// Opens (appending) `path` and starts its writer thread.
    pub fn open(path: &str) -> std::io::Result<LatencyTrace> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let (tx, rx) = sync_channel::<(Vec<TurnRecord>, u64)>(QUEUED_BATCHES);
        let writer = std::thread::Builder::new()
            .name("cairn-trace".into())
            .spawn(move || {
                let mut file = std::io::BufWriter::new(file);
                let mut line = Vec::with_capacity(512);
                while let Ok((batch, dropped)) = rx.recv() {
                    if dropped > 0 {
                        let _ = writeln!(file, "dropped turns={dropped}");
                    }
                    for r in &batch {
                        line.clear();
                        if r.format(&mut line).is_ok() && file.write_all(&line).is_err() {
                            return;
                        }
                    }
                    if file.flush().is_err() {
                        return;
                    }
                }
            })?;
        Ok(LatencyTrace {
            path: path.to_string(),
            batch: Vec::with_capacity(BATCH_TURNS),
            tx: Some(tx),
            writer: Some(writer),
            dropped: 0,
            cur: TurnRecord::default(),
            turn_start: Instant::now(),
            faults_at_start: (0, 0),
            spin_us: 0,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Opens, reopens or closes `trace` to match the option (the loops call it at the end
    /// of a turn whose option differs from the open trace's path).
    pub fn follow_config(trace: &mut Option<LatencyTrace>, path: &str) {
        if trace.as_ref().map_or("", |t| t.path.as_str()) == path {
            return;
        }
        *trace = None; // the old writer finishes its queue and exits
        if !path.is_empty() {
            match LatencyTrace::open(path) {
                Ok(t) => *trace = Some(t),
                Err(e) => crate::warning!("Can't open the latency trace file {path}: {e}"),
            }
        }
    }

    /// Starts a turn that waited `waited_us` before it.
    pub fn begin(&mut self, waited_us: u64) {
        self.cur = TurnRecord {
            start_us: crate::util::now_us() as u64,
            wait_us: waited_us.min(u32::MAX as u64) as u32,
            ..TurnRecord::default()
        };
        self.turn_start = Instant::now();
        self.faults_at_start = thread_faults_and_preemptions();
    }

    /// A spin poll that found nothing (not a turn: summed into the next recorded one).
    pub fn spun(&mut self, us: u64) {
        self.spin_us = self.spin_us.saturating_add(us);
    }

    /// Ends the turn; turns that did nothing are not recorded (a turn that only read a
    /// connection cut short by a read budget — no event, no command yet — did something).
    pub fn end(&mut self) {
        let r = &mut self.cur;
        if r.events == 0
            && r.commands == 0
            && r.bytes_written == 0
            && r.replies_queued == 0
            && r.reads_n == 0
        {
            return;
        }
        r.len_us = self.turn_start.elapsed().as_micros().min(u32::MAX as u128) as u32;
        let (faults, preempted) = thread_faults_and_preemptions();
        r.minor_faults = faults
            .saturating_sub(self.faults_at_start.0)
            .min(u32::MAX as u64) as u32;
        r.preempted = preempted
            .saturating_sub(self.faults_at_start.1)
            .min(u32::MAX as u64) as u32;
        r.spin_us = self.spin_us.min(u32::MAX as u64) as u32;
        self.spin_us = 0;
        self.batch.push(self.cur);
        if self.batch.len() >= BATCH_TURNS {
            self.ship();
        }
    }

    /// Hands the records so far to the writer thread (also from cron, so a quiet server's
    /// trace is on disk within a cron period).
    pub fn ship(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let Some(tx) = self.tx.as_ref() else {
            return;
        };
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_TURNS));
        let n = batch.len() as u64;
        match tx.try_send((batch, self.dropped)) {
            Ok(()) => self.dropped = 0,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => self.dropped += n,
        }
    }
}

impl Drop for LatencyTrace {
    fn drop(&mut self) {
        self.ship();
        self.tx = None;
        // Not joined: the writer may be behind on a slow disk, and the executor must not
        // wait for it; it exits once its queue is written.
        drop(self.writer.take());
    }
}

/// Microseconds since `t`, saturated to u32.
pub fn us_since(t: Instant) -> u32 {
    t.elapsed().as_micros().min(u32::MAX as u128) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_the_first_connections_and_counts_the_rest() {
        let mut r = TurnRecord::default();
        for slot in 0..TRACE_CONNS_PER_TURN + 3 {
            r.wrote(slot, 1033, 0);
            r.read(slot, 0);
            r.read(slot, 100);
        }
        // A second read of a connection in the same turn adds to its entry.
        r.read(0, 50);
        r.wrote(99, 262_144, 262_144);
        r.writev_took(40);
        r.writev_took(70);
        let mut line = Vec::new();
        r.format(&mut line).unwrap();
        let line = String::from_utf8(line).unwrap();
        assert!(line.starts_with("turn start_us=0 "), "{line}");
        assert!(line.ends_with(",+3\n"), "{line}");
        assert!(line.contains(" w=0:1033,1:1033,"), "{line}");
        assert!(line.contains(",15:1033,+4 r=0:150,1:100,"), "{line}");
        assert!(line.contains(",15:100,+3\n"), "{line}");
        assert!(
            line.contains(" writev_us=110 writevs=2 writev_max_us=70 "),
            "{line}"
        );
        let bytes = 1033 * (TRACE_CONNS_PER_TURN as u64 + 3) + 262_144;
        assert!(
            line.contains(&format!(" bytes={bytes} ref_bytes=262144 ")),
            "{line}"
        );
    }

    #[test]
    fn the_trace_follows_the_option_and_skips_idle_turns() {
        let dir = std::env::temp_dir().join(format!("cairn-ltrace-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.trace");
        let path_s = path.to_str().unwrap().to_string();
        let mut trace = None;
        LatencyTrace::follow_config(&mut trace, &path_s);
        let t = trace.as_mut().expect("opened");
        t.begin(5);
        t.end(); // nothing happened: not recorded
        t.spun(7);
        t.begin(3);
        t.cur.commands = 2;
        t.end();
        // Only a read of a connection cut short by the read budget: recorded.
        t.begin(0);
        t.cur.read(9, 262_144);
        t.end();
        LatencyTrace::follow_config(&mut trace, "");
        assert!(trace.is_none());
        // The writer thread appends what it was handed, then exits.
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let text = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if !text.is_empty() || Instant::now() > deadline {
                break text;
            }
            std::thread::yield_now();
        };
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains(" wait_us=3 spin_us=7 "), "{text}");
        assert!(lines[0].contains(" cmds=2 "), "{text}");
        assert!(lines[1].ends_with(" r=9:262144"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
