//! `awf sandbox-bridge`: runs inside a sandbox with a listed network, where only loopback exists.
//! It listens on 127.0.0.1:<proxy port> (the sandbox's `HTTP(S)_PROXY`) and on each listed
//! loopback `host:port`, relays every connection to awf's proxy on the Unix socket bound into the
//! sandbox (a forwarded port as `CONNECT host:port`), runs the program, and exits with its code.

use super::NetError;
use crate::sandbox::net::Target;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// What the bridge is started with.
#[derive(Debug, Clone)]
pub struct Bridge {
    pub socket: PathBuf,
    pub proxy_port: u16,
    pub forwards: Vec<Target>,
    pub program: Vec<String>,
}

/// Copies both ways until each side has ended, then closes both.
fn pipe(tcp: TcpStream, unix: UnixStream) {
    let (Ok(mut tcp_in), Ok(mut unix_in)) = (tcp.try_clone(), unix.try_clone()) else { return };
    let (mut tcp_out, mut unix_out) = (tcp, unix);
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut tcp_in, &mut unix_out);
        let _ = unix_out.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut unix_in, &mut tcp_out);
    let _ = tcp_out.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// Asks the proxy for a tunnel to `target`; `Ok` once it answered 200.
/// A tunnel that failed is closed at once (the program sees its connection end), so why is not
/// kept beyond the I/O error.
fn tunnel(socket: &Path, target: &Target) -> std::io::Result<UnixStream> {
    let mut u = UnixStream::connect(socket)?;
    write!(u, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 8192 || u.read(&mut byte)? == 0 {
            return Err(std::io::Error::other("awf's proxy closed the connection"));
        }
        head.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
    match status.split(' ').nth(1) {
        Some("200") => Ok(u),
        _ => Err(std::io::Error::other(format!("awf's proxy refused {target}: {status}"))),
    }
}

/// Accepts on `listener` forever, each connection relayed on a thread of its own.
fn relay(listener: TcpListener, socket: PathBuf, target: Option<Target>) {
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (socket, target) = (socket.clone(), target.clone());
            std::thread::spawn(move || {
                let unix = match &target {
                    None => UnixStream::connect(&socket),
                    Some(t) => tunnel(&socket, t),
                };
                match unix {
                    Ok(u) => pipe(conn, u),
                    Err(_) => {
                        let _ = conn.shutdown(Shutdown::Both);
                    }
                }
            });
        }
    });
}

impl Bridge {
    /// Listens, runs the program, and returns its exit code (128 + the signal that ended it).
    pub fn run(&self) -> Result<i32, NetError> {
        let bind =
            |addr: &str| TcpListener::bind(addr).map_err(|source| NetError::Listen { addr: addr.to_string(), source });
        relay(bind(&format!("127.0.0.1:{}", self.proxy_port))?, self.socket.clone(), None);
        for t in &self.forwards {
            relay(bind(&t.listen_addr())?, self.socket.clone(), Some(t.clone()));
        }
        let (program, args) = self.program.split_first().ok_or(NetError::NoProgram)?;
        let status = crate::open_files::command(program)
            .args(args)
            .status()
            .map_err(|source| NetError::Run { program: program.clone(), source })?;
        use std::os::unix::process::ExitStatusExt;
        Ok(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bridge(proxy_port: u16, program: &[&str]) -> Bridge {
        Bridge {
            socket: "/nonexistent/net.sock".into(),
            proxy_port,
            forwards: vec![],
            program: program.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_port_taken_or_a_program_missing_is_an_error_naming_it() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = taken.local_addr().expect("addr").port();
        let e = bridge(port, &["true"]).run().expect_err("taken");
        assert!(matches!(&e, NetError::Listen { addr, .. } if *addr == format!("127.0.0.1:{port}")), "{e}");
        drop(taken);
        let e = bridge(0, &["/nonexistent/program"]).run().expect_err("missing");
        assert!(e.to_string().starts_with("sandbox-bridge: cannot run `/nonexistent/program`: "), "{e}");
        assert_eq!(bridge(0, &["sh", "-c", "exit 7"]).run().expect("runs"), 7, "the program's own exit code");
    }
}
