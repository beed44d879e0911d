//! File tools: `fs.read`, `fs.list`, `fs.stat`, `fs.write`. Paths are absolute; symlinks
//! are resolved before assessment so a link cannot disguise where a write lands.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};

use nl2sh_proto::channels::Identity;

use crate::device::DeviceEnv;
use crate::risk::{self, Assessment};
use crate::runtime::locks::Resource;
use crate::runtime::{normalize_path, Args, Prepared, Tool, ToolDef, ToolError, ToolOutput};

/// Largest `fs.read` chunk: its base64 still fits the output bound.
pub const MAX_READ_BYTES: u64 = 32 * 1024;
/// Entries `fs.list` returns at most.
pub const MAX_LIST_ENTRIES: u64 = 1000;
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

fn file_type(meta: &fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    }
}

fn mtime(meta: &fs::Metadata) -> i64 {
    meta.mtime()
}

fn read_only_prepared(
    action: String,
    assessment: Assessment,
    run: impl FnOnce() -> Result<ToolOutput, ToolError> + Send + 'static,
) -> Prepared {
    Prepared {
        action,
        assessment,
        identity: Identity::Launching,
        resources: Vec::new(),
        timeout: FS_TIMEOUT,
        run: Box::new(move |ctx| Box::pin(async move { ctx.blocking(run).await })),
    }
}

// ---- fs.read ----------------------------------------------------------------------------

pub struct FsRead {
    def: ToolDef,
}

impl FsRead {
    pub fn new() -> Self {
        Self {
            def: ToolDef {
                name: "fs.read",
                description: "Read part of a file: up to 32 KiB from an offset. Text comes back \
                    as utf-8, anything else as base64; size and eof tell whether to read on.",
                schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "minLength": 1, "description": "Absolute path"},
                        "offset": {"type": "integer", "minimum": 0},
                        "length": {"type": "integer", "minimum": 1, "maximum": MAX_READ_BYTES}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            },
        }
    }
}

impl Tool for FsRead {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    fn prepare(
        &self,
        args: &Map<String, Value>,
        _env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
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
        let assessment = risk::assess_path_read(&path);
        Ok(read_only_prepared(action, assessment, move || {
            let mut f = fs::File::open(&path).map_err(|e| io_err("cannot open", &path, e))?;
            let meta = f.metadata().map_err(|e| io_err("cannot stat", &path, e))?;
            if meta.is_dir() {
                return Err(ToolError::Failed(format!(
                    "{} is a directory; use fs.list",
                    path.display()
                )));
            }
            f.seek(SeekFrom::Start(offset))
                .map_err(|e| io_err("cannot seek in", &path, e))?;
            let mut buf = Vec::with_capacity(length as usize);
            f.take(length)
                .read_to_end(&mut buf)
                .map_err(|e| io_err("cannot read", &path, e))?;
            let size = meta.len();
            let bytes = buf.len() as u64;
            let (encoding, content) = match String::from_utf8(buf) {
                Ok(text) => ("utf-8", text),
                Err(e) => (
                    "base64",
                    base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
                ),
            };
            Ok(ToolOutput::json(
                true,
                &json!({
                    "path": path, "offset": offset, "bytes": bytes, "size": size,
                    "eof": offset.saturating_add(bytes) >= size,
                    "encoding": encoding, "content": content,
                }),
            ))
        }))
    }
}

// ---- fs.list ----------------------------------------------------------------------------

pub struct FsList {
    def: ToolDef,
}

impl FsList {
    pub fn new() -> Self {
        Self {
            def: ToolDef {
                name: "fs.list",
                description: "List a directory: name, type, size, mode and mtime of each entry, \
                    sorted by name, at most `limit` (default 200, max 1000).",
                schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "minLength": 1, "description": "Absolute path"},
                        "hidden": {"type": "boolean", "description": "Include dot files (default true)"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_ENTRIES}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            },
        }
    }
}

