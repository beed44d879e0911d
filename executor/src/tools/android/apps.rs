//! `android.launch` (`am start`), `android.packages` (`pm list packages`) and
//! `android.current_app` (`dumpsys window`), with the parsers for what those print.

use serde_json::{json, Value};

use super::{command_action, low, read_action, within_budget, AndroidTool, OUTPUT_BUDGET};
use crate::exec::CommandSpec;
use crate::tools::{ToolDef, ToolError, ToolOutput};

/// Longest package or activity name accepted.
const MAX_NAME_BYTES: usize = 255;
/// Package names returned at most.
const MAX_PACKAGES: usize = 2000;
/// `dumpsys window` output read at most (a busy device prints a few hundred KiB).
const MAX_DUMPSYS_BYTES: usize = 4 * 1024 * 1024;

/// `[A-Za-z0-9_.]+`, at most 255 bytes, not starting with a dot: a package name.
pub fn valid_package(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// A class name, absolute or relative to the package (`.Settings`); `$` for nested ones.
pub fn valid_activity(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$')
}

pub(super) fn launch() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.launch",
            description: "Start an app: its launcher activity (am start -a MAIN -c LAUNCHER -p \
                PACKAGE), or the given activity (am start -n PACKAGE/ACTIVITY; `.Name` is \
                relative to the package).",
            schema: json!({
                "type": "object",
                "properties": {
                    "package": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_BYTES,
                                "description": "Package name, e.g. com.android.settings"},
                    "activity": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_BYTES,
                                 "description": "Activity class, e.g. .Settings"}
                },
                "required": ["package"],
                "additionalProperties": false
            }),
        },
        program: "am",
        prepare: |args, env, program| {
            let package = args.str("package")?.to_string();
            if !valid_package(&package) {
                return Err(ToolError::InvalidArguments(format!(
                    "`package` {package:?} is not a package name ([A-Za-z0-9_.], at most {MAX_NAME_BYTES} bytes)"
                )));
            }
            let activity = args.opt_str("activity")?.map(str::to_string);
            let mut argv = vec![program.to_string(), "start".into()];
            match &activity {
                Some(a) if !valid_activity(a) => {
                    return Err(ToolError::InvalidArguments(format!(
                        "`activity` {a:?} is not a class name"
                    )))
                }
                Some(a) => argv.extend(["-n".into(), format!("{package}/{a}")]),
                // The launcher intent restricted to the package: what tapping its icon does.
                None => argv.extend(
                    [
                        "-a",
                        "android.intent.action.MAIN",
                        "-c",
                        "android.intent.category.LAUNCHER",
                        "-p",
                        &package,
                    ]
                    .map(String::from),
                ),
            }
            Ok(command_action(
                env,
                CommandSpec::new(argv),
                low("starts an app"),
                true,
                move |out| {
                    let text = out.stdout.text();
                    // `am start` reports some failures on stdout with exit status 0.
                    if let Some(err) = text.lines().find(|l| l.starts_with("Error")) {
                        return Err(ToolError::Failed(format!("am start: {}", err.trim())));
                    }
                    let said: Vec<&str> = text
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .take(8)
                        .collect();
                    Ok(ToolOutput::json(
                        true,
                        &json!({"package": package, "activity": activity, "am": said}),
                    ))
                },
            ))
        },
    }
}

/// Package names from `pm list packages` output (`package:NAME` lines), sorted, unique.
pub fn parse_packages(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("package:"))
        .filter(|n| valid_package(n))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

pub(super) fn packages() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.packages",
            description:
                "List installed packages (pm list packages), sorted; `filter` keeps names \
                containing it (case-insensitive); `third_party_only` lists user-installed apps.",
            schema: json!({
                "type": "object",
                "properties": {
                    "filter": {"type": "string", "maxLength": MAX_NAME_BYTES},
                    "third_party_only": {"type": "boolean"}
                },
                "additionalProperties": false
            }),
        },
        program: "pm",
        prepare: |args, env, program| {
            // Filtered here rather than by pm: nothing the caller sends becomes an argument.
            let filter = args.opt_str("filter")?.unwrap_or("").to_ascii_lowercase();
            let third = args.opt_bool("third_party_only")?.unwrap_or(false);
            let mut argv = vec![program.to_string(), "list".into(), "packages".into()];
            if third {
                argv.push("-3".into());
            }
            let mut spec = CommandSpec::new(argv);
            spec.max_stdout = 1024 * 1024;
            Ok(read_action(env, spec, move |out| {
                let all = parse_packages(&String::from_utf8_lossy(&out.stdout.bytes));
                let matching: Vec<String> = all
                    .into_iter()
                    .filter(|n| n.to_ascii_lowercase().contains(&filter))
                    .collect();
                let total = matching.len();
                let (names, cut) = within_budget(
                    matching.into_iter().take(MAX_PACKAGES).map(Value::String),
                    OUTPUT_BUDGET,
                );
                let value = json!({
                    "packages": names, "count": names.len(), "total": total,
                    "truncated": cut || names.len() < total || out.stdout.dropped > 0,
                    "third_party_only": third,
                });
                Ok(ToolOutput::json(true, &value))
            }))
        },
    }
}

