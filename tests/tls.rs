//! TLS (`tls-port`, rustls): each test makes its own CA and certificates with rcgen, then
//! talks to cairn with a rustls client, Debian's `redis-cli --tls` / `redis-benchmark
//! --tls`, and (replication) a cairn or Redis 7 replica over TLS.

mod common;
use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

/// A CA that signs certificates into files of `dir`.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    dir: PathBuf,
    name: String,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, format!("cairn test CA {name}"));
        let cert = p.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).unwrap();
        Ca {
            cert,
            key,
            dir: dir.to_path_buf(),
            name: name.to_string(),
        }
    }

    fn crt(&self) -> String {
        self.path(&format!("{}.crt", self.name))
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).to_str().unwrap().to_string()
    }

    /// Signs a certificate for localhost / 127.0.0.1 into `<name>.crt` and `<name>.key`;
    /// `expired`: valid only in 2000.
    fn sign(&self, name: &str, expired: bool) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        if expired {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2000, 12, 31);
        }
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let (crt, k) = (
            self.path(&format!("{name}.crt")),
            self.path(&format!("{name}.key")),
        );
        std::fs::write(&crt, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (crt, k)
    }
}

fn pem_certs(path: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .map(|c| c.unwrap())
        .collect()
}

/// A rustls client trusting `ca`, showing `cert` (crt, key) when given.
fn client_config(ca: &str, cert: Option<&(String, String)>) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certs(ca) {
        roots.add(c).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    Arc::new(match cert {
        Some((crt, key)) => b
            .with_client_auth_cert(pem_certs(crt), PrivateKeyDer::from_pem_file(key).unwrap())
            .unwrap(),
        None => b.with_no_client_auth(),
    })
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Connects and finishes the handshake (Err: the server refused it or closed).
fn tls_connect(port: u16, config: Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(DEADLINE))?;
    let conn = rustls::ClientConnection::new(config, ServerName::try_from("localhost").unwrap())
        .map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// Sends a command and reads its whole reply.
fn call(s: &mut Tls, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
    s.write_all(&encode(args))?;
    s.flush()?;
    let mut buf = Vec::new();
    let mut tmp = vec![0u8; 1 << 16];
    loop {
        if let Some(n) = reply_len(&buf) {
            assert_eq!(n, buf.len(), "one reply expected");
            return Ok(buf);
        }
        let n = s.read(&mut tmp)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Whether a TLS client gets PONG (false: the handshake or the command failed).
fn tls_ping(port: u16, config: Arc<rustls::ClientConfig>) -> bool {
    tls_connect(port, config)
        .and_then(|mut s| call(&mut s, &[b"PING"]))
        .is_ok_and(|r| r == b"+PONG\r\n")
}

/// The server's files: CA, server certificate, client certificate.
struct Setup {
    dir: PathBuf,
    ca: Ca,
    server: (String, String),
    client: (String, String),
}

fn setup(tag: &str) -> Setup {
    let dir = temp_dir(tag);
    let ca = Ca::new(&dir, "ca");
    let server = ca.sign("server", false);
    let client = ca.sign("client", false);
    Setup {
        dir,
        ca,
        server,
        client,
    }
}

impl Setup {
    /// The server's TLS arguments on a free tls-port (returned).
    fn args(&self, auth: &str) -> (Vec<String>, u16) {
        let tls_port = free_port();
        let args = vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.server.0.clone(),
            "--tls-key-file".into(),
            self.server.1.clone(),
            "--tls-ca-cert-file".into(),
            self.ca.crt(),
            "--tls-auth-clients".into(),
            auth.into(),
        ];
        (args, tls_port)
    }

    fn start(&self, sub: &str, auth: &str, extra: &[&str]) -> (Srv, u16) {
        let (mut args, tls_port) = self.args(auth);
        args.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let d = self.dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        (start_on(&d, &a, &[]), tls_port)
    }
}

fn redis_cli(tls_port: u16, s: &Setup, cert: bool, args: &[&str]) -> (bool, String) {
    let mut c = Command::new("redis-cli");
    c.args([
        "-p",
        &tls_port.to_string(),
        "--tls",
        "--cacert",
        &s.ca.crt(),
    ]);
    if cert {
        c.args(["--cert", &s.client.0, "--key", &s.client.1]);
    }
    let out = c.args(args).stderr(Stdio::piped()).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn client_certificates_by_tls_auth_clients_yes_no_optional() {
    let s = setup("tls-auth");
    let with = client_config(&s.ca.crt(), Some(&s.client));
    let without = client_config(&s.ca.crt(), None);
    for (auth, anonymous_ok) in [("yes", false), ("optional", true), ("no", true)] {
        let (srv, tls_port) = s.start(auth, auth, &[]);
        assert!(
            tls_ping(tls_port, with.clone()),
            "{auth}: with a certificate"
        );
        assert_eq!(
            tls_ping(tls_port, without.clone()),
            anonymous_ok,
            "{auth}: without a certificate"
        );
        // Debian's redis-cli (OpenSSL) the same way.
        let (ok, out) = redis_cli(tls_port, &s, true, &["SET", "k", auth]);
        assert!(ok && out.contains("OK"), "{auth}: {out}");
        let (ok, out) = redis_cli(tls_port, &s, false, &["GET", "k"]);
        if anonymous_ok {
            assert!(ok && out.contains(auth), "{auth}: {out}");
        } else {
            assert!(!out.contains(auth), "{auth}: {out}");
        }
        // The plain port serves beside it.
        assert_eq!(
            Raw::connect(srv.port).call(&["GET", "k"]),
            bulk(auth.as_bytes())
        );
    }
}

#[test]
fn wrong_ca_expired_certificates_plaintext_garbage_and_stalls_are_closed_and_logged() {
    let s = setup("tls-bad");
    let (srv, tls_port) = s.start("srv", "yes", &[]);
    let log = || server_log(&s.dir.join("srv"));
    let other = Ca::new(&s.dir, "other");
    let stranger = other.sign("stranger", false);
    let expired = s.ca.sign("expired", true);
    for (what, cert) in [("wrong CA", &stranger), ("expired", &expired)] {
        let refused = tls_connect(tls_port, client_config(&s.ca.crt(), Some(cert)))
            .and_then(|mut c| call(&mut c, &[b"SET", b"bad", b"1"]));
        assert!(refused.is_err(), "{what}: {refused:?}");
    }
    wait_until(DEADLINE, "two refused handshakes logged", || {
        log().matches("Error accepting a client connection").count() >= 2
    });
    // A plaintext command and random bytes to the TLS port.
    let mut rng = Lcg(7);
    let garbage: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    for bytes in [
        &b"*3\r\n$3\r\nSET\r\n$3\r\nbad\r\n$1\r\n1\r\n"[..],
        &garbage,
    ] {
        let mut raw = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
        raw.set_read_timeout(Some(DEADLINE)).unwrap();
        raw.write_all(bytes).unwrap();
        let mut got = Vec::new();
        // The server answers with at most an alert, then closes.
        let _ = raw.read_to_end(&mut got);
        assert!(!got.starts_with(b"+") && !got.starts_with(b"-"), "{got:?}");
    }
    wait_until(DEADLINE, "plaintext and garbage logged", || {
        log().matches("Error accepting a client connection").count() >= 4
    });
    // A peer that connects and never finishes the handshake is closed.
    let mut stall = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    stall.write_all(&[0x16, 0x03, 0x01]).unwrap();
    stall.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut got = Vec::new();
    let _ = stall.read_to_end(&mut got);
    wait_until(DEADLINE, "the stalled handshake logged", || {
        log().contains("TLS handshake timed out")
    });
    // Nothing ran, and the server serves both ports.
    let mut plain = Raw::connect(srv.port);
    assert_eq!(plain.call(&["EXISTS", "bad"]), b":0\r\n");
    assert!(tls_ping(
        tls_port,
        client_config(&s.ca.crt(), Some(&s.client))
    ));
}

#[test]
fn a_4_mib_value_round_trips_over_tls_with_io_threads_1_and_2() {
    let s = setup("tls-big");
    let cfg = client_config(&s.ca.crt(), Some(&s.client));
    for threads in ["1", "2"] {
        let (_srv, tls_port) = s.start(threads, "yes", &["--io-threads", threads]);
        let mut rng = Lcg(threads.len() as u64 + 11);
        let value: Vec<u8> = (0..4 << 20).map(|_| rng.next() as u8).collect();
        let mut c = tls_connect(tls_port, cfg.clone()).unwrap();
        assert_eq!(call(&mut c, &[b"SET", b"big", &value]).unwrap(), b"+OK\r\n");
        // Several at once: the replies reference the stored value and go out under TLS
        // with the socket full most of the time.
        let mut pipeline = Vec::new();
        for _ in 0..4 {
            pipeline.extend(encode(&[b"GET", b"big"]));
        }
        c.write_all(&pipeline).unwrap();
        let mut buf = Vec::new();
        let mut tmp = vec![0u8; 1 << 16];
        let mut replies = 0;
        while replies < 4 {
            if let Some(n) = reply_len(&buf) {
                let r: Vec<u8> = buf.drain(..n).collect();
                assert!(
                    r == bulk(&value),
                    "threads {threads}: reply {replies} differs"
                );
                replies += 1;
                continue;
            }
            let n = c.read(&mut tmp).unwrap();
            assert!(n > 0, "closed");
            buf.extend_from_slice(&tmp[..n]);
            // A slow reader: the server's socket stays full and its writes resume on
            // writable events, with TLS records left over from earlier writes.
            if replies >= 2 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        assert_eq!(call(&mut c, &[b"STRLEN", b"big"]).unwrap(), b":4194304\r\n");
    }
}

#[test]
fn config_set_tls_cert_file_rotates_without_dropping_connections() {
    let s = setup("tls-rotate");
    let (srv, tls_port) = s.start("srv", "no", &[]);
    let cfg = client_config(&s.ca.crt(), None);
    let mut old = tls_connect(tls_port, cfg.clone()).unwrap();
    assert_eq!(
        old.conn.peer_certificates().unwrap()[0],
        pem_certs(&s.server.0)[0]
    );
    let (crt, key) = s.ca.sign("server2", false);
    let mut plain = Raw::connect(srv.port);
    assert_eq!(
        plain.call(&["CONFIG", "SET", "tls-cert-file", &crt, "tls-key-file", &key]),
        b"+OK\r\n"
    );
    // The open connection goes on; a new one sees the new certificate.
    assert_eq!(call(&mut old, &[b"PING"]).unwrap(), b"+PONG\r\n");
    let new = tls_connect(tls_port, cfg.clone()).unwrap();
    assert_eq!(new.conn.peer_certificates().unwrap()[0], pem_certs(&crt)[0]);
    // A file that cannot be used changes nothing.
    let r = plain.call(&["CONFIG", "SET", "tls-cert-file", "/nonexistent.crt"]);
    assert!(
        r.starts_with(b"-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration"),
        "{}",
        show(&r)
    );
    assert_eq!(
        plain.call(&["CONFIG", "GET", "tls-cert-file"]),
        encode(&[b"tls-cert-file", crt.as_bytes()])
    );
    assert!(tls_ping(tls_port, cfg.clone()));
    // What is not built is refused, not accepted and ignored.
    for (name, value) in [
        ("tls-dh-params-file", "/tmp/dh.pem"),
        ("tls-cluster", "yes"),
        ("tls-key-file-pass", "secret"),
        ("tls-protocols", "TLSv1.1"),
        ("tls-ciphers", "RC4-MD5"),
    ] {
        let r = plain.call(&["CONFIG", "SET", name, value]);
        assert!(
            r.starts_with(b"-ERR CONFIG SET failed"),
            "{name}: {}",
            show(&r)
        );
    }
    // tls-protocols and cipher names rustls has: applied to new connections.
    assert_eq!(
        plain.call(&[
            "CONFIG",
            "SET",
            "tls-protocols",
            "TLSv1.2",
            "tls-ciphers",
            "ECDHE-ECDSA-AES256-GCM-SHA384"
        ]),
        b"+OK\r\n"
    );
    let c = tls_connect(tls_port, cfg.clone()).unwrap();
    assert_eq!(
        c.conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    assert_eq!(
        c.conn.negotiated_cipher_suite().unwrap().suite(),
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    );
    // The TLS port moves at runtime.
    let moved = free_port();
    assert_eq!(
        plain.call(&["CONFIG", "SET", "tls-port", &moved.to_string()]),
        b"+OK\r\n"
    );
    assert!(tls_ping(moved, cfg.clone()));
    assert!(TcpStream::connect(("127.0.0.1", tls_port)).is_err());
    assert_eq!(call(&mut old, &[b"PING"]).unwrap(), b"+PONG\r\n");
}

#[test]
fn unbuilt_tls_options_and_bad_files_stop_startup() {
    let s = setup("tls-startup");
    let (base, _) = s.args("yes");
    for extra in [
        &["--tls-cluster", "yes"][..],
        &["--tls-dh-params-file", "/tmp/dh.pem"],
        &["--tls-key-file-pass", "secret"],
        &["--tls-cert-file", "/nonexistent.crt"],
        &["--tls-protocols", "TLSv1"],
    ] {
        let mut args: Vec<&str> = base.iter().map(|s| s.as_str()).collect();
        args.extend_from_slice(extra);
        let d = s
            .dir
            .join(format!("bad{}", extra[0].len() + extra[1].len()));
        std::fs::create_dir_all(&d).unwrap();
        let (mut cmd, _) = cairn_command(&d, &args, &[]);
        let st = cmd.status().unwrap();
        assert!(!st.success(), "{extra:?} started");
    }
}

#[test]
fn tls_only_with_port_0() {
    let s = setup("tls-only");
    let (args, tls_port) = s.args("no");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn-server"));
    cmd.args(&args)
        .args(["--port", "0", "--dir"])
        .arg(&s.dir)
        .arg("--logfile")
        .arg(s.dir.join(LOG_FILE))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    let _srv = Srv {
        child,
        port: tls_port,
    };
    let cfg = client_config(&s.ca.crt(), None);
    wait_until(DEADLINE, "serving TLS", || tls_ping(tls_port, cfg.clone()));
    assert!(server_log(&s.dir).contains("Ready to accept connections tls"));
    // redis-benchmark over TLS, bounded.
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &tls_port.to_string(),
            "--tls",
            "--cacert",
            &s.ca.crt(),
        ])
        .args(["-t", "set,get", "-n", "2000", "-c", "4", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("SET:") && text.contains("GET:") && text.contains("requests per second"),
        "{text}"
    );
}

#[test]
fn replication_over_tls_to_cairn_and_redis_replicas() {
    let s = setup("tls-repl");
    let (primary, tls_port) = s.start("primary", "yes", &[]);
    let mut p = Raw::connect(primary.port);
    for i in 0..100 {
        p.call(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    // A cairn replica with tls-replication: its client certificate is tls-client-cert-file.
    let rdir = s.dir.join("replica");
    std::fs::create_dir_all(&rdir).unwrap();
    let tls_port_s = tls_port.to_string();
    let replica = start_on(
        &rdir,
        &[
            "--replicaof",
            "127.0.0.1",
            &tls_port_s,
            "--tls-replication",
            "yes",
            "--tls-ca-cert-file",
            &s.ca.crt(),
            "--tls-client-cert-file",
            &s.client.0,
            "--tls-client-key-file",
            &s.client.1,
        ],
        &[],
    );
    let mut r = Raw::connect(replica.port);
    wait_until(DEADLINE, "the full sync over TLS", || {
        r.call(&["DBSIZE"]) == b":100\r\n"
    });
    p.call(&["SET", "after", "streamed"]);
    wait_until(DEADLINE, "the stream over TLS", || {
        r.call(&["GET", "after"]) == bulk(b"streamed")
    });
    // Redis 7 as a replica of cairn over TLS (Debian's is built with TLS).
    let redis_dir = s.dir.join("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let redis_port = free_port();
    let child = Command::new(redis_server_path())
        .args([
            "--port",
            &redis_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--dir", redis_dir.to_str().unwrap()])
        .args([
            "--replicaof",
            "127.0.0.1",
            &tls_port_s,
            "--tls-replication",
            "yes",
        ])
        .args(["--tls-ca-cert-file", &s.ca.crt()])
        .args([
            "--tls-cert-file",
            &s.client.0,
            "--tls-key-file",
            &s.client.1,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _redis = Srv {
        child,
        port: redis_port,
    };
    wait_until(DEADLINE, "redis-server up", || {
        TcpStream::connect(("127.0.0.1", redis_port)).is_ok()
    });
    let mut rr = Raw::connect(redis_port);
    wait_until(DEADLINE, "Redis 7 synced over TLS", || {
        rr.call(&["GET", "after"]) == bulk(b"streamed")
    });
    p.call(&["SET", "last", "x"]);
    wait_until(DEADLINE, "Redis 7 streamed over TLS", || {
        rr.call(&["DBSIZE"]) == b":102\r\n"
    });
}

#[test]
fn ca_cert_dir_and_session_caching() {
    let s = setup("tls-cadir");
    // The CA from a directory (no tls-ca-cert-file): client certificates are checked.
    let cadir = s.dir.join("cas");
    std::fs::create_dir_all(&cadir).unwrap();
    std::fs::copy(s.ca.crt(), cadir.join("ca.pem")).unwrap();
    std::fs::write(cadir.join("README"), "not a certificate").unwrap();
    let tls_port = free_port();
    let port_s = tls_port.to_string();
    let d = s.dir.join("srv");
    std::fs::create_dir_all(&d).unwrap();
    let srv = start_on(
        &d,
        &[
            "--tls-port",
            &port_s,
            "--tls-cert-file",
            &s.server.0,
            "--tls-key-file",
            &s.server.1,
            "--tls-ca-cert-dir",
            cadir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(tls_ping(
        tls_port,
        client_config(&s.ca.crt(), Some(&s.client))
    ));
    assert!(!tls_ping(tls_port, client_config(&s.ca.crt(), None)));
    // A client that keeps its session resumes it; with caching off it cannot.
    let kind = |cfg: &Arc<rustls::ClientConfig>| {
        let mut c = tls_connect(tls_port, cfg.clone()).unwrap();
        // TLS 1.3 tickets arrive after the handshake: a reply brings them in.
        assert_eq!(call(&mut c, &[b"PING"]).unwrap(), b"+PONG\r\n");
        c.conn.handshake_kind()
    };
    let cfg = client_config(&s.ca.crt(), Some(&s.client));
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Full));
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Resumed));
    let mut plain = Raw::connect(srv.port);
    assert_eq!(
        plain.call(&["CONFIG", "SET", "tls-session-caching", "no"]),
        b"+OK\r\n"
    );
    let cfg = client_config(&s.ca.crt(), Some(&s.client));
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Full));
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Full));
}

/// Reads what a refused TLS connection sends until the server closes it.
fn read_until_closed(mut s: Tls) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // Closed without close_notify: what came before it is the answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return got,
            Err(e) => panic!("reading the refusal: {e} (after {})", show(&got)),
        }
    }
}

/// Past `maxclients` a TLS client reads Redis's error through the session, then the
/// connection closes, with either socket loop; once a slot frees it is served.
#[test]
fn maxclients_error_reaches_a_tls_client() {
    let s = setup("tls-maxclients");
    for io_threads in ["1", "2"] {
        let (srv, tls_port) = s.start(
            &format!("io{io_threads}"),
            "no",
            &["--io-threads", io_threads],
        );
        let cfg = client_config(&s.ca.crt(), None);
        let mut admin = Raw::connect(srv.port);
        assert_eq!(
            admin.call(&["CONFIG", "SET", "maxclients", "1"]),
            b"+OK\r\n"
        );
        let refused = tls_connect(tls_port, cfg.clone()).expect("the handshake completes");
        assert_eq!(
            read_until_closed(refused),
            b"-ERR max number of clients reached\r\n",
            "io-threads {io_threads}"
        );
        wait_until(DEADLINE, "the refusal is counted", || {
            admin.info("stats", "rejected_connections").as_deref() == Some("1")
        });
        assert_eq!(
            admin.call(&["CONFIG", "SET", "maxclients", "10"]),
            b"+OK\r\n"
        );
        drop(admin);
        assert!(tls_ping(tls_port, cfg));
    }
}

/// The protected-mode text reaches a TLS client the same way: the socket loops hand any
/// refusal line to `TlsRefusals`, driven here as the loops drive it (tests have only
/// loopback peers, which protected mode serves, so the text is handed over directly).
#[test]
fn protected_mode_text_reaches_a_tls_client_after_the_handshake() {
    use cairn::server::listeners::PROTECTED_MODE_DENIED;
    use cairn::server::stream::Stream;
    use cairn::server::tls_refusal::TlsRefusals;
    use cairn::server::tls_stream::TlsStream;
    let s = setup("tls-protected");
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(pem_certs(&s.server.0), {
        use rustls::pki_types::pem::PemObject;
        PrivateKeyDer::from_pem_file(&s.server.1).unwrap()
    })
    .unwrap();
    let server = Arc::new(server);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cfg = client_config(&s.ca.crt(), None);
    let client = std::thread::spawn(move || {
        let c = tls_connect(port, cfg).expect("the handshake completes");
        read_until_closed(c)
    });
    let (tcp, _) = listener.accept().unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp = mio::net::TcpStream::from_std(tcp);
    let stream = Stream::Tls(Box::new(TlsStream::accept(tcp, server).unwrap()));
    let mut poll = mio::Poll::new().unwrap();
    let mut events = mio::Events::with_capacity(16);
    let mut refusals = TlsRefusals::new(1000);
    refusals.refuse(poll.registry(), stream, PROTECTED_MODE_DENIED);
    let deadline = std::time::Instant::now() + DEADLINE;
    while refusals.pending() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the handshake stalled"
        );
        poll.poll(&mut events, Some(std::time::Duration::from_millis(100)))
            .unwrap();
        for ev in events.iter() {
            assert!(refusals.owns(ev.token().0));
            refusals.on_event(poll.registry(), ev.token().0);
        }
    }
    assert_eq!(client.join().unwrap(), PROTECTED_MODE_DENIED.as_bytes());
}

