//! The phone's own verbs as validated tools (docs/PROTOCOLS.md, "The phone's own verbs"):
//! `android.open_url`, `android.intent`, `android.stop_app`, `android.install`,
//! `android.uninstall`, `android.wake`, `android.sleep`.
//!
//! Each builds one argv for `am`, `pm` or `input` from validated fields and execs it
//! directly: no caller text becomes an option, a shell word or a raw `am` line. Values
//! that are free text (a URL, a string extra) are single arguments after the option that
//! takes them, which `am` reads verbatim.

use serde_json::{json, Map, Value};

use super::apps::valid_activity;
use super::{command_action, low, AndroidTool, PrepareFn};
use crate::device::DeviceEnv;
use crate::exec::{CommandOutput, CommandSpec};
use crate::risk::Assessment;
use crate::tools::args::normalize_path;
use crate::tools::{Args, Prepared, ToolDef, ToolError, ToolOutput};
use nl2sh_proto::channels::RiskLevel;

/// Longest URL (or intent data) accepted: what browsers reliably take.
pub const MAX_URL_BYTES: usize = 2048;
/// Longest package, class, action, category or extra key.
const MAX_NAME_BYTES: usize = 255;
/// Extras and categories per intent.
const MAX_EXTRAS: usize = 32;
const MAX_CATEGORIES: usize = 8;
/// Longest string extra.
const MAX_EXTRA_STRING_BYTES: usize = 4096;
/// Longest APK path.
const MAX_PATH_BYTES: usize = 4096;
/// Lines of `am`/`pm` output kept in a result.
const MAX_SAID_LINES: usize = 8;

/// URL schemes refused, and why: each hands over more than a link.
const REFUSED_SCHEMES: [(&str, &str); 7] = [
    (
        "intent",
        "encodes a whole intent (component, extras); use android.intent",
    ),
    (
        "android-app",
        "names an app component directly; use android.intent",
    ),
    ("javascript", "runs script in the browser"),
    ("data", "carries a whole document inline"),
    ("file", "opens a file of the device in another app"),
    (
        "content",
        "opens another app's content provider through a viewer",
    ),
    ("about", "opens a browser's internal pages"),
];

/// Intent actions whose effect goes past the screen: placing a call, wiping, rebooting,
/// installing or removing apps.
const HIGH_ACTIONS: [&str; 10] = [
    "android.intent.action.CALL",
    "android.intent.action.CALL_PRIVILEGED",
    "android.intent.action.CALL_EMERGENCY",
    "android.intent.action.FACTORY_RESET",
    "android.intent.action.MASTER_CLEAR",
    "android.intent.action.REBOOT",
    "android.intent.action.ACTION_SHUTDOWN",
    "android.intent.action.DELETE",
    "android.intent.action.UNINSTALL_PACKAGE",
    "android.intent.action.INSTALL_PACKAGE",
];

/// Packages whose stop disrupts the phone itself (status bar and navigation, telephony).
const SYSTEM_UI_PACKAGES: [&str; 2] = ["com.android.systemui", "com.android.phone"];

/// A Java package name as Android accepts one for an app: two or more dot-separated
/// segments, each a letter then letters, digits or `_` (PackageParser's `validateName`).
pub fn valid_app_package(s: &str) -> bool {
    s.len() <= MAX_NAME_BYTES
        && s.split('.').count() >= 2
        && s.split('.').all(|seg| {
            let mut b = seg.bytes();
            b.next().is_some_and(|c| c.is_ascii_alphabetic())
                && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        })
}

