//! Stamps the build with the git commit it came from, for `--version` and the controller's start log.
//! `KARPENTER_TUI_GIT_COMMIT` set in the environment wins (a container build has no `.git`); without either the
//! commit reads `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KARPENTER_TUI_GIT_COMMIT");
    let commit = std::env::var("KARPENTER_TUI_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KARPENTER_TUI_GIT_COMMIT={}", commit.trim());
}

fn git_commit() -> Option<String> {
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it points at (a commit).
    let git = Path::new(".git");
    if !git.exists() {
        return None;
    }
    println!("cargo:rerun-if-changed=.git/HEAD");
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD"))
        && let Some(reference) = head.strip_prefix("ref: ")
    {
        // Only paths that exist: a missing one would rerun this script, and rebuild the crate, on every build.
        for path in [format!(".git/{}", reference.trim()), ".git/packed-refs".to_string()] {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|c| !c.is_empty())
}
