//! The commands a line runs, as scoped grants see them (`ActionSummary.commands`): what
//! a grant may match in each, and when the line cannot be taken apart at all. approvald's
//! matching of these lists is tested there and, on real lines, in `tests/tests/grants.rs`.

use std::path::Path;

use nl2sh_proto::channels::{ParsedCommand, RiskLevel};
use nl2sh_proto::limits::{MAX_ACTION_COMMANDS, MAX_COMMAND_ARGV_BYTES};

use super::super::{assess_shell_commands, Protected};

fn commands(line: &str) -> Option<Vec<ParsedCommand>> {
    assess_shell_commands(line, None, &Protected::default()).1
}

/// A command a grant may match, read-only or not.
fn cmd(argv: &[&str], read_only: bool) -> ParsedCommand {
    ParsedCommand {
        argv: Some(argv.iter().map(|w| w.to_string()).collect()),
        read_only,
    }
}

/// A command no grant may match.
fn opaque(read_only: bool) -> ParsedCommand {
    ParsedCommand {
        argv: None,
        read_only,
    }
}

fn check(rows: &[(&str, Option<Vec<ParsedCommand>>)]) {
    let mut failures = Vec::new();
    for (line, want) in rows {
        let got = commands(line);
        if got != *want {
            failures.push(format!("{line:?}:\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_command_of_a_compound_line_is_listed() {
    let ls = || cmd(&["ls"], true);
    let tmp = || cmd(&["ls", "/tmp"], true);
    let touch = || cmd(&["touch", "F"], false);
    check(&[
        ("ls /tmp", Some(vec![tmp()])),
        ("ls /tmp; touch F", Some(vec![tmp(), touch()])),
        (
            "ls && mkdir d",
            Some(vec![ls(), cmd(&["mkdir", "d"], false)]),
        ),
        (
            "ls || cp a b",
            Some(vec![ls(), cmd(&["cp", "a", "b"], false)]),
        ),
        ("ls\ntouch F", Some(vec![ls(), touch()])),
        // A command fed by a pipe reads input the caller chose: never matched.
        ("ls | tee F", Some(vec![ls(), opaque(false)])),
        (
            "ls /tmp; cat /etc/hostname",
            Some(vec![tmp(), cmd(&["cat", "/etc/hostname"], true)]),
        ),
        // Substitutions are commands of their own; the word holding one is not fixed.
        ("ls $(touch F)", Some(vec![touch(), opaque(false)])),
        ("ls `touch F`", Some(vec![touch(), opaque(false)])),
        ("ls <(touch F)", Some(vec![touch(), opaque(false)])),
        ("echo \"$(touch F)\"", Some(vec![touch(), opaque(false)])),
        // Nested scripts: the shell that runs them is a command too.
        // Its script is its stdin, which the caller chose: the shell is never matched.
        ("sh <<EOF\ntouch F\nEOF", Some(vec![touch(), opaque(false)])),
        (
            "sh -c 'touch F'",
            Some(vec![touch(), cmd(&["sh", "-c", "touch F"], false)]),
        ),
        ("eval touch F", Some(vec![touch(), opaque(false)])),
        (
            "echo touch F | sh",
            Some(vec![
                cmd(&["echo", "touch", "F"], true),
                touch(),
                opaque(false),
            ]),
        ),
        // Subshells, groups, conditions, loops.
        ("(touch F)", Some(vec![touch()])),
        ("{ ls; touch F; }", Some(vec![ls(), touch()])),
        ("if ls; then touch F; fi", Some(vec![ls(), touch()])),
        // A loop runs what a grant names once as many times as it likes: no list at all.
        ("while ls; do touch F; done", None),
        // The words of `case`, `for` and `[[` are the shell's to evaluate: an entry of
        // their own, never matched.
        (
            "case x in x) touch F;; esac",
            Some(vec![opaque(true), touch()]),
        ),
        ("for f in a; do touch $f; done", None),
        ("[[ -e F ]] || touch F", Some(vec![opaque(true), touch()])),
        // Here-document bodies' substitutions run when the redirection is set up.
        (
            "cat <<EOF\n$(touch F)\nEOF",
            Some(vec![touch(), opaque(false)]),
        ),
    ]);
}

#[test]
fn quote_removal_gives_the_words_the_program_gets() {
    let am = || {
        Some(vec![cmd(
            &["am", "start", "-n", "com.example/.Main"],
            false,
        )])
    };
    check(&[
        ("am start -n com.example/.Main", am()),
        ("am  'start' -n \"com.example/.Main\"", am()),
        ("\\am st\\art -n com.''example/.Main", am()),
        ("am start -n com.example/.Main 2>/dev/null", am()),
        (
            "am start -n com.example/.Main >/dev/null 2>&1 </dev/null",
            am(),
        ),
        // Input the caller chose on stdin: the command is no longer the one a grant names.
        (
            "am start -n com.example/.Main <<< x",
            Some(vec![opaque(false)]),
        ),
        (
            "am start -n com.example/.Main < /data/data/app/db",
            Some(vec![opaque(false)]),
        ),
        (
            "echo x | am start -n com.example/.Main",
            Some(vec![cmd(&["echo", "x"], true), opaque(false)]),
        ),
        ("am start -n com.example/.Main < /dev/null", am()),
        ("am start -n com.example/.Main # a comment", am()),
        ("am start \\\n -n com.example/.Main", am()),
        (
            "am start -n 'com.example/.Main --user 0'",
            Some(vec![cmd(
                &["am", "start", "-n", "com.example/.Main --user 0"],
                false,
            )]),
        ),
        (
            "/tmp/am start -n com.example/.Main",
            Some(vec![cmd(
                &["/tmp/am", "start", "-n", "com.example/.Main"],
                false,
            )]),
        ),
        (
            "find . -exec touch {} +",
            Some(vec![cmd(
                &["find", ".", "-exec", "touch", "{}", "+"],
                false,
            )]),
        ),
    ]);
}

#[test]
fn what_a_grant_may_not_match() {
    // Each of these lines ends in a command whose words do not say what runs; it is
    // listed without its argv, whatever it is.
    for line in [
        // Words the shell expands.
        "ls $HOME",
        "ls \"$HOME\"",
        "ls ${X:-/}",
        "ls $((1))",
        "ls /tmp/*",
        "ls /tmp/?",
        "ls /tmp/[ab]",
        "ls ~",
        "ls ~/x",
        "ls x=~/y",
        "ls {a,b}",
        "ls a{1..3}",
        "ls $'x'",
        "ls $\"x\"",
        "$PROG /tmp",
        "\"$PROG\" /tmp",
        "$(echo ls) /tmp",
        // The program's environment, files or descriptors.
        "LD_PRELOAD=x ls",
        "X=1 ls",
        "ls > F",
        "ls >> F",
        "ls >| F",
        "ls <> F",
        "ls &> F",
        "ls &>> F",
        "ls 2> F",
        "ls >& F",
        "ls > $F",
        "ls < /etc/shadow",
        "ls 3< /data/adb/x",
        // Something earlier changed what the command means.
        "cd /etc && ls",
        "cd /etc; ls",
        "pushd /etc; ls",
        "(cd /etc); ls",
        "sh -c 'cd /etc'; ls",
        "export X=1; ls",
        "export LD_PRELOAD=/tmp/x.so; ls",
        "BOOTCLASSPATH=/sdcard/x.jar; export BOOTCLASSPATH; ls",
        "X=1; ls",
        "X=1 true; ls",
        "readonly X=1; ls",
        "declare -x X=1; ls",
        "typeset -x X=1; ls",
        "command export X=1; ls",
        "builtin export X=1; ls",
        "eval export X=1; ls",
        "unset X; ls",
        "set -a; ls",
        "set -o allexport; ls",
        "read X; ls",
        "printf -v X y; ls",
        "getopts a X; ls",
        "let X=1; ls",
        "echo ${X:=1}; ls",
        "echo ${X=1}; ls",
        "echo $((X=1)); ls",
        "for X in 1; do :; done; ls",
        "umask 0; ls",
        "ulimit -c unlimited; ls",
        "shopt -s nullglob; ls",
        "exec 0</dev/null; ls",
        "trap '' INT; ls",
        "alias ls='rm -rf /'\nls",
        "ls() { rm -rf /; }; ls",
        "function ls { :; }; ls",
        "hash -p /tmp/x ls; ls",
        "PATH=/tmp:$PATH; ls",
        ". /tmp/x; ls",
        // Programs that run text as code or stand for something else.
        "eval ls",
        "trap ls EXIT",
        "source /tmp/x",
        "type ls",
        "r",
    ] {
        let got = commands(line);
        let last = got.as_ref().and_then(|c| c.last());
        assert!(
            got.is_none() || last.is_some_and(|c| c.argv.is_none()),
            "{line:?}: {got:?}"
        );
    }
}

#[test]
fn lines_that_cannot_be_taken_apart_give_no_commands() {
    for line in [
        // The parser did not understand it.
        "ls 'unterminated",
        "ls \"unterminated",
        "ls $(",
        "ls )",
        "ls <<",
        "ls\0x",
        // The lexer splits words at a carriage return; the shell does not.
        "ls /tmp\r/x",
        // Shells read these differently: `ls &` in dash, a co-process in mksh, an
        // argument `10` in dash and mksh.
        "ls &>/dev/null",
        "ls &>>/dev/null",
        "ls |& cat",
        "ls 10>/dev/null",
        // It may outlive the call.
        "ls &",
        "ls & touch F",
        "(ls &)",
        // What a compound command's redirection writes is no command's doing.
        "{ ls; } > F",
        "while read x; do :; done > F",
        "for x in a; do ls; done >> /tmp/log",
        // Nesting past the limit.
        &format!("{}ls{}", "$(".repeat(20), ")".repeat(20)),
        &format!("{}ls{}", "(".repeat(20), ")".repeat(20)),
    ] {
        assert_eq!(commands(line), None, "{line:?}");
    }
    // A compound command may drop its output, and read nothing but /dev/null; a loop
    // repeats what a grant names once.
    assert!(commands("while read x; do ls; done < /etc/hostname").is_none());
    assert!(commands("{ ls; } < /dev/null").is_some());
    assert!(commands("{ ls; } < /etc/hostname").is_none());
    assert!(commands("while true; do am start -n com.example/.Main; done").is_none());
    assert!(commands("for i in 1 2; do ls; done").is_none());
    assert!(commands("{ ls; } > /dev/null 2>&1").is_some());
    // A line that starts in a directory of the caller's choosing.
    let (_, c) = assess_shell_commands("ls", Some(Path::new("/sdcard")), &Protected::default());
    assert_eq!(c, None);
}

#[test]
fn the_list_is_bounded() {
    let distinct: Vec<String> = (0..MAX_ACTION_COMMANDS)
        .map(|i| format!("ls /tmp/{i}"))
        .collect();
    let c = commands(&distinct.join("; ")).unwrap();
    assert_eq!(c.len(), MAX_ACTION_COMMANDS);
    let one_more: Vec<String> = (0..=MAX_ACTION_COMMANDS)
        .map(|i| format!("ls /tmp/{i}"))
        .collect();
    assert_eq!(commands(&one_more.join("; ")), None);
    // The same command many times is one entry (loops are walked twice, too).
    let same = vec!["ls /tmp"; 500].join("; ");
    assert_eq!(commands(&same), Some(vec![cmd(&["ls", "/tmp"], true)]));
    // An argv over the limit is not sent; the command still counts, as read-only or not.
    let long = format!("echo {}", "x".repeat(MAX_COMMAND_ARGV_BYTES));
    assert_eq!(commands(&long), Some(vec![opaque(true)]));
    let fits = format!("echo {}", "x".repeat(MAX_COMMAND_ARGV_BYTES - 7));
    let c = commands(&fits).unwrap();
    assert_eq!(c.len(), 1);
    assert!(c[0].argv.is_some(), "{} bytes", fits.len());
}

/// What the list says agrees with the line's own assessment, for every line the other
/// tests know: read-only commands only if the line is read-only, and the limits kept.
#[test]
fn the_commands_agree_with_the_assessment() {
    let lines = super::lines::LINES.iter().map(|(line, ..)| *line).chain(
        super::bypass::ALL
            .iter()
            .flat_map(|t| t.iter().map(|(line, _)| *line)),
    );
    let mut checked = 0;
    for line in lines {
        let (a, c) = assess_shell_commands(line, None, &Protected::default());
        let Some(c) = c else { continue };
        checked += 1;
        let all_read_only = c.iter().all(|p| p.read_only);
        let line_read_only = a.level == RiskLevel::ReadOnly && !a.requires_root;
        assert_eq!(all_read_only, line_read_only, "{line:?}: {a:?} {c:?}");
        assert!(c.len() <= MAX_ACTION_COMMANDS, "{line:?}");
        for argv in c.iter().filter_map(|p| p.argv.as_deref()) {
            assert!(ParsedCommand::argv_bytes(argv) <= MAX_COMMAND_ARGV_BYTES);
            assert!(!argv.is_empty(), "{line:?}");
        }
    }
    assert!(checked > 200, "only {checked} lines had commands");
}
