//! The privilege boundary as data: every channel of the tree, who asks on it, who answers,
//! and where each end lives. The supervisor creates the socketpairs by walking
//! [`TOPOLOGY`]; every worker takes its ends through [`Asker`] / [`Answerer`], built from
//! inherited descriptors in production and from [`pair`] in tests.
//!
//! ```text
//!                      ┌────────────── supervisor ──────────────┐
//!                      │ asks: Start, Drain   hears: WorkerEvent│
//!                 fd 3 ▼                 fd 3 ▼                 ▼ fd 3
//!              ┌──────────┐  fd 4 → 4  ┌──────────┐  fd 5 → 5  ┌───────────┐
//!   TCP fd 6 ─▶│   netd   │──────────▶│ executor │──────────▶│ approvald │◀── approvals.sock
//!   or stdio   │ (nobody) │ Executor- │  (root)  │ Authority-│  (root)   │    (CLI: list,
//!              └──────────┘ Request   └──────────┘ Request   └───────────┘     approve,
//!                    │            fd 5 → 4                         ▲           reject)
//!                    └─────────────── StoreRequest ────────────────┘
//! ```
//!
//! The executor and approvald keep the launching uid (root on a device); netd drops to
//! its own. Arrows point from the asker to the answerer; the numbers are the descriptor each end
//! has in its process ([`crate::channels::fds`]). Servers never ask their askers anything,
//! and nothing else connects them: netd can ask for work and store access, never for a
//! decision; only the executor asks approvald to decide; only a local person's CLI
//! approves.
//!
//! The types make the table binding: a client of one channel cannot send another
//! channel's request, and only the asking end can become a client:
//!
//! ```compile_fail
//! use nl2sh_proto::topology::{pair, NetdExecutor};
//! use nl2sh_proto::rpc::RpcClient;
//! # async fn f() {
//! let (_asker, answerer) = pair::<NetdExecutor>().unwrap();
//! // The executor's end answers; it cannot ask.
//! let _ = RpcClient::start(answerer).await;
//! # }
//! ```
//!
//! ```compile_fail
//! use nl2sh_proto::channels::StoreRequest;
//! use nl2sh_proto::topology::{pair, NetdExecutor};
//! use nl2sh_proto::rpc::RpcClient;
//! # async fn f() {
//! let (asker, _) = pair::<NetdExecutor>().unwrap();
//! let (client, _) = RpcClient::start(asker).await.unwrap();
//! // A store request on the executor channel.
//! let _ = client.call(&StoreRequest::Ping).await;
//! # }
//! ```
//!
//! ```
//! use nl2sh_proto::channels::{ExecutorRequest, ExecutorResponse};
//! use nl2sh_proto::topology::{pair, NetdExecutor};
//! use nl2sh_proto::rpc::{serve, RpcClient};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let (asker, answerer) = pair::<NetdExecutor>().unwrap();
//! tokio::spawn(serve(answerer, |req: ExecutorRequest| async move {
//!     Ok(ExecutorResponse::Catalog(Vec::new()))
//! }));
//! let (client, _) = RpcClient::start(asker).await.unwrap();
//! assert!(matches!(
//!     client.call(&ExecutorRequest::Catalog).await,
//!     Ok(ExecutorResponse::Catalog(_))
//! ));
//! # });
//! ```

use std::io;
use std::marker::PhantomData;

use tokio::net::UnixStream;

use crate::channels::{
    fds, AuthorityRequest, AuthorityResponse, CliRequest, CliResponse, ControlRequest,
    DiscoveryRequest, DiscoveryResponse, ExecutorRequest, ExecutorResponse, FromWorker,
    OwnerRequest, OwnerResponse, StoreRequest, StoreResponse,
};
use crate::frame::{FrameError, Wire};
use crate::handshake::{handshake, ChannelKind, Role};

