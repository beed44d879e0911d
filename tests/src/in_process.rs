//! approvald's authority and the executor wired in this process exactly as the tree wires
//! them (over `ExecutorApprovald` and `NetdExecutor` socketpairs, the executor with its
//! audit outbox in the state directory), for tests that drive
//! the privileged side without the binary. No sandbox: only fixed reads such as `fs.stat`
//! run unasked.

use std::path::PathBuf;
use std::sync::Arc;

use nl2sh_approvald::authority::Authority;
use nl2sh_approvald::dispatch::answer_authority;
use nl2sh_approvald::store::Store;
use nl2sh_executor::runtime::authority::Authority as ExecutorAuthority;
use nl2sh_executor::runtime::outbox::Outbox;
use nl2sh_proto::channels::AuthorityRequest;
use nl2sh_proto::rpc::{self, RpcClient};
use nl2sh_proto::topology::{pair, ExecutorApprovald, NetdExecutor};

pub struct Wired {
    /// The state directory (and the configuration's directory).
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub authority: Arc<Authority>,
    pub link: Arc<ExecutorAuthority>,
    /// netd's end of the executor channel.
    pub executor: RpcClient<NetdExecutor>,
}

/// What a test does with a request to approvald before approvald answers it: approvald
/// answers once the future returned is done.
pub type Hold = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Wire them in a fresh directory; `config` is the configuration file's text (`None`:
/// no file, the defaults).
pub async fn wire(config: Option<&str>) -> Wired {
    wire_observed(config, |_| Box::pin(async {})).await
}

/// [`wire`], with `observe` shown every request approvald gets from the executor; approvald
/// answers it once the [`Hold`] `observe` returns is done.
pub async fn wire_observed(
    config: Option<&str>,
    observe: impl Fn(&AuthorityRequest) -> Hold + Send + Sync + 'static,
) -> Wired {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config_path = dir.path().join("config.toml");
    if let Some(text) = config {
        std::fs::write(&config_path, text).expect("write the configuration");
    }
    let store = Store::open(dir.path()).expect("open the store");
    let authority = Arc::new(Authority::new(store, &config_path));
    let (asker, answerer) = pair::<ExecutorApprovald>().expect("socketpair");
    let answering = authority.clone();
    tokio::spawn(rpc::serve(answerer, move |req: AuthorityRequest| {
        let hold = observe(&req);
        let authority = answering.clone();
        async move {
            hold.await;
            answer_authority(&authority, req).await
        }
    }));
    let (client, _) = RpcClient::start(asker).await.expect("approvald handshake");
    let (outbox, _) = Outbox::open(dir.path()).expect("open the audit outbox");
    let link = ExecutorAuthority::with_outbox(client, &config_path, Some(Arc::new(outbox)));
    let runtime = Arc::new(nl2sh_executor::Runtime::new(
        std::env::var("PATH").ok().as_deref(),
        Some(link.clone()),
        None,
        Default::default(),
    ));
    let (asker, answerer) = pair::<NetdExecutor>().expect("socketpair");
    tokio::spawn(nl2sh_executor::dispatch::serve_netd(answerer, runtime));
    let (executor, _) = RpcClient::start(asker).await.expect("executor handshake");
    Wired {
        dir,
        config: config_path,
        authority,
        link,
        executor,
    }
}
