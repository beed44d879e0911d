//! `device.kernel_log`: the kernel's log (what `dmesg` prints), read by the tool itself
//! from /dev/kmsg. The level and text filters are applied here; nothing the caller sends
//! reaches a program or the kernel.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::device::read_only;
use super::{newest_within_budget, TableTool, OUTPUT_BUDGET};
use crate::device::DeviceEnv;
use crate::tools::{Args, Prepared, ToolDef, ToolError, ToolOutput};

const KMSG: &str = "/dev/kmsg";
const DEFAULT_RECORDS: u64 = 200;
const MAX_RECORDS: u64 = 2000;
const MAX_CONTAINS_BYTES: usize = 256;
/// Reads per call at most: the ring buffer holds far fewer records, but a kernel that
/// logs as fast as we read must not keep the call going.
const MAX_READS: usize = 100_000;
/// One read returns one whole record or fails with EINVAL; the kernel formats at most
/// 8 KiB (CONSOLE_EXT_LOG_MAX) per record.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Syslog severities, most severe first: a record's level is its index.
pub const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// One record of /dev/kmsg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgRecord {
    /// 0 (kernel) for the kernel's own messages; user space may write others.
    pub facility: u32,
    /// Index into [`LEVELS`].
    pub level: u8,
    pub seq: u64,
    /// Microseconds since boot.
    pub usec: u64,
    /// The text as the kernel gives it (it escapes unprintable bytes as `\xNN`); any other
    /// byte that is not UTF-8 becomes U+FFFD.
    pub message: String,
}

/// One read's worth of /dev/kmsg: `prio,seq,usec,flags[,more];message\n`, then dictionary
/// lines (` KEY=value`) that are not part of the message. `None` when the header is not
/// that shape.
pub fn parse_record(raw: &[u8]) -> Option<KmsgRecord> {
    let semi = raw.iter().position(|&b| b == b';')?;
    let header = std::str::from_utf8(&raw[..semi]).ok()?;
    let mut fields = header.split(',');
    let prio: u32 = fields.next()?.parse().ok()?;
    let seq: u64 = fields.next()?.parse().ok()?;
    let usec: u64 = fields.next()?.parse().ok()?;
    // Flags (`-`, or `c` for a continued line on old kernels) must be there; more fields
    // (`caller=T1`) may follow.
    fields.next().filter(|f| !f.is_empty())?;
    let body = &raw[semi + 1..];
    let text = match body.iter().position(|&b| b == b'\n') {
        Some(end) => &body[..end],
        None => body,
    };
    Some(KmsgRecord {
        facility: prio >> 3,
        level: (prio & 7) as u8,
        seq,
        usec,
        message: String::from_utf8_lossy(text).into_owned(),
    })
}

/// Which records a call wants.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Keep levels up to this index (7, debug, keeps everything).
    pub max_level: u8,
    /// ASCII-lowercased substring the message must contain.
    pub contains: Option<String>,
}

impl Filter {
    fn keeps(&self, r: &KmsgRecord) -> bool {
        r.level <= self.max_level
            && self
                .contains
                .as_deref()
                .is_none_or(|c| r.message.to_ascii_lowercase().contains(c))
    }
}

/// The last `limit` records a filter keeps, and how many it kept in all.
#[derive(Debug)]
pub struct Tail {
    filter: Filter,
    limit: usize,
    pub newest: VecDeque<KmsgRecord>,
    pub matched: usize,
}

impl Tail {
    pub fn new(filter: Filter, limit: usize) -> Self {
        Self {
            filter,
            limit,
            newest: VecDeque::with_capacity(limit.min(256)),
            matched: 0,
        }
    }

    pub fn push(&mut self, r: KmsgRecord) {
        if !self.filter.keeps(&r) {
            return;
        }
        self.matched += 1;
        if self.newest.len() == self.limit {
            self.newest.pop_front();
        }
        self.newest.push_back(r);
    }
}

/// What a scan of /dev/kmsg saw besides the records.
#[derive(Debug, Default)]
struct Scan {
    /// Stopped at `MAX_READS` before reaching the end of the log.
    capped: bool,
}

fn open_kmsg() -> Result<std::fs::File, ToolError> {
    // Non-blocking, so reading stops at the end of the log instead of waiting for the
    // next record; std adds O_CLOEXEC.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(KMSG)
        .map_err(|e| {
            let why = match e.kind() {
                ErrorKind::NotFound => "this system has no /dev/kmsg".to_string(),
                ErrorKind::PermissionDenied => format!(
                    "the executor (uid {}) may not read the kernel log: it needs root, or \
                     CAP_SYSLOG where kernel.dmesg_restrict is 1",
                    nix::unistd::geteuid()
                ),
                _ => format!("{KMSG}: {e}"),
            };
            ToolError::Unavailable(format!("cannot read the kernel log: {why}"))
        })
}

