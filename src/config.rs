//! Owns `awf.toml`: where it is found, its shape, and turning runtime aliases into harness choices.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors in the configuration, each naming the file or the thing it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config {path} is not a file (a directory?): remove it, or make it the awf.toml file")]
    NotAFile { path: PathBuf },
    #[error("bad config {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("unknown runtime alias `{alias}` (looked in {place}; known: {known})")]
    UnknownRuntime { alias: String, place: String, known: String },
    #[error("unknown sandbox `{name}` (looked in {place}; known: {known}); define [sandboxes.{name}] or give an inline policy map")]
    UnknownSandbox { name: String, place: String, known: String },
    #[error("bad value for {field} in {place}: {message}")]
    BadValue { field: String, place: String, message: String },
}

/// The harnesses awf drives: what a runtime's `harness` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HarnessKind {
    /// An in-process responder: no model (tests, offline demos).
    #[default]
    Fake,
    /// Any executable.
    Command,
    Claude,
    Codex,
    Pi,
    /// OpenAI-compatible chat completions over HTTP.
    Openai,
    /// The Anthropic Messages API over HTTP.
    Anthropic,
}

impl HarnessKind {
    pub const ALL: [HarnessKind; 7] = [
        HarnessKind::Fake,
        HarnessKind::Command,
        HarnessKind::Claude,
        HarnessKind::Codex,
        HarnessKind::Pi,
        HarnessKind::Openai,
        HarnessKind::Anthropic,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HarnessKind::Fake => "fake",
            HarnessKind::Command => "command",
            HarnessKind::Claude => "claude",
            HarnessKind::Codex => "codex",
            HarnessKind::Pi => "pi",
            HarnessKind::Openai => "openai",
            HarnessKind::Anthropic => "anthropic",
        }
    }

    /// An agent CLI run per turn (Claude Code, Codex, pi).
    pub fn is_cli(self) -> bool {
        matches!(self, HarnessKind::Claude | HarnessKind::Codex | HarnessKind::Pi)
    }

    /// A model API over HTTP.
    pub fn is_http(self) -> bool {
        matches!(self, HarnessKind::Openai | HarnessKind::Anthropic)
    }

    /// The model recorded when a runtime names none. An HTTP API needs one in each request; a CLI
    /// is then given no model flag and runs its own default, recorded as `default`.
    pub fn default_model(self) -> &'static str {
        match self {
            HarnessKind::Openai => "gpt-5-mini",
            HarnessKind::Anthropic => "claude-sonnet-4-5",
            HarnessKind::Claude | HarnessKind::Codex | HarnessKind::Pi => "default",
            HarnessKind::Fake => "fake",
            HarnessKind::Command => "command",
        }
    }

    /// How the harness meets a sandbox.
    pub fn confinement(self) -> crate::sandbox::Confinement {
        use crate::sandbox::Confinement;
        match self {
            HarnessKind::Command | HarnessKind::Claude | HarnessKind::Codex | HarnessKind::Pi => Confinement::Wrapped,
            HarnessKind::Fake | HarnessKind::Openai | HarnessKind::Anthropic => Confinement::InProcess,
        }
    }
}

impl std::fmt::Display for HarnessKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The whole configuration file. Unknown keys are refused so that typos do not pass silently.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub default_runtime: Option<String>,
    #[serde(default)]
    pub runtimes: BTreeMap<String, RuntimeConfig>,
    #[serde(default)]
    pub harnesses: BTreeMap<String, HarnessConfig>,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub prices: BTreeMap<String, crate::accounting::Price>,
    #[serde(default)]
    pub sandboxes: BTreeMap<String, crate::sandbox::Policy>,
    pub runs_dir: Option<PathBuf>,
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// `[decisions]`: the decision model `ctx.decisions.decide` asks; `None`: decisions are refused.
    pub decisions: Option<DecisionsConfig>,
    /// Where this configuration was read from; `None` when no file exists.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// One `[runtimes.NAME]` table.
