//! NodeOverlay: validation, evaluation and application over the public API. The acceptance cases come from upstream
//! core v1.14.1 (`controllers/nodeoverlay/suite_test.go` and `store_test.go`); each names the `It(...)` it mirrors.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_tui::engine::api::nodeoverlay::{
    MSG_BOUND_NEEDS_INTEGER, MSG_HOSTNAME, MSG_IN_NEEDS_VALUE, MSG_KARPENTER_DOMAIN, MSG_NOT_IN_NEEDS_VALUE,
    MSG_PRICE_AND_ADJUSTMENT, MSG_RESTRICTED_RESOURCE, NodeOverlay, NodeOverlaySpec, validate_nodeoverlay,
};
use karpenter_tui::engine::api::validation::FieldError;
use karpenter_tui::engine::catalog::{InstanceType, Offering};
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::rfc3339;
use karpenter_tui::engine::overlay::{
    ANNOTATION_CAPACITY_OVERLAY_APPLIED, ANNOTATION_PRICE_OVERLAY_APPLIED, CONDITION_READY,
    CONDITION_VALIDATION_SUCCEEDED, CONFLICT_MESSAGE, Evaluation, OfferingKey, OverlayOutcome, OverlayPool,
    PriceChange, REASON_CONFLICT, REASON_RUNTIME_VALIDATION, evaluate,
};
use karpenter_tui::engine::requirements::{Requirement, Requirements};
use karpenter_tui::engine::resources::Resources;

// ---------------------------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------------------------

const EPS: f64 = 1e-9;
const FUSE: &str = "example.com/fuse";

fn offering(capacity_type: &str, zone: &str, price: f64) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
        price,
        available: true,
        reservation: None,
    }
}

fn instance_type(name: &str, arch: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
    let mut r = Requirements::new();
    r.add(labels::INSTANCE_TYPE, Requirement::in_values([name]));
    r.add(labels::ARCH, Requirement::in_values([arch]));
    r.add(labels::OS, Requirement::in_values(["linux"]));
    r.add(labels::ZONE, Requirement::in_values(offerings.iter().map(|o| o.zone.clone())));
    r.add(labels::CAPACITY_TYPE, Requirement::in_values(offerings.iter().map(|o| o.capacity_type.clone())));
    Arc::new(InstanceType {
        name: name.to_string(),
        requirements: r,
        capacity: Resources::new(4000, 16 << 30, 110),
        overhead: Resources::new(100, 1 << 30, 0),
        offerings,
        volume_limits: Default::default(),
    })
}

fn default_offerings(price: f64) -> Vec<Offering> {
    vec![
        offering(labels::CAPACITY_SPOT, "test-zone-1", price),
        offering(labels::CAPACITY_ON_DEMAND, "test-zone-1", price * 2.0),
        offering(labels::CAPACITY_ON_DEMAND, "test-zone-2", price * 2.0),
    ]
}

fn catalog() -> Vec<Arc<InstanceType>> {
    vec![
        instance_type("amd-small", "amd64", default_offerings(0.1)),
        instance_type("amd-large", "amd64", default_offerings(0.4)),
        instance_type("arm-small", "arm64", default_offerings(0.08)),
    ]
}

fn pool(name: &str, pool_labels: &[(&str, &str)], types: Vec<Arc<InstanceType>>) -> OverlayPool {
    let labels = pool_labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    OverlayPool::new(name, labels, types)
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: op.to_string(),
        values: if values.is_empty() { None } else { Some(values.iter().map(|v| v.to_string()).collect()) },
    }
}

fn overlay(name: &str, weight: Option<i32>, requirements: Vec<NodeSelectorRequirement>) -> NodeOverlay {
    NodeOverlay::new(name, NodeOverlaySpec { requirements, weight, ..Default::default() })
}

fn with_price(mut o: NodeOverlay, price: &str) -> NodeOverlay {
    o.spec.price = Some(price.to_string());
    o
}

fn with_adjustment(mut o: NodeOverlay, adj: &str) -> NodeOverlay {
    o.spec.price_adjustment = Some(adj.to_string());
    o
}

fn with_capacity(mut o: NodeOverlay, capacity: &[(&str, &str)]) -> NodeOverlay {
    o.spec.capacity = Some(capacity.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect());
    o
}

fn applied(ev: &Evaluation, pool: &OverlayPool) -> Vec<Arc<InstanceType>> {
    ev.apply(&pool.name, &pool.instance_types).expect("pool was evaluated")
}

fn find<'a>(types: &'a [Arc<InstanceType>], name: &str) -> &'a InstanceType {
    types.iter().find(|t| t.name == name).expect("instance type present")
}

fn price(it: &InstanceType, capacity_type: &str, zone: &str) -> f64 {
    it.offerings.iter().find(|o| o.capacity_type == capacity_type && o.zone == zone).expect("offering").price
}

fn messages_at(errs: &[FieldError], path: &str) -> Vec<String> {
    errs.iter().filter(|e| e.path.to_string() == path).map(|e| e.message.clone()).collect()
}

fn valid_overlay() -> NodeOverlay {
    with_price(overlay("valid", Some(10), vec![req(labels::ARCH, "In", &["arm64"])]), "1.5")
}

// ---------------------------------------------------------------------------------------------------------------
// Acceptance (spec §1)
// ---------------------------------------------------------------------------------------------------------------

