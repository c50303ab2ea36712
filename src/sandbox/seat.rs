//! Seating an agent in a sandbox: the concrete paths its sandbox is built from, found on the file
//! system once, when the agent opens: the host's system folders (`root.rs`), its workspace, the
//! policy's paths and what its program needs from elsewhere (each pinned by identity, `pin.rs`,
//! and opened again before every turn), the git folders kept read-only, the places masked, its
//! control folder, state and home. Refuses what it cannot enforce.

use super::pin::{self, PinError, Pinned, Role};
use super::policy::{normalize, Network, Policy};
use super::root::{self, System};
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
    /// Boxed: the largest reason, kept off every `Result` that carries a seat error.
    #[error(transparent)]
    Pin(Box<PinError>),
    #[error("{what} {} is not a UTF-8 path, which the sandbox cannot bind", path.display())]
    NotUtf8 { what: &'static str, path: PathBuf },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error(
        "{role} {} lies in {}, which is awf's own (sockets, tokens, run records) and no sandbox may open",
        path.display(), own.display()
    )]
    AwfsOwn { role: Role, path: PathBuf, own: PathBuf },
}

impl From<PinError> for SeatError {
    fn from(e: PinError) -> SeatError {
        SeatError::Pin(Box::new(e))
    }
}

/// A folder or file from outside the system folders that the agent's program needs, bound
/// read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exposure {
    #[serde(serialize_with = "pinned_path")]
    pub path: Pinned,
    /// What needed it: the program, its interpreter, or a file named in its arguments.
    pub needed_by: PathBuf,
}

fn pinned_path<S: serde::Serializer>(p: &Pinned, s: S) -> Result<S::Ok, S::Error> {
    p.path.serialize(s)
}

fn pinned_paths<S: serde::Serializer>(p: &[Pinned], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(p.len()))?;
    for one in p {
        seq.serialize_element(&one.path)?;
    }
    seq.end()
}

/// One agent's concrete paths. Built by `seat`; `bwrap::wrap` turns it into an argv. What the
/// records show of it (result.json `sandboxes[].agents[].seat`) is paths only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seat {
    /// The host's system folders, read-only.
    pub system: Vec<System>,
    /// What the program needs from outside the system folders and the workspace, read-only.
    pub exposed: Vec<Exposure>,
    /// The writable area: the agent's cwd, or the run's working folder under a shared sandbox,
    /// or its worktree.
    #[serde(serialize_with = "pinned_path")]
    pub workspace: Pinned,
    /// The policy's `writable` paths, resolved.
    #[serde(serialize_with = "pinned_paths")]
    pub writable: Vec<Pinned>,
    /// The policy's `read_only` paths, resolved.
    #[serde(serialize_with = "pinned_paths")]
    pub read_only: Vec<Pinned>,
    /// Git folders kept read-only: the `.git` of each writable area, and the repository's own for
    /// an agent in a worktree (so that `git status`, `diff` and `log` work in it).
    #[serde(serialize_with = "pinned_paths")]
    pub git: Vec<Pinned>,
    /// Places inside what is bound that are masked by an empty tmpfs: the project's `.awf`, the
    /// runs folder, the operator's runtime and tmux folders.
    pub masked: Vec<PathBuf>,
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

    /// Every pinned path, in the order `bwrap::wrap` numbers their descriptors.
    pub fn pinned(&self) -> Vec<&Pinned> {
        let exposed = self.exposed.iter().map(|e| &e.path);
        exposed
            .chain(self.read_only.iter())
            .chain(std::iter::once(&self.workspace))
            .chain(self.writable.iter())
            .chain(self.git.iter())
            .collect()
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
    /// The writable area, absolute: the cwd, or the run's working folder for a shared sandbox, or
    /// the agent's worktree.
    pub workspace: &'a Path,
    /// `agents/<slug>/`.
    pub control: &'a Path,
    pub socket: &'a Path,
    pub run_dir: &'a Path,
    pub awf: &'a Path,
    /// The run's working folder, whose `.awf` is awf's own.
    pub project: &'a Path,
    /// For an agent in a worktree: the repository's common git folder, shown read-only.
    pub repository: Option<&'a Path>,
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

    fn var(&self, name: &str) -> Option<PathBuf> {
        self.vars.iter().find(|(k, _)| k == name).map(|(_, v)| PathBuf::from(v)).filter(|p| p.is_absolute())
    }
}

/// Home folders: never in the sandbox; a path under one is exposed from `depth` components down
/// (`/home/<user>/<tool>`, `$HOME/<tool>`).
fn home_roots(home: Option<&Path>) -> Vec<(PathBuf, usize)> {
    let mut roots = vec![(PathBuf::from("/root"), 1), (PathBuf::from("/home"), 2)];
    if let Some(h) = home {
        roots.push((normalize(h), 1));
    }
    roots
}

