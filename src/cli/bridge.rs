//! `awf sandbox-bridge` (hidden): what a sandbox with a listed network runs its program under;
//! `harness::net::bridge` does the work. Not for operators: awf's sandbox argv calls it.

use crate::harness::net::bridge::Bridge;
use crate::sandbox::net::Target;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct BridgeArgs {
    /// awf's proxy socket for this agent
    #[arg(long)]
    socket: PathBuf,
    /// Where the proxy is reached inside the sandbox: 127.0.0.1:PORT
    #[arg(long)]
    proxy_port: u16,
    /// A listed loopback host:port to listen on inside the sandbox and forward
    #[arg(long)]
    forward: Vec<String>,
    /// The program and its arguments
    #[arg(last = true, required = true)]
    program: Vec<String>,
}

pub fn exec(args: BridgeArgs) -> anyhow::Result<i32> {
    let forwards =
        args.forward.iter().map(|f| Target::parse(f)).collect::<Result<Vec<_>, _>>().map_err(anyhow::Error::msg)?;
    let bridge = Bridge { socket: args.socket, proxy_port: args.proxy_port, forwards, program: args.program };
    bridge.run().map_err(anyhow::Error::msg)
}
