//! Strict validation and strict parsing of Karpenter objects: fixtures modelled on the upstream docs round-trip,
//! defaults apply, every rule can fail, budgets evaluate like upstream, and the strict parser never panics.

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_tui::engine::api::strict::{
    DiagnosticKind, locate, parse_ec2nodeclass_strict, parse_nodeclaim_strict, parse_nodepool_strict,
};
use karpenter_tui::engine::api::validation::{
    BudgetError, FieldError, budget_active, budget_allowed, budget_is_active, validate_ec2nodeclass,
    validate_nodeclaim, validate_nodepool,
};
use karpenter_tui::engine::api::{Budget, EC2NodeClass, NodeClaim, NodePool, NodeSelectorRequirementWithMinValues};
use karpenter_tui::engine::labels::LabelPolicy;
use proptest::prelude::*;

const FULL: &str = include_str!("fixtures/nodepool-full.yaml");
const MINIMAL: &str = include_str!("fixtures/nodepool-minimal.yaml");
const NODECLAIM: &str = include_str!("fixtures/nodeclaim.yaml");
const EC2NODECLASS: &str = include_str!("fixtures/ec2nodeclass.yaml");

/// parse → serialize → parse. The kube-derived root types have no `PartialEq`, so equality is checked on their
/// JSON form, which covers every field.
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(yaml: &str) -> T {
    let first: T = serde_yaml::from_str(yaml).expect("fixture parses");
    let text = serde_yaml::to_string(&first).expect("serializes");
    let second: T = serde_yaml::from_str(&text).expect("re-parses");
    let (a, b) = (serde_json::to_value(&first).unwrap(), serde_json::to_value(&second).unwrap());
    assert_eq!(a, b, "round trip changed the object:\n{text}");
    first
}

#[test]
fn fixtures_round_trip() {
    let np: NodePool = round_trip(FULL);
    assert_eq!(np.spec.template.spec.requirements.len(), 8);
    assert_eq!(np.spec.template.spec.requirements[0].min_values, Some(2));
    assert_eq!(np.spec.template.spec.requirements[4].operator, "Gt");
    assert_eq!(np.spec.disruption.budgets.len(), 3);
    assert_eq!(np.spec.disruption.budgets[1].duration.as_deref(), Some("8h"));
    assert_eq!(np.spec.weight, Some(10));
    assert_eq!(np.spec.template.spec.termination_grace_period.as_deref(), Some("48h"));
    let _: NodePool = round_trip(MINIMAL);
    let nc: NodeClaim = round_trip(NODECLAIM);
    assert!(nc.is_true("Initialized"));
    assert_eq!(nc.status.as_ref().unwrap().conditions.len(), 4);
    let ec2: EC2NodeClass = round_trip(EC2NODECLASS);
    assert_eq!(ec2.spec.ami_selector_terms[0].alias.as_deref(), Some("al2023@latest"));
}

#[test]
fn fixtures_are_valid_and_strictly_parse() {
    let np = parse_nodepool_strict(FULL, "nodepool-full.yaml").unwrap_or_else(|d| panic!("{d:#?}"));
    assert!(validate_nodepool(&np, &LabelPolicy::default()).is_empty());
    parse_nodepool_strict(MINIMAL, "nodepool-minimal.yaml").unwrap_or_else(|d| panic!("{d:#?}"));
    parse_nodeclaim_strict(NODECLAIM, "nodeclaim.yaml").unwrap_or_else(|d| panic!("{d:#?}"));
    parse_ec2nodeclass_strict(EC2NODECLASS, "ec2nodeclass.yaml").unwrap_or_else(|d| panic!("{d:#?}"));
}

#[test]
fn defaults_apply_when_absent() {
    let np: NodePool = serde_yaml::from_str(MINIMAL).unwrap();
    let d = &np.spec.disruption;
    assert_eq!(d.budgets, vec![Budget { nodes: "10%".into(), schedule: None, duration: None, reasons: None }]);
    assert_eq!(d.consolidation_policy, "WhenEmptyOrUnderutilized");
    assert_eq!(d.consolidate_after, "0s");
    assert_eq!(np.spec.template.spec.expire_after, "720h");
    // A budget without `nodes` defaults to 10% too.
    let with_budget = MINIMAL.to_string() + "  disruption:\n    budgets:\n      - reasons: [Empty]\n";
    let np: NodePool = serde_yaml::from_str(&with_budget).unwrap();
    assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
    assert_eq!(np.spec.disruption.consolidate_after, "0s");
}

