//! Length-prefixed bincode frames. Every decoder here treats its input as hostile: the
//! length is checked before allocating, the body must decode completely with no trailing
//! bytes, and the envelope's channel tag must be the one this side expects.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::limits::MAX_FRAME_BYTES;

/// A message type that travels on exactly one channel in one direction. The tag is
/// written into every frame so a frame meant for another channel (or the reply
/// direction) is rejected by type, not by luck of the bincode variant numbering.
pub trait Wire: Serialize + DeserializeOwned + Send + 'static {
    const TAG: u16;
    /// Short name for log lines.
    const NAME: &'static str;
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub tag: u16,
    /// Request id; a response carries the id of its request. 0 is used by the handshake.
    pub id: u64,
    pub body: T,
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("channel closed")]
    Closed,
    #[error("channel closed in the middle of a frame")]
    Truncated,
    #[error("frame of {0} bytes is over the {MAX_FRAME_BYTES} byte limit")]
    Oversized(usize),
    #[error("empty frame")]
    Empty,
    #[error("undecodable {expected} frame: {reason}")]
    Undecodable {
        expected: &'static str,
        reason: String,
    },
    #[error("{0} trailing bytes after a complete frame")]
    TrailingBytes(usize),
    #[error("frame for another channel (tag {got:#06x}, expected {expected:#06x})")]
    WrongChannel { got: u16, expected: u16 },
    #[error("unexpected frame: {0}")]
    OutOfPlace(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_FRAME_BYTES>()
}

/// Encode one frame (length prefix included).
pub fn encode<T: Wire>(id: u64, body: &T) -> Result<Vec<u8>, FrameError> {
    let env = EnvelopeRef {
        tag: T::TAG,
        id,
        body,
    };
    let mut out = vec![0u8; 4];
    bincode::serde::encode_into_std_write(&env, &mut out, config()).map_err(|e| {
        FrameError::Undecodable {
            expected: T::NAME,
            reason: format!("encode: {e}"),
        }
    })?;
    let len = out.len() - 4;
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::Oversized(len));
    }
    out[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out)
}

#[derive(Serialize)]
struct EnvelopeRef<'a, T> {
    tag: u16,
    id: u64,
    body: &'a T,
}

/// Decode one frame body (without the length prefix).
pub fn decode<T: Wire>(bytes: &[u8]) -> Result<(u64, T), FrameError> {
    if bytes.is_empty() {
        return Err(FrameError::Empty);
    }
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(FrameError::Oversized(bytes.len()));
    }
    // The tag is checked before the body is decoded, so a frame for another channel is
    // reported as such even when its body would happen to decode.
    let (tag, _): (u16, usize) =
        bincode::serde::decode_from_slice(bytes, config()).map_err(|e| {
            FrameError::Undecodable {
                expected: T::NAME,
                reason: e.to_string(),
            }
        })?;
    if tag != T::TAG {
        return Err(FrameError::WrongChannel {
            got: tag,
            expected: T::TAG,
        });
    }
    let (env, used): (Envelope<T>, usize) = bincode::serde::decode_from_slice(bytes, config())
        .map_err(|e| FrameError::Undecodable {
            expected: T::NAME,
            reason: e.to_string(),
        })?;
    if used != bytes.len() {
        return Err(FrameError::TrailingBytes(bytes.len() - used));
    }
    Ok((env.id, env.body))
}

/// Read one frame. `Err(Closed)` means the peer closed cleanly between frames.
pub async fn read_frame<T: Wire, R: AsyncRead + Unpin>(r: &mut R) -> Result<(u64, T), FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..]).await?;
        if n == 0 {
            return Err(if got == 0 {
                FrameError::Closed
            } else {
                FrameError::Truncated
            });
        }
        got += n;
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::Oversized(len));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    })?;
    decode(&buf)
}

pub async fn write_frame<T: Wire, W: AsyncWrite + Unpin>(
    w: &mut W,
    id: u64,
    body: &T,
) -> Result<(), FrameError> {
    let bytes = encode(id, body)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Ping {
        A(u32),
        B(String),
    }
    impl Wire for Ping {
        const TAG: u16 = 0x7001;
        const NAME: &'static str = "Ping";
    }
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Pong {
        A(u32),
    }
    impl Wire for Pong {
        const TAG: u16 = 0x7002;
        const NAME: &'static str = "Pong";
    }

    #[test]
    fn round_trip() {
        let bytes = encode(7, &Ping::B("hi".into())).unwrap();
        let (id, v): (u64, Ping) = decode(&bytes[4..]).unwrap();
        assert_eq!((id, v), (7, Ping::B("hi".into())));
    }

    #[test]
    fn wrong_channel_is_rejected_even_when_the_body_decodes() {
        let bytes = encode(1, &Pong::A(5)).unwrap();
        let err = decode::<Ping>(&bytes[4..]).unwrap_err();
        assert!(matches!(
            err,
            FrameError::WrongChannel {
                got: 0x7002,
                expected: 0x7001
            }
        ));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut bytes = encode(1, &Ping::A(5)).unwrap()[4..].to_vec();
        bytes.push(0);
        assert!(matches!(
            decode::<Ping>(&bytes),
            Err(FrameError::TrailingBytes(1))
        ));
    }

    #[tokio::test]
    async fn oversized_length_is_refused_before_allocation() {
        let len = (MAX_FRAME_BYTES as u32 + 1).to_be_bytes();
        let mut r: &[u8] = &len;
        assert!(matches!(
            read_frame::<Ping, _>(&mut r).await,
            Err(FrameError::Oversized(_))
        ));
    }

    #[tokio::test]
    async fn truncation_is_distinguished_from_clean_close() {
        let mut empty: &[u8] = &[];
        assert!(matches!(
            read_frame::<Ping, _>(&mut empty).await,
            Err(FrameError::Closed)
        ));
        let bytes = encode(1, &Ping::B("hello".into())).unwrap();
        for cut in 1..bytes.len() {
            let mut r: &[u8] = &bytes[..cut];
            assert!(matches!(
                read_frame::<Ping, _>(&mut r).await,
                Err(FrameError::Truncated)
            ));
        }
    }

    #[test]
    fn huge_declared_string_length_does_not_allocate() {
        // tag, id, variant 1 (B), then a varint string length of u64::MAX.
        let bytes = [
            0xfb, 0x01, 0x70, 0x01, 0x01, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ];
        assert!(decode::<Ping>(&bytes).is_err());
    }
}
