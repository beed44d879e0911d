//! Approvals waiting for a person at the device.
//!
//! A pending entry is created by a decision that found nothing else to settle it. It is
//! settled exactly once, under one lock, by whichever comes first: `approve` (with the
//! exact phrase when one is bound), `reject`, the executor's `withdraw`, expiry, or
//! approvald stopping. Only `approve` before the expiry instant approves; everything else,
//! including a dropped waiter, settles to something that does not run.
//!
//! Times are `tokio::time::Instant`, so tests can pause the clock.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use nl2sh_proto::channels::{
    ActionSummary, ApprovalId, ApprovalWait, CallId, CallOrigin, CliErrorKind, Decision,
    PendingApproval, RiskLevel,
};
use nl2sh_proto::ids::{random_bytes, RandomError};
use nl2sh_proto::limits::{MAX_PENDING_APPROVALS, MAX_PENDING_APPROVALS_PER_CALLER};

/// Characters of a request id: lowercase RFC 4648 base32.
const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Length of a request id (30 random bits).
pub const ID_LEN: usize = 6;
/// Settled requests remembered so a late `approve` can say what became of them.
pub const MAX_RECENT: usize = 64;
/// How long a settled request is remembered.
pub const RECENT_FOR: Duration = Duration::from_secs(60);
/// Withdrawals of calls not (yet) seen, remembered so the decision that arrives right
/// after is withdrawn too.
const MAX_EARLY_WITHDRAWALS: usize = 64;
const EARLY_WITHDRAWAL_FOR: Duration = Duration::from_secs(30);
/// Longest id or phrase text looked at.
const MAX_CLI_TEXT: usize = 256;

/// How a pending request was settled, with a reason a user can read.
pub type Settled = (Decision, String);

/// Where the owner decided a request: recorded in the decision's reason (the audit has
/// no column of its own for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// `nl2sh protocol approve/reject` in a terminal at the device.
    Cli,
    /// The Web console, in a logged-in owner's browser.
    Web,
}

impl Decider {
    /// How a reason says where: "approved {where_}".
    pub fn where_(self) -> &'static str {
        match self {
            Decider::Cli => "at the device",
            Decider::Web => "in the Web console",
        }
    }
}

pub fn refused_full_reason() -> String {
    format!(
        "needs local approval, but {MAX_PENDING_APPROVALS} approvals are already pending; \
         decide or let them expire first"
    )
}

/// Who shares a quota of pending approvals: a way in, not a session or a task, since a
/// caller opens new ones at will; and direct and delegated calls of one way in count
/// together, since the same caller makes both (docs/APPROVALS.md, "How the slots are
/// shared").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// The owner's own sessions: the reserved slots, and any free one.
    Owner,
    /// Everyone holding the token, over HTTP (`mcp_http`, `agent_http`).
    Http,
    /// The local stdio client (`mcp_stdio`, `agent_stdio`).
    Stdio,
}

impl Caller {
    fn of(origin: CallOrigin) -> Caller {
        match origin {
            CallOrigin::OwnerTui => Caller::Owner,
            CallOrigin::McpHttp | CallOrigin::AgentHttp => Caller::Http,
            CallOrigin::McpStdio | CallOrigin::AgentStdio => Caller::Stdio,
        }
    }

    fn who(self) -> &'static str {
        match self {
            Caller::Owner => "the owner's console",
            Caller::Http => "callers over HTTP (mcp_http and agent_http together)",
            Caller::Stdio => "stdio clients (mcp_stdio and agent_stdio together)",
        }
    }
}

/// Refused: the caller's own share is full, while others may still have room.
pub fn refused_share_reason(origin: CallOrigin) -> String {
    format!(
        "needs local approval, but {who} already hold {MAX_PENDING_APPROVALS_PER_CALLER} of \
         the {MAX_PENDING_APPROVALS} pending approvals, their share (the rest are for other \
         callers and the device owner); decide or let them expire first",
        who = Caller::of(origin).who()
    )
}

/// The phrase `approve` must be given for `risk`, when one is needed.
pub fn phrase_for(risk: RiskLevel, id: &str) -> Option<String> {
    (risk >= RiskLevel::Dangerous).then(|| format!("approve {} {id}", risk.as_str()))
}

struct Entry {
    id: String,
    seq: u64,
    summary: ActionSummary,
    phrase: Option<String>,
    timeout: Duration,
    expires: Instant,
    settle: oneshot::Sender<Settled>,
}

