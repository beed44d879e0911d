//! Argument validation against the JSON Schema (2020-12) a tool registers. The subset
//! understood here is what tools use: `type`, `properties`, `required`,
//! `additionalProperties: false`, `enum`, `minimum`/`maximum`, `minLength`/`maxLength`,
//! `items`, `minItems`/`maxItems`. A schema keyword outside it is a tool bug, caught by a test that
//! checks every registered schema.

use serde_json::{Map, Number, Value};

/// Keywords this validator enforces (or that are documentation only).
pub const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "items",
    "minItems",
    "maxItems",
    "description",
    "default",
    "$schema",
    "title",
];

/// Validate `value` against `schema`; the error names the offending field.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "arguments")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, v: &Value) -> bool {
    match want {
        "number" => v.is_number(),
        other => type_name(v) == other,
    }
}

fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(t) = schema.get("type") {
        let ok = match t {
            Value::String(s) => type_matches(s, value),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|s| type_matches(s, value)),
            _ => true,
        };
        if !ok {
            return Err(format!(
                "`{at}`: expected {}, got {}",
                t.to_string().replace('"', ""),
                type_name(value)
            ));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!("`{at}`: must be one of {}", list.join(", ")));
        }
    }
    match value {
        Value::Number(n) => check_number(schema, n, at),
        Value::String(s) => check_string(schema, s, at),
        Value::Array(items) => check_array(schema, items, at),
        Value::Object(map) => check_object(schema, map, at),
        _ => Ok(()),
    }
}

/// `minimum` and `maximum`.
fn check_number(schema: &Map<String, Value>, n: &Number, at: &str) -> Result<(), String> {
    if let (Some(min), Some(v)) = (schema.get("minimum").and_then(Value::as_f64), n.as_f64()) {
        if v < min {
            return Err(format!("`{at}`: must be at least {min}"));
        }
    }
    if let (Some(max), Some(v)) = (schema.get("maximum").and_then(Value::as_f64), n.as_f64()) {
        if v > max {
            return Err(format!("`{at}`: must be at most {max}"));
        }
    }
    Ok(())
}

/// `minLength` and `maxLength`, in characters.
fn check_string(schema: &Map<String, Value>, s: &str, at: &str) -> Result<(), String> {
    let chars = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if chars < min {
            return Err(format!("`{at}`: must be at least {min} characters"));
        }
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if chars > max {
            return Err(format!("`{at}`: must be at most {max} characters"));
        }
    }
    Ok(())
}

/// `minItems`, `maxItems`, and each item against `items`.
fn check_array(schema: &Map<String, Value>, items: &[Value], at: &str) -> Result<(), String> {
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
        if (items.len() as u64) < min {
            return Err(format!("`{at}`: at least {min} items"));
        }
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
        if items.len() as u64 > max {
            return Err(format!("`{at}`: at most {max} items"));
        }
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// `required`, each known property against its schema, and `additionalProperties: false`.
fn check_object(
    schema: &Map<String, Value>,
    map: &Map<String, Value>,
    at: &str,
) -> Result<(), String> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(req)) = schema.get("required") {
        for r in req.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                return Err(format!("`{at}.{r}` is required"));
            }
        }
    }
    for (k, v) in map {
        match props.and_then(|p| p.get(k)) {
            Some(sub) => check(sub, v, &format!("{at}.{k}"))?,
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return Err(format!("`{at}.{k}` is not a known argument"));
            }
            None => {}
        }
    }
    Ok(())
}

/// Keywords in `schema` (recursively) that [`validate`] does not understand.
pub fn unknown_keywords(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(obj) = schema.as_object() {
        for (k, v) in obj {
            if !KNOWN_KEYWORDS.contains(&k.as_str()) {
                out.push(k.clone());
            }
            match k.as_str() {
                "properties" => {
                    if let Some(props) = v.as_object() {
                        for sub in props.values() {
                            out.extend(unknown_keywords(sub));
                        }
                    }
                }
                "items" => out.extend(unknown_keywords(v)),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "maxLength": 10},
                "timeout": {"type": "integer", "minimum": 1, "maximum": 600},
                "mode": {"type": "string", "enum": ["create", "append"]},
                "list": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (json!({}), "`arguments.command` is required"),
            (
                json!({"command": 5}),
                "`arguments.command`: expected string, got integer",
            ),
            (
                json!({"command": ""}),
                "`arguments.command`: must be at least 1",
            ),
            (
                json!({"command": "x".repeat(11)}),
                "`arguments.command`: must be at most 10",
            ),
            (
                json!({"command": "ls", "timeout": 0}),
                "`arguments.timeout`: must be at least 1",
            ),
            (
                json!({"command": "ls", "timeout": 1.5}),
                "`arguments.timeout`: expected integer",
            ),
            (
                json!({"command": "ls", "mode": "x"}),
                "`arguments.mode`: must be one of",
            ),
            (
                json!({"command": "ls", "extra": 1}),
                "`arguments.extra` is not a known argument",
            ),
            (
                json!({"command": "ls", "list": [1, "a"]}),
                "`arguments.list[1]`: expected integer",
            ),
            (
                json!({"command": "ls", "list": [1, 2, 3]}),
                "`arguments.list`: at most 2 items",
            ),
            (
                json!({"command": "ls", "list": []}),
                "`arguments.list`: at least 1 items",
            ),
            (json!([1]), "`arguments`: expected object, got array"),
        ];
        for (value, want) in cases {
            let err = validate(&schema(), &value).unwrap_err();
            assert!(err.starts_with(want), "{value}: {err}");
        }
        validate(
            &schema(),
            &json!({"command": "ls", "timeout": 5, "mode": "append", "list": [1]}),
        )
        .unwrap();
    }

    #[test]
    fn unknown_keywords_are_found() {
        let s = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}});
        assert_eq!(unknown_keywords(&s), vec!["pattern".to_string()]);
        assert!(unknown_keywords(&schema()).is_empty());
    }
}
