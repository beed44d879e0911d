//! File tools: `fs.read`, `fs.list`, `fs.stat`, `fs.write`. Paths are absolute; symlinks
//! are resolved before assessment so a link cannot disguise where a write lands.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};

use nl2sh_proto::channels::{ActionData, Confinement, Identity, SandboxPayload};

use super::TableTool;
use crate::device::DeviceEnv;
use crate::file_reads::{file_type, list_dir, mtime, read_file, MAX_LIST_ENTRIES, MAX_READ_BYTES};
use crate::risk::{self, Assessment};
use crate::tools::Resource;
use crate::tools::{normalize_path, Args, Prepared, ToolDef, ToolError, ToolOutput};

const FS_TIMEOUT: Duration = Duration::from_secs(30);

/// Where `path` really points: symlinks in the parent and in the last component resolved
/// when they exist; otherwise the lexical path.
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => match fs::canonicalize(parent) {
            Ok(p) => p.join(name),
            Err(_) => path.to_path_buf(),
        },
        _ => path.to_path_buf(),
    }
}

fn path_arg(a: &Args<'_>) -> Result<PathBuf, ToolError> {
    normalize_path(a.str("path")?, None)
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> ToolError {
    ToolError::Failed(format!("{what} {}: {e}", path.display()))
}

/// A read of what the caller named: in the read-only sandbox when nobody was asked (what a
/// stranger may read; masked secrets stay unreadable), else in process with the bound
/// identity; `unconfined: true` asks the owner for that (a private file).
fn read_prepared(
    args: &Args<'_>,
    action: String,
    assessment: Assessment,
    payload: SandboxPayload,
    local: impl FnOnce() -> Result<Value, String> + Send + 'static,
) -> Result<Prepared, ToolError> {
    let unconfined = args.opt_bool("unconfined")?.unwrap_or(false);
    Ok(Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action: if unconfined {
            format!("{action} (unconfined)")
        } else {
            action
        },
        assessment,
        identity: Identity::Launching,
        confinement: if unconfined {
            Confinement::Unconfined
        } else {
            Confinement::Sandbox
        },
        resources: Vec::new(),
        timeout: FS_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                let value = match ctx.sandbox.clone() {
                    Some(sandbox) => ctx.sandboxed_json(&sandbox, payload).await?,
                    None => {
                        ctx.blocking(move || local().map_err(ToolError::Failed))
                            .await?
                    }
                };
                Ok(ToolOutput::json(true, &value))
            })
        }),
    })
}

// ---- fs.read ----------------------------------------------------------------------------

pub fn read() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "fs.read",
            description: "Read part of a file: up to 32 KiB from an offset. Text comes back \
                as utf-8, anything else as base64; size and eof tell whether to read on. \
                Unasked it reads what any user may (a private file is refused); \
                `unconfined: true` reads with nl2sh's own rights after the owner approves.",
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "Absolute path"},
                    "offset": {"type": "integer", "minimum": 0},
                    "length": {"type": "integer", "minimum": 1, "maximum": MAX_READ_BYTES},
                    "unconfined": {"type": "boolean",
                        "description": "Read with nl2sh's rights; waits for the owner's approval"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        prepare: prepare_read,
    }
}

fn prepare_read(args: &Map<String, Value>, env: &Arc<DeviceEnv>) -> Result<Prepared, ToolError> {
    let a = Args(args);
    let path = resolve(&path_arg(&a)?);
    let offset = a.opt_u64("offset")?.unwrap_or(0);
    let length = a
        .opt_u64("length")?
        .unwrap_or(MAX_READ_BYTES)
        .min(MAX_READ_BYTES);
    let action = format!(
        "read {length} bytes of {} from offset {offset}",
        path.display()
    );
    let assessment = risk::assess_path_read_protected(&path, &env.protected);
    let payload = SandboxPayload::ReadFile {
        path: path.display().to_string(),
        offset,
        length,
    };
    let source = path.display().to_string();
    let prepared = read_prepared(&a, action, assessment, payload, move || {
        read_file(&path, offset, length)
    })?;
    Ok(prepared.reading_from(source))
}

