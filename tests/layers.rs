//! The layers import only downwards: engine ← controller ← {sim, kube, aws} ← shell ← {ui, cli}, with `protocol`
//! between shell and ui (docs/architecture.md, "Layers"). Checked on the source, so a back arrow fails the build's
//! tests rather than waiting for a review: each module of a layer may name (`crate::<module>`) only the modules
//! listed for it. Comments are left out (they may point anywhere).

use std::collections::BTreeSet;
use std::path::Path;

/// What each layer may use, besides itself.
const ALLOWED: &[(&str, &[&str])] = &[
    ("engine", &[]),
    ("controller", &["engine"]),
    ("sim", &["engine", "controller"]),
    ("kube", &["engine", "controller", "memory"]),
    ("aws", &["engine", "controller", "memory"]),
    ("protocol", &["engine", "controller"]),
    ("shell", &["engine", "controller", "sim", "kube", "aws", "protocol", "memory"]),
    ("ui", &["engine", "protocol", "memory"]),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::<module>` names a file's code uses, with the line of the first use.
fn used_modules(text: &str) -> Vec<(String, usize)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && seen.insert(name.clone()) {
                out.push((name, i + 1));
            }
        }
    }
    out
}

#[test]
fn every_layer_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (layer, allowed) in ALLOWED {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "no sources under src/{layer}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (module, line) in used_modules(&text) {
                if module != *layer && !allowed.contains(&module.as_str()) {
                    violations.push(format!("{}:{line}: {layer} uses crate::{module}", f.display()));
                }
            }
        }
    }
    assert!(violations.is_empty(), "imports against the layering:\n{}", violations.join("\n"));
}

#[test]
fn the_check_sees_code_and_not_comments() {
    let text = "//! see crate::sim\nuse crate::engine::api;\nlet x = crate::kube::kwok::launch(); // crate::ui\n";
    let used: Vec<String> = used_modules(text).into_iter().map(|(m, _)| m).collect();
    assert_eq!(used, ["engine", "kube"]);
}
