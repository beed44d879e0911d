//! `device.info` and `process.list`: read-only views of the running system from /proc.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use nl2sh_proto::channels::{Confinement, Identity};

use super::TableTool;
use crate::device::DeviceEnv;
use crate::risk::Assessment;
use crate::tools::{Args, Prepared, ToolDef, ToolError, ToolOutput};

const PROC_TIMEOUT: Duration = Duration::from_secs(20);

/// A read of the tool's own choosing, as the executor, off the async threads.
pub(super) fn read_only(
    action: &str,
    run: impl FnOnce() -> Result<ToolOutput, ToolError> + Send + 'static,
) -> Prepared {
    Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: action.into(),
        assessment: Assessment::read_only(),
        identity: Identity::Launching,
        // The tool's own reads of /proc and statvfs; nothing of the caller's choosing.
        confinement: Confinement::Fixed,
        resources: Vec::new(),
        timeout: PROC_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| Box::pin(async move { ctx.blocking(run).await })),
    }
}

/// `Key:   123 kB` lines of /proc/meminfo, in KiB.
fn meminfo() -> Map<String, Value> {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mut out = Map::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if !["MemTotal", "MemAvailable", "SwapTotal", "SwapFree"].contains(&k) {
            continue;
        }
        if let Ok(n) = v.trim().trim_end_matches("kB").trim().parse::<u64>() {
            out.insert(format!("{}_kib", k.to_lowercase()), json!(n));
        }
    }
    out
}

fn storage(path: &str) -> Value {
    match nix::sys::statvfs::statvfs(path) {
        Ok(s) => {
            let frag = s.fragment_size();
            json!({
                "path": path,
                "total_bytes": s.blocks() * frag,
                "available_bytes": s.blocks_available() * frag,
            })
        }
        Err(_) => Value::Null,
    }
}

pub fn info() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "device.info",
            description: "Current device state: uptime, load, memory, storage of / and /data \
                (and /sdcard on Android), CPU count, and the Android profile in use.",
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        prepare: prepare_info,
    }
}

fn prepare_info(_args: &Map<String, Value>, env: &Arc<DeviceEnv>) -> Result<Prepared, ToolError> {
    let env = env.clone();
    Ok(read_only(
        "read /proc and file system statistics",
        move || {
            let uptime = std::fs::read_to_string("/proc/uptime").ok().and_then(|s| {
                s.split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
            });
            let load: Vec<f64> = std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .filter_map(|v| v.parse().ok())
                .collect();
            let mut mounts = vec![storage("/"), storage("/data")];
            if env.android {
                mounts.push(storage("/sdcard"));
            }
            mounts.retain(|m| !m.is_null());
            Ok(ToolOutput::json(
                true,
                &json!({
                    "android": env.android,
                    "euid": env.euid,
                    "uptime_seconds": uptime,
                    "load_average": load,
                    "memory": meminfo(),
                    "storage": mounts,
                    "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
                    "android_programs": env.programs.keys().collect::<Vec<_>>(),
                }),
            ))
        },
    ))
}

/// One process, or None when it vanished while we read it.
pub fn process_entry(pid: u32) -> Option<Value> {
    let stat = nl2sh_proto::procfs::Stat::of(pid)?;
    let name = stat.comm().into_owned();
    let state = stat.state().ok()?.to_string();
    let ppid = stat.ppid().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    let uid: Option<u32> =
        field("Uid:").and_then(|v| v.split_whitespace().next().and_then(|u| u.parse().ok()));
    let rss_kib: Option<u64> =
        field("VmRSS:").and_then(|v| v.trim_end_matches("kB").trim().parse().ok());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut cmdline: String = String::from_utf8_lossy(&cmdline)
        .replace('\0', " ")
        .trim()
        .to_string();
    cmdline = nl2sh_proto::text::shortened(&cmdline, 256);
    Some(json!({
        "pid": pid, "ppid": ppid, "uid": uid, "state": state, "name": name,
        "cmdline": cmdline, "rss_kib": rss_kib,
    }))
}

