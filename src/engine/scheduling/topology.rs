//! Topology spread, pod affinity and pod anti-affinity: groups of pods counted per domain (zone, hostname, ...),
//! and the domains a pod may still go to (engine.md §2.8).
//!
//! A group is created for every distinct constraint among the pods being scheduled (deduplicated), plus an
//! "inverse" group for every required anti-affinity term of a bound or batch pod, so that a pod matched by someone
//! else's anti-affinity stays out of that someone's domains.
//!
//! Domains are interned per key and counted in vectors: hostname keys reach thousands of domains in a large solve,
//! and the hot question "may this pod join that NodeClaim" must be an array lookup, not a string-keyed map probe.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

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

/// Which nodes a spread constraint counts (nodeAffinityPolicy / nodeTaintsPolicy).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NodeFilter {
    /// The owning pod's node selector ∧ each required term (ORed); empty = any node.
    pub terms: Vec<Requirements>,
    pub tolerations: Option<Vec<TolerationKey>>,
}

impl NodeFilter {
    pub fn matches(&self, node_reqs: &Requirements, node_taints: &[Taint], policy: &LabelPolicy) -> bool {
        if let Some(tols) = &self.tolerations {
            let tols: Vec<Toleration> = tols.iter().map(TolerationKey::toleration).collect();
            if taints::first_untolerated(node_taints, &tols, true).is_some() {
                return false;
            }
        }
        self.terms.is_empty() || self.terms.iter().any(|t| node_reqs.admits(t, Some(policy)))
    }

    fn is_trivial(&self) -> bool {
        self.terms.is_empty() && self.tolerations.is_none()
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

/// The domains of one topology key, interned.
#[derive(Debug, Clone, Default)]
struct KeyDomains {
    name: String,
    // One shared string per domain: a cost solve registers a placeholder hostname for each of thousands of claims.
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
    /// Registered (a node or NodeClaim could be there) or seen with pods.
    known: Vec<bool>,
    /// Known domains by name, for deterministic iteration.
    sorted: BTreeMap<Arc<str>, u32>,
}

impl KeyDomains {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = self.names.len() as u32;
        let name: Arc<str> = Arc::from(name);
        self.ids.insert(name.clone(), id);
        self.names.push(name);
        self.known.push(false);
        id
    }

    fn mark_known(&mut self, id: u32) {
        if !self.known[id as usize] {
            self.known[id as usize] = true;
            self.sorted.insert(self.names[id as usize].clone(), id);
        }
    }

    fn is_known(&self, id: u32) -> bool {
        self.known.get(id as usize).copied().unwrap_or(false)
    }
}

#[derive(Debug, Clone)]
pub struct TopologyGroup {
    pub kind: GroupKind,
    pub key: String,
    key_idx: usize,
    pub namespaces: Namespaces,
    pub selector: Selector,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub filter: NodeFilter,
    /// Inverse anti-affinity: the constraint belongs to `owners`; it applies to pods the selector matches.
    pub inverse: bool,
    pub owners: BTreeSet<String>,
    /// Pod count per domain id.
    counts: Vec<i32>,
    /// Domain ids with a non-zero count.
    nonzero: BTreeSet<u32>,
}

impl TopologyGroup {
    pub fn selects(&self, pod: &PodData) -> bool {
        self.namespaces.contains(&pod.namespace) && self.selector.matches(&pod.labels)
    }

    fn count(&self, id: u32) -> i32 {
        self.counts.get(id as usize).copied().unwrap_or(0)
    }

    fn add(&mut self, id: u32) {
        self.add_n(id, 1);
    }

    fn add_n(&mut self, id: u32, n: i32) {
        let i = id as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
        self.nonzero.insert(id);
    }

    fn key(&self) -> GroupKey {
        GroupKey {
            kind: self.kind,
            inverse: self.inverse,
            key: self.key.clone(),
            namespaces: self.namespaces.clone(),
            selector: self.selector.clone(),
            max_skew: self.max_skew,
            min_domains: self.min_domains,
            filter: self.filter.clone(),
        }
    }

