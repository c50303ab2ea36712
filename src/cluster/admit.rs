//! What a worker runs of an operation it was sent: the runtime resolved by name in its own
//! awf.toml (an inline runtime only with `--allow-inline-runtimes`, only for a harness it serves,
//! and never with `env`, a key variable, `args` or `base_url`), the folders (the agent's cwd, its
//! skills, an inline responder) only under its roots, and a sandbox at least as strict as its floor
//! (none asked: the floor). Refusals say what was refused and never quote a file.

use super::error::ClusterError;
use super::wire::{forbidden_inline_fields, AgentSpec, RuntimeRef};
use crate::config::{Config, HarnessKind, RuntimeConfig};
use crate::sandbox::{Named, Policy};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A worker's rules, from its flags and config.
#[derive(Debug, Clone)]
pub struct Rules {
    /// Canonical folders whose subfolders it serves.
    pub roots: Vec<PathBuf>,
    /// The loosest sandbox it runs agents in; `None`: unsandboxed unless a message asks.
    pub floor: Option<Named>,
    pub allow_inline: bool,
    pub serves: Vec<HarnessKind>,
    pub config: Config,
}

/// An agent as the worker opens it.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub runtime: RuntimeConfig,
    pub cwd: PathBuf,
    pub sandbox: Option<Value>,
    pub skills: Vec<PathBuf>,
}

/// A model or effort name a message may set: a plain word, never a flag.
fn plain(what: &str, text: &str) -> Result<(), ClusterError> {
    let ok = !text.is_empty()
        && text.len() <= 200
        && !text.starts_with('-')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || "._:/@+-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ClusterError::Refused(format!("the {what} it names is not a plain name")))
    }
}

impl Rules {
    /// The agent of an operation as this worker will run it, or why not.
    pub fn admit(&self, agent: &AgentSpec) -> Result<Admitted, ClusterError> {
        let runtime = self.runtime(&agent.runtime)?;
        let cwd = self.under_roots(&agent.cwd, "its folder")?;
        let skills = agent.skills.iter().map(|s| self.under_roots(s, "a skill folder")).collect::<Result<_, _>>()?;
        let sandbox = self.sandbox(agent.sandbox.as_ref(), &cwd)?;
        Ok(Admitted { runtime, cwd, sandbox, skills })
    }

    fn runtime(&self, asked: &RuntimeRef) -> Result<RuntimeConfig, ClusterError> {
        let harness = asked.harness();
        if !self.serves.contains(&harness) {
            return Err(ClusterError::Refused(format!("this worker does not serve the `{harness}` harness")));
        }
        match asked {
            RuntimeRef::Named { alias, harness, model, effort } => {
                let mut r = self.config.runtime(alias).map_err(|_| {
                    ClusterError::Refused(format!(
                        "the runtime `{alias}` is not in this worker's config: define [runtimes.{alias}] there"
                    ))
                })?;
                if r.harness != *harness {
                    return Err(ClusterError::Refused(format!(
                        "the runtime `{alias}` is a `{}` runtime here, not `{harness}`",
                        r.harness
                    )));
                }
                if let Some(m) = model {
                    plain("model", m)?;
                    r.model = Some(m.clone());
                }
                if let Some(e) = effort {
                    plain("effort", e)?;
                    r.effort = Some(e.clone());
                }
                Ok(r)
            }
            RuntimeRef::Inline { runtime } => {
                if !self.allow_inline {
                    return Err(ClusterError::Refused(
                        "inline runtimes are refused by this worker: name a runtime of awf.toml (or start \
                                the worker with --allow-inline-runtimes)"
                            .into(),
                    ));
                }
                let forbidden = forbidden_inline_fields(runtime);
                if !forbidden.is_empty() {
                    return Err(ClusterError::Refused(format!(
                        "an inline runtime from a message may not set {}: name a runtime of awf.toml",
                        forbidden.join(", ")
                    )));
                }
                let mut r = (**runtime).clone();
                if let Some(p) = &r.responder {
                    r.responder = Some(self.under_roots(p, "its responder")?);
                }
                Ok(r)
            }
        }
    }

    /// `path`, canonical, when it exists under one of the roots.
    pub fn under_roots(&self, path: &Path, what: &str) -> Result<PathBuf, ClusterError> {
        let outside = || ClusterError::Refused(format!("{what} is not under this worker's roots (--root)"));
        if !path.is_absolute() {
            return Err(outside());
        }
        let real =
            path.canonicalize().map_err(|_| ClusterError::Refused(format!("{what} does not exist on this worker")))?;
        if self.roots.iter().any(|r| real.starts_with(r)) {
            Ok(real)
        } else {
            Err(outside())
        }
    }

