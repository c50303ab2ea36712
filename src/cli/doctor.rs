//! `awf doctor`: what works on this machine, as a list of checks (a name, an ok flag, a detail;
//! `unchecked` marks what only `--deep` can tell). Exit 0 when no check fails, 1 otherwise. To check something new (a CLI harness's binary, an
//! API key's variable), write a function returning `Vec<Check>` and add it to `checks`. `--deep`
//! sends each reachable HTTP runtime one tiny real request (`harness::http::probe`): does its model
//! call tools, and what context does its server give it.

use super::{EXIT_FAILED, EXIT_OK};
use crate::config::HarnessKind;
use crate::sandbox::{provider, Confinement};
use anyhow::Result;
use serde::Serialize;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as a JSON array of {name, ok, detail} (and `unchecked: true` on what was
    /// not checked)
    #[arg(long)]
    json: bool,
    /// Also send each reachable HTTP runtime one tiny real request (it is billed): whether its
    /// model calls tools, and the context its server gives it
    #[arg(long)]
    deep: bool,
}

/// One thing awf needs, and whether this machine has it.
#[derive(Debug, Serialize)]
pub struct Check {
    pub name: String,
    /// Checked and found working; false for a failure and for what was not checked.
    pub ok: bool,
    /// Not checked (it needs `--deep`): neither a pass nor a failure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
    /// What was found, or what is wrong and how to fix it.
    pub detail: String,
}

impl Check {
    fn new(name: &str, ok: bool, detail: impl Into<String>) -> Check {
        Check { name: name.into(), ok, unchecked: false, detail: detail.into() }
    }

    /// What only `--deep` can tell, said as not checked.
    fn unchecked(name: &str, detail: impl Into<String>) -> Check {
        Check { name: name.into(), ok: false, unchecked: true, detail: detail.into() }
    }

    fn failed(&self) -> bool {
        !self.ok && !self.unchecked
    }
}

/// Every check, in the order they are shown.
fn checks(deep: bool) -> Vec<Check> {
    let mut all = sandbox_checks();
    all.extend(harness_checks());
    let config = match std::env::current_dir()
        .map_err(|e| e.to_string())
        .and_then(|cwd| crate::config::Config::load(&cwd).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            all.push(Check::new("config", false, e));
            crate::config::Config::default()
        }
    };
    // The CLI harnesses: installed (the program `[harnesses.X] command` names), and the pinned version.
    let program = |h: HarnessKind| config.harnesses.get(h.as_str()).and_then(|c| c.command.clone());
    let clis = crate::harness::cli::doctor_checks(&program);
    all.extend(cli_runtime_checks(&config, &clis));
    all.extend(clis.into_iter().map(|(name, ok, detail)| Check::new(&name, ok, detail)));
    all.extend(http_checks(&config, deep));
    all.push(pane_check());
    all.extend(decisions_check(&config));
    all
}

/// tmux, for agents opened with `placement: "pane"`.
fn pane_check() -> Check {
    match crate::pane::Tmux::default().version() {
        Ok(v) => Check::new("panes: tmux", true, format!("{v}: agents with placement: \"pane\" can run here")),
        Err(why) => Check::new("panes: tmux", false, why.to_string()),
    }
}

/// The decision model `ctx.decisions.decide` asks, when `[decisions]` names one: resolved as a
/// decision resolves it.
fn decisions_check(config: &crate::config::Config) -> Option<Check> {
    let decisions = config.decisions.as_ref()?;
    Some(match crate::decision::ask::provider(config, decisions) {
        Ok((_, r)) => {
            let model = r.model.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
            let confidence = match (r.harness, decisions.logprobs) {
                (HarnessKind::Openai, true) => "the distribution read from log-probabilities",
                _ => "the model's own confidence",
            };
            Check::new("decisions", true, format!("{}{model}; {confidence}", r.harness))
        }
        Err(why) => Check::new("decisions", false, why.to_string()),
    })
}

