//! Reading a program's command line the way getopt_long does, with the program's grammar
//! (`spec.rs`): clustered short options (an option taking a value takes the rest of the
//! cluster), `--long[=value]` and its unambiguous prefixes, options taking the next
//! argument, operands, `--`. What the grammar does not know is reported.

use super::args::Arg;
use super::lexer::shorten;
use super::spec::{spec_of, Entry, Resolved, Spec, Style, Takes};

/// How an option is written, for the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flag {
    /// A short option, alone or clustered (`-r` in `-rf`).
    Short(char),
    /// `--name`, `--name=value`, or a prefix getopt_long resolves to it.
    Long(&'static str),
    /// Exactly this option word (`find`'s `-delete`, `kill -l`).
    Word(&'static str),
    /// An option word starting with this text (`-fprint` covers `-fprintf`).
    Prefix(&'static str),
}

impl Flag {
    /// How the flag is typically written, for messages and tests.
    pub fn example(self) -> String {
        match self {
            Flag::Short(c) => format!("-{c}"),
            Flag::Long(s) | Flag::Word(s) | Flag::Prefix(s) => s.to_string(),
        }
    }
}

/// An option as the program understands it: its short letter, its long name (resolved
/// from a prefix when the grammar knows it; without dashes), or both when the grammar
/// says they are spellings of one option.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Name {
    pub short: Option<char>,
    pub long: Option<String>,
}

impl Name {
    fn short(c: char) -> Self {
        Name {
            short: Some(c),
            long: None,
        }
    }

    fn long(name: &str) -> Self {
        Name {
            short: None,
            long: Some(name.to_string()),
        }
    }

    fn entry(e: Entry) -> Self {
        Name {
            short: e.short,
            long: Some(e.name.to_string()),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Opt {
    pub name: Name,
    pub value: Option<Arg>,
    /// The grammar does not know this option: whether it takes a value is a guess, and
    /// asking for its value takes the rest of its cluster or the next argument.
    pub guessed: Option<Guess>,
}

/// Where an option the grammar does not know was written.
#[derive(Debug, Clone)]
pub(super) struct Guess {
    /// The index of its argument.
    pub at: usize,
    /// The rest of its cluster (`FILE` of `-wFILE`).
    pub tail: String,
}

/// A program's arguments (without the program name), split into options and operands.
pub(super) struct Cli<'a> {
    pub args: &'a [Arg],
    pub operands: Vec<&'a Arg>,
    pub opts: Vec<Opt>,
    /// Indices in `args` of option words (not values, not operands).
    words: Vec<usize>,
    /// What the grammar does not understand: unknown or ambiguous options.
    pub problems: Vec<String>,
    /// Arguments that may become options at run time (`$X`, `*`).
    pub maybe_options: Vec<&'a Arg>,
    pub spec: Option<&'static Spec>,
}

impl<'a> Cli<'a> {
    pub fn new(program: &str, args: &'a [Arg]) -> Self {
        let spec = spec_of(program);
        let mut cli = Cli {
            args,
            operands: Vec::new(),
            opts: Vec::new(),
            words: Vec::new(),
            problems: Vec::new(),
            maybe_options: Vec::new(),
            spec,
        };
        match spec.map(|s| s.style) {
            Some(Style::Operands) => cli.operands.extend(args.iter()),
            style => cli.parse(program, style),
        }
        cli
    }

    /// Whether the grammar is complete (every option known), so problems count.
    fn strict(&self) -> bool {
        self.spec
            .is_some_and(|s| s.complete && s.style != Style::Free)
    }

    fn parse(&mut self, program: &str, style: Option<Style>) {
        let args = self.args;
        let mut i = 0;
        if style == Some(Style::Bundled) {
            if let Some(first) = args.first() {
                if first.lit.as_deref().is_some_and(|t| !t.starts_with('-')) {
                    i = self.old_cluster(program, first.text(), 1);
                    self.words.push(0);
                }
            }
        }
        let mut done = false;
        while let Some(arg) = args.get(i) {
            let at = i;
            i += 1;
            let text = arg.text();
            if done {
                self.operands.push(arg);
                continue;
            }
            if text == "--" && arg.lit.is_some() {
                done = true;
                continue;
            }
            if may_be_option(arg) {
                self.maybe_options.push(arg);
            }
            if text.len() < 2 || !text.starts_with('-') {
                self.operands.push(arg);
                done = style == Some(Style::Leading);
                continue;
            }
            self.words.push(at);
            if arg.lit.is_none() {
                if self.strict() {
                    self.problems.push(format!(
                        "option {} of {program} is computed at run time",
                        shorten(text)
                    ));
                }
                continue;
            }
            if style == Some(Style::Free) {
                self.free(text);
            } else if let Some(long) = text.strip_prefix("--") {
                i = self.long(program, long, i);
            } else if let Some(next) = self.word(text, i) {
                i = next;
            } else {
                i = self.cluster(program, text.get(1..).unwrap_or_default(), i);
            }
        }
    }

    /// The value of an option taking the next argument; returns the next index.
    fn take_next(&mut self, name: Name, i: usize, program: &str) -> usize {
        match self.args.get(i) {
            Some(value) => {
                self.opts.push(Opt {
                    name,
                    value: Some(value.clone()),
                    guessed: None,
                });
                i + 1
            }
            None => {
                if self.strict() {
                    self.problems
                        .push(format!("an option of {program} lacks its value"));
                }
                self.opts.push(Opt {
                    name,
                    value: None,
                    guessed: None,
                });
                i
            }
        }
    }

    /// `--given[=value]`.
    fn long(&mut self, program: &str, body: &str, i: usize) -> usize {
        let (given, eq) = match body.split_once('=') {
            Some((g, v)) => (g, Some(Arg::plain(v))),
            None => (body, None),
        };
        let guess = Guess {
            at: i.saturating_sub(1),
            tail: String::new(),
        };
        let Some(spec) = self.spec else {
            let guessed = eq.is_none().then_some(guess);
            self.opts.push(Opt {
                name: Name::long(given),
                value: eq,
                guessed,
            });
            return i;
        };
        match spec.long(given) {
            Resolved::Found(entry) => {
                let name = Name::entry(entry);
                match (entry.takes, eq) {
                    (Takes::Value, None) => return self.take_next(name, i, program),
                    // `--rawfile NAME FILE`: the second argument is the one that matters.
                    (Takes::Two, None) => return self.take_next(name, i + 1, program),
                    (Takes::Two, Some(_)) => return self.take_next(name, i, program),
                    (Takes::Nothing, Some(_)) if self.strict() => {
                        self.problems.push(format!(
                            "option --{} of {program} takes no value",
                            shorten(given)
                        ));
                        self.opts.push(Opt {
                            name,
                            value: None,
                            guessed: None,
                        });
                    }
                    (Takes::Nothing, _) => self.opts.push(Opt {
                        name,
                        value: None,
                        guessed: None,
                    }),
                    (_, value) => self.opts.push(Opt {
                        name,
                        value,
                        guessed: None,
                    }),
                }
            }
            Resolved::Ambiguous(names) => {
                self.problems.push(format!(
                    "ambiguous option --{} for {program} ({})",
                    shorten(given),
                    names.join(", ")
                ));
                self.opts.push(Opt {
                    name: Name::long(given),
                    value: eq,
                    guessed: None,
                });
            }
            Resolved::Unknown => {
                if self.strict() {
                    self.problems
                        .push(format!("unknown option --{} for {program}", shorten(given)));
                }
                let guessed = eq.is_none().then_some(guess);
                self.opts.push(Opt {
                    name: Name::long(given),
                    value: eq,
                    guessed,
                });
            }
        }
        i
    }

    /// A whole single-dash word the grammar lists (`-ps`); `None` when it is not one.
    fn word(&mut self, text: &str, i: usize) -> Option<usize> {
        let spec = self.spec?;
        let body = text.strip_prefix('-')?;
        let (given, eq) = match body.split_once('=') {
            Some((g, v)) => (g, Some(Arg::plain(v))),
            None => (body, None),
        };
        let entry = spec.word(given)?;
        let name = Name::entry(entry);
        if entry.takes == Takes::Value && eq.is_none() {
            return Some(self.take_next(name, i, spec.name));
        }
        self.opts.push(Opt {
            name,
            value: eq,
            guessed: None,
        });
        Some(i)
    }

    /// A short-option cluster (`rf` of `-rf`): an option taking a value takes the rest of
    /// the cluster, or the next argument.
    fn cluster(&mut self, program: &str, cluster: &str, i: usize) -> usize {
        let word = i.saturating_sub(1);
        for (at, c) in cluster.char_indices() {
            let rest = cluster.get(at + c.len_utf8()..).unwrap_or_default();
            match self.spec.and_then(|spec| spec.short(c)) {
                Some(Takes::Value) if rest.is_empty() => {
                    return self.take_next(Name::short(c), i, program);
                }
                Some(Takes::Value | Takes::Optional | Takes::Two) => {
                    self.opts.push(Opt {
                        name: Name::short(c),
                        value: (!rest.is_empty()).then(|| Arg::plain(rest)),
                        guessed: None,
                    });
                    return i;
                }
                Some(Takes::Nothing) => self.opts.push(Opt {
                    name: Name::short(c),
                    value: None,
                    guessed: None,
                }),
                None => {
                    if self.strict() {
                        self.problems.push(format!(
                            "unknown option -{} for {program}",
                            shorten(&c.to_string())
                        ));
                    }
                    self.opts.push(Opt {
                        name: Name::short(c),
                        value: None,
                        guessed: Some(Guess {
                            at: word,
                            tail: rest.to_string(),
                        }),
                    });
                }
            }
        }
        i
    }

    /// `tar cvfb F 20`: each value-taking letter takes the next argument, in order.
    fn old_cluster(&mut self, program: &str, cluster: &str, mut i: usize) -> usize {
        for c in cluster.chars() {
            match self.spec.and_then(|s| s.short(c)) {
                Some(Takes::Value) => i = self.take_next(Name::short(c), i, program),
                known => {
                    if known.is_none() && self.strict() {
                        self.problems.push(format!(
                            "unknown option {} for {program}",
                            shorten(&c.to_string())
                        ));
                    }
                    self.opts.push(Opt {
                        name: Name::short(c),
                        value: None,
                        guessed: None,
                    });
                }
            }
        }
        i
    }

    /// Free-form option words: kept as written (also as letters), without values.
    fn free(&mut self, text: &str) {
        match text.strip_prefix("--") {
            Some(long) => self.opts.push(Opt {
                name: Name::long(long.split('=').next().unwrap_or_default()),
                value: None,
                guessed: None,
            }),
            None => {
                let at = self.words.last().copied().unwrap_or_default();
                let letters: Vec<char> = text.chars().skip(1).collect();
                for (n, c) in letters.iter().enumerate() {
                    self.opts.push(Opt {
                        name: Name::short(*c),
                        value: None,
                        guessed: Some(Guess {
                            at,
                            tail: letters.get(n + 1..).unwrap_or_default().iter().collect(),
                        }),
                    });
                }
            }
        }
    }

    /// The option words as written.
    fn option_words(&self) -> impl Iterator<Item = (usize, &'a str)> + '_ {
        self.words
            .iter()
            .filter_map(|i| self.args.get(*i).map(|a| (*i, a.text())))
    }

    fn named(&self, flag: Flag) -> impl Iterator<Item = &Opt> + '_ {
        self.opts.iter().filter(move |o| match flag {
            Flag::Short(c) => o.name.short == Some(c),
            Flag::Long(want) => o.name.long.as_deref() == Some(want.trim_start_matches('-')),
            Flag::Word(_) | Flag::Prefix(_) => false,
        })
    }

    pub fn has(&self, flag: Flag) -> bool {
        match flag {
            Flag::Short(_) | Flag::Long(_) => self.named(flag).next().is_some(),
            Flag::Word(word) => self.option_words().any(|(_, t)| t == word),
            Flag::Prefix(prefix) => self.option_words().any(|(_, t)| t.starts_with(prefix)),
        }
    }

    /// The values given to an option that takes one (`-o FILE`, `-oFILE`, `--output=FILE`).
    pub fn values(&self, flag: Flag) -> Vec<Arg> {
        match flag {
            Flag::Short(_) | Flag::Long(_) => self
                .named(flag)
                .filter_map(|o| match (&o.value, &o.guessed) {
                    (Some(value), _) => Some(value.clone()),
                    // Not in the grammar: assume the worst, that it takes a value.
                    (None, Some(g)) if !g.tail.is_empty() => Some(Arg::plain(&g.tail)),
                    (None, Some(g)) => self.args.get(g.at + 1).cloned(),
                    (None, None) => None,
                })
                .collect(),
            Flag::Word(word) | Flag::Prefix(word) => self
                .option_words()
                .filter(|(_, t)| *t == word)
                .filter_map(|(i, _)| self.args.get(i + 1).cloned())
                .collect(),
        }
    }

    /// Whether any option was given at all.
    pub fn any_option(&self) -> bool {
        !self.words.is_empty()
    }
}

/// An argument that is not fixed text where an option could be: an expansion (which word
/// splitting may also break into several words) or a pattern that may match `-x` names.
fn may_be_option(arg: &Arg) -> bool {
    arg.expanded || (arg.glob && !arg.process && arg.star.starts_with(['*', '?', '[']))
}
