//! Unit-test support: an executor (`Server`) with the default config and a client, and
//! running a command through the real pipeline, for the tests beside the command families
//! and the executor's modules.

use super::{Client, Server};
use crate::config::Config;
use crate::protocol::request::Args;

/// A server with the default config and one client of it.
pub fn server_and_client() -> (Server, Box<Client>) {
    let mut srv = Server::new(Config::default()).unwrap();
    let c = srv.alloc_client("127.0.0.1:1".into(), "127.0.0.1:2".into());
    (srv, c)
}

/// Runs one command as client `c` sent it; returns the raw reply.
pub fn run(srv: &mut Server, c: &mut Client, args: &[&str]) -> String {
    let (buf, ranges) = encode_args(args);
    let mut out = Vec::new();
    srv.execute(c, Args::new(&buf, &ranges), &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Calls `spec`'s handler directly (no pipeline: no admission, stats or propagation
/// hook) as client `c`; returns the raw reply, an error written as the pipeline would.
pub fn run_handler(
    srv: &mut Server,
    c: &mut Client,
    spec: &'static crate::commands::CommandSpec,
    args: &[&str],
) -> String {
    let (buf, ranges) = encode_args(args);
    let mut out = Vec::new();
    let resp = c.resp;
    let mut ctx = crate::commands::Ctx {
        srv,
        client: c,
        args: Args::new(&buf, &ranges),
        out: crate::protocol::reply::Reply::new(&mut out, resp),
        now_ms: crate::util::now_ms(),
        spec,
    };
    if let Err(e) = (spec.handler)(&mut ctx) {
        ctx.out.error(&e.to_string());
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The arguments laid out as a request buffer and its ranges (what the parser makes).
pub fn encode_args(args: &[&str]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut buf = Vec::new();
    let mut ranges = Vec::new();
    for a in args {
        ranges.push((buf.len(), a.len()));
        buf.extend_from_slice(a.as_bytes());
    }
    (buf, ranges)
}

/// The bulk strings of a reply, in order (nested arrays flattened, nulls skipped).
pub fn bulks(reply: &str) -> Vec<String> {
    let mut lines = reply.split("\r\n");
    let mut v = Vec::new();
    while let Some(l) = lines.next() {
        if l.starts_with('$') && l != "$-1" {
            v.push(lines.next().unwrap().to_string());
        }
    }
    v
}

/// `v`, sorted (for replies whose order is unspecified).
pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
