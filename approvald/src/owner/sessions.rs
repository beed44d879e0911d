//! The Web console's login codes and sessions. Codes live in memory only; the sessions'
//! hashes and expiry times are also kept in a private file ([`WEB_SESSIONS`], 0600 in
//! approvald's own directory) and read back at start, so a restart of the service
//! (the console's "Restart now") keeps the owner logged in for the rest of the session's
//! time. The file holds no secret: a hash does not log anyone in, and a session's secret
//! is only ever in the owner's cookie.
//!
//! * `nl2sh web login` (over approvals.sock, whose peer checks refuse anything in the
//!   nl2sh process tree, so a tool command can never get one) asks for a one-time code:
//!   32 random bytes, hex. It is valid for [`WEB_LOGIN_CODE_TTL`], once.
//! * The console trades it for a session ([`SessionTable::redeem`]): another 32 random
//!   bytes, valid for [`WEB_SESSION_TTL`] from the login (it does not slide with use).
//!   The session's CSRF token is derived from it ([`csrf_for`]), never stored.
//! * Only SHA-256 hashes of codes and sessions are kept, so nothing in this process's
//!   memory lets anyone log in; comparisons are constant-time.
//! * Bounded: at most [`MAX_WEB_LOGIN_CODES`] codes and [`MAX_WEB_SESSIONS`] sessions; a
//!   new one beyond ends the oldest.
//! * Failed logins are counted: past [`MAX_WEB_LOGIN_FAILURES`] within a
//!   [`WEB_LOGIN_FAILURE_WINDOW`], every login is refused until that window has passed.
//!
//! Every method takes the time as an argument, so tests drive the clock; the service
//! uses [`OwnerSessions`], which reads tokio's clock (pausable in tests too).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::time::Instant;

use nl2sh_proto::channels::{csrf_for, OwnerErrorKind, OwnerProof};
use nl2sh_proto::ids::{random_hex, RandomError};
use nl2sh_proto::limits::{
    MAX_WEB_LOGIN_CODES, MAX_WEB_LOGIN_FAILURES, MAX_WEB_SESSIONS, WEB_LOGIN_CODE_TTL,
    WEB_LOGIN_FAILURE_WINDOW, WEB_SESSION_TTL,
};
use nl2sh_proto::secret::Secret;
pub use nl2sh_proto::state_layout::WEB_SESSIONS;

/// Random bytes in a login code and in a session secret.
pub const SECRET_BYTES: usize = 32;
/// Characters of a code or session as handed out (hex of [`SECRET_BYTES`]); anything
/// else cannot be one, and is refused without hashing it.
pub const SECRET_CHARS: usize = 2 * SECRET_BYTES;

type Hash = [u8; 32];

fn hash(secret: &Secret) -> Hash {
    Sha256::digest(secret.expose().as_bytes()).into()
}

/// A fresh secret: [`SECRET_BYTES`] from the OS random source, lowercase hex.
fn mint() -> Result<Secret, RandomError> {
    random_hex(SECRET_BYTES).map(Secret::new)
}

/// Why an owner's request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "that login code is not valid (wrong, used already, or expired): run `nl2sh web login` \
         on the device for a new one"
    )]
    BadCode,
    #[error(
        "not logged in (the session expired or was ended): log in again with a code from \
         `nl2sh web login`"
    )]
    NoSession,
    #[error("this needs the session's CSRF token, and it was missing or wrong: reload the page")]
    BadCsrf,
    #[error("too many failed logins: wait a minute, then try again")]
    RateLimited,
}

impl Refused {
    pub fn kind(self) -> OwnerErrorKind {
        match self {
            Refused::BadCode | Refused::NoSession => OwnerErrorKind::NotLoggedIn,
            Refused::BadCsrf => OwnerErrorKind::BadCsrf,
            Refused::RateLimited => OwnerErrorKind::RateLimited,
        }
    }
}

/// A session just started: what the console sets as its cookie and hands its page.
#[derive(Debug)]
pub struct LoggedIn {
    pub session: Secret,
    pub csrf: Secret,
    pub expires_in: Duration,
}

/// A hash and when it stops being valid.
struct Live {
    hash: Hash,
    expires: Instant,
}

