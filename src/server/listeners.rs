//! Listening sockets and who may connect through them.
//!
//! Both socket loops (the single-threaded [`super::event_loop`] and the I/O threads of
//! [`super::io_threads`]) decide on a new connection with [`admission_refusal`], and both
//! accept through a [`Listeners`] set that the executor replaces when `CONFIG SET bind` or
//! `CONFIG SET port` changes the addresses (as Redis 7 rebinds at runtime).

use super::stream::{Peer, Stream};
use super::tls_stream::TlsStream;
use crate::{notice, verbose, warning};
use mio::net::{TcpListener, UnixListener};
use mio::{Interest, Registry, Token};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most TCP listening sockets (Redis's CONFIG_BINDADDR_MAX).
pub const MAX_LISTENERS: usize = 16;
/// Poll tokens each loop reserves for listening sockets: the TCP ones (`port`), the TLS
/// ones (`tls-port`) from index `MAX_LISTENERS`, then the Unix socket's (`unixsocket`) at
/// index `2 * MAX_LISTENERS`.
pub const LISTENER_SLOTS: usize = 2 * MAX_LISTENERS + 1;
/// The accept index of the first TLS socket.
pub const TLS_LISTENERS: usize = MAX_LISTENERS;
/// The accept index of the Unix socket.
pub const UNIX_LISTENER: usize = 2 * MAX_LISTENERS;

pub const MAX_CLIENTS_REACHED: &str = "-ERR max number of clients reached\r\n";

pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// The settings that decide whether a new connection is served.
#[derive(Clone, Copy, Debug)]
pub struct AdmissionRules {
    pub protected_mode: bool,
    /// The default user has no `nopass` (`requirepass` or ACL rules gave it passwords).
    pub password_set: bool,
    pub maxclients: usize,
}

impl AdmissionRules {
    pub fn from_settings(s: &crate::config::Settings, default_nopass: bool) -> AdmissionRules {
        AdmissionRules {
            protected_mode: s.protected_mode,
            password_set: !default_nopass,
            maxclients: s.maxclients,
        }
    }
}

/// Why a new connection from `peer` is refused, as the error line to write before closing
/// it; None when it is served. `connected` counts the clients already served.
///
/// Redis 7's rules, in its order: past `maxclients` nobody is served; then, in protected
/// mode while the default user has no password, only loopback peers are. `bind` plays no
/// part: Redis 7 dropped the "no bind address given" condition of earlier versions (its
/// default `bind` is explicit), and so does this.
pub fn admission_refusal(
    rules: &AdmissionRules,
    connected: usize,
    peer: Option<IpAddr>,
) -> Option<&'static str> {
    if connected >= rules.maxclients {
        return Some(MAX_CLIENTS_REACHED);
    }
    // A Unix socket peer (no IP) is local: protected mode lets it in, as Redis.
    if rules.protected_mode
        && !rules.password_set
        && peer.is_some_and(|ip| !crate::util::is_loopback(ip))
    {
        return Some(PROTECTED_MODE_DENIED);
    }
    None
}

/// At shutdown: the Unix socket file goes with the server, as Redis.
pub fn remove_unix_socket(path: &str) {
    if !path.is_empty() {
        notice!("Removing the unix socket file.");
        let _ = std::fs::remove_file(path);
    }
}

/// Listens on the Unix socket `path` (`unixsocket`) with permissions `perm`
/// (`unixsocketperm`, 0: the umask's), replacing a stale socket file as Redis does.
pub fn bind_unix(path: &str, perm: u32) -> io::Result<Option<UnixListener>> {
    if path.is_empty() {
        return Ok(None);
    }
    // A socket file left by an earlier run would make bind fail; anything else at the
    // path is not ours to remove.
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if m.file_type().is_socket() {
            let _ = std::fs::remove_file(path);
        }
    }
    let l = UnixListener::bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("Failed opening Unix socket: {e}")))?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(Some(l))
}

fn resolve_bind(addr: &str, port: u16) -> Option<SocketAddr> {
    let host = addr.trim_start_matches('-');
    let ip = match host {
        "*" => "0.0.0.0",
        "::*" => "::",
        h => h,
    };
    let s = if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    };
    s.parse().ok()
}