/// An intent action, category or extra key: `[A-Za-z0-9_.]`, starting with a letter.
pub fn valid_intent_name(s: &str) -> bool {
    s.len() <= MAX_NAME_BYTES
        && s.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// A URL's scheme, lower-cased, when `url` is one `am` and the apps receiving it can read
/// unambiguously: printable ASCII without spaces, at most 2048 bytes, an RFC 3986 scheme
/// (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`), not a refused one, and for http and
/// https a host.
pub fn url_scheme(url: &str, what: &str) -> Result<String, ToolError> {
    let bad = |m: String| ToolError::InvalidArguments(format!("`{what}`: {m}"));
    if url.len() > MAX_URL_BYTES {
        return Err(bad(format!("longer than {MAX_URL_BYTES} bytes")));
    }
    if let Some(c) = url.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(bad(format!(
            "contains {c:?}: write spaces and other characters percent-encoded (%20)"
        )));
    }
    let scheme = url
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| {
            s.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))
        })
        .ok_or_else(|| bad("not a URL with a scheme (https://…, mailto:…)".into()))?
        .to_ascii_lowercase();
    if let Some((_, why)) = REFUSED_SCHEMES.iter().find(|(s, _)| *s == scheme) {
        return Err(bad(format!("`{scheme}:` URLs are refused: it {why}")));
    }
    if scheme == "http" || scheme == "https" {
        let rest = &url[scheme.len() + 1..];
        let host = rest
            .strip_prefix("//")
            .map(|r| r.split(['/', '?', '#']).next().unwrap_or(""))
            .unwrap_or("");
        let host = host.rsplit('@').next().unwrap_or("");
        if host.is_empty() || host.starts_with(':') {
            return Err(bad(format!(
                "a {scheme} URL needs a host ({scheme}://host/…)"
            )));
        }
    }
    Ok(scheme)
}

/// What `am` said, as lines; a line starting `Error` (which `am start` prints with exit
/// status 0 for some failures) is the failure.
fn am_said(out: &CommandOutput, what: &str) -> Result<Vec<String>, ToolError> {
    let text = out.stdout.text();
    if let Some(err) = text.lines().find(|l| l.trim_start().starts_with("Error")) {
        return Err(ToolError::Failed(format!("{what}: {}", err.trim())));
    }
    Ok(lines(&text))
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(MAX_SAID_LINES)
        .map(|l| nl2sh_proto::text::prefix(l, 512).to_string())
        .collect()
}

fn raised(level: RiskLevel, reason: &str) -> Assessment {
    let mut a = Assessment::read_only();
    a.raise(level, reason);
    a
}

fn program_argv(program: &str, args: &[&str]) -> Vec<String> {
    std::iter::once(program)
        .chain(args.iter().copied())
        .map(String::from)
        .collect()
}

pub(super) fn open_url() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.open_url",
            description: "Open a URL in the app that handles it (am start -a \
                android.intent.action.VIEW -d URL): http and https in the browser, other \
                schemes (mailto:, tel:, geo:, market:, an app's own) in their app. Printable \
                ASCII, at most 2048 bytes; intent:, android-app:, javascript:, data:, file:, \
                content: and about: are refused.",
            schema: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "minLength": 3, "maxLength": MAX_URL_BYTES}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        },
        program: "am",
        prepare: |args, env, program| {
            let url = args.str("url")?.to_string();
            let scheme = url_scheme(&url, "url")?;
            let assessment = if scheme == "http" || scheme == "https" {
                raised(RiskLevel::Low, "opens a web page")
            } else {
                raised(
                    RiskLevel::Medium,
                    &format!(
                        "hands a {scheme}: URL to the app that handles it, which may act on it"
                    ),
                )
            };
            let argv = program_argv(
                program,
                &["start", "-a", "android.intent.action.VIEW", "-d", &url],
            );
            Ok(command_action(
                env,
                CommandSpec::new(argv),
                assessment,
                true,
                move |out| {
                    let said = am_said(&out, "am start")?;
                    Ok(ToolOutput::json(
                        true,
                        &json!({"url": url, "scheme": scheme, "am": said}),
                    ))
                },
            ))
        },
    }
}

/// One extra's type: the `am` option that carries it.
fn extra_option(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "string" => "--es",
        "int" => "--ei",
        "long" => "--el",
        "float" => "--ef",
        "bool" => "--ez",
        _ => return None,
    })
}

