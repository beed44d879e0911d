//! `<state>/protocol/approvals.sock`: the local CLI's way to list, approve and reject
//! pending requests (docs/ARCHITECTURE.md, "Channels"). Only approvald listens on it.
//!
//! * The socket is created in the private `protocol/` directory (0700), then set to 0600
//!   and checked; a stale socket left by an earlier run is removed first (the supervisor
//!   holds the state lock, so no other instance is using it).
//! * Every connection's peer uid (SO_PEERCRED) must be approvald's euid; any other peer
//!   is logged and closed before a byte is sent to it.
//! * Approval must come from a person, so with [`PeerPolicy::OutsideTree`] (production:
//!   the tree rooted at the supervisor) a peer that is in the nl2sh process tree (a tool
//!   command, or a worker) is logged and closed the same way; see [`crate::peer`].
//! * Then the handshake (`CliApprovald`, we are `Approvald`, the peer `Cli`), then
//!   [`CliRequest`](nl2sh_proto::channels::CliRequest)s until the peer closes. These
//!   checks are also what keeps Web console login codes (`WebLogin`) from tool commands.
//! * At most [`MAX_CONNECTIONS`] connections at once; more are closed at once.
//! * The file is removed when the listener is dropped (clean exit).

use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt};
use tokio::net::UnixStream;
use tokio::task::JoinSet;

use nl2sh_proto::private_dir::{open_private_dir, Create, PrivateDirError, WideMode};
use nl2sh_proto::state_layout::APPROVALS_SOCK;
use nl2sh_proto::topology::{Answerer, CliApprovald};
use nl2sh_proto::unix_socket;

use crate::authority::Authority;
use crate::dispatch;
use crate::dispatch::LocalOwner;
use crate::peer::TreeRoot;

pub use crate::peer::PeerPolicy;

/// CLI connections served at once.
pub const MAX_CONNECTIONS: usize = 16;
/// Longest wait for a connected peer's hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {why}", .path.display())]
    Unsafe { path: PathBuf, why: String },
    #[error(transparent)]
    Dir(#[from] PrivateDirError),
}

/// The bound approvals socket. Dropping it removes the file (if it is still ours).
pub struct ApprovalsSocket {
    listener: Option<std::os::unix::net::UnixListener>,
    path: PathBuf,
    /// (device, inode) of the file we created.
    file_id: (u64, u64),
}

impl ApprovalsSocket {
    /// Bind `<state_dir>/protocol/approvals.sock` with mode 0600, at any depth of
    /// `state_dir` (bound through the directory checked here; see
    /// [`nl2sh_proto::unix_socket`]).
    pub fn bind(state_dir: &Path) -> Result<ApprovalsSocket, SocketError> {
        let dir_path = state_dir.join(APPROVALS_SOCK.parent());
        // Prepared by the supervisor; a wider mode now means something changed it.
        let dir = open_private_dir(&dir_path, Create::IfMissing, WideMode::Refuse)?;
        let path = dir_path.join(APPROVALS_SOCK.name());
        let io_err = |what, path: &Path| {
            let path = path.to_owned();
            move |source| SocketError::Io { what, path, source }
        };
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_socket() || meta.file_type().is_symlink() => {
                tracing::info!(path = %path.display(), "removing a stale approvals socket");
                std::fs::remove_file(&path).map_err(io_err("cannot remove", &path))?;
            }
            Ok(_) => {
                return Err(SocketError::Unsafe {
                    path,
                    why: "exists and is not a socket; remove it by hand".into(),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("cannot inspect", &path)(e)),
        }
        let listener = unix_socket::bind_in(dir.as_fd(), &dir_path, APPROVALS_SOCK.name().as_ref())
            .map_err(io_err("cannot listen on", &path))?;
        let created = std::fs::symlink_metadata(&path).map_err(io_err("cannot inspect", &path))?;
        // Whatever goes wrong from here, the file does not outlive us.
        let socket = ApprovalsSocket {
            listener: Some(listener),
            path,
            file_id: (created.dev(), created.ino()),
        };
        let path = socket.path.clone();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(APPROVALS_SOCK.mode))
            .map_err(io_err("cannot restrict the mode of", &path))?;
        let meta = std::fs::symlink_metadata(&path).map_err(io_err("cannot inspect", &path))?;
        let euid = nix::unistd::geteuid().as_raw();
        if !meta.file_type().is_socket()
            || meta.uid() != euid
            || meta.mode() & 0o777 != APPROVALS_SOCK.mode
            || (meta.dev(), meta.ino()) != socket.file_id
        {
            return Err(SocketError::Unsafe {
                path,
                why: format!(
                    "must be a socket owned by uid {euid} with mode 0600 (found mode {:o}, uid {})",
                    meta.mode() & 0o777,
                    meta.uid()
                ),
            });
        }
        if let Some(l) = &socket.listener {
            l.set_nonblocking(true)
                .map_err(io_err("cannot configure", &path))?;
        }
        Ok(socket)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accept and serve CLI connections until `shutdown` resolves (or accepting fails);
    /// then close every connection and remove the file. Peers are checked by `policy`
    /// (besides the uid) before the handshake.
    pub async fn serve(
        mut self,
        authority: Arc<Authority>,
        local: Arc<LocalOwner>,
        policy: PeerPolicy,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), SocketError> {
        let path = self.path.clone();
        let Some(std_listener) = self.listener.take() else {
            return Ok(());
        };
        let listener =
            tokio::net::UnixListener::from_std(std_listener).map_err(|source| SocketError::Io {
                what: "cannot listen on",
                path: path.clone(),
                source,
            })?;
        let euid = nix::unistd::geteuid().as_raw();
        // Held (by pidfd) from here on: a root that dies refuses every later peer.
        let tree = policy.tree_root().map(|root| Arc::new(TreeRoot::new(root)));
        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        let result = loop {
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) if transient(&e) => {
                            tracing::warn!(error = %e, "approvals socket: accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                        Err(source) => break Err(SocketError::Io {
                            what: "cannot accept on",
                            path: path.clone(),
                            source,
                        }),
                    };
                    while connections.try_join_next().is_some() {}
                    if connections.len() >= MAX_CONNECTIONS {
                        tracing::warn!(
                            limit = MAX_CONNECTIONS,
                            "approvals socket: too many connections; closing a new one"
                        );
                        continue;
                    }
                    connections.spawn(connection(
                        stream,
                        euid,
                        tree.clone(),
                        authority.clone(),
                        local.clone(),
                    ));
                }
            }
        };
        connections.shutdown().await;
        drop(listener);
        // `self` drops here and removes the file.
        result
    }
}

