//! Hosts and origins as the Host and Origin checks compare them: netd's protocol routes
//! and the Web console's pages apply the same rule, this one.

use axum::http::{header, uri, HeaderMap, Uri};

/// A host (lowercase; IPv6 in brackets) and a port, the default port filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    pub fn parse(text: &str, default_port: u16) -> Option<Self> {
        let authority = uri::Authority::try_from(text).ok()?;
        Self::from_authority(&authority, default_port)
    }

    pub fn from_authority(authority: &uri::Authority, default_port: u16) -> Option<Self> {
        if authority.as_str().contains('@') || authority.host().is_empty() {
            return None;
        }
        Some(Self {
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16().unwrap_or(default_port),
        })
    }
}

/// A web origin, `scheme://host[:port]`, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub https: bool,
    pub authority: HostPort,
}

impl Origin {
    pub fn parse(text: &str) -> Option<Self> {
        let parsed = Uri::try_from(text).ok()?;
        let https = match parsed.scheme_str()?.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        // An origin is scheme and authority only (a lone trailing "/" is tolerated).
        if !parsed
            .path_and_query()
            .is_none_or(|pq| matches!(pq.as_str(), "" | "/"))
        {
            return None;
        }
        let default_port = if https { 443 } else { 80 };
        let authority = HostPort::from_authority(parsed.authority()?, default_port)?;
        Some(Self { https, authority })
    }

    pub fn default_port(&self) -> u16 {
        if self.https {
            443
        } else {
            80
        }
    }
}

/// What a request's Host and Origin may name: the advertised origin, and (Host only) the
/// listener's own addresses.
#[derive(Debug, Clone)]
pub struct Authorities {
    pub advertised: Origin,
    pub local: Vec<HostPort>,
}

impl Authorities {
    /// One Host header (or an absolute-form target) naming an allowed authority, and
    /// nothing naming another.
    pub fn host_allowed(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        let mut hosts = headers.get_all(header::HOST).iter();
        let from_header = match (hosts.next(), hosts.next()) {
            (Some(h), None) => Some(h),
            (None, None) => None,
            _ => return false,
        };
        let mut named = false;
        if let Some(h) = from_header {
            let Ok(text) = h.to_str() else {
                return false;
            };
            if !self.authority_allowed(text) {
                return false;
            }
            named = true;
        }
        // An absolute-form target (`POST http://host/mcp`) names the host too.
        if let Some(a) = uri.authority() {
            if !self.authority_allowed(a.as_str()) {
                return false;
            }
            named = true;
        }
        named
    }

    pub fn authority_allowed(&self, text: &str) -> bool {
        let advertised = HostPort::parse(text, self.advertised.default_port())
            .is_some_and(|h| h == self.advertised.authority);
        let local = HostPort::parse(text, 80).is_some_and(|h| self.local.contains(&h));
        advertised || local
    }

    /// No Origin, or exactly one that is the advertised origin.
    pub fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let mut origins = headers.get_all(header::ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (None, _) => true,
            (Some(o), None) => o
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|o| o == self.advertised),
            (Some(_), Some(_)) => false,
        }
    }

    /// [`Self::origin_allowed`], or one plain-HTTP Origin naming one of the listener's own
    /// addresses: a browser on the device opening a console that listens on every
    /// interface (its page is then at `http://127.0.0.1:port`).
    pub fn origin_allowed_or_local(&self, headers: &HeaderMap) -> bool {
        if self.origin_allowed(headers) {
            return true;
        }
        let mut origins = headers.get_all(header::ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (Some(o), None) => o
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|o| !o.https && self.local.contains(&o.authority)),
            _ => false,
        }
    }
}