impl Entry {
    /// The request as the owner's listings show it, with the seconds left at `now`.
    fn shown(&self, now: Instant) -> PendingApproval {
        PendingApproval {
            id: ApprovalId(self.id.clone()),
            call_id: self.summary.call_id,
            origin: self.summary.origin,
            task: self.summary.task.clone(),
            after_reading: self.summary.after_reading.clone(),
            client: self.summary.client.clone(),
            // Read from the task store when listed (`owner::pending`).
            goal: None,
            sent: self.summary.sent.clone(),
            tool: self.summary.tool.clone(),
            action: self.summary.action.clone(),
            risk: self.summary.risk,
            requires_root: self.summary.requires_root,
            identity: self.summary.identity,
            reasons: self.summary.reasons.clone(),
            seconds_left: seconds_ceil(self.expires.saturating_duration_since(now)),
            phrase: self.phrase.clone(),
            data: self.summary.data.clone(),
            ui_app: crate::ui_grants::grantable(&self.summary)
                .ok()
                .map(str::to_string),
        }
    }
}

struct Gone {
    id: String,
    at: Instant,
    decision: Decision,
}

#[derive(Default)]
struct State {
    next_seq: u64,
    pending: Vec<Entry>,
    /// Calls whose decision is in progress (by call id), and whether they were withdrawn
    /// before reaching the pending stage.
    deciding: HashMap<CallId, bool>,
    recent: VecDeque<Gone>,
    early_withdrawals: VecDeque<(CallId, Instant)>,
    stopping: bool,
}

impl State {
    fn forget_old(&mut self, now: Instant) {
        while self
            .recent
            .front()
            .is_some_and(|g| now.duration_since(g.at) >= RECENT_FOR)
        {
            self.recent.pop_front();
        }
        while self
            .early_withdrawals
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) >= EARLY_WITHDRAWAL_FOR)
        {
            self.early_withdrawals.pop_front();
        }
    }

    /// Remove pending entry `index` and settle it; remembers its id.
    fn settle(&mut self, index: usize, decision: Decision, reason: String, now: Instant) {
        let entry = self.pending.remove(index);
        if self.recent.len() >= MAX_RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(Gone {
            id: entry.id,
            at: now,
            decision,
        });
        // The waiter may be gone (its future dropped); then nothing runs anyway.
        let _ = entry.settle.send((decision, reason));
    }

    /// Why a request from `origin` finds no slot now, if it does not. The owner may take
    /// any free slot; a protocol caller only one outside the owner's reserve, and at most
    /// its share of those.
    fn no_room_for(&self, origin: CallOrigin) -> Option<String> {
        let caller = Caller::of(origin);
        if caller != Caller::Owner {
            let held = |c: Caller| {
                self.pending
                    .iter()
                    .filter(|e| Caller::of(e.summary.origin) == c)
                    .count()
            };
            // The shares together leave the owner's reserve free (checked where the
            // limits are defined), so a full share is the only other bound.
            if held(caller) >= MAX_PENDING_APPROVALS_PER_CALLER {
                return Some(refused_share_reason(origin));
            }
        }
        (self.pending.len() >= MAX_PENDING_APPROVALS).then(refused_full_reason)
    }

    fn id_taken(&self, id: &str) -> bool {
        self.pending.iter().any(|e| e.id == id) || self.recent.iter().any(|g| g.id == id)
    }
}

/// Why `open` did not create a pending entry.
#[derive(Debug)]
pub enum NotOpened {
    /// Settled at once (queue full, withdrawn already, stopping, no randomness).
    Settled(Settled),
}

/// A CLI failure: its kind and a message for the person.
pub type CliError = (CliErrorKind, String);

pub struct Approvals {
    state: Mutex<State>,
    /// Number of decisions in progress; stopping waits for it to reach zero.
    deciding_count: watch::Sender<usize>,
}

impl Default for Approvals {
    fn default() -> Self {
        Self::new()
    }
}

