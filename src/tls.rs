//! TLS settings turned into rustls configurations (ring backend, no OpenSSL): the server
//! side for `tls-port` and the client side for the replica link (`tls-replication`).
//!
//! Built from the `tls-*` options as Redis 7 reads them. What rustls cannot do is refused
//! with an error naming the option, never ignored: TLS 1.0/1.1, OpenSSL cipher names
//! rustls has no suite for, encrypted private keys (`tls-key-file-pass`; no well-kept
//! crate decrypts PEM keys without OpenSSL), DH parameter files and TLS for the cluster
//! bus (both refused by the option table, `F_UNBUILT`).
//!
//! Must not touch: sockets (the server layer owns connections; this only builds configs).

use crate::config::Config;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, StoresServerSessions};
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion,
};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// How long a TLS handshake may take before the connection is closed (a peer that
/// connects and stalls must not hold a connection slot forever).
pub const HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// Plaintext bytes rustls may hold encrypted and not yet written per connection: bounds
/// what one write encrypts ahead of the socket.
pub const SEND_BUFFER_BYTES: usize = 256 * 1024;

/// An unbounded session cache (`tls-session-cache-size 0`) drops its expired entries
/// once per this many new sessions, as OpenSSL's automatic flush does.
const SESSION_SWEEP_EVERY_PUTS: usize = 255;

/// Whether `name` is one of the options this module reads (CONFIG SET of any of them
/// rebuilds the configurations).
pub fn is_tls_option(name: &str) -> bool {
    name.len() > 4 && name[..4].eq_ignore_ascii_case("tls-")
}

fn opt<'a>(cfg: &'a Config, name: &str) -> &'a str {
    cfg.get_value(name).unwrap_or("")
}

/// Whether anything TLS is in use: a TLS listener, or the replica link over TLS.
pub fn enabled(cfg: &Config) -> bool {
    let s = cfg.settings();
    s.tls_port != 0 || s.tls_replication
}

fn load_certs(path: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("Failed to load {what} '{path}': {e}"))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("Failed to load {what} '{path}': {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load {what} '{path}': no PEM certificate in it"
        ));
    }
    Ok(certs)
}

fn load_key(path: &str, option: &str) -> Result<PrivateKeyDer<'static>, String> {
    let data =
        std::fs::read(path).map_err(|e| format!("Failed to load private key '{path}': {e}"))?;
    if data
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
        || data
            .windows(b"Proc-Type: 4,ENCRYPTED".len())
            .any(|w| w == b"Proc-Type: 4,ENCRYPTED")
    {
        return Err(format!(
            "Failed to load private key '{path}' ({option}): encrypted keys are not supported by cairn; decrypt it first"
        ));
    }
    PrivateKeyDer::from_pem_slice(&data)
        .map_err(|e| format!("Failed to load private key '{path}' ({option}): {e}"))
}

/// The CA certificates of `tls-ca-cert-file` and every file of `tls-ca-cert-dir` that
/// holds PEM certificates.
fn load_roots(cfg: &Config) -> Result<Arc<RootCertStore>, String> {
    let file = opt(cfg, "tls-ca-cert-file");
    let dir = opt(cfg, "tls-ca-cert-dir");
    if file.is_empty() && dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified".into());
    }
    let mut roots = RootCertStore::empty();
    let mut add = |certs: Vec<CertificateDer<'static>>, path: &str| -> Result<(), String> {
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("Failed to use CA certificate in '{path}': {e}"))?;
        }
        Ok(())
    };
    if !file.is_empty() {
        add(load_certs(file, "CA certificate file")?, file)?;
    }
    if !dir.is_empty() {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("Failed to read tls-ca-cert-dir '{dir}': {e}"))?;
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            let Ok(data) = std::fs::read(&p) else {
                continue;
            };
            // Not every file of a CA directory is a certificate (OpenSSL's hash links
            // are, other files may not be): those with none are passed over.
            let certs: Vec<_> = CertificateDer::pem_slice_iter(&data)
                .filter_map(|c| c.ok())
                .collect();
            add(certs, &p.to_string_lossy())?;
        }
    }
    if roots.is_empty() {
        return Err("No CA certificate found in tls-ca-cert-file / tls-ca-cert-dir".into());
    }
    Ok(Arc::new(roots))
}

