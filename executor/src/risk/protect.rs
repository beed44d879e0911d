//! nl2sh's own files (configuration, state directory, service directory, executable,
//! phone module): any action that touches them is at least `dangerous`, whatever its
//! other assessment says (docs/SECURITY.md, "nl2sh's own files").
//!
//! A path is judged by what it is, not how it is spelled. Each path is compared twice:
//! as written (component by component; a component of the command's path may be a pattern
//! such as `conf*`, and a path under an unknown home directory, `~/…`, is compared
//! against every place a home could be), and as the kernel resolves it now: symlinks,
//! `..` and the `/proc` magic links (`/proc/<pid>/cwd`, `root`, `fd`, `exe`,
//! `map_files`) followed, and the file it reaches compared by device and inode with
//! nl2sh's files as they are at this moment, so hard links and bind mounts count too.
//! A path through a magic link that cannot be resolved (a pattern, a process or
//! descriptor that does not exist yet, a path too long) is treated as one of nl2sh's own.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use nl2sh_proto::channels::RiskLevel::Dangerous;

use super::lexer::shorten;
use super::paths::{normalize, patterns_meet};
use super::Assessment;

/// What a protected path is, in the owner's words.
pub const OWN_FILES: &str = "nl2sh's own files";
pub const OWN_CONFIGURATION: &str = "nl2sh's own configuration";
pub const OWN_STATE: &str = "nl2sh's own state directory";
pub const OWN_SERVICE: &str = "nl2sh's own service directory";
pub const OWN_EXECUTABLE: &str = "nl2sh's own executable";
pub const OWN_MODULE: &str = "nl2sh's own phone module";

/// Paths longer than this are not resolved on disk (the kernel refuses them too).
const MAX_RESOLVE_BYTES: usize = 4096;
/// Path components resolved on disk at most.
const MAX_RESOLVE_COMPONENTS: usize = 256;
/// Directory entries a pattern is matched against at most, over all its components.
const MAX_PATTERN_ENTRIES: usize = 4096;
/// Paths a pattern may expand to before it is left to the textual comparison.
const MAX_PATTERN_MATCHES: usize = 256;
/// Directory entries read and matched paths resolved for all the patterns of one
/// assessment: a line of thousands of `/*/*/*` words must not keep the executor reading
/// directories for seconds.
const MAX_ASSESSMENT_PATTERN_WORK: usize = 16 * 1024;

/// One protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Own {
    /// Normalised absolute path.
    path: String,
    /// What it is, in plain words (one of the `OWN_*` texts).
    label: &'static str,
}

/// nl2sh's own files: any action that touches them is at least `dangerous`, whatever
/// else its assessment says.
#[derive(Debug, Default)]
pub struct Protected {
    own: Vec<Own>,
    /// Pattern work spent by the assessment holding this copy (each copy starts anew:
    /// the shell walker and the file tools assess with a copy of their own).
    pattern_work: AtomicUsize,
}

impl Clone for Protected {
    fn clone(&self) -> Self {
        Protected {
            own: self.own.clone(),
            pattern_work: AtomicUsize::new(0),
        }
    }
}

impl PartialEq for Protected {
    fn eq(&self, other: &Self) -> bool {
        self.own == other.own
    }
}

impl Eq for Protected {}

