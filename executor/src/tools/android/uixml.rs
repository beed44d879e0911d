//! The window hierarchy `uiautomator dump` writes, reduced to the nodes an agent can read
//! or act on. The input is untrusted (any app decides its own texts): it is size-capped,
//! parsed by a streaming reader (no recursion, so nesting depth costs nothing), every
//! field is cut to a bounded length, and no input can make the parser panic.

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};
use serde_json::{json, Value};

/// Largest dump accepted (real ones are tens to hundreds of KiB).
pub const MAX_DUMP_BYTES: usize = 8 * 1024 * 1024;
/// Nodes returned at most.
pub const MAX_NODES: usize = 300;
/// Characters kept of each text field.
const MAX_FIELD_CHARS: usize = 160;

/// One visible node worth showing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UiNode {
    pub text: String,
    pub desc: String,
    pub id: String,
    /// Short class name (`TextView` for `android.widget.TextView`).
    pub class: String,
    pub package: String,
    /// `[x1, y1, x2, y2]` in screen pixels.
    pub bounds: [i32; 4],
    pub clickable: bool,
    pub scrollable: bool,
    pub checkable: bool,
    pub checked: bool,
    pub focused: bool,
    pub enabled: bool,
}

impl UiNode {
    pub fn center(&self) -> [i32; 2] {
        let [x1, y1, x2, y2] = self.bounds.map(i64::from);
        [((x1 + x2) / 2) as i32, ((y1 + y2) / 2) as i32]
    }

    /// The compact JSON form: fixed fields always, flags only when they say something.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "text": self.text, "desc": self.desc, "id": self.id, "class": self.class,
            "bounds": self.bounds, "center": self.center(), "clickable": self.clickable,
        });
        if let Value::Object(m) = &mut v {
            if self.scrollable {
                m.insert("scrollable".into(), Value::Bool(true));
            }
            if self.checkable {
                m.insert("checked".into(), Value::Bool(self.checked));
            }
            if self.focused {
                m.insert("focused".into(), Value::Bool(true));
            }
            if !self.enabled {
                m.insert("enabled".into(), Value::Bool(false));
            }
        }
        v
    }
}

/// A parsed dump.
#[derive(Debug, Clone, Default)]
pub struct UiDump {
    pub rotation: Option<u32>,
    /// The first `MAX_NODES` nodes worth showing, in document (drawing) order.
    pub nodes: Vec<UiNode>,
    /// How many nodes were worth showing in all.
    pub total: usize,
}

