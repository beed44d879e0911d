//! Binding: the listeners the tree serves on (port fallback), the Host values that name
//! them, and the address a listener holds.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::OwnedFd;

use super::ServeError;

/// The address a listener is bound to, as text.
pub(super) fn local_addr_of(listener: &OwnedFd) -> Option<String> {
    let sock = nix::sys::socket::getsockname::<nix::sys::socket::SockaddrStorage>(
        std::os::fd::AsRawFd::as_raw_fd(listener),
    )
    .ok()?;
    sock.as_sockaddr_in()
        .map(|a| SocketAddr::from(std::net::SocketAddrV4::from(*a)).to_string())
        .or_else(|| {
            sock.as_sockaddr_in6()
                .map(|a| SocketAddr::from(std::net::SocketAddrV6::from(*a)).to_string())
        })
}

/// Bind `host:port`; when the port is taken, an available port on the same address.
pub(super) fn bind(host: IpAddr, port: u16) -> Result<TcpListener, ServeError> {
    let addr = SocketAddr::new(host, port);
    match TcpListener::bind(addr) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && port != 0 => {
            let fallback = SocketAddr::new(host, 0);
            let l = TcpListener::bind(fallback).map_err(|source| ServeError::Bind {
                addr: fallback,
                source,
            })?;
            if let Ok(actual) = l.local_addr() {
                tracing::warn!(
                    requested = port,
                    actual = actual.port(),
                    "port is in use; using an available port"
                );
            }
            Ok(l)
        }
        Err(source) => Err(ServeError::Bind { addr, source }),
    }
}

/// Host header values that name this listener directly.
pub(super) fn local_authorities(host: IpAddr, port: u16) -> Vec<String> {
    let fmt = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    };
    let mut out = Vec::new();
    if host.is_unspecified() {
        if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
            for a in addrs {
                if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
                    out.push(fmt(IpAddr::V4(sin.ip())));
                }
            }
        }
        out.push(fmt(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)));
    } else {
        out.push(fmt(host));
    }
    if host.is_loopback() || host.is_unspecified() {
        out.push(format!("localhost:{port}"));
    }
    out.sort();
    out.dedup();
    out
}