/// `tls-session-cache-size 0` is OpenSSL's "no limit" (what Redis passes it): sessions
/// are cached and resumed.
#[test]
fn tls_session_cache_size_0_caches_sessions() {
    let s = setup("tls-cache0");
    let (srv, tls_port) = s.start("srv", "no", &["--tls-session-cache-size", "0"]);
    let mut plain = Raw::connect(srv.port);
    assert_eq!(
        plain.call(&["CONFIG", "GET", "tls-session-cache-size"]),
        encode(&[b"tls-session-cache-size", b"0"])
    );
    let kind = |cfg: &Arc<rustls::ClientConfig>| {
        let mut c = tls_connect(tls_port, cfg.clone()).unwrap();
        assert_eq!(call(&mut c, &[b"PING"]).unwrap(), b"+PONG\r\n");
        c.conn.handshake_kind()
    };
    // Many clients, each resuming its own session afterwards.
    let clients: Vec<_> = (0..20).map(|_| client_config(&s.ca.crt(), None)).collect();
    for c in &clients {
        assert_eq!(kind(c), Some(rustls::HandshakeKind::Full));
    }
    for c in &clients {
        assert_eq!(kind(c), Some(rustls::HandshakeKind::Resumed));
    }
}

/// A CONFIG SET of the replica's `tls-*` options reaches its link to the primary at the
/// next connection attempt, without a new REPLICAOF: a client certificate the primary
/// requires, and `tls-replication` itself.
#[test]
fn config_set_tls_options_reach_the_replica_link() {
    let s = setup("tls-repl-config");
    let (primary, tls_port) = s.start("primary", "yes", &[]);
    let mut p = Raw::connect(primary.port);
    for i in 0..10 {
        p.call(&["SET", &format!("k{i}"), "v"]);
    }
    let tls_port_s = tls_port.to_string();
    // No client certificate: the primary refuses every attempt until one is set.
    let d1 = s.dir.join("no-cert");
    std::fs::create_dir_all(&d1).unwrap();
    let r1 = start_on(
        &d1,
        &[
            "--replicaof",
            "127.0.0.1",
            &tls_port_s,
            "--tls-replication",
            "yes",
            "--tls-ca-cert-file",
            &s.ca.crt(),
        ],
        &[],
    );
    let mut r1c = Raw::connect(r1.port);
    wait_until(DEADLINE, "a refused attempt", || {
        server_log(&primary_dir(&s)).contains("Error accepting a client connection")
    });
    assert_eq!(r1c.call(&["DBSIZE"]), b":0\r\n");
    assert_eq!(
        r1c.call(&[
            "CONFIG",
            "SET",
            "tls-client-cert-file",
            &s.client.0,
            "tls-client-key-file",
            &s.client.1
        ]),
        b"+OK\r\n"
    );
    wait_until(DEADLINE, "synced with the new certificate", || {
        r1c.call(&["DBSIZE"]) == b":10\r\n"
    });
    // tls-replication off: plaintext to a TLS port fails until it is turned on.
    let d2 = s.dir.join("plain-first");
    std::fs::create_dir_all(&d2).unwrap();
    let r2 = start_on(
        &d2,
        &[
            "--replicaof",
            "127.0.0.1",
            &tls_port_s,
            "--tls-ca-cert-file",
            &s.ca.crt(),
            "--tls-client-cert-file",
            &s.client.0,
            "--tls-client-key-file",
            &s.client.1,
        ],
        &[],
    );
    let mut r2c = Raw::connect(r2.port);
    wait_until(DEADLINE, "a failed plaintext attempt", || {
        server_log(&d2).contains("Connection with master lost")
    });
    assert_eq!(
        r2c.info("replication", "master_link_status").as_deref(),
        Some("down")
    );
    assert_eq!(
        r2c.call(&["CONFIG", "SET", "tls-replication", "yes"]),
        b"+OK\r\n"
    );
    wait_until(DEADLINE, "synced over TLS", || {
        r2c.call(&["DBSIZE"]) == b":10\r\n"
    });
}

fn primary_dir(s: &Setup) -> PathBuf {
    s.dir.join("primary")
}
