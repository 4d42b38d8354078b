//! The mutation check's mutants (`hack/mutants/`, `make mutation-check`)
//! still apply to `src/`: each breaks one guard the fault soak must catch,
//! and a mutant that no longer applies leaves its guard undefended without
//! a word until someone runs the check (six of seven had gone stale).

use std::process::Command;

use crate::support::repo_root;

#[test]
fn every_mutant_still_applies_to_the_guard_it_breaks() {
    let root = repo_root();
    let mut patches: Vec<_> = std::fs::read_dir(root.join("hack/mutants"))
        .expect("hack/mutants is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "patch"))
        .collect();
    patches.sort();
    assert!(patches.len() >= 7, "the mutants: {patches:?}");
    let stale: Vec<String> = patches
        .iter()
        .filter(|patch| {
            let checked = Command::new("git")
                .args(["apply", "--check"])
                .arg(patch)
                .current_dir(&root)
                .output()
                .expect("git runs");
            !checked.status.success()
        })
        .map(|patch| patch.display().to_string())
        .collect();
    assert!(
        stale.is_empty(),
        "these mutants no longer apply to src/; bring each up to date with the guard it breaks: {stale:?}"
    );
}