/// The foreground app as `dumpsys` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focus {
    pub package: String,
    /// Fully qualified (`.Settings` expanded).
    pub activity: String,
    pub user: Option<u32>,
    /// The line it came from: `mCurrentFocus`, `mFocusedApp`, `topResumedActivity`, ...
    pub source: &'static str,
}

/// Keys naming the focus, best first.
const FOCUS_KEYS: [&str; 5] = [
    "mCurrentFocus",
    "mFocusedApp",
    "topResumedActivity",
    "mResumedActivity",
    "ResumedActivity",
];

/// `pkg/activity` in a `Window{…}` / `ActivityRecord{…}` value, with the `uN` before it.
fn component(value: &str) -> Option<(String, String, Option<u32>)> {
    let mut user = None;
    for token in value.split_whitespace() {
        let token = token.trim_end_matches(['}', ':', ',']);
        if let Some(u) = token.strip_prefix('u').and_then(|n| n.parse().ok()) {
            user = Some(u);
            continue;
        }
        let Some((pkg, act)) = token.split_once('/') else {
            continue;
        };
        if valid_package(pkg) && valid_activity(act) {
            let full = if act.starts_with('.') {
                format!("{pkg}{act}")
            } else {
                act.to_string()
            };
            return Some((pkg.to_string(), full, user));
        }
    }
    None
}

/// The focused window's title: `NotificationShade` in `Window{a61b7e4 u0 NotificationShade}`.
fn window_title(value: &str) -> Option<String> {
    let inner = value.trim().strip_prefix("Window{")?.strip_suffix('}')?;
    let mut parts = inner.splitn(3, ' ');
    let _hash = parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let title = match rest.as_slice() {
        [u, title] if u.starts_with('u') && u[1..].bytes().all(|b| b.is_ascii_digit()) => *title,
        _ => inner.split_once(' ')?.1,
    };
    Some(title.chars().take(200).collect())
}

