//! `ListTasks` page tokens. A token carries the last task of a page (its update time and
//! id) and a MAC, keyed by a random key of this store, over it and a digest of the
//! filters: a token decodes only for the filters it was issued for, and only in the
//! approvald that issued it.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use nl2sh_proto::channels::{StoreErrorKind, TaskQuery, TaskState};
use nl2sh_proto::limits::MAX_ID_BYTES;

use nl2sh_proto::channels::StoreFailure;

/// First byte of a page token, which changes if its layout does.
const TOKEN_VERSION: u8 = 1;
/// Bytes of the MAC a page token carries.
const TOKEN_MAC_BYTES: usize = 16;
const TOKEN_DOMAIN: &[u8] = b"nl2sh-task-page-token-v1\0";
const FILTER_DOMAIN: &[u8] = b"nl2sh-task-filters-v1\0";

/// Where a page starts: after this task, in list order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) updated_ms: i64,
    pub(crate) id: String,
}

/// SHA-256 of `query`'s filters (not its page size or token), each field tagged and
/// length-prefixed so distinct filters never digest alike.
pub(crate) fn filter_digest(query: &TaskQuery) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(FILTER_DOMAIN);
    let text = |h: &mut Sha256, t: Option<&str>| match t {
        None => h.update([0u8]),
        Some(t) => {
            h.update([1u8]);
            h.update((t.len() as u64).to_be_bytes());
            h.update(t.as_bytes());
        }
    };
    text(&mut h, query.context_id.as_ref().map(|c| c.0.as_str()));
    text(&mut h, query.state.map(TaskState::as_a2a));
    match query.updated_after_ms {
        None => h.update([0u8]),
        Some(ms) => {
            h.update([1u8]);
            h.update(ms.to_be_bytes());
        }
    }
    h.update([u8::from(query.include_owner)]);
    h.finalize().into()
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn token_mac(key: &[u8; 32], filters: &[u8; 32], cursor: &Cursor) -> [u8; 32] {
    hmac_sha256(
        key,
        &[
            TOKEN_DOMAIN,
            filters,
            &cursor.updated_ms.to_be_bytes(),
            cursor.id.as_bytes(),
        ],
    )
}

/// Hex of: version, the cursor's update time (8 bytes) and id, the first
/// [`TOKEN_MAC_BYTES`] of its MAC.
pub(crate) fn encode_token(key: &[u8; 32], filters: &[u8; 32], cursor: &Cursor) -> String {
    let mac = token_mac(key, filters, cursor);
    let mut bytes = Vec::with_capacity(1 + 8 + cursor.id.len() + TOKEN_MAC_BYTES);
    bytes.push(TOKEN_VERSION);
    bytes.extend_from_slice(&cursor.updated_ms.to_be_bytes());
    bytes.extend_from_slice(cursor.id.as_bytes());
    bytes.extend_from_slice(&mac[..TOKEN_MAC_BYTES]);
    hex::encode(bytes)
}

/// The cursor of a token this store issued for these filters; anything else is
/// `BadPageToken`.
pub(crate) fn decode_token(
    key: &[u8; 32],
    filters: &[u8; 32],
    token: &str,
) -> Result<Cursor, StoreFailure> {
    let bad = || {
        StoreFailure::new(
            StoreErrorKind::BadPageToken,
            "the page token was not issued by this store for these filters (tokens do not \
             outlive a restart, and are bound to the filters of the first page)",
        )
    };
    const MIN: usize = 1 + 8 + 1 + TOKEN_MAC_BYTES;
    const MAX: usize = 1 + 8 + MAX_ID_BYTES + TOKEN_MAC_BYTES;
    if token.len() < 2 * MIN || token.len() > 2 * MAX {
        return Err(bad());
    }
    let bytes = hex::decode(token).map_err(|_| bad())?;
    if bytes[0] != TOKEN_VERSION {
        return Err(bad());
    }
    let (body, mac) = bytes.split_at(bytes.len() - TOKEN_MAC_BYTES);
    let mut ms = [0u8; 8];
    ms.copy_from_slice(&body[1..9]);
    let id = std::str::from_utf8(&body[9..]).map_err(|_| bad())?;
    let cursor = Cursor {
        updated_ms: i64::from_be_bytes(ms),
        id: id.to_owned(),
    };
    let expected = token_mac(key, filters, &cursor);
    // Compared in full whatever differs first.
    if !bool::from(expected[..TOKEN_MAC_BYTES].ct_eq(mac)) {
        return Err(bad());
    }
    Ok(cursor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl2sh_proto::channels::ContextId;

    fn query(context: Option<&str>, state: Option<TaskState>, after: Option<i64>) -> TaskQuery {
        TaskQuery {
            include_owner: false,
            context_id: context.map(|c| ContextId(c.into())),
            state,
            updated_after_ms: after,
            page_size: 10,
            page_token: None,
        }
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2 of RFC 4231.
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        let mac = hmac_sha256(
            &[0xaa; 131],
            &[b"Test Using Larger Than Block-Size Key - Hash Key First"],
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn tokens_decode_only_with_their_key_and_filters() {
        let key = [7u8; 32];
        let filters = filter_digest(&query(Some("c"), None, None));
        let cursor = Cursor {
            updated_ms: -5,
            id: "task-é".into(),
        };
        let token = encode_token(&key, &filters, &cursor);
        assert_eq!(decode_token(&key, &filters, &token).unwrap(), cursor);
        let bad = |t: &str, k: &[u8; 32], f: &[u8; 32]| {
            decode_token(k, f, t).unwrap_err().kind == StoreErrorKind::BadPageToken
        };
        assert!(bad(&token, &[8u8; 32], &filters));
        for other in [
            query(None, None, None),
            query(Some("d"), None, None),
            query(Some("c"), Some(TaskState::Working), None),
            query(Some("c"), None, Some(0)),
        ] {
            assert!(bad(&token, &key, &filter_digest(&other)));
        }
        let mut flipped = token.clone().into_bytes();
        flipped[4] = if flipped[4] == b'0' { b'1' } else { b'0' };
        assert!(bad(std::str::from_utf8(&flipped).unwrap(), &key, &filters));
        for junk in [
            "",
            "zz",
            "0",
            &token[..token.len() - 2],
            &format!("{token}00"),
        ] {
            assert!(bad(junk, &key, &filters), "{junk}");
        }
        assert!(bad(&"ab".repeat(400), &key, &filters));
    }

    #[test]
    fn filter_digests_tell_fields_apart() {
        let a = filter_digest(&query(Some("TASK_STATE_WORKING"), None, None));
        let b = filter_digest(&query(None, Some(TaskState::Working), None));
        assert_ne!(a, b);
        let mut q = query(None, None, None);
        let base = filter_digest(&q);
        q.page_size = 99;
        q.page_token = Some("x".into());
        assert_eq!(filter_digest(&q), base);
    }
}
