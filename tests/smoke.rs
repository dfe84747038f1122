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

#[test]
fn pipelines_mixing_inline_multibulk_select_and_quit_keep_order() {
    let srv = start_cairn(&[]);
    let mut raw = Raw::connect(srv.port);
    let mut p = Vec::new();
    for i in 0..200 {
        p.extend(encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
        if i % 50 == 0 {
            p.extend(format!("GET k{i}\r\n").as_bytes());
        }
    }
    p.extend(encode(&[b"SELECT", b"1"]));
    p.extend(encode(&[b"GET", b"k1"]));
    p.extend(encode(&[b"SELECT", b"0"]));
    p.extend(encode(&[b"GET", b"k199"]));
    p.extend(encode(&[b"QUIT"]));
    p.extend(encode(&[b"SET", b"after-quit", b"x"]));
    raw.send(&p);
    for i in 0..200 {
        assert_eq!(raw.reply(), b"+OK\r\n");
        if i % 50 == 0 {
            let v = format!("{i}");
            assert_eq!(raw.reply(), format!("${}\r\n{v}\r\n", v.len()).as_bytes());
        }
    }
    assert_eq!(raw.reply(), b"+OK\r\n");
    assert_eq!(raw.reply(), b"$-1\r\n");
    assert_eq!(raw.reply(), b"+OK\r\n");
    assert_eq!(raw.reply(), b"$3\r\n199\r\n");
    assert_eq!(raw.reply(), b"+OK\r\n");
    assert!(raw.closed());
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.call(&["EXISTS", "after-quit"]), b":0\r\n");
}
