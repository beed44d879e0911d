//! The one escaping function for text a person reads: the owner's CLI (`protocol
//! approvals`, `approve`, `reject`, `audit`, `service`), the terminal console, the Web
//! console and the root manager's WebUI (both are sent text already escaped here) and the
//! service's log lines.
//!
//! An action, a reason, a task id or a tool's or model's text is shown with everything
//! that could make the terminal show something other than the text made visible, so what
//! the owner reads is what runs (docs/APPROVALS.md, "How requests are shown"). [`Shown`] is a [`Display`] wrapper: it
//! escapes while it writes, so `format!`, `println!` and `tracing` fields
//! (`tool = %Shown::new(&tool)`) use it without a copy.
//!
//! Output forms (the rest of the text is written as it is):
//!
//! | input | shown as |
//! |---|---|
//! | `\` | `\\` (so no input can fake one of the escapes below) |
//! | line feed, carriage return, tab | `\n`, `\r`, `\t` |
//! | other C0 controls (U+0000–U+001F) and DEL (U+007F) | `\xNN`, two lowercase hex digits: `\x1b`, `\x7f` |
//! | every other code point that draws nothing or is not text: general categories Cc (C1 controls U+0080–U+009F), Cf (format: bidi controls, zero-width characters, tags, …), Co (private use), Cn (unassigned, noncharacters among them), Cs (surrogates); Zl, Zp (U+2028, U+2029) and Zs but U+0020 (U+00A0, U+2000–U+200A, U+3000, …); Default_Ignorable_Code_Point (variation selectors U+FE00–U+FE0F and U+E0100–U+E01EF, Hangul fillers, U+034F, the tag block U+E0000–U+E0FFF, …); the characters that draw as blanks ([`BLANKS`]: U+2800, U+16FE4, …) | `\u{X}`, lowercase hex without leading zeros: `\u{85}`, `\u{202e}`, `\u{fe0f}` |
//! | U+FE0E or U+FE0F directly after a character that has a text and an emoji presentation (Unicode's emoji-variation-sequences: `❤`, `©`, `#`, …) | itself: it visibly changes that character (`❤️`), so emoji stay readable |
//! | a combining mark (Mn, Mc, Me) at the start of a value or after a space, an escape or anything else not drawn as itself | `\u{X}`: it could sit on nothing, or on the last character of an escape, and change what that looks like. After a letter, digit, punctuation or symbol shown as itself (or a mark on one) it is shown as itself: `e\u{301}` is `é` |
//! | a run of more than 8 spaces (U+0020) | `\x20{N}`, N their number: blank screenfuls cannot push the start of a value off the terminal, or line a later part of it up where a field of its own would start |
//! | a byte that is not UTF-8 ([`Shown::lossy`] only; an encoded surrogate is one) | `\xNN`, always 80–ff, so never confused with a C0 escape |
//!
//! A value longer than its bound ([`DEFAULT_MAX_BYTES`], or [`Shown::max_bytes`]) is cut
//! on a character boundary and ends with ` … [cut: N bytes in all]`, N being the input's
//! full length in bytes. So a value is always one line, and every character of it that a
//! terminal would not draw as itself is named.
//!
//! What is left as it is: letters, digits, punctuation and symbols of every script
//! (emoji among them: they are symbols), single spaces, and combining marks on one of
//! those. Variation selectors are escaped unless they select an emoji's or a symbol's
//! presentation right after it: a selector on a letter (`cache\u{fe0f}`), an ideographic
//! one (U+E0100…) or a second one in a row draws nothing and could make two names that
//! look alike differ. Zero-width joiners are escaped too, so an emoji ZWJ sequence shows
//! its parts: `👨\u{200d}👩`.
//!
//! Unicode data: general categories from the crate `unicode-general-category` (Unicode
//! 16.0); Default_Ignorable_Code_Point and the emoji variation bases from the table
//! `display/tables.rs`, made by `scripts/gen-display-tables` from the Unicode Character
//! Database 15.0 (Debian's `unicode-data`). Both sets are the same in 16.0: its
//! Default_Ignorable_Code_Point has the same 4,174 code points, and Emoji 16.0 added no
//! variation sequence (its 7 new emoji are emoji-presentation characters). A character
//! assigned after Unicode 16.0 is unassigned (Cn) here, so it is escaped.

use std::fmt::{self, Display, Write as _};

use unicode_general_category::{get_general_category, GeneralCategory};

mod tables;

/// Bytes of a value shown before it is cut, unless [`Shown::max_bytes`] says otherwise.
pub const DEFAULT_MAX_BYTES: usize = 1024;
/// Spaces in a row shown as they are; a longer run is shown as `\x20{N}`.
pub const MAX_SPACES: usize = 8;

