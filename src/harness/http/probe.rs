//! `awf doctor --deep` for an HTTP runtime: one tiny real request, which tells whether the model
//! calls tools through this server, and the context the server gives the model where it says so
//! (llama-server's `/props`, vLLM's `/v1/models`, Ollama's `/api/show`).

use super::session::HttpSession;
use super::{HttpConfig, Msg, ToolSpec};
use crate::accounting::{Meter, Usage};
use crate::harness::AgentInfo;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The most tokens the probe's reply may use.
const PROBE_TOKENS: u64 = 256;

/// Asks the model, offering one tool, to call it: whether it did, and what the request spent.
pub async fn calls_tools(mut cfg: HttpConfig) -> Result<(bool, Usage), super::HttpError> {
    cfg.max_tokens = cfg.max_tokens.min(PROBE_TOKENS);
    let info = AgentInfo {
        key: "doctor".into(),
        instructions: None,
        model: cfg.model.clone(),
        effort: None,
        labels: Value::Null,
    };
    let mut session = HttpSession::new(info, cfg, None, Arc::new(|_: &crate::run::Event<'_>| {}))?;
    session.history.push(Msg::User { text: "Call the wf_result tool with ok set to true. Write nothing else.".into() });
    let tools = [ToolSpec {
        name: "wf_result",
        description: "Submit the answer.".into(),
        parameters: json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }),
    }];
    let reply = session.request(&tools, None, &Meter::default()).await?;
    Ok((reply.calls.iter().any(|c| c.name == "wf_result"), reply.usage))
}

/// The context the server gives the runtime's model, in tokens, and where that was read; `None`
/// when the server does not say.
pub async fn server_context(cfg: &HttpConfig) -> Option<(u64, &'static str)> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok()?;
    let base = cfg.base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let get = |url: String| {
        let mut req = client.get(url);
        if let Some(key) = &cfg.api_key {
            req = req.bearer_auth(key);
        }
        async move { req.send().await.ok()?.error_for_status().ok()?.json::<Value>().await.ok() }
    };
    // llama-server: the context of one slot (its -c divided among its -np slots).
    if let Some(v) = get(format!("{root}/props")).await {
        if let Some(n) = v.pointer("/default_generation_settings/n_ctx").and_then(Value::as_u64) {
            return Some((n, "llama-server /props"));
        }
    }
    // vLLM lists each model's max_model_len.
    if let Some(v) = get(format!("{base}/models")).await {
        let models = v["data"].as_array().cloned().unwrap_or_default();
        let model = models.iter().find(|m| m["id"] == cfg.model.as_str()).or(models.first());
        if let Some(n) = model.and_then(|m| m["max_model_len"].as_u64()) {
            return Some((n, "vLLM /v1/models"));
        }
    }
    // Ollama: the model's num_ctx when its Modelfile sets one, else what the model supports.
    let show = client.post(format!("{root}/api/show")).json(&json!({ "model": cfg.model })).send().await.ok()?;
    let v: Value = show.error_for_status().ok()?.json().await.ok()?;
    let num_ctx = v["parameters"].as_str().and_then(|p| {
        p.lines().find_map(|l| l.trim().strip_prefix("num_ctx").and_then(|n| n.trim().parse::<u64>().ok()))
    });
    if let Some(n) = num_ctx {
        return Some((n, "Ollama /api/show (num_ctx)"));
    }
    let info = v["model_info"].as_object()?;
    let n = info.iter().find(|(k, _)| k.ends_with(".context_length")).and_then(|(_, n)| n.as_u64())?;
    Some((n, "Ollama /api/show (the model's context_length; Ollama runs it with its num_ctx)"))
}
