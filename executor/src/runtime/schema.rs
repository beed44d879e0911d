//! Argument validation against the JSON Schema (2020-12) a tool registers. The subset
//! understood here is what tools use: `type`, `properties`, `required`,
//! `additionalProperties: false`, `enum`, `minimum`/`maximum`, `minLength`/`maxLength`,
//! `items`, `maxItems`, and `pattern` in the subset [`Pattern`] reads. A schema keyword
//! outside it is a tool bug, caught by a test that checks every registered schema.

use serde_json::Value;

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
    "maxItems",
    "pattern",
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
        Value::Number(n) => {
            if let (Some(min), Some(v)) =
                (schema.get("minimum").and_then(Value::as_f64), n.as_f64())
            {
                if v < min {
                    return Err(format!("`{at}`: must be at least {min}"));
                }
            }
            if let (Some(max), Some(v)) =
                (schema.get("maximum").and_then(Value::as_f64), n.as_f64())
            {
                if v > max {
                    return Err(format!("`{at}`: must be at most {max}"));
                }
            }
        }
        Value::String(s) => {
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
            if let Some(p) = schema.get("pattern") {
                // A pattern this validator cannot read refuses every value: fail closed.
                let pattern = p
                    .as_str()
                    .ok_or_else(|| "not a string".to_string())
                    .and_then(Pattern::parse)
                    .map_err(|e| format!("`{at}`: the schema's pattern is unsupported ({e})"))?;
                if !pattern.matches(s) {
                    return Err(format!(
                        "`{at}`: must match {}",
                        p.as_str().unwrap_or_default()
                    ));
                }
            }
        }
        Value::Array(items) => {
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
        }
        Value::Object(map) => {
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
        }
        _ => {}
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
                "pattern" => {
                    if let Err(e) = v
                        .as_str()
                        .ok_or("not a string".into())
                        .and_then(Pattern::parse)
                    {
                        out.push(format!("pattern ({e})"));
                    }
                }
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

/// What a [`Pattern`] element matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CharSet {
    Literal(char),
    /// A bracket class: inclusive ranges, possibly negated (`[^…]`).
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl CharSet {
    fn contains(&self, c: char) -> bool {
        match self {
            CharSet::Literal(l) => *l == c,
            CharSet::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        }
    }
}

/// One element of a pattern and how often it repeats (`max: None` for unbounded).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Atom {
    set: CharSet,
    min: usize,
    max: Option<usize>,
}

/// The `pattern` subset enforced here: `^…$` around a sequence of literal characters
/// (metacharacters escaped with `\`) and bracket classes (`[A-Za-z0-9_.-]`, `[^…]`), each
/// optionally repeated by `?`, `*`, `+`, `{n}` or `{m,n}`. No groups, alternation or `.`:
/// enough for names and identifiers, and matched in time linear in elements × length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    atoms: Vec<Atom>,
}

const META: &str = "\\^$.|?*+()[]{}";

