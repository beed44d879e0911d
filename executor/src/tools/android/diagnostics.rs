//! `android.logcat` (`logcat -d`) and `android.dumpsys` (`dumpsys SERVICE`): privileged
//! read-only diagnostics with a command line the tool fixes. Filters the caller sends are
//! applied here to the output; the only caller text that reaches an argument is a service
//! name, and only one of [`LISTED_SERVICES`].

use serde_json::{json, Value};

use super::{read_action, AndroidTool};
use crate::exec::CommandSpec;
use crate::tools::{newest_within_budget, text_within_budget, OUTPUT_BUDGET};
use crate::tools::{Args, ToolDef, ToolError, ToolOutput};

const DEFAULT_LOG_LINES: u64 = 200;
const MAX_LOG_LINES: u64 = 2000;
/// logcat's output read at most: 2000 lines of a few hundred bytes, with room for long ones.
const MAX_LOGCAT_BYTES: usize = 4 * 1024 * 1024;
const MAX_FILTER_BYTES: usize = 256;
/// Android log tags are at most 23 characters by convention; longer ones exist.
const MAX_TAG_BYTES: usize = 128;
/// Log buffers a caller may read (`all` and `kernel` are left out: the kernel log has its
/// own tool, and `all` is these together).
pub const LOG_BUFFERS: [&str; 5] = ["main", "system", "crash", "events", "radio"];
/// logcat priorities, least severe first.
pub const LOG_PRIORITIES: [&str; 6] = ["V", "D", "I", "W", "E", "F"];

const MAX_SERVICE_BYTES: usize = 64;
/// Room in the output budget for everything but a dump's text.
const DUMP_OVERHEAD_BYTES: usize = 512;

/// The services dumped unasked: diagnostics of the device itself (power, memory, CPU,
/// heat, storage, display, input hardware), none of which shows what a person wrote, who
/// they are or where. A list of what may be read, not of what may not: many dumps show
/// private things under other names (sync wakelocks name accounts in `batterystats`,
/// `jobscheduler` and `content`; `activity` shows intents with their data; `wifiscanner`
/// locates the device; vendors add their own). Any other service is `shell.exec` with
/// `"unconfined": true`, which asks the owner.
pub const LISTED_SERVICES: &[&str] = &[
    "SurfaceFlinger",
    "battery",
    "cpuinfo",
    "deviceidle",
    "diskstats",
    "display",
    "gfxinfo",
    "input",
    "media.audio_flinger",
    "meminfo",
    "power",
    "procstats",
    "sensorservice",
    "thermalservice",
    "uimode",
    "usb",
];

