//! Where secrets live on Linux and Android, as data: the one table of them. The read-only
//! sandbox masks every row ([`crate::sandbox::masks`]); the risk assessment rates reading
//! any of them `medium` ([`crate::risk`]), so a command that needs one asks a person and
//! then runs outside the sandbox.
//!
//! Each pattern is an absolute path whose components may hold `*` (any run of characters
//! within one component); a row covers everything below it.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_absolute_and_explained() {
        for (p, why) in SECRET_LOCATIONS {
            assert!(p.starts_with('/') && !p.ends_with('/'), "{p}");
            assert!(
                !p.contains("**") && !p.contains('?'),
                "{p}: only `*` is understood by both users"
            );
            assert!(!why.is_empty(), "{p}");
        }
    }
}