/// Characters of visible categories that draw as blanks, escaped as `\u{X}` like the
/// invisible ones (Default_Ignorable_Code_Point has the Hangul fillers already).
pub const BLANKS: &[char] = &[
    '\u{2800}',  // braille pattern blank (So)
    '\u{13441}', // Egyptian hieroglyph full blank (Lo)
    '\u{13442}', // Egyptian hieroglyph half blank (Lo)
    '\u{16FE4}', // Khitan small script filler (Mn): draws nothing, even on a letter
    '\u{1D159}', // musical symbol null notehead (So)
];

/// How a character other than ASCII is shown.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// As itself.
    Visible,
    /// As itself only on a character shown as itself; else escaped.
    Mark,
    /// As `\u{X}` (U+FE0E and U+FE0F: unless after an emoji variation base).
    Hidden,
}

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// The class of `c`, which is not ASCII.
fn class(c: char) -> Class {
    use GeneralCategory as G;
    if in_table(tables::DEFAULT_IGNORABLE, c) || BLANKS.contains(&c) {
        return Class::Hidden;
    }
    match get_general_category(c) {
        G::NonspacingMark | G::SpacingMark | G::EnclosingMark => Class::Mark,
        G::UppercaseLetter
        | G::LowercaseLetter
        | G::TitlecaseLetter
        | G::ModifierLetter
        | G::OtherLetter
        | G::DecimalNumber
        | G::LetterNumber
        | G::OtherNumber
        | G::ConnectorPunctuation
        | G::DashPunctuation
        | G::OpenPunctuation
        | G::ClosePunctuation
        | G::InitialPunctuation
        | G::FinalPunctuation
        | G::OtherPunctuation
        | G::MathSymbol
        | G::CurrencySymbol
        | G::ModifierSymbol
        | G::OtherSymbol => Class::Visible,
        // Cc, Cf, Co, Cn, Cs, Zs, Zl, Zp, and any category a later version adds.
        _ => Class::Hidden,
    }
}

/// Whether U+FE0E or U+FE0F right after `base` selects how `base` is drawn.
fn emoji_variation_base(base: char) -> bool {
    in_table(tables::EMOJI_VARIATION_BASES, base)
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
    Value(&'a dyn Display),
}

/// Text as a person is shown it: control, bidi and invisible characters escaped, one line,
/// bounded. See the [module documentation](self) for the exact forms.
///
/// ```
/// use nl2sh_proto::display::Shown;
/// let shown = Shown::new("touch F\r\u{1b}[2K\u{202e}x\\y\n").to_string();
/// assert_eq!(shown, r"touch F\r\x1b[2K\u{202e}x\\y\n");
/// ```
#[derive(Clone, Copy)]
pub struct Shown<'a> {
    source: Source<'a>,
    max: usize,
}

impl<'a> Shown<'a> {
    /// `text`, escaped, cut after [`DEFAULT_MAX_BYTES`].
    pub fn new(text: &'a str) -> Self {
        Self {
            source: Source::Text(text),
            max: DEFAULT_MAX_BYTES,
        }
    }

    /// `bytes` decoded as UTF-8, each byte that is not part of a character shown as
    /// `\xNN`; otherwise as [`Shown::new`]. For text read from files and pipes.
    pub fn lossy(bytes: &'a [u8]) -> Self {
        Self {
            source: Source::Bytes(bytes),
            max: DEFAULT_MAX_BYTES,
        }
    }

    /// What `value` displays (an error, a path), escaped as [`Shown::new`]; the bound counts
    /// the bytes `value` writes.
    pub fn display(value: &'a dyn Display) -> Self {
        Self {
            source: Source::Value(value),
            max: DEFAULT_MAX_BYTES,
        }
    }

    /// Cut after `max` bytes of the input instead (an action is shown whole).
    #[must_use]
    pub fn max_bytes(self, max: usize) -> Self {
        Self { max, ..self }
    }
}

/// Text shown so the owner can read it as its caller sent it and paste it back: a
/// command line, an action's argv. [`as_sent`] makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsSent {
    /// The text itself when every character of every line is shown as itself (a
    /// backslash is then just a backslash: `'\''` reads as a shell prints it); else the
    /// whole of it as [`Shown`] writes it, on one line.
    pub text: String,
    /// `true` when `text` is the escaped form: then `\\` is one backslash, and every
    /// other escape names a character that could not be shown.
    pub escaped: bool,
}

/// Blank lines in a row a text shown as sent may hold: more could scroll the start of a
/// request off the terminal, as a run of spaces could (see [`MAX_SPACES`]).
pub const MAX_BLANK_LINES: usize = 2;

