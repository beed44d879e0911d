//! Who the unprivileged processes run as: netd's and the Web console's uids per platform,
//! and the range of uids sandboxed calls take theirs from.

use super::Config;

impl Config {
    /// (uid, gid, supplementary groups) for netd: the platform defaults with the
    /// `netd_uid` / `netd_gid` overrides applied.
    pub fn netd_ids(&self) -> (u32, u32, Vec<u32>) {
        let (uid, gid, groups) = default_netd_ids();
        (
            self.netd_uid.unwrap_or(uid),
            self.netd_gid.unwrap_or(gid),
            groups,
        )
    }

    /// (uid, gid) of the Web console, defaults applied.
    pub fn web_ids(&self) -> (u32, u32) {
        let (uid, gid) = default_web_ids();
        (self.web_uid.unwrap_or(uid), self.web_gid.unwrap_or(gid))
    }

    /// (first uid, count) of the sandbox's uid range, defaults applied.
    pub fn sandbox_uids(&self) -> (u32, u32) {
        (
            self.sandbox_uid_base.unwrap_or(DEFAULT_SANDBOX_UID_BASE),
            self.sandbox_uid_count.unwrap_or(DEFAULT_SANDBOX_UID_COUNT),
        )
    }
}

/// (uid, gid, supplementary groups) for netd: Android AID_NOBODY with AID_INET (3003) so
/// paranoid networking still lets it use IP sockets; elsewhere `nobody`.
pub fn default_netd_ids() -> (u32, u32, Vec<u32>) {
    netd_ids_for(crate::platform::is_android())
}

fn netd_ids_for(android: bool) -> (u32, u32, Vec<u32>) {
    if android {
        (9999, 9999, vec![3003])
    } else {
        (65534, 65534, Vec::new())
    }
}

/// (uid, gid) of the Web console by default: the uid just below the sandbox's default
/// range, in the same unassigned region (see [`DEFAULT_SANDBOX_UID_BASE`]), so it is
/// neither netd's, nor a sandboxed call's, nor any user's or app's.
pub fn default_web_ids() -> (u32, u32) {
    (DEFAULT_SANDBOX_UID_BASE - 1, DEFAULT_SANDBOX_UID_BASE - 1)
}

/// First uid of the sandbox's range by default, on Linux and Android alike: 0x9000_0000.
/// Nothing allocates there: systemd leaves uids from 2^31 up unassigned (its container
/// and foreign ranges end below), and an Android uid is `user id × 100000 + app id` with
/// user ids of at most 21473, so every Android uid is below 2,147,400,000.
pub const DEFAULT_SANDBOX_UID_BASE: u32 = 0x9000_0000;
/// Uids in the range by default: sandboxed calls that may run at once.
pub const DEFAULT_SANDBOX_UID_COUNT: u32 = 64;
pub const MAX_SANDBOX_UID_COUNT: u32 = 65536;
/// The lowest allowed base: above Linux's regular users (60000) and Android's per-app
/// range of user 0 (10000–19999) and isolated processes (90000–99999).
pub const MIN_SANDBOX_UID_BASE: u32 = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netd_defaults_per_platform() {
        assert_eq!(netd_ids_for(true), (9999, 9999, vec![3003]));
        assert_eq!(netd_ids_for(false), (65534, 65534, vec![]));
        let c = Config {
            netd_uid: Some(2000),
            ..Config::default()
        };
        let (uid, gid, groups) = c.netd_ids();
        let (_, dgid, dgroups) = default_netd_ids();
        assert_eq!((uid, gid, groups), (2000, dgid, dgroups));
    }
}
