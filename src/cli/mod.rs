//! The command line: argument definitions and one call per command. The only place that prints
//! and that uses anyhow. Exit codes: 0 succeeded, 1 failed, 2 bad usage/script/config, 3 stopped
//! by `ctx.stop`, 4 cancelled or past its deadline.

/// `println!` for the command line: a closed stdout (`awf runs list | head -3`) ends the output
/// quietly instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::print_line(format_args!($($arg)*))
    };
}

mod answer;
mod attach;
mod background;
mod board;
mod bridge;
mod caller;
mod confirm;
mod council;
mod doctor;
mod ending;
mod init;
mod listing;
mod live;
mod logs;
mod mcp;
mod nats;
mod pane_exec;
mod plan;
mod records;
mod runs;
mod script;
mod scripts;
mod serve;
mod show;
mod stop;
mod watch;
mod wf;
mod worker;

use clap::{Parser, Subcommand};

pub use crate::host::exit::{
    CANCELLED as EXIT_CANCELLED, FAILED as EXIT_FAILED, OK as EXIT_OK, STOPPED as EXIT_STOPPED, USAGE as EXIT_USAGE,
};

#[derive(Parser)]
#[command(name = "awf", version, about = "Run multi-agent LLM workflows written in Rhai")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run or check workflow scripts
    #[command(subcommand)]
    Script(script::ScriptCommand),
    /// List, show and run council strategies
    #[command(subcommand)]
    Council(council::CouncilCommand),
    /// Write an awf.toml and an example workflow into the current folder
    Init(init::InitArgs),
    /// Report what works on this machine: sandboxes, harnesses
    Doctor(doctor::DoctorArgs),
    /// Run records: list, show, resume
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// A long-lived server with an HTTP JSON API to launch, inspect, stop and follow runs
    Serve(serve::ServeArgs),
    /// An MCP server on stdin/stdout: tools to list strategies and run councils and workflows
    Mcp(mcp::McpArgs),
    /// Serve agent operations that runs started with `script run --nats` queue on NATS JetStream
    Worker(worker::WorkerArgs),
    /// The agent side: what agents run (through their launcher) to answer and report
    Wf(wf::WfArgs),
    /// Runs a program in a sandbox with a listed network (awf's sandbox argv calls it)
    #[command(hide = true)]
    SandboxBridge(bridge::BridgeArgs),
    /// What runs in a pane agent's tmux pane (awf's panes call it)
    #[command(hide = true)]
    PaneExec(pane_exec::PaneExecArgs),
    /// Print a shell completion script: `awf completions bash > /etc/bash_completion.d/awf`
    Completions {
        /// The shell to complete in
        shell: clap_complete::Shell,
    },
}

/// Writes one line on stdout, ignoring a reader that went away.
pub fn print_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{args}");
}

/// Invoked through an agent's launcher (a symlink named `wf`), awf is `awf wf --socket <the socket
/// beside it>`: the socket is `wf.sock` in the launcher's folder, or the path `wf.target` names.
fn launcher_args(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let Some(first) = args.first() else { return args };
    if !is_launcher(first.as_bytes()) {
        return args;
    }
    let path = std::path::Path::new(first);
    let dir = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let socket = match std::fs::read_to_string(dir.join("wf.target")) {
        Ok(target) => std::path::PathBuf::from(target.trim()),
        Err(_) => dir.join("wf.sock"),
    };
    let mut out: Vec<std::ffi::OsString> = vec!["awf".into(), "wf".into(), "--socket".into(), socket.into()];
    out.extend(args.into_iter().skip(1));
    out
}

/// The hidden first argument by which awf starts itself with arguments that must not sit on a
/// command line (a run's task, its `--args`: every local user reads `/proc/<pid>/cmdline`): the
/// arguments come on stdin instead, as a JSON list of strings, and stdin is read to its end.
pub const ARGV_ON_STDIN: &str = "--argv-on-stdin";

