//! Who may talk to `awf serve` over TCP: the `Host` check (DNS rebinding), the `Origin` check
//! (web pages), then the bearer token or the dashboard's session cookie (`login.rs`), in that
//! order; a state-changing request signed in by the cookie must also carry this server's
//! `Origin`. The Unix socket needs none of it: its mode (0600) is its authentication.

use super::login::{self, Session};
use anyhow::{bail, Result};
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::Arc;

/// The environment variable that gives the token instead of a generated one.
pub const TOKEN_VAR: &str = "AWF_SERVE_TOKEN";
/// The shortest token `AWF_SERVE_TOKEN` may hold.
const TOKEN_MIN: usize = 16;

/// The token from `AWF_SERVE_TOKEN` when it is set (checked), else `None`.
pub fn token_from_env() -> Result<Option<String>> {
    let Some(value) = std::env::var_os(TOKEN_VAR) else { return Ok(None) };
    let Some(token) = value.to_str() else { bail!("{TOKEN_VAR} is not valid UTF-8") };
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!("{TOKEN_VAR} must be printable ASCII without spaces (it is sent in an Authorization header)");
    }
    if token.len() < TOKEN_MIN {
        bail!("{TOKEN_VAR} is too short ({} characters; at least {TOKEN_MIN})", token.len());
    }
    Ok(Some(token.to_string()))
}

/// A fresh token: two v4 UUIDs, 244 random bits, as 64 hex digits.
pub fn new_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// What a request to the TCP listener must carry.
pub struct Guard {
    /// `Host` values naming this server: the listen address and `localhost:PORT`.
    hosts: Vec<String>,
    /// The server's own origins: `http://` and one of `hosts`.
    origins: Vec<String>,
    /// The token's digest: requests are compared digest to digest, in constant time.
    token: [u8; 32],
    /// The browser's session cookie.
    session: Session,
}

impl Guard {
    pub fn new(local: SocketAddr, token: &str) -> Guard {
        let hosts = vec![local.to_string(), format!("localhost:{}", local.port())];
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        Guard {
            hosts,
            origins,
            token: Sha256::digest(token.as_bytes()).into(),
            session: Session::new(local.port(), token),
        }
    }

    fn names_this_server(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    fn host_ok(&self, req: &Request) -> bool {
        let header = req.headers().get(HOST).and_then(|v| v.to_str().ok());
        let in_uri = req.uri().authority().map(|a| a.as_str());
        header.is_some_and(|h| self.names_this_server(h)) && in_uri.is_none_or(|a| self.names_this_server(a))
    }

    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(ORIGIN)
            .iter()
            .all(|v| v.to_str().is_ok_and(|o| self.origins.iter().any(|mine| mine.eq_ignore_ascii_case(o))))
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
        let Some((scheme, token)) = value.split_once(' ') else { return false };
        scheme.eq_ignore_ascii_case("bearer") && self.is_token(token.trim())
    }

    fn is_token(&self, token: &str) -> bool {
        // Compared digest to digest in constant time: the time does not tell how much of a
        // guess was right.
        login::same(&Sha256::digest(token.as_bytes()).into(), &self.token)
    }
}

/// The middleware: 421 for a foreign `Host`, 403 for a foreign `Origin` (none is fine: curl),
/// 401 without a body for a missing or wrong token or cookie; `GET /login` signs a browser in;
/// 403 for a state-changing request signed in by the cookie without this server's `Origin`.
pub async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    if !guard.host_ok(&req) {
        let text = "the Host header does not name this server (use 127.0.0.1:PORT or localhost:PORT)";
        return (StatusCode::MISDIRECTED_REQUEST, Json(json!({ "error": text }))).into_response();
    }
    if !guard.origin_ok(req.headers()) {
        let text = "requests from another origin are refused";
        return (StatusCode::FORBIDDEN, Json(json!({ "error": text }))).into_response();
    }
    if req.uri().path() == login::PATH && req.method() == Method::GET {
        return guard.session.login(&req, |t| guard.is_token(t));
    }
    if guard.token_ok(req.headers()) {
        return next.run(req).await;
    }
    if !guard.session.cookie_ok(req.headers()) {
        return (StatusCode::UNAUTHORIZED, [(WWW_AUTHENTICATE, "Bearer")]).into_response();
    }
    // A browser sends the cookie with a request that a page of another origin on the same site
    // (another port of 127.0.0.1) makes: a change needs this server's own Origin.
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    if !safe && !req.headers().contains_key(ORIGIN) {
        let text = "a change signed in by the dashboard's cookie must carry this server's Origin";
        return (StatusCode::FORBIDDEN, Json(json!({ "error": text }))).into_response();
    }
    next.run(req).await
}
