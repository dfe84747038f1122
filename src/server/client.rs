//! A client's session state, owned by the executor (the socket side is elsewhere).

use crate::protocol::reply::Resp;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// CLIENT REPLY SKIP was just run: skip the next command's reply.
    SkipNext,
    Skip,
}

#[derive(Debug)]
pub struct Client {
    pub id: u64,
    /// The I/O thread's connection id (threaded mode only).
    pub conn_id: u64,
    pub name: Option<Vec<u8>>,
    pub db: usize,
    pub resp: Resp,
    pub authenticated: bool,
    pub reply_mode: ReplyMode,
    pub no_evict: bool,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created_ms: i64,
    pub last_interaction_ms: i64,
    /// The last command looked up (`cmd=` in CLIENT LIST), and its container when it is a
    /// subcommand (shown as `container|sub`).
    pub last_cmd: &'static str,
    pub last_cmd_parent: Option<&'static str>,
    /// Set by the HTTP guard (a `POST` or `Host:` command): close without sending the
    /// replies of the commands read with it, as Redis does.
    pub close_asap: bool,
    /// Set by QUIT or a protocol error: close once the reply is written.
    pub close_after_reply: bool,
    /// Buffer sizes, refreshed by the connection side (for CLIENT LIST and INFO).
    pub qbuf_bytes: u64,
    pub obuf_bytes: u64,
    /// When the output buffer first went over the soft limit (ms), for the soft timer.
    pub obuf_soft_since_ms: i64,
}

impl Client {
    pub fn new(id: u64, addr: String, laddr: String, now_ms: i64) -> Client {
        Client {
            id,
            conn_id: 0,
            name: None,
            db: 0,
            resp: Resp::V2,
            authenticated: false,
            reply_mode: ReplyMode::On,
            no_evict: false,
            addr,
            laddr,
            fd: -1,
            created_ms: now_ms,
            last_interaction_ms: now_ms,
            last_cmd: "NULL",
            last_cmd_parent: None,
            close_asap: false,
            close_after_reply: false,
            qbuf_bytes: 0,
            obuf_bytes: 0,
            obuf_soft_since_ms: 0,
        }
    }

    /// Connected over loopback (for `enable-debug-command local`, protected mode).
    pub fn is_local(&self) -> bool {
        self.addr.starts_with("127.")
            || self.addr.starts_with("[::1]")
            || self.addr.starts_with("::1")
    }

    /// One CLIENT LIST / CLIENT INFO line (without the trailing newline).
    pub fn info_line(&self, now_ms: i64) -> String {
        let flags = {
            let mut f = String::new();
            if self.close_after_reply {
                f.push('c');
            }
            if self.no_evict {
                f.push('e');
            }
            if f.is_empty() {
                f.push('N');
            }
            f
        };
        let name = self
            .name
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user=default redir=-1 resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            (now_ms - self.created_ms) / 1000,
            (now_ms - self.last_interaction_ms) / 1000,
            flags,
            self.db,
            self.qbuf_bytes,
            self.obuf_bytes,
            self.qbuf_bytes + self.obuf_bytes + 1024,
            match self.last_cmd_parent {
                Some(p) => format!("{p}|{}", self.last_cmd),
                None => self.last_cmd.to_string(),
            },
            match self.resp {
                Resp::V2 => 2,
                Resp::V3 => 3,
            }
        )
    }
}
