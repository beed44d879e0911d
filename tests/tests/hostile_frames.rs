//! Workers wired in-process over socketpairs, fed frames no honest peer sends. Each
//! receiver must close the channel, report why, and answer (execute) nothing.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use nl2sh_proto::channels::{AuthorityRequest, ControlRequest, ExecutorRequest, StoreRequest};
use nl2sh_proto::frame::{encode, FrameError};
use nl2sh_proto::limits::MAX_FRAME_BYTES;
use nl2sh_proto::topology::{pair, ExecutorApprovald, NetdApprovald, NetdExecutor};

#[derive(Clone, Copy, Debug)]
enum Target {
    Executor,
    ApprovaldFromNetd,
    ApprovaldFromExecutor,
}

/// Start `target`'s server on a fresh channel and greet it as its rightful asker; the
/// stream is then where a hostile asker writes.
async fn spawn_target(
    target: Target,
) -> (UnixStream, tokio::task::JoinHandle<Result<(), FrameError>>) {
    match target {
        Target::Executor => {
            let (asker, answerer) = pair::<NetdExecutor>().unwrap();
            let rt = Arc::new(nl2sh_executor::Runtime::new(
                None,
                None,
                None,
                Default::default(),
            ));
            let task = tokio::spawn(nl2sh_executor::dispatch::serve_netd(answerer, rt));
            (asker.greet().await.unwrap(), task)
        }
        Target::ApprovaldFromNetd => {
            let (asker, answerer) = pair::<NetdApprovald>().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let store = nl2sh_approvald::store::Store::open(dir.path()).unwrap();
            let tasks = Arc::new(store.tasks(&[]).unwrap());
            let task = tokio::spawn(async move {
                let _dir = dir;
                nl2sh_approvald::dispatch::serve_netd(answerer, tasks, Default::default()).await
            });
            (asker.greet().await.unwrap(), task)
        }
        Target::ApprovaldFromExecutor => {
            let (asker, answerer) = pair::<ExecutorApprovald>().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let store = nl2sh_approvald::store::Store::open(dir.path()).unwrap();
            let authority = Arc::new(nl2sh_approvald::authority::Authority::new(
                store,
                dir.path().join("config.toml"),
            ));
            let task = tokio::spawn(async move {
                let _dir = dir;
                nl2sh_approvald::dispatch::serve_executor(answerer, authority).await
            });
            (asker.greet().await.unwrap(), task)
        }
    }
}

/// A frame that belongs on another channel (or is the reply direction) for `target`.
fn wrong_channel_frame(target: Target) -> Vec<u8> {
    match target {
        // netd's store request sent to the executor.
        Target::Executor => encode(1, &StoreRequest::Ping).unwrap(),
        // The executor's authority request arriving on netd's store channel: a compromised
        // netd trying to reach the approval surface.
        Target::ApprovaldFromNetd => encode(1, &AuthorityRequest::Ping).unwrap(),
        Target::ApprovaldFromExecutor => encode(1, &ExecutorRequest::Inspect).unwrap(),
    }
}

async fn feed(target: Target, bytes: Vec<u8>) -> (Result<(), FrameError>, Vec<u8>) {
    let (mut client, task) = spawn_target(target).await;
    let _ = client.write_all(&bytes).await;
    // Half-close so a truncated frame is seen as truncated rather than waited on.
    let _ = client.shutdown().await;
    let result = tokio::time::timeout(std::time::Duration::from_secs(5), task)
        .await
        .expect("receiver did not close the channel")
        .expect("receiver panicked");
    let mut answer = Vec::new();
    let _ = client.read_to_end(&mut answer).await;
    (result, answer)
}