// ---------------------------------------------------------------------------------------------------------------
// One test per rule: start from a valid pool, break one thing, expect an error at that path.
// ---------------------------------------------------------------------------------------------------------------

fn pool() -> NodePool {
    serde_yaml::from_str(MINIMAL).unwrap()
}

fn req(key: &str, op: &str, values: &[&str], min: Option<i64>) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: key.into(),
        operator: op.into(),
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: min,
    }
}

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint { key: key.into(), value: value.map(Into::into), effect: effect.into(), time_added: None }
}

fn errors(np: &NodePool) -> Vec<FieldError> {
    validate_nodepool(np, &LabelPolicy::default())
}

#[track_caller]
fn rejects(mutate: impl FnOnce(&mut NodePool), path: &str) {
    let mut np = pool();
    mutate(&mut np);
    let errs = errors(&np);
    assert!(errs.iter().any(|e| e.path.to_string() == path), "expected an error at {path}, got {errs:#?}");
    assert!(errs.iter().all(|e| e.object == "NodePool/minimal"));
}

#[track_caller]
fn accepts(mutate: impl FnOnce(&mut NodePool)) {
    let mut np = pool();
    mutate(&mut np);
    let errs = errors(&np);
    assert!(errs.is_empty(), "expected no errors, got {errs:#?}");
}

const REQ1: &str = "spec.template.spec.requirements[1]";

fn add_req(r: NodeSelectorRequirementWithMinValues) -> impl FnOnce(&mut NodePool) {
    move |np| np.spec.template.spec.requirements.push(r)
}

#[test]
fn baseline_is_valid() {
    accepts(|_| {});
}

#[test]
fn requirement_key_must_be_qualified_name() {
    rejects(add_req(req("-bad", "Exists", &[], None)), &format!("{REQ1}.key"));
    rejects(add_req(req("Bad.Domain/x", "Exists", &[], None)), &format!("{REQ1}.key"));
    rejects(add_req(req(&"a".repeat(64), "Exists", &[], None)), &format!("{REQ1}.key"));
    rejects(add_req(req("a/b/c", "Exists", &[], None)), &format!("{REQ1}.key"));
    accepts(add_req(req("example.com/team", "Exists", &[], None)));
}

#[test]
fn requirement_operator_must_be_known() {
    rejects(add_req(req("team", "Contains", &["a"], None)), &format!("{REQ1}.operator"));
    for op in ["NotIn", "Exists", "DoesNotExist"] {
        let values: &[&str] = if op == "NotIn" { &["a"] } else { &[] };
        accepts(add_req(req("team", op, values, None)));
    }
}

#[test]
fn in_needs_a_value() {
    rejects(add_req(req("team", "In", &[], None)), &format!("{REQ1}.values"));
}

#[test]
fn exists_and_does_not_exist_take_no_values() {
    rejects(add_req(req("team", "Exists", &["a"], None)), &format!("{REQ1}.values"));
    rejects(add_req(req("team", "DoesNotExist", &["a"], None)), &format!("{REQ1}.values"));
}

#[test]
fn numeric_operators_need_one_non_negative_integer() {
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        rejects(add_req(req("example.com/gen", op, &[], None)), &format!("{REQ1}.values"));
        rejects(add_req(req("example.com/gen", op, &["1", "2"], None)), &format!("{REQ1}.values"));
        rejects(add_req(req("example.com/gen", op, &["-1"], None)), &format!("{REQ1}.values"));
        rejects(add_req(req("example.com/gen", op, &["x"], None)), &format!("{REQ1}.values"));
        accepts(add_req(req("example.com/gen", op, &["3"], None)));
    }
}

#[test]
fn values_must_be_label_values() {
    rejects(add_req(req("team", "In", &["ok", "not ok"], None)), &format!("{REQ1}.values[1]"));
    rejects(add_req(req("team", "In", &[&"a".repeat(64)], None)), &format!("{REQ1}.values[0]"));
}

