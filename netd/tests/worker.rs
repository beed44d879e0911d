//! netd's worker lifecycle in-process: a fake supervisor, executor and approvald on
//! socketpairs, the HTTP listener on 127.0.0.1.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use nl2sh_netd::worker::{self, Listener};
use nl2sh_netd::NetdError;
use nl2sh_proto::channels::{
    ControlRequest, ControlResponse, ExecutorRequest, ExecutorResponse, ExecutorSettings,
    FromWorker, HttpSettings, NetdSettings, NetdTransport, StoreRequest, StoreResponse,
    WorkerSettings,
};
use nl2sh_proto::frame::{read_frame, write_frame};
use nl2sh_proto::rpc;
use nl2sh_proto::topology::{
    pair, Answerer, NetdApprovald, NetdEnds, NetdExecutor, SupervisorNetd,
};
use nl2sh_proto::Secret;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

const TOKEN: &str = "nl2sh-worker-test-token-0123456789abcdefghij";

struct Tree {
    supervisor: UnixStream,
    executor: Option<Answerer<NetdExecutor>>,
    approvald: Option<Answerer<NetdApprovald>>,
    addr: SocketAddr,
    netd: JoinHandle<Result<(), NetdError>>,
}

fn http_settings(addr: SocketAddr, token: &str) -> NetdSettings {
    NetdSettings {
        transport: NetdTransport::Http(HttpSettings {
            token: Secret::new(token.into()),
            advertised_origin: format!("http://{addr}"),
            local_authorities: vec![addr.to_string()],
        }),
        model: nl2sh_proto::channels::ModelSetup::Unavailable("no model in this test".into()),
        #[cfg(debug_assertions)]
        test_violation: None,
    }
}

impl Tree {
    /// netd running, peers' ends handshaken, nothing sent yet by the supervisor.
    async fn new() -> Self {
        let (sup_ours, sup_netd) = pair::<SupervisorNetd>().unwrap();
        let (netd_exe, exe_ours) = pair::<NetdExecutor>().unwrap();
        let (netd_app, app_ours) = pair::<NetdApprovald>().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ends = NetdEnds {
            control: sup_netd,
            executor: netd_exe,
            approvald: netd_app,
        };
        let netd = tokio::spawn(worker::serve(ends, Listener::Given(listener)));
        let supervisor = sup_ours.greet().await.unwrap();
        Self {
            supervisor,
            executor: Some(exe_ours),
            approvald: Some(app_ours),
            addr,
            netd,
        }
    }

    async fn start(&mut self, settings: NetdSettings) {
        write_frame(
            &mut self.supervisor,
            7,
            &ControlRequest::Start(Box::new(WorkerSettings::Netd(settings))),
        )
        .await
        .unwrap();
    }

    /// Executor and approvald handshake and serve; approvald answers the ping when
    /// `store_answers`, else closes its channel on it.
    fn peers(&mut self, store_answers: bool) {
        let exe = self.executor.take().unwrap();
        tokio::spawn(rpc::serve(exe, |req: ExecutorRequest| async move {
            match req {
                ExecutorRequest::Inspect => Ok(ExecutorResponse::Inspect {
                    json: json!({"os": {"name": "fake"}}).to_string(),
                }),
                other => panic!("unexpected {other:?}"),
            }
        }));
        let app = self.approvald.take().unwrap();
        tokio::spawn(async move {
            if store_answers {
                let _ = rpc::serve(app, |req: StoreRequest| async move {
                    match req {
                        StoreRequest::Ping => Ok(StoreResponse::Pong),
                        // netd waits for the owner's work all along; none comes here.
                        StoreRequest::NextOwnerWork => std::future::pending().await,
                        _ => Err(rpc::OutOfState(
                            "this test's store only answers Ping".into(),
                        )),
                    }
                })
                .await;
            } else if let Ok(mut app) = app.greet().await {
                let _ = read_frame::<StoreRequest, _>(&mut app).await;
            }
        });
    }

    /// Peers whose channels the test keeps, handshaken, for closing later.
    async fn silent_peers(&mut self) -> (UnixStream, UnixStream) {
        let exe = self.executor.take().unwrap();
        let app = self.approvald.take().unwrap();
        let (exe, app) = tokio::join!(exe.greet(), app.greet());
        let (exe, mut app) = (exe.unwrap(), app.unwrap());
        // Answer the one start-up ping by hand.
        let (id, req) = read_frame::<StoreRequest, _>(&mut app).await.unwrap();
        assert!(matches!(req, StoreRequest::Ping), "{req:?}");
        write_frame(&mut app, id, &StoreResponse::Pong)
            .await
            .unwrap();
        (exe, app)
    }

    async fn reply(&mut self) -> (u64, ControlResponse) {
        let (id, from) = tokio::time::timeout(
            Duration::from_secs(10),
            read_frame::<FromWorker, _>(&mut self.supervisor),
        )
        .await
        .expect("netd did not answer the supervisor")
        .unwrap();
        match from {
            FromWorker::Answer(answer) => (id, answer),
            FromWorker::Event(event) => panic!("an event instead of an answer: {event:?}"),
        }
    }

    async fn end(self) -> Result<(), NetdError> {
        tokio::time::timeout(Duration::from_secs(5), self.netd)
            .await
            .expect("netd did not stop promptly")
            .unwrap()
    }
}

