//! `protocol/approvals.sock`: mode, same-uid service, other uids refused, peers from the
//! nl2sh process tree refused, stale files, and removal on exit.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use common::{summary, Rig};
use nl2sh_approvald::peer::{Pid, Refusal, TreeRoot};
use nl2sh_approvald::socket::{ApprovalsSocket, PeerPolicy};
use nl2sh_proto::channels::{CallId, CliErrorKind, CliRequest, CliResponse, Decision, RiskLevel};
use nl2sh_proto::frame::encode;
use nl2sh_proto::handshake::{handshake, ChannelKind, Hello, Role, MAGIC, PROTOCOL_VERSION};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::state_layout::APPROVALS_SOCK;
use nl2sh_proto::topology::{Asker, CliApprovald};

type CliClient = RpcClient<CliApprovald>;

/// Env var that turns `peer_helper` into the connecting side of `another_uid_is_refused`.
const HELPER_ENV: &str = "NL2SH_APPROVALD_TEST_PEER_SOCKET";
const HELPER_REFUSED: i32 = 42;
const HELPER_ANSWERED: i32 = 43;
const HELPER_NO_CONNECT: i32 = 44;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// A connection to the socket at `path` the way the CLI makes it (at any depth).
fn stream_to(path: &Path) -> UnixStream {
    let stream = nl2sh_proto::unix_socket::connect(path).unwrap();
    stream.set_nonblocking(true).unwrap();
    UnixStream::from_std(stream).unwrap()
}

async fn connect(path: &Path) -> CliClient {
    let stream = stream_to(path);
    CliClient::start(Asker::connected(stream).unwrap())
        .await
        .unwrap()
        .0
}

struct Served {
    path: std::path::PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), nl2sh_approvald::socket::SocketError>>,
}

/// Served with the uid check only (the tests are not below a supervisor).
fn serve(rig: &Rig) -> Served {
    serve_with(rig, PeerPolicy::SameUid)
}

fn serve_with(rig: &Rig, policy: PeerPolicy) -> Served {
    let socket = ApprovalsSocket::bind(rig.dir.path()).unwrap();
    let path = socket.path().to_owned();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(socket.serve(
        rig.authority.clone(),
        rig.local.clone(),
        policy,
        async move {
            let _ = stopped.await;
        },
    ));
    Served {
        path,
        stop: Some(stop),
        task,
    }
}