/// Hashes, oldest first, with an expiry each; at most `max`.
struct Bounded {
    entries: VecDeque<Live>,
    max: usize,
}

impl Bounded {
    fn new(max: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(max),
            max,
        }
    }

    fn forget_expired(&mut self, now: Instant) {
        self.entries.retain(|e| now < e.expires);
    }

    /// Add `hash` valid for `ttl`, ending the oldest entries beyond the bound.
    fn add(&mut self, hash: Hash, ttl: Duration, now: Instant) {
        self.forget_expired(now);
        while self.entries.len() >= self.max {
            self.entries.pop_front();
        }
        self.entries.push_back(Live {
            hash,
            expires: now + ttl,
        });
    }

    /// Index of the live entry with `hash`. Every entry is compared, each in constant
    /// time: what a caller can time is only whether (and where) one matched, never how
    /// much of a hash it got right.
    fn find(&mut self, hash: &Hash, now: Instant) -> Option<usize> {
        self.forget_expired(now);
        let mut found = None;
        for (i, entry) in self.entries.iter().enumerate() {
            let equal = bool::from(entry.hash.ct_eq(hash));
            if equal && found.is_none() {
                found = Some(i);
            }
        }
        found
    }

    fn remove(&mut self, index: usize) -> Option<Live> {
        self.entries.remove(index)
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn clear(&mut self) -> usize {
        let n = self.entries.len();
        self.entries.clear();
        n
    }
}

/// Failed logins within the current window (fixed, from the first failure in it).
#[derive(Default)]
struct Failures {
    window_start: Option<Instant>,
    count: u32,
    /// The limit was reached in this window and said so in the log.
    warned: bool,
}

impl Failures {
    /// Start a new window when the current one has passed.
    fn roll(&mut self, now: Instant) {
        if self
            .window_start
            .is_some_and(|start| now.duration_since(start) >= WEB_LOGIN_FAILURE_WINDOW)
        {
            *self = Failures::default();
        }
    }

    fn limited(&mut self, now: Instant) -> bool {
        self.roll(now);
        self.count >= MAX_WEB_LOGIN_FAILURES
    }

    fn count_one(&mut self, now: Instant) {
        self.roll(now);
        self.window_start.get_or_insert(now);
        self.count = self.count.saturating_add(1);
        if self.count >= MAX_WEB_LOGIN_FAILURES && !self.warned {
            self.warned = true;
            tracing::warn!(
                failures = self.count,
                window_secs = WEB_LOGIN_FAILURE_WINDOW.as_secs(),
                "Web console: too many failed logins; refusing every login until the window \
                 has passed"
            );
        }
    }
}

/// Login codes, sessions and the failure count, at the time each caller says.
pub struct SessionTable {
    codes: Bounded,
    sessions: Bounded,
    failures: Failures,
}

impl Default for SessionTable {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionTable {
    pub fn new() -> Self {
        Self {
            codes: Bounded::new(MAX_WEB_LOGIN_CODES),
            sessions: Bounded::new(MAX_WEB_SESSIONS),
            failures: Failures::default(),
        }
    }

    /// A new one-time login code, valid for [`WEB_LOGIN_CODE_TTL`].
    pub fn issue_code(&mut self, now: Instant) -> Result<Secret, RandomError> {
        let code = mint()?;
        self.codes.add(hash(&code), WEB_LOGIN_CODE_TTL, now);
        Ok(code)
    }

    /// Trade a live code for a new session; the code is gone once it was right. A wrong
    /// one counts as a failure; past the limit, wrong ones are refused as rate-limited
    /// until the window passes. A right code always works: a flood of wrong ones (from
    /// any local program, which can reach the console's port) must not lock the owner out
    /// of the link `web login` just gave them. Guessing is hopeless anyway (256 random
    /// bits); the limit keeps a flood from filling the log.
    pub fn redeem(&mut self, code: &Secret, now: Instant) -> Result<LoggedIn, RedeemError> {
        let found = well_formed(code)
            .then(|| self.codes.find(&hash(code), now))
            .flatten();
        let Some(index) = found else {
            if self.failures.limited(now) {
                return Err(RedeemError::Refused(Refused::RateLimited));
            }
            self.failures.count_one(now);
            return Err(RedeemError::Refused(Refused::BadCode));
        };
        let session = mint().map_err(RedeemError::Random)?;
        // Used once: gone before the session exists.
        self.codes.remove(index);
        self.sessions.add(hash(&session), WEB_SESSION_TTL, now);
        Ok(LoggedIn {
            csrf: csrf_for(&session),
            session,
            expires_in: WEB_SESSION_TTL,
        })
    }