#[derive(Debug, Clone, Default, serde::Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    pub harness: HarnessKind,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub command: Option<Vec<String>>,
    pub base_url: Option<String>,
    /// `fake` only: a Rhai file defining `fn respond(turn)`.
    pub responder: Option<PathBuf>,
    /// HTTP harnesses: the environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// `openai` only: `tools` (answers through `wf_result`) or `structured` (`response_format`).
    pub answer: Option<String>,
    /// HTTP harnesses: the most tokens one reply may use.
    pub max_tokens: Option<u64>,
    /// HTTP harnesses: the model's context in tokens (a server's slot size): each request's
    /// `max_tokens` is clipped to the room left, and a conversation that no longer fits fails
    /// its turn saying so. `awf doctor --deep` reads it from servers that expose it.
    pub context_tokens: Option<u64>,
    /// HTTP harnesses with `context_tokens`: when a turn starts with the conversation past 80% of
    /// the context, the history before it is summarised first (default true).
    pub auto_compact: Option<bool>,
    /// HTTP harnesses: how long a request may wait for the reply's first byte (default 120s),
    /// apart from the agent's stall timeout (the smaller of the two applies).
    pub request_timeout: Option<String>,
    /// HTTP harnesses: how long a streamed reply may go without a chunk (default 60s).
    pub idle_timeout: Option<String>,
    /// Extra environment for a CLI harness, or settings such as `OPENAI_BASE_URL` for HTTP ones.
    pub env: Option<BTreeMap<String, String>>,
    /// Extra command-line flags for a CLI harness.
    pub args: Option<Vec<String>>,
    /// Set by awf, never read from a file: an `openai` runtime asks for the log-probabilities of
    /// each reply's tokens with this many alternatives each (a decision model's, `[decisions]`).
    #[serde(skip)]
    pub top_logprobs: Option<u32>,
}

/// The `[decisions]` table: the decision model `ctx.decisions.decide` asks. Either `runtime`
/// names a runtime, or the table is a runtime itself (`harness = "fake"`, `responder = ...`, or
/// any other key of a `[runtimes.NAME]` table); `logprobs` beside either.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionsConfig {
    pub provider: DecisionProvider,
    /// Whether an `openai` provider is asked for log-probabilities (default true): a model or
    /// server that refuses them needs `logprobs = false`.
    pub logprobs: bool,
}

/// Which runtime the decision model is.
#[derive(Debug, Clone, PartialEq)]
pub enum DecisionProvider {
    /// `runtime = "NAME"`: an alias of `[runtimes]` (or `fake`).
    Runtime(String),
    /// The `[decisions]` table's own runtime keys.
    Inline(Box<RuntimeConfig>),
}

impl DecisionsConfig {
    /// The keys of `[decisions]` beside a runtime's own.
    pub const KEYS: &'static [&'static str] = &["runtime", "logprobs"];
}

impl<'de> Deserialize<'de> for DecisionsConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(d)?;
        let logprobs = match table.remove("logprobs") {
            None => true,
            Some(toml::Value::Boolean(b)) => b,
            Some(other) => return Err(D::Error::custom(format!("`logprobs` must be true or false, got {other}"))),
        };
        let provider = match table.remove("runtime") {
            Some(toml::Value::String(name)) if table.is_empty() => DecisionProvider::Runtime(name),
            Some(toml::Value::String(_)) => {
                let keys: Vec<&str> = table.keys().map(String::as_str).collect();
                return Err(D::Error::custom(format!(
                    "give `runtime` (a runtime's name) or the runtime's own keys, not both (also given: {})",
                    keys.join(", ")
                )));
            }
            Some(other) => return Err(D::Error::custom(format!("`runtime` must be a runtime's name, got {other}"))),
            None if table.is_empty() => {
                return Err(D::Error::custom(
                    "name the decision model's runtime (`runtime = \"NAME\"`) or give one (`harness = \"fake\"`, ...)",
                ))
            }
            None => DecisionProvider::Inline(Box::new(
                RuntimeConfig::deserialize(toml::Value::Table(table)).map_err(D::Error::custom)?,
            )),
        };
        Ok(DecisionsConfig { provider, logprobs })
    }
}

/// One `[harnesses.NAME]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessConfig {
    pub command: Option<String>,
    pub max_concurrency: Option<usize>,
}

