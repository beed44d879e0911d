//! Tests of the risk module: command lines (`lines`), every table row (`tables`),
//! paths (`paths`) and robustness against arbitrary input (`fuzz`).

mod fuzz;
mod lines;
mod paths;
mod tables;

use nl2sh_proto::channels::RiskLevel;

use super::{assess_shell, Assessment};

/// Assess and explain on failure.
fn check(line: &str, ok: impl Fn(&Assessment) -> bool, want: &str) {
    let a = assess_shell(line);
    assert!(
        ok(&a),
        "{line:?}: want {want}, got {:?} {:?} root={}",
        a.level,
        a.reasons,
        a.requires_root
    );
}

fn at_least(line: &str, level: RiskLevel) {
    check(line, |a| a.level >= level, &format!(">= {level:?}"));
}

fn exactly(line: &str, level: RiskLevel) {
    check(line, |a| a.level == level, &format!("== {level:?}"));
}
