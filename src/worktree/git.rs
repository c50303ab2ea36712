//! How awf runs git, **the one command builder**: every git command awf runs is made here, and
//! none of them runs code that the repository names.
//!
//! An agent that can write the repository's `.git` (one seated in the checkout itself, or any
//! program of the operator's) can plant hooks, config and attributes there; awf's own git runs
//! outside every sandbox, as the operator, so it must run none of them. Each command is
//! `git --no-pager -c K=V… -C <folder> ARGS` with:
//!
//! - **No hooks, no fsmonitor**: `core.hooksPath=/dev/null` (no hook is found there, so neither
//!   `.git/hooks` nor a planted `core.hooksPath` runs: reference-transaction, post-checkout,
//!   post-merge, post-index-change, pre-auto-gc…) and `core.fsmonitor=false`.
//! - **No work started behind the command**: `submodule.recurse=false` (no command enters a
//!   submodule, whose own config would apply), `maintenance.auto=false` and `gc.auto=0` (no
//!   background `git gc`), `commit.gpgSign=false` and `merge.verifySignatures=false` (no
//!   `gpg.program`), and `protocol.allow=never` with `GIT_NO_LAZY_FETCH=1` (git ≥ 2.44): awf's git
//!   never fetches, so no transport, `core.sshCommand`, `core.askPass` or credential helper runs,
//!   even for a partial clone's missing object (the command fails instead).
//! - **No program the repository's config names**: before each command, one `git config --list
//!   --show-scope --includes` in the same folder and environment reads what git will read
//!   (`include.path` and `includeIf` followed), and every key that names a program and does not
//!   come from the operator's own system or global config is overridden for that command
//!   (`overrides`): filter drivers (`clean`, `smudge`, `process`: none; `required`: false), diff
//!   drivers (`textconv`, `command`, `diff.external`: none), merge drivers (git's own
//!   `git merge-file`, so a content merge is the built-in one and a conflict stays a conflict),
//!   `gpg.*program`, `core.sshCommand`, `core.askPass`, `core.gitProxy`, credential helpers, and
//!   `protocol.<name>.allow` (never). The overrides travel as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`,
//!   not `-c`, because a driver's name may hold `=`; so a git that ignores them (before 2.31) is
//!   caught by a probe key in the same listing and refused (`Error::GitTooOld`), never run
//!   unprotected. Attributes themselves still apply (`text`, `eol`, `working-tree-encoding`): they
//!   run nothing once no driver is left to name. A filter the operator set in the repository's own
//!   config (`git lfs install --local`) does not run in awf's commits either; one in the global
//!   config does.
//! - **No redirection**: the environment has no `GIT_*` variable of awf's own but
//!   `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM` and `GIT_CONFIG_NOSYSTEM` (the operator's config
//!   files; `GIT_DIR`, `GIT_EXTERNAL_DIFF`, `GIT_SSH_COMMAND`, `GIT_CONFIG_PARAMETERS`… would
//!   change what runs), and every command after the repository is found names its git folders
//!   (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE`), so a planted `core.worktree` or a worktree's
//!   rewritten `.git` file moves nothing. No command opens an editor or a pager (`--no-pager`,
//!   output to a pipe, messages given with `-m`), so `core.editor` and `core.pager` are never read.
//!
//! What stays open: the listing and the command are two processes, so a program that rewrites
//! the config between them (milliseconds) could slip a driver in; the sandbox keeps `.git`
//! read-only for every sandboxed agent, and an agent without a sandbox already runs as the
//! operator. `safe.directory` is read only from the operator's own config, and `uploadpack.*` only
//! by a fetch, which awf never makes.

use super::Error;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How git is run: the program (`git` on PATH unless a test names another).
#[derive(Debug, Clone)]
pub struct Git {
    pub program: PathBuf,
}

impl Default for Git {
    fn default() -> Git {
        Git { program: "git".into() }
    }
}

/// The git folders a command names explicitly: a worktree's, found when it was added, or the
/// checkout's, found with the repository. Nothing an agent writes in a worktree (its `.git` file)
/// or in the config (`core.worktree`) then redirects awf's commands.
#[derive(Debug, Clone)]
pub(super) struct Dirs<'a> {
    pub work_tree: &'a Path,
    pub admin: PathBuf,
    pub common: &'a Path,
}

/// What one git command printed.
pub(super) struct Output {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A config key and the value that overrides it, as bytes: a driver's name is whatever the
/// repository wrote.
pub(super) type Override = (Vec<u8>, Vec<u8>);

/// Settings every command carries, as `-c`.
pub const FIXED: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("submodule.recurse", "false"),
    ("maintenance.auto", "false"),
    ("gc.auto", "0"),
    ("commit.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("protocol.allow", "never"),
];

/// awf's own `GIT_*` variables that reach git: where the operator keeps their config.
const KEPT_ENV: &[&str] = &["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"];

/// The key the listing is given, to tell that this git reads `GIT_CONFIG_COUNT`.
const PROBE: &str = "awf.probe";

impl Git {
    /// Runs git in `dir` (in worktree `wt`'s folders, or the checkout's), with the repository's
    /// programs overridden as they stand now.
    pub(super) fn command(&self, dir: &Path, args: &[&str], wt: Option<&Dirs<'_>>) -> Result<Output, Error> {
        let found = self.repository_programs(dir, wt)?;
        let mut cmd = self.base(dir, wt, &found);
        cmd.args(args);
        let (out, stdout) = self.output(cmd)?;
        Ok(Output { stdout: String::from_utf8_lossy(&stdout).into_owned(), ..out })
    }

