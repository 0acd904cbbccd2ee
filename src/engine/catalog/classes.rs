//! The instance types each NodePool sees when one catalog stands for the whole cloud (the embedded AWS catalog in
//! `plan --file`, `simulate` and `demo`; the region-wide live one): upstream computes instance types per
//! EC2NodeClass, so a Windows, Bottlerocket or `maxPods` class changes what its pools can launch. Derived once per
//! class and kept until the class or the catalog changes.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{Catalog, InstanceType, aws};
use crate::engine::api::common::NodeClassReference;
use crate::engine::api::{EC2NodeClass, NodePool};

/// Per-class catalogs derived from one base catalog, by EC2NodeClass name.
#[derive(Debug, Default, Clone)]
pub struct ClassCatalogs {
    entries: BTreeMap<String, Entry>,
    /// The AWS gate `NodeClassCEL` (v1.15): kubelet expressions resolved per type.
    cel: bool,
}

#[derive(Debug, Clone)]
struct Entry {
    key: u64,
    /// `None`: the class could not be applied (its error was logged); its pools see the base catalog.
    catalog: Option<Arc<Catalog>>,
}

/// The EC2NodeClass a reference names (an empty group or kind counts as one, as upstream's `IsManaged`).
fn ec2_class(r: &NodeClassReference) -> Option<&str> {
    ((r.kind.is_empty() || r.kind == "EC2NodeClass") && (r.group.is_empty() || r.group == aws::DOMAIN))
        .then_some(r.name.as_str())
}

fn class_of(pool: &NodePool) -> Option<&str> {
    ec2_class(&pool.spec.template.spec.node_class_ref)
}

/// Only a catalog of AWS instance types depends on the node class.
fn is_aws(base: &Catalog) -> bool {
    base.label_policy.provider_domains.iter().any(|d| d == aws::DOMAIN)
}

/// What the derived catalog depends on: the base catalog it came from, and the class's spec and subnets.
fn key_of(base: &Arc<Catalog>, class: &EC2NodeClass) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (Arc::as_ptr(base) as usize).hash(&mut h);
    serde_json::to_string(&class.spec).unwrap_or_default().hash(&mut h);
    let subnets = class.status.as_ref().map(|s| serde_json::to_string(&s.subnets).unwrap_or_default());
    subnets.hash(&mut h);
    h.finish()
}

impl ClassCatalogs {
    /// Catalogs that resolve kubelet expressions (`NodeClassCEL` on, Karpenter v1.15) or leave them out.
    pub fn with_kubelet_expressions(mut self, on: bool) -> Self {
        self.cel = on;
        self
    }

    /// Derives the catalogs of the classes that are new or changed since the last call, and forgets the ones gone.
    /// Returns whether anything changed.
    pub fn sync(&mut self, base: &Arc<Catalog>, classes: &[EC2NodeClass]) -> bool {
        if !is_aws(base) {
            let changed = !self.entries.is_empty();
            self.entries.clear();
            return changed;
        }
        let before = self.entries.len();
        let mut changed = false;
        let mut kept = BTreeMap::new();
        for class in classes {
            let Some(name) = class.metadata.name.as_deref() else { continue };
            let key = key_of(base, class);
            let entry = match self.entries.remove(name) {
                Some(e) if e.key == key => e,
                _ => {
                    changed = true;
                    Entry { key, catalog: derive(base, class, name, self.cel) }
                }
            };
            kept.insert(name.to_string(), entry);
        }
        changed |= kept.len() != before || !self.entries.is_empty();
        self.entries = kept;
        changed
    }

    /// The catalog derived for `pool`'s EC2NodeClass, when the class exists and applied.
    pub fn for_pool(&self, pool: &NodePool) -> Option<&Arc<Catalog>> {
        self.for_ref(&pool.spec.template.spec.node_class_ref)
    }

    /// The catalog derived for the class a reference names (a NodeClaim's), when it exists and applied.
    pub fn for_ref(&self, r: &NodeClassReference) -> Option<&Arc<Catalog>> {
        self.entries.get(ec2_class(r)?)?.catalog.as_ref()
    }

    /// A NodePool's instance types: its class's, else the base catalog's.
    pub fn types_for(&self, base: &Catalog, pool: &NodePool) -> Vec<Arc<InstanceType>> {
        self.for_pool(pool).map_or_else(|| base.instance_types.clone(), |c| c.instance_types.clone())
    }
}

/// `base` as `class` sees it; `None` (logged) when the class cannot be applied.
fn derive(base: &Catalog, class: &EC2NodeClass, name: &str, cel: bool) -> Option<Arc<Catalog>> {
    match aws::for_class(base, class, cel) {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            tracing::warn!(ec2nodeclass = name, "instance types: {e}; its NodePools see the default node class's");
            None
        }
    }
}

