//! `awf init [--runtime NAME]`: writes an `awf.toml` that shows every setting (commented, with
//! its default), one runtime per harness, and an example workflow; refuses to overwrite.

use crate::config::HarnessKind;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct InitArgs {
    /// Folder to initialise
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The runtime made active and default: fake (offline), claude, codex, pi, openai (also
    /// llama-server, Ollama, vLLM) or anthropic
    #[arg(long, value_name = "HARNESS", default_value = "fake", value_parser = harness)]
    runtime: HarnessKind,
}

fn harness(name: &str) -> Result<HarnessKind, String> {
    HarnessKind::ALL.into_iter().find(|k| k.as_str() == name).ok_or_else(|| {
        let names: Vec<&str> = HarnessKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("unknown harness `{name}` (one of: {})", names.join(", "))
    })
}

/// One runtime per harness: its table, the key lines that make it work, and the optional ones.
fn runtime_block(kind: HarnessKind) -> (&'static str, &'static str, &'static str) {
    match kind {
        HarnessKind::Fake => (
            "# Offline and free: every answer is a schema-valid value built from the schema.",
            "harness = \"fake\"",
            "# responder = \"responder.rhai\"     # a Rhai file with fn respond(turn) scripting the answers",
        ),
        HarnessKind::Claude => (
            "# Claude Code, driven headless (the `claude` CLI must be installed and logged in).",
            "harness = \"claude\"",
            "# model = \"claude-sonnet-4-5\"       # omitted: Claude Code's own default
# effort = \"high\"
# base_url = \"http://127.0.0.1:8080\"  # a gateway or compatible server (ANTHROPIC_BASE_URL)
# api_key_env = \"ANTHROPIC_API_KEY\"   # the variable holding the key for base_url
# args = [\"--allowedTools\", \"Edit\"]   # extra flags
# env = { MY_SETTING = \"1\" }          # extra environment",
        ),
        HarnessKind::Codex => (
            "# OpenAI's Codex CLI, driven headless (`codex` installed and logged in).",
            "harness = \"codex\"",
            "# model = \"gpt-5-codex\"             # omitted: Codex's own default
# effort = \"high\"
# base_url = \"http://127.0.0.1:8080/v1\"  # a Responses-API provider (mind the /v1)
# api_key_env = \"OPENAI_API_KEY\"
# args = [\"-c\", \"hide_agent_reasoning=true\"]",
        ),
        HarnessKind::Pi => (
            "# The pi coding agent, driven headless (`pi` installed).",
            "harness = \"pi\"",
            "# model = \"gpt-5-mini\"
# base_url = \"http://127.0.0.1:8080/v1\"  # a chat-completions provider (mind the /v1)
# api_key_env = \"OPENAI_API_KEY\"
# args = [\"--no-skills\"]",
        ),
        HarnessKind::Openai => (
            "# A chat-completions API: OpenAI, or a server on this machine.",
            "harness = \"openai\"",
            "model = \"gpt-5-mini\"
# base_url = \"http://127.0.0.1:8080/v1\"   # llama-server; Ollama: http://127.0.0.1:11434/v1;
#                                         # vLLM: http://127.0.0.1:8000/v1; default: api.openai.com
# api_key_env = \"OPENAI_API_KEY\"          # not needed for a server on this machine
# answer = \"structured\"                   # the reply is the answer (models that make no tool
#                                         # calls, e.g. small local ones); default \"tools\"
# max_tokens = 4096
# context_tokens = 8192                   # the model's context; `awf doctor` reads it from the server
# auto_compact = true                     # with context_tokens: past 80%, summarise before a turn
# request_timeout = \"120s\"              # a reply's first byte (a slow local model may need more)
# idle_timeout = \"60s\"                  # between streamed chunks
# effort = \"low\"",
        ),
        HarnessKind::Anthropic => (
            "# Anthropic's Messages API.",
            "harness = \"anthropic\"",
            "model = \"claude-sonnet-4-5\"
# api_key_env = \"ANTHROPIC_API_KEY\"
# base_url = \"https://api.anthropic.com\"
# max_tokens = 4096
# context_tokens = 200000",
        ),
        HarnessKind::Command => (
            "# Any program: it reads the prompt on stdin and answers with `$AWF_LAUNCHER result`.",
            "harness = \"command\"",
            "command = [\"python3\", \"agents/reviewer.py\"]",
        ),
    }
}

const ORDER: [HarnessKind; 7] = [
    HarnessKind::Fake,
    HarnessKind::Claude,
    HarnessKind::Codex,
    HarnessKind::Pi,
    HarnessKind::Openai,
    HarnessKind::Anthropic,
    HarnessKind::Command,
];

const REST: &str = r#"
# Per harness: the program a CLI harness runs, and how many of its operations run at once.
# [harnesses.claude]
# command = "claude"
# max_concurrency = 4

[limits]
# max_concurrency = 16        # operations at once (--max-concurrency)
# max_agents = 1000           # agents a run may open (--max-agents)
# nudges = 2                  # check-ins after a turn that ended without an answer
# stall_timeout = "10m"       # no output or event for this long fails the operation `stalled`
# budget_usd = 5.0            # no operation starts once the run has spent this (--budget-usd)
# budget_tokens = 2000000     # the same in tokens (--budget-tokens)
# deadline = "30m"            # the run's wall-clock limit (--deadline)
# background = 4              # background runs (--detach) at once on this machine
# council_depth = 2           # how deep councils convened from agents' turns may nest
# script_operations = 50000000 # operations a script thread may make (runaway-loop guard)
# confirm_usd = 1.0           # plan new runs first; ask before one whose plan may pass this (--confirm-above)

# USD per million tokens, for models the built-in table does not know (a model with no price is
# recorded as unpriced, and awf warns once per model).
# [prices."my-model"]
# input = 1.0
# output = 4.0
# cache_read = 0.1
# cache_write = 1.25

# A sandbox (bubblewrap) for command and CLI agents: `sandbox: "default"` in an agent spec, or
# `--sandbox default` for every agent of a run. Every field has a strict default.
# [sandboxes.default]
# provider = "bwrap"
# network = "none"            # "host" for agents that call a model server
# writable = ["build"]        # folders it may write besides its workspace and its own home
# read_only = []              # folders or files shown read-only (the operator's home is hidden)
# env = ["OPENAI_API_KEY"]    # variables passed in besides PATH, LANG, TERM, TZ; `NAME_*` by prefix

# The decision model `ctx.decisions.decide` asks closed questions (without it, decide is refused).
# Name a runtime, or give this table a runtime's own keys instead (harness, model, responder, ...).
# [decisions]
# runtime = "fake"
# logprobs = true             # ask an openai server for log-probabilities (false for models that refuse them)

# OpenTelemetry traces over OTLP/HTTP (else OTEL_EXPORTER_OTLP_ENDPOINT).
# [telemetry]
# otlp_endpoint = "http://127.0.0.1:4318"
# capture_content = false     # put answers into the spans

# Agent operations and whole runs on NATS JetStream, run by `awf worker`s. The `--nats*` flags
# override each key; relative paths are from the working folder. Secrets only from variables.
# [cluster]
# nats = "nats://127.0.0.1:4222"   # or "nats://a:4222,nats://b:4222", or ["nats://a:4222", "nats://b:4222"]
# user_env = "AWF_NATS_USER"        # the variables holding a user and its password
# password_env = "AWF_NATS_PASSWORD"
# token_env = "AWF_NATS_TOKEN"      # or a token's variable
# nkey = "/etc/awf/nats.nk"         # or an nkey seed file (0600, --nats-nkey)
# creds = "/etc/awf/nats.creds"     # or a credentials file, JWT and seed (0600, --nats-creds)
# tls_ca = "/etc/awf/ca.pem"        # the CA the servers' certificates are checked against (--nats-tls-ca)
# tls_cert = "/etc/awf/client.pem"  # a client certificate and its key, for mutual TLS
# tls_key = "/etc/awf/client-key.pem"
# tls_required = false              # refuse plain connections (a CA or certificate implies it)
# key_file = ".awf/cluster.key"  # the key messages are signed with (else AWF_CLUSTER_KEY; generated, 0600)
"#;

/// The whole file, with `active`'s runtime on and the default.
pub fn config_text(active: HarnessKind) -> String {
    let mut out = format!(
        "# awf configuration: every setting, commented with its default. `awf doctor` tells which\n\
         # runtimes work on this machine; `awf init --runtime NAME` writes this file with another one on.\n\
         default_runtime = \"{active}\"\n\
         # runs_dir = \".awf/runs\"          # where runs are recorded (--runs-dir)\n"
    );
    for kind in ORDER {
        let (about, key, optional) = runtime_block(kind);
        let on = kind == active;
        let prefix = if on { "" } else { "# " };
        out += &format!("\n{about}\n{prefix}[runtimes.{kind}]\n{prefix}{key}\n");
        for line in optional.lines() {
            // An inactive runtime's required lines are commented too.
            if on || line.starts_with('#') {
                out += line;
            } else {
                out += &format!("# {line}");
            }
            out.push('\n');
        }
    }
    out + REST
}

const EXAMPLE: &str = r#"// A first workflow: three agents each propose a name in parallel, a fourth picks one.
export const META = #{
    name: "hello",
    description: "Ask three agents for a name, then let a judge pick one",
    args: #{ type: "object", properties: #{ topic: #{ type: "string" } } },
};