/// `--es KEY VALUE`-style arguments for one extra, its value checked against its type.
fn extra_args(extra: &Value, i: usize) -> Result<[String; 3], ToolError> {
    let bad = |m: String| ToolError::InvalidArguments(format!("`extras[{i}]`: {m}"));
    let key = extra
        .get("key")
        .and_then(Value::as_str)
        .filter(|k| valid_intent_name(k))
        .ok_or_else(|| {
            bad("`key` must be a name of [A-Za-z0-9_.] starting with a letter".into())
        })?;
    let kind = extra.get("type").and_then(Value::as_str).unwrap_or("");
    let option = extra_option(kind)
        .ok_or_else(|| bad("`type` must be string, int, long, float or bool".into()))?;
    let value = extra.get("value").unwrap_or(&Value::Null);
    let text = match (kind, value) {
        ("string", Value::String(s)) => {
            if s.len() > MAX_EXTRA_STRING_BYTES || s.contains('\0') {
                return Err(bad(format!(
                    "a string value is at most {MAX_EXTRA_STRING_BYTES} bytes, without NUL"
                )));
            }
            s.clone()
        }
        ("int", Value::Number(n)) => n
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| bad("an int value is a whole number within 32 bits".into()))?
            .to_string(),
        ("long", Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| bad("a long value is a whole number within 64 bits".into()))?
            .to_string(),
        ("float", Value::Number(n)) => {
            let v = n
                .as_f64()
                .filter(|v| v.is_finite() && v.abs() <= f64::from(f32::MAX))
                .ok_or_else(|| bad("a float value is a finite number within f32".into()))?;
            // `am` parses with Float.valueOf: Rust's shortest form is one it reads.
            format!("{v}")
        }
        ("bool", Value::Bool(b)) => b.to_string(),
        _ => return Err(bad(format!("`value` is not a {kind}"))),
    };
    Ok([option.to_string(), key.to_string(), text])
}

/// The `am` arguments for an intent, after `start`/`broadcast`, and whether its action is
/// one of [`HIGH_ACTIONS`].
pub fn intent_args(args: &Args<'_>) -> Result<(Vec<String>, bool), ToolError> {
    let bad = |m: String| ToolError::InvalidArguments(m);
    let mut out: Vec<String> = Vec::new();
    let action = args.opt_str("action")?;
    if let Some(a) = action {
        if !valid_intent_name(a) {
            return Err(bad(format!(
                "`action` {a:?} is not an action name like android.intent.action.VIEW"
            )));
        }
        out.extend(["-a".into(), a.into()]);
    }
    let data = args.opt_str("data")?;
    if let Some(d) = data {
        url_scheme(d, "data")?;
        out.extend(["-d".into(), d.into()]);
    }
    if let Some(t) = args.opt_str("mime_type")? {
        let ok = t.split_once('/').is_some_and(|(a, b)| {
            let part = |s: &str| {
                !s.is_empty()
                    && s.len() <= 127
                    && s.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b".+-_*".contains(&c))
            };
            part(a) && part(b)
        });
        if !ok {
            return Err(bad(format!("`mime_type` {t:?} is not a type/subtype")));
        }
        out.extend(["-t".into(), t.into()]);
    }
    let categories = match args.0.get("categories") {
        None => Vec::new(),
        Some(Value::Array(list)) if list.len() <= MAX_CATEGORIES => list
            .iter()
            .map(|c| c.as_str().filter(|c| valid_intent_name(c)))
            .collect::<Option<Vec<&str>>>()
            .ok_or_else(|| {
                bad("`categories` are names like android.intent.category.BROWSABLE".into())
            })?,
        Some(_) => {
            return Err(bad(format!(
                "`categories` is a list of at most {MAX_CATEGORIES} names"
            )))
        }
    };
    for c in categories {
        out.extend(["-c".into(), c.into()]);
    }
    let package = args.opt_str("package")?;
    let component = args.0.get("component");
    match (package, component) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "give `package` (any component of that app) or `component`, not both".into(),
            ))
        }
        (Some(p), None) => {
            if !valid_app_package(p) {
                return Err(bad(format!("`package` {p:?} is not a package name")));
            }
            out.extend(["-p".into(), p.into()]);
        }
        (None, Some(c)) => {
            let pkg = c.get("package").and_then(Value::as_str).unwrap_or("");
            let class = c.get("class").and_then(Value::as_str).unwrap_or("");
            if !valid_app_package(pkg) || !valid_activity(class) || class.starts_with('$') {
                return Err(bad(
                    "`component` is {\"package\": \"com.x\", \"class\": \".Main\" or \"com.x.Main\"}"
                        .into(),
                ));
            }
            out.extend(["-n".into(), format!("{pkg}/{class}")]);
        }
        (None, None) => {}
    }
    if action.is_none() && data.is_none() && package.is_none() && component.is_none() {
        return Err(bad(
            "an intent needs at least an `action`, `data`, `package` or `component`".into(),
        ));
    }
    match args.0.get("extras") {
        None => {}
        Some(Value::Array(list)) if list.len() <= MAX_EXTRAS => {
            for (i, e) in list.iter().enumerate() {
                out.extend(extra_args(e, i)?);
            }
        }
        Some(_) => {
            return Err(bad(format!(
                "`extras` is a list of at most {MAX_EXTRAS} {{key, type, value}}"
            )))
        }
    }
    let high = action.is_some_and(|a| HIGH_ACTIONS.contains(&a));
    Ok((out, high))
}

