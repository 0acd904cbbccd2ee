//! Label and taint keys Karpenter gives meaning to, key normalisation, and the restricted-label rules.

use std::collections::BTreeSet;

pub const NODEPOOL: &str = "karpenter.sh/nodepool";
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const REGISTERED: &str = "karpenter.sh/registered";
pub const INITIALIZED: &str = "karpenter.sh/initialized";
pub const NODECLASS_EC2: &str = "karpenter.k8s.aws/ec2nodeclass";

pub const CAPACITY_SPOT: &str = "spot";
pub const CAPACITY_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_RESERVED: &str = "reserved";
pub const CAPACITY_TYPES: [&str; 3] = [CAPACITY_ON_DEMAND, CAPACITY_SPOT, CAPACITY_RESERVED];

pub const TAINT_DISRUPTED: &str = "karpenter.sh/disrupted";
pub const TAINT_UNREGISTERED: &str = "karpenter.sh/unregistered";
pub const ANNOTATION_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// Vetoes node repair on a Node or NodeClaim (read from Karpenter 1.15 on; only the value "true" counts).
pub const ANNOTATION_DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";
pub const ANNOTATION_NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
pub const ANNOTATION_NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
pub const ANNOTATION_MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
pub const NODEPOOL_HASH_VERSION: &str = "v3";
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Labels every Karpenter provider understands (upstream `WellKnownLabels`).
pub const CORE_WELL_KNOWN: [&str; 8] = [NODEPOOL, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, WINDOWS_BUILD];

/// The EBS CSI driver's zone key, which its volumes' node affinity and StorageClasses' `allowedTopologies` use.
pub const EBS_CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// Deprecated keys and their current names (upstream `NormalizedLabels`), with the EBS CSI driver's zone key that
/// the AWS provider adds to them at start-up (`pkg/operator/operator.go`), so a volume pinned to
/// `topology.ebs.csi.aws.com/zone` constrains the node's `topology.kubernetes.io/zone`.
pub fn normalize_key(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" | EBS_CSI_ZONE => ZONE,
        "beta.kubernetes.io/arch" => ARCH,
        "beta.kubernetes.io/os" => OS,
        "beta.kubernetes.io/instance-type" => INSTANCE_TYPE,
        "failure-domain.beta.kubernetes.io/region" => REGION,
        other => other,
    }
}

/// The label naming a node's class, keyed by the class's group and kind (upstream `NodeClassLabelKey`:
/// `karpenter.k8s.aws/ec2nodeclass`); `None` for a reference without a group or kind.
pub fn node_class_key(r: &crate::engine::api::common::NodeClassReference) -> Option<String> {
    (!r.group.is_empty() && !r.kind.is_empty()).then(|| format!("{}/{}", r.group, r.kind.to_lowercase()))
}

/// The domain of a label key: the part before `/`, or "" for unprefixed keys.
pub fn domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(d, _)| d)
}

fn in_domain(label_domain: &str, d: &str) -> bool {
    label_domain == d || label_domain.ends_with(&format!(".{d}"))
}

/// Which labels a cloud provider treats as well-known (resolved from its instance types) and which label domains
/// it reserves. Core's own set is always included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPolicy {
    pub well_known: BTreeSet<String>,
    /// Restricted domains besides `kubernetes.io`, `k8s.io` and `karpenter.sh` (e.g. `karpenter.k8s.aws`).
    pub provider_domains: Vec<String>,
}

impl Default for LabelPolicy {
    fn default() -> Self {
        LabelPolicy {
            well_known: CORE_WELL_KNOWN.iter().map(|s| s.to_string()).collect(),
            provider_domains: Vec::new(),
        }
    }
}

impl LabelPolicy {
    pub fn is_well_known(&self, key: &str) -> bool {
        self.well_known.contains(key)
    }

    /// Why a key may not be used in a NodePool's requirements or template labels, or in a pod's node selector and
    /// node affinity (upstream `IsRestrictedLabel` plus the CRD's CEL rules). `None` when it may.
    pub fn restricted(&self, key: &str) -> Option<String> {
        if key == HOSTNAME {
            return Some(format!("label {key:?} is restricted"));
        }
        if self.is_well_known(key) {
            return None;
        }
        let d = domain(key);
        for exception in ["kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"] {
            if in_domain(d, exception) {
                return None;
            }
        }
        let core = ["kubernetes.io", "k8s.io", "karpenter.sh"];
        for restricted in core.iter().copied().chain(self.provider_domains.iter().map(String::as_str)) {
            if in_domain(d, restricted) {
                return Some(format!(
                    "label domain {restricted:?} is restricted; use a well-known label or a custom label outside it"
                ));
            }
        }
        None
    }
}

/// A "did you mean" hint for an unknown label (upstream prints the closest well-known key).
pub fn hint<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(key, c);
        if d <= 3.max(key.len() / 5) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_domains() {
        let p = LabelPolicy::default();
        assert!(p.restricted(HOSTNAME).is_some());
        assert!(p.restricted("karpenter.sh/foo").is_some());
        assert!(p.restricted("sub.karpenter.sh/foo").is_some());
        assert!(p.restricted("kubernetes.io/foo").is_some());
        assert!(p.restricted(NODEPOOL).is_none());
        assert!(p.restricted(ZONE).is_none());
        assert!(p.restricted("node.kubernetes.io/lifecycle").is_none());
        assert!(p.restricted("team").is_none());
        assert!(p.restricted("example.com/team").is_none());
        assert!(p.restricted("notkarpenter.sh/x").is_none());
    }

    #[test]
    fn normalises_deprecated_keys() {
        assert_eq!(normalize_key("failure-domain.beta.kubernetes.io/zone"), ZONE);
        assert_eq!(normalize_key("beta.kubernetes.io/arch"), ARCH);
        assert_eq!(normalize_key("team"), "team");
    }

    #[test]
    fn hints_close_keys() {
        assert_eq!(hint("topology.kubernetes.io/zon", CORE_WELL_KNOWN.into_iter()), Some(ZONE));
        assert_eq!(hint("team", CORE_WELL_KNOWN.into_iter()), None);
    }
}
