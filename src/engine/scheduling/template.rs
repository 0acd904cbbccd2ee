//! A NodePool prepared for one solve: its requirements, taints and compatible instance types, with the indexes that
//! make per-pod filtering cheap (bitsets per requirement, sorted allocatable per resource, daemon overhead groups).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;

use super::bitset::Bitset;
use super::pod::{HostPort, PodData};
use super::taints;
use crate::engine::api::NodePool;
use crate::engine::api::common::NodeClassReference;
use crate::engine::catalog::{InstanceType, OfferingFilter};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::{Operator, Requirement, Requirements};
use crate::engine::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

/// For each core resource, the types sorted by allocatable and the set of types at or above each position, so
/// "which types fit these requests" is four binary searches and four ANDs.
#[derive(Debug, Clone)]
pub struct FitIndex {
    dims: Vec<(&'static str, Vec<i64>, Vec<Bitset>)>,
    n: usize,
}

impl FitIndex {
    fn new(alloc: &[Resources]) -> Self {
        let n = alloc.len();
        let mut dims = Vec::new();
        for name in [CPU, MEMORY, EPHEMERAL_STORAGE, PODS] {
            let mut order: Vec<(i64, usize)> = alloc.iter().enumerate().map(|(i, r)| (r.get(name), i)).collect();
            order.sort();
            let values: Vec<i64> = order.iter().map(|(v, _)| *v).collect();
            let mut suffix = vec![Bitset::empty(n); n + 1];
            for k in (0..n).rev() {
                let mut b = suffix[k + 1].clone();
                b.set(order[k].1);
                suffix[k] = b;
            }
            dims.push((name, values, suffix));
        }
        FitIndex { dims, n }
    }

    /// Suffix bitsets of the types that cover `need` in each core resource.
    fn suffixes(&self, need: &Resources) -> [&Bitset; 4] {
        let pick = |d: usize| {
            let (name, values, suffix) = &self.dims[d];
            let v = need.get(name);
            &suffix[values.partition_point(|x| *x < v)]
        };
        [pick(0), pick(1), pick(2), pick(3)]
    }

    /// Types whose allocatable covers `need` in the core resources.
    pub fn fits(&self, need: &Resources) -> Bitset {
        let mut out: Option<Bitset> = None;
        for (name, values, suffix) in &self.dims {
            let v = need.get(name);
            let k = values.partition_point(|x| *x < v);
            match &mut out {
                None => out = Some(suffix[k].clone()),
                Some(b) => b.and_with(&suffix[k]),
            }
        }
        out.unwrap_or_else(|| Bitset::full(self.n))
    }
}

/// The requirements offering compatibility reads (see [`crate::engine::catalog::Offering::compatible`]): zone,
/// capacity type, and the three capacity-reservation labels.
fn offering_keys(reqs: &Requirements) -> (Option<&Requirement>, Option<&Requirement>, [Option<&Requirement>; 3]) {
    use crate::engine::catalog::aws::{
        CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_INTERRUPTIBLE, CAPACITY_RESERVATION_TYPE,
    };
    (
        reqs.get_ref(labels::ZONE),
        reqs.get_ref(labels::CAPACITY_TYPE),
        [
            reqs.get_ref(CAPACITY_RESERVATION_ID),
            reqs.get_ref(CAPACITY_RESERVATION_TYPE),
            reqs.get_ref(CAPACITY_RESERVATION_INTERRUPTIBLE),
        ],
    )
}

/// What offering compatibility reads of requirements (see [`offering_keys`]).
type OfferingKey = (Option<Requirement>, Option<Requirement>, [Option<Requirement>; 3]);

/// Whether a cached key is `(zone, ct, res)`.
fn same_key(
    k: &OfferingKey,
    zone: Option<&Requirement>,
    ct: Option<&Requirement>,
    res: &[Option<&Requirement>; 3],
) -> bool {
    k.0.as_ref() == zone && k.1.as_ref() == ct && k.2.iter().map(Option::as_ref).eq(res.iter().copied())
}

/// Instance types grouped by which DaemonSets would run on them, with those DaemonSets' summed requests.
#[derive(Debug, Clone)]
pub struct DaemonGroup {
    pub types: Bitset,
    pub overhead: Resources,
    pub host_ports: Vec<HostPort>,
}

#[derive(Debug)]
pub struct Template {
    pub nodepool: String,
    pub weight: i32,
    /// Template requirements ∧ template labels ∧ `karpenter.sh/nodepool In [name]`.
    pub requirements: Requirements,
    /// `requirements` and a placeholder hostname: a new claim's requirements once the hostname is its own (see
    /// [`Template::new_claim_requirements`]).
    claim_requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub node_class_ref: NodeClassReference,
    pub expire_after: String,
    pub termination_grace_period: Option<String>,
    pub types: Vec<Arc<InstanceType>>,
    pub allocatable: Vec<Resources>,
    pub fit: FitIndex,
    pub daemon_groups: Vec<DaemonGroup>,
    /// Keys present in at least one type's requirements.
    type_keys: std::collections::BTreeSet<String>,
    /// Some type has a hostname label (then a claim's hostname narrows its types): asked per new claim.
    hostname_typed: bool,
    key_cache: RefCell<HashMap<String, Vec<(Requirement, Bitset)>>>,
    offering_cache: RefCell<Vec<(OfferingKey, Bitset)>>,
    price_cache: RefCell<Vec<(OfferingKey, std::rc::Rc<Vec<usize>>)>>,
    /// [`Template::claim_types`] of the template's own requirements.
    claim_cache: RefCell<Option<Bitset>>,
    /// [`Template::max_allocatable`] per option set a claim opens with (a handful per solve, thousands of claims).
    open_alloc_cache: RefCell<HashMap<Bitset, Resources>>,
    /// How many capacity types the types' offerings have between them (see [`Template::capacity_type_count`]).
    capacity_type_count: std::cell::OnceCell<usize>,
    pub has_prefer_no_schedule: bool,
    /// Some type declares a CSI attach limit: only then do new claims count their pods' volumes.
    pub has_volume_limits: bool,
    pub limits: Option<BTreeMap<String, i64>>,
}

/// Why a NodePool can't be used at all in this solve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateProblem {
    NoInstanceTypes,
    Invalid(String),
}