pub fn processes() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "process.list",
            description: "Running processes from /proc: pid, ppid, uid, state, name, \
                command line (bounded) and resident memory; optionally filtered by a \
                substring of the name or command line.",
            schema: json!({
                "type": "object",
                "properties": {
                    "filter": {"type": "string", "maxLength": 256},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 2000}
                },
                "additionalProperties": false
            }),
        },
        prepare: prepare_processes,
    }
}

fn prepare_processes(
    args: &Map<String, Value>,
    _env: &Arc<DeviceEnv>,
) -> Result<Prepared, ToolError> {
    let a = Args(args);
    let filter = a.opt_str("filter")?.map(str::to_string);
    let limit = a.opt_u64("limit")?.unwrap_or(500) as usize;
    Ok(read_only(
        "read /proc/<pid>/{stat,status,cmdline}",
        move || {
            let mut pids: Vec<u32> = std::fs::read_dir("/proc")
                .map_err(|e| ToolError::Failed(format!("cannot read /proc: {e}")))?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            pids.sort_unstable();
            let matching: Vec<Value> = pids
                .into_iter()
                .filter_map(process_entry)
                .filter(|p| match &filter {
                    None => true,
                    Some(f) => [&p["name"], &p["cmdline"]]
                        .iter()
                        .any(|v| v.as_str().is_some_and(|s| s.contains(f.as_str()))),
                })
                .collect();
            let total = matching.len();
            let processes: Vec<Value> = matching.into_iter().take(limit).collect();
            Ok(ToolOutput::json(
                true,
                &json!({"processes": processes, "total": total, "truncated": total > limit}),
            ))
        },
    ))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// A `sleep` whose command name (field 2 of its stat line) is `name`: the kernel takes
    /// it from the name of the file executed, here a link to `sleep`.
    struct Named {
        child: Child,
        /// Holds the link while the child lives.
        _dir: tempfile::TempDir,
    }

    impl Named {
        fn spawn(name: &[u8]) -> Named {
            let dir = tempfile::tempdir().unwrap();
            let sleep = ["/bin/sleep", "/usr/bin/sleep", "/system/bin/sleep"]
                .into_iter()
                .find(|p| std::path::Path::new(p).exists())
                .unwrap();
            let link = dir.path().join(OsStr::from_bytes(name));
            std::os::unix::fs::symlink(sleep, &link).unwrap();
            let child = Command::new(&link)
                .arg("30")
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            Named { child, _dir: dir }
        }

        /// Its entry, once it runs `sleep` (before the exec it has the test's name).
        fn entry(&self, name: &str) -> Value {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let entry = process_entry(self.child.id()).unwrap();
                if entry["name"] == name {
                    return entry;
                }
                assert!(Instant::now() < deadline, "{entry}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    impl Drop for Named {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A name that fakes a state and a parent moves no field.
    #[test]
    fn a_hostile_name_is_the_name_and_nothing_else() {
        let child = Named::spawn(b"a) R 1 2 (b");
        let entry = child.entry("a) R 1 2 (b");
        assert_eq!(entry["pid"], child.child.id());
        assert_eq!(entry["ppid"], std::process::id());
        // Sleeping, running, or (on a loaded machine) in a wait the kernel does not
        // interrupt: never anything the name spelled after its fake `)`, such as `1`.
        assert!(
            matches!(entry["state"].as_str(), Some("S" | "R" | "D")),
            "{entry}"
        );
    }

    /// A name that is not UTF-8 is listed (its bytes replaced), not hidden from the list.
    #[test]
    fn a_name_that_is_not_utf8_is_listed() {
        let child = Named::spawn(b"x\xff\xfe");
        let entry = child.entry("x\u{fffd}\u{fffd}");
        assert_eq!(entry["ppid"], std::process::id());
    }
}
