//! `find` expressions, as data: every primary (GNU, toybox, busybox), how many
//! arguments it takes and what it does. A primary not listed is not understood.

/// What a `find` primary does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Does {
    /// Tests, options and output to standard output.
    Nothing,
    /// Runs a command given up to `;` or `+` (`-exec`, `-ok`, …).
    Runs,
    /// Writes the file named by its first argument (`-fprint`).
    Writes,
    /// Reads the file named by its first argument (`-files0-from`).
    Reads,
}

/// (primary, arguments it takes, what it does).
pub(super) const FIND_PRIMARIES: &[(&str, usize, Does)] = &[
    // Options.
    ("-daystart", 0, Does::Nothing),
    ("-depth", 0, Does::Nothing),
    ("-d", 0, Does::Nothing),
    ("-follow", 0, Does::Nothing),
    ("-help", 0, Does::Nothing),
    ("--help", 0, Does::Nothing),
    ("-ignore_readdir_race", 0, Does::Nothing),
    ("-noignore_readdir_race", 0, Does::Nothing),
    ("-maxdepth", 1, Does::Nothing),
    ("-mindepth", 1, Does::Nothing),
    ("-mount", 0, Does::Nothing),
    ("-xdev", 0, Does::Nothing),
    ("-noleaf", 0, Does::Nothing),
    ("-regextype", 1, Does::Nothing),
    ("-version", 0, Does::Nothing),
    ("--version", 0, Does::Nothing),
    ("-warn", 0, Does::Nothing),
    ("-nowarn", 0, Does::Nothing),
    ("-files0-from", 1, Does::Reads),
    // Tests.
    ("-amin", 1, Does::Nothing),
    ("-anewer", 1, Does::Nothing),
    ("-atime", 1, Does::Nothing),
    ("-cmin", 1, Does::Nothing),
    ("-cnewer", 1, Does::Nothing),
    ("-ctime", 1, Does::Nothing),
    ("-empty", 0, Does::Nothing),
    ("-executable", 0, Does::Nothing),
    ("-false", 0, Does::Nothing),
    ("-fstype", 1, Does::Nothing),
    ("-gid", 1, Does::Nothing),
    ("-group", 1, Does::Nothing),
    ("-ilname", 1, Does::Nothing),
    ("-iname", 1, Does::Nothing),
    ("-inum", 1, Does::Nothing),
    ("-ipath", 1, Does::Nothing),
    ("-iregex", 1, Does::Nothing),
    ("-iwholename", 1, Does::Nothing),
    ("-links", 1, Does::Nothing),
    ("-lname", 1, Does::Nothing),
    ("-mmin", 1, Does::Nothing),
    ("-mtime", 1, Does::Nothing),
    ("-name", 1, Does::Nothing),
    ("-newer", 1, Does::Nothing),
    ("-nogroup", 0, Does::Nothing),
    ("-nouser", 0, Does::Nothing),
    ("-path", 1, Does::Nothing),
    ("-perm", 1, Does::Nothing),
    ("-readable", 0, Does::Nothing),
    ("-regex", 1, Does::Nothing),
    ("-samefile", 1, Does::Nothing),
    ("-size", 1, Does::Nothing),
    ("-true", 0, Does::Nothing),
    ("-type", 1, Does::Nothing),
    ("-uid", 1, Does::Nothing),
    ("-used", 1, Does::Nothing),
    ("-user", 1, Does::Nothing),
    ("-wholename", 1, Does::Nothing),
    ("-writable", 0, Does::Nothing),
    ("-xtype", 1, Does::Nothing),
    ("-context", 1, Does::Nothing),
    // Actions.
    ("-delete", 0, Does::Nothing),
    ("-exec", 0, Does::Runs),
    ("-execdir", 0, Does::Runs),
    ("-ok", 0, Does::Runs),
    ("-okdir", 0, Does::Runs),
    ("-fls", 1, Does::Writes),
    ("-fprint", 1, Does::Writes),
    ("-fprint0", 1, Does::Writes),
    ("-fprintf", 2, Does::Writes),
    ("-ls", 0, Does::Nothing),
    ("-print", 0, Does::Nothing),
    ("-print0", 0, Does::Nothing),
    ("-printf", 1, Does::Nothing),
    ("-prune", 0, Does::Nothing),
    ("-quit", 0, Does::Nothing),
    // Operators.
    ("-not", 0, Does::Nothing),
    ("-a", 0, Does::Nothing),
    ("-and", 0, Does::Nothing),
    ("-o", 0, Does::Nothing),
    ("-or", 0, Does::Nothing),
    ("(", 0, Does::Nothing),
    (")", 0, Does::Nothing),
    ("!", 0, Does::Nothing),
    (",", 0, Does::Nothing),
];

/// The row for a primary; `-newerXY` (GNU) stands for its family.
pub(super) fn primary(word: &str) -> Option<(usize, Does)> {
    if let Some(found) = FIND_PRIMARIES.iter().find(|(p, ..)| *p == word) {
        return Some((found.1, found.2));
    }
    let xy = word.strip_prefix("-newer")?;
    (xy.len() == 2 && xy.chars().all(|c| "aBcmt".contains(c))).then_some((1, Does::Nothing))
}