    /// Per node of `by_node`: how many of its pods this (non-inverse) group counts, where it counts any.
    fn tally(
        &self,
        by_node: &[NodePods],
        bound: &[(Arc<PodData>, String)],
        node_labels: &NodeLabels,
        policy: &LabelPolicy,
    ) -> Arc<[NodeCount]> {
        let mut out = Vec::new();
        for (slot, (node, pods)) in by_node.iter().enumerate() {
            let Some(domain) = node_domain(node_labels, node, &self.key) else { continue };
            let count: i32 = pods.iter().filter(|(i, _)| self.selects(&bound[*i].0)).map(|(_, n)| n).sum();
            if count == 0 {
                continue;
            }
            if self.kind == GroupKind::Spread && !self.filter.is_trivial() {
                let (l, t) =
                    node_labels.get(node.as_str()).map(|(l, t)| (Some(&**l), t.as_slice())).unwrap_or((None, &[]));
                let reqs = Requirements::from_labels(l.into_iter().flatten());
                if !self.filter.matches(&reqs, t, policy) {
                    continue;
                }
            }
            out.push(NodeCount { slot: Some(slot), domain: Arc::from(domain), count });
        }
        out.into()
    }
}

/// Node name → its labels and taints, as [`super::Input::node_labels`] holds them.
pub type NodeLabels = BTreeMap<String, (Arc<BTreeMap<String, String>>, Vec<Taint>)>;

/// The bound pods' topology counts, worked out once per preparation and shared by every solve over it: per
/// group, each node's domain and how many of its pods the group counts. A consolidation simulation removes a few
/// nodes and sums the others' counts, where walking every bound pod again cost most of a pass (hundreds of
/// simulations a pass, each over 100,000 pods).
#[derive(Debug, Default)]
pub struct BoundTally {
    /// Bound pods by node name (sorted), in classes of equal namespace and labels (what a group's selector
    /// reads): a position in `Input::bound_pods` for each class, and how many pods it stands for.
    by_node: std::sync::OnceLock<Vec<NodePods>>,
    groups: std::sync::Mutex<HashMap<GroupKey, Arc<[NodeCount]>>>,
}

/// A node's name and its bound pods in classes: (a position in `Input::bound_pods`, how many pods like it).
type NodePods = (String, Vec<(usize, i32)>);

/// Pods sharing a namespace and one labels map (`Arc`): a class whose members every selector treats alike.
type PodClass<'a> = (&'a str, *const BTreeMap<String, String>);

/// What one node adds to one group.
#[derive(Debug)]
struct NodeCount {
    /// Position in `BoundTally::by_node` (`None`: a count worked out for this solve alone).
    slot: Option<usize>,
    domain: Arc<str>,
    count: i32,
}

