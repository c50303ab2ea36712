//! What a turn's process is: its program, arguments, environment and folder, as the harness builds
//! them (the shape of `std::process::Command`, which hides what `start.rs` needs to read back),
//! and the same made ready to exec: the program found on PATH, every string a C string, so that
//! nothing is allocated or looked up in the child between its start and its exec.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// PATH when neither the process's environment nor awf's names one (glibc's default for exec).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A program to run: argv, environment changes over awf's own (or a cleared one), folder.
#[derive(Debug, Clone)]
pub struct Program {
    argv: Vec<OsString>,
    clear_env: bool,
    /// In order: a value set, or (`None`) a variable removed.
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    /// Paths opened just before the start (`sandbox::pin::open`, each checked against what it was
    /// when the agent was seated) and given to the process as descriptors from
    /// `sandbox::bwrap::FIRST_FD` up, in order.
    pinned: Vec<crate::sandbox::pin::Pinned>,
}

impl Program {
    pub fn new(program: impl AsRef<OsStr>) -> Program {
        Program {
            argv: vec![program.as_ref().to_owned()],
            clear_env: false,
            env: Vec::new(),
            cwd: None,
            pinned: vec![],
        }
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Program
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.argv.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Program {
        self.env.push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Program
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Program {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// The process starts with no variable but those set after this.
    pub fn env_clear(&mut self) -> &mut Program {
        self.clear_env = true;
        self.env.clear();
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Program {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Gives the process the pinned paths as descriptors (a sandbox's `Wrapped::pinned`).
    pub fn pinned(&mut self, pinned: Vec<crate::sandbox::pin::Pinned>) -> &mut Program {
        self.pinned = pinned;
        self
    }

    /// The environment the process starts with: awf's (unless cleared) with the changes applied.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut vars: Vec<(OsString, OsString)> =
            if self.clear_env { Vec::new() } else { std::env::vars_os().collect() };
        for (key, value) in &self.env {
            vars.retain(|(k, _)| k != key);
            if let Some(v) = value {
                vars.push((key.clone(), v.clone()));
            }
        }
        vars
    }

    /// Ready to exec: `ENOENT` when the program is not found on PATH (the process's PATH, else
    /// awf's), `InvalidInput` when a string holds a NUL byte, and a pinned path that changed since
    /// it was pinned refused with the reason (`sandbox::pin::PinError`).
    pub(super) fn prepare(&self) -> io::Result<Prepared> {
        let env = self.environment();
        let name = &self.argv[0];
        let path = if name.as_bytes().contains(&b'/') {
            PathBuf::from(name)
        } else {
            let search =
                env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var_os("PATH"));
            crate::sandbox::on_path(name, search.as_deref().unwrap_or(OsStr::new(DEFAULT_PATH)))
                .ok_or_else(|| io::Error::from_raw_os_error(nix::libc::ENOENT))?
        };
        let c = |s: &OsStr| CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
        let path = c(path.as_os_str())?;
        let argv = self.argv.iter().map(|a| c(a)).collect::<io::Result<Vec<_>>>()?;
        let envp = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.clone().into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let cwd = self.cwd.as_ref().map(|d| c(d.as_os_str())).transpose()?;
        let fds = crate::sandbox::pin::open_all(&self.pinned).map_err(io::Error::other)?;
        Ok(Prepared { path, argv, envp, cwd, fds })
    }
}

/// A program ready to exec: every string the child needs, owned here.
pub(super) struct Prepared {
    pub(super) path: CString,
    pub(super) argv: Vec<CString>,
    pub(super) envp: Vec<CString>,
    pub(super) cwd: Option<CString>,
    /// The pinned paths, opened: the process gets them from `sandbox::bwrap::FIRST_FD` up.
    pub(super) fds: Vec<std::os::fd::OwnedFd>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn env_of(p: &Program) -> Vec<String> {
        p.prepare().expect("prepared").envp.iter().map(|c| c.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn a_program_without_a_slash_is_found_on_the_path_of_its_environment() {
        let dir = tempfile::tempdir().expect("a folder");
        let exe = dir.path().join("only-here");
        std::fs::write(&exe, "#!/bin/sh\n").expect("written");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("executable");
        let mut p = Program::new("only-here");
        assert_eq!(p.prepare().err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
        p.env("PATH", dir.path());
        assert_eq!(p.prepare().expect("found").path.to_str().ok(), exe.to_str());
    }

    #[test]
    fn a_file_that_is_not_executable_is_not_found() {
        let dir = tempfile::tempdir().expect("a folder");
        std::fs::write(dir.path().join("plain"), "").expect("written");
        let mut p = Program::new("plain");
        p.env("PATH", dir.path());
        assert_eq!(p.prepare().err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
    }

    #[test]
    fn changes_apply_in_order_over_awfs_environment_or_a_cleared_one() {
        let mut p = Program::new("/bin/true");
        p.env("AWF_T_A", "1").env("AWF_T_A", "2").env("AWF_T_B", "x").env_remove("AWF_T_B");
        let env = env_of(&p);
        assert!(env.contains(&"AWF_T_A=2".to_string()) && !env.iter().any(|v| v.starts_with("AWF_T_B=")));
        assert!(env.iter().any(|v| v.starts_with("PATH=")), "awf's own variables are kept");
        p.env_clear().env("ONLY", "this");
        assert_eq!(env_of(&p), vec!["ONLY=this".to_string()]);
    }

    #[test]
    fn a_nul_byte_is_refused_as_invalid_input() {
        let mut p = Program::new("/bin/true");
        p.args(["a\0b"]);
        assert_eq!(p.prepare().err().map(|e| e.kind()), Some(io::ErrorKind::InvalidInput));
    }
}
