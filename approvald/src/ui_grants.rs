//! Timed UI grants (docs/APPROVALS.md, "Timed UI grants"): from an approval prompt the
//! owner lets the UI actions of one origin in one app run unasked for some minutes. A
//! grant covers only [`UI_ACTION_TOOLS`] at [`MAX_UI_GRANT_RISK`] or below, without root,
//! in the app it names; it ends when its time is up, when the owner revokes it, or when
//! a UI action of its origin finds another app in front. Kept in memory only: a restart
//! of approvald ends every grant.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use nl2sh_proto::channels::{ActionSummary, CallOrigin, CliErrorKind};
use nl2sh_proto::ui_grants::{
    is_package_name, is_ui_action, UiGrant, MAX_UI_GRANTS, MAX_UI_GRANT_MINUTES, MAX_UI_GRANT_RISK,
};

use crate::pending::{random_id, CliError, Decider};

struct Grant {
    id: String,
    app: String,
    origin: CallOrigin,
    minutes: u32,
    until: Instant,
    used: u64,
}

impl Grant {
    fn shown(&self, now: Instant) -> UiGrant {
        UiGrant {
            id: self.id.clone(),
            app: self.app.clone(),
            origin: self.origin,
            minutes: self.minutes,
            seconds_left: self.until.saturating_duration_since(now).as_secs(),
            used: self.used,
        }
    }
}

/// Why a request may not be followed by a timed UI grant, or the app a grant would name.
pub fn grantable(s: &ActionSummary) -> Result<&str, String> {
    let app = match &s.ui_app {
        Some(app) if is_ui_action(&s.tool) => app.as_str(),
        Some(_) | None => {
            return Err(format!(
                "`{}` is not a UI action in a known app: a timed UI grant covers taps, \
                 gestures, text and keys only",
                s.tool
            ))
        }
    };
    if s.risk > MAX_UI_GRANT_RISK || s.requires_root {
        return Err(format!(
            "this request is {}{}: a timed UI grant never covers it (it asks every time)",
            s.risk.as_str(),
            if s.requires_root {
                " and needs root"
            } else {
                ""
            }
        ));
    }
    Ok(app)
}

/// The grants in force.
#[derive(Default)]
pub struct UiGrants {
    grants: Mutex<Vec<Grant>>,
}

impl UiGrants {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Grant>> {
        // Consistent after every statement; a panic elsewhere cannot tear it.
        self.grants.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give a grant following the approval of `s` (checked with [`grantable`]): the UI
    /// actions of its origin in its app, for `minutes`. Answers the words the approval's
    /// audit reason ends with.
    pub fn grant(
        &self,
        s: &ActionSummary,
        minutes: u32,
        by: Decider,
        now: Instant,
    ) -> Result<String, CliError> {
        let refuse = |why: String| Err((CliErrorKind::InvalidRequest, why));
        let app = match grantable(s) {
            Ok(app) => app.to_string(),
            Err(why) => return refuse(why),
        };
        if !(1..=MAX_UI_GRANT_MINUTES).contains(&minutes) {
            return refuse(format!(
                "a timed UI grant lasts 1 to {MAX_UI_GRANT_MINUTES} minutes, not {minutes}"
            ));
        }
        let mut grants = self.lock();
        grants.retain(|g| g.until > now);
        // One grant per origin and app: a new one replaces the old.
        grants.retain(|g| !(g.origin == s.origin && g.app == app));
        if grants.len() >= MAX_UI_GRANTS {
            return refuse(format!(
                "{MAX_UI_GRANTS} timed UI grants are in force already; revoke one first"
            ));
        }
        let id = random_id().map_err(|e| {
            (
                CliErrorKind::Unavailable,
                format!("no id for the grant: {e}"),
            )
        })?;
        tracing::info!(
            grant = %id,
            app = %app,
            origin = s.origin.as_str(),
            minutes,
            "timed UI grant given {}",
            by.where_()
        );
        let words = format!(
            "; timed UI grant {id} given: UI actions of {} in {app} for {minutes} min",
            s.origin.as_str()
        );
        grants.push(Grant {
            id,
            app,
            origin: s.origin,
            minutes,
            until: now + Duration::from_secs(u64::from(minutes) * 60),
            used: 0,
        });
        Ok(words)
    }

    /// The grant that lets `s` run now, as the reason its decision records; counts the
    /// use. A UI action of a grant's origin that found another app in front ends that
    /// grant (and is not covered).
    pub fn covering(&self, s: &ActionSummary, now: Instant) -> Option<String> {
        if !is_ui_action(&s.tool) {
            return None;
        }
        let mut grants = self.lock();
        grants.retain(|g| g.until > now);
        let front = s.ui_app.as_deref().filter(|app| is_package_name(app));
        grants.retain(|g| {
            let left = g.origin != s.origin || front == Some(g.app.as_str());
            if !left {
                tracing::info!(
                    grant = %g.id,
                    app = %g.app,
                    "timed UI grant ended: another app is in front"
                );
            }
            left
        });
        grantable(s).ok()?;
        let app = front?;
        let grant = grants
            .iter_mut()
            .find(|g| g.origin == s.origin && g.app == app)?;
        grant.used += 1;
        Some(format!(
            "timed UI grant {} (UI actions of {} in {app}, {} s left) covers it",
            grant.id,
            s.origin.as_str(),
            grant.until.saturating_duration_since(now).as_secs()
        ))
    }

    /// The grants in force, oldest first.
    pub fn list(&self, now: Instant) -> Vec<UiGrant> {
        let mut grants = self.lock();
        grants.retain(|g| g.until > now);
        grants.iter().map(|g| g.shown(now)).collect()
    }

