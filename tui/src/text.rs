//! Small text helpers: wrapping to the terminal's width without losing a character, the
//! OSC 52 clipboard sequence, and time left. (UTC times are proto's clock:
//! [`nl2sh_proto::clock::readable_utc`].)
//!
//! Nothing here escapes: text from a device, a caller, a tool or a model is passed
//! through [`nl2sh_proto::display::Shown`] before it reaches these functions.

use base64::Engine as _;
use unicode_width::UnicodeWidthChar;

/// Columns `c` takes on a terminal (0 for combining marks).
pub(crate) fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

/// Columns `s` takes on a terminal.
pub(crate) fn width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// `text` in lines of at most `first` columns (the first line) and `rest` columns (the
/// others). Every character is kept, in order: the lines joined are `text` again, so a
/// value is never cut by the layout. A line breaks after a space when one is near its
/// end (prose reads better), else between two characters. A character wider than a
/// whole line gets a line of its own.
pub(crate) fn wrap(text: &str, first: usize, rest: usize) -> Vec<String> {
    let first = first.max(1);
    let rest = rest.max(1);
    let mut out = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    let mut limit = first;
    // Byte offset just after the last space in `line`, and the columns up to there.
    let mut space: Option<(usize, usize)> = None;
    for c in text.chars() {
        let cw = char_width(c);
        if used + cw > limit && !line.is_empty() {
            let tail_fits = |at: usize, upto: usize| {
                // The part after the space, plus `c`, must fit the next line.
                let tail = used - upto;
                at < line.len() && upto * 2 >= limit && tail + cw <= rest
            };
            match space {
                Some((at, upto)) if tail_fits(at, upto) => {
                    let tail = line.split_off(at);
                    out.push(std::mem::replace(&mut line, tail));
                    used -= upto;
                }
                _ => {
                    out.push(std::mem::take(&mut line));
                    used = 0;
                }
            }
            limit = rest;
            space = None;
        }
        line.push(c);
        used += cw;
        if c == ' ' {
            space = Some((line.len(), used));
        }
    }
    out.push(line);
    out
}

/// The OSC 52 sequence that asks the terminal to put `text` on the clipboard:
/// `ESC ] 52 ; c ; <base64> BEL`, standard base64 with padding (RFC 4648). Base64 keeps
/// every byte of `text` out of the terminal's parser.
pub fn osc52(text: &str) -> String {
    format!(
        "\u{1b}]52;c;{}\u{7}",
        base64::engine::general_purpose::STANDARD.encode(text)
    )
}

pub(crate) use nl2sh_proto::clock::time_left;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_every_character() {
        let texts = [
            "",
            "short",
            "touch /tmp/x\\u{202e}txt.exe\\x1b[2J\\r\\n evil and then some more words here",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "日本語の文字列は二桁の幅を持つので折り返しに注意が必要です",
            "e\u{301}e\u{301}e\u{301}e\u{301} words  with   spaces",
        ];
        for text in texts {
            for (first, rest) in [(1, 1), (3, 5), (10, 10), (7, 20), (80, 76), (0, 0)] {
                let lines = wrap(text, first, rest);
                assert_eq!(lines.concat(), text, "{text:?} {first} {rest}");
                for (i, line) in lines.iter().enumerate() {
                    let limit = if i == 0 { first } else { rest }.max(1);
                    // Only a single wide character may exceed a one-column line.
                    assert!(
                        width(line) <= limit.max(2),
                        "{line:?} over {limit} in {text:?}"
                    );
                    if limit >= 2 {
                        assert!(width(line) <= limit, "{line:?} over {limit}");
                    }
                }
            }
        }
    }

    #[test]
    fn wrap_prefers_spaces() {
        assert_eq!(
            wrap("hello brave new world", 12, 12),
            ["hello brave ", "new world"]
        );
        // Full lines when there is no space.
        assert_eq!(wrap("abcdefghij", 4, 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4, 4), [""]);
    }

    /// RFC 4648's test vectors, padding included, inside the OSC 52 frame.
    #[test]
    fn osc52_is_standard_base64() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("\u{1b}]0;x\u{7}\n", "G10wO3gHCg=="),
            ("é?>", "w6k/Pg=="),
        ] {
            assert_eq!(osc52(input), format!("\u{1b}]52;c;{want}\u{7}"));
        }
    }

    #[test]
    fn time_left_words() {
        assert_eq!(time_left(0), "expired");
        assert_eq!(time_left(45), "45 s left");
        assert_eq!(time_left(65), "1 min 05 s left");
    }
}
