//! The client-facing origin: parsed from `--advertised-url` or derived from the listener and
//! the device's IPv4 address. Detection never sends a packet and never queries DNS.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

/// Documentation address (RFC 5737 TEST-NET-1) used only to ask the kernel which source
/// address its routing table would pick. `connect` on a UDP socket sends nothing.
const ROUTE_PROBE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 9);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// An HTTP(S) origin clients use to reach the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    /// Lowercase domain, dotted IPv4, or IPv6 without brackets.
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The origin for a plain-HTTP listener reached at `ip:port`.
    #[allow(dead_code, reason = "constructor for callers and tests")]
    pub fn http(ip: IpAddr, port: u16) -> Self {
        Origin {
            scheme: Scheme::Http,
            host: ip.to_string(),
            port,
        }
    }

    fn host_for_url(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }

    /// `host[:port]` as clients send it in `Host`: IPv6 in brackets, the port omitted when
    /// it is the scheme's default.
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host_for_url()
        } else {
            format!("{}:{}", self.host_for_url(), self.port)
        }
    }

    /// `host:port` with the port always present (a `Host` header may carry it either way).
    #[allow(
        dead_code,
        reason = "for Host checks that accept an explicit default port"
    )]
    pub fn authority_with_port(&self) -> String {
        format!("{}:{}", self.host_for_url(), self.port)
    }

    /// `scheme://authority`, the form browsers send in `Origin`.
    pub fn origin_string(&self) -> String {
        format!("{}://{}", self.scheme.as_str(), self.authority())
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.origin_string())
    }

    pub fn a2a_url(&self) -> String {
        format!("{}/a2a", self.origin_string())
    }

    pub fn agent_card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.origin_string())
    }

    /// The host as an IP address, when it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// Whether only clients on this device can reach the origin.
    pub fn is_loopback(&self) -> bool {
        match self.ip() {
            Some(ip) => is_loopback_host(&ip),
            None => self.host == "localhost" || self.host.ends_with(".localhost"),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin_string())
    }
}

/// Why an advertised URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdvertiseError {
    #[error("advertised URL must not be empty")]
    Empty,
    #[error("advertised URL must not contain spaces or control characters")]
    BadCharacter,
    #[error("advertised URL must start with http:// or https://")]
    Scheme,
    #[error("advertised URL is not a valid URL: {0}")]
    Syntax(String),
    #[error("advertised URL must not contain credentials (user:password@)")]
    Credentials,
    #[error("advertised URL must be an origin without a path prefix (found {0:?})")]
    Path(String),
    #[error("advertised URL must not contain a query (?...)")]
    Query,
    #[error("advertised URL must not contain a fragment (#...)")]
    Fragment,
    #[error("advertised URL needs a host")]
    NoHost,
    #[error(
        "advertised URL host {0} is an unspecified address (0.0.0.0 or ::), not a client destination"
    )]
    Unspecified(String),
    #[error("advertised URL port 0 is not a client destination")]
    PortZero,
}