// ---- fs.list ----------------------------------------------------------------------------

pub fn list() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "fs.list",
            description: "List a directory: name, type, size, mode and mtime of each entry, \
                sorted by name, at most `limit` (default 200, max 1000).",
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "Absolute path"},
                    "hidden": {"type": "boolean", "description": "Include dot files (default true)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_ENTRIES},
                    "unconfined": {"type": "boolean",
                        "description": "List with nl2sh's rights; waits for the owner's approval"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        prepare: prepare_list,
    }
}

fn prepare_list(args: &Map<String, Value>, env: &Arc<DeviceEnv>) -> Result<Prepared, ToolError> {
    let a = Args(args);
    let path = resolve(&path_arg(&a)?);
    let hidden = a.opt_bool("hidden")?.unwrap_or(true);
    let limit = a.opt_u64("limit")?.unwrap_or(200).min(MAX_LIST_ENTRIES) as usize;
    let action = format!("list {}", path.display());
    let assessment = risk::assess_path_read_protected(&path, &env.protected);
    let payload = SandboxPayload::ListDir {
        path: path.display().to_string(),
        hidden,
        limit: limit as u64,
    };
    read_prepared(&a, action, assessment, payload, move || {
        list_dir(&path, hidden, limit)
    })
}

// ---- fs.stat ----------------------------------------------------------------------------

pub fn stat() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "fs.stat",
            description: "Metadata of a path (without following a final symlink): exists, \
                type, size, mode, uid, gid, mtime, and the link target for symlinks.",
            schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "minLength": 1, "description": "Absolute path"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        prepare: prepare_stat,
    }
}

fn prepare_stat(args: &Map<String, Value>, _env: &Arc<DeviceEnv>) -> Result<Prepared, ToolError> {
    let path = path_arg(&Args(args))?;
    let action = format!("stat {}", path.display());
    // Metadata is not content: reading it is read-only even for secret files, and the
    // tool's own fixed operation (no content of the caller's choosing is read).
    Ok(Prepared {
        sent: None,
        data: None,
        ui_app: None,
        action,
        assessment: Assessment::read_only(),
        identity: Identity::Launching,
        confinement: Confinement::Fixed,
        resources: Vec::new(),
        timeout: FS_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                ctx.blocking(move || {
                    let value = match fs::symlink_metadata(&path) {
                        Ok(m) => json!({
                            "path": path, "exists": true, "type": file_type(&m), "size": m.len(),
                            "mode": format!("{:04o}", m.permissions().mode() & 0o7777),
                            "uid": m.uid(), "gid": m.gid(), "mtime": mtime(&m),
                            "link_target": fs::read_link(&path).ok(),
                        }),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            json!({"path": path, "exists": false})
                        }
                        Err(e) => return Err(io_err("cannot stat", &path, e)),
                    };
                    Ok(ToolOutput::json(true, &value))
                })
                .await
            })
        }),
    })
}

// ---- fs.write ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum WriteMode {
    Create,
    Overwrite,
    Append,
}

pub fn write() -> TableTool {
    TableTool {
        def: ToolDef {
            name: "fs.write",
            description: "Write a file: `create` (fails if it exists), `overwrite` or \
                `append`; content as utf-8 or base64; optional octal permissions for a new \
                file (e.g. \"0644\"). Always needs local approval.",
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "Absolute path"},
                    "content": {"type": "string"},
                    "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                    "mode": {"type": "string", "enum": ["create", "overwrite", "append"]},
                    "permissions": {"type": "string", "minLength": 3, "maxLength": 4,
                                    "description": "Octal, e.g. 0644"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        },
        prepare: prepare_write,
    }
}

