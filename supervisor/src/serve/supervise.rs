//! Supervising a running set: wait for a stop request or a worker's end; on an end, end
//! the rest of the set, say what happened, and restart it (see `restart`).

use std::process::ExitCode;
use std::time::Duration;

use nl2sh_proto::channels::{FromWorker, WorkerEvent};
use nl2sh_proto::handshake::Role;

use crate::spawn::kill_all;

use super::drain::{drain, wait_briefly};
use super::restart::{Restart, CRASH_WINDOW};
use super::signals::StopSignals;
use super::tree::Running;
use super::ServeError;

/// How long netd may take, once a peer died, to answer the requests it has in flight
/// (with errors) before the old workers are ended.
const PEER_DEATH_GRACE: Duration = Duration::from_secs(3);

/// Wait for SIGINT/SIGTERM (drain, stop, exit 0) or a worker's end. A worker's death ends
/// its channels and itself, not the service: the whole worker set is restarted on the same
/// listener with the same token (see [`restart_set`]), until deaths come too fast (a crash
/// loop: stop, exit 1). In stdio mode netd's `SessionEnded` event (stdin closed) ends the
/// session cleanly, and a death stops the process (its client starts it again).
pub(super) async fn supervise(
    running: &mut Running,
    signals: &mut StopSignals,
    restart: &mut Restart,
) -> ExitCode {
    loop {
        let first = tokio::select! {
            () = signals.recv() => None,
            ev = running.events.recv() => Some(ev),
        };
        let Some(event) = first else {
            tracing::info!("stopping: draining in-flight requests");
            drain(running).await;
            return ExitCode::SUCCESS;
        };
        if let Some((i, Ok(FromWorker::Event(WorkerEvent::RestartRequested)))) = &event {
            restart_requested(running, restart, *i);
            continue;
        }
        // One death usually ends its peers' channels too; let them settle, then report
        // every worker that ended, the one killed by a signal first, so the message names
        // the cause rather than whoever noticed first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut events = vec![event];
        while let Ok(ev) = running.events.try_recv() {
            events.push(Some(ev));
        }
        let netd = running.workers.iter().position(|w| w.role == Role::Netd);
        let session_over = events.iter().flatten().any(|(i, r)| {
            Some(*i) == netd && matches!(r, Ok(FromWorker::Event(WorkerEvent::SessionEnded)))
        });
        if restart.stdio && session_over {
            tracing::info!("stdin closed; stopping");
            drain(running).await;
            return ExitCode::SUCCESS;
        }
        let first = events
            .first()
            .and_then(Option::as_ref)
            .map_or(0, |(i, _)| *i);
        let first_role = running.workers.get(first).map(|w| w.role);
        let cause = end_workers(running, first).await;
        if first_role == Some(Role::Web) {
            restart.console_died(&cause);
        }
        if restart.stdio {
            tracing::error!(cause = %cause, "a worker ended; stopping (stdio)");
            return crate::exit::Exit::Failure.into();
        }
        if let Some(code) = restart_set(running, signals, restart, &cause).await {
            return code;
        }
    }
}

/// approvald passed on the owner's "Restart now" (it checked the session and its CSRF
/// token): `nl2sh --config X service restart` runs detached, stops this process as
/// `service stop` does (SIGTERM, drain) and starts the saved configuration. Heeded from
/// approvald alone, and only in the managed service.
fn restart_requested(running: &Running, restart: &mut Restart, from: usize) {
    let role = running.workers.get(from).map(|w| w.role);
    if let Err(why) = restart_heeded(role, &restart.info.transport) {
        tracing::warn!(?role, "a restart request {why}; ignored");
        return;
    }
    let config = std::path::Path::new(&restart.info.config_path);
    match crate::service::restart_in_background(config) {
        Ok(pid) => {
            tracing::info!(pid, "restarting the service as its owner asked");
            restart.spared.push(pid);
        }
        Err(e) => tracing::error!(error = %e, "cannot run `service restart`"),
    }
}

/// Whether a restart request from a worker of `role` is heeded in a process of
/// `transport`: from approvald (which checked the owner's session and CSRF token), in
/// the managed service; never from netd, the executor or the Web console.
fn restart_heeded(role: Option<Role>, transport: &str) -> Result<(), &'static str> {
    if role != Some(Role::Approvald) {
        return Err("from a worker other than approvald");
    }
    if transport != crate::service::SERVICE_TRANSPORT {
        return Err("outside the managed service");
    }
    Ok(())
}

