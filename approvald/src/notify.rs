//! Android notifications for pending approvals: a request waiting for the owner is
//! worth nothing if the owner does not know it waits. On Android (and unless the
//! configuration says `approval_notifications = false`) each new pending request posts a
//! notification through the system's `cmd notification post`, naming the action (escaped
//! as the CLI shows it), its risk, and the command that approves it.
//!
//! AOSP's `cmd notification` (`NotificationShellCmd`) can post but has no subcommand that
//! removes a notification, and `post` takes no timeout. So when the request is settled
//! (decided, expired, withdrawn, or refused as approvald stops) the notification is
//! *replaced*: posted again under the same tag, saying what became of the request, so
//! no stale "approve within N s" stays on the screen.
//!
//! The program runs without a shell (argv only), with stdin, stdout and stderr on
//! /dev/null, on a blocking thread, and is killed after [`RUN_TIMEOUT`]. Nothing here
//! waits on a decision's path, and nothing here can fail a decision: a missing or
//! failing program is a log line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use nl2sh_proto::channels::{ActionSummary, Decision};
use nl2sh_proto::display::Shown;

use crate::pending::phrase_for;

/// The system's command-line client of Android's services.
pub const ANDROID_CMD: &str = "/system/bin/cmd";
/// Longest a notification command may run before it is killed.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of the action shown in a notification (cut with the escaping function's own
/// marker): enough to recognise it; the whole action is in `nl2sh protocol approvals`.
pub const ACTION_SHOWN_BYTES: usize = 400;
/// Title of a notification for a request that waits.
pub const TITLE_PENDING: &str = "nl2sh: approval needed";
/// Title of the notification that replaces it once the request is settled.
pub const TITLE_SETTLED: &str = "nl2sh: no longer pending";
/// How often a running command is looked at while it runs.
const POLL: Duration = Duration::from_millis(20);

/// Whether a failure to run the program was logged already (once is enough: a device
/// without `cmd` would otherwise log it for every request).
static RUN_FAILURE_LOGGED: AtomicBool = AtomicBool::new(false);

/// Posts notifications through `program`, or does nothing.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    program: Option<Arc<Path>>,
}

impl Notifier {
    /// Posts nothing.
    pub fn off() -> Self {
        Self::default()
    }

    /// [`ANDROID_CMD`] on Android; nothing elsewhere.
    pub fn for_this_device() -> Self {
        if nl2sh_proto::platform::is_android() {
            Self::with_program(ANDROID_CMD)
        } else {
            Self::off()
        }
    }

    /// Runs `program` with `cmd`'s arguments (tests point this at a stand-in).
    pub fn with_program(program: impl Into<PathBuf>) -> Self {
        Self {
            program: Some(Arc::from(program.into())),
        }
    }

    pub fn is_on(&self) -> bool {
        self.program.is_some()
    }

    /// Post the notification of pending request `id` (for `summary`, waiting `timeout`).
    /// Returns at once; the returned [`Notice`] replaces the notification once it is
    /// dropped. `None` when notifications are off or no runtime is there to run them.
    pub fn pending(&self, id: &str, summary: &ActionSummary, timeout: Duration) -> Option<Notice> {
        let program = self.program.clone()?;
        let what = what(summary);
        let text = pending_text(id, summary, &what, timeout);
        let posted = spawn(program.clone(), post_args(id, TITLE_PENDING, text), None)?;
        Some(Notice {
            program,
            id: id.to_owned(),
            what,
            posted: Some(posted),
            decision: None,
        })
    }
}

/// A posted notification of a pending request. Dropping it replaces the notification
/// with one saying the request is no longer pending (and how it was settled, when
/// [`Notice::settled`] said so), after the first post has finished, so the two never
/// race.
pub struct Notice {
    program: Arc<Path>,
    id: String,
    what: String,
    posted: Option<JoinHandle<()>>,
    decision: Option<Decision>,
}

impl Notice {
    /// The request was settled as `decision`.
    pub fn settled(mut self, decision: Decision) {
        self.decision = Some(decision);
    }
}

impl Drop for Notice {
    fn drop(&mut self) {
        let text = settled_text(&self.what, self.decision);
        let args = post_args(&self.id, TITLE_SETTLED, text);
        // Without a runtime (approvald is ending) the notification stays; nothing more
        // can be done about it then.
        let _ = spawn(self.program.clone(), args, self.posted.take());
    }
}

/// The tag a request's notification is posted under: posting under it again replaces it.
pub fn tag(id: &str) -> String {
    format!("nl2sh-{id}")
}

/// `cmd notification post -S bigtext -t TITLE TAG TEXT`. The tag comes before the text,
/// so nothing in the text can be taken for an option.
fn post_args(id: &str, title: &str, text: String) -> Vec<String> {
    vec![
        "notification".into(),
        "post".into(),
        "-S".into(),
        "bigtext".into(),
        "-t".into(),
        title.into(),
        tag(id),
        text,
    ]
}