fn type_intersects(t: &InstanceType, reqs: &Requirements) -> bool {
    t.requirements.overlaps(reqs)
}

impl Template {
    /// How many capacity types the types' offerings have between them: once a claim's options are seen to offer
    /// this many, no further offering can add one.
    pub fn capacity_type_count(&self) -> usize {
        *self.capacity_type_count.get_or_init(|| {
            let mut seen: Vec<&str> = Vec::new();
            for o in self.types.iter().flat_map(|t| &t.offerings) {
                if !seen.contains(&o.capacity_type.as_str()) {
                    seen.push(&o.capacity_type);
                }
            }
            seen.len()
        })
    }

    pub fn new(
        pool: &NodePool,
        catalog: &[Arc<InstanceType>],
        daemonsets: &[PodData],
        policy: &LabelPolicy,
    ) -> Result<Template, TemplateProblem> {
        let spec = &pool.spec.template.spec;
        let mut requirements = Requirements::new();
        for (i, r) in spec.requirements.iter().enumerate() {
            let op = Operator::parse(&r.operator).ok_or_else(|| {
                TemplateProblem::Invalid(format!(
                    "spec.template.spec.requirements[{i}].operator: unknown operator {:?}",
                    r.operator
                ))
            })?;
            let req = Requirement::new(op, &r.values)
                .map_err(|e| TemplateProblem::Invalid(format!("spec.template.spec.requirements[{i}]: {e}")))?
                .with_min_values(r.min_values.map(|m| m.clamp(0, u32::MAX as i64) as u32));
            requirements.add(&r.key, req);
        }
        let mut labels_map = pool.spec.template.metadata.labels.clone();
        labels_map.insert(labels::NODEPOOL.to_string(), pool.name().to_string());
        // Upstream labels every claim with its node class (`karpenter.k8s.aws/ec2nodeclass: <name>`).
        if let Some(key) = labels::node_class_key(&spec.node_class_ref) {
            labels_map.insert(key, spec.node_class_ref.name.clone());
        }
        for (k, v) in &labels_map {
            requirements.add(k, Requirement::in_values([v.clone()]));
        }

        // Types compatible with the template alone, with an available compatible offering.
        let mut types: Vec<Arc<InstanceType>> = catalog
            .iter()
            .filter(|t| type_intersects(t, &requirements) && t.cheapest_offering(&requirements).is_some())
            .cloned()
            .collect();
        let has_volume_limits = types.iter().any(|t| !t.volume_limits.is_empty());
        // Catalogs come sorted by name; sort only one that isn't.
        if !types.is_sorted_by(|a, b| a.name <= b.name) {
            types.sort_by(|a, b| a.name.cmp(&b.name));
        }
        if types.is_empty() {
            return Err(TemplateProblem::NoInstanceTypes);
        }
        let allocatable: Vec<Resources> = types.iter().map(|t| t.allocatable()).collect();
        let fit = FitIndex::new(&allocatable);
        // Every type names the same few keys: gather them borrowed, copy each once.
        let type_keys: std::collections::BTreeSet<String> = types
            .iter()
            .flat_map(|t| t.requirements.keys())
            .collect::<std::collections::BTreeSet<&str>>()
            .into_iter()
            .map(str::to_string)
            .collect();

        let taints = spec.taints.clone();
        let has_prefer_no_schedule = taints.iter().any(|t| t.effect == "PreferNoSchedule");
        let limits = pool.spec.limits.as_ref().map(|l| {
            l.iter()
                .filter_map(|(k, q)| {
                    crate::engine::resources::parse_quantity(&q.0)
                        .ok()
                        .map(|v| (k.clone(), if k == CPU { v.milli() } else { v.value() }))
                })
                .collect()
        });

        let mut claim_requirements = requirements.clone();
        claim_requirements.add(labels::HOSTNAME, Requirement::in_values(["hostname-placeholder".to_string()]));
        let mut t = Template {
            nodepool: pool.name().to_string(),
            weight: pool.weight(),
            requirements,
            claim_requirements,
            labels: labels_map,
            annotations: pool.spec.template.metadata.annotations.clone(),
            taints,
            startup_taints: spec.startup_taints.clone(),
            node_class_ref: spec.node_class_ref.clone(),
            expire_after: spec.expire_after.clone(),
            termination_grace_period: spec.termination_grace_period.clone(),
            types,
            allocatable,
            fit,
            daemon_groups: Vec::new(),
            hostname_typed: type_keys.contains(labels::HOSTNAME),
            type_keys,
            key_cache: RefCell::new(HashMap::new()),
            offering_cache: RefCell::new(Vec::new()),
            price_cache: RefCell::new(Vec::new()),
            claim_cache: RefCell::new(None),
            open_alloc_cache: RefCell::new(HashMap::new()),
            capacity_type_count: std::cell::OnceCell::new(),
            has_prefer_no_schedule,
            has_volume_limits,
            limits,
        };
        t.daemon_groups = t.build_daemon_groups(daemonsets, policy);
        Ok(t)
    }

