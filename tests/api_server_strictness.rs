//! The stand-in API server is as strict as a real one: what a real kube-apiserver does to Karpenter's custom
//! resources (pruning, defaults, the structural schema, list-map keys, the CRDs' CEL rules), checked against the
//! fake API server's admission (`tests/fake_apiserver/strict.rs`) with upstream's CRDs as published.

use crate::fake_apiserver;

use std::path::Path;

use fake_apiserver::crds;
use fake_apiserver::strict::{CrdSchema, Crds, ErrKind, FieldError, Write, invalid_status};
use serde::Deserialize as _;
use serde_json::{Value, json};

fn schema(kind: &str) -> &'static CrdSchema {
    crds().iter().find(|s| s.kind == kind).unwrap_or_else(|| panic!("no CRD for {kind}"))
}

fn nodepool(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
}

fn minimal_spec() -> Value {
    json!({"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [],
    }}})
}

/// Creates a NodePool and returns it as stored.
fn stored_nodepool(spec: Value) -> Value {
    schema("NodePool").admit(nodepool("default", spec), &Write::Create).expect("a valid NodePool")
}

fn refused(kind: &str, obj: Value, write: &Write) -> Vec<FieldError> {
    match schema(kind).admit(obj, write) {
        Ok(stored) => panic!("expected a refusal, stored {stored:#}"),
        Err(errs) => errs,
    }
}

/// The only error at `path`, asserting there is exactly one.
fn error_at<'a>(errs: &'a [FieldError], path: &str) -> &'a FieldError {
    let at: Vec<_> = errs.iter().filter(|e| e.path == path).collect();
    assert_eq!(at.len(), 1, "want one error at {path}, got {errs:#?}");
    at[0]
}

fn condition(kind: &str) -> Value {
    json!({"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Ready"})
}

// 1. Conditions: NodePool requires `message`, NodeClaim does not.

#[test]
fn nodepool_condition_without_message_is_refused() {
    let old = stored_nodepool(minimal_spec());
    let mut body = old.clone();
    body["status"] = json!({"conditions": [condition("Ready")]});
    let errs = refused("NodePool", body.clone(), &Write::Status { old: old.clone() });
    assert_eq!(errs.len(), 2, "{errs:#?}"); // the Required error, and the note that CEL rules were skipped
    let e = error_at(&errs, "status.conditions[0].message");
    assert_eq!(e.kind, ErrKind::Required);
    assert_eq!(e.to_string(), "status.conditions[0].message: Required value");

    let status = invalid_status("NodePool", "karpenter.sh", "default", &errs[..1]);
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "NodePool.karpenter.sh \"default\" is invalid: status.conditions[0].message: Required value"
    );
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "status.conditions[0].message"})
    );

    body["status"]["conditions"][0]["message"] = json!("");
    let stored = schema("NodePool").admit(body, &Write::Status { old }).expect("an empty message is a message");
    assert_eq!(stored["status"]["conditions"][0]["message"], "");
    assert_eq!(stored["status"]["nodes"], 0, "status.nodes defaults to 0");
}

#[test]
fn nodeclaim_condition_without_message_is_accepted() {
    let claim = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "default-abcde"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
    });
    let old = schema("NodeClaim").admit(claim, &Write::Create).expect("a valid NodeClaim");
    let mut body = old.clone();
    let mut c = condition("Launched");
    c.as_object_mut().unwrap().remove("reason");
    body["status"] = json!({"conditions": [c]});
    let stored =
        schema("NodeClaim").admit(body, &Write::Status { old }).expect("NodeClaim needs type/status/time only");
    assert_eq!(stored["status"]["conditions"][0]["type"], "Launched");
}

// 2. Enums.

#[test]
fn unknown_enum_value_is_unsupported() {
    let mut spec = minimal_spec();
    spec["disruption"] = json!({"consolidationPolicy": "Sometimes", "consolidateAfter": "1m"});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    let e = error_at(&errs, "spec.disruption.consolidationPolicy");
    assert_eq!(e.kind, ErrKind::Unsupported);
    assert_eq!(
        e.body(),
        r#"Unsupported value: "Sometimes": supported values: "WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced""#
    );
    assert_eq!(e.kind.reason(), "FieldValueNotSupported");
}

