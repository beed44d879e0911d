//! Modified UTF-7 (RFC 3501 §5.1.3, IMAP's mailbox-name encoding): what the Unicode IME
//! of Appium's Settings helper decodes from the keys `input text` sends (docs/PROTOCOLS.md,
//! "Any text").
//!
//! Printable US-ASCII (0x20–0x7e) stands for itself, except `&`, written `&-`. Every run
//! of other characters becomes `&`, the modified BASE64 of its UTF-16BE code units (the
//! BASE64 alphabet with `,` for `/`, no `=` padding), and `-`. The output is printable
//! ASCII only, so `input text` can type every byte of it.

/// The modified BASE64 alphabet (RFC 3501 §5.1.3: RFC 2045's with `,` for `/`).
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

/// Whether `c` stands for itself in modified UTF-7 (`&` does not: it is `&-`).
pub fn is_direct(c: char) -> bool {
    matches!(c, ' '..='~') && c != '&'
}

/// `text` in modified UTF-7.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut run: Vec<u16> = Vec::new();
    for c in text.chars() {
        if is_direct(c) {
            flush(&mut run, &mut out);
            out.push(c);
        } else if c == '&' {
            flush(&mut run, &mut out);
            out.push_str("&-");
        } else {
            let mut units = [0u16; 2];
            run.extend_from_slice(c.encode_utf16(&mut units));
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Write `run` (UTF-16 code units) as `&BASE64-` and empty it.
fn flush(run: &mut Vec<u16>, out: &mut String) {
    if run.is_empty() {
        return;
    }
    let bytes: Vec<u8> = run.iter().flat_map(|u| u.to_be_bytes()).collect();
    out.push('&');
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        // 1 byte gives 2 characters, 2 give 3, 3 give 4; no padding.
        for i in 0..=chunk.len() {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[index as usize]));
        }
    }
    out.push('-');
    run.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3501 §5.1.3's own example, and vectors from Python, written as RFC 3501
    /// defines the encoding with Python's own UTF-16 codec and BASE64 (no code shared with
    /// [`encode`]): each run of characters outside 0x20–0x7e becomes `&`, the BASE64 of its
    /// UTF-16BE bytes without `=` and with `,` for `/`, and `-`; `&` is `&-`. Produced with:
    ///
    /// ```text
    /// python3 -c 'import re,sys,base64
    /// for s in sys.argv[1:]:
    ///     print(repr(s), re.sub(r"[^\x20-\x7e]+|&", lambda m: "&-" if m[0] == "&" else "&"
    ///         + base64.b64encode(m[0].encode("utf-16-be")).decode().rstrip("=").replace("/", ",")
    ///         + "-", s))' ...
    /// ```
    const VECTORS: &[(&str, &str)] = &[
        ("~peter/mail/台北/日本語", "~peter/mail/&U,BTFw-/&ZeVnLIqe-"),
        ("hello world", "hello world"),
        ("", ""),
        ("&", "&-"),
        ("a&b&&c", "a&-b&-&-c"),
        ("ä", "&AOQ-"),
        ("Grüße", "Gr&APwA3w-e"),
        ("日本", "&ZeVnLA-"),
        ("😀", "&2D3eAA-"),
        ("a😀b", "a&2D3eAA-b"),
        ("שלום עולם", "&BekF3AXVBd0- &BeIF1QXcBd0-"),
        ("e\u{301}", "e&AwE-"),
        ("line1\nline2", "line1&AAo-line2"),
        ("tab\there", "tab&AAk-here"),
        ("1\n\n2", "1&AAoACg-2"),
        ("€100 & 50% off", "&IKw-100 &- 50% off"),
        ("~\\+-,/", "~\\+-,/"),
        ("Ünïcödé", "&ANw-n&AO8-c&APY-d&AOk-"),
        ("中文输入", "&Ti1lh4+TUWU-"),
        ("👍🏽", "&2D3cTdg83,0-"),
    ];

    #[test]
    fn matches_rfc_3501_and_python() {
        for (text, want) in VECTORS {
            assert_eq!(encode(text), *want, "{text:?}");
        }
    }

    #[test]
    fn output_is_printable_ascii_that_input_text_can_type() {
        for (text, _) in VECTORS {
            let e = encode(text);
            assert!(e.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{e:?}");
        }
        let all: String = (0u32..0x11_0000)
            .filter_map(char::from_u32)
            .step_by(97)
            .collect();
        assert!(encode(&all).bytes().all(|b| (0x20..=0x7e).contains(&b)));
    }

    /// The same check against Python's codec for many strings at once, where python3 is
    /// installed: an implementation this one does not share any code with.
    #[test]
    fn agrees_with_python_on_many_strings() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let script = "import re,sys,json,base64\n\
            for line in sys.stdin:\n\
            \x20   s = json.loads(line)\n\
            \x20   print(json.dumps(re.sub(r'[^\\x20-\\x7e]+|&', lambda m: '&-' if m[0] == '&' \
            else '&' + base64.b64encode(m[0].encode('utf-16-be')).decode().rstrip('=')\
            .replace('/', ',') + '-', s)))\n";
        let Ok(mut child) = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        else {
            nl2sh_proto::test_skip::skip("python3 is not installed");
            return;
        };
        // Deterministic strings mixing ASCII, `&`, controls, BMP and astral characters.
        let pool: Vec<char> = "aZ0 &-+,/~%s\n\tä€ש日😀👍\u{301}\u{200f}\u{ffff}\u{10ffff}"
            .chars()
            .collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let inputs: Vec<String> = (0..500)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let len = (seed % 12) as usize;
                (0..len)
                    .map(|i| pool[((seed >> (i * 5)) % pool.len() as u64) as usize])
                    .collect()
            })
            .collect();
        let mut stdin = child.stdin.take().unwrap();
        for s in &inputs {
            writeln!(stdin, "{}", serde_json::to_string(s).unwrap()).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let answers: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(answers.len(), inputs.len());
        for (s, want) in inputs.iter().zip(&answers) {
            assert_eq!(&encode(s), want, "{s:?}");
        }
    }
}
