//! `/proc/<pid>/stat`, read one way for every process that looks at another (proc(5)).
//!
//! Field 2, the command name, is in parentheses and is whatever the process set it to:
//! spaces, parentheses, a fake state and parent pid, bytes that are not UTF-8. So the name
//! runs from the first `(` to the LAST `)`, and fields 3 onward are counted after that
//! `)`; nothing in a name can move them. Numbers are plain decimal digits, as the kernel
//! writes them; anything else is refused rather than guessed.

use std::borrow::Cow;
use std::io;

/// What is wrong with a `/proc/<pid>/stat` line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatError {
    #[error("no ')' closing the command name")]
    NoCommand,
    #[error("no {0} field")]
    Missing(&'static str),
    #[error("{field} {text:?} is not {expected}")]
    Bad {
        field: &'static str,
        text: String,
        expected: &'static str,
    },
}

/// The bytes of `/proc/<pid>/stat` (one read: the kernel writes the line whole).
pub fn read_stat(pid: u32) -> io::Result<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/stat"))
}

/// One `/proc/<pid>/stat` line, split at its command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    line: Vec<u8>,
    /// Where the name starts (after the first `(`) and where it ends (the last `)`).
    name: (usize, usize),
}

impl Stat {
    /// `line` split at its command name. Fields past the name are checked only when they
    /// are asked for: a caller reads the fields it needs.
    pub fn parse(line: &[u8]) -> Result<Stat, StatError> {
        let close = line
            .iter()
            .rposition(|&b| b == b')')
            .ok_or(StatError::NoCommand)?;
        let open = line[..close]
            .iter()
            .position(|&b| b == b'(')
            .ok_or(StatError::NoCommand)?;
        Ok(Stat {
            line: line.to_vec(),
            name: (open + 1, close),
        })
    }

    /// The stat of process `pid` now, or `None` when it cannot be read (gone, or not
    /// visible) or is not a stat line.
    pub fn of(pid: u32) -> Option<Stat> {
        Stat::parse(&read_stat(pid).ok()?).ok()
    }