fn prepare_write(args: &Map<String, Value>, env: &Arc<DeviceEnv>) -> Result<Prepared, ToolError> {
    let a = Args(args);
    let path = resolve(&path_arg(&a)?);
    let content = a.str("content")?;
    let bytes = match a.opt_str("encoding")?.unwrap_or("utf-8") {
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|e| ToolError::InvalidArguments(format!("`content` is not base64: {e}")))?,
        _ => content.as_bytes().to_vec(),
    };
    let mode = match a.opt_str("mode")?.unwrap_or("create") {
        "overwrite" => WriteMode::Overwrite,
        "append" => WriteMode::Append,
        _ => WriteMode::Create,
    };
    let permissions = a
        .opt_str("permissions")?
        .map(|p| {
            u32::from_str_radix(p, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "`permissions` {p:?} is not octal like 0644"
                    ))
                })
        })
        .transpose()?;
    let verb = match mode {
        WriteMode::Create => "create",
        WriteMode::Overwrite => "overwrite",
        WriteMode::Append => "append to",
    };
    let mut action = format!("{verb} {} ({} bytes)", path.display(), bytes.len());
    if let Some(p) = permissions {
        action.push_str(&format!(" with permissions {p:04o}"));
    }
    let mut assessment = risk::assess_path_write_protected(&path, &env.protected);
    if permissions.is_some_and(|p| p & 0o6000 != 0) {
        assessment.raise(
            nl2sh_proto::channels::RiskLevel::High,
            "sets setuid/setgid bits",
        );
    }
    // What is approved is this directory: the one the path reaches now, without
    // following any symlink. The write walks the path again and must arrive here.
    let (dir, name) = split_parent(&path)?;
    let approved_dir = DirIdentity::of(&dir).ok();
    let target = Target {
        path: path.clone(),
        dir,
        name,
        approved_dir,
    };
    Ok(Prepared {
        sent: None,
        // The owner reads what is written, not only how much (docs/APPROVALS.md).
        data: Some(ActionData::new("content", bytes.clone())),
        ui_app: None,
        action,
        assessment,
        identity: Identity::Launching,
        confinement: Confinement::Sandbox,
        resources: vec![Resource::Path(path)],
        timeout: FS_TIMEOUT,
        commands: None,
        run: Box::new(move |ctx| {
            Box::pin(async move {
                ctx.blocking(move || write_file(&target, &bytes, mode, permissions))
                    .await
            })
        }),
    })
}

/// Where an approved write lands: the file `name` in directory `dir` (a path free of
/// symlinks, as resolved at assessment), which must still be the directory it was then.
struct Target {
    path: PathBuf,
    dir: PathBuf,
    name: std::ffi::OsString,
    approved_dir: Option<DirIdentity>,
}

fn split_parent(path: &Path) -> Result<(PathBuf, std::ffi::OsString), ToolError> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir.to_path_buf(), name.to_os_string())),
        _ => Err(ToolError::InvalidArguments(format!(
            "{} names no file",
            path.display()
        ))),
    }
}

/// A directory reached from `/` without following any symlink, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirIdentity {
    dev: u64,
    ino: u64,
}

impl DirIdentity {
    fn of(dir: &Path) -> std::io::Result<Self> {
        Self::open(dir).map(|(_, id)| id)
    }

    /// Open `dir` (absolute) component by component, never following a symlink:
    /// `openat2(RESOLVE_NO_SYMLINKS)` where the kernel has it, else one `openat` with
    /// `O_NOFOLLOW` per component.
    fn open(dir: &Path) -> std::io::Result<(std::os::fd::OwnedFd, Self)> {
        use nix::fcntl::{openat, openat2, OFlag, OpenHow, ResolveFlag};
        use nix::sys::stat::Mode;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let fd = match openat2(nix::fcntl::AT_FDCWD, dir, how) {
            Ok(fd) => fd,
            Err(nix::Error::ENOSYS) => {
                let mut fd = openat(nix::fcntl::AT_FDCWD, "/", flags, Mode::empty())?;
                for comp in dir.components().skip(1) {
                    fd = openat(
                        &fd,
                        comp.as_os_str(),
                        flags | OFlag::O_NOFOLLOW,
                        Mode::empty(),
                    )?;
                }
                fd
            }
            Err(e) => return Err(e.into()),
        };
        let st = nix::sys::stat::fstat(&fd)?;
        let id = Self {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
        };
        Ok((fd, id))
    }
}