/// One channel: its two message types, who asks and who answers, and the descriptor each
/// end is inherited at (`None`: connected at run time, like approvals.sock).
pub trait Channel: Sized + Send + Sync + 'static {
    type Request: Wire + std::fmt::Debug;
    type Response: Wire + std::fmt::Debug;
    const KIND: ChannelKind;
    const ASKER: Role;
    const ANSWERER: Role;
    const ASKER_FD: Option<i32>;
    const ANSWERER_FD: Option<i32>;
    /// Whether `response` is the answer `request` may get. Any other answer is fatal to
    /// the channel.
    fn answers(request: &Self::Request, response: &Self::Response) -> bool;
}

/// A row of [`TOPOLOGY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub kind: ChannelKind,
    pub asker: Role,
    pub answerer: Role,
    pub asker_fd: Option<i32>,
    pub answerer_fd: Option<i32>,
}

const fn edge<C: Channel>() -> Edge {
    Edge {
        kind: C::KIND,
        asker: C::ASKER,
        answerer: C::ANSWERER,
        asker_fd: C::ASKER_FD,
        answerer_fd: C::ANSWERER_FD,
    }
}

/// Every channel of the tree, derived from the [`Channel`] implementations below.
pub const TOPOLOGY: [Edge; 10] = [
    edge::<SupervisorApprovald>(),
    edge::<SupervisorExecutor>(),
    edge::<SupervisorNetd>(),
    edge::<SupervisorWeb>(),
    edge::<NetdExecutor>(),
    edge::<NetdApprovald>(),
    edge::<ExecutorApprovald>(),
    edge::<WebApprovald>(),
    edge::<WebSupervisor>(),
    edge::<CliApprovald>(),
];