pub(super) fn intent() -> AndroidTool {
    let name = json!({"type": "string", "minLength": 1, "maxLength": MAX_NAME_BYTES});
    AndroidTool {
        def: ToolDef {
            name: "android.intent",
            description: "Start an activity (am start) or send a broadcast (`broadcast`: true, \
                am broadcast) with an intent built from fields, never a raw am line: `action`, \
                `data` (a URL, checked like android.open_url's), `mime_type`, `categories`, \
                `package` or `component` {package, class}, and typed `extras` [{key, type: \
                string|int|long|float|bool, value}]. Medium risk; high for calling, wiping, \
                rebooting, installing or removing.",
            schema: json!({
                "type": "object",
                "properties": {
                    "action": name,
                    "data": {"type": "string", "minLength": 3, "maxLength": MAX_URL_BYTES},
                    "mime_type": {"type": "string", "minLength": 3, "maxLength": 255},
                    "categories": {"type": "array", "items": name, "maxItems": MAX_CATEGORIES},
                    "package": name,
                    "component": {
                        "type": "object",
                        "properties": {"package": name, "class": name},
                        "required": ["package", "class"],
                        "additionalProperties": false
                    },
                    "extras": {
                        "type": "array",
                        "maxItems": MAX_EXTRAS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "key": name,
                                "type": {"enum": ["string", "int", "long", "float", "bool"]},
                                "value": {"type": ["string", "number", "boolean"]}
                            },
                            "required": ["key", "type", "value"],
                            "additionalProperties": false
                        }
                    },
                    "broadcast": {"type": "boolean"}
                },
                "additionalProperties": false
            }),
        },
        program: "am",
        prepare: |args, env, program| {
            let (intent, high) = intent_args(args)?;
            let broadcast = args.opt_bool("broadcast")?.unwrap_or(false);
            let verb = if broadcast { "broadcast" } else { "start" };
            let assessment = if high {
                raised(
                    RiskLevel::High,
                    "an intent that calls, wipes, reboots, installs or removes",
                )
            } else if broadcast {
                raised(
                    RiskLevel::Medium,
                    "sends a broadcast to the apps that receive it",
                )
            } else {
                raised(RiskLevel::Medium, "starts an activity with an intent")
            };
            let mut argv = vec![program.to_string(), verb.to_string()];
            argv.extend(intent);
            Ok(command_action(
                env,
                CommandSpec::new(argv),
                assessment,
                !broadcast,
                move |out| {
                    let said = am_said(&out, &format!("am {verb}"))?;
                    let mut result = Map::new();
                    result.insert("sent".into(), json!(verb));
                    if broadcast {
                        let code = said.iter().find_map(|l| {
                            l.strip_prefix("Broadcast completed: result=")
                                .and_then(|r| r.split([',', ' ']).next())
                                .and_then(|n| n.parse::<i64>().ok())
                        });
                        result.insert("result_code".into(), json!(code));
                    }
                    result.insert("am".into(), json!(said));
                    Ok(ToolOutput::json(true, &Value::Object(result)))
                },
            ))
        },
    }
}

