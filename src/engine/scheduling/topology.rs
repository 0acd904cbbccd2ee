//! Topology spread, pod affinity and pod anti-affinity: groups of pods counted per domain (zone, hostname, ...),
//! and the domains a pod may still go to.
//!
//! A group is created for every distinct constraint among the pods being scheduled (deduplicated), plus an
//! "inverse" group for every required anti-affinity term of a bound or batch pod, so that a pod matched by someone
//! else's anti-affinity stays out of that someone's domains.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::pod::{AffinityTerm, Namespaces, PodData, SpreadConstraint};
use super::selector::Selector;
use super::taints;
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::{Requirement, Requirements};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKind {
    Spread,
    Affinity,
    AntiAffinity,
}

impl GroupKind {
    pub fn describe(self) -> &'static str {
        match self {
            GroupKind::Spread => "topology spread",
            GroupKind::Affinity => "pod affinity",
            GroupKind::AntiAffinity => "pod anti-affinity",
        }
    }
}

/// Which nodes a spread constraint counts (nodeAffinityPolicy / nodeTaintsPolicy).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NodeFilter {
    /// The owning pod's node selector ∧ each required term (ORed); empty = any node.
    pub terms: Vec<Requirements>,
    pub tolerations: Option<Vec<TolerationKey>>,
}

/// Tolerations in a hashable form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TolerationKey {
    key: Option<String>,
    operator: Option<String>,
    value: Option<String>,
    effect: Option<String>,
}

impl TolerationKey {
    fn of(t: &Toleration) -> Self {
        TolerationKey {
            key: t.key.clone(),
            operator: t.operator.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
        }
    }
    fn toleration(&self) -> Toleration {
        Toleration {
            key: self.key.clone(),
            operator: self.operator.clone(),
            value: self.value.clone(),
            effect: self.effect.clone(),
            toleration_seconds: None,
        }
    }
}

impl NodeFilter {
    pub fn matches(&self, node_reqs: &Requirements, node_taints: &[Taint], policy: &LabelPolicy) -> bool {
        if let Some(tols) = &self.tolerations {
            let tols: Vec<Toleration> = tols.iter().map(TolerationKey::toleration).collect();
            if taints::first_untolerated(node_taints, &tols, true).is_some() {
                return false;
            }
        }
        self.terms.is_empty() || self.terms.iter().any(|t| node_reqs.compatible(t, Some(policy)).is_ok())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    kind: GroupKind,
    inverse: bool,
    key: String,
    namespaces: Namespaces,
    selector: Selector,
    max_skew: i32,
    min_domains: Option<i32>,
    filter: NodeFilter,
}

#[derive(Debug, Clone)]
pub struct TopologyGroup {
    pub kind: GroupKind,
    pub key: String,
    pub namespaces: Namespaces,
    pub selector: Selector,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub filter: NodeFilter,
    /// Inverse anti-affinity: the constraint belongs to `owners`; it applies to pods the selector matches.
    pub inverse: bool,
    pub owners: BTreeSet<String>,
    /// Pod count per known domain.
    pub domains: BTreeMap<String, i32>,
}

impl TopologyGroup {
    pub fn selects(&self, pod: &PodData) -> bool {
        self.namespaces.contains(&pod.namespace) && self.selector.matches(&pod.labels)
    }

    fn count(&self, d: &str) -> i32 {
        self.domains.get(d).copied().unwrap_or(0)
    }

