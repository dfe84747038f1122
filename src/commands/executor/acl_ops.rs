//! The executor's side of ACL: refusing a command with Redis's NOPERM texts and logging
//! it, logging failed authentications, disconnecting the clients of deleted or changed
//! users, and the ACL file (startup, ACL SAVE, ACL LOAD). The rules themselves are
//! `commands::acl`.

use super::{Client, Refusal, Server};
use crate::commands::acl::{Denied, LogContext, LogEntry, User};
use crate::commands::{Args, CommandSpec};

impl Server {
    fn acllog_max_len(&self) -> usize {
        self.config
            .get_value("acllog-max-len")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(128)
    }

    /// Adds an ACL LOG entry for `client` (the script's caller for a script's command).
    pub fn acl_log(
        &mut self,
        client: &Client,
        reason: Denied,
        context: LogContext,
        object: Vec<u8>,
        username: Option<&[u8]>,
    ) {
        let entry = LogEntry {
            count: 1,
            reason,
            context,
            object,
            username: username.unwrap_or(&client.user_name).to_vec(),
            ctime_ms: crate::util::now_ms(),
            client_info: client.info_line(crate::util::now_ms()),
        };
        let max = self.acllog_max_len();
        self.acl.log_event(entry, max);
    }

    /// The permission check of a command about to run or be queued. Err: the error
    /// reply (code included), already logged.
    #[inline]
    pub fn acl_check(
        &mut self,
        client: &Client,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: Args,
        context: LogContext,
    ) -> Result<(), String> {
        // `check` answers at once for a user allowed everything.
        let Err((reason, pos)) = self.acl.check(client.user, spec, args) else {
            return Ok(());
        };
        self.acl_refusal(client, spec, parent, args, context, reason, pos)
    }

    /// `execute_inner`'s check when the usual answers did not decide: the general walk,
    /// and the refusal (inside EXEC a reply that is not counted as a failed command).
    #[inline(never)]
    pub(super) fn acl_check_toplevel(
        &mut self,
        client: &Client,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: Args,
    ) -> Result<(), Refusal> {
        let context = if client.multi.is_some() || self.in_exec {
            LogContext::Multi
        } else {
            LogContext::Toplevel
        };
        self.acl_check(client, spec, parent, args, context)
            .map_err(|msg| {
                if self.in_exec {
                    Refusal {
                        reply: Some(msg),
                        counted: false,
                        maxmemory: false,
                    }
                } else {
                    Refusal::counted(msg)
                }
            })
    }

