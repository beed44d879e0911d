//! Name resolution for the model client. On ordinary Linux it is the system resolver
//! (`getaddrinfo` on tokio's blocking pool, so `/etc/hosts`, `/etc/resolv.conf` and
//! `nsswitch.conf` apply as for any program). Android has no `/etc/resolv.conf`: its
//! libc asks the platform's resolver daemon over the `/dev/socket/dnsproxyd` Unix
//! socket, and a static binary (ours) must do the same itself; [`dnsproxyd_getaddrinfo`]
//! speaks that protocol.
//!
//! The protocol, as checked against AOSP:
//! * client, bionic `libc/dns/net/getaddrinfo.c` (`android_getaddrinfo_proxy`,
//!   aosp-mirror/platform_bionic @0639bd50): refuses names containing any of
//!   `" \n\r\t^'\""`; writes `getaddrinfo <host> <service|^> <ai_flags> <ai_family>
//!   <ai_socktype> <ai_protocol> <netid>` followed by one NUL ("required by
//!   FrameworkListener"); reads a 4-byte result code and accepts only
//!   `DnsProxyQueryResult` (222); then repeatedly a big-endian i32 `have_more` (0 ends
//!   the list), four big-endian i32 (`ai_flags`, `ai_family`, `ai_socktype`,
//!   `ai_protocol`), a big-endian i32 address length and that many bytes of `sockaddr`
//!   (at most `sizeof(sockaddr_storage)`), a big-endian i32 name length and that many
//!   bytes of NUL-terminated canonical name.
//! * server, `DnsProxyListener.cpp` (system/netd, later packages/modules/DnsResolver):
//!   success is `sendCode(DnsProxyQueryResult)` (`"222\0"`: `%.3d` into 4 bytes, see
//!   `SocketClient::sendCode`), then `sendBE32(1)` + `sendaddrinfo` per address and
//!   `sendBE32(0)`; failure is `sendBinaryMsg(DnsProxyOperationFailed, &rv, 4)`: the code
//!   (`"401\0"`), a big-endian length and the host-order `int` EAI error.
//!
//! The `sockaddr` bytes are the daemon's native layout (same machine): the address sits
//! at offset 4 (`sockaddr_in`) or 8 (`sockaddr_in6`, scope id at 24); the family is taken
//! from the record's own `ai_family`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

/// Android's resolver socket.
pub const ANDROID_DNSPROXYD: &str = "/dev/socket/dnsproxyd";
/// Its absence (with the socket present) means the system resolver cannot work here.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// `DnsProxyQueryResult` of netd's `ResponseCode`.
const DNSPROXY_QUERY_RESULT: u32 = 222;
/// Addresses taken from one answer; more is a hostile or broken daemon.
pub const MAX_ADDRESSES: usize = 64;
/// `sizeof(struct sockaddr_storage)`.
const MAX_SOCKADDR_BYTES: usize = 128;
/// `NI_MAXHOST`: the longest canonical name accepted (and skipped).
const MAX_CANONNAME_BYTES: usize = 1025;
/// Longest DNS name.
const MAX_HOST_BYTES: usize = 253;
/// `hints` as Rust's own resolver gives them: any family, stream sockets.
const HINT_FLAGS: i32 = 0;
const HINT_FAMILY: i32 = 0; // AF_UNSPEC
const HINT_SOCKTYPE: i32 = 1; // SOCK_STREAM
const HINT_PROTOCOL: i32 = 0;
/// `NETID_UNSET`: the default network.
const NETID_UNSET: u32 = 0;
/// `AF_INET` and `AF_INET6` as Linux (and so Android) numbers them.
const AF_INET: i32 = 2;
const AF_INET6: i32 = 10;

/// How this device resolves names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameService {
    /// `getaddrinfo` of the C library.
    System,
    /// `getaddrinfo` of a confined netd that may not read the resolver's files (the
    /// kernel has no Landlock to limit opens to them, so no open is allowed at all):
    /// only IP addresses and a name server on 127.0.0.1 can work.
    SystemWithoutFiles,
    /// Android's resolver daemon at this socket.
    DnsProxyd(PathBuf),
}