/// `tool: action`, each through the one escaping function, the action cut at
/// [`ACTION_SHOWN_BYTES`] with its marker.
fn what(summary: &ActionSummary) -> String {
    format!(
        "{}: {}",
        Shown::new(&summary.tool),
        Shown::new(&summary.action).max_bytes(ACTION_SHOWN_BYTES)
    )
}

/// The text of a pending request's notification.
pub fn pending_text(id: &str, summary: &ActionSummary, what: &str, timeout: Duration) -> String {
    let root = if summary.requires_root {
        ", requires root"
    } else {
        ""
    };
    let phrase = phrase_for(summary.risk, id)
        .map(|p| format!(" --phrase \"{p}\""))
        .unwrap_or_default();
    format!(
        "{what}\nrisk {risk}{root}, from {origin}\napprove within {secs} s: nl2sh protocol \
         approve {id}{phrase}",
        risk = summary.risk.as_str(),
        origin = summary.origin.as_str(),
        secs = timeout.as_secs(),
    )
}

/// The text that replaces it once the request is settled.
pub fn settled_text(what: &str, decision: Option<Decision>) -> String {
    let how = match decision {
        Some(Decision::Approved) => "approved",
        Some(Decision::Rejected) => "rejected",
        Some(Decision::Expired) => "expired: nobody decided it in time, so it did not run",
        Some(Decision::Withdrawn) => "withdrawn: the call was cancelled",
        Some(Decision::Refused) => "refused: the service stopped, so it did not run",
        Some(other) => other.as_str(),
        None => "no longer pending",
    };
    format!("{what}\n{how}")
}

/// Run `program args` on a blocking thread once `after` (an earlier command for the same
/// notification) has finished. `None` without a runtime.
fn spawn(
    program: Arc<Path>,
    args: Vec<String>,
    after: Option<JoinHandle<()>>,
) -> Option<JoinHandle<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(async move {
        if let Some(earlier) = after {
            let _ = earlier.await;
        }
        let _ = tokio::task::spawn_blocking(move || run(&program, &args)).await;
    }))
}

/// Run the program to its end, or kill it after [`RUN_TIMEOUT`].
fn run(program: &Path, args: &[String]) {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            if !RUN_FAILURE_LOGGED.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    program = %program.display(),
                    error = %e,
                    "cannot post an approval notification"
                );
            }
            return;
        }
    };
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    tracing::debug!(
                        program = %program.display(),
                        %status,
                        "the notification command failed"
                    );
                }
                return;
            }
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) => {
                tracing::warn!(
                    program = %program.display(),
                    secs = RUN_TIMEOUT.as_secs(),
                    "the notification command did not finish in time; killing it"
                );
                break;
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot wait for the notification command");
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{CallId, CallOrigin, Confinement, Identity, RiskLevel};

    fn summary(action: &str, risk: RiskLevel) -> ActionSummary {
        ActionSummary {
            data: None,
            ui_app: None,
            call_id: CallId(1),
            task: None,
            after_reading: Default::default(),
            client: None,
            sent: None,
            origin: CallOrigin::McpHttp,
            tool: "shell.exec".into(),
            action: action.into(),
            arguments_sha256: "0".repeat(64),
            risk,
            requires_root: true,
            identity: Identity::Root,
            confinement: Confinement::Unconfined,
            reasons: Vec::new(),
            commands: None,
        }
    }

    #[test]
    fn the_text_names_the_action_escaped_its_risk_and_how_to_approve() {
        let s = summary("touch /tmp/x\n\u{1b}[2Jrm -rf /", RiskLevel::Medium);
        let text = pending_text("abc234", &s, &what(&s), Duration::from_secs(120));
        assert_eq!(
            text,
            "shell.exec: touch /tmp/x\\n\\x1b[2Jrm -rf /\n\
             risk medium, requires root, from mcp_http\n\
             approve within 120 s: nl2sh protocol approve abc234"
        );
        let s = summary("reboot", RiskLevel::Critical);
        let text = pending_text("abc234", &s, &what(&s), Duration::from_secs(60));
        assert!(text.ends_with(
            "approve within 60 s: nl2sh protocol approve abc234 --phrase \"approve critical abc234\""
        ));
    }

    #[test]
    fn a_long_action_is_cut_with_the_marker() {
        let long = "x".repeat(10_000);
        let s = summary(&long, RiskLevel::Low);
        let w = what(&s);
        assert!(w.len() < ACTION_SHOWN_BYTES + 100, "{}", w.len());
        assert!(w.ends_with(" … [cut: 10000 bytes in all]"), "{w}");
    }

    #[test]
    fn the_argv_puts_the_tag_before_the_text() {
        let args = post_args("abc234", TITLE_PENDING, "-x text".into());
        assert_eq!(
            args,
            [
                "notification",
                "post",
                "-S",
                "bigtext",
                "-t",
                TITLE_PENDING,
                "nl2sh-abc234",
                "-x text"
            ]
        );
    }

    #[test]
    fn off_posts_nothing() {
        let n = Notifier::off();
        assert!(!n.is_on());
        assert!(n
            .pending(
                "abc234",
                &summary("true", RiskLevel::Low),
                Duration::from_secs(1)
            )
            .is_none());
    }
}
