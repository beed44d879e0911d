//! `android.notifications`: the notifications the device shows now, from `dumpsys
//! notification --noredact`, and the parser of that dump.
//!
//! The layout is `NotificationRecord.dump` of Android 8 and later (as in AOSP 14's
//! `services/core/java/com/android/server/notification/NotificationRecord.java`): under
//! `Notification List:` one `NotificationRecord(0x…: pkg=… user=UserHandle{N} id=N tag=…
//! importance=N key=…: Notification(channel=… …))` line per record; its fields two spaces
//! deeper (`flags=0x…`, `key=…`, `mImportance=HIGH`, `mCreationTimeMs=` the first post,
//! `mUpdateTimeMs=` the latest, `effectiveNotificationChannel=NotificationChannel{mId='…'`);
//! `notification=` and `publicNotification=` blocks at twice that depth, each with an
//! `extras={ … }` block whose entries are four spaces deeper: `key=Type (value)`, `key=null`,
//! or, in a dump without `--noredact` (a bugreport's), `key=Type [length=N]`. A value with
//! line breaks continues on the following lines as the app wrote it, without indentation.
//!
//! The content is private (messages, sign-in codes): the action is read-only but runs
//! `Confinement::Unconfined`, so it asks the owner unless a grant names its exact action
//! (docs/APPROVALS.md).

use serde_json::{json, Map, Value};

use super::{render, run_checked, AndroidTool, ANDROID_TIMEOUT};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::risk::Assessment;
use crate::tools::{within_budget, Prepared, ToolDef, ToolError, ToolOutput, OUTPUT_BUDGET};
use nl2sh_proto::channels::Confinement;

/// Notifications reported at most (a phone rarely shows more than a few dozen).
pub(super) const MAX_NOTIFICATIONS: usize = 100;
/// Bytes of one text field kept (a long message's first screenful).
pub(super) const MAX_TEXT_BYTES: usize = 1024;
/// The dump read at most: records, then history and settings the parser skips.
const MAX_DUMP_BYTES: usize = 4 * 1024 * 1024;
/// `Notification.FLAG_ONGOING_EVENT`.
const FLAG_ONGOING_EVENT: u32 = 0x2;

/// The text extras reported, and their names in the result.
const TEXT_EXTRAS: [(&str, &str); 4] = [
    ("android.title", "title"),
    ("android.text", "text"),
    ("android.bigText", "big_text"),
    ("android.subText", "sub_text"),
];

/// One text extra as the dump shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Extra {
    /// Not among the extras.
    #[default]
    Absent,
    /// `key=null`.
    Null,
    /// The value, line breaks included.
    Shown(String),
    /// `key=Type [length=N]`: the dump hid it (no `--noredact`); N characters.
    Redacted(u64),
}

/// One record of the dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Record {
    pub package: String,
    pub user: Option<i64>,
    pub id: Option<i64>,
    /// The `key=` line (the header's key when there is none).
    pub key: Option<String>,
    pub flags: Option<u32>,
    /// `mImportance` as Android names it (`HIGH`), else the header's number.
    pub importance: Option<String>,
    pub channel: Option<String>,
    pub created_ms: Option<i64>,
    pub updated_ms: Option<i64>,
    /// The extras of `notification=`, in `TEXT_EXTRAS` order.
    pub texts: [Extra; 4],
    /// Where the record contradicts itself (a field twice, a key that is not the
    /// header's): a notification's text imitating the dump's layout.
    pub inconsistent: Vec<String>,
}

/// Every record under `Notification List:`, in the dump's order (most important first).
/// A dump with no such line lists none (Android prints it only when there are some).
pub(super) fn parse(dump: &str) -> Vec<Record> {
    let mut lines = dump.lines();
    let Some(list_indent) = lines
        .by_ref()
        .find(|l| l.trim() == "Notification List:")
        .map(indent)
    else {
        return Vec::new();
    };
    let mut records = Vec::new();
    let mut current: Option<RecordParser> = None;
    for line in lines {
        if let Some(p) = current.as_mut() {
            if p.in_extras() {
                p.line(line);
                continue;
            }
        }
        if line.trim().is_empty() {
            continue;
        }
        let depth = indent(line);
        if depth <= list_indent {
            // Inside a notification's block a shallow line is its text going on (a ticker
            // with a line break); after a record's fields, the list has ended.
            match current.as_ref() {
                Some(p) if p.section != Section::Fields => continue,
                _ => break,
            }
        }
        if line.trim_start().starts_with("NotificationRecord(") {
            records.extend(current.take().map(RecordParser::finish));
            current = Some(RecordParser::new(line));
        } else if let Some(p) = current.as_mut() {
            p.line(line);
        }
    }
    records.extend(current.map(RecordParser::finish));
    records
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Which part of a record the lines are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Fields,
    Notification,
    Public,
}