impl Pattern {
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let inner = pattern
            .strip_prefix('^')
            .and_then(|p| p.strip_suffix('$'))
            .ok_or("only patterns anchored by ^ and $ are supported")?;
        let mut chars = inner.chars().peekable();
        let mut atoms = Vec::new();
        while let Some(c) = chars.next() {
            let set = match c {
                '[' => Self::class(&mut chars)?,
                '\\' => match chars.next() {
                    Some(e) if META.contains(e) || e == '-' || e == '/' => CharSet::Literal(e),
                    other => return Err(format!("unsupported escape \\{}", other.unwrap_or(' '))),
                },
                c if META.contains(c) => return Err(format!("unsupported {c:?}")),
                c => CharSet::Literal(c),
            };
            let (min, max) = match chars.peek() {
                Some('?') => (0, Some(1)),
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('{') => {
                    chars.next();
                    let mut spec = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(d) => spec.push(d),
                            None => return Err("unterminated {".into()),
                        }
                    }
                    let number = |s: &str| {
                        s.parse::<usize>()
                            .map_err(|_| format!("bad repetition {{{spec}}}"))
                    };
                    let (min, max) = match spec.split_once(',') {
                        None => (number(&spec)?, Some(number(&spec)?)),
                        Some((lo, "")) => (number(lo)?, None),
                        Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
                    };
                    if max.is_some_and(|m| m < min) {
                        return Err(format!("bad repetition {{{spec}}}"));
                    }
                    atoms.push(Atom { set, min, max });
                    continue;
                }
                _ => (1, Some(1)),
            };
            if (min, max) != (1, Some(1)) {
                chars.next();
            }
            atoms.push(Atom { set, min, max });
        }
        Ok(Self { atoms })
    }

    /// The rest of a bracket class, after `[`.
    fn class(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<CharSet, String> {
        let negated = chars.next_if_eq(&'^').is_some();
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = match chars.next() {
                None => return Err("unterminated [".into()),
                Some(']') if !first => break,
                Some('\\') => chars.next().ok_or("unterminated [")?,
                Some(c) => c,
            };
            first = false;
            // `a-z` is a range; a `-` first or last is itself.
            if chars.peek() == Some(&'-') {
                let mut ahead = chars.clone();
                ahead.next();
                match ahead.peek() {
                    Some(']') | None => ranges.push((c, c)),
                    Some(_) => {
                        chars.next();
                        let hi = match chars.next() {
                            Some('\\') => chars.next().ok_or("unterminated [")?,
                            Some(h) => h,
                            None => return Err("unterminated [".into()),
                        };
                        if hi < c {
                            return Err(format!("bad range {c}-{hi}"));
                        }
                        ranges.push((c, hi));
                    }
                }
            } else {
                ranges.push((c, c));
            }
        }
        Ok(CharSet::Class { negated, ranges })
    }

    /// Whether all of `s` matches. Tracks the set of positions reachable after each
    /// element; an element moves every reachable position forward by `min..=max`
    /// characters of its set, a range computed from run lengths.
    pub fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        let n = chars.len();
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for atom in &self.atoms {
            // run[p]: how many characters from p on are in the set.
            let mut run = vec![0usize; n + 1];
            for p in (0..n).rev() {
                if atom.set.contains(chars[p]) {
                    run[p] = run[p + 1] + 1;
                }
            }
            // Mark ranges of positions with a difference array.
            let mut delta = vec![0isize; n + 2];
            for p in (0..=n).filter(|&p| reach[p]) {
                let longest = atom.max.map_or(run[p], |m| m.min(run[p]));
                if longest >= atom.min {
                    delta[p + atom.min] += 1;
                    delta[p + longest + 1] -= 1;
                }
            }
            let mut depth = 0isize;
            for (p, r) in reach.iter_mut().enumerate() {
                depth += delta[p];
                *r = depth > 0;
            }
        }
        reach[n]
    }
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
                "list": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
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
        let s = json!({"type": "object", "properties": {"a": {"type": "string", "format": "x"}}});
        assert_eq!(unknown_keywords(&s), vec!["format".to_string()]);
        assert!(unknown_keywords(&schema()).is_empty());
        // A pattern outside the subset is as unknown as an unknown keyword.
        let s = json!({"properties": {"a": {"pattern": "^(a|b)$"}}});
        assert_eq!(unknown_keywords(&s).len(), 1, "{:?}", unknown_keywords(&s));
        let s = json!({"properties": {"a": {"pattern": "^[a-z]+$"}}});
        assert!(unknown_keywords(&s).is_empty());
    }

    #[test]
    fn patterns_match_whole_values() {
        let name = Pattern::parse("^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$").unwrap();
        for ok in [
            "battery",
            "a",
            "android.os.UpdateLock",
            "media.audio_flinger",
            "x-y",
        ] {
            assert!(name.matches(ok), "{ok}");
        }
        let long = "a".repeat(64);
        assert!(name.matches(&long));
        for bad in [
            "",
            "-l",
            ".x",
            "_x",
            "a b",
            "a;b",
            "a/b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!name.matches(bad), "{bad:?}");
        }
        let p = Pattern::parse("^[a-z]*a\\.b?[^0-9]{2}$").unwrap();
        assert!(p.matches("aaa.bxy") && p.matches("a.xy") && p.matches("a.b!!"));
        assert!(!p.matches("aaa.b1y") && !p.matches("aaa.") && !p.matches("ab.xy"));
        let p = Pattern::parse("^x+[-a]{2,}$").unwrap();
        assert!(p.matches("xx--a") && !p.matches("x-") && !p.matches("-aa"));
        for unsupported in [
            "[a-z]+", "^a|b$", "^(a)$", "^.$", "^[a-z$", "^a{2,1}$", "^\\d$", "^[z-a]$",
        ] {
            assert!(Pattern::parse(unsupported).is_err(), "{unsupported}");
        }
    }

    #[test]
    fn a_pattern_is_enforced_and_an_unreadable_one_refuses_everything() {
        let s = json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "^[a-z]{1,3}$"}}});
        validate(&s, &json!({"n": "abc"})).unwrap();
        let err = validate(&s, &json!({"n": "abcd"})).unwrap_err();
        assert!(
            err.starts_with("`arguments.n`: must match ^[a-z]{1,3}$"),
            "{err}"
        );
        let s =
            json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "^(a)$"}}});
        let err = validate(&s, &json!({"n": "a"})).unwrap_err();
        assert!(err.contains("unsupported"), "{err}");
    }
}