/// Instance types per NodePool, derived afresh for the classes the pools name: for a single pass (`plan --file`, a
/// picture while observing). `cel`: kubelet expressions are resolved (`NodeClassCEL`, v1.15).
pub fn pool_types(
    base: &Catalog,
    pools: &[NodePool],
    classes: &[EC2NodeClass],
    cel: bool,
) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
    let mut derived = ClassCatalogs::default().with_kubelet_expressions(cel);
    if is_aws(base) {
        for class in classes {
            let Some(name) = class.metadata.name.as_deref() else { continue };
            if pools.iter().any(|p| class_of(p) == Some(name)) {
                derived.entries.insert(name.to_string(), Entry { key: 0, catalog: derive(base, class, name, cel) });
            }
        }
    }
    pools.iter().map(|p| (p.name().to_string(), derived.types_for(base, p))).collect()
}

/// One line per Windows EC2NodeClass the pools use, saying how its nodes are priced: at the Linux rates, as
/// upstream prices them (its on-demand and spot price queries are Linux-only), so the Windows licence EC2 bills on
/// top is in no figure.
pub fn pricing_notes(pools: &[NodePool], classes: &[EC2NodeClass]) -> Vec<String> {
    classes
        .iter()
        .filter_map(|c| {
            let name = c.metadata.name.as_deref()?;
            let family = aws::AmiFamily::of(Some(c)).ok().filter(|f| f.is_windows())?;
            pools.iter().any(|p| class_of(p) == Some(name)).then(|| {
                format!(
                    "EC2NodeClass {name} runs {family:?}: its nodes are priced at Linux on-demand and spot rates, as \
                     upstream Karpenter prices them (it reads Linux prices only); the Windows licence EC2 adds is not \
                     included"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::ec2nodeclass::{AmiSelectorTerm, EC2NodeClassSpec};
    use crate::engine::labels;

    fn windows_class() -> EC2NodeClass {
        EC2NodeClass::new(
            "windows",
            EC2NodeClassSpec {
                ami_selector_terms: vec![AmiSelectorTerm {
                    alias: Some("windows2022@latest".into()),
                    ..Default::default()
                }],
                ..Default::default()
            },
        )
    }

    fn pool(class: &str) -> NodePool {
        let mut p: NodePool = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n      \
             requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}\n",
        )
        .unwrap();
        p.spec.template.spec.node_class_ref.name = class.into();
        p
    }

    #[test]
    fn a_windows_class_offers_windows_on_amd64_only() {
        let base = Arc::new(aws::aws_catalog("us-east-1", None, None, 0).unwrap());
        let types = pool_types(&base, &[pool("windows")], &[windows_class()], false);
        let types = &types["p"];
        let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
        assert_eq!(m5.requirements.get(labels::OS).values, ["windows"]);
        assert_eq!(m5.requirements.get(labels::WINDOWS_BUILD).values, ["10.0.20348"]);
        let m6g = types.iter().find(|t| t.name == "m6g.large").unwrap();
        assert!(m6g.requirements.get(labels::OS).values.is_empty(), "no Windows on arm64");
        // Priced as upstream prices it: the Linux offering's price.
        let base_m5 = base.get("m5.large").unwrap();
        assert_eq!(m5.offerings[0].price, base_m5.offerings[0].price);
        // Windows reserves more than Linux: less allocatable than the default class's m5.large.
        assert!(m5.allocatable().memory < base_m5.allocatable().memory);
    }

    #[test]
    fn a_pool_without_its_class_and_a_non_aws_catalog_see_the_base() {
        let base = Arc::new(aws::aws_catalog("us-east-1", None, None, 0).unwrap());
        let types = pool_types(&base, &[pool("missing")], &[windows_class()], false);
        assert!(Arc::ptr_eq(&types["p"][0], &base.instance_types[0]));
        let kwok = Arc::new(crate::engine::catalog::kwok::kwok_catalog("us-east-1"));
        let mut c = ClassCatalogs::default();
        assert!(!c.sync(&kwok, &[windows_class()]));
        assert!(c.for_pool(&pool("windows")).is_none());
    }

    #[test]
    fn windows_classes_say_how_they_are_priced() {
        let notes = pricing_notes(&[pool("windows"), pool("default")], &[windows_class()]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("EC2NodeClass windows runs Windows2022: its nodes are priced at Linux"),
            "{notes:?}"
        );
        assert!(pricing_notes(&[pool("default")], &[windows_class()]).is_empty(), "no pool uses it");
    }

    #[test]
    fn derives_again_only_when_the_class_or_catalog_changes() {
        let base = Arc::new(aws::aws_catalog("us-east-1", None, None, 0).unwrap());
        let mut c = ClassCatalogs::default();
        assert!(c.sync(&base, &[windows_class()]));
        let first = c.for_pool(&pool("windows")).unwrap().clone();
        assert!(!c.sync(&base, &[windows_class()]));
        assert!(Arc::ptr_eq(&first, c.for_pool(&pool("windows")).unwrap()));
        let mut changed = windows_class();
        changed.spec.ami_selector_terms[0].alias = Some("windows2019@latest".into());
        assert!(c.sync(&base, &[changed]));
        let again = c.for_pool(&pool("windows")).unwrap();
        assert_eq!(again.get("m5.large").unwrap().requirements.get(labels::WINDOWS_BUILD).values, ["10.0.17763"]);
        assert!(c.sync(&base, &[]));
        assert!(c.for_pool(&pool("windows")).is_none());
    }
}
