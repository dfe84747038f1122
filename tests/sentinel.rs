//! Sentinel, unchanged, over cairn: Debian's redis-server in sentinel mode (three of them
//! on loopback ports) monitors a cairn primary with two cairn replicas. The primary is
//! killed with SIGKILL; a replica is promoted, the other follows it, a client that asks
//! Sentinel for the primary writes to the new one, and a write acknowledged by `WAIT 2`
//! before the kill is there; the other replica continues partially from the promoted one.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A cairn server started from a config file of its own (Sentinel rewrites it after a
/// failover).
fn cairn_with_conf(extra: &str) -> ServerProc {
    let port = free_port();
    let dir = temp_dir("sentinel-node");
    let conf = dir.join("cairn.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsave \"\"\n{extra}",
            dir.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cairn-server");
    wait_serving(&mut child, port).expect("cairn serves");
    ServerProc { child, port, dir }
}

fn sentinel(primary_port: u16) -> ServerProc {
    let port = free_port();
    let dir = temp_dir("sentinel");
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {primary_port} 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n",
            dir.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(redis_server_path())
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server --sentinel");
    wait_serving(&mut child, port).expect("sentinel serves");
    ServerProc { child, port, dir }
}

/// One command on a fresh connection; None when the connection is refused or killed
/// (Sentinel kills normal clients of the instances it reconfigures, as clients expect).
fn ask(port: u16, args: &[&str]) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(DEADLINE)).ok()?;
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.write_all(&encode(&a)).ok()?;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(n) = reply_len(&buf) {
            buf.truncate(n);
            return Some(buf);
        }
        let n = c.read(&mut tmp).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn info(port: u16, field: &str) -> Option<String> {
    info_field(&show(&ask(port, &["INFO", "replication"])?), field)
}

fn lines(reply: &[u8]) -> Vec<String> {
    show(reply)
        .split("\r\n")
        .filter(|l| !l.starts_with('*') && !l.starts_with('$') && !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn sentinel_fails_over_a_killed_cairn_primary() {
    let mut prim = cairn_with_conf("");
    let target = format!("replicaof 127.0.0.1 {}\n", prim.port);
    let r1 = cairn_with_conf(&target);
    let r2 = cairn_with_conf(&target);
    let mut p = Raw::connect(prim.port);
    wait_until(DEADLINE, "both replicas are online", || {
        p.info_u64("replication", "connected_slaves") == 2
            && p.info("replication", "slave1")
                .is_some_and(|l| l.contains("state=online"))
    });
    let sentinels: Vec<ServerProc> = (0..3).map(|_| sentinel(prim.port)).collect();
    let mut s = Raw::connect(sentinels[0].port);
    wait_until(
        DEADLINE,
        "the sentinels see the replicas and each other",
        || {
            let m = lines(&s.call(&["SENTINEL", "MASTER", "mymaster"]));
            let field = |k: &str| {
                m.iter()
                    .position(|l| l == k)
                    .and_then(|i| m.get(i + 1).cloned())
            };
            field("num-slaves").as_deref() == Some("2")
                && field("num-other-sentinels").as_deref() == Some("2")
        },
    );
    p.call(&["SET", "acknowledged", "1"]);
    assert_eq!(p.call(&["WAIT", "2", "10000"]), b":2\r\n");
    let _ = prim.child.kill();
    let _ = prim.child.wait();
    let old = prim.port.to_string();
    let mut new_port = String::new();
    wait_until(Duration::from_secs(60), "a replica is promoted", || {
        let addr = lines(&s.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]));
        match addr.get(1) {
            Some(port) if *port != old => {
                new_port = port.clone();
                true
            }
            _ => false,
        }
    });
    let (promoted, other) = if new_port == r1.port.to_string() {
        (&r1, &r2)
    } else {
        (&r2, &r1)
    };
    assert_eq!(new_port, promoted.port.to_string());
    let (np, op) = (promoted.port, other.port);
    wait_until(DEADLINE, "the promoted replica is a primary", || {
        info(np, "role").as_deref() == Some("master")
    });
    wait_until(
        Duration::from_secs(60),
        "the other replica follows the new primary",
        || {
            info(op, "master_port").as_deref() == Some(new_port.as_str())
                && info(op, "master_link_status").as_deref() == Some("up")
        },
    );
    // PSYNC2: the other replica continued from the promoted one (Sentinel promotes the
    // replica with the highest offset, so the other one's position is covered).
    let stats = show(&ask(np, &["INFO", "stats"]).expect("INFO"));
    assert_eq!(info_field(&stats, "sync_full").as_deref(), Some("0"));
    assert_eq!(info_field(&stats, "sync_partial_ok").as_deref(), Some("1"));
    // A client that asked Sentinel writes to the new primary; the acknowledged write
    // survived, and the other replica gets the new one.
    wait_until(
        DEADLINE,
        "the acknowledged write is on the new primary",
        || ask(np, &["GET", "acknowledged"]).as_deref() == Some(&b"$1\r\n1\r\n"[..]),
    );
    wait_until(DEADLINE, "the new primary takes writes", || {
        ask(np, &["SET", "after-failover", "2"]).as_deref() == Some(&b"+OK\r\n"[..])
    });
    wait_until(DEADLINE, "the write reaches the other replica", || {
        ask(op, &["GET", "after-failover"]).as_deref() == Some(&b"$1\r\n2\r\n"[..])
    });
    assert_eq!(
        ask(op, &["GET", "acknowledged"]).as_deref(),
        Some(&b"$1\r\n1\r\n"[..])
    );
}