    /// The sandbox to open the agent in: the floor when none is asked, the one asked when it is at
    /// least as strict as the floor.
    fn sandbox(&self, asked: Option<&Value>, cwd: &Path) -> Result<Option<Value>, ClusterError> {
        let Some(asked) = asked else {
            return Ok(self.floor.as_ref().map(|f| Value::String(f.name.clone())));
        };
        let Some(floor) = &self.floor else { return Ok(Some(asked.clone())) };
        let policy = match asked {
            Value::String(name) => self
                .config
                .sandbox(name)
                .map_err(|_| ClusterError::Refused(format!("the sandbox `{name}` is not in this worker's config")))?,
            other => Policy::from_json(other)?,
        };
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let resolved = policy.resolve(cwd, home.as_deref())?;
        let base = floor.policy.resolve(cwd, home.as_deref())?;
        resolved.within(&base).map_err(|why| ClusterError::Looser { floor: floor.name.clone(), why })?;
        Ok(Some(asked.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::policy::Network;

    fn rules(dir: &Path) -> Rules {
        let config: Config = toml::from_str(
            "[runtimes.mine]\nharness = \"command\"\ncommand = [\"true\"]\n[sandboxes.open]\nnetwork = \"host\"\n",
        )
        .expect("config");
        Rules {
            roots: vec![dir.canonicalize().expect("canonical")],
            floor: Some(Named { name: "floor".into(), policy: Policy::default() }),
            allow_inline: false,
            serves: vec![HarnessKind::Command, HarnessKind::Openai],
            config,
        }
    }

    fn agent(dir: &Path, runtime: RuntimeRef) -> AgentSpec {
        AgentSpec {
            key: "a".into(),
            runtime,
            instructions: None,
            cwd: dir.to_path_buf(),
            sandbox: None,
            labels: Value::Null,
            skills: vec![],
        }
    }

    fn named(alias: &str) -> RuntimeRef {
        RuntimeRef::Named { alias: alias.into(), harness: HarnessKind::Command, model: None, effort: None }
    }

    #[test]
    fn a_named_runtime_is_the_workers_own_under_its_floor() {
        let dir = tempfile::tempdir().expect("tmp");
        let got = rules(dir.path()).admit(&agent(dir.path(), named("mine"))).expect("admitted");
        assert_eq!(got.runtime.command, Some(vec!["true".to_string()]));
        assert_eq!(got.sandbox, Some(Value::String("floor".into())), "none asked: the floor");
    }

    #[test]
    fn what_a_message_may_not_choose_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tmp");
        let r = rules(dir.path());
        let refused = |a: AgentSpec| r.admit(&a).expect_err("refused").to_string();
        assert!(refused(agent(dir.path(), named("other"))).contains("`other` is not in this worker's config"));
        let inline = RuntimeConfig {
            harness: HarnessKind::Command,
            command: Some(vec!["sh".into(), "-c".into(), "id".into()]),
            ..Default::default()
        };
        let inline_ref = RuntimeRef::Inline { runtime: Box::new(inline.clone()) };
        assert!(refused(agent(dir.path(), inline_ref.clone())).contains("inline runtimes are refused"));
        let mut allowing = r.clone();
        allowing.allow_inline = true;
        assert!(allowing.admit(&agent(dir.path(), inline_ref)).is_ok(), "allowed with the flag");
        let keyed = RuntimeConfig {
            harness: HarnessKind::Openai,
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key_env: Some("HOME".into()),
            ..Default::default()
        };
        let err = allowing
            .admit(&agent(dir.path(), RuntimeRef::Inline { runtime: Box::new(keyed) }))
            .expect_err("no")
            .to_string();
        assert!(err.contains("may not set api_key_env, base_url"), "{err}");
        let mut root = agent(dir.path(), named("mine"));
        root.cwd = PathBuf::from("/");
        assert!(refused(root).contains("its folder is not under this worker's roots"));
        let mut loose = agent(dir.path(), named("mine"));
        loose.sandbox = Some(Value::String("open".into()));
        assert!(refused(loose).contains("looser than this worker's floor `floor`"));
        let mut flag = agent(dir.path(), named("mine"));
        flag.runtime = RuntimeRef::Named {
            alias: "mine".into(),
            harness: HarnessKind::Command,
            model: Some("--settings=x".into()),
            effort: None,
        };
        assert!(refused(flag).contains("model it names is not a plain name"));
        let mut strict = agent(dir.path(), named("mine"));
        strict.sandbox = Some(serde_json::json!({ "network": "none" }));
        assert!(r.admit(&strict).is_ok(), "a policy as strict as the floor is taken");
        assert_eq!(Policy::default().network, Network::None);
    }
}
