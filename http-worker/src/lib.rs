//! What both confined HTTP workers of the tree share: netd (the internet-facing daemon)
//! and the Web console (the owner's pages). Each parses a stranger's bytes on an
//! inherited listener, unprivileged and confined; neither depends on the other.
//!
//! * [`connections`]: accepting, the connection cap with room kept for authorized
//!   callers, the header, body, idle, write-stall and lifetime timeouts;
//! * [`origin`]: the Host and Origin rule;
//! * [`refusals`]: refusals of unauthenticated requests, logged without letting a flood
//!   write a line each;
//! * [`confine`]: the one strong "am I unprivileged" check, and confinement with a
//!   worker's Landlock rules and seccomp table in, a report out;
//! * [`seccomp`]: the allow-list as data, the rows both workers need, the filters built
//!   from a table;
//! * [`sys`]: what they ask the kernel about themselves, the crate's only `unsafe`.
//!
//! The privileged roles (executor, approvald) never depend on this crate: it is the
//! HTTP stack (docs/ARCHITECTURE.md, "The one rule").

#![deny(unsafe_code)]

pub mod confine;
pub mod connections;
pub mod origin;
pub mod refusals;
pub mod seccomp;
#[allow(unsafe_code)] // the one room for it in this crate, each block with a SAFETY comment
pub mod sys;