/// Each configured CLI runtime: its program usable (from the CLI checks), its `base_url` reachable.
fn cli_runtime_checks(config: &crate::config::Config, clis: &[(String, bool, String)]) -> Vec<Check> {
    let mut out = Vec::new();
    for (alias, runtime) in config.runtimes.iter().filter(|(_, r)| r.harness.is_cli()) {
        let name = format!("runtime: {alias}");
        let cli = clis.iter().find(|(n, _, _)| *n == format!("cli: {}", runtime.harness));
        if let Some((_, false, why)) = cli {
            out.push(Check::new(&name, false, format!("its program is not usable: {why}")));
            continue;
        }
        out.push(match &runtime.base_url {
            None => Check::new(&name, true, format!("{} with its own model server", runtime.harness)),
            Some(url) => match reach(url) {
                Ok(d) => Check::new(&name, true, format!("{} against {d}", runtime.harness)),
                Err(d) => Check::new(&name, false, d),
            },
        });
    }
    out
}

/// Whether something answers a TCP connection at `url`'s host and port, within 3 s.
fn reach(url: &str) -> Result<String, String> {
    let addr = crate::harness::http::authority(url).and_then(|a| {
        use std::net::ToSocketAddrs;
        a.to_socket_addrs().ok()?.next()
    });
    match addr {
        None => Err(format!("{url}: the host does not resolve")),
        Some(addr) => std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3))
            .map(|_| format!("{url}, which answers"))
            .map_err(|e| format!("{url}: server unreachable ({e})")),
    }
}

/// Each configured HTTP runtime: its API key present, its server reachable; with `deep`, what one
/// real request shows.
fn http_checks(config: &crate::config::Config, deep: bool) -> Vec<Check> {
    let mut out = Vec::new();
    for (alias, runtime) in config.runtimes.iter().filter(|(_, r)| r.harness.is_http()) {
        let target = crate::harness::http::Target::of(runtime);
        let name = format!("runtime: {alias}");
        if target.api_key.is_none() && !target.local {
            out.push(Check::new(
                &name,
                false,
                format!("{} needs an API key: set ${}", target.base_url, target.key_var),
            ));
            continue;
        }
        let reachable = target.authority().and_then(|a| {
            use std::net::ToSocketAddrs;
            a.to_socket_addrs().ok()?.next()
        });
        let detail = match reachable {
            None => Err(format!("{}: the host does not resolve", target.base_url)),
            Some(addr) => std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3))
                .map(|_| format!("{} ({}) answers", target.base_url, runtime.harness))
                .map_err(|e| format!("{}: server unreachable ({e})", target.base_url)),
        };
        let reached = detail.is_ok();
        out.push(match detail {
            Ok(d) => Check::new(&name, true, d),
            Err(d) => Check::new(&name, false, d),
        });
        if reached {
            out.extend(server_checks(alias, runtime, deep));
        }
    }
    out
}

/// What a reachable runtime's server says: the context it gives the model, against the
/// `context_tokens` the runtime declares; with `deep`, whether the model calls tools (which tools
/// mode needs), from one real request.
fn server_checks(alias: &str, runtime: &crate::config::RuntimeConfig, deep: bool) -> Vec<Check> {
    // The key is the only secret here: scrubbed from any error a server echoes.
    let key = crate::harness::http::Target::of(runtime).api_key;
    let redactor = std::sync::Arc::new(crate::redact::Redactor::of_values(key));
    let cfg =
        match crate::harness::http::HttpConfig::of("doctor", runtime, std::time::Duration::from_secs(60), redactor) {
            Ok(c) => c,
            Err(why) => return vec![Check::new(&format!("runtime: {alias}: settings"), false, why.to_string())],
        };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            return vec![Check::new(&format!("runtime: {alias}: tools"), false, format!("no async runtime: {e}"))]
        }
    };
    let structured = cfg.structured;
    let (model, declared) = (cfg.model.clone(), cfg.context_tokens);
    let (calls, context) = rt.block_on(async {
        let context = crate::harness::http::probe::server_context(&cfg).await;
        let calls = if deep { Some(crate::harness::http::probe::calls_tools(cfg).await) } else { None };
        (calls, context)
    });
    let mut out: Vec<Check> = match calls {
        Some(c) => vec![tools_check(alias, &model, structured, c)],
        // Tools mode answers only through a tool call, which many small models never make.
        None if !structured => vec![Check::unchecked(
            &format!("runtime: {alias}: tools"),
            format!("tools mode needs model {model} to call tools; not checked: `awf doctor --deep` asks it (one small request), or set answer = \"structured\""),
        )],
        None => Vec::new(),
    };
    out.push(context_check(&format!("runtime: {alias}: context"), context, declared));
    out
}

