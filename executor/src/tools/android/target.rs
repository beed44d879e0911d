//! What an input tool aims at, said in words for the approval and checked again right
//! before the input is injected (docs/PROTOCOLS.md, "Element targets and revalidation").
//!
//! A target is an element (`{"text"|"desc"|"id": ..., "package"?, "index"?}`, matched
//! exactly against the fields `android.screen_dump` reports) or a point, in screen pixels
//! or in a screenshot's image space (`map`). Preparing reads the screen once (a window
//! dump, and the foreground app from `dumpsys window` when dumpsys exists), bounded by
//! [`PREPARE_LOOK`]; the run reads it again after approval and injects nothing when the
//! element is gone, has moved, or another app is in front.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::apps::parse_focus;
use super::run_checked;
use super::screen::read_dump;
use super::uixml::{UiDump, UiNode};
use crate::device::DeviceEnv;
use crate::exec::CommandSpec;
use crate::sys::ChildSetup;
use crate::tools::{Args, ExecContext, ToolError};
use crate::tools::{Prepared, RunFn, ToolOutput};
use nl2sh_proto::channels::RiskLevel;

/// How long preparing may spend reading the screen (a first `uiautomator dump` takes one
/// to three seconds on phones).
pub const PREPARE_LOOK: Duration = Duration::from_secs(8);
/// How far (pixels, any edge) an element may have shifted and still count as in place.
pub const MOVE_TOLERANCE_PX: i32 = 16;
/// Largest screen coordinate accepted.
pub const MAX_COORD: u64 = 65_535;
/// Matches listed in an ambiguity error.
const MAX_LISTED: usize = 10;
/// Characters of an element's label shown in words.
const MAX_LABEL_CHARS: usize = 60;
/// Largest `dumpsys window` output read for the foreground app.
const MAX_DUMPSYS_BYTES: usize = 4 * 1024 * 1024;

/// An element as a caller names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub text: Option<String>,
    pub desc: Option<String>,
    pub id: Option<String>,
    pub package: Option<String>,
    pub index: Option<usize>,
}

/// The JSON schema of an `element` argument.
pub fn element_schema() -> Value {
    let field = |what: &str| json!({"type": "string", "minLength": 1, "maxLength": 512, "description": what});
    json!({
        "type": "object",
        "description": "An element as android.screen_dump reports it (exact match; id also \
            matches without its `package:id/` prefix); several fields must all match. More \
            than one match without `index` is an error listing them.",
        "properties": {
            "text": field("The element's text"),
            "desc": field("Its content description"),
            "id": field("Its resource id"),
            "package": field("Only elements of this app"),
            "index": {"type": "integer", "minimum": 0, "maximum": 299,
                      "description": "Which match, 0 first in drawing order"}
        },
        "additionalProperties": false
    })
}

/// The JSON schema of a `map` argument (android.screenshot's coordinate map).
pub fn map_schema() -> Value {
    json!({
        "type": "object",
        "description": "The coordinate map of the screenshot the point was read from: the \
            coordinates are then that image's pixels",
        "properties": {
            "image": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": MAX_COORD}, "maxItems": 2},
            "screen": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": MAX_COORD}, "maxItems": 4}
        },
        "required": ["image", "screen"],
        "additionalProperties": false
    })
}

impl Selector {
    pub fn from_value(v: &Value) -> Result<Self, ToolError> {
        let bad = |m: String| ToolError::InvalidArguments(format!("`element`: {m}"));
        let Value::Object(m) = v else {
            return Err(bad("must be an object".into()));
        };
        let field = |k: &str| -> Result<Option<String>, ToolError> {
            match m.get(k) {
                None => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(_) => Err(bad(format!("`{k}` must be a non-empty string"))),
            }
        };
        let index = match m.get("index") {
            None => None,
            Some(i) => Some(
                i.as_u64()
                    .filter(|&i| i < 300)
                    .ok_or_else(|| bad("`index` must be an integer 0..299".into()))?
                    as usize,
            ),
        };
        let s = Self {
            text: field("text")?,
            desc: field("desc")?,
            id: field("id")?,
            package: field("package")?,
            index,
        };
        if s.text.is_none() && s.desc.is_none() && s.id.is_none() {
            return Err(bad("name it by `text`, `desc` or `id`".into()));
        }
        Ok(s)
    }

