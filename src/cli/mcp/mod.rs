//! `awf mcp`: an MCP server over stdio (the `rmcp` crate) whose tools list the council
//! strategies and start, wait on, report, answer (a run waiting for the operator) and stop runs. Runs are background runs started through
//! the command line (`launch.rs`) and found again through their folders (`runs.rs`), so they
//! outlive the connection; every failure is a tool error carrying the command line's text, never
//! a dropped connection.

mod launch;
mod runs;
mod tools;
mod wait;

use super::EXIT_OK;
use anyhow::{anyhow, Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::path::PathBuf;
use tools::Args;

#[derive(clap::Args)]
pub struct McpArgs {
    /// Where run folders go (default: runs_dir of awf.toml, else .awf/runs)
    #[arg(long)]
    runs_dir: Option<PathBuf>,
}

/// Serves MCP on stdin/stdout in the current folder until the client closes stdin.
pub fn exec(args: McpArgs) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let runs_dir = super::listing::runs_dir(&cwd, args.runs_dir.as_ref())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(serve(cwd, runs_dir)).map_err(|e| anyhow!(e))?;
    Ok(EXIT_OK)
}

/// The server: the project folder it started in and the folder runs go to.
#[derive(Clone)]
pub struct Server {
    cwd: PathBuf,
    runs_dir: PathBuf,
}

/// MCP over streamable HTTP for `awf serve` (mounted at `/mcp`, behind the server's own
/// authentication): the same tools, a session per client.
pub fn http_service(
    cwd: PathBuf,
    runs_dir: PathBuf,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    Server,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(Server { cwd: cwd.clone(), runs_dir: runs_dir.clone() }),
        Default::default(),
        Default::default(),
    )
}

/// Serves MCP on stdin/stdout until the client closes it.
async fn serve(cwd: PathBuf, runs_dir: PathBuf) -> Result<(), String> {
    let service = Server { cwd, runs_dir }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("MCP handshake failed: {e}"))?;
    service.waiting().await.map_err(|e| format!("MCP server ended: {e}"))?;
    Ok(())
}

/// A tool's reply: text for the model, the same facts as structured content.
fn reply(text: String, structured: Value, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    let mut result = if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    result.structured_content = Some(structured);
    result
}

