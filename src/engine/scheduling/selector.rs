//! Label selectors (`matchLabels` + `matchExpressions`), compiled once and matched many times.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Expr {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    /// An unknown operator matches nothing (fail closed).
    Never,
}

/// A compiled label selector. `None` selector semantics (match nothing) are the caller's concern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Selector {
    exprs: Vec<Expr>,
}

impl Selector {
    pub fn from_label_selector(s: &LabelSelector) -> Selector {
        let mut exprs = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            exprs.push(Expr::In(k.clone(), vec![v.clone()]));
        }
        for e in s.match_expressions.iter().flatten() {
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            values.dedup();
            exprs.push(match e.operator.as_str() {
                "In" => Expr::In(e.key.clone(), values),
                "NotIn" => Expr::NotIn(e.key.clone(), values),
                "Exists" => Expr::Exists(e.key.clone()),
                "DoesNotExist" => Expr::DoesNotExist(e.key.clone()),
                _ => Expr::Never,
            });
        }
        exprs.sort();
        Selector { exprs }
    }

    /// Adds `key In [value]` (how `matchLabelKeys` are applied: the pod's own value for each key).
    pub fn with_label(mut self, key: &str, value: &str) -> Selector {
        self.exprs.push(Expr::In(key.to_string(), vec![value.to_string()]));
        self.exprs.sort();
        self
    }

    /// Adds `key NotIn [value]` (`mismatchLabelKeys`).
    pub fn without_label(mut self, key: &str, value: &str) -> Selector {
        self.exprs.push(Expr::NotIn(key.to_string(), vec![value.to_string()]));
        self.exprs.sort();
        self
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.exprs.iter().all(|e| match e {
            Expr::In(k, vs) => labels.get(k).is_some_and(|v| vs.binary_search(v).is_ok()),
            Expr::NotIn(k, vs) => labels.get(k).is_none_or(|v| vs.binary_search(v).is_err()),
            Expr::Exists(k) => labels.contains_key(k),
            Expr::DoesNotExist(k) => !labels.contains_key(k),
            Expr::Never => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn matches_labels_and_expressions() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["db".into()]),
            }]),
        });
        let mut l = BTreeMap::new();
        l.insert("app".to_string(), "web".to_string());
        assert!(s.matches(&l));
        l.insert("tier".to_string(), "db".to_string());
        assert!(!s.matches(&l));
        assert!(Selector::default().matches(&BTreeMap::new()), "empty selector matches everything");
    }
}
