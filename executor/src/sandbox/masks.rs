//! Secret locations hidden from the read-only sandbox ([`SECRET_LOCATIONS`]). A sandboxed
//! command sees an empty, unreadable directory (or a file it cannot open) in their place.
//! nl2sh's own configuration file and state directory are added per tree.
//!
//! A `*` matches any name within one path component; the helper expands the patterns
//! inside its own mount namespace just before it mounts the masks.

use crate::secrets::SECRET_LOCATIONS;

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
}
