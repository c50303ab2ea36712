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

/// A sandbox with the name it is known by in the run's records.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    pub name: String,
    pub policy: Policy,
}

impl Policy {
    /// A policy from an agent spec's inline map (already JSON).
    pub fn from_json(value: &serde_json::Value) -> Result<Policy, String> {
        serde_json::from_value(value.clone()).map_err(|e| format!("bad inline sandbox policy: {e}"))
    }

    /// Refuses what a policy cannot mean; a policy that passes can be enforced as written.
    pub fn check(&self) -> Result<(), String> {
        for p in &self.writable {
            if p.as_os_str().is_empty() {
                return Err("`writable` has an empty path".into());
            }
            if p.components().all(|c| matches!(c, Component::RootDir | Component::CurDir)) && p.has_root() {
                return Err("`writable` names `/`: the root stays read-only; name the folders to write instead".into());
            }
        }
        if let Network::List(entries) = &self.network {
            for e in entries {
                super::net::Target::parse(e)?;
            }
        }
        if self.read_only.iter().any(|p| p.as_os_str().is_empty()) {
            return Err("`read_only` has an empty path".into());
        }
        for name in &self.env {
            let bare = name.strip_suffix('*').unwrap_or(name);
            if bare.is_empty() || bare.contains(['=', '*', '\0']) {
                return Err(format!("`env` entry `{name}` is not a variable name (a trailing `*` matches a prefix)"));
            }
            if bare == "HOME" || bare.starts_with("AWF_") {
                return Err(format!(
                    "`env` entry `{name}` is set by awf itself (HOME is the agent's own home; AWF_* are set per turn)"
                ));
            }
        }
        Ok(())
    }

    /// The same policy with `~/` expanded against `home` and relative paths against `base`.
    pub fn resolve(&self, base: &Path, home: Option<&Path>) -> Result<Policy, String> {
        let fix = |p: &PathBuf| -> Result<PathBuf, String> {
            let p = match (p.strip_prefix("~"), home) {
                (Ok(rest), Some(h)) => h.join(rest),
                (Ok(_), None) => return Err(format!("{} names `~` but HOME is not set", p.display())),
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
    pub fn within(&self, floor: &Policy) -> Result<(), String> {
        if self.provider != floor.provider {
            return Err("it names another provider".into());
        }
        match (&self.network, &floor.network) {
            (Network::None, _) | (_, Network::Host) | (Network::Model, Network::Model) => {}
            (Network::List(mine), Network::List(floor)) => {
                if let Some(e) = mine.iter().find(|e| !floor.contains(e)) {
                    return Err(format!("it lists {e} in `network`, the floor does not"));
                }
            }
            (Network::Host, _) => return Err("it asks for network = \"host\", the floor does not allow it".into()),
            (mine, _) => {
                return Err(format!("it asks for network = {}, the floor does not allow it", json_of(mine)));
            }
        }
        for w in &self.writable {
            if !floor.writable.iter().any(|f| w.starts_with(f)) {
                return Err(format!("it makes {} writable", w.display()));
            }
        }
        for r in &self.read_only {
            if !floor.read_only.iter().chain(&floor.writable).any(|f| r.starts_with(f)) {
                return Err(format!("it binds {} read-only", r.display()));
            }
        }
        for e in &self.env {
            let covered = match e.strip_suffix('*') {
                Some(prefix) => floor.env.iter().any(|f| f.strip_suffix('*').is_some_and(|fp| prefix.starts_with(fp))),
                None => floor.allows_env(e),
            };
            if !covered {
                return Err(format!("it lets the variable {e} in"));
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
        assert!(looser(Policy { network: Network::Host, ..Policy::default() }).contains("network"));
        assert!(looser(Policy { writable: vec!["/etc".into()], ..Policy::default() }).contains("/etc writable"));
        assert!(looser(Policy { read_only: vec!["/root/.ssh".into()], ..Policy::default() }).contains("read-only"));
        assert!(looser(Policy { env: vec!["SECRET".into()], ..Policy::default() }).contains("SECRET"));
        assert!(looser(Policy { env: vec!["M*".into()], ..Policy::default() }).contains("M*"));
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
        let e = Policy::from_json(&json!({ "netwrok": "host" })).expect_err("typo");
        assert!(e.contains("netwrok"), "{e}");
        let e = Policy::from_json(&json!({ "network": "lan" })).expect_err("bad network");
        assert!(e.contains("lan"), "{e}");
        let e = Policy::from_json(&json!({ "provider": "firejail" })).expect_err("bad provider");
        assert!(e.contains("firejail") && e.contains("bwrap"), "{e}");
    }

    #[test]
    fn a_listed_network_parses_from_toml_and_json_and_each_entry_is_checked() {
        let toml: Policy = toml::from_str("network = [\"api.anthropic.com:443\", \"127.0.0.1:8080\"]\n").expect("toml");
        let list = Network::List(vec!["api.anthropic.com:443".into(), "127.0.0.1:8080".into()]);
        assert_eq!(toml.network, list);
        assert_eq!(
            Policy::from_json(&json!({ "network": ["api.anthropic.com:443", "127.0.0.1:8080"] })),
            Ok(toml.clone())
        );
        assert_eq!(Policy::from_json(&json!({ "network": "model" })).map(|p| p.network), Ok(Network::Model));
        assert_eq!(
            serde_json::to_value(&toml).expect("json")["network"],
            json!(["api.anthropic.com:443", "127.0.0.1:8080"])
        );
        assert_eq!(serde_json::to_value(Policy::default()).expect("json")["network"], json!("none"));
        toml.check().expect("a good list");
        let e = Policy { network: Network::List(vec!["api.anthropic.com".into()]), ..Default::default() }
            .check()
            .expect_err("no port");
        assert!(e.contains("`api.anthropic.com` is not host:port"), "{e}");
        let e = Policy::from_json(&json!({ "network": 443 })).expect_err("a number");
        assert!(e.contains("a list of \"host:port\""), "{e}");
        let floor = Policy { network: Network::List(vec!["a:1".into()]), ..Default::default() };
        let mine = |n: Network| Policy { network: n, ..Default::default() }.within(&floor);
        assert_eq!(mine(Network::List(vec!["a:1".into()])), Ok(()));
        assert!(mine(Network::List(vec!["b:1".into()])).expect_err("b").contains("b:1"));
        assert!(mine(Network::Model).expect_err("model").contains("\"model\""));
        assert!(mine(Network::Host).expect_err("host").contains("host"));
    }

    #[test]
    fn check_refuses_what_cannot_be_enforced() {
        let bad = |p: Policy| p.check().expect_err("must be refused");
        assert!(bad(Policy { writable: vec!["/".into()], ..Default::default() }).contains("read-only"));
        assert!(bad(Policy { env: vec!["HOME".into()], ..Default::default() }).contains("HOME"));
        assert!(bad(Policy { env: vec!["AWF_OP".into()], ..Default::default() }).contains("AWF_"));
        assert!(bad(Policy { env: vec!["A=B".into()], ..Default::default() }).contains("not a variable"));
        assert!(bad(Policy { env: vec!["*".into()], ..Default::default() }).contains("not a variable"));
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
        assert!(p.resolve(Path::new("/w"), None).expect_err("no home").contains("HOME"));
    }
}