    /// Whether `proof` names a live session, with the right CSRF token when it carries
    /// one, and with one at all when `needs_csrf`; how long the session has left.
    pub fn check(
        &mut self,
        proof: &OwnerProof,
        needs_csrf: bool,
        now: Instant,
    ) -> Result<Duration, Refused> {
        let index = self.session_index(proof, needs_csrf, now)?;
        Ok(self
            .sessions
            .entries
            .get(index)
            .map_or(Duration::ZERO, |e| e.expires.saturating_duration_since(now)))
    }

    /// End the session `proof` names (it must carry its CSRF token: a page of another
    /// origin must not be able to log the owner out).
    pub fn logout(&mut self, proof: &OwnerProof, now: Instant) -> Result<(), Refused> {
        let index = self.session_index(proof, true, now)?;
        self.sessions.remove(index);
        Ok(())
    }

    /// End every session and forget every code; the number of sessions ended.
    pub fn logout_all(&mut self, now: Instant) -> u64 {
        self.sessions.forget_expired(now);
        self.codes.clear();
        u64::try_from(self.sessions.clear()).unwrap_or(u64::MAX)
    }

    /// Live sessions now.
    pub fn sessions(&mut self, now: Instant) -> usize {
        self.sessions.forget_expired(now);
        self.sessions.len()
    }

    /// Live login codes now.
    pub fn codes(&mut self, now: Instant) -> usize {
        self.codes.forget_expired(now);
        self.codes.len()
    }

    /// The live sessions' hashes and the time each has left (for the file).
    fn export(&mut self, now: Instant) -> Vec<(Hash, Duration)> {
        self.sessions.forget_expired(now);
        self.sessions
            .entries
            .iter()
            .map(|e| (e.hash, e.expires.saturating_duration_since(now)))
            .collect()
    }

    /// Sessions read back from the file, each for the time it has left and never longer
    /// than a session lasts (a clock set back must not lengthen one).
    fn import(&mut self, kept: &[(Hash, Duration)], now: Instant) {
        for (hash, left) in kept {
            let left = (*left).min(WEB_SESSION_TTL);
            if !left.is_zero() {
                self.sessions.add(*hash, left, now);
            }
        }
    }

    fn session_index(
        &mut self,
        proof: &OwnerProof,
        needs_csrf: bool,
        now: Instant,
    ) -> Result<usize, Refused> {
        let index = well_formed(&proof.session)
            .then(|| self.sessions.find(&hash(&proof.session), now))
            .flatten()
            .ok_or(Refused::NoSession)?;
        match &proof.csrf {
            Some(given) => {
                let expected = csrf_for(&proof.session);
                // Lengths are public (64 hex characters); the content is compared in
                // constant time.
                if !bool::from(
                    expected
                        .expose()
                        .as_bytes()
                        .ct_eq(given.expose().as_bytes()),
                ) {
                    return Err(Refused::BadCsrf);
                }
            }
            None if needs_csrf => return Err(Refused::BadCsrf),
            None => {}
        }
        Ok(index)
    }
}

/// Only what [`mint`] makes can be a code or a session: anything else is refused without
/// being hashed (a frame may hold megabytes).
fn well_formed(secret: &Secret) -> bool {
    secret.expose().len() == SECRET_CHARS
}

/// Why [`SessionTable::redeem`] gave no session.
#[derive(Debug, thiserror::Error)]
pub enum RedeemError {
    #[error(transparent)]
    Refused(Refused),
    /// The code was right, but no session could be made; the code stays valid.
    #[error("the OS random source failed: {0}")]
    Random(RandomError),
}

/// The service's table, on tokio's clock, its sessions kept in `file` when there is one.
#[derive(Default)]
pub struct OwnerSessions {
    table: Mutex<SessionTable>,
    file: Option<PathBuf>,
    /// The owner asked (with a session and its CSRF token) for the service to restart;
    /// approvald's control loop tells the supervisor.
    restart: tokio::sync::Notify,
}

impl OwnerSessions {
    pub fn new() -> Self {
        Self::default()
    }