// 3. CEL rules and patterns on budgets.

#[test]
fn budget_schedule_without_duration_breaks_the_rule() {
    let mut spec = minimal_spec();
    spec["disruption"] = json!({"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "0 9 * * mon-fri"}]});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = error_at(&errs, "spec.disruption.budgets");
    assert_eq!(e.kind, ErrKind::Invalid);
    assert_eq!(e.body(), r#"Invalid value: "array": 'schedule' must be set with 'duration'"#);
}

#[test]
fn budget_schedule_that_is_not_cron_fails_the_pattern() {
    let mut spec = minimal_spec();
    spec["disruption"] =
        json!({"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "not a cron", "duration": "8h"}]});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    assert_eq!(errs.len(), 1, "only the pattern fires, the rule holds: {errs:#?}");
    let e = error_at(&errs, "spec.disruption.budgets[0].schedule");
    assert_eq!(e.kind, ErrKind::Invalid);
    assert!(
        e.body().starts_with(
            r#"Invalid value: "not a cron": spec.disruption.budgets[0].schedule in body should match '^(@(annually"#
        ),
        "{}",
        e.body()
    );
}

#[test]
fn budget_nodes_out_of_pattern_and_bad_duration() {
    let mut spec = minimal_spec();
    spec["disruption"] = json!({"consolidateAfter": "1m",
        "budgets": [{"nodes": "101%"}, {"nodes": "1", "schedule": "@daily", "duration": "1d"}]});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    assert_eq!(error_at(&errs, "spec.disruption.budgets[0].nodes").kind, ErrKind::Invalid);
    assert_eq!(error_at(&errs, "spec.disruption.budgets[1].duration").kind, ErrKind::Invalid);
}

#[test]
fn requirement_rules_and_label_domains() {
    let mut spec = minimal_spec();
    spec["template"]["spec"]["requirements"] = json!([
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4", "5"]},
        {"key": "karpenter.sh/foo", "operator": "Exists"},
    ]);
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    let e = error_at(&errs, "spec.template.spec.requirements");
    assert!(e.detail.contains("must have a single positive integer value"), "{e}");
    let e = error_at(&errs, "spec.template.spec.requirements[1].key");
    assert_eq!(e.detail, r#"label domain "karpenter.sh" is restricted"#);
}

#[test]
fn template_labels_are_checked_by_pattern_and_rule() {
    let mut spec = minimal_spec();
    spec["template"]["metadata"] = json!({"labels": {"team": "-bad", "karpenter.sh/nodepool": "x"}});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    // kube-openapi joins map keys with a dot; the CEL validator's path is the map itself.
    assert_eq!(error_at(&errs, "spec.template.metadata.labels.team").kind, ErrKind::Invalid);
}

#[test]
fn template_label_rules_fire_on_the_map() {
    let mut spec = minimal_spec();
    spec["template"]["metadata"] = json!({"labels": {"karpenter.sh/nodepool": "x"}});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    let details: Vec<_> =
        errs.iter().filter(|e| e.path == "spec.template.metadata.labels").map(|e| &e.detail).collect();
    assert_eq!(details, [r#"label "karpenter.sh/nodepool" is restricted"#], "{errs:#?}");
}

// 4. List-map keys.

#[test]
fn duplicate_condition_type_is_a_duplicate() {
    let old = stored_nodepool(minimal_spec());
    let mut body = old.clone();
    let mut ready = condition("Ready");
    ready["message"] = json!("");
    body["status"] = json!({"conditions": [ready.clone(), ready]});
    let errs = refused("NodePool", body, &Write::Status { old });
    assert_eq!(errs.len(), 1, "a duplicate does not block CEL: {errs:#?}");
    let e = error_at(&errs, "status.conditions[1]");
    assert_eq!(e.kind, ErrKind::Duplicate);
    assert_eq!(e.body(), r#"Duplicate value: {"type":"Ready"}"#);
    assert_eq!(e.kind.reason(), "FieldValueDuplicate");
}

#[test]
fn duplicate_in_a_set_list() {
    let mut spec = minimal_spec();
    spec["disruption"] =
        json!({"consolidateAfter": "1m", "budgets": [{"nodes": "1", "reasons": ["Empty", "Drifted", "Empty"]}]});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    let e = error_at(&errs, "spec.disruption.budgets[0].reasons[2]");
    assert_eq!(e.body(), r#"Duplicate value: "Empty""#);
}

// 5. Defaults.

#[test]
fn minimal_nodepool_gets_upstream_defaults() {
    let stored = stored_nodepool(minimal_spec());
    assert_eq!(
        stored["spec"],
        json!({
            "disruption": {"budgets": [{"nodes": "10%"}], "consolidateAfter": "0s",
                           "consolidationPolicy": "WhenEmptyOrUnderutilized"},
            "template": {"spec": {
                "expireAfter": "720h",
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            }},
        })
    );
    assert!(stored.get("status").is_none());
}

#[test]
fn defaults_fill_a_partial_object_and_budget_items() {
    let mut spec = minimal_spec();
    spec["disruption"] = json!({"consolidateAfter": "5m", "budgets": [{"reasons": ["Empty"]}]});
    let stored = stored_nodepool(spec);
    assert_eq!(
        stored["spec"]["disruption"],
        json!({"consolidateAfter": "5m", "consolidationPolicy": "WhenEmptyOrUnderutilized",
               "budgets": [{"nodes": "10%", "reasons": ["Empty"]}]})
    );
}

#[test]
fn ec2nodeclass_metadata_options_default() {
    let class = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}});
    let stored = schema("EC2NodeClass").admit(class, &Write::Create).expect("a valid EC2NodeClass");
    assert_eq!(
        stored["spec"]["metadataOptions"],
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1,
               "httpTokens": "required"})
    );
}

#[test]
fn null_fields_take_the_default_or_go() {
    let mut spec = minimal_spec();
    spec["disruption"] = Value::Null;
    spec["weight"] = Value::Null;
    let stored = stored_nodepool(spec);
    assert_eq!(stored["spec"]["disruption"]["consolidateAfter"], "0s");
    assert!(stored["spec"].get("weight").is_none());
}

// 6. Real manifests.

/// Every object with a Karpenter apiVersion/kind anywhere in a YAML document: manifests, scenario `objects:` and
/// `apply:` events.
fn karpenter_objects(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            let typed = m.get("apiVersion").and_then(Value::as_str).zip(m.get("kind").and_then(Value::as_str));
            if let Some((api_version, kind)) = typed
                && crds().schema_for_kind(api_version, kind).is_some()
            {
                out.push(v.clone());
                return;
            }
            m.values().for_each(|x| karpenter_objects(x, out));
        }
        Value::Array(items) => items.iter().for_each(|x| karpenter_objects(x, out)),
        _ => {}
    }
}

/// Fixtures a real API server refuses, with the errors it gives: (file, object name, field path). None.
const KNOWN_INVALID: &[(&str, &str, &str)] = &[];

#[test]
fn upstream_examples_and_project_fixtures_are_admitted() {
    let mut seen = 0;
    let mut failures = Vec::new();
    let mut refusals = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = ["examples", "scenarios", "tests/fixtures", "tests/corpus"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // A later object of the same kind and name is an update of the earlier one (scenario `apply:` events).
        let mut stored: Vec<Value> = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let doc = Value::deserialize(doc).unwrap();
            let mut objects = Vec::new();
            karpenter_objects(&doc, &mut objects);
            for obj in objects {
                seen += 1;
                let s =
                    crds().schema_for_kind(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).unwrap();
                let same = |o: &Value| o["kind"] == obj["kind"] && o["metadata"]["name"] == obj["metadata"]["name"];
                let old = stored.iter().position(same).map(|i| stored.remove(i));
                let write = match old.clone() {
                    Some(old) => Write::Update { old },
                    None => Write::Create,
                };
                match s.admit(obj.clone(), &write) {
                    Ok(admitted) => {
                        // A NodeClaim fixture carries a status: write it through /status as a controller would.
                        if let Some(status) = obj.get("status") {
                            let mut body = admitted.clone();
                            body["status"] = status.clone();
                            if let Err(errs) = s.admit(body, &Write::Status { old: admitted.clone() }) {
                                failures.push(format!(
                                    "{} {}/status: {errs:#?}",
                                    file.display(),
                                    obj["metadata"]["name"]
                                ));
                            }
                        }
                        stored.push(admitted);
                    }
                    Err(errs) => {
                        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                        let paths: Vec<_> =
                            errs.iter().filter(|e| e.path != "<nil>").map(|e| e.path.as_str()).collect();
                        let file = file.strip_prefix(root).unwrap().display().to_string();
                        refusals.push((file, name.to_string(), paths.join(",")));
                        if let Some(old) = old {
                            stored.push(old);
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "refused:\n{}", failures.join("\n"));
    let expected: Vec<_> =
        KNOWN_INVALID.iter().map(|(f, n, p)| (f.to_string(), n.to_string(), p.to_string())).collect();
    assert_eq!(refusals, expected);
    assert!(seen >= 30, "only {seen} objects found");
}

// 7. Transition rules.

#[test]
fn nodeclassref_group_is_immutable_on_update_only() {
    let old = stored_nodepool(minimal_spec());
    let mut body = old.clone();
    body["spec"]["template"]["spec"]["nodeClassRef"]["group"] = json!("karpenter.kwok.sh");
    let errs = refused("NodePool", body.clone(), &Write::Update { old });
    let e = error_at(&errs, "spec.template.spec.nodeClassRef");
    assert_eq!(e.body(), r#"Invalid value: "object": nodeClassRef.group is immutable"#);
    schema("NodePool").admit(body, &Write::Create).expect("no oldSelf on create");
}

#[test]
fn static_and_dynamic_nodepools_do_not_convert() {
    let old = stored_nodepool(minimal_spec());
    let mut body = old.clone();
    body["spec"]["replicas"] = json!(3);
    let errs = refused("NodePool", body, &Write::Update { old });
    assert_eq!(
        error_at(&errs, "spec").detail,
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
    );
}

#[test]
fn nodeclaim_spec_is_immutable_but_status_writes_are_not() {
    let claim = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [], "resources": {"requests": {"cpu": 1}}},
    });
    let old = schema("NodeClaim").admit(claim, &Write::Create).unwrap();
    let mut body = old.clone();
    body["spec"]["resources"]["requests"]["cpu"] = json!("2");
    let errs = refused("NodeClaim", body.clone(), &Write::Update { old: old.clone() });
    assert_eq!(error_at(&errs, "spec").detail, "spec is immutable");
    // Through /status the spec change is ignored, as the real server ignores everything but status there.
    body["status"] = json!({"nodeName": "n"});
    let stored = schema("NodeClaim").admit(body, &Write::Status { old }).unwrap();
    assert_eq!(stored["spec"]["resources"]["requests"]["cpu"], 1);
    assert_eq!(stored["status"]["nodeName"], "n");
}

// 8. Pruning.

#[test]
fn unknown_fields_are_pruned_not_refused() {
    let mut spec = minimal_spec();
    spec["bogus"] = json!({"deep": 1});
    spec["template"]["spec"]["nodeClassRef"]["extra"] = json!("x");
    let mut obj = nodepool("default", spec);
    obj["metadata"]["bogus"] = json!(1);
    obj["metadata"]["labels"] = json!({"a": "b"});
    obj["topLevel"] = json!(true);
    assert_eq!(
        schema("NodePool").unknown_fields(&obj),
        ["metadata.bogus", "topLevel", "spec.bogus", "spec.template.spec.nodeClassRef.extra"]
    );
    let stored = schema("NodePool").admit(obj, &Write::Create).unwrap();
    assert!(stored["spec"].get("bogus").is_none());
    assert!(stored["spec"]["template"]["spec"]["nodeClassRef"].get("extra").is_none());
    assert!(stored["metadata"].get("bogus").is_none());
    assert_eq!(stored["metadata"]["labels"], json!({"a": "b"}));
    assert!(stored.get("topLevel").is_none());
}

#[test]
fn status_on_create_is_dropped_and_on_update_kept_from_old() {
    let mut obj = nodepool("default", minimal_spec());
    obj["status"] = json!({"nodes": 3});
    let created = schema("NodePool").admit(obj, &Write::Create).unwrap();
    assert!(created.get("status").is_none());

    let mut old = created.clone();
    old["status"] = json!({"nodes": 2});
    let mut body = created;
    body["status"] = json!({"nodes": 7});
    body["spec"]["weight"] = json!(5);
    let updated = schema("NodePool").admit(body, &Write::Update { old }).unwrap();
    assert_eq!(updated["status"], json!({"nodes": 2}));
    assert_eq!(updated["spec"]["weight"], 5);
}

// 9. Every rule parses and runs.

#[test]
fn every_rule_of_every_crd_loads_and_runs() {
    let kinds: Vec<_> = crds().iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["CapacityBuffer", "EC2NodeClass", "NodeClaim", "NodeOverlay", "NodePool"]);
    for s in crds().iter() {
        s.check_supported().unwrap_or_else(|p| panic!("{p:#?}"));
    }
}

#[test]
fn a_rule_that_does_not_parse_or_calls_an_unknown_function_fails_the_load() {
    let text = std::fs::read_to_string(fake_apiserver::crds_dir().join("karpenter.sh_nodepools.yaml")).unwrap();
    for (broken, why) in [("self.isSorted()", "isSorted"), ("self != ", "does not parse")] {
        let dir = std::env::temp_dir().join(format!("crdval-bad-{}-{}", std::process::id(), why.len()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bad.yaml"), text.replacen("rule: self != ''", &format!("rule: {broken}"), 1)).unwrap();
        let err = std::panic::catch_unwind(|| Crds::load_dir(&dir)).err().expect("must fail loudly");
        std::fs::remove_dir_all(&dir).unwrap();
        let msg = err.downcast_ref::<String>().unwrap();
        for part in [why, "nodepools.karpenter.sh", "bad.yaml", "spec.template.spec.nodeClassRef.group", broken.trim()]
        {
            assert!(msg.contains(part), "{part:?} not in {msg}");
        }
    }
}

// Other things a real server refuses.

#[test]
fn wrong_types_block_the_cel_rules() {
    let mut spec = minimal_spec();
    spec["weight"] = json!("heavy");
    spec["disruption"] = json!({"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "@daily"}]});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    let e = error_at(&errs, "spec.weight");
    assert_eq!(e.kind, ErrKind::TypeInvalid);
    assert_eq!(e.body(), r#"Invalid value: "string": spec.weight in body must be of type integer: "string""#);
    let last = errs.last().unwrap();
    assert_eq!(last.path, "<nil>");
    assert!(last.detail.starts_with("some validation rules were not checked"));
    assert!(errs.iter().all(|e| e.path != "spec.disruption.budgets"));
}

#[test]
fn bounds_lengths_and_counts() {
    let mut spec = minimal_spec();
    spec["weight"] = json!(101);
    spec["template"]["spec"]["taints"] = json!([{"key": "", "effect": "NoSchedule"}]);
    spec["disruption"] =
        json!({"consolidateAfter": "1m", "budgets": (0..51).map(|_| json!({"nodes": "1"})).collect::<Vec<_>>()});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    assert_eq!(
        error_at(&errs, "spec.weight").body(),
        "Invalid value: 101: spec.weight in body should be less than or equal to 100"
    );
    assert_eq!(error_at(&errs, "spec.disruption.budgets").body(), "Too many: 51: must have at most 50 items");
    let key =
        errs.iter().find(|e| e.path == "spec.template.spec.taints[0].key" && e.detail.contains("at least")).unwrap();
    assert_eq!(key.detail, "spec.template.spec.taints[0].key in body should be at least 1 chars long");
}

#[test]
fn too_long_condition_reason() {
    let old = stored_nodepool(minimal_spec());
    let mut body = old.clone();
    let mut c = condition("Ready");
    c["message"] = json!("");
    c["reason"] = json!("A".repeat(1025));
    body["status"] = json!({"conditions": [c]});
    let errs = refused("NodePool", body, &Write::Status { old });
    let e = error_at(&errs, "status.conditions[0].reason");
    assert_eq!(e.body(), "Too long: may not be more than 1024 bytes");
    assert_eq!(e.kind.reason(), "FieldValueTooLong");
}

#[test]
fn date_times_are_rfc3339() {
    let old = stored_nodepool(minimal_spec());
    for (time, ok) in [
        ("2026-01-01T00:00:00Z", true),
        ("2026-01-01T00:00:00.123+02:00", true),
        ("yesterday", false),
        ("2026-02-30T00:00:00Z", false),
        ("2026-01-01 00:00:00Z", false),
    ] {
        let mut body = old.clone();
        let mut c = condition("Ready");
        c["message"] = json!("");
        c["lastTransitionTime"] = json!(time);
        body["status"] = json!({"conditions": [c]});
        let result = schema("NodePool").admit(body, &Write::Status { old: old.clone() });
        assert_eq!(result.is_ok(), ok, "{time}: {result:?}");
    }
}

#[test]
fn int_or_string_quantities() {
    let mut spec = minimal_spec();
    spec["limits"] = json!({"cpu": 16, "memory": "64Gi"});
    stored_nodepool(spec.clone());
    spec["limits"] = json!({"cpu": "lots", "memory": true});
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    assert_eq!(error_at(&errs, "spec.limits.cpu").kind, ErrKind::Invalid);
    let e = error_at(&errs, "spec.limits.memory");
    assert_eq!(e.kind, ErrKind::TypeInvalid);
    assert!(e.detail.contains("must be of type integer,string"), "{e}");
}

#[test]
fn metadata_names_and_labels() {
    let mut obj = nodepool("Default_Pool", minimal_spec());
    obj["metadata"]["labels"] = json!({"bad key!": "ok", "good": "bad value!"});
    let errs = refused("NodePool", obj, &Write::Create);
    let name = error_at(&errs, "metadata.name");
    assert!(name.body().starts_with(r#"Invalid value: "Default_Pool": a lowercase RFC 1123 subdomain"#), "{name}");
    let labels: Vec<_> = errs.iter().filter(|e| e.path == "metadata.labels").map(FieldError::body).collect();
    assert_eq!(labels.len(), 2, "{labels:#?}");
    assert!(labels[0].starts_with(r#"Invalid value: "bad key!": name part must consist of alphanumeric characters"#));
    assert!(labels[1].starts_with(r#"Invalid value: "bad value!": a valid label must be an empty string"#));

    let mut obj = nodepool("", minimal_spec());
    obj["metadata"].as_object_mut().unwrap().remove("name");
    let errs = refused("NodePool", obj, &Write::Create);
    assert_eq!(error_at(&errs, "metadata.name").body(), "Required value: name or generateName is required");
}

#[test]
fn annotations_are_limited_in_total() {
    let mut obj = nodepool("default", minimal_spec());
    obj["metadata"]["annotations"] = json!({"a": "x".repeat(256 * 1024)});
    let errs = refused("NodePool", obj, &Write::Create);
    assert_eq!(error_at(&errs, "metadata.annotations").body(), "Too long: may not be more than 262144 bytes");
}

#[test]
fn wrong_kind_or_version_is_refused_first() {
    let mut obj = nodepool("default", minimal_spec());
    obj["apiVersion"] = json!("karpenter.sh/v1beta1");
    let errs = refused("NodePool", obj, &Write::Create);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].to_string(), r#"apiVersion: Invalid value: "karpenter.sh/v1beta1": must be karpenter.sh/v1"#);
}

#[test]
fn scale_replicas_fit_an_int32() {
    let mut spec = minimal_spec();
    spec["replicas"] = json!(3_000_000_000_i64);
    let errs = refused("NodePool", nodepool("default", spec), &Write::Create);
    assert_eq!(error_at(&errs, ".spec.replicas").detail, "should be less than or equal to 2147483647");
}

#[test]
fn ec2nodeclass_rules() {
    let class = |spec: Value| json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"}, "spec": spec});
    let base = json!({"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]});
    let mut spec = base.clone();
    spec["instanceProfile"] = json!("P");
    spec["tags"] = json!({"eks:eks-cluster-name": "x"});
    spec["amiSelectorTerms"] = json!([{"alias": "windows2022@v1"}]);
    let errs = refused("EC2NodeClass", class(spec), &Write::Create);
    let msgs: Vec<_> = errs.iter().map(|e| format!("{}: {}", e.path, e.detail)).collect();
    assert!(msgs.contains(&"spec: must specify exactly one of ['role', 'instanceProfile']".into()), "{msgs:#?}");
    assert!(
        msgs.contains(&"spec.tags: tag contains a restricted tag matching eks:eks-cluster-name".into()),
        "{msgs:#?}"
    );
    assert!(msgs.iter().any(|m| m.starts_with("spec.amiSelectorTerms[0].alias: ")), "{msgs:#?}");
}

#[test]
fn nodeoverlay_price_or_adjustment() {
    let overlay = json!({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"},
        "spec": {"requirements": [], "price": "0.25", "priceAdjustment": "+1"}});
    let errs = refused("NodeOverlay", overlay, &Write::Create);
    assert_eq!(error_at(&errs, "spec").detail, "cannot set both 'price' and 'priceAdjustment'");
}

#[test]
fn capacity_buffer_is_namespaced() {
    let buffer = json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer", "metadata": {"name": "b"},
        "spec": {"podTemplateRef": {"name": "t"}, "replicas": 2}});
    let errs = refused("CapacityBuffer", buffer.clone(), &Write::Create);
    assert_eq!(error_at(&errs, "metadata.namespace").kind, ErrKind::Required);
    let mut buffer = buffer;
    buffer["metadata"]["namespace"] = json!("default");
    schema("CapacityBuffer").admit(buffer, &Write::Create).expect("a valid CapacityBuffer");
}

#[test]
fn lookups() {
    assert_eq!(crds().schema_for("karpenter.sh", "v1", "nodepools").map(|s| s.kind.as_str()), Some("NodePool"));
    assert!(crds().schema_for("karpenter.sh", "v1beta1", "nodepools").is_none());
    assert_eq!(
        crds().schema_for_kind("karpenter.k8s.aws/v1", "EC2NodeClass").map(|s| s.plural.as_str()),
        Some("ec2nodeclasses")
    );
}

#[test]
fn schemas_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>(_: &T) {}
    shareable(crds());
}

/// Whatever a client sends, admission answers; it never panics.
#[test]
fn odd_values_do_not_panic() {
    let odd =
        [json!(null), json!(1), json!("x"), json!([1, {}]), json!({"a": [null]}), json!(1.5), json!(-1), json!(true)];
    for s in crds().iter() {
        let api_version = s.api_version();
        for v in &odd {
            for field in ["spec", "status", "metadata"] {
                let mut obj =
                    json!({"apiVersion": api_version, "kind": s.kind, "metadata": {"name": "x", "namespace": "n"}});
                obj[field] = v.clone();
                let _ = s.admit(obj.clone(), &Write::Create);
                let _ = s.admit(obj.clone(), &Write::Update { old: obj.clone() });
                let _ = s.admit(obj.clone(), &Write::Status { old: v.clone() });
            }
            let _ = s.admit(v.clone(), &Write::Create);
        }
        // An empty object is refused (no apiVersion/kind), not a crash.
        assert!(s.admit(json!({}), &Write::Create).is_err());
    }
}

/// A CRD whose rules call every function crdval claims to support, each as Kubernetes' CEL evaluates it.
const PROBE_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.example.com}
spec:
  group: example.com
  names: {kind: Probe, plural: probes}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              properties:
                s: {type: string}
                n: {type: integer}
                f: {type: number}
                l: {type: array, items: {type: string}}
                m: {type: object, additionalProperties: {type: string}}
              x-kubernetes-validations:
                - {message: size, rule: "size(self.l) == 2 && self.l.size() == 2 && self.s.size() == 16 && size(self.m) == 1"}
                - {message: int, rule: "int('42') == 42 && int(self.n) == 3 && int(self.f) == 2"}
                - {message: uint, rule: "uint(self.n) == 3u"}
                - {message: double, rule: "double(self.n) == 3.0 && self.f == 2.5"}
                - {message: string, rule: "string(self.n) == '3'"}
                - {message: matches, rule: "self.s.matches('^karpenter') && !self.s.matches('^x')"}
                - {message: affixes, rule: "self.s.startsWith('karpenter.sh/') && self.s.endsWith('@y')"}
                - {message: contains, rule: "self.s.contains('/x')"}
                - {message: split, rule: "self.s.split('@') == ['karpenter.sh/x', 'y'] && self.s.split('@')[1] == 'y'"}
                - {message: find, rule: "self.s.find('^([^/]+)') == 'karpenter.sh' && self.s.find('[0-9]+') == ''"}
                - {message: case, rule: "'AbC'.lowerAscii() == 'abc' && 'AbC'.upperAscii() == 'ABC'"}
                - {message: trim, rule: "' a '.trim() == 'a'"}
                - {message: replace, rule: "'aXa'.replace('X', 'b') == 'aba'"}
                - {message: substring, rule: "'hello'.substring(1, 3) == 'el' && 'hello'.substring(3) == 'lo'"}
                - {message: join, rule: "self.l.join('-') == 'b-a' && self.l.join() == 'ba'"}
                - {message: in, rule: "'k' in self.m && 'a' in self.l && !('z' in self.l)"}
                - {message: macros, rule: "self.l.exists(x, x == 'a') && self.l.all(x, x.size() == 1) && self.l.filter(x, x == 'a').size() == 1 && self.l.exists_one(x, x == 'b') && self.l.map(x, x + '!') == ['b!', 'a!']"}
                - {message: map, rule: "self.m.all(k, self.m[k] == 'v') && self['m']['k'] == 'v'"}
                - {message: arithmetic, rule: "self.n + 1 - 1 * 2 / 2 % 5 == 3 && -self.n == -3 && self.n > 2 && self.n >= 3 && self.n < 4 && self.n <= 3 && self.n != 4"}
                - {message: ternary, rule: "has(self.n) && !has(self.zz) ? self.n == 3 : false"}
                - {rule: "self.n == 3 || self.s == ''", fieldPath: .n, reason: FieldValueForbidden}
"#;

#[test]
fn every_supported_function_behaves_as_in_kubernetes() {
    let dir = std::env::temp_dir().join(format!("crdval-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("probe.yaml"), PROBE_CRD).unwrap();
    let crds = Crds::load_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let s = crds.schema_for("example.com", "v1", "probes").unwrap();
    let probe =
        |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Probe", "metadata": {"name": "p"}, "spec": spec});
    let good = json!({"s": "karpenter.sh/x@y", "n": 3, "f": 2.5, "l": ["b", "a"], "m": {"k": "v"}});
    s.admit(probe(good.clone()), &Write::Create).unwrap_or_else(|e| panic!("{e:#?}"));

    let mut bad = good;
    bad["n"] = json!(4);
    let errs = s.admit(probe(bad), &Write::Create).unwrap_err();
    let failed: Vec<_> = errs.iter().map(|e| e.detail.as_str()).collect();
    assert_eq!(
        failed,
        ["int", "uint", "double", "string", "arithmetic", "ternary", "failed rule: self.n == 3 || self.s == ''"],
        "{errs:#?}"
    );
    let forbidden = errs.last().unwrap();
    assert_eq!((forbidden.path.as_str(), forbidden.kind), ("spec.n", ErrKind::Forbidden));
    assert_eq!(forbidden.body(), "Forbidden: failed rule: self.n == 3 || self.s == ''");
}

/// Every node of the fixture manifests replaced by values of other types: refused or admitted, never a panic.
#[test]
fn mutated_manifests_do_not_panic() {
    fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, x)| pointers(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out)),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| pointers(x, format!("{at}/{i}"), out)),
            _ => {}
        }
        out.push(at);
    }
    let text = ["nodepool-full.yaml", "ec2nodeclass.yaml", "nodeclaim.yaml"].map(|f| {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(f)).unwrap()
    });
    for obj in text.iter().map(|t| serde_yaml::from_str::<Value>(t).unwrap()) {
        let s = crds().schema_for_kind(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).unwrap();
        let mut paths = Vec::new();
        pointers(&obj, String::new(), &mut paths);
        for p in paths.iter().filter(|p| !p.is_empty()) {
            for odd in [json!(null), json!(-1), json!("☃"), json!({"x": [1.5]})] {
                let mut mutated = obj.clone();
                *mutated.pointer_mut(p).unwrap() = odd;
                let _ = s.admit(mutated.clone(), &Write::Create);
                let _ = s.admit(mutated.clone(), &Write::Update { old: obj.clone() });
                let _ = s.admit(mutated, &Write::Status { old: obj.clone() });
            }
        }
    }
}