#[test]
fn min_values_bounds_and_count() {
    rejects(add_req(req("team", "In", &["a"], Some(0))), &format!("{REQ1}.minValues"));
    rejects(add_req(req("team", "Exists", &[], Some(51))), &format!("{REQ1}.minValues"));
    rejects(add_req(req("team", "In", &["a", "b"], Some(3))), &format!("{REQ1}.minValues"));
    accepts(add_req(req("team", "In", &["a", "b", "c"], Some(3))));
    accepts(add_req(req("team", "Exists", &[], Some(50))));
}

#[test]
fn at_most_100_requirements() {
    rejects(
        |np| {
            for i in 0..100 {
                np.spec.template.spec.requirements.push(req(&format!("example.com/k{i}"), "Exists", &[], None));
            }
        },
        "spec.template.spec.requirements",
    );
    accepts(|np| {
        for i in 0..99 {
            np.spec.template.spec.requirements.push(req(&format!("example.com/k{i}"), "Exists", &[], None));
        }
    });
}

#[test]
fn restricted_requirement_keys() {
    rejects(add_req(req("karpenter.sh/nodepool", "In", &["x"], None)), &format!("{REQ1}.key"));
    rejects(add_req(req("kubernetes.io/hostname", "In", &["x"], None)), &format!("{REQ1}.key"));
    rejects(add_req(req("karpenter.sh/custom", "Exists", &[], None)), &format!("{REQ1}.key"));
    rejects(add_req(req("kubernetes.io/custom", "Exists", &[], None)), &format!("{REQ1}.key"));
    rejects(add_req(req("sub.k8s.io/custom", "Exists", &[], None)), &format!("{REQ1}.key"));
    // Deprecated beta keys normalise to well-known ones; node.kubernetes.io is an exception domain.
    accepts(add_req(req("beta.kubernetes.io/arch", "In", &["amd64"], None)));
    accepts(add_req(req("node.kubernetes.io/instance-type", "In", &["m5.large"], None)));
    // Provider domains are restricted when the policy says so.
    let mut np = pool();
    np.spec.template.spec.requirements.push(req("karpenter.k8s.aws/custom", "Exists", &[], None));
    let aws = LabelPolicy { provider_domains: vec!["karpenter.k8s.aws".into()], ..LabelPolicy::default() };
    assert!(validate_nodepool(&np, &LabelPolicy::default()).is_empty());
    assert_eq!(validate_nodepool(&np, &aws)[0].path.to_string(), format!("{REQ1}.key"));
}

#[test]
fn capacity_type_needs_known_values() {
    let first = "spec.template.spec.requirements[0]";
    rejects(
        |np| np.spec.template.spec.requirements[0].values = ["preemptible".to_string()].into(),
        &format!("{first}.values"),
    );
    rejects(
        |np| {
            np.spec.template.spec.requirements[0] =
                req("karpenter.sh/capacity-type", "In", &["spot", "on-demand", "preemptible"], Some(3))
        },
        &format!("{first}.minValues"),
    );
    accepts(|np| {
        np.spec.template.spec.requirements[0] =
            req("karpenter.sh/capacity-type", "In", &["spot", "on-demand", "preemptible"], Some(2))
    });
}

const LABELS: &str = "spec.template.metadata.labels";

fn label(k: &str, v: &str) -> impl FnOnce(&mut NodePool) {
    let (k, v) = (k.to_string(), v.to_string());
    move |np| {
        np.spec.template.metadata.labels.insert(k, v);
    }
}

#[test]
fn template_labels() {
    rejects(label("bad key", "v"), &format!("{LABELS}[bad key]"));
    rejects(label("team", "bad value"), &format!("{LABELS}[team]"));
    rejects(label("karpenter.sh/nodepool", "x"), &format!("{LABELS}[karpenter.sh/nodepool]"));
    rejects(label("kubernetes.io/hostname", "x"), &format!("{LABELS}[kubernetes.io/hostname]"));
    rejects(label("karpenter.sh/other", "x"), &format!("{LABELS}[karpenter.sh/other]"));
    rejects(label("k8s.io/other", "x"), &format!("{LABELS}[k8s.io/other]"));
    accepts(label("karpenter.sh/capacity-type", "spot"));
    accepts(label("example.com/team", ""));
    rejects(
        |np| {
            for i in 0..101 {
                np.spec.template.metadata.labels.insert(format!("k{i}"), "v".into());
            }
        },
        LABELS,
    );
    rejects(
        |np| {
            np.spec.template.metadata.annotations.insert("bad key".into(), "v".into());
        },
        "spec.template.metadata.annotations[bad key]",
    );
}

