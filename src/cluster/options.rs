//! What connecting to NATS takes, resolved once at start from `[cluster]` with the `--nats*` flags
//! over it: the servers (a comma-separated list; credentials taken out of the URLs), one way to
//! authenticate (a URL's user and password or token, variables the config names, an nkey seed
//! file, a credentials file; the files 0600), TLS (CA, client certificate, required), and the
//! servers as shown, credentials masked (`nats://user:***@host`). No error or `Debug` shows a secret.

use super::error::ClusterError;
use crate::config::ClusterConfig;
use async_nats::ServerAddr;
use std::path::{Path, PathBuf};

/// How the client proves who it is.
#[derive(Clone, PartialEq)]
enum Auth {
    None,
    Token(String),
    User {
        user: String,
        password: String,
    },
    /// An nkey seed.
    Nkey(String),
    /// A credentials file's text (user JWT and nkey seed), and the file.
    Creds {
        text: String,
        path: PathBuf,
    },
}

/// The servers, the credentials and TLS of one connection (`connect::connect`).
#[derive(Clone)]
pub struct Options {
    pub(super) servers: Vec<ServerAddr>,
    display: String,
    auth: Auth,
    tls_ca: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
    tls_required: bool,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match &self.auth {
            Auth::None => "none",
            Auth::Token(_) => "token",
            Auth::User { .. } => "user and password",
            Auth::Nkey(_) => "nkey",
            Auth::Creds { .. } => "credentials file",
        };
        f.debug_struct("Options")
            .field("servers", &self.display)
            .field("auth", &auth)
            .field("tls_ca", &self.tls_ca)
            .field("client_cert", &self.client_cert)
            .field("tls_required", &self.tls_required)
            .finish()
    }
}

impl Options {
    /// The options `[cluster]` (flags already put over it) gives; `None` when it names no server.
    pub fn from_config(c: &ClusterConfig) -> Result<Option<Options>, ClusterError> {
        let Some(items) = &c.nats else { return Ok(None) };
        let urls: Vec<&str> =
            items.iter().flat_map(|i| i.split(',')).map(str::trim).filter(|u| !u.is_empty()).collect();
        if urls.is_empty() {
            return Err(ClusterError::Config(
                "the NATS server list is empty (--nats URL[,URL...] or `nats` in [cluster])".into(),
            ));
        }
        let (mut servers, mut shown, mut in_urls) = (Vec::new(), Vec::new(), None::<Auth>);
        for url in urls {
            let (addr, display, auth) = parse(url)?;
            if auth != Auth::None {
                if in_urls.as_ref().is_some_and(|first| *first != auth) {
                    return Err(ClusterError::Config(format!("the NATS URLs carry different credentials ({}): give the same in each, or use the variables [cluster] names", shown.join(","))));
                }
                in_urls = Some(auth);
            }
            servers.push(addr);
            shown.push(display);
        }
        let display = shown.join(",");
        let mut ways: Vec<(String, Auth)> =
            in_urls.map(|a| ("credentials in the URL".to_string(), a)).into_iter().collect();
        if let Some(var) = &c.token_env {
            ways.push((format!("token_env ({var})"), Auth::Token(env(var, "token_env")?)));
        }
        match (&c.user_env, &c.password_env) {
            (Some(u), Some(p)) => ways.push((
                format!("user_env ({u}) and password_env ({p})"),
                Auth::User { user: env(u, "user_env")?, password: env(p, "password_env")? },
            )),
            (None, None) => {}
            _ => {
                return Err(ClusterError::Config(
                    "[cluster]: user_env and password_env go together: name both variables".into(),
                ))
            }
        }
        if let Some(path) = &c.nkey {
            let text = secret_file(path, "nkey seed", "--nats-nkey, or nkey in [cluster]")?;
            let seed = text.trim().to_string();
            if !seed.starts_with("SU") || seed.contains(char::is_whitespace) {
                return Err(ClusterError::Config(format!(
                    "the NATS nkey seed file {} holds no user nkey seed (one line starting with SU)",
                    path.display()
                )));
            }
            ways.push((format!("the nkey seed file {}", path.display()), Auth::Nkey(seed)));
        }
        if let Some(path) = &c.creds {
            let text = secret_file(path, "credentials", "--nats-creds, or creds in [cluster]")?;
            // Parsed now, so that a bad file is refused at start (the error names no secret).
            async_nats::ConnectOptions::new()
                .credentials(&text)
                .map_err(|e| ClusterError::Config(format!("the NATS credentials file {}: {e}", path.display())))?;
            ways.push((format!("the credentials file {}", path.display()), Auth::Creds { text, path: path.clone() }));
        }
        if ways.len() > 1 {
            let names: Vec<&str> = ways.iter().map(|(n, _)| n.as_str()).collect();
            return Err(ClusterError::Config(format!(
                "give one way to authenticate to NATS, not {}",
                names.join(" and ")
            )));
        }
        let auth = ways.pop().map(|(_, a)| a).unwrap_or(Auth::None);
        let tls_ca =
            c.tls_ca.as_deref().map(|p| file(p, "TLS CA", "--nats-tls-ca, or tls_ca in [cluster]")).transpose()?;
        let client_cert = match (&c.tls_cert, &c.tls_key) {
            (Some(cert), Some(key)) => Some((
                file(cert, "TLS client certificate", "--nats-tls-cert, or tls_cert in [cluster]")?,
                file(key, "TLS client key", "--nats-tls-key, or tls_key in [cluster]")?,
            )),
            (None, None) => None,
            _ => return Err(ClusterError::Config("a NATS client certificate needs its key: give both --nats-tls-cert and --nats-tls-key (tls_cert and tls_key in [cluster])".into())),
        };
        // As other NATS clients do, a CA or a client certificate given means TLS or nothing.
        let tls_required = c.tls_required.unwrap_or(false) || tls_ca.is_some() || client_cert.is_some();
        Ok(Some(Options { servers, display, auth, tls_ca, client_cert, tls_required }))
    }

