//! deploy/ stays true to the code: the CRDs are rendered from the engine's own types (run with UPDATE_CRDS=1 to
//! rewrite them, and the Helm chart's copies, after changing a type), and the ClusterRole grants every right the
//! engine checks for at start.

use std::path::PathBuf;

use karpenter_tui::engine::api::ec2nodeclass::ec2nodeclass_crd;
use karpenter_tui::engine::api::nodeclaim::nodeclaim_crd;
use karpenter_tui::engine::api::nodepool::nodepool_crd;
use karpenter_tui::kube::access::needs;
use serde::Deserialize;
use serde_yaml::Value;

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy").join(path)
}

fn render(crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition) -> String {
    let yaml = serde_yaml::to_string(&crd).expect("a CRD serialises");
    format!(
        "# Generated from src/engine/api by tests/deploy_manifests.rs (UPDATE_CRDS=1 cargo test --test integration deploy_manifests).\n{yaml}"
    )
}

#[test]
fn crds_match_the_engine_types() {
    let crds = [
        ("karpenter.sh_nodepools.yaml", render(nodepool_crd())),
        ("karpenter.sh_nodeoverlays.yaml", render(karpenter_tui::engine::api::nodeoverlay::nodeoverlay_crd())),
        ("karpenter.sh_nodeclaims.yaml", render(nodeclaim_crd())),
        ("karpenter.k8s.aws_ec2nodeclasses.yaml", render(ec2nodeclass_crd())),
    ];
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for (file, want) in &crds {
        let path = deploy(&format!("crds/{file}"));
        if update {
            std::fs::write(&path, want).expect("write CRD");
            // The Helm chart ships the same files (tests/packaging.rs checks they stay identical).
            let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/karpenter-tui/crds").join(file);
            std::fs::write(chart, want).expect("write the chart's CRD");
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if &have != want {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "stale CRDs (rerun with UPDATE_CRDS=1): {stale:?}");
}

#[test]
fn crds_are_the_upstream_kinds_with_status_subresources() {
    for (crd, plural, scope) in [
        (nodepool_crd(), "nodepools", "Cluster"),
        (nodeclaim_crd(), "nodeclaims", "Cluster"),
        (ec2nodeclass_crd(), "ec2nodeclasses", "Cluster"),
    ] {
        assert_eq!(crd.spec.names.plural, plural);
        assert_eq!(crd.spec.scope, scope, "{plural}");
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1");
        assert!(v.served && v.storage);
        assert!(v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(), "{plural} has /status");
        let schema = v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema");
        let props = schema.properties.as_ref().expect("properties");
        assert!(props.contains_key("spec") && props.contains_key("status"), "{plural}");
    }
}

#[test]
fn the_nodepool_crd_refuses_what_upstreams_refuses_and_scales() {
    let crd = nodepool_crd();
    let v = &crd.spec.versions[0];
    let scale = v.subresources.as_ref().and_then(|s| s.scale.as_ref()).expect("a scale subresource");
    assert_eq!(
        (scale.spec_replicas_path.as_str(), scale.status_replicas_path.as_str()),
        (".spec.replicas", ".status.nodes")
    );
    let spec = &v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema")
        .properties
        .as_ref()
        .expect("props")["spec"];
    let messages: Vec<&str> =
        spec.x_kubernetes_validations.iter().flatten().filter_map(|r| r.message.as_deref()).collect();
    for m in [
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        "only 'limits.nodes' is supported on static NodePools",
        "'weight' is not supported on static NodePools",
    ] {
        assert!(messages.contains(&m), "{m}: {messages:?}");
    }
    let overlay = karpenter_tui::engine::api::nodeoverlay::nodeoverlay_crd();
    assert_eq!((overlay.spec.group.as_str(), overlay.spec.versions[0].name.as_str()), ("karpenter.sh", "v1alpha1"));
    assert_eq!(overlay.spec.scope, "Cluster");
}

/// (group, resource[/subresource], verb) triples a ClusterRole grants.
fn granted() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(deploy("rbac.yaml")).expect("deploy/rbac.yaml");
    let mut out = Vec::new();
    let mut roles = 0;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc = Value::deserialize(doc).expect("rbac.yaml is YAML");
        if doc["kind"].as_str() != Some("ClusterRole") {
            continue;
        }
        roles += 1;
        let strings = |v: &Value| -> Vec<String> {
            v.as_sequence().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
        };
        for rule in doc["rules"].as_sequence().expect("rules") {
            for g in strings(&rule["apiGroups"]) {
                for r in strings(&rule["resources"]) {
                    for v in strings(&rule["verbs"]) {
                        out.push((g.clone(), r.clone(), v));
                    }
                }
            }
        }
    }
    assert_eq!(roles, 1, "one ClusterRole in deploy/rbac.yaml");
    out
}

#[test]
fn cluster_role_grants_every_right_the_engine_checks() {
    let granted = granted();
    let missing: Vec<String> = needs()
        .into_iter()
        .filter(|n| {
            let resource = match n.subresource {
                Some(s) => format!("{}/{s}", n.resource),
                None => n.resource.clone(),
            };
            !granted.iter().any(|(g, r, v)| g == &n.group && r == &resource && v == n.verb)
        })
        .map(|n| n.to_string())
        .collect();
    assert!(missing.is_empty(), "deploy/rbac.yaml lacks: {missing:?}");
    // And nothing broader than needed: no wildcards.
    assert!(granted.iter().all(|(g, r, v)| g != "*" && r != "*" && v != "*"));
}

#[test]
fn controller_deployments_run_the_controller_with_the_rbac_service_account_and_probes() {
    for file in ["controller.yaml", "controller-aws.yaml"] {
        check_controller(file);
    }
    let policy: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy("iam-policy.json")).unwrap()).expect("valid JSON");
    let actions: Vec<&str> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().filter_map(|a| a.as_str()))
        .collect();
    for needed in [
        "ec2:CreateFleet",
        "ec2:TerminateInstances",
        "ec2:DescribeInstanceStatus",
        "iam:PassRole",
        "sqs:ReceiveMessage",
        "ssm:GetParameter",
    ] {
        assert!(actions.contains(&needed), "iam-policy.json lacks {needed}");
    }
}

fn check_controller(file: &str) {
    let text = std::fs::read_to_string(deploy(file)).expect(file);
    let d: k8s_openapi::api::apps::v1::Deployment = serde_yaml::from_str(&text).expect("a Deployment");
    let rbac = std::fs::read_to_string(deploy("rbac.yaml")).unwrap();
    let sa = serde_yaml::Deserializer::from_str(&rbac)
        .map(|doc| Value::deserialize(doc).unwrap())
        .find(|v| v["kind"].as_str() == Some("ServiceAccount"))
        .expect("a ServiceAccount in rbac.yaml");
    let pod = d.spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), sa["metadata"]["name"].as_str());
    assert_eq!(d.metadata.namespace.as_deref(), sa["metadata"]["namespace"].as_str());
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap();
    assert_eq!(args[0], "controller");
    assert!(args.iter().any(|a| a == "--in-cluster"));
    let probe = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone()).unwrap()
    };
    assert_eq!(probe(&c.liveness_probe), "/healthz");
    assert_eq!(probe(&c.readiness_probe), "/readyz");
    // The arguments are ones the binary accepts.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .args(&args)
        .arg("--help")
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
