//! Taints and tolerations, with the Kubernetes matching rules.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether one toleration tolerates one taint.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => t.key.as_deref().is_none_or(|k| k.is_empty() || k == taint.key),
        "Equal" => {
            t.key.as_deref() == Some(taint.key.as_str())
                && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// The first taint (of effect NoSchedule or NoExecute, plus PreferNoSchedule unless `ignore_prefer`) that no
/// toleration tolerates.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    ignore_prefer: bool,
) -> Option<&'a Taint> {
    taints.iter().find(|taint| {
        if ignore_prefer && taint.effect == "PreferNoSchedule" {
            return false;
        }
        !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

pub fn taint_string(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={}:{}", t.key, v, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

/// Taints a node carries while it starts, which the scheduler must not hold against an uninitialized node.
pub fn is_known_ephemeral(t: &Taint) -> bool {
    matches!(
        (t.key.as_str(), t.effect.as_str()),
        ("node.kubernetes.io/not-ready", "NoSchedule" | "NoExecute")
            | ("node.kubernetes.io/unreachable", "NoSchedule")
            | ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule")
            | ("karpenter.sh/unregistered", "NoExecute")
    ) || t.key.starts_with("readiness.k8s.io/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(k: &str, v: Option<&str>, e: &str) -> Taint {
        Taint { key: k.into(), value: v.map(Into::into), effect: e.into(), time_added: None }
    }
    fn tol(k: Option<&str>, op: &str, v: Option<&str>, e: Option<&str>) -> Toleration {
        Toleration {
            key: k.map(Into::into),
            operator: Some(op.into()),
            value: v.map(Into::into),
            effect: e.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn matching_rules() {
        let t = taint("gpu", Some("true"), "NoSchedule");
        assert!(tolerates(&tol(Some("gpu"), "Equal", Some("true"), None), &t));
        assert!(!tolerates(&tol(Some("gpu"), "Equal", Some("false"), None), &t));
        assert!(tolerates(&tol(Some("gpu"), "Exists", None, Some("NoSchedule")), &t));
        assert!(!tolerates(&tol(Some("gpu"), "Exists", None, Some("NoExecute")), &t));
        assert!(tolerates(&tol(None, "Exists", None, None), &t), "empty key + Exists tolerates everything");
        let p = taint("soft", None, "PreferNoSchedule");
        assert!(first_untolerated(std::slice::from_ref(&p), &[], true).is_none());
        assert!(first_untolerated(std::slice::from_ref(&p), &[], false).is_some());
    }
}