#[test]
fn taints() {
    const T: &str = "spec.template.spec.taints[0]";
    rejects(|np| np.spec.template.spec.taints.push(taint("", None, "NoSchedule")), &format!("{T}.key"));
    rejects(|np| np.spec.template.spec.taints.push(taint("bad key", None, "NoSchedule")), &format!("{T}.key"));
    rejects(|np| np.spec.template.spec.taints.push(taint("k", Some("bad value"), "NoSchedule")), &format!("{T}.value"));
    rejects(|np| np.spec.template.spec.taints.push(taint("k", None, "Sometimes")), &format!("{T}.effect"));
    rejects(|np| np.spec.template.spec.taints.push(taint("k", None, "")), &format!("{T}.effect"));
    rejects(
        |np| np.spec.template.spec.startup_taints.push(taint("k", None, "Bad")),
        "spec.template.spec.startupTaints[0].effect",
    );
    rejects(
        |np| {
            np.spec.template.spec.taints.push(taint("k", Some("a"), "NoSchedule"));
            np.spec.template.spec.startup_taints.push(taint("k", Some("b"), "NoSchedule"));
        },
        "spec.template.spec.startupTaints[0]",
    );
    accepts(|np| {
        np.spec.template.spec.taints.push(taint("example.com/k", Some("v"), "NoExecute"));
        np.spec.template.spec.taints.push(taint("example.com/k", None, "PreferNoSchedule"));
    });
}

#[test]
fn node_class_ref_fields_required() {
    const R: &str = "spec.template.spec.nodeClassRef";
    rejects(|np| np.spec.template.spec.node_class_ref.group.clear(), &format!("{R}.group"));
    rejects(|np| np.spec.template.spec.node_class_ref.kind.clear(), &format!("{R}.kind"));
    rejects(|np| np.spec.template.spec.node_class_ref.name.clear(), &format!("{R}.name"));
    rejects(|np| np.spec.template.spec.node_class_ref.group = "a/b".into(), &format!("{R}.group"));
}

#[test]
fn expire_after_and_termination_grace_period() {
    const E: &str = "spec.template.spec.expireAfter";
    const G: &str = "spec.template.spec.terminationGracePeriod";
    rejects(|np| np.spec.template.spec.expire_after = "30d".into(), E);
    rejects(|np| np.spec.template.spec.expire_after = "1.5h".into(), E);
    rejects(|np| np.spec.template.spec.expire_after = "".into(), E);
    accepts(|np| np.spec.template.spec.expire_after = "Never".into());
    accepts(|np| np.spec.template.spec.expire_after = "1h30m".into());
    rejects(|np| np.spec.template.spec.termination_grace_period = Some("Never".into()), G);
    rejects(|np| np.spec.template.spec.termination_grace_period = Some("5".into()), G);
    accepts(|np| np.spec.template.spec.termination_grace_period = Some("24h".into()));
}

#[test]
fn weight_range() {
    rejects(|np| np.spec.weight = Some(0), "spec.weight");
    rejects(|np| np.spec.weight = Some(101), "spec.weight");
    accepts(|np| np.spec.weight = Some(1));
    accepts(|np| np.spec.weight = Some(100));
}

#[test]
fn limits_are_quantities() {
    rejects(|np| np.spec.limits = Some([("cpu".to_string(), Quantity("lots".into()))].into()), "spec.limits[cpu]");
    accepts(|np| np.spec.limits = Some([("memory".to_string(), Quantity("100Gi".into()))].into()));
}

#[test]
fn disruption_policy_and_consolidate_after() {
    rejects(
        |np| np.spec.disruption.consolidation_policy = "WhenUnderutilized".into(),
        "spec.disruption.consolidationPolicy",
    );
    accepts(|np| np.spec.disruption.consolidation_policy = "Balanced".into());
    accepts(|np| np.spec.disruption.consolidation_policy = "WhenEmpty".into());
    rejects(|np| np.spec.disruption.consolidate_after = "soon".into(), "spec.disruption.consolidateAfter");
    accepts(|np| np.spec.disruption.consolidate_after = "Never".into());
    accepts(|np| np.spec.disruption.consolidate_after = "30s".into());
}