/// What to bind so that `path`, which the program needs, is reachable: `None` when the sandbox
/// shows it already (it lies in one of `visible`); under a home folder, the first folder below the
/// home (`~/.pyenv` for `~/.pyenv/shims/python3`), or `path` itself when it sits right in it;
/// anywhere else (under `/tmp`, which the sandbox replaces, or a checkout elsewhere) `path` itself.
pub fn exposure_for(path: &Path, homes: &[(PathBuf, usize)], visible: &[PathBuf]) -> Option<PathBuf> {
    let path = normalize(path);
    if visible.iter().any(|v| path.starts_with(v)) || path == Path::new("/") {
        return None;
    }
    let Some((root, depth)) =
        homes.iter().filter(|(r, _)| path.starts_with(r)).max_by_key(|(r, _)| r.as_os_str().len())
    else {
        return Some(path);
    };
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

/// Everything outside the `visible` folders that running `program` touches first: the program
/// (and its real path), its `#!` interpreter, and absolute file paths among its arguments; each
/// the path to bind and what needed it.
fn exposures(
    program: &[String],
    cwd: &Path,
    op: &Operator,
    homes: &[(PathBuf, usize)],
    visible: &[PathBuf],
) -> Vec<(PathBuf, PathBuf)> {
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
    let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
    for n in needed {
        if let Some(path) = exposure_for(&n, homes, visible) {
            if !out.iter().any(|(held, _)| path.starts_with(held)) {
                out.retain(|(held, _)| !held.starts_with(&path));
                out.push((path, n));
            }
        }
    }
    out.sort();
    out
}

fn utf8(what: &'static str, p: &Path) -> Result<(), SeatError> {
    match p.to_str() {
        Some(_) => Ok(()),
        None => Err(SeatError::NotUtf8 { what, path: p.to_path_buf() }),
    }
}

/// Where a pinned path is shown: inside a writable area (the workspace, a writable path), at its
/// real place there, reached through that area's own place; elsewhere where it was named.
fn shown_at(p: Pinned, areas: &[&Pinned]) -> Pinned {
    let inside = areas.iter().filter(|a| p.path.starts_with(&a.path)).max_by_key(|a| a.path.as_os_str().len());
    match inside.and_then(|a| Some(a.dest.join(p.path.strip_prefix(&a.path).ok()?))) {
        Some(dest) => p.at(dest),
        None => p,
    }
}

/// Seats an agent: checks that `policy` (already resolved) can be enforced for it, creates its
/// home, finds its concrete paths and pins the ones it could replace.
pub fn seat(policy: &Policy, place: &Placement<'_>, op: &Operator) -> Result<Seat, SeatError> {
    if let Some(h) = &op.home {
        if !h.is_absolute() || normalize(h) == Path::new("/") {
            return Err(SeatError::Home(h.clone()));
        }
    }
    let homes = home_roots(op.home.as_deref());
    let workspace = normalize(place.workspace);
    let cwd = normalize(place.cwd);
    if let Some((r, _)) = homes.iter().find(|(r, _)| r.starts_with(&workspace)) {
        return Err(SeatError::HomeInWorkspace { workspace, home: r.clone() });
    }
    if !cwd.starts_with(&workspace) {
        return Err(SeatError::CwdOutside { cwd, workspace });
    }
    if !cwd.is_dir() {
        return Err(SeatError::CwdNotAFolder(cwd));
    }
    let ws = pin::pin(Role::Workspace, &workspace, None)?;
    let writable: Vec<Pinned> = (policy.writable.iter().filter(|p| **p != workspace))
        .map(|p| pin::pin(Role::Writable, p, Some(&workspace)).map(|p| shown_at(p, &[&ws])))
        .collect::<Result<_, _>>()?;
    let areas: Vec<&Pinned> = std::iter::once(&ws).chain(&writable).collect();
    let read_only: Vec<Pinned> = (policy.read_only.iter())
        .map(|p| pin::pin(Role::ReadOnly, p, Some(&workspace)).map(|p| shown_at(p, &areas)))
        .collect::<Result<_, _>>()?;
    // awf's own places: the project's `.awf` (serve's socket and token, the cluster key, other
    // agents' worktrees), the runs folder, the operator's runtime and tmux folders. No policy path
    // may open one (but inside the agent's own workspace, a worktree there); inside what is bound
    // they are masked below, and the agent's own control folder and worktree bound again on top.
    let candidates: Vec<PathBuf> = [Some(place.project.join(".awf")), place.run_dir.parent().map(Path::to_path_buf)]
        .into_iter()
        .flatten()
        .chain(["XDG_RUNTIME_DIR", "TMUX_TMPDIR"].iter().filter_map(|v| op.var(v)))
        .collect();
    let own: Vec<PathBuf> = candidates.iter().filter_map(|c| std::fs::canonicalize(c).ok()).collect();
    for p in writable.iter().chain(&read_only) {
        let in_own_worktree = |o: &PathBuf| ws.path.starts_with(o) && p.path.starts_with(&ws.path);
        if let Some(o) = own.iter().find(|o| p.path.starts_with(o) && !in_own_worktree(o)) {
            return Err(SeatError::AwfsOwn { role: p.role, path: p.path.clone(), own: o.clone() });
        }
    }
    // The `.git` of every writable area, wherever it leads inside one, and a worktree's
    // repository: read-only, so that nothing an agent writes there runs when awf's git does.
    let mut git: Vec<Pinned> = Vec::new();
    let dot_gits = areas.iter().map(|a| a.path.join(".git")).filter(|g| g.symlink_metadata().is_ok());
    for g in dot_gits.chain(place.repository.map(Path::to_path_buf)) {
        let pinned = match std::fs::canonicalize(&g) {
            Ok(real) if areas.iter().any(|a| real.starts_with(&a.path)) => pin::pin(Role::Git, &real, None)?,
            Ok(_) if Some(g.as_path()) == place.repository => pin::pin(Role::Git, &g, None)?,
            _ => continue,
        };
        let pinned = shown_at(pinned, &areas);
        if !git.iter().any(|p| p.path == pinned.path) {
            git.push(pinned);
        }
    }
    let system = root::system();
    let mut visible = root::system_real(&system);
    visible.extend(areas.iter().map(|a| a.path.clone()));
    visible.push(workspace.clone());
    let exposed = exposures(place.program, &cwd, op, &homes, &visible)
        .into_iter()
        .map(|(path, needed_by)| Ok(Exposure { path: pin::pin(Role::Exposed, &path, None)?, needed_by }))
        .collect::<Result<Vec<_>, PinError>>()?;
    let mut exposed = exposed;
    // With the host's network, the resolver's file too, where /etc/resolv.conf leads out of the
    // system folders (systemd-resolved keeps it under /run).
    let resolv = Path::new("/etc/resolv.conf");
    if policy.network == Network::Host {
        if let Some(real) = std::fs::canonicalize(resolv).ok().filter(|r| !visible.iter().any(|v| r.starts_with(v))) {
            exposed.push(Exposure { path: pin::pin(Role::Exposed, &real, None)?, needed_by: resolv.into() });
        }
    }
    let mut bound: Vec<(&Path, &Path)> =
        system.iter().filter(|s| s.link.is_none()).map(|s| (s.path.as_path(), s.path.as_path())).collect();
    let pins = areas.iter().copied().chain(&read_only).chain(exposed.iter().map(|e| &e.path));
    bound.extend(pins.map(|p| (p.path.as_path(), p.dest.as_path())));
    let masked = root::masks(&candidates, &bound);
    let (home, state) = own_dirs(place.control)?;
    let seat = Seat {
        system,
        exposed,
        workspace: ws,
        writable,
        read_only,
        git,
        masked,
        control: control_dirs(place.control, place.socket),
        awf: place.awf.to_path_buf(),
        state,
        home,
        cwd,
        env: op.vars.iter().filter(|(k, _)| policy.allows_env(k)).cloned().collect(),
    };
    for (what, p) in [("the workspace", &seat.workspace.dest), ("the cwd", &seat.cwd), ("the awf binary", &seat.awf)] {
        utf8(what, p)?;
    }
    for p in seat.control.iter().chain(&seat.masked).chain(seat.pinned().into_iter().map(|p| &p.dest)) {
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
    fn a_program_outside_what_the_sandbox_shows_is_exposed_by_itself_or_its_first_home_folder() {
        let r = roots();
        let visible = [PathBuf::from("/usr"), PathBuf::from("/work/proj")];
        let e = |p: &str| exposure_for(Path::new(p), &r, &visible);
        assert_eq!(e("/root/.pyenv/shims/python3"), Some("/root/.pyenv".into()));
        assert_eq!(e("/home/me/.local/bin/claude"), Some("/home/me/.local".into()));
        assert_eq!(e("/home/other/.cargo/bin/tool"), Some("/home/other/.cargo".into()));
        assert_eq!(e("/root/agent.sh"), Some("/root/agent.sh".into()));
        assert_eq!(e("/root"), None);
        assert_eq!(e("/usr/bin/python3"), None);
        assert_eq!(e("/root/.pyenv/../.ssh/id_ed25519"), Some("/root/.ssh".into()));
        assert_eq!(e("/tmp/clone/tests/agent.py"), Some("/tmp/clone/tests/agent.py".into()));
        assert_eq!(e("/srv/agents/a.py"), Some("/srv/agents/a.py".into()), "elsewhere: the file alone");
        assert_eq!(e("/work/proj/agents/a.py"), None, "in the workspace already");
    }

    fn pinned(role: Role, p: &Path) -> Pinned {
        Pinned { role, path: p.into(), dest: p.into(), dev: 0, ino: 0 }
    }

    #[test]
    fn a_moved_seat_has_its_own_control_folder_state_and_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("agents/a"), dir.path().join("agents/b"));
        let seat = Seat {
            system: vec![],
            exposed: vec![],
            workspace: pinned(Role::Workspace, dir.path()),
            writable: vec![],
            read_only: vec![],
            git: vec![],
            masked: vec![],
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
        let got = exposures(&[script.display().to_string(), "/nonexistent".into()], dir.path(), &op, &roots, &[]);
        assert_eq!(got, vec![(home.join(".tool"), interp.clone()), (script.clone(), script.clone())]);
        let got = exposures(&["interp".into(), script.display().to_string()], dir.path(), &op, &roots, &[]);
        assert_eq!(got.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), vec![home.join(".tool"), script]);
    }

    /// A project folder with a repository, awf's folder and a run folder in it, seated with
    /// `policy` (resolved against it).
    fn seated(policy: &Policy, tweak: impl FnOnce(&Path)) -> (tempfile::TempDir, Result<Seat, SeatError>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let proj = std::fs::canonicalize(dir.path()).expect("real").join("proj");
        let control = proj.join(".awf/runs/r1/agents/a");
        for d in [proj.join(".git/hooks"), proj.join("out/build"), control.clone()] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        tweak(&proj);
        let op = Operator {
            home: Some("/nonexistent-home".into()),
            path: None,
            vars: vec![("XDG_RUNTIME_DIR".into(), proj.join("out/run").display().to_string())],
        };
        let place = Placement {
            program: &[],
            cwd: &proj,
            workspace: &proj,
            control: &control,
            socket: &control.join("wf.sock"),
            run_dir: &proj.join(".awf/runs/r1"),
            awf: Path::new("/usr/bin/true"),
            project: &proj,
            repository: None,
        };
        let policy = policy.resolve(&proj, None).expect("resolved");
        let seat = seat(&policy, &place, &op);
        (dir, seat)
    }

    #[test]
    fn the_repositorys_git_folder_is_kept_read_only_and_awfs_own_places_are_masked() {
        let policy = Policy { writable: vec!["out/build".into()], ..Default::default() };
        let (dir, seat) = seated(&policy, |_| {});
        let seat = seat.expect("seated");
        let proj = std::fs::canonicalize(dir.path()).expect("real").join("proj");
        assert_eq!(seat.workspace.path, proj);
        assert_eq!(seat.writable.iter().map(|p| p.dest.clone()).collect::<Vec<_>>(), vec![proj.join("out/build")]);
        assert_eq!(seat.git.iter().map(|p| p.dest.clone()).collect::<Vec<_>>(), vec![proj.join(".git")]);
        assert_eq!(seat.masked, vec![proj.join(".awf")], "the runs folder lies in it; no runtime folder exists");
        assert!(seat.system.iter().any(|s| s.path == Path::new("/usr")));
    }

    #[test]
    fn a_policy_path_into_awfs_own_folder_is_refused_when_seated() {
        let policy = Policy { writable: vec![".awf/runs".into()], ..Default::default() };
        let (_dir, seat) = seated(&policy, |_| {});
        let e = seat.expect_err("refused");
        assert!(matches!(&e, SeatError::AwfsOwn { role: Role::Writable, .. }), "{e}");
        let policy = Policy { read_only: vec![".awf".into()], ..Default::default() };
        let (_dir, seat) = seated(&policy, |_| {});
        assert!(matches!(seat.expect_err("refused"), SeatError::AwfsOwn { role: Role::ReadOnly, .. }));
    }

    #[test]
    fn a_writable_path_that_leads_out_of_the_workspace_is_refused_when_seated() {
        let policy = Policy { writable: vec!["out/escape".into()], ..Default::default() };
        let (_dir, seat) = seated(&policy, |proj| {
            std::os::unix::fs::symlink("/etc", proj.join("out/escape")).expect("symlink");
        });
        let e = seat.expect_err("refused");
        assert!(matches!(&e, SeatError::Pin(p) if matches!(**p, PinError::LeadsOut { .. })), "{e}");
        assert!(e.to_string().contains("out/escape") && e.to_string().contains("/etc"), "{e}");
    }
}
