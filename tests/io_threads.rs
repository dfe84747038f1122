//! `io-threads N`: sockets handled by I/O threads, commands by the executor. Replies keep
//! their order per connection, pipelines and large values work, limits still apply.
mod common;
use common::*;

#[test]
fn pipelines_from_many_clients_keep_order() {
    let srv = start_cairn(&["--io-threads", "3"]);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let port = srv.port;
            std::thread::spawn(move || {
                let mut raw = Raw::connect(port);
                let mut pipeline = Vec::new();
                for i in 0..500 {
                    pipeline.extend(encode(&[
                        b"SET",
                        format!("k{t}:{i}").as_bytes(),
                        format!("{i}").as_bytes(),
                    ]));
                    pipeline.extend(encode(&[b"INCR", format!("k{t}:{i}").as_bytes()]));
                }
                raw.send(&pipeline);
                for i in 0..500 {
                    assert_eq!(raw.reply(), b"+OK\r\n");
                    assert_eq!(raw.reply(), format!(":{}\r\n", i + 1).as_bytes());
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut c = client(srv.port);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 4000);
}

#[test]
fn large_values_and_protocol_errors() {
    let srv = start_cairn(&["--io-threads", "2"]);
    let mut raw = Raw::connect(srv.port);
    let big = vec![b'x'; 5 << 20];
    raw.cmd(&[b"SET", b"big", &big]);
    assert_eq!(raw.reply(), b"+OK\r\n");
    raw.cmd(&[b"GET", b"big"]);
    let r = raw.reply();
    assert_eq!(r.len(), big.len() + format!("${}\r\n\r\n", big.len()).len());
    let mut bad = Raw::connect(srv.port);
    bad.send(b"*1\r\n$-5\r\n");
    assert_eq!(bad.reply(), b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(bad.closed());
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    let mut q = Raw::connect(srv.port);
    assert_eq!(q.call(&["QUIT"]), b"+OK\r\n");
    assert!(q.closed());
}

#[test]
fn auth_and_client_kill_work_across_threads() {
    let srv = start_cairn(&["--io-threads", "3", "--requirepass", "pw"]);
    let mut a = Raw::connect(srv.port);
    assert_eq!(
        a.call(&["GET", "x"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    a.send(b"*11\r\n");
    assert_eq!(
        a.reply(),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert!(a.closed());
    let mut b = Raw::connect(srv.port);
    assert_eq!(b.call(&["AUTH", "pw"]), b"+OK\r\n");
    let big: Vec<&str> = std::iter::once("MGET")
        .chain(std::iter::repeat_n("k", 20))
        .collect();
    assert!(b.call(&big).starts_with(b"*20\r\n"));
    let mut victim = Raw::connect(srv.port);
    assert_eq!(victim.call(&["AUTH", "pw"]), b"+OK\r\n");
    let id = String::from_utf8(victim.call(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end();
    assert_eq!(b.call(&["CLIENT", "KILL", "ID", id]), b":1\r\n");
    assert!(victim.closed());
    assert_eq!(b.call(&["PING"]), b"+PONG\r\n");
}