/// A file as the kernel knows it: device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// What `path` is, following every link (magic links included).
    fn of(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// What the filesystem says of a path.
enum OnDisk {
    /// It reaches a protected path (label, and the path as resolved).
    Own(&'static str, String),
    /// Where it leads cannot be told, and it goes through a magic link.
    Unresolved(&'static str),
    /// It reaches none of nl2sh's files.
    Elsewhere,
}

impl Protected {
    /// Each path, labelled as nl2sh's own files. See [`Protected::labelled`].
    pub fn new<I: IntoIterator<Item = std::path::PathBuf>>(paths: I) -> Self {
        Self::labelled(paths.into_iter().map(|p| (p, OWN_FILES)))
    }

    /// Normalises each path lexically; relative and empty paths (and `/` itself, which
    /// would make everything dangerous) are skipped. Where a path resolves elsewhere
    /// (a symlink), the place it resolves to is protected too, under the same label.
    pub fn labelled<I: IntoIterator<Item = (std::path::PathBuf, &'static str)>>(paths: I) -> Self {
        let mut own: Vec<Own> = Vec::new();
        for (p, label) in paths {
            let text = p.to_string_lossy().into_owned();
            if !text.starts_with('/') {
                continue;
            }
            let mut forms = vec![normalize(&text)];
            if let Ok(real) = std::fs::canonicalize(&p) {
                forms.push(normalize(&real.to_string_lossy()));
            }
            for path in forms {
                if path != "/" && !own.iter().any(|o| o.path == path) {
                    own.push(Own { path, label });
                }
            }
        }
        own.sort_by(|a, b| a.path.cmp(&b.path));
        Protected {
            own,
            pattern_work: AtomicUsize::new(0),
        }
    }

    pub fn paths(&self) -> Vec<&str> {
        self.own.iter().map(|o| o.path.as_str()).collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.own.is_empty()
    }

    /// The protected path a (normalised, absolute; `/~…` for a home directory) path
    /// reaches as written: equal to it, beneath it, or (with `ancestors`) above it.
    fn reached(&self, path: &str, ancestors: bool) -> Option<&Own> {
        let comps = components(path);
        self.own.iter().find(|own| {
            let prot = components(&own.path);
            let relation = match comps.split_first() {
                // `~` or `~user`: the home directory may be `/` or any directory that is
                // a home directory somewhere.
                Some((home, rest)) if home.starts_with('~') => (0..prot.len())
                    .filter(|k| *k == 0 || is_home(prot.get(..*k).unwrap_or_default()))
                    .filter_map(|k| relation(prot.get(k..).unwrap_or_default(), rest))
                    .max(),
                _ => relation(&prot, &comps),
            };
            match relation {
                Some(Relation::Ancestor) => ancestors,
                Some(_) => true,
                None => false,
            }
        })
    }

    /// Raise `a` when `path` (absolute; `/~…` for a home directory) reaches a protected
    /// path, as written or as the kernel resolves it now.
    pub(super) fn check(&self, path: &str, ancestors: bool, a: &mut Assessment) {
        if self.is_empty() {
            return;
        }
        if let Some(own) = self.reached(path, ancestors) {
            a.raise(
                Dangerous,
                format!("touches {} ({})", own.label, shorten(&own.path)),
            );
            return;
        }
        match self.on_disk(path, ancestors) {
            OnDisk::Own(label, resolved) => a.raise(
                Dangerous,
                format!(
                    "touches {label}: {} leads to {}",
                    shorten(path),
                    shorten(&resolved)
                ),
            ),
            OnDisk::Unresolved(why) => a.raise(
                Dangerous,
                format!(
                    "{}: {why}; it may be {OWN_FILES}, so it is treated as one",
                    shorten(path)
                ),
            ),
            OnDisk::Elsewhere => {}
        }
    }

    /// Where `path` leads on disk now.
    fn on_disk(&self, path: &str, ancestors: bool) -> OnDisk {
        self.on_disk_as(path, ancestors, true)
    }

    /// [`Protected::on_disk`]; with `patterns` false, `*`, `?` and `[` are taken as the
    /// literal characters of a name a pattern already matched (`/usr/bin/[` matches itself:
    /// expanding it again would never end).
    fn on_disk_as(&self, path: &str, ancestors: bool, patterns: bool) -> OnDisk {
        if path.starts_with("/~") {
            return OnDisk::Elsewhere;
        }
        let magic = through_magic(path);
        if path.len() > MAX_RESOLVE_BYTES || components(path).len() > MAX_RESOLVE_COMPONENTS {
            return match magic {
                Some(_) => OnDisk::Unresolved("too long to resolve through a /proc link"),
                None => OnDisk::Elsewhere,
            };
        }
        if patterns && is_pattern(path) {
            return self.pattern_on_disk(path, ancestors, magic.is_some());
        }
        if let Some(Magic::OwnProcess) = magic {
            // `/proc/self/…` and `/dev/fd/N` name the command's own process, which does not
            // exist yet: what its descriptors and directory are is not known here (its
            // standard streams, which the executor captures, are left out by
            // `through_magic`).
            return OnDisk::Unresolved("a descriptor or directory of the command itself");
        }
        let Some(resolved) = resolve_on_disk(path) else {
            return match magic {
                Some(_) => OnDisk::Unresolved("where this /proc link leads cannot be told"),
                None => OnDisk::Elsewhere,
            };
        };
        if resolved.reaches_magic_unresolved {
            return OnDisk::Unresolved("the process or descriptor it names does not exist now");
        }
        if let Some(own) = self.reached(&resolved.path, ancestors) {
            return OnDisk::Own(own.label, resolved.path);
        }
        // The same file under another name (a hard link, a bind mount, another mount
        // namespace): compare what the kernel says each is.
        let ids: Vec<(FileId, &'static str)> = self
            .own
            .iter()
            .filter_map(|o| FileId::of(Path::new(&o.path)).map(|id| (id, o.label)))
            .collect();
        let mut at = Path::new(&resolved.existing);
        loop {
            if let Some(id) = FileId::of(at) {
                if let Some((_, label)) = ids.iter().find(|(own, _)| *own == id) {
                    return OnDisk::Own(label, resolved.path);
                }
            }
            match at.parent() {
                Some(parent) if parent != at => at = parent,
                _ => break,
            }
        }
        OnDisk::Elsewhere
    }

    /// A pattern: every path it matches now (bounded) is judged; through a magic link,
    /// a pattern is never resolved.
    fn pattern_on_disk(&self, path: &str, ancestors: bool, magic: bool) -> OnDisk {
        if magic {
            return OnDisk::Unresolved("a pattern through a /proc link");
        }
        // Past the bounds, a write may be to anything (`rm -rf /*/*/*`); a read is left to
        // the sandbox, which hides nl2sh's files from every unasked command.
        let too_much = if ancestors {
            OnDisk::Unresolved("a pattern that matches more files than are looked at")
        } else {
            OnDisk::Elsewhere
        };
        let Some(matches) = expand(path, &self.pattern_work) else {
            return too_much;
        };
        if !self.spend(matches.len()) {
            return too_much;
        }
        for m in matches {
            if let own @ OnDisk::Own(..) = self.on_disk_as(&m, ancestors, false) {
                return own;
            }
        }
        OnDisk::Elsewhere
    }

    /// Count `n` more units of pattern work; false once the assessment's bound is passed.
    fn spend(&self, n: usize) -> bool {
        spend(&self.pattern_work, n)
    }
}

/// A path through a `/proc` magic link or a descriptor link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Magic {
    /// Of another process (`/proc/<pid>/cwd`, `root`, `fd`, `exe`, `map_files`).
    Process,
    /// Of the command's own process (`/proc/self/…`, `/dev/fd/N`), but not its standard
    /// streams or `/proc/self/root`, which is `/`.
    OwnProcess,
}

/// Whether `path` (absolute, `..` as written: the kernel follows a link before it
/// climbs) goes through a magic link, and whose.
fn through_magic(path: &str) -> Option<Magic> {
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let stdio = |n: Option<&&str>| matches!(n, Some(&("0" | "1" | "2")));
    match comps.as_slice() {
        ["proc", pid, rest @ ..] => {
            let rest = match rest {
                ["task", _, inner @ ..] => inner,
                _ => rest,
            };
            let own = matches!(*pid, "self" | "thread-self");
            match rest {
                // `/proc/self/root` is the command's root: `/` (see_through); its `exe`
                // is the program reading it.
                ["root" | "exe", ..] if own => None,
                ["fd", n, ..] if own && stdio(Some(n)) => None,
                ["cwd" | "root" | "exe", ..] | ["fd" | "map_files", _, ..] => Some(if own {
                    Magic::OwnProcess
                } else {
                    Magic::Process
                }),
                _ => None,
            }
        }
        ["dev", "fd", n, ..] if !stdio(Some(n)) => Some(Magic::OwnProcess),
        _ => None,
    }
}

/// Whether any path inside `text` (a word, `--opt=/proc/…`, `key=…`) goes through a
/// magic link: a grant never covers such a word (docs/APPROVALS.md, "Scoped grants").
pub(super) fn names_magic_link(text: &str) -> bool {
    text.match_indices("/proc/")
        .chain(text.match_indices("/dev/fd/"))
        .any(|(at, _)| {
            text.get(at..)
                .is_some_and(|rest| through_magic(rest).is_some())
        })
}

fn is_pattern(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

/// A path as the kernel resolves it now.
struct OnDiskPath {
    /// The longest part of it that exists, resolved (no links, no `..`).
    existing: String,
    /// `existing` with the rest of the path (which does not exist) after it.
    path: String,
    /// The part that exists stops at or before a magic link (`/proc/<pid>` of a process
    /// that is not there, `/proc/<pid>/fd/N` of a closed descriptor).
    reaches_magic_unresolved: bool,
}

/// Resolve `path` (absolute, as written: `..` after a link means the link's parent) as
/// far as it exists, following every link.
fn resolve_on_disk(path: &str) -> Option<OnDiskPath> {
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let prefix = |k: usize| format!("/{}", comps.get(..k).unwrap_or_default().join("/"));
    let exists = |k: usize| std::fs::metadata(prefix(k)).is_ok();
    // Resolving a prefix needs every shorter prefix to resolve to a directory, so
    // existence falls off once: find where.
    let (mut lo, mut hi) = (0usize, comps.len());
    if exists(hi) {
        lo = hi;
    } else {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if exists(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    let existing = std::fs::canonicalize(prefix(lo)).ok()?;
    let existing = normalize(&existing.to_string_lossy());
    let rest = comps.get(lo..).unwrap_or_default();
    let magic_at = magic_index(&comps);
    Some(OnDiskPath {
        path: normalize(&format!("{existing}/{}", rest.join("/"))),
        existing,
        reaches_magic_unresolved: magic_at.is_some_and(|m| lo <= m),
    })
}

/// The index of the magic link component (`cwd`, `fd`'s number, …) in a path's
/// components, if it has one.
fn magic_index(comps: &[&str]) -> Option<usize> {
    match comps {
        ["proc", _, "task", _, link, rest @ ..] => link_index(4, link, rest),
        ["proc", _, link, rest @ ..] => link_index(2, link, rest),
        _ => None,
    }
}

fn link_index(at: usize, link: &str, rest: &[&str]) -> Option<usize> {
    match link {
        "cwd" | "root" | "exe" => Some(at),
        // The link is the entry inside the directory.
        "fd" | "map_files" if !rest.is_empty() => Some(at + 1),
        _ => None,
    }
}

fn spend(work: &AtomicUsize, n: usize) -> bool {
    work.fetch_add(n, Ordering::Relaxed).saturating_add(n) <= MAX_ASSESSMENT_PATTERN_WORK
}

/// The paths a pattern matches now, like the shell's globbing: `None` when it would
/// take more than the bounds (its own, or what is left of the assessment's `work`).
fn expand(pattern: &str, work: &AtomicUsize) -> Option<Vec<String>> {
    let mut found = vec![String::new()];
    let mut scanned = 0usize;
    for comp in components(pattern) {
        let mut next = Vec::new();
        for dir in &found {
            if !is_pattern(comp) {
                next.push(format!("{dir}/{comp}"));
                continue;
            }
            let Ok(entries) = std::fs::read_dir(if dir.is_empty() { "/" } else { dir }) else {
                continue;
            };
            for entry in entries.flatten() {
                scanned += 1;
                if scanned > MAX_PATTERN_ENTRIES || !spend(work, 1) {
                    return None;
                }
                let name = entry.file_name();
                let name = name.to_string_lossy();
                // The shell's `*` does not match a leading dot.
                if name.starts_with('.') && !comp.starts_with('.') {
                    continue;
                }
                // The name is literal text: its own `*`, `?`, `[` and `\` match only
                // themselves.
                if patterns_meet(comp, &literal(&name)) {
                    next.push(format!("{dir}/{name}"));
                }
            }
        }
        if next.len() > MAX_PATTERN_MATCHES {
            return None;
        }
        found = next;
    }
    Some(found)
}

/// `text` as a pattern that matches only itself.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Where home directories are (`*` is any one name).
const HOMES: &[&str] = &[
    "/root",
    "/home/*",
    "/Users/*",
    "/var/root",
    "/data/data/*/files/home",
    "/data/user/*/*/files/home",
    "/data/local/tmp",
];

fn is_home(dir: &[&str]) -> bool {
    HOMES.iter().any(|h| {
        let h = components(h);
        h.len() == dir.len() && h.iter().zip(dir).all(|(p, d)| patterns_meet(p, d))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Relation {
    Ancestor,
    Beneath,
    Equal,
}

fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|c| !c.is_empty()).collect()
}

/// How `path` (components, possibly patterns) relates to the literal `prot`.
fn relation(prot: &[&str], path: &[&str]) -> Option<Relation> {
    for (i, comp) in path.iter().enumerate() {
        // bash's `**` (globstar) matches any number of directories.
        if *comp == "**" {
            return Some(Relation::Beneath);
        }
        match prot.get(i) {
            Some(p) if patterns_meet(comp, p) => {}
            Some(_) => return None,
            None => return Some(Relation::Beneath),
        }
    }
    if path.len() == prot.len() {
        Some(Relation::Equal)
    } else {
        Some(Relation::Ancestor)
    }
}
