//! Compile-time provenance for `build_identity` (docs/PROTOCOLS.md, "MCP": nl2sh_inspect). Anything that cannot
//! be learned is left unset, and inspect reports it as null.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

fn main() {
    if let Some(top) = git(&["rev-parse", "--show-toplevel"]) {
        println!("cargo:rerun-if-changed={top}/.git/HEAD");
        println!("cargo:rerun-if-changed={top}/.git/index");
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={top}/.git/{head_ref}");
        }
    }
    println!("cargo:rerun-if-env-changed=NL2SH_BUILD_ID");
    if let Some(commit) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=NL2SH_GIT_COMMIT={commit}");
        if let Some(status) = git(&["status", "--porcelain", "--untracked-files=no"]) {
            let dirty = if status.is_empty() { "false" } else { "true" };
            println!("cargo:rustc-env=NL2SH_GIT_DIRTY={dirty}");
        }
    }
    // A build id names this particular build; packagers may set their own.
    let build_id = std::env::var("NL2SH_BUILD_ID").ok().or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        Some(format!("{secs}-{}", std::process::id()))
    });
    if let Some(id) = build_id {
        println!("cargo:rustc-env=NL2SH_BUILD_ID={id}");
    }
    if let Ok(target) = std::env::var("TARGET") {
        println!("cargo:rustc-env=NL2SH_TARGET={target}");
    }
    if let Ok(profile) = std::env::var("PROFILE") {
        println!("cargo:rustc-env=NL2SH_PROFILE={profile}");
    }
}