fn write_file(
    target: &Target,
    bytes: &[u8],
    mode: WriteMode,
    permissions: Option<u32>,
) -> Result<ToolOutput, ToolError> {
    use nix::fcntl::{openat, OFlag};
    let path = target.path.as_path();
    let changed = || {
        ToolError::Failed(format!(
            "{} is no longer the directory that was approved (a component was replaced or \
             became a symlink); nothing was written",
            target.dir.display()
        ))
    };
    let Some(approved) = target.approved_dir else {
        return Err(ToolError::Failed(format!(
            "{} did not exist (or was reached through a symlink) when the write was assessed; \
             nothing was written",
            target.dir.display()
        )));
    };
    let (dir, now) = DirIdentity::open(&target.dir).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::EXDEV) => changed(),
        _ => io_err("cannot open", &target.dir, e),
    })?;
    if now != approved {
        return Err(changed());
    }
    // O_NONBLOCK: opening a FIFO for writing would wait for a reader, holding the thread
    // (a reader shared by every call); without one it fails (ENXIO) instead. A regular
    // file ignores the flag.
    let mut flags = OFlag::O_WRONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC
        | OFlag::O_NOCTTY
        | OFlag::O_NONBLOCK;
    flags |= match mode {
        WriteMode::Create => OFlag::O_CREAT | OFlag::O_EXCL,
        WriteMode::Overwrite => OFlag::O_CREAT | OFlag::O_TRUNC,
        WriteMode::Append => OFlag::O_CREAT | OFlag::O_APPEND,
    };
    let create_mode = nix::sys::stat::Mode::from_bits_truncate(permissions.unwrap_or(0o644));
    let fd = openat(&dir, target.name.as_os_str(), flags, create_mode)
        .map_err(|e| io_err("cannot open", path, e.into()))?;
    let mut f = fs::File::from(fd);
    let kind = f
        .metadata()
        .map_err(|e| io_err("cannot stat", path, e))?
        .file_type();
    if kind.is_fifo() || kind.is_socket() {
        return Err(ToolError::Failed(format!(
            "{} is a pipe or a socket: fs.write writes files; nothing was written",
            path.display()
        )));
    }
    f.write_all(bytes)
        .map_err(|e| io_err("cannot write", path, e))?;
    f.sync_all().map_err(|e| io_err("cannot sync", path, e))?;
    if let Some(p) = permissions {
        f.set_permissions(fs::Permissions::from_mode(p))
            .map_err(|e| io_err("cannot chmod", path, e))?;
    }
    let meta = f.metadata().map_err(|e| io_err("cannot stat", path, e))?;
    Ok(ToolOutput::json(
        true,
        &json!({
            "path": path, "bytes_written": bytes.len(), "size": meta.len(),
            "mode": format!("{:04o}", meta.permissions().mode() & 0o7777),
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn writing_to_a_fifo_is_refused_without_waiting_for_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (parent, name) = split_parent(&fifo).unwrap();
        let target = Target {
            path: fifo.clone(),
            approved_dir: DirIdentity::of(&parent).ok(),
            dir: parent,
            name,
        };
        for mode in [WriteMode::Overwrite, WriteMode::Append] {
            // Opened as before (blocking), this call would never return: nothing reads.
            // Now the open fails at once (ENXIO).
            let Err(ToolError::Failed(refused)) = write_file(&target, b"x", mode, None) else {
                panic!("a write to a FIFO was not refused");
            };
            assert!(refused.starts_with("cannot open"), "{refused}");
        }
        // With a reader waiting, the open succeeds, and the write is still refused.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let Err(ToolError::Failed(refused)) = write_file(&target, b"x", WriteMode::Overwrite, None)
        else {
            panic!("a write to a FIFO with a reader was not refused");
        };
        assert!(refused.contains("is a pipe or a socket"), "{refused}");
        drop(reader);
    }
}