struct RecordParser {
    record: Record,
    header_key: Option<String>,
    body: usize,
    section: Section,
    seen_notification: bool,
    /// Inside `notification=`'s `extras={`: the index of the text extra the last entry
    /// began (`None` for one not reported), or `None` outside the block.
    extras: Option<Option<usize>>,
    extras_closed: bool,
    seen_fields: Vec<&'static str>,
}

impl RecordParser {
    fn new(header: &str) -> RecordParser {
        let h = header.trim();
        let word = |name: &str| {
            h.find(name)
                .map(|at| &h[at + name.len()..])
                .map(|rest| rest.split([' ', ')']).next().unwrap_or(""))
        };
        let header_key = h.find(" key=").map(|at| {
            let rest = &h[at + 5..];
            rest.rfind(": Notification(")
                .map_or(rest, |end| &rest[..end])
                .to_string()
        });
        let record = Record {
            package: word(" pkg=").unwrap_or_default().to_string(),
            user: h
                .find("user=UserHandle{")
                .map(|at| &h[at + 16..])
                .and_then(|rest| rest.split('}').next())
                .and_then(|n| n.parse().ok()),
            id: word(" id=").and_then(|n| n.parse().ok()),
            importance: word(" importance=").map(str::to_string),
            channel: word("Notification(channel=").map(str::to_string),
            ..Record::default()
        };
        RecordParser {
            record,
            header_key,
            body: indent(header) + 2,
            section: Section::Fields,
            seen_notification: false,
            extras: None,
            extras_closed: false,
            seen_fields: Vec::new(),
        }
    }

    fn in_extras(&self) -> bool {
        self.extras.is_some()
    }

    fn doubt(&mut self, why: String) {
        if !self.record.inconsistent.contains(&why) {
            self.record.inconsistent.push(why);
        }
    }

    /// The first time `field` is set; a second time is a doubt, the first value kept.
    fn first(&mut self, field: &'static str) -> bool {
        if self.seen_fields.contains(&field) {
            self.doubt(format!("`{field}` appears twice"));
            return false;
        }
        self.seen_fields.push(field);
        true
    }

    fn line(&mut self, line: &str) {
        let block = 2 * self.body;
        if let Some(current) = self.extras {
            if indent(line) == block && line.trim() == "}" {
                self.extras = None;
                self.extras_closed = true;
            } else if let Some((key, value)) = entry(line, block + 4) {
                let slot = TEXT_EXTRAS.iter().position(|(k, _)| *k == key);
                self.extras = Some(slot);
                if let Some(i) = slot {
                    if self.record.texts[i] != Extra::Absent {
                        self.doubt(format!("`{key}` appears twice"));
                        self.extras = Some(None);
                    } else {
                        self.record.texts[i] = start_value(value);
                    }
                }
            } else if let Some(i) = current {
                // A line break inside the value: the app's text goes on.
                if let Extra::Shown(text) = &mut self.record.texts[i] {
                    if text.len() <= 4 * MAX_TEXT_BYTES {
                        text.push('\n');
                        text.push_str(line);
                    }
                }
            }
            return;
        }
        let depth = indent(line);
        let text = line.trim();
        if depth == self.body {
            self.section = Section::Fields;
            self.field(text);
        } else if depth == block && self.section == Section::Notification {
            if text == "extras={" {
                if self.extras_closed {
                    self.doubt("a second `extras` block".into());
                } else {
                    self.extras = Some(None);
                }
            } else if text == "}" {
                self.doubt("an `extras` block closed twice".into());
            }
        }
    }