impl Drop for ApprovalsSocket {
    fn drop(&mut self) {
        // Only the file we created: never something that replaced it.
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.file_id);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the approvals socket");
            }
        }
    }
}

/// Errors after which accepting can go on (a peer that vanished, or descriptors/memory
/// short for a moment).
fn transient(e: &io::Error) -> bool {
    use nix::libc;
    matches!(
        e.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::EINTR
                | libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::EPROTO
        )
    ) || e.kind() == io::ErrorKind::WouldBlock
}

/// One CLI connection: same uid only, and (with a tree root) not from the nl2sh process
/// tree, then the handshake, then requests.
async fn connection(
    stream: UnixStream,
    euid: u32,
    tree: Option<Arc<TreeRoot>>,
    authority: Arc<Authority>,
    local: Arc<LocalOwner>,
) {
    let cred = match getsockopt(&stream, sockopt::PeerCredentials) {
        Ok(cred) => cred,
        Err(e) => {
            tracing::warn!(error = %e, "approvals socket: no peer credentials; closing");
            return;
        }
    };
    if cred.uid() != euid {
        tracing::warn!(
            peer_uid = cred.uid(),
            peer_pid = cred.pid(),
            uid = euid,
            "approvals socket: peer is another user; closing without an answer"
        );
        return;
    }
    if let Some(tree) = tree {
        // A few small /proc reads per generation: done in place, like the uid check.
        if let Err(refusal) = tree.check_peer(stream.as_fd(), cred.pid()) {
            if refusal.is_in_tree() {
                tracing::warn!(
                    peer_pid = cred.pid(),
                    peer_uid = cred.uid(),
                    tree_root = %tree.root(),
                    reason = %refusal,
                    "approvals socket: peer descends from the nl2sh process tree \
                     (approval must come from a person); closing without an answer"
                );
            } else {
                tracing::warn!(
                    peer_pid = cred.pid(),
                    peer_uid = cred.uid(),
                    tree_root = %tree.root(),
                    error = %refusal,
                    "approvals socket: cannot verify that the peer is outside the nl2sh \
                     process tree; closing without an answer"
                );
            }
            return;
        }
    }
    tracing::debug!(peer_pid = cred.pid(), "approvals CLI connected");
    let end = match Answerer::<CliApprovald>::connected(stream) {
        Ok(end) => end,
        Err(e) => {
            tracing::warn!(error = %e, "approvals socket: cannot take the connection");
            return;
        }
    };
    if let Err(e) = dispatch::serve_cli(end, authority, local).await {
        tracing::warn!(error = %e, peer_pid = cred.pid(), "approvals socket: connection closed");
    }
}