fn run(args) {
    let topic = args.topic ?? "a tool that runs agent workflows";
    // A name is short: the schema says so, and a server that turns schemas into grammars (small
    // local models in structured mode) cannot ramble past it.
    let name = #{ type: "string", minLength: 2, maxLength: 40 };
    let ideas = ctx.stage("ideas", #{ result: #{ type: "array", minItems: 1 } }, || {
        // Settled: an idea that failed is left out (and logged), the others go on.
        let tried = ctx.parallel_settled([1, 2, 3], |n, i| {
            let a = ctx.agents.open(#{ key: `ideas-${n}` });
            a.ask(`Propose one short name for ${topic}. Answer with the name only.`, name)
        }, #{ label: "ideas" });
        let got = [];
        for t in tried {
            if t.ok { got.push(t.value); } else { ctx.warn(`an idea failed: ${t.error}`); }
        }
        if got.is_empty() { throw "no agent proposed a name"; }
        got
    });
    let judge = ctx.agents.open(#{ key: "judge" });
    let list = "";
    for idea in ideas { list += `- ${idea}\n`; }
    let pick = judge.ask(`Pick the best name among:\n${list}`,
        #{ type: "object", properties: #{ name: name, why: #{ type: "string", maxLength: 200 } },
           required: ["name", "why"] });
    #{ ideas: ideas, pick: pick }
}
"#;

pub fn exec(args: InitArgs) -> Result<i32> {
    if args.runtime == HarnessKind::Command {
        bail!("--runtime command needs a program: write its [runtimes.NAME] with `command = [...]` (awf init shows one, commented)");
    }
    let config = args.dir.join("awf.toml");
    let example = args.dir.join("scripts").join("hello.rhai");
    for p in [&config, &example] {
        if p.exists() {
            bail!("{} already exists; awf init does not overwrite files", p.display());
        }
    }
    std::fs::create_dir_all(example.parent().unwrap_or(&args.dir))
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    std::fs::write(&config, config_text(args.runtime)).with_context(|| format!("cannot write {}", config.display()))?;
    std::fs::write(&example, EXAMPLE).with_context(|| format!("cannot write {}", example.display()))?;
    out!("wrote {} (runtime: {}) and {}", config.display(), args.runtime, example.display());
    out!("check what works here with: awf doctor");
    out!("run it with: awf script run {}", example.display());
    Ok(super::EXIT_OK)
}