/// Upstream: suite_test.go › "should fail when requirements overlays overlap".
#[test]
fn should_fail_when_requirements_overlays_overlap() {
    let a = with_price(overlay("overlay-a", Some(10), vec![req(labels::ARCH, "In", &["arm64"])]), "1.03");
    let b = with_price(overlay("overlay-b", Some(10), vec![req(labels::CAPACITY_TYPE, "Exists", &[])]), "23");
    let p = pool("default", &[], catalog());
    let ev = evaluate(&[a.clone(), b.clone()], std::slice::from_ref(&p));

    assert_eq!(ev.outcome("overlay-b"), Some(&OverlayOutcome::Applied));
    assert_eq!(ev.outcome("overlay-a"), Some(&OverlayOutcome::Conflict));
    let conds = ev.desired_conditions(&a, 5_000).unwrap();
    let vs = conds.iter().find(|c| c.type_ == CONDITION_VALIDATION_SUCCEEDED).unwrap();
    assert_eq!(vs.status, "False");
    assert_eq!(vs.reason.as_deref(), Some(REASON_CONFLICT));
    assert_eq!(vs.message.as_deref(), Some(CONFLICT_MESSAGE));
    assert_eq!(vs.last_transition_time.as_deref(), Some(rfc3339(5_000).as_str()));
    let ready = conds.iter().find(|c| c.type_ == CONDITION_READY).unwrap();
    assert_eq!(ready.status, "False");
    let conds_b = ev.desired_conditions(&b, 5_000).unwrap();
    assert!(conds_b.iter().all(|c| c.status == "True"), "{conds_b:?}");

    // b's price stands everywhere, a's nowhere (not even on the arm64 type).
    let types = applied(&ev, &p);
    for t in &types {
        assert!(t.offerings.iter().all(|o| (o.price - 23.0).abs() < EPS), "{}: {:?}", t.name, t.offerings);
    }
}

/// Upstream: suite_test.go › "should update price updates offerings instance types from multiple overlays with
/// different weights".
#[test]
fn should_update_price_updates_offerings_instance_types_from_multiple_overlays_with_different_weights() {
    let t = instance_type(
        "test-instance-type",
        "amd64",
        vec![
            offering(labels::CAPACITY_SPOT, "test-zone-1", 1.02),
            offering(labels::CAPACITY_ON_DEMAND, "test-zone-2", 2.02),
            offering(labels::CAPACITY_RESERVED, "test-zone-4", 4.02),
        ],
    );
    let a = with_adjustment(overlay("overlay-a", Some(20), vec![req(labels::ZONE, "In", &["test-zone-2"])]), "+201");
    let b = with_adjustment(
        overlay("overlay-b", Some(10), vec![req(labels::ZONE, "In", &["test-zone-2", "test-zone-4"])]),
        "-1.5",
    );
    let p = pool("default", &[], vec![t]);
    let ev = evaluate(&[b, a], std::slice::from_ref(&p));
    assert!(ev.outcomes().values().all(OverlayOutcome::is_applied), "{:?}", ev.outcomes());

    let types = applied(&ev, &p);
    let got = find(&types, "test-instance-type");
    assert!((price(got, labels::CAPACITY_SPOT, "test-zone-1") - 1.02).abs() < EPS);
    assert!((price(got, labels::CAPACITY_ON_DEMAND, "test-zone-2") - 203.02).abs() < EPS);
    assert!((price(got, labels::CAPACITY_RESERVED, "test-zone-4") - 2.52).abs() < EPS);

    // Provenance for the dashboard: which overlay set which offering.
    let detailed = ev.apply_detailed("default", &p.instance_types).unwrap();
    let prov = &detailed.provenance["test-instance-type"];
    let by: BTreeMap<String, &str> = prov.prices.iter().map(|p| (p.offering.to_string(), p.overlay.as_str())).collect();
    assert_eq!(
        by,
        BTreeMap::from([
            ("on-demand/test-zone-2".to_string(), "overlay-a"),
            ("reserved/test-zone-4".to_string(), "overlay-b")
        ])
    );
    assert_eq!(
        ev.effects("overlay-b").prices,
        vec![(
            "default".to_string(),
            "test-instance-type".to_string(),
            OfferingKey {
                capacity_type: labels::CAPACITY_RESERVED.to_string(),
                zone: "test-zone-4".to_string(),
                reservation_id: None
            }
        )]
    );
}

/// Upstream: suite_test.go › "should not partial apply for a subset of nodepools".
#[test]
fn should_not_partial_apply_for_a_subset_of_nodepools() {
    let np1 = pool("np-1", &[("team", "a")], catalog());
    let np2 = pool("np-2", &[("team", "b")], catalog());
    // Same weight: "zz-team-b" sorts first (name descending) and takes np-2's offerings.
    let winner = with_price(overlay("zz-team-b", Some(10), vec![req("team", "In", &["b"])]), "5");
    // Matches both pools; it conflicts only in np-2, yet must not be applied in np-1 either.
    let loser = with_price(overlay("aa-everything", Some(10), vec![req(labels::INSTANCE_TYPE, "Exists", &[])]), "7");
    let ev = evaluate(&[loser, winner], &[np1.clone(), np2.clone()]);

    assert_eq!(ev.outcome("zz-team-b"), Some(&OverlayOutcome::Applied));
    assert_eq!(ev.outcome("aa-everything"), Some(&OverlayOutcome::Conflict));
    let raw = catalog();
    let in_np1 = applied(&ev, &np1);
    for (got, orig) in in_np1.iter().zip(&raw) {
        assert_eq!(got.offerings, orig.offerings, "np-1 must keep raw prices");
    }
    assert!(ev.effects("aa-everything").prices.is_empty());
    let in_np2 = applied(&ev, &np2);
    assert!(in_np2.iter().flat_map(|t| &t.offerings).all(|o| (o.price - 5.0).abs() < EPS));
}