    /// The table with the sessions kept in `file` (approvald's [`WEB_SESSIONS`]) read
    /// back: those not yet expired. A file that cannot be read, or is not approvald's
    /// own private file, starts no session (and is replaced at the next login).
    pub fn kept_in(file: PathBuf) -> Self {
        let sessions = Self {
            file: Some(file),
            ..Self::default()
        };
        if let Some(path) = &sessions.file {
            match kept::read(path) {
                Ok(kept) => {
                    let now = Instant::now();
                    let mut table = sessions.table();
                    table.import(&kept, now);
                    let live = table.sessions(now);
                    if live > 0 {
                        tracing::info!(
                            sessions = live,
                            "Web console sessions kept across the restart"
                        );
                    }
                }
                Err(e) => tracing::warn!(error = %e, "Web console sessions not read back"),
            }
        }
        sessions
    }

    fn table(&self) -> MutexGuard<'_, SessionTable> {
        // Every method leaves the table consistent; a panic elsewhere cannot tear it.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write the live sessions to the file (under the table's lock, so writes keep the
    /// order of the changes). A failed write is logged: the sessions still work until
    /// the next restart.
    fn keep(&self, table: &mut SessionTable) {
        let Some(path) = &self.file else {
            return;
        };
        if let Err(e) = kept::write(path, &table.export(Instant::now())) {
            tracing::warn!(error = %e, "Web console sessions could not be kept for a restart");
        }
    }

    pub fn issue_code(&self) -> Result<Secret, RandomError> {
        self.table().issue_code(Instant::now())
    }

    pub fn redeem(&self, code: &Secret) -> Result<LoggedIn, RedeemError> {
        let mut table = self.table();
        let login = table.redeem(code, Instant::now())?;
        self.keep(&mut table);
        Ok(login)
    }

    pub fn check(&self, proof: &OwnerProof, needs_csrf: bool) -> Result<Duration, Refused> {
        self.table().check(proof, needs_csrf, Instant::now())
    }

    pub fn logout(&self, proof: &OwnerProof) -> Result<(), Refused> {
        let mut table = self.table();
        table.logout(proof, Instant::now())?;
        self.keep(&mut table);
        Ok(())
    }

    pub fn logout_all(&self) -> u64 {
        let mut table = self.table();
        let ended = table.logout_all(Instant::now());
        self.keep(&mut table);
        ended
    }

    pub fn sessions(&self) -> usize {
        self.table().sessions(Instant::now())
    }

    /// The owner's console asked for a restart (its session checked).
    pub fn request_restart(&self) {
        self.restart.notify_one();
    }

    /// Resolves once the owner has asked for a restart.
    pub async fn restart_requested(&self) {
        self.restart.notified().await;
    }
}

/// The file of kept sessions: `{"sessions": [{"sha256": HEX, "expires_at_ms": MS}]}`,
/// wall-clock expiry (tokio's clock starts anew with each process).
mod kept {
    use super::*;
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

    /// Far more than [`MAX_WEB_SESSIONS`] entries take.
    const MAX_FILE_BYTES: u64 = 64 * 1024;

    #[derive(Serialize, Deserialize)]
    struct File {
        sessions: Vec<Entry>,
    }

    #[derive(Serialize, Deserialize)]
    struct Entry {
        sha256: String,
        expires_at_ms: i64,
    }

    pub fn write(path: &Path, live: &[(Hash, Duration)]) -> std::io::Result<()> {
        let now = nl2sh_proto::clock::now_unix_ms();
        let file = File {
            sessions: live
                .iter()
                .map(|(hash, left)| Entry {
                    sha256: hex::encode(hash),
                    expires_at_ms: now
                        .saturating_add(i64::try_from(left.as_millis()).unwrap_or(i64::MAX)),
                })
                .collect(),
        };
        let text = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        nl2sh_proto::private_file::replace(path, &text, nl2sh_proto::private_file::Owner::Writer)
    }

