//! Seating an agent in a sandbox: the concrete paths its sandbox is built from (workspace, own
//! home, control folder, the operator's home folders to hide and what the program needs from
//! them), found on the file system once, when the agent opens. Refuses what it cannot enforce.

use super::policy::{normalize, Policy};
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Why an agent cannot be seated: what the sandbox could not enforce for it.
#[derive(Debug, thiserror::Error)]
pub enum SeatError {
    #[error("HOME is `{}`, which the sandbox cannot hide; set HOME to a home folder", .0.display())]
    Home(PathBuf),
    #[error(
        "the workspace {} holds the operator's home folder {}, which the sandbox must hide; run from a project folder or give the agent a `cwd` inside one",
        workspace.display(),
        home.display()
    )]
    HomeInWorkspace { workspace: PathBuf, home: PathBuf },
    #[error(
        "its cwd {} lies outside the sandbox's shared workspace {}; give it a `cwd` inside the workspace",
        cwd.display(),
        workspace.display()
    )]
    CwdOutside { cwd: PathBuf, workspace: PathBuf },
    #[error("its cwd {} is not a folder", .0.display())]
    CwdNotAFolder(PathBuf),
    /// A policy path that is not there (`what`: `writable path`, `read-only path`).
    #[error("{what} {} does not exist; create it or take it out of the policy", path.display())]
    Missing { what: &'static str, path: PathBuf },
    #[error("{what} {} is not a UTF-8 path, which the sandbox cannot bind", path.display())]
    NotUtf8 { what: &'static str, path: PathBuf },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
}

/// A folder or file under a hidden home folder that the agent's program needs, bound read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exposure {
    pub path: PathBuf,
    /// What needed it: the program, its interpreter, or a file named in its arguments.
    pub needed_by: PathBuf,
}

/// One agent's concrete paths. Built by `seat`; `bwrap::argv` turns it and the policy into an argv.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seat {
    /// The operator's home folders, replaced by empty tmpfs.
    pub hidden: Vec<PathBuf>,
    /// What the program needs from under the hidden folders, bound read-only.
    pub exposed: Vec<Exposure>,
    /// The writable area: the agent's cwd, or the run's working folder under a run-level sandbox.
    pub workspace: PathBuf,
    /// The run folders, hidden even inside the workspace.
    pub records: Option<PathBuf>,
    /// The agent's control folder (and its socket's folder when that lies elsewhere), read-only.
    pub control: Vec<PathBuf>,
    /// The awf binary the launcher execs, read-only.
    pub awf: PathBuf,
    /// `AWF_STATE_DIR`, writable.
    pub state: PathBuf,
    /// The agent's own home (`agents/<slug>/home`, its `HOME`), writable.
    pub home: PathBuf,
    /// Where the program starts.
    pub cwd: PathBuf,
    /// The operator's variables the policy lets in (values are not recorded).
    #[serde(skip)]
    pub env: Vec<(String, String)>,
}

impl Seat {
    /// The same seat for an agent whose control folder is `control` (a fork): its own control
    /// folder, state and home, created; everything else as it was.
    pub fn moved(&self, control: &Path, socket: &Path) -> Result<Seat, SeatError> {
        let (home, state) = own_dirs(control)?;
        utf8("the path", control)?;
        Ok(Seat { control: control_dirs(control, socket), home, state, ..self.clone() })
    }
}

/// `control/home` and `control/state`, created private.
fn own_dirs(control: &Path) -> Result<(PathBuf, PathBuf), SeatError> {
    let home = control.join("home");
    let state = control.join("state");
    for d in [&home, &state] {
        crate::record::private::ensure_dir(d).map_err(|source| SeatError::Create { path: d.clone(), source })?;
    }
    Ok((home, state))
}

/// The control folder, and the socket's folder when that lies elsewhere.
fn control_dirs(control: &Path, socket: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![control.to_path_buf()];
    if let Some(dir) = socket.parent().filter(|d| !d.starts_with(control)) {
        dirs.push(dir.to_path_buf());
    }
    dirs
}

/// Where an agent sits in the run.
pub struct Placement<'a> {
    pub program: &'a [String],
    /// The agent's cwd, absolute.
    pub cwd: &'a Path,
    /// The writable area, absolute: the cwd, or the run's working folder for a run-level sandbox.
    pub workspace: &'a Path,
    /// `agents/<slug>/`.
    pub control: &'a Path,
    pub socket: &'a Path,
    pub run_dir: &'a Path,
    pub awf: &'a Path,
}

/// What seating reads from awf's own process.
pub struct Operator {
    pub home: Option<PathBuf>,
    pub path: Option<OsString>,
    pub vars: Vec<(String, String)>,
}

