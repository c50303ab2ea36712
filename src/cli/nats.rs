//! The NATS flags of `awf worker`, `script run` and `runs submit` (`--nats` and the credential and
//! TLS files), and the one place they meet `[cluster]` of awf.toml, field by field, to make the
//! connect options. A user, password or token is never a flag's value: they come from the URL or,
//! better (a command line is visible to other local users), from the variables `[cluster]` names.

use crate::cluster::Options;
use crate::config::ClusterConfig;
use anyhow::{anyhow, Result};
use std::path::PathBuf;

#[derive(clap::Args, Clone, Default, Debug)]
pub struct NatsFlags {
    /// The NATS servers, comma-separated, e.g. nats://127.0.0.1:4222 (else `[cluster] nats` of
    /// awf.toml); nats://user:pass@host works, but `user_env`/`password_env` in [cluster] keep
    /// secrets off the command line
    #[arg(long = "nats", value_name = "URL[,URL...]")]
    pub servers: Option<String>,
    /// A NATS credentials file (user JWT and nkey seed), 0600 (else `[cluster] creds`)
    #[arg(long = "nats-creds", value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// A file holding a NATS user nkey seed, 0600 (else `[cluster] nkey`)
    #[arg(long = "nats-nkey", value_name = "FILE")]
    pub nkey: Option<PathBuf>,
    /// The CA certificates (PEM) the NATS servers' certificates are checked against; TLS is then
    /// required (else `[cluster] tls_ca`)
    #[arg(long = "nats-tls-ca", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) for servers that verify clients (else `[cluster] tls_cert`)
    #[arg(long = "nats-tls-cert", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's key (PEM) (else `[cluster] tls_key`)
    #[arg(long = "nats-tls-key", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Refuse a connection to NATS that is not TLS (else `[cluster] tls_required`)
    #[arg(long = "nats-tls-required")]
    pub tls_required: bool,
}

impl NatsFlags {
    /// `[cluster]` with these flags over it, field by field.
    pub fn over(&self, config: &ClusterConfig) -> ClusterConfig {
        let mut c = config.clone();
        if let Some(s) = &self.servers {
            c.nats = Some(vec![s.clone()]);
        }
        let pick = |flag: &Option<PathBuf>, field: &mut Option<PathBuf>| {
            if let Some(f) = flag {
                *field = Some(f.clone());
            }
        };
        pick(&self.creds, &mut c.creds);
        pick(&self.nkey, &mut c.nkey);
        pick(&self.tls_ca, &mut c.tls_ca);
        pick(&self.tls_cert, &mut c.tls_cert);
        pick(&self.tls_key, &mut c.tls_key);
        if self.tls_required {
            c.tls_required = Some(true);
        }
        c
    }

    /// The connect options, or `None` when neither the flags nor `[cluster]` name a server. A
    /// credential file missing or open to others, or a variable not set, is an error here, at start.
    pub fn options(&self, config: &ClusterConfig) -> Result<Option<Options>> {
        Options::from_config(&self.over(config)).map_err(|e| anyhow!(e))
    }

    /// `options`, for a command that needs a server: `command` names it in the error.
    pub fn required(&self, config: &ClusterConfig, command: &str) -> Result<Options> {
        self.options(config)?.ok_or_else(|| {
            anyhow!("{command} needs a NATS server: --nats URL, or `nats` in the [cluster] table of awf.toml")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_config_field_by_field() {
        let config = ClusterConfig {
            nats: Some(vec!["nats://a".into()]),
            tls_ca: Some("ca.pem".into()),
            nkey: Some("seed.nk".into()),
            ..Default::default()
        };
        let flags =
            NatsFlags { servers: Some("nats://b,nats://c".into()), nkey: Some("mine.nk".into()), ..Default::default() };
        let c = flags.over(&config);
        assert_eq!(c.nats, Some(vec!["nats://b,nats://c".to_string()]));
        assert_eq!(c.nkey, Some(PathBuf::from("mine.nk")));
        assert_eq!(c.tls_ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(c.tls_required, None);
        assert!(NatsFlags::default().options(&ClusterConfig::default()).expect("no error").is_none());
        let e = NatsFlags::default().required(&ClusterConfig::default(), "awf worker").expect_err("none");
        assert!(e.to_string().contains("awf worker needs a NATS server"), "{e}");
    }
}
