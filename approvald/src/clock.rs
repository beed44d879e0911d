//! The clock is proto's ([`nl2sh_proto::clock`]), one for every process. Named here too
//! for the supervisor's callers that still reach it through approvald.

pub use nl2sh_proto::clock::{now_unix_ms, rfc3339_millis};
