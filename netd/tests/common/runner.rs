//! A scripted stand-in for the built-in Agent, plugged into the task service through its
//! `Runner` seam. What it does is chosen by the task's text:
//!
//! * `block:NAME` — waits until the test calls [`Script::release`]`("NAME")`, or until
//!   the task's cancellation token fires (then it settles as CANCELED and says so in
//!   its events);
//! * `fail:…` — FAILED, with a result;
//! * anything else — COMPLETED at once, the answer echoing the text, the history grown
//!   by this turn.
//!
//! Every run leaves `start:TEXT` and `end:TEXT` (and `cancelled:TEXT`) in [`Script`]'s
//! event list, which tests can wait on.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nl2sh_netd::agent::{AgentEnd, AgentJob, AgentRun};
use nl2sh_netd::tasks::Runner;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub struct Script {
    events: watch::Sender<Vec<String>>,
    released: watch::Sender<HashSet<String>>,
    pub jobs: Mutex<Vec<AgentJob>>,
}

impl Script {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            events: watch::Sender::new(Vec::new()),
            released: watch::Sender::new(HashSet::new()),
            jobs: Mutex::new(Vec::new()),
        })
    }

    pub fn release(&self, name: &str) {
        self.released.send_modify(|r| {
            r.insert(name.to_string());
        });
    }

    pub fn events(&self) -> Vec<String> {
        self.events.borrow().clone()
    }

    /// Wait (at most 10 s) until `event` has happened.
    pub async fn wait_for(&self, event: &str) {
        let mut rx = self.events.subscribe();
        let seen = tokio::time::timeout(
            Duration::from_secs(10),
            rx.wait_for(|e| e.iter().any(|x| x == event)),
        )
        .await;
        assert!(
            matches!(seen, Ok(Ok(_))),
            "no {event:?} in {:?}",
            self.events()
        );
    }

    pub fn job(&self, text: &str) -> Option<AgentJob> {
        self.jobs
            .lock()
            .unwrap()
            .iter()
            .find(|j| j.text == text)
            .cloned()
    }

    fn event(&self, e: String) {
        self.events.send_modify(|events| events.push(e));
    }

    async fn run(&self, job: AgentJob, cancel: CancellationToken) -> AgentRun {
        self.event(format!("start:{}", job.text));
        self.jobs.lock().unwrap().push(job.clone());
        let run = if let Some(name) = job.text.strip_prefix("block:") {
            let mut released = self.released.subscribe();
            tokio::select! {
                _ = released.wait_for(|r| r.contains(name)) => completed(&job),
                () = cancel.cancelled() => {
                    self.event(format!("cancelled:{}", job.text));
                    AgentRun {
                        end: AgentEnd::Canceled,
                        status_text: "stopped: the current step was cancelled".into(),
                        result: Some(json!({"answer": null, "steps": 1})),
                        history: None,
                    }
                }
            }
        } else if job.text.starts_with("fail:") {
            AgentRun {
                end: AgentEnd::Failed,
                status_text: "the model endpoint is unreachable".into(),
                result: Some(json!({"answer": null, "steps": 0, "failed_tools": []})),
                history: None,
            }
        } else {
            completed(&job)
        };
        self.event(format!("end:{}", job.text));
        run
    }
}

fn completed(job: &AgentJob) -> AgentRun {
    let answer = format!("answer to {}", job.text);
    let mut history = job.history.clone();
    history.push(json!({"role": "user", "content": job.text}));
    history.push(json!({"role": "assistant", "content": answer}));
    AgentRun {
        end: AgentEnd::Completed,
        status_text: answer.clone(),
        result: Some(json!({
            "session": job.context.0,
            "answer": answer,
            "steps": 1,
            "tool_calls": 0,
            "failed_tools": [],
            "history_seen": job.history.len(),
        })),
        history: Some(history),
    }
}

impl Runner for Script {
    fn work(
        self: Arc<Self>,
        job: AgentJob,
        cancel: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = AgentRun> + Send + 'static>> {
        Box::pin(async move { self.run(job, cancel).await })
    }
}