#[tokio::test]
async fn serves_the_same_uid_and_is_removed_on_exit() {
    let rig = Rig::new().await;
    let mut served = serve(&rig);
    assert_eq!(served.path, APPROVALS_SOCK.in_dir(rig.dir.path()));
    let meta = std::fs::symlink_metadata(&served.path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(mode(&served.path), 0o600);
    assert_eq!(mode(&rig.dir.path().join("protocol")), 0o700);

    let cli = connect(&served.path).await;
    match cli.call(&CliRequest::ListPending).await.unwrap() {
        CliResponse::Pending(list) => assert!(list.is_empty()),
        other => panic!("{other:?}"),
    }
    let waiting = rig.decide_later(summary(3, RiskLevel::Critical));
    let first = rig.decide_later(summary(2, RiskLevel::Medium));
    rig.wait_pending(2).await;
    let list = match cli.call(&CliRequest::ListPending).await.unwrap() {
        CliResponse::Pending(list) => list,
        other => panic!("{other:?}"),
    };
    assert_eq!(list.len(), 2);
    let p = list
        .iter()
        .find(|p| p.call_id == CallId(3))
        .unwrap()
        .clone();
    let phrase = p.phrase.clone().unwrap();
    assert_eq!(phrase, format!("approve critical {}", p.id));
    let error = |resp| match resp {
        CliResponse::Error { kind, message } => (kind, message),
        other => panic!("expected an error, got {other:?}"),
    };
    let (kind, message) = error(
        cli.call(&CliRequest::Approve {
            id: p.id.clone(),
            phrase: None,
        })
        .await
        .unwrap(),
    );
    assert_eq!(kind, CliErrorKind::PhraseRequired);
    assert!(message.contains(&phrase), "{message}");
    let (kind, _) = error(
        cli.call(&CliRequest::Approve {
            id: p.id.clone(),
            phrase: Some("approve critical nope".into()),
        })
        .await
        .unwrap(),
    );
    assert_eq!(kind, CliErrorKind::WrongPhrase);
    assert!(matches!(
        cli.call(&CliRequest::Approve {
            id: p.id.clone(),
            phrase: Some(phrase),
        })
        .await
        .unwrap(),
        CliResponse::Done
    ));
    assert_eq!(waiting.await.unwrap().0, Decision::Approved);
    let (kind, _) = error(
        cli.call(&CliRequest::Reject {
            id: "aaaaaa".into(),
        })
        .await
        .unwrap(),
    );
    assert_eq!(kind, CliErrorKind::NoSuchRequest);
    let other = list.iter().find(|p| p.call_id == CallId(2)).unwrap();
    assert!(matches!(
        cli.call(&CliRequest::Reject {
            id: other.id.clone()
        })
        .await
        .unwrap(),
        CliResponse::Done
    ));
    assert_eq!(first.await.unwrap().0, Decision::Rejected);

    // Several connections at once are fine.
    let second = connect(&served.path).await;
    assert!(matches!(
        second.call(&CliRequest::ListPending).await.unwrap(),
        CliResponse::Pending(_)
    ));

    // Clean exit: connections close and the file is gone.
    served.stop.take().unwrap().send(()).unwrap();
    served.task.await.unwrap().unwrap();
    assert!(!served.path.exists());
    assert!(cli.call(&CliRequest::ListPending).await.is_err());
}

/// `nl2sh web login` and `nl2sh web logout --all` reach the session table over the
/// socket (and so only from a person outside the nl2sh tree).
#[tokio::test]
async fn web_login_codes_and_logout_all_come_over_the_socket() {
    use nl2sh_proto::channels::{csrf_for, OwnerProof};
    let rig = Rig::new().await;
    let served = serve(&rig);
    let cli = connect(&served.path).await;
    let code = match cli.call(&CliRequest::WebLogin).await.unwrap() {
        CliResponse::LoginCode { code, valid_secs } => {
            assert_eq!(valid_secs, 120);
            assert_eq!(code.expose().len(), 64);
            assert!(code
                .expose()
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            code
        }
        other => panic!("{other:?}"),
    };
    let login = rig.sessions.redeem(&code).unwrap();
    let proof = OwnerProof {
        csrf: Some(csrf_for(&login.session)),
        session: login.session,
    };
    assert!(rig.sessions.check(&proof, true).is_ok());
    // An unused code goes with the sessions.
    let unused = match cli.call(&CliRequest::WebLogin).await.unwrap() {
        CliResponse::LoginCode { code, .. } => code,
        other => panic!("{other:?}"),
    };
    assert!(matches!(
        cli.call(&CliRequest::WebLogoutAll).await.unwrap(),
        CliResponse::LoggedOut { sessions: 1 }
    ));
    assert!(rig.sessions.check(&proof, false).is_err());
    assert!(rig.sessions.redeem(&unused).is_err());
}

#[tokio::test]
async fn a_wrong_handshake_is_closed() {
    let rig = Rig::new().await;
    let served = serve(&rig);
    let mut stream = stream_to(&served.path);
    // The executor's role on the CLI channel.
    let r = handshake(
        &mut stream,
        ChannelKind::CliApprovald,
        Role::Executor,
        Role::Approvald,
    )
    .await;
    // Our hello is answered with approvald's (the check is on its side), then it closes.
    assert!(r.is_ok());
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0))), "{read:?} {rest:?}");
    let cli = connect(&served.path).await;
    assert!(cli.call(&CliRequest::ListPending).await.is_ok());
}