    /// Field 2, the command name, as text (bytes that are not UTF-8 replaced, for display
    /// only: it says nothing about who the process is).
    pub fn comm(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.line[self.name.0..self.name.1])
    }

    /// Field `n` (numbered from 1 as in proc(5); 3 and above, those after the name).
    fn field(&self, n: usize, name: &'static str) -> Result<&[u8], StatError> {
        self.line[self.name.1 + 1..]
            .split(u8::is_ascii_whitespace)
            .filter(|f| !f.is_empty())
            .nth(n.saturating_sub(3))
            .ok_or(StatError::Missing(name))
    }

    /// Field `n` as a decimal number of type `T`.
    fn number<T: std::str::FromStr>(
        &self,
        n: usize,
        name: &'static str,
        expected: &'static str,
    ) -> Result<T, StatError> {
        let field = self.field(n, name)?;
        let bad = || StatError::Bad {
            field: name,
            text: String::from_utf8_lossy(field).into_owned(),
            expected,
        };
        if !field.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        std::str::from_utf8(field)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)
    }

    /// Field 3, the state: `R`, `S`, `D`, `Z` (exited, not yet reaped), `X` (dead), ...
    pub fn state(&self) -> Result<&str, StatError> {
        let field = self.field(3, "state")?;
        std::str::from_utf8(field).map_err(|_| StatError::Bad {
            field: "state",
            text: String::from_utf8_lossy(field).into_owned(),
            expected: "a state",
        })
    }

    /// Whether the process has exited (`Z`: a zombie waiting for its parent, or `X`);
    /// a line without a state is taken as exited too.
    pub fn has_exited(&self) -> bool {
        matches!(self.state(), Ok("Z" | "X") | Err(_))
    }

    /// Field 4, the parent pid: 0 when the parent is outside this pid namespace (or for
    /// the first process), else a pid (at most `pid_t`'s largest value).
    pub fn ppid(&self) -> Result<u32, StatError> {
        let ppid: u32 = self.number(4, "parent pid", "a pid")?;
        if i32::try_from(ppid).is_err() {
            return Err(StatError::Bad {
                field: "parent pid",
                text: ppid.to_string(),
                expected: "a pid",
            });
        }
        Ok(ppid)
    }

    /// Field 22, the start time in clock ticks since boot: with the pid, it names one
    /// process (a pid is reused, the pair is not).
    pub fn start_time(&self) -> Result<u64, StatError> {
        self.number(22, "start time", "a number")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Stat {
        Stat::parse(line.as_bytes()).unwrap()
    }

    /// Fields 3 to 52 of a synthetic line, each its own number (field 22 is "22").
    fn tail() -> String {
        (3..=52)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_plain_line() {
        let s = parse("1234 (bash) S 1000 1234 1234 34816 1234 4194304 0 0");
        assert_eq!(s.comm(), "bash");
        assert_eq!(s.state(), Ok("S"));
        assert!(!s.has_exited());
        assert_eq!(s.ppid(), Ok(1000));
        assert_eq!(s.start_time(), Err(StatError::Missing("start time")));
        let s = parse(&format!("1234 (sh) {}\n", tail()));
        assert_eq!(s.start_time(), Ok(22));
        assert_eq!(s.ppid(), Ok(4));
        assert_eq!(s.state(), Ok("3"));
    }

    /// A name may hold anything a process chooses, fake fields included: only what follows
    /// the last ')' counts.
    #[test]
    fn a_hostile_name_moves_no_field() {
        let s = parse(&format!("5 (a) R 1 2 (b) {}", tail()));
        assert_eq!(s.comm(), "a) R 1 2 (b");
        assert_eq!(s.state(), Ok("3"));
        assert_eq!(s.ppid(), Ok(4));
        assert_eq!(s.start_time(), Ok(22));
        let s = parse("4321 (a) S 1 (b c) R 77 4321 4321 0 -1 4194560\n");
        assert_eq!(s.comm(), "a) S 1 (b c");
        assert_eq!(s.state(), Ok("R"));
        assert_eq!(s.ppid(), Ok(77));
        let s = parse("42 () () ) S 7 42 42");
        assert_eq!(s.comm(), ") () ");
        assert_eq!(s.ppid(), Ok(7));
        let s = parse(&format!("1234 (we ird) (name)) ) {}\n", tail()));
        assert_eq!(s.comm(), "we ird) (name)) ");
        assert_eq!(s.start_time(), Ok(22));
        // A name with a newline and a zombie's state in it.
        let s = parse("9 (x\n) Z 0 (y) S 3 9");
        assert_eq!(s.state(), Ok("S"));
        assert!(!s.has_exited());
        assert_eq!(s.ppid(), Ok(3));
        // An empty name.
        assert_eq!(parse("7 () S 1").comm(), "");
    }

    #[test]
    fn a_name_that_is_not_utf8() {
        let mut raw = b"99 (\xff\xfe) S 12 99".to_vec();
        let s = Stat::parse(&raw).unwrap();
        assert_eq!(s.comm(), "\u{fffd}\u{fffd}");
        assert_eq!(s.ppid(), Ok(12));
        raw.truncate(9);
        assert_eq!(
            Stat::parse(&raw).unwrap().ppid(),
            Err(StatError::Missing("parent pid"))
        );
    }

    #[test]
    fn zombies_and_the_dead_have_exited() {
        for (state, exited) in [
            ("R", false),
            ("S", false),
            ("D", false),
            ("Z", true),
            ("X", true),
        ] {
            assert_eq!(parse(&format!("1 (a) {state} 0")).has_exited(), exited);
        }
        assert!(parse("1 (a)").has_exited());
        assert!(parse("1 (a)   ").has_exited());
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in ["12 bash S 1", "no parens at all", "", "12 )bash( S 1"] {
            assert_eq!(
                Stat::parse(bad.as_bytes()),
                Err(StatError::NoCommand),
                "{bad}"
            );
        }
        assert_eq!(
            parse("12 (bash)").ppid(),
            Err(StatError::Missing("parent pid"))
        );
        assert_eq!(parse("12 (bash)").state(), Err(StatError::Missing("state")));
        assert_eq!(
            parse("12 (bash) S").ppid(),
            Err(StatError::Missing("parent pid"))
        );
        for bad in [
            "-1",
            "+5",
            "x",
            "2147483648",
            "4294967295",
            "99999999999999999999",
            "1.0",
            "٣",
        ] {
            assert_eq!(
                parse(&format!("12 (bash) S {bad} 1")).ppid(),
                Err(StatError::Bad {
                    field: "parent pid",
                    text: bad.into(),
                    expected: "a pid",
                }),
                "{bad}"
            );
        }
        assert_eq!(parse("12 (bash) S 0 1").ppid(), Ok(0));
        assert_eq!(parse("12 (bash) S 2147483647 1").ppid(), Ok(2_147_483_647));
        let t = tail().replace(" 22 ", " x ");
        assert_eq!(
            parse(&format!("1 (x) {t}")).start_time(),
            Err(StatError::Bad {
                field: "start time",
                text: "x".into(),
                expected: "a number",
            })
        );
        let t = tail().replace(" 22 ", " +22 ");
        assert!(parse(&format!("1 (x) {t}")).start_time().is_err());
    }

    #[test]
    fn the_messages_name_the_field() {
        assert_eq!(
            StatError::NoCommand.to_string(),
            "no ')' closing the command name"
        );
        assert_eq!(
            StatError::Missing("parent pid").to_string(),
            "no parent pid field"
        );
        let bad = parse("1 (a) S x").ppid().unwrap_err();
        assert_eq!(bad.to_string(), "parent pid \"x\" is not a pid");
    }

    #[test]
    fn this_process() {
        let me = std::process::id();
        let stat = Stat::of(me).unwrap();
        assert!(!stat.has_exited());
        assert_eq!(stat.ppid().unwrap(), std::os::unix::process::parent_id());
        let started = stat.start_time().unwrap();
        assert!(started > 0);
        assert_eq!(Stat::of(me).unwrap().start_time(), Ok(started));
        assert_eq!(
            stat.comm(),
            std::fs::read_to_string("/proc/self/comm")
                .unwrap()
                .trim_end()
        );
        // No process has pid 0 (nor, on Linux, one past pid_max's ceiling).
        assert_eq!(Stat::of(0), None);
        assert_eq!(Stat::of(u32::MAX), None);
    }
}