    pub fn matches(&self, n: &UiNode) -> bool {
        let id_ok = |want: &str| {
            n.id == want
                || (!want.contains(':')
                    && n.id.split_once(":id/").map(|(_, short)| short) == Some(want))
        };
        self.text.as_deref().is_none_or(|t| n.text == t)
            && self.desc.as_deref().is_none_or(|d| n.desc == d)
            && self.id.as_deref().is_none_or(id_ok)
            && self.package.as_deref().is_none_or(|p| n.package == p)
    }

    /// How the caller named it: `text 'OK'`, `id 'button1' in com.x`.
    pub fn named(&self) -> String {
        let mut parts = Vec::new();
        for (k, v) in [("text", &self.text), ("desc", &self.desc), ("id", &self.id)] {
            if let Some(v) = v {
                parts.push(format!("{k} '{}'", label(v)));
            }
        }
        let mut out = parts.join(", ");
        if let Some(p) = &self.package {
            out.push_str(&format!(" in {}", label(p)));
        }
        if let Some(i) = self.index {
            out.push_str(&format!(" (match {i})"));
        }
        out
    }

    /// The one element this selector picks in `dump`, or what is wrong.
    pub fn find<'d>(&self, dump: &'d UiDump) -> Result<&'d UiNode, String> {
        let found: Vec<&UiNode> = dump.nodes.iter().filter(|n| self.matches(n)).collect();
        match (found.len(), self.index) {
            (0, _) => Err(format!("no element on screen matches {}", self.named())),
            (1, None) => Ok(found[0]),
            (n, None) => {
                let listed: Vec<String> = found
                    .iter()
                    .take(MAX_LISTED)
                    .enumerate()
                    .map(|(i, e)| format!("{i}: {} at {:?}", words(e), e.bounds))
                    .collect();
                Err(format!(
                    "{n} elements match {}; pick one with `index`: {}{}",
                    self.named(),
                    listed.join("; "),
                    if n > MAX_LISTED { "; ..." } else { "" }
                ))
            }
            (n, Some(i)) => found.get(i).copied().ok_or_else(|| {
                format!(
                    "`index` {i} is past the {n} element(s) matching {}",
                    self.named()
                )
            }),
        }
    }
}