/// Feed every record from the start of the log (after the last `dmesg -C`, as dmesg
/// shows) to `tail`, until the end of the log or `MAX_READS`.
fn scan(tail: &mut Tail) -> Result<Scan, ToolError> {
    let mut file = open_kmsg()?;
    // Where `dmesg` starts: after the last clear. Without it (an old kernel), reading
    // starts at the oldest record still held, which is the same unless someone cleared.
    let _ = nix::unistd::lseek(&file, 0, nix::unistd::Whence::SeekData);
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let mut scan = Scan::default();
    for _ in 0..MAX_READS {
        match file.read(&mut buf) {
            Ok(0) => return Ok(scan),
            // A record without the header is not one we can date or rank: skipped.
            Ok(n) => {
                if let Some(r) = parse_record(&buf[..n]) {
                    tail.push(r);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(scan),
            // Records were overwritten while we read; the next read resumes at the oldest
            // one still held.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(ToolError::Failed(format!("reading {KMSG}: {e}"))),
        }
    }
    scan.capped = true;
    Ok(scan)
}

fn record_json(r: &KmsgRecord) -> Value {
    json!({
        "level": LEVELS[usize::from(r.level & 7)],
        // Microsecond precision, like dmesg's timestamps.
        "seconds": r.usec as f64 / 1e6,
        "message": r.message,
    })
}

pub fn kernel_log() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "device.kernel_log",
            description: "The kernel log (what dmesg shows), read from /dev/kmsg: the last \
                `lines` records, oldest first, each with its level and seconds since boot. \
                `min_level` keeps records at least that severe (err keeps emerg, alert, crit \
                and err); `contains` keeps records whose message contains it (ASCII \
                case-insensitive). Needs root (or CAP_SYSLOG).",
            schema: json!({
                "type": "object",
                "properties": {
                    "lines": {"type": "integer", "minimum": 1, "maximum": MAX_RECORDS,
                              "description": "Records to return at most (default 200)"},
                    "min_level": {"type": "string", "enum": LEVELS,
                                  "description": "Least severe level kept (default debug: all)"},
                    "contains": {"type": "string", "minLength": 1,
                                 "maxLength": MAX_CONTAINS_BYTES}
                },
                "additionalProperties": false
            }),
        },
        prepare: prepare_kernel_log,
    }
}