impl Operator {
    pub fn current() -> Operator {
        Operator {
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            path: std::env::var_os("PATH"),
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }
}

/// Home folders: each is hidden; a path under one is exposed from `depth` components down
/// (`/home/<user>/<tool>`, `$HOME/<tool>`).
fn home_roots(home: Option<&Path>) -> Vec<(PathBuf, usize)> {
    let mut roots = vec![(PathBuf::from("/root"), 1), (PathBuf::from("/home"), 2)];
    if let Some(h) = home {
        roots.push((normalize(h), 1));
    }
    roots
}

/// The roots for exposures: the home folders, and `/tmp`, which the sandbox also replaces (with a
/// private tmpfs): a program file there (a project checked out under /tmp) is bound read-only by
/// itself.
fn with_tmp(roots: &[(PathBuf, usize)]) -> Vec<(PathBuf, usize)> {
    let mut out = roots.to_vec();
    out.push((PathBuf::from("/tmp"), usize::MAX));
    out
}

/// The folder to expose so that `path` (under a home folder) is reachable: the first folder below
/// the home (`~/.pyenv` for `~/.pyenv/shims/python3`), or `path` itself when it sits right in it.
/// `None` when `path` is under no home folder.
pub fn exposure_for(path: &Path, roots: &[(PathBuf, usize)]) -> Option<PathBuf> {
    let path = normalize(path);
    let (root, depth) = roots.iter().filter(|(r, _)| path.starts_with(r)).max_by_key(|(r, _)| r.as_os_str().len())?;
    let rest: Vec<_> = path.strip_prefix(root).ok()?.components().collect();
    if rest.is_empty() {
        return None;
    }
    Some(rest.iter().take(*depth).fold(root.clone(), |p, c| p.join(c)))
}

/// `name` as the program runs it: a path (relative to `cwd`) when it has a `/`, else the first
/// executable file of that name on `PATH`.
fn find_program(name: &str, cwd: &Path, path: Option<&OsString>) -> Option<PathBuf> {
    if name.contains('/') {
        let p = cwd.join(name);
        return p.is_file().then_some(p);
    }
    super::on_path(name.as_ref(), path?)
}

/// The interpreter named by a `#!` line, found on PATH for `#!/usr/bin/env NAME`.
fn interpreter(script: &Path, cwd: &Path, path: Option<&OsString>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|f| f == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return find_program(name, cwd, path);
    }
    Some(first)
}

