//! The one escaping function for text a person reads: the owner's CLI (`protocol
//! approvals`, `approve`, `reject`, `audit`, `service`) and the service's log lines.
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
//! | C1 controls (U+0080–U+009F), invisible format characters (category Cf: bidi controls, zero-width characters, tags, …), U+2028 and U+2029 (Zl, Zp), every space but U+0020 (Zs: U+00A0, U+2000–U+200A, U+3000, …) and the letters and marks that draw as blanks (Hangul fillers, U+2800, U+034F, …) | `\u{X}`, lowercase hex without leading zeros: `\u{85}`, `\u{202e}`, `\u{3000}` |
//! | a run of more than 8 spaces (U+0020) | `\x20{N}`, N their number: blank screenfuls cannot push the start of a value off the terminal, or line a later part of it up where a field of its own would start |
//! | a byte that is not UTF-8 ([`Shown::lossy`] only) | `\xNN`, always 80–ff, so never confused with a C0 escape |
//!
//! A value longer than its bound ([`DEFAULT_MAX_BYTES`], or [`Shown::max_bytes`]) is cut
//! on a character boundary and ends with ` … [cut: N bytes in all]`, N being the input's
//! full length in bytes. So a value is always one line, and every character of it that a
//! terminal would not draw as itself is named.
//!
//! Printable text is untouched, whatever its script: letters, digits, punctuation, single
//! spaces, combining marks, emoji. Variation selectors are not escaped (emoji need them).

use std::fmt::{self, Display, Write as _};

/// Bytes of a value shown before it is cut, unless [`Shown::max_bytes`] says otherwise.
pub const DEFAULT_MAX_BYTES: usize = 1024;
/// Spaces in a row shown as they are; a longer run is shown as `\x20{N}`.
pub const MAX_SPACES: usize = 8;

/// Code points shown as `\u{X}` besides C0 and DEL: C1 controls, Unicode's format
/// characters (general category Cf, Unicode 15.1) and the line and paragraph separators
/// (Zl, Zp). Inclusive ranges, sorted.
const HIDDEN: &[(u32, u32)] = &[
    (0x0080, 0x009F), // C1 controls (Cc): CSI, NEL, OSC … act like ESC sequences
    (0x00A0, 0x00A0), // no-break space (Zs)
    (0x00AD, 0x00AD), // soft hyphen
    (0x034F, 0x034F), // combining grapheme joiner (draws nothing)
    (0x0600, 0x0605), // Arabic number signs
    (0x061C, 0x061C), // Arabic letter mark (bidi)
    (0x06DD, 0x06DD), // Arabic end of ayah
    (0x070F, 0x070F), // Syriac abbreviation mark
    (0x0890, 0x0891), // Arabic pound and piastre marks above
    (0x08E2, 0x08E2), // Arabic disputed end of ayah
    (0x115F, 0x1160), // Hangul choseong and jungseong fillers (draw as blanks)
    (0x1680, 0x1680), // Ogham space mark (Zs)
    (0x17B4, 0x17B5), // Khmer inherent vowels (draw nothing)
    (0x180B, 0x180F), // Mongolian variation selectors and vowel separator
    // En quad … hair space (Zs), then zero-width space, ZWNJ, ZWJ, LRM, RLM.
    (0x2000, 0x200F),
    (0x2028, 0x2029), // line separator (Zl), paragraph separator (Zp)
    (0x202A, 0x202F), // bidi embeddings and overrides, narrow no-break space (Zs)
    // Medium mathematical space (Zs), word joiner, invisible operators, bidi isolates,
    // deprecated format characters; the unassigned U+2065 among them is as invisible.
    (0x205F, 0x206F),
    (0x2800, 0x2800),   // braille pattern blank
    (0x3000, 0x3000),   // ideographic space (Zs)
    (0x3164, 0x3164),   // Hangul filler
    (0xFEFF, 0xFEFF),   // zero-width no-break space (byte order mark)
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
    (0xFFF9, 0xFFFB),   // interlinear annotation controls
    (0x110BD, 0x110BD), // Kaithi number sign
    (0x110CD, 0x110CD), // Kaithi number sign above
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol format controls
    (0xE0001, 0xE0001), // language tag
    (0xE0020, 0xE007F), // tag characters
];

/// Whether `c` is shown as `\u{X}`.
fn hidden(c: char) -> bool {
    let c = u32::from(c);
    // Most text is below the first range: one comparison.
    c >= 0x80
        && HIDDEN
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

impl Display for Shown<'_> {
    /// Width, fill and precision are not applied: padding would count escapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Escaper {
            out: f,
            max: self.max,
            seen: 0,
            cut: false,
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
            } else if hidden(c) {
                self.out.write_str(&s[run..at])?;
                write!(self.out, "\\u{{{:x}}}", u32::from(c))?;
            } else if c == ' ' {
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
                continue;
            }
            run = end;
        }
        self.out.write_str(&s[run..])?;
        self.seen += s.len();
        Ok(())
    }

    fn invalid(&mut self, b: u8) -> fmt::Result {
        self.seen += 1;
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
        // Neighbours of the ranges are printable and left alone.
        for c in [
            '\u{ac}',
            '\u{ae}',
            '\u{5ff}',
            '\u{606}',
            '\u{2027}',
            '\u{2070}',
            '\u{fffc}',
            '\u{1d172}',
            '\u{1d17b}',
            '\u{e0100}',
        ] {
            assert_eq!(shown(&c.to_string()), c.to_string(), "{c:?}");
        }
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
    fn the_table_is_sorted_and_disjoint() {
        for pair in HIDDEN.windows(2) {
            assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0, "{pair:x?}");
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
}
