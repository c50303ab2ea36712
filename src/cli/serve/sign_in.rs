//! The dashboard's sign-in link, `http://ADDR/#token=TOKEN`: the token rides in the address's
//! fragment, which a browser never sends to a server (nor in a `Referer`), so no server, this
//! one included, ever sees it in an address. `dashboard.js` moves it into the tab's
//! `sessionStorage` (this origin only: scheme, host and port), takes it out of the address bar
//! and sends it as `Authorization: Bearer` on each request; nothing a browser keeps for the
//! whole host (a cookie, sent to every port of 127.0.0.1) stands for it.

use std::net::SocketAddr;

/// The fragment's key; `dashboard.js` reads `#token=...` and nothing else as a sign-in.
const KEY: &str = "token";

/// The sign-in link serve prints: the token percent-encoded (a generated one is hex already),
/// which `decodeURIComponent` in the page decodes.
pub fn url(local: SocketAddr, token: &str) -> String {
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
    format!("http://{local}/#{KEY}={encoded}")
}

/// The link with `TOKEN` in place of a token serve must not print (one from the environment:
/// stderr may be kept in logs).
pub fn placeholder(local: SocketAddr) -> String {
    format!("http://{local}/#{KEY}=TOKEN")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_after_the_hash_with_reserved_characters_encoded() {
        let addr: SocketAddr = "127.0.0.1:8700".parse().expect("an address");
        assert_eq!(url(addr, "a&b=c%d+e/f#g"), "http://127.0.0.1:8700/#token=a%26b%3Dc%25d%2Be%2Ff%23g");
        assert_eq!(url(addr, "0123abcdef"), "http://127.0.0.1:8700/#token=0123abcdef");
        assert_eq!(placeholder(addr), "http://127.0.0.1:8700/#token=TOKEN");
        let v6: SocketAddr = "[::1]:8700".parse().expect("an address");
        assert_eq!(url(v6, "t"), "http://[::1]:8700/#token=t");
    }
}
