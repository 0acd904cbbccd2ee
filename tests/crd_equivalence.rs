//! What `deploy/crds` installs accepts, refuses, defaults and lists exactly as upstream Karpenter v1.14.1's published
//! CRDs do: a cluster runs one CRD per kind, shared with upstream Karpenter.
//!
//! Every CRD in deploy/crds is compared with upstream's file of the same name, read from the directory
//! `KARPENTER_TUI_CRDS` names if it is set, else `$CARGO_MANIFEST_DIR/../shared/data/crds`, else
//! `/work/shared/data/crds` (upstream's files stay outside the repository; the test fails, naming where it looked,
//! if it finds none). The comparison walks both
//! `openAPIV3Schema` trees and compares every keyword but `description` (`required` as a set), and at the CRD level
//! the name, group, names (kind, plural, singular, listKind, shortNames, categories), scope, and per version
//! served, storage, subresources (scale paths included) and additionalPrinterColumns (in order, without their
//! descriptions).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Where upstream's CRDs are; panics naming every place it looked. `KARPENTER_TUI_CRDS`, when set, is the only place.
fn upstream_dir() -> PathBuf {
    let candidates = match std::env::var_os("KARPENTER_TUI_CRDS") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/crds"),
            PathBuf::from("/work/shared/data/crds"),
        ],
    };
    candidates.iter().find(|d| d.join("karpenter.sh_nodepools.yaml").is_file()).cloned().unwrap_or_else(|| {
        panic!(
            "upstream Karpenter's CRDs not found (no karpenter.sh_nodepools.yaml) in any of {candidates:?}; set \
             KARPENTER_TUI_CRDS to the directory that holds them"
        )
    })
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_value(yaml).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "absent".to_string(), |v| v.to_string())
}

/// Any two JSON values, recursively; numbers by value (`100` equals `100.0`).
fn compare_values(path: &str, ours: Option<&Value>, theirs: Option<&Value>, out: &mut Vec<String>) {
    match (ours, theirs) {
        (None, None) => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                compare_values(&format!("{path}.{k}"), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare_values(&format!("{path}[{i}]"), Some(x), Some(y), out);
            }
        }
        (Some(Value::Number(a)), Some(Value::Number(b))) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: ours {}, upstream {}", show(a), show(b))),
    }
}

/// Two schema nodes: every keyword but `description`; properties by name; `required` as a set. Paths read as the
/// object's fields: `.spec.template.spec.requirements[].key`, `{}` for a map's values.
fn compare_schema(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    let (Some(a), Some(b)) = (ours.as_object(), theirs.as_object()) else {
        compare_values(path, Some(ours), Some(theirs), out);
        return;
    };
    let at = if path.is_empty() { "(root)" } else { path };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).filter(|k| *k != "description").collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        match (key.as_str(), a.get(key), b.get(key)) {
            ("properties", Some(Value::Object(pa)), Some(Value::Object(pb))) => {
                let mut names: Vec<&String> = pa.keys().chain(pb.keys()).collect();
                names.sort();
                names.dedup();
                for name in names {
                    let sub = format!("{path}.{name}");
                    match (pa.get(name), pb.get(name)) {
                        (Some(x), Some(y)) => compare_schema(&sub, x, y, out),
                        (Some(_), None) => out.push(format!("{sub}: a field upstream does not declare")),
                        (None, Some(_)) => out.push(format!("{sub}: a field upstream declares is missing")),
                        (None, None) => unreachable!(),
                    }
                }
            }
            ("items", Some(x), Some(y)) => compare_schema(&format!("{path}[]"), x, y, out),
            ("additionalProperties", Some(x @ Value::Object(_)), Some(y @ Value::Object(_))) => {
                compare_schema(&format!("{path}{{}}"), x, y, out)
            }
            ("anyOf" | "allOf" | "oneOf", Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
                for (i, (x, y)) in x.iter().zip(y).enumerate() {
                    compare_schema(&format!("{path} {key}[{i}]"), x, y, out);
                }
            }
            ("required", x, y) => {
                let sorted = |v: Option<&Value>| {
                    v.cloned().map(|mut v| {
                        if let Some(list) = v.as_array_mut() {
                            list.sort_by_key(|s| s.to_string());
                        }
                        v
                    })
                };
                compare_values(&format!("{at} required"), sorted(x).as_ref(), sorted(y).as_ref(), out);
            }
            (_, x, y) => compare_values(&format!("{at} {key}"), x, y, out),
        }
    }
}