impl Tool for FsList {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    fn prepare(
        &self,
        args: &Map<String, Value>,
        _env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
        let a = Args(args);
        let path = resolve(&path_arg(&a)?);
        let hidden = a.opt_bool("hidden")?.unwrap_or(true);
        let limit = a.opt_u64("limit")?.unwrap_or(200).min(MAX_LIST_ENTRIES) as usize;
        let action = format!("list {}", path.display());
        let assessment = risk::assess_path_read(&path);
        Ok(read_only_prepared(action, assessment, move || {
            let rd = fs::read_dir(&path).map_err(|e| io_err("cannot list", &path, e))?;
            let mut names: Vec<_> = rd
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .filter(|n| hidden || !n.to_string_lossy().starts_with('.'))
                .collect();
            names.sort();
            let total = names.len();
            let entries: Vec<Value> = names
                .into_iter()
                .take(limit)
                .map(|name| {
                    let full = path.join(&name);
                    let name = name.to_string_lossy().into_owned();
                    match fs::symlink_metadata(&full) {
                        Ok(m) => json!({
                            "name": name, "type": file_type(&m), "size": m.len(),
                            "mode": format!("{:04o}", m.permissions().mode() & 0o7777),
                            "mtime": mtime(&m),
                        }),
                        Err(_) => json!({"name": name, "type": "unknown"}),
                    }
                })
                .collect();
            Ok(ToolOutput::json(
                true,
                &json!({"path": path, "entries": entries, "total": total, "truncated": total > limit}),
            ))
        }))
    }
}

// ---- fs.stat ----------------------------------------------------------------------------

pub struct FsStat {
    def: ToolDef,
}

impl FsStat {
    pub fn new() -> Self {
        Self {
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
        }
    }
}

impl Tool for FsStat {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    fn prepare(
        &self,
        args: &Map<String, Value>,
        _env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
        let path = path_arg(&Args(args))?;
        let action = format!("stat {}", path.display());
        // Metadata is not content: reading it is read-only even for secret files.
        Ok(read_only_prepared(
            action,
            Assessment::read_only(),
            move || {
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
            },
        ))
    }
}

// ---- fs.write ---------------------------------------------------------------------------

pub struct FsWrite {
    def: ToolDef,
}

impl FsWrite {
    pub fn new() -> Self {
        Self {
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
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum WriteMode {
    Create,
    Overwrite,
    Append,
}

impl Tool for FsWrite {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    fn prepare(
        &self,
        args: &Map<String, Value>,
        _env: &Arc<DeviceEnv>,
    ) -> Result<Prepared, ToolError> {
        let a = Args(args);
        let path = resolve(&path_arg(&a)?);
        let content = a.str("content")?;
        let bytes = match a.opt_str("encoding")?.unwrap_or("utf-8") {
            "base64" => base64::engine::general_purpose::STANDARD
                .decode(content)
                .map_err(|e| {
                    ToolError::InvalidArguments(format!("`content` is not base64: {e}"))
                })?,
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
        let mut assessment = risk::assess_path_write(&path);
        if permissions.is_some_and(|p| p & 0o6000 != 0) {
            assessment.raise(
                nl2sh_proto::channels::RiskLevel::High,
                "sets setuid/setgid bits",
            );
        }
        let target = path.clone();
        Ok(Prepared {
            action,
            assessment,
            identity: Identity::Launching,
            resources: vec![Resource::Path(path)],
            timeout: FS_TIMEOUT,
            run: Box::new(move |ctx| {
                Box::pin(async move {
                    ctx.blocking(move || write_file(&target, &bytes, mode, permissions))
                        .await
                })
            }),
        })
    }
}

fn write_file(
    path: &Path,
    bytes: &[u8],
    mode: WriteMode,
    permissions: Option<u32>,
) -> Result<ToolOutput, ToolError> {
    let mut opts = fs::OpenOptions::new();
    // Never follow a link swapped in after assessment.
    opts.custom_flags(libc::O_NOFOLLOW)
        .mode(permissions.unwrap_or(0o644));
    match mode {
        WriteMode::Create => opts.write(true).create_new(true),
        WriteMode::Overwrite => opts.write(true).create(true).truncate(true),
        WriteMode::Append => opts.append(true).create(true),
    };
    let mut f = opts
        .open(path)
        .map_err(|e| io_err("cannot open", path, e))?;
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