/// `text` as its caller sent it where that is safe to show: lines (split at line feeds)
/// each of which [`Shown`] would write unchanged but for doubling its backslashes, no
/// more than [`MAX_BLANK_LINES`] blank ones in a row, and at most `max_bytes` in all.
/// Anything else (a control or invisible character, a long run of spaces or of blank
/// lines, a carriage return, a cut) shows the whole text escaped, on one line, and says so.
pub fn as_sent(text: &str, max_bytes: usize) -> AsSent {
    let mut blanks = 0;
    let plain = text.len() <= max_bytes
        && text.split('\n').all(|line| {
            blanks = if line.trim_matches(' ').is_empty() {
                blanks + 1
            } else {
                0
            };
            blanks <= MAX_BLANK_LINES
                && Shown::new(line).max_bytes(usize::MAX).to_string() == line.replace('\\', "\\\\")
        });
    if plain {
        AsSent {
            text: text.to_string(),
            escaped: false,
        }
    } else {
        AsSent {
            text: Shown::new(text).max_bytes(max_bytes).to_string(),
            escaped: true,
        }
    }
}

impl Display for Shown<'_> {
    /// Width, fill and precision are not applied: padding would count escapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Escaper {
            out: f,
            max: self.max,
            seen: 0,
            cut: false,
            base: None,
        };
        match self.source {
            Source::Text(text) => out.text(text)?,
            Source::Bytes(bytes) => {
                for chunk in bytes.utf8_chunks() {
                    out.text(chunk.valid())?;
                    for &b in chunk.invalid() {
                        out.invalid(b)?;
                    }
                }
            }
            Source::Value(value) => write!(out, "{value}")?,
        }
        out.finish()
    }
}

/// Writes what it is given escaped, until `max` input bytes; counts the rest.
struct Escaper<'f, 'g> {
    out: &'f mut fmt::Formatter<'g>,
    max: usize,
    /// Input bytes so far, shown or not.
    seen: usize,
    cut: bool,
    /// The last character written as itself, if the last thing written was one (not a
    /// space, an escape or nothing yet): what a combining mark or a variation selector
    /// would draw on.
    base: Option<char>,
}

impl Escaper<'_, '_> {
    fn text(&mut self, s: &str) -> fmt::Result {
        if self.cut {
            self.seen += s.len();
            return Ok(());
        }
        // Runs of characters shown as they are go out in one write.
        let mut run = 0;
        let mut chars = s.char_indices();
        while let Some((at, c)) = chars.next() {
            let end = at + c.len_utf8();
            if self.seen + end > self.max {
                self.out.write_str(&s[run..at])?;
                self.cut = true;
                self.seen += s.len();
                return Ok(());
            }
            if c.is_ascii() {
                let simple = match c {
                    '\\' => Some("\\\\"),
                    '\n' => Some("\\n"),
                    '\r' => Some("\\r"),
                    '\t' => Some("\\t"),
                    _ => None,
                };
                if let Some(escape) = simple {
                    self.out.write_str(&s[run..at])?;
                    self.out.write_str(escape)?;
                } else if c < ' ' || c == '\u{7f}' {
                    self.out.write_str(&s[run..at])?;
                    write!(self.out, "\\x{:02x}", u32::from(c))?;
                } else if c == ' ' {
                    self.base = None;
                    let spaces = s[at..].bytes().take_while(|b| *b == b' ').count();
                    if spaces <= MAX_SPACES {
                        continue;
                    }
                    self.out.write_str(&s[run..at])?;
                    let room = self.max.saturating_sub(self.seen + at);
                    write!(self.out, "\\x20{{{}}}", spaces.min(room))?;
                    if spaces > room {
                        self.cut = true;
                        self.seen += s.len();
                        return Ok(());
                    }
                    for _ in 1..spaces {
                        chars.next();
                    }
                    run = at + spaces;
                    continue;
                } else {
                    self.base = Some(c);
                    continue;
                }
                self.base = None;
                run = end;
                continue;
            }
            let as_itself = match class(c) {
                Class::Visible => true,
                Class::Mark => self.base.is_some(),
                Class::Hidden => {
                    matches!(c, '\u{fe0e}' | '\u{fe0f}')
                        && self.base.is_some_and(emoji_variation_base)
                }
            };
            if as_itself {
                self.base = Some(c);
                continue;
            }
            self.out.write_str(&s[run..at])?;
            write!(self.out, "\\u{{{:x}}}", u32::from(c))?;
            self.base = None;
            run = end;
        }
        self.out.write_str(&s[run..])?;
        self.seen += s.len();
        Ok(())
    }

    fn invalid(&mut self, b: u8) -> fmt::Result {
        self.seen += 1;
        self.base = None;
        if self.cut || self.seen > self.max {
            self.cut = true;
            return Ok(());
        }
        write!(self.out, "\\x{b:02x}")
    }

    fn finish(self) -> fmt::Result {
        if self.cut {
            write!(self.out, " … [cut: {} bytes in all]", self.seen)?;
        }
        Ok(())
    }
}