/// `tls-protocols`: "TLSv1.2 TLSv1.3" (empty: both).
fn protocols(cfg: &Config) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let text = opt(cfg, "tls-protocols");
    if text.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut out: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for w in text.split_whitespace() {
        let v = match w.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "tls-protocols: {w} is not supported (rustls implements TLSv1.2 and TLSv1.3)"
                ))
            }
            _ => return Err(format!("Invalid tls-protocols specified: {w}")),
        };
        if !out.iter().any(|o| o.version == v.version) {
            out.push(v);
        }
    }
    Ok(out)
}

/// The TLS 1.2 suites by their OpenSSL names (`tls-ciphers`) and IANA names.
fn tls12_suite(name: &str) -> Option<SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as cs;
    Some(match name {
        "ECDHE-ECDSA-AES128-GCM-SHA256" | "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => {
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        }
        "ECDHE-ECDSA-AES256-GCM-SHA384" | "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => {
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        }
        "ECDHE-ECDSA-CHACHA20-POLY1305" | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => {
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "ECDHE-RSA-AES128-GCM-SHA256" | "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => {
            cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        }
        "ECDHE-RSA-AES256-GCM-SHA384" | "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => {
            cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
        }
        "ECDHE-RSA-CHACHA20-POLY1305" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => {
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
        _ => return None,
    })
}

/// The TLS 1.3 suites by the names `tls-ciphersuites` takes.
fn tls13_suite(name: &str) -> Option<SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as cs;
    Some(match name {
        "TLS_AES_128_GCM_SHA256" => cs::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_256_GCM_SHA384" => cs::TLS13_AES_256_GCM_SHA384,
        "TLS_CHACHA20_POLY1305_SHA256" => cs::TLS13_CHACHA20_POLY1305_SHA256,
        _ => return None,
    })
}

/// ring's provider with the suites `tls-ciphers` (1.2) and `tls-ciphersuites` (1.3)
/// allow, in the order given (an empty option keeps ring's defaults for its version).
fn provider(cfg: &Config) -> Result<Arc<CryptoProvider>, String> {
    let base = rustls::crypto::ring::default_provider();
    let pick = |option: &str,
                lookup: fn(&str) -> Option<SupportedCipherSuite>,
                tls13: bool|
     -> Result<Vec<SupportedCipherSuite>, String> {
        let text = opt(cfg, option);
        if text.trim().is_empty() {
            return Ok(base
                .cipher_suites
                .iter()
                .copied()
                .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)) == tls13)
                .collect());
        }
        let mut out = Vec::new();
        for name in text.split([':', ' ', ',']).filter(|n| !n.is_empty()) {
            match lookup(name) {
                Some(s) => out.push(s),
                None => {
                    return Err(format!(
                        "{option}: '{name}' is not a cipher suite cairn supports"
                    ))
                }
            }
        }
        Ok(out)
    };
    let mut suites = pick("tls-ciphersuites", tls13_suite, true)?;
    suites.extend(pick("tls-ciphers", tls12_suite, false)?);
    Ok(Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..base
    }))
}

/// A session cache whose entries expire after `tls-session-cache-timeout` seconds:
/// rustls's memory cache bounds the count only, so each value carries its birth time.
#[derive(Debug)]
struct ExpiringSessions {
    inner: Arc<dyn StoresServerSessions>,
    timeout_s: u64,
}

/// The birth time an [`ExpiringSessions`] value starts with.
fn born_s(v: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(v.get(..8)?.try_into().ok()?))
}