fn cases(target: Target) -> Vec<(&'static str, Vec<u8>)> {
    let mut oversized = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes().to_vec();
    oversized.extend_from_slice(&[0u8; 64]);
    let good = match target {
        Target::Executor => encode(5, &ExecutorRequest::Inspect).unwrap(),
        Target::ApprovaldFromNetd => encode(5, &StoreRequest::Ping).unwrap(),
        Target::ApprovaldFromExecutor => encode(5, &AuthorityRequest::Ping).unwrap(),
    };
    let mut trailing = good.clone();
    trailing.push(0xaa);
    let len = (good.len() - 4 + 1) as u32;
    trailing[..4].copy_from_slice(&len.to_be_bytes());
    let mut bad_variant = good.clone();
    let last = bad_variant.len() - 1;
    bad_variant[last] = 0x7f; // variant index no enum has
    vec![
        (
            "garbage",
            b"\x00\x00\x00\x10GET / HTTP/1.1\r\n\r\n".to_vec(),
        ),
        ("oversized", oversized),
        ("zero length", vec![0, 0, 0, 0]),
        ("truncated", good[..good.len() - 1].to_vec()),
        ("trailing bytes", trailing),
        ("unknown variant", bad_variant),
        ("wrong channel", wrong_channel_frame(target)),
        (
            "control frame",
            encode(1, &ControlRequest::Drain { grace_ms: 0 }).unwrap(),
        ),
        ("request id 0", {
            match target {
                Target::Executor => encode(0, &ExecutorRequest::Inspect).unwrap(),
                Target::ApprovaldFromNetd => encode(0, &StoreRequest::Ping).unwrap(),
                Target::ApprovaldFromExecutor => encode(0, &AuthorityRequest::Ping).unwrap(),
            }
        }),
    ]
}

#[tokio::test]
async fn every_hostile_frame_closes_the_channel_and_answers_nothing() {
    for target in [
        Target::Executor,
        Target::ApprovaldFromNetd,
        Target::ApprovaldFromExecutor,
    ] {
        for (name, bytes) in cases(target) {
            let (result, answer) = feed(target, bytes).await;
            assert!(result.is_err(), "{target:?} accepted a {name} frame");
            assert!(
                answer.is_empty(),
                "{target:?} answered a {name} frame: {answer:?}"
            );
        }
    }
}

#[tokio::test]
async fn random_bytes_never_panic_a_receiver() {
    // A small deterministic generator: the point is breadth, not cryptographic quality.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for target in [
        Target::Executor,
        Target::ApprovaldFromNetd,
        Target::ApprovaldFromExecutor,
    ] {
        for _ in 0..200 {
            let len = (next() % 64) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Half the time, a plausible length prefix so the body decoder is reached.
            if next() % 2 == 0 && len >= 4 {
                let body = (len - 4) as u32;
                bytes[..4].copy_from_slice(&body.to_be_bytes());
            }
            let empty = bytes.is_empty();
            let (result, answer) = feed(target, bytes.clone()).await;
            // Empty input is a clean close; anything else is refused. Either way the
            // receiver answers nothing, and never panics (`feed` fails on a panic).
            if empty {
                assert!(
                    result.is_ok(),
                    "{target:?} refused an empty stream: {result:?}"
                );
            } else {
                assert!(
                    result.is_err(),
                    "{target:?} accepted random bytes {bytes:02x?}"
                );
            }
            assert!(
                answer.is_empty(),
                "{target:?} answered random bytes {bytes:02x?}: {answer:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_honest_request_is_answered_after_hostile_tests_too() {
    let (asker, answerer) = pair::<NetdExecutor>().unwrap();
    let rt = Arc::new(nl2sh_executor::Runtime::new(
        None,
        None,
        None,
        Default::default(),
    ));
    let _task = tokio::spawn(nl2sh_executor::dispatch::serve_netd(answerer, rt));
    let (rpc, _) = nl2sh_proto::rpc::RpcClient::start(asker).await.unwrap();
    match rpc.call(&ExecutorRequest::Inspect).await.unwrap() {
        nl2sh_proto::channels::ExecutorResponse::Inspect { json } => {
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert!(v["build_identity"].is_object());
        }
        other => panic!("{other:?}"),
    }
}
