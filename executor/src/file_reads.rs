//! Reading a file or listing a directory into the JSON answer of `fs.read` or `fs.list`:
//! the same work whether it runs in process for an approved call (`tools/fs.rs`) or as
//! the payload of a sandboxed one (`sandbox/helper.rs`). It sits beneath both, so the
//! sandbox does not depend on the tools for it.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;
use serde_json::{json, Value};

/// Largest `fs.read` chunk: its base64 still fits the output bound.
pub const MAX_READ_BYTES: u64 = 32 * 1024;
/// Entries `fs.list` returns at most.
pub const MAX_LIST_ENTRIES: u64 = 1000;

/// The kind of file `meta` describes, as `fs.list` and `fs.stat` name it.
pub fn file_type(meta: &fs::Metadata) -> &'static str {
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

/// When the file was last modified, in seconds since the epoch.
pub fn mtime(meta: &fs::Metadata) -> i64 {
    meta.mtime()
}

/// `fs.read`'s work: up to `length` bytes of `path` from `offset`, as a JSON object.
pub fn read_file(path: &Path, offset: u64, length: u64) -> Result<Value, String> {
    let fail = |what: &str, e: std::io::Error| format!("{what} {}: {e}", path.display());
    // Without O_NONBLOCK, opening a FIFO waits for a writer and a read of a device can
    // wait for input: the thread (a reader shared by every call) would hang. A regular
    // file ignores the flag.
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail("cannot open", e))?;
    let meta = f.metadata().map_err(|e| fail("cannot stat", e))?;
    if meta.is_dir() {
        return Err(format!("{} is a directory; use fs.list", path.display()));
    }
    if meta.file_type().is_fifo() || meta.file_type().is_socket() {
        return Err(format!(
            "{} is a pipe or a socket: fs.read reads files and devices",
            path.display()
        ));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| fail("cannot seek in", e))?;
    let length = length.min(MAX_READ_BYTES);
    let mut buf = Vec::with_capacity(length as usize);
    f.take(length)
        .read_to_end(&mut buf)
        .map_err(|e| fail("cannot read", e))?;
    let size = meta.len();
    let bytes = buf.len() as u64;
    let (encoding, content) = match String::from_utf8(buf) {
        Ok(text) => ("utf-8", text),
        Err(e) => (
            "base64",
            base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
        ),
    };
    Ok(json!({
        "path": path, "offset": offset, "bytes": bytes, "size": size,
        "eof": offset.saturating_add(bytes) >= size,
        "encoding": encoding, "content": content,
    }))
}

/// `fs.list`'s work: the entries of directory `path`, sorted by name, at most `limit`.
pub fn list_dir(path: &Path, hidden: bool, limit: usize) -> Result<Value, String> {
    let rd = fs::read_dir(path).map_err(|e| format!("cannot list {}: {e}", path.display()))?;
    let mut names: Vec<_> = rd
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| hidden || !n.to_string_lossy().starts_with('.'))
        .collect();
    names.sort();
    let total = names.len();
    let limit = limit.min(MAX_LIST_ENTRIES as usize);
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
    Ok(json!({"path": path, "entries": entries, "total": total, "truncated": total > limit}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Opened as before (blocking), this call would never return: nothing writes.
        let refused = read_file(&fifo, 0, 10).unwrap_err();
        assert!(refused.contains("is a pipe or a socket"), "{refused}");
    }

    #[test]
    fn a_regular_file_reads_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "hello world").unwrap();
        let read = read_file(&file, 6, 100).unwrap();
        assert_eq!(read["content"], "world");
        assert_eq!(read["eof"], true);
    }
}