#[tokio::test]
async fn a_stale_socket_is_replaced_and_anything_else_is_refused() {
    let rig = Rig::new().await;
    let protocol = rig.dir.path().join("protocol");
    let path = APPROVALS_SOCK.in_dir(rig.dir.path());
    // A socket left by a killed run.
    drop(nl2sh_proto::unix_socket::bind(&path).unwrap());
    assert!(path.exists());
    let socket = ApprovalsSocket::bind(rig.dir.path()).unwrap();
    assert_eq!(mode(&path), 0o600);
    // Dropping it (without serving) removes it too.
    drop(socket);
    assert!(!path.exists());

    std::fs::write(&path, "not a socket").unwrap();
    let e = ApprovalsSocket::bind(rig.dir.path()).err().unwrap();
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert!(path.exists(), "a file that is not ours is left alone");
    std::fs::remove_file(&path).unwrap();

    // A loose protocol directory is refused.
    std::fs::set_permissions(&protocol, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(ApprovalsSocket::bind(rig.dir.path()).is_err());
}

/// The connecting side of `another_uid_is_refused`, run in a child process as another
/// uid; does nothing in a normal test run.
#[test]
fn peer_helper() {
    let Some(path) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let code = match nl2sh_proto::unix_socket::connect(Path::new(&path)) {
        Err(e) => {
            eprintln!("connect: {e}");
            HELPER_NO_CONNECT
        }
        Ok(mut stream) => {
            let hello = Hello {
                magic: MAGIC,
                version: PROTOCOL_VERSION,
                channel: ChannelKind::CliApprovald,
                role: Role::Cli,
            };
            let _ = stream.write_all(&encode(0, &hello).unwrap());
            let list = encode(1, &CliRequest::ListPending).unwrap();
            let _ = stream.write_all(&list);
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut buf = [0u8; 64];
            match stream.read(&mut buf) {
                // Closed without a byte of answer.
                Ok(0) => HELPER_REFUSED,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => HELPER_REFUSED,
                Ok(_) => HELPER_ANSWERED,
                Err(e) => {
                    eprintln!("read: {e}");
                    HELPER_ANSWERED
                }
            }
        }
    };
    std::process::exit(code);
}

#[tokio::test]
async fn another_uid_is_refused_without_an_answer() {
    if !nix::unistd::geteuid().is_root() {
        nl2sh_proto::test_skip::skip("needs root to connect as another uid");
        return;
    }
    let rig = Rig::new().await;
    let served = serve(&rig);
    // Let uid 65534 reach the socket through the file system, so only the SO_PEERCRED
    // check stands between it and the approvals.
    for dir in [rig.dir.path().to_owned(), rig.dir.path().join("protocol")] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&served.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    rig.wait_pending(1).await;

    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe);
    child
        .args(["--exact", "peer_helper", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, &served.path)
        .uid(65534)
        .gid(65534);
    let output = match tokio::task::spawn_blocking(move || child.output())
        .await
        .unwrap()
    {
        Ok(output) => output,
        Err(e) => {
            nl2sh_proto::test_skip::skip(format_args!("cannot start a process as uid 65534: {e}"));
            rig.reject(&rig.pending().await[0].id).await.unwrap();
            return;
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(HELPER_REFUSED),
        "helper: {} {stderr}",
        output.status
    );
    // It changed nothing; the owner is still served.
    let pending = rig.pending().await;
    assert_eq!(pending.len(), 1);
    let cli = connect(&served.path).await;
    assert!(matches!(
        cli.call(&CliRequest::Reject {
            id: pending[0].id.clone()
        })
        .await
        .unwrap(),
        CliResponse::Done
    ));
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
}

/// A state directory so deep that the socket's path is far past what a socket address
/// holds: bound and served all the same, with the same mode, and removed on exit.
#[tokio::test]
async fn a_state_directory_at_any_depth_is_served() {
    let rig = Rig::new().await;
    let mut state = rig.dir.path().to_path_buf();
    while state.as_os_str().len() < 220 {
        state.push("a-state-directory-nested-deeply");
    }
    std::fs::create_dir_all(&state).unwrap();
    let socket = ApprovalsSocket::bind(&state).unwrap();
    let path = socket.path().to_owned();
    assert_eq!(path, APPROVALS_SOCK.in_dir(&state));
    assert_eq!(
        Path::new(APPROVALS_SOCK.parent()).join(APPROVALS_SOCK.name()),
        Path::new(APPROVALS_SOCK.path)
    );
    assert!(path.as_os_str().len() > 200, "{}", path.display());
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(mode(&path), 0o600);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(socket.serve(
        rig.authority.clone(),
        rig.local.clone(),
        PeerPolicy::SameUid,
        async move {
            let _ = stopped.await;
        },
    ));
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    rig.wait_pending(1).await;
    let cli = connect(&path).await;
    match cli.call(&CliRequest::ListPending).await.unwrap() {
        CliResponse::Pending(list) => assert_eq!(list.len(), 1),
        other => panic!("{other:?}"),
    }
    rig.reject(&rig.pending().await[0].id).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    assert!(!path.exists());
}

/// Send a hello and `req` without waiting for the handshake, then read: `true` if the
/// connection was closed without a byte of answer.
async fn closed_unanswered(path: &Path, req: &CliRequest) -> bool {
    let mut stream = stream_to(path);
    let hello = Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        channel: ChannelKind::CliApprovald,
        role: Role::Cli,
    };
    // Either write may fail once approvald has closed.
    let _ = stream.write_all(&encode(0, &hello).unwrap()).await;
    let _ = stream.write_all(&encode(1, req).unwrap()).await;
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
        Ok(Ok(0)) => true,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        Ok(Ok(_)) => false,
        Ok(Err(e)) => panic!("read: {e}"),
        Err(_) => panic!("approvald neither answered nor closed"),
    }
}