/// The `[telemetry]` table: OpenTelemetry traces over OTLP/HTTP.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector, e.g. `http://127.0.0.1:4318` (`/v1/traces` is added); else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` from the environment.
    pub otlp_endpoint: Option<String>,
    /// Put answers into the spans (off by default: they may hold anything).
    pub capture_content: Option<bool>,
    /// Set by awf, never read from a file: no traces at all, whatever the environment says (a
    /// plan's throwaway run).
    #[serde(skip)]
    pub off: bool,
}

/// The `[cluster]` table: runs' agent operations on NATS JetStream (`src/cluster/`). The `--nats*`
/// flags override it field by field (`cli/nats.rs`); relative paths are from the working folder.
/// A secret is never a value here: user, password and token come from the variables named.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The NATS servers, e.g. `nats://127.0.0.1:4222`: a string (comma-separated for several) or
    /// an array of them; `script run` sends agent operations to `awf worker`s through them.
    #[serde(default, deserialize_with = "servers")]
    pub nats: Option<Vec<String>>,
    /// A credentials file (user JWT and nkey seed), 0600.
    pub creds: Option<PathBuf>,
    /// A file holding an nkey seed (`SU...`), 0600.
    pub nkey: Option<PathBuf>,
    /// The variable holding the token.
    pub token_env: Option<String>,
    /// The variable holding the user name (with `password_env`).
    pub user_env: Option<String>,
    /// The variable holding the password (with `user_env`).
    pub password_env: Option<String>,
    /// The CA certificates (PEM) the server's certificate is checked against.
    pub tls_ca: Option<PathBuf>,
    /// The client certificate (PEM), for servers that verify clients (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// Refuse a connection that is not TLS.
    pub tls_required: Option<bool>,
    /// The cluster key's file: every message between owners and workers is signed with it (else
    /// `AWF_CLUSTER_KEY`, else `.awf/cluster.key`, generated; see README).
    pub key_file: Option<PathBuf>,
}

/// `nats = "a,b"` or `nats = ["a", "b"]`, as the list of what was written (split at commas
/// when the servers are resolved).
fn servers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    struct Servers;
    impl<'de> serde::de::Visitor<'de> for Servers {
        type Value = Option<Vec<String>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a NATS URL, URLs separated by commas, or an array of URLs")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(vec![v.to_string()]))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(url) = seq.next_element::<String>()? {
                out.push(url);
            }
            Ok(Some(out))
        }
    }
    d.deserialize_any(Servers)
}

/// The `[limits]` table; command-line flags override each field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_concurrency: Option<usize>,
    pub max_agents: Option<usize>,
    pub stall_timeout: Option<String>,
    pub nudges: Option<u32>,
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<u64>,
    pub deadline: Option<String>,
    /// Background runs (`--detach`) at once on this machine; the rest wait, queued.
    pub background: Option<usize>,
    /// How deep councils convened from turns may nest (default 2).
    pub council_depth: Option<u32>,
    /// Operations one script thread (or parallel branch) may make: the guard against runaway
    /// loops (default 50,000,000).
    pub script_operations: Option<u64>,
    /// New runs are planned first; one whose plan's high end passes this many USD asks first.
    pub confirm_usd: Option<f64>,
}

impl Config {
    /// Loads `awf.toml` from `cwd`, else `$XDG_CONFIG_HOME/awf/config.toml`; no file at all is an
    /// empty configuration (the default runtime is then `fake`).
    pub fn load(cwd: &Path) -> Result<Config, ConfigError> {
        let local = cwd.join("awf.toml");
        let global = xdg_config_home().map(|d| d.join("awf").join("config.toml"));
        for path in std::iter::once(local).chain(global) {
            if path.is_file() {
                return Self::load_file(&path);
            }
            // Something that is there but is no file (a folder named awf.toml) is an error, not
            // silently no configuration.
            if path.exists() {
                return Err(ConfigError::NotAFile { path });
            }
        }
        Ok(Config::default())
    }

    pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        config.source = Some(path.to_path_buf());
        // A listed network's entries are checked here, before anything runs.
        for (name, policy) in &config.sandboxes {
            if let crate::sandbox::Network::List(entries) = &policy.network {
                for e in entries {
                    crate::sandbox::net::Target::parse(e)
                        .map_err(|m| config.bad(&format!("sandboxes.{name}.network"), m.to_string()))?;
                }
            }
        }
        Ok(config)
    }

    /// Describes where runtimes were looked up, for error messages.
    pub fn place(&self) -> String {
        match &self.source {
            Some(p) => p.display().to_string(),
            None => "the built-in defaults (no awf.toml in the working folder and no $XDG_CONFIG_HOME/awf/config.toml)"
                .into(),
        }
    }

    /// The alias used when an agent names no runtime: `AWF_RUNTIME`, then `default_runtime`, then `fake`.
    pub fn default_alias(&self) -> String {
        std::env::var("AWF_RUNTIME")
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| self.default_runtime.clone())
            .unwrap_or_else(|| "fake".into())
    }

    /// Resolves an alias. `fake` always exists, even with no configuration.
    pub fn runtime(&self, alias: &str) -> Result<RuntimeConfig, ConfigError> {
        if let Some(r) = self.runtimes.get(alias) {
            return Ok(r.clone());
        }
        if alias == "fake" {
            return Ok(RuntimeConfig { harness: HarnessKind::Fake, model: Some("fake".into()), ..Default::default() });
        }
        let mut known: Vec<&str> = self.runtimes.keys().map(String::as_str).collect();
        known.push("fake");
        Err(ConfigError::UnknownRuntime { alias: alias.into(), place: self.place(), known: known.join(", ") })
    }

    /// A `[sandboxes.NAME]` policy, as written (paths not yet resolved).
    pub fn sandbox(&self, name: &str) -> Result<crate::sandbox::Policy, ConfigError> {
        self.sandboxes.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.sandboxes.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            ConfigError::UnknownSandbox { name: name.into(), place: self.place(), known }
        })
    }

    pub fn stall_timeout(&self) -> Result<Option<Duration>, ConfigError> {
        self.limits
            .stall_timeout
            .as_deref()
            .map(|s| parse_duration(s).map_err(|m| self.bad("limits.stall_timeout", m.to_string())))
            .transpose()
    }

    pub fn deadline(&self) -> Result<Option<Duration>, ConfigError> {
        self.limits
            .deadline
            .as_deref()
            .map(|s| parse_duration(s).map_err(|m| self.bad("limits.deadline", m.to_string())))
            .transpose()
    }

    fn bad(&self, field: &str, message: String) -> ConfigError {
        ConfigError::BadValue { field: field.into(), place: self.place(), message }
    }
}

/// A duration that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{text}` is not a duration ({source}); write it like 30s, 10m or 1h")]
pub struct BadDuration {
    pub text: String,
    pub source: humantime::DurationError,
}

/// Parses `90s`, `10m`, `1h 30m`, `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    humantime::parse_duration(text.trim()).map_err(|source| BadDuration { text: text.to_string(), source })
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn xdg_config_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused_with_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("awf.toml");
        std::fs::write(&path, "[limits]\nmax_concurency = 3\n").expect("write");
        let err = Config::load_file(&path).expect_err("typo must fail").to_string();
        assert!(err.contains("awf.toml"), "{err}");
        assert!(err.contains("max_concurency"), "{err}");
    }

    #[test]
    fn cluster_servers_are_a_string_or_an_array() {
        let one: Config = toml::from_str("[cluster]\nnats = \"nats://a:4222,nats://b:4222\"\n").expect("a string");
        assert_eq!(one.cluster.nats, Some(vec!["nats://a:4222,nats://b:4222".to_string()]));
        let many: Config = toml::from_str("[cluster]\nnats = [\"nats://a\", \"nats://b\"]\n").expect("an array");
        assert_eq!(many.cluster.nats, Some(vec!["nats://a".to_string(), "nats://b".to_string()]));
        let bad = toml::from_str::<Config>("[cluster]\nnats = 4222\n").expect_err("a number").to_string();
        assert!(bad.contains("a NATS URL"), "{bad}");
    }

    #[test]
    fn fake_exists_without_config_and_unknown_alias_names_the_place() {
        let config = Config::default();
        assert_eq!(config.runtime("fake").expect("fake").harness, HarnessKind::Fake);
        let err = config.runtime("smart").expect_err("unknown").to_string();
        assert!(err.contains("`smart`") && err.contains("built-in defaults"), "{err}");
    }
}