/// The arguments to parse: `args` as given, or, after `ARGV_ON_STDIN`, the program name followed
/// by the list read from stdin (an unreadable list is left for clap to refuse).
fn argv_on_stdin(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.len() != 2 || args[1] != ARGV_ON_STDIN {
        return args;
    }
    let mut text = String::new();
    let read = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text);
    match read.ok().and_then(|_| serde_json::from_str::<Vec<String>>(&text).ok()) {
        Some(list) => args.into_iter().take(1).chain(list.into_iter().map(Into::into)).collect(),
        None => args,
    }
}

/// Starts `awf ARGS` through `cmd` (awf's own binary, not yet spawned) with `args` on its stdin
/// rather than its command line (`ARGV_ON_STDIN`); the caller's stdout and stderr settings are
/// kept. The list is written whole before this returns.
pub fn spawn_with_argv_on_stdin(
    mut cmd: std::process::Command,
    args: &[std::ffi::OsString],
) -> std::io::Result<std::process::Child> {
    use std::io::Write;
    let list: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let text = serde_json::to_string(&list).map_err(std::io::Error::other)?;
    let mut child = cmd.arg(ARGV_ON_STDIN).stdin(std::process::Stdio::piped()).spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes())?;
    }
    Ok(child)
}

/// Whether awf was started as an agent's launcher: a path whose last part is `wf`. Reads bytes
/// and allocates nothing, so the binary can ask it before choosing its allocator.
pub fn is_launcher(path: &[u8]) -> bool {
    path.rsplit(|b| *b == b'/').next() == Some(b"wf".as_slice())
}

/// Parses the command line and runs it; returns the process exit code.
pub fn main() -> i32 {
    if let Ok(filter) = std::env::var("AWF_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    crate::telemetry::set_reporter(|text| eprintln!("awf: {text}"));
    let args = launcher_args(argv_on_stdin(std::env::args_os().collect()));
    let mut cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    // A `--detach`ed run starts its background process with the arguments this one was given.
    let argv: Vec<std::ffi::OsString> = args.into_iter().skip(1).collect();
    match &mut cli.command {
        Command::Script(script::ScriptCommand::Run(run)) => run.script.flags.argv = argv,
        Command::Council(council::CouncilCommand::Run(run)) => run.call.flags.argv = argv,
        _ => {}
    }
    // The launcher (`wf`) opens one socket and leaves the limit as it is.
    if !matches!(cli.command, Command::Wf(_)) {
        crate::open_files::raise();
    }
    let result = match cli.command {
        Command::Script(cmd) => script::exec(cmd),
        Command::Init(args) => init::exec(args),
        Command::Doctor(args) => doctor::exec(args),
        Command::Council(cmd) => council::exec(cmd),
        Command::Runs(cmd) => runs::exec(cmd),
        Command::Serve(args) => serve::exec(args),
        Command::Mcp(args) => mcp::exec(args),
        Command::Worker(args) => worker::exec(args),
        Command::Wf(args) => return wf::exec(args),
        Command::SandboxBridge(args) => bridge::exec(args),
        Command::PaneExec(args) => pane_exec::exec(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "awf", &mut std::io::stdout());
            Ok(EXIT_OK)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", shown(&e));
            EXIT_USAGE
        }
    }
}

/// An error as the command line shows it: its message, then each cause in its chain that the text
/// so far does not already end with. A typed error says its cause's text itself and keeps the
/// cause as its `source` too (`cannot read x: {source}`), which `{:#}` would print twice.
pub(crate) fn shown(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// A typed error's cause is shown once, though its text says it and its chain holds it.
    #[test]
    fn a_cause_the_message_already_says_is_shown_once() {
        let read = crate::record::docs::DocError::Read { path: "p".into(), source: std::io::Error::other("boom") };
        let e = anyhow::Error::from(read).context("cannot list runs");
        assert_eq!(super::shown(&e), "cannot list runs: cannot read p: boom");
        let e = anyhow::anyhow!("outer").context("ctx");
        assert_eq!(super::shown(&e), "ctx: outer");
    }

    /// Every subcommand, argument and flag says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let here = format!("{path} {}", cmd.get_name());
            if cmd.get_about().is_none() && !path.is_empty() {
                missing.push(format!("{here} (the command)"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{here} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &here, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
    }
}
