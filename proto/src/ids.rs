//! Every random value nl2sh makes comes from here, and from the OS random source alone
//! (`getrandom`): ids (UUID v4 text) and secrets (lowercase hex). Without the OS source
//! there is no value, never a weaker one: a caller says what it does instead.

/// The OS random source failed (its own words, unchanged).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RandomError(#[from] getrandom::Error);

/// `N` bytes from the OS random source.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(bytes)
}

/// `bytes` random bytes as lowercase hex (`2 * bytes` characters): a token, a login code,
/// a session secret, a unique name.
pub fn random_hex(bytes: usize) -> Result<String, RandomError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf)?;
    Ok(hex::encode(buf))
}

/// A fresh random UUID (version 4, RFC 9562) in its text form,
/// `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`. Ids name tasks, contexts, messages and
/// artifacts: they are unique, not credentials.
pub fn new_uuid_v4() -> Result<String, RandomError> {
    let bytes = random_bytes::<16>()?;
    Ok(uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_text_and_differ() {
        let a = new_uuid_v4().unwrap();
        let b = new_uuid_v4().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        for (i, c) in a.char_indices() {
            if [8, 13, 18, 23].contains(&i) {
                assert_eq!(c, '-', "{a}");
            } else {
                assert!(matches!(c, '0'..='9' | 'a'..='f'), "{a}");
            }
        }
        assert_eq!(&a[14..15], "4", "{a}");
        // The variant: 10xx.
        assert!("89ab".contains(&a[19..20]), "{a}");
    }

    #[test]
    fn hex_is_lowercase_of_the_length_asked() {
        for n in [0, 1, 8, 32] {
            let h = random_hex(n).unwrap();
            assert_eq!(h.len(), 2 * n);
            assert!(h.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')), "{h}");
        }
        let (a, b) = (random_hex(32).unwrap(), random_hex(32).unwrap());
        assert_ne!(a, b);
    }

    #[test]
    fn bytes_are_not_left_zero() {
        // 2^-256 odds of a false failure.
        assert_ne!(random_bytes::<32>().unwrap(), [0u8; 32]);
        assert_ne!(random_bytes::<32>().unwrap(), random_bytes::<32>().unwrap());
    }
}
