//! One agent's session with a CLI: opening it (the CLI, its home and credentials), the
//! environment of each run, turns and native compaction, forks, and model or effort changes.

use super::home::Credential;
use super::{claude, codex, copy_tree, pi, Cli, CliConfig, CliEnv, EndpointOpener};
use crate::accounting::{CostSource, Usage};
use crate::config::HarnessKind;
use crate::control::server::{Endpoint, OpControl};
use crate::harness::{AgentInfo, BoxFuture, HarnessError, Session, TurnEnd, TurnInput, TurnReport};
use crate::record::agent_files::OpLog;
use crate::sandbox::Sandbox;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// One agent's session with a CLI.
pub struct CliSession {
    pub(super) info: AgentInfo,
    pub(super) cfg: CliConfig,
    pub(super) cli: Box<dyn Cli>,
    pub(super) cwd: PathBuf,
    pub(super) agent_dir: PathBuf,
    pub(super) home: PathBuf,
    pub(super) endpoint: Arc<Endpoint>,
    opener: EndpointOpener,
    credentials: Vec<Credential>,
    compactions: u32,
    /// When set, every run of the CLI is wrapped in this sandbox, never run outside it; its home
    /// (the CLI's HOME) is `home`, so config and session files stay inside the writable home.
    pub(super) sandbox: Option<Sandbox>,
    /// The CLI's session id, as its events last reported it.
    pub(super) session_id: Option<String>,
    /// The parent's session id, for a fork.
    forked_from: Option<String>,
    /// The pane the CLI runs in, for an agent with placement "pane" (`interactive/`).
    pub(super) pane: Option<super::interactive::PaneSeat>,
}

impl CliSession {
    /// A session for `harness` (one of `PINNED`), its home under `agent_dir`.
    pub fn open(
        harness: HarnessKind,
        info: AgentInfo,
        cfg: CliConfig,
        cwd: PathBuf,
        agent_dir: PathBuf,
        endpoint: Arc<Endpoint>,
        opener: EndpointOpener,
    ) -> Result<CliSession, HarnessError> {
        let home = agent_dir.join("home");
        crate::record::private::create_dir(&home).map_err(HarnessError::create(&home))?;
        let cli: Box<dyn Cli> = match harness {
            HarnessKind::Claude => Box::new(claude::Claude::new()),
            HarnessKind::Codex => Box::new(codex::Codex::new()),
            HarnessKind::Pi => Box::new(pi::Pi::new(&home)),
            other => return Err(HarnessError::Config(format!("`{other}` is not a CLI harness"))),
        };
        // A runtime that names no model passes no model flag: the CLI runs its own default.
        Ok(Self::with(info, cfg, cli, cwd, agent_dir, home, endpoint, opener))
    }

    #[allow(clippy::too_many_arguments)]
    fn with(
        info: AgentInfo,
        cfg: CliConfig,
        cli: Box<dyn Cli>,
        cwd: PathBuf,
        agent_dir: PathBuf,
        home: PathBuf,
        endpoint: Arc<Endpoint>,
        opener: EndpointOpener,
    ) -> CliSession {
        let credentials = cli.credentials(&home).into_iter().map(|(op, local)| Credential::new(op, local)).collect();
        CliSession {
            info,
            cfg,
            cli,
            cwd,
            agent_dir,
            home,
            endpoint,
            opener,
            credentials,
            compactions: 0,
            sandbox: None,
            session_id: None,
            forked_from: None,
            pane: None,
        }
    }

    /// Copies the agent's skills into its home, where its CLI looks for them, and records them.
    pub fn with_skills(mut self, skills: &[super::skills::Skill]) -> Result<Self, HarnessError> {
        if skills.is_empty() {
            return Ok(self);
        }
        let dirs = super::skills::install(skills, &self.home, &self.agent_dir)?;
        self.cli.skills(&dirs)?;
        Ok(self)
    }

    /// Makes the first turn fork the caller's session, when there is one to fork.
    pub fn forking(mut self, fork: Option<&super::caller::CallerFork>) -> Result<Self, HarnessError> {
        let Some(fork) = fork else { return Ok(self) };
        self.cli.adopt(&self.home, &self.cwd, fork)?;
        self.forked_from = Some(fork.id.clone());
        Ok(self)
    }