impl fmt::Write for Escaper<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.text(s)
    }
}

#[cfg(test)]
mod as_sent_tests {
    use super::*;

    #[test]
    fn a_command_that_can_be_shown_is_shown_as_sent() {
        let quoted = r"echo 'it'\''s' \x1b";
        assert_eq!(
            as_sent(quoted, 100),
            AsSent {
                text: quoted.into(),
                escaped: false
            }
        );
        let script = "cd /tmp\nls -l | grep 'a b'\n";
        assert_eq!(as_sent(script, 100).text, script);
        assert!(!as_sent("日本語 ❤️ e\u{301}", 100).escaped);
    }

    #[test]
    fn anything_that_cannot_be_shown_escapes_the_whole_and_says_so() {
        for (text, shown) in [
            ("rm x\u{202e}y \\n", r"rm x\u{202e}y \\n"),
            ("a\rb", r"a\rb"),
            ("a\tb", r"a\tb"),
            ("echo 1          2", r"echo 1\x20{10}2"),
            ("\u{1b}[2J", r"\x1b[2J"),
        ] {
            assert_eq!(
                as_sent(text, 100),
                AsSent {
                    text: shown.into(),
                    escaped: true
                },
                "{text:?}"
            );
        }
        // Blank lines that would scroll the start of a request off the screen: escaped,
        // so the whole text is one line again. Two in a row are shown as they are.
        let padded = format!("rm -rf /data{}echo done", "\n".repeat(40));
        let shown = as_sent(&padded, 1000);
        assert!(shown.escaped);
        assert_eq!(
            shown.text,
            format!("rm -rf /data{}echo done", r"\n".repeat(40))
        );
        assert!(as_sent(&format!("a{}b", "\n  \n".repeat(20)), 1000).escaped);
        assert!(!as_sent("a\n\n\nb\n", 100).escaped);
        // Too long to show whole: cut, escaped, and marked.
        let long = as_sent(&"a".repeat(50), 10);
        assert!(long.escaped);
        assert!(
            long.text.starts_with("aaaaaaaaaa … [cut: 50 bytes"),
            "{}",
            long.text
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &str) -> String {
        Shown::new(s).to_string()
    }

    #[test]
    fn c0_controls_are_hex_escapes() {
        assert_eq!(
            shown("a\u{0}b\u{7}c\u{8}d\u{1b}[2K"),
            r"a\x00b\x07c\x08d\x1b[2K"
        );
        assert_eq!(shown("\u{c}\u{b}\u{1f}"), r"\x0c\x0b\x1f");
        // Every C0 control but the three named ones.
        for c in (0u8..0x20)
            .map(char::from)
            .filter(|c| !"\n\r\t".contains(*c))
        {
            assert_eq!(shown(&c.to_string()), format!("\\x{:02x}", u32::from(c)));
        }
    }

    #[test]
    fn del_is_a_hex_escape() {
        assert_eq!(shown("rm\u{7f}\u{7f}x"), r"rm\x7f\x7fx");
    }

    #[test]
    fn c1_controls_are_unicode_escapes() {
        // CSI (U+009B) starts an escape sequence on its own in some terminals; NEL is a
        // line break.
        assert_eq!(shown("a\u{9b}2Kb\u{85}c"), r"a\u{9b}2Kb\u{85}c");
        assert_eq!(shown("\u{80}\u{9f}"), r"\u{80}\u{9f}");
        // The first character after C1, a no-break space, is a space other than U+0020:
        // named too; what follows it is printable.
        assert_eq!(shown("\u{a0}é"), r"\u{a0}é");
        assert_eq!(shown("\u{a1}é"), "\u{a1}é");
    }

    #[test]
    fn bidi_controls_are_unicode_escapes() {
        assert_eq!(
            shown("ls \u{202e}txt.exe\u{202c}"),
            r"ls \u{202e}txt.exe\u{202c}"
        );
        assert_eq!(
            shown(
                "\u{202a}\u{202b}\u{202d}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{61c}"
            ),
            r"\u{202a}\u{202b}\u{202d}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{61c}"
        );
    }

    #[test]
    fn zero_width_characters_are_unicode_escapes() {
        assert_eq!(
            shown("r\u{200b}m \u{200c}\u{200d}\u{2060}\u{feff}x"),
            r"r\u{200b}m \u{200c}\u{200d}\u{2060}\u{feff}x"
        );
    }

    #[test]
    fn other_format_characters_are_unicode_escapes() {
        for (c, want) in [
            ('\u{ad}', r"\u{ad}"),
            ('\u{600}', r"\u{600}"),
            ('\u{605}', r"\u{605}"),
            ('\u{6dd}', r"\u{6dd}"),
            ('\u{70f}', r"\u{70f}"),
            ('\u{890}', r"\u{890}"),
            ('\u{891}', r"\u{891}"),
            ('\u{8e2}', r"\u{8e2}"),
            ('\u{180e}', r"\u{180e}"),
            ('\u{2061}', r"\u{2061}"),
            ('\u{2064}', r"\u{2064}"),
            ('\u{2065}', r"\u{2065}"),
            ('\u{206f}', r"\u{206f}"),
            ('\u{fff9}', r"\u{fff9}"),
            ('\u{fffb}', r"\u{fffb}"),
            ('\u{110bd}', r"\u{110bd}"),
            ('\u{110cd}', r"\u{110cd}"),
            ('\u{13430}', r"\u{13430}"),
            ('\u{1343f}', r"\u{1343f}"),
            ('\u{1bca0}', r"\u{1bca0}"),
            ('\u{1bca3}', r"\u{1bca3}"),
            ('\u{1d173}', r"\u{1d173}"),
            ('\u{1d17a}', r"\u{1d17a}"),
            ('\u{e0001}', r"\u{e0001}"),
            ('\u{e0020}', r"\u{e0020}"),
            ('\u{e0041}', r"\u{e0041}"),
            ('\u{e007f}', r"\u{e007f}"),
        ] {
            assert_eq!(shown(&format!("a{c}b")), format!("a{want}b"), "{c:?}");
        }
        // Neighbours of the ranges are printable and left alone (after a letter: U+1D172
        // and U+1D17B are combining marks). U+05FF, once here, is unassigned: escaped.
        for c in [
            '\u{ac}',
            '\u{ae}',
            '\u{5f4}',
            '\u{606}',
            '\u{2027}',
            '\u{2070}',
            '\u{fffc}',
            '\u{1d172}',
            '\u{1d17b}',
        ] {
            assert_eq!(shown(&format!("a{c}")), format!("a{c}"), "{c:?}");
        }
        assert_eq!(shown("\u{5ff}"), r"\u{5ff}");
    }

    #[test]
    fn line_and_paragraph_separators_are_unicode_escapes() {
        assert_eq!(shown("a\u{2028}b\u{2029}c"), r"a\u{2028}b\u{2029}c");
    }

    #[test]
    fn a_backslash_is_doubled_so_escapes_cannot_be_faked() {
        assert_eq!(shown(r"a\b"), r"a\\b");
        // The text `\x1b` and a real ESC are told apart.
        assert_eq!(shown(r"\x1b"), r"\\x1b");
        assert_eq!(shown("\\\u{1b}"), r"\\\x1b");
        assert_eq!(shown(r"\u{202e}"), r"\\u{202e}");
    }

    #[test]
    fn newline_carriage_return_and_tab_keep_the_value_on_one_line() {
        let out = shown("touch F # \r\u{1b}[2K    action: ls\n    why: fake\tx\r\n");
        assert_eq!(
            out,
            r"touch F # \r\x1b[2K    action: ls\n    why: fake\tx\r\n"
        );
        assert!(!out.contains(['\n', '\r', '\t']));
    }

    #[test]
    fn a_long_value_is_cut_with_a_marker_and_its_length() {
        let long = "a".repeat(20480);
        let out = shown(&long);
        assert_eq!(
            out,
            format!(
                "{} … [cut: 20480 bytes in all]",
                "a".repeat(DEFAULT_MAX_BYTES)
            )
        );
        assert_eq!(
            Shown::new("abcdef").max_bytes(3).to_string(),
            "abc … [cut: 6 bytes in all]"
        );
        // Exactly at the bound: whole, no marker.
        assert_eq!(Shown::new("abc").max_bytes(3).to_string(), "abc");
        // A cut never splits a character: "é" is two bytes.
        assert_eq!(
            Shown::new("aéb").max_bytes(2).to_string(),
            "a … [cut: 4 bytes in all]"
        );
        // The bound counts input bytes; escapes are shown whole.
        assert_eq!(
            Shown::new("\u{1b}\u{1b}\u{1b}").max_bytes(2).to_string(),
            r"\x1b\x1b … [cut: 3 bytes in all]"
        );
        // A displayed value and bytes are cut the same way.
        let value: &dyn Display = &"abcdef";
        assert_eq!(
            Shown::display(value).max_bytes(4).to_string(),
            "abcd … [cut: 6 bytes in all]"
        );
        assert_eq!(
            Shown::lossy(b"ab\xffcd").max_bytes(3).to_string(),
            r"ab\xff … [cut: 5 bytes in all]"
        );
    }

    #[test]
    fn printable_text_is_unchanged() {
        for text in [
            "",
            "/bin/sh -c 'ls -la /tmp' | grep \"x\" && echo $HOME; ~!@#%^&*()[]{}<>?=+-_`",
            "Grüße, café, naïve, Ελληνικά, русский, עברית, العربية, हिन्दी, 日本語, 한국어, ไทย",
            "emoji 😀🚀👍🏽 ❤️ 🇩🇪",
            "combining: e\u{301} a\u{308}",
            "spaces: a  b        c",
        ] {
            assert_eq!(shown(text), text);
        }
        // Spaces other than U+0020 are named (they were once left as they are).
        assert_eq!(
            shown("spaces: a  b\u{a0}c\u{3000}d"),
            r"spaces: a  b\u{a0}c\u{3000}d"
        );
    }

    #[test]
    fn displayed_values_are_escaped() {
        let e = std::io::Error::other("bad\u{1b}]0;x\u{7}name");
        assert_eq!(Shown::display(&e).to_string(), r"bad\x1b]0;x\x07name");
    }

    #[test]
    fn lossy_shows_invalid_bytes_as_hex() {
        assert_eq!(
            Shown::lossy(b"ok \xff\xfe \xe2\x80 \x1b[1m caf\xc3\xa9\n").to_string(),
            r"ok \xff\xfe \xe2\x80 \x1b[1m café\n"
        );
        // Valid UTF-8 is shown as text is.
        let text = "a\u{202e}b\\c\u{85}";
        assert_eq!(Shown::lossy(text.as_bytes()).to_string(), shown(text));
    }

    #[test]
    fn the_tables_are_sorted_and_disjoint() {
        for table in [tables::DEFAULT_IGNORABLE, tables::EMOJI_VARIATION_BASES] {
            for pair in table.windows(2) {
                assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0, "{pair:x?}");
            }
        }
    }