    /// Runs git and returns its trimmed stdout, or `Failed`.
    pub(super) fn run(&self, dir: &Path, args: &[&str], wt: Option<&Dirs<'_>>) -> Result<String, Error> {
        let out = self.command(dir, args, wt)?;
        if !out.ok {
            return Err(Error::Failed { args: args.join(" "), dir: dir.to_path_buf(), stderr: out.stderr });
        }
        Ok(out.stdout.trim_end().to_string())
    }

    /// Every program key git would read in `dir` that the repository, not the operator, set,
    /// with what it becomes.
    fn repository_programs(&self, dir: &Path, wt: Option<&Dirs<'_>>) -> Result<Vec<Override>, Error> {
        let mut cmd = self.base(dir, wt, &[(PROBE.into(), b"1".to_vec())]);
        let args = ["config", "--list", "--show-scope", "--includes", "-z"];
        cmd.args(args);
        let (out, stdout) = self.output(cmd)?;
        if !out.ok {
            return Err(Error::Failed { args: args.join(" "), dir: dir.to_path_buf(), stderr: out.stderr });
        }
        let listing = parse_listing(&stdout);
        if !listing.iter().any(|e| e.scope == b"command" && e.key == PROBE.as_bytes()) {
            return Err(Error::GitTooOld {
                program: self.program.display().to_string(),
                why: "it ignores GIT_CONFIG_COUNT (git 2.31)".into(),
            });
        }
        Ok(overrides(&listing, &self.program))
    }

    /// `git --no-pager -c …` in `dir`, its environment cleaned, `found` given as
    /// `GIT_CONFIG_COUNT`.
    fn base(&self, dir: &Path, wt: Option<&Dirs<'_>>, found: &[Override]) -> Command {
        let mut cmd = crate::open_files::command(&self.program);
        cmd.arg("--no-pager");
        for (k, v) in FIXED {
            cmd.arg("-c").arg(format!("{k}={v}"));
        }
        cmd.arg("-C").arg(dir).stdin(Stdio::null());
        for (name, _) in std::env::vars_os() {
            let keep = KEPT_ENV.iter().any(|k| name == OsStr::new(k));
            if name.as_bytes().starts_with(b"GIT_") && !keep {
                cmd.env_remove(&name);
            }
        }
        cmd.env("GIT_NO_LAZY_FETCH", "1").env("GIT_TERMINAL_PROMPT", "0");
        if let Some(d) = wt {
            cmd.env("GIT_DIR", &d.admin).env("GIT_WORK_TREE", d.work_tree).env("GIT_COMMON_DIR", d.common);
        }
        cmd.env("GIT_CONFIG_COUNT", found.len().to_string());
        for (i, (k, v)) in found.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), OsStr::from_bytes(k));
            cmd.env(format!("GIT_CONFIG_VALUE_{i}"), OsStr::from_bytes(v));
        }
        cmd
    }

    fn output(&self, mut cmd: Command) -> Result<(Output, Vec<u8>), Error> {
        let out = cmd
            .output()
            .map_err(|e| Error::GitMissing { program: self.program.display().to_string(), why: e.to_string() })?;
        let output = Output {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        };
        Ok((output, out.stdout))
    }
}

/// One line of `git config --list --show-scope -z`.
#[derive(Debug, PartialEq)]
pub(super) struct Entry<'a> {
    pub scope: &'a [u8],
    pub key: &'a [u8],
}

/// `scope NUL key [LF value] NUL`, repeated.
pub(super) fn parse_listing(out: &[u8]) -> Vec<Entry<'_>> {
    let mut fields = out.split(|b| *b == 0);
    let mut entries = Vec::new();
    while let (Some(scope), Some(kv)) = (fields.next(), fields.next()) {
        let key = kv.split(|b| *b == b'\n').next().unwrap_or_default();
        entries.push(Entry { scope, key });
    }
    entries
}

/// The program keys of `listing` not from the operator's system or global config, each with its
/// neutral value (once each: a key set twice is overridden once).
pub(super) fn overrides(listing: &[Entry<'_>], program: &Path) -> Vec<Override> {
    let mut found: Vec<Override> = Vec::new();
    for e in listing {
        if matches!(e.scope, b"system" | b"global") {
            continue;
        }
        if let Some(value) = neutral(e.key, program) {
            if !found.iter().any(|(k, _)| k == e.key) {
                found.push((e.key.to_vec(), value.into_bytes()));
            }
        }
    }
    found
}

/// What a config key that names a program becomes, or `None` for one that names none. git
/// lowercases the section and the variable of a listed key; the subsection (a driver's name) is
/// kept as written and may hold dots.
fn neutral(key: &[u8], program: &Path) -> Option<String> {
    let text = String::from_utf8_lossy(key);
    let (section, rest) = text.split_once('.')?;
    let (sub, var) = match rest.rsplit_once('.') {
        Some((sub, var)) => (Some(sub), var),
        None => (None, rest),
    };
    let none = Some(String::new());
    match (section, sub, var) {
        ("filter", Some(_), "clean" | "smudge" | "process") => none,
        ("filter", Some(_), "required") => Some("false".into()),
        ("diff", Some(_), "textconv" | "command") | ("diff", None, "external") => none,
        ("merge", Some(_), "driver") => Some(merge_file(program)),
        ("gpg", _, "program") | ("gpg", Some("ssh"), "defaultkeycommand") => none,
        ("core", None, "sshcommand" | "askpass" | "gitproxy") => none,
        ("credential", _, "helper") => none,
        ("protocol", Some(_), "allow") => Some("never".into()),
        _ => None,
    }
}

/// A merge driver's command line that is git's own three-way merge of the file: `%A` holds the
/// result, the exit status counts the conflicts.
fn merge_file(program: &Path) -> String {
    let quoted = program.display().to_string().replace('\'', r"'\''");
    format!("'{quoted}' merge-file --marker-size=%L %A %O %B")
}
