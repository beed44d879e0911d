//! iproute2's `ip`, read the way it reads itself (`ip_table.rs`): options, then an
//! object and its commands, each matched by prefix in iproute2's order. Only commands that
//! print are read-only; `netns exec` and `vrf exec` run the command given.

use nl2sh_proto::channels::RiskLevel::{High, Medium};

use super::args::Arg;
use super::classify::{Stdin, Walker};
use super::ip_table::{matches, Verb, What, IP_EXACT_OPTIONS, IP_OBJECTS, IP_OPTIONS};
use super::lexer::shorten;
use super::Assessment;

impl Walker {
    /// `ip [OPTIONS] OBJECT [COMMAND [ARGUMENTS]]`.
    pub fn ip(&mut self, args: &[Arg], depth: usize, stdin: &Stdin) -> Assessment {
        let mut a = Assessment::read_only();
        let mut all = false;
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let Some(text) = arg.lit.as_deref() else {
                a.raise(
                    High,
                    format!("ip: {} computed at run time", shorten(&arg.star)),
                );
                return a;
            };
            if text == "--" {
                i += 1;
                break;
            }
            if !text.starts_with('-') {
                break;
            }
            i += 1;
            // iproute2 reads `--x` as `-x`.
            let opt = text
                .strip_prefix('-')
                .filter(|o| o.starts_with('-'))
                .unwrap_or(text);
            if IP_EXACT_OPTIONS.contains(&opt) {
                continue;
            }
            let (name, value) = opt.split_once('=').unwrap_or((opt, ""));
            let Some((full, takes, batch)) = IP_OPTIONS
                .iter()
                .find(|(o, ..)| matches(name, o) && (value.is_empty() || *o == "-color"))
            else {
                a.raise(
                    Medium,
                    format!("ip: option {} not understood", shorten(text)),
                );
                continue;
            };
            if *batch {
                a.raise(High, "ip -batch: runs the commands in a file");
            }
            all |= *full == "-all";
            if *takes {
                i += 1;
            }
        }
        let rest = args.get(i..).unwrap_or_default();
        if rest.is_empty() {
            return a;
        }
        a.merge(self.ip_verbs(IP_OBJECTS, &What::Changes, rest, all, depth, stdin, "ip"));
        a
    }

    /// The command among `verbs` that `args` starts with, and what it does.
    #[allow(clippy::too_many_arguments)]
    fn ip_verbs(
        &mut self,
        verbs: &[Verb],
        none: &What,
        args: &[Arg],
        all: bool,
        depth: usize,
        stdin: &Stdin,
        said: &str,
    ) -> Assessment {
        let mut a = Assessment::read_only();
        let (what, said, rest) = match args.split_first() {
            None => (*none, said.to_string(), args),
            Some((word, rest)) => {
                let Some(text) = word.lit.as_deref() else {
                    a.raise(
                        High,
                        format!("{said}: {} computed at run time", shorten(&word.star)),
                    );
                    return a;
                };
                let verb = verbs.iter().find(|v| {
                    if v.exact {
                        v.name == text
                    } else {
                        matches(text, v.name)
                    }
                });
                let Some(verb) = verb else {
                    a.raise(
                        High,
                        format!("{said} {}: not a command that only shows", shorten(text)),
                    );
                    return a;
                };
                (verb.what, format!("{said} {}", verb.name), rest)
            }
        };
        match what {
            What::Shows => {}
            What::Changes => a.raise(High, format!("{said}: changes network configuration")),
            What::Runs => {
                // `exec NAME CMD…`, or `exec CMD…` for every namespace with `-all`.
                let command = rest.get(usize::from(!all)..).unwrap_or_default();
                a.raise(
                    Medium,
                    format!("{said}: runs a command in a network namespace"),
                );
                a.merge(self.invoke(command, depth + 1, stdin));
            }
            What::Nested(inner, inner_none) => {
                a.merge(self.ip_verbs(inner, inner_none, rest, all, depth, stdin, &said));
            }
        }
        a
    }
}