    #[test]
    fn spaces_and_blanks_cannot_hide_or_line_up_a_value() {
        // Eight spaces are spaces; more are counted, so blank screenfuls cannot push the
        // start of an action off the terminal or start a fake field on a row of its own.
        assert_eq!(shown("a        b"), "a        b");
        assert_eq!(shown("a         b"), r"a\x20{9}b");
        let spoof = format!("touch F{}    action: ls", " ".repeat(4000));
        assert_eq!(
            Shown::new(&spoof).max_bytes(16 * 1024).to_string(),
            r"touch F\x20{4004}action: ls"
        );
        // Every other space and the characters that draw as blanks are named.
        for (c, name) in [
            ('\u{a0}', r"\u{a0}"),
            ('\u{2003}', r"\u{2003}"),
            ('\u{202f}', r"\u{202f}"),
            ('\u{205f}', r"\u{205f}"),
            ('\u{3000}', r"\u{3000}"),
            ('\u{3164}', r"\u{3164}"),
            ('\u{ffa0}', r"\u{ffa0}"),
            ('\u{115f}', r"\u{115f}"),
            ('\u{2800}', r"\u{2800}"),
            ('\u{34f}', r"\u{34f}"),
        ] {
            assert_eq!(shown(&format!("a{c}b")), format!("a{name}b"));
        }
        // A long run at the bound is counted, not written out.
        let cut = Shown::new(&" ".repeat(5000)).max_bytes(100).to_string();
        assert_eq!(cut, r"\x20{100} … [cut: 5000 bytes in all]");
    }