fn package_arg(args: &Args<'_>) -> Result<String, ToolError> {
    let p = args.str("package")?;
    if !valid_app_package(p) {
        return Err(ToolError::InvalidArguments(format!(
            "`package` {p:?} is not an app's package name (two or more segments of letters, \
             digits and _, each starting with a letter)"
        )));
    }
    Ok(p.to_string())
}

fn package_schema(extra: Option<(&str, Value)>) -> Value {
    let mut properties = Map::new();
    properties.insert(
        "package".into(),
        json!({"type": "string", "minLength": 3, "maxLength": MAX_NAME_BYTES,
               "description": "Package name, e.g. com.example.app"}),
    );
    if let Some((k, v)) = extra {
        properties.insert(k.into(), v);
    }
    json!({"type": "object", "properties": properties, "required": ["package"], "additionalProperties": false})
}

pub(super) fn stop_app() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.stop_app",
            description: "Force-stop an app (am force-stop PACKAGE): its processes end and \
                what it had not saved is lost. Medium risk; high for the system UI and the \
                phone service.",
            schema: package_schema(None),
        },
        program: "am",
        prepare: |args, env, program| {
            let package = package_arg(args)?;
            let assessment = if SYSTEM_UI_PACKAGES.contains(&package.as_str()) {
                raised(RiskLevel::High, "stops a part of the phone's own interface")
            } else {
                raised(
                    RiskLevel::Medium,
                    "stops an app (what it had not saved is lost)",
                )
            };
            let argv = program_argv(program, &["force-stop", &package]);
            Ok(command_action(
                env,
                CommandSpec::new(argv),
                assessment,
                false,
                move |_| Ok(ToolOutput::json(true, &json!({"stopped": package}))),
            ))
        },
    }
}

/// `pm` answers `Success` on a line of its own; anything else is its failure.
fn pm_result(out: &CommandOutput, what: &str) -> Result<Vec<String>, ToolError> {
    let said = lines(&out.stdout.text());
    if said.iter().any(|l| l == "Success") {
        return Ok(said);
    }
    let why = said
        .iter()
        .find(|l| l.starts_with("Failure") || l.starts_with("Error"))
        .cloned()
        .unwrap_or_else(|| format!("no Success: {}", said.join(" | ")));
    Err(ToolError::Failed(format!("{what}: {why}")))
}

pub(super) fn install() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.install",
            description: "Install an APK from a file on the device (pm install [-r] PATH; \
                `replace` keeps the app's data when it is installed already). Dangerous: the \
                owner approves with its phrase. The file must be readable by the package \
                manager: /data/local/tmp/ is the usual place.",
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 6, "maxLength": MAX_PATH_BYTES,
                             "description": "Absolute path of an .apk on the device"},
                    "replace": {"type": "boolean"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        program: "pm",
        prepare: |args, env, program| {
            let raw = args.str("path")?;
            let path = normalize_path(raw, None)?.display().to_string();
            if path.len() > MAX_PATH_BYTES
                || !path.to_ascii_lowercase().ends_with(".apk")
                || path.chars().any(char::is_control)
            {
                return Err(ToolError::InvalidArguments(format!(
                    "`path` {raw:?} must be an absolute path to an .apk file, without control characters"
                )));
            }
            let replace = args.opt_bool("replace")?.unwrap_or(false);
            let mut argv = program_argv(program, &["install"]);
            if replace {
                argv.push("-r".into());
            }
            argv.push(path.clone());
            Ok(command_action(
                env,
                CommandSpec::new(argv),
                raised(
                    RiskLevel::Dangerous,
                    "installs an app, which runs with whatever permissions it is granted",
                ),
                false,
                move |out| {
                    let said = pm_result(&out, "pm install")?;
                    Ok(ToolOutput::json(
                        true,
                        &json!({"installed": path, "replace": replace, "pm": said}),
                    ))
                },
            ))
        },
    }
}

