//! How a browser signs in to `awf serve` on TCP: `GET /login?token=TOKEN` (the URL serve prints)
//! sets an HttpOnly, SameSite=Strict session cookie and redirects to `/`, so the token leaves the
//! address bar. The cookie holds a digest of the token, never the token; a wrong token is a 401
//! with no detail.

use axum::extract::{Query, Request};
use axum::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// The path a browser signs in at.
pub const PATH: &str = "/login";

/// What a session cookie must hold, and how it is named: per port, since a browser sends a
/// host's cookies to each of its ports.
pub struct Session {
    name: String,
    /// The cookie's value (a digest of the token), given out at sign-in.
    value: String,
    /// The digest of `value`: a cookie is compared digest to digest, in constant time.
    digest: [u8; 32],
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

/// Whether two digests are equal, every byte compared whatever the earlier ones were.
pub fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Session {
    pub fn new(port: u16, token: &str) -> Session {
        let value = hex(&Sha256::digest(format!("awf serve session\n{token}").as_bytes()));
        let digest = Sha256::digest(value.as_bytes()).into();
        Session { name: format!("awf_session_{port}"), value, digest }
    }

    /// Whether the request carries this server's session cookie.
    pub fn cookie_ok(&self, headers: &HeaderMap) -> bool {
        let cookies = headers.get_all(axum::http::header::COOKIE);
        cookies.iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).any(|pair| {
            let Some((name, value)) = pair.trim().split_once('=') else { return false };
            name == self.name && same(&Sha256::digest(value.as_bytes()).into(), &self.digest)
        })
    }

    /// `GET /login?token=...`: the cookie and a redirect to `/` for the right token (compared by
    /// `token_ok`), else 401 with no detail.
    pub fn login(&self, req: &Request, token_ok: impl Fn(&str) -> bool) -> Response {
        let given = Query::<LoginQuery>::try_from_uri(req.uri()).ok().and_then(|q| q.0.token);
        if !given.is_some_and(|t| token_ok(&t)) {
            return (StatusCode::UNAUTHORIZED, [(WWW_AUTHENTICATE, "Bearer")]).into_response();
        }
        let cookie = format!("{}={}; Path=/; HttpOnly; SameSite=Strict", self.name, self.value);
        let Ok(cookie) = HeaderValue::from_str(&cookie) else {
            // The name and value are ASCII letters, digits and `_`: always a valid header.
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        let mut response = (StatusCode::SEE_OTHER, [(LOCATION, "/")]).into_response();
        let headers = response.headers_mut();
        headers.insert(SET_COOKIE, cookie);
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
        response
    }
}

/// The sign-in URL serve prints: the token percent-encoded (a generated one is hex already).
pub fn url(local: std::net::SocketAddr, token: &str) -> String {
    let encoded: String = token
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("http://{local}{PATH}?token={encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_with_reserved_characters_is_encoded_and_decodes_back() {
        let addr: std::net::SocketAddr = "127.0.0.1:8700".parse().expect("an address");
        let url = url(addr, "a&b=c%d+e/f#g");
        assert_eq!(url, "http://127.0.0.1:8700/login?token=a%26b%3Dc%25d%2Be%2Ff%23g");
        let uri: axum::http::Uri = url.parse().expect("a uri");
        let q = Query::<LoginQuery>::try_from_uri(&uri).expect("a query");
        assert_eq!(q.0.token.as_deref(), Some("a&b=c%d+e/f#g"));
    }

    #[test]
    fn only_this_servers_cookie_with_the_right_value_signs_in() {
        let s = Session::new(8700, "0123456789abcdef0123");
        let with = |cookie: &str| {
            let mut h = HeaderMap::new();
            h.insert(axum::http::header::COOKIE, HeaderValue::from_str(cookie).expect("a header"));
            s.cookie_ok(&h)
        };
        assert!(with(&format!("x=1; awf_session_8700={}", s.value)));
        assert!(!with(&format!("awf_session_8701={}", s.value)), "another port's cookie");
        assert!(!with("awf_session_8700=00"), "a wrong value");
        assert!(!with("awf_session_8700"), "no value");
        assert!(!s.cookie_ok(&HeaderMap::new()));
    }
}