/// The domain a bound pod on `node` counts in for `key`: the node's label, or its name for hostname.
fn node_domain<'n>(node_labels: &'n NodeLabels, node: &'n str, key: &str) -> Option<&'n str> {
    match node_labels.get(node).and_then(|(l, _)| l.get(key)) {
        Some(d) => Some(d.as_str()),
        None if key == labels::HOSTNAME => Some(node),
        None => None,
    }
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

/// What one placement attempt of a pod needs from a group, computed once per attempt: the answers don't change
/// while candidate nodes are scanned.
#[derive(Debug, Clone)]
pub struct GroupCtx {
    pub group: usize,
    key_idx: usize,
    /// The pod's own (strict) requirement on the key.
    pod_domains: Requirement,
    /// The group's key is `kubernetes.io/hostname`: decided by the node's own hostname id.
    hostname: bool,
    selects: bool,
    min: Option<i32>,
    /// Affinity: some domain with pods is allowed by the pod.
    has_option: bool,
}

/// All topology groups of a solve.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub groups: Vec<TopologyGroup>,
    index: HashMap<GroupKey, usize>,
    keys: Vec<KeyDomains>,
    key_index: HashMap<String, usize>,
    /// Groups per key index.
    by_key: Vec<Vec<usize>>,
    /// For each pod uid: the groups that count it, computed once.
    counted: HashMap<String, Vec<usize>>,
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

static EXISTS: std::sync::LazyLock<Requirement> = std::sync::LazyLock::new(Requirement::exists);

impl Topology {
    /// `universe`: the known domains per key (from NodePool templates × instance types and existing nodes).
    pub fn new(universe: BTreeMap<String, BTreeSet<String>>, policy: LabelPolicy) -> Self {
        let mut t = Topology { policy, ..Default::default() };
        for (key, domains) in universe {
            let k = t.key_idx(&key);
            for d in domains {
                let id = t.keys[k].intern(&d);
                t.keys[k].mark_known(id);
            }
        }
        t
    }

    fn key_idx(&mut self, key: &str) -> usize {
        if let Some(i) = self.key_index.get(key) {
            return *i;
        }
        self.keys.push(KeyDomains { name: key.to_string(), ..Default::default() });
        self.by_key.push(Vec::new());
        self.key_index.insert(key.to_string(), self.keys.len() - 1);
        self.keys.len() - 1
    }

    fn get_or_create(&mut self, k: GroupKey) -> usize {
        if let Some(i) = self.index.get(&k) {
            return *i;
        }
        let key_idx = self.key_idx(&k.key);
        let g = TopologyGroup {
            kind: k.kind,
            key: k.key.clone(),
            key_idx,
            namespaces: k.namespaces.clone(),
            selector: k.selector.clone(),
            max_skew: k.max_skew,
            min_domains: k.min_domains,
            filter: k.filter.clone(),
            inverse: k.inverse,
            owners: BTreeSet::new(),
            counts: Vec::new(),
            nonzero: BTreeSet::new(),
        };
        let i = self.groups.len();
        self.groups.push(g);
        self.by_key[key_idx].push(i);
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
    pub fn add_pods(&mut self, pods: &[Arc<PodData>]) {
        // Pods of one workload come one after another and need the same groups: a pod of the previous pod's class
        // (which covers everything a group key and a spread's node filter are built from) only joins the inverse
        // groups that pod owns, without building its group keys again.
        let mut prev: Option<(&PodData, Vec<usize>)> = None;
        for p in pods {
            if let Some((q, inverse)) = &prev
                && super::cost::same_class(q, p)
            {
                for &i in inverse {
                    self.groups[i].owners.insert(p.uid.clone());
                }
                continue;
            }
            for s in &p.spreads {
                self.get_or_create(Self::spread_key(p, s));
            }
            for t in p.affinity.iter().chain(&p.preferred_affinity) {
                self.get_or_create(Self::term_key(GroupKind::Affinity, t, false));
            }
            for t in p.anti_affinity.iter().chain(&p.preferred_anti_affinity) {
                self.get_or_create(Self::term_key(GroupKind::AntiAffinity, t, false));
            }
            let mut inverse = Vec::with_capacity(p.anti_affinity.len());
            for t in &p.anti_affinity {
                let i = self.get_or_create(Self::term_key(GroupKind::AntiAffinity, t, true));
                self.groups[i].owners.insert(p.uid.clone());
                inverse.push(i);
            }
            prev = Some((p, inverse));
        }
    }

    /// Counts the bound pods of every node not in `excluded` into the groups (pods of the batch are not bound),
    /// and registers those pods' own required anti-affinity as inverse groups. `anti` are the positions in `bound`
    /// of the pods with required anti-affinity (the only possible owners of an inverse group).
    pub fn count_bound(
        &mut self,
        tally: &BoundTally,
        bound: &[(Arc<PodData>, String)],
        node_labels: &NodeLabels,
        anti: &[usize],
        excluded: &BTreeSet<String>,
    ) {
        let counted = |node: &str| excluded.is_empty() || !excluded.contains(node);
        let owners = || anti.iter().map(|&i| &bound[i]).filter(|(_, node)| counted(node));
        for (p, _) in owners() {
            for t in &p.anti_affinity {
                let i = self.get_or_create(Self::term_key(GroupKind::AntiAffinity, t, true));
                self.groups[i].owners.insert(p.uid.clone());
            }
        }
        let by_node = tally.by_node.get_or_init(|| {
            // Pods of one workload share their labels: a group decides once per class of (namespace, labels).
            let mut m: BTreeMap<&str, HashMap<PodClass<'_>, (usize, i32)>> = BTreeMap::new();
            for (i, (p, node)) in bound.iter().enumerate() {
                let class = (p.namespace.as_str(), Arc::as_ptr(&p.labels));
                m.entry(node.as_str()).or_default().entry(class).or_insert((i, 0)).1 += 1;
            }
            m.into_iter().map(|(n, classes)| (n.to_string(), classes.into_values().collect())).collect()
        });
        let slot_counted: Vec<bool> = by_node.iter().map(|(n, _)| counted(n)).collect();
        for gi in 0..self.groups.len() {
            let g = &self.groups[gi];
            // An inverse group counts its owners, which depend on the batch: the few pods with terms, each time.
            let counts: Arc<[NodeCount]> = if g.inverse {
                let mut out: Vec<NodeCount> = Vec::new();
                for (_, node) in owners().filter(|(p, _)| g.owners.contains(&p.uid)) {
                    if let Some(domain) = node_domain(node_labels, node, &g.key) {
                        out.push(NodeCount { slot: None, domain: Arc::from(domain), count: 1 });
                    }
                }
                out.into()
            } else {
                let key = g.key();
                let mut memo = tally.groups.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                memo.entry(key).or_insert_with(|| g.tally(by_node, bound, node_labels, &self.policy)).clone()
            };
            for c in counts.iter().filter(|c| c.slot.is_none_or(|s| slot_counted[s])) {
                let k = self.groups[gi].key_idx;
                let id = self.keys[k].intern(&c.domain);
                self.keys[k].mark_known(id);
                self.groups[gi].add_n(id, c.count);
            }
        }
    }

    /// Makes a new domain (an existing node's hostname, a new NodeClaim's placeholder) known to every group of
    /// that key. Returns its id.
    pub fn register(&mut self, key: &str, domain: &str) -> u32 {
        let k = self.key_idx(key);
        let id = self.keys[k].intern(domain);
        self.keys[k].mark_known(id);
        id
    }

    /// Forgets a domain registered for a NodeClaim that was not created after all.
    pub fn unregister(&mut self, key: &str, domain: &str) {
        let Some(&k) = self.key_index.get(key) else { return };
        let kd = &mut self.keys[k];
        let Some(&id) = kd.ids.get(domain) else { return };
        let unused = self.by_key[k].iter().all(|&g| self.groups[g].count(id) == 0);
        if unused && kd.known[id as usize] {
            kd.known[id as usize] = false;
            kd.sorted.remove(domain);
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
            if g.selects(pod) {
                out.push(i);
            }
        }
        out
    }

    /// The minimum count over the domains the pod allows (0 for hostname: a new node can always be made).
    fn min_count(&self, g: &TopologyGroup, pod_domains: &Requirement) -> Option<i32> {
        if g.key == labels::HOSTNAME {
            return Some(0);
        }
        let kd = &self.keys[g.key_idx];
        let mut min: Option<i32> = None;
        let mut supported = 0;
        for (name, &id) in &kd.sorted {
            if pod_domains.has(name) {
                supported += 1;
                let c = g.count(id);
                min = Some(min.map_or(c, |m| m.min(c)));
            }
        }
        if g.min_domains.is_some_and(|md| supported < md) {
            return Some(0);
        }
        min
    }

    /// Hostname anti-affinity groups (own or inverse): a node where they count a pod rejects every pod they
    /// constrain.
    pub fn zero_filter_groups(&self) -> impl Iterator<Item = usize> + '_ {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.kind == GroupKind::AntiAffinity && g.key == labels::HOSTNAME)
            .map(|(i, _)| i)
    }

    /// One of the pod's constraints from [`Topology::zero_filter_groups`], if any.
    pub fn zero_filter_group(&self, groups: &[GroupCtx]) -> Option<usize> {
        groups.iter().find(|cx| cx.hostname && self.groups[cx.group].kind == GroupKind::AntiAffinity).map(|cx| cx.group)
    }

    /// Non-hostname keys that some group constrains (hostname has its own index, the zero sets).
    pub fn partition_keys(&self) -> Vec<usize> {
        (0..self.keys.len()).filter(|&k| self.keys[k].name != labels::HOSTNAME && !self.by_key[k].is_empty()).collect()
    }

    pub fn key_of(&self, cx: &GroupCtx) -> usize {
        cx.key_idx
    }

    /// Every domain a single-domain node may have for the pod to pass this group (exactly the ids
    /// `allows_single` accepts), or `None` when the group doesn't narrow it down.
    pub fn allowed_domains(&self, cx: &GroupCtx) -> Option<Vec<u32>> {
        if cx.hostname {
            return None;
        }
        let g = &self.groups[cx.group];
        let kd = &self.keys[g.key_idx];
        match g.kind {
            GroupKind::Affinity => cx
                .has_option
                .then(|| g.nonzero.iter().copied().filter(|&d| cx.pod_domains.has(&kd.names[d as usize])).collect()),
            GroupKind::Spread => Some(
                kd.sorted
                    .values()
                    .copied()
                    .filter(|&id| {
                        let c = g.count(id) + i32::from(cx.selects);
                        cx.min.is_none_or(|m| c - m <= g.max_skew)
                    })
                    .collect(),
            ),
            GroupKind::AntiAffinity => Some(kd.sorted.values().copied().filter(|&id| g.count(id) == 0).collect()),
        }
    }

    pub fn count_of(&self, group: usize, domain: u32) -> i32 {
        self.groups[group].count(domain)
    }

    /// For each topology key, the interned domain of `reqs` when it is a single value (else `None`): lets
    /// [`Topology::add_requirements`] decide single-domain nodes without string lookups.
    pub fn domain_ids(&mut self, reqs: &Requirements) -> Vec<Option<u32>> {
        (0..self.keys.len())
            .map(|k| {
                let r = reqs.get_ref(&self.keys[k].name)?;
                if r.complement || r.values.len() != 1 || !r.has(&r.values[0]) {
                    return None;
                }
                Some(self.keys[k].intern(&r.values[0]))
            })
            .collect()
    }

    /// Per-attempt facts for each of the pod's groups.
    pub fn prepare(&self, pod: &PodData, groups: &[usize], strict: &Requirements) -> Vec<GroupCtx> {
        groups
            .iter()
            .map(|&gi| {
                let g = &self.groups[gi];
                let pod_domains = strict.get_ref(&g.key).unwrap_or(&EXISTS);
                let kd = &self.keys[g.key_idx];
                GroupCtx {
                    group: gi,
                    key_idx: g.key_idx,
                    pod_domains: pod_domains.clone(),
                    hostname: g.key == labels::HOSTNAME,
                    selects: g.selects(pod),
                    min: if g.kind == GroupKind::Spread { self.min_count(g, pod_domains) } else { None },
                    has_option: g.kind == GroupKind::Affinity
                        && g.nonzero.iter().any(|&d| pod_domains.has(&kd.names[d as usize])),
                }
            })
            .collect()
    }

    /// The hostname-keyed constraints alone, for a node whose hostname domain is `hostname_id`: the cheapest
    /// rejection while scanning many NodeClaims (pods can't constrain hostname themselves, it is restricted).
    pub fn allows_on_hostname(&self, groups: &[GroupCtx], hostname_id: u32) -> bool {
        groups
            .iter()
            .filter(|cx| cx.hostname)
            .all(|cx| self.allows_single(&self.groups[cx.group], cx, &EXISTS, Some(hostname_id)))
    }

    /// Whether the pod may go to the single domain `id` (fast path: no allocation).
    fn allows_single(&self, g: &TopologyGroup, cx: &GroupCtx, pod_domains: &Requirement, id: Option<u32>) -> bool {
        let kd = &self.keys[g.key_idx];
        let Some(id) = id.filter(|&i| kd.is_known(i)) else { return false };
        match g.kind {
            GroupKind::AntiAffinity => g.count(id) == 0,
            GroupKind::Spread => {
                let c = g.count(id) + i32::from(cx.selects);
                cx.min.is_none_or(|m| c - m <= g.max_skew)
            }
            GroupKind::Affinity => {
                let name = &kd.names[id as usize];
                if g.count(id) > 0 && pod_domains.has(name) {
                    return true;
                }
                !cx.has_option && cx.selects && pod_domains.has(name)
            }
        }
    }

    /// The allowed domains (general path).
    fn options(&self, g: &TopologyGroup, cx: &GroupCtx, pod_domains: &Requirement, node: &Requirement) -> Vec<String> {
        let kd = &self.keys[g.key_idx];
        let candidates: Vec<(&str, u32)> = if node.complement {
            kd.sorted.iter().filter(|(n, _)| node.has(n)).map(|(n, id)| (&**n, *id)).collect()
        } else {
            node.values
                .iter()
                .filter(|v| node.has(v))
                .filter_map(|v| kd.ids.get(v.as_str()).filter(|id| kd.is_known(**id)).map(|id| (v.as_str(), *id)))
                .collect()
        };
        match g.kind {
            GroupKind::AntiAffinity => {
                candidates.into_iter().filter(|(_, id)| g.count(*id) == 0).map(|(n, _)| n.to_string()).collect()
            }
            GroupKind::Spread => {
                let min = cx.min;
                let self_count = i32::from(cx.selects);
                let mut best: Option<(&str, i32)> = None;
                for (n, id) in candidates {
                    let c = g.count(id) + self_count;
                    if min.is_none_or(|m| c - m <= g.max_skew) && best.is_none_or(|(_, bc)| c < bc) {
                        best = Some((n, c));
                    }
                }
                best.map(|(n, _)| vec![n.to_string()]).unwrap_or_default()
            }
            GroupKind::Affinity => {
                let mut options: Vec<String> = g
                    .nonzero
                    .iter()
                    .map(|&d| &kd.names[d as usize])
                    .filter(|n| pod_domains.has(n))
                    .map(|n| n.to_string())
                    .collect();
                if options.is_empty() && cx.selects {
                    // Bootstrap: one domain both allow, and one the pod allows.
                    if let Some((n, _)) = kd.sorted.iter().find(|(n, _)| pod_domains.has(n) && node.has(n)) {
                        options.push(n.to_string());
                    }
                    if let Some((n, _)) = kd.sorted.iter().find(|(n, _)| pod_domains.has(n)) {
                        options.push(n.to_string());
                    }
                }
                options
            }
        }
    }

    /// Narrows `node_reqs` (already ∧ the pod's requirements) by every topology constraint of the pod. `Ok(None)`
    /// means nothing narrowed. `node_ids` are [`Topology::domain_ids`] of `node_reqs`, when the caller keeps them.
    pub fn add_requirements(
        &self,
        groups: &[GroupCtx],
        node_reqs: &Requirements,
        node_ids: Option<&[Option<u32>]>,
    ) -> Result<Option<Requirements>, TopologyError> {
        let mut out: Option<Requirements> = None;
        for cx in groups {
            let g = &self.groups[cx.group];
            let err = || TopologyError { kind: g.kind, key: g.key.clone(), inverse: g.inverse };
            let pod_domains = &cx.pod_domains;
            if let Some(Some(id)) = node_ids.and_then(|ids| ids.get(cx.key_idx)) {
                if !self.allows_single(g, cx, pod_domains, Some(*id)) {
                    return Err(err());
                }
                continue;
            }
            let current = out.as_ref().unwrap_or(node_reqs).get_ref(&g.key).unwrap_or(&EXISTS);
            if !current.complement && current.values.len() == 1 {
                let id = self.keys[g.key_idx].ids.get(current.values[0].as_str()).copied();
                if !self.allows_single(g, cx, pod_domains, id) {
                    return Err(err());
                }
                continue;
            }
            let options = self.options(g, cx, pod_domains, current);
            let narrowed = current.intersect(&Requirement::in_values(options));
            if narrowed.is_empty() {
                return Err(err());
            }
            if narrowed != *current {
                out.get_or_insert_with(|| node_reqs.clone()).set(&g.key, narrowed);
            }
        }
        Ok(out)
    }

    /// Records a placed pod: counted where its labels are selected, and as owner of its inverse groups.
    pub fn record(&mut self, pod: &PodData, node_reqs: &Requirements, node_taints: &[Taint]) {
        if self.groups.is_empty() {
            return;
        }
        if !self.counted.contains_key(&pod.uid) {
            let c: Vec<usize> = (0..self.groups.len())
                .filter(|&i| {
                    let g = &self.groups[i];
                    if g.inverse { g.owners.contains(&pod.uid) } else { g.selects(pod) }
                })
                .collect();
            self.counted.insert(pod.uid.clone(), c);
        }
        let counted = self.counted.get(&pod.uid).cloned().unwrap_or_default();
        for gi in counted {
            let g = &self.groups[gi];
            let Some(r) = node_reqs.get_ref(&g.key) else { continue };
            if r.complement {
                continue;
            }
            if g.kind == GroupKind::Spread
                && !g.filter.is_trivial()
                && !g.filter.matches(node_reqs, node_taints, &self.policy)
            {
                continue;
            }
            let all = g.kind == GroupKind::AntiAffinity || g.inverse;
            if !all && r.values.len() != 1 {
                continue;
            }
            let k = g.key_idx;
            // Anti-affinity is conservative: every domain the node may still land in.
            let ids: Vec<u32> = r
                .values
                .iter()
                .map(|v| {
                    let id = self.keys[k].intern(v);
                    self.keys[k].mark_known(id);
                    id
                })
                .collect();
            for id in ids {
                self.groups[gi].add(id);
            }
        }
    }

    pub fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::scheduling::pod::pod_data;
    use crate::engine::stored_pod::StoredPod;

    /// A pod of app `app` on `node`, spread over zones by app; `anti` adds hostname anti-affinity to app `web`.
    fn pod(name: &str, app: &str, anti: bool) -> PodData {
        let mut spec = serde_json::json!({
            "containers": [{"name": "c", "image": "x"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}],
        });
        if anti {
            spec["affinity"] = serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                [{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}});
        }
        let json = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {"app": app}},
            "spec": spec});
        pod_data(&StoredPod::from(serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(json).unwrap()), &[])
            .unwrap()
    }

    /// Every group's count per domain name.
    fn counts(t: &Topology) -> Vec<BTreeMap<String, i32>> {
        t.groups
            .iter()
            .map(|g| {
                let kd = &t.keys[g.key_idx];
                g.nonzero.iter().map(|&d| (kd.names[d as usize].to_string(), g.count(d))).collect()
            })
            .collect()
    }

    fn solve_topology(
        batch: &[Arc<PodData>],
        bound: &[(Arc<PodData>, String)],
        labels: &NodeLabels,
        tally: &BoundTally,
        excluded: &BTreeSet<String>,
    ) -> Topology {
        let mut t = Topology::new(BTreeMap::new(), LabelPolicy::default());
        t.add_pods(batch);
        let anti: Vec<usize> = (0..bound.len()).filter(|&i| !bound[i].0.anti_affinity.is_empty()).collect();
        t.count_bound(tally, bound, labels, &anti, excluded);
        t
    }

    /// A shared tally answers each simulation as a count over only the nodes it keeps would: removing nodes
    /// in one solve does not leak into the next, and inverse anti-affinity follows its owners.
    #[test]
    fn a_shared_tally_counts_only_the_nodes_a_solve_keeps() {
        let zone = |z: &str| {
            (
                Arc::new(BTreeMap::from([("topology.kubernetes.io/zone".to_string(), z.to_string())])),
                Vec::<Taint>::new(),
            )
        };
        let labels: NodeLabels =
            [("n1", "a"), ("n2", "a"), ("n3", "b")].into_iter().map(|(n, z)| (n.to_string(), zone(z))).collect();
        let on = |p: PodData, n: &str| (Arc::new(p), n.to_string());
        let bound = vec![
            on(pod("w1", "web", true), "n1"),
            on(pod("w2", "web", false), "n2"),
            on(pod("w3", "web", false), "n2"),
            on(pod("w4", "web", false), "n3"),
            on(pod("d1", "db", false), "n3"),
        ];
        let batch = super::super::workload::shared(&[pod("new", "web", false), pod("new-db", "db", false)]);
        let tally = BoundTally::default();
        for excluded in [vec![], vec!["n2"], vec!["n1", "n3"], vec![]] {
            let excluded: BTreeSet<String> = excluded.into_iter().map(String::from).collect();
            let shared = solve_topology(&batch, &bound, &labels, &tally, &excluded);
            // The same solve from scratch, over only the pods of the nodes kept.
            let kept: Vec<_> = bound.iter().filter(|(_, n)| !excluded.contains(n)).cloned().collect();
            let alone = solve_topology(&batch, &kept, &labels, &BoundTally::default(), &BTreeSet::new());
            assert_eq!(counts(&shared), counts(&alone), "excluding {excluded:?}");
            let web = t_group(&shared, GroupKind::Spread, "web");
            let expect_a = 3 - i32::from(excluded.contains("n1")) - 2 * i32::from(excluded.contains("n2"));
            assert_eq!(counts(&shared)[web].get("a").copied().unwrap_or(0), expect_a, "excluding {excluded:?}");
            // w1's anti-affinity counts on n1 while n1 stays.
            let inverse = shared.groups.iter().position(|g| g.inverse);
            assert_eq!(inverse.is_some(), !excluded.contains("n1"), "excluding {excluded:?}");
        }
    }

    /// Pods of one workload in a row share their groups; each still owns its anti-affinity; a pod whose spread
    /// filter differs (here its tolerations, which a `nodeTaintsPolicy: Honor` spread reads) gets its own group
    /// even right after one with the same terms otherwise.
    #[test]
    fn pods_in_a_row_share_groups_and_each_owns_its_anti_affinity() {
        let a = pod("a", "web", true);
        let mut b = pod("b", "web", true);
        let mut tolerant = pod("c", "web", true);
        for p in [&mut b, &mut tolerant] {
            p.spreads[0].honor_taints = true;
        }
        tolerant.tolerations = vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]
        .into();
        let batch = super::super::workload::shared(&[a.clone(), pod("a2", "web", true), b, tolerant]);
        let mut t = Topology::new(BTreeMap::new(), LabelPolicy::default());
        t.add_pods(&batch);
        // One inverse group, owned by all four.
        let inverse: Vec<&TopologyGroup> = t.groups.iter().filter(|g| g.inverse).collect();
        assert_eq!(inverse.len(), 1);
        assert_eq!(
            inverse[0].owners.iter().map(String::as_str).collect::<Vec<_>>(),
            ["uid-a", "uid-a2", "uid-b", "uid-c"]
        );
        // Spreads: a and a2 one group; b (honours taints) another; c (honours taints, tolerates) a third.
        let spreads = t.groups.iter().filter(|g| g.kind == GroupKind::Spread).count();
        assert_eq!(spreads, 3);
        // The same groups as pod by pod, in any order.
        let mut alone = Topology::new(BTreeMap::new(), LabelPolicy::default());
        for p in batch.iter().rev() {
            alone.add_pods(std::slice::from_ref(p));
        }
        assert_eq!(alone.groups.len(), t.groups.len());
    }

    fn t_group(t: &Topology, kind: GroupKind, app: &str) -> usize {
        t.groups
            .iter()
            .position(|g| {
                g.kind == kind && !g.inverse && g.selector.matches(&BTreeMap::from([("app".into(), app.into())]))
            })
            .unwrap()
    }
}
