//! The server starts, answers, and shuts down on request.
mod common;
use common::*;

#[test]
fn ping_set_get_over_a_real_socket() {
    let srv = start_cairn(&[]);
    let mut c = client(srv.port);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    let mut raw = Raw::connect(srv.port);
    assert_eq!(raw.call(&["GET", "missing"]), b"$-1\r\n");
    assert_eq!(raw.call(&["HELLO", "3"])[0], b'%');
    assert_eq!(raw.call(&["GET", "missing"]), b"_\r\n");
}

#[test]
fn shutdown_exits_cleanly() {
    let mut srv = start_cairn(&[]);
    let mut raw = Raw::connect(srv.port);
    raw.call(&["SET", "a", "1"]);
    raw.cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(raw.closed());
    let status = srv.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn sigterm_exits_cleanly() {
    let mut srv = start_cairn(&[]);
    unsafe { libc_kill(srv.child.id() as i32, 15) };
    let status = srv.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