/// Everything under a home folder that running `program` touches first: the program (and its
/// real path), its `#!` interpreter, and absolute file paths among its arguments.
fn exposures(program: &[String], cwd: &Path, op: &Operator, roots: &[(PathBuf, usize)]) -> Vec<Exposure> {
    let mut needed: Vec<PathBuf> = Vec::new();
    if let Some(p) = program.first().and_then(|name| find_program(name, cwd, op.path.as_ref())) {
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if let Some(i) = interpreter(&real, cwd, op.path.as_ref()) {
            needed.extend(std::fs::canonicalize(&i).ok());
            needed.push(i);
        }
        needed.push(p);
        needed.push(real);
    }
    needed.extend(program.iter().skip(1).map(PathBuf::from).filter(|p| p.is_absolute() && p.is_file()));
    let mut out: Vec<Exposure> = Vec::new();
    for n in needed {
        if let Some(path) = exposure_for(&n, roots) {
            if !out.iter().any(|e| path.starts_with(&e.path)) {
                out.retain(|e| !e.path.starts_with(&path));
                out.push(Exposure { path, needed_by: n });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn utf8(what: &'static str, p: &Path) -> Result<(), SeatError> {
    match p.to_str() {
        Some(_) => Ok(()),
        None => Err(SeatError::NotUtf8 { what, path: p.to_path_buf() }),
    }
}

/// Seats an agent: checks that `policy` (already resolved) can be enforced for it, creates its
/// home, and finds its concrete paths.
pub fn seat(policy: &Policy, place: &Placement<'_>, op: &Operator) -> Result<Seat, SeatError> {
    if let Some(h) = &op.home {
        if !h.is_absolute() || normalize(h) == Path::new("/") {
            return Err(SeatError::Home(h.clone()));
        }
    }
    let roots = home_roots(op.home.as_deref());
    let mut hidden: Vec<PathBuf> = Vec::new();
    for (r, _) in &roots {
        if r.is_dir() && !hidden.iter().any(|h| r.starts_with(h)) {
            hidden.retain(|h| !h.starts_with(r));
            hidden.push(r.clone());
        }
    }
    let workspace = normalize(place.workspace);
    let cwd = normalize(place.cwd);
    if let Some((r, _)) = roots.iter().find(|(r, _)| r.starts_with(&workspace)) {
        return Err(SeatError::HomeInWorkspace { workspace, home: r.clone() });
    }
    if !cwd.starts_with(&workspace) {
        return Err(SeatError::CwdOutside { cwd, workspace });
    }
    if !cwd.is_dir() {
        return Err(SeatError::CwdNotAFolder(cwd));
    }
    for (what, list) in [("writable path", &policy.writable), ("read-only path", &policy.read_only)] {
        for p in list.iter() {
            if !p.exists() {
                return Err(SeatError::Missing { what, path: p.clone() });
            }
            utf8(what, p)?;
        }
    }
    let (home, state) = own_dirs(place.control)?;
    let control = control_dirs(place.control, place.socket);
    // The runs folder is hidden whole (other runs too), unless the workspace lies inside it; then
    // at least this run's folder.
    let records = [place.run_dir.parent(), Some(place.run_dir)]
        .into_iter()
        .flatten()
        .map(normalize)
        .find(|r| !workspace.starts_with(r));
    let seat = Seat {
        hidden,
        exposed: exposures(place.program, &cwd, op, &with_tmp(&roots)),
        workspace,
        records,
        control,
        awf: place.awf.to_path_buf(),
        state,
        home,
        cwd,
        env: op.vars.iter().filter(|(k, _)| policy.allows_env(k)).cloned().collect(),
    };
    for (what, p) in [("the workspace", &seat.workspace), ("the cwd", &seat.cwd), ("the awf binary", &seat.awf)] {
        utf8(what, p)?;
    }
    for p in seat.control.iter().chain(&seat.hidden).chain(seat.exposed.iter().map(|e| &e.path)) {
        utf8("the path", p)?;
    }
    Ok(seat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn roots() -> Vec<(PathBuf, usize)> {
        home_roots(Some(Path::new("/home/me")))
    }

    #[test]
    fn a_program_under_a_home_exposes_its_first_folder_there() {
        let r = roots();
        let e = |p: &str| exposure_for(Path::new(p), &r);
        assert_eq!(e("/root/.pyenv/shims/python3"), Some("/root/.pyenv".into()));
        assert_eq!(e("/home/me/.local/bin/claude"), Some("/home/me/.local".into()));
        assert_eq!(e("/home/other/.cargo/bin/tool"), Some("/home/other/.cargo".into()));
        assert_eq!(e("/root/agent.sh"), Some("/root/agent.sh".into()));
        assert_eq!(e("/root"), None);
        assert_eq!(e("/usr/bin/python3"), None);
        assert_eq!(e("/root/.pyenv/../.ssh/id_ed25519"), Some("/root/.ssh".into()));
        let t = |p: &str| exposure_for(Path::new(p), &with_tmp(&home_roots(None)));
        assert_eq!(t("/tmp/clone/tests/agent.py"), Some("/tmp/clone/tests/agent.py".into()));
    }

    #[test]
    fn a_moved_seat_has_its_own_control_folder_state_and_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("agents/a"), dir.path().join("agents/b"));
        let seat = Seat {
            hidden: vec!["/root".into()],
            exposed: vec![],
            workspace: dir.path().into(),
            records: None,
            control: vec![a.clone()],
            awf: "/usr/bin/awf".into(),
            state: a.join("state"),
            home: a.join("home"),
            cwd: dir.path().into(),
            env: vec![("PATH".into(), "/usr/bin".into())],
        };
        let moved = seat.moved(&b, &b.join("wf.sock")).expect("moved");
        assert_eq!(
            moved,
            Seat { control: vec![b.clone()], state: b.join("state"), home: b.join("home"), ..seat.clone() }
        );
        assert!(b.join("home").is_dir() && b.join("state").is_dir(), "created");
        let elsewhere = seat.moved(&b, Path::new("/run/awf/b.sock")).expect("moved");
        assert_eq!(elsewhere.control, vec![b.clone(), PathBuf::from("/run/awf")]);
    }

    #[test]
    fn exposures_follow_the_program_its_interpreter_and_file_arguments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let tool = home.join(".tool/bin");
        std::fs::create_dir_all(&tool).expect("mkdir");
        let interp = tool.join("interp");
        std::fs::write(&interp, "").expect("write");
        std::fs::set_permissions(&interp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let script = home.join("agent.script");
        std::fs::write(&script, "#!/usr/bin/env interp\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let op = Operator { home: Some(home.clone()), path: Some(tool.clone().into_os_string()), vars: vec![] };
        let roots = home_roots(Some(&home));
        let got = exposures(&[script.display().to_string(), "/nonexistent".into()], dir.path(), &op, &roots);
        assert_eq!(
            got,
            vec![
                Exposure { path: home.join(".tool"), needed_by: interp.clone() },
                Exposure { path: script.clone(), needed_by: script.clone() },
            ]
        );
        let got = exposures(&["interp".into(), script.display().to_string()], dir.path(), &op, &roots);
        assert_eq!(got.iter().map(|e| e.path.clone()).collect::<Vec<_>>(), vec![home.join(".tool"), script]);
    }
}
