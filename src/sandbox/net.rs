//! A sandbox network that reaches only what is listed, as data and pure functions: `host:port`
//! entries parsed and matched, a model server's entry from its URL, and the bridge that runs the
//! sandboxed program (`awf sandbox-bridge`: the proxy port and the forwarded loopback ports inside
//! the sandbox, relayed to awf's proxy on a Unix socket). No I/O: the proxy is `harness::net`'s.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Why a network entry or a URL names no server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTarget {
    /// An entry that is not `host:port`, and why (`no port`, `no host`, ...).
    #[error("network entry `{entry}` is not host:port ({why}; e.g. \"api.anthropic.com:443\" or \"127.0.0.1:8080\")")]
    Entry { entry: String, why: &'static str },
    #[error("`{0}` is not a URL")]
    NotUrl(String),
    #[error("`{url}`: scheme `{scheme}` is neither http nor https")]
    Scheme { url: String, scheme: String },
    /// A URL whose server part is not `host:port`.
    #[error("`{url}`: {entry}")]
    InUrl { url: String, entry: Box<BadTarget> },
}

/// Why `network = "model"` finds no server to let through for an agent's runtime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoModelServer {
    #[error("the runtime's base_url {0}")]
    BaseUrl(BadTarget),
    #[error("pi picks its model server from its own settings; give the runtime a `base_url`, or list `host:port` in `network`")]
    Pi,
    /// A harness (named) with no API host of its own.
    #[error("a `{0}` agent has no model server awf knows of; list `host:port` in `network`")]
    Unknown(String),
}

/// One allowed destination: a host name or address, and a port. Matched literally (a listed
/// `127.0.0.1:8080` does not let `localhost:8080` through).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl Target {
    /// `host:port` (`[::1]:8080` for an IPv6 address), or why not.
    pub fn parse(entry: &str) -> Result<Target, BadTarget> {
        let bad = |why: &'static str| BadTarget::Entry { entry: entry.to_string(), why };
        let (host, port) = match entry.strip_prefix('[') {
            Some(rest) => {
                let (h, p) = rest.split_once("]:").ok_or_else(|| bad("an IPv6 address is written [addr]:port"))?;
                h.parse::<std::net::Ipv6Addr>().map_err(|_| bad("not an IPv6 address between the brackets"))?;
                (h, p)
            }
            None => entry.rsplit_once(':').ok_or_else(|| bad("no port"))?,
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let name_ok = |h: &str| h.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !entry.starts_with('[') && !name_ok(host) {
            return Err(bad("the host has characters a host name cannot have"));
        }
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number from 1 to 65535"))?;
        if port == 0 {
            return Err(bad("the port is not a number from 1 to 65535"));
        }
        Ok(Target { host: host.to_ascii_lowercase(), port })
    }

    /// The server a URL names (`http://127.0.0.1:8080/v1` → `127.0.0.1:8080`; `https://h` → `h:443`).
    pub fn of_url(url: &str) -> Result<Target, BadTarget> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| BadTarget::NotUrl(url.to_string()))?;
        let default = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            other => return Err(BadTarget::Scheme { url: url.to_string(), scheme: other.to_string() }),
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let has_port = match authority.rfind(']') {
            Some(close) => authority[close..].contains(':'),
            None => authority.contains(':'),
        };
        let entry = if has_port { authority.to_string() } else { format!("{authority}:{default}") };
        Target::parse(&entry).map_err(|e| BadTarget::InUrl { url: url.to_string(), entry: Box::new(e) })
    }

    /// Whether this is an address of the machine itself (the sandbox's own loopback, inside).
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The address the bridge listens on inside the sandbox for a loopback target.
    pub fn listen_addr(&self) -> String {
        match self.host.as_str() {
            "localhost" => format!("127.0.0.1:{}", self.port),
            _ => self.to_string(),
        }
    }
}

/// A seated agent's listed network: what the proxy lets through, and the socket it listens on
/// (in the agent's control folder, which the sandbox binds in).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Net {
    pub allow: Vec<Target>,
    pub socket: PathBuf,
}

/// The port the bridge's proxy listens on inside the sandbox when no forwarded port takes it.
pub const PROXY_PORT: u16 = 3128;

