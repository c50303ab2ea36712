//! A sandbox policy as data: what `[sandboxes.NAME]` in awf.toml or an inline `sandbox: #{ ... }`
//! in an agent spec says. No I/O: `check` judges a policy on its own, `resolve` makes its paths
//! absolute; `seat.rs` meets the file system and `bwrap.rs` turns the result into an argv.

use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// Which program builds the sandbox. Only bubblewrap so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    #[default]
    Bwrap,
}

/// What the agent's network namespace is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Network {
    /// A network namespace of its own with only loopback: nothing outside is reachable.
    #[default]
    None,
    /// The host's network, as awf itself sees it.
    Host,
    /// `"model"`: only the agent's own model server (its runtime's `base_url`, or its harness's
    /// API host), through awf's proxy.
    Model,
    /// `["host:port", ...]`: a namespace of its own, and awf's proxy letting through only these.
    List(Vec<String>),
}

impl Network {
    /// Whether the sandbox reaches out through awf's proxy (`"model"` or a list).
    pub fn is_listed(&self) -> bool {
        matches!(self, Network::Model | Network::List(_))
    }
}

impl Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Network::None => s.serialize_str("none"),
            Network::Host => s.serialize_str("host"),
            Network::Model => s.serialize_str("model"),
            Network::List(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Network, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Network;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"none\", \"host\", \"model\" or a list of \"host:port\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Network, E> {
                match v {
                    "none" => Ok(Network::None),
                    "host" => Ok(Network::Host),
                    "model" => Ok(Network::Model),
                    other => Err(E::custom(format!(
                        "unknown network `{other}`: expected \"none\", \"host\", \"model\" or a list of \"host:port\""
                    ))),
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Network, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = seq.next_element::<String>()? {
                    out.push(entry);
                }
                Ok(Network::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// One sandbox policy. Every field has a default, so `#{}` (or an empty table) is the strictest one:
/// read-only root, home folders hidden, no network, only the base environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub provider: Provider,
    #[serde(default)]
    pub network: Network,
    /// Folders the agent may write besides its workspace and its own home.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Folders or files bound read-only on top of the hidden home folders (e.g. `~/.config/tool`).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Environment variables passed in besides `BASE_ENV`; `NAME_*` matches by prefix. Nothing
    /// else of the operator's environment enters the sandbox.
    #[serde(default)]
    pub env: Vec<String>,
}

/// Variables every sandboxed agent gets from the operator's environment (none of them secret).
pub const BASE_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"];

/// Why a policy cannot be enforced as written.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// An inline map that is not a policy (an unknown field, a bad value).
    #[error("bad inline sandbox policy: {0}")]
    Inline(#[source] serde_json::Error),
    #[error("`writable` has an empty path")]
    EmptyWritable,
    #[error("`writable` names `/`: the root stays read-only; name the folders to write instead")]
    WritableRoot,
    #[error("`read_only` has an empty path")]
    EmptyReadOnly,
    #[error(transparent)]
    Network(#[from] super::net::BadTarget),
    #[error("`env` entry `{0}` is not a variable name (a trailing `*` matches a prefix)")]
    NotAVariable(String),
    #[error("`env` entry `{0}` is set by awf itself (HOME is the agent's own home; AWF_* are set per turn)")]
    SetByAwf(String),
    #[error("{} names `~` but HOME is not set", .0.display())]
    NoHome(PathBuf),
}

/// Where a policy is looser than a floor it must stay within (`Policy::within`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Looser {
    #[error("it names another provider")]
    Provider,
    #[error("it lists {0} in `network`, the floor does not")]
    Listed(String),
    #[error("it asks for network = \"host\", the floor does not allow it")]
    Host,
    /// Another network kind than the floor's (its JSON: `"model"`, a list).
    #[error("it asks for network = {0}, the floor does not allow it")]
    Network(String),
    #[error("it makes {} writable", .0.display())]
    Writable(PathBuf),
    #[error("it binds {} read-only", .0.display())]
    ReadOnly(PathBuf),
    #[error("it lets the variable {0} in")]
    Variable(String),
}

/// A sandbox with the name it is known by in the run's records.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    pub name: String,
    pub policy: Policy,
}

impl Policy {
    /// A policy from an agent spec's inline map (already JSON).
    pub fn from_json(value: &serde_json::Value) -> Result<Policy, PolicyError> {
        serde_json::from_value(value.clone()).map_err(PolicyError::Inline)
    }

    /// Refuses what a policy cannot mean; a policy that passes can be enforced as written.
    pub fn check(&self) -> Result<(), PolicyError> {
        for p in &self.writable {
            if p.as_os_str().is_empty() {
                return Err(PolicyError::EmptyWritable);
            }
            if p.components().all(|c| matches!(c, Component::RootDir | Component::CurDir)) && p.has_root() {
                return Err(PolicyError::WritableRoot);
            }
        }
        if let Network::List(entries) = &self.network {
            for e in entries {
                super::net::Target::parse(e)?;
            }
        }
        if self.read_only.iter().any(|p| p.as_os_str().is_empty()) {
            return Err(PolicyError::EmptyReadOnly);
        }
        for name in &self.env {
            let bare = name.strip_suffix('*').unwrap_or(name);
            if bare.is_empty() || bare.contains(['=', '*', '\0']) {
                return Err(PolicyError::NotAVariable(name.clone()));
            }
            if bare == "HOME" || bare.starts_with("AWF_") {
                return Err(PolicyError::SetByAwf(name.clone()));
            }
        }
        Ok(())
    }

    /// The same policy with `~/` expanded against `home` and relative paths against `base`.
    pub fn resolve(&self, base: &Path, home: Option<&Path>) -> Result<Policy, PolicyError> {
        let fix = |p: &PathBuf| -> Result<PathBuf, PolicyError> {
            let p = match (p.strip_prefix("~"), home) {
                (Ok(rest), Some(h)) => h.join(rest),
                (Ok(_), None) => return Err(PolicyError::NoHome(p.clone())),
                (Err(_), _) => p.clone(),
            };
            Ok(normalize(&if p.is_absolute() { p } else { base.join(p) }))
        };
        Ok(Policy {
            writable: self.writable.iter().map(fix).collect::<Result<_, _>>()?,
            read_only: self.read_only.iter().map(fix).collect::<Result<_, _>>()?,
            ..self.clone()
        })
    }

    /// Whether the operator's variable `name` may enter the sandbox. HOME and AWF_* never do: awf
    /// sets them.
    pub fn allows_env(&self, name: &str) -> bool {
        if name == "HOME" || name.starts_with("AWF_") {
            return false;
        }
        BASE_ENV.contains(&name)
            || self.env.iter().any(|e| match e.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => e == name,
            })
    }

    /// Whether this policy confines at least as strictly as `floor` (both resolved): no network
    /// the floor lacks, nothing writable or bound read-only outside what the floor opens, no
    /// variable the floor keeps out. `Err` names the first looser point.
    pub fn within(&self, floor: &Policy) -> Result<(), Looser> {
        if self.provider != floor.provider {
            return Err(Looser::Provider);
        }
        match (&self.network, &floor.network) {
            (Network::None, _) | (_, Network::Host) | (Network::Model, Network::Model) => {}
            (Network::List(mine), Network::List(floor)) => {
                if let Some(e) = mine.iter().find(|e| !floor.contains(e)) {
                    return Err(Looser::Listed(e.clone()));
                }
            }
            (Network::Host, _) => return Err(Looser::Host),
            (mine, _) => return Err(Looser::Network(json_of(mine))),
        }
        for w in &self.writable {
            if !floor.writable.iter().any(|f| w.starts_with(f)) {
                return Err(Looser::Writable(w.clone()));
            }
        }
        for r in &self.read_only {
            if !floor.read_only.iter().chain(&floor.writable).any(|f| r.starts_with(f)) {
                return Err(Looser::ReadOnly(r.clone()));
            }
        }
        for e in &self.env {
            let covered = match e.strip_suffix('*') {
                Some(prefix) => floor.env.iter().any(|f| f.strip_suffix('*').is_some_and(|fp| prefix.starts_with(fp))),
                None => floor.allows_env(e),
            };
            if !covered {
                return Err(Looser::Variable(e.clone()));
            }
        }
        Ok(())
    }
}