impl NameService {
    /// Android's resolver when `/etc/resolv.conf` is absent and its socket is there;
    /// the system resolver otherwise.
    pub fn detect() -> Self {
        if !Path::new(RESOLV_CONF).exists() && Path::new(ANDROID_DNSPROXYD).exists() {
            NameService::DnsProxyd(PathBuf::from(ANDROID_DNSPROXYD))
        } else {
            NameService::System
        }
    }

    pub fn describe(&self) -> String {
        match self {
            NameService::System => "system resolver".into(),
            NameService::SystemWithoutFiles => {
                "system resolver without its files (no Landlock)".into()
            }
            NameService::DnsProxyd(path) => format!("Android resolver at {}", path.display()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("{0:?} is not a host name that can be resolved")]
    InvalidName(String),
    #[error("cannot resolve {host}: {source}")]
    System {
        host: String,
        source: std::io::Error,
    },
    #[error(
        "cannot resolve {host}: {source} (netd may not read /etc/resolv.conf or /etc/hosts \
         on this kernel, which has no Landlock to limit what it reads; use an IP address \
         in model.base_url)"
    )]
    SystemWithoutFiles {
        host: String,
        source: std::io::Error,
    },
    #[error("{host} has no address")]
    NoAddress { host: String },
    #[error("cannot reach the Android resolver at {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("the Android resolver could not resolve {host} (code {code}{detail})")]
    Refused {
        host: String,
        code: u32,
        detail: String,
    },
    #[error("the Android resolver's answer for {host} is malformed: {why}")]
    Malformed { host: String, why: String },
    #[error("resolving {host} took longer than {secs} s")]
    Timeout { host: String, secs: u64 },
}

/// Refuse what no resolver should be sent: empty or overlong names, spaces, control
/// characters, non-ASCII (the URL parser already turned names into punycode), and the
/// characters bionic refuses to put on the dnsproxyd line.
pub fn check_hostname(host: &str) -> Result<(), DnsError> {
    let fine = |c: char| c.is_ascii_graphic() && !matches!(c, '^' | '\'' | '"' | '\\');
    if host.is_empty() || host.len() > MAX_HOST_BYTES || !host.chars().all(fine) {
        return Err(DnsError::InvalidName(
            crate::agent::evidence::prefix(host, 64).to_string(),
        ));
    }
    Ok(())
}

/// Resolve `host` with `service`, bounded in time and in the number of addresses. The
/// ports are 0: the caller puts the URL's port in.
pub async fn lookup(
    service: &NameService,
    host: &str,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, DnsError> {
    check_hostname(host)?;
    let work = async {
        match service {
            // RFC 6761: localhost names are loopback, with or without /etc/hosts (which
            // netd may not read without Landlock).
            NameService::SystemWithoutFiles if is_localhost(host) => Ok(vec![
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
                SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0),
            ]),
            NameService::System | NameService::SystemWithoutFiles => {
                tokio::net::lookup_host((host, 0))
                    .await
                    .map(|addrs| addrs.take(MAX_ADDRESSES).collect::<Vec<_>>())
                    .map_err(|source| {
                        let host = host.to_string();
                        if *service == NameService::System {
                            DnsError::System { host, source }
                        } else {
                            DnsError::SystemWithoutFiles { host, source }
                        }
                    })
            }
            NameService::DnsProxyd(path) => dnsproxyd_getaddrinfo(path, host).await,
        }
    };
    let addrs = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| DnsError::Timeout {
            host: host.to_string(),
            secs: timeout.as_secs(),
        })??;
    if addrs.is_empty() {
        return Err(DnsError::NoAddress {
            host: host.to_string(),
        });
    }
    Ok(addrs)
}