/// The values of every line whose key is `key` (`key=value` or `key: value`).
fn values_of<'a>(text: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.lines().filter_map(move |l| {
        let rest = l.trim_start().strip_prefix(key)?;
        rest.strip_prefix('=')
            .or_else(|| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// The foreground app from `dumpsys window` (or `dumpsys activity activities`) output,
/// and the focused window's title when there is one. With several displays the first
/// line naming an app wins.
pub fn parse_focus(text: &str) -> (Option<Focus>, Option<String>) {
    let window = values_of(text, "mCurrentFocus").find_map(window_title);
    let focus = FOCUS_KEYS.iter().find_map(|&key| {
        let (package, activity, user) = values_of(text, key).find_map(component)?;
        Some(Focus {
            package,
            activity,
            user,
            source: key,
        })
    });
    (focus, window)
}

pub(super) fn current_app() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.current_app",
            description: "The app in the foreground (dumpsys window): package, activity, the \
                focused window's title (e.g. NotificationShade when the shade is open) and which \
                dumpsys line told.",
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        program: "dumpsys",
        prepare: |_args, env, program| {
            let mut spec = CommandSpec::new(vec![program.to_string(), "window".into()]);
            spec.max_stdout = MAX_DUMPSYS_BYTES;
            Ok(read_action(env, spec, |out| {
                let (focus, window) = parse_focus(&String::from_utf8_lossy(&out.stdout.bytes));
                let Some(f) = focus else {
                    return Err(ToolError::Failed(
                        "dumpsys window names no focused app (mCurrentFocus/mFocusedApp)".into(),
                    ));
                };
                Ok(ToolOutput::json(
                    true,
                    &json!({"package": f.package, "activity": f.activity, "user": f.user,
                            "focused_window": window, "source": f.source}),
                ))
            }))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn focus(text: &str) -> Option<(String, String, &'static str)> {
        parse_focus(text)
            .0
            .map(|f| (f.package, f.activity, f.source))
    }

    #[test]
    fn current_focus_shapes_across_versions() {
        // Android 10-15.
        let t = "  mCurrentFocus=Window{8d3e0f1 u0 com.android.settings/com.android.settings.Settings}\n\
                 \x20 mFocusedApp=ActivityRecord{5b2c6a9 u0 com.android.settings/.Settings t27}";
        assert_eq!(
            focus(t).unwrap(),
            (
                "com.android.settings".into(),
                "com.android.settings.Settings".into(),
                "mCurrentFocus"
            )
        );
        assert_eq!(
            parse_focus(t).1.as_deref(),
            Some("com.android.settings/com.android.settings.Settings")
        );
        assert_eq!(parse_focus(t).0.unwrap().user, Some(0));
        // Android 4.1 (no user), 4.4 and a secondary user.
        let t = "mCurrentFocus=Window{41ef54a0 com.android.launcher/com.android.launcher2.Launcher paused=false}";
        assert_eq!(focus(t).unwrap().1, "com.android.launcher2.Launcher");
        let t = "  mCurrentFocus=Window{3c5a0d1 u10 org.mozilla.firefox/org.mozilla.fenix.HomeActivity EXITING}";
        let f = parse_focus(t).0.unwrap();
        assert_eq!(
            (f.package.as_str(), f.user),
            ("org.mozilla.firefox", Some(10))
        );
    }

    #[test]
    fn a_system_window_in_focus_falls_back_to_the_focused_app() {
        let t = "  mCurrentFocus=Window{a61b7e4 u0 NotificationShade}\n\
                 \x20 mFocusedApp=AppWindowToken{6e1b7c4 token=Token{3a2c0e5 ActivityRecord{e5d8c3a u0 com.google.android.apps.nexuslauncher/.NexusLauncherActivity t2}}}";
        let (f, w) = parse_focus(t);
        let f = f.unwrap();
        assert_eq!(
            f.activity,
            "com.google.android.apps.nexuslauncher.NexusLauncherActivity"
        );
        assert_eq!(
            (f.source, w.as_deref()),
            ("mFocusedApp", Some("NotificationShade"))
        );
        let t = "  mCurrentFocus=null\n  mFocusedApp=null\n    topResumedActivity=ActivityRecord{1 u0 com.termux/.app.TermuxActivity t5}";
        assert_eq!(
            focus(t).unwrap(),
            (
                "com.termux".into(),
                "com.termux.app.TermuxActivity".into(),
                "topResumedActivity"
            )
        );
        let t = "  mResumedActivity: ActivityRecord{9c1 u0 com.android.chrome/com.google.android.apps.chrome.Main t3}";
        assert_eq!(focus(t).unwrap().2, "mResumedActivity");
        assert_eq!(
            focus("  mCurrentFocus=Window{1 u0 PopupWindow:3c2e1}\n  mFocusedApp=null"),
            None
        );
        assert_eq!(focus(""), None);
        // Window list entries and IME targets are not the focus.
        assert_eq!(focus("  Window #3 Window{1 u0 com.a/.B}:\n  mInputMethodTarget in display# 0 Window{1 u0 com.a/.B}"), None);
        // A hostile title cannot inject a component that is not one.
        assert_eq!(focus("mCurrentFocus=Window{1 u0 evil pkg/../x;rm}"), None);
    }

    #[test]
    fn pm_output_is_parsed_sorted_and_validated() {
        let t = "package:com.b\npackage:com.a\r\npackage:com.a\nWARNING: linker\npackage:bad name\n\npackage:";
        assert_eq!(parse_packages(t), ["com.a", "com.b"]);
    }

    #[test]
    fn names_are_allow_listed() {
        assert!(valid_package("com.android.settings") && valid_package("de.example.notes_app"));
        for bad in ["", ".x", "com/x", "com x", "-n", "a;b", &"a".repeat(256)] {
            assert!(!valid_package(bad), "{bad:?}");
        }
        assert!(valid_activity(".Settings") && valid_activity("com.a.Main$Alias"));
        assert!(!valid_activity("a/b") && !valid_activity("") && !valid_activity("x y"));
    }
}
