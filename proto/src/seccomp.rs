//! What every seccomp filter of the tree shares: the one error type, this machine's
//! filter architecture and a condition on a 32-bit argument. The sandbox's deny-list
//! (`executor/src/sandbox/seccomp.rs`) builds on these; so does the table engine of the
//! two workers that confine themselves, netd and the Web console
//! (`http-worker/src/seccomp.rs`), which lives with them because nothing else writes
//! an allow-list.

use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, TargetArch};

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("no seccomp filter for this architecture ({0})")]
    Arch(&'static str),
    #[error("seccomp table: {0}")]
    Table(String),
    #[error("building the seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    #[error("installing the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
}

/// The filter architecture of the running binary.
pub fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH))
}

/// `op(argument arg, value)` on the argument's low 32 bits (flags, descriptors, ids).
pub fn dword(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}