/// Parse and check `--advertised-url`: http or https; no credentials, path (other than
/// "/"), query or fragment; the host is not an unspecified address in any spelling. A
/// missing port means the scheme's default.
pub fn parse_advertised_url(s: &str) -> Result<Origin, AdvertiseError> {
    if s.is_empty() {
        return Err(AdvertiseError::Empty);
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AdvertiseError::BadCharacter);
    }
    let lower = s.to_ascii_lowercase();
    let scheme_len = if lower.starts_with("http://") {
        "http://".len()
    } else if lower.starts_with("https://") {
        "https://".len()
    } else {
        return Err(AdvertiseError::Scheme);
    };
    // Structural checks on the text as written: the URL parser would quietly normalise
    // things like "/a/.." or a backslash into "/".
    let rest = &s[scheme_len..];
    let authority_end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    if authority.contains('@') {
        return Err(AdvertiseError::Credentials);
    }
    if authority.is_empty() {
        return Err(AdvertiseError::NoHost);
    }
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    let (path, after) = tail.split_at(path_end);
    if !(path.is_empty() || path == "/") {
        return Err(AdvertiseError::Path(path.to_owned()));
    }
    if after.starts_with('?') {
        return Err(AdvertiseError::Query);
    }
    if after.starts_with('#') {
        return Err(AdvertiseError::Fragment);
    }

    let url = url::Url::parse(s).map_err(|e| AdvertiseError::Syntax(e.to_string()))?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return Err(AdvertiseError::Scheme),
    };
    // Belt and braces after the textual checks.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(AdvertiseError::Credentials);
    }
    if url.path() != "/" && !url.path().is_empty() {
        return Err(AdvertiseError::Path(url.path().to_owned()));
    }
    if url.query().is_some() {
        return Err(AdvertiseError::Query);
    }
    if url.fragment().is_some() {
        return Err(AdvertiseError::Fragment);
    }
    let host = match url.host() {
        None => return Err(AdvertiseError::NoHost),
        Some(url::Host::Domain("")) => return Err(AdvertiseError::NoHost),
        Some(url::Host::Domain(d)) => d.to_owned(),
        Some(url::Host::Ipv4(ip)) => {
            if ip.is_unspecified() {
                return Err(AdvertiseError::Unspecified(ip.to_string()));
            }
            ip.to_string()
        }
        Some(url::Host::Ipv6(ip)) => {
            if ip.is_unspecified() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_unspecified()) {
                return Err(AdvertiseError::Unspecified(ip.to_string()));
            }
            ip.to_string()
        }
    };
    let port = url.port_or_known_default().unwrap_or(scheme.default_port());
    if port == 0 {
        return Err(AdvertiseError::PortZero);
    }
    Ok(Origin { scheme, host, port })
}

/// Loopback in any spelling, including IPv4-mapped IPv6 (`::ffff:127.0.0.1`).
pub fn is_loopback_host(host: &IpAddr) -> bool {
    match host {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The origin to advertise for a plain-HTTP listener bound to `bound` when no
/// `--advertised-url` is given: the listener's own address, or the detected device IPv4
/// when it listens on all interfaces. The actual bound port is used.
#[allow(
    dead_code,
    reason = "the origin rule for a listener; the supervisor may use it"
)]
pub fn default_origin(bound: SocketAddr) -> Origin {
    let ip = bound.ip();
    let ip = if ip.is_unspecified() {
        IpAddr::V4(detect_ipv4())
    } else {
        ip
    };
    Origin::http(ip, bound.port())
}

/// The device's IPv4 address for clients: the route source address, else the first usable
/// interface address, else 127.0.0.1 (reachable only from this device).
pub fn detect_ipv4() -> Ipv4Addr {
    if let Some(ip) = route_source_ipv4() {
        return ip;
    }
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        use nix::net::if_::InterfaceFlags;
        let candidates = addrs.map(|ia| InterfaceCandidate {
            up: ia.flags.contains(InterfaceFlags::IFF_UP),
            running: ia.flags.contains(InterfaceFlags::IFF_RUNNING),
            loopback: ia.flags.contains(InterfaceFlags::IFF_LOOPBACK),
            addr: ia
                .address
                .as_ref()
                .and_then(|a| a.as_sockaddr_in().map(|sin| sin.ip())),
            name: ia.interface_name,
        });
        if let Some(ip) = choose_interface_ipv4(candidates) {
            return ip;
        }
    }
    Ipv4Addr::LOCALHOST
}

/// Ask the kernel which source address a route to a public address would use. A UDP
/// `connect` only selects the route; no packet leaves the device.
fn route_source_ipv4() -> Option<Ipv4Addr> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect(ROUTE_PROBE).ok()?;
    match socket.local_addr().ok()?.ip() {
        IpAddr::V4(v4) if usable_ipv4(v4) => Some(v4),
        _ => None,
    }
}

fn usable_ipv4(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_loopback() || ip.is_broadcast() || ip.is_multicast())
}

/// One (interface, IPv4 address) pair as `getifaddrs` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceCandidate {
    pub name: String,
    pub up: bool,
    pub running: bool,
    pub loopback: bool,
    /// The interface's IPv4 address, if this entry has one.
    pub addr: Option<Ipv4Addr>,
}

