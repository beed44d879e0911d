//! Tests of the risk module: command lines (`lines`, and the bypass classes in
//! `bypass` and `readonly`), every table row (`tables`, `grammar`), paths (`paths`),
//! nl2sh's own files (`protected`) and robustness against arbitrary input (`fuzz`).

mod bypass;
mod commands;
mod fuzz;
mod grammar;
mod lines;
mod paths;
mod protected;
mod readonly;
mod tables;

use nl2sh_proto::channels::RiskLevel;

use super::{assess_shell, assess_shell_protected, Assessment, Protected};

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

/// What a line must get: a floor, or exactly a level.
#[derive(Debug, Clone, Copy)]
enum Want {
    Min(RiskLevel),
    Is(RiskLevel),
}

/// Check every row against `protected`, and report all failures at once.
fn check_rows(rows: &[(&str, Want)], protected: &Protected) {
    let mut failures = Vec::new();
    for (line, want) in rows {
        let a = assess_shell_protected(line, protected);
        let ok = match want {
            Want::Min(level) => a.level >= *level,
            Want::Is(level) => a.level == *level,
        };
        if !ok {
            failures.push(format!(
                "{line:?}: want {want:?}, got {:?} {:?}",
                a.level, a.reasons
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
