//! The text an enum is stored and shown as (an audit column, a `--json` field), and back.
//! One table per enum, so the name a row is written with is the name it is read by.

use crate::channels::{CallOrigin, Decision, Identity, RiskLevel};

pub trait StoredText: Copy + PartialEq + std::fmt::Debug + 'static {
    /// Every value, each once.
    const ALL: &'static [Self];
    fn as_text(self) -> &'static str;
    /// The value stored as `text`; `None` for text no value of this build is stored as
    /// (a row written by a newer build, or changed by hand).
    fn from_text(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.as_text() == text)
    }
}

impl StoredText for RiskLevel {
    const ALL: &'static [Self] = &[
        RiskLevel::ReadOnly,
        RiskLevel::Low,
        RiskLevel::Medium,
        RiskLevel::High,
        RiskLevel::Dangerous,
        RiskLevel::Critical,
    ];
    fn as_text(self) -> &'static str {
        self.as_str()
    }
}

impl StoredText for CallOrigin {
    const ALL: &'static [Self] = &[
        CallOrigin::McpHttp,
        CallOrigin::McpStdio,
        CallOrigin::AgentHttp,
        CallOrigin::AgentStdio,
        CallOrigin::OwnerTui,
    ];
    fn as_text(self) -> &'static str {
        self.as_str()
    }
}

impl StoredText for Identity {
    const ALL: &'static [Self] = &[Identity::Root, Identity::Shell, Identity::Launching];
    fn as_text(self) -> &'static str {
        self.as_str()
    }
}

impl StoredText for Decision {
    const ALL: &'static [Self] = &[
        Decision::Allowed,
        Decision::AutoApproved,
        Decision::Granted,
        Decision::Approved,
        Decision::Refused,
        Decision::Rejected,
        Decision::Expired,
        Decision::Withdrawn,
    ];
    fn as_text(self) -> &'static str {
        self.as_str()
    }
}

/// `#[serde(with = "nl2sh_proto::stored_text::optional")]`: an `Option` of a
/// [`StoredText`] serialised as its text, so that what is written keeps its meaning when
/// an enum gains a value or changes order. Unknown text reads as `None`.
pub mod optional {
    use super::StoredText;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: StoredText>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.map(T::as_text).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: StoredText>(
        deserializer: D,
    ) -> Result<Option<T>, D::Error> {
        let text = Option::<String>::deserialize(deserializer)?;
        Ok(text.as_deref().and_then(T::from_text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed<T: StoredText>(value: T) {
        assert!(T::ALL.contains(&value));
        assert_eq!(T::from_text(value.as_text()), Some(value));
    }

    fn round_trips<T: StoredText>() {
        let mut texts: Vec<_> = T::ALL.iter().map(|v| v.as_text()).collect();
        texts.sort_unstable();
        texts.dedup();
        assert_eq!(texts.len(), T::ALL.len(), "one text per value");
        assert_eq!(T::from_text("no such value"), None);
    }

    /// The matches have no wildcard: a value added to an enum fails to compile here
    /// until it is listed (in `ALL` too, or `listed` fails).
    #[test]
    fn every_value_has_one_text_and_reads_back() {
        for v in RiskLevel::ALL {
            match v {
                RiskLevel::ReadOnly
                | RiskLevel::Low
                | RiskLevel::Medium
                | RiskLevel::High
                | RiskLevel::Dangerous
                | RiskLevel::Critical => listed(*v),
            }
        }
        for v in CallOrigin::ALL {
            match v {
                CallOrigin::McpHttp
                | CallOrigin::McpStdio
                | CallOrigin::AgentHttp
                | CallOrigin::AgentStdio
                | CallOrigin::OwnerTui => listed(*v),
            }
        }
        for v in Identity::ALL {
            match v {
                Identity::Root | Identity::Shell | Identity::Launching => listed(*v),
            }
        }
        for v in Decision::ALL {
            match v {
                Decision::Allowed
                | Decision::AutoApproved
                | Decision::Granted
                | Decision::Approved
                | Decision::Refused
                | Decision::Rejected
                | Decision::Expired
                | Decision::Withdrawn => listed(*v),
            }
        }
        round_trips::<RiskLevel>();
        round_trips::<CallOrigin>();
        round_trips::<Identity>();
        round_trips::<Decision>();
    }
}