    /// Runs the CLI interactively in `seat`'s pane; a session an earlier attempt of the run left
    /// in the home is resumed there.
    pub fn in_pane(mut self, seat: super::interactive::PaneSeat) -> Result<Self, super::interactive::PaneError> {
        let Some(left) = self.cli.interactive().map(|ia| ia.left(&self.home)) else {
            return Err(super::interactive::PaneError::NotInteractive(self.cli.harness()));
        };
        if let Some(id) = left {
            // Not resumable (a file of another kind): the pane starts a session of its own.
            if self.cli.resume(&self.home, &id).is_ok() {
                self.session_id = Some(id);
            }
        }
        self.pane = Some(seat);
        Ok(self)
    }

    /// Runs the CLI inside `sandbox` (the agent's seat in it, whose home is this session's home).
    pub fn sandboxed(self, sandbox: Option<Sandbox>) -> Self {
        CliSession { sandbox, ..self }
    }

    pub(super) fn seed_credentials(&mut self) {
        for c in &mut self.credentials {
            if let Err(e) = c.seed() {
                tracing::warn!("agent {}: {e}", self.info.key);
            }
        }
    }

    /// Writes refreshed credential copies back to the operator's files; never for a sandboxed
    /// agent, whose home is the agent's to write: what it left there (someone else's login, a
    /// file it wants the operator to use) stays there.
    pub(super) fn write_back_credentials(&mut self, log: &mut OpLog) {
        if self.sandbox.is_some() {
            return;
        }
        for c in &mut self.credentials {
            match c.write_back() {
                Ok(true) => log.event("credentials-written-back", json!({ "file": c.operator })),
                Ok(false) => {}
                Err(e) => log.event("credentials-write-back-failed", json!({ "error": e.to_string() })),
            }
        }
    }

    /// The environment of one run of the CLI.
    pub(super) fn environment(&self, op_id: Option<&str>) -> Result<CliEnv, HarnessError> {
        let mut env = self.cli.prepare(&self.home, &self.cfg, &self.info)?;
        env.set("AWF_LAUNCHER", self.endpoint.launcher.display().to_string());
        env.set("AWF_AGENT", &self.info.key);
        env.set("AWF_RUN_ID", &self.endpoint.run.id);
        if let Some(op) = op_id {
            env.set("AWF_OP", op);
        }
        for (k, v) in &self.cfg.env {
            env.set(k, v);
        }
        Ok(env)
    }

    async fn run_turn(&mut self, input: TurnInput) -> TurnReport {
        let mut log = OpLog::open(&self.agent_dir, &input.op_id);
        let op = self.endpoint.open_turn(&input.op_id, input.slot.clone(), input.deadline, input.meter.clone());
        let report = |end: TurnEnd, mut usage: Usage, cost_reported: bool, op: &OpControl| {
            let launched = op.usage();
            usage.add(&launched);
            TurnReport {
                cost_source: if cost_reported || launched.cost_usd > 0.0 {
                    CostSource::Harness
                } else {
                    CostSource::Priced
                },
                end,
                usage,
                simulated: false,
            }
        };
        self.seed_credentials();
        let env = match self.environment(Some(&input.op_id)) {
            Ok(e) => e,
            Err(e) => return report(TurnEnd::Failed(e.to_string()), Usage::default(), false, &op),
        };
        let inv = self.cli.turn(&self.home, &self.cfg, &self.info, &input.shown);
        let ran = match self.run(inv, env, Some(op.as_ref()), &mut log, &input.op_id).await {
            Ok(r) => r,
            Err(e) => return report(TurnEnd::Failed(e.to_string()), Usage::default(), false, &op),
        };
        let mut ran = ran;
        self.cli.after_turn(&self.home, &mut ran.turn);
        if ran.turn.session_id.is_some() {
            self.session_id = ran.turn.session_id.clone();
        }
        self.write_back_credentials(&mut log);
        let end = match self.judge(&ran) {
            _ if input.slot.answer().is_some() => TurnEnd::Ended,
            Some(why) => TurnEnd::Failed(why),
            None => TurnEnd::Ended,
        };
        report(end, ran.turn.usage, ran.turn.cost_reported, &op)
    }