    fn build_daemon_groups(&self, daemonsets: &[PodData], policy: &LabelPolicy) -> Vec<DaemonGroup> {
        let n = self.types.len();
        let mut for_template = self.requirements.clone();
        for k in [labels::REGISTERED, labels::INITIALIZED] {
            for_template.add(k, Requirement::in_values(["true"]));
        }
        // Per DaemonSet: the types it would run on.
        let mut per_ds: Vec<Bitset> = Vec::new();
        for ds in daemonsets {
            let mut bits = Bitset::empty(n);
            let tolerated = taints::first_untolerated(&self.taints, &ds.tolerations, true).is_none();
            let strict = ds.strict_requirements();
            if tolerated && for_template.admits(&strict, Some(policy)) {
                for (i, t) in self.types.iter().enumerate() {
                    if t.requirements.overlaps(&strict) {
                        bits.set(i);
                    }
                }
            }
            per_ds.push(bits);
        }
        let mut groups: BTreeMap<Vec<bool>, usize> = BTreeMap::new();
        let mut out: Vec<DaemonGroup> = Vec::new();
        for i in 0..n {
            let sig: Vec<bool> = per_ds.iter().map(|b| b.get(i)).collect();
            let gi = *groups.entry(sig.clone()).or_insert_with(|| {
                let mut overhead = Resources::default();
                let mut ports = Vec::new();
                for (d, on) in sig.iter().enumerate() {
                    if *on {
                        overhead.add(&daemonsets[d].requests);
                        ports.extend(daemonsets[d].host_ports.iter().cloned());
                    }
                }
                // Daemon pod requests include `pods: 1` each, so daemons use pod slots too.
                out.push(DaemonGroup { types: Bitset::empty(n), overhead, host_ports: ports });
                out.len() - 1
            });
            out[gi].types.set(i);
        }
        out
    }

