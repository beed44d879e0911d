//! The first frame on every channel, in both directions: who is speaking, on which
//! channel, at which protocol version. A worker refuses to start unless the handshake on
//! its supervisor fd completes.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::frame::{read_frame, write_frame, FrameError, Wire};

pub const MAGIC: [u8; 8] = *b"NL2SH\0ch";
/// Bumped whenever any channel enum changes shape; both sides must match exactly (they
/// are always the same executable, so a mismatch means something else is on the fd).
pub const PROTOCOL_VERSION: u32 = 11;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Supervisor,
    Netd,
    Executor,
    Approvald,
    Web,
    Cli,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Supervisor => "supervisor",
            Role::Netd => "netd",
            Role::Executor => "executor",
            Role::Approvald => "approvald",
            Role::Web => "web",
            Role::Cli => "cli",
        }
    }
}

/// The channels of docs/ARCHITECTURE.md, "Channels".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChannelKind {
    SupervisorNetd,
    SupervisorExecutor,
    SupervisorApprovald,
    NetdExecutor,
    NetdApprovald,
    ExecutorApprovald,
    CliApprovald,
    SupervisorWeb,
    WebApprovald,
    WebSupervisor,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub magic: [u8; 8],
    pub version: u32,
    pub channel: ChannelKind,
    pub role: Role,
}

impl Wire for Hello {
    const TAG: u16 = 0x0001;
    const NAME: &'static str = "Hello";
}

/// Send our hello, read the peer's, and check it is the peer this channel must have.
pub async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    channel: ChannelKind,
    me: Role,
    peer: Role,
) -> Result<(), FrameError> {
    let hello = Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        channel,
        role: me,
    };
    write_frame(stream, 0, &hello).await?;
    let (id, got): (u64, Hello) = read_frame(stream).await?;
    if id != 0 || got.magic != MAGIC {
        return Err(FrameError::OutOfPlace("handshake: bad magic".into()));
    }
    if got.version != PROTOCOL_VERSION {
        return Err(FrameError::OutOfPlace(format!(
            "handshake: peer speaks version {}, we speak {PROTOCOL_VERSION}",
            got.version
        )));
    }
    if got.channel != channel || got.role != peer {
        return Err(FrameError::OutOfPlace(format!(
            "handshake: peer says it is {:?} on {:?}, expected {:?} on {:?}",
            got.role, got.channel, peer, channel
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn matching_peers_complete() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
        let (ra, rb) = tokio::join!(
            handshake(
                &mut a,
                ChannelKind::NetdExecutor,
                Role::Netd,
                Role::Executor
            ),
            handshake(
                &mut b,
                ChannelKind::NetdExecutor,
                Role::Executor,
                Role::Netd
            ),
        );
        ra.unwrap();
        rb.unwrap();
    }

    #[tokio::test]
    async fn impostor_is_refused() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
        // Netd pretending to be the executor on the approvals channel.
        let (_, rb) = tokio::join!(
            handshake(
                &mut a,
                ChannelKind::ExecutorApprovald,
                Role::Netd,
                Role::Approvald
            ),
            handshake(
                &mut b,
                ChannelKind::ExecutorApprovald,
                Role::Approvald,
                Role::Executor
            ),
        );
        assert!(matches!(rb, Err(FrameError::OutOfPlace(_))));
    }
}