impl Approvals {
    pub fn new() -> Self {
        Approvals {
            state: Mutex::new(State::default()),
            deciding_count: watch::Sender::new(0),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every statement leaves the state consistent; a panic elsewhere cannot tear it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mark `call_id` as being decided until the guard is dropped. `None` when a decision
    /// for that call is already in progress.
    pub fn begin(&self, call_id: CallId) -> Option<Deciding<'_>> {
        let mut st = self.state();
        if st.deciding.contains_key(&call_id) {
            return None;
        }
        let now = Instant::now();
        st.forget_old(now);
        let early = st
            .early_withdrawals
            .iter()
            .position(|(id, _)| *id == call_id);
        if let Some(i) = early {
            st.early_withdrawals.remove(i);
        }
        st.deciding.insert(call_id, early.is_some());
        let n = st.deciding.len();
        drop(st);
        self.deciding_count.send_replace(n);
        Some(Deciding {
            approvals: self,
            call_id,
        })
    }

    /// Create a pending request for `summary`, waiting at most `timeout`. The caller
    /// holds the [`Deciding`] guard of the same call.
    pub fn open(&self, summary: ActionSummary, timeout: Duration) -> Result<Ticket<'_>, NotOpened> {
        let mut st = self.state();
        let now = Instant::now();
        st.forget_old(now);
        let call_id = summary.call_id;
        if st.stopping {
            return Err(NotOpened::Settled(stopping()));
        }
        if st.deciding.get(&call_id).copied().unwrap_or(false) {
            return Err(NotOpened::Settled((
                Decision::Withdrawn,
                "the call was cancelled before its approval was requested".into(),
            )));
        }
        if let Some(reason) = st.no_room_for(summary.origin) {
            // Each refusal is an audit row of its own; a caller looping into a full share
            // must not also fill the log.
            tracing::debug!(%call_id, origin = summary.origin.as_str(), "approval refused: no room");
            return Err(NotOpened::Settled((Decision::Refused, reason)));
        }
        let mut id = None;
        for _ in 0..16 {
            match random_id() {
                Ok(candidate) if !st.id_taken(&candidate) => {
                    id = Some(candidate);
                    break;
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "no randomness for a request id");
                    break;
                }
            }
        }
        let Some(id) = id else {
            return Err(NotOpened::Settled((
                Decision::Refused,
                "needs local approval, but no request id could be made".into(),
            )));
        };
        let (settle, settled) = oneshot::channel();
        let seq = st.next_seq;
        st.next_seq += 1;
        let expires = now + timeout;
        st.pending.push(Entry {
            id: id.clone(),
            seq,
            phrase: phrase_for(summary.risk, &id),
            summary,
            timeout,
            expires,
            settle,
        });
        tracing::info!(id = %id, %call_id, secs = timeout.as_secs(), "approval pending");
        Ok(Ticket {
            approvals: self,
            id,
            timeout,
            expires,
            settled,
        })
    }

    /// The pending requests, oldest first, with the seconds left now.
    /// The pending request of `call_id` (its id and time left), unless it expired.
    pub fn waiting(&self, call_id: CallId) -> Option<ApprovalWait> {
        let st = self.state();
        let now = Instant::now();
        st.pending
            .iter()
            .find(|e| e.summary.call_id == call_id && e.expires > now)
            .map(|e| ApprovalWait {
                id: ApprovalId(e.id.clone()),
                seconds_left: seconds_ceil(e.expires.saturating_duration_since(now)),
            })
    }

    pub fn list(&self) -> Vec<PendingApproval> {
        let mut st = self.state();
        let now = Instant::now();
        st.forget_old(now);
        let mut entries: Vec<&Entry> = st.pending.iter().filter(|e| e.expires > now).collect();
        entries.sort_by_key(|e| e.seq);
        entries.into_iter().map(|e| e.shown(now)).collect()
    }

    /// Approve request `id`, decided `by`. A bound phrase must be given exactly; a
    /// missing or wrong one leaves the request pending.
    pub fn approve(&self, id: &str, phrase: Option<&str>, by: Decider) -> Result<(), CliError> {
        self.approve_with(id, phrase, by, |_| Ok(String::new()))
    }

    /// [`Approvals::approve`], with `then` run on the request once it may be approved and
    /// before it is settled: its error leaves the request pending; its words end the
    /// recorded reason.
    pub fn approve_with(
        &self,
        id: &str,
        phrase: Option<&str>,
        by: Decider,
        then: impl FnOnce(&ActionSummary) -> Result<String, CliError>,
    ) -> Result<(), CliError> {
        check_cli_text("request id", id)?;
        if let Some(p) = phrase {
            check_cli_text("phrase", p)?;
        }
        let mut st = self.state();
        let now = Instant::now();
        let index = find(&mut st, id, now)?;
        let entry = &st.pending[index];
        if let Some(required) = &entry.phrase {
            match phrase {
                None => {
                    return Err((
                        CliErrorKind::PhraseRequired,
                        format!(
                            "request {id} is {}: approve it with the exact phrase `{required}`",
                            entry.summary.risk.as_str()
                        ),
                    ))
                }
                Some(given) if given != required => {
                    return Err((
                        CliErrorKind::WrongPhrase,
                        format!(
                            "that is not the phrase for request {id}; it stays pending \
                             (the phrase is `{required}`)"
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        tracing::info!(
            id,
            call_id = %entry.summary.call_id,
            "approved {}",
            by.where_()
        );
        let more = then(&entry.summary)?;
        let reason = format!("approved {} (request {id}){more}", by.where_());
        st.settle(index, Decision::Approved, reason, now);
        Ok(())
    }

    /// Reject request `id`, decided `by`.
    pub fn reject(&self, id: &str, by: Decider) -> Result<(), CliError> {
        check_cli_text("request id", id)?;
        let mut st = self.state();
        let now = Instant::now();
        let index = find(&mut st, id, now)?;
        tracing::info!(
            id,
            call_id = %st.pending[index].summary.call_id,
            "rejected {}",
            by.where_()
        );
        let reason = format!(
            "needs local approval: rejected {} (request {id})",
            by.where_()
        );
        st.settle(index, Decision::Rejected, reason, now);
        Ok(())
    }

    /// Reject every pending request from `origin`, decided `by`: each settled on its own,
    /// so each is audited as its own rejection. Answers those rejected, oldest first, as
    /// they were shown just before; an expired one is settled as expired instead.
    pub fn reject_origin(&self, origin: CallOrigin, by: Decider) -> Vec<PendingApproval> {
        let mut st = self.state();
        let now = Instant::now();
        st.forget_old(now);
        let mut rejected = Vec::new();
        let mut index = 0;
        while index < st.pending.len() {
            let entry = &st.pending[index];
            if entry.summary.origin != origin {
                index += 1;
                continue;
            }
            let id = entry.id.clone();
            if entry.expires <= now {
                let timeout = entry.timeout;
                st.settle(index, Decision::Expired, expired_reason(&id, timeout), now);
                continue;
            }
            tracing::info!(
                id = %id,
                call_id = %entry.summary.call_id,
                origin = origin.as_str(),
                "rejected {} with every request of its origin",
                by.where_()
            );
            rejected.push((entry.seq, entry.shown(now)));
            let reason = format!(
                "needs local approval: rejected {}, with every request from {} (request {id})",
                by.where_(),
                origin.as_str()
            );
            st.settle(index, Decision::Rejected, reason, now);
        }
        rejected.sort_by_key(|(seq, _)| *seq);
        rejected.into_iter().map(|(_, shown)| shown).collect()
    }

    /// The executor cancelled `call_id`: settle its pending request as withdrawn, or make
    /// sure it is withdrawn as soon as it would become pending.
    pub fn withdraw(&self, call_id: CallId, already_decided: bool) {
        let mut st = self.state();
        let now = Instant::now();
        st.forget_old(now);
        if let Some(index) = st.pending.iter().position(|e| e.summary.call_id == call_id) {
            let id = st.pending[index].id.clone();
            tracing::info!(id = %id, %call_id, "pending approval withdrawn");
            let reason =
                format!("the call was cancelled while its approval was pending (request {id})");
            st.settle(index, Decision::Withdrawn, reason, now);
        } else if let Some(withdrawn) = st.deciding.get_mut(&call_id) {
            *withdrawn = true;
        } else if !already_decided {
            if st.early_withdrawals.len() >= MAX_EARLY_WITHDRAWALS {
                st.early_withdrawals.pop_front();
            }
            st.early_withdrawals.push_back((call_id, now));
        }
    }

    /// Settle every pending request as refused and refuse new ones; then wait (at most
    /// `grace`) until every decision in progress has been answered.
    pub async fn stop(&self, grace: Duration) {
        {
            let mut st = self.state();
            st.stopping = true;
            let now = Instant::now();
            while !st.pending.is_empty() {
                let (decision, reason) = stopping();
                st.settle(0, decision, reason, now);
            }
        }
        let mut count = self.deciding_count.subscribe();
        let _ = tokio::time::timeout(grace, count.wait_for(|n| *n == 0)).await;
    }

    /// Settle `id` as expired if it is still pending; otherwise what settled it.
    fn expire(&self, id: &str) {
        let mut st = self.state();
        let now = Instant::now();
        if let Some(index) = st.pending.iter().position(|e| e.id == id) {
            let timeout = st.pending[index].timeout;
            tracing::info!(id, "approval expired");
            st.settle(index, Decision::Expired, expired_reason(id, timeout), now);
        }
    }

    fn drop_pending(&self, id: &str) {
        let mut st = self.state();
        if let Some(index) = st.pending.iter().position(|e| e.id == id) {
            let now = Instant::now();
            let reason = "the decision was abandoned".to_string();
            st.settle(index, Decision::Withdrawn, reason, now);
        }
    }
}

fn stopping() -> Settled {
    (
        Decision::Refused,
        "needs local approval, but the service is stopping; nothing was approved".into(),
    )
}

fn expired_reason(id: &str, timeout: Duration) -> String {
    format!(
        "needs local approval: request {id} expired; nobody decided it within {} s",
        timeout.as_secs()
    )
}

fn seconds_ceil(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn check_cli_text(what: &str, text: &str) -> Result<(), CliError> {
    if text.len() > MAX_CLI_TEXT {
        return Err((
            CliErrorKind::InvalidRequest,
            format!("the {what} is longer than {MAX_CLI_TEXT} bytes"),
        ));
    }
    Ok(())
}

/// Index of pending request `id`; an expired one is settled as expired here, so nothing
/// is approved after its expiry instant even before its waiter wakes.
fn find(st: &mut State, id: &str, now: Instant) -> Result<usize, CliError> {
    st.forget_old(now);
    if let Some(index) = st.pending.iter().position(|e| e.id == id) {
        if st.pending[index].expires > now {
            return Ok(index);
        }
        let timeout = st.pending[index].timeout;
        st.settle(index, Decision::Expired, expired_reason(id, timeout), now);
    }
    match st.recent.iter().rev().find(|g| g.id == id) {
        Some(g) if g.decision == Decision::Expired => Err((
            CliErrorKind::Expired,
            format!("request {id} expired; nothing was approved"),
        )),
        Some(g) => Err((
            CliErrorKind::NoSuchRequest,
            format!(
                "request {id} is no longer pending (it was {})",
                g.decision.as_str()
            ),
        )),
        None => Err((
            CliErrorKind::NoSuchRequest,
            format!("no pending request {id}"),
        )),
    }
}

/// Six characters of lowercase base32 from the OS random source.
pub fn random_id() -> Result<String, RandomError> {
    let mut bits = u32::from_be_bytes(random_bytes::<4>()?);
    let mut id = String::with_capacity(ID_LEN);
    for _ in 0..ID_LEN {
        id.push(char::from(ID_ALPHABET[(bits & 31) as usize]));
        bits >>= 5;
    }
    Ok(id)
}

/// A decision in progress; dropping it ends it.
pub struct Deciding<'a> {
    approvals: &'a Approvals,
    call_id: CallId,
}

impl Drop for Deciding<'_> {
    fn drop(&mut self) {
        let mut st = self.approvals.state();
        st.deciding.remove(&self.call_id);
        let n = st.deciding.len();
        drop(st);
        self.approvals.deciding_count.send_replace(n);
    }
}

/// A pending request's waiter. Dropping it before it is settled withdraws the request,
/// so nothing stays approvable without someone waiting for the answer.
pub struct Ticket<'a> {
    approvals: &'a Approvals,
    id: String,
    timeout: Duration,
    expires: Instant,
    settled: oneshot::Receiver<Settled>,
}

impl Ticket<'_> {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Wait until the request is settled or expires.
    pub async fn wait(mut self) -> Settled {
        if let Ok(Ok(settled)) = tokio::time::timeout_at(self.expires, &mut self.settled).await {
            return settled;
        }
        // Expired (or the sender vanished): settle it as expired unless something settled
        // it first, under the same lock.
        self.approvals.expire(&self.id);
        match self.settled.try_recv() {
            Ok(settled) => settled,
            Err(_) => (Decision::Expired, expired_reason(&self.id, self.timeout)),
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.approvals.drop_pending(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_six_base32_characters() {
        for _ in 0..100 {
            let id = random_id().unwrap();
            assert_eq!(id.len(), ID_LEN);
            assert!(id.bytes().all(|b| ID_ALPHABET.contains(&b)), "{id}");
        }
    }

    #[test]
    fn phrases() {
        assert_eq!(
            phrase_for(RiskLevel::Critical, "k3f9qa").as_deref(),
            Some("approve critical k3f9qa")
        );
        assert_eq!(
            phrase_for(RiskLevel::Dangerous, "abcdef").as_deref(),
            Some("approve dangerous abcdef")
        );
        assert_eq!(phrase_for(RiskLevel::High, "abcdef"), None);
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(seconds_ceil(Duration::from_millis(4001)), 5);
        assert_eq!(seconds_ceil(Duration::from_secs(4)), 4);
        assert_eq!(seconds_ceil(Duration::ZERO), 0);
    }
}
