//! Cutting text that ends up in messages, logs and results to a byte bound without
//! splitting a UTF-8 character.

/// `s` cut to at most `max` bytes on a char boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` bytes, with `…` appended when anything was cut.
pub fn shortened(s: &str, max: usize) -> String {
    let kept = prefix(s, max);
    if kept.len() == s.len() {
        kept.to_string()
    } else {
        format!("{kept}…")
    }
}

/// `s` made to fit in `max` bytes: unchanged if it does, else cut on a char boundary with
/// `…` appended, the whole at most `max` bytes (what a sender keeps to before a
/// receiver that checks the same bound).
pub fn fit(s: &str, max: usize) -> String {
    const MARK: &str = "…";
    if s.len() <= max {
        return s.to_string();
    }
    if max < MARK.len() {
        return prefix(s, max).to_string();
    }
    let mut kept = prefix(s, max - MARK.len()).to_string();
    kept.push_str(MARK);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(prefix("abc", 5), "abc");
        assert_eq!(prefix("abc", 2), "ab");
        // "é" is two bytes: a cut inside it keeps neither half.
        assert_eq!(prefix("aé", 2), "a");
        assert_eq!(prefix("é", 0), "");
        assert_eq!(shortened("aé", 2), "a…");
        assert_eq!(shortened("ab", 2), "ab");
        assert_eq!(fit("abcdef", 6), "abcdef");
        assert_eq!(fit("abcdef", 5), "ab…");
        assert_eq!(fit("abcdef", 2), "ab");
        for max in 0..12 {
            assert!(fit("aé€😀xyz", max).len() <= max);
        }
    }
}
