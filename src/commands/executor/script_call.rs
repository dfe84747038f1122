//! The executor's side of `redis.call`: a command a script runs passes Redis 7.0's
//! scriptCall checks (known command, arity, allowed in scripts, no writes from read-only
//! scripts, MISCONF / log errors for writes, `denyoom` commands when memory was over
//! `maxmemory` at the script's start, the arena's room), then runs as any command does
//! (`run_command`: stats, WATCH, blocked clients, the propagation hook, which collects
//! the script's entries instead of logging them).

use super::{Admission, Client, Server};
use crate::commands::scripting::{denied_in_script, ScriptRules};
use crate::commands::{self, Args, CmdError};
use crate::protocol::reply::Reply;

impl Server {
    /// SHUTDOWN NOSAVE arrived while a script was busy (answered by an I/O thread): the
    /// server stops when the script has ended.
    pub fn shutdown_nosave(&mut self) {
        self.shutdown = Some(super::ShutdownRequest::NoSave);
    }

    /// Runs `args` for a script; its reply (an error reply included) goes to `out`. A
    /// refusal before the command runs is the error text (code included) the script
    /// raises or gets back.
    pub fn execute_in_script(
        &mut self,
        client: &mut Client,
        args: Args,
        out: &mut Vec<u8>,
        now: i64,
        rules: ScriptRules,
    ) -> Result<(), String> {
        const UNKNOWN: &str = "ERR Unknown Redis command called from script";
        let Some(top) = self.commands.lookup(args.get(0)) else {
            return Err(UNKNOWN.into());
        };
        let (spec, parent) = if !top.subcommands.is_empty() && args.len() >= 2 {
            match top
                .subcommands
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(args.get(1)))
            {
                Some(s) => (s, Some(top)),
                None => return Err(UNKNOWN.into()),
            }
        } else {
            (top, None)
        };
        if !spec.arity_ok(args.len()) {
            return Err("ERR Wrong number of args calling Redis command from script".into());
        }
        if denied_in_script(spec, parent) {
            return Err("ERR This Redis command is not allowed from script".into());
        }
        self.acl_check(client, spec, parent, args, commands::acl::LogContext::Lua)?;
        let writes = spec.flags & commands::WRITE != 0;
        // A command that may write (PFCOUNT refreshing its cache) counts as a write here.
        if rules.read_only && (writes || spec.flags & commands::MAY_REPLICATE != 0) {
            return Err("ERR Write commands are not allowed from read-only scripts.".into());
        }
        if writes {
            if self.aof.enabled && !self.loading {
                if let Some(msg) = self.aof.refuse_writes() {
                    return Err(msg);
                }
            }
            if self.writes_denied_by_disk_error() {
                return Err(crate::commands::executor::snapshot_ops::MISCONF_ERR.into());
            }
            if !self.enough_good_replicas() {
                return Err("NOREPLICAS Not enough good replicas to write.".into());
            }
        }
        if spec.flags & commands::DENYOOM != 0 && rules.oom_at_start && !rules.allow_oom {
            return Err(CmdError::Oom.to_string());
        }
        let admission = Admission {
            is_exec: false,
            flags: spec.flags,
            queueing: false,
            prechecks: true,
        };
        if let Err(refusal) = self.admit_to_arena(client, args, &admission) {
            return Err(refusal.reply.unwrap_or_else(|| CmdError::Oom.to_string()));
        }
        client.last_cmd = spec.name;
        client.last_cmd_parent = parent.map(|p| p.name);
        let reply = Reply::new(out, client.resp);
        self.in_script_call = true;
        self.run_command(client, spec, parent, args, reply, now, false);
        self.in_script_call = false;
        Ok(())
    }
}