pub(super) fn uninstall() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.uninstall",
            description: "Uninstall an app (pm uninstall [-k] PACKAGE; `keep_data` keeps its \
                data and cache). Dangerous: the owner approves with its phrase.",
            schema: package_schema(Some(("keep_data", json!({"type": "boolean"})))),
        },
        program: "pm",
        prepare: |args, env, program| {
            let package = package_arg(args)?;
            let keep = args.opt_bool("keep_data")?.unwrap_or(false);
            let mut argv = program_argv(program, &["uninstall"]);
            if keep {
                argv.push("-k".into());
            }
            argv.push(package.clone());
            Ok(command_action(
                env,
                CommandSpec::new(argv),
                raised(
                    RiskLevel::Dangerous,
                    "removes an app and, unless kept, its data",
                ),
                false,
                move |out| {
                    let said = pm_result(&out, "pm uninstall")?;
                    Ok(ToolOutput::json(
                        true,
                        &json!({"uninstalled": package, "keep_data": keep, "pm": said}),
                    ))
                },
            ))
        },
    }
}

/// A tool pressing one fixed key, without arguments.
fn key_tool(name: &'static str, description: &'static str, prepare: PrepareFn) -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name,
            description,
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        program: "input",
        prepare,
    }
}

fn press(env: &DeviceEnv, program: &str, key: &'static str) -> Prepared {
    let argv = program_argv(program, &["keyevent", key]);
    command_action(
        env,
        CommandSpec::new(argv),
        low("turns the screen on or off"),
        true,
        move |_| Ok(ToolOutput::json(true, &json!({"key": key}))),
    )
}

pub(super) fn wake() -> AndroidTool {
    key_tool(
        "android.wake",
        "Turn the screen on (input keyevent KEYCODE_WAKEUP; nothing happens when it is on \
            already). It does not unlock a locked phone.",
        |_, env, program| Ok(press(env, program, "KEYCODE_WAKEUP")),
    )
}