    /// Candidate domains to consider: the node's concrete values when it has them (few), else every known domain.
    fn candidates<'a>(&'a self, node: &'a Requirement) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        if node.complement {
            Box::new(self.domains.keys().map(String::as_str).filter(move |d| node.has(d)))
        } else {
            Box::new(node.values.iter().map(String::as_str).filter(move |d| node.has(d)))
        }
    }

    /// The domains the pod may use given its own (strict) domains and the node's.
    pub fn next_domains(&self, pod: &PodData, pod_domains: &Requirement, node_domains: &Requirement) -> Requirement {
        match self.kind {
            GroupKind::Spread => self.next_spread(pod, pod_domains, node_domains),
            GroupKind::Affinity => self.next_affinity(pod, pod_domains, node_domains),
            GroupKind::AntiAffinity => {
                let options: Vec<&str> = self
                    .candidates(node_domains)
                    .filter(|d| self.domains.contains_key(*d) && self.count(d) == 0)
                    .collect();
                Requirement::in_values(options)
            }
        }
    }

    fn min_count(&self, pod_domains: &Requirement) -> Option<i32> {
        if self.key == labels::HOSTNAME {
            // A new node can always be created, so the global minimum for hostname is zero.
            return Some(0);
        }
        let mut min: Option<i32> = None;
        let mut supported = 0;
        for (d, c) in &self.domains {
            if pod_domains.has(d) {
                supported += 1;
                min = Some(min.map_or(*c, |m| m.min(*c)));
            }
        }
        if self.min_domains.is_some_and(|md| supported < md) {
            return Some(0);
        }
        min
    }

    fn next_spread(&self, pod: &PodData, pod_domains: &Requirement, node_domains: &Requirement) -> Requirement {
        let min = self.min_count(pod_domains);
        let self_count = i32::from(self.selects(pod));
        let eligible = |count: i32| min.is_none_or(|m| count + self_count - m <= self.max_skew);
        if !node_domains.complement && node_domains.values.len() == 1 {
            let d = &node_domains.values[0];
            return if eligible(self.count(d)) {
                Requirement::in_values([d.clone()])
            } else {
                Requirement::does_not_exist()
            };
        }
        let mut best: Option<(&str, i32)> = None;
        for d in self.candidates(node_domains) {
            if !self.domains.contains_key(d) || !pod_domains.has(d) {
                continue;
            }
            let c = self.count(d);
            if eligible(c) && best.is_none_or(|(_, bc)| c < bc) {
                best = Some((d, c));
            }
        }
        match best {
            Some((d, _)) => Requirement::in_values([d.to_string()]),
            None => Requirement::does_not_exist(),
        }
    }

    fn next_affinity(&self, pod: &PodData, pod_domains: &Requirement, node_domains: &Requirement) -> Requirement {
        let options: Vec<&str> = self.candidates(node_domains).filter(|d| self.count(d) > 0).collect();
        if !options.is_empty() || !self.selects(pod) {
            return Requirement::in_values(options);
        }
        // Self-affinity with nothing placed yet in a usable domain: bootstrap on one domain, preferring one the pod
        // itself allows.
        let pick = self
            .candidates(node_domains)
            .filter(|d| self.domains.contains_key(*d))
            .find(|d| pod_domains.has(d))
            .or_else(|| self.candidates(node_domains).find(|d| self.domains.contains_key(*d)));
        Requirement::in_values(pick.map(str::to_string))
    }

    fn record(&mut self, domains: &[&str]) {
        for d in domains {
            *self.domains.entry((*d).to_string()).or_insert(0) += 1;
        }
    }
}

/// A bound pod as topology counting sees it.
pub struct BoundPod<'a> {
    pub pod: &'a PodData,
    pub node_labels: &'a BTreeMap<String, String>,
    pub node_name: &'a str,
    pub node_taints: &'a [Taint],
}

/// Why topology rejected a node for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError {
    pub kind: GroupKind,
    pub key: String,
    pub inverse: bool,
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.inverse {
            write!(f, "another pod's anti-affinity on {} excludes every remaining domain", self.key)
        } else {
            write!(f, "{} on {} leaves no eligible domain", self.kind.describe(), self.key)
        }
    }
}

/// All topology groups of a solve.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub groups: Vec<TopologyGroup>,
    index: HashMap<GroupKey, usize>,
    /// Known domains per topology key.
    universe: BTreeMap<String, BTreeSet<String>>,
    /// Groups per key, for registering new domains.
    by_key: HashMap<String, Vec<usize>>,
    /// For each pod uid: the groups that count it (selector matches), computed once.
    counted: HashMap<String, Vec<usize>>,
    /// Inverse groups, for matching.
    inverse: Vec<usize>,
    policy: LabelPolicy,
}

