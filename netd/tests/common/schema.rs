//! A validator for exactly the JSON Schema keywords `a2a-1.0.schema.json` uses (a copy
//! of the A2A 1.0 schema from the specification, in `tests/data/`): `type`,
//! `properties`, `patternProperties` (all of the form `^(name)$`), `additionalProperties`,
//! `items`, `$ref` (to `lf.a2a.v1.X.jsonschema.json` / `google.protobuf.X…`, resolved to
//! the definition titled `X`), `anyOf`, `enum`, `pattern` (its four patterns),
//! `minimum`/`maximum`, `propertyNames`, `format: date-time`. Any other keyword, pattern
//! or reference panics, so nothing is passed unchecked. The A2A schema has no `required`
//! lists (callers check required fields themselves); the checker knows `required` and
//! type lists too, for netd's own outputSchemas ([`schema_errors`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

const SCHEMA: &str = include_str!("../data/a2a-1.0.schema.json");

fn definitions() -> &'static HashMap<String, Value> {
    static DEFS: OnceLock<HashMap<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        schema["definitions"]
            .as_object()
            .unwrap()
            .iter()
            // "Task Status" is referenced as lf.a2a.v1.TaskStatus.
            .map(|(title, def)| (title.replace(' ', ""), def.clone()))
            .collect()
    })
}

/// Check `value` against the definition titled `title` ("Task", "Agent Card", …);
/// panics naming every violation.
pub fn validate(title: &str, value: &Value) {
    let errors = errors(title, value);
    assert!(
        errors.is_empty(),
        "{title} does not match the A2A 1.0 schema:\n{}\n{value:#}",
        errors.join("\n")
    );
}

/// Every violation of `schema` (a schema of its own, in the same keywords plus `required`
/// and type lists, without `$ref`) by `value`: for the outputSchemas netd lists.
pub fn schema_errors(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, value, "$", &mut errors);
    errors
}

/// Every violation of the definition titled `title` by `value`.
pub fn errors(title: &str, value: &Value) -> Vec<String> {
    let def = definitions()
        .get(&title.replace(' ', ""))
        .unwrap_or_else(|| panic!("no definition {title}"));
    let mut errors = Vec::new();
    check(def, value, "$", &mut errors);
    errors
}

fn resolve(reference: &str) -> &'static Value {
    let name = reference
        .strip_suffix(".jsonschema.json")
        .and_then(|r| r.rsplit('.').next())
        .unwrap_or_else(|| panic!("unknown $ref {reference}"));
    definitions()
        .get(name)
        .unwrap_or_else(|| panic!("unresolved $ref {reference}"))
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "null" => v.is_null(),
        other => panic!("unknown type {other}"),
    }
}

