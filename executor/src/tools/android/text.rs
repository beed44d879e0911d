//! `android.text`: type any text into the focused field, or into an element tapped first
//! (docs/PROTOCOLS.md, "Any text").
//!
//! Printable ASCII goes through `input text` as it always has. Anything else (letters of
//! any script, emoji, combining marks, newlines, tabs) goes through the Unicode IME of
//! Appium's Settings helper: encoded as modified UTF-7 ([`super::utf7`]), which is
//! printable ASCII, typed with the same `input text` while that IME is the input method
//! ([`super::ime`]), which decodes it and commits the text itself.
//!
//! `input` is exec'd directly, not through a shell, so arguments reach it verbatim. The
//! one escape `input text` itself applies is `%s` → space (AOSP `InputShellCommand.
//! sendText`, `Input.sendText` before Android 11), so a space is sent as `%s`, and a `%`
//! followed by `s` in the text is typed by ending one `input text` between them.

use serde_json::{json, Map, Value};

use super::ime::{self, Programs};
use super::target::{self, aim, Aimed};
use super::{command_action, low, render, run_checked, utf7, AndroidTool, ANDROID_TIMEOUT};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::tools::{Prepared, ToolDef, ToolError, ToolOutput};

/// Characters `android.text` types per call.
pub const MAX_TEXT_CHARS: usize = 1000;

/// How `input text` is to type a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typing {
    /// Printable ASCII: the `input text` arguments, one call each.
    Plain(Vec<String>),
    /// Anything else: the arguments that type its modified UTF-7 while the Unicode IME is
    /// the input method.
    UnicodeIme(Vec<String>),
}

impl Typing {
    pub fn args(&self) -> &[String] {
        match self {
            Typing::Plain(a) | Typing::UnicodeIme(a) => a,
        }
    }

    pub fn via(&self) -> &'static str {
        match self {
            Typing::Plain(_) => "input",
            Typing::UnicodeIme(_) => "unicode_ime",
        }
    }
}

/// How to type `text`, or why it cannot be typed: 1–1000 characters; control characters
/// other than newline and tab are refused.
pub fn typing(text: &str) -> Result<Typing, ToolError> {
    let count = text.chars().count();
    if count == 0 || count > MAX_TEXT_CHARS {
        return Err(ToolError::InvalidArguments(format!(
            "`text` must be 1..{MAX_TEXT_CHARS} characters"
        )));
    }
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(ToolError::InvalidArguments(format!(
            "`text` contains the control character U+{:04X}, which no keyboard types; send \
             keys such as ENTER, TAB or DEL with android.key",
            c as u32
        )));
    }
    if text.chars().all(|c| matches!(c, ' '..='~')) {
        Ok(Typing::Plain(input_text_args(text)))
    } else {
        Ok(Typing::UnicodeIme(input_text_args(&utf7::encode(text))))
    }
}

/// The `input text` arguments that type `ascii` (printable ASCII): spaces as `%s`, and a
/// new argument between every `%` and a following `s`, which one argument would turn into
/// a space.
pub fn input_text_args(ascii: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut chars = ascii.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => current.push_str("%s"),
            '%' if chars.peek() == Some(&'s') => {
                current.push('%');
                args.push(std::mem::take(&mut current));
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        args.push(current);
    }
    args
}

pub(super) fn text() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.text",
            description: "Type text into the focused field, or into `element` (tapped first to \
                focus it, checked again before input like android.tap). Printable ASCII is \
                typed with `input text`; any other text (any script, emoji, combining marks, \
                newlines, tabs) through the Unicode IME of Appium's Settings helper \
                (io.appium.settings), switched to for the call and back: without the helper \
                such text fails saying how to install it.",
            schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                    "element": target::element_schema()
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        },
        program: "input",
        prepare: |args, env, program| {
            let text = args.str("text")?;
            let typing = typing(text)?;
            let programs = match typing {
                Typing::Plain(_) => None,
                Typing::UnicodeIme(_) => Some(Programs::find(env, "typing non-ASCII text")?),
            };
            let aimed = if args.0.contains_key("element") {
                Some(aim(args, env, "x", "y")?)
            } else {
                None
            };
            let mut prepared = prepare(env, program, text, typing, programs, aimed);
            // The owner reads the text itself, not its `input` spelling.
            prepared.data = Some(nl2sh_proto::channels::ActionData::new(
                "text",
                text.as_bytes().to_vec(),
            ));
            Ok(prepared)
        },
    }
}

