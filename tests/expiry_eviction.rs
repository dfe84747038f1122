//! Active expiry removes keys nobody reads; maxmemory evicts by policy or refuses writes
//! with Redis's -OOM text, and the server keeps serving.
mod common;
use common::*;

#[test]
fn active_expiry_removes_untouched_keys() {
    let srv = start_cairn(&["--hz", "50"]);
    let mut c = client(srv.port);
    let mut p = redis::pipe();
    for i in 0..20_000 {
        p.cmd("SET")
            .arg(format!("e{i}"))
            .arg("v")
            .arg("PX")
            .arg(50)
            .ignore();
    }
    for i in 0..100 {
        p.cmd("SET").arg(format!("keep{i}")).arg("v").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    wait_until(DEADLINE, "active expiry removed the 20,000 keys", || {
        redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap() == 100
    });
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert_eq!(info_int(&info, "expired_keys"), 20_000);
}

#[test]
fn noeviction_refuses_writes_with_redis_text() {
    let srv = start_cairn(&["--maxmemory", "8mb"]);
    let mut raw = Raw::connect(srv.port);
    let value = "x".repeat(1000);
    let mut refused = None;
    for i in 0..20_000 {
        let r = raw.call(&["SET", &format!("k{i}"), &value]);
        if r != b"+OK\r\n" {
            refused = Some(r);
            break;
        }
    }
    assert_eq!(
        refused.expect("writes never refused"),
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    // Reads and deletes still work.
    assert!(raw.call(&["GET", "k1"]).starts_with(b"$1000"));
    assert_eq!(raw.call(&["DEL", "k1"]), b":1\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn allkeys_lru_keeps_memory_under_the_limit_and_keeps_hot_keys() {
    let srv = start_cairn(&[
        "--maxmemory",
        "16mb",
        "--maxmemory-policy",
        "allkeys-lru",
        "--maxmemory-samples",
        "10",
    ]);
    let mut c = client(srv.port);
    let value = "y".repeat(1000);
    // A hot key touched all the time must survive.
    let _: () = redis::cmd("SET").arg("hot").arg("1").query(&mut c).unwrap();
    for chunk in 0..50 {
        let mut p = redis::pipe();
        for i in 0..1000 {
            p.cmd("SET")
                .arg(format!("k{chunk}:{i}"))
                .arg(&value)
                .ignore();
        }
        p.cmd("GET").arg("hot").ignore();
        let _: () = p.query(&mut c).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(if chunk % 10 == 0 {
            1100
        } else {
            0
        }));
    }
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let used = info_int(&info, "used_memory");
    assert!(
        used <= 16 * 1024 * 1024 + 64 * 1024,
        "used_memory {used} over maxmemory"
    );
    let stats: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info_int(&stats, "evicted_keys") > 10_000);
    let hot: Option<String> = redis::cmd("GET").arg("hot").query(&mut c).unwrap();
    assert_eq!(hot.as_deref(), Some("1"));
}

#[test]
fn volatile_policy_without_volatile_keys_gives_oom() {
    let srv = start_cairn(&["--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"]);
    let mut raw = Raw::connect(srv.port);
    let value = "z".repeat(1000);
    let mut oom = false;
    for i in 0..10_000 {
        // A quarter of the keys have a TTL: those go first, then writes are refused.
        let r = if i % 4 == 0 {
            raw.call(&["SET", &format!("k{i}"), &value, "EX", "1000"])
        } else {
            raw.call(&["SET", &format!("k{i}"), &value])
        };
        if r.starts_with(b"-OOM") {
            oom = true;
            break;
        }
    }
    assert!(oom);
    let info = String::from_utf8(raw.call(&["INFO", "stats"])).unwrap();
    assert!(info_int(&info, "evicted_keys") > 0);
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
}
