//! `android.clipboard_get`: the clipboard's text, read through the clipboard receiver of
//! Appium's Settings helper (docs/PROTOCOLS.md, "The phone's own verbs").
//!
//! No shell command reads the clipboard on stock Android: through Android 16 the clipboard
//! service implements no shell command, so `cmd clipboard …` only prints `No shell command
//! implementation.` (Binder's default). Since Android 10 only the foreground app or the
//! default input method may read it, so, as Appium does (appium-adb `getClipboard`), the
//! helper's `AppiumIME` is made the input method for the read ([`super::ime`]) and
//! `am broadcast -a io.appium.settings.clipboard.get` asks its receiver, which answers in
//! the broadcast's result: `Broadcast completed: result=-1, data="BASE64"` (RESULT_OK and
//! the text's UTF-8 in BASE64, line-wrapped), or result 0 when it could not read.
//!
//! The content is private (passwords, codes): the action is read-only but runs
//! `Confinement::Unconfined`, so it asks the owner unless a grant names its exact action.

use base64::Engine;
use serde_json::json;

use super::ime::{self, Programs};
use super::{render, AndroidTool, ANDROID_TIMEOUT};
use crate::exec::CommandSpec;
use crate::risk::Assessment;
use crate::tools::{Prepared, Resource, ToolDef, ToolError, ToolOutput};
use nl2sh_proto::channels::Confinement;

/// The helper's input method a clipboard read needs as the default (Android 10+).
pub const APPIUM_IME: &str = "io.appium.settings/.AppiumIME";
/// The broadcast its clipboard receiver answers.
const GET_ACTION: &str = "io.appium.settings.clipboard.get";
/// The receiver, named so the broadcast reaches it even before the app first ran (the
/// helper's README, "Notes").
const RECEIVER: &str = "io.appium.settings/.receivers.ClipboardReceiver";
/// Bytes of clipboard text returned at most.
const MAX_CLIP_BYTES: usize = 32 * 1024;

/// The text in an `am broadcast` answer of the clipboard receiver.
pub fn parse_broadcast(said: &str) -> Result<String, ToolError> {
    let at = said.find("Broadcast completed: result=").ok_or_else(|| {
        ToolError::Failed("am broadcast did not say the broadcast completed".into())
    })?;
    let rest = &said[at + "Broadcast completed: result=".len()..];
    let code: String = rest
        .chars()
        .take_while(|c| *c == '-' || c.is_ascii_digit())
        .collect();
    if code != "-1" {
        return Err(ToolError::Failed(format!(
            "the helper could not read the clipboard (broadcast result {code}, not RESULT_OK)"
        )));
    }
    let data = rest
        .find("data=\"")
        .map(|i| &rest[i + 6..])
        .and_then(|d| d.rfind('"').map(|j| &d[..j]))
        .ok_or_else(|| ToolError::Failed("the helper's answer has no data".into()))?;
    let b64: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .map_err(|e| ToolError::Failed(format!("the helper's answer is not BASE64: {e}")))?;
    String::from_utf8(bytes)
        .map_err(|_| ToolError::Failed("the clipboard's text is not UTF-8".into()))
}

pub(super) fn clipboard_get() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.clipboard_get",
            description: "The clipboard's text, read through Appium's Settings helper \
                (io.appium.settings; its AppiumIME is the input method for the read and is \
                switched back after). Private: each call waits for the owner's approval unless \
                a grant names this exact action. Without the helper it fails saying how to \
                install it.",
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        program: "am",
        prepare: |_args, env, program| {
            let programs = Programs::find(env, "reading the clipboard")?;
            let argv: Vec<String> = [program, "broadcast", "-a", GET_ACTION, "-n", RECEIVER]
                .map(String::from)
                .to_vec();
            let mut assessment = Assessment::read_only();
            assessment.note_reason(
                "reads the clipboard's text (private: passwords, codes) and switches the input \
                 method for the read",
            );
            Ok(Prepared {
                sent: None,
                data: None,
                ui_app: None,
                action: format!(
                    "read the clipboard through the helper: {}",
                    programs.words(APPIUM_IME, &[render(&argv)])
                ),
                assessment,
                identity: env.ui_identity(),
                // Read-only, but private: it asks, and only a grant naming this action covers it.
                confinement: Confinement::Unconfined,
                // The input method is switched: not while another call types or reads the UI.
                resources: vec![Resource::Screen],
                timeout: ANDROID_TIMEOUT + ime::SETTLE,
                commands: None,
                run: Box::new(move |ctx| {
                    Box::pin(async move {
                        let (outs, switch) = ime::run_with_ime(
                            &ctx,
                            &programs,
                            APPIUM_IME,
                            vec![CommandSpec::new(argv)],
                        )
                        .await?;
                        let said = outs.first().map(|o| o.stdout.text()).unwrap_or_default();
                        let text = parse_broadcast(&said)?;
                        let cut = text.len() > MAX_CLIP_BYTES;
                        let shown = nl2sh_proto::text::prefix(&text, MAX_CLIP_BYTES);
                        // Whoever copied it wrote it: the Agent's later requests say so.
                        Ok(ToolOutput::json(
                            true,
                            &json!({"text": shown, "chars": text.chars().count(),
                                    "truncated": cut, "ime": switch.to_json()}),
                        )
                        .read_from(["the clipboard"]))
                    })
                }),
            })
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receivers_answer_is_decoded() {
        // Base64.DEFAULT ends lines at 76 characters and the text with a newline.
        let said = "Broadcasting: Intent { act=io.appium.settings.clipboard.get flg=0x400000 cmp=io.appium.settings/.receivers.ClipboardReceiver }\n\
                    Broadcast completed: result=-1, data=\"w6Rww6RsIOaXpeacrCDwn5iAIGEgImIi\n\"\n";
        assert_eq!(parse_broadcast(said).unwrap(), "äpäl 日本 😀 a \"b\"");
        assert_eq!(
            parse_broadcast("Broadcast completed: result=-1, data=\"\"").unwrap(),
            ""
        );
        for (bad, why) in [
            ("Broadcast completed: result=0, data=\"\"", "could not read"),
            ("Broadcast completed: result=0", "could not read"),
            ("Broadcasting: Intent { }", "did not say"),
            ("Broadcast completed: result=-1", "no data"),
            ("Broadcast completed: result=-1, data=\"!!!\"", "BASE64"),
            ("Broadcast completed: result=-1, data=\"/w==\"", "UTF-8"),
        ] {
            let e = parse_broadcast(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