macro_rules! channel {
    ($(#[$doc:meta])* $name:ident: $asker:ident ($afd:expr) -> $answerer:ident ($bfd:expr),
     $req:ty => $resp:ty, |$q:ident, $r:ident| $answers:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $name {}
        impl Channel for $name {
            type Request = $req;
            type Response = $resp;
            const KIND: ChannelKind = ChannelKind::$name;
            const ASKER: Role = Role::$asker;
            const ANSWERER: Role = Role::$answerer;
            const ASKER_FD: Option<i32> = $afd;
            const ANSWERER_FD: Option<i32> = $bfd;
            fn answers($q: &$req, $r: &$resp) -> bool {
                $answers
            }
        }
    };
}

/// Control answers: `Start` gets `Started` or `Refused`, `Drain` gets `Drained`. Events
/// (unasked) are not answers.
fn control_answers(q: &ControlRequest, r: &FromWorker) -> bool {
    use crate::channels::ControlResponse as A;
    matches!(
        (q, r),
        (
            ControlRequest::Start(_),
            FromWorker::Answer(A::Started | A::Refused(_))
        ) | (ControlRequest::Drain { .. }, FromWorker::Answer(A::Drained))
    )
}

channel!(
    /// Supervisor ⇄ approvald: start, drain; events up.
    SupervisorApprovald: Supervisor (None) -> Approvald (Some(fds::SUPERVISOR)),
    ControlRequest => FromWorker, |q, r| control_answers(q, r)
);
channel!(
    /// Supervisor ⇄ executor: start, drain; events up.
    SupervisorExecutor: Supervisor (None) -> Executor (Some(fds::SUPERVISOR)),
    ControlRequest => FromWorker, |q, r| control_answers(q, r)
);
channel!(
    /// Supervisor ⇄ netd: start (with the token), drain; events up (stdin closed).
    SupervisorNetd: Supervisor (None) -> Netd (Some(fds::SUPERVISOR)),
    ControlRequest => FromWorker, |q, r| control_answers(q, r)
);
channel!(
    /// Supervisor ⇄ the Web console: start (with its listener's origin), drain.
    SupervisorWeb: Supervisor (None) -> Web (Some(fds::SUPERVISOR)),
    ControlRequest => FromWorker, |q, r| control_answers(q, r)
);
channel!(
    /// netd → executor: catalog, inspect, invoke, read screen, cancel, a call's progress.
    NetdExecutor: Netd (Some(fds::NETD_EXECUTOR)) -> Executor (Some(fds::EXECUTOR_NETD)),
    ExecutorRequest => ExecutorResponse, |q, r| {
        use ExecutorRequest as Q;
        use ExecutorResponse as A;
        matches!(
            (q, r),
            (Q::Inspect, A::Inspect { .. })
                | (Q::Catalog, A::Catalog(_))
                | (Q::Invoke(_), A::Outcome(_))
                | (Q::ReadScreen { .. }, A::Outcome(_))
                | (Q::Cancel { .. }, A::Cancelled { .. })
                | (Q::Progress { .. }, A::Progress(_))
        )
    }
);
channel!(
    /// netd → approvald: the store (tasks, sessions), and the owner's Ask handed over as
    /// the answer to netd's outstanding `NextOwnerWork`. Never approvals.
    NetdApprovald: Netd (Some(fds::NETD_APPROVALD)) -> Approvald (Some(fds::APPROVALD_NETD)),
    StoreRequest => StoreResponse, |q, r| {
        use StoreRequest as Q;
        use StoreResponse as A;
        matches!(
            (q, r),
            (Q::Ping, A::Pong)
                | (Q::CreateTask { .. }, A::Created { .. } | A::Failed { .. })
                | (Q::PutTask(_) | Q::SaveSession { .. }, A::Stored | A::Failed { .. })
                | (Q::GetTask { .. }, A::Task(_) | A::Failed { .. })
                | (Q::ListTasks(_), A::Tasks(_) | A::Failed { .. })
                | (Q::LoadSession { .. }, A::Session(_) | A::Failed { .. })
                | (Q::NextOwnerWork, A::OwnerWork(_) | A::Failed { .. })
        )
    }
);
channel!(
    /// executor → approvald: decide, withdraw, whether a decision is pending, the policy
    /// snapshot, and the last rows of calls (outcomes, and calls run under the snapshot),
    /// each answered once journalled; a call's answer leaves the executor once its row is
    /// in the executor's outbox, or, without it, once approvald has answered.
    ExecutorApprovald: Executor (Some(fds::EXECUTOR_APPROVALD)) -> Approvald (Some(fds::APPROVALD_EXECUTOR)),
    AuthorityRequest => AuthorityResponse, |q, r| {
        use AuthorityRequest as Q;
        use AuthorityResponse as A;
        matches!(
            (q, r),
            (Q::Ping, A::Pong)
                | (Q::Decide(_), A::Decided { .. } | A::NotRecorded(_))
                | (Q::Withdraw { .. }, A::Recorded)
                | (
                    Q::Finished(_) | Q::Ran(_) | Q::Recover(_) | Q::Kept(_),
                    A::Recorded | A::NotRecorded(_)
                )
                | (Q::Policy, A::Policy(_))
                | (Q::Waiting { .. }, A::Waiting(_))
        )
    }
);
channel!(
    /// Web console → approvald: the owner's requests, each with its session proof.
    /// Never the executor's decisions, never the store's writes.
    WebApprovald: Web (Some(fds::WEB_APPROVALD)) -> Approvald (Some(fds::APPROVALD_WEB)),
    OwnerRequest => OwnerResponse, |q, r| {
        use OwnerRequest as Q;
        use OwnerResponse as A;
        match (q, r) {
            (_, A::Refused { .. }) => true,
            (Q::RedeemLogin { .. }, A::LoggedIn { .. }) => true,
            (Q::Check { .. }, A::Owner { .. }) => true,
            (Q::Logout { .. }, A::Done) => true,
            (Q::Act { action, .. }, r) => {
                use crate::channels::OwnerAction as O;
                matches!(
                    (action, r),
                    (O::ListPending, A::Pending(_))
                        | (O::Decide { .. }, A::Done)
                        | (O::ApproveForUi { .. } | O::RevokeUiGrant { .. }, A::Done)
                        | (O::UiGrants, A::UiGrants(_))
                        | (O::RejectOrigin { .. }, A::Rejected(_))
                        | (O::Grants, A::Grants(_))
                        | (O::Tasks { .. }, A::Tasks(_))
                        | (O::Task { .. }, A::Task(_))
                        | (O::Audit { .. }, A::Audit(_))
                        | (O::VerifyAudit, A::Verified { .. })
                        | (O::Settings, A::Settings(_))
                        | (O::SaveSetting { .. } | O::SaveSettings { .. }, A::Saved { .. })
                        | (O::RotateToken, A::TokenRotated { .. })
                        | (O::Restart, A::Done)
                )
            }
            _ => false,
        }
    }
);
channel!(
    /// Web console → supervisor: discovery of the protocol service (read afresh each
    /// time). The one channel the supervisor answers: it answers from discovery alone and
    /// never waits on the Web console, so it cannot deadlock with `SupervisorWeb`.
    WebSupervisor: Web (Some(fds::WEB_SUPERVISOR)) -> Supervisor (None),
    DiscoveryRequest => DiscoveryResponse, |q, r| {
        matches!((q, r), (DiscoveryRequest::Discover, DiscoveryResponse::Protocols(_)))
    }
);
channel!(
    /// Local CLI → approvald over `protocol/approvals.sock` (same uid, not from the tree).
    CliApprovald: Cli (None) -> Approvald (None),
    CliRequest => CliResponse, |q, r| {
        use CliRequest as Q;
        use CliResponse as A;
        matches!(
            (q, r),
            (Q::ListPending, A::Pending(_))
                | (Q::RejectOrigin { .. }, A::Rejected(_) | A::Error { .. })
                | (
                    Q::Approve { .. }
                    | Q::Reject { .. }
                    | Q::FlushAudit
                    | Q::ApproveForUi { .. }
                    | Q::RevokeUiGrant { .. },
                    A::Done | A::Error { .. }
                )
                | (Q::UiGrants, A::UiGrants(_) | A::Error { .. })
                | (Q::WebLogin, A::LoginCode { .. } | A::Error { .. })
                | (Q::WebLogoutAll, A::LoggedOut { .. } | A::Error { .. })
                | (Q::Tasks { .. }, A::Tasks(_) | A::Error { .. })
                | (Q::Task { .. }, A::Task(_) | A::Error { .. })
                | (Q::Ask { .. }, A::Asked { .. } | A::Error { .. })
                | (Q::CancelTask { .. }, A::Done | A::Error { .. })
        )
    }
);

#[derive(Debug, thiserror::Error)]
pub enum EndError {
    #[error("{kind:?} has no inherited descriptor on this side")]
    NotInherited { kind: ChannelKind },
    #[error("no {kind:?} channel inherited at fd {fd} ({source})")]
    Fd {
        kind: ChannelKind,
        fd: i32,
        source: io::Error,
    },
    #[error("{kind:?}: handshake: {source}")]
    Handshake {
        kind: ChannelKind,
        source: FrameError,
    },
}

/// The asking end of channel `C`. Held as a plain socket until it greets its peer (which
/// needs the runtime), so a role can take its ends before its runtime exists.
pub struct Asker<C: Channel> {
    stream: StdStream,
    _channel: PhantomData<fn() -> C>,
}

/// The answering end of channel `C`.
pub struct Answerer<C: Channel> {
    stream: StdStream,
    _channel: PhantomData<fn() -> C>,
}

type StdStream = std::os::unix::net::UnixStream;

fn inherited<C: Channel>(fd: Option<i32>) -> Result<StdStream, EndError> {
    let fd = fd.ok_or(EndError::NotInherited { kind: C::KIND })?;
    crate::sys::take_inherited(fd, crate::sys::Expect::UnixStream)
        .map(StdStream::from)
        .map_err(|source| EndError::Fd {
            kind: C::KIND,
            fd,
            source,
        })
}

/// The socket as tokio's, inside the runtime.
fn to_tokio<C: Channel>(stream: StdStream) -> Result<UnixStream, EndError> {
    let io = |source: io::Error| EndError::Handshake {
        kind: C::KIND,
        source: FrameError::Io(source),
    };
    stream.set_nonblocking(true).map_err(io)?;
    UnixStream::from_std(stream).map_err(io)
}

/// The handshake of either end of channel `C`: we are `me`, the peer must be `peer`.
async fn greet_as<C: Channel>(
    stream: StdStream,
    me: Role,
    peer: Role,
) -> Result<UnixStream, EndError> {
    let mut stream = to_tokio::<C>(stream)?;
    handshake(&mut stream, C::KIND, me, peer)
        .await
        .map_err(|source| EndError::Handshake {
            kind: C::KIND,
            source,
        })?;
    Ok(stream)
}

/// What both ends of a channel are built from: an inherited fd, or a socket connected
/// at run time.
macro_rules! end_constructors {
    ($end:ident, $fd:ident) => {
        impl<C: Channel> $end<C> {
            #[doc = concat!("The end this process inherited at `C::", stringify!($fd), "`.")]
            pub fn inherited() -> Result<Self, EndError> {
                inherited::<C>(C::$fd).map(Self::from_std)
            }

            /// An end connected (or accepted) at run time: approvals.sock.
            pub fn connected(stream: UnixStream) -> io::Result<Self> {
                // A socket tokio no longer watches; `greet` registers it again.
                stream.into_std().map(Self::from_std)
            }

            fn from_std(stream: StdStream) -> Self {
                Self {
                    stream,
                    _channel: PhantomData,
                }
            }
        }
    };
}
end_constructors!(Asker, ASKER_FD);
end_constructors!(Answerer, ANSWERER_FD);

impl<C: Channel> Asker<C> {
    /// Say who we are and check who answers; the stream is then ready for requests.
    pub async fn greet(self) -> Result<UnixStream, EndError> {
        greet_as::<C>(self.stream, C::ASKER, C::ANSWERER).await
    }
}

impl<C: Channel> Answerer<C> {
    /// Say who we are and check who asks.
    pub async fn greet(self) -> Result<UnixStream, EndError> {
        greet_as::<C>(self.stream, C::ANSWERER, C::ASKER).await
    }

    /// The raw socket before the handshake (for tests that play a hostile peer).
    pub fn into_std(self) -> StdStream {
        self.stream
    }
}

impl<C: Channel> Asker<C> {
    /// The raw socket before the handshake (for tests that play a hostile peer).
    pub fn into_std(self) -> StdStream {
        self.stream
    }
}

/// Both ends of channel `C`, connected to each other (in-process wiring and tests).
pub fn pair<C: Channel>() -> io::Result<(Asker<C>, Answerer<C>)> {
    let (a, b) = StdStream::pair()?;
    Ok((Asker::from_std(a), Answerer::from_std(b)))
}

/// A role's ends of every channel, inherited at the numbers of [`TOPOLOGY`] (production)
/// or made by [`InProcess::new`] (tests wiring workers together without processes).
pub struct NetdEnds {
    pub control: Answerer<SupervisorNetd>,
    pub executor: Asker<NetdExecutor>,
    pub approvald: Asker<NetdApprovald>,
}

pub struct ExecutorEnds {
    pub control: Answerer<SupervisorExecutor>,
    pub netd: Answerer<NetdExecutor>,
    pub approvald: Asker<ExecutorApprovald>,
}

pub struct ApprovaldEnds {
    pub control: Answerer<SupervisorApprovald>,
    pub netd: Answerer<NetdApprovald>,
    pub executor: Answerer<ExecutorApprovald>,
    pub web: Answerer<WebApprovald>,
}

pub struct WebEnds {
    pub control: Answerer<SupervisorWeb>,
    pub approvald: Asker<WebApprovald>,
    pub supervisor: Asker<WebSupervisor>,
}

/// The supervisor's ends: it asks on every control channel.
pub struct SupervisorEnds {
    pub approvald: Asker<SupervisorApprovald>,
    pub executor: Asker<SupervisorExecutor>,
    pub netd: Asker<SupervisorNetd>,
    pub web: Asker<SupervisorWeb>,
    pub discovery: Answerer<WebSupervisor>,
}

impl NetdEnds {
    pub fn inherited() -> Result<Self, EndError> {
        Ok(Self {
            control: Answerer::inherited()?,
            executor: Asker::inherited()?,
            approvald: Asker::inherited()?,
        })
    }
}

impl ExecutorEnds {
    pub fn inherited() -> Result<Self, EndError> {
        Ok(Self {
            control: Answerer::inherited()?,
            netd: Answerer::inherited()?,
            approvald: Asker::inherited()?,
        })
    }
}

impl ApprovaldEnds {
    pub fn inherited() -> Result<Self, EndError> {
        Ok(Self {
            control: Answerer::inherited()?,
            netd: Answerer::inherited()?,
            executor: Answerer::inherited()?,
            web: Answerer::inherited()?,
        })
    }
}

impl WebEnds {
    pub fn inherited() -> Result<Self, EndError> {
        Ok(Self {
            control: Answerer::inherited()?,
            approvald: Asker::inherited()?,
            supervisor: Asker::inherited()?,
        })
    }
}

/// Every end of the tree, connected in process: what the supervisor's socketpairs give
/// the processes, for tests that run the workers' `run` functions side by side.
pub struct InProcess {
    pub supervisor: SupervisorEnds,
    pub netd: NetdEnds,
    pub executor: ExecutorEnds,
    pub approvald: ApprovaldEnds,
    pub web: WebEnds,
}

impl InProcess {
    pub fn new() -> io::Result<Self> {
        let (sup_appr, appr_sup) = pair::<SupervisorApprovald>()?;
        let (sup_exec, exec_sup) = pair::<SupervisorExecutor>()?;
        let (sup_netd, netd_sup) = pair::<SupervisorNetd>()?;
        let (netd_exec, exec_netd) = pair::<NetdExecutor>()?;
        let (netd_appr, appr_netd) = pair::<NetdApprovald>()?;
        let (exec_appr, appr_exec) = pair::<ExecutorApprovald>()?;
        let (sup_web, web_sup) = pair::<SupervisorWeb>()?;
        let (web_appr, appr_web) = pair::<WebApprovald>()?;
        let (web_disc, sup_disc) = pair::<WebSupervisor>()?;
        Ok(Self {
            supervisor: SupervisorEnds {
                approvald: sup_appr,
                executor: sup_exec,
                netd: sup_netd,
                web: sup_web,
                discovery: sup_disc,
            },
            netd: NetdEnds {
                control: netd_sup,
                executor: netd_exec,
                approvald: netd_appr,
            },
            executor: ExecutorEnds {
                control: exec_sup,
                netd: exec_netd,
                approvald: exec_appr,
            },
            approvald: ApprovaldEnds {
                control: appr_sup,
                netd: appr_netd,
                executor: appr_exec,
                web: appr_web,
            },
            web: WebEnds {
                control: web_sup,
                approvald: web_appr,
                supervisor: web_disc,
            },
        })
    }
}

/// The descriptor numbers a role inherits, from [`TOPOLOGY`]: (channel, its number here).
pub fn inherited_by(role: Role) -> Vec<(ChannelKind, i32)> {
    TOPOLOGY
        .iter()
        .flat_map(|e| {
            [(e.asker, e.asker_fd), (e.answerer, e.answerer_fd)]
                .into_iter()
                .filter(move |(r, _)| *r == role)
                .filter_map(move |(_, fd)| fd.map(|fd| (e.kind, fd)))
        })
        .collect()
}

/// Which control channel the supervisor uses to reach `role`.
pub fn control_channel(role: Role) -> Option<ChannelKind> {
    TOPOLOGY
        .iter()
        .find(|e| e.asker == Role::Supervisor && e.answerer == role)
        .map(|e| e.kind)
}

/// A worker process of the tree: a role the supervisor starts and controls, that is an
/// answerer of one of its control channels in [`TOPOLOGY`] (a test checks the list).
/// Parsed once from the hidden argument a worker is started with; each has its own
/// ends and its own `Start` settings ([`crate::worker::ControlChannel::Settings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worker {
    Netd,
    Executor,
    Approvald,
    Web,
}