    /// The servers as shown in messages, credentials masked.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The async-nats options: credentials and TLS (the servers are given to `connect`).
    pub(super) fn connect_options(&self) -> Result<async_nats::ConnectOptions, ClusterError> {
        let mut o = async_nats::ConnectOptions::new().require_tls(self.tls_required);
        o = match &self.auth {
            Auth::None => o,
            Auth::Token(t) => o.token(t.clone()),
            Auth::User { user, password } => o.user_and_password(user.clone(), password.clone()),
            Auth::Nkey(seed) => o.nkey(seed.clone()),
            Auth::Creds { text, path } => o
                .credentials(text)
                .map_err(|e| ClusterError::Config(format!("the NATS credentials file {}: {e}", path.display())))?,
        };
        if let Some(ca) = &self.tls_ca {
            o = o.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.client_cert {
            o = o.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(o)
    }
}

/// One server URL: its address without credentials, how it is shown, the credentials it carried
/// (`user:password@`, or a token as `token@`, percent-decoded).
fn parse(url: &str) -> Result<(ServerAddr, String, Auth), ClusterError> {
    let addr: ServerAddr =
        url.parse().map_err(|e| ClusterError::Config(format!("bad NATS URL {}: {e}", masked_text(url))))?;
    let auth = match (addr.username(), addr.password()) {
        (Some(user), Some(password)) => Auth::User { user: decoded(user), password: decoded(password) },
        (Some(token), None) => Auth::Token(decoded(token)),
        _ => Auth::None,
    };
    let mut bare = addr.into_inner();
    let mut shown = bare.clone();
    let masked = match &auth {
        Auth::User { .. } => shown.set_password(Some("***")),
        Auth::Token(_) => shown.set_username("***"),
        _ => Ok(()),
    };
    // A URL with a host (every NATS URL) takes credentials; one that could not is shown masked crudely.
    let shown = if masked.is_ok() { shown.as_str().to_string() } else { masked_text(url) };
    if bare.set_password(None).and_then(|()| bare.set_username("")).is_err() {
        return Err(ClusterError::Config(format!("bad NATS URL {shown}: it has no host")));
    }
    let addr = ServerAddr::from_url(bare).map_err(|e| ClusterError::Config(format!("bad NATS URL {shown}: {e}")))?;
    Ok((addr, shown, auth))
}

/// A URL's text with whatever is between `://` and its last `@` masked.
fn masked_text(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        (None, Some(at)) => format!("***{}", &url[at..]),
        _ => url.to_string(),
    }
}

/// `%XX` escapes of a URL's user or password decoded.
fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                // Two hex digits make at most 255.
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A variable's value, which must be set and not empty; the error names the variable only.
fn env(var: &str, key: &str) -> Result<String, ClusterError> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => {
            Err(ClusterError::Config(format!("[cluster] {key} names the variable {var}, which is not set (or empty)")))
        }
    }
}

