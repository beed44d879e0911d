//! The Tool Runtime: one pipeline for every call ([`pipeline`]), in this order, each
//! stage a function with its own result: registered (the catalog lists the tool) →
//! validated (its arguments) → prepared (the tool's exact action, with its risk
//! assessment) → assessed (where it would run unasked) → resource locks → decided
//! (approval) → bound (privilege binding) → ran (execution) → recorded (audit).
//!
//! A tool only registers (name, description, schema) and prepares (turns validated
//! arguments into an exact action with its assessment, identity, resources and a run
//! function): that contract is in [`crate::tools`]. Everything else is here, shared by
//! every tool.

pub mod authority;
pub mod locks;
pub mod outbox;
pub mod pipeline;