/// Binds every `bind` address (a leading `-` marks one whose failure is ignored). Port 0
/// listens nowhere, as in Redis.
pub fn bind_listeners(binds: &[String], port: u16) -> io::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    if port == 0 {
        return Ok(out);
    }
    for b in binds {
        let optional = b.starts_with('-');
        let Some(addr) = resolve_bind(b, port) else {
            if optional {
                continue;
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Invalid bind address '{b}'"),
            ));
        };
        match TcpListener::bind(addr) {
            Ok(l) => out.push(l),
            Err(e) if optional => {
                verbose!("Skipping optional bind address {b}: {e}");
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("Could not create server TCP listening socket {addr}: {e}"),
                ));
            }
        }
    }
    if out.len() > MAX_LISTENERS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "Too many bind addresses specified.",
        ));
    }
    Ok(out)
}

/// The TLS listening sockets a loop starts with.
pub struct TlsListen {
    pub sockets: Vec<TcpListener>,
    pub binds: Vec<String>,
    pub port: u16,
    pub config: Arc<rustls::ServerConfig>,
}

/// Binds `tls-port` on the `bind` addresses with the configuration the options give;
/// None when `tls-port` is 0.
pub fn bind_tls(config: &crate::config::Config) -> io::Result<Option<TlsListen>> {
    let s = config.settings();
    // The replica link builds its own when it connects; a bad setting stops startup here.
    if s.tls_replication {
        crate::tls::client_config(config).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Failed to configure TLS: {e}"),
            )
        })?;
    }
    if s.tls_port == 0 {
        return Ok(None);
    }
    let tls = crate::tls::server_config(config).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("Failed to configure TLS: {e}"),
        )
    })?;
    Ok(Some(TlsListen {
        sockets: bind_listeners(&s.bind, s.tls_port)?,
        binds: s.bind.clone(),
        port: s.tls_port,
        config: tls,
    }))
}

/// The listening sockets of one poll: socket `i` is registered with token
/// `first_token + i`.
pub struct Listeners {
    registry: Registry,
    first_token: usize,
    sockets: Vec<TcpListener>,
    /// `tls-port` sockets, registered from token `first_token + TLS_LISTENERS`.
    tls_sockets: Vec<TcpListener>,
    /// What TLS connections accepted now are made with (replaced by CONFIG SET of a
    /// `tls-*` option; connections already open keep the one they started with).
    tls: Option<Arc<rustls::ServerConfig>>,
    /// The `bind` list and `tls-port` the TLS sockets listen on (None: none).
    tls_at: Option<(Vec<String>, u16)>,
    /// The Unix socket and its path (it stays when CONFIG SET rebinds the TCP ones).
    unix: Option<(UnixListener, String)>,
}

/// Shared by the loop that accepts on the sockets and the executor, which replaces them.
#[derive(Clone)]
pub struct SharedListeners(Arc<Mutex<Listeners>>);

impl SharedListeners {
    /// Registers `sockets` with the poll `registry` belongs to.
    pub fn new(
        registry: &Registry,
        first_token: usize,
        sockets: Vec<TcpListener>,
        tls: Option<TlsListen>,
        unix: Option<(UnixListener, String)>,
    ) -> io::Result<SharedListeners> {
        let mut set = Listeners {
            registry: registry.try_clone()?,
            first_token,
            sockets: Vec::new(),
            tls_sockets: Vec::new(),
            tls: None,
            tls_at: None,
            unix: None,
        };
        set.adopt(sockets)?;
        if let Some(t) = tls {
            set.adopt_tls(t.sockets)?;
            set.tls = Some(t.config);
            set.tls_at = Some((t.binds, t.port));
        }
        if let Some((mut l, path)) = unix {
            set.registry.register(
                &mut l,
                Token(first_token + UNIX_LISTENER),
                Interest::READABLE,
            )?;
            set.unix = Some((l, path));
        }
        Ok(SharedListeners(Arc::new(Mutex::new(set))))
    }