fn spread_filter(pod: &PodData, s: &SpreadConstraint) -> NodeFilter {
    let mut terms = Vec::new();
    if s.honor_node_affinity {
        if pod.required_terms.is_empty() {
            if !pod.node_selector.is_empty() {
                terms.push(pod.node_selector.clone());
            }
        } else {
            for t in &pod.required_terms {
                terms.push(pod.node_selector.intersected(t));
            }
        }
    }
    let tolerations = s.honor_taints.then(|| pod.tolerations.iter().map(TolerationKey::of).collect());
    NodeFilter { terms, tolerations }
}

impl Topology {
    /// `universe`: the known domains per key (from NodePool templates × instance types and existing nodes).
    pub fn new(universe: BTreeMap<String, BTreeSet<String>>, policy: LabelPolicy) -> Self {
        Topology { universe, policy, ..Default::default() }
    }

    fn get_or_create(&mut self, k: GroupKey) -> usize {
        if let Some(i) = self.index.get(&k) {
            return *i;
        }
        let domains: BTreeMap<String, i32> =
            self.universe.get(&k.key).into_iter().flatten().map(|d| (d.clone(), 0)).collect();
        let g = TopologyGroup {
            kind: k.kind,
            key: k.key.clone(),
            namespaces: k.namespaces.clone(),
            selector: k.selector.clone(),
            max_skew: k.max_skew,
            min_domains: k.min_domains,
            filter: k.filter.clone(),
            inverse: k.inverse,
            owners: BTreeSet::new(),
            domains,
        };
        let i = self.groups.len();
        self.groups.push(g);
        self.by_key.entry(k.key.clone()).or_default().push(i);
        if k.inverse {
            self.inverse.push(i);
        }
        self.index.insert(k, i);
        i
    }

    fn spread_key(pod: &PodData, s: &SpreadConstraint) -> GroupKey {
        GroupKey {
            kind: GroupKind::Spread,
            inverse: false,
            key: s.key.clone(),
            namespaces: Namespaces::Some(vec![pod.namespace.clone()]),
            selector: s.selector.clone(),
            max_skew: s.max_skew,
            min_domains: s.min_domains,
            filter: spread_filter(pod, s),
        }
    }

    fn term_key(kind: GroupKind, t: &AffinityTerm, inverse: bool) -> GroupKey {
        GroupKey {
            kind,
            inverse,
            key: t.key.clone(),
            namespaces: t.namespaces.clone(),
            selector: t.selector.clone(),
            max_skew: 0,
            min_domains: None,
            filter: NodeFilter::default(),
        }
    }

    /// Creates the groups the pods' constraints need (preferences included: they are in force until relaxed) and
    /// the inverse groups for their required anti-affinity terms.
    pub fn add_pods(&mut self, pods: &[PodData]) {
        for p in pods {
            for s in &p.spreads {
                self.get_or_create(Self::spread_key(p, s));
            }
            for t in p.affinity.iter().chain(&p.preferred_affinity) {
                self.get_or_create(Self::term_key(GroupKind::Affinity, t, false));
            }
            for t in p.anti_affinity.iter().chain(&p.preferred_anti_affinity) {
                self.get_or_create(Self::term_key(GroupKind::AntiAffinity, t, false));
            }
            for t in &p.anti_affinity {
                let i = self.get_or_create(Self::term_key(GroupKind::AntiAffinity, t, true));
                self.groups[i].owners.insert(p.uid.clone());
            }
        }
    }