/// Upstream: suite_test.go › "should pass with capacity adjustment are the same overlays with overlapping
/// requirements" — despite the title, equal weight and a shared resource conflict even with identical values.
#[test]
fn should_pass_with_capacity_adjustment_are_the_same_overlays_with_overlapping_requirements() {
    let a = with_capacity(overlay("overlay-a", Some(10), vec![req(labels::ARCH, "In", &["amd64"])]), &[(FUSE, "5")]);
    let b = with_capacity(overlay("overlay-b", Some(10), vec![req(labels::OS, "In", &["linux"])]), &[(FUSE, "5")]);
    let p = pool("default", &[], catalog());
    let ev = evaluate(&[a, b], std::slice::from_ref(&p));
    assert_eq!(ev.outcome("overlay-b"), Some(&OverlayOutcome::Applied));
    assert_eq!(ev.outcome("overlay-a"), Some(&OverlayOutcome::Conflict));
    let types = applied(&ev, &p);
    assert!(types.iter().all(|t| t.capacity.get(FUSE) == 5));
    assert!(ev.effects("overlay-a").capacity.is_empty());
    assert_eq!(ev.effects("overlay-b").capacity.len(), 3);
}

/// Upstream: suite_test.go › "should apply higher weight overlay when multiple overlays match the same instance
/// type".
#[test]
fn should_apply_higher_weight_overlay_when_multiple_overlays_match_the_same_instance_type() {
    let high = with_capacity(overlay("high", Some(20), vec![req(labels::ARCH, "In", &["amd64"])]), &[(FUSE, "99")]);
    // Lower weight: loses `fuse`, but adds a resource nobody set.
    let low = with_capacity(
        overlay("low", Some(10), vec![req(labels::ARCH, "In", &["amd64"])]),
        &[(FUSE, "5"), ("example.com/gpu", "1")],
    );
    let p = pool("default", &[], catalog());
    let ev = evaluate(&[low, high], std::slice::from_ref(&p));
    assert!(ev.outcomes().values().all(OverlayOutcome::is_applied), "{:?}", ev.outcomes());
    let types = applied(&ev, &p);
    let amd = find(&types, "amd-small");
    assert_eq!(amd.capacity.get(FUSE), 99);
    assert_eq!(amd.capacity.get("example.com/gpu"), 1);
    assert_eq!(amd.capacity.cpu, 4000, "core resources untouched");
    let arm = find(&types, "arm-small");
    assert_eq!(arm.capacity.get(FUSE), 0, "arm64 is not matched");
    assert!(Arc::ptr_eq(&types[2], &p.instance_types[2]), "unchanged types are shared, not copied");

    let detailed = ev.apply_detailed("default", &p.instance_types).unwrap();
    assert!(detailed.is_capacity_overlaid("amd-small") && !detailed.is_capacity_overlaid("arm-small"));
    assert_eq!(
        detailed.nodeclaim_annotations(["amd-small", "arm-small"]),
        BTreeMap::from([(ANNOTATION_CAPACITY_OVERLAY_APPLIED.to_string(), "true".to_string())])
    );
    assert!(detailed.nodeclaim_annotations(["arm-small"]).is_empty());
}

/// Upstream: store_test.go › "should return error for unevaluated node pool".
#[test]
fn should_return_error_for_unevaluated_node_pool() {
    let p = pool("evaluated", &[], catalog());
    let ev = evaluate(&[], std::slice::from_ref(&p));
    assert!(ev.apply("not-evaluated", &p.instance_types).is_none());
    let err = ev.check_evaluated("not-evaluated").unwrap_err();
    assert_eq!(err.to_string(), "awaiting nodeoverlay evaluation, nodepool not-evaluated");
    // An evaluated pool with no overlays gets its types back unchanged.
    let got = ev.apply("evaluated", &p.instance_types).unwrap();
    assert!(got.iter().zip(&p.instance_types).all(|(a, b)| Arc::ptr_eq(a, b)));
    assert!(Evaluation::default().apply("evaluated", &p.instance_types).is_none(), "nothing evaluated yet");
}

// ---------------------------------------------------------------------------------------------------------------
// Ordering, matching, arithmetic
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn ties_are_ordered_by_name_descending() {
    let all = vec![req(labels::INSTANCE_TYPE, "Exists", &[])];
    let overlays = [
        with_price(overlay("alpha", Some(5), all.clone()), "1"),
        with_price(overlay("zulu", Some(5), all.clone()), "2"),
        with_price(overlay("mike", Some(50), all.clone()), "3"),
        with_price(overlay("bravo", None, all.clone()), "4"),
    ];
    let p = pool("default", &[], catalog());
    let ev = evaluate(&overlays, std::slice::from_ref(&p));
    assert_eq!(ev.order(), ["mike", "zulu", "alpha", "bravo"]);
    // mike wins every offering; zulu (weight 5) conflicts with nothing at its weight yet, so it is applied but
    // changes nothing; alpha then conflicts with zulu at weight 5, even though its name sorts first alphabetically.
    assert_eq!(ev.outcome("zulu"), Some(&OverlayOutcome::Applied));
    assert_eq!(ev.outcome("alpha"), Some(&OverlayOutcome::Conflict));
    assert_eq!(ev.outcome("bravo"), Some(&OverlayOutcome::Applied));
    assert!(applied(&ev, &p).iter().flat_map(|t| &t.offerings).all(|o| (o.price - 3.0).abs() < EPS));
}

