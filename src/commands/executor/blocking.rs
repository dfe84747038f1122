//! Blocking commands (BLPOP, BRPOP, BLMOVE, BLMPOP, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BZMPOP):
//! Redis 7's model, generic over the command.
//!
//! A handler that finds its keys empty calls [`block`] instead of replying (after checking
//! [`may_block`]: inside EXEC, while loading, it must answer as if timed out). The pipeline
//! then **parks** the client: its command (owned copy of the arguments) waits in a
//! per-key FIFO of client ids, with its deadline in a sorted set. A parked client costs no
//! CPU: nothing polls it. Every command that changed data signals its written keys
//! ([`Server::signal_keys`]); a signalled key that clients wait on becomes **ready**.
//! After each top-level command (EXEC counts as one) [`Server::serve_ready`] serves
//! ready keys: while the key holds a value of the kind the waiters want, the first waiter
//! is unparked and its command **re-run** as if it had just arrived (its pop propagates
//! to the AOF in the non-blocking form the handler chooses). The re-run's reply, or the
//! timeout / CLIENT UNBLOCK reply, lands in [`Blocking::unblocked`], which the socket side
//! (event loop or I/O-thread executor) appends to the connection's output before
//! resuming the commands that were pipelined behind the blocked one.
//!
//! Bounds: one parked command per client, so every queue is bounded by `maxclients`.

use super::{Client, RefSeg, Server};
use crate::commands::{Args, CmdError, Ctx};
use crate::keyspace::Kind;
use crate::protocol::reply::Reply;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// What a blocked client receives when its timeout passes (or CLIENT UNBLOCK TIMEOUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// `*-1` (RESP3 `_`): what Redis 7.0 sends every timed-out list or sorted-set
    /// command (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BZMPOP).
    /// (A BLMOVE that may not block, inside MULTI, answers a null bulk instead.)
    NullArray,
    /// `$-1` (RESP3 `_`).
    NullBulk,
    /// WAIT: the number of replicas that acknowledged `offset` by then.
    ReplicaAcks { offset: u64 },
    /// WAITAOF: `[local, replicas]` that fsynced `offset` by then.
    AofAcks { offset: u64 },
}

/// A handler's request to block (see [`block`]).
#[derive(Clone, Debug)]
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    /// Absolute deadline (ms since the epoch); 0 waits forever.
    pub deadline_ms: i64,
    /// The value kind that serves the command: a ready key of another kind is skipped.
    pub kind: Kind,
    pub on_timeout: TimeoutReply,
    /// The arguments to park instead of the command's own (XREAD: `$` resolved to the
    /// IDs seen when it blocked, so the re-run reads what came after).
    pub argv: Option<Vec<Vec<u8>>>,
    /// The error a waiter gets when a ready key no longer holds a value of its kind
    /// (XREADGROUP: its group went with the key), instead of waiting on.
    pub gone_error: Option<&'static str>,
}

/// A parked command re-run: its client (out of its slot), reply, value references in the
/// reply, and the LSN the reply waits for.
struct Rerun {
    client: Box<Client>,
    out: Vec<u8>,
    refs: Vec<RefSeg>,
    hold_lsn: u64,
}

/// A parked command.
struct Parked {
    slot: usize,
    db: usize,
    req: BlockRequest,
    /// The command's arguments, owned (the query buffer moves on).
    data: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

/// The reply of a command that was parked, ready for its connection.
pub struct Unblocked {
    pub slot: usize,
    pub client_id: u64,
    pub out: Vec<u8>,
    /// Value references in `out` (positions relative to `out`).
    pub refs: Vec<RefSeg>,
    /// `appendfsync always`: the LSN the reply waits for (0: none).
    pub hold_lsn: u64,
}

#[derive(Default)]
pub struct Blocking {
    /// Set by [`block`] during a handler; consumed by the pipeline.
    pub request: Option<BlockRequest>,
    /// Blocking is not allowed now (inside EXEC): handlers answer as on timeout.
    pub deny: bool,
    /// Re-running parked commands (no nested serving).
    pub(crate) serving: bool,
    /// The ready key whose waiter is being re-run (XREAD answers for that stream only,
    /// as Redis serves a blocked read one key at a time).
    serving_key: Option<(usize, Vec<u8>)>,
    /// (db, key) → ids of the clients waiting on it, first come first served.
    waiters: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
    parked: HashMap<u64, Parked>,
    /// (deadline ms, client id) of parked commands with a timeout.
    deadlines: BTreeSet<(i64, u64)>,
    ready: VecDeque<(usize, Vec<u8>)>,
    ready_set: HashSet<(usize, Vec<u8>)>,
    /// Replies of unparked commands, for the socket side to deliver.
    pub unblocked: Vec<Unblocked>,
    /// Parked commands served by a re-run.
    pub total_served: u64,
    /// CLIENT PAUSE in force (Redis's client_pause_type / end time).
    pub pause: Option<Pause>,
    /// The pauses `pause` combines: CLIENT PAUSE's, and FAILOVER's writes pause (Redis's
    /// PAUSE_DURING_FAILOVER: CLIENT UNPAUSE does not lift it, nor it CLIENT PAUSE).
    client_pause: Option<Pause>,
    failover_pause: bool,
    /// Clients whose command waits for the pause to end (Redis's BLOCKED_POSTPONE), in
    /// arrival order; each is also in `parked`, with no key and no deadline.
    postponed: Vec<u64>,
    /// The pause ended or was lifted: re-run the postponed commands this turn.
    resume_due: bool,
}

/// CLIENT PAUSE: which commands wait, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// ALL: every command waits; WRITE: commands that may write or replicate.
    pub all: bool,
    /// Absolute end (ms since the epoch).
    pub end_ms: i64,
}