    /// Types compatible with one requirement (all types when none of them carries the key).
    pub fn key_bits(&self, key: &str, req: &Requirement) -> Bitset {
        if !self.type_keys.contains(key) {
            return Bitset::full(self.types.len());
        }
        if let Some(list) = self.key_cache.borrow().get(key)
            && let Some((_, b)) = list.iter().find(|(r, _)| r == req)
        {
            return b.clone();
        }
        let mut bits = Bitset::empty(self.types.len());
        for (i, t) in self.types.iter().enumerate() {
            let ok = match t.requirements.get_ref(key) {
                None => true,
                Some(tr) => tr.has_intersection(req) || (tr.operator().is_negative() && req.operator().is_negative()),
            };
            if ok {
                bits.set(i);
            }
        }
        self.key_cache.borrow_mut().entry(key.to_string()).or_default().push((req.clone(), bits.clone()));
        bits
    }

    /// Types whose labels intersect `reqs` (upstream `Requirements.Intersects`).
    pub fn compatible_types(&self, reqs: &Requirements) -> Bitset {
        let mut bits = Bitset::full(self.types.len());
        for (k, r) in reqs.iter() {
            if self.type_keys.contains(k) {
                bits.and_with(&self.key_bits(k, r));
            }
        }
        bits
    }

    /// A new claim's requirements: the template's and `kubernetes.io/hostname In [hostname]`.
    pub fn new_claim_requirements(&self, hostname: &str) -> Requirements {
        if self.requirements.has(labels::HOSTNAME) {
            // Never from a valid NodePool (the label is restricted), but then the two must intersect.
            let mut r = self.requirements.clone();
            r.add(labels::HOSTNAME, Requirement::in_values([hostname.to_string()]));
            return r;
        }
        let mut r = self.claim_requirements.clone();
        r.set_single_value(labels::HOSTNAME, hostname);
        r
    }

    /// The types a new NodeClaim of this template may launch: requirement-compatible and offered under
    /// `requirements`, which are the template's own plus the claim's placeholder hostname. No type defines a
    /// hostname, so that is the same set for every new claim: computed once per solve.
    pub fn claim_types(&self, requirements: &Requirements) -> Bitset {
        if self.hostname_typed {
            return self.compatible_types(requirements).and(&self.offered_types(requirements));
        }
        if let Some(b) = self.claim_cache.borrow().as_ref() {
            return b.clone();
        }
        let b = self.compatible_types(&self.requirements).and(&self.offered_types(&self.requirements));
        *self.claim_cache.borrow_mut() = Some(b.clone());
        b
    }

    /// Types with an available offering compatible with the zone, capacity-type and reservation requirements of
    /// `reqs`.
    pub fn offered_types(&self, reqs: &Requirements) -> Bitset {
        let (zone, ct, res) = offering_keys(reqs);
        if let Some((_, b)) = self.offering_cache.borrow().iter().find(|(k, _)| same_key(k, zone, ct, &res)) {
            return b.clone();
        }
        let key = (zone.cloned(), ct.cloned(), res.map(|r| r.cloned()));
        let mut bits = Bitset::empty(self.types.len());
        let filter = OfferingFilter::new(reqs);
        for (i, t) in self.types.iter().enumerate() {
            if t.offerings.iter().any(|o| o.available && filter.admits(o)) {
                bits.set(i);
            }
        }
        self.offering_cache.borrow_mut().push((key, bits.clone()));
        bits
    }

    /// Types that fit `requests` plus the overhead of their daemon group, skipping groups whose host ports clash
    /// with the pod's.
    pub fn fitting_types(&self, requests: &Resources, pod_ports: &[HostPort]) -> Bitset {
        let mut out = Bitset::empty(self.types.len());
        for g in &self.daemon_groups {
            if pod_ports.iter().any(|p| g.host_ports.iter().any(|q| p.conflicts(q))) {
                continue;
            }
            let need = if g.overhead.is_zero() { requests.clone() } else { requests.plus(&g.overhead) };
            let mut bits = self.fit.fits(&need);
            bits.and_with(&g.types);
            if !need.extended.is_empty() {
                for i in bits.clone().iter() {
                    if !need.fits_in(&self.allocatable[i]) {
                        bits.clear(i);
                    }
                }
            }
            out.or_with(&bits);
        }
        out
    }

