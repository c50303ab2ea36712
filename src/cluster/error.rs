//! Why the cluster could not do what it was asked, by kind: its configuration (`[cluster]`, the
//! `--nats*` flags, the key) says what cannot be used; the servers are not there or refuse; a
//! stream, bucket or store another awf made; a NATS call that failed; a run a worker cannot own.
//! The texts name the servers with their credentials masked, and never a secret or a file's line.

/// A cluster failure.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// What `[cluster]`, the `--nats*` flags or the cluster key get wrong, said whole (a bad URL,
    /// credentials given two ways, a secret file open to others, a key too short).
    #[error("{0}")]
    Config(String),
    /// A file the configuration names (a secret, the key): what was being done, and the I/O error.
    #[error("{doing}: {source}")]
    File { doing: String, source: std::io::Error },
    /// The servers did not answer within `secs` seconds.
    #[error("the NATS server at {url} did not answer within {secs}s")]
    Silent { url: String, secs: u64 },
    #[error("cannot connect to the NATS server at {url}: {source}")]
    Connect { url: String, source: async_nats::ConnectError },
    /// A setup step the server refused for a permission this user lacks (its words).
    #[error("cannot set up {what} on {url}: the server refused a permission this user needs ({refusal}); see \"Securing the cluster\" in awf's README")]
    Permission { what: String, url: String, refusal: String },
    /// A setup step that did not succeed before the wait for a cluster to elect ran out.
    #[error(
        "cannot set up {what} on {url} within {secs}s (is the server started with -js, and its cluster formed?): {why}"
    )]
    Setup { what: String, url: String, secs: u64, why: String },
    /// A stream, bucket or object store another schema of awf made: the text says how to fix it.
    #[error("{0}")]
    Schema(String),
    /// A NATS call that failed (a publish, a consumer, a bucket entry): what, and the words of the
    /// server or the client (their error types differ call by call).
    #[error("{doing}: {why}")]
    Nats { doing: String, why: String },
    /// What a worker's rules refuse of a message (a runtime it does not serve, a folder outside its
    /// roots, a sandbox looser than its floor), said without quoting a file.
    #[error("{0}")]
    Refused(String),
    /// A sandbox policy a message carries that cannot be enforced as written.
    #[error(transparent)]
    Policy(#[from] crate::sandbox::policy::PolicyError),
    /// A sandbox a message asks for that opens what the worker's floor keeps shut.
    #[error("the sandbox asked is looser than this worker's floor `{floor}`: {why}")]
    Looser { floor: String, why: crate::sandbox::policy::Looser },
    /// An operation no worker serving its harness took before its deadline.
    #[error("no worker serving `{harness}` took the operation before its deadline (start one with `awf worker --nats {url} --runtimes {harness}`)")]
    Untaken { harness: crate::config::HarnessKind, url: String },
    /// A stored session that cannot be taken (too large).
    #[error("{0}")]
    Stored(String),
    /// The cluster key cannot be had (`key.rs`).
    #[error(transparent)]
    Key(#[from] super::key::KeyError),
    /// A sealed message or entry refused (`seal.rs`).
    #[error(transparent)]
    Sealed(#[from] super::seal::Refusal),
    /// A run a worker cannot own (its script or folder), said without a line of its files.
    #[error("{0}")]
    Run(String),
}

impl ClusterError {
    /// A NATS call that failed: `doing` says what, `why` is its error.
    pub fn nats(doing: impl Into<String>, why: impl std::fmt::Display) -> ClusterError {
        ClusterError::Nats { doing: doing.into(), why: why.to_string() }
    }
}
