//! Starting a run and stopping one, each through the command line in a process of its own:
//! `awf council run|script run ... --detach` checks the call as in the foreground, starts the run
//! as a background run (its own session, queued in the machine's pool, its output in the run
//! folder's `output.log`) and prints its id, so the run outlives the MCP connection; when it
//! refuses instead, what it printed is the tool's error. `awf runs stop ID` stops a run of any
//! process (`awf serve`'s too) through its control socket and waits for its end.

use super::runs::RunDir;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The longest a `--detach` or `runs stop` command may take.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `awf ARGS --runs-dir DIR` in `cwd`; its exit status and what it printed (stderr, then
/// stdout). The arguments (a task, `--args`) reach it on its stdin, never on its command line
/// (`cli::ARGV_ON_STDIN`), which every local user can read.
async fn awf(cwd: &Path, runs_dir: &Path, args: Vec<String>) -> Result<(bool, String, String), String> {
    use tokio::io::AsyncWriteExt;
    let exe = std::env::current_exe().map_err(|e| format!("error: cannot find the awf binary: {e}"))?;
    let mut list = args.clone();
    list.extend(["--runs-dir".to_string(), runs_dir.display().to_string()]);
    let text = serde_json::to_string(&list).map_err(|e| format!("error: {e}"))?;
    let mut cmd = tokio::process::Command::from(crate::open_files::command(exe));
    cmd.arg(crate::cli::ARGV_ON_STDIN)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("error: cannot start awf: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes()).await.map_err(|e| format!("error: cannot start awf: {e}"))?;
    }
    let out = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .map_err(|_| format!("error: `awf {}` did not finish within {}s", args.join(" "), LIMIT.as_secs()))?
        .map_err(|e| format!("error: awf: {e}"))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    Ok((out.status.success(), text(&out.stderr), text(&out.stdout)))
}

/// Starts `awf ARGS --detach -q`; returns the new run once its folder exists.
pub async fn start(cwd: &Path, runs_dir: &Path, mut args: Vec<String>) -> Result<RunDir, String> {
    args.extend(["--detach".to_string(), "-q".to_string()]);
    let (ok, stderr, stdout) = awf(cwd, runs_dir, args).await?;
    if !ok {
        return Err(if stderr.is_empty() { format!("error: awf refused the run: {stdout}") } else { stderr });
    }
    let id = stdout.lines().last().unwrap_or("").trim();
    super::runs::find(runs_dir, id).map_err(|e| format!("{e} (awf printed {stdout:?})"))
}

/// `awf ARGS --json` of `script plan` or `council plan`: the plan it printed (also when the script
/// failed on the fake answers, exit 1), else what it refused the call with.
pub async fn plan(cwd: &Path, runs_dir: &Path, mut args: Vec<String>) -> Result<serde_json::Value, String> {
    args.push("--json".to_string());
    let (ok, stderr, stdout) = awf(cwd, runs_dir, args).await?;
    match serde_json::from_str::<serde_json::Value>(&stdout) {
        Ok(plan) if plan.get("operations").is_some() => Ok(plan),
        _ if ok => Err(format!("error: awf printed no plan: {stdout}")),
        _ => Err(if stderr.is_empty() { format!("error: awf refused the plan: {stdout}") } else { stderr }),
    }
}

/// `awf runs stop ID`: its lines, and whether it failed.
pub async fn stop(cwd: &Path, runs_dir: &Path, run: &RunDir) -> Result<String, String> {
    let (ok, stderr, stdout) = awf(cwd, runs_dir, vec!["runs".into(), "stop".into(), run.id.clone()]).await?;
    let text = [stderr, stdout].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
    if ok {
        Ok(text)
    } else {
        Err(text)
    }
}