/// A service name that cannot be an option or carry more (`^[A-Za-z0-9][A-Za-z0-9_.-]*$`,
/// at most 64 bytes): what may be named in a refusal's advice.
pub fn valid_service(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= MAX_SERVICE_BYTES
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// The tag of a `threadtime` line (`11-30 09:14:02.118  1873  1873 I Tag: message`).
pub fn threadtime_tag(line: &str) -> Option<&str> {
    let mut rest = line;
    // Date, time, pid, tid, priority.
    for _ in 0..5 {
        let (_, after) = rest.trim_start().split_once(' ')?;
        rest = after;
    }
    let (tag, _) = rest.trim_start().split_once(':')?;
    Some(tag.trim_end())
}

/// Which log lines a call keeps, applied to logcat's output.
#[derive(Debug, Clone, Default)]
pub struct LineFilter {
    /// The exact tag.
    pub tag: Option<String>,
    /// ASCII-lowercased substring of the whole line.
    pub contains: Option<String>,
}

impl LineFilter {
    pub fn keeps(&self, line: &str) -> bool {
        // logcat's buffer separators are not log lines.
        if line.starts_with("--------- ") || line.trim().is_empty() {
            return false;
        }
        self.tag
            .as_deref()
            .is_none_or(|t| threadtime_tag(line) == Some(t))
            && self
                .contains
                .as_deref()
                .is_none_or(|c| line.to_ascii_lowercase().contains(c))
    }
}

fn optional_text(args: &Args<'_>, key: &str, max: usize) -> Result<Option<String>, ToolError> {
    let Some(s) = args.opt_str(key)? else {
        return Ok(None);
    };
    if s.is_empty() || s.len() > max {
        return Err(ToolError::InvalidArguments(format!(
            "`{key}` must be 1 to {max} bytes"
        )));
    }
    Ok(Some(s.to_string()))
}

/// `value` if it is one of `allowed`, for arguments the schema lists as an enum.
fn one_of(
    args: &Args<'_>,
    key: &str,
    allowed: &[&'static str],
) -> Result<Option<&'static str>, ToolError> {
    let Some(s) = args.opt_str(key)? else {
        return Ok(None);
    };
    allowed
        .iter()
        .find(|a| **a == s)
        .copied()
        .map(Some)
        .ok_or_else(|| {
            ToolError::InvalidArguments(format!("`{key}` must be one of {}", allowed.join(", ")))
        })
}

pub(super) fn logcat() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.logcat",
            description: "The Android log's last `lines` lines (logcat -d -v threadtime -t \
                LINES), oldest first, from one `buffer` (default: main, system and crash) at \
                `priority` or above; then `tag` keeps lines with exactly that tag and \
                `contains` lines containing the text (ASCII case-insensitive), so fewer than \
                `lines` may come back.",
            schema: json!({
                "type": "object",
                "properties": {
                    "lines": {"type": "integer", "minimum": 1, "maximum": MAX_LOG_LINES,
                              "description": "Lines logcat prints at most (default 200)"},
                    "buffer": {"type": "string", "enum": LOG_BUFFERS},
                    "priority": {"type": "string", "enum": LOG_PRIORITIES,
                                 "description": "Least severe priority kept: V D I W E F"},
                    "tag": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_BYTES},
                    "contains": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_BYTES}
                },
                "additionalProperties": false
            }),
        },
        program: "logcat",
        prepare: |args, env, program| {
            let lines = args.opt_u64("lines")?.unwrap_or(DEFAULT_LOG_LINES);
            if !(1..=MAX_LOG_LINES).contains(&lines) {
                return Err(ToolError::InvalidArguments(format!(
                    "`lines` must be 1 to {MAX_LOG_LINES}"
                )));
            }
            let buffer = one_of(args, "buffer", &LOG_BUFFERS)?;
            let priority = one_of(args, "priority", &LOG_PRIORITIES)?;
            // Applied to the output: neither becomes an argument.
            let filter = LineFilter {
                tag: optional_text(args, "tag", MAX_TAG_BYTES)?,
                contains: optional_text(args, "contains", MAX_FILTER_BYTES)?
                    .map(|c| c.to_ascii_lowercase()),
            };
            let mut argv: Vec<String> = [program, "-d", "-v", "threadtime", "-t"]
                .map(String::from)
                .into();
            argv.push(lines.to_string());
            if let Some(b) = buffer {
                argv.extend(["-b".into(), b.into()]);
            }
            if let Some(p) = priority {
                argv.push(format!("*:{p}"));
            }
            let mut spec = CommandSpec::new(argv);
            spec.max_stdout = MAX_LOGCAT_BYTES;
            Ok(read_action(env, spec, move |out| {
                let text = String::from_utf8_lossy(&out.stdout.bytes);
                let kept: Vec<Value> = text
                    .lines()
                    .filter(|l| filter.keeps(l))
                    .map(|l| Value::String(l.to_string()))
                    .collect();
                let (kept, cut) = newest_within_budget(kept, OUTPUT_BUDGET - 256);
                let value = json!({
                    "count": kept.len(),
                    // Cut for the budget, or logcat printed more than was read.
                    "truncated": cut || out.stdout.dropped > 0,
                    "lines": kept,
                });
                Ok(ToolOutput::json(true, &value))
            }))
        },
    }
}