/// A device string as shown in words: one line, bounded, and closed only by the quote
/// around it: an app's text is its own to choose, so a `'` in it is shown as `\'` (and
/// `\` as `\\`), or a label could end its quotes early and name another app or element
/// to the owner.
fn label(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_LABEL_CHARS)
        .flat_map(|c| match c {
            '\\' | '\'' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    if s.chars().nth(MAX_LABEL_CHARS).is_some() {
        format!("{one_line}…")
    } else {
        one_line
    }
}

/// What kind of thing an element is, from its class, in a word or two.
fn role(n: &UiNode) -> String {
    match n.class.as_str() {
        "Button" | "ImageButton" | "MaterialButton" | "FloatingActionButton" => "button".into(),
        "EditText" | "AutoCompleteTextView" | "TextInputEditText" => "text field".into(),
        "TextView" => "text".into(),
        "CheckBox" => "checkbox".into(),
        "Switch" | "SwitchCompat" | "SwitchMaterial" => "switch".into(),
        "RadioButton" => "radio button".into(),
        "ImageView" => "image".into(),
        "" => "element".into(),
        other => label(other),
    }
}

/// `'Delete account' (button) in com.android.settings`.
pub fn words(n: &UiNode) -> String {
    let name = [&n.text, &n.desc, &n.id]
        .into_iter()
        .find(|s| !s.is_empty())
        .map(|s| format!("'{}'", label(s)))
        .unwrap_or_else(|| "an unlabelled element".into());
    if n.package.is_empty() {
        format!("{name} ({})", role(n))
    } else {
        format!("{name} ({}) in {}", role(n), label(&n.package))
    }
}

/// Words for a clickable element; one without a label of its own (a list row) is named
/// by the first labelled element inside it: `'Battery' (row: LinearLayout) in com.x`.
pub fn words_within(dump: &UiDump, n: &UiNode) -> String {
    if !(n.text.is_empty() && n.desc.is_empty() && n.id.is_empty()) {
        return words(n);
    }
    let [x1, y1, x2, y2] = n.bounds;
    let inner = dump.nodes.iter().find(|m| {
        let [a, b, c, d] = m.bounds;
        a >= x1 && b >= y1 && c <= x2 && d <= y2 && !(m.text.is_empty() && m.desc.is_empty())
    });
    match inner {
        Some(m) => {
            let name = if m.text.is_empty() { &m.desc } else { &m.text };
            format!("'{}' ({}) in {}", label(name), role(n), label(&n.package))
        }
        None => words(n),
    }
}

/// The smallest clickable element containing (x, y).
pub fn node_under(dump: &UiDump, x: i64, y: i64) -> Option<&UiNode> {
    dump.nodes
        .iter()
        .filter(|n| n.clickable && contains(n.bounds, x, y))
        .min_by_key(|n| area(n.bounds))
}

fn contains([x1, y1, x2, y2]: [i32; 4], x: i64, y: i64) -> bool {
    (i64::from(x1)..i64::from(x2)).contains(&x) && (i64::from(y1)..i64::from(y2)).contains(&y)
}

fn area([x1, y1, x2, y2]: [i32; 4]) -> i64 {
    (i64::from(x2) - i64::from(x1)) * (i64::from(y2) - i64::from(y1))
}

fn moved(a: [i32; 4], b: [i32; 4]) -> bool {
    a.iter()
        .zip(b.iter())
        .any(|(p, q)| (i64::from(*p) - i64::from(*q)).abs() > i64::from(MOVE_TOLERANCE_PX))
}

/// A screenshot's coordinate map: image pixel (ix, iy) is screen pixel
/// `x1 + (ix + 0.5) * (x2 - x1) / W`, likewise y.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageMap {
    pub image: [u64; 2],
    pub screen: [u64; 4],
}

impl ImageMap {
    pub fn from_value(v: &Value) -> Result<Self, ToolError> {
        let bad = |m: &str| ToolError::InvalidArguments(format!("`map`: {m}"));
        let nums = |k: &str, n: usize| -> Result<Vec<u64>, ToolError> {
            let list = v
                .get(k)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(&format!("`{k}` must be an array")))?;
            let out: Option<Vec<u64>> = list.iter().map(Value::as_u64).collect();
            match out {
                Some(o) if o.len() == n && o.iter().all(|&x| x <= MAX_COORD) => Ok(o),
                _ => Err(bad(&format!(
                    "`{k}` must be {n} integers within 0..{MAX_COORD}"
                ))),
            }
        };
        let (i, s) = (nums("image", 2)?, nums("screen", 4)?);
        if i[0] == 0 || i[1] == 0 {
            return Err(bad("the image's width and height must be positive"));
        }
        if s[2] <= s[0] || s[3] <= s[1] {
            return Err(bad(
                "the screen rectangle [x1, y1, x2, y2] must have x2 > x1 and y2 > y1",
            ));
        }
        Ok(Self {
            image: [i[0], i[1]],
            screen: [s[0], s[1], s[2], s[3]],
        })
    }

    /// The screen pixel under image pixel (ix, iy); refused outside the image.
    pub fn screen_point(&self, ix: u64, iy: u64) -> Result<(u64, u64), ToolError> {
        let [w, h] = self.image;
        if ix >= w || iy >= h {
            return Err(ToolError::InvalidArguments(format!(
                "point ({ix}, {iy}) is outside the {w}x{h} image of `map`"
            )));
        }
        let [x1, y1, x2, y2] = self.screen;
        // Integer form of x1 + (ix + 0.5) * (x2 - x1) / W, rounded down.
        let x = x1 + ((2 * ix + 1) * (x2 - x1)) / (2 * w);
        let y = y1 + ((2 * iy + 1) * (y2 - y1)) / (2 * h);
        Ok((x, y))
    }
}