/// Everything but the schemas and descriptions, then the schemas.
fn compare_crd(ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    compare_values("metadata.name", ours.pointer("/metadata/name"), theirs.pointer("/metadata/name"), out);
    let without = |v: &Value, key: &str| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove(key);
        }
        v
    };
    let (spec_a, spec_b) = (&ours["spec"], &theirs["spec"]);
    compare_values("spec", Some(&without(spec_a, "versions")), Some(&without(spec_b, "versions")), out);
    let versions = |spec: &Value| -> Vec<(String, Value)> {
        spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (v["name"].as_str().unwrap_or_default().to_string(), v.clone()))
            .collect()
    };
    let (va, vb) = (versions(spec_a), versions(spec_b));
    let names = |vs: &[(String, Value)]| vs.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(&va) != names(&vb) {
        out.push(format!("spec.versions: ours {:?}, upstream {:?}", names(&va), names(&vb)));
    }
    for ((name, a), (_, b)) in va.iter().zip(&vb) {
        let strip_columns = |v: &Value| {
            let mut v = without(v, "schema");
            if let Some(columns) = v.get_mut("additionalPrinterColumns").and_then(Value::as_array_mut) {
                for c in columns.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("description");
                }
            }
            v
        };
        compare_values(&format!("spec.versions[{name}]"), Some(&strip_columns(a)), Some(&strip_columns(b)), out);
        let schema = |v: &Value| v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or(Value::Null);
        let mut diffs = Vec::new();
        compare_schema("", &schema(a), &schema(b), &mut diffs);
        out.extend(diffs.into_iter().map(|d| format!("{name} schema {d}")));
    }
}

#[test]
fn deployed_crds_are_equivalent_to_upstreams() {
    let upstream = upstream_dir();
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&deploy)
        .unwrap_or_else(|e| panic!("{}: {e}", deploy.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "deploy/crds holds {files:?}");
    let mut report = Vec::new();
    for ours in &files {
        let name = ours.file_name().expect("a file name").to_string_lossy().to_string();
        let theirs = upstream.join(&name);
        if !theirs.is_file() {
            report.push(format!("{name}: upstream has no such CRD in {}", upstream.display()));
            continue;
        }
        let mut diffs = Vec::new();
        compare_crd(&load(ours), &load(&theirs), &mut diffs);
        report.extend(diffs.into_iter().map(|d| format!("{name}: {d}")));
    }
    assert!(
        report.is_empty(),
        "deploy/crds differs from upstream's CRDs in {} ({} differences):\n{}",
        upstream.display(),
        report.len(),
        report.join("\n")
    );
}

#[test]
fn the_comparison_names_the_path_and_the_difference() {
    let upstream = serde_json::json!({
        "type": "object",
        "required": ["a", "b"],
        "properties": {
            "a": {"type": "string", "pattern": "^x$", "description": "upstream's words"},
            "b": {"type": "array", "items": {"type": "integer", "maximum": 100}},
            "c": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        },
    });
    let mut ours = upstream.clone();
    ours["required"] = serde_json::json!(["b", "a"]);
    ours["properties"]["a"]["description"] = "our words".into();
    ours["properties"]["b"]["items"]["maximum"] = serde_json::json!(100.0);
    let mut diffs = Vec::new();
    compare_schema("", &ours, &upstream, &mut diffs);
    assert!(diffs.is_empty(), "{diffs:?}");

    ours["properties"]["a"]["pattern"] = "^y$".into();
    ours["properties"]["b"]["items"]["maximum"] = serde_json::json!(50);
    ours["properties"]["c"]["additionalProperties"].as_object_mut().unwrap().remove("maxLength");
    ours["properties"]["d"] = serde_json::json!({"type": "string"});
    ours["properties"].as_object_mut().unwrap().remove("a");
    compare_schema("", &ours, &upstream, &mut diffs);
    assert_eq!(
        diffs,
        [
            ".a: a field upstream declares is missing",
            ".b[] maximum: ours 50, upstream 100",
            ".c{} maxLength: ours absent, upstream 63",
            ".d: a field upstream does not declare",
        ]
    );
}