fn pattern_ok(pattern: &str, s: &str) -> bool {
    match pattern {
        "^ROLE_UNSPECIFIED$" => s == "ROLE_UNSPECIFIED",
        "^TASK_STATE_UNSPECIFIED$" => s == "TASK_STATE_UNSPECIFIED",
        "^-?[0-9]+$" => {
            let digits = s.strip_prefix('-').unwrap_or(s);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        "^[A-Za-z0-9+/]*={0,2}$" => {
            let body = s.trim_end_matches('=');
            s.len() - body.len() <= 2
                && body
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        }
        other => panic!("unknown pattern {other}"),
    }
}

/// `^(name)$` → `name`.
fn pattern_name(pattern: &str) -> &str {
    pattern
        .strip_prefix("^(")
        .and_then(|p| p.strip_suffix(")$"))
        .unwrap_or_else(|| panic!("unknown patternProperties pattern {pattern}"))
}

fn check(schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        panic!("schema at {at} is not an object");
    };
    for (key, rule) in schema {
        match key.as_str() {
            "$schema" | "title" | "description" | "default" => {}
            "type" => {
                let ok = match rule {
                    Value::Array(types) => types
                        .iter()
                        .any(|t| type_ok(t.as_str().expect("a type is a string"), v)),
                    one => type_ok(one.as_str().expect("type is a string"), v),
                };
                if !ok {
                    errors.push(format!("{at}: not of type {rule}: {v}"));
                }
            }
            "required" => {
                if let Some(object) = v.as_object() {
                    for name in rule.as_array().expect("required is a list") {
                        let name = name.as_str().expect("a required name is a string");
                        if !object.contains_key(name) {
                            errors.push(format!("{at}: {name} is required"));
                        }
                    }
                }
            }
            "$ref" => check(resolve(rule.as_str().unwrap()), v, at, errors),
            "anyOf" => {
                let ok = rule.as_array().unwrap().iter().any(|alt| {
                    let mut e = Vec::new();
                    check(alt, v, at, &mut e);
                    e.is_empty()
                });
                if !ok {
                    errors.push(format!("{at}: matches none of anyOf: {v}"));
                }
            }
            "enum" => {
                if !rule.as_array().unwrap().contains(v) {
                    errors.push(format!("{at}: {v} is not in {rule}"));
                }
            }
            "pattern" => {
                if let Some(s) = v.as_str() {
                    if !pattern_ok(rule.as_str().unwrap(), s) {
                        errors.push(format!("{at}: {s:?} does not match {rule}"));
                    }
                }
            }
            "format" => {
                assert_eq!(rule, "date-time", "unknown format");
                if let Some(s) = v.as_str() {
                    if chrono::DateTime::parse_from_rfc3339(s).is_err() {
                        errors.push(format!("{at}: {s:?} is not an RFC 3339 date-time"));
                    }
                }
            }
            "minimum" => {
                if let (Some(n), Some(min)) = (v.as_f64(), rule.as_f64()) {
                    if v.is_number() && n < min {
                        errors.push(format!("{at}: {n} < {min}"));
                    }
                }
            }
            "maximum" => {
                if let (Some(n), Some(max)) = (v.as_f64(), rule.as_f64()) {
                    if v.is_number() && n > max {
                        errors.push(format!("{at}: {n} > {max}"));
                    }
                }
            }
            "items" => {
                if let Some(items) = v.as_array() {
                    for (i, item) in items.iter().enumerate() {
                        check(rule, item, &format!("{at}[{i}]"), errors);
                    }
                }
            }
            "propertyNames" => {
                // Property names are strings in JSON; the schema asks nothing more.
                assert_eq!(rule, &serde_json::json!({"type": "string"}));
            }
            "properties" | "patternProperties" | "additionalProperties" => {}
            other => panic!("unknown keyword {other} at {at}"),
        }
    }
    if let Some(object) = v.as_object() {
        check_properties(schema, object, at, errors);
    }
}

fn check_properties(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    at: &str,
    errors: &mut Vec<String>,
) {
    let props = schema.get("properties").and_then(Value::as_object);
    let patterns: Vec<(&str, &Value)> = schema
        .get("patternProperties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, s)| (pattern_name(k), s)).collect())
        .unwrap_or_default();
    for (name, value) in object {
        let path = format!("{at}.{name}");
        let mut known = false;
        if let Some(s) = props.and_then(|p| p.get(name)) {
            check(s, value, &path, errors);
            known = true;
        }
        for (pattern, s) in &patterns {
            if pattern == name {
                check(s, value, &path, errors);
                known = true;
            }
        }
        if !known {
            match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    errors.push(format!("{path}: property not allowed"));
                }
                Some(s @ Value::Object(_)) => check(s, value, &path, errors),
                _ => {}
            }
        }
    }
}

/// The checks the schema cannot make (it has no `required`), for a Task nl2sh emits:
/// the fields every nl2sh task has, camelCase only, timestamps in UTC with `Z`.
pub fn validate_task(task: &Value) {
    validate("Task", task);
    for field in ["id", "contextId", "status"] {
        assert!(task.get(field).is_some(), "Task without {field}: {task}");
    }
    let status = &task["status"];
    assert!(status["state"].is_string(), "{task}");
    let ts = status["timestamp"]
        .as_str()
        .unwrap_or_else(|| panic!("{task}"));
    assert!(ts.ends_with('Z'), "timestamp not UTC Z: {ts}");
    if let Some(history) = task.get("history") {
        for m in history.as_array().unwrap() {
            validate_message(m);
        }
    }
    if let Some(message) = status.get("message") {
        validate_message(message);
    }
    if let Some(artifacts) = task.get("artifacts") {
        for a in artifacts.as_array().unwrap() {
            assert!(a["artifactId"].is_string(), "{a}");
            assert!(!a["parts"].as_array().unwrap().is_empty(), "{a}");
        }
    }
    assert!(task.get("kind").is_none() && task.get("context_id").is_none());
}

fn validate_message(m: &Value) {
    for field in ["messageId", "role", "parts"] {
        assert!(m.get(field).is_some(), "Message without {field}: {m}");
    }
    assert!(!m["parts"].as_array().unwrap().is_empty(), "{m}");
    for p in m["parts"].as_array().unwrap() {
        let kinds = ["text", "raw", "url", "data"]
            .iter()
            .filter(|k| p.get(**k).is_some())
            .count();
        assert_eq!(
            kinds, 1,
            "a Part holds exactly one of text/raw/url/data: {p}"
        );
    }
    assert!(m.get("kind").is_none(), "{m}");
}
