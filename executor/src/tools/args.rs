//! A prepared tool's view of its arguments, which the pipeline has already checked
//! against the tool's schema, and the one way paths in them are normalised.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use super::ToolError;

/// Argument accessors for prepared tools (arguments are already schema-validated, so a
/// mismatch here is a schema bug, reported as invalid arguments rather than a panic).
pub struct Args<'a>(pub &'a Map<String, Value>);

impl Args<'_> {
    pub fn str(&self, key: &str) -> Result<&str, ToolError> {
        self.opt_str(key)?
            .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` is required")))
    }
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::InvalidArguments(format!(
                "`{key}` must be a string"
            ))),
        }
    }
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                ToolError::InvalidArguments(format!("`{key}` must be a non-negative integer"))
            }),
        }
    }
    pub fn opt_i64(&self, key: &str) -> Result<Option<i64>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` must be an integer"))),
        }
    }
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ToolError::InvalidArguments(format!(
                "`{key}` must be a boolean"
            ))),
        }
    }
    /// A timeout in seconds, bounded by `MAX_TOOL_TIMEOUT`.
    pub fn timeout(&self, key: &str) -> Result<Duration, ToolError> {
        use nl2sh_proto::limits::{DEFAULT_TOOL_TIMEOUT, MAX_TOOL_TIMEOUT};
        Ok(match self.opt_u64(key)? {
            None => DEFAULT_TOOL_TIMEOUT,
            Some(0) => {
                return Err(ToolError::InvalidArguments(format!(
                    "`{key}` must be at least 1"
                )))
            }
            Some(s) => Duration::from_secs(s).min(MAX_TOOL_TIMEOUT),
        })
    }
}

/// An absolute, lexically normalised path (no `.`/`..`), so locks, assessment and the
/// action text all name the same file.
pub fn normalize_path(raw: &str, cwd: Option<&std::path::Path>) -> Result<PathBuf, ToolError> {
    use std::path::Component;
    if raw.is_empty() {
        return Err(ToolError::InvalidArguments(
            "`path` must not be empty".into(),
        ));
    }
    if raw.contains('\0') {
        return Err(ToolError::InvalidArguments(
            "`path` contains a NUL byte".into(),
        ));
    }
    let p = std::path::Path::new(raw);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        match cwd {
            Some(c) => c.join(p),
            None => {
                return Err(ToolError::InvalidArguments(format!(
                    "`path` must be absolute (got {raw:?})"
                )))
            }
        }
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalise_lexically() {
        assert_eq!(
            normalize_path("/a/./b/../c", None).unwrap(),
            PathBuf::from("/a/c")
        );
        assert_eq!(
            normalize_path("/../../etc", None).unwrap(),
            PathBuf::from("/etc")
        );
        assert!(normalize_path("rel", None).is_err());
        assert_eq!(
            normalize_path("x/../y", Some(std::path::Path::new("/tmp"))).unwrap(),
            PathBuf::from("/tmp/y")
        );
        assert!(normalize_path("", None).is_err());
        assert!(normalize_path("/a\0b", None).is_err());
    }
}