/// `tls-session-cache-size 0`: as OpenSSL's cache size 0 (what Redis passes it), no
/// limit on the count; entries leave when taken or, swept every
/// [`SESSION_SWEEP_EVERY_PUTS`] new sessions, once expired. What it holds is bounded by
/// the handshake rate over `tls-session-cache-timeout`.
#[derive(Debug)]
struct UnboundedSessions {
    map: std::sync::Mutex<std::collections::HashMap<Vec<u8>, Vec<u8>>>,
    puts: std::sync::atomic::AtomicUsize,
    timeout_s: u64,
}

impl UnboundedSessions {
    fn new(timeout_s: u64) -> UnboundedSessions {
        UnboundedSessions {
            map: Default::default(),
            puts: Default::default(),
            timeout_s,
        }
    }
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Vec<u8>, Vec<u8>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StoresServerSessions for UnboundedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let n = self.puts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut map = self.map();
        if n % SESSION_SWEEP_EVERY_PUTS == SESSION_SWEEP_EVERY_PUTS - 1 {
            let now = now_s();
            map.retain(|_, v| born_s(v).is_some_and(|b| now.saturating_sub(b) < self.timeout_s));
        }
        map.insert(key, value);
        true
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.map().get(key).cloned()
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.map().remove(key)
    }
    fn can_cache(&self) -> bool {
        true
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl ExpiringSessions {
    fn fresh(&self, v: Vec<u8>) -> Option<Vec<u8>> {
        let born = born_s(&v)?;
        (now_s().saturating_sub(born) < self.timeout_s).then(|| v[8..].to_vec())
    }
}

impl StoresServerSessions for ExpiringSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut v = Vec::with_capacity(8 + value.len());
        v.extend_from_slice(&now_s().to_le_bytes());
        v.extend_from_slice(&value);
        self.inner.put(key, v)
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key).and_then(|v| self.fresh(v))
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.take(key).and_then(|v| self.fresh(v))
    }
    fn can_cache(&self) -> bool {
        true
    }
}

/// The rejected values that no configuration is built for (kept out of the builders so
/// startup and CONFIG SET say the same).
fn check_refused(cfg: &Config) -> Result<(), String> {
    for name in ["tls-key-file-pass", "tls-client-key-file-pass"] {
        if !opt(cfg, name).is_empty() {
            return Err(format!(
                "{name}: encrypted private keys are not supported by cairn; decrypt the key file"
            ));
        }
    }
    Ok(())
}

/// The server side (`tls-port` connections), as the options say now.
pub fn server_config(cfg: &Config) -> Result<Arc<ServerConfig>, String> {
    check_refused(cfg)?;
    let cert_file = opt(cfg, "tls-cert-file");
    let key_file = opt(cfg, "tls-key-file");
    if cert_file.is_empty() || key_file.is_empty() {
        return Err("tls-cert-file and tls-key-file must be specified".into());
    }
    let certs = load_certs(cert_file, "certificate")?;
    let key = load_key(key_file, "tls-key-file")?;
    let roots = load_roots(cfg)?;
    let builder = ServerConfig::builder_with_provider(provider(cfg)?)
        .with_protocol_versions(&protocols(cfg)?)
        .map_err(|e| format!("Invalid TLS protocols or ciphers: {e}"))?;
    let builder = match opt(cfg, "tls-auth-clients") {
        "no" => builder.with_no_client_auth(),
        mode => {
            let mut v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots,
                Arc::new(rustls::crypto::ring::default_provider()),
            );
            if mode == "optional" {
                v = v.allow_unauthenticated();
            }
            let v = v
                .build()
                .map_err(|e| format!("Invalid CA certificates: {e}"))?;
            builder.with_client_cert_verifier(v)
        }
    };
    let mut sc = builder.with_single_cert(certs, key).map_err(|e| {
        format!("Failed to use certificate '{cert_file}' with key '{key_file}': {e}")
    })?;
    sc.ignore_client_order = cfg.get_value("tls-prefer-server-ciphers") == Some("yes");
    if cfg.get_value("tls-session-caching") == Some("yes") {
        let size = cfg
            .get_value("tls-session-cache-size")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        let timeout_s = cfg
            .get_value("tls-session-cache-timeout")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(300);
        let inner: Arc<dyn StoresServerSessions> = if size == 0 {
            Arc::new(UnboundedSessions::new(timeout_s))
        } else {
            ServerSessionMemoryCache::new(size)
        };
        sc.session_storage = Arc::new(ExpiringSessions { inner, timeout_s });
    } else {
        sc.session_storage = Arc::new(NoServerSessionStorage {});
        sc.send_tls13_tickets = 0;
    }
    Ok(Arc::new(sc))
}