#[test]
fn tie_winner_is_the_later_name() {
    let zone2 = vec![req(labels::ZONE, "In", &["test-zone-2"])];
    let arm = vec![req(labels::ARCH, "In", &["arm64"])];
    // Equal weight, overlapping on arm-small's on-demand/test-zone-2 offering: "b" sorts first and keeps it.
    let ev = evaluate(
        &[with_price(overlay("a", Some(1), zone2), "9"), with_price(overlay("b", Some(1), arm), "8")],
        &[pool("default", &[], catalog())],
    );
    let types = applied(&ev, &pool("default", &[], catalog()));
    let arm_small = find(&types, "arm-small");
    assert!((price(arm_small, labels::CAPACITY_SPOT, "test-zone-1") - 8.0).abs() < EPS);
    assert_eq!(ev.outcome("a"), Some(&OverlayOutcome::Conflict), "b sorted first and holds arm-small/test-zone-2");
}

#[test]
fn price_arithmetic() {
    assert!((PriceChange::parse("+10%").unwrap().apply(2.0) - 2.2).abs() < EPS);
    assert!((PriceChange::parse("-15%").unwrap().apply(2.0) - 1.7).abs() < EPS);
    assert!((PriceChange::parse("+1.2").unwrap().apply(2.0) - 3.2).abs() < EPS);
    assert!((PriceChange::parse("-0.5").unwrap().apply(2.0) - 1.5).abs() < EPS);
    assert_eq!(PriceChange::parse("0.75").unwrap().apply(2.0), 0.75);
    assert_eq!(PriceChange::parse("-129").unwrap().apply(2.0), 0.0, "clamped at zero");
    assert_eq!(PriceChange::parse("-100%").unwrap().apply(2.0), 0.0);
    let tiny = PriceChange::parse("-99.99999999999%").unwrap().apply(3.0);
    assert!(tiny > 0.0 && tiny < 1e-9, "{tiny}");
    assert!(PriceChange::parse("10%").is_err());
}

#[test]
fn prices_are_recomputed_from_the_current_base_at_read_time() {
    let p = pool("default", &[], catalog());
    let o = with_adjustment(overlay("half", Some(1), vec![req(labels::CAPACITY_TYPE, "In", &["spot"])]), "-50%");
    let ev = evaluate(&[o], std::slice::from_ref(&p));
    // Spot moves after the evaluation: the relative change follows it.
    let moved: Vec<Arc<InstanceType>> = p
        .instance_types
        .iter()
        .map(|t| {
            let mut t = InstanceType::clone(t);
            for o in &mut t.offerings {
                o.price *= 3.0;
            }
            Arc::new(t)
        })
        .collect();
    let types = ev.apply("default", &moved).unwrap();
    let small = find(&types, "amd-small");
    assert!((price(small, labels::CAPACITY_SPOT, "test-zone-1") - 0.15).abs() < EPS);
    assert!((price(small, labels::CAPACITY_ON_DEMAND, "test-zone-1") - 0.6).abs() < EPS, "on-demand untouched");
    let detailed = ev.apply_detailed("default", &moved).unwrap();
    assert_eq!(
        detailed.nodeclaim_annotations(["amd-small"]),
        BTreeMap::from([(ANNOTATION_PRICE_OVERLAY_APPLIED.to_string(), "true".to_string())])
    );
}

#[test]
fn matching_uses_pool_name_and_template_labels_and_needs_defined_keys() {
    let np = pool("gpu", &[("team", "ml")], catalog());
    let other = pool("general", &[], catalog());
    let by_pool = with_price(overlay("by-pool", Some(3), vec![req(labels::NODEPOOL, "In", &["gpu"])]), "1");
    let by_label = with_price(overlay("by-label", Some(2), vec![req("team", "In", &["ml"])]), "2");
    // `undefined` is on no pool or type: never matches (not even "Exists").
    let undefined = with_price(overlay("undefined", Some(1), vec![req("undefined", "Exists", &[])]), "3");
    // Negative requirements on an undefined key are compatible (upstream `Compatible`).
    let negative = with_capacity(
        overlay("negative", Some(1), vec![req("undefined", "DoesNotExist", &[])]),
        &[("example.com/neg", "1")],
    );
    let ev = evaluate(&[by_pool, by_label, undefined, negative], &[np.clone(), other.clone()]);
    assert!(ev.outcomes().values().all(OverlayOutcome::is_applied), "{:?}", ev.outcomes());
    let gpu = applied(&ev, &np);
    assert!(gpu.iter().flat_map(|t| &t.offerings).all(|o| (o.price - 1.0).abs() < EPS));
    let general = applied(&ev, &other);
    assert_eq!(find(&general, "amd-small").offerings, catalog()[0].offerings);
    assert_eq!(find(&general, "amd-small").capacity.get("example.com/neg"), 1);
    assert!(ev.effects("undefined").prices.is_empty() && ev.effects("by-label").prices.is_empty());
}

