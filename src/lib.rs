//! awf runs multi-agent LLM workflows written in Rhai.
//!
//! # Bird's-eye view
//!
//! A workflow is a Rhai script. It opens agents, gives them turns whose answers must match a JSON
//! Schema, runs branches in parallel and groups work into recorded stages. Scripts only
//! orchestrate: every effect (an agent turn, a log line, a stage record) is a host call into the
//! Rust core, which owns scheduling, deadlines, cancellation, validation, records and accounting.
//!
//! A run goes: a command (`cli::script`, `cli::council`, `cli::runs`, `cli::serve`) loads the config
//! and the script (`script::load`: compile once with imports embedded, static checks, META read
//! without running), checks the arguments against `META.args`, resolves its limits
//! (`run::limits::resolve`), starts the run with its books and the capabilities it is given
//! (`host::launch::start`: folder, `run.json`, caller, parent; the one place a run is put
//! together), and calls `host::launch::run` holding its `Admission`, which drives it
//! (`host::drive`): starts the script on a thread of its own, waits for it under the run's
//! deadline and any stop (a 5 s grace), decides the status and writes `result.json`. Host calls block the script thread on the tokio runtime.
//!
//! # Layers
//!
//! Top-level modules form layers, listed bottom to top, one numbered line per layer starting with
//! its modules. A module names only modules of its own layer or below (`crate::x` paths), and the
//! modules of one layer form no cycle: `tests/tidy` reads this list and checks both (`cargo test
//! --test tidy`, run by `.ci/run`), with the code map below and each "the only module that names"
//! sentence in it.
//!
//! 1. `open_files`, `record`, `accounting`, `stdlib`, `sandbox`, `worktree`, `pane`: the open-file
//!    limit, the run folder's writer, usage and prices, the embedded strategies, sandbox policy,
//!    argv and seat (data and pure functions), git worktrees, and tmux panes.
//! 2. `config`: `awf.toml`.
//! 3. `redact`, `watch`, `telemetry`: they read the config.
//! 4. `run`: **the run core**. A run's identity and folder, config, tokio handle, root scope, the
//!    one deadline helper, the stop cause, records and the `Event` enum, statuses, outcomes, the
//!    scheduler (limits, permits, budgets, accounts), schemas, stages, progress, checkpoints,
//!    resume data. It holds the books of the run itself (`StageBook`, the scheduler's accounts,
//!    `Checkpoints`) but not those of its agents and routes: those books are above it and
//!    receive the run.
//! 5. `control`: the answer channel (slots, protocol, an agent's socket, who may use it).
//! 6. `harness`: one session per agent and harness.
//! 7. `messaging`: the router. It reaches agents only through the `Directory` trait it defines.
//! 8. `agent`: the agents of a run (`AgentBook`, the router's `Directory`) and the one operation
//!    pipeline.
//! 9. `decision`: decisions, closed questions to the decision model, asked through `agent`.
//! 10. `host`: a run with its books, and `drive`. The script comes in through the `Script` trait.
//! 11. `script`: the rhai host.
//! 12. `council`: strategies, and councils convened from a turn.
//! 13. `cluster`, `plan`: NATS JetStream; a workflow's plan before spending.
//! 14. `cli`: the commands.
//!
//! # Code map
//!
//! - `cli/`: argument definitions and one call per command; the only place that prints (layers
//!   below report through callbacks, as `cluster::Report`; `tests/tidy` fails on a print
//!   elsewhere) and uses anyhow. `script.rs` (`script run|check`, `--watch`; `prepare` builds a run's spec from the
//!   flags and config, shared by every command that starts runs; `--detach`), `ending.rs` (how an
//!   attempt of this process ends: the signals that stop it, what it prints, its exit code),
//!   `council.rs` (`council
//!   list|show|run`), `plan.rs` (`script plan`, `council plan`: a plan printed as text or `--json`), `confirm.rs` (runs that ask first: planned before they start, refused past `confirm_usd` without a terminal unless `--yes`), `worker.rs` (`awf worker`, `runs submit`), `nats.rs` (the `--nats*` flags
//!   of `worker`, `script run` and `runs submit`, put over `[cluster]` field by field), `runs.rs` (`runs
//!   list|show|resume|stop|answer|logs|submit|clean`; resuming a council run, `--values`), `answer.rs`
//!   (`runs answer`, also for `serve` and `mcp`: an operator's answer through the run's control
//!   socket), `listing.rs` (what a run folder says: status, `interrupted`, age, spend),
//!   `records.rs` (turns, operation events, journal answers and an HTTP agent's history read back
//!   as types), `show.rs` (`runs show`: each agent's operations and worktrees; `--agent`: its turns one by one),
//!   `logs.rs` (events as readable lines, followed; a rejection as its errors), `stop.rs` (`runs stop` through a run's control
//!   socket), `background.rs` (`--detach`: the background process and the machine-wide queue),
//!   `serve/` (`awf serve`: the axum HTTP JSON
//!   API on a Unix socket or loopback port; runs execute in-process through `host::drive`,
//!   `--max-runs` at once; `queue.rs` the bounded queue (`--max-queued`, 429) and how a run starts
//!   (fresh, or resumed through `runs::reattempt`), `runs.rs` the `/runs` routes (a run is kept on
//!   disk before its 202), `recover.rs` what a serve that died left (queued: run; interrupted:
//!   resumed; in acceptance order; `--no-recover`), `job.rs` the checked body, `events.rs` the
//!   event stream; `auth.rs` the Host, Origin and bearer-token checks on TCP (no cookie stands
//!   for the token), `sign_in.rs` the browser's sign-in link (the token after `#`, kept by the
//!   page in its tab's `sessionStorage`), `dashboard.rs` the page at `/` (`dashboard.html` and
//!   `dashboard.js`, embedded: the shell, read without the token) and its runs table, `run_page.rs` one run as
//!   the page draws it (`GET /runs/{id}/view`), `answer.rs` `POST /runs/{id}/answer`, `plans.rs` `POST /plans` (the plan of a `POST /runs` body), `private.rs` the 0600 socket and token file, `scripts.rs` which script a client may name,
//!   `listen.rs` the two listeners (the Unix one refusing, with a 403 before reading, a peer of
//!   another user or pid namespace), `options.rs` the limits a `POST /runs` sets, `strategies.rs`
//!   the watched registry and `GET /strategies`), `init.rs`, `caller.rs` (`--caller`, `--caller-home`: the calling session, checked), `live.rs` (the terminal view),
//!   `board.rs` (a run's view drawn as lines for a terminal's width: the live view's agent rows,
//!   `runs watch`; `board_tests.rs` its tests), `watch.rs` (`awf runs watch`: a run started elsewhere, followed to its end),
//!   `wf.rs` (`awf wf`,
//!   the agent side of the protocol), `bridge.rs` (the hidden `awf sandbox-bridge`), `pane_exec.rs`
//!   (the hidden `awf pane-exec`: what runs in a pane agent's pane), `attach.rs` (`runs attach`: a
//!   terminal attached to a run's tmux session; off a terminal, the command that attaches), `doctor.rs` (`awf doctor`: a list of checks, each a name, an
//!   ok flag and a detail), `mcp/` (`awf mcp`, the MCP server on stdio, and `http_service`, which
//!   `serve` mounts at `/mcp`; `rmcp` is named only here: `mod.rs` the handler, every failure a
//!   tool error with the command line's text; `tools.rs` the names, schemas and arguments (`plan_workflow`, `plan_council`: the plan `script|council plan --json` prints);
//!   `launch.rs` runs started with `--detach` and stopped with `runs stop`, as processes of their
//!   own; `runs.rs` a run read back from its folder through `listing.rs`; `wait.rs` waiting up to
//!   `wait_s`, progress from `events.jsonl` after a cursor (`since`), the cursor reached returned), `scripts.rs` (which workflow a client of `serve` or
//!   `mcp` may name).
//! - `script/`: the script host, **the only module that names rhai**. `engine.rs` (the one engine
//!   builder: limits, no `eval`, `sleep` replaced, print/debug to the run log, `ctx`/`args` via
//!   `on_var`, the progress hook), `guard.rs` (the data guard in place of rhai's size limits:
//!   nesting depth and memory, measured from `on_var` at a cost proportional to the work done),
//!   `resolver.rs` (imports limited to the script's folder, `scripts/`, `stdlib/`, the user's
//!   strategies folder and the embedded stdlib), `check.rs` (unknown functions, method calls a
//!   script function would shadow), `render.rs` (rustc-style errors; long lines cut around the
//!   caret; which files may show lines), `convert.rs` (the one place `Dynamic` meets JSON),
//!   `responder.rs` (fake responder scripts), `pool.rs` (reused branch threads, parked when idle),
//!   `deferred.rs` (helpers that join a parallel's caller after a grace, started by a timer thread
//!   that ticks while groups come), `constants.rs` (each parallel worker's own copy of the global
//!   constants), `captures.rs` (which captured variables a closure's body may change; the others
//!   are copied for each parallel branch), `text.rs` (arrays' and maps' text, rhai's output without its per-element
//!   call), `callbacks.rs` (arrays' `map` and `filter`, calling a closure in the one form it
//!   declares instead of rhai's failed tries), `reference.rs` (the host API as documentation generated from the engine's own
//!   metadata: `awf script api`, kept in README.md by a test, and `awf script defs`, the editors'
//!   definition files), `api/` (`mod.rs`: `ScriptRun`, the host plus the run's engine for branch
//!   threads; `doc.rs`: every host function registered with its parameter names and doc comment,
//!   which `reference.rs` reads; one file per `ctx` namespace: `ctx.rs` (with
//!   `messages.allow`), `agents.rs`, `caller.rs` (`caller()`, `fork_caller`), `parallel.rs`, `stage.rs`,
//!   `checkpoint.rs` (`ctx.checkpoint`), `decisions.rs` (`ctx.decisions.decide`, `configured`),
//!   `sandboxes.rs` (`ctx.sandboxes.open`, the `Sandbox` handle),
//!   `worktrees.rs` (`ctx.worktrees.merge`, `a.worktree`)).
//! - `host/`: `mod.rs` (`Host`: the run, its `AgentBook` and `Router`; `finish` settles the books,
//!   then the run), `drive.rs` (a run from the script's start to `result.json`: wait, deadline,
//!   stop grace, background councils still running, status, the run's trace), `control.rs` (the
//!   run's control socket: status, stop, kill, answer, for processes of its own namespaces only,
//!   a capped number of connections at once; and its client), `exit.rs` (exit codes),
//!   `launch.rs` (**the one way a run starts**: `Request`, the `Capabilities` a host is built with
//!   (responders, the council convener, how background councils are admitted), `Admission` (at once,
//!   the machine's pool, serve's run limit, a worker's slot), `start` and `run`), `pool.rs` (the
//!   machine-wide background pool: flock'd tickets and slots, `background.json`, changed under a
//!   flock of its run folder so a stop and the waiting process never overwrite each other).
//! - `cluster/`: runs' agent operations on NATS JetStream, **the only module that names
//!   async-nats** (unused on one machine). `options.rs` (what a connection takes, from `[cluster]` and
//!   the `--nats*` flags: a server list, one way to authenticate (URL, variables, nkey seed or
//!   creds file, 0600), TLS and client certificates; URLs shown with credentials masked),
//!   `error.rs` (`ClusterError`: the configuration, the servers silent or refusing, a store of
//!   another schema, a NATS call, a message the worker's rules refuse, a run it cannot own),
//!   `connect.rs` (a bounded connect, a clear error; the ops work-queue stream, the journal bucket
//!   and the sessions' object store made or checked against the schema version, every step retried
//!   with backoff while a cluster elects, a refused permission named at once),
//!   `seal.rs` (every message and kept entry sealed with the cluster key: HMAC-SHA256 over the
//!   envelope of kind, place (run, attempt, agent, op id), expiry and body; opened or refused by
//!   name), `key.rs` (the cluster key: `AWF_CLUSTER_KEY`, `[cluster] key_file`, or
//!   `.awf/cluster.key` generated 0600), `admit.rs` (a worker's rules: runtimes by name in its own
//!   config, inline ones only when allowed and never with env, key variable, args or URL, folders
//!   under its roots, a sandbox no looser than its floor),
//!   `wire.rs` (the messages; runtimes by name, never a program, key or env), `remote.rs` (`script run --nats`: the owner's `RemoteSession`, given
//!   to the agent book through `agent::remote::Remote`: each turn published by harness subject and
//!   deduplicated by message id, its outcome from a reply subject journalled create-only in the
//!   bucket, then put in the local slot, so the records are a local run's; the run's queued ops
//!   purged when it ends), `worker.rs` (`awf
//!   worker`: one durable pull consumer per harness, slots, progress heartbeats, ack after the
//!   answer; an op answered in the bucket is never run again; refusals counted in `Stats`; its
//!   lines go to the `Report` the CLI passes, this layer never prints), `lease.rs` (the running worker's
//!   lease in the bucket, revision-checked: a stale one is taken over, a late answer dropped),
//!   `store.rs` (create-only outcome and journal entries, retried while a cluster elects),
//!   `affinity.rs` (an agent's turns to the worker that ran its last one while its heartbeat is
//!   fresh, else to any), `sessions.rs` (after each turn on a worker, what the agent's harness
//!   exports, `Session::export`, is stored in the object store `AWF_SESSIONS` keyed by run and
//!   agent, at most 64 MiB; a worker opening an agent another held imports it before its first
//!   turn there), `runs.rs`
//!   (`awf runs submit`: whole runs in their own work-queue stream, run in-process by a worker as
//!   their owner, taken over under the same id when it dies), `shadow.rs` (the worker's own run
//!   per owner's run, `.awf/worker-runs/<run>-<worker>`, whose agent book and pipeline run the ops).
//! - `plan/`: a plan before spending (`awf script plan`): `mod.rs` (the workflow run as a real run
//!   in a throwaway runs folder, checkpoints answered with their schema's example, cut at a bound;
//!   `Plan`, assembled from that run's records), `session.rs` (every agent's session fake through
//!   the agent book's `Remote` hook, keeping its harness and model; each turn's sizes measured),
//!   `estimate.rs` (an operation's tokens as a range, priced), `history.rs` (what earlier runs of
//!   the script spent per operation), `render.rs` (the plan as text).
//! - `telemetry/`: OpenTelemetry traces over OTLP/HTTP, **the only module that names the
//!   opentelemetry crates**; `spans.rs` builds the spans from a run's records on a thread of its
//!   own (the run core never calls it).
//! - `run/`: the run core. `mod.rs` (identity, stop cause, recording a settled operation, finish),
//!   `event.rs` (every events.jsonl type), `caller.rs` (the calling session, `run.json` `caller`), `outcome.rs`
//!   (outcomes and their `turns.jsonl`/`journal.jsonl` lines), `schema.rs` (validators cached by
//!   schema text, violations with JSON pointers, example values), `deadline.rs` (`Deadline`: the one deadline type, from `--deadline` and `timeout_ms` down to the harnesses), `scope.rs` (the
//!   per-thread scope: cancellation token, deadline, stage, group), `limits.rs` (the one resolver of
//!   a run's limits: flags over recorded over awf.toml), `scheduler.rs` (the one gate for
//!   every operation: concurrency, agents, budgets; the accounts), `stages.rs`, `progress.rs`,
//!   `children.rs` (child runs: still running, billed once), `resume.rs` (what a new attempt reuses: stages on record, and answered operations from the
//!   journal; the run's lock is taken first), `checkpoint.rs` (operator checkpoints: the open
//!   questions, `waiting` in `run.json`, answers validated and journalled, replayed), `leftovers.rs` (killing what a dead attempt's agents
//!   left).
//! - `agent/`: logical agents. `mod.rs` (the agent: runtime, session, counters, closing), `book.rs`
//!   (`AgentBook`: open with the compatibility rules, skills checked, get, stop; the router's `Directory`),
//!   `error.rs` (`OpenError`, whose `is_config` decides exit 2 against 1; why a sandbox, a
//!   workflow's sandbox handle or a fork of the caller is refused; a fork into a key taken),
//!   `caller.rs` (a fork of the run's caller, or why not),
//!   `decide.rs` (a decision model's turn: a one-off agent per decision, not in the book, one turn
//!   through the pipeline, billed under its key, with its reply's log-probabilities),
//!   `remote.rs` (the hook through which `cluster` gives agents remote sessions),
//!   `operation.rs` (an operation as data: `Turn`, `Body`, `Done`, `Op`, `Ran`, `OpError`),
//!   `op.rs` (**the one operation pipeline**: queue, permit, budget, deadlines, cancellation,
//!   records), `fingerprint.rs` (a turn's hash and its parts' hashes, as the journal holds them),
//!   `kinds.rs` (what a turn, a decision's turn, compaction, fork and settings change do inside
//!   the pipeline), `message.rs` (what a message operation does inside it: the agent shown its
//!   held messages), `start.rs` (the calls that start operations: ids, the same-id rule, replay;
//!   and an idle agent woken for its held messages), `supervise.rs` (a turn's nudges,
//!   and the routes and held messages shown with every turn), `session.rs` (starting a harness
//!   session: folder, endpoint, HTTP settings, seat), `seating.rs` (an agent's sandbox chosen,
//!   seated and recorded; a workflow's sandboxes opened and closed), `sandboxes.rs` (what a spec
//!   asks for, the handles of the sandboxes a workflow opens and their list),
//!   `panes.rs` (a run's tmux panes: one session per run, a window per stage, an agent's pane
//!   placed beside another or where there is room, the reason when a layout cannot be honoured,
//!   closed or released when the run ends or the agent stops, `result.json` `panes`),
//!   `worktrees.rs` (a run's agent worktrees: added as an isolated agent
//!   opens, found again on resume, what it left committed as it closes or the run ends, removed or
//!   kept, `run.json` `worktrees`), `messenger.rs` (an agent's side of the router), `responders.rs` (fake
//!   responder scripts, compiled once per run).
//! - `decision/`: decisions (`ctx.decisions.decide`), **the only module that reads a decision's
//!   distribution**: `mod.rs` (`DecisionBook`: the decisions on record, the keys used and where,
//!   every decision in the order asked; `decide`: replay, the model, the floor, the fallback (the
//!   operator at checkpoint `decision-<key>`, a default, an error), the records), `spec.rs` (the
//!   spec and its every bad input), `prompt.rs` (the question, the options, the state fenced as
//!   untrusted; the answer's schema), `ask.rs` (the `[decisions]` runtime, the model asked through
//!   `agent::decide`, its answer read: from the tokens, or none when they came and do not yield
//!   the written choice, or the model's claim when none came), `logprobs.rs` (the distribution over
//!   the options from the tokens where the choice was written, once they are shown to spell the
//!   accepted answer), `record.rs` (what `result.json` `decisions`, the journal and the script get).
//! - `messaging/`: routes (20 messages unless the workflow says), held messages (a working agent
//!   is shown them with its next turn or check-in; going idle wakes it only for a question, whose
//!   asker waits), asks and replies, stages that wait for their routes to fall quiet and record
//!   what is still held as undelivered; `prompt.rs` (what an agent is told about its routes and
//!   messages).
//! - `council/`: the strategy catalog (discovery, META without running, teams, catalog lines, the
//!   required-param refusal), `params.rs` (a call's params coerced to META's types and a blank
//!   roster member refused, before any run folder) and `registry.rs` (strategies compiled once,
//!   recompiled when their version, a hash of the file and its imports, changes; removed when
//!   their file goes), `child.rs` (councils convened from a turn, run as child runs: depth,
//!   params and budget checked first; linked both ways; budget what the parent has left, deadline the
//!   calling op's, stopped when it ends; run on a task of its own that bills its spend once: on
//!   the calling op's meter, or on a `council` line when the op settled first),
//!   `background.rs` (`wf council --background`: the same child run outliving the calling op, a
//!   slot of the machine's background pool (`host::pool`, when the host's capabilities say
//!   `CouncilPool::Machine`), the parent's unreserved
//!   budget set aside, billed once as a `council` line, its output to the agent once: a waking
//!   message or `wf council --wait`; a wait that gives up leaves the councils to wake the agent).
//! - `watch.rs`: notify events filtered to `.rhai` changes, debounced. `stdlib.rs`: `stdlib/` as
//!   embedded at build time (`build.rs`).
//! - `harness/`: the `Session` trait (with `export`/`import`: what another machine needs to take
//!   an agent over: an HTTP agent's history, a CLI agent's home packed by `cli/carry.rs` and resumed
//!   by `Cli::resume`) and one file per harness (`fake.rs`, `command.rs`); `error.rs` (`HarnessError`:
//!   what a harness cannot do, a bad setting, its own files' I/O, a program that does not start, a
//!   stored session it cannot take, each with its source; `Scrubbed` when its text held a secret);
//!   `spawn.rs` (starting a turn's process in a session of its own: death with awf, `AWF_RUN_ID`,
//!   its group recorded, its session admitted to the socket; `spawn/program.rs` the program, its
//!   environment and folder, found on PATH and made ready to exec; `spawn/start.rs` the start
//!   itself, `clone(CLONE_VM | CLONE_VFORK)` as `posix_spawn` does, plus `setsid` and
//!   `PR_SET_PDEATHSIG`, with a copy of only the descriptors below the agents' listeners (which
//!   `control/server.rs` keeps from `LISTENER_FDS_FROM` up); `spawn/child.rs` the started
//!   process: pipes, stdin's text put in its pipe before the start, exit through a pidfd, killed
//!   and reaped when dropped); `process.rs` (the one lifecycle of a turn's process, for `command`
//!   and the CLIs: `process/pipes.rs` what of stdin the pipe did not take, written in the
//!   background, the captures, stdout's lines; `process/watch.rs` the state machine (running, killed, draining, over) with the stall clock
//!   and the answer's and the final event's graces; then an acknowledged wait, the group killed);
//!   `scrubbed.rs` (the wrapper every session is opened in: what a harness reports is scrubbed of
//!   the run's secrets before the engine sees it); `http/` (`openai`, `anthropic`; `session.rs`:
//!   the history, `turn.rs`: a turn's requests and answers, `answer.rs`: answers found in a
//!   reply's text and cut-off replies, `context.rs`: requests sized to the model's context, `size.rs`: a request's size and how it
//!   was had, `count.rs`: a request's size as
//!   the server counts it (llama-server's `/tokenize`, else an estimate calibrated per base URL
//!   and model from the replies' `prompt_tokens`),
//!   `tools.rs`: the `wf_*` tools as control commands, `request.rs`: retries, the streamed reply
//!   and its spend on the operation's `Meter`, `sse.rs`, `probe.rs`: `awf doctor --deep`); `cli/` (`claude.rs`, `codex.rs`, `pi.rs`: agent CLIs run
//!   per turn in a process group, the prompt on stdin and the instructions in a file, a home per
//!   agent (the sandbox seat's home when sandboxed: the
//!   argv is wrapped like `command`'s), judged by their JSONL events; `mod.rs` holds what they
//!   share and the pinned versions, `session.rs` the session and its turns, `run.rs` one process
//!   run through `process.rs` and its verdict, `home.rs` the home and credential seeding,
//!   `events.rs` the event helpers, `doctor.rs` `doctor_checks`, `skills.rs` skill folders checked,
//!   copied into the home and recorded, `caller.rs` a caller's transcript found and the probe of
//!   an agent's live session; `interactive/` the CLI run interactively in a tmux pane:
//!   `mod.rs` what was verified of each CLI in a pane and the `Interactive` trait, `turn.rs` a
//!   turn in the pane, `transcript.rs` the CLI's session file read as it grows, and
//!   `claude/interactive.rs`, `codex/interactive.rs`, `pi/interactive.rs` each CLI's part); `net/` (a sandbox's listed network: `proxy.rs` awf's allow-list
//!   proxy on the agent's socket, per turn; `bridge.rs` `awf sandbox-bridge`, loopback TCP inside
//!   the sandbox relayed to it).
//! - `control/`: the answer channel every harness shares: `slot.rs` (result slots, rejection
//!   text), `strict.rs` (an answer's JSON read strictly: a key given twice is refused, wherever
//!   answers are read: the slot, a structured reply, `wf_result` arguments, an answer in text), `prompt.rs` (the answer instructions, nudge and rejection hint
//!   for the session's `AnswerMode`: launcher, `wf_result` tool, or the reply itself), `protocol.rs` (the control-plane
//!   frames; **no I/O**), `dispatch.rs` (**the one dispatcher**: a `Command` carried out against an
//!   agent's control state, with the same `Response` and events for the socket and the HTTP
//!   `wf_*` tools), `state.rs` (an agent's control state: its open operations, where its events
//!   go, how a refusal is recorded), `messenger.rs` (the `Messenger` trait, errors typed
//!   `Refused | Failed`), `calls.rs` (what a turn asks of the layers above through it: a council
//!   `Call` and what it `Convened`, an `OperatorCall`), `operator.rs` (`wf ask-operator`: an agent's question to the operator,
//!   keyed by agent, op and count; only with the agent spec's `operator: true` grant, and the
//!   prompt text saying how), `convene.rs` (an agent's council grant, the `Convener` trait the council
//!   layer implements, the prompt text on convening), `server.rs` (one agent's socket and launcher; what a
//!   connection may cost: the peer checked before a byte is read, connections and frames being
//!   read capped, a frame's time bounded; `server_tests.rs` its tests), `peer.rs`
//!   (which processes a socket serves: those of its agent's running turns' sessions or trees),
//!   `namespace.rs` (whether a socket's peer shares this process's user and pid namespaces:
//!   `SO_PEERCRED`'s pid, `/proc/<pid>/ns`, checked alive through `SO_PEERPIDFD`; serve's socket
//!   and a run's `control.sock` refuse any other peer).
//! - `sandbox/`: where a program agent (`command`, `claude`, `codex`, `pi`) runs confined, as data
//!   and pure functions. `mod.rs` (how each harness meets a sandbox; a seated agent's sandbox;
//!   `on_path`, the one PATH search, which turn processes use too),
//!   `policy.rs` (the policy as data, **no I/O**), `seat.rs` (an agent's concrete paths, found once
//!   when it is seated: workspace, the policy's paths, what the program needs from outside the
//!   system folders, git folders kept read-only, places masked, control folder, own home),
//!   `root.rs` (the allow-list a sandbox's root is built from: the host's system folders, and the
//!   places awf keeps for itself masked inside what is bound), `pin.rs` (**the only module that
//!   opens a bind source**: paths an agent could replace, pinned by device and inode when seated,
//!   opened again before every turn following no symlink, refused by name when changed),
//!   `bwrap.rs` (**the one pure function** policy + seat → bwrap argv, the environment it is
//!   spawned with and the pinned paths it mounts by descriptor: no variable's value on a command
//!   line; mounts shallowest first), `provider.rs` (bwrap on PATH, probed once, able to mount by
//!   descriptor), `net.rs` (a listed network: `host:port` entries parsed and
//!   matched, the bridge's argv and proxy variables).
//! - `record/`: the run folder, **the only module that writes it**: the JSONL envelope (a
//!   `RecordEvent` names its type), atomic JSON documents, readers tolerant of a torn last line;
//!   `writer.rs` (per-file buffers behind one lock and the writer thread that writes them in
//!   batches, woken only when it is idle or a caller waits; a durable line whose appender finds no
//!   batch being written is written by the appender), `groups.rs` (turn process groups on
//!   record), `lock.rs` (the run's lock, and whether a live attempt holds it), `accepted.rs`
//!   (`serve.json` and `serve.lock`: a run a serve accepted, and which serve holds it),
//!   `agent_files.rs` (an agent's part of the folder: each operation's liveness log and captured
//!   output, bounded and scrubbed), `private.rs` (folders 0700 and files 0600, created so: the
//!   harnesses create their folders in a run folder through it), `scratch.rs` (a throwaway runs
//!   folder, removed when dropped: a plan's), and the read side: `status.rs`
//!   (`RunStatus`, `StageStatus`, `OutcomeKind`, and `Recorded`, a status kept as written when this
//!   version does not know it), `docs.rs` (`run.json`; `result.json` as the `ResultDoc` the run core
//!   writes, read back by every reader; `background.json`, which `host::pool` writes), `lines.rs` (turns, journal,
//!   stages), `events.rs` (events, an unknown type kept as `Other`), `view.rs` (events folded into
//!   a run's view: each agent's state, operation, last activity and spend; stages, groups,
//!   checkpoints; `Follow` reads a growing `events.jsonl`; `view_tests.rs` its tests): every reader of a run folder
//!   reads awf's own records through them. The exceptions to "writes go through record", each listed
//!   with its reason in `tests/tidy/main.rs`: a CLI agent's home (credentials seeded, sessions moved,
//!   a carried home unpacked by `harness/cli`).
//! - `worktree/`: git worktrees for agents, **the only module that runs git** (`git -C`, explicit
//!   arguments, typed errors): `git.rs` (the one command builder: no hooks, no fsmonitor, no
//!   program the repository's config names, no fetch, no `GIT_*` of awf's own, the git folders
//!   named), `mod.rs` (the repository and base commit, an agent's worktree
//!   added, found again, its leftovers committed on its branch (repositories of their own left
//!   out and listed), removed, what it changed),
//!   `merge.rs` (branches merged in order without a working tree; conflicts as data, the checkout
//!   moved once by a fast-forward), `recorded.rs` (`run.json` `worktrees` as a type, and `awf runs
//!   clean`).
//! - `pane/`: tmux panes for agents with `placement: "pane"`, **the only module that runs tmux**
//!   (`tmux -L awf -f /dev/null`, explicit arguments, `TMUX` unset, typed errors): `mod.rs`
//!   (a run's session `awf-<run id>`, windows, splits, a pane's process replaced, text pasted,
//!   keys sent, screens captured, states read, panes closed), `spec.rs` (the spec's `placement`,
//!   `layout` and `keep_pane` as data; `PaneRecord`, where a pane went and why), `launch.rs`
//!   (`awf pane-exec`: a pane's program, argv and environment read from a 0600 file, exec'd).
//! - `accounting.rs`: usage, prices (the built-in table; `[prices]` overrides), folds by agent,
//!   stage and model; `Meter`, an operation's running spend (billed however the operation ends).
//! - `redact.rs`: a run's secret values (key variables, secret-looking names) and the scrubbing of
//!   text: those values, `Bearer` tokens and `x-api-key` values become `[redacted]`.
//! - `config.rs`: `awf.toml`, runtime aliases.
//! - `open_files.rs`: awf's open-file limit, raised for itself (`raise`, before anything starts);
//!   every process awf starts gets back the limit awf started with (`command`, and the turn
//!   spawn's own `Heritage`).
//! - `stdlib/` (not Rust): the council strategies, their shared helpers and the teams, in Rhai.
//!
//! # Invariants
//!
//! - `ctx` is never a scope variable: `on_var` supplies it, so closures that use it never capture
//!   it and `ctx.parallel` never meets a data race on it (RHAI-HOST.md pitfall 1). Parallel
//!   branches read their own copies of the global constants and of every captured variable the
//!   closure's body cannot change (`script/captures.rs`, conservative) that holds at most 65,536
//!   items; only the others can be locked by another branch.
//! - Every agent operation (turn, message operation, compaction, fork, settings change) goes
//!   through `agent::op::execute`, and so through the agent's queue and the scheduler: budgets, the
//!   concurrency limit, deadlines and cancellation apply to all of them alike, and each but a
//!   settings change leaves its `turns.jsonl` line and its spend in the accounts.
//! - An agent runs its operations one at a time, in call order (a FIFO lock on its session).
//! - Every answer, from any harness, enters through a `ResultSlot`: validated against the op's
//!   schema; the first accepted answer wins; every submission is an `op-submission` event.
//!   Rejections count against the nudge limit, and one same answer is rejected at most twice.
//! - Scopes nest: a parallel group or stage gets a child cancellation token, so cancelling a scope
//!   cancels everything started under it, and the deadline of a scope is never later than its
//!   parent's. Every script thread and worker carries its scope in a thread-local, which the
//!   progress hook (tight loops) and every blocking host call (turns, `ctx.sleep`) consult.
//! - Termination (stop, cancel, deadline) is raised as Rhai's uncatchable `ErrorTerminated`;
//!   workflow errors are catchable.
//! - An agent's control socket reaches only that agent's own operations and serves only that
//!   agent's processes (the caller, or an ancestor, is one of its running turns' leaders or in
//!   that leader's session, `control/peer.rs`; never by process group, which any process of a
//!   session may join); anything else is refused and recorded as a `control-refused` event, before
//!   a byte of its frame is read. What the agent's own processes may cost it is bounded: at most
//!   32 connections open (those past it closed at once), 2 reading a frame at once, each frame 16
//!   MiB and 5 s at most; a command whose frame was read waits as long as it needs (`ask`).
//! - An answer accepted from an agent (socket or HTTP tool) is written to `journal.jsonl` before
//!   the agent is told `accepted`.
//! - Every control command, from an agent's socket or an HTTP agent's `wf_*` tool, is carried out
//!   by `control::dispatch`: the same answer and the same events (`op-submission` with its
//!   verdict, `op-waiting`, `control-refused`) whichever way it came.
//! - A `command` or CLI turn runs in its own session and process group (`harness/spawn.rs`,
//!   `setsid`, so no other turn can join its group), and the group is killed when the turn ends
//!   (after an acknowledged wait or the answer's grace) or is cancelled, timed out or stalled.
//!   Its leader dies with awf (`PR_SET_PDEATHSIG`, started from a thread that outlives the turn:
//!   the script thread whose `block_on` polls it, or the spawner thread for a turn polled in a
//!   task); a new attempt first kills what an earlier one left (`run/leftovers.rs`).
//! - One live attempt per run: it holds the flock on `<run>/lock` from its start to `finish`.
//! - A run `awf serve` answers 202 for is on disk first (`serve.json`), held by one serve at a time
//!   (the flock on `serve.lock`) while queued or running; only a serve that takes that lock runs or
//!   resumes it, so two serves on one runs folder never run one run twice.
//! - A live run is reached from other processes only through its `control.sock` (0600, in its
//!   0700 folder): `awf runs stop`, `awf runs answer` and `awf serve` send it `stop`, `kill` or `answer`; nothing signals a
//!   run's process (a background run still queued is the exception: it has no run yet). It serves
//!   only processes of the run's own user and pid namespaces (`control::namespace`): a sandboxed
//!   agent is refused before its request is read, and the refusal logged in the run's events.
//! - A plan starts nothing: every agent of a plan's run gets its session from `plan::session`
//!   through the agent book's `Remote` hook (a fake session that keeps the agent's harness and
//!   model), so no program, CLI or HTTP request is started, no sandbox is made (bwrap is neither
//!   looked for nor probed: `SandboxBook::choose` with `here` false) and no trace is sent; its run folder is a throwaway one (`record::scratch`), removed when the plan is made.
//! - Telemetry never holds up a run: spans are made from the records after they are written, and
//!   the end of a run waits a bounded time for them.
//! - An agent that asked for a sandbox (or runs under `--sandbox`) never runs without it: when the
//!   sandbox cannot be made the agent is refused as it opens, and a harness that cannot wrap its
//!   program refuses sandboxed agents. A sandbox with a listed network (`"model"` or
//!   `["host:port", ...]`) has no network of its own: what leaves it goes through awf's proxy
//!   (`harness/net/proxy.rs`), which lets through only the listed `host:port` and records each
//!   refusal (`sandbox-net-denied`).
//! - A sandbox's root is an allow-list (`sandbox/root.rs`): system folders read-only, the agent's
//!   own paths, nothing else of the host (no `/run`, `/var`, homes); the project's `.awf`, the runs
//!   folder and the operator's runtime and tmux folders are masked wherever what is bound holds
//!   them; every `.git` in a writable area is read-only. Whatever an agent could replace is bound
//!   by the descriptor `sandbox::pin` opened and checked just before the turn, never by its path.
//! - Records only grow: each line is written whole, in the order appended, by whoever holds the
//!   files (the writer thread, or a durable line's appender); `stages.jsonl` and the
//!   rest are synced to disk at every stage end and at the run's end.
//! - `awf serve` trusts no local user: on TCP every request carries the token (Host, then Origin,
//!   then token) as `Authorization: Bearer`, the dashboard's too (its page keeps it in the tab's
//!   `sessionStorage`, per origin, never in a cookie, which a browser sends to every port of the
//!   host); only the page shell, the same bytes for everyone, is read without it; the socket is
//!   0600 and serves only processes of serve's own user and pid namespaces (a sandboxed agent
//!   that sees it is answered 403 before its request is read, and serve logs it), a client names
//!   only `.rhai` files inside the script folder,
//!   and an error it reads shows source lines only of those files and the embedded stdlib
//!   (`script::show_lines_only_under`, set once at start; the CLI shows the operator everything).
//! - Text from a harness (reasons, error bodies, stderr tails) enters the engine through
//!   `harness::scrubbed` (and the HTTP error path scrubs its own events), and a process's output
//!   reaches `ops/` through `record::agent_files::Capture` (scrubbed line by line): no key value is
//!   recorded or printed. Variable values never go on a sandbox's command line, and prompts and
//!   instructions on no command line (every local user reads them): a CLI agent's prompt goes on
//!   its stdin, closed after it (headless), or is pasted through tmux's stdin (in a pane), its
//!   instructions in a 0600 file of its home that a flag or its config names.
//! - Every child run's spend is billed to the agent that convened it exactly once
//!   (`run/children.rs`): on the calling operation's line while it is open, on a `council` line of
//!   its own once it settles after that (or in the background), or, still running when the parent
//!   closes (after waiting its stop grace and a margin), from its accounts so far. `by_model` files
//!   it under the models the child's agents ran.
//! - tmux runs only in `pane`, on awf's own server (`-L awf`, no configuration file), with explicit
//!   arguments. A pane agent's CLI starts through `awf pane-exec` with its environment from a 0600
//!   file, never on a command line, and no prompt (every turn, the first too, is pasted once it
//!   reads its keys); it runs with the home, settings and sandbox a headless run gets, and answers
//!   through the same launcher, admitted to the agent's socket while a turn runs.
//! - git runs only in `worktree`, as `git -C <folder>` with explicit arguments, every command
//!   made by `worktree/git.rs`, which runs no hook, fsmonitor, driver or other program the
//!   repository names; its commands name their git folders (an agent's worktree's, found as it
//!   was added; the checkout's, found with the repository), never what an agent wrote there. A
//!   merge (`worktree::merge`) never leaves a checkout half-merged: each branch is merged without
//!   a working tree, and the checkout moves once, by a fast-forward.
//! - Failures are typed below `cli`: each layer's errors are `thiserror` enums with a variant for
//!   what a caller, a test or the exit code tells apart, keeping their source (`io::Error`,
//!   `serde_json::Error`, another layer's error) and saying its text whole (`cannot read x:
//!   {source}`, so that records and scripts get the whole message). Callers match variants, never
//!   the text; whether a failed run exits 2 (usage, configuration) or 1 is `agent::OpenError::
//!   is_config`, carried to the script's end by its error's tag. `tests/tidy` fails on a
//!   `Result<_, String>` outside `cli/` (and past its budget inside it) and on an error's text
//!   tested; `cli::shown` prints a cause its message already says once.
//! - No unwrap outside tests; locks recover from poisoning because their values are replaced whole.
//! - No process-wide static but those `tests/tidy/main.rs` lists, each with its reason; a new one
//!   fails `cargo test`.
//! - A process awf starts outside a turn is made by `open_files::command` (the open-file limit awf
//!   started with); `tests/tidy` fails on a `Command::new` elsewhere.
//!
//! # Glossary
//!
//! run, attempt, stage, agent, operation (op), outcome, harness, runtime, result slot, launcher,
//! route, strategy, roster, team, persona: as in DESIGN.md. **scope** (here): the cancellation
//! token, deadline, stage and progress group a piece of script runs under.
//!
//! # The run folder
//!
//! ```text
//! .awf/runs/<run-id>/        ids are UTC time to the millisecond plus a random suffix: they sort by time;
//!                            every folder awf makes here is 0700 and every file it writes 0600
//!   run.json       id, script path and sha256, cwd, args, META, limits (kept for later attempts),
//!                  parent {run, op, agent, strategy} and depth (a council convened from a turn),
//!                  caller {harness, session, home?, run?, agent?} (the calling session, when there is one),
//!                  attempts [{n, started_at, finished_at, status, from_stage, script_sha256}]
//!                  (a `running` or `waiting` attempt found dead by a later one is rewritten `interrupted`),
//!                  waiting [{key, question, schema, asked_at, timeout_ms, agent}] while the last attempt is
//!                  `waiting` on operator checkpoints (a background council's attempt is `queued`
//!                  until it has a slot of the machine's pool)
//!                  isolation (`worktree` under `--isolation worktree`), worktrees {repo, base (HEAD when the
//!                  run started, in a git repository), agents {key: {path, branch, base, admin, keep, state
//!                  (open|kept|removed)}}}
//!   events.jsonl   {"v":1,"type":T,"at":ISO-8601,"attempt":N,"data":{...}}; one `run::Event` each; types:
//!                  run-started, run-stopping, run-finished, leftovers-killed, agent-opened, agent-stopped,
//!                  pane-opened, pane-closed,
//!                  agent-closed, agent-set, agent-compacted, context-compacted, op-started, op-nudged,
//!                  op-replayed, op-rerun, records-healed,
//!                  op-submission, op-rejected, cluster-refused, op-waiting, op-settled, model-unpriced, control-refused, stage-started, stage-finished,
//!                  parallel-started, parallel-finished, log, budget-exhausted, sandbox-opened,
//!                  sandbox-seated, sandbox-closed, sandbox-net-denied, route-granted, route-closed, message-sent, message-delivered,
//!                  message-undelivered, message-replied, message-ask-failed, http-retry, http-waiting, child-run-started,
//!                  child-run-ended, checkpoint-asked, checkpoint-answered, checkpoint-timed-out,
//!                  checkpoint-replayed, council-settled, decision-settled, decision-replayed, decision-rerun.
//!                  Readers skip types they do not know.
//!   turns.jsonl    one line per settled operation (and per council billed on its own, background or settled
//!                  after its operation: kind `council`, op_id `council:<run id>`, its spend billed to its agent;
//!                  and per decision asked of the model: kind `decision`, agent `decisions`, op_id `decisions#<key>`):
//!                  attempt, agent, op_id, outcome, reason, stage, label, harness,
//!                  model, tokens by kind, cost_usd, cost_source, simulated, rejections, delivered_at, settled_at,
//!                  session ({id, forked_from?}: a CLI harness's own session id, or null),
//!                  councils_by_model (what councils it billed spent, by model; when they spent)
//!   stages.jsonl   one line per stage end: name, attempt, status (succeeded|failed|stopped), value, summary, reason,
//!                  runs ({agent: turns with default ids it started in the stage}: an attempt that reuses the
//!                  stage counts those agents' op ids on past them, so an op id names one turn in every attempt)
//!   journal.jsonl  per answered operation: attempt, agent, op_id, turn_hash, turn_parts (the prompt's, schema's
//!                  and nudge's hashes: `op-rerun` says which changed), stage (a resume replays the line only for
//!                  a turn of that stage, once per attempt), settled, outcome; a line when an agent's
//!                  answer is accepted (settled: false, no usage yet) and one when the op settles (settled: true);
//!                  readers keep an op's last line; per answered operator checkpoint: attempt,
//!                  checkpoint (its key), question_hash, answer, answered_at; and per decision: attempt,
//!                  decision (its key), decision_hash (key, question, options), phase (`model`: the model's
//!                  answer, before any fallback; `settled`), record (readers keep a key's last line)
//!   groups.jsonl   one line per turn process started: attempt, pgid, agent, op_id, at (leftovers are found by it)
//!   lock           held (flock) by the live attempt, its pid inside
//!   control.sock   the live attempt's control socket (0600): status, stop, kill, answer; removed at its end
//!   control.target when the folder's path is too long for a socket: where control.sock is instead
//!                  (a 0700 folder of the temp dir, removed at the end)
//!   background.json, output.log   a `--detach`ed run: queued_at, pid, status until it starts
//!                  (queued|cancelled|failed); the background process's stdout and stderr
//!   serve.json, serve.lock   a run `awf serve` accepted, written before its 202 (`record::accepted`):
//!                  id, accepted_at, request (the POST body), status (queued|cancelled|failed, until it
//!                  starts), error; serve.lock is flocked by the serve holding it (queued or running)
//!   agents/<slug>/ (mode 0700, command and CLI agents) wf.sock, wf (the launcher), net.sock (a listed
//!                  network's proxy, during a turn), state/, ops/<op-id>.jsonl
//!                  (liveness), ops/<op-id>.stdout|.stderr (first MiB each); skills.json (the agent's skills:
//!                  name, source, sha256); home/ (sandboxed agents' HOME;
//!                  a CLI agent's CLAUDE_CONFIG_DIR, CODEX_HOME or PI_CODING_AGENT_DIR, with its
//!                  instructions in awf-instructions.md or Codex's config.toml); pane.launch (a pane
//!                  agent's CLI start: argv and environment, 0600, removed by `awf pane-exec` as it reads it)
//!   plan.json      the plan made before the run started (`plan::Plan`), when it was planned first
//!                  (`[limits] confirm_usd`, `--confirm-above`)
//!   result.json    run_id, status (succeeded|failed|stopped|cancelled), value, error, ended_in, stages,
//!                  children (child runs: councils its agents convened; present when there are any),
//!                  decisions (every `ctx.decisions.decide`, in the order asked: key, question, options, choice,
//!                  confidence, distribution, decided_by, model, source, reason, model_choice, spend, at, error;
//!                  present when there are any),
//!                  accounting {by_agent, by_stage, by_model, by_attempt, totals} over every attempt,
//!                  simulated, started_at, finished_at,
//!                  sandboxes [{name, scope (run|config|inline|workflow), provider, bwrap, policy,
//!                  agents [{agent, harness, confined, seat}]}],
//!                  panes [{agent, harness, target, session, window, socket, layout {beside, split},
//!                  went (beside|split|window), elsewhere, reason, keep, state (kept|closed|gone)}]
//!                  (agents with placement "pane", when there are any)
//! .awf/worktrees/<run-id>/<agent>/  an agent's git worktree (`isolation: "worktree"`), on branch
//!                            `awf/<run-id>/<agent>`; removed when it closes unless `keep` (the branch stays)
//! ```

pub mod accounting;
pub mod agent;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod control;
pub mod council;
pub mod decision;
pub mod harness;
pub mod host;
pub mod messaging;
pub mod open_files;
pub mod pane;
pub mod plan;
pub mod record;
pub mod redact;
pub mod run;
pub mod sandbox;
pub mod script;
pub mod stdlib;
pub mod telemetry;
pub mod watch;
pub mod worktree;
