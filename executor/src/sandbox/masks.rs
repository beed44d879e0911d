//! Secret locations hidden from the read-only sandbox, as data. A sandboxed command sees
//! an empty, unreadable directory (or a file it cannot open) in their place. nl2sh's own
//! configuration file and state directory are added per tree.
//!
//! A `*` matches any name within one path component; the helper expands the patterns
//! inside its own mount namespace just before it mounts the masks.

/// (pattern, what it holds)
pub const SECRET_LOCATIONS: &[(&str, &str)] = &[
    // Accounts and host keys.
    ("/etc/shadow", "password hashes"),
    ("/etc/shadow-", "password hashes (backup)"),
    ("/etc/gshadow", "group password hashes"),
    ("/etc/gshadow-", "group password hashes (backup)"),
    ("/etc/security/opasswd", "old password hashes"),
    ("/etc/ssh/ssh_host_*_key", "SSH host private keys"),
    ("/etc/ssl/private", "TLS private keys"),
    ("/etc/krb5.keytab", "Kerberos keys"),
    ("/etc/wireguard", "WireGuard private keys"),
    (
        "/etc/NetworkManager/system-connections",
        "Wi-Fi and VPN secrets",
    ),
    (
        "/etc/sudoers.d",
        "privilege rules (and sometimes credentials)",
    ),
    ("/var/lib/iwd", "Wi-Fi secrets"),
    // Per-user credentials.
    ("/root/.ssh", "SSH keys"),
    ("/home/*/.ssh", "SSH keys"),
    ("/root/.gnupg", "GnuPG keys"),
    ("/home/*/.gnupg", "GnuPG keys"),
    ("/root/.netrc", "stored passwords"),
    ("/home/*/.netrc", "stored passwords"),
    ("/root/.aws", "cloud credentials"),
    ("/home/*/.aws", "cloud credentials"),
    ("/root/.config/gcloud", "cloud credentials"),
    ("/home/*/.config/gcloud", "cloud credentials"),
    ("/root/.kube", "cluster credentials"),
    ("/home/*/.kube", "cluster credentials"),
    ("/root/.docker", "registry credentials"),
    ("/home/*/.docker", "registry credentials"),
    ("/root/.git-credentials", "stored Git passwords"),
    ("/home/*/.git-credentials", "stored Git passwords"),
    ("/root/.password-store", "password store"),
    ("/home/*/.password-store", "password store"),
    ("/root/.local/share/keyrings", "desktop keyrings"),
    ("/home/*/.local/share/keyrings", "desktop keyrings"),
    (
        "/root/.config/nl2sh",
        "nl2sh configurations and their tokens",
    ),
    (
        "/home/*/.config/nl2sh",
        "nl2sh configurations and their tokens",
    ),
    ("/etc/nl2sh", "nl2sh configurations and their tokens"),
    // Android: root managers (and nl2sh's own configuration there), keystores, locks.
    (
        "/data/adb",
        "root manager state, modules and nl2sh's configuration",
    ),
    ("/data/misc/keystore", "Android keystore"),
    ("/data/misc/keychain", "installed certificates and keys"),
    ("/data/misc/wifi", "Wi-Fi passwords"),
    ("/data/misc/apexdata/com.android.wifi", "Wi-Fi passwords"),
    ("/data/misc/vpn", "VPN profiles"),
    ("/data/misc/bluedroid", "Bluetooth pairing keys"),
    ("/data/misc/bluetooth", "Bluetooth pairing keys"),
    ("/data/misc/gatekeeper", "screen lock verification"),
    ("/data/system/locksettings.db", "screen lock settings"),
    ("/data/system/gatekeeper.password.key", "screen lock"),
    ("/data/system/gatekeeper.pattern.key", "screen lock"),
    ("/data/system/users/*/accounts.db", "account tokens"),
    // Apps' private data (tokens, databases, settings), per user; masked whole, since
    // one mount per app would cost hundreds of mounts per call.
    ("/data/data", "apps' private data"),
    ("/data/user", "apps' private data, per user"),
    ("/data/user_de", "apps' device-encrypted data"),
    ("/data/system_ce", "per-user system data (account tokens)"),
    ("/data/system_de", "per-user system data (account tokens)"),
    ("/data/misc_ce", "per-user credential-encrypted data"),
    ("/data/misc_de", "per-user device-encrypted data"),
];

/// The patterns of the table followed by `extra` (nl2sh's configuration and state).
pub fn patterns(extra: &[String]) -> Vec<String> {
    SECRET_LOCATIONS
        .iter()
        .map(|(p, _)| (*p).to_string())
        .chain(extra.iter().cloned())
        .collect()
}

/// The existing paths `pattern` names (absolute; `*` within one component). Expansion
/// is bounded: a pattern expanding to more than `limit` paths stops there.
pub fn expand(pattern: &str, limit: usize) -> Vec<std::path::PathBuf> {
    use std::path::PathBuf;
    let mut found = vec![PathBuf::from("/")];
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for base in &found {
            if comp.contains('*') {
                let Ok(entries) = std::fs::read_dir(base) else {
                    continue;
                };
                for e in entries.flatten() {
                    let name = e.file_name();
                    if name.to_str().is_some_and(|n| matches(comp, n)) {
                        next.push(base.join(name));
                        if next.len() >= limit {
                            break;
                        }
                    }
                }
            } else {
                next.push(base.join(comp));
            }
        }
        found = next;
        found.truncate(limit);
    }
    found.retain(|p| std::fs::symlink_metadata(p).is_ok());
    found
}

/// `*` matches any run of characters; everything else literally.
fn matches(pattern: &str, name: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut remaining) = name.strip_prefix(head) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return remaining.len() >= part.len() && remaining.ends_with(part);
        }
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_matches_within_a_component() {
        assert!(matches("ssh_host_*_key", "ssh_host_rsa_key"));
        assert!(!matches("ssh_host_*_key", "ssh_host_rsa_key.pub"));
        assert!(matches("*", "anything"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
    }

    #[test]
    fn expansion_finds_existing_paths_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        std::fs::create_dir_all(base.join("home/alice/.ssh")).unwrap();
        std::fs::create_dir_all(base.join("home/bob")).unwrap();
        let pattern = format!("{}/home/*/.ssh", base.display());
        let got = expand(&pattern, 100);
        assert_eq!(got, vec![base.join("home/alice/.ssh")]);
        assert!(expand(&format!("{}/absent/*", base.display()), 100).is_empty());
    }

    #[test]
    fn every_row_is_absolute_and_explained() {
        for (p, why) in SECRET_LOCATIONS {
            assert!(p.starts_with('/') && !p.ends_with('/'), "{p}");
            assert!(!why.is_empty(), "{p}");
        }
    }
}