fn prepare_kernel_log(
    args: &Map<String, Value>,
    _env: &Arc<DeviceEnv>,
) -> Result<Prepared, ToolError> {
    let a = Args(args);
    let limit = a.opt_u64("lines")?.unwrap_or(DEFAULT_RECORDS);
    if !(1..=MAX_RECORDS).contains(&limit) {
        return Err(ToolError::InvalidArguments(format!(
            "`lines` must be 1 to {MAX_RECORDS}"
        )));
    }
    let min_level = a.opt_str("min_level")?;
    let max_level = match min_level {
        None => 7,
        Some(name) => LEVELS.iter().position(|l| *l == name).ok_or_else(|| {
            ToolError::InvalidArguments(format!("`min_level` must be one of {}", LEVELS.join(", ")))
        })? as u8,
    };
    let contains = a.opt_str("contains")?;
    if contains.is_some_and(|c| c.len() > MAX_CONTAINS_BYTES) {
        return Err(ToolError::InvalidArguments(format!(
            "`contains` must be at most {MAX_CONTAINS_BYTES} bytes"
        )));
    }
    let mut action = format!("read the kernel log from {KMSG}: last {limit} records");
    if let Some(l) = min_level {
        action.push_str(&format!(", level {l} or more severe"));
    }
    if let Some(c) = contains {
        action.push_str(&format!(", containing {c:?}"));
    }
    let filter = Filter {
        max_level,
        contains: contains.map(str::to_ascii_lowercase),
    };
    Ok(read_only(&action, move || {
        let mut tail = Tail::new(filter, limit as usize);
        let scan = scan(&mut tail)?;
        let records: Vec<Value> = tail.newest.iter().map(record_json).collect();
        // Room for the rest of the object.
        let (records, cut) = newest_within_budget(records, OUTPUT_BUDGET - 256);
        let value = json!({
            "total": tail.matched,
            "truncated": cut || records.len() < tail.matched || scan.capped,
            "records": records,
        });
        Ok(ToolOutput::json(true, &value))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::ChildSetup;
    use crate::tools::ExecContext;
    use std::time::Instant;
    use tokio_util::sync::CancellationToken;

    fn rec(raw: &[u8]) -> KmsgRecord {
        parse_record(raw).unwrap_or_else(|| panic!("{:?}", String::from_utf8_lossy(raw)))
    }

    #[test]
    fn records_give_level_facility_time_and_message() {
        let r = rec(b"6,339,5140900,-;NET: Registered PF_INET6 protocol family\n");
        assert_eq!(
            r,
            KmsgRecord {
                facility: 0,
                level: 6,
                seq: 339,
                usec: 5_140_900,
                message: "NET: Registered PF_INET6 protocol family".into()
            }
        );
        assert_eq!(LEVELS[usize::from(r.level)], "info");
        // prio 30 = facility 3 (daemon), level 6; a caller field after the flags.
        let r = rec(b"30,12,99,-,caller=T1;systemd[1]: Started Journal Service.\n");
        assert_eq!((r.facility, r.level), (3, 6));
        assert_eq!(r.message, "systemd[1]: Started Journal Service.");
        let r = rec(b"0,1,0,c;panic\n");
        assert_eq!(
            (LEVELS[usize::from(r.level)], r.message.as_str()),
            ("emerg", "panic")
        );
        assert_eq!(rec(b"3,2,7,-;no newline").message, "no newline");
        assert_eq!(rec(b"4,3,8,-;\n").message, "");
    }

    #[test]
    fn dictionary_lines_are_not_the_message() {
        let r = rec(
            b"3,1040,9402010,-;usb 1-1: device descriptor read/64, error -71\n \
                      SUBSYSTEM=usb\n DEVICE=c189:1\n",
        );
        assert_eq!(r.message, "usb 1-1: device descriptor read/64, error -71");
        assert_eq!(r.level, 3);
    }

    #[test]
    fn escapes_stay_visible_and_bad_bytes_become_replacement_characters() {
        // The kernel escapes control bytes itself; the text keeps the escape.
        let r = rec(b"4,5,6,-;bad\\x1b[31m name \\x0a here\n");
        assert_eq!(r.message, "bad\\x1b[31m name \\x0a here");
        let r = rec(b"4,5,6,-;caf\xc3\xa9 \xff\xfe end\n");
        assert_eq!(r.message, "caf\u{e9} \u{fffd}\u{fffd} end");
    }

    #[test]
    fn malformed_records_are_refused() {
        for bad in [
            &b""[..],
            b"no header at all\n",
            b"6,1,2;missing flags\n",
            b"6,1,2,;empty flags\n",
            b"x,1,2,-;prio not a number\n",
            b"6,-1,2,-;negative seq\n",
            b"6,1,2.5,-;fractional time\n",
            b"6,1\xff,2,-;bytes in the header\n",
            b"99999999999,1,2,-;prio too large\n",
        ] {
            assert_eq!(
                parse_record(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_tail_keeps_the_newest_matching_records() {
        let filter = Filter {
            max_level: 4,
            contains: Some("usb".into()),
        };
        let mut tail = Tail::new(filter, 2);
        for (i, (level, text)) in [
            (3, "usb 1-1: error -71"),
            (6, "usb 1-1: new device"),
            (4, "USB hub found"),
            (2, "ext4: corrupted"),
            (0, "usb: panic"),
        ]
        .into_iter()
        .enumerate()
        {
            tail.push(KmsgRecord {
                facility: 0,
                level,
                seq: i as u64,
                usec: 0,
                message: text.into(),
            });
        }
        assert_eq!(tail.matched, 3);
        let kept: Vec<&str> = tail.newest.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(kept, ["USB hub found", "usb: panic"]);
    }

    #[test]
    fn arguments_are_checked() {
        let env = Arc::new(DeviceEnv::probe(None));
        let prepare = |v: Value| prepare_kernel_log(v.as_object().unwrap(), &env);
        assert!(prepare(json!({"lines": 0})).is_err());
        assert!(prepare(json!({"lines": 2001})).is_err());
        assert!(prepare(json!({"min_level": "loud"})).is_err());
        assert!(prepare(json!({"contains": "é".repeat(129)})).is_err());
        let p = prepare(json!({"lines": 5, "min_level": "err", "contains": "; rm -rf /"})).unwrap();
        assert_eq!(
            p.action,
            "read the kernel log from /dev/kmsg: last 5 records, level err or more severe, \
             containing \"; rm -rf /\""
        );
        assert_eq!(p.confinement, nl2sh_proto::channels::Confinement::Fixed);
        assert_eq!(
            p.assessment.level,
            nl2sh_proto::channels::RiskLevel::ReadOnly
        );
    }

    /// Run the tool the way the pipeline does (minus approval).
    async fn run(args: Value) -> Result<Value, ToolError> {
        let env = Arc::new(DeviceEnv::probe(None));
        let prepared = prepare_kernel_log(args.as_object().unwrap(), &env)?;
        let ctx = ExecContext {
            identity: prepared.identity,
            setup: ChildSetup::for_identity(prepared.identity, env.euid).unwrap(),
            sandbox: None,
            deadline: Instant::now() + prepared.timeout,
            cancel: CancellationToken::new(),
            groups: Arc::default(),
            env,
        };
        let out = (prepared.run)(ctx).await?;
        assert!(out.success);
        assert!(out.output.len() <= OUTPUT_BUDGET, "{}", out.output.len());
        Ok(serde_json::from_str(&out.output).unwrap())
    }

    /// Write a record of the test's own to the kernel log (root, where /dev/kmsg takes
    /// writes): a word no other record has, then control bytes the kernel escapes. Returns
    /// the word.
    fn write_own_record() -> std::io::Result<String> {
        use std::io::Write;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let marker = format!("nl2sh-kernel-log-test-{}-{nanos}", std::process::id());
        // <5>: notice. One write is one record.
        let record = format!("<5>{marker}: \x01\x1b[2J escaped\n");
        std::fs::OpenOptions::new()
            .write(true)
            .open(KMSG)?
            .write_all(record.as_bytes())?;
        Ok(marker)
    }

    #[tokio::test]
    async fn the_real_kernel_log_is_read_and_filtered() {
        if let Err(e) = open_kmsg() {
            // The tool says the same: check that it does, and that it is clear.
            let err = run(json!({})).await.unwrap_err().to_string();
            assert!(err.contains("cannot read the kernel log"), "{err}");
            nl2sh_proto::test_skip::skip(format_args!("{e}"));
            return;
        }
        let all = run(json!({"lines": 2000})).await.unwrap();
        let records = all["records"].as_array().unwrap();
        assert!(!records.is_empty(), "{all}");
        let total = all["total"].as_u64().unwrap() as usize;
        assert!(records.len() <= total);
        for r in records {
            assert!(LEVELS.contains(&r["level"].as_str().unwrap()), "{r}");
            assert!(r["seconds"].as_f64().unwrap() >= 0.0, "{r}");
        }
        let times: Vec<f64> = records
            .iter()
            .map(|r| r["seconds"].as_f64().unwrap())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "oldest first");

        let few = run(json!({"lines": 3})).await.unwrap();
        let few_records = few["records"].as_array().unwrap();
        assert_eq!(few_records.len(), total.min(3));
        assert_eq!(few["truncated"], json!(total > 3));

        // Filters: a word of a record this test writes itself (as root), and a level. The
        // machine's own log may hold anything: a word picked from it may be longer than
        // `contains` allows (a line of bytes the kernel escaped, say).
        let sample = match write_own_record() {
            Ok(marker) => marker,
            Err(e) => {
                eprintln!("cannot write a record of its own ({e}): a word of the log's");
                records
                    .iter()
                    .rev()
                    .find_map(|r| {
                        r["message"].as_str().unwrap().split_whitespace().find(|w| {
                            (5..=64).contains(&w.len())
                                && w.bytes().all(|b| b.is_ascii_alphanumeric())
                        })
                    })
                    .expect("some record has a word")
                    .to_string()
            }
        }
        .to_ascii_uppercase();
        let found = run(json!({"contains": sample})).await.unwrap();
        let found_records = found["records"].as_array().unwrap();
        assert!(!found_records.is_empty(), "{sample}: {found}");
        for r in found_records {
            let m = r["message"].as_str().unwrap().to_ascii_uppercase();
            assert!(m.contains(&sample), "{sample}: {r}");
        }
        if sample.starts_with("NL2SH-KERNEL-LOG-TEST-") {
            // Exactly the record written, at its level, its control bytes as the kernel
            // escaped them.
            assert_eq!(found["total"], json!(1), "{found}");
            let r = &found_records[0];
            assert_eq!(r["level"], json!("notice"), "{r}");
            let m = r["message"].as_str().unwrap();
            assert!(m.ends_with(": \\x01\\x1b[2J escaped"), "{r}");
            assert!(!m.chars().any(|c| c.is_control()), "{r}");
        }
        let severe = run(json!({"min_level": "warning", "lines": 2000}))
            .await
            .unwrap();
        let severe_records = severe["records"].as_array().unwrap();
        for r in severe_records {
            let level = r["level"].as_str().unwrap();
            assert!(
                ["emerg", "alert", "crit", "err", "warning"].contains(&level),
                "{r}"
            );
        }
        let any_severe = records.iter().any(|r| {
            ["emerg", "alert", "crit", "err", "warning"].contains(&r["level"].as_str().unwrap())
        });
        assert_eq!(!severe_records.is_empty(), any_severe, "{severe}");
        let none = run(json!({"contains": "nl2sh: no kernel record says this \u{1}"}))
            .await
            .unwrap();
        assert_eq!(
            (none["total"].clone(), none["records"].clone()),
            (json!(0), json!([]))
        );
    }
}