    fn field(&mut self, text: &str) {
        let (name, value) = text.split_once('=').unwrap_or((text, ""));
        match name {
            "notification" => {
                if self.seen_notification {
                    self.doubt("`notification` appears twice".into());
                } else {
                    self.seen_notification = true;
                    self.section = Section::Notification;
                }
            }
            "publicNotification" => self.section = Section::Public,
            "key" if self.first("key") => self.record.key = Some(value.to_string()),
            "flags" if self.first("flags") => {
                self.record.flags = value
                    .strip_prefix("0x")
                    .and_then(|h| u32::from_str_radix(h, 16).ok());
            }
            "mImportance" if self.first("mImportance") => {
                self.record.importance = Some(value.to_string());
            }
            "mCreationTimeMs" if self.first("mCreationTimeMs") => {
                self.record.created_ms = value.parse().ok();
            }
            "mUpdateTimeMs" if self.first("mUpdateTimeMs") => {
                self.record.updated_ms = value.parse().ok();
            }
            "effectiveNotificationChannel" if self.first("effectiveNotificationChannel") => {
                if let Some(id) = value
                    .strip_prefix("NotificationChannel{mId='")
                    .and_then(|rest| rest.split_once("', ").map(|(id, _)| id))
                {
                    self.record.channel = Some(id.to_string());
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Record {
        for extra in &mut self.record.texts {
            if let Extra::Shown(text) = extra {
                // `Type (value)`: the closing parenthesis ends the last line.
                if let Some(stripped) = text.strip_suffix(')') {
                    text.truncate(stripped.len());
                }
            }
        }
        if self.in_extras() {
            self.doubt("the `extras` block does not end".into());
        }
        match (self.record.key.clone(), self.header_key.take()) {
            (Some(key), Some(header)) if key != header => {
                self.doubt("the `key` line is not the header's key".into());
            }
            (None, header) => self.record.key = header,
            _ => {}
        }
        // A key is `user|package|id|tag|uid`: its package must be the header's.
        if let Some(key) = &self.record.key {
            if key.split('|').nth(1) != Some(self.record.package.as_str()) {
                self.doubt("the key names another package".into());
            }
        }
        self.record
    }
}

/// `key=value` at exactly `depth` spaces, the key a Bundle key (no spaces).
fn entry(line: &str, depth: usize) -> Option<(&str, &str)> {
    if indent(line) != depth {
        return None;
    }
    let (key, value) = line[depth..].split_once('=')?;
    let bundle_key = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-$:".contains(&b));
    bundle_key.then_some((key, value))
}

/// The first line of an extra's value: `null`, `Type [length=N]` or `Type (text`.
fn start_value(value: &str) -> Extra {
    if value == "null" {
        return Extra::Null;
    }
    let Some((_, rest)) = value.split_once(' ') else {
        return Extra::Shown(String::new());
    };
    if let Some(n) = rest
        .strip_prefix("[length=")
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
    {
        return Extra::Redacted(n);
    }
    Extra::Shown(rest.strip_prefix('(').unwrap_or(rest).to_string())
}

/// A record as the tool reports it.
pub(super) fn record_json(r: &Record) -> Value {
    let mut out = Map::new();
    let mut redacted = Map::new();
    let mut cut = Vec::new();
    out.insert("package".into(), json!(r.package));
    out.insert("user".into(), json!(r.user));
    out.insert("id".into(), json!(r.id));
    out.insert("key".into(), json!(r.key));
    for ((_, name), extra) in TEXT_EXTRAS.iter().zip(&r.texts) {
        let value = match extra {
            Extra::Absent | Extra::Null => Value::Null,
            Extra::Redacted(n) => {
                redacted.insert((*name).into(), json!(n));
                Value::Null
            }
            Extra::Shown(text) => {
                let kept = nl2sh_proto::text::prefix(text, MAX_TEXT_BYTES);
                if kept.len() < text.len() {
                    cut.push(json!(name));
                }
                json!(kept)
            }
        };
        out.insert((*name).into(), value);
    }
    let posted = r.updated_ms.or(r.created_ms);
    out.insert("posted_ms".into(), json!(posted));
    out.insert(
        "posted".into(),
        json!(posted.map(nl2sh_proto::clock::rfc3339_millis)),
    );
    out.insert(
        "ongoing".into(),
        json!(r.flags.map(|f| f & FLAG_ONGOING_EVENT != 0)),
    );
    out.insert("flags".into(), json!(r.flags.map(|f| format!("{f:#x}"))));
    out.insert("channel".into(), json!(r.channel));
    out.insert("importance".into(), json!(r.importance));
    out.insert("redacted".into(), Value::Object(redacted));
    out.insert("cut".into(), Value::Array(cut));
    out.insert("inconsistent".into(), json!(r.inconsistent));
    Value::Object(out)
}

/// The result: at most `MAX_NOTIFICATIONS`, within the output budget.
pub(super) fn result_json(records: &[Record], incomplete: bool) -> Value {
    let total = records.len();
    let (kept, over_budget) = within_budget(
        records.iter().take(MAX_NOTIFICATIONS).map(record_json),
        OUTPUT_BUDGET - 512,
    );
    let redacted = records
        .iter()
        .any(|r| r.texts.iter().any(|t| matches!(t, Extra::Redacted(_))));
    json!({
        "count": kept.len(),
        "total": total,
        "truncated": over_budget || total > kept.len(),
        "redacted": redacted,
        "incomplete": incomplete,
        "notifications": kept,
    })
}

pub(super) fn notifications() -> AndroidTool {
    AndroidTool {
        def: ToolDef {
            name: "android.notifications",
            description: "The notifications the device shows now (dumpsys notification \
                --noredact), most important first: package, title, text, big_text, \
                sub_text, posted (UTC) and posted_ms, key, ongoing, channel, importance. \
                Their content is private, so each call waits for the owner's approval \
                unless a grant names this exact action. At most 100, each text cut at \
                1 KiB (`cut`); values the device hid are null with their length in \
                `redacted`.",
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        program: "dumpsys",
        prepare: |_args, env, program| Ok(prepare(env, program)),
    }
}

fn prepare(env: &DeviceEnv, program: &str) -> Prepared {
    let argv = vec![
        program.to_string(),
        "notification".to_string(),
        "--noredact".to_string(),
    ];
    let mut assessment = Assessment::read_only();
    assessment
        .note_reason("reads the text of every notification (private: messages, sign-in codes)");
    Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: render(&argv),
        assessment,
        identity: env.ui_identity(),
        // Read-only, but private: it asks, and only a grant naming this action covers it.
        confinement: Confinement::Unconfined,
        resources: Vec::new(),
        timeout: ANDROID_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let mut spec = CommandSpec::new(argv);
                spec.max_stdout = MAX_DUMP_BYTES;
                let out = run_checked(&ctx, spec).await?;
                let err = String::from_utf8_lossy(&out.stderr.bytes);
                if out.stdout.bytes.is_empty() && err.contains("Can't find service") {
                    return Err(ToolError::Unavailable(
                        "this device has no notification service".into(),
                    ));
                }
                let dump = String::from_utf8_lossy(&out.stdout.bytes);
                let records = parse(&dump);
                let apps = records
                    .iter()
                    .take(MAX_NOTIFICATIONS)
                    .map(|r| r.package.as_str());
                Ok(
                    ToolOutput::json(true, &result_json(&records, out.stdout.dropped > 0))
                        .read_from(apps),
                )
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STANDIN: &str =
        include_str!("../../../../tests/fixtures/android-bin/data/notification.txt");

    fn shown(s: &str) -> Extra {
        Extra::Shown(s.into())
    }

    #[test]
    fn the_unredacted_layout_gives_each_field() {
        let r = parse(STANDIN);
        assert_eq!(r.len(), 3, "{r:#?}");
        let m = &r[0];
        assert_eq!(m.package, "com.google.android.apps.messaging");
        assert_eq!(m.user, Some(0));
        assert_eq!(m.id, Some(12));
        assert_eq!(
            m.key.as_deref(),
            Some("0|com.google.android.apps.messaging|12|conv-7|10143")
        );
        assert_eq!(m.flags, Some(0x10));
        assert_eq!(m.importance.as_deref(), Some("HIGH"));
        assert_eq!(m.channel.as_deref(), Some("incoming_messages"));
        assert_eq!(
            (m.created_ms, m.updated_ms),
            (Some(1767261700000), Some(1767261840123))
        );
        // The text spans two lines and ends in a parenthesis of its own; the public
        // version's title is not the notification's.
        assert_eq!(
            m.texts,
            [
                shown("Alice"),
                shown("See you at 6?\nBring the keys (the spare ones)"),
                Extra::Absent,
                Extra::Absent
            ]
        );
        assert!(m.inconsistent.is_empty(), "{:?}", m.inconsistent);
        assert_eq!(r[1].flags, Some(0x2));
        assert_eq!(r[1].user, Some(-1));
        assert_eq!(r[1].importance.as_deref(), Some("LOW"));
        assert_eq!(r[2].texts[0], shown("Build (nightly) finished"));
        assert_eq!(r[2].texts[1], Extra::Null);
        assert_eq!(r[2].texts[2], shown("All 412 tests passed"));

        let v = result_json(&r, false);
        assert_eq!(
            (v["count"].clone(), v["total"].clone()),
            (json!(3), json!(3))
        );
        assert_eq!(v["truncated"], json!(false));
        assert_eq!(v["redacted"], json!(false));
        let n = &v["notifications"];
        assert_eq!(n[0]["posted_ms"], json!(1767261840123i64));
        assert_eq!(n[0]["posted"], json!("2026-01-01T10:04:00.123Z"));
        assert_eq!(n[0]["ongoing"], json!(false));
        assert_eq!(n[0]["flags"], json!("0x10"));
        assert_eq!(n[1]["ongoing"], json!(true));
        assert_eq!(n[1]["title"], json!("USB debugging connected"));
        assert_eq!(n[1]["text"], json!("Tap to turn off USB debugging"));
        assert_eq!(n[2]["text"], Value::Null);
        assert_eq!(n[2]["big_text"], json!("All 412 tests passed"));
    }

    #[test]
    fn no_list_means_no_notifications() {
        assert!(
            parse("Current Notification Manager state:\n  mUseAttentionLight=true\n").is_empty()
        );
        assert!(parse("").is_empty());
        assert!(parse("garbage\n\0\u{feff}(((\n").is_empty());
    }

    /// A text that imitates the dump: its own lines stay its text; a forged record with
    /// another package's key, or a field twice, is reported as inconsistent.
    #[test]
    fn a_text_imitating_the_layout_stays_text_or_is_flagged() {
        let host = |text: &str| {
            format!(
                "  Notification List:\n    NotificationRecord(0x1: pkg=com.evil user=UserHandle{{0}} id=1 tag=null importance=3 key=0|com.evil|1|null|10001: Notification(channel=c))\n      flags=0x0\n      key=0|com.evil|1|null|10001\n      notification=\n            extras={{\n                android.text=String ({text})\n                android.title=String (Hi)\n            }}\n      publicNotification=\n            None\n      mUpdateTimeMs=5\n"
            )
        };
        // Lines at other depths are the text's own.
        let r = parse(&host(
            "a\n    NotificationRecord(0x2: pkg=com.bank user=UserHandle{0} id=9 key=0|com.bank|9|null|10002: Notification(channel=c))\n      key=0|com.bank|9|null|10002",
        ));
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].package, "com.evil");
        assert!(matches!(&r[0].texts[1], Extra::Shown(t) if t.contains("com.bank")));
        assert_eq!(r[0].texts[0], shown("Hi"));
        // A title line of the text's own at the entries' depth: the first one stands,
        // and the record says so.
        let r = parse(&host("a\n                android.title=String (Forged"));
        assert_eq!(r[0].texts[0], shown("Forged"));
        assert!(!r[0].inconsistent.is_empty());
        // Closing the block and forging a record: the host record's fields repeat.
        let r = parse(&host(
            "a\n            }\n    NotificationRecord(0x2: pkg=com.bank user=UserHandle{0} id=9 importance=4 key=0|com.bank|9|null|10002: Notification(channel=c))\n      key=0|com.evil|1|null|10001\n      notification=\n            extras={\n                android.text=String (code 1234",
        ));
        assert_eq!(r.len(), 2);
        let forged = &r[1];
        assert_eq!(forged.package, "com.bank");
        assert!(!forged.inconsistent.is_empty(), "{forged:#?}");
    }

    #[test]
    fn a_line_break_in_a_ticker_does_not_end_the_list() {
        let dump = STANDIN.replace(
            "tickerText=Alice: See you at 6?",
            "tickerText=Alice: See you at 6?\nmUseAttentionLight=true\n  mHasLight=true",
        );
        let r = parse(&dump);
        assert_eq!(r.len(), 3, "{r:#?}");
        assert!(r.iter().all(|r| r.inconsistent.is_empty()), "{r:#?}");
    }

    #[test]
    fn bounds_hold() {
        let one = |i: usize, text: &str| {
            format!(
                "    NotificationRecord(0x{i:x}: pkg=p{i} user=UserHandle{{0}} id={i} tag=null importance=3 key=0|p{i}|{i}|null|1: Notification(channel=c))\n      key=0|p{i}|{i}|null|1\n      notification=\n            extras={{\n                android.text=String ({text})\n            }}\n"
            )
        };
        let many: String = (0..150).map(|i| one(i, "x")).collect();
        let r = parse(&format!("  Notification List:\n{many}"));
        assert_eq!(r.len(), 150);
        let v = result_json(&r, false);
        assert_eq!(v["count"], json!(MAX_NOTIFICATIONS));
        assert_eq!(v["total"], json!(150));
        assert_eq!(v["truncated"], json!(true));
        let long = "y".repeat(10 * MAX_TEXT_BYTES);
        let big: String = (0..100).map(|i| one(i, &long)).collect();
        let r = parse(&format!("  Notification List:\n{big}"));
        let v = result_json(&r, true);
        assert!(
            v.to_string().len() <= OUTPUT_BUDGET,
            "{}",
            v.to_string().len()
        );
        assert_eq!(v["truncated"], json!(true));
        assert_eq!(v["incomplete"], json!(true));
        assert_eq!(v["notifications"][0]["cut"], json!(["text"]));
        assert_eq!(
            v["notifications"][0]["text"].as_str().unwrap().len(),
            MAX_TEXT_BYTES
        );
    }

    /// The real bugreport slice (Android 13, MediaTek): redacted values say so with their
    /// length; everything else comes through with the values the file states.
    #[test]
    fn the_real_redacted_dump_parses() {
        let Some(root) = super::super::corpus::root_or_skip() else {
            return;
        };
        let files = super::super::corpus::files(&root, "notification");
        assert!(!files.is_empty());
        for (name, text) in &files {
            let r = parse(text);
            assert!(!r.is_empty(), "{name}");
            for rec in &r {
                assert!(rec.inconsistent.is_empty(), "{name}: {rec:#?}");
                assert!(rec.key.is_some() && rec.flags.is_some(), "{name}: {rec:#?}");
            }
        }
        let (_, text) = files
            .iter()
            .find(|(n, _)| n.contains("mtk_a13"))
            .expect("the MediaTek slice");
        let r = parse(text);
        assert_eq!(r.len(), 5);
        let keys: Vec<_> = r.iter().map(|r| r.key.clone().unwrap()).collect();
        assert_eq!(
            keys,
            [
                "-1|android|2147483647|ranker_group|1000|ranker_group",
                "-1|android|26|null|1000",
                "-1|android|55|null|1000",
                "-1|android|32|null|1000",
                "0|com.debug.loggerui|365001|null|10046",
            ]
        );
        assert_eq!(r[0].texts, <[Extra; 4]>::default());
        assert_eq!(r[1].texts[0], Extra::Redacted(23));
        assert_eq!(r[1].texts[1], Extra::Redacted(29));
        assert_eq!(r[4].texts[0], Extra::Redacted(32));
        assert_eq!(r[4].texts[2], Extra::Redacted(44));
        assert_eq!(r[4].package, "com.debug.loggerui");
        assert_eq!(r[4].flags, Some(0x68));
        assert_eq!(r[4].importance.as_deref(), Some("HIGH"));
        assert_eq!(
            r[4].channel.as_deref(),
            Some("com.debug.loggerui.notification")
        );
        assert_eq!(r[4].updated_ms, Some(1765260202638));
        assert_eq!(r[3].channel.as_deref(), Some("USB"));
        let v = result_json(&r, false);
        assert_eq!(v["redacted"], json!(true));
        let n = &v["notifications"][1];
        assert_eq!(n["title"], Value::Null);
        assert_eq!(n["redacted"], json!({"title": 23, "text": 29}));
        assert_eq!(n["ongoing"], json!(true));
        assert_eq!(v["notifications"][4]["ongoing"], json!(false));
    }
}
