//! Refusing a connection on the TLS port with words: the `maxclients` and protected-mode
//! errors reach a TLS client as they reach a plain one.
//!
//! On plain TCP the loops write the error line at accept time and close. A TLS client can
//! only read it once the handshake is done, and the handshake takes round trips, so a
//! refused TLS connection waits here (not as a client: it never runs a command, is not in
//! CLIENT LIST and does not count towards `maxclients`): the loop drives its handshake on
//! readable events, writes the error through the session, and closes it. At most
//! [`REFUSAL_SLOTS`] wait at a time; past that, and after
//! [`crate::tls::HANDSHAKE_TIMEOUT_MS`], a refused connection is closed without a word.
//!
//! Must not touch: the executor's state (the loops count the refusal).

use super::stream::Stream;
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};

/// Refused TLS connections waiting for their handshake at once (per loop).
pub const REFUSAL_SLOTS: usize = 64;

pub struct TlsRefusals {
    /// The poll token of slot 0; slot `i` is `token_base + i`.
    token_base: usize,
    slots: Vec<Option<Pending>>,
}

struct Pending {
    stream: Stream,
    line: &'static str,
}

enum Progress {
    Waiting,
    Done,
}

impl TlsRefusals {
    pub fn new(token_base: usize) -> TlsRefusals {
        TlsRefusals {
            token_base,
            slots: Vec::new(),
        }
    }

    /// Whether poll token `t` is one of this set's.
    pub fn owns(&self, t: usize) -> bool {
        t >= self.token_base && t - self.token_base < REFUSAL_SLOTS
    }

    /// Refuses `stream` with `line`: written at once on a plain socket, after the
    /// handshake on a TLS one (kept here until then).
    pub fn refuse(&mut self, registry: &Registry, mut stream: Stream, line: &'static str) {
        if !matches!(stream, Stream::Tls(_)) {
            // Best effort, as Redis: the socket is new, its buffer empty.
            let _ = stream.write(line.as_bytes());
            return;
        }
        let slot = match self.slots.iter().position(|s| s.is_none()) {
            Some(i) => i,
            None if self.slots.len() < REFUSAL_SLOTS => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            // Too many at once: closed without a word.
            None => return,
        };
        let token = Token(self.token_base + slot);
        if registry
            .register(&mut stream, token, Interest::READABLE)
            .is_err()
        {
            return;
        }
        let mut p = Pending { stream, line };
        // The ClientHello may be here already (edge-triggered: no event for it later).
        match p.drive() {
            Progress::Done => {
                let _ = registry.deregister(&mut p.stream);
            }
            Progress::Waiting => self.slots[slot] = Some(p),
        }
    }

    /// A readable (or closed) event on one of this set's tokens.
    pub fn on_event(&mut self, registry: &Registry, t: usize) {
        let Some(slot) = t.checked_sub(self.token_base) else {
            return;
        };
        let Some(entry) = self.slots.get_mut(slot) else {
            return;
        };
        if let Some(p) = entry.as_mut() {
            if let Progress::Done = p.drive() {
                if let Some(mut p) = entry.take() {
                    let _ = registry.deregister(&mut p.stream);
                }
            }
        }
    }

    /// Closes the refused connections whose handshake is overdue (the loops' cron).
    pub fn expire(&mut self, registry: &Registry) {
        for entry in self.slots.iter_mut() {
            if entry.as_mut().is_some_and(|p| p.stream.handshake_overdue()) {
                if let Some(mut p) = entry.take() {
                    let _ = registry.deregister(&mut p.stream);
                }
            }
        }
    }

    /// Refused connections still waiting.
    pub fn pending(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

impl Pending {
    /// Advances the handshake with what the socket has; once it is done, writes the
    /// line. Done: the connection is to be closed (line written, or the peer gone).
    fn drive(&mut self) -> Progress {
        let mut sink = [0u8; 512];
        // One read processes every handshake record the socket holds (it stops at
        // WouldBlock); plaintext after the handshake is not read at all.
        while matches!(&self.stream, Stream::Tls(t) if t.is_handshaking()) {
            match self.stream.read(&mut sink) {
                // Closed by the peer, or a failed handshake (logged by the stream).
                Ok(0) => return Progress::Done,
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if matches!(&self.stream, Stream::Tls(t) if t.is_handshaking()) {
                        return Progress::Waiting;
                    }
                    break;
                }
                Err(_) => return Progress::Done,
            }
        }
        // Best effort, as on plain TCP: a new session's socket buffer has room for it.
        let _ = self.stream.write(self.line.as_bytes());
        let _ = self.stream.flush();
        Progress::Done
    }
}