    /// What the escape of a character that is not shown as itself looks like.
    fn escape_of(c: char) -> String {
        match c {
            '\\' => r"\\".to_string(),
            '\n' => r"\n".to_string(),
            '\r' => r"\r".to_string(),
            '\t' => r"\t".to_string(),
            c if c < ' ' || c == '\u{7f}' => format!("\\x{:02x}", u32::from(c)),
            c => format!("\\u{{{:x}}}", u32::from(c)),
        }
    }

    /// Every code point through the function, alone (the start of a value), after a
    /// letter and after a space, against its general category: shown as itself only if it
    /// is a letter, number, punctuation or symbol, U+0020, or a mark on a character shown
    /// as itself; else exactly its escape. A category left out of [`class`] (or a new one)
    /// fails here.
    #[test]
    fn every_code_point_is_shown_as_itself_only_if_it_draws() {
        use GeneralCategory as G;
        let mut surrogates = 0;
        let mut as_itself = 0;
        let mut escaped = 0;
        for cp in 0..=0x10FFFFu32 {
            let Some(c) = char::from_u32(cp) else {
                // U+D800–U+DFFF: no `char`, so no `str` holds one; as bytes they are not
                // UTF-8 and [`Shown::lossy`] shows them byte by byte (tested below).
                assert!((0xD800..=0xDFFF).contains(&cp), "{cp:x}");
                surrogates += 1;
                continue;
            };
            let category = get_general_category(c);
            let invisible = in_table(tables::DEFAULT_IGNORABLE, c) || BLANKS.contains(&c);
            let drawn = matches!(
                category,
                G::UppercaseLetter
                    | G::LowercaseLetter
                    | G::TitlecaseLetter
                    | G::ModifierLetter
                    | G::OtherLetter
                    | G::DecimalNumber
                    | G::LetterNumber
                    | G::OtherNumber
                    | G::ConnectorPunctuation
                    | G::DashPunctuation
                    | G::OpenPunctuation
                    | G::ClosePunctuation
                    | G::InitialPunctuation
                    | G::FinalPunctuation
                    | G::OtherPunctuation
                    | G::MathSymbol
                    | G::CurrencySymbol
                    | G::ModifierSymbol
                    | G::OtherSymbol
            ) && !invisible
                && c != '\\';
            let mark = matches!(
                category,
                G::NonspacingMark | G::SpacingMark | G::EnclosingMark
            ) && !invisible;
            let itself = c.to_string();
            let escape = escape_of(c);
            let alone = shown(&itself);
            let after_letter = shown(&format!("a{c}"));
            let after_space = shown(&format!("a {c}"));
            if c == ' ' {
                assert_eq!((alone.as_str(), after_letter.as_str()), (" ", "a "));
            } else if drawn {
                assert_eq!(alone, itself, "{cp:04x} {category:?}");
                assert_eq!(after_letter, format!("a{c}"), "{cp:04x} {category:?}");
                assert_eq!(after_space, format!("a {c}"), "{cp:04x} {category:?}");
            } else if mark {
                assert_eq!(alone, escape, "{cp:04x} {category:?}");
                assert_eq!(after_letter, format!("a{c}"), "{cp:04x} {category:?}");
                assert_eq!(after_space, format!("a {escape}"), "{cp:04x} {category:?}");
            } else {
                // Controls, format, private use, unassigned (noncharacters among them),
                // separators, default ignorables, blanks, a backslash: escaped wherever.
                assert_eq!(alone, escape, "{cp:04x} {category:?}");
                assert_eq!(after_letter, format!("a{escape}"), "{cp:04x} {category:?}");
                assert_eq!(after_space, format!("a {escape}"), "{cp:04x} {category:?}");
            }
            // Whatever it is, a character never reaches the output raw unless shown as
            // itself, and an escape is plain ASCII.
            assert!(alone == itself || alone.is_ascii(), "{cp:04x}");
            if alone == itself {
                as_itself += 1;
            } else {
                escaped += 1;
            }
        }
        assert_eq!(surrogates, 0x800);
        // The categories that draw nothing are all escaped; the counts say how many of
        // each were seen, so a change of table or crate shows up here.
        eprintln!("as itself alone: {as_itself}, escaped alone: {escaped}");
        assert_eq!(as_itself + escaped + surrogates, 0x110000);
    }