/// The first address of an interface that is up, running and not loopback, preferring a
/// routable address over a link-local (169.254/16) one.
pub fn choose_interface_ipv4<I>(candidates: I) -> Option<Ipv4Addr>
where
    I: IntoIterator<Item = InterfaceCandidate>,
{
    let mut link_local = None;
    for c in candidates {
        if !c.up || !c.running || c.loopback {
            continue;
        }
        let Some(ip) = c.addr else { continue };
        if !usable_ipv4(ip) {
            continue;
        }
        if ip.is_link_local() {
            link_local.get_or_insert(ip);
            continue;
        }
        return Some(ip);
    }
    link_local
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn accepted_urls() {
        let table: &[(&str, Scheme, &str, u16, &str)] = &[
            (
                "http://192.168.1.5:8765",
                Scheme::Http,
                "192.168.1.5",
                8765,
                "http://192.168.1.5:8765",
            ),
            (
                "http://192.168.1.5:8765/",
                Scheme::Http,
                "192.168.1.5",
                8765,
                "http://192.168.1.5:8765",
            ),
            (
                "https://agent.example.com",
                Scheme::Https,
                "agent.example.com",
                443,
                "https://agent.example.com",
            ),
            (
                "HTTPS://Agent.Example.COM:443/",
                Scheme::Https,
                "agent.example.com",
                443,
                "https://agent.example.com",
            ),
            (
                "https://agent.example.com:8443",
                Scheme::Https,
                "agent.example.com",
                8443,
                "https://agent.example.com:8443",
            ),
            ("http://host", Scheme::Http, "host", 80, "http://host"),
            (
                "http://[fe80::1]:8765",
                Scheme::Http,
                "fe80::1",
                8765,
                "http://[fe80::1]:8765",
            ),
            (
                "http://[2001:DB8::1]",
                Scheme::Http,
                "2001:db8::1",
                80,
                "http://[2001:db8::1]",
            ),
            (
                "http://127.0.0.1:1",
                Scheme::Http,
                "127.0.0.1",
                1,
                "http://127.0.0.1:1",
            ),
        ];
        for (input, scheme, host, port, origin) in table {
            let o = parse_advertised_url(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(o.scheme, *scheme, "{input}");
            assert_eq!(o.host, *host, "{input}");
            assert_eq!(o.port, *port, "{input}");
            assert_eq!(o.origin_string(), *origin, "{input}");
        }
    }

    #[test]
    fn rejected_urls() {
        use AdvertiseError as E;
        type Check = fn(&E) -> bool;
        let table: &[(&str, Check)] = &[
            ("", |e| *e == E::Empty),
            ("ftp://host", |e| *e == E::Scheme),
            ("ws://host", |e| *e == E::Scheme),
            ("host:8765", |e| *e == E::Scheme),
            ("http:host", |e| *e == E::Scheme),
            ("http://", |e| *e == E::NoHost),
            ("http:///mcp", |e| *e == E::NoHost),
            ("http:// host", |e| *e == E::BadCharacter),
            ("http://host\n", |e| *e == E::BadCharacter),
            ("http://user:pw@host", |e| *e == E::Credentials),
            ("http://user@host", |e| *e == E::Credentials),
            ("http://@host", |e| *e == E::Credentials),
            (
                "http://host/mcp",
                |e| matches!(e, E::Path(p) if p == "/mcp"),
            ),
            ("http://host/a/..", |e| matches!(e, E::Path(_))),
            ("http://host//", |e| matches!(e, E::Path(_))),
            ("http://host\\x", |e| matches!(e, E::Path(_))),
            ("http://host?", |e| *e == E::Query),
            ("http://host/?a=1", |e| *e == E::Query),
            ("http://host#", |e| *e == E::Fragment),
            ("http://host/#f", |e| *e == E::Fragment),
            ("http://0.0.0.0:8765", |e| matches!(e, E::Unspecified(_))),
            ("http://0:8765", |e| matches!(e, E::Unspecified(_))),
            ("http://0x0", |e| matches!(e, E::Unspecified(_))),
            ("http://0.0", |e| matches!(e, E::Unspecified(_))),
            ("http://000.000.000.000", |e| matches!(e, E::Unspecified(_))),
            ("http://[::]:8765", |e| matches!(e, E::Unspecified(_))),
            ("http://[0:0::0]", |e| matches!(e, E::Unspecified(_))),
            ("http://[::ffff:0.0.0.0]", |e| {
                matches!(e, E::Unspecified(_))
            }),
            ("http://host:0", |e| *e == E::PortZero),
            ("http://host:99999", |e| matches!(e, E::Syntax(_))),
            ("http://[::1", |e| matches!(e, E::Syntax(_))),
        ];
        for (input, ok) in table {
            match parse_advertised_url(input) {
                Ok(o) => panic!("{input:?} accepted as {o:?}"),
                Err(e) => assert!(ok(&e), "{input:?}: unexpected {e:?}"),
            }
        }
    }

    #[test]
    fn urls_and_authority() {
        let o = parse_advertised_url("https://agent.example.com").unwrap();
        assert_eq!(o.mcp_url(), "https://agent.example.com/mcp");
        assert_eq!(o.a2a_url(), "https://agent.example.com/a2a");
        assert_eq!(
            o.agent_card_url(),
            "https://agent.example.com/.well-known/agent-card.json"
        );
        assert_eq!(o.authority(), "agent.example.com");
        assert_eq!(o.authority_with_port(), "agent.example.com:443");

        let o = Origin::http(IpAddr::V6(Ipv6Addr::LOCALHOST), 8765);
        assert_eq!(o.authority(), "[::1]:8765");
        assert_eq!(o.mcp_url(), "http://[::1]:8765/mcp");
        assert!(o.is_loopback());
        let o = Origin::http(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 80);
        assert_eq!(o.origin_string(), "http://10.0.0.2");
        assert_eq!(o.to_string(), "http://10.0.0.2");
        assert!(!o.is_loopback());
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback_host(&"127.0.0.1".parse().unwrap()));
        assert!(is_loopback_host(&"127.9.9.9".parse().unwrap()));
        assert!(is_loopback_host(&"::1".parse().unwrap()));
        assert!(is_loopback_host(&"::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback_host(&"0.0.0.0".parse().unwrap()));
        assert!(!is_loopback_host(&"192.168.1.1".parse().unwrap()));
        assert!(!is_loopback_host(&"::".parse().unwrap()));
    }

    fn cand(
        name: &str,
        up: bool,
        running: bool,
        loopback: bool,
        addr: Option<[u8; 4]>,
    ) -> InterfaceCandidate {
        InterfaceCandidate {
            name: name.into(),
            up,
            running,
            loopback,
            addr: addr.map(Ipv4Addr::from),
        }
    }

    #[test]
    fn interface_choice() {
        let ifs = vec![
            cand("lo", true, true, true, Some([127, 0, 0, 1])),
            cand("wlan0", true, true, false, None), // IPv6 / packet entry
            cand("rmnet0", false, false, false, Some([10, 1, 1, 1])), // down
            cand("eth1", true, false, false, Some([10, 2, 2, 2])), // no carrier
            cand("usb0", true, true, false, Some([169, 254, 3, 3])), // link-local
            cand("weird", true, true, false, Some([0, 0, 0, 0])),
            cand("wlan0", true, true, false, Some([192, 168, 1, 23])),
            cand("eth0", true, true, false, Some([10, 0, 0, 9])),
        ];
        assert_eq!(
            choose_interface_ipv4(ifs),
            Some(Ipv4Addr::new(192, 168, 1, 23))
        );

        let only_link_local = vec![
            cand("lo", true, true, true, Some([127, 0, 0, 1])),
            cand("usb0", true, true, false, Some([169, 254, 3, 3])),
        ];
        assert_eq!(
            choose_interface_ipv4(only_link_local),
            Some(Ipv4Addr::new(169, 254, 3, 3))
        );

        let nothing = vec![
            cand("lo", true, true, true, Some([127, 0, 0, 1])),
            cand("lo-ish", true, true, false, Some([127, 0, 0, 2])),
            cand("wlan0", false, true, false, Some([192, 168, 1, 2])),
        ];
        assert_eq!(choose_interface_ipv4(nothing), None);
        assert_eq!(choose_interface_ipv4(Vec::new()), None);
    }

    #[test]
    fn detection_gives_a_usable_or_loopback_address() {
        let ip = detect_ipv4();
        assert!(!ip.is_unspecified());
        assert!(ip == Ipv4Addr::LOCALHOST || usable_ipv4(ip), "{ip}");
    }

    #[test]
    fn default_origin_uses_bound_port_and_specific_address() {
        let o = default_origin("127.0.0.1:4321".parse().unwrap());
        assert_eq!(o.mcp_url(), "http://127.0.0.1:4321/mcp");
        let o = default_origin("0.0.0.0:4321".parse().unwrap());
        assert_eq!(o.port, 4321);
        assert_ne!(o.host, "0.0.0.0");
    }
}