/// Run `peer_helper` (as our uid) against `path`; its exit code.
async fn helper_exit_code(path: &Path) -> Option<i32> {
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe);
    child
        .args(["--exact", "peer_helper", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, path);
    let output = tokio::task::spawn_blocking(move || child.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.code().is_some(),
        "helper: {} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.status.code()
}

/// A tool command runs as approvald's uid, below the supervisor: it must not approve its
/// own request (through `nl2sh protocol approve` under `script`, or any other way).
#[tokio::test]
async fn a_peer_in_the_nl2sh_tree_is_refused_without_an_answer() {
    let rig = Rig::new().await;
    // The test process plays the supervisor: it and everything it starts are the tree.
    let root = Pid::new(std::process::id()).unwrap();
    let served = serve_with(&rig, PeerPolicy::OutsideTree(root));
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    let pending = rig.wait_pending(1).await;
    let id = pending[0].id.clone();

    // The root itself.
    let approve = CliRequest::Approve {
        id: id.clone(),
        phrase: None,
    };
    assert!(closed_unanswered(&served.path, &approve).await);
    assert!(closed_unanswered(&served.path, &CliRequest::ListPending).await);
    // A process it started (a descendant, as a tool command is of the supervisor).
    assert_eq!(helper_exit_code(&served.path).await, Some(HELPER_REFUSED));
    // A proper handshake gets nothing either: approvald closes before its hello.
    let mut stream = stream_to(&served.path);
    let r = handshake(
        &mut stream,
        ChannelKind::CliApprovald,
        Role::Cli,
        Role::Approvald,
    )
    .await;
    assert!(r.is_err(), "the handshake was answered");

    // Nothing was approved; the request still waits.
    let still = rig.pending().await;
    assert_eq!(still.len(), 1);
    assert_eq!(still[0].id, id);
    assert!(!waiting.is_finished());
    rig.reject(&id).await.unwrap();
    assert_eq!(waiting.await.unwrap().0, Decision::Rejected);
    assert!(served.path.exists());
}

/// A peer that does not descend from the tree root (a person's shell) is served as before.
#[tokio::test]
async fn a_peer_outside_the_nl2sh_tree_is_served() {
    let rig = Rig::new().await;
    // A root that is not an ancestor of this test.
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let root = Pid::new(sleeper.id()).unwrap();
    let mut served = serve_with(&rig, PeerPolicy::OutsideTree(root));
    let waiting = rig.decide_later(summary(1, RiskLevel::Medium));
    let pending = rig.wait_pending(1).await;

    let cli = connect(&served.path).await;
    assert!(matches!(
        cli.call(&CliRequest::Approve {
            id: pending[0].id.clone(),
            phrase: None,
        })
        .await
        .unwrap(),
        CliResponse::Done
    ));
    assert_eq!(waiting.await.unwrap().0, Decision::Approved);
    // A child of ours is outside that tree too.
    assert_eq!(helper_exit_code(&served.path).await, Some(HELPER_ANSWERED));

    // Once the root is gone its tree cannot be told apart: everyone is refused.
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(closed_unanswered(&served.path, &CliRequest::ListPending).await);

    served.stop.take().unwrap().send(()).unwrap();
    served.task.await.unwrap().unwrap();
    assert!(!served.path.exists());
}

/// The check itself on a connection: a live child is in the tree of the test process and
/// outside any other; once it has exited (and been reaped) it is refused whatever the
/// root, since what holds its pid now cannot be verified to be it.
#[test]
fn a_peer_that_is_gone_is_refused() {
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("peer.sock");
    let listener = nl2sh_proto::unix_socket::bind(&path).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .args(["--exact", "peer_helper", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (stream, _) = listener.accept().unwrap();
    let cred =
        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).unwrap();
    assert_eq!(u32::try_from(cred.pid()).unwrap(), child.id());

    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let elsewhere = TreeRoot::new(Pid::new(sleeper.id()).unwrap());
    let here = TreeRoot::new(Pid::new(std::process::id()).unwrap());
    elsewhere.check_peer(stream.as_fd(), cred.pid()).unwrap();
    let r = here.check_peer(stream.as_fd(), cred.pid());
    assert!(matches!(r, Err(Refusal::InTree { depth: 1, .. })), "{r:?}");

    // Closed unanswered: the helper exits; reap it.
    stream.shutdown(std::net::Shutdown::Both).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(HELPER_REFUSED));
    let r = elsewhere.check_peer(stream.as_fd(), cred.pid());
    assert!(r.is_err(), "a reaped peer was let through");
    if elsewhere.guarded() {
        assert!(
            matches!(
                r,
                Err(Refusal::Gone(_) | Refusal::Proc { .. } | Refusal::Pidfd { .. })
            ),
            "{r:?}"
        );
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[tokio::test]
async fn the_owners_terminal_console_reads_tasks_through_approvald() {
    let rig = Rig::new().await;
    match rig.cli(CliRequest::Tasks { limit: 10 }).await {
        CliResponse::Tasks(list) => assert!(list.is_empty(), "{list:?}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        rig.cli(CliRequest::Task {
            id: nl2sh_proto::channels::TaskId("none".into())
        })
        .await,
        CliResponse::Task(None)
    ));
}