fn prepare(
    env: &DeviceEnv,
    program: &str,
    text: &str,
    typing: Typing,
    programs: Option<Programs>,
    aimed: Option<Aimed>,
) -> Prepared {
    let input = |args: Vec<String>| -> Vec<String> {
        std::iter::once(program.to_string()).chain(args).collect()
    };
    let typed: Vec<Vec<String>> = typing
        .args()
        .iter()
        .map(|a| input(vec!["text".into(), a.clone()]))
        .collect();
    let focus = aimed
        .as_ref()
        .map(|a| input(vec!["tap".into(), a.x.to_string(), a.y.to_string()]));
    let shown: Vec<String> = typed.iter().map(|a| render(a)).collect();
    let mut action = match &programs {
        None => shown.join("; "),
        Some(p) => format!(
            "type {} characters through the Unicode IME: {}",
            text.chars().count(),
            p.words(ime::UNICODE_IME, &shown)
        ),
    };
    if let (Some(a), Some(tap)) = (&aimed, &focus) {
        action = format!(
            "type into {} at ({}, {}): {}; {action}",
            a.words,
            a.x,
            a.y,
            render(tap)
        );
    }
    let mut result = Map::new();
    result.insert("typed_chars".into(), json!(text.chars().count()));
    result.insert("via".into(), json!(typing.via()));
    if let Some(a) = &aimed {
        result.extend(a.to_json());
    }
    let reason = "types text";
    let mut prepared = command_action(env, CommandSpec::new(Vec::new()), low(reason), true, |_| {
        Ok(ToolOutput::default())
    });
    if let Some(a) = &aimed {
        target::judge_ui_target(
            &mut prepared,
            a.front.clone(),
            a.touched_package(),
            a.locked,
        );
    }
    prepared.action = action;
    // Two screen reads before a tap; the input method's switch and settle.
    prepared.timeout = ANDROID_TIMEOUT + 2 * target::PREPARE_LOOK + ime::SETTLE;
    prepared.run = Box::new(move |ctx| {
        Box::pin(async move {
            if let Some(a) = &aimed {
                if let Err(change) = a.recheck(&ctx).await? {
                    return Ok(ToolOutput::json(false, &change));
                }
            }
            if let Some(tap) = focus {
                run_checked(&ctx, CommandSpec::new(tap)).await?;
            }
            let specs: Vec<CommandSpec> = typed.into_iter().map(CommandSpec::new).collect();
            match programs {
                None => {
                    for spec in specs {
                        run_checked(&ctx, spec).await?;
                    }
                }
                Some(p) => {
                    let (_, switch) = ime::run_with_ime(&ctx, &p, ime::UNICODE_IME, specs).await?;
                    result.insert("ime".into(), switch.to_json());
                }
            }
            if aimed.is_some() {
                result.insert("injected".into(), Value::Bool(true));
            }
            Ok(ToolOutput::json(true, &Value::Object(result)))
        })
    });
    prepared
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(t: &str) -> Vec<String> {
        match typing(t).unwrap() {
            Typing::Plain(a) => a,
            other => panic!("{t:?}: {other:?}"),
        }
    }

    #[test]
    fn printable_ascii_keeps_input_text() {
        assert_eq!(plain("hello world"), ["hello%sworld"]);
        assert_eq!(
            plain("a'b\"c;$(x)`&|<>\\"),
            ["a'b\"c;$(x)`&|<>\\"],
            "exec'd directly: nothing to quote"
        );
        assert_eq!(plain("100%"), ["100%"]);
        // `%s` would become a space: the argument ends between % and s.
        assert_eq!(plain("50%s"), ["50%", "s"]);
        assert_eq!(plain("%s%s"), ["%", "s%", "s"]);
        assert_eq!(plain("a% b"), ["a%%sb"]);
        assert_eq!(plain("%%s"), ["%%", "s"]);
    }

    /// What `input text` makes of one argument (AOSP `InputShellCommand.sendText`: a `%`
    /// followed by `s` is a space), to check the arguments type the text exactly.
    fn as_input_types(arg: &str) -> String {
        let mut out = String::new();
        let mut escape = false;
        for c in arg.chars() {
            if escape && c == 's' {
                out.pop();
                out.push(' ');
                escape = false;
                continue;
            }
            escape = c == '%';
            out.push(c);
        }
        out
    }

    #[test]
    fn the_arguments_type_exactly_the_text() {
        for t in ["50%s off", "%s", "a %s b", "%%%ss", "s%", "% s", "x%", "%"] {
            let typed: String = plain(t).iter().map(|a| as_input_types(a)).collect();
            assert_eq!(typed, t);
            assert!(plain(t).iter().all(|a| !a.is_empty()));
        }
    }

    #[test]
    fn anything_else_goes_through_the_unicode_ime() {
        let t = typing("Grüße aus 日本 😀\nzweite Zeile\tmit Tab").unwrap();
        assert_eq!(t.via(), "unicode_ime");
        assert_eq!(
            t.args(),
            ["Gr&APwA3w-e%saus%s&ZeVnLA-%s&2D3eAAAK-zweite%sZeile&AAk-mit%sTab"]
        );
        let t = typing("שלום & 50%s").unwrap();
        assert_eq!(t.args(), ["&BekF3AXVBd0-%s&-%s50%", "s"]);
    }

    #[test]
    fn refuses_what_no_keyboard_types() {
        for bad in [
            "",
            "a\u{0}b",
            "bell\u{7}",
            "esc\u{1b}[2J",
            "c1\u{85}",
            "del\u{7f}",
        ] {
            assert!(typing(bad).is_err(), "{bad:?}");
        }
        assert!(typing(&"a".repeat(MAX_TEXT_CHARS)).is_ok());
        assert!(typing(&"ä".repeat(MAX_TEXT_CHARS + 1)).is_err());
    }
}
