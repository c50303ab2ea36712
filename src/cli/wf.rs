//! `awf wf`: the agent side of the protocol. Agents run it through their launcher, which passes
//! `--socket`; it sends one frame, prints the engine's answer and exits with its code.

use crate::config::parse_duration;
use crate::control::protocol::{exit, Command, Response};
use crate::control::server::request_line;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct WfArgs {
    /// The agent's control socket (the launcher passes it; else $AWF_SOCKET)
    #[arg(long, env = "AWF_SOCKET", hide_env_values = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    cmd: WfCommand,
}

#[derive(clap::Subcommand)]
enum WfCommand {
    /// Submit the answer to OP (JSON on stdin)
    Result {
        /// The operation's id, as its prompt gives it (e.g. reviewer#1)
        op: String,
    },
    /// Acknowledge a wait: no check-in before it ends; the deadline stands
    Waiting {
        /// The operation's id
        op: String,
        /// What the agent waits for (shown in the run's records)
        #[arg(long)]
        reason: String,
        /// How long, e.g. 90s or 2m (default 10m)
        #[arg(long)]
        timeout: Option<String>,
    },
    /// Send a message (text on stdin) over a granted route
    Send {
        /// The agent to send to (its key)
        to: String,
    },
    /// Ask over a granted route (text on stdin) and print the reply
    Ask {
        /// The agent to ask (its key)
        to: String,
    },
    /// Answer message N (text on stdin)
    Reply {
        /// The number of the message that asked (#N in the inbox)
        n: u64,
    },
    /// The messages held for this agent, and the questions it was shown that await its reply
    Inbox {
        /// One JSON object a line: n, from, text, asks, status (new, awaits-reply, read, closed)
        #[arg(long)]
        json: bool,
        /// Every message delivered to this agent in the run
        #[arg(long)]
        all: bool,
    },
    /// Convene a granted council (params as a JSON object on stdin: `task`, optional `team` or
    /// `roster`, and the strategy's params); prints its output
    ///
    /// With --background it prints a receipt at once ({run_id, status, note}) and the agent is
    /// woken once with the council's output; --wait ID... waits for such councils instead;
    /// --list shows them (status, spend so far); --cancel ID stops one.
    Council {
        /// The strategy to convene (one the workflow granted this agent)
        #[arg(required_unless_present_any = ["wait", "list", "cancel"])]
        name: Option<String>,
        /// Print the council's result.json instead of its output
        #[arg(long, conflicts_with_all = ["wait", "background"])]
        json: bool,
        /// Start it and print its receipt at once; the agent is woken once with its output
        #[arg(long, conflicts_with = "wait")]
        background: bool,
        /// Wait for background councils this agent started (their run ids); print their outputs
        #[arg(long, num_args = 1.., value_name = "ID", conflicts_with = "name")]
        wait: Vec<String>,
        /// List the background councils this agent started: run_id, strategy, status, spent
        #[arg(long, conflicts_with_all = ["name", "wait", "cancel"])]
        list: bool,
        /// Stop a background council this agent started; it wakes you with what it had
        #[arg(long, value_name = "ID", conflicts_with_all = ["name", "wait"])]
        cancel: Option<String>,
    },
    /// Ask the run's operator QUESTION and wait for the answer (printed as JSON); the run shows
    /// `waiting` until `awf runs answer` gives it
    AskOperator {
        /// The question, as the operator will read it
        question: String,
        /// The answer's JSON Schema (default: a string)
        #[arg(long, value_name = "JSON")]
        schema: Option<String>,
    },
    /// Report what this turn spent
    Usage {
        /// Input tokens (a count)
        #[arg(long)]
        input: u64,
        /// Output tokens (a count)
        #[arg(long)]
        output: u64,
        /// What the turn cost, in US dollars (else it is priced from the model's price)
        #[arg(long, value_name = "USD")]
        cost: Option<f64>,
    },
}

fn stdin_text() -> Result<String, String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).map_err(|e| format!("cannot read stdin: {e}"))?;
    Ok(s)
}

fn command(cmd: WfCommand) -> Result<Command, String> {
    Ok(match cmd {
        WfCommand::Result { op } => Command::Result { op, json: stdin_text()? },
        WfCommand::Waiting { op, reason, timeout } => Command::Waiting {
            op,
            reason,
            timeout_ms: timeout
                .map(|t| parse_duration(&t).map(|d| d.as_millis() as u64))
                .transpose()
                .map_err(|e| e.to_string())?,
        },
        WfCommand::Send { to } => Command::Send { to, text: stdin_text()? },
        WfCommand::Ask { to } => Command::Ask { to, text: stdin_text()? },
        WfCommand::Reply { n } => Command::Reply { n, text: stdin_text()? },
        WfCommand::Inbox { json, all } => Command::Inbox { json, all },
        WfCommand::AskOperator { question, schema } => Command::AskOperator { question, schema },
        WfCommand::Council { list: true, .. } => Command::CouncilList,
        WfCommand::Council { cancel: Some(id), .. } => Command::CouncilCancel { id },
        WfCommand::Council { name: None, wait, .. } => Command::CouncilWait { ids: wait },
        WfCommand::Council { name: Some(name), json, background, .. } => {
            Command::Council { name, params: stdin_text()?, json, background }
        }
        WfCommand::Usage { input, output, cost } => Command::Usage { input, output, cost_usd: cost },
    })
}

fn send(socket: &PathBuf, line: &str) -> Result<Response, String> {
    let mut stream =
        UnixStream::connect(socket).map_err(|e| format!("cannot reach the engine at {}: {e}", socket.display()))?;
    // A caller the engine refuses is answered before its frame is read, and the connection closed:
    // the write may then fail, but the answer is there to read.
    let sent = stream.write_all(line.as_bytes());
    let mut answer = String::new();
    let read = BufReader::new(stream).read_line(&mut answer);
    match (sent, read) {
        (_, Ok(n)) if n > 0 => {}
        (Err(e), _) => return Err(format!("cannot send to the engine: {e}")),
        (Ok(()), Err(e)) => return Err(format!("no answer from the engine: {e}")),
        (Ok(()), Ok(_)) => return Err("no answer from the engine: it closed the connection".into()),
    }
    serde_json::from_str(&answer).map_err(|e| format!("the engine's answer is malformed ({e}): {answer}"))
}

pub fn exec(args: WfArgs) -> i32 {
    let socket = args.socket.ok_or_else(|| {
        "no control socket: agents run `wf` through their launcher ($AWF_LAUNCHER), which names it".to_string()
    });
    let result = socket.and_then(|socket| command(args.cmd).and_then(|cmd| send(&socket, &request_line(cmd))));
    match result {
        Ok(r) => {
            if !r.text.is_empty() {
                out!("{}", r.text);
            }
            r.exit
        }
        Err(e) => {
            eprintln!("awf wf: {e}");
            exit::ERROR
        }
    }
}
