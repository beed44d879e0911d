//! Stopping the tree: every worker drained in order within the grace, then ended.

use std::time::Duration;

use nl2sh_proto::channels::{ControlRequest, ControlResponse, FromWorker};
use nl2sh_proto::frame::write_frame;
use nl2sh_proto::limits::SHUTDOWN_GRACE;

use crate::spawn::kill_all;

use super::tree::{Running, DRAIN_ID};

/// netd first (it stops accepting and lets requests settle), then the others.
pub(super) async fn drain(running: &mut Running) {
    let grace = SHUTDOWN_GRACE;
    for role in nl2sh_proto::topology::Worker::ALL.map(|w| w.role()) {
        let Some(i) = running.workers.iter().position(|w| w.role == role) else {
            continue;
        };
        let req = ControlRequest::Drain {
            grace_ms: grace.as_millis() as u64,
        };
        if write_frame(&mut running.writers[i], DRAIN_ID, &req)
            .await
            .is_err()
        {
            continue;
        }
        let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(2);
        loop {
            match tokio::time::timeout_at(deadline, running.events.recv()).await {
                Ok(Some((j, Ok(FromWorker::Answer(ControlResponse::Drained))))) if j == i => break,
                Ok(Some((j, Err(_)))) if j == i => break,
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    tracing::warn!(worker = role.as_str(), "did not drain in time");
                    break;
                }
            }
        }
    }
    // Workers exit after answering Drained; give them a moment, then make sure.
    for w in running.workers.iter_mut() {
        let _ = wait_briefly(&mut w.child).await;
    }
    kill_all(&mut running.workers);
}

/// Wait up to a second for a child whose channel closed; its status (it is killed if it
/// lingers).
pub(super) async fn wait_briefly(child: &mut std::process::Child) -> std::process::ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    for _ in 0..50 {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(_) => break,
        }
    }
    // Its channel closed but it lingers: it is misbehaving; end it.
    let _ = child.kill();
    child
        .wait()
        .unwrap_or_else(|_| std::process::ExitStatus::from_raw(libc::SIGKILL))
}