    /// Counts bound pods into the groups (pods of the batch must not be passed here), and registers the bound
    /// pods' own required anti-affinity as inverse groups.
    pub fn count_bound(&mut self, bound: &[BoundPod<'_>]) {
        for b in bound {
            for t in &b.pod.anti_affinity {
                let i = self.get_or_create(Self::term_key(GroupKind::AntiAffinity, t, true));
                self.groups[i].owners.insert(b.pod.uid.clone());
            }
        }
        let policy = self.policy.clone();
        for b in bound {
            let node_reqs = Requirements::from_labels(b.node_labels.iter());
            for g in &mut self.groups {
                let domain = match b.node_labels.get(&g.key) {
                    Some(d) => d.as_str(),
                    None if g.key == labels::HOSTNAME => b.node_name,
                    None => continue,
                };
                let counts = if g.inverse {
                    g.owners.contains(&b.pod.uid)
                } else {
                    g.selects(b.pod)
                        && (g.kind != GroupKind::Spread || g.filter.matches(&node_reqs, b.node_taints, &policy))
                };
                if counts {
                    g.record(&[domain]);
                }
            }
        }
    }

    /// Makes a new domain (an existing node's hostname, a new NodeClaim's placeholder) known to every group of
    /// that key.
    pub fn register(&mut self, key: &str, domain: &str) {
        self.universe.entry(key.to_string()).or_default().insert(domain.to_string());
        if let Some(gs) = self.by_key.get(key) {
            for &i in gs {
                self.groups[i].domains.entry(domain.to_string()).or_insert(0);
            }
        }
    }

    /// Forgets a domain registered for a NodeClaim that was not created after all.
    pub fn unregister(&mut self, key: &str, domain: &str) {
        if let Some(set) = self.universe.get_mut(key) {
            set.remove(domain);
        }
        if let Some(gs) = self.by_key.get(key) {
            for &i in gs {
                if self.groups[i].domains.get(domain) == Some(&0) {
                    self.groups[i].domains.remove(domain);
                }
            }
        }
    }

    /// The groups whose constraints the pod must satisfy: its own terms, and inverse anti-affinity of others that
    /// selects it.
    pub fn constraints_for(&self, pod: &PodData) -> Vec<usize> {
        let mut out = Vec::new();
        for s in &pod.spreads {
            if let Some(i) = self.index.get(&Self::spread_key(pod, s)) {
                out.push(*i);
            }
        }
        for t in pod.affinity.iter().chain(&pod.preferred_affinity) {
            if let Some(i) = self.index.get(&Self::term_key(GroupKind::Affinity, t, false)) {
                out.push(*i);
            }
        }
        for t in pod.anti_affinity.iter().chain(&pod.preferred_anti_affinity) {
            if let Some(i) = self.index.get(&Self::term_key(GroupKind::AntiAffinity, t, false)) {
                out.push(*i);
            }
        }
        for &i in &self.inverse {
            let g = &self.groups[i];
            if !g.owners.contains(&pod.uid) && g.selects(pod) {
                out.push(i);
            }
        }
        out
    }

    /// Narrows `node_reqs` (already ∧ the pod's requirements) by every topology constraint of the pod.
    pub fn add_requirements(
        &self,
        pod: &PodData,
        groups: &[usize],
        strict: &Requirements,
        node_reqs: &Requirements,
    ) -> Result<Option<Requirements>, TopologyError> {
        if groups.is_empty() {
            return Ok(None);
        }
        let mut out = node_reqs.clone();
        for &i in groups {
            let g = &self.groups[i];
            let pod_domains = strict.get(&g.key);
            let node_domains = out.get(&g.key);
            let domains = g.next_domains(pod, &pod_domains, &node_domains);
            if domains.is_empty() {
                return Err(TopologyError { kind: g.kind, key: g.key.clone(), inverse: g.inverse });
            }
            out.add(&g.key, domains);
        }
        Ok(Some(out))
    }

    /// Records a placed pod: counted where its labels are selected, and as owner of its inverse groups.
    pub fn record(&mut self, pod: &PodData, node_reqs: &Requirements, node_taints: &[Taint]) {
        let counted = match self.counted.get(&pod.uid) {
            Some(c) => c.clone(),
            None => {
                let c: Vec<usize> = (0..self.groups.len())
                    .filter(|&i| {
                        let g = &self.groups[i];
                        if g.inverse { g.owners.contains(&pod.uid) } else { g.selects(pod) }
                    })
                    .collect();
                self.counted.insert(pod.uid.clone(), c.clone());
                c
            }
        };
        for i in counted {
            let g = &self.groups[i];
            let Some(r) = node_reqs.get_ref(&g.key) else { continue };
            if r.complement {
                continue;
            }
            if g.kind == GroupKind::Spread && !g.filter.matches(node_reqs, node_taints, &self.policy) {
                continue;
            }
            let values: Vec<String> = r.values.clone();
            let g = &mut self.groups[i];
            if g.kind == GroupKind::AntiAffinity || g.inverse {
                // Conservative: every domain the node may still land in.
                let vs: Vec<&str> = values.iter().map(String::as_str).collect();
                g.record(&vs);
            } else if values.len() == 1 {
                g.record(&[values[0].as_str()]);
            }
        }
    }

    pub fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }
}