/// Whether the model called the tool it was asked to call.
fn tools_check(
    alias: &str,
    model: &str,
    structured: bool,
    calls: Result<(bool, crate::accounting::Usage), crate::harness::http::HttpError>,
) -> Check {
    let name = format!("runtime: {alias}: tools");
    match calls {
        Err(why) => Check::new(&name, false, format!("the request failed: {why}")),
        Ok((true, u)) => Check::new(&name, true, format!("model {model} calls tools ({} tokens spent)", u.tokens())),
        Ok((false, u)) if structured => Check::new(
            &name,
            true,
            format!("model {model} made no tool call ({} tokens spent); answer = \"structured\" does not need tools", u.tokens()),
        ),
        Ok((false, u)) => Check::new(
            &name,
            false,
            format!("model {model} made no tool call when asked to ({} tokens spent): tools mode cannot answer through it; set answer = \"structured\"", u.tokens()),
        ),
    }
}

/// The context the server gives the model against the runtime's `context_tokens`.
fn context_check(name: &str, server: Option<(u64, &str)>, declared: Option<u64>) -> Check {
    match (server, declared) {
        (None, Some(d)) => {
            Check::new(name, true, format!("context_tokens = {d} (the server does not say its context)"))
        }
        (None, None) => {
            Check::new(name, true, "the server does not say its context; declare context_tokens if you know it")
        }
        (Some((n, from)), Some(d)) if d > n => Check::new(
            name,
            false,
            format!("context_tokens = {d}, but the server gives {n} tokens ({from}): set context_tokens = {n}"),
        ),
        (Some((n, from)), Some(d)) => {
            Check::new(name, true, format!("context_tokens = {d}; the server gives {n} ({from})"))
        }
        (Some((n, from)), None) => Check::new(
            name,
            true,
            format!("the server gives {n} tokens ({from}): declare context_tokens = {n} so requests are sized to it"),
        ),
    }
}

/// Whether sandboxes can be made: bwrap on PATH, then the same probe a run uses.
fn sandbox_checks() -> Vec<Check> {
    let bwrap = match provider::find(std::env::var_os("PATH").as_deref()) {
        Ok(b) => b,
        Err(why) => return vec![Check::new("sandbox: bwrap", false, why.to_string())],
    };
    let version = provider::version(&bwrap).unwrap_or_else(|| "version unknown".into());
    let probe = match provider::probe(&bwrap) {
        Ok(()) => Check::new("sandbox: namespaces", true, "bwrap --unshare-all works here: sandboxed agents can run"),
        Err(why) => Check::new("sandbox: namespaces", false, why.to_string()),
    };
    vec![Check::new("sandbox: bwrap", true, format!("{} ({version})", bwrap.display())), probe]
}

/// The harnesses this build drives, and how each meets a sandbox.
fn harness_checks() -> Vec<Check> {
    HarnessKind::ALL
        .iter()
        .map(|name| {
            let sandbox = match name.confinement() {
                Confinement::Wrapped => "its program runs inside the agent's sandbox",
                Confinement::InProcess => "runs inside awf: a sandbox is recorded but has nothing to confine",
            };
            Check::new(&format!("harness: {name}"), true, format!("built; {sandbox}"))
        })
        .collect()
}

pub fn exec(args: DoctorArgs) -> Result<i32> {
    let checks = checks(args.deep);
    if args.json {
        out!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            let mark = if c.ok {
                "ok"
            } else if c.unchecked {
                "?"
            } else {
                "FAIL"
            };
            out!("{mark:<4}  {:<width$}  {}", c.name, c.detail);
        }
    }
    Ok(if checks.iter().any(Check::failed) { EXIT_FAILED } else { EXIT_OK })
}