fn is_localhost(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// The model client's resolver.
#[derive(Debug, Clone)]
pub struct Resolver {
    pub service: NameService,
    pub timeout: Duration,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = lookup(&this.service, &host, this.timeout).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// `getaddrinfo` through Android's resolver daemon listening at `socket`.
pub async fn dnsproxyd_getaddrinfo(socket: &Path, host: &str) -> Result<Vec<SocketAddr>, DnsError> {
    check_hostname(host)?;
    let connect_error = |source| DnsError::Connect {
        path: socket.display().to_string(),
        source,
    };
    let mut stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(connect_error)?;
    let request = format!(
        "getaddrinfo {host} ^ {HINT_FLAGS} {HINT_FAMILY} {HINT_SOCKTYPE} {HINT_PROTOCOL} {NETID_UNSET}\0"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(connect_error)?;
    let mut answer = Answer {
        reader: BufReader::new(stream),
        host,
    };
    answer.read().await
}

struct Answer<'a, R> {
    reader: BufReader<R>,
    host: &'a str,
}

impl<R: AsyncRead + Unpin> Answer<'_, R> {
    fn malformed(&self, why: impl Into<String>) -> DnsError {
        DnsError::Malformed {
            host: self.host.to_string(),
            why: why.into(),
        }
    }

    async fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), DnsError> {
        self.reader
            .read_exact(buf)
            .await
            .map(drop)
            .map_err(|e| self.malformed(format!("{what}: {e}")))
    }

    async fn be32(&mut self, what: &str) -> Result<i32, DnsError> {
        let mut b = [0u8; 4];
        self.exact(&mut b, what).await?;
        Ok(i32::from_be_bytes(b))
    }

    /// A length field: not negative, at most `max`.
    async fn length(&mut self, what: &str, max: usize) -> Result<usize, DnsError> {
        let n = self.be32(what).await?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| self.malformed(format!("{what} {n} (at most {max})")))
    }

    async fn read(&mut self) -> Result<Vec<SocketAddr>, DnsError> {
        let mut code = [0u8; 4];
        self.exact(&mut code, "result code").await?;
        let digits = &code[..3];
        if !digits.iter().all(u8::is_ascii_digit) || code[3] != 0 {
            return Err(self.malformed(format!("result code {code:?}")));
        }
        let code = digits
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        if code != DNSPROXY_QUERY_RESULT {
            return Err(self.refusal(code).await);
        }
        let mut addrs = Vec::new();
        loop {
            if self.be32("record marker").await? == 0 {
                return Ok(addrs);
            }
            if addrs.len() == MAX_ADDRESSES {
                return Err(self.malformed(format!("more than {MAX_ADDRESSES} addresses")));
            }
            let _flags = self.be32("ai_flags").await?;
            let family = self.be32("ai_family").await?;
            let _socktype = self.be32("ai_socktype").await?;
            let _protocol = self.be32("ai_protocol").await?;
            let len = self.length("address length", MAX_SOCKADDR_BYTES).await?;
            let mut sockaddr = vec![0u8; len];
            self.exact(&mut sockaddr, "address").await?;
            let name_len = self.length("name length", MAX_CANONNAME_BYTES).await?;
            let mut name = vec![0u8; name_len];
            self.exact(&mut name, "canonical name").await?;
            if name.last().is_some_and(|&b| b != 0) {
                return Err(self.malformed("canonical name not NUL-terminated"));
            }
            match sockaddr_ip(family, &sockaddr) {
                Some(addr) => addrs.push(addr),
                None if family == AF_INET || family == AF_INET6 => {
                    return Err(
                        self.malformed(format!("address of {len} bytes for family {family}"))
                    )
                }
                // Another family: not something we can connect to.
                None => {}
            }
        }
    }

    /// An answer other than success: the code, and the EAI error when the daemon sent
    /// one (`sendBinaryMsg`: big-endian length, then a host-order int).
    async fn refusal(&mut self, code: u32) -> DnsError {
        let detail = match self.length("error length", 64).await {
            Ok(4) => {
                let mut rv = [0u8; 4];
                match self.exact(&mut rv, "error").await {
                    Ok(()) => format!(", getaddrinfo error {}", i32::from_ne_bytes(rv)),
                    Err(_) => String::new(),
                }
            }
            _ => String::new(),
        };
        DnsError::Refused {
            host: self.host.to_string(),
            code,
            detail,
        }
    }
}