impl Blocking {
    /// A parked command is being re-run (MONITOR saw it when it first ran).
    pub fn is_serving(&self) -> bool {
        self.serving
    }
    /// While a parked command is re-run: the (db, key) whose write woke it.
    pub fn serving_key(&self) -> Option<&(usize, Vec<u8>)> {
        self.serving_key.as_ref()
    }

    pub fn blocked_clients(&self) -> usize {
        self.parked.len()
    }
    pub fn timeout_table_len(&self) -> usize {
        self.deadlines.len()
    }
    pub fn blocking_keys(&self) -> usize {
        self.waiters.len()
    }
    pub fn is_parked(&self, client_id: u64) -> bool {
        self.parked.contains_key(&client_id)
    }
    /// The earliest deadline of a parked command or of the pause (the loops sleep at
    /// most until then).
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let parked = self.deadlines.first().map(|d| d.0);
        match (parked, self.client_pause.map(|p| p.end_ms)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// CLIENT PAUSE: the most restrictive type and the furthest end win, as Redis.
    pub fn pause(&mut self, all: bool, end_ms: i64) {
        self.client_pause = Some(match self.client_pause {
            Some(p) => Pause {
                all: p.all || all,
                end_ms: p.end_ms.max(end_ms),
            },
            None => Pause { all, end_ms },
        });
        self.combine_pauses();
    }

    /// CLIENT UNPAUSE (or the end passed): postponed commands run again this turn.
    pub fn unpause(&mut self) {
        self.client_pause = None;
        self.combine_pauses();
    }

    /// FAILOVER holds writes back until it ends (or lets them go).
    pub fn set_failover_pause(&mut self, on: bool) {
        self.failover_pause = on;
        self.combine_pauses();
    }

    /// The pause in force: either one's commands wait. When it loosens, the postponed
    /// commands run again this turn (those still held wait again).
    fn combine_pauses(&mut self) {
        let combined = match (self.client_pause, self.failover_pause) {
            (p, false) => p,
            (p, true) => Some(Pause {
                all: p.is_some_and(|p| p.all),
                end_ms: i64::MAX,
            }),
        };
        let loosened = match (self.pause, combined) {
            (Some(_), None) => true,
            (Some(old), Some(new)) => old.all && !new.all,
            _ => false,
        };
        if loosened {
            self.resume_due = true;
        }
        self.pause = combined;
    }

    /// Does the pause hold back a command with these flags (`may_write`: it has the
    /// `write` or `may_replicate` flag, or is an EXEC holding such commands)?
    pub fn holds_back(&self, may_write: bool) -> bool {
        match self.pause {
            Some(p) => p.all || may_write,
            None => false,
        }
    }
    /// The block request being made answers `-UNBLOCKED the stream key no longer
    /// exists` when its key is deleted or holds another kind (Redis 7.0's XREADGROUP).
    pub fn request_unblock_if_gone(&mut self) {
        if let Some(r) = self.request.as_mut() {
            r.gone_error = Some("UNBLOCKED the stream key no longer exists");
        }
    }

    /// True when nothing waits on any key (the write path's fast check).
    #[inline]
    pub fn no_waiters(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Marks `key` ready if a client waits on it.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.waiters.is_empty() {
            return;
        }
        let k = (db, key.to_vec());
        if self.waiters.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push_back(k);
        }
    }

    /// Marks every waited key of every database ready (FLUSHALL emptied them all).
    pub fn signal_all(&mut self) {
        let keys: Vec<(usize, Vec<u8>)> = self.waiters.keys().cloned().collect();
        for k in keys {
            if self.ready_set.insert(k.clone()) {
                self.ready.push_back(k);
            }
        }
    }

    /// Marks every waited key of `db` ready (SWAPDB brought in a whole other keyspace).
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<(usize, Vec<u8>)> =
            self.waiters.keys().filter(|k| k.0 == db).cloned().collect();
        for k in keys {
            if self.ready_set.insert(k.clone()) {
                self.ready.push_back(k);
            }
        }
    }

    fn park(&mut self, client_id: u64, p: Parked) {
        for k in &p.req.keys {
            let q = self.waiters.entry((p.db, k.clone())).or_default();
            // BLPOP k k: one place in the queue.
            if !q.contains(&client_id) {
                q.push_back(client_id);
            }
        }
        if p.req.deadline_ms > 0 {
            self.deadlines.insert((p.req.deadline_ms, client_id));
        }
        self.parked.insert(client_id, p);
    }

    /// Removes a parked command from every queue. O(keys × waiters of each key).
    fn unpark(&mut self, client_id: u64) -> Option<Parked> {
        let p = self.parked.remove(&client_id)?;
        if p.req.keys.is_empty() && p.req.deadline_ms == 0 {
            self.postponed.retain(|&c| c != client_id);
        }
        for k in &p.req.keys {
            let kk = (p.db, k.clone());
            if let Some(q) = self.waiters.get_mut(&kk) {
                q.retain(|&c| c != client_id);
                if q.is_empty() {
                    self.waiters.remove(&kk);
                }
            }
        }
        if p.req.deadline_ms > 0 {
            self.deadlines.remove(&(p.req.deadline_ms, client_id));
        }
        Some(p)
    }
}