/// The point named by `x_key`/`y_key`, in screen pixels (through `map` when given).
pub fn point(args: &Args<'_>, x_key: &str, y_key: &str) -> Result<(u64, u64), ToolError> {
    let coord = |key: &str| match args.opt_u64(key)? {
        Some(v) if v <= MAX_COORD => Ok(v),
        Some(v) => Err(ToolError::InvalidArguments(format!(
            "`{key}` {v} is over {MAX_COORD}"
        ))),
        None => Err(ToolError::InvalidArguments(format!("`{key}` is required"))),
    };
    let (x, y) = (coord(x_key)?, coord(y_key)?);
    match args.0.get("map") {
        None => Ok((x, y)),
        Some(m) => ImageMap::from_value(m)?.screen_point(x, y),
    }
}

/// What the screen showed: its elements and the app in front.
#[derive(Debug, Clone)]
pub struct Seen {
    pub dump: UiDump,
    pub front: Option<String>,
    /// Whether the lock screen shows (`dumpsys window`'s keyguard state).
    pub locked: bool,
    /// The `dumpsys window` text it was read from, when dumpsys exists (the touch engine
    /// takes the display's size and rotation from it rather than reading it again).
    pub window: Option<String>,
}

/// The foreground app: `dumpsys window`'s focus when dumpsys exists, else the package
/// of the dump's first element (the active window's root).
fn front_of(dump: &UiDump, dumpsys: Option<&str>) -> Option<String> {
    match dumpsys.map(parse_focus) {
        Some((Some(f), _)) => Some(f.package),
        _ => dump
            .nodes
            .iter()
            .map(|n| n.package.clone())
            .find(|p| !p.is_empty()),
    }
}

/// Read the screen now, as `ctx` says.
pub async fn look(ctx: &ExecContext) -> Result<Seen, ToolError> {
    let uiautomator = ctx
        .env
        .program("uiautomator")
        .ok_or_else(|| ToolError::Unavailable("`uiautomator` is not on this device's PATH".into()))?
        .display()
        .to_string();
    let dump = read_dump(ctx, &uiautomator).await?;
    let window = match ctx.env.program("dumpsys") {
        Some(p) => {
            let mut spec = CommandSpec::new(vec![p.display().to_string(), "window".into()]);
            spec.max_stdout = MAX_DUMPSYS_BYTES;
            let out = run_checked(ctx, spec).await?;
            Some(String::from_utf8_lossy(&out.stdout.bytes).into_owned())
        }
        None => None,
    };
    let front = front_of(&dump, window.as_deref());
    let locked = window.as_deref().is_some_and(keyguard_shows);
    Ok(Seen {
        dump,
        front,
        locked,
        window,
    })
}

/// Whether `dumpsys window` says the lock screen shows.
fn keyguard_shows(window: &str) -> bool {
    super::dumpsys::facts(window)
        .locked
        .is_some_and(|(locked, _)| locked)
}

/// The app in front and whether the lock screen shows, from one `dumpsys window`: what a
/// UI action that reads no window dump is judged by ([`judge_ui_target`]).
pub async fn front(ctx: &ExecContext) -> Result<(Option<String>, bool), ToolError> {
    let dumpsys = ctx
        .env
        .program("dumpsys")
        .ok_or_else(|| ToolError::Unavailable("`dumpsys` is not on this device's PATH".into()))?
        .display()
        .to_string();
    let mut spec = CommandSpec::new(vec![dumpsys, "window".into()]);
    spec.max_stdout = MAX_DUMPSYS_BYTES;
    let out = run_checked(ctx, spec).await?;
    let window = String::from_utf8_lossy(&out.stdout.bytes);
    let app = parse_focus(&window).0.map(|f| f.package);
    Ok((app, keyguard_shows(&window)))
}