/// The address in a native `sockaddr_in` / `sockaddr_in6`, port 0.
fn sockaddr_ip(family: i32, b: &[u8]) -> Option<SocketAddr> {
    match family {
        AF_INET if b.len() >= 8 => {
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            Some(SocketAddr::new(IpAddr::V4(ip), 0))
        }
        AF_INET6 if b.len() >= 24 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&b[8..24]);
            let scope = b
                .get(24..28)
                .and_then(|s| s.try_into().ok())
                .map_or(0, u32::from_ne_bytes);
            let ip = Ipv6Addr::from(octets);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, 0, 0, scope)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tokio::net::UnixListener;

    /// A stand-in for Android's resolver daemon: takes one request, answers `reply`,
    /// hands back what it was asked.
    struct StandIn {
        dir: PathBuf,
        socket: PathBuf,
        asked: Option<tokio::task::JoinHandle<Vec<u8>>>,
    }

    impl Drop for StandIn {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn stand_in(reply: Vec<u8>) -> StandIn {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nl2sh-dnsproxyd-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("dnsproxyd");
        let listener = UnixListener::bind(&socket).unwrap();
        let asked = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while conn.read_exact(&mut byte).await.is_ok() {
                request.push(byte[0]);
                if byte[0] == 0 {
                    break;
                }
            }
            let _ = conn.write_all(&reply).await;
            request
        });
        StandIn {
            dir,
            socket,
            asked: Some(asked),
        }
    }

    fn be(n: i32) -> [u8; 4] {
        n.to_be_bytes()
    }

    fn record(family: i32, sockaddr: &[u8], name: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(be(1));
        for v in [0, family, 1, 6] {
            r.extend(be(v));
        }
        r.extend(be(sockaddr.len() as i32));
        r.extend(sockaddr);
        r.extend(be(name.len() as i32));
        r.extend(name);
        r
    }

    fn sockaddr_in(ip: [u8; 4]) -> Vec<u8> {
        let mut s = vec![0u8; 16];
        s[..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
        s[4..8].copy_from_slice(&ip);
        s
    }

    fn sockaddr_in6(ip: Ipv6Addr, scope: u32) -> Vec<u8> {
        let mut s = vec![0u8; 28];
        s[..2].copy_from_slice(&(AF_INET6 as u16).to_ne_bytes());
        s[8..24].copy_from_slice(&ip.octets());
        s[24..28].copy_from_slice(&scope.to_ne_bytes());
        s
    }

    #[tokio::test]
    async fn a_successful_answer_gives_every_address_in_order() {
        let v6: Ipv6Addr = "2001:db8::7".parse().unwrap();
        let mut reply = b"222\0".to_vec();
        reply.extend(record(AF_INET6, &sockaddr_in6(v6, 0), b"model.example\0"));
        reply.extend(record(AF_INET, &sockaddr_in([192, 0, 2, 9]), b""));
        reply.extend(be(0));
        let mut s = stand_in(reply);
        let addrs = dnsproxyd_getaddrinfo(&s.socket, "model.example")
            .await
            .unwrap();
        assert_eq!(
            addrs,
            vec![
                "[2001:db8::7]:0".parse::<SocketAddr>().unwrap(),
                "192.0.2.9:0".parse().unwrap(),
            ]
        );
        // The request line bionic sends, NUL-terminated.
        let asked = s.asked.take().unwrap().await.unwrap();
        assert_eq!(asked, b"getaddrinfo model.example ^ 0 0 1 0 0\0");
    }

    #[tokio::test]
    async fn an_error_answer_names_the_code_and_the_eai_error() {
        let mut reply = b"401\0".to_vec();
        reply.extend(be(4));
        reply.extend(7i32.to_ne_bytes()); // EAI_NODATA on Android
        let s = stand_in(reply);
        let e = dnsproxyd_getaddrinfo(&s.socket, "nowhere.example")
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, DnsError::Refused { code: 401, .. }), "{text}");
        assert!(
            text.contains("nowhere.example") && text.contains("error 7"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn truncated_or_hostile_answers_are_errors() {
        let ok_record = record(AF_INET, &sockaddr_in([192, 0, 2, 1]), b"");
        let cut = |n: usize| {
            let mut r = b"222\0".to_vec();
            r.extend(&ok_record[..n]);
            r
        };
        let mut huge_addr = b"222\0".to_vec();
        huge_addr.extend(be(1));
        for v in [0, AF_INET, 1, 6, 1 << 30] {
            huge_addr.extend(be(v));
        }
        let mut negative_name = b"222\0".to_vec();
        negative_name.extend(be(1));
        for v in [0, AF_INET, 1, 6, 16] {
            negative_name.extend(be(v));
        }
        negative_name.extend(sockaddr_in([1, 2, 3, 4]));
        negative_name.extend(be(-5));
        let mut unterminated = b"222\0".to_vec();
        unterminated.extend(record(AF_INET, &sockaddr_in([1, 2, 3, 4]), b"abc"));
        unterminated.extend(be(0));
        let mut short_v6 = b"222\0".to_vec();
        short_v6.extend(record(AF_INET6, &[0u8; 12], b""));
        short_v6.extend(be(0));
        // Far more records than anyone needs, each well formed.
        let mut flood = b"222\0".to_vec();
        for _ in 0..(MAX_ADDRESSES + 1) {
            flood.extend(&ok_record);
        }
        flood.extend(be(0));
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("short code", b"22".to_vec()),
            ("not digits", b"2x2\0".to_vec()),
            ("no terminator", b"222\0".to_vec()),
            ("cut in a record", cut(10)),
            ("cut in the address", cut(26)),
            ("huge address", huge_addr),
            ("negative name", negative_name),
            ("unterminated name", unterminated),
            ("short v6", short_v6),
            ("flood", flood),
        ];
        for (what, reply) in cases {
            let s = stand_in(reply);
            let e = dnsproxyd_getaddrinfo(&s.socket, "model.example").await;
            assert!(
                matches!(e, Err(DnsError::Malformed { .. })),
                "{what}: {e:?}"
            );
        }
    }

    #[tokio::test]
    async fn bad_names_are_refused_before_anything_is_sent() {
        // No daemon at this path: a name that got through would say it cannot connect.
        let nowhere = Path::new("/nonexistent/nl2sh/dnsproxyd");
        for host in [
            "",
            "with space",
            "tab\there",
            "new\nline",
            "nul\0x",
            "caret^",
            "quote'",
            "dq\"",
            "ünicode",
            &"a".repeat(254),
        ] {
            let e = dnsproxyd_getaddrinfo(nowhere, host).await.unwrap_err();
            assert!(matches!(e, DnsError::InvalidName(_)), "{host:?}: {e}");
        }
        let e = dnsproxyd_getaddrinfo(nowhere, "fine.example")
            .await
            .unwrap_err();
        assert!(matches!(e, DnsError::Connect { .. }), "{e}");
    }

    #[tokio::test]
    async fn lookup_with_the_system_resolver_finds_loopback_and_times_out_on_a_silent_daemon() {
        let addrs = lookup(&NameService::System, "localhost", Duration::from_secs(10))
            .await
            .unwrap();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        // Without the resolver's files, localhost names are still loopback.
        for host in ["localhost", "LOCALHOST.", "model.localhost"] {
            let addrs = lookup(
                &NameService::SystemWithoutFiles,
                host,
                Duration::from_secs(1),
            )
            .await
            .unwrap();
            assert!(
                !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()),
                "{host}: {addrs:?}"
            );
        }
        // A daemon that accepts and never answers: the bound ends the wait.
        let dir =
            std::env::temp_dir().join(format!("nl2sh-dnsproxyd-silent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("dnsproxyd");
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).unwrap();
        let held = tokio::spawn(async move {
            let conn = listener.accept().await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(conn);
        });
        let service = NameService::DnsProxyd(socket.clone());
        let e = lookup(&service, "model.example", Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(e, DnsError::Timeout { .. }), "{e}");
        held.abort();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