/// Start a new set in place of the one that ended (after `cause`), trying again after each
/// failed start. `Some(code)` when the service stops instead: a crash loop, or a stop
/// request during the backoff.
async fn restart_set(
    running: &mut Running,
    signals: &mut StopSignals,
    restart: &mut Restart,
    cause: &str,
) -> Option<ExitCode> {
    loop {
        if !restart.may_restart() {
            tracing::error!(
                deaths = restart.deaths.len(),
                window_secs = CRASH_WINDOW.as_secs(),
                last = %cause,
                "workers keep dying (a crash loop); stopping the service"
            );
            eprintln!(
                "nl2sh: stopping: {} worker deaths within {}s (last: {cause})",
                restart.deaths.len(),
                CRASH_WINDOW.as_secs()
            );
            restart.failed(cause);
            return Some(crate::exit::Exit::Failure.into());
        }
        let wait = restart.backoff();
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = signals.recv() => {
                tracing::info!("stopping while restarting workers");
                return Some(ExitCode::SUCCESS);
            }
        }
        match restart.start().await {
            Ok(new) => {
                *running = new;
                restart.started(running, cause);
                tracing::warn!(
                    restarts = restart.info.restarts,
                    cause = %cause,
                    "workers restarted on the same listener"
                );
                return None;
            }
            Err(e) => {
                let console = matches!(e, ServeError::ConsoleDiedStarting(_));
                tracing::error!(error = %e, console_died = console, "restarting the workers failed");
                if let ServeError::ConsoleDiedStarting(why) = &e {
                    restart.console_died(why);
                }
            }
        }
    }
}

/// A worker ended: let netd answer what it has in flight (its peer channel is gone, so
/// with errors), end the rest of the set, and say what happened. Returns the cause.
async fn end_workers(running: &mut Running, first: usize) -> String {
    use std::os::unix::process::ExitStatusExt;
    let mut ended = Vec::new();
    for (i, w) in running.workers.iter_mut().enumerate() {
        let status = if i == first {
            Some(wait_briefly(&mut w.child).await)
        } else {
            w.child.try_wait().ok().flatten()
        };
        if let Some(status) = status {
            ended.push((w.role, w.child.id(), status));
        }
    }
    ended.sort_by_key(|(_, _, status)| status.signal().is_none());
    for (role, pid, status) in &ended {
        let status = describe(*status);
        tracing::error!(worker = role.as_str(), pid, status = %status, "worker exited unexpectedly");
        eprintln!(
            "nl2sh: worker {} (pid {pid}) exited unexpectedly: {status}",
            role.as_str()
        );
    }
    let cause = ended.first().map_or_else(
        || "a worker's channel ended".to_string(),
        |(role, pid, status)| format!("{} (pid {pid}) {}", role.as_str(), describe(*status)),
    );
    // netd, if alive, stops accepting and answers its in-flight requests once its peer
    // channel ends; give it that long. The Web console is no peer of netd's: when only it
    // died, netd would never end on its own, and waiting would only lengthen the outage.
    let netd_peer_died = ended.iter().any(|(role, _, _)| *role != Role::Web);
    if let Some(netd) = running
        .workers
        .iter_mut()
        .find(|w| w.role == Role::Netd && netd_peer_died)
    {
        let deadline = std::time::Instant::now() + PEER_DEATH_GRACE;
        while std::time::Instant::now() < deadline {
            match netd.child.try_wait() {
                Ok(None) => tokio::time::sleep(Duration::from_millis(10)).await,
                _ => break,
            }
        }
    }
    kill_all(&mut running.workers);
    // What the old set left running (a killed executor's commands come back to us, the
    // subreaper) ends with it: nothing of the old tree outlives a restart.
    let left = crate::orphans::kill_all(&[]);
    if left > 0 {
        tracing::info!(
            processes = left,
            "ended processes the old workers left behind"
        );
    }
    cause
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_approvald_restarts_and_only_the_managed_service() {
        assert!(restart_heeded(Some(Role::Approvald), "service").is_ok());
        for role in [Role::Netd, Role::Executor, Role::Web] {
            assert!(restart_heeded(Some(role), "service").is_err(), "{role:?}");
        }
        assert!(restart_heeded(None, "service").is_err());
        for transport in ["http", "stdio", "console"] {
            assert!(restart_heeded(Some(Role::Approvald), transport).is_err());
        }
    }
}
