//! The privilege boundary wired in process, as the topology table has it: ids that the
//! audit keys on are minted by the executor, never taken from netd.

use std::sync::Arc;

use nl2sh_approvald::authority::Authority;
use nl2sh_approvald::store::{AuditKind, Store};
use nl2sh_proto::channels::{
    CallOrigin, Correlation, ExecutorRequest, ExecutorResponse, InvokeRequest,
};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::topology::{pair, ExecutorApprovald, NetdExecutor};

#[tokio::test]
async fn two_invokes_with_one_netd_id_are_two_audited_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let authority = Arc::new(Authority::new(store, dir.path().join("config.toml")));
    // executor → approvald
    let (asker, answerer) = pair::<ExecutorApprovald>().unwrap();
    tokio::spawn(nl2sh_approvald::dispatch::serve_executor(
        answerer,
        authority.clone(),
    ));
    let (authority_client, _) = RpcClient::start(asker).await.unwrap();
    let runtime = Arc::new(nl2sh_executor::Runtime::new(
        std::env::var("PATH").ok().as_deref(),
        Some(authority_client),
        None,
        Default::default(),
    ));
    // netd → executor
    let (asker, answerer) = pair::<NetdExecutor>().unwrap();
    tokio::spawn(nl2sh_executor::dispatch::serve_netd(answerer, runtime));
    let (executor, _) = RpcClient::start(asker).await.unwrap();

    // A compromised netd reuses one id for two calls, at once and one after the other.
    let invoke = || {
        ExecutorRequest::Invoke(InvokeRequest {
            correlation: Correlation(7),
            origin: CallOrigin::McpHttp,
            tool: "fs.stat".into(),
            arguments: r#"{"path":"/"}"#.into(),
        })
    };
    let (first, second) = (invoke(), invoke());
    let (a, b) = tokio::join!(executor.call(&first), executor.call(&second));
    let c = executor.call(&invoke()).await;
    for r in [a, b, c] {
        assert!(
            matches!(&r, Ok(ExecutorResponse::Outcome(o)) if o.success),
            "{r:?}"
        );
    }
    authority.store().flush().await.unwrap();
    let rows = authority.store().recent(100).await.unwrap();
    let mut decided: Vec<i64> = rows
        .iter()
        .filter(|r| r.record.kind == AuditKind::Decision)
        .map(|r| r.record.call_id)
        .collect();
    let mut finished: Vec<i64> = rows
        .iter()
        .filter(|r| r.record.kind == AuditKind::Outcome)
        .map(|r| r.record.call_id)
        .collect();
    decided.sort_unstable();
    finished.sort_unstable();
    decided.dedup();
    assert_eq!(decided.len(), 3, "three calls, three ids: {rows:?}");
    assert_eq!(decided, finished, "each call has its own outcome");
    assert!(!decided.contains(&7), "netd's id reached the audit");
}