fn budget(nodes: &str, schedule: Option<&str>, duration: Option<&str>, reasons: Option<&[&str]>) -> Budget {
    Budget {
        nodes: nodes.into(),
        schedule: schedule.map(Into::into),
        duration: duration.map(Into::into),
        reasons: reasons.map(|r| r.iter().map(|s| s.to_string()).collect()),
    }
}

fn set_budget(b: Budget) -> impl FnOnce(&mut NodePool) {
    move |np| np.spec.disruption.budgets = vec![b]
}

#[test]
fn budget_rules() {
    const B: &str = "spec.disruption.budgets[0]";
    rejects(set_budget(budget("101%", None, None, None)), &format!("{B}.nodes"));
    rejects(set_budget(budget("-1", None, None, None)), &format!("{B}.nodes"));
    rejects(set_budget(budget("ten", None, None, None)), &format!("{B}.nodes"));
    rejects(set_budget(budget("1", Some("@daily"), None, None)), &format!("{B}.schedule"));
    rejects(set_budget(budget("1", None, Some("1h"), None)), &format!("{B}.duration"));
    rejects(set_budget(budget("1", Some("@daily"), Some("90s"), None)), &format!("{B}.duration"));
    rejects(set_budget(budget("1", Some("@daily"), Some("1d"), None)), &format!("{B}.duration"));
    rejects(set_budget(budget("1", Some("not a cron"), Some("1h"), None)), &format!("{B}.schedule"));
    rejects(set_budget(budget("1", Some("0 9 * * *  *"), Some("1h"), None)), &format!("{B}.schedule"));
    rejects(set_budget(budget("1", Some("@sometimes"), Some("1h"), None)), &format!("{B}.schedule"));
    rejects(set_budget(budget("1", None, None, Some(&["Empty", "Expired"]))), &format!("{B}.reasons[1]"));
    for mac in ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"] {
        accepts(set_budget(budget("0", Some(mac), Some("1h30m"), None)));
    }
    accepts(set_budget(budget("100%", Some("0 9 * * 1-5"), Some("8h0m0s"), Some(&["Underutilized", "Drifted"]))));
    rejects(|np| np.spec.disruption.budgets = vec![budget("1", None, None, None); 51], "spec.disruption.budgets");
    accepts(|np| np.spec.disruption.budgets = vec![budget("1", None, None, None); 50]);
}

#[test]
fn all_errors_are_reported_not_just_the_first() {
    let mut np = pool();
    np.spec.weight = Some(0);
    np.spec.template.spec.expire_after = "forever".into();
    np.spec.template.spec.requirements.push(req("team", "In", &[], None));
    let errs = errors(&np);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    let shown = errs[0].to_string();
    assert!(shown.starts_with("NodePool/minimal: "), "{shown}");
}

#[test]
fn nodeclaim_validation() {
    let mut nc: NodeClaim = serde_yaml::from_str(NODECLAIM).unwrap();
    // NodeClaims carry the nodepool requirement legitimately.
    assert!(validate_nodeclaim(&nc, &LabelPolicy::default()).is_empty());
    nc.spec.requirements.push(req("team", "Gt", &["a"], None));
    nc.spec.taints.push(taint("k", None, "Never"));
    nc.spec.node_class_ref.name.clear();
    let errs: Vec<String> =
        validate_nodeclaim(&nc, &LabelPolicy::default()).iter().map(|e| e.path.to_string()).collect();
    assert_eq!(errs, ["spec.requirements[3].values", "spec.taints[1].effect", "spec.nodeClassRef.name"]);
}

