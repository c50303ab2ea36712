//! `awf pane-exec` (hidden): what runs in an agent's tmux pane. With a launch file, it becomes the
//! agent's CLI (`pane::launch`: argv and environment from the file, removed as it is read); with
//! `--hold TEXT`, it shows the text and waits to be replaced (the pane before its first turn).
//! Not for operators: awf's panes run it.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PaneExecArgs {
    /// The launch file awf wrote for this pane
    #[arg(required_unless_present = "hold")]
    launch: Option<PathBuf>,
    /// Show this text and wait to be replaced
    #[arg(long, value_name = "TEXT")]
    hold: Option<String>,
}

pub fn exec(args: PaneExecArgs) -> anyhow::Result<i32> {
    if let Some(text) = args.hold {
        super::print_line(format_args!("{text}"));
        crate::pane::launch::hold();
    }
    let Some(file) = args.launch else { return Ok(super::EXIT_USAGE) };
    Err(crate::pane::launch::exec(&file).into())
}