/// A file that must exist.
fn file(path: &Path, what: &str, given: &str) -> Result<PathBuf, ClusterError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(path.to_path_buf()),
        Ok(_) => Err(ClusterError::Config(format!("the NATS {what} file {} is not a file ({given})", path.display()))),
        Err(source) => Err(ClusterError::File {
            doing: format!("the NATS {what} file {} cannot be read ({given})", path.display()),
            source,
        }),
    }
}

/// A secret's file: it must exist and be open to its owner only; its text.
fn secret_file(path: &Path, what: &str, given: &str) -> Result<String, ClusterError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClusterError::Config(format!(
                "the NATS {what} file {} does not exist ({given})",
                path.display()
            )))
        }
        other => other.map_err(|source| ClusterError::File {
            doing: format!("the NATS {what} file {} cannot be read ({given})", path.display()),
            source,
        })?,
    };
    if !meta.is_file() {
        return Err(ClusterError::Config(format!("the NATS {what} file {} is not a file ({given})", path.display())));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(ClusterError::Config(format!(
            "the NATS {what} file {} is open to group or others (mode {mode:03o}): it holds a secret; `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    std::fs::read_to_string(path).map_err(|source| ClusterError::File {
        doing: format!("cannot read the NATS {what} file {}", path.display()),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(nats: &[&str]) -> Result<Option<Options>, ClusterError> {
        let c = ClusterConfig { nats: Some(nats.iter().map(|s| s.to_string()).collect()), ..Default::default() };
        Options::from_config(&c)
    }

    #[test]
    fn server_lists_split_at_commas_and_credentials_are_masked() {
        let o = options(&["nats://u:p%40ss@a:4222, nats://u:p%40ss@b:4223", "tls://c"]).expect("ok").expect("some");
        assert_eq!(o.display(), "nats://u:***@a:4222,nats://u:***@b:4223,tls://c");
        assert_eq!(o.servers.len(), 3);
        assert!(o.auth == Auth::User { user: "u".into(), password: "p@ss".into() });
        assert!(o.servers.iter().all(|s| !s.has_user_pass()));
        assert!(!format!("{o:?}").contains("p@ss") && !format!("{o:?}").contains("p%40ss"));
        let t = options(&["nats://s3cret@a"]).expect("ok").expect("some");
        assert_eq!(t.display(), "nats://***@a");
        assert!(t.auth == Auth::Token("s3cret".into()));
        let plain = options(&["127.0.0.1:4222"]).expect("ok").expect("some");
        assert_eq!(plain.display(), "nats://127.0.0.1:4222");
    }

    #[test]
    fn conflicting_or_bad_settings_are_refused_without_the_secret() {
        let e = options(&["nats://u:one@a,nats://u:two@b"]).expect_err("two passwords").to_string();
        assert!(e.contains("different credentials") && !e.contains("one") && !e.contains("two"), "{e}");
        let e = options(&["http://u:hidden@a"]).expect_err("a bad scheme").to_string();
        assert!(e.contains("http://***@a") && !e.contains("hidden"), "{e}");
        assert!(options(&[" , "]).expect_err("empty").to_string().contains("empty"));
        let c = ClusterConfig {
            nats: Some(vec!["nats://u:p@a".into()]),
            token_env: Some("PATH".into()),
            ..Default::default()
        };
        let e = Options::from_config(&c).expect_err("two ways").to_string();
        assert!(e.contains("one way to authenticate") && e.contains("token_env (PATH)"), "{e}");
        let c = ClusterConfig {
            nats: Some(vec!["a".into()]),
            user_env: Some("AWF_TEST_UNSET_USER".into()),
            ..Default::default()
        };
        assert!(Options::from_config(&c).expect_err("half").to_string().contains("go together"));
        assert_eq!(masked_text("u:p@host"), "***@host");
    }

    #[test]
    fn secret_files_must_exist_and_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seed.nk");
        let c = ClusterConfig { nats: Some(vec!["a".into()]), nkey: Some(path.clone()), ..Default::default() };
        assert!(Options::from_config(&c).expect_err("missing").to_string().contains("does not exist"));
        std::fs::write(&path, "SUAFAKESEED\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = Options::from_config(&c).expect_err("open").to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600") && !e.contains("SUAFAKESEED"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let o = Options::from_config(&c).expect("private").expect("some");
        assert!(o.auth == Auth::Nkey("SUAFAKESEED".into()));
        assert!(!format!("{o:?}").contains("SUAFAKESEED"));
    }
}
