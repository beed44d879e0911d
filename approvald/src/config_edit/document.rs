//! The TOML document: a value made from the text given for a key, set where the key is
//! (its comments and spacing kept), the retired key removed with the comments above it
//! kept in place, and a value rendered as a script wants it.

use std::path::Path;

use nl2sh_proto::config::{self as schema, KeyKind};
use toml_edit::{DocumentMut, Item, Table, Value};

use super::{EditError, Named, RETIRED_KEY};

pub(super) fn parse_document(path: &Path, text: &str) -> Result<DocumentMut, EditError> {
    text.parse::<DocumentMut>().map_err(|e| EditError::NotToml {
        path: path.to_owned(),
        line: e.span().map(|s| schema::line_at(text, s.start)),
        // The parser's message only: its excerpt of the source could show a credential.
        message: e.message().trim().to_owned(),
    })
}

/// The new value of `named` from the text given.
pub(super) fn new_item(named: &Named, input: &str) -> Result<Item, EditError> {
    let bad = |want: &'static str| EditError::BadValue {
        key: named.full(),
        want,
        got: input.to_owned(),
    };
    Ok(match named.spec.kind {
        KeyKind::Bool => match input.trim() {
            "true" => toml_edit::value(true),
            "false" => toml_edit::value(false),
            _ => return Err(bad("true or false")),
        },
        KeyKind::Integer => {
            let n: i64 = input.trim().parse().map_err(|_| bad("a whole number"))?;
            toml_edit::value(n)
        }
        KeyKind::Text | KeyKind::Credential => toml_edit::value(input),
        KeyKind::Grants => {
            let value: Value = input
                .trim()
                .parse()
                .map_err(|_| bad("a TOML array of tables, e.g. [{ tool = \"fs.stat\" }]"))?;
            if !value.is_array() {
                return Err(bad("a TOML array of tables, e.g. [{ tool = \"fs.stat\" }]"));
            }
            // A non-empty array of inline tables reads better as [[approval_grants]].
            match Item::Value(value).into_array_of_tables() {
                Ok(tables) if !tables.is_empty() => Item::ArrayOfTables(tables),
                Ok(_) => toml_edit::value(toml_edit::Array::new()),
                Err(item) => item,
            }
        }
        KeyKind::Table => return Err(EditError::Table),
    })
}

/// Put `item` under `name` in `table`, keeping an existing value's surrounding comments
/// and spacing.
pub(super) fn put(table: &mut dyn toml_edit::TableLike, name: &str, item: Item) {
    match table.get_mut(name) {
        Some(existing) if existing.is_value() && item.is_value() => {
            let decor = existing.as_value().map(|v| v.decor().clone());
            if let Ok(mut value) = item.into_value() {
                if let Some(decor) = decor {
                    *value.decor_mut() = decor;
                }
                *existing = Item::Value(value);
            }
        }
        // A value replacing a table (or the reverse) is a new entry: the key's old
        // formatting belongs to the other form.
        Some(_) => {
            table.remove(name);
            table.insert(name, item);
        }
        None => {
            table.insert(name, item);
        }
    }
}

/// Remove the retired key, keeping the comments that stand above it. toml_edit keeps
/// them in the key's leading decor, the file's own header comment too when the key comes
/// first, so removing the key would take them along. They go where they still stand
/// above the same things: the document's start when nothing came before the key, else
/// the next key, else the next table header, else the end of the document.
pub(super) fn remove_retired(doc: &mut DocumentMut) {
    let root = doc.as_table_mut();
    let Some(index) = root.iter().position(|(k, _)| k == RETIRED_KEY) else {
        return;
    };
    let Some((key, item)) = root.remove_entry(RETIRED_KEY) else {
        return;
    };
    let leading = match &item {
        Item::Table(t) => t.decor().prefix(),
        Item::ArrayOfTables(a) => a.get(0).and_then(|t| t.decor().prefix()),
        Item::Value(_) | Item::None => key.leaf_decor().prefix(),
    };
    let leading = leading.and_then(|raw| raw.as_str()).unwrap_or_default();
    if leading.is_empty() {
        return;
    }
    let prepend = |decor: &mut toml_edit::Decor, default: &str| {
        let rest = decor
            .prefix()
            .and_then(|raw| raw.as_str())
            .unwrap_or(default)
            .to_owned();
        decor.set_prefix(format!("{leading}{rest}"));
    };
    // Keys render before table headers, in order; the key was the first when no key
    // came before it.
    let values_before = root
        .iter()
        .take(index)
        .filter(|(_, i)| i.is_value())
        .count();
    let comments = leading.contains('#');
    if values_before == 0 && matches!(item, Item::Value(_)) {
        if comments {
            prepend(root.decor_mut(), "");
        }
        return;
    }
    if let Some((mut next, _)) = root.iter_mut().skip(index).find(|(_, i)| i.is_value()) {
        prepend(next.leaf_decor_mut(), "");
        return;
    }
    if let Some(position) = first_header(root) {
        if let Some(table) = header_at(root, position) {
            prepend(table.decor_mut(), "\n");
            return;
        }
    }
    if comments {
        let trailing = doc.trailing().as_str().unwrap_or_default().to_owned();
        doc.set_trailing(format!("{trailing}{leading}"));
    }
}

/// The position of the first table header the document shows (implicit and dotted tables
/// have none of their own).
fn first_header(table: &Table) -> Option<isize> {
    let mut first: Option<isize> = None;
    for (_, item) in table.iter() {
        let tables: Vec<&Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter().collect(),
            _ => continue,
        };
        for t in tables {
            if !t.is_implicit() && !t.is_dotted() {
                if let Some(p) = t.position() {
                    first = Some(first.map_or(p, |f| f.min(p)));
                }
            }
            if let Some(p) = first_header(t) {
                first = Some(first.map_or(p, |f| f.min(p)));
            }
        }
    }
    first
}

/// The shown table header at `position`.
fn header_at(table: &mut Table, position: isize) -> Option<&mut Table> {
    for (_, item) in table.iter_mut() {
        let tables: Vec<&mut Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter_mut().collect(),
            _ => continue,
        };
        for t in tables {
            if !t.is_implicit() && !t.is_dotted() && t.position() == Some(position) {
                return Some(t);
            }
            if let Some(found) = header_at(t, position) {
                return Some(found);
            }
        }
    }
    None
}

/// A value as a script wants it: strings bare, everything else as TOML; a table without
/// its credential.
pub(super) fn render(name: &str, item: &Item) -> String {
    if let Some(s) = item.as_str() {
        return s.to_owned();
    }
    if let Some(value) = item.as_value() {
        return value.clone().decorated("", "").to_string();
    }
    let mut item = item.clone();
    let mut hidden = false;
    if let Some(table) = item.as_table_like_mut() {
        hidden = table.remove("api_key").is_some();
    }
    let mut doc = DocumentMut::new();
    doc.insert(name, item);
    let mut out = doc.to_string().trim_end().to_owned();
    if hidden {
        out.push_str("\n# api_key: set (not shown)");
    }
    out
}