    pub fn lock(&self) -> MutexGuard<'_, Listeners> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl crate::commands::executor::ListenerControl for SharedListeners {
    fn rebind(
        &self,
        binds: &[String],
        port: u16,
        old_binds: &[String],
        old_port: u16,
    ) -> io::Result<()> {
        self.lock().rebind(binds, port, old_binds, old_port)
    }

    fn retls(
        &self,
        binds: &[String],
        tls_port: u16,
        config: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<()> {
        self.lock().retls(binds, tls_port, config)
    }
}

impl Listeners {
    fn adopt(&mut self, mut sockets: Vec<TcpListener>) -> io::Result<()> {
        for (i, l) in sockets.iter_mut().enumerate() {
            self.registry
                .register(l, Token(self.first_token + i), Interest::READABLE)?;
        }
        self.sockets = sockets;
        Ok(())
    }

    fn adopt_tls(&mut self, mut sockets: Vec<TcpListener>) -> io::Result<()> {
        for (i, l) in sockets.iter_mut().enumerate() {
            self.registry.register(
                l,
                Token(self.first_token + TLS_LISTENERS + i),
                Interest::READABLE,
            )?;
        }
        self.tls_sockets = sockets;
        Ok(())
    }

    /// The TLS sockets now listen on `binds`:`tls_port` (none for port 0) and new TLS
    /// connections use `config`. The sockets are replaced only when the address changed,
    /// so a certificate reload never closes them; on a bind failure the old ones stay
    /// closed and the error is returned (the executor restores the old settings).
    pub fn retls(
        &mut self,
        binds: &[String],
        tls_port: u16,
        config: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<()> {
        let wanted = (tls_port != 0).then(|| (binds.to_vec(), tls_port));
        if wanted != self.tls_at {
            for mut l in self.tls_sockets.drain(..) {
                let _ = self.registry.deregister(&mut l);
            }
            self.tls_at = None;
            let sockets = bind_listeners(binds, tls_port)?;
            self.adopt_tls(sockets)?;
            self.tls_at = wanted;
        }
        self.tls = config;
        Ok(())
    }

    fn close_all(&mut self) {
        for mut l in self.sockets.drain(..) {
            let _ = self.registry.deregister(&mut l);
        }
    }

    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// Accepts on socket `index`. An index the set no longer has (an event that was
    /// already polled when the sockets were replaced) reads as "nothing to accept".
    pub fn accept(&self, index: usize) -> io::Result<(Stream, Peer)> {
        if index == UNIX_LISTENER {
            return match &self.unix {
                Some((l, path)) => l
                    .accept()
                    .map(|(s, _)| (Stream::Unix(s), Peer::Unix(path.clone()))),
                None => Err(io::ErrorKind::WouldBlock.into()),
            };
        }
        if (TLS_LISTENERS..UNIX_LISTENER).contains(&index) {
            let Some(l) = self.tls_sockets.get(index - TLS_LISTENERS) else {
                return Err(io::ErrorKind::WouldBlock.into());
            };
            let (s, a) = l.accept()?;
            let Some(config) = self.tls.clone() else {
                // No configuration (cannot happen while TLS sockets exist): refused.
                return Err(io::Error::other("TLS is not configured"));
            };
            let tls = TlsStream::accept(s, config)?;
            return Ok((Stream::Tls(Box::new(tls)), Peer::Tcp(a)));
        }
        match self.sockets.get(index) {
            Some(l) => l.accept().map(|(s, a)| (Stream::Tcp(s), Peer::Tcp(a))),
            None => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// The Unix socket's path, if one is listened on.
    pub fn unix_path(&self) -> Option<&str> {
        self.unix.as_ref().map(|(_, p)| p.as_str())
    }

    /// The TLS sockets' addresses.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.tls_sockets
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Listens on `binds`:`port` instead of the current sockets. The current ones close
    /// first, as in Redis, so a new address may be one the old sockets held (the same
    /// port on another `bind` list, a wildcard narrowed to one address). When the new
    /// addresses cannot all be bound, listens on `old_binds`:`old_port` again and returns
    /// the error: connections already open are never affected either way.
    pub fn rebind(
        &mut self,
        binds: &[String],
        port: u16,
        old_binds: &[String],
        old_port: u16,
    ) -> io::Result<()> {
        self.close_all();
        let err = match bind_listeners(binds, port).and_then(|s| self.adopt(s)) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        warning!("{err}");
        warning!("Failed to bind, trying to restore old listening sockets.");
        self.close_all();
        if let Err(e) = bind_listeners(old_binds, old_port).and_then(|s| self.adopt(s)) {
            warning!("Could not restore the old listening sockets: {e}");
        }
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    const OPEN: AdmissionRules = AdmissionRules {
        protected_mode: true,
        password_set: false,
        maxclients: 10,
    };

    #[test]
    fn protected_mode_without_password_serves_loopback_peers_only() {
        for local in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(admission_refusal(&OPEN, 0, ip(local)), None, "{local}");
        }
        for remote in [
            "192.0.2.7",
            "10.0.0.1",
            "::ffff:192.0.2.7",
            "2001:db8::1",
            "::",
        ] {
            assert_eq!(
                admission_refusal(&OPEN, 0, ip(remote)),
                Some(PROTECTED_MODE_DENIED),
                "{remote}"
            );
        }
    }

    #[test]
    fn a_password_or_protected_mode_off_serves_remote_peers() {
        let with_password = AdmissionRules {
            password_set: true,
            ..OPEN
        };
        let unprotected = AdmissionRules {
            protected_mode: false,
            ..OPEN
        };
        for rules in [with_password, unprotected] {
            assert_eq!(admission_refusal(&rules, 0, ip("192.0.2.7")), None);
            assert_eq!(admission_refusal(&rules, 0, ip("2001:db8::1")), None);
        }
    }

    #[test]
    fn maxclients_is_checked_before_protected_mode() {
        assert_eq!(
            admission_refusal(&OPEN, 10, ip("127.0.0.1")),
            Some(MAX_CLIENTS_REACHED)
        );
        assert_eq!(
            admission_refusal(&OPEN, 10, ip("192.0.2.7")),
            Some(MAX_CLIENTS_REACHED)
        );
        assert_eq!(admission_refusal(&OPEN, 9, ip("127.0.0.1")), None);
        // A Unix socket peer is local; maxclients still counts it.
        assert_eq!(admission_refusal(&OPEN, 0, None), None);
        assert_eq!(
            admission_refusal(&OPEN, 10, None),
            Some(MAX_CLIENTS_REACHED)
        );
    }

    #[test]
    fn the_denial_is_redis_7s_text() {
        assert!(PROTECTED_MODE_DENIED.starts_with(
            "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user."
        ));
        assert!(PROTECTED_MODE_DENIED.ends_with("accepting connections from the outside.\r\n"));
        assert_eq!(PROTECTED_MODE_DENIED.matches("\r\n").count(), 1);
    }

    #[test]
    fn rebind_moves_the_port_and_restores_the_old_one_on_failure() {
        let poll = mio::Poll::new().unwrap();
        let loopback = vec!["127.0.0.1".to_string()];
        let first = bind_listeners(&loopback, free_port()).unwrap();
        let old_port = first[0].local_addr().unwrap().port();
        let set = SharedListeners::new(poll.registry(), 0, first, None, None).unwrap();
        let new_port = free_port();
        set.lock()
            .rebind(&loopback, new_port, &loopback, old_port)
            .unwrap();
        assert_eq!(set.lock().local_addrs()[0].port(), new_port);
        assert!(std::net::TcpStream::connect(("127.0.0.1", old_port)).is_err());
        // An address no interface has (TEST-NET-3): the old socket comes back.
        let bad = vec!["203.0.113.77".to_string()];
        assert!(set
            .lock()
            .rebind(&bad, new_port, &loopback, new_port)
            .is_err());
        assert_eq!(set.lock().local_addrs()[0].port(), new_port);
        assert!(std::net::TcpStream::connect(("127.0.0.1", new_port)).is_ok());
        set.lock()
            .rebind(&loopback, 0, &loopback, new_port)
            .unwrap();
        assert!(set.lock().is_empty());
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}