pub(super) fn sleep() -> AndroidTool {
    key_tool(
        "android.sleep",
        "Turn the screen off (input keyevent KEYCODE_SLEEP; nothing happens when it is off \
            already).",
        |_, env, program| Ok(press(env, program, "KEYCODE_SLEEP")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_follow_the_java_grammar() {
        for ok in [
            "com.example.app",
            "a.b",
            "de.x_y.Z9",
            "com.android.settings",
        ] {
            assert!(valid_app_package(ok), "{ok}");
        }
        for bad in [
            "android",
            "",
            "com..x",
            ".com.x",
            "com.x.",
            "com.9x",
            "com._x",
            "com.x-y",
            "com.x;reboot",
            "-f.x",
            "com.x y",
            "com.x/.Main",
            &format!("a.{}", "b".repeat(300)),
        ] {
            assert!(!valid_app_package(bad), "{bad:?}");
        }
    }

    #[test]
    fn urls_are_bounded_and_their_schemes_checked() {
        assert_eq!(
            url_scheme("https://example.com/a?b=c#d", "url").unwrap(),
            "https"
        );
        assert_eq!(url_scheme("HTTP://user@h:8080", "url").unwrap(), "http");
        assert_eq!(url_scheme("mailto:a@b.c", "url").unwrap(), "mailto");
        assert_eq!(url_scheme("tel:+123", "url").unwrap(), "tel");
        assert_eq!(url_scheme("my-app+x.y:open", "url").unwrap(), "my-app+x.y");
        for (bad, why) in [
            (
                "intent://x#Intent;component=com.x/.Evil;end",
                "android.intent",
            ),
            ("INTENT:#Intent;end", "android.intent"),
            ("javascript:alert(1)", "script"),
            ("file:///data/data/com.x/secret", "file"),
            ("content://sms/inbox", "provider"),
            ("data:text/html,<b>", "document"),
            ("https://", "host"),
            ("https:example.com", "host"),
            ("https://:80/", "host"),
            ("https://a b", "percent-encoded"),
            ("https://a\nb", "percent-encoded"),
            ("https://ä.de", "percent-encoded"),
            ("-d:x", "scheme"),
            ("noscheme", "scheme"),
            ("1http://x", "scheme"),
        ] {
            let e = url_scheme(bad, "url").unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let long = format!("https://x/{}", "a".repeat(MAX_URL_BYTES));
        assert!(url_scheme(&long, "url").is_err());
    }

    fn intent(v: Value) -> Result<(Vec<String>, bool), ToolError> {
        intent_args(&Args(v.as_object().unwrap()))
    }

    #[test]
    fn intents_become_argv_with_typed_extras() {
        let (argv, high) = intent(json!({
            "action": "android.intent.action.SEND",
            "mime_type": "text/plain",
            "categories": ["android.intent.category.DEFAULT"],
            "component": {"package": "com.example.app", "class": ".ShareActivity"},
            "extras": [
                {"key": "android.intent.extra.TEXT", "type": "string", "value": "hi; $(id) --es x"},
                {"key": "count", "type": "int", "value": -7},
                {"key": "big", "type": "long", "value": 9_007_199_254_740_993_i64},
                {"key": "ratio", "type": "float", "value": 0.5},
                {"key": "on", "type": "bool", "value": true}
            ]
        }))
        .unwrap();
        assert!(!high);
        assert_eq!(
            argv,
            [
                "-a",
                "android.intent.action.SEND",
                "-t",
                "text/plain",
                "-c",
                "android.intent.category.DEFAULT",
                "-n",
                "com.example.app/.ShareActivity",
                "--es",
                "android.intent.extra.TEXT",
                "hi; $(id) --es x",
                "--ei",
                "count",
                "-7",
                "--el",
                "big",
                "9007199254740993",
                "--ef",
                "ratio",
                "0.5",
                "--ez",
                "on",
                "true"
            ]
        );
        let (argv, high) =
            intent(json!({"action": "android.intent.action.CALL", "data": "tel:123"})).unwrap();
        assert!(high);
        assert_eq!(argv, ["-a", "android.intent.action.CALL", "-d", "tel:123"]);
    }

    #[test]
    fn every_intent_field_is_validated() {
        for bad in [
            json!({}),
            json!({"action": "-n com.x/.Evil"}),
            json!({"action": "a b"}),
            json!({"data": "intent:#Intent;end"}),
            json!({"package": "com.x", "component": {"package": "com.x", "class": ".A"}}),
            json!({"package": "--user"}),
            json!({"component": {"package": "com.x", "class": "a/b"}}),
            json!({"component": {"package": "com.x"}}),
            json!({"action": "x.Y", "categories": ["-f"]}),
            json!({"action": "x.Y", "categories": "x.Y"}),
            json!({"action": "x.Y", "mime_type": "text"}),
            json!({"action": "x.Y", "mime_type": "text/plain; x"}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "int", "value": 3_000_000_000_i64}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "int", "value": "3"}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "int", "value": 1.5}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "float", "value": 1e300}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "bool", "value": "true"}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "uri", "value": "x"}]}),
            json!({"action": "x.Y", "extras": [{"key": "--es", "type": "string", "value": "x"}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "string", "value": "a\u{0}b"}]}),
            json!({"action": "x.Y", "extras": [{"key": "k", "type": "string", "value": "x".repeat(5000)}]}),
            json!({"action": "x.Y", "extras": (0..40).map(|i| json!({"key": format!("k{i}"), "type": "bool", "value": true})).collect::<Vec<_>>()}),
        ] {
            assert!(intent(bad.clone()).is_err(), "{bad}");
        }
    }
}