/// What changed in front since a UI action was prepared, if anything: another app (when
/// both reads name one), or the lock screen came up.
fn front_changed(
    was: Option<&str>,
    was_locked: bool,
    now: Option<&str>,
    locked: bool,
) -> Option<Value> {
    if locked && !was_locked {
        return Some(json!({"change": "locked",
            "message": "the lock screen came up since the action was prepared"}));
    }
    match (was, now) {
        (Some(was), Some(is)) if was != is => Some(json!({"change": "app", "was": was, "now": is,
            "message": format!("another app is in front: {} (was {})", label(is), label(was))})),
        _ => None,
    }
}

/// `run`, preceded right before input by one more look at the front: if another app
/// came to the front (or the lock screen came up) since the action was judged for `app`
/// (and approved, or let run by a timed UI grant for `app`), nothing is injected and
/// the result says what changed. For UI actions that read no window dump; those aimed
/// at an element or a point check the whole screen again ([`Aimed::recheck`]).
pub fn in_front_only(app: String, run: RunFn) -> RunFn {
    Box::new(move |ctx| {
        Box::pin(async move {
            let (now, locked) = front(&ctx).await?;
            if let Some(change) = front_changed(Some(&app), false, now.as_deref(), locked) {
                return Ok(ToolOutput::json(false, &change));
            }
            run(ctx).await
        })
    })
}

/// Apps where a touch changes the phone itself (settings, installs, permissions, the
/// lock screen and the system's own panels): a UI action there is `high`, so it always
/// asks and no timed UI grant covers it.
pub const UI_ASKS_ALWAYS: &[&str] = &[
    "com.android.settings",
    "com.android.packageinstaller",
    "com.google.android.packageinstaller",
    "com.android.permissioncontroller",
    "com.google.android.permissioncontroller",
    "com.android.systemui",
];

/// Judge a UI action by its target: in one of [`UI_ASKS_ALWAYS`] (the app in front, or
/// the app of the element it touches), or on the lock screen, it is `high`. Notes the
/// app in front for a timed UI grant to name.
pub fn judge_ui_target(
    prepared: &mut Prepared,
    app: Option<String>,
    touched: Option<&str>,
    locked: bool,
) {
    let touched = touched.filter(|p| UI_ASKS_ALWAYS.contains(p) && Some(*p) != app.as_deref());
    if let Some(package) = touched {
        prepared.assessment.raise(
            RiskLevel::High,
            format!("touches an element of {package}, which always asks"),
        );
    }
    if locked {
        prepared.assessment.raise(
            RiskLevel::High,
            "the lock screen shows: a UI action there always asks",
        );
    } else if let Some(app) = app.as_deref().filter(|a| UI_ASKS_ALWAYS.contains(a)) {
        prepared.assessment.raise(
            RiskLevel::High,
            format!(
                "aimed at {app}: settings, installers, permission dialogs and the system's \
                 panels always ask"
            ),
        );
    }
    prepared.ui_app = app.filter(|a| nl2sh_proto::ui_grants::is_package_name(a));
}

/// Read the screen while preparing: the same reads as [`look`], as the UI identity, on a
/// thread of its own (preparing is synchronous), bounded by [`PREPARE_LOOK`].
pub fn look_while_preparing(env: &DeviceEnv) -> Result<Seen, ToolError> {
    while_preparing(env, |ctx| async move { look(&ctx).await })
}

/// [`front`] while preparing, as [`look_while_preparing`] reads.
pub fn front_while_preparing(env: &DeviceEnv) -> Result<(Option<String>, bool), ToolError> {
    while_preparing(env, |ctx| async move { front(&ctx).await })
}

