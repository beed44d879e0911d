//! The console's pages: three files compiled into the binary, so nothing is read from
//! disk at run time and nothing is ever loaded from elsewhere. Every response carries
//! [`SECURITY_HEADERS`]; the Content-Security-Policy allows only these files (no inline
//! script or style, no other origin), so even markup that slipped into the page could
//! not run.

use axum::http::{header, HeaderName, HeaderValue};

pub const INDEX_HTML: &str = include_str!("../assets/index.html");
pub const APP_JS: &str = include_str!("../assets/app.js");
pub const APP_CSS: &str = include_str!("../assets/app.css");

/// The Content-Security-Policy of every response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// Headers on every response, pages and API alike.
pub const SECURITY_HEADERS: [(HeaderName, &str); 7] = [
    (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::CACHE_CONTROL, "no-store"),
    (
        HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    ),
    (
        HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    ),
];

/// A served file: its path, content type and text.
pub struct Asset {
    pub path: &'static str,
    pub content_type: HeaderValue,
    pub text: &'static str,
}

/// Every file the console serves.
pub fn all() -> [Asset; 3] {
    [
        Asset {
            path: "/",
            content_type: HeaderValue::from_static("text/html; charset=utf-8"),
            text: INDEX_HTML,
        },
        Asset {
            path: "/app.js",
            content_type: HeaderValue::from_static("text/javascript; charset=utf-8"),
            text: APP_JS,
        },
        Asset {
            path: "/app.css",
            content_type: HeaderValue::from_static("text/css; charset=utf-8"),
            text: APP_CSS,
        },
    ]
}