    #[test]
    fn the_categories_that_draw_nothing_are_escaped() {
        // One of each, by category, besides the tables: a forgotten category fails.
        for (c, category) in [
            ('\u{85}', "Cc"),
            ('\u{200b}', "Cf"),
            ('\u{e000}', "Co"),
            ('\u{f0000}', "Co"),
            ('\u{10fffd}', "Co"),
            ('\u{378}', "Cn"),
            ('\u{fdd0}', "Cn noncharacter"),
            ('\u{fffe}', "Cn noncharacter"),
            ('\u{ffff}', "Cn noncharacter"),
            ('\u{1fffe}', "Cn noncharacter"),
            ('\u{10ffff}', "Cn noncharacter"),
            ('\u{e0000}', "Cn default ignorable"),
            ('\u{e0fff}', "Cn default ignorable"),
            ('\u{2028}', "Zl"),
            ('\u{2029}', "Zp"),
            ('\u{a0}', "Zs"),
            ('\u{fe00}', "Mn variation selector"),
            ('\u{fe0f}', "Mn variation selector"),
            ('\u{e0100}', "Mn variation selector"),
            ('\u{e01ef}', "Mn variation selector"),
            ('\u{180b}', "Mn Mongolian variation selector"),
            ('\u{16fe4}', "Mn filler"),
            ('\u{e0041}', "Cf tag"),
        ] {
            let want = format!("\\u{{{:x}}}", u32::from(c));
            assert_eq!(shown(&format!("a{c}b")), format!("a{want}b"), "{category}");
        }
    }