/// Parses a blocking command's timeout (seconds, fractional allowed; 0 = forever) into an
/// absolute deadline in ms (0 = forever), with Redis's errors.
pub fn parse_timeout(arg: &[u8], now_ms: i64) -> Result<i64, CmdError> {
    let secs = crate::util::parse_f64(arg)
        .ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    // Redis converts an infinite timeout to a negative integer: same error.
    if !ms.is_finite() {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms > i64::MAX as f64 {
        return Err(CmdError::err("timeout is out of range"));
    }
    if ms < 0.0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let ms = ms as i64;
    if ms == 0 {
        return Ok(0);
    }
    ms.checked_add(now_ms)
        .ok_or_else(|| CmdError::err("timeout is out of range"))
}

/// May the command being run block? Not inside EXEC (Redis answers as on timeout), not
/// while replaying the AOF, not for the AOF's own client.
pub fn may_block(ctx: &Ctx) -> bool {
    !ctx.srv.blocking.deny && !ctx.srv.loading
}

/// Asks the pipeline to park the current command on `keys` (the handler writes no reply).
/// Call only when [`may_block`] is true.
pub fn block(ctx: &mut Ctx, keys: Vec<Vec<u8>>, deadline_ms: i64, kind: Kind, on: TimeoutReply) {
    ctx.srv.blocking.request = Some(BlockRequest {
        keys,
        deadline_ms,
        kind,
        on_timeout: on,
        argv: None,
        gone_error: None,
    });
}

/// [`block`], parking `argv` as the command to re-run.
pub fn block_as(
    ctx: &mut Ctx,
    keys: Vec<Vec<u8>>,
    deadline_ms: i64,
    kind: Kind,
    on: TimeoutReply,
    argv: Vec<Vec<u8>>,
) {
    ctx.srv.blocking.request = Some(BlockRequest {
        keys,
        deadline_ms,
        kind,
        on_timeout: on,
        argv: Some(argv),
        gone_error: None,
    });
}

fn timeout_reply(out: &mut Vec<u8>, resp: crate::protocol::reply::Resp, on: TimeoutReply) {
    let mut r = Reply::new(out, resp);
    match on {
        TimeoutReply::NullArray => r.null_array(),
        TimeoutReply::NullBulk => r.null(),
        // Counted by the caller (it needs the replicas' state).
        TimeoutReply::ReplicaAcks { .. } | TimeoutReply::AofAcks { .. } => {}
    }
}

impl Server {
    /// A command may block now (not inside EXEC or a script, not while loading): what
    /// command handlers ask without reaching into this module.
    pub fn may_block_now(&self) -> bool {
        !self.blocking.deny && !self.loading
    }

    /// A stream read (XREAD, XREADGROUP) parks on `keys` until `deadline_ms` (0: no
    /// deadline) as `argv`, the form it re-runs; it answers `*-1` at the deadline.
    pub fn block_stream_read(&mut self, keys: Vec<Vec<u8>>, deadline_ms: i64, argv: Vec<Vec<u8>>) {
        self.blocking.request = Some(BlockRequest {
            keys,
            deadline_ms,
            kind: Kind::Stream,
            on_timeout: TimeoutReply::NullArray,
            argv: Some(argv),
            gone_error: None,
        });
    }

    /// Called by the pipeline after a handler asked to block: parks `client`'s command.
    pub(crate) fn park_client(&mut self, client: &mut Client, args: Args, mut req: BlockRequest) {
        let mut data = Vec::new();
        let mut ranges = Vec::with_capacity(args.len());
        match req.argv.take() {
            Some(argv) => {
                for a in &argv {
                    ranges.push((data.len(), a.len()));
                    data.extend_from_slice(a);
                }
            }
            None => {
                for a in args.iter() {
                    ranges.push((data.len(), a.len()));
                    data.extend_from_slice(a);
                }
            }
        }
        client.blocked = true;
        let p = Parked {
            slot: client.slot,
            db: client.db,
            req,
            data,
            ranges,
        };
        self.blocking.park(client.id, p);
    }

    /// The write hook: keys a command changed (or created) may serve waiting clients.
    pub fn signal_key(&mut self, db: usize, key: &[u8]) {
        self.blocking.signal(db, key);
    }

    /// Serves ready keys (after a top-level command). Each ready key serves its waiters
    /// in arrival order while it still holds a value of the kind they want; the commands
    /// these re-runs run may make further keys ready (BLMOVE's destination), served in
    /// the same call.
    pub fn serve_ready(&mut self) {
        if self.blocking.serving || self.blocking.ready.is_empty() {
            return;
        }
        self.blocking.serving = true;
        // The caller's reply references are its own.
        let saved_refs = std::mem::take(&mut self.reply_refs);
        let saved_min = self.reply_refs_min;
        // The caller's reply waits for its own LSN, whatever the re-runs log.
        let saved_hold = self.aof.hold_lsn;
        let now = crate::util::now_ms();
        let mut blocked_again: Vec<u64> = Vec::new();
        while let Some(k) = self.blocking.ready.pop_front() {
            self.blocking.ready_set.remove(&k);
            blocked_again.clear();
            while let Some(&id) = self.blocking.waiters.get(&k).and_then(|q| q.front()) {
                // Waiters that blocked again went to the back of the queue in order: once
                // one is at the front, everyone left has been tried for this write.
                if blocked_again.contains(&id) {
                    break;
                }
                let Some(kind) = self.blocking.parked.get(&id).map(|p| p.req.kind) else {
                    break;
                };
                let serves = self
                    .ks
                    .find(k.0, &k.1, now)
                    .is_some_and(|e| self.ks.kind(e) == kind);
                if !serves {
                    self.unblock_gone(&k);
                    break;
                }
                let Some(p) = self.blocking.unpark(id) else {
                    break;
                };
                self.blocking.serving_key = Some(k.clone());
                let rerun = self.rerun_parked(&p);
                self.blocking.serving_key = None;
                let Some(r) = rerun else {
                    continue;
                };
                if r.client.blocked {
                    // Asked to block again (another kind of value took the key): it keeps
                    // its original deadline, at the back of the queues.
                    // The re-run parked itself with a deadline counted from now: that
                    // park gives way to the original one.
                    self.blocking.request = None;
                    self.release_refs(r.refs);
                    let (id, slot) = (r.client.id, r.client.slot);
                    self.clients[slot] = Some(r.client);
                    self.blocking.unpark(id);
                    self.blocking.park(id, p);
                    blocked_again.push(id);
                } else {
                    self.blocking.total_served += 1;
                    self.finish_rerun(r);
                }
            }
        }
        self.reply_refs = saved_refs;
        self.reply_refs_min = saved_min;
        self.aof.hold_lsn = saved_hold;
        self.blocking.serving = false;
    }

    /// Parks `client`'s command until the pause ends (no reply now).
    pub(crate) fn postpone(&mut self, client: &mut Client, args: Args) {
        let req = BlockRequest {
            keys: Vec::new(),
            deadline_ms: 0,
            kind: Kind::String,
            on_timeout: TimeoutReply::NullArray,
            argv: None,
            gone_error: None,
        };
        self.park_client(client, args, req);
        self.blocking.postponed.push(client.id);
    }

    /// Parks `client`'s command while the tier reads the values it needs (no key, no
    /// deadline; see `tiering.rs`): its reply and its later commands wait.
    pub(crate) fn park_for_io(&mut self, client: &mut Client, args: Args) {
        let req = BlockRequest {
            keys: Vec::new(),
            deadline_ms: 0,
            kind: Kind::String,
            on_timeout: TimeoutReply::NullArray,
            argv: None,
            gone_error: None,
        };
        self.park_client(client, args, req);
    }

    /// Runs a command parked by [`Server::park_for_io`] again (its values are in RAM
    /// now); its reply goes out like a served blocked command's. A re-run that parks
    /// again (another value went cold meanwhile) stays parked.
    pub(crate) fn rerun_after_io(&mut self, client_id: u64) {
        self.unpark_and_rerun(client_id);
    }

    /// Unparks `client_id` and runs its command again: a re-run that answered sends its
    /// reply ([`Server::finish_rerun`]); one that blocked again is parked already and
    /// answers when that ends.
    fn unpark_and_rerun(&mut self, client_id: u64) {
        let Some(p) = self.blocking.unpark(client_id) else {
            return;
        };
        let Some(r) = self.rerun_parked(&p) else {
            return;
        };
        if r.client.blocked {
            self.release_refs(r.refs);
            let slot = r.client.slot;
            self.clients[slot] = Some(r.client);
        } else {
            self.finish_rerun(r);
        }
    }

    /// Answers a command parked by [`Server::park_for_io`] with `reply` instead of
    /// running it (its value could not be read).
    pub(crate) fn answer_parked(&mut self, client_id: u64, reply: Vec<u8>) {
        let Some(p) = self.blocking.unpark(client_id) else {
            return;
        };
        let is_exec = p
            .ranges
            .first()
            .is_some_and(|&(at, len)| p.data[at..at + len].eq_ignore_ascii_case(b"exec"));
        if let Some(mut c) = self.clients.get_mut(p.slot).and_then(|c| c.take()) {
            c.blocked = false;
            // A transaction that cannot run is discarded, as EXEC always ends one.
            if is_exec {
                c.multi = None;
                crate::commands::transactions::unwatch_all(self, &mut c);
            }
            self.clients[p.slot] = Some(c);
        }
        if reply.first() == Some(&b'-') {
            let end = reply.len().saturating_sub(2).max(1);
            self.stats.record_error(&reply[1..end]);
        }
        self.blocking.unblocked.push(Unblocked {
            slot: p.slot,
            client_id,
            out: reply,
            refs: Vec::new(),
            hold_lsn: 0,
        });
    }

    /// The pause's end passed (checked every turn and in cron, as Redis's
    /// checkClientPauseTimeoutAndReturnIfPaused), and the postponed commands run again
    /// once it is over: in arrival order, each as if it had just arrived (a new pause
    /// postpones it again). Their replies go out like those of served blocked commands.
    fn resume_postponed(&mut self, now_ms: i64) {
        if self
            .blocking
            .client_pause
            .is_some_and(|p| p.end_ms < now_ms)
        {
            self.blocking.unpause();
        }
        if !std::mem::take(&mut self.blocking.resume_due) {
            return;
        }
        // One blocked again (postponed by a new pause, or a BLPOP on empty keys) answers
        // when that ends.
        for id in std::mem::take(&mut self.blocking.postponed) {
            self.unpark_and_rerun(id);
        }
    }

    /// Re-runs parked command `p` for its client as if it had just arrived (the client is
    /// taken out of its slot meanwhile); None when the client is gone.
    fn rerun_parked(&mut self, p: &Parked) -> Option<Rerun> {
        let mut client = self.clients.get_mut(p.slot).and_then(|c| c.take())?;
        client.blocked = false;
        let mut out = Vec::new();
        let mut refs = Vec::new();
        self.begin_batch();
        self.execute_refs(
            &mut client,
            Args::new(&p.data, &p.ranges),
            &mut out,
            &mut refs,
        );
        Some(Rerun {
            client,
            out,
            refs,
            hold_lsn: self.aof.hold_lsn,
        })
    }

    /// A re-run that answered: its reply goes to the socket side, the client back to its
    /// slot.
    fn finish_rerun(&mut self, r: Rerun) {
        self.blocking.unblocked.push(Unblocked {
            slot: r.client.slot,
            client_id: r.client.id,
            out: r.out,
            refs: r.refs,
            hold_lsn: r.hold_lsn,
        });
        let slot = r.client.slot;
        self.clients[slot] = Some(r.client);
    }

    /// Unparks the clients whose deadline has passed, with their timeout reply; ends a
    /// pause whose time is up and re-runs what it held back.
    pub fn expire_blocked(&mut self, now_ms: i64) {
        if self.blocking.pause.is_some() || self.blocking.resume_due {
            self.resume_postponed(now_ms);
        }
        while let Some(&(d, id)) = self.blocking.deadlines.first() {
            if d > now_ms {
                break;
            }
            if !self.unblock_with(id, false) {
                // Every deadline belongs to a parked command; a stray one would spin here.
                debug_assert!(false, "deadline of client {id} without a parked command");
                self.blocking.deadlines.remove(&(d, id));
            }
        }
    }

    /// A ready key no longer serves its waiters: those that asked for it
    /// ([`BlockRequest::gone_error`]) are answered with their error.
    fn unblock_gone(&mut self, k: &(usize, Vec<u8>)) {
        let ids: Vec<(u64, &'static str)> = match self.blocking.waiters.get(k) {
            Some(q) => q
                .iter()
                .filter_map(|id| {
                    let p = self.blocking.parked.get(id)?;
                    p.req.gone_error.map(|e| (*id, e))
                })
                .collect(),
            None => return,
        };
        for (id, err) in ids {
            let Some(p) = self.blocking.unpark(id) else {
                continue;
            };
            if let Some(c) = self.clients.get_mut(p.slot).and_then(|c| c.as_mut()) {
                c.blocked = false;
            }
            let mut out = Vec::new();
            out.push(b'-');
            out.extend_from_slice(err.as_bytes());
            out.extend_from_slice(b"\r\n");
            self.stats.record_error(err.as_bytes());
            self.blocking.total_served += 1;
            self.blocking.unblocked.push(Unblocked {
                slot: p.slot,
                client_id: id,
                out,
                refs: Vec::new(),
                hold_lsn: 0,
            });
        }
    }

    /// CLIENT UNBLOCK: unparks `client_id` with its timeout reply, or with an
    /// `-UNBLOCKED` error. False when it was not blocked.
    pub fn unblock_with(&mut self, client_id: u64, error: bool) -> bool {
        let Some(p) = self.blocking.unpark(client_id) else {
            return false;
        };
        let mut out = Vec::new();
        if let Some(c) = self.clients.get_mut(p.slot).and_then(|c| c.as_mut()) {
            c.blocked = false;
            if error {
                out.extend_from_slice(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
                self.stats
                    .record_error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK");
            } else if let TimeoutReply::ReplicaAcks { offset } = p.req.on_timeout {
                let n = self.repl.acked(offset);
                Reply::new(&mut out, c.resp).int(n as i64);
            } else if let TimeoutReply::AofAcks { offset } = p.req.on_timeout {
                let (local, n) = (
                    (self.aof.fsynced_reploff() >= Some(offset)) as i64,
                    self.repl.aof_acked(offset),
                );
                let mut r = Reply::new(&mut out, c.resp);
                r.array(2);
                r.int(local);
                r.int(n as i64);
            } else {
                timeout_reply(&mut out, c.resp, p.req.on_timeout);
            }
        }
        self.repl.waits.retain(|w| w.client_id != client_id);
        self.blocking.unblocked.push(Unblocked {
            slot: p.slot,
            client_id,
            out,
            refs: Vec::new(),
            hold_lsn: 0,
        });
        true
    }

    /// Answers parked WAIT `client_id` with `acked` replicas (enough acknowledged), or a
    /// WAITAOF with `[local, acked]` when `local` is given.
    pub(crate) fn blocking_answer(&mut self, client_id: u64, acked: u64, local: Option<u64>) {
        let Some(p) = self.blocking.unpark(client_id) else {
            return;
        };
        let mut out = Vec::new();
        if let Some(c) = self.clients.get_mut(p.slot).and_then(|c| c.as_mut()) {
            c.blocked = false;
            let mut r = Reply::new(&mut out, c.resp);
            if let Some(local) = local {
                r.array(2);
                r.int(local as i64);
            }
            r.int(acked as i64);
        }
        self.blocking.unblocked.push(Unblocked {
            slot: p.slot,
            client_id,
            out,
            refs: Vec::new(),
            hold_lsn: 0,
        });
    }

    /// A client is gone: forget its parked command, its watched keys and any reply
    /// waiting for it.
    pub fn forget_client(&mut self, client: &mut Client) {
        self.blocking.unpark(client.id);
        self.repl_forget(client.id);
        client.blocked = false;
        let id = client.id;
        let mut gone = Vec::new();
        self.blocking.unblocked.retain_mut(|u| {
            if u.client_id == id {
                gone.append(&mut u.refs);
                false
            } else {
                true
            }
        });
        self.release_refs(gone);
        crate::commands::transactions::unwatch_all(self, client);
        client.multi = None;
        self.tracking_disable(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::protocol::reply::Resp;

    // ---- The waiting structures on their own -------------------------------------------

    fn parked(db: usize, keys: &[&str], deadline_ms: i64) -> Parked {
        Parked {
            slot: 0,
            db,
            req: BlockRequest {
                keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
                deadline_ms,
                kind: Kind::List,
                on_timeout: TimeoutReply::NullArray,
                argv: None,
                gone_error: None,
            },
            data: Vec::new(),
            ranges: Vec::new(),
        }
    }

    fn queue(b: &Blocking, db: usize, key: &str) -> Vec<u64> {
        b.waiters
            .get(&(db, key.as_bytes().to_vec()))
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }

    fn ready(b: &Blocking) -> Vec<(usize, Vec<u8>)> {
        b.ready.iter().cloned().collect()
    }

    #[test]
    fn a_client_waits_once_per_key_and_leaves_every_queue_when_unparked() {
        let mut b = Blocking::default();
        b.park(1, parked(0, &["a", "a", "b"], 0));
        b.park(2, parked(0, &["b"], 0));
        assert_eq!(queue(&b, 0, "a"), [1]);
        assert_eq!(queue(&b, 0, "b"), [1, 2]);
        assert_eq!((b.blocked_clients(), b.blocking_keys()), (2, 2));
        assert!(b.is_parked(1) && b.is_parked(2));
        assert!(b.unpark(1).is_some());
        assert!(!b.is_parked(1));
        assert_eq!(queue(&b, 0, "b"), [2]);
        // An emptied queue goes: "a" no longer counts as a blocking key.
        assert_eq!(b.blocking_keys(), 1);
        assert!(b.unpark(1).is_none());
        assert!(b.unpark(2).is_some());
        assert!(b.no_waiters());
        assert_eq!(b.blocked_clients(), 0);
    }

    #[test]
    fn queues_are_per_db_and_keep_arrival_order() {
        let mut b = Blocking::default();
        for id in [10, 11, 12] {
            b.park(id, parked(0, &["k"], 0));
        }
        b.park(20, parked(1, &["k"], 0));
        assert_eq!(queue(&b, 0, "k"), [10, 11, 12]);
        assert_eq!(queue(&b, 1, "k"), [20]);
        b.unpark(11);
        assert_eq!(queue(&b, 0, "k"), [10, 12]);
        // Parked again: at the back.
        b.park(11, parked(0, &["k"], 0));
        assert_eq!(queue(&b, 0, "k"), [10, 12, 11]);
        b.unpark(20);
        assert!(queue(&b, 1, "k").is_empty());
        assert_eq!(b.blocking_keys(), 1);
    }

    #[test]
    fn signal_marks_a_waited_key_ready_once_and_ignores_others() {
        let mut b = Blocking::default();
        b.signal(0, b"k");
        assert!(ready(&b).is_empty(), "nothing waits: nothing is ready");
        b.park(1, parked(0, &["k", "j"], 0));
        b.signal(0, b"other");
        b.signal(1, b"k");
        assert!(ready(&b).is_empty());
        b.signal(0, b"k");
        b.signal(0, b"k");
        assert_eq!(ready(&b), [(0, b"k".to_vec())]);
        // SWAPDB: every waited key of the db, none twice.
        b.signal_db(1);
        assert_eq!(ready(&b).len(), 1);
        b.signal_db(0);
        let mut r = ready(&b);
        assert_eq!(r.len(), 2);
        r.sort();
        assert_eq!(r, [(0, b"j".to_vec()), (0, b"k".to_vec())]);
    }

    #[test]
    fn deadlines_order_by_time_and_zero_waits_forever() {
        let mut b = Blocking::default();
        b.park(1, parked(0, &["k"], 0));
        assert_eq!(b.next_deadline_ms(), None);
        b.park(2, parked(0, &["k"], 500));
        b.park(3, parked(0, &["k"], 300));
        b.park(4, parked(0, &["k"], 300));
        assert_eq!(b.timeout_table_len(), 3);
        assert_eq!(b.next_deadline_ms(), Some(300));
        b.unpark(3);
        assert_eq!(b.next_deadline_ms(), Some(300));
        b.unpark(4);
        assert_eq!(b.next_deadline_ms(), Some(500));
        b.unpark(2);
        assert_eq!(b.next_deadline_ms(), None);
        assert_eq!(b.timeout_table_len(), 0);
        assert!(b.is_parked(1));
    }

    #[test]
    fn timeout_parsing_rounds_up_to_ms_and_rejects_like_redis() {
        let now = 1_000;
        assert_eq!(parse_timeout(b"0", now), Ok(0));
        assert_eq!(parse_timeout(b"0.0", now), Ok(0));
        assert_eq!(parse_timeout(b"1.5", now), Ok(2_500));
        assert_eq!(parse_timeout(b"3", now), Ok(4_000));
        // A tiny timeout is at least a millisecond, never "forever".
        assert_eq!(parse_timeout(b"0.0001", now), Ok(1_001));
        // Rounded up to -0: not negative (Redis's ceill then the sign test).
        assert_eq!(parse_timeout(b"-0.0001", now), Ok(0));
        let e = |m: &str| Err(CmdError::err(m));
        assert_eq!(parse_timeout(b"-1", now), e("timeout is negative"));
        assert_eq!(parse_timeout(b"-inf", now), e("timeout is negative"));
        assert_eq!(parse_timeout(b"inf", now), e("timeout is negative"));
        assert_eq!(parse_timeout(b"1e300", now), e("timeout is out of range"));
        assert_eq!(
            parse_timeout(b"1", i64::MAX - 10),
            e("timeout is out of range")
        );
        for bad in [&b"abc"[..], b"", b"1s", b" 1"] {
            assert_eq!(
                parse_timeout(bad, now),
                e("timeout is not a float or out of range"),
                "{bad:?}"
            );
        }
    }

    // ---- Parking and serving through a Server ------------------------------------------

    fn connect(srv: &mut Server) -> Box<Client> {
        let mut c = srv.alloc_client("127.0.0.1:1".into(), "127.0.0.1:2".into());
        c.slot = srv.clients.len();
        srv.clients.push(None);
        c
    }

    /// Runs a command as the socket side does (ready keys are served after it).
    fn run(srv: &mut Server, c: &mut Client, args: &[&str]) -> String {
        let (buf, ranges) = crate::commands::executor::testing::encode_args(args);
        let (mut out, mut refs) = (Vec::new(), Vec::new());
        srv.execute_refs(c, Args::new(&buf, &ranges), &mut out, &mut refs);
        srv.release_refs(refs);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Runs a command that must block, then leaves the client in its slot (where the
    /// serving side finds it). Returns its id.
    fn block_on(srv: &mut Server, mut c: Box<Client>, args: &[&str]) -> u64 {
        assert_eq!(run(srv, &mut c, args), "", "{args:?} did not block");
        assert!(c.blocked);
        let (id, slot) = (c.id, c.slot);
        assert!(srv.blocking.is_parked(id));
        srv.clients[slot] = Some(c);
        id
    }

    /// Replies delivered to parked clients since the last call.
    fn delivered(srv: &mut Server) -> Vec<(u64, String)> {
        let got: Vec<Unblocked> = srv.blocking.unblocked.drain(..).collect();
        got.into_iter()
            .map(|u| {
                srv.release_refs(u.refs);
                (u.client_id, String::from_utf8_lossy(&u.out).into_owned())
            })
            .collect()
    }

    fn server() -> Server {
        Server::new(Config::default()).unwrap()
    }

    #[test]
    fn a_ready_key_serves_its_waiters_in_arrival_order() {
        let mut srv = server();
        let (a, b) = (connect(&mut srv), connect(&mut srv));
        let (slot_a, slot_b) = (a.slot, b.slot);
        let mut c = connect(&mut srv);
        let ida = block_on(&mut srv, a, &["BLPOP", "k", "0"]);
        let idb = block_on(&mut srv, b, &["BLPOP", "k", "0"]);
        assert_eq!(srv.blocking.blocked_clients(), 2);
        assert_eq!(run(&mut srv, &mut c, &["RPUSH", "k", "x"]), ":1\r\n");
        assert_eq!(
            delivered(&mut srv),
            [(ida, "*2\r\n$1\r\nk\r\n$1\r\nx\r\n".to_string())]
        );
        assert!(!srv.clients[slot_a].as_ref().unwrap().blocked);
        assert!(srv.clients[slot_b].as_ref().unwrap().blocked);
        assert_eq!(run(&mut srv, &mut c, &["EXISTS", "k"]), ":0\r\n");
        assert_eq!(run(&mut srv, &mut c, &["RPUSH", "k", "y", "z"]), ":2\r\n");
        assert_eq!(
            delivered(&mut srv),
            [(idb, "*2\r\n$1\r\nk\r\n$1\r\ny\r\n".to_string())]
        );
        assert_eq!(
            run(&mut srv, &mut c, &["LRANGE", "k", "0", "-1"]),
            "*1\r\n$1\r\nz\r\n"
        );
        assert_eq!(srv.blocking.blocked_clients(), 0);
        assert!(srv.blocking.no_waiters());
        assert_eq!(srv.blocking.total_served, 2);
    }

    #[test]
    fn a_key_of_another_kind_does_not_serve_a_list_waiter() {
        let mut srv = server();
        let a = connect(&mut srv);
        let mut c = connect(&mut srv);
        let ida = block_on(&mut srv, a, &["BLPOP", "k", "0"]);
        assert_eq!(run(&mut srv, &mut c, &["SET", "k", "v"]), "+OK\r\n");
        assert!(delivered(&mut srv).is_empty());
        assert!(srv.blocking.is_parked(ida));
        assert_eq!(run(&mut srv, &mut c, &["DEL", "k"]), ":1\r\n");
        assert_eq!(run(&mut srv, &mut c, &["LPUSH", "k", "x"]), ":1\r\n");
        assert_eq!(
            delivered(&mut srv),
            [(ida, "*2\r\n$1\r\nk\r\n$1\r\nx\r\n".to_string())]
        );
    }

    #[test]
    fn a_multi_key_waiter_is_served_once_and_leaves_its_other_queues() {
        let mut srv = server();
        let (a, b) = (connect(&mut srv), connect(&mut srv));
        let mut c = connect(&mut srv);
        let ida = block_on(&mut srv, a, &["BLPOP", "k1", "k2", "0"]);
        let idb = block_on(&mut srv, b, &["BLPOP", "k1", "0"]);
        assert_eq!(srv.blocking.blocking_keys(), 2);
        run(&mut srv, &mut c, &["RPUSH", "k2", "x"]);
        assert_eq!(
            delivered(&mut srv),
            [(ida, "*2\r\n$2\r\nk2\r\n$1\r\nx\r\n".to_string())]
        );
        assert_eq!(srv.blocking.blocking_keys(), 1);
        run(&mut srv, &mut c, &["RPUSH", "k1", "y"]);
        assert_eq!(
            delivered(&mut srv),
            [(idb, "*2\r\n$2\r\nk1\r\n$1\r\ny\r\n".to_string())]
        );
        assert!(srv.blocking.no_waiters());
    }

    #[test]
    fn a_served_blmove_makes_its_destination_serve_in_the_same_call() {
        let mut srv = server();
        let (a, b) = (connect(&mut srv), connect(&mut srv));
        let mut c = connect(&mut srv);
        let ida = block_on(&mut srv, a, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
        let idb = block_on(&mut srv, b, &["BLPOP", "dst", "0"]);
        run(&mut srv, &mut c, &["RPUSH", "src", "v"]);
        assert_eq!(
            delivered(&mut srv),
            [
                (ida, "$1\r\nv\r\n".to_string()),
                (idb, "*2\r\n$3\r\ndst\r\n$1\r\nv\r\n".to_string())
            ]
        );
        assert_eq!(run(&mut srv, &mut c, &["EXISTS", "src", "dst"]), ":0\r\n");
    }

    #[test]
    fn a_deadline_expires_at_its_ms_with_the_timeout_reply() {
        let mut srv = server();
        let (a, mut b, f) = (connect(&mut srv), connect(&mut srv), connect(&mut srv));
        let slot_a = a.slot;
        b.resp = Resp::V3;
        let ida = block_on(&mut srv, a, &["BLPOP", "k", "5"]);
        let idb = block_on(&mut srv, b, &["BLMOVE", "k", "d", "LEFT", "LEFT", "7"]);
        let idf = block_on(&mut srv, f, &["BRPOP", "k", "0"]);
        let d = srv.blocking.next_deadline_ms().unwrap();
        srv.expire_blocked(d - 1);
        assert!(delivered(&mut srv).is_empty());
        assert!(srv.blocking.is_parked(ida));
        srv.expire_blocked(d);
        assert_eq!(delivered(&mut srv), [(ida, "*-1\r\n".to_string())]);
        assert!(!srv.blocking.is_parked(ida));
        assert!(!srv.clients[slot_a].as_ref().unwrap().blocked);
        assert_eq!(queue(&srv.blocking, 0, "k"), [idb, idf]);
        // RESP3: the null is `_`. A waiter without a timeout never expires.
        srv.expire_blocked(i64::MAX);
        assert_eq!(delivered(&mut srv), [(idb, "_\r\n".to_string())]);
        assert!(srv.blocking.is_parked(idf));
        assert_eq!(srv.blocking.next_deadline_ms(), None);
    }

    #[test]
    fn client_unblock_answers_timeout_or_error_only_for_a_blocked_client() {
        let mut srv = server();
        let (a, b) = (connect(&mut srv), connect(&mut srv));
        let ida = block_on(&mut srv, a, &["BLPOP", "k", "0"]);
        let idb = block_on(&mut srv, b, &["BRPOPLPUSH", "k", "d", "0"]);
        assert!(srv.unblock_with(ida, false));
        assert!(!srv.unblock_with(ida, false), "already unblocked");
        assert!(srv.unblock_with(idb, true));
        assert!(!srv.unblock_with(12345, true));
        assert_eq!(
            delivered(&mut srv),
            [
                (ida, "*-1\r\n".to_string()),
                (
                    idb,
                    "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_string()
                )
            ]
        );
        assert!(srv.blocking.no_waiters());
    }

    #[test]
    fn a_gone_client_leaves_the_queues_and_its_pending_reply_is_dropped() {
        let mut srv = server();
        let (a, b) = (connect(&mut srv), connect(&mut srv));
        let (slot_a, slot_b) = (a.slot, b.slot);
        let mut c = connect(&mut srv);
        let ida = block_on(&mut srv, a, &["BLPOP", "k", "0"]);
        block_on(&mut srv, b, &["BLPOP", "k", "0"]);
        run(&mut srv, &mut c, &["RPUSH", "k", "x"]);
        assert_eq!(srv.blocking.unblocked.len(), 1);
        assert_eq!(srv.blocking.unblocked[0].client_id, ida);
        // Both connections close before the reply is delivered.
        let mut a = srv.clients[slot_a].take().unwrap();
        srv.forget_client(&mut a);
        assert!(srv.blocking.unblocked.is_empty());
        let mut b = srv.clients[slot_b].take().unwrap();
        srv.forget_client(&mut b);
        assert!(!b.blocked);
        assert!(srv.blocking.no_waiters());
        assert_eq!(srv.blocking.timeout_table_len(), 0);
        // Nobody waits now: the next element stays in the list.
        run(&mut srv, &mut c, &["RPUSH", "k", "y"]);
        assert!(delivered(&mut srv).is_empty());
        assert_eq!(run(&mut srv, &mut c, &["LLEN", "k"]), ":1\r\n");
    }

    #[test]
    fn blocking_commands_inside_exec_answer_as_on_timeout() {
        let mut srv = server();
        let mut c = connect(&mut srv);
        assert_eq!(run(&mut srv, &mut c, &["MULTI"]), "+OK\r\n");
        assert_eq!(run(&mut srv, &mut c, &["BLPOP", "k", "0"]), "+QUEUED\r\n");
        assert_eq!(
            run(&mut srv, &mut c, &["BLMOVE", "k", "d", "LEFT", "LEFT", "0"]),
            "+QUEUED\r\n"
        );
        assert_eq!(run(&mut srv, &mut c, &["EXEC"]), "*2\r\n*-1\r\n$-1\r\n");
        assert!(!c.blocked);
        assert_eq!(srv.blocking.blocked_clients(), 0);
        assert!(!srv.blocking.deny, "EXEC restores blocking");
    }
}