/// Checks the chain against the CA, not the name: Redis's replica link verifies the
/// primary's certificate the same way (a primary is often reached by IP or an internal
/// name its certificate does not carry).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError as C, Error as E};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(E::InvalidCertificate(C::NotValidForName))
            | Err(E::InvalidCertificate(C::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            r => r,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The client side (the replica link to a primary's TLS port): the primary's chain is
/// checked against the CA; the certificate shown is `tls-client-cert-file` /
/// `tls-client-key-file`, else `tls-cert-file` / `tls-key-file` (as Redis), else none.
pub fn client_config(cfg: &Config) -> Result<Arc<ClientConfig>, String> {
    check_refused(cfg)?;
    let roots = load_roots(cfg)?;
    let ring = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, ring.clone())
        .build()
        .map_err(|e| format!("Invalid CA certificates: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider(cfg)?)
        .with_protocol_versions(&protocols(cfg)?)
        .map_err(|e| format!("Invalid TLS protocols or ciphers: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)));
    let (cert, key, key_option) = match opt(cfg, "tls-client-cert-file") {
        "" => (
            opt(cfg, "tls-cert-file"),
            opt(cfg, "tls-key-file"),
            "tls-key-file",
        ),
        c => (c, opt(cfg, "tls-client-key-file"), "tls-client-key-file"),
    };
    let cc = if cert.is_empty() || key.is_empty() {
        builder.with_no_client_auth()
    } else {
        builder
            .with_client_auth_cert(load_certs(cert, "certificate")?, load_key(key, key_option)?)
            .map_err(|e| format!("Failed to use client certificate '{cert}': {e}"))?
    };
    Ok(Arc::new(cc))
}

/// The name the replica link presents to the primary (SNI; an IP when `host` is one).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("invalid TLS name '{host}': {e}"))
}

/// A blocking client TLS stream over a socket with a read timeout (the replica link):
/// reads hand back what records decrypt to (a timeout comes back as the socket's
/// WouldBlock/TimedOut, rustls's state kept); writes encrypt and send all. The handshake
/// runs inside the first reads and writes.
pub struct ClientStream<S: std::io::Read + std::io::Write> {
    sock: S,
    conn: rustls::ClientConnection,
}

impl<S: std::io::Read + std::io::Write> ClientStream<S> {
    pub fn new(sock: S, config: Arc<ClientConfig>, host: &str) -> Result<Self, String> {
        let conn = rustls::ClientConnection::new(config, server_name(host)?)
            .map_err(|e| format!("TLS: {e}"))?;
        Ok(ClientStream { sock, conn })
    }

    fn send_records(&mut self) -> std::io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl<S: std::io::Read + std::io::Write> std::io::Read for ClientStream<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::ErrorKind;
        self.send_records()?;
        loop {
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // Data, the peer's close_notify (0), or an unclean end.
                r => return r,
            }
            if self.conn.read_tls(&mut self.sock)? == 0 {
                return match self.conn.reader().read(buf) {
                    Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(0),
                    r => r,
                };
            }
            self.conn
                .process_new_packets()
                .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))?;
            // Handshake messages and anything written while it ran.
            self.send_records()?;
        }
    }
}

impl<S: std::io::Read + std::io::Write> std::io::Write for ClientStream<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.send_records()?;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send_records()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_and_suites_are_mapped_or_refused() {
        let mut c = Config::default();
        c.set_many(&[("tls-protocols", "TLSv1.2")], true).unwrap();
        assert_eq!(protocols(&c).unwrap().len(), 1);
        c.set_many(&[("tls-protocols", "TLSv1.1 TLSv1.2")], true)
            .unwrap();
        assert!(protocols(&c).unwrap_err().contains("TLSv1.1"));
        c.set_many(&[("tls-protocols", "SSLv3")], true).unwrap();
        assert!(protocols(&c).is_err());
        c.set_many(
            &[
                ("tls-protocols", ""),
                ("tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256"),
            ],
            true,
        )
        .unwrap();
        let p = provider(&c).unwrap();
        assert_eq!(p.cipher_suites.len(), 4, "three 1.3 defaults + one 1.2");
        c.set_many(&[("tls-ciphers", "RC4-MD5")], true).unwrap();
        assert!(provider(&c).unwrap_err().contains("RC4-MD5"));
        c.set_many(
            &[
                ("tls-ciphers", ""),
                ("tls-ciphersuites", "TLS_AES_256_GCM_SHA384"),
            ],
            true,
        )
        .unwrap();
        assert_eq!(provider(&c).unwrap().cipher_suites.len(), 7);
    }

    #[test]
    fn encrypted_keys_are_refused_not_ignored() {
        let mut c = Config::default();
        c.set_many(&[("tls-client-cert-file", "")], true).unwrap();
        assert!(check_refused(&c).is_ok());
        // The option table refuses a non-empty pass outright.
        assert!(c
            .set_many(&[("tls-key-file-pass", "secret")], true)
            .is_err());
        let dir = std::env::temp_dir().join(format!("cairn-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("enc.key");
        std::fs::write(
            &key,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = load_key(key.to_str().unwrap(), "tls-key-file").unwrap_err();
        assert!(e.contains("encrypted"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn expired_sessions_are_not_resumed() {
        let s = ExpiringSessions {
            inner: ServerSessionMemoryCache::new(4),
            timeout_s: 300,
        };
        assert!(s.put(b"k".to_vec(), b"v".to_vec()));
        assert_eq!(s.get(b"k"), Some(b"v".to_vec()));
        let mut old = (now_s() - 301).to_le_bytes().to_vec();
        old.extend_from_slice(b"w");
        s.inner.put(b"o".to_vec(), old);
        assert_eq!(s.get(b"o"), None);
        assert_eq!(s.take(b"k"), Some(b"v".to_vec()));
        assert_eq!(s.get(b"k"), None);
    }

    #[test]
    fn cache_size_zero_is_unbounded_and_sweeps_expired_entries() {
        let s = ExpiringSessions {
            inner: Arc::new(UnboundedSessions::new(300)),
            timeout_s: 300,
        };
        // Far past Redis's default 20480 and any small bound: every session stays.
        for i in 0..30_000u32 {
            assert!(s.put(i.to_le_bytes().to_vec(), b"v".to_vec()));
        }
        assert_eq!(s.get(&0u32.to_le_bytes()), Some(b"v".to_vec()));
        assert_eq!(s.get(&29_999u32.to_le_bytes()), Some(b"v".to_vec()));
        let mut old = (now_s() - 301).to_le_bytes().to_vec();
        old.extend_from_slice(b"w");
        s.inner.put(b"old".to_vec(), old);
        assert_eq!(s.get(b"old"), None);
        // The next sweep drops it from memory.
        for i in 0..SESSION_SWEEP_EVERY_PUTS as u32 {
            s.put((100_000 + i).to_le_bytes().to_vec(), b"v".to_vec());
        }
        assert_eq!(s.inner.get(b"old"), None);
        assert_eq!(s.inner.get(&0u32.to_le_bytes()).map(|v| v.len()), Some(9));
    }
}
