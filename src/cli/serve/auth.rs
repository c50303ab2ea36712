//! Who may talk to `awf serve` over TCP: the `Host` check (DNS rebinding), the `Origin` check
//! (web pages), then the bearer token, in that order. The dashboard's page shell (`/` and
//! `/dashboard.js`: no data in them, `dashboard.rs`) is read with the first two checks only;
//! everything else needs `Authorization: Bearer TOKEN`, and nothing a browser adds on its own
//! (a cookie, which it sends to every port of the host) stands for it. The Unix socket needs none
//! of it: its mode (0600) is its authentication.

use super::dashboard;
use anyhow::{bail, Result};
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL, HOST, ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
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
}

impl Guard {
    pub fn new(local: SocketAddr, token: &str) -> Guard {
        let hosts = vec![local.to_string(), format!("localhost:{}", local.port())];
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        Guard { hosts, origins, token: Sha256::digest(token.as_bytes()).into() }
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
        same(&Sha256::digest(token.as_bytes()).into(), &self.token)
    }
}

/// Whether two digests are equal, every byte compared whatever the earlier ones were.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The middleware: 421 for a foreign `Host`, 403 for a foreign `Origin` (none is fine: curl),
/// then the page shell as it is, and anything else only with the token: 401 without a body for a
/// missing or wrong one, whatever cookie or `Origin` the request carries.
pub async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    if !guard.host_ok(&req) {
        let text = "the Host header does not name this server (use 127.0.0.1:PORT or localhost:PORT)";
        return (StatusCode::MISDIRECTED_REQUEST, Json(json!({ "error": text }))).into_response();
    }
    if !guard.origin_ok(req.headers()) {
        let text = "requests from another origin are refused";
        return (StatusCode::FORBIDDEN, Json(json!({ "error": text }))).into_response();
    }
    if dashboard::is_shell(req.method(), req.uri().path()) {
        return next.run(req).await;
    }
    if !guard.token_ok(req.headers()) {
        return (StatusCode::UNAUTHORIZED, [(WWW_AUTHENTICATE, "Bearer")]).into_response();
    }
    let mut response = next.run(req).await;
    // What the token opened stays out of the browser's cache, which other ports of the same
    // site share (a stream that says how it is cached keeps its own header).
    response.headers_mut().entry(CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).expect("a header name");
            h.append(name, HeaderValue::from_str(value).expect("a header value"));
        }
        h
    }

    #[test]
    fn only_the_bearer_token_signs_in() {
        let token = "0123456789abcdef0123";
        let g = Guard::new("127.0.0.1:8700".parse().expect("an address"), token);
        assert!(g.token_ok(&headers(&[("authorization", "Bearer 0123456789abcdef0123")])));
        assert!(g.token_ok(&headers(&[("authorization", "bearer  0123456789abcdef0123 ")])));
        for refused in [
            vec![("authorization", "Bearer 0123456789abcdef012")],
            vec![("authorization", "Basic 0123456789abcdef0123")],
            vec![("authorization", "0123456789abcdef0123")],
            vec![("cookie", "awf_session_8700=0123456789abcdef0123"), ("origin", "http://127.0.0.1:8700")],
            vec![],
        ] {
            assert!(!g.token_ok(&headers(&refused)), "{refused:?}");
        }
    }

    #[test]
    fn digests_compare_equal_only_when_every_byte_is() {
        let a = [7u8; 32];
        let mut b = a;
        assert!(same(&a, &b));
        b[31] ^= 1;
        assert!(!same(&a, &b));
    }
}