    /// The attack of issue 36: selectors, tags, noncharacters and private use drew
    /// nothing, so `rm -rf …/cache<U+FE0F>` read as a plain `rm -rf`.
    #[test]
    fn invisible_characters_in_a_command_are_named() {
        assert_eq!(
            shown("rm -rf /data/cache\u{fe0f} /data/b\u{e0100}uild"),
            r"rm -rf /data/cache\u{fe0f} /data/b\u{e0100}uild"
        );
        assert_eq!(
            shown("rm -rf /x\u{e0020}\u{e0041}\u{e007f}y"),
            r"rm -rf /x\u{e0020}\u{e0041}\u{e007f}y"
        );
        assert_eq!(
            shown("cat a\u{fffe}\u{ffff}\u{fdd0}b \u{e000}c\u{16fe4}"),
            r"cat a\u{fffe}\u{ffff}\u{fdd0}b \u{e000}c\u{16fe4}"
        );
        // A selector on a letter after an emoji is named too; so is a second one in a row.
        assert_eq!(
            shown("\u{2764}\u{fe0f}\u{fe0f}x\u{fe0e}"),
            "\u{2764}\u{fe0f}\\u{fe0f}x\\u{fe0e}"
        );
    }

    #[test]
    fn emoji_keep_their_presentation_selectors() {
        for text in [
            "\u{2764}\u{fe0f}",         // red heart
            "\u{2764}\u{fe0e}",         // heart, text presentation
            "\u{a9}\u{fe0f}",           // copyright sign
            "\u{26a0}\u{fe0f} careful", // warning sign
            "#\u{fe0f}\u{20e3}",        // keycap: #, its enclosing mark on the selector
            "1\u{fe0f}\u{20e3}",
            "\u{1f1e9}\u{1f1ea}", // a flag: regional indicators (So)
            "\u{1f44d}\u{1f3fd}", // skin tone modifier (Sk)
        ] {
            assert_eq!(shown(text), text);
        }
        // Only on a character with an emoji variation sequence: 😀 has none.
        assert_eq!(shown("\u{1f600}\u{fe0f}"), "\u{1f600}\\u{fe0f}");
        // VS1 is not a presentation selector.
        assert_eq!(shown("\u{2764}\u{fe00}"), "\u{2764}\\u{fe00}");
        // At the start, after a space or an escape: on nothing.
        assert_eq!(shown("\u{fe0f}"), r"\u{fe0f}");
        assert_eq!(shown("\u{2764} \u{fe0f}"), "\u{2764} \\u{fe0f}");
        // Joiners and tag sequences show their parts.
        assert_eq!(
            shown("\u{1f468}\u{200d}\u{1f469}"),
            "\u{1f468}\\u{200d}\u{1f469}"
        );
        assert_eq!(
            shown("\u{1f3f4}\u{e0067}\u{e0062}\u{e007f}"),
            "\u{1f3f4}\\u{e0067}\\u{e0062}\\u{e007f}"
        );
    }

    #[test]
    fn a_combining_mark_shows_only_on_a_character_drawn_as_itself() {
        // On a letter, or stacked on one: as itself.
        for text in [
            "e\u{301}",
            "e\u{323}\u{302}",
            "x\u{20dd}",
            "क\u{93f}",
            "-\u{338}",
        ] {
            assert_eq!(shown(text), text);
        }
        for (text, want) in [
            // At the start of a value.
            ("\u{301}rm", r"\u{301}rm"),
            // After a space: it would draw as a lone accent and could pass for one.
            ("rm \u{301}-rf", r"rm \u{301}-rf"),
            ("a         \u{301}", r"a\x20{9}\u{301}"),
            // After an escape, where it would sit on the escape's last character.
            ("a\u{200b}\u{301}", r"a\u{200b}\u{301}"),
            ("\u{1b}\u{301}", r"\x1b\u{301}"),
            ("\n\u{20dd}", r"\n\u{20dd}"),
            ("\t\u{301}", r"\t\u{301}"),
            ("\\\u{301}", r"\\\u{301}"),
            ("\u{fe0f}\u{20e3}", r"\u{fe0f}\u{20e3}"),
            // A mark after an escaped mark is on nothing too.
            ("\u{301}\u{302}", r"\u{301}\u{302}"),
        ] {
            assert_eq!(shown(text), want, "{text:?}");
        }
        // Across the pieces a displayed value is written in, and after a byte that is
        // not UTF-8.
        struct Pieces;
        impl Display for Pieces {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a ")?;
                f.write_str("\u{301}e")?;
                f.write_str("\u{301}")
            }
        }
        assert_eq!(Shown::display(&Pieces).to_string(), "a \\u{301}e\u{301}");
        assert_eq!(Shown::lossy(b"\xff\xcc\x81").to_string(), r"\xff\u{301}");
        // An encoded surrogate (U+D800) is not UTF-8: byte by byte.
        assert_eq!(
            Shown::lossy(b"a\xed\xa0\x80b").to_string(),
            r"a\xed\xa0\x80b"
        );
    }

    #[test]
    fn the_unicode_versions_are_the_documented_ones() {
        // The module documentation says which versions the data comes from and why they
        // agree; a new crate or table version has to say so again.
        assert_eq!(unicode_general_category::UNICODE_VERSION, (16, 0, 0));
        assert!(include_str!("display/tables.rs").contains("Database\n// 15.0.0 "));
    }
}
