//! Everything the nl2sh processes say to each other, and the limits of the product
//! contract (docs/PROTOCOLS.md, "Limits") that more than one process enforces.
//!
//! Each channel of docs/ARCHITECTURE.md ("Channels") has exactly one request/response pair in [`channels`];
//! what a peer may ask for is fixed by those types. Frames are a u32 big-endian length
//! followed by bincode 2 (serde mode) of a [`frame::Envelope`], bounded by
//! [`limits::MAX_FRAME_BYTES`] before any allocation.

#![deny(unsafe_code)]

pub mod announcement;
pub mod argv_pattern;
pub mod carried;
pub mod channels;
pub mod clock;
pub mod config;
pub mod display;
pub mod flock;
pub mod frame;
pub mod handshake;
pub mod hint;
pub mod ids;
pub mod journal;
pub mod limits;
pub mod platform;
pub mod private_dir;
pub mod private_file;
pub mod procfs;
pub mod read_sources;
pub mod requester;
pub mod rpc;
pub mod seccomp;
pub mod secret;
pub mod snapshot;
pub mod state_layout;
pub mod stored_text;
#[allow(unsafe_code)] // the one room for it in this crate, each block with a SAFETY comment
pub mod sys;
#[doc(hidden)]
pub mod test_skip;
pub mod text;
pub mod token;
pub mod topology;
pub mod ui_grants;
pub mod unix_socket;
pub mod worker;

pub use frame::FrameError;
pub use secret::Secret;