async fn inspect(addr: SocketAddr) -> common::Reply {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "nl2sh_inspect"}});
    common::mcp_post(addr, TOKEN, &body).await
}

#[tokio::test]
async fn starts_serves_and_drains() {
    let mut tree = Tree::new().await;
    tree.start(http_settings(tree.addr, TOKEN)).await;
    tree.peers(true);
    let (id, started) = tree.reply().await;
    assert_eq!(id, 7, "Started carries the id of Start");
    assert!(matches!(started, ControlResponse::Started), "{started:?}");

    let r = inspect(tree.addr).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        common::executor_part(&r.json()["result"]["structuredContent"]),
        json!({"os": {"name": "fake"}})
    );

    write_frame(
        &mut tree.supervisor,
        8,
        &ControlRequest::Drain { grace_ms: 2000 },
    )
    .await
    .unwrap();
    let (id, drained) = tree.reply().await;
    assert_eq!(id, 8);
    assert!(matches!(drained, ControlResponse::Drained), "{drained:?}");
    let addr = tree.addr;
    tree.end().await.unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting"
    );
}

#[tokio::test]
async fn supervisor_closing_ends_netd_with_a_failure() {
    let mut tree = Tree::new().await;
    tree.start(http_settings(tree.addr, TOKEN)).await;
    tree.peers(true);
    assert!(matches!(tree.reply().await.1, ControlResponse::Started));
    tree.supervisor.shutdown().await.unwrap();
    let end = tree.end().await;
    assert!(
        matches!(end, Err(NetdError::PeerGone("supervisor"))),
        "{end:?}"
    );
}

#[tokio::test]
async fn hostile_supervisor_frame_ends_netd_with_a_failure() {
    let mut tree = Tree::new().await;
    tree.start(http_settings(tree.addr, TOKEN)).await;
    tree.peers(true);
    assert!(matches!(tree.reply().await.1, ControlResponse::Started));
    // A second Start is out of place.
    tree.start(http_settings(tree.addr, TOKEN)).await;
    let end = tree.end().await;
    assert!(
        matches!(&end, Err(NetdError::Frame(e)) if e.to_string().contains("a second Start")),
        "{end:?}"
    );

    let mut tree = Tree::new().await;
    tree.start(http_settings(tree.addr, TOKEN)).await;
    tree.peers(true);
    assert!(matches!(tree.reply().await.1, ControlResponse::Started));
    // Garbage: a length prefix then bytes that do not decode.
    tree.supervisor
        .write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    assert!(matches!(tree.end().await, Err(NetdError::Frame(_))));
}

#[tokio::test]
async fn executor_or_approvald_closing_ends_netd_with_a_failure() {
    for which in ["executor", "approvald"] {
        let mut tree = Tree::new().await;
        tree.start(http_settings(tree.addr, TOKEN)).await;
        let (exe, app) = tree.silent_peers().await;
        assert!(matches!(tree.reply().await.1, ControlResponse::Started));
        let _kept = if which == "executor" {
            drop(exe);
            app
        } else {
            drop(app);
            exe
        };
        let end = tree.end().await;
        assert!(
            matches!(end, Err(NetdError::PeerGone(w)) if w == which),
            "{which}: {end:?}"
        );
    }
}

#[tokio::test]
async fn only_start_with_netd_settings_is_accepted() {
    let mut tree = Tree::new().await;
    write_frame(
        &mut tree.supervisor,
        1,
        &ControlRequest::Drain { grace_ms: 0 },
    )
    .await
    .unwrap();
    assert!(matches!(tree.end().await, Err(NetdError::Worker(_))));

    let mut tree = Tree::new().await;
    let other = WorkerSettings::Executor(ExecutorSettings {
        config_path: "/x".into(),
        state_dir: "/y".into(),
        sandbox_uids: nl2sh_proto::channels::UidRange {
            first: 0x9000_0000,
            count: 64,
        },
        sandbox_limits: nl2sh_proto::config::Config::default().sandbox_limits(),
        sandbox_ceiling: nl2sh_proto::config::Config::default().sandbox_ceiling(),
        service_dir: "/nonexistent/config.service".into(),
    });
    write_frame(
        &mut tree.supervisor,
        1,
        &ControlRequest::Start(Box::new(other)),
    )
    .await
    .unwrap();
    assert!(matches!(tree.end().await, Err(NetdError::Protocol(_))));
}

#[tokio::test]
async fn start_problems_are_refused() {
    // A token the front door would not accept.
    let mut tree = Tree::new().await;
    tree.start(http_settings(tree.addr, "short")).await;
    tree.peers(true);
    let (id, reply) = tree.reply().await;
    assert_eq!(id, 7);
    match reply {
        ControlResponse::Refused(why) => assert!(!why.contains("short"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(tree.end().await, Err(NetdError::Settings(_))));

    // approvald closes its channel instead of answering the ping.
    let mut tree = Tree::new().await;
    tree.start(http_settings(tree.addr, TOKEN)).await;
    tree.peers(false);
    assert!(matches!(tree.reply().await.1, ControlResponse::Refused(_)));
    assert!(tree.end().await.is_err());
}
