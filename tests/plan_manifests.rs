//! `plan --file` over a whole application's manifests (`examples/whole-app.yaml`): workloads of every kind become
//! the pods their controllers would run now, pods get their PriorityClass's priority, and the objects the planner
//! does not read are skipped with notes instead of failing the file.

use std::collections::BTreeMap;
use std::process::Command;

const FILE: &str = "examples/whole-app.yaml";

const NOTES: [&str; 3] = [
    "cronjob/backup (namespace shop): no pods until its schedule fires; not planned",
    "job/migrate-orders (namespace shop): suspended; no pods until it is resumed",
    "skipped 3 objects the planner does not read: ConfigMap ×1, Secret ×1, Ingress ×1",
];

fn plan(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .args(["plan", "--file", FILE])
        .args(args)
        .output()
        .expect("runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "plan failed: {stderr}");
    (stdout.into_owned(), stderr.into_owned())
}

/// The owner of each planned pod key (`shop/reindex-b2x7q` → `reindex`), counted.
fn by_workload(keys: &[String]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for k in keys {
        let name = k.strip_prefix("shop/").unwrap_or_else(|| panic!("{k} is not in namespace shop"));
        let owner = name.rsplit_once('-').map_or(name, |(owner, _)| owner);
        *out.entry(owner.to_string()).or_insert(0) += 1;
    }
    out
}

#[test]
fn a_whole_application_plans_its_workloads_and_notes_the_rest() {
    let (stdout, _) = plan(&["-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("stdout stays JSON");
    let notes: Vec<&str> = v["notes"].as_array().expect("notes").iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(notes, NOTES);

    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
    };
    let mut placed = Vec::new();
    for c in v["newNodeClaims"].as_array().unwrap() {
        placed.extend(keys(&c["pods"]));
    }
    let pending: Vec<&serde_json::Value> = v["pending"].as_array().unwrap().iter().collect();
    let ignored: Vec<&serde_json::Value> = v["ignored"].as_array().unwrap().iter().collect();
    assert!(pending.is_empty() && ignored.is_empty(), "pending {pending:?}, ignored {ignored:?}");
    // 3 storefront replicas, min(parallelism 3, completions 5) reindex pods, 2 postgres; the suspended Job and
    // the CronJob none.
    let want: BTreeMap<String, usize> =
        [("storefront", 3), ("reindex", 3), ("postgres", 2)].into_iter().map(|(k, n)| (k.to_string(), n)).collect();
    assert_eq!(by_workload(&placed), want, "{placed:?}");
    assert!(placed.contains(&"shop/postgres-0".to_string()) && placed.contains(&"shop/postgres-1".to_string()));

    assert_eq!(v["karpenterVersion"], "1.15", "the newest modelled, unless --karpenter-version says");

    // The human form: the notes first, then whose decisions, then the plan.
    let (table, _) = plan(&[]);
    let expected =
        format!("NOTES\n{}\n\nKarpenter 1.15 decisions\n\n8 pods considered: 8 on new NodeClaims", NOTES.join("\n"));
    assert!(table.starts_with(&expected), "{table}");
    let (table, _) = plan(&["--karpenter-version", "1.14"]);
    assert!(table.contains("Karpenter 1.14 decisions"), "{table}");
}

#[test]
fn an_unknown_karpenter_version_is_refused_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .args(["plan", "--file", FILE, "--karpenter-version", "1.13"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--karpenter-version") && stderr.contains("1.14 or 1.15"), "{stderr}");
}

#[test]
fn the_whole_application_gets_its_priorities_and_claims() {
    let m =
        karpenter_tui::cli::plan::load(FILE, karpenter_tui::engine::version::KarpenterVersion::NEWEST).expect("loads");
    let pods = m.pending_view();
    assert_eq!(pods.len(), 8);
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap();
        let s = p.spec();
        let (priority, class) = if name.starts_with("storefront-") {
            (100_000, "shop-critical")
        } else {
            // The globalDefault class, for the pods that name none.
            (1000, "shop-default")
        };
        assert_eq!(s.priority, Some(priority), "{name}");
        assert_eq!(s.priority_class_name.as_deref(), Some(class), "{name}");
        assert_eq!(s.preemption_policy.as_deref(), Some("PreemptLowerPriority"), "{name}");
    }
    let snap = m.snapshot();
    let claims: Vec<(&str, Option<&str>)> = snap
        .pvcs
        .iter()
        .map(|c| (c.metadata.name.as_deref().unwrap(), c.spec.as_ref().and_then(|s| s.storage_class_name.as_deref())))
        .collect();
    assert_eq!(claims, [("data-postgres-0", Some("gp3")), ("data-postgres-1", Some("gp3"))]);
}