    async fn run_compact(&mut self, prompt: String) -> crate::harness::Compaction {
        if self.pane.is_some() {
            let why = "compacting an agent in a pane is not built: the CLI runs on in its pane; open it headless to compact it";
            return crate::harness::Compaction::free(Err(HarnessError::Cannot(why.into())), false);
        }
        let inv = match self.cli.compact(&self.home, &self.cfg, &self.info, &prompt) {
            Ok(inv) => inv,
            Err(why) => return crate::harness::Compaction::free(Err(why), false),
        };
        self.compactions += 1;
        let id = format!("compact-{}", self.compactions);
        let mut log = OpLog::open(&self.agent_dir, &id);
        self.seed_credentials();
        let env = match self.environment(None) {
            Ok(e) => e,
            Err(why) => return crate::harness::Compaction::free(Err(why), false),
        };
        let mut ran = match self.run(inv, env, None, &mut log, &id).await {
            Ok(r) => r,
            Err(why) => return crate::harness::Compaction::free(Err(why), false),
        };
        self.cli.after_turn(&self.home, &mut ran.turn);
        self.write_back_credentials(&mut log);
        let summary = if ran.turn.compacted {
            Ok(ran.turn.text.trim().to_string())
        } else {
            let why = self.judge(&ran).unwrap_or_else(|| format!("{} did not compact the session", self.cli.harness()));
            Err(HarnessError::Failed(why))
        };
        let cost_source = if ran.turn.cost_reported { CostSource::Harness } else { CostSource::Priced };
        crate::harness::Compaction { summary, usage: ran.turn.usage, cost_source, simulated: false }
    }
}

impl Session for CliSession {
    fn session_ref(&self) -> Option<crate::harness::SessionRef> {
        let id = self.session_id.clone()?;
        Some(crate::harness::SessionRef { id, forked_from: self.forked_from.clone() })
    }

    fn caller_probe(&self) -> Option<super::caller::CallerProbe> {
        self.cli.probe(&self.home)
    }

    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        if self.pane.is_some() {
            return Box::pin(async move {
                let report = self.pane_turn(input).await;
                self.pane_after_turn();
                report
            });
        }
        Box::pin(self.run_turn(input))
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, HarnessError> {
        let (dir, endpoint, sandbox) =
            (self.opener)(&info.key, self.sandbox.as_ref().map(|s| (s, self.cli.harness())))?;
        let home = dir.join("home");
        copy_tree(&self.home, &home, &|name| self.cli.fork_copies(name))
            .map_err(|e| HarnessError::io(format!("cannot copy {} to {}", self.home.display(), home.display()), e))?;
        let cli = self.cli.fork(&self.home, &home)?;
        let mut cfg = self.cfg.clone();
        cfg.effort = info.effort.clone().or(cfg.effort);
        let mut session = Self::with(info, cfg, cli, self.cwd.clone(), dir, home, endpoint, self.opener.clone());
        session.forked_from = self.session_id.clone();
        Ok(Box::new(session.sandboxed(sandbox)))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, crate::harness::Compaction> {
        Box::pin(self.run_compact(prompt.to_string()))
    }

    fn export(&self) -> Option<crate::harness::SessionExport> {
        let id = self.session_id.as_deref()?;
        let credentials: Vec<PathBuf> = self.credentials.iter().map(|c| c.local.clone()).collect();
        Some(super::carry::pack(&self.home, id, &|name| self.cli.fork_copies(name), &credentials))
    }

    fn import(&mut self, session: crate::harness::SessionExport) -> Result<(), HarnessError> {
        let crate::harness::SessionExport::Home { session, files } = session else {
            return Err(HarnessError::Stored("the stored session is not a CLI agent's home".into()));
        };
        super::carry::unpack(&self.home, &files)?;
        self.cli.resume(&self.home, &session)?;
        self.session_id = Some(session);
        Ok(())
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), HarnessError> {
        if let Some(m) = model {
            self.cfg.model = Some(m.to_string());
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.cfg.effort = Some(e.to_string());
            self.info.effort = Some(e.to_string());
        }
        // A CLI in a pane takes the change when the next turn starts it again, its session resumed.
        if let Some(seat) = &mut self.pane {
            seat.restart();
        }
        Ok(())
    }

    fn endpoint(&self) -> Option<Arc<Endpoint>> {
        Some(self.endpoint.clone())
    }
}