#[test]
fn invalid_overlays_are_reported_and_skipped() {
    let p = pool("default", &[], catalog());
    // Passes the CRD, fails runtime validation: no known capacity type.
    let runtime = with_price(overlay("runtime", Some(5), vec![req(labels::CAPACITY_TYPE, "In", &["cheap"])]), "1");
    // Would have been rejected by the API server (scenario files bypass it): also skipped.
    let crd = with_adjustment(overlay("crd", Some(5), vec![req(labels::ARCH, "In", &["amd64"])]), "10%");
    let ev = evaluate(&[runtime.clone(), crd], std::slice::from_ref(&p));
    let OverlayOutcome::RuntimeValidation(msg) = ev.outcome("runtime").unwrap() else { panic!("{:?}", ev.outcomes()) };
    assert!(msg.contains("no valid values found") && msg.contains("in requirements, restricted"), "{msg}");
    assert!(matches!(ev.outcome("crd"), Some(OverlayOutcome::RuntimeValidation(m)) if m.contains("priceAdjustment")));
    let got = applied(&ev, &p);
    assert!(got.iter().zip(&p.instance_types).all(|(a, b)| Arc::ptr_eq(a, b)));
    let conds = ev.desired_conditions(&runtime, 0).unwrap();
    let vs = conds.iter().find(|c| c.type_ == CONDITION_VALIDATION_SUCCEEDED).unwrap();
    assert_eq!(vs.reason.as_deref(), Some(REASON_RUNTIME_VALIDATION));
    assert_eq!(vs.message.as_deref(), Some(msg.as_str()));
}

#[test]
fn reads_leniently_from_yaml() {
    let yaml = r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: spot-discount
spec:
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["spot"]
  priceAdjustment: "-10%"
  capacity:
    example.com/fuse: 2
  weight: 7
  futureField: ignored
status:
  conditions:
    - type: Ready
      status: "True"
"#;
    let o: NodeOverlay = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(o.name(), "spot-discount");
    assert_eq!(o.weight(), 7);
    assert_eq!(o.spec.price_adjustment.as_deref(), Some("-10%"));
    assert_eq!(o.spec.capacity.as_ref().unwrap()[FUSE].0, "2");
    assert_eq!(o.condition("Ready").map(|c| c.status.as_str()), Some("True"));
    assert!(validate_nodeoverlay(&o).is_empty(), "{:?}", validate_nodeoverlay(&o));
}

// ---------------------------------------------------------------------------------------------------------------
// CRD validation messages
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn valid_overlay_passes() {
    assert!(validate_nodeoverlay(&valid_overlay()).is_empty());
}

#[test]
fn requirements_at_most_100() {
    let mut o = valid_overlay();
    o.spec.requirements = (0..101).map(|i| req(&format!("key-{i}"), "Exists", &[])).collect();
    let errs = validate_nodeoverlay(&o);
    assert_eq!(messages_at(&errs, "spec.requirements"), ["must have at most 100 items"]);
    o.spec.requirements.truncate(100);
    assert!(validate_nodeoverlay(&o).is_empty());
}

#[test]
fn requirements_are_required() {
    let mut o = valid_overlay();
    o.spec.requirements.clear();
    assert_eq!(messages_at(&validate_nodeoverlay(&o), "spec.requirements"), ["Required value"]);
}

#[test]
fn in_and_not_in_need_values() {
    let mut o = valid_overlay();
    o.spec.requirements = vec![req("team", "In", &[]), req("team", "NotIn", &[]), req("team", "Exists", &[])];
    let errs = validate_nodeoverlay(&o);
    assert_eq!(messages_at(&errs, "spec.requirements[0].values"), [MSG_IN_NEEDS_VALUE]);
    assert_eq!(messages_at(&errs, "spec.requirements[1].values"), [MSG_NOT_IN_NEEDS_VALUE]);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(MSG_IN_NEEDS_VALUE, "requirements with operator 'In' must have a value defined");
    assert_eq!(MSG_NOT_IN_NEEDS_VALUE, "requirements with operator 'NotIn' must have a value defined");
}

#[test]
fn bound_operators_need_one_non_negative_integer() {
    let mut o = valid_overlay();
    o.spec.requirements = vec![
        req("cpu-count", "Gt", &["-1"]),
        req("cpu-count", "Lt", &["1", "2"]),
        req("cpu-count", "Gte", &["x"]),
        req("cpu-count", "Lte", &[]),
        req("cpu-count", "Gt", &["0"]),
        req("cpu-count", "Lte", &["64"]),
    ];
    let errs = validate_nodeoverlay(&o);
    for i in 0..4 {
        assert_eq!(messages_at(&errs, &format!("spec.requirements[{i}].values")), [MSG_BOUND_NEEDS_INTEGER], "{i}");
    }
    // The 5th error: "-1" is not a valid label value either.
    assert_eq!(messages_at(&errs, "spec.requirements[0].values[0]").len(), 1, "{errs:?}");
    assert_eq!(errs.len(), 5, "{errs:?}");
    assert_eq!(
        MSG_BOUND_NEEDS_INTEGER,
        "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"
    );
}

#[test]
fn unknown_operator_is_rejected() {
    let mut o = valid_overlay();
    o.spec.requirements = vec![req("team", "Like", &["a"])];
    let errs = validate_nodeoverlay(&o);
    let msgs = messages_at(&errs, "spec.requirements[0].operator");
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].contains("\"Gte\", \"Lte\""), "{msgs:?}");
}