/// Run `read` as the UI identity on a thread of its own (preparing is synchronous),
/// bounded by [`PREPARE_LOOK`].
fn while_preparing<T: Send, F: std::future::Future<Output = Result<T, ToolError>>>(
    env: &DeviceEnv,
    read: impl FnOnce(ExecContext) -> F + Send,
) -> Result<T, ToolError> {
    let identity = env.ui_identity();
    let setup = ChildSetup::for_identity(identity, env.euid).ok_or_else(|| {
        ToolError::Unavailable("this executor cannot run as the UI identity".into())
    })?;
    let ctx = ExecContext {
        identity,
        setup,
        sandbox: None,
        deadline: Instant::now() + PREPARE_LOOK,
        cancel: CancellationToken::new(),
        groups: Arc::default(),
        env: Arc::new(env.clone()),
    };
    std::thread::scope(|s| {
        s.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| ToolError::Failed(format!("cannot read the screen: {e}")))?;
            rt.block_on(read(ctx))
        })
        .join()
        .unwrap_or_else(|_| Err(ToolError::Failed("reading the screen failed".into())))
    })
}

/// What an input is aimed at, as prepared.
#[derive(Debug, Clone)]
pub enum Aim {
    /// An element found by `selector`, at `node` when prepared.
    Element { selector: Selector, node: UiNode },
    /// A point; `under` is the clickable element there when the screen could be read.
    Point { under: Option<UiNode> },
}

/// A prepared target: where input goes, what it was in words, what was in front.
#[derive(Debug, Clone)]
pub struct Aimed {
    pub aim: Aim,
    pub x: u64,
    pub y: u64,
    /// `'OK' (button) in com.x`, or for a point the element under it, or why it is
    /// unknown.
    pub words: String,
    pub front: Option<String>,
    /// Whether the lock screen showed while preparing.
    pub locked: bool,
    /// Whether the screen was read while preparing (a point's target is checked again
    /// only then).
    pub seen: bool,
}

/// Resolve `element` or the point `x_key`/`y_key` (with `map`) against the screen as it
/// is now. An element that cannot be found is an error; for a point, a screen that
/// cannot be read is said in the words.
pub fn aim(args: &Args<'_>, env: &DeviceEnv, x_key: &str, y_key: &str) -> Result<Aimed, ToolError> {
    if let Some(element) = args.0.get("element") {
        if [x_key, y_key, "map"]
            .iter()
            .any(|k| args.0.contains_key(*k))
        {
            return Err(ToolError::InvalidArguments(format!(
                "give `element` or `{x_key}`/`{y_key}`, not both"
            )));
        }
        let selector = Selector::from_value(element)?;
        let seen = look_while_preparing(env)?;
        let node = selector
            .find(&seen.dump)
            .map_err(ToolError::InvalidArguments)?
            .clone();
        let [cx, cy] = node.center();
        let (x, y) = match (u64::try_from(cx), u64::try_from(cy)) {
            (Ok(x), Ok(y)) if x <= MAX_COORD && y <= MAX_COORD => (x, y),
            _ => {
                return Err(ToolError::InvalidArguments(format!(
                    "{} has its center off the screen ({cx}, {cy})",
                    words(&node)
                )))
            }
        };
        return Ok(Aimed {
            words: words(&node),
            aim: Aim::Element { selector, node },
            x,
            y,
            front: seen.front,
            locked: seen.locked,
            seen: true,
        });
    }
    let (x, y) = point(args, x_key, y_key)?;
    Ok(match look_while_preparing(env) {
        Ok(seen) => {
            let under = node_under(&seen.dump, x as i64, y as i64).cloned();
            let words = match &under {
                Some(n) => words_within(&seen.dump, n),
                None => match &seen.front {
                    Some(p) => format!("no clickable element, in {}", label(p)),
                    None => "no clickable element".into(),
                },
            };
            Aimed {
                aim: Aim::Point { under },
                x,
                y,
                words,
                front: seen.front,
                locked: seen.locked,
                seen: true,
            }
        }
        Err(e) => Aimed {
            aim: Aim::Point { under: None },
            x,
            y,
            words: format!("the screen could not be read ({})", label(&e.to_string())),
            front: None,
            locked: false,
            seen: false,
        },
    })
}