    /// The refusal's reply, logged (kept out of `acl_check`, which runs on every command
    /// of a restricted user).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn acl_refusal(
        &mut self,
        client: &Client,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: Args,
        context: LogContext,
        reason: Denied,
        pos: usize,
    ) -> Result<(), String> {
        let full_name = match parent {
            Some(p) => crate::commands::full_name(p, spec),
            None => spec.name.to_string(),
        };
        let object = match reason {
            Denied::Command => full_name.clone().into_bytes(),
            _ => args.get(pos).to_vec(),
        };
        self.acl_log(client, reason, context, object, None);
        Err(match (context, self.in_exec) {
            (LogContext::Lua, _) => format!(
                "ERR The user executing the script {}",
                match reason {
                    Denied::Command => "can't run this command or subcommand",
                    Denied::Key =>
                        "can't access at least one of the keys mentioned in the command arguments",
                    _ => "can't publish to the channel mentioned in the command",
                }
            ),
            (_, true) => format!(
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
                match reason {
                    Denied::Command => "no permission to execute the command or subcommand",
                    Denied::Key => "no permission to touch the specified keys",
                    _ => "no permission to access one of the channels used as arguments",
                }
            ),
            _ => match reason {
                Denied::Command => {
                    format!("NOPERM this user has no permissions to run the '{full_name}' command")
                }
                Denied::Key => {
                    "NOPERM this user has no permissions to access one of the keys used as arguments"
                        .to_string()
                }
                _ => "NOPERM this user has no permissions to access one of the channels used as arguments"
                    .to_string(),
            },
        })
    }

    /// Disconnects the clients authenticated as the users in `slots` (deleted or
    /// replaced), as Redis does: they fall back to the unauthenticated default user and
    /// close; the running client closes after its reply.
    pub fn acl_drop_clients(&mut self, current: &mut Client, slots: &[usize]) {
        if slots.is_empty() {
            return;
        }
        for c in self.clients.iter_mut().flatten() {
            if c.user != 0 && slots.contains(&c.user) {
                c.user = 0;
                c.user_name = b"default".to_vec();
                c.authenticated = false;
                self.kill_queue.push(c.id);
            }
        }
        if current.user != 0 && slots.contains(&current.user) {
            current.user = 0;
            current.user_name = b"default".to_vec();
            current.authenticated = false;
            current.close_after_reply = true;
        }
    }

    /// After a user's channel rules changed: disconnects its pub/sub clients holding a
    /// subscription the new rules no longer allow (Redis's ACLKillPubsubClientsIfNeeded).
    /// `old_channels`: the user's channel patterns before (None: all channels).
    pub fn acl_kill_pubsub_if_needed(
        &mut self,
        current: &mut Client,
        slot: usize,
        old_channels: Option<Vec<Vec<u8>>>,
    ) {
        let Some(upcoming) = self.acl.channel_rules(slot) else {
            return;
        };
        if let Some(old) = &old_channels {
            if old.iter().all(|c| upcoming.contains(c)) {
                return;
            }
        }
        let violates = |c: &Client| -> bool {
            if c.user != slot || !c.is_pubsub() {
                return false;
            }
            c.sub_patterns.iter().any(|p| !upcoming.contains(p))
                || c.sub_channels.iter().chain(c.sub_shard.iter()).any(|ch| {
                    !upcoming
                        .iter()
                        .any(|p| crate::util::glob_match(p, ch, false))
                })
        };
        let mut victims = Vec::new();
        for c in self.clients.iter().flatten() {
            if violates(c) {
                victims.push(c.id);
            }
        }
        self.kill_queue.extend(victims);
        if violates(current) {
            current.close_after_reply = true;
        }
    }

    /// The `aclfile` option (None: not set).
    pub fn acl_file(&self) -> Option<String> {
        self.config
            .get_value("aclfile")
            .filter(|f| !f.is_empty())
            .map(str::to_string)
    }

    /// Reads and parses the ACL file. Err: Redis's text (every error with its line).
    pub fn acl_read_file(&self, path: &str) -> Result<Vec<User>, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Error loading ACLs, opening file '{path}': {}",
                strerror(&e)
            )
        })?;
        self.acl.parse_file(path, &text)
    }

    /// ACL LOAD: replaces every user with the file's (nothing changes on an error);
    /// clients of users that are gone or redefined are disconnected.
    pub fn acl_load(&mut self, current: &mut Client, path: &str) -> Result<(), String> {
        let users = self.acl_read_file(path)?;
        let mut gone = self.acl.replace_all(users);
        // Redis frees every previous user but the default one: their clients go.
        gone.retain(|&s| s != 0);
        self.acl_drop_clients(current, &gone);
        Ok(())
    }

    /// ACL SAVE: every user's line, written to a temporary file renamed over `path`.
    pub fn acl_save(&self, path: &str) -> Result<(), String> {
        let mut text = Vec::new();
        for u in self.acl.users() {
            text.extend_from_slice(&self.acl.user_line(u));
            text.push(b'\n');
        }
        let tmp = format!(
            "{path}.tmp-{}-{}",
            std::process::id(),
            crate::util::now_ms()
        );
        let result = std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            crate::warning!("Writing ACL file for ACL SAVE: {e}");
            return Err("ERR There was an error trying to save the ACLs. Please check the server logs for more information".into());
        }
        Ok(())
    }

    /// Startup: `user` lines of the config, or the ACL file, never both (Redis refuses
    /// the combination). Err: the message startup stops with.
    pub fn acl_startup(&mut self, user_lines: &[Vec<String>]) -> Result<(), String> {
        let file = self.acl_file();
        if file.is_some() && !user_lines.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        if !user_lines.is_empty() {
            let users = self.acl.users_from_config(user_lines)?;
            for u in users {
                if !u.enabled {
                    crate::notice!("The user '{}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.", String::from_utf8_lossy(&u.name));
                }
                self.acl.install(u);
            }
        }
        if let Some(path) = file {
            let users = self
                .acl_read_file(&path)
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
            self.acl.replace_all(users);
        }
        Ok(())
    }
}

/// An I/O error as C's strerror says it (Rust adds " (os error N)").
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
