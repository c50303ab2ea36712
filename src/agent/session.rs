//! Starting an agent's harness session: its folder under `agents/`, the control endpoint and
//! launcher for process harnesses, the HTTP settings, the CLI endpoint opener, and the sandbox seat.

use super::AgentBook;
use super::{OpenError, OpenRequest};
use crate::config::{HarnessKind, RuntimeConfig};
use crate::control::server::Endpoint;
use crate::harness::{self, AgentInfo, HarnessError, Session};
use crate::run::Run;
use std::path::PathBuf;
use std::sync::Arc;

/// A harness session and, for harnesses that answer through one, its control endpoint.
type SessionParts = (Box<dyn Session>, Option<Arc<Endpoint>>);

impl AgentBook {
    /// Starts the harness session (and for `command`, the control socket and launcher; for a pane
    /// agent, its pane, placed `beside` what the layout named when it can be). Every failure here
    /// is the configuration's (`OpenError::is_config`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn session_for(
        &self,
        req: &OpenRequest,
        runtime: &RuntimeConfig,
        info: &AgentInfo,
        responder: Option<Arc<dyn harness::Responder>>,
        sandbox: Option<&crate::sandbox::Chosen>,
        skills: &[harness::cli::skills::Skill],
        beside: Option<super::panes::Beside>,
    ) -> Result<SessionParts, OpenError> {
        let run = &self.run;
        if let Some(remote) = self.remote() {
            return Ok((remote.session(req, runtime, info)?, None));
        }
        let events = event_sink(run);
        if runtime.harness == HarnessKind::Fake {
            let stall = run.scheduler.limits.stall_timeout;
            return Ok((Box::new(harness::fake::FakeSession::new(info.clone(), responder, events, stall)), None));
        }
        let slug = self.claim_slug(&req.key);
        let dir = crate::record::agent_files::agent_dir(run.dir(), &slug);
        let awf = self.launcher().map_err(OpenError::Launcher)?;
        let of_agent = |e: HarnessError| OpenError::Harness(e.of_agent(&req.key));
        if runtime.harness.is_http() {
            let stall = run.scheduler.limits.stall_timeout;
            let cfg = harness::http::HttpConfig::of(&req.key, runtime, stall, run.secrets.clone())?;
            let session = harness::http::HttpSession::new(info.clone(), cfg, Some(dir.join("history.json")), events)
                .map_err(|e| of_agent(e.into()))?;
            return Ok((Box::new(session), None));
        }
        let argv = runtime.command.clone().unwrap_or_default();
        let endpoint = {
            let _rt = run.rt.enter();
            let messenger: Arc<dyn crate::control::messenger::Messenger> = Arc::new(self.messenger(&req.key));
            Endpoint::open(&dir, &req.key, &awf, run_tag(run), events, messenger).map_err(|e| {
                of_agent(HarnessError::io(format!("cannot open its control socket in {}", dir.display()), e))
            })?
        };
        let endpoint = Arc::new(endpoint);
        // In a worktree, a spec's cwd is relative to it, and the worktree is the sandbox's workspace.
        let worktree = self.worktrees.path_of(&req.key);
        let worktree = worktree.as_deref();
        let root = worktree.unwrap_or(&run.cwd);
        let cwd = match &req.cwd {
            Some(c) if c.is_absolute() && worktree.is_some_and(|w| !c.starts_with(w)) => {
                return Err(OpenError::Config(format!(
                    "agent {}: with isolation \"worktree\" its `cwd` is relative to its worktree; {} lies outside it",
                    req.key,
                    c.display()
                )))
            }
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => root.join(c),
            None => root.to_path_buf(),
        };
        let cli = runtime.harness.is_cli();
        let cli_program = run.config.harnesses.get(runtime.harness.as_str()).and_then(|h| h.command.clone());
        // A CLI agent is seated by its program (its home is the seat's home, `agents/<slug>/home`).
        let seated_program = match (cli, &cli_program) {
            (false, _) => argv.clone(),
            (true, Some(p)) => vec![p.clone()],
            (true, None) => vec![runtime.harness.to_string()],
        };
        let repository = worktree.and(self.worktrees.git_common());
        let sandbox = match sandbox {
            Some(chosen) => {
                let place = crate::sandbox::seat::Placement {
                    program: &seated_program,
                    cwd: &cwd,
                    workspace: &cwd,
                    control: &dir,
                    socket: &endpoint.socket,
                    run_dir: run.dir(),
                    awf: &awf,
                    project: &run.cwd,
                    repository: repository.as_deref(),
                };
                let seated = self.sandboxes.seat(run, chosen, place, runtime, worktree);
                Some(seated.map_err(|source| OpenError::Seat { agent: req.key.clone(), source })?)
            }
            None => None,
        };
        if cli {
            let cfg = harness::cli::CliConfig::from_runtime(runtime, cli_program, run.scheduler.limits.stall_timeout);
            let opener = cli_endpoint_opener(self.me.clone(), awf.clone());
            let session = harness::cli::CliSession::open(
                runtime.harness,
                info.clone(),
                cfg,
                cwd.clone(),
                dir,
                endpoint.clone(),
                opener,
            )
            .and_then(|s| s.with_skills(skills))
            .and_then(|s| s.forking(req.fork_caller.as_deref()))
            .map_err(of_agent)?;
            let session = session.sandboxed(sandbox.clone());
            let session = match &req.pane {
                Some(spec) => {
                    let pane = |source: super::panes::PaneOpenError| OpenError::Pane { agent: req.key.clone(), source };
                    let stage = crate::run::scope::current().and_then(|f| f.stage.clone());
                    let (tmux, record) = self
                        .panes
                        .open(run, &req.key, runtime.harness.as_str(), spec, beside, stage.as_deref(), &awf, &cwd)
                        .map_err(|e| pane(e.into()))?;
                    let seat = harness::cli::interactive::PaneSeat::new(tmux, record.target, awf);
                    session.in_pane(seat).map_err(|e| pane(e.into()))?
                }
                None => session,
            };
            if let Some(s) = &sandbox {
                self.sandboxes.seated(run, s, &req.key, runtime.harness);
            }
            return Ok((Box::new(session), Some(endpoint)));
        }
        let session = harness::command::CommandSession::new(
            info.clone(),
            argv,
            cwd,
            dir,
            endpoint.clone(),
            run.scheduler.limits.stall_timeout,
        )
        .map_err(of_agent)?;
        if let Some(s) = &sandbox {
            self.sandboxes.seated(run, s, &req.key, runtime.harness);
        }
        Ok((Box::new(session.sandboxed(sandbox)), Some(endpoint)))
    }
}