/// Parse a dump. Errors describe malformed input; they never panic.
pub fn parse(xml: &[u8]) -> Result<UiDump, String> {
    if xml.len() > MAX_DUMP_BYTES {
        return Err(format!(
            "window dump is {} bytes, over the {MAX_DUMP_BYTES}-byte limit",
            xml.len()
        ));
    }
    let text = String::from_utf8_lossy(xml);
    let mut reader = Reader::from_str(&text);
    let mut dump = UiDump::default();
    let mut seen_hierarchy = false;
    loop {
        let event = reader.read_event().map_err(|e| {
            format!(
                "malformed window dump at byte {}: {e}",
                reader.error_position()
            )
        })?;
        match event {
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                "hierarchy" => {
                    seen_hierarchy = true;
                    dump.rotation = attr(&e, "rotation")?.and_then(|r| r.parse().ok());
                }
                "node" if seen_hierarchy => {
                    if let Some(node) = node(&e)? {
                        dump.total += 1;
                        if dump.nodes.len() < MAX_NODES {
                            dump.nodes.push(node);
                        }
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    if !seen_hierarchy {
        return Err("not a uiautomator window dump (no <hierarchy> element)".into());
    }
    Ok(dump)
}

/// One attribute's normalized value (entities resolved; the raw value if it has an
/// unknown entity).
fn attr(e: &BytesStart<'_>, name: &str) -> Result<Option<String>, String> {
    for a in e.attributes().with_checks(false) {
        let a = a.map_err(|err| format!("malformed attribute in window dump: {err}"))?;
        if a.key.as_ref() == name {
            let value = a
                .normalized_value(XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .unwrap_or_else(|_| a.value.into_owned());
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// A `<node>` worth showing: visible, with an area, and with something to read or tap.
fn node(e: &BytesStart<'_>) -> Result<Option<UiNode>, String> {
    let mut n = UiNode {
        enabled: true,
        ..UiNode::default()
    };
    let mut bounds = None;
    let mut visible = true;
    for a in e.attributes().with_checks(false) {
        let a = a.map_err(|err| format!("malformed attribute in window dump: {err}"))?;
        let value = a
            .normalized_value(XmlVersion::Implicit1_0)
            .unwrap_or_else(|_| a.value.clone());
        let flag = value.as_ref() == "true";
        match a.key.as_ref() {
            "text" => n.text = bounded(&value),
            "content-desc" => n.desc = bounded(&value),
            "resource-id" => n.id = bounded(&value),
            "class" => n.class = bounded(value.rsplit('.').next().unwrap_or_default()),
            "package" => n.package = bounded(&value),
            "bounds" => bounds = parse_bounds(&value),
            "clickable" => n.clickable = flag,
            "scrollable" => n.scrollable = flag,
            "checkable" => n.checkable = flag,
            "checked" => n.checked = flag,
            "focused" => n.focused = flag,
            "enabled" => n.enabled = flag,
            "visible-to-user" => visible = value.as_ref() != "false",
            _ => {}
        }
    }
    let Some(b) = bounds else { return Ok(None) };
    if !visible || b[2] <= b[0] || b[3] <= b[1] {
        return Ok(None);
    }
    if n.text.is_empty() && n.desc.is_empty() && n.id.is_empty() && !n.clickable {
        return Ok(None);
    }
    n.bounds = b;
    Ok(Some(n))
}

/// `[x1,y1][x2,y2]` → `[x1, y1, x2, y2]`; anything else is `None`.
pub fn parse_bounds(s: &str) -> Option<[i32; 4]> {
    let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (a, b) = inner.split_once("][")?;
    let pair = |p: &str| -> Option<(i32, i32)> {
        let (x, y) = p.split_once(',')?;
        Some((x.trim().parse().ok()?, y.trim().parse().ok()?))
    };
    let ((x1, y1), (x2, y2)) = (pair(a)?, pair(b)?);
    Some([x1, y1, x2, y2])
}

/// At most `MAX_FIELD_CHARS` characters, with `…` when cut; control characters (other
/// than newlines and tabs) become spaces.
fn bounded(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_FIELD_CHARS)
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    if s.chars().nth(MAX_FIELD_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = r#"<node index="0" text="OK" resource-id="android:id/button1" class="android.widget.Button" package="com.example" content-desc="" checkable="false" checked="false" clickable="true" enabled="true" focusable="true" focused="false" scrollable="false" bounds="[10,20][110,60]" />"#;

    fn wrap(nodes: &str) -> String {
        format!("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"1\">{nodes}</hierarchy>")
    }

    #[test]
    fn a_node_is_reduced_to_its_readable_fields() {
        let d = parse(wrap(NODE).as_bytes()).unwrap();
        assert_eq!(d.rotation, Some(1));
        assert_eq!(d.total, 1);
        let n = &d.nodes[0];
        assert_eq!(
            (n.text.as_str(), n.id.as_str(), n.class.as_str()),
            ("OK", "android:id/button1", "Button")
        );
        assert_eq!(
            (n.bounds, n.center(), n.clickable),
            ([10, 20, 110, 60], [60, 40], true)
        );
        assert_eq!(
            n.to_json(),
            json!({"text": "OK", "desc": "", "id": "android:id/button1", "class": "Button",
                   "bounds": [10, 20, 110, 60], "center": [60, 40], "clickable": true})
        );
    }

    #[test]
    fn invisible_empty_and_zero_area_nodes_are_skipped() {
        let xml = wrap(concat!(
            r#"<node text="a" bounds="[0,0][10,10]" visible-to-user="false"/>"#,
            r#"<node text="" resource-id="" content-desc="" clickable="false" bounds="[0,0][10,10]"/>"#,
            r#"<node text="b" bounds="[5,5][5,50]"/>"#,
            r#"<node text="c" bounds="[0,0][10,10]" visible-to-user="true"/>"#,
            r#"<node content-desc="Back" class="android.widget.ImageButton" bounds="[0,0][10,10]"/>"#,
        ));
        let d = parse(xml.as_bytes()).unwrap();
        let texts: Vec<_> = d
            .nodes
            .iter()
            .map(|n| (n.text.as_str(), n.desc.as_str()))
            .collect();
        assert_eq!(texts, [("c", ""), ("", "Back")]);
    }

    #[test]
    fn entities_are_unescaped_and_unknown_ones_kept_raw() {
        let xml = wrap(
            r#"<node text="Sound &amp; vibration&#10;x" content-desc="a &nbsp; b" bounds="[0,0][1,1]"/>"#,
        );
        let d = parse(xml.as_bytes()).unwrap();
        assert_eq!(d.nodes[0].text, "Sound & vibration\nx");
        assert_eq!(d.nodes[0].desc, "a &nbsp; b");
    }

    #[test]
    fn hostile_input_is_an_error_or_bounded_never_a_panic() {
        for bad in [
            "",
            "<hierarchy",
            "<hierarchy><node text=\"x\" bounds=\"[0,0][1,1]\"></hierarchy>",
            "<hierarchy><node text=x/></hierarchy>",
            "<<<>>>",
            "\u{0}\u{1}\u{2}",
            "<node text=\"outside\" bounds=\"[0,0][1,1]\"/>",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} parsed");
        }
        // Invalid UTF-8 is read lossily, not refused.
        let mut bytes = wrap(r#"<node text="X" bounds="[0,0][1,1]"/>"#).into_bytes();
        let at = bytes.iter().position(|&b| b == b'X').unwrap_or(0);
        bytes.insert(at, 0xff);
        assert_eq!(parse(&bytes).unwrap().nodes[0].text, "\u{fffd}X");
        // A huge attribute is cut to the field bound.
        let huge = "x".repeat(1_000_000);
        let d = parse(wrap(&format!(r#"<node text="{huge}" bounds="[0,0][9,9]"/>"#)).as_bytes())
            .unwrap();
        assert_eq!(d.nodes[0].text.chars().count(), MAX_FIELD_CHARS + 1);
        // Over the size cap: refused before parsing.
        let over = vec![b' '; MAX_DUMP_BYTES + 1];
        assert!(parse(&over).unwrap_err().contains("limit"));
        // Missing or malformed bounds: the node is skipped.
        for b in [
            "",
            " bounds=\"\"",
            " bounds=\"[1,2][3]\"",
            " bounds=\"[a,b][c,d]\"",
            " bounds=\"[99999999999,0][1,1]\"",
        ] {
            let d = parse(wrap(&format!(r#"<node text="t"{b}/>"#)).as_bytes()).unwrap();
            assert!(d.nodes.is_empty(), "{b}");
        }
        // Deep nesting costs no stack.
        let deep = format!(
            "{}{}",
            "<node text=\"d\" bounds=\"[0,0][2,2]\">".repeat(100_000),
            "</node>".repeat(100_000)
        );
        assert_eq!(parse(wrap(&deep).as_bytes()).unwrap().total, 100_000);
    }

    #[test]
    fn at_most_max_nodes_are_kept() {
        let many = NODE.repeat(MAX_NODES + 5);
        let d = parse(wrap(&many).as_bytes()).unwrap();
        assert_eq!((d.nodes.len(), d.total), (MAX_NODES, MAX_NODES + 5));
    }

    #[test]
    fn bounds_parse() {
        assert_eq!(parse_bounds("[0,0][1080,2400]"), Some([0, 0, 1080, 2400]));
        assert_eq!(parse_bounds("[-5,10][20,-1]"), Some([-5, 10, 20, -1]));
        assert_eq!(parse_bounds("[0,0]"), None);
    }
}