impl Aimed {
    /// What has changed since preparing, if anything, given the screen now. The element
    /// must be there once, within [`MOVE_TOLERANCE_PX`] of where it was, with the same
    /// app in front.
    pub fn changed(&self, now: &Seen) -> Option<Value> {
        if let Some(change) = front_changed(
            self.front.as_deref(),
            self.locked,
            now.front.as_deref(),
            now.locked,
        ) {
            return Some(change);
        }
        match &self.aim {
            Aim::Element { selector, node } => match selector.find(&now.dump) {
                Err(why) => {
                    let gone = selector.matches_none(&now.dump);
                    Some(json!({"change": if gone { "gone" } else { "ambiguous" },
                        "message": format!("{} {}: {why}", words(node), if gone { "is gone" } else { "is no longer one element" })}))
                }
                Ok(n) if moved(node.bounds, n.bounds) => Some(json!({
                    "change": "moved", "was": node.bounds, "now": n.bounds,
                    "message": format!("{} moved from {:?} to {:?}", words(node), node.bounds, n.bounds)})),
                Ok(_) => None,
            },
            Aim::Point { under: Some(node) } => {
                let same = |n: &&UiNode| {
                    n.text == node.text
                        && n.desc == node.desc
                        && n.id == node.id
                        && n.class == node.class
                        && !moved(n.bounds, node.bounds)
                };
                let still = node_under(&now.dump, self.x as i64, self.y as i64)
                    .filter(same)
                    .is_some();
                (!still).then(|| {
                    let is = node_under(&now.dump, self.x as i64, self.y as i64)
                        .map(|n| words_within(&now.dump, n))
                        .unwrap_or_else(|| "no clickable element".into());
                    json!({"change": "point", "message": format!(
                        "the element at ({}, {}) was {}, now {is}", self.x, self.y, self.words)})
                })
            }
            Aim::Point { under: None } => None,
        }
    }

    /// Read the screen again and refuse (a result to return, nothing injected) when it
    /// changed; otherwise the `dumpsys window` text just read, if any.
    pub async fn recheck(
        &self,
        ctx: &ExecContext,
    ) -> Result<Result<Option<String>, Value>, ToolError> {
        if !self.seen {
            return Ok(Ok(None));
        }
        let now = look(ctx).await?;
        Ok(match self.changed(&now) {
            Some(mut change) => {
                if let Value::Object(m) = &mut change {
                    m.insert("injected".into(), Value::Bool(false));
                }
                Err(change)
            }
            None => Ok(now.window),
        })
    }

    /// The target in the result object.
    /// The app of the element it touches, when one was found.
    pub fn touched_package(&self) -> Option<&str> {
        let node = match &self.aim {
            Aim::Element { node, .. } => Some(node),
            Aim::Point { under } => under.as_ref(),
        };
        node.map(|n| n.package.as_str()).filter(|p| !p.is_empty())
    }

    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("target".into(), Value::String(self.words.clone()));
        if let Aim::Element { node, .. } = &self.aim {
            m.insert("element".into(), node.to_json());
        }
        m
    }
}

impl Selector {
    fn matches_none(&self, dump: &UiDump) -> bool {
        !dump.nodes.iter().any(|n| self.matches(n))
    }
}

#[cfg(test)]
mod front_tests {
    use super::front_changed;

    #[test]
    fn another_app_or_the_lock_screen_is_a_change() {
        assert!(front_changed(Some("a.b"), false, Some("a.b"), false).is_none());
        assert!(front_changed(None, false, Some("a.b"), false).is_none());
        let app = front_changed(Some("a.b"), false, Some("c.d"), false).unwrap();
        assert_eq!(app["change"], "app");
        let locked = front_changed(Some("a.b"), false, Some("a.b"), true).unwrap();
        assert_eq!(locked["change"], "locked");
        // Locked already when prepared (and so judged high): not a change.
        assert!(front_changed(Some("a.b"), true, Some("a.b"), true).is_none());
    }
}