#[test]
fn restricted_keys() {
    let mut o = valid_overlay();
    o.spec.requirements = vec![
        req("karpenter.sh/custom", "Exists", &[]),
        req("team.karpenter.sh/x", "Exists", &[]),
        req(labels::HOSTNAME, "In", &["node-1"]),
        req(labels::CAPACITY_TYPE, "In", &["spot"]),
        req(labels::NODEPOOL, "In", &["default"]),
        req("example.com/team", "In", &["a"]),
    ];
    let errs = validate_nodeoverlay(&o);
    assert_eq!(messages_at(&errs, "spec.requirements[0].key"), [MSG_KARPENTER_DOMAIN]);
    assert_eq!(messages_at(&errs, "spec.requirements[1].key"), [MSG_KARPENTER_DOMAIN]);
    assert_eq!(messages_at(&errs, "spec.requirements[2].key"), [MSG_HOSTNAME]);
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert_eq!(MSG_KARPENTER_DOMAIN, "label domain \"karpenter.sh\" is restricted");
    assert_eq!(MSG_HOSTNAME, "label \"kubernetes.io/hostname\" is restricted");
}

#[test]
fn price_pattern() {
    for ok in ["0", "1.03", "23"] {
        assert!(validate_nodeoverlay(&with_price(overlay("p", None, vec![req("a", "Exists", &[])]), ok)).is_empty());
    }
    for bad in ["+1", "-1", ".5", "1.", "abc", "1%"] {
        let errs = validate_nodeoverlay(&with_price(overlay("p", None, vec![req("a", "Exists", &[])]), bad));
        assert_eq!(messages_at(&errs, "spec.price"), [r"should match '^\d+(\.\d+)?$'"], "{bad}");
    }
}

#[test]
fn price_adjustment_needs_a_sign_and_stops_at_minus_100_percent() {
    let base = || overlay("p", None, vec![req("a", "Exists", &[])]);
    for ok in ["+1.2", "-129", "+298%", "-5%", "-99.99999999999%", "-100%", "+.5"] {
        assert!(validate_nodeoverlay(&with_adjustment(base(), ok)).is_empty(), "{ok}");
    }
    for bad in ["1.2", "10%", "-100.5%", "-101%", "-200%", "+", "-.5%", "+1.2.3"] {
        let errs = validate_nodeoverlay(&with_adjustment(base(), bad));
        assert_eq!(messages_at(&errs, "spec.priceAdjustment").len(), 1, "{bad}: {errs:?}");
    }
}

#[test]
fn capacity_rejects_core_resources() {
    let base = || overlay("c", None, vec![req("a", "Exists", &[])]);
    let ok = with_capacity(base(), &[(FUSE, "1"), ("hugepages-2Mi", "1Gi"), ("nvidia.com/gpu", "8")]);
    assert!(validate_nodeoverlay(&ok).is_empty());
    for core in ["cpu", "memory", "ephemeral-storage", "pods"] {
        let errs = validate_nodeoverlay(&with_capacity(base(), &[(core, "1")]));
        assert_eq!(messages_at(&errs, &format!("spec.capacity[{core}]")), [MSG_RESTRICTED_RESOURCE], "{core}");
    }
    assert_eq!(MSG_RESTRICTED_RESOURCE, "invalid resource restricted");
    let errs = validate_nodeoverlay(&with_capacity(base(), &[(FUSE, "lots")]));
    assert_eq!(messages_at(&errs, &format!("spec.capacity[{FUSE}]")).len(), 1);
}

#[test]
fn weight_bounds() {
    let base = |w| overlay("w", Some(w), vec![req("a", "Exists", &[])]);
    assert!(validate_nodeoverlay(&base(1)).is_empty());
    assert!(validate_nodeoverlay(&base(10_000)).is_empty());
    assert_eq!(messages_at(&validate_nodeoverlay(&base(0)), "spec.weight"), ["should be greater than or equal to 1"]);
    assert_eq!(
        messages_at(&validate_nodeoverlay(&base(10_001)), "spec.weight"),
        ["should be less than or equal to 10000"]
    );
}

#[test]
fn price_and_adjustment_are_exclusive() {
    let o = with_adjustment(valid_overlay(), "+1");
    let errs = validate_nodeoverlay(&o);
    assert_eq!(messages_at(&errs, "spec"), [MSG_PRICE_AND_ADJUSTMENT]);
    assert_eq!(MSG_PRICE_AND_ADJUSTMENT, "cannot set both 'price' and 'priceAdjustment'");
    assert_eq!(errs[0].object, "NodeOverlay/valid");
}

// ---------------------------------------------------------------------------------------------------------------
// The controller: overlays in the simulated world (scenario objects and apply events, gate NodeOverlay)
// ---------------------------------------------------------------------------------------------------------------

mod in_the_world {
    use karpenter_tui::engine::overlay::ANNOTATION_PRICE_OVERLAY_APPLIED;
    use karpenter_tui::sim::report::{DecisionDetail, DisruptionMethod};
    use karpenter_tui::sim::run::{run, run_world};
    use karpenter_tui::sim::scenario::parse_scenario;