pub(super) fn dumpsys() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.dumpsys",
            description: "One system service's state (dumpsys SERVICE, no other arguments), \
                for the device's own diagnostics: SurfaceFlinger, battery, cpuinfo, \
                deviceidle, diskstats, display, gfxinfo, input, media.audio_flinger, \
                meminfo, power, procstats, sensorservice, thermalservice, uimode, usb. Any \
                other service may show private content: shell.exec with unconfined:true \
                asks the owner instead. Text beyond about 56 KiB is cut (`truncated`).",
            schema: json!({
                "type": "object",
                "properties": {
                    "service": {"type": "string", "minLength": 1,
                                "maxLength": MAX_SERVICE_BYTES}
                },
                "required": ["service"],
                "additionalProperties": false
            }),
        },
        program: "dumpsys",
        prepare: |args, env, program| {
            let service = args.str("service")?.to_string();
            // The name becomes an argument: a listed one, or nothing runs.
            if !valid_service(&service) {
                return Err(ToolError::InvalidArguments(format!(
                    "`service` {service:?} is not a service name"
                )));
            }
            if !LISTED_SERVICES.contains(&service.as_str()) {
                return Err(ToolError::InvalidArguments(format!(
                    "android.dumpsys reads only the device's own diagnostics ({}); `{service}` \
                     may show private content. To read it anyway, call shell.exec with \
                     {{\"command\": \"dumpsys {service}\", \"unconfined\": true}}, which \
                     waits for the owner's approval.",
                    LISTED_SERVICES.join(", ")
                )));
            }
            let mut spec = CommandSpec::new(vec![program.to_string(), service.clone()]);
            // What fits the budget; the rest is read and dropped (and counted).
            spec.max_stdout = OUTPUT_BUDGET;
            Ok(read_action(env, spec, move |out| {
                let text = String::from_utf8_lossy(&out.stdout.bytes);
                let err = String::from_utf8_lossy(&out.stderr.bytes);
                // dumpsys says so and exits 0 for a service that is not there.
                if text.trim().is_empty() && err.contains("Can't find service") {
                    return Err(ToolError::Failed(format!(
                        "dumpsys: this device has no service named `{service}`"
                    )));
                }
                let (kept, cut) = text_within_budget(&text, OUTPUT_BUDGET - DUMP_OVERHEAD_BYTES);
                let value = json!({
                    "service": service,
                    "truncated": cut || out.stdout.dropped > 0,
                    "text": kept,
                });
                Ok(ToolOutput::json(true, &value))
            }))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_cannot_be_options_or_carry_more() {
        let long = "a".repeat(65);
        for (name, ok) in [
            ("battery", true),
            ("media.audio_flinger", true),
            ("SurfaceFlinger", true),
            ("android.os.UpdateLock", true),
            ("a-b_c.d", true),
            (&"a".repeat(64), true),
            ("-l", false),
            ("--help", false),
            ("_x", false),
            (".x", false),
            ("", false),
            ("battery unplug", false),
            ("battery\n", false),
            ("a;b", false),
            ("a/b", false),
            ("bätt", false),
            (&long, false),
        ] {
            assert_eq!(valid_service(name), ok, "{name:?}");
        }
    }

    #[test]
    fn the_list_is_sorted_and_names_services() {
        assert!(LISTED_SERVICES.windows(2).all(|w| w[0] < w[1]));
        assert!(LISTED_SERVICES.iter().all(|s| valid_service(s)));
    }

    #[test]
    fn threadtime_tags() {
        let l = "11-30 09:14:02.118  1873  1873 I ActivityManager: Start proc 9152";
        assert_eq!(threadtime_tag(l), Some("ActivityManager"));
        let l = "11-30 09:14:03.010  2310  2310 I chatty  : uid=10200 identical 4 lines";
        assert_eq!(threadtime_tag(l), Some("chatty"));
        let l = "11-30 09:14:02.118 1 1 I am_proc_start: [0,9152]";
        assert_eq!(threadtime_tag(l), Some("am_proc_start"));
        assert_eq!(threadtime_tag("--------- beginning of main"), None);
        assert_eq!(threadtime_tag(""), None);
    }

    #[test]
    fn line_filters() {
        let line = "11-30 09:14:03.662  9152  9190 E Settings: Failed to load battery usage";
        let f = |tag: Option<&str>, contains: Option<&str>| LineFilter {
            tag: tag.map(String::from),
            contains: contains.map(str::to_ascii_lowercase),
        };
        assert!(f(None, None).keeps(line));
        assert!(f(Some("Settings"), Some("BATTERY")).keeps(line));
        assert!(!f(Some("Setting"), None).keeps(line));
        assert!(!f(None, Some("wifi")).keeps(line));
        assert!(!f(None, None).keeps("--------- beginning of main"));
        assert!(!f(None, None).keeps(""));
    }
}