#[test]
fn ec2nodeclass_validation() {
    let base: EC2NodeClass = serde_yaml::from_str(EC2NODECLASS).unwrap();
    assert!(validate_ec2nodeclass(&base).is_empty());
    let paths = |f: &dyn Fn(&mut EC2NodeClass)| -> Vec<String> {
        let mut nc = base.clone();
        f(&mut nc);
        validate_ec2nodeclass(&nc).iter().map(|e| e.path.to_string()).collect()
    };
    assert_eq!(paths(&|nc| nc.spec.ami_selector_terms.clear()), ["spec.amiSelectorTerms"]);
    assert_eq!(
        paths(&|nc| nc.spec.ami_selector_terms[0].alias = Some("al2023".into())),
        ["spec.amiSelectorTerms[0].alias"]
    );
    assert_eq!(
        paths(&|nc| nc.spec.ami_selector_terms[0].alias = Some("ubuntu@latest".into())),
        ["spec.amiSelectorTerms[0].alias"]
    );
    for family in ["al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"] {
        assert!(paths(&|nc| nc.spec.ami_selector_terms[0].alias = Some(format!("{family}@v1"))).is_empty());
    }
    assert_eq!(paths(&|nc| nc.spec.subnet_selector_terms.clear()), ["spec.subnetSelectorTerms"]);
    assert_eq!(paths(&|nc| nc.spec.security_group_selector_terms.clear()), ["spec.securityGroupSelectorTerms"]);
    assert_eq!(paths(&|nc| nc.spec.instance_profile = Some("p".into())), ["spec"]);
    assert_eq!(paths(&|nc| nc.spec.role = None), ["spec"]);
    assert!(
        paths(&|nc| {
            nc.spec.role = None;
            nc.spec.instance_profile = Some("p".into());
        })
        .is_empty()
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Budgets at runtime
// ---------------------------------------------------------------------------------------------------------------

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

#[test]
fn weekday_business_hours_window() {
    // 2024-06-03 is a Monday.
    let active = |t| budget_is_active("0 9 * * 1-5", "8h", t).unwrap();
    assert!(!active(utc(2024, 6, 3, 8, 59, 59)));
    assert!(active(utc(2024, 6, 3, 9, 0, 0)));
    assert!(active(utc(2024, 6, 3, 12, 0, 0)));
    assert!(active(utc(2024, 6, 3, 16, 59, 59)));
    // The window is [09:00, 17:00): at 17:00 the next hit strictly after 09:00 is tomorrow's.
    assert!(!active(utc(2024, 6, 3, 17, 0, 0)));
    assert!(!active(utc(2024, 6, 8, 12, 0, 0)), "Saturday");
    assert!(active(utc(2024, 6, 7, 10, 30, 0)), "Friday");
}

#[test]
fn macro_windows() {
    assert!(budget_is_active("@daily", "1h", utc(2024, 1, 1, 0, 30, 0)).unwrap());
    assert!(!budget_is_active("@midnight", "1h", utc(2024, 1, 1, 1, 30, 0)).unwrap());
    assert!(budget_is_active("@hourly", "10m", utc(2024, 1, 1, 7, 5, 0)).unwrap());
    assert!(!budget_is_active("@hourly", "10m", utc(2024, 1, 1, 7, 15, 0)).unwrap());
}

#[test]
fn budget_active_without_schedule() {
    let now = utc(2024, 1, 1, 0, 0, 0);
    assert!(budget_active(&budget("1", None, None, None), now).unwrap());
    assert_eq!(budget_active(&budget("1", Some("@daily"), None, None), now), Err(BudgetError::ScheduleWithoutDuration));
    assert!(matches!(budget_is_active("bad", "1h", now), Err(BudgetError::InvalidSchedule { .. })));
    assert!(matches!(budget_is_active("@daily", "x", now), Err(BudgetError::InvalidDuration { .. })));
}

#[test]
fn allowed_disruptions() {
    assert_eq!(budget_allowed("10%", 5).unwrap(), 1, "percent rounds up");
    assert_eq!(budget_allowed("10%", 10).unwrap(), 1);
    assert_eq!(budget_allowed("10%", 11).unwrap(), 2);
    assert_eq!(budget_allowed("0%", 100).unwrap(), 0);
    assert_eq!(budget_allowed("100%", 7).unwrap(), 7);
    assert_eq!(budget_allowed("10%", 0).unwrap(), 0);
    assert_eq!(budget_allowed("3", 100).unwrap(), 3);
    assert_eq!(budget_allowed("30", 5).unwrap(), 30, "counts are not capped");
    assert!(budget_allowed("abc", 5).is_err());
    assert!(budget_allowed("150%", 5).is_err());
}

// ---------------------------------------------------------------------------------------------------------------
// Strict parsing
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn unknown_field_reported_with_line_and_column() {
    let yaml = MINIMAL.replace("      requirements:\n", "      requirments:\n        - key: x\n      requirements:\n");
    let yaml = yaml.replace("  name: minimal\n", "  name: minimal\n  colour: blue\n");
    let diags = parse_nodepool_strict(&yaml, "pool.yaml").unwrap_err();
    let unknown: Vec<_> = diags.iter().filter(|d| d.kind == DiagnosticKind::UnknownField).collect();
    assert_eq!(unknown.len(), 2, "{diags:#?}");
    assert_eq!((unknown[0].line, unknown[0].column, unknown[0].path.as_str()), (5, 3, "metadata.colour"));
    assert_eq!(
        (unknown[1].line, unknown[1].column, unknown[1].path.as_str()),
        (13, 7, "spec.template.spec.requirments")
    );
    assert_eq!(unknown[0].file, "pool.yaml");
    assert!(unknown[0].to_string().starts_with("pool.yaml:5:3: unknown field: metadata.colour"), "{}", unknown[0]);
}

#[test]
fn unknown_field_inside_a_list_item() {
    let yaml = MINIMAL.replace("          operator: In\n", "          operator: In\n          minValue: 1\n");
    let diags = parse_nodepool_strict(&yaml, "p.yaml").unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!((diags[0].line, diags[0].column), (15, 11));
    assert_eq!(diags[0].path, "spec.template.spec.requirements[0].minValue");
}

#[test]
fn syntax_error_has_location() {
    let diags =
        parse_nodepool_strict("apiVersion: karpenter.sh/v1\nkind: [NodePool\nmetadata: {}\n", "s.yaml").unwrap_err();
    assert_eq!(diags[0].kind, DiagnosticKind::Syntax, "{diags:#?}");
    assert!(diags[0].line >= 2, "{diags:#?}");
}

#[test]
fn type_error_has_location_and_path() {
    let yaml = MINIMAL.replace("values: [\"on-demand\"]", "values: 7");
    let diags = parse_nodepool_strict(&yaml, "t.yaml").unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].kind, DiagnosticKind::Type);
    assert_eq!(diags[0].line, 15, "{diags:#?}");
    assert!(diags[0].path.starts_with("spec.template.spec.requirements[0]"), "{diags:#?}");
}