    /// `base ∩ req_bits ∩ {types fitting requests + their daemon overhead}`, or `None` when empty. Allocates only
    /// on success: this runs for every (pod, NodeClaim) pair tried.
    pub fn surviving_types(
        &self,
        base: &Bitset,
        req_bits: &Bitset,
        requests: &Resources,
        pod_ports: &[HostPort],
    ) -> Option<Bitset> {
        if !requests.extended.is_empty() {
            let mut b = self.fitting_types(requests, pod_ports);
            b.and_with(base);
            b.and_with(req_bits);
            return (!b.is_empty()).then_some(b);
        }
        let mut out: Option<Bitset> = None;
        for g in &self.daemon_groups {
            if !g.host_ports.is_empty() && pod_ports.iter().any(|p| g.host_ports.iter().any(|q| p.conflicts(q))) {
                continue;
            }
            let need;
            let need_ref = if g.overhead.is_zero() {
                requests
            } else {
                need = requests.plus(&g.overhead);
                &need
            };
            let [a, b, c, d] = self.fit.suffixes(need_ref);
            let words = base.words().len();
            let word = |w: usize| {
                base.words()[w]
                    & req_bits.words()[w]
                    & g.types.words()[w]
                    & a.words()[w]
                    & b.words()[w]
                    & c.words()[w]
                    & d.words()[w]
            };
            if out.is_none() && !(0..words).any(|w| word(w) != 0) {
                continue;
            }
            let acc = out.get_or_insert_with(|| Bitset::empty(self.types.len()));
            for w in 0..words {
                acc.words_mut()[w] |= word(w);
            }
        }
        out.filter(|b| !b.is_empty())
    }

    /// Elementwise maximum allocatable over `types`: no pod set needing more can fit any of them.
    pub fn max_allocatable(&self, types: &Bitset) -> Resources {
        let mut m = Resources::default();
        for i in types.iter() {
            m.max_with(&self.allocatable[i]);
        }
        m
    }

    /// [`Template::max_allocatable`] of the options a new claim opens with, remembered per option set.
    pub fn open_allocatable(&self, types: &Bitset) -> Resources {
        if let Some(r) = self.open_alloc_cache.borrow().get(types) {
            return r.clone();
        }
        let r = self.max_allocatable(types);
        self.open_alloc_cache.borrow_mut().insert(types.clone(), r.clone());
        r
    }

    /// Type indices ordered by cheapest compatible available offering under `reqs` (ties by name), cached by
    /// zone/capacity-type requirements.
    pub fn price_order(&self, reqs: &Requirements) -> std::rc::Rc<Vec<usize>> {
        let (zone, ct, res) = offering_keys(reqs);
        // Looked up without copying the key: finalize asks once per claim.
        if let Some((_, p)) = self.price_cache.borrow().iter().find(|(k, _)| same_key(k, zone, ct, &res)) {
            return p.clone();
        }
        let key = (zone.cloned(), ct.cloned(), res.map(|r| r.cloned()));
        let prices: Vec<f64> =
            self.types.iter().map(|t| t.cheapest_offering(reqs).map_or(f64::MAX, |o| o.price)).collect();
        let mut order: Vec<usize> = (0..self.types.len()).collect();
        // Types are sorted by name, so the index breaks price ties by name.
        order.sort_by(|&a, &b| prices[a].total_cmp(&prices[b]).then(a.cmp(&b)));
        let rc = std::rc::Rc::new(order);
        self.price_cache.borrow_mut().push((key, rc.clone()));
        rc
    }

    /// The smallest daemon overhead among groups that still have some of `types`.
    pub fn min_overhead(&self, types: &Bitset) -> Resources {
        let mut best: Option<&Resources> = None;
        for g in &self.daemon_groups {
            if g.types.intersects3(types, types)
                && best.is_none_or(|b| (g.overhead.cpu, g.overhead.memory) < (b.cpu, b.memory))
            {
                best = Some(&g.overhead);
            }
        }
        best.cloned().unwrap_or_default()
    }

    /// Cheapest available compatible offering price of type `i` under `reqs` (for ordering).
    pub fn price(&self, i: usize, reqs: &Requirements) -> f64 {
        self.types[i].cheapest_offering(reqs).map_or(f64::MAX, |o| o.price)
    }
}