/// What an agent's endpoint knows of its run.
fn run_tag(run: &Run) -> crate::control::server::RunTag {
    crate::control::server::RunTag {
        id: run.id.clone(),
        dir: run.dir().to_path_buf(),
        attempt: run.attempt,
        secrets: run.secrets.clone(),
    }
}

/// Opens the control folder and socket of an agent forked from a CLI agent (a fork answers
/// through a launcher of its own), and seats it in its parent's sandbox when there is one.
/// Where a harness and an agent's socket record their events: the run's records, while it lives.
fn event_sink(run: &Arc<Run>) -> crate::control::server::EventSink {
    let weak = Arc::downgrade(run);
    Arc::new(move |event: &crate::run::Event<'_>| {
        if let Some(r) = weak.upgrade() {
            r.records.event(event);
            // A request tried again is shown as it happens: a silent server is not waited on in
            // silence.
            let secs = |ms: &u64| humantime::format_duration(std::time::Duration::from_secs(ms / 1000));
            match event {
                crate::run::Event::HttpRetry { agent, attempt, of, wait_ms, why } => {
                    let wait = humantime::format_duration(std::time::Duration::from_millis(*wait_ms));
                    r.progress.line("warn", &format!("agent {agent}: {why}; try {} of {of} in {wait}", attempt + 1));
                }
                crate::run::Event::HttpWaiting { agent, url, waited_ms, limit_ms } => r.progress.line(
                    "info",
                    &format!(
                        "agent {agent}: waiting on {url}: no first byte for {} (a busy server queues requests; given up after {})",
                        secs(waited_ms),
                        secs(limit_ms)
                    ),
                ),
                _ => {}
            }
        }
    })
}

fn cli_endpoint_opener(book: std::sync::Weak<AgentBook>, awf: PathBuf) -> harness::cli::EndpointOpener {
    Arc::new(move |key: &str, parent: Option<(&crate::sandbox::Sandbox, HarnessKind)>| {
        let book = book.upgrade().ok_or_else(|| HarnessError::Cannot("the run has ended".into()))?;
        let run = &book.run;
        let slug = book.claim_slug(key);
        let dir = crate::record::agent_files::agent_dir(run.dir(), &slug);
        let events = event_sink(run);
        let messenger: Arc<dyn crate::control::messenger::Messenger> = Arc::new(book.messenger(key));
        let _rt = run.rt.enter();
        let endpoint = Endpoint::open(&dir, key, &awf, run_tag(run), events, messenger).map_err(|e| {
            HarnessError::io(format!("cannot open its control socket in {}", dir.display()), e).of_agent(key)
        })?;
        let sandbox = match parent {
            Some((p, harness)) => {
                let s = p.reseat(&dir, &endpoint.socket).map_err(|e| HarnessError::from(e).of_agent(key))?;
                book.sandboxes.seated(run, &s, key, harness);
                Some(s)
            }
            None => None,
        };
        Ok((dir, Arc::new(endpoint), sandbox))
    })
}
