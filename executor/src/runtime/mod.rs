//! The Tool Runtime: one pipeline for every call, in this order —
//! registration → argument validation → preparation → risk assessment → resource locks →
//! approval → privilege binding → execution → audit.
//!
//! A tool only registers (name, description, schema) and prepares (turns validated
//! arguments into an exact action with its assessment, identity, resources and a run
//! function): that contract is in [`crate::tools`]. Everything else is here, shared by
//! every tool.

pub mod authority;
pub mod locks;
pub mod outbox;
pub mod pipeline;