#[test]
fn wrong_api_version_and_kind() {
    let yaml = MINIMAL.replace("karpenter.sh/v1", "karpenter.sh/v1beta1").replace("kind: NodePool", "kind: NodeClaim");
    let diags = parse_nodepool_strict(&yaml, "k.yaml").unwrap_err();
    let kinds: Vec<_> = diags.iter().map(|d| (d.kind, d.line, d.column, d.path.as_str())).collect();
    assert_eq!(kinds, [(DiagnosticKind::WrongKind, 1, 13, "apiVersion"), (DiagnosticKind::WrongKind, 2, 7, "kind")]);
    let missing = MINIMAL.replace("apiVersion: karpenter.sh/v1\n", "");
    let diags = parse_nodepool_strict(&missing, "k.yaml").unwrap_err();
    assert_eq!((diags[0].kind, diags[0].path.as_str()), (DiagnosticKind::WrongKind, "apiVersion"));
}

#[test]
fn validation_errors_map_to_lines() {
    let yaml = MINIMAL.replace("values: [\"on-demand\"]", "values: [\"on-demand\", \"bad value\"]")
        + "  weight: 0\n  disruption:\n    budgets:\n      - nodes: 200%\n";
    let diags = parse_nodepool_strict(&yaml, "v.yaml").unwrap_err();
    let got: Vec<_> = diags.iter().map(|d| (d.line, d.column, d.path.as_str())).collect();
    assert_eq!(
        got,
        [
            (15, 33, "spec.template.spec.requirements[0].values[1]"),
            (16, 3, "spec.weight"),
            (19, 9, "spec.disruption.budgets[0].nodes"),
        ]
    );
    assert!(diags.iter().all(|d| d.kind == DiagnosticKind::Invalid));
}

#[test]
fn missing_field_falls_back_to_parent() {
    let yaml = MINIMAL.replace("        group: karpenter.k8s.aws\n", "");
    let diags = parse_nodepool_strict(&yaml, "m.yaml").unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(
        (diags[0].line, diags[0].column, diags[0].path.as_str()),
        (8, 7, "spec.template.spec.nodeClassRef.group")
    );
}

#[test]
fn locate_helper() {
    assert_eq!(locate(FULL, "spec.disruption.budgets[1].schedule"), Some((58, 9)));
    assert_eq!(locate(FULL, "spec.template.metadata.labels[billing-team]"), Some((10, 9)));
    assert_eq!(locate(FULL, "spec.nothing"), None);
}