    fn shipped() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/overlay.yaml")).expect("file")
    }

    fn launched(r: &karpenter_tui::sim::report::Report) -> Vec<(f64, String)> {
        r.node_claims
            .iter()
            .map(|c| (c.created_at, c.launched.as_ref().map(|l| l.instance_type.clone()).unwrap_or_default()))
            .collect()
    }

    #[test]
    fn an_overlay_changes_the_type_provisioning_chooses_and_the_launch() {
        let s = parse_scenario(&shipped(), "scenarios/overlay.yaml").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
        // The c family's -40% makes c-large ($0.12) cheaper than m-large ($0.192); after 10m c-large is dearer.
        assert_eq!(launched(&r), vec![(1.0, "c-large".to_string()), (661.0, "m-large".to_string())]);
        assert_eq!(r.node_claims[0].instance_types[0], "c-large", "cheapest first by the overlaid price");
        let w = run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
        let first = w.cluster.nodeclaims.get(&r.node_claims[0].name).expect("claim");
        let annotations = first.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get(ANNOTATION_PRICE_OVERLAY_APPLIED).map(String::as_str), Some("true"));
        // Statuses: the discount applies; of the two weight-20 overlays the later name is evaluated first
        // (upstream's order), so `z-conflicting` applies and `c-large-list-price` conflicts.
        let cond = |name: &str| {
            let o = w.cluster.nodeoverlays.get(name).expect("overlay");
            let c = o.condition("ValidationSucceeded").expect("condition").clone();
            (c.status, c.reason.unwrap_or_default())
        };
        assert_eq!(cond("c-family-discount"), ("True".into(), "ValidationSucceeded".into()));
        assert_eq!(cond("z-conflicting"), ("True".into(), "ValidationSucceeded".into()));
        assert_eq!(cond("c-large-list-price"), ("False".into(), "Conflict".into()));
        // Overlays never drift nodes: the c-large node is still there.
        assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()));
    }

    #[test]
    fn with_the_gate_off_overlays_are_ignored() {
        let text = shipped().replace("featureGates: {NodeOverlay: true}", "featureGates: {NodeOverlay: false}");
        let s = parse_scenario(&text, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(launched(&r)[0].1, "m-large");
        let w = run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
        assert!(w.cluster.nodeoverlays.values().all(|o| o.status.is_none()), "no status written with the gate off");
    }

    #[test]
    fn moving_an_overlay_consolidates_onto_the_type_it_now_favours() {
        // aws test/suites/consolidation › "should consolidate a instance that is the cheepest based on a price
        // adjustment node overlay applied"
        let overlay = |t: &str| {
            format!(
                "      - apiVersion: karpenter.sh/v1alpha1\n        kind: NodeOverlay\n        metadata: {{name: cheap}}\n        spec:\n          requirements: [{{key: node.kubernetes.io/instance-type, operator: In, values: [{t}]}}]\n          priceAdjustment: \"-99.99999999999%\"\n"
            )
        };
        let text = shipped()
            .replace("consolidateAfter: 1h", "consolidateAfter: 0s")
            .replace("      replicas: 2\n", "      replicas: 1\n");
        // Drop the shipped timeline and overlays; apply ours.
        let head = text.split("\nevents:").next().expect("head").to_string();
        // Without the shipped discount (a higher weight would keep its prices first).
        let discount = "  - apiVersion: karpenter.sh/v1alpha1\n    kind: NodeOverlay\n    metadata: {name: c-family-discount}\n    spec:\n      weight: 10\n      requirements:\n        - {key: family, operator: In, values: [c]}\n      priceAdjustment: \"-40%\"\n";
        assert!(head.contains(discount), "the shipped scenario's discount overlay");
        let head = head.replace(discount, "");
        let text = format!(
            "{head}\nevents:\n  - at: 0s\n    apply:\n{}  - at: 5m\n    apply:\n{}",
            overlay("m-large"),
            overlay("c-large")
        );
        let s = parse_scenario(&text, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(launched(&r)[0].1, "m-large", "{:?}", launched(&r));
        let consolidation = r.decisions.iter().find_map(|d| match &d.detail {
            DecisionDetail::Disruption { method: DisruptionMethod::SingleNode, replacements, .. } => {
                Some((d.at, replacements.clone()))
            }
            _ => None,
        });
        let (at, replacements) = consolidation.expect("a single-node consolidation");
        assert!(at >= 300.0, "after the overlay moved: {at}");
        assert_eq!(replacements[0].instance_types, vec!["c-large".to_string()]);
        let alive: Vec<_> =
            r.nodes.iter().filter(|n| n.deleted_at.is_none()).map(|n| n.instance_type.clone()).collect();
        assert_eq!(alive, vec!["c-large".to_string()]);
    }

    /// A scenario where an overlay gives c-large 4 `example.com/widget` (as a GPU time-slicing overlay gives
    /// `nvidia.com/gpu`), and a Deployment whose pods each request one.
    fn widget_scenario(overlay: bool) -> String {
        let overlay = if overlay {
            "  - apiVersion: karpenter.sh/v1alpha1\n    kind: NodeOverlay\n    metadata: {name: widgets}\n    spec:\n      requirements:\n        - {key: node.kubernetes.io/instance-type, operator: In, values: [c-large]}\n      capacity: {example.com/widget: \"4\"}\n"
        } else {
            ""
        };
        let head = shipped().split("\nevents:").next().expect("head").to_string();
        let head = head.replace("  - apiVersion: apps/v1\n", &format!("{overlay}  - apiVersion: apps/v1\n"));
        head.replace(
            "resources: {requests: {cpu: \"1\", memory: 2Gi}}",
            "resources: {requests: {cpu: \"1\", memory: 2Gi}, limits: {example.com/widget: \"1\"}}",
        )
        .replace("until: 30m", "until: 10m")
    }

    #[test]
    fn a_type_an_overlay_gives_an_extended_resource_is_launched_for_pods_that_request_it() {
        let s = parse_scenario(&widget_scenario(true), "widgets.yaml").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
        // One claim, launched as the overlaid type, and it stays: no create/delete cycle.
        assert_eq!(launched(&r), vec![(1.0, "c-large".to_string())], "{:?}", r.node_claims);
        assert!(r.node_claims.iter().all(|c| c.deleted_at.is_none()), "{:?}", r.node_claims);
        let w = run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
        assert!(w.cluster.pods.values().all(|p| p.node_name().is_some()));
        let node = w.cluster.nodes.values().next().expect("a node");
        let widgets =
            node.status.as_ref().and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get("example.com/widget"));
        assert_eq!(widgets.map(|q| q.0.as_str()), Some("4"), "the node has the overlaid capacity");
    }

    #[test]
    fn a_launch_that_can_never_succeed_ends_its_claim_once_instead_of_cycling() {
        // Without the overlay no type has widgets: the scheduler finds none and nothing is created.
        let s = parse_scenario(&widget_scenario(false), "widgets.yaml").unwrap_or_else(|e| panic!("{e}"));
        let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.node_claims.is_empty(), "{:?}", r.node_claims);
    }

    #[test]
    fn an_invalid_overlay_in_a_scenario_is_a_located_error() {
        let text = shipped().replace("priceAdjustment: \"-40%\"", "priceAdjustment: \"40%\"");
        let e = parse_scenario(&text, "bad.yaml").expect_err("no sign").to_string();
        assert!(e.starts_with("bad.yaml:") && e.contains("objects[1].spec.priceAdjustment"), "{e}");
    }
}

