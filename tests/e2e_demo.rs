//! End to end in a real terminal: `karpenter-tui demo` runs inside tmux (a real pseudo-terminal), the test waits for
//! a consolidation proposal, approves it with `a` and confirms with `y`, then checks that the node goes away, that
//! the audit log records the approval, and that `q` gives the terminal back.
//!
//! Needs tmux (scripts/test.sh installs it when missing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    session: String,
}

impl Tmux {
    fn start(cmd: &str, state: &Path, config: &Path) -> Tmux {
        let session = format!("ktui-e2e-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &session, "-x", "120", "-y", "40"])
            .arg("-e")
            .arg(format!("KARPENTER_TUI_STATE_DIR={}", state.display()))
            .arg("-e")
            .arg(format!("KARPENTER_TUI_CONFIG_DIR={}", config.display()))
            .arg(cmd)
            .status()
            .expect("tmux is needed for this test (scripts/test.sh installs it)");
        assert!(status.success(), "tmux new-session failed");
        let t = Tmux { session };
        t.run(&["set-option", "-t", &t.session, "remain-on-exit", "on"]);
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", &self.session, k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn text(&self, t: &str) {
        self.run(&["send-keys", "-t", &self.session, "-l", t]);
        std::thread::sleep(Duration::from_millis(150));
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", &self.session])
    }

    fn dead(&self) -> bool {
        self.run(&["list-panes", "-t", &self.session, "-F", "#{pane_dead}"]).trim() == "1"
    }

    /// Polls the screen until `pred` holds, or fails with the last screen.
    fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(start.elapsed() < timeout, "timed out waiting for {what}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.session]).status();
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ktui-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Ids of proposals shown as awaiting in the Disruptions pane.
fn awaiting_ids(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| l.contains(" awaiting "))
        .filter_map(|l| l.trim_start_matches(['┃', '│', ' ']).split_whitespace().next().map(str::to_string))
        .filter(|id| id.starts_with("d-"))
        .collect()
}

#[test]
fn approve_a_consolidation_in_a_real_terminal() {
    let state = temp_dir("state");
    let config = temp_dir("config");
    let bin = env!("CARGO_BIN_EXE_karpenter-tui");
    let t = Tmux::start(&format!("{bin} demo --speed 20"), &state, &config);
    t.wait_for("the dashboard", Duration::from_secs(30), |s| s.contains("karpenter-tui") && s.contains("APPROVE"));

    // Proposals computed early can stop holding as pods arrive; the engine then withdraws them on approval. Try
    // the open ones until one is approved and started.
    let mut tried: Vec<String> = Vec::new();
    let mut approved: Option<String> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while approved.is_none() {
        assert!(Instant::now() < deadline, "no proposal could be approved; tried {tried:?}\n{}", t.screen());
        t.keys(&["4"]);
        let screen = t.wait_for("an open proposal", Duration::from_secs(90), |s| {
            awaiting_ids(s).iter().any(|id| !tried.contains(id))
        });
        let Some(id) = awaiting_ids(&screen).into_iter().find(|id| !tried.contains(id)) else { continue };
        tried.push(id.clone());
        // Filter the pane down to that proposal, so the selection is on it.
        t.keys(&["/"]);
        t.text(&format!("{id} "));
        t.keys(&["BSpace", "Enter", "g", "a"]);
        let dialog = t.wait_for("the confirmation", Duration::from_secs(10), |s| {
            s.contains("Approve d-") || s.contains("only proposals awaiting")
        });
        // The filter is a substring match (d-1 also shows d-12): take the id the dialog names.
        let Some(id) = dialog
            .split("Approve ")
            .nth(1)
            .and_then(|r| r.split('?').next())
            .filter(|x| x.starts_with("d-"))
            .map(str::to_string)
        else {
            t.keys(&["Escape", "Escape"]);
            continue;
        };
        tried.push(id.clone());
        t.keys(&["y"]);
        let after = t.wait_for("the outcome", Duration::from_secs(20), |s| {
            s.contains("approved and started") || s.contains("no longer holds") || s.contains(&format!("{id}:"))
        });
        t.keys(&["Escape", "Escape"]);
        if after.contains("approved and started") {
            approved = Some(id);
        }
    }
    let id = approved.expect("approved");

    // The audit log has the approval with its outcome, and the candidates the operator saw in the dialog.
    let audit = std::fs::read_to_string(state.join("audit.log")).expect("the audit log exists");
    let rec = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["action"] == "approve" && r["target"] == id.as_str() && r["outcome"] == "ok")
        .unwrap_or_else(|| panic!("audit log records approve {id} ok:\n{audit}"));
    let detail = rec["detail"].as_str().unwrap_or_default().to_string();
    let nodes: Vec<String> = detail
        .split("candidates=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .map(|list| list.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    assert!(!nodes.is_empty(), "the audit record names the candidates: {detail}");

    // The candidates drain and go.
    t.keys(&["3"]);
    t.wait_for("the node to go away", Duration::from_secs(90), |s| {
        s.contains("Nodes & NodeClaims")
            // Only rows of the pane count: the status line may name a node (a timeline event about a node the
            // operator already removed).
            && nodes.iter().all(|n| {
                !s.lines()
                    .filter(|l| l.starts_with(['┃', '│']))
                    .any(|l| l.replace(['┃', '│'], " ").split_whitespace().any(|w| w == n))
            })
    });

    // q leaves and gives the terminal back.
    t.keys(&["q"]);
    let start = Instant::now();
    while !t.dead() {
        assert!(start.elapsed() < Duration::from_secs(10), "q did not quit:\n{}", t.screen());
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_dir_all(&config);
}