impl Net {
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.allow.iter().any(|t| t.host == host && t.port == port)
    }

    /// The listed loopback targets: the bridge listens on each inside the sandbox (once per
    /// address: `localhost:9` after `127.0.0.1:9` adds nothing).
    pub fn forwards(&self) -> Vec<&Target> {
        let mut out: Vec<&Target> = Vec::new();
        for t in self.allow.iter().filter(|t| t.is_loopback()) {
            if !out.iter().any(|o| o.listen_addr() == t.listen_addr()) {
                out.push(t);
            }
        }
        out
    }

    /// The proxy's port inside the sandbox: `PROXY_PORT`, or the next one no forward takes.
    pub fn proxy_port(&self) -> u16 {
        let taken: Vec<u16> = self.forwards().iter().map(|t| t.port).collect();
        (PROXY_PORT..u16::MAX).find(|p| !taken.contains(p)).unwrap_or(PROXY_PORT)
    }

    /// `awf sandbox-bridge --socket S --proxy-port P [--forward H:P]... -- program...`.
    pub fn bridge(&self, awf: &Path, program: &[String]) -> Vec<String> {
        let mut a = vec![
            awf.display().to_string(),
            "sandbox-bridge".into(),
            "--socket".into(),
            self.socket.display().to_string(),
            "--proxy-port".into(),
            self.proxy_port().to_string(),
        ];
        for t in self.forwards() {
            a.extend(["--forward".to_string(), t.to_string()]);
        }
        a.push("--".into());
        a.extend(program.iter().cloned());
        a
    }

    /// The variables that point the program's HTTP clients at the bridge's proxy.
    pub fn proxy_env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.proxy_port());
        ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"].map(|k| (k.to_string(), url.clone())).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16) -> Target {
        Target { host: host.into(), port }
    }

    #[test]
    fn entries_parse_as_host_and_port_or_say_why_not() {
        assert_eq!(Target::parse("api.anthropic.com:443"), Ok(t("api.anthropic.com", 443)));
        assert_eq!(Target::parse("127.0.0.1:8080"), Ok(t("127.0.0.1", 8080)));
        assert_eq!(Target::parse("[::1]:8080"), Ok(t("::1", 8080)));
        assert_eq!(Target::parse("API.Example.COM:1").map(|t| t.to_string()), Ok("api.example.com:1".into()));
        let bad = |e: &str| match Target::parse(e).expect_err(e) {
            BadTarget::Entry { why, .. } => why,
            other => panic!("{e}: {other:?}"),
        };
        assert_eq!(bad("api.anthropic.com"), "no port");
        assert_eq!(bad(":443"), "no host");
        assert!(bad("h:0").contains("1 to 65535") && bad("h:http").contains("1 to 65535"));
        assert!(bad("http://h:443").contains("characters"));
        assert!(bad("::1:80").contains("characters"));
        assert!(bad("[nope]:80").contains("IPv6"));
        let e = Target::parse("h:99999").expect_err("h:99999").to_string();
        assert!(e.starts_with("network entry `h:99999` is not host:port (the port is not a number"), "{e}");
    }

    #[test]
    fn a_url_names_its_server_with_the_scheme_s_port() {
        assert_eq!(Target::of_url("http://127.0.0.1:8080/v1"), Ok(t("127.0.0.1", 8080)));
        assert_eq!(Target::of_url("https://api.openai.com/v1"), Ok(t("api.openai.com", 443)));
        assert_eq!(Target::of_url("http://user:pw@[::1]/x?y"), Ok(t("::1", 80)));
        let e = Target::of_url("ftp://h").expect_err("ftp");
        assert_eq!(e.to_string(), "`ftp://h`: scheme `ftp` is neither http nor https");
        assert_eq!(Target::of_url("h:80"), Err(BadTarget::NotUrl("h:80".into())));
        let e = Target::of_url("http://a b").expect_err("a space");
        assert!(matches!(&e, BadTarget::InUrl { entry, .. } if matches!(**entry, BadTarget::Entry { .. })), "{e:?}");
    }

    #[test]
    fn the_bridge_forwards_listed_loopback_ports_and_its_proxy_port_avoids_them() {
        let net = Net {
            allow: vec![t("api.anthropic.com", 443), t("127.0.0.1", 3128), t("localhost", 9), t("127.0.0.1", 9)],
            socket: "/r/agents/a/net.sock".into(),
        };
        assert!(net.allows("API.anthropic.com", 443) && net.allows("127.0.0.1", 3128));
        assert!(!net.allows("api.anthropic.com", 80) && !net.allows("127.0.0.1", 10) && !net.allows("evil.com", 443));
        assert_eq!(net.proxy_port(), 3129);
        let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            net.bridge(Path::new("/bin/awf"), &words("claude -p hi")),
            words(
                "/bin/awf sandbox-bridge --socket /r/agents/a/net.sock --proxy-port 3129 \
                 --forward 127.0.0.1:3128 --forward localhost:9 -- claude -p hi"
            )
        );
        assert_eq!(t("localhost", 9).listen_addr(), "127.0.0.1:9");
        assert_eq!(t("::1", 9).listen_addr(), "[::1]:9");
        assert_eq!(net.proxy_env()[0], ("HTTPS_PROXY".to_string(), "http://127.0.0.1:3129".to_string()));
    }
}