/// `plan` (and the observing dashboard) apply a cluster's overlays when told its Karpenter runs the gate.
#[test]
fn plan_applies_overlays_with_the_gate() {
    use karpenter_tui::controller::settings::FeatureGates;
    use karpenter_tui::engine::catalog::kwok::kwok_catalog;
    use karpenter_tui::engine::manifests::ClusterObjects;
    use karpenter_tui::shell::passes::plan_with;
    let text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}\n      requirements:\n        - {key: kubernetes.io/os, operator: In, values: [linux]}\n        - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n---\napiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: big-is-cheap}\nspec:\n  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [c-16x-amd64-linux]}]\n  price: \"0.001\"\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}}}]\n";
    let m = ClusterObjects::parse(text, "plan.yaml").expect("parses");
    let catalog = kwok_catalog("us-east-1");
    let cheapest = |gates: FeatureGates| {
        let r = plan_with(&m, &catalog, gates);
        r.results.new_claims[0].instance_types[0].name.clone()
    };
    assert_ne!(cheapest(FeatureGates::default()), "c-16x-amd64-linux");
    let on = FeatureGates::default().with_flag("NodeOverlay=true").expect("gate");
    assert_eq!(cheapest(on), "c-16x-amd64-linux");
}

/// AWS's v1.14 `GetOverlayPrice`: which overlays price a type the price list lacks.
#[test]
fn instance_type_only_overlays_price_unpriced_types() {
    use karpenter_tui::engine::api::nodeoverlay::NodeOverlay;
    use karpenter_tui::engine::overlay::instance_type_prices;
    let ov = |name: &str, weight: i32, reqs: &str, price: &str, ok: bool| -> NodeOverlay {
        let status = if ok { "True" } else { "False" };
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {{name: {name}}}\nspec:\n  weight: {weight}\n  requirements: {reqs}\n  {price}\nstatus:\n  conditions: [{{type: ValidationSucceeded, status: \"{status}\", reason: x, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}}]\n"
        ))
        .expect("overlay")
    };
    let it = "[{key: node.kubernetes.io/instance-type, operator: In, values: [m9.large, m9.xlarge]}]";
    let overlays = vec![
        ov("a", 10, it, "price: \"0.1\"", true),
        ov(
            "b",
            20,
            "[{key: node.kubernetes.io/instance-type, operator: In, values: [m9.large]}]",
            "price: \"0.2\"",
            true,
        ),
        // Not only an instance-type requirement, a relative price, or not validated: none of these count.
        ov(
            "c",
            30,
            "[{key: node.kubernetes.io/instance-type, operator: In, values: [m9.metal]}, {key: kubernetes.io/arch, operator: In, values: [amd64]}]",
            "price: \"0.3\"",
            true,
        ),
        ov(
            "d",
            30,
            "[{key: node.kubernetes.io/instance-type, operator: In, values: [m9.2xlarge]}]",
            "priceAdjustment: \"+1\"",
            true,
        ),
        ov(
            "e",
            30,
            "[{key: node.kubernetes.io/instance-type, operator: In, values: [m9.4xlarge]}]",
            "price: \"0.4\"",
            false,
        ),
    ];
    let prices = instance_type_prices(&overlays);
    assert_eq!(prices.get("m9.large"), Some(&0.2), "the heavier overlay gives it");
    assert_eq!(prices.get("m9.xlarge"), Some(&0.1));
    assert_eq!(prices.len(), 2, "{prices:?}");
}
