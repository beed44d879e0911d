//! Refusals of requests that carried no valid credential, logged without letting a flood
//! write a line per request (see docs/SECURITY.md, "Availability").
//!
//! The first refusal after a quiet interval is logged as it happens (its reason and
//! path). Later ones are only counted, by reason, with the distinct peer addresses seen;
//! one summary line gives the counts at most once per [`REFUSAL_LOG_INTERVAL`]: when a
//! refusal arrives after the interval has passed, from the timer of
//! [`RefusalLog::flush_periodically`], or at shutdown ([`RefusalLog::flush`]). So a
//! flood of any size writes about one line per interval, and every refusal is counted
//! in some line.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use nl2sh_proto::display::Shown;
use nl2sh_proto::limits::REFUSAL_LOG_INTERVAL;

/// Distinct peer addresses remembered for one summary; past this the summary says "at
/// least" (a flood from many addresses must not grow the set without bound).
const MAX_PEERS_COUNTED: usize = 4096;

/// One server's refusal log (netd's front door, the Web console).
pub struct RefusalLog {
    /// Names the server in every line (`"netd"`, `"web"`).
    server: &'static str,
    interval: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// When the last line was written.
    last_line: Option<Instant>,
    /// Refusals counted since that line, by reason.
    counts: BTreeMap<&'static str, u64>,
    peers: HashSet<IpAddr>,
    peers_overflowed: bool,
}

impl Inner {
    fn pending(&self) -> u64 {
        self.counts.values().sum()
    }
}

impl RefusalLog {
    /// A log writing at most one line per [`REFUSAL_LOG_INTERVAL`].
    pub fn new(server: &'static str) -> Arc<Self> {
        Self::with_interval(server, REFUSAL_LOG_INTERVAL)
    }

    /// A log writing at most one line per `interval`.
    pub fn with_interval(server: &'static str, interval: Duration) -> Arc<Self> {
        Arc::new(Self {
            server,
            interval,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// A request from `peer` for `path` was refused for `reason` (a fixed text: nothing
    /// from the request).
    pub fn refused(&self, reason: &'static str, peer: Option<IpAddr>, path: &str) {
        let now = Instant::now();
        let mut inner = self.lock();
        let quiet = inner
            .last_line
            .is_none_or(|t| now.duration_since(t) >= self.interval);
        if quiet && inner.pending() == 0 {
            inner.last_line = Some(now);
            tracing::info!(
                server = self.server,
                path = %Shown::new(path).max_bytes(256),
                "refused: {reason} (further refusals are counted and summarised at most \
                 once per {} s)",
                self.interval.as_secs()
            );
            return;
        }
        *inner.counts.entry(reason).or_default() += 1;
        if let Some(peer) = peer {
            if inner.peers.len() < MAX_PEERS_COUNTED {
                inner.peers.insert(peer);
            } else if !inner.peers.contains(&peer) {
                inner.peers_overflowed = true;
            }
        }
        if quiet {
            self.summarise(&mut inner, now);
        }
    }

    /// Write the summary of what was counted since the last line, if anything was.
    pub fn flush(&self) {
        let mut inner = self.lock();
        if inner.pending() > 0 {
            self.summarise(&mut inner, Instant::now());
        }
    }

    /// Every interval, write the summary of refusals counted and not yet written (so the
    /// tail of a flood is reported without waiting for the next refusal). Ends when the
    /// log is dropped.
    pub fn flush_periodically(log: &Arc<Self>) -> impl std::future::Future<Output = ()> {
        let weak: Weak<Self> = Arc::downgrade(log);
        let interval = log.interval;
        async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(log) = weak.upgrade() else { return };
                let mut inner = log.lock();
                let due = inner.last_line.is_none_or(|t| t.elapsed() >= log.interval);
                if due && inner.pending() > 0 {
                    log.summarise(&mut inner, Instant::now());
                }
            }
        }
    }

    fn summarise(&self, inner: &mut Inner, now: Instant) {
        let refused = inner.pending();
        let by_reason = inner
            .counts
            .iter()
            .map(|(reason, n)| format!("{reason}: {n}"))
            .collect::<Vec<_>>()
            .join("; ");
        let since_secs = inner
            .last_line
            .map_or(0, |t| now.duration_since(t).as_secs());
        let peers = inner.peers.len();
        let at_least = if inner.peers_overflowed {
            "at least "
        } else {
            ""
        };
        tracing::info!(
            server = self.server,
            refused,
            since_secs,
            by_reason = %by_reason,
            "refused {refused} unauthenticated request(s) since the last line, from \
             {at_least}{peers} address(es)"
        );
        inner.last_line = Some(now);
        inner.counts.clear();
        inner.peers.clear();
        inner.peers_overflowed = false;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Counts only: a panic elsewhere leaves them usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(log: &RefusalLog) -> u64 {
        log.lock().pending()
    }

    #[test]
    fn the_first_refusal_is_a_line_and_the_rest_are_counted_until_the_interval() {
        let log = RefusalLog::with_interval("test", Duration::from_secs(3600));
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        log.refused("no token", Some(peer), "/mcp");
        assert_eq!(counted(&log), 0, "the first one was written, not counted");
        for _ in 0..1000 {
            log.refused("no token", Some(peer), "/mcp");
        }
        log.refused("bad Host", None, "/a2a");
        assert_eq!(counted(&log), 1001);
        assert_eq!(log.lock().peers.len(), 1);
        log.flush();
        assert_eq!(counted(&log), 0);
        // Within the interval of that summary: counted again, not written.
        log.refused("no token", Some(peer), "/mcp");
        assert_eq!(counted(&log), 1);
    }

    #[test]
    fn after_the_interval_the_next_refusal_writes_the_summary() {
        let log = RefusalLog::with_interval("test", Duration::ZERO);
        log.refused("no token", None, "/mcp");
        log.refused("no token", None, "/mcp");
        // With a zero interval every refusal is past it: nothing stays counted.
        assert_eq!(counted(&log), 0);
    }

    #[test]
    fn distinct_peers_are_bounded() {
        let log = RefusalLog::with_interval("test", Duration::from_secs(3600));
        log.refused("no token", None, "/");
        for i in 0..(MAX_PEERS_COUNTED as u32 + 10) {
            log.refused("no token", Some(IpAddr::from(i.to_be_bytes())), "/");
        }
        let inner = log.lock();
        assert_eq!(inner.peers.len(), MAX_PEERS_COUNTED);
        assert!(inner.peers_overflowed);
    }
}
