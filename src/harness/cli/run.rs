//! One run of a CLI process: its argv (wrapped in the sandbox when there is one), its events read
//! line by line through the lifecycle `harness/process.rs` keeps, and the verdict on how it went.

use super::events::tail_chars;
use super::{install_hint, CliEnv, CliSession, Invocation, Turn};
use crate::control::server::OpControl;
use crate::harness::{process, HarnessError};
use crate::record::agent_files::OpLog;
use serde_json::{json, Value};
use std::process::ExitStatus;
use std::time::Duration;

/// How long a CLI may keep running after its final event before it is killed (some hang there).
const DONE_GRACE: Duration = Duration::from_secs(3);

/// How one CLI process went.
pub(super) struct Ran {
    pub(super) turn: Turn,
    status: Option<ExitStatus>,
    stalled: bool,
    stderr_tail: String,
    last_line: String,
}

impl CliSession {
    /// The command that runs the CLI once: the program and its arguments, wrapped in the sandbox
    /// when there is one. A sandboxed CLI gets only the sandbox's environment, so everything it
    /// needs is passed in: its own variables (home, settings, `AWF_*`, the runtime's `env`) and the
    /// key named by `api_key_env` (the runtime names it, so it may enter); bwrap is started with
    /// that environment, never with values on its command line.
    fn command(&self, args: &[String], env: &CliEnv) -> crate::harness::spawn::Program {
        let mut argv = vec![self.cfg.program.clone()];
        argv.extend(args.iter().cloned());
        let Some(s) = &self.sandbox else {
            let mut cmd = crate::harness::spawn::Program::new(&argv[0]);
            cmd.args(&argv[1..]);
            for k in &env.remove {
                cmd.env_remove(k);
            }
            cmd.envs(env.set.iter().map(|(k, v)| (k, v)));
            return cmd;
        };
        let key = self.cfg.api_key_env.as_ref().and_then(|k| Some((k.clone(), std::env::var(k).ok()?)));
        let vars: Vec<(String, String)> = key.into_iter().chain(env.set.iter().cloned()).collect();
        let wrapped = s.wrap(&argv, &vars);
        let mut cmd = crate::harness::spawn::Program::new(&wrapped.argv[0]);
        cmd.args(&wrapped.argv[1..]).env_clear().envs(wrapped.env).pinned(wrapped.pinned);
        cmd
    }
    /// Runs the CLI once, reading its events until it ends, stalls, or is released.
    pub(super) async fn run(
        &self,
        inv: Invocation,
        env: CliEnv,
        op: Option<&OpControl>,
        log: &mut OpLog,
        capture: &str,
    ) -> Result<Ran, HarnessError> {
        let program = &self.cfg.program;
        let mut cmd = self.command(&inv.args, &env);
        cmd.current_dir(&self.cwd);
        let shown: Vec<String> =
            inv.args.iter().map(|a| if a.len() > 200 { format!("<{} bytes>", a.len()) } else { a.clone() }).collect();
        let sandbox = self.sandbox.as_ref().map(|s| &s.name);
        // A CLI whose stdin stays open (pi's RPC mode) never exits by itself: its final event ends it.
        let keep_open = inv.stdin.as_ref().is_some_and(|(_, keep)| *keep);
        let spec = process::Spec {
            endpoint: &self.endpoint,
            agent: &self.info.key,
            agent_dir: &self.agent_dir,
            capture,
            op,
            stdin: inv.stdin.map(|(text, keep_open)| process::Stdin { text, keep_open }),
            stall: self.cfg.stall,
            program,
            install: Some(install_hint(self.cli.harness())),
            shown: json!({ "program": program, "args": shown, "sandbox": sandbox }),
        };
        let mut turn = Turn::default();
        let mut last_line = String::new();
        let cli = &self.cli;
        let mut handler = |line: &str| {
            let text = line.trim();
            if let Ok(ev) = serde_json::from_str::<Value>(text) {
                cli.event(&ev, &mut turn);
            }
            if !text.is_empty() {
                last_line = tail_chars(text, 400);
            }
            turn.done
        };
        let final_grace = if keep_open { Duration::ZERO } else { DONE_GRACE };
        let stdout = process::Stdout::Lines { handler: &mut handler, final_grace };
        // A listed network's proxy serves this run of the CLI, and stops with it.
        let _proxy = crate::harness::net::for_turn(self.sandbox.as_ref(), &self.endpoint, &self.info.key, capture)?;
        let exit = process::run(cmd, spec, log, stdout).await?;
        turn.lines = exit.lines;
        Ok(Ran { turn, status: exit.status, stalled: exit.stalled, stderr_tail: exit.stderr_tail, last_line })
    }

    /// Why a run failed, with a hint when its sandbox has no network (the likely cause).
    pub(super) fn judge(&self, ran: &Ran) -> Option<String> {
        let why = self.verdict(ran)?;
        match &self.sandbox {
            Some(s) if s.policy.network == crate::sandbox::Network::None && !ran.stalled => Some(format!(
                "{why} (sandbox `{}` has network = \"none\", where not even 127.0.0.1 is the host's: a CLI reaches its model server only with network = \"host\")",
                s.name
            )),
            Some(s) if s.net.is_some() && !ran.stalled => Some(format!(
                "{why} (sandbox `{}` reaches only {}: a request elsewhere is refused, each a `sandbox-net-denied` event)",
                s.name,
                s.net.as_ref().map(|n| n.allow.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")).unwrap_or_default()
            )),
            _ => Some(why),
        }
    }

    /// Why a run that gave no verdict of its own failed, if it did.
    fn verdict(&self, ran: &Ran) -> Option<String> {
        if ran.stalled {
            return Some(format!("stalled: no output or event for {} s", self.cfg.stall.as_secs()));
        }
        if let Some(f) = &ran.turn.failure {
            return Some(f.clone());
        }
        if ran.turn.done {
            return None;
        }
        if let Some(e) = &ran.turn.error {
            return Some(e.clone());
        }
        match ran.status {
            Some(s) if s.success() => None,
            status => {
                let tail = if !ran.stderr_tail.is_empty() {
                    tail_chars(&ran.stderr_tail, 600)
                } else if !ran.last_line.is_empty() {
                    ran.last_line.clone()
                } else {
                    "(no output)".into()
                };
                let how = status.map(|s| s.to_string()).unwrap_or_else(|| "no exit status".into());
                Some(format!("`{}` ended ({how}) before its turn was over: {tail}", self.cfg.program))
            }
        }
    }
}