fn json_of(n: &Network) -> String {
    serde_json::to_string(n).unwrap_or_default()
}

/// Removes `.` and resolves `..` lexically, so that paths compare as the sandbox will mount them.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_within_a_floor_opens_nothing_the_floor_keeps_shut() {
        let floor =
            Policy { writable: vec!["/work".into()], env: vec!["MY_*".into(), "ONE".into()], ..Policy::default() };
        let strict =
            Policy { writable: vec!["/work/a".into()], env: vec!["MY_X".into(), "PATH".into()], ..floor.clone() };
        assert_eq!(strict.within(&floor), Ok(()));
        assert_eq!(Policy::default().within(&floor), Ok(()), "the strictest policy is within any floor");
        let looser = |p: Policy| p.within(&floor).expect_err("looser");
        assert_eq!(looser(Policy { network: Network::Host, ..Policy::default() }), Looser::Host);
        let etc = looser(Policy { writable: vec!["/etc".into()], ..Policy::default() });
        assert_eq!(etc.to_string(), "it makes /etc writable");
        assert_eq!(
            looser(Policy { read_only: vec!["/root/.ssh".into()], ..Policy::default() }),
            Looser::ReadOnly("/root/.ssh".into())
        );
        assert_eq!(
            looser(Policy { env: vec!["SECRET".into()], ..Policy::default() }),
            Looser::Variable("SECRET".into())
        );
        assert_eq!(looser(Policy { env: vec!["M*".into()], ..Policy::default() }), Looser::Variable("M*".into()));
    }
    use serde_json::json;

    #[test]
    fn an_empty_policy_is_the_strictest() {
        let p = Policy::from_json(&json!({})).expect("empty map");
        assert_eq!(p, Policy::default());
        assert_eq!(p.network, Network::None);
        assert!(p.allows_env("PATH") && !p.allows_env("OPENAI_API_KEY") && !p.allows_env("HOME"));
    }

    #[test]
    fn a_full_policy_parses_from_json_and_toml_alike() {
        let from_json = Policy::from_json(&json!({
            "provider": "bwrap", "network": "host", "writable": ["out"], "read_only": ["~/.config/tool"],
            "env": ["OPENAI_API_KEY", "LC_*"],
        }))
        .expect("json");
        let from_toml: Policy = toml::from_str(
            "provider = \"bwrap\"\nnetwork = \"host\"\nwritable = [\"out\"]\nread_only = [\"~/.config/tool\"]\nenv = [\"OPENAI_API_KEY\", \"LC_*\"]\n",
        )
        .expect("toml");
        assert_eq!(from_json, from_toml);
        assert!(from_json.allows_env("OPENAI_API_KEY") && from_json.allows_env("LC_TIME"));
        let everything = Policy { env: vec!["A*".into(), "H*".into()], ..Default::default() };
        assert!(everything.allows_env("ANY") && !everything.allows_env("AWF_OP") && !everything.allows_env("HOME"));
        assert!(!from_json.allows_env("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn unknown_fields_and_values_are_refused() {
        let e = Policy::from_json(&json!({ "netwrok": "host" })).expect_err("typo").to_string();
        assert!(e.starts_with("bad inline sandbox policy: ") && e.contains("netwrok"), "{e}");
        let e = Policy::from_json(&json!({ "network": "lan" })).expect_err("bad network").to_string();
        assert!(e.contains("lan"), "{e}");
        let e = Policy::from_json(&json!({ "provider": "firejail" })).expect_err("bad provider").to_string();
        assert!(e.contains("firejail") && e.contains("bwrap"), "{e}");
    }

    #[test]
    fn a_listed_network_parses_from_toml_and_json_and_each_entry_is_checked() {
        let toml: Policy = toml::from_str("network = [\"api.anthropic.com:443\", \"127.0.0.1:8080\"]\n").expect("toml");
        let list = Network::List(vec!["api.anthropic.com:443".into(), "127.0.0.1:8080".into()]);
        assert_eq!(toml.network, list);
        assert_eq!(
            Policy::from_json(&json!({ "network": ["api.anthropic.com:443", "127.0.0.1:8080"] })).expect("a list"),
            toml
        );
        assert_eq!(Policy::from_json(&json!({ "network": "model" })).expect("model").network, Network::Model);
        assert_eq!(
            serde_json::to_value(&toml).expect("json")["network"],
            json!(["api.anthropic.com:443", "127.0.0.1:8080"])
        );
        assert_eq!(serde_json::to_value(Policy::default()).expect("json")["network"], json!("none"));
        toml.check().expect("a good list");
        let e = Policy { network: Network::List(vec!["api.anthropic.com".into()]), ..Default::default() }
            .check()
            .expect_err("no port");
        assert!(matches!(e, PolicyError::Network(_)), "{e:?}");
        assert!(e.to_string().contains("`api.anthropic.com` is not host:port"), "{e}");
        let e = Policy::from_json(&json!({ "network": 443 })).expect_err("a number").to_string();
        assert!(e.contains("a list of \"host:port\""), "{e}");
        let floor = Policy { network: Network::List(vec!["a:1".into()]), ..Default::default() };
        let mine = |n: Network| Policy { network: n, ..Default::default() }.within(&floor);
        assert_eq!(mine(Network::List(vec!["a:1".into()])), Ok(()));
        assert_eq!(mine(Network::List(vec!["b:1".into()])), Err(Looser::Listed("b:1".into())));
        assert_eq!(mine(Network::Model), Err(Looser::Network("\"model\"".into())));
        assert_eq!(mine(Network::Host), Err(Looser::Host));
    }

    #[test]
    fn check_refuses_what_cannot_be_enforced() {
        let bad = |p: Policy| p.check().expect_err("must be refused");
        assert!(matches!(bad(Policy { writable: vec!["/".into()], ..Default::default() }), PolicyError::WritableRoot));
        let env = |e: &str| bad(Policy { env: vec![e.into()], ..Default::default() });
        assert!(matches!(env("HOME"), PolicyError::SetByAwf(n) if n == "HOME"));
        assert!(matches!(env("AWF_OP"), PolicyError::SetByAwf(n) if n == "AWF_OP"));
        assert!(matches!(env("A=B"), PolicyError::NotAVariable(n) if n == "A=B"));
        assert!(matches!(env("*"), PolicyError::NotAVariable(n) if n == "*"));
        Policy { writable: vec!["out".into()], env: vec!["LC_*".into()], ..Default::default() }.check().expect("fine");
    }

    #[test]
    fn resolve_expands_home_and_relative_paths() {
        let p = Policy {
            writable: vec!["out/../build".into(), "/abs".into()],
            read_only: vec!["~/.config/tool".into()],
            ..Default::default()
        };
        let r = p.resolve(Path::new("/work/proj"), Some(Path::new("/home/me"))).expect("resolve");
        assert_eq!(r.writable, vec![PathBuf::from("/work/proj/build"), PathBuf::from("/abs")]);
        assert_eq!(r.read_only, vec![PathBuf::from("/home/me/.config/tool")]);
        assert!(matches!(p.resolve(Path::new("/w"), None).expect_err("no home"), PolicyError::NoHome(_)));
    }
}