#[test]
fn strict_nodeclaim_and_ec2nodeclass_report_problems() {
    let bad = NODECLAIM.replace("effect: NoSchedule", "effect: Sometimes");
    let d = parse_nodeclaim_strict(&bad, "nc.yaml").unwrap_err();
    assert_eq!((d[0].line, d[0].path.as_str()), (30, "spec.taints[0].effect"));
    let bad = EC2NODECLASS.replace("alias: al2023@latest", "alias: al2023");
    let d = parse_ec2nodeclass_strict(&bad, "ec2.yaml").unwrap_err();
    assert_eq!((d[0].line, d[0].path.as_str()), (23, "spec.amiSelectorTerms[0].alias"));
}

#[test]
fn odd_inputs_do_not_panic() {
    for input in ["", "---", "~", "[]", "a", "\t", "{", "key: &a [*a]", "--- !!binary x", "? [a]\n: b", "\u{feff}"] {
        assert!(parse_nodepool_strict(input, "odd.yaml").is_err(), "{input:?}");
    }
    assert!(parse_nodepool_strict(&format!("{MINIMAL}---\n{MINIMAL}"), "multi.yaml").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn strict_parser_never_panics(s in "[ a-zA-Z0-9:\\-\\[\\]{}\"'#&*!|>%@,.?\n\t]{0,200}") {
        let _ = parse_nodepool_strict(&s, "fuzz.yaml");
        let _ = locate(&s, "spec.template");
    }

    #[test]
    fn mutated_fixture_never_panics(cut in 0usize..2000, insert in "[ a-z:\\-\\[\\]{}\n]{0,12}") {
        let mut s = FULL.to_string();
        let at = (cut % s.len()).min(s.len());
        let at = (0..=at).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        s.insert_str(at, &insert);
        let _ = parse_nodepool_strict(&s, "fuzz.yaml");
    }
}

#[test]
fn impossible_schedule_is_an_error_not_a_hang() {
    let start = std::time::Instant::now();
    let r = budget_is_active("0 0 30 2 *", "1h", utc(2024, 1, 1, 0, 0, 0));
    assert!(matches!(r, Err(BudgetError::NoOccurrence { .. })), "{r:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "took {:?}", start.elapsed());
}

proptest! {
    #[test]
    fn arbitrary_unicode_never_panics(s in any::<String>()) {
        let _ = parse_nodepool_strict(&s, "fuzz.yaml");
        let _ = parse_nodeclaim_strict(&s, "fuzz.yaml");
        let _ = locate(&s, &s);
    }
}

#[test]
fn capacity_reservation_selector_terms_follow_the_crd() {
    let base: EC2NodeClass = serde_yaml::from_str(EC2NODECLASS).unwrap();
    let errs = |terms: &str| -> Vec<(String, String)> {
        let mut nc = base.clone();
        nc.spec.capacity_reservation_selector_terms = serde_yaml::from_str(terms).unwrap();
        validate_ec2nodeclass(&nc).into_iter().map(|e| (e.path.to_string(), e.message)).collect()
    };
    assert!(
        errs("[{id: cr-0123abc}, {tags: {team: ml}, ownerID: '123456789012', instanceMatchCriteria: open}]").is_empty()
    );
    assert_eq!(
        errs("[{ownerID: '123456789012'}]"),
        [(
            "spec.capacityReservationSelectorTerms[0]".to_string(),
            "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']".to_string()
        )]
    );
    // `id` with other fields is refused only when every term does so (the CRD's `!self.all(...)`).
    let mixed =
        "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term";
    assert_eq!(
        errs("[{id: cr-1, tags: {a: b}}]"),
        [("spec.capacityReservationSelectorTerms".to_string(), mixed.to_string())]
    );
    assert!(errs("[{id: cr-1, tags: {a: b}}, {id: cr-2}]").is_empty());
    let paths: Vec<String> = errs("[{id: CR-1}, {tags: {'': x}, ownerID: '12', instanceMatchCriteria: maybe}]")
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        paths,
        [
            "spec.capacityReservationSelectorTerms[0].id",
            "spec.capacityReservationSelectorTerms[1].tags[]",
            "spec.capacityReservationSelectorTerms[1].ownerID",
            "spec.capacityReservationSelectorTerms[1].instanceMatchCriteria",
        ]
    );
}
