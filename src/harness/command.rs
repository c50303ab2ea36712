//! The `command` harness: any executable as an agent. The prompt goes to its stdin; it answers by
//! running the launcher (`$AWF_LAUNCHER result $AWF_OP`). Each turn runs in a process group of its
//! own, run through the lifecycle `process.rs` keeps: killed when the turn is cancelled, times out,
//! stalls, or outlives its answer's grace.

use super::{process, AgentInfo, BoxFuture, HarnessError, Session, TurnEnd, TurnInput, TurnReport};
use crate::accounting::CostSource;
use crate::control::server::Endpoint;
use crate::record::agent_files::OpLog;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub struct CommandSession {
    info: AgentInfo,
    argv: Vec<String>,
    cwd: PathBuf,
    agent_dir: PathBuf,
    state_dir: PathBuf,
    endpoint: Arc<Endpoint>,
    stall: Duration,
    /// When set, every turn's program runs inside this sandbox, never outside it.
    sandbox: Option<crate::sandbox::Sandbox>,
}

impl CommandSession {
    pub fn new(
        info: AgentInfo,
        argv: Vec<String>,
        cwd: PathBuf,
        agent_dir: PathBuf,
        endpoint: Arc<Endpoint>,
        stall: Duration,
    ) -> Result<Self, HarnessError> {
        if argv.is_empty() || argv[0].is_empty() {
            return Err(HarnessError::Config(
                "the `command` harness needs `command` (an array: program, then arguments)".into(),
            ));
        }
        let state_dir = agent_dir.join("state");
        crate::record::private::create_dir(&state_dir).map_err(HarnessError::create(&state_dir))?;
        Ok(CommandSession { info, argv, cwd, agent_dir, state_dir, endpoint, stall, sandbox: None })
    }

    /// Runs every turn's program inside `sandbox` (the agent's seat in it).
    pub fn sandboxed(self, sandbox: Option<crate::sandbox::Sandbox>) -> Self {
        CommandSession { sandbox, ..self }
    }
}

impl Session for CommandSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let mut log = OpLog::open(&self.agent_dir, &input.op_id);
            let op = self.endpoint.open_turn(&input.op_id, input.slot.clone(), input.deadline, input.meter.clone());
            let prompt = match &self.info.instructions {
                Some(i) => format!("{i}\n\n{}", input.shown),
                None => input.shown.clone(),
            };
            let report = |end, usage: crate::accounting::Usage| TurnReport {
                cost_source: if usage.cost_usd > 0.0 { CostSource::Harness } else { CostSource::Priced },
                end,
                usage,
                simulated: false,
            };
            let vars: Vec<(String, String)> = [
                ("AWF_LAUNCHER", self.endpoint.launcher.display().to_string()),
                ("AWF_OP", input.op_id.clone()),
                ("AWF_AGENT", self.info.key.clone()),
                ("AWF_SCHEMA", input.slot.schema().text.to_string()),
                ("AWF_STATE_DIR", self.state_dir.display().to_string()),
                ("AWF_NUDGE", input.nudge.to_string()),
                ("AWF_RUN_ID", self.endpoint.run.id.clone()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .into();
            // A sandboxed program runs as bwrap's child, with only the sandbox's environment, which
            // bwrap itself is started with (never on its command line).
            let mut cmd = match &self.sandbox {
                Some(s) => {
                    let wrapped = s.wrap(&self.argv, &vars);
                    let mut cmd = crate::harness::spawn::Program::new(&wrapped.argv[0]);
                    cmd.args(&wrapped.argv[1..]).env_clear().envs(wrapped.env).pinned(wrapped.pinned);
                    cmd
                }
                None => {
                    let mut cmd = crate::harness::spawn::Program::new(&self.argv[0]);
                    cmd.args(&self.argv[1..]).envs(vars);
                    cmd
                }
            };
            cmd.current_dir(&self.cwd);
            let spec = process::Spec {
                endpoint: &self.endpoint,
                agent: &self.info.key,
                agent_dir: &self.agent_dir,
                capture: &input.op_id,
                op: Some(&op),
                stdin: Some(process::Stdin { text: prompt, keep_open: false }),
                stall: self.stall,
                program: &self.argv[0],
                install: None,
                shown: json!({ "nudge": input.nudge, "argv": self.argv, "sandbox": self.sandbox.as_ref().map(|s| &s.name) }),
            };
            // A listed network's proxy serves this turn's program, and stops with it.
            let _proxy = match super::net::for_turn(self.sandbox.as_ref(), &self.endpoint, &self.info.key, &input.op_id)
            {
                Ok(p) => p,
                Err(why) => return report(TurnEnd::Failed(why.to_string()), op.usage()),
            };
            let exit = match process::run(cmd, spec, &mut log, process::Stdout::Captured).await {
                Ok(exit) => exit,
                Err(why) => return report(TurnEnd::Failed(why.to_string()), op.usage()),
            };
            let end = match exit.status {
                _ if exit.stalled => {
                    TurnEnd::Failed(format!("stalled: no output or event for {} s", self.stall.as_secs()))
                }
                _ if input.slot.answer().is_some() => TurnEnd::Ended,
                Some(s) if !s.success() => {
                    let tail = if exit.stderr_tail.is_empty() { "(no stderr)".to_string() } else { exit.stderr_tail };
                    TurnEnd::Failed(format!("`{}` exited with {s}: {tail}", self.argv[0]))
                }
                _ => TurnEnd::Ended,
            };
            report(end, op.usage())
        })
    }

    fn fork(&self, _info: AgentInfo) -> Result<Box<dyn Session>, HarnessError> {
        Err(HarnessError::Cannot("a `command` agent's session is its program's own state; awf cannot copy it".into()))
    }

    fn compact(&mut self, _prompt: &str) -> BoxFuture<'_, super::Compaction> {
        let why =
            HarnessError::Cannot("the `command` harness cannot compact: its program keeps its own history".into());
        Box::pin(async { super::Compaction::free(Err(why), false) })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), HarnessError> {
        if let Some(m) = model {
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.info.effort = Some(e.to_string());
        }
        Ok(())
    }
}