    /// The sessions in the file with the time each has left; none when there is no file.
    /// Only a plain file of this uid that no one else may read or write counts.
    pub fn read(path: &Path) -> std::io::Result<Vec<(Hash, Duration)>> {
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if !meta.is_file()
            || meta.uid() != nix::unistd::geteuid().as_raw()
            || meta.mode() & 0o077 != 0
        {
            return Err(std::io::Error::other(format!(
                "{} is not approvald's own private file",
                path.display()
            )));
        }
        let mut text = Vec::new();
        (&mut file).take(MAX_FILE_BYTES).read_to_end(&mut text)?;
        let parsed: File = serde_json::from_slice(&text).map_err(std::io::Error::other)?;
        let now = nl2sh_proto::clock::now_unix_ms();
        Ok(parsed
            .sessions
            .iter()
            .take(MAX_WEB_SESSIONS)
            .filter_map(|e| {
                let hash: Hash = hex::decode(&e.sha256).ok()?.try_into().ok()?;
                let left = u64::try_from(e.expires_at_ms.checked_sub(now)?).ok()?;
                Some((hash, Duration::from_millis(left)))
            })
            .collect())
    }
}

/// Whole seconds left, rounded up (a session with 0.4 s left is not over).
pub fn seconds_ceil(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof(session: &Secret, csrf: Option<Secret>) -> OwnerProof {
        OwnerProof {
            session: session.clone(),
            csrf,
        }
    }

    fn with_csrf(session: &Secret) -> OwnerProof {
        proof(session, Some(csrf_for(session)))
    }

    fn login(t: &mut SessionTable, now: Instant) -> LoggedIn {
        let code = t.issue_code(now).unwrap();
        t.redeem(&code, now).unwrap()
    }

    fn refused(r: Result<LoggedIn, RedeemError>) -> Refused {
        match r {
            Err(RedeemError::Refused(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn codes_and_sessions_are_64_hex_characters_and_only_hashes_are_kept() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let code = t.issue_code(now).unwrap();
        assert_eq!(code.expose().len(), SECRET_CHARS);
        assert!(code
            .expose()
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert!(t.codes.entries.iter().all(|e| e.hash == hash(&code)));
        let session = t.redeem(&code, now).unwrap();
        assert_eq!(session.session.expose().len(), SECRET_CHARS);
        assert_ne!(session.session, code);
        assert_eq!(session.csrf, csrf_for(&session.session));
        assert_eq!(session.expires_in, WEB_SESSION_TTL);
        assert_eq!(t.sessions.entries[0].hash, hash(&session.session));
    }

    #[test]
    fn a_code_is_used_once() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let code = t.issue_code(now).unwrap();
        assert!(t.redeem(&code, now).is_ok());
        assert_eq!(refused(t.redeem(&code, now)), Refused::BadCode);
        assert_eq!(Refused::BadCode.kind(), OwnerErrorKind::NotLoggedIn);
    }

    #[test]
    fn a_code_expires() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let code = t.issue_code(now).unwrap();
        let later = now + WEB_LOGIN_CODE_TTL;
        assert_eq!(refused(t.redeem(&code, later)), Refused::BadCode);
        let code = t.issue_code(now).unwrap();
        assert!(t
            .redeem(&code, now + WEB_LOGIN_CODE_TTL - Duration::from_millis(1))
            .is_ok());
    }

    #[test]
    fn a_new_code_beyond_the_bound_ends_the_oldest() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let first = t.issue_code(now).unwrap();
        let rest: Vec<Secret> = (0..MAX_WEB_LOGIN_CODES)
            .map(|_| t.issue_code(now).unwrap())
            .collect();
        assert_eq!(t.codes(now), MAX_WEB_LOGIN_CODES);
        assert_eq!(refused(t.redeem(&first, now)), Refused::BadCode);
        for code in &rest {
            assert!(t.redeem(code, now).is_ok());
        }
    }

    #[test]
    fn a_new_session_beyond_the_bound_ends_the_oldest() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let first = login(&mut t, now);
        let rest: Vec<LoggedIn> = (0..MAX_WEB_SESSIONS).map(|_| login(&mut t, now)).collect();
        assert_eq!(t.sessions(now), MAX_WEB_SESSIONS);
        assert_eq!(
            t.check(&with_csrf(&first.session), false, now),
            Err(Refused::NoSession)
        );
        for s in &rest {
            assert!(t.check(&with_csrf(&s.session), true, now).is_ok());
        }
    }

    #[test]
    fn a_session_lasts_its_time_from_the_login() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let s = login(&mut t, now);
        let p = proof(&s.session, None);
        assert_eq!(t.check(&p, false, now), Ok(WEB_SESSION_TTL));
        let hour = Duration::from_secs(3600);
        assert_eq!(t.check(&p, false, now + hour), Ok(WEB_SESSION_TTL - hour));
        // Use does not extend it.
        assert_eq!(
            t.check(&p, false, now + WEB_SESSION_TTL),
            Err(Refused::NoSession)
        );
        assert_eq!(Refused::NoSession.kind(), OwnerErrorKind::NotLoggedIn);
    }