impl Worker {
    /// Every worker, in the order the supervisor drains them.
    pub const ALL: [Worker; 4] = [
        Worker::Web,
        Worker::Netd,
        Worker::Executor,
        Worker::Approvald,
    ];

    pub fn role(self) -> Role {
        match self {
            Worker::Netd => Role::Netd,
            Worker::Executor => Role::Executor,
            Worker::Approvald => Role::Approvald,
            Worker::Web => Role::Web,
        }
    }

    /// The worker playing `role`, if a worker does.
    pub fn of(role: Role) -> Option<Worker> {
        Worker::ALL.into_iter().find(|w| w.role() == role)
    }

    /// Its name: the argument it is started with, and its process name after `nl2sh-`.
    pub fn name(self) -> &'static str {
        self.role().as_str()
    }

    /// The worker named `name` (see [`Worker::name`]).
    pub fn parse(name: &str) -> Option<Worker> {
        Worker::ALL.into_iter().find(|w| w.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workers_are_the_answerers_of_the_supervisors_control_channels() {
        let mut answerers: Vec<Role> = TOPOLOGY
            .iter()
            .filter(|e| e.asker == Role::Supervisor)
            .map(|e| e.answerer)
            .collect();
        let mut workers: Vec<Role> = Worker::ALL.iter().map(|w| w.role()).collect();
        answerers.sort_by_key(|r| r.as_str());
        workers.sort_by_key(|r| r.as_str());
        assert_eq!(answerers, workers);
        for w in Worker::ALL {
            assert_eq!(Worker::parse(w.name()), Some(w));
            assert_eq!(Worker::of(w.role()), Some(w));
            assert!(control_channel(w.role()).is_some());
        }
        assert_eq!(Worker::parse("supervisor"), None);
        assert_eq!(Worker::parse("cli"), None);
        assert_eq!(Worker::of(Role::Supervisor), None);
    }

    #[test]
    fn timed_ui_grant_requests_take_their_answers() {
        use crate::channels::{
            ApprovalId, CliErrorKind, CliRequest as Q, CliResponse as A, OwnerAction as O,
            OwnerProof, OwnerRequest, OwnerResponse as R,
        };
        use crate::Secret;
        let act = |action| OwnerRequest::Act {
            proof: OwnerProof {
                session: Secret::new("s".into()),
                csrf: None,
            },
            action,
        };
        let id = || ApprovalId("ab12".into());
        let approve = || O::ApproveForUi {
            id: id(),
            phrase: None,
            minutes: 10,
        };
        let revoke = || O::RevokeUiGrant { id: "g1".into() };
        assert!(WebApprovald::answers(&act(approve()), &R::Done));
        assert!(WebApprovald::answers(&act(revoke()), &R::Done));
        assert!(WebApprovald::answers(
            &act(O::UiGrants),
            &R::UiGrants(Vec::new())
        ));
        assert!(!WebApprovald::answers(&act(O::UiGrants), &R::Done));
        assert!(!WebApprovald::answers(
            &act(approve()),
            &R::UiGrants(Vec::new())
        ));
        let error = || A::Error {
            kind: CliErrorKind::InvalidRequest,
            message: String::new(),
        };
        let cli_approve = || Q::ApproveForUi {
            id: id(),
            phrase: None,
            minutes: 10,
        };
        let cli_revoke = || Q::RevokeUiGrant { id: "g1".into() };
        assert!(CliApprovald::answers(&cli_approve(), &A::Done));
        assert!(CliApprovald::answers(&cli_approve(), &error()));
        assert!(CliApprovald::answers(&cli_revoke(), &A::Done));
        assert!(CliApprovald::answers(&cli_revoke(), &error()));
        assert!(CliApprovald::answers(
            &Q::UiGrants,
            &A::UiGrants(Vec::new())
        ));
        assert!(!CliApprovald::answers(&Q::UiGrants, &A::Done));
    }

    #[test]
    fn every_role_inherits_distinct_descriptors_above_stdio() {
        for role in [Role::Netd, Role::Executor, Role::Approvald, Role::Web] {
            let fds: Vec<i32> = inherited_by(role).into_iter().map(|(_, fd)| fd).collect();
            let mut unique = fds.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(fds.len(), unique.len(), "{role:?}: {fds:?}");
            assert!(fds.iter().all(|fd| *fd > 2), "{role:?}: {fds:?}");
        }
        // The listeners are placed beside the channels, never on one of them.
        assert!(!inherited_by(Role::Netd)
            .iter()
            .any(|(_, fd)| *fd == fds::NETD_LISTENER));
        assert!(!inherited_by(Role::Web)
            .iter()
            .any(|(_, fd)| *fd == fds::WEB_LISTENER));
        assert_eq!(inherited_by(Role::Netd).len(), 3);
        assert_eq!(inherited_by(Role::Executor).len(), 3);
        assert_eq!(inherited_by(Role::Approvald).len(), 4);
        assert_eq!(inherited_by(Role::Web).len(), 3);
        assert!(inherited_by(Role::Supervisor).is_empty());
        assert!(inherited_by(Role::Cli).is_empty());
    }

    #[test]
    fn servers_do_not_ask_their_askers() {
        // No two edges between the same workers in opposite directions, and netd answers
        // only the supervisor. The one exception: the Web console asks the supervisor
        // for discovery, which the supervisor answers without asking anything back.
        for a in &TOPOLOGY {
            if a.kind == ChannelKind::WebSupervisor || a.kind == ChannelKind::SupervisorWeb {
                continue;
            }
            assert!(
                !TOPOLOGY
                    .iter()
                    .any(|b| b.asker == a.answerer && b.answerer == a.asker),
                "{a:?}"
            );
            if a.answerer == Role::Netd {
                assert_eq!(a.asker, Role::Supervisor);
            }
        }
        // The Web console answers only the supervisor, and asks only approvald (the
        // owner's requests) and the supervisor (discovery): never netd or the executor.
        for e in &TOPOLOGY {
            if e.answerer == Role::Web {
                assert_eq!(e.asker, Role::Supervisor);
            }
            if e.asker == Role::Web {
                assert!(
                    matches!(e.answerer, Role::Approvald | Role::Supervisor),
                    "{e:?}"
                );
            }
            if e.asker == Role::Netd {
                assert!(!matches!(e.kind, ChannelKind::WebApprovald));
            }
        }
        // Only the executor asks approvald for decisions.
        assert_eq!(
            TOPOLOGY
                .iter()
                .find(|e| e.kind == ChannelKind::ExecutorApprovald)
                .map(|e| e.asker),
            Some(Role::Executor)
        );
        for role in [Role::Netd, Role::Executor, Role::Approvald, Role::Web] {
            assert!(control_channel(role).is_some(), "{role:?}");
        }
    }

    #[tokio::test]
    async fn a_pair_greets_and_an_impostor_is_refused() {
        let (a, b) = pair::<NetdExecutor>().unwrap();
        let (ra, rb) = tokio::join!(a.greet(), b.greet());
        ra.unwrap();
        rb.unwrap();
        // Someone answering the executor channel as if it were the store.
        let (a, b) = pair::<NetdExecutor>().unwrap();
        let fake = Answerer::<NetdApprovald>::from_std(b.into_std());
        let (ra, rb) = tokio::join!(a.greet(), fake.greet());
        assert!(ra.is_err() && rb.is_err());
    }
}
