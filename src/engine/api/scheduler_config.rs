//! Karpenter v1.15's `--scheduler-config` document: the default pod topology spread constraints its scheduler
//! gives pods that declare none (kube-scheduler's PodTopologySpread `defaultConstraints`), checked as upstream checks
//! the flag at startup (`pkg/operator/options`): unknown fields, a `labelSelector` or `matchLabelKeys` (the selector
//! is deduced per pod), a non-positive `maxSkew`, a bad `topologyKey` or action, and a repeated key-and-action pair
//! are refused.

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::{Deserialize, Serialize};

use super::validation::{FieldError, FieldPath, qualified_name_errors};

/// `{podTopologySpread: {defaultConstraints: [...]}}`; empty means no defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_topology_spread: Option<PodTopologySpreadArgs>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

// Constraints hold no floating-point numbers: equality is total.
impl Eq for SchedulerConfig {}

impl SchedulerConfig {
    pub fn default_constraints(&self) -> &[TopologySpreadConstraint] {
        self.pod_topology_spread.as_ref().map_or(&[], |a| &a.default_constraints)
    }

    /// Whether the document configures nothing (upstream's default: no change to any pod).
    pub fn is_empty(&self) -> bool {
        self.default_constraints().is_empty()
    }

    /// One line per constraint for `info` and the header: `topology.kubernetes.io/zone maxSkew 1 DoNotSchedule`.
    pub fn describe(&self) -> Vec<String> {
        self.default_constraints()
            .iter()
            .map(|c| {
                let mut s = format!("{} maxSkew {} {}", c.topology_key, c.max_skew, c.when_unsatisfiable);
                if let Some(m) = c.min_domains {
                    s.push_str(&format!(" minDomains {m}"));
                }
                s
            })
            .collect()
    }
}

/// Every rule upstream checks the flag's constraints against, as field errors under `podTopologySpread`.
pub fn validate_scheduler_config(c: &SchedulerConfig) -> Vec<FieldError> {
    let mut out = Vec::new();
    let base = FieldPath::root().field("podTopologySpread").field("defaultConstraints");
    let mut err = |path: FieldPath, value: String, message: &str| {
        out.push(FieldError { object: "schedulerConfig".into(), path, value, message: message.to_string() })
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in c.default_constraints().iter().enumerate() {
        let at = |f: &str| base.index(i).field(f);
        if t.max_skew <= 0 {
            err(at("maxSkew"), t.max_skew.to_string(), "Invalid value: must be greater than zero");
        }
        if t.topology_key.is_empty() {
            err(at("topologyKey"), String::new(), "Required value: can not be empty");
        } else if let Some(problem) = qualified_name_errors(&t.topology_key).into_iter().next() {
            err(at("topologyKey"), t.topology_key.clone(), &format!("Invalid value: {problem}"));
        }
        if !matches!(t.when_unsatisfiable.as_str(), "DoNotSchedule" | "ScheduleAnyway") {
            err(
                at("whenUnsatisfiable"),
                t.when_unsatisfiable.clone(),
                "Unsupported value: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            );
        }
        if let Some(m) = t.min_domains
            && m <= 0
        {
            err(at("minDomains"), m.to_string(), "Invalid value: must be greater than zero");
        }
        for (field, value) in
            [("nodeAffinityPolicy", &t.node_affinity_policy), ("nodeTaintsPolicy", &t.node_taints_policy)]
        {
            if let Some(v) = value
                && v != "Honor"
                && v != "Ignore"
            {
                err(at(field), v.clone(), "Unsupported value: supported values: \"Honor\", \"Ignore\"");
            }
        }
        if t.label_selector.is_some() {
            err(
                at("labelSelector"),
                String::new(),
                "Forbidden: constraint must not define a selector, as they deduced for each pod",
            );
        }
        if t.match_label_keys.as_ref().is_some_and(|k| !k.is_empty()) {
            err(at("matchLabelKeys"), String::new(), "Forbidden: default constraints must not define matchLabelKeys");
        }
        let pair = (t.topology_key.as_str(), t.when_unsatisfiable.as_str());
        if seen.contains(&pair) {
            err(
                base.index(i),
                format!("{{{}, {}}}", pair.0, pair.1),
                "Duplicate value: the pair of topologyKey and whenUnsatisfiable is already set",
            );
        }
        seen.push(pair);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> SchedulerConfig {
        serde_yaml::from_str(yaml).expect("parses")
    }

    fn messages(yaml: &str) -> Vec<String> {
        validate_scheduler_config(&parse(yaml)).into_iter().map(|e| format!("{}: {}", e.path, e.message)).collect()
    }

    const ZONE: &str = "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n";

    #[test]
    fn a_plain_default_is_accepted_and_described() {
        let c = parse(ZONE);
        assert!(validate_scheduler_config(&c).is_empty());
        assert_eq!(c.describe(), vec!["topology.kubernetes.io/zone maxSkew 1 DoNotSchedule".to_string()]);
        assert!(SchedulerConfig::default().is_empty());
    }

    #[test]
    fn each_rule_names_its_field() {
        let bad = "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 0\n    topologyKey: ''\n    whenUnsatisfiable: Sometimes\n    labelSelector: {matchLabels: {app: x}}\n    matchLabelKeys: [pod-template-hash]\n";
        let m = messages(bad);
        for want in [
            "podTopologySpread.defaultConstraints[0].maxSkew: Invalid value",
            "podTopologySpread.defaultConstraints[0].topologyKey: Required value",
            "podTopologySpread.defaultConstraints[0].whenUnsatisfiable: Unsupported value",
            "podTopologySpread.defaultConstraints[0].labelSelector: Forbidden",
            "podTopologySpread.defaultConstraints[0].matchLabelKeys: Forbidden",
        ] {
            assert!(m.iter().any(|l| l.starts_with(want)), "{want} in {m:?}");
        }
    }
}