    #[test]
    fn csrf_is_checked_when_given_and_required_for_changes() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let s = login(&mut t, now);
        let other = login(&mut t, now);
        // Reads may come without it…
        assert!(t.check(&proof(&s.session, None), false, now).is_ok());
        // …changes may not.
        assert_eq!(
            t.check(&proof(&s.session, None), true, now),
            Err(Refused::BadCsrf)
        );
        assert!(t.check(&with_csrf(&s.session), true, now).is_ok());
        // A token given must be this session's, also on a read.
        for wrong in [
            csrf_for(&other.session),
            Secret::new(String::new()),
            Secret::new(s.session.expose().to_string()),
        ] {
            for needs in [false, true] {
                assert_eq!(
                    t.check(&proof(&s.session, Some(wrong.clone())), needs, now),
                    Err(Refused::BadCsrf)
                );
            }
        }
        assert_eq!(Refused::BadCsrf.kind(), OwnerErrorKind::BadCsrf);
        // An unknown session is not logged in, whatever token it brings.
        let stranger = Secret::new("0".repeat(SECRET_CHARS));
        assert_eq!(
            t.check(&with_csrf(&stranger), true, now),
            Err(Refused::NoSession)
        );
        assert_eq!(
            t.check(&proof(&Secret::new("short".into()), None), false, now),
            Err(Refused::NoSession)
        );
    }

    #[test]
    fn logout_needs_csrf_and_ends_only_that_session() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let s = login(&mut t, now);
        let other = login(&mut t, now);
        assert_eq!(
            t.logout(&proof(&s.session, None), now),
            Err(Refused::BadCsrf)
        );
        assert!(t.check(&with_csrf(&s.session), true, now).is_ok());
        assert_eq!(t.logout(&with_csrf(&s.session), now), Ok(()));
        assert_eq!(
            t.check(&with_csrf(&s.session), false, now),
            Err(Refused::NoSession)
        );
        assert_eq!(
            t.logout(&with_csrf(&s.session), now),
            Err(Refused::NoSession)
        );
        assert!(t.check(&with_csrf(&other.session), true, now).is_ok());
    }

    #[test]
    fn logout_all_ends_every_session_and_code() {
        let mut t = SessionTable::new();
        let start = Instant::now();
        // An expired one is not counted.
        let old = login(&mut t, start);
        let now = start + WEB_SESSION_TTL;
        let a = login(&mut t, now);
        let b = login(&mut t, now);
        let code = t.issue_code(now).unwrap();
        assert_eq!(t.logout_all(now), 2);
        for s in [&a, &b, &old] {
            assert_eq!(
                t.check(&with_csrf(&s.session), false, now),
                Err(Refused::NoSession)
            );
        }
        assert_eq!(refused(t.redeem(&code, now)), Refused::BadCode);
        assert_eq!(t.logout_all(now), 0);
    }

    #[test]
    fn failed_logins_past_the_limit_are_refused_until_the_window_passes_but_not_the_owner() {
        let mut t = SessionTable::new();
        let start = Instant::now();
        let code = t.issue_code(start).unwrap();
        let wrong = Secret::new("f".repeat(SECRET_CHARS));
        for i in 0..MAX_WEB_LOGIN_FAILURES {
            let at = start + Duration::from_secs(u64::from(i));
            assert_eq!(
                refused(t.redeem(&wrong, at)),
                Refused::BadCode,
                "attempt {i}"
            );
        }
        // Past the limit wrong codes are refused as rate-limited; the owner's right code
        // still works (a flood must not lock the owner out).
        let soon = start + Duration::from_secs(30);
        assert_eq!(refused(t.redeem(&wrong, soon)), Refused::RateLimited);
        assert_eq!(Refused::RateLimited.kind(), OwnerErrorKind::RateLimited);
        assert!(t.redeem(&code, soon).is_ok());
        // Once the window has passed, a wrong code is a plain failure again.
        let after = start + WEB_LOGIN_FAILURE_WINDOW;
        // The count starts again.
        let code = t.issue_code(after).unwrap();
        assert_eq!(
            refused(t.redeem(&Secret::new("x".into()), after)),
            Refused::BadCode
        );
        assert!(t.redeem(&code, after).is_ok());
    }

    #[test]
    fn fewer_failures_than_the_limit_refuse_nothing() {
        let mut t = SessionTable::new();
        let now = Instant::now();
        let wrong = Secret::new("0".repeat(SECRET_CHARS));
        for _ in 1..MAX_WEB_LOGIN_FAILURES {
            assert_eq!(refused(t.redeem(&wrong, now)), Refused::BadCode);
        }
        let code = t.issue_code(now).unwrap();
        assert!(t.redeem(&code, now).is_ok());
    }

    #[test]
    fn sessions_outlive_a_restart_as_hashes_and_logouts_do_too() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("web-sessions.json");
        let before = OwnerSessions::kept_in(file.clone());
        let code = before.issue_code().unwrap();
        let kept = before.redeem(&code).unwrap();
        let code = before.issue_code().unwrap();
        let ended = before.redeem(&code).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains(kept.session.expose()),
            "a session's secret: {text}"
        );
        assert!(text.contains(&hex::encode(hash(&kept.session))), "{text}");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        before.logout(&with_csrf(&ended.session)).unwrap();
        // The restarted approvald: the session goes on, for the time it had left; the one
        // logged out stays out; a code does not survive.
        let after = OwnerSessions::kept_in(file.clone());
        let left = after.check(&with_csrf(&kept.session), true).unwrap();
        assert!(left <= WEB_SESSION_TTL && left > WEB_SESSION_TTL - Duration::from_secs(60));
        assert_eq!(
            after.check(&with_csrf(&ended.session), false),
            Err(Refused::NoSession)
        );
        assert_eq!(after.sessions(), 1);
        // `web logout --all` ends them for good.
        assert_eq!(after.logout_all(), 1);
        let again = OwnerSessions::kept_in(file.clone());
        assert_eq!(again.sessions(), 0);
    }

    #[test]
    fn a_kept_file_that_is_not_approvalds_own_or_is_expired_starts_no_session() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("web-sessions.json");
        let planted = Secret::new("ab".repeat(32));
        let entry = |expires: i64| {
            format!(
                r#"{{"sessions":[{{"sha256":"{}","expires_at_ms":{expires}}}]}}"#,
                hex::encode(hash(&planted))
            )
        };
        let soon = nl2sh_proto::clock::now_unix_ms() + 60_000;
        // Readable by others: not ours to trust.
        std::fs::write(&file, entry(soon)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(OwnerSessions::kept_in(file.clone()).sessions(), 0);
        // Private, but expired, or malformed.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&file, entry(soon - 120_000)).unwrap();
        assert_eq!(OwnerSessions::kept_in(file.clone()).sessions(), 0);
        std::fs::write(&file, "{not json").unwrap();
        assert_eq!(OwnerSessions::kept_in(file.clone()).sessions(), 0);
        // Far in the future (a clock set back): no longer than a session lasts.
        std::fs::write(&file, entry(soon + 100 * 3_600_000)).unwrap();
        let sessions = OwnerSessions::kept_in(file.clone());
        assert!(sessions.check(&with_csrf(&planted), false).unwrap() <= WEB_SESSION_TTL);
        // A symlink is not followed.
        std::fs::remove_file(&file).unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::write(&target, entry(soon)).unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert_eq!(OwnerSessions::kept_in(file).sessions(), 0);
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(seconds_ceil(Duration::from_millis(1)), 1);
        assert_eq!(seconds_ceil(Duration::from_secs(12 * 3600)), 43_200);
        assert_eq!(seconds_ceil(Duration::ZERO), 0);
    }
}
