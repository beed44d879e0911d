//! Resource locks: the screen (one UiAutomation client at a time) and paths being
//! written. Waits are bounded; a busy resource is an error, not an endless wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::tools::Resource;

#[derive(Default)]
pub struct Locks {
    table: Mutex<HashMap<Resource, Arc<AsyncMutex<()>>>>,
}

/// Held resources; released on drop.
pub struct Held {
    _guards: Vec<OwnedMutexGuard<()>>,
}

impl Locks {
    /// Take every resource, in a fixed order (no deadlock between two calls that want
    /// the same pair), each within `wait`.
    pub async fn acquire(&self, mut wanted: Vec<Resource>, wait: Duration) -> Result<Held, String> {
        wanted.sort();
        wanted.dedup();
        let mut guards = Vec::with_capacity(wanted.len());
        for r in wanted {
            let m = {
                let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
                // Drop entries nobody holds, so the table does not grow without bound.
                t.retain(|_, m| Arc::strong_count(m) > 1);
                t.entry(r.clone()).or_default().clone()
            };
            match tokio::time::timeout(wait, m.lock_owned()).await {
                Ok(g) => guards.push(g),
                Err(_) => {
                    return Err(format!(
                        "{} is busy with another call (waited {}s)",
                        r.describe(),
                        wait.as_secs()
                    ))
                }
            }
        }
        Ok(Held { _guards: guards })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_busy_resource_times_out_and_a_free_one_does_not() {
        let locks = Locks::default();
        let held = locks
            .acquire(vec![Resource::Screen], Duration::from_secs(1))
            .await
            .unwrap();
        let err = locks
            .acquire(vec![Resource::Screen], Duration::from_secs(1))
            .await
            .err()
            .unwrap();
        assert!(err.contains("screen is busy"), "{err}");
        locks
            .acquire(
                vec![Resource::Path("/tmp/a".into())],
                Duration::from_secs(1),
            )
            .await
            .unwrap();
        drop(held);
        locks
            .acquire(vec![Resource::Screen], Duration::from_secs(1))
            .await
            .unwrap();
    }
}
