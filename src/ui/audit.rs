//! The operator audit log: one JSON object per line for every approve, reject, mode change and applied edit, with
//! its outcome, appended under the XDG state directory. Appending (never rewriting) keeps earlier lines intact if the
//! process dies mid-write.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// Wall-clock time, RFC 3339 (UTC).
    pub time: String,
    /// kube context, or "demo".
    pub context: String,
    /// approve | reject | mode | apply-nodepool
    pub action: String,
    /// The decision id, the mode, or the NodePool name.
    pub target: String,
    /// "ok", or "error: ..." with the reason.
    pub outcome: String,
    /// What the operator saw when confirming (savings, candidates) or the applied YAML's digest.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    pub fn new(path: PathBuf) -> AuditLog {
        AuditLog { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record, creating the directory and file as needed.
    pub fn append(&self, r: &AuditRecord) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_string(r).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut f = OpenOptions::new().create(true).append(true).open(&self.path)?;
        f.write_all(line.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_appended_one_json_object_per_line() {
        let dir = std::env::temp_dir().join(format!("ktui-audit-{}", std::process::id()));
        let log = AuditLog::new(dir.join("nested").join("audit.log"));
        let rec = |target: &str| AuditRecord {
            time: "2026-11-23T10:00:00Z".into(),
            context: "demo".into(),
            action: "approve".into(),
            target: target.into(),
            outcome: "ok".into(),
            detail: String::new(),
        };
        log.append(&rec("d-1")).expect("first append");
        log.append(&rec("d-2")).expect("second append");
        let text = std::fs::read_to_string(log.path()).expect("read back");
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["target"], "d-1");
        assert_eq!(lines[1]["target"], "d-2");
        assert!(lines[0].get("detail").is_none(), "empty detail is left out");
        let _ = std::fs::remove_dir_all(dir);
    }
}