fn refusal(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl Server {
    fn list_strategies(&self) -> CallToolResult {
        let list: Vec<Value> = crate::council::discover(&self.cwd)
            .into_iter()
            .map(|s| json!({ "name": s.name, "origin": s.origin, "meta": s.meta, "error": s.error }))
            .collect();
        let text = serde_json::to_string_pretty(&list).unwrap_or_default();
        reply(text, json!({ "strategies": list }), false)
    }

    /// `awf council VERB NAME --task ...` from a call's arguments.
    fn council_argv(args: &Args<'_>, verb: &str) -> Result<Vec<String>, String> {
        let name = args.string("name")?;
        let mut argv = vec!["council".to_string(), verb.to_string(), name, "--task".to_string(), args.string("task")?];
        for (k, v) in args.object("params")? {
            argv.push("--param".into());
            argv.push(format!("{k}={v}"));
        }
        if let Some(team) = args.opt_string("team")? {
            argv.extend(["--team".to_string(), team]);
        }
        let roster = args.strings("roster")?;
        if !roster.is_empty() {
            argv.extend(["--roster".to_string(), roster.join(",")]);
        }
        Ok(argv)
    }

    /// `awf script VERB FILE --args JSON` from a call's arguments, the script inside the project.
    fn workflow_argv(&self, args: &Args<'_>, verb: &str) -> Result<Vec<String>, String> {
        let root = self.cwd.canonicalize().map_err(|e| format!("error: cannot read the project folder: {e}"))?;
        let script = super::scripts::resolve(&root, &root, &args.string("script")?, "the project folder")?.path;
        let script_args = Value::Object(args.object("args")?);
        Ok(vec![
            "script".to_string(),
            verb.to_string(),
            // Relative to the project folder (the process's working folder): errors show it so.
            script.strip_prefix(&root).unwrap_or(&script).display().to_string(),
            "--args".to_string(),
            script_args.to_string(),
        ])
    }

    /// `--yes` when the call says `yes: true`.
    fn yes(args: &Args<'_>, mut argv: Vec<String>) -> Result<Vec<String>, String> {
        match args.0.get("yes") {
            None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => {}
            Some(serde_json::Value::Bool(true)) => argv.push("--yes".to_string()),
            Some(other) => return Err(format!("error: \"yes\" must be true or false, not {other}")),
        }
        Ok(argv)
    }

    async fn run_council(&self, args: &Args<'_>, ctx: &RequestContext<RoleServer>) -> Result<CallToolResult, String> {
        let argv = Self::yes(args, Self::council_argv(args, "run")?)?;
        let wait_s = args.wait_s()?;
        let run = launch::start(&self.cwd, &self.runs_dir, argv).await?;
        Ok(self.wait(&run, wait_s, 0, ctx).await)
    }

    async fn run_workflow(&self, args: &Args<'_>, ctx: &RequestContext<RoleServer>) -> Result<CallToolResult, String> {
        let argv = Self::yes(args, self.workflow_argv(args, "run")?)?;
        let wait_s = args.wait_s()?;
        let run = launch::start(&self.cwd, &self.runs_dir, argv).await?;
        Ok(self.wait(&run, wait_s, 0, ctx).await)
    }

    /// `plan_council` / `plan_workflow`: the plan `awf council|script plan --json` prints.
    async fn plan(&self, argv: Vec<String>) -> Result<CallToolResult, String> {
        let plan = launch::plan(&self.cwd, &self.runs_dir, argv).await?;
        Ok(reply(serde_json::to_string_pretty(&plan).unwrap_or_default(), plan, false))
    }

    /// Waits on `run`, reporting progress for its events from the cursor `since`; every answer
    /// carries the cursor reached, for the next `run_wait`.
    async fn wait(
        &self,
        run: &runs::RunDir,
        wait_s: f64,
        since: u64,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let progress = ctx.meta.get_progress_token().map(|token| wait::Progress { peer: ctx.peer.clone(), token });
        let (seen, cursor) = wait::until_end(run, wait_s, since, progress, &ctx.ct).await;
        if seen.status == "waiting" {
            let waiting = super::listing::waiting(&run.dir, &seen.status);
            let mut status = runs::status(run);
            status["cursor"] = json!(cursor);
            let text = format!(
                "run {id} is waiting for the operator: {}; answer with run_answer (run_id \"{id}\", a value matching the schema run_status shows), then run_wait",
                waiting.first().map_or("?", |w| w.question.as_str()),
                id = run.id
            );
            return reply(text, status, false);
        }
        if !seen.ended() {
            let text = format!(
                "run {id} is still running after {wait_s}s; call run_wait with run_id \"{id}\" and since {cursor} to wait for it (run_status, run_result, run_stop also take the id)",
                id = run.id
            );
            return reply(text, json!({ "run_id": run.id, "status": seen.status, "cursor": cursor }), false);
        }
        let (text, is_error) = runs::answer(run, &seen);
        let (value, error) = seen.result.as_ref().map(|(_, r)| (r.value.clone(), r.error.clone())).unwrap_or_default();
        let structured =
            json!({ "run_id": run.id, "status": seen.status, "value": value, "error": error, "cursor": cursor });
        reply(text, structured, is_error)
    }

    async fn dispatch(
        &self,
        name: &str,
        args: &Args<'_>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let find = || runs::find(&self.runs_dir, &args.string("run_id")?);
        match name {
            "list_strategies" => Ok(self.list_strategies()),
            "run_council" => self.run_council(args, ctx).await,
            "run_workflow" => self.run_workflow(args, ctx).await,
            "plan_council" => self.plan(Self::council_argv(args, "plan")?).await,
            "plan_workflow" => self.plan(self.workflow_argv(args, "plan")?).await,
            "run_status" => {
                let status = runs::status(&find()?);
                Ok(reply(serde_json::to_string_pretty(&status).unwrap_or_default(), status, false))
            }
            "run_wait" => {
                let run = find()?;
                let wait_s = args.wait_s()?;
                let since = args.since()?;
                wait::check_cursor(&run, since)?;
                Ok(self.wait(&run, wait_s, since, ctx).await)
            }
            "run_result" => {
                let run = find()?;
                let seen = runs::look(&run);
                match seen.result {
                    Some((r, _)) => Ok(reply(serde_json::to_string_pretty(&r).unwrap_or_default(), r, false)),
                    None => Err(format!("error: run {} has no result yet: it is {}", run.id, seen.status)),
                }
            }
            "run_stop" => {
                let run = find()?;
                let text = launch::stop(&self.cwd, &self.runs_dir, &run).await?;
                let status = runs::look(&run).status;
                Ok(reply(text, json!({ "run_id": run.id, "status": status }), false))
            }
            "run_answer" => {
                let run = find()?;
                let value = args.0.get("value").cloned().ok_or("error: \"value\" is required")?;
                let key = args.opt_string("key")?;
                let (dir, id) = (run.dir.clone(), run.id.clone());
                let answered = tokio::task::spawn_blocking(move || super::answer::answer(&dir, &id, key, value))
                    .await
                    .map_err(|e| format!("error: {e}"))?;
                let key = answered.map_err(|e| format!("error: {e}"))?;
                let text = format!("run {}: checkpoint {key} answered; the run goes on", run.id);
                Ok(reply(text, json!({ "run_id": run.id, "key": key, "status": runs::look(&run).status }), false))
            }
            other => Err(format!("error: unknown tool {other:?}")),
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("awf", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "awf runs multi-agent workflows. list_strategies shows the councils; run_council and run_workflow start a run and return its output if it ends within wait_s, else its run id for run_wait.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        let args = Args(&arguments);
        let result = match self.dispatch(&request.name, &args, &context).await {
            Ok(r) => r,
            Err(text) => refusal(text),
        };
        Ok(result.into())
    }
}