    /// End grant `id` now.
    pub fn revoke(&self, id: &str, by: Decider) -> Result<(), CliError> {
        let mut grants = self.lock();
        let Some(at) = grants.iter().position(|g| g.id == id) else {
            return Err((
                CliErrorKind::NoSuchRequest,
                format!("no timed UI grant {id}"),
            ));
        };
        let g = grants.remove(at);
        tracing::info!(grant = %g.id, app = %g.app, "timed UI grant revoked {}", by.where_());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::{CallId, Confinement, Identity, RiskLevel};

    fn ui(tool: &str, app: Option<&str>, risk: RiskLevel) -> ActionSummary {
        ActionSummary {
            call_id: CallId(1),
            origin: CallOrigin::McpHttp,
            task: None,
            after_reading: Default::default(),
            client: None,
            sent: None,
            tool: tool.into(),
            action: "input tap 10 20".into(),
            arguments_sha256: "0".repeat(64),
            risk,
            requires_root: false,
            identity: Identity::Launching,
            confinement: Confinement::Unconfined,
            reasons: Vec::new(),
            commands: None,
            data: None,
            ui_app: app.map(str::to_string),
        }
    }

    #[test]
    fn only_ui_actions_below_high_in_a_known_app_may_be_granted() {
        let tap = ui("android.tap", Some("com.example.chat"), RiskLevel::Low);
        assert_eq!(grantable(&tap), Ok("com.example.chat"));
        for s in [
            ui("shell.exec", Some("com.example.chat"), RiskLevel::Low),
            ui(
                "android.install",
                Some("com.example.chat"),
                RiskLevel::Medium,
            ),
            ui("android.tap", None, RiskLevel::Low),
            ui("android.tap", Some("com.android.settings"), RiskLevel::High),
        ] {
            assert!(grantable(&s).is_err(), "{s:?}");
        }
        let mut root = tap.clone();
        root.requires_root = true;
        assert!(grantable(&root).unwrap_err().contains("needs root"));
    }

    #[test]
    fn a_grant_covers_its_origin_and_app_until_time_another_app_or_revocation() {
        let grants = UiGrants::default();
        let now = Instant::now();
        let tap = ui("android.tap", Some("com.example.chat"), RiskLevel::Low);
        for bad in [0, MAX_UI_GRANT_MINUTES + 1] {
            assert!(grants.grant(&tap, bad, Decider::Cli, now).is_err());
        }
        let words = grants.grant(&tap, 2, Decider::Cli, now).unwrap();
        assert!(words.contains("com.example.chat for 2 min"), "{words}");
        let list = grants.list(now);
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].seconds_left, list[0].used), (120, 0));

        // Its app and origin: covered, counted; text and keys too; not a shell.
        let why = grants.covering(&tap, now).unwrap();
        assert!(
            why.contains(&list[0].id) && why.contains("120 s left"),
            "{why}"
        );
        let text = ui("android.text", Some("com.example.chat"), RiskLevel::Low);
        assert!(grants.covering(&text, now).is_some());
        assert!(grants
            .covering(
                &ui("shell.exec", Some("com.example.chat"), RiskLevel::Low),
                now
            )
            .is_none());
        // Another origin's call is not covered, and does not end it.
        let mut other = tap.clone();
        other.origin = CallOrigin::AgentHttp;
        assert!(grants.covering(&other, now).is_none());
        // High (a permission dialog over the app): asks, the grant stays.
        let high = ui("android.tap", Some("com.example.chat"), RiskLevel::High);
        assert!(grants.covering(&high, now).is_none());
        assert_eq!(grants.list(now)[0].used, 2);
        // Time up: gone.
        let later = now + Duration::from_secs(121);
        assert!(grants.covering(&tap, later).is_none());
        assert!(grants.list(later).is_empty());

        // Another app in front ends it.
        grants.grant(&tap, 5, Decider::Web, now).unwrap();
        let elsewhere = ui("android.tap", Some("com.example.bank"), RiskLevel::Low);
        assert!(grants.covering(&elsewhere, now).is_none());
        assert!(grants.list(now).is_empty());
        assert!(grants.covering(&tap, now).is_none());

        // Revoked: gone; an unknown id is said.
        grants.grant(&tap, 5, Decider::Cli, now).unwrap();
        let id = grants.list(now)[0].id.clone();
        assert_eq!(
            grants.revoke("nosuch", Decider::Cli).unwrap_err().0,
            CliErrorKind::NoSuchRequest
        );
        grants.revoke(&id, Decider::Cli).unwrap();
        assert!(grants.covering(&tap, now).is_none());
    }

    #[test]
    fn grants_are_bounded_and_one_per_origin_and_app() {
        let grants = UiGrants::default();
        let now = Instant::now();
        let tap = ui("android.tap", Some("com.example.chat"), RiskLevel::Low);
        grants.grant(&tap, 5, Decider::Cli, now).unwrap();
        grants.grant(&tap, 10, Decider::Cli, now).unwrap();
        let list = grants.list(now);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].minutes, 10);
        for i in 1..MAX_UI_GRANTS {
            let app = format!("com.example.app{i}");
            grants
                .grant(
                    &ui("android.tap", Some(&app), RiskLevel::Low),
                    5,
                    Decider::Cli,
                    now,
                )
                .unwrap();
        }
        let one_more = ui("android.tap", Some("com.example.more"), RiskLevel::Low);
        let e = grants.grant(&one_more, 5, Decider::Cli, now).unwrap_err();
        assert!(e.1.contains("revoke one first"), "{e:?}");
    }
}
