//! The label-set algebra Karpenter schedules with: one [`Requirement`] per key (a set of allowed values, possibly
//! complemented, with optional integer bounds and `minValues`) and [`Requirements`], a map from key to requirement.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use super::labels::{self, LabelPolicy};

/// Operators of node selector requirements, including Karpenter's `Gte`/`Lte`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }
    pub fn is_negative(self) -> bool {
        matches!(self, Operator::NotIn | Operator::DoesNotExist)
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequirementError {
    #[error("unknown operator {0:?}")]
    UnknownOperator(String),
    #[error("operator {op} needs exactly one integer value, got {values:?}")]
    NotOneInteger { op: Operator, values: Vec<String> },
}

/// One key's constraint. `complement == false` means "one of `values`"; `true` means "anything except `values`".
/// Bounds are inclusive and imply the value is an integer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Requirement {
    pub complement: bool,
    /// Sorted, deduplicated.
    pub values: Vec<String>,
    pub gte: Option<i64>,
    pub lte: Option<i64>,
    pub min_values: Option<u32>,
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

impl Requirement {
    pub fn exists() -> Self {
        Requirement { complement: true, ..Default::default() }
    }
    pub fn does_not_exist() -> Self {
        Requirement::default()
    }
    pub fn in_values<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Requirement { values: sorted(values.into_iter().map(Into::into).collect()), ..Default::default() }
    }
    pub fn not_in<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Requirement {
            complement: true,
            values: sorted(values.into_iter().map(Into::into).collect()),
            ..Default::default()
        }
    }

    /// Builds a requirement from an operator and its values (validation of value counts for `In` is the caller's:
    /// an empty `In` is a legal, unsatisfiable requirement here).
    pub fn new(op: Operator, values: &[String]) -> Result<Self, RequirementError> {
        let one_int = || -> Result<i64, RequirementError> {
            match values {
                [v] => {
                    v.trim().parse::<i64>().map_err(|_| RequirementError::NotOneInteger { op, values: values.to_vec() })
                }
                _ => Err(RequirementError::NotOneInteger { op, values: values.to_vec() }),
            }
        };
        Ok(match op {
            Operator::In => Requirement::in_values(values.iter().cloned()),
            Operator::NotIn => Requirement::not_in(values.iter().cloned()),
            Operator::Exists => Requirement::exists(),
            Operator::DoesNotExist => Requirement::does_not_exist(),
            Operator::Gt => {
                let n = one_int()?;
                if n == i64::MAX {
                    Requirement::does_not_exist()
                } else {
                    Requirement { complement: true, gte: Some(n + 1), ..Default::default() }
                }
            }
            Operator::Lt => {
                let n = one_int()?;
                if n == i64::MIN {
                    Requirement::does_not_exist()
                } else {
                    Requirement { complement: true, lte: Some(n - 1), ..Default::default() }
                }
            }
            Operator::Gte => Requirement { complement: true, gte: Some(one_int()?), ..Default::default() },
            Operator::Lte => Requirement { complement: true, lte: Some(one_int()?), ..Default::default() },
        })
    }

    pub fn with_min_values(mut self, min: Option<u32>) -> Self {
        self.min_values = min;
        self
    }

    /// The operator this requirement serialises as (bounds aside).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    fn within_bounds(&self, v: &str) -> bool {
        if self.gte.is_none() && self.lte.is_none() {
            return true;
        }
        match v.parse::<i64>() {
            Ok(n) => self.gte.is_none_or(|g| n >= g) && self.lte.is_none_or(|l| n <= l),
            Err(_) => false,
        }
    }

    /// Whether the value is allowed.
    pub fn has(&self, v: &str) -> bool {
        let listed = self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok();
        listed != self.complement && self.within_bounds(v)
    }

    /// Number of allowed values; complements are unbounded.
    pub fn len(&self) -> usize {
        if self.complement { usize::MAX } else { self.values.len() }
    }

    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// The first allowed concrete value, if any.
    pub fn any(&self) -> Option<&str> {
        if self.complement { None } else { self.values.first().map(String::as_str) }
    }

    pub fn intersect(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = match (self.gte, other.gte) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let lte = match (self.lte, other.lte) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let min_values = match (self.min_values, other.min_values) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return Requirement { min_values, ..Requirement::does_not_exist() };
        }
        let mut values: Vec<String> = match (self.complement, other.complement) {
            (true, true) => {
                let mut v: Vec<String> = self.values.iter().chain(other.values.iter()).cloned().collect();
                v.sort();
                v.dedup();
                v
            }
            (true, false) => other.values.iter().filter(|v| !self.contains(v)).cloned().collect(),
            (false, true) => self.values.iter().filter(|v| !other.contains(v)).cloned().collect(),
            (false, false) => self.values.iter().filter(|v| other.contains(v)).cloned().collect(),
        };
        let bounds = Requirement { gte, lte, ..Default::default() };
        if !complement {
            values.retain(|v| bounds.within_bounds(v));
            return Requirement { complement, values, gte: None, lte: None, min_values };
        }
        // Exclusions that fall outside the bounds are redundant.
        values.retain(|v| bounds.within_bounds(v));
        Requirement { complement, values, gte, lte, min_values }
    }

    fn contains(&self, v: &str) -> bool {
        self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok()
    }

    /// Allocation-free "is the intersection non-empty".
    pub fn has_intersection(&self, other: &Requirement) -> bool {
        let gte = self.gte.max(other.gte);
        let lte = match (self.lte, other.lte) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return false;
        }
        let bounds = Requirement { gte, lte, ..Default::default() };
        match (self.complement, other.complement) {
            // Both complements: infinitely many values remain (bounds permitting, checked above).
            (true, true) => true,
            (true, false) => other.values.iter().any(|v| !self.contains(v) && bounds.within_bounds(v)),
            (false, true) => self.values.iter().any(|v| !other.contains(v) && bounds.within_bounds(v)),
            // Walk the shorter list, probe the longer (a claim's hundreds of instance types against one type's).
            (false, false) => {
                let (short, long) = if self.values.len() <= other.values.len() { (self, other) } else { (other, self) };
                short.values.iter().any(|v| long.contains(v) && bounds.within_bounds(v))
            }
        }
    }

    /// Serialises as node selector requirements: (operator, values). A requirement with both bounds gives two.
    pub fn to_terms(&self) -> Vec<(Operator, Vec<String>)> {
        let mut out = Vec::new();
        if self.complement && (self.gte.is_some() || self.lte.is_some()) {
            if let Some(g) = self.gte {
                out.push((Operator::Gte, vec![g.to_string()]));
            }
            if let Some(l) = self.lte {
                out.push((Operator::Lte, vec![l.to_string()]));
            }
            if !self.values.is_empty() {
                out.push((Operator::NotIn, self.values.clone()));
            }
            return out;
        }
        out.push((self.operator(), self.values.clone()));
        out
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let terms: Vec<String> = self
            .to_terms()
            .into_iter()
            .map(|(op, vals)| match op {
                Operator::Exists | Operator::DoesNotExist => op.to_string(),
                _ => {
                    let mut shown: Vec<&str> = vals.iter().map(String::as_str).take(8).collect();
                    if vals.len() > 8 {
                        shown.push("...");
                    }
                    format!("{op} [{}]", shown.join(", "))
                }
            })
            .collect();
        f.write_str(&terms.join(" and "))?;
        if let Some(m) = self.min_values {
            write!(f, " (minValues {m})")?;
        }
        Ok(())
    }
}

/// Why two requirement sets are not compatible, for explanations.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Incompatibility {
    #[error("label {key:?} does not have known values{}", hint.as_ref().map(|h| format!(" (did you mean {h:?}?)")).unwrap_or_default())]
    Undefined { key: String, hint: Option<String> },
    #[error("{key} {wanted} conflicts with {offered}")]
    Conflict { key: String, wanted: Box<Requirement>, offered: Box<Requirement> },
}

impl Incompatibility {
    pub fn key(&self) -> &str {
        match self {
            Incompatibility::Undefined { key, .. } | Incompatibility::Conflict { key, .. } => key,
        }
    }
}

/// A set of requirements keyed by (normalised) label key. Keys iterate in sorted order, so output is stable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Requirements {
    map: SortedMap,
}

/// The few keys of a requirement set, sorted in one vector: sets are small (a pod's selector has one or two keys, an
/// instance type's a few dozen), so a search in one allocation beats a B-tree, whose smallest node is a kilobyte
/// here — and every pod digest and instance type holds such sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct SortedMap(Vec<(Arc<str>, Arc<Requirement>)>);

// Entries are shared: copying a set (a new NodeClaim starts from its NodePool's, a pod's context from its selector)
// costs one allocation, not one per key and value, and a change copies only the entry it touches.
impl SortedMap {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    fn get(&self, key: &str) -> Option<&Requirement> {
        self.find(key).ok().map(|i| &*self.0[i].1)
    }

    fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    fn insert(&mut self, key: &str, req: Requirement) {
        match self.find(key) {
            Ok(i) => self.0[i].1 = Arc::new(req),
            Err(i) => self.0.insert(i, (Arc::from(key), Arc::new(req))),
        }
    }

    fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.find(key).ok().map(|i| Arc::unwrap_or_clone(self.0.remove(i).1))
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &Requirement)> {
        self.0.iter().map(|(k, r)| (&**k, &**r))
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The `key In [value]` entries label requirement sets share (see [`Requirements::from_labels_sharing`]).
#[derive(Debug, Default)]
pub struct SharedLabels(rustc_hash::FxHashMap<u64, Vec<Entry>>);

/// One key of a [`SortedMap`] and its requirement.
type Entry = (Arc<str>, Arc<Requirement>);

impl SharedLabels {
    fn entry(&mut self, key: &str, value: &str) -> Entry {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (key, value).hash(&mut h);
        let bucket = self.0.entry(h.finish()).or_default();
        if let Some(e) = bucket.iter().find(|(k, r)| **k == *key && r.values.first().is_some_and(|v| v == value)) {
            return e.clone();
        }
        let e = (Arc::<str>::from(key), Arc::new(Requirement::in_values([value])));
        bucket.push(e.clone());
        e
    }
}

impl Requirements {
    pub fn new() -> Self {
        Requirements::default()
    }

    /// `{k: In [v]}` for each label.
    pub fn from_labels<'a, I>(labels: I) -> Self
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        let mut r = Requirements::new();
        for (k, v) in labels {
            r.add(k, Requirement::in_values([v.clone()]));
        }
        r
    }

    /// [`Requirements::from_labels`], sharing each `key In [value]` entry with the other sets built through
    /// `shared`: a cluster's nodes carry a few distinct labels (zone, type, pool) many times over, so a node's set
    /// then allocates only for the labels it alone has.
    pub fn from_labels_sharing<'a, I>(labels: I, shared: &mut SharedLabels) -> Self
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        let mut r = Requirements::new();
        for (k, v) in labels {
            let key = labels::normalize_key(k);
            let entry = shared.entry(key, v);
            match r.map.find(key) {
                Ok(i) => r.intersect_at(i, &entry.1),
                Err(i) => r.map.0.insert(i, entry),
            }
        }
        r
    }

    /// Intersects `req` into the key's existing requirement (the key is normalised).
    pub fn add(&mut self, key: &str, req: Requirement) {
        let key = labels::normalize_key(key);
        match self.map.find(key) {
            Ok(i) => self.intersect_at(i, &req),
            Err(i) => self.map.0.insert(i, (Arc::from(key), Arc::new(req))),
        }
    }

    /// Intersects `req` into entry `i`, which keeps sharing its requirement when that already implies `req`.
    fn intersect_at(&mut self, i: usize, req: &Requirement) {
        let merged = self.map.0[i].1.intersect(req);
        if merged != *self.map.0[i].1 {
            self.map.0[i].1 = Arc::new(merged);
        }
    }

    pub fn add_all(&mut self, other: &Requirements) {
        // `other`'s keys are normalised already; a key only `other` has is shared, not copied.
        for (k, r) in &other.map.0 {
            match self.map.find(k) {
                Ok(i) => self.intersect_at(i, r),
                Err(i) => self.map.0.insert(i, (k.clone(), r.clone())),
            }
        }
    }

    pub fn intersected(&self, other: &Requirements) -> Requirements {
        let mut r = self.clone();
        r.add_all(other);
        r
    }

    /// Replaces a key's requirement outright.
    pub fn set(&mut self, key: &str, req: Requirement) {
        self.map.insert(labels::normalize_key(key), req);
    }

    /// Makes the requirement on `key` `In [value]`, reusing the storage of one that already is a plain single-value
    /// `In` this set alone holds (a solve names thousands of new claims this way).
    pub fn set_single_value(&mut self, key: &str, value: &str) {
        if let Ok(i) = self.map.find(key)
            && let Some(r) = Arc::get_mut(&mut self.map.0[i].1)
            && !r.complement
            && r.values.len() == 1
            && r.gte.is_none()
            && r.lte.is_none()
            && r.min_values.is_none()
        {
            r.values[0].clear();
            r.values[0].push_str(value);
            return;
        }
        self.set(key, Requirement::in_values([value.to_string()]));
    }

    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.map.remove(key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// A missing key behaves as `Exists`.
    pub fn get(&self, key: &str) -> Requirement {
        self.map.get(key).cloned().unwrap_or_else(Requirement::exists)
    }

    pub fn get_ref(&self, key: &str) -> Option<&Requirement> {
        self.map.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Requirement)> {
        self.map.iter()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.map.keys()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Drops spare capacity: for sets built once and kept (a pod's digest, an instance type).
    pub fn shrink_to_fit(&mut self) {
        self.map.0.shrink_to_fit();
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// For every key in both sets the requirements must intersect, except that two negative requirements never
    /// conflict. Keys on one side only are ignored.
    /// Whether the two agree on every key both define: [`Requirements::intersects`] without building its error, for
    /// callers that only ask yes or no (a launch tries each claim against hundreds of types, and the error copies
    /// the claim's requirement, often its whole instance-type list).
    pub fn overlaps(&self, other: &Requirements) -> bool {
        let (small, large) = if self.map.len() <= other.map.len() { (self, other) } else { (other, self) };
        small.map.iter().all(|(key, a)| {
            large
                .map
                .get(key)
                .is_none_or(|b| a.has_intersection(b) || (a.operator().is_negative() && b.operator().is_negative()))
        })
    }

    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatibility> {
        // Walk the smaller map and probe the larger.
        let (small, large, swapped) =
            if self.map.len() <= other.map.len() { (self, other, false) } else { (other, self, true) };
        for (key, a) in small.map.iter() {
            let Some(b) = large.map.get(key) else { continue };
            if a.has_intersection(b) {
                continue;
            }
            let (ours, theirs) = if swapped { (b, a) } else { (a, b) };
            if ours.operator().is_negative() && theirs.operator().is_negative() {
                continue;
            }
            return Err(Incompatibility::Conflict {
                key: key.to_string(),
                wanted: Box::new(theirs.clone()),
                offered: Box::new(ours.clone()),
            });
        }
        Ok(())
    }

    /// `self` describes what is offered (a NodePool, a node); `other` what is asked (a pod). A key asked for that
    /// `self` does not define is an error unless it is allowed to be undefined (well-known labels resolved later
    /// from instance types) or asked for negatively.
    pub fn compatible(
        &self,
        other: &Requirements,
        allow_undefined: Option<&LabelPolicy>,
    ) -> Result<(), Incompatibility> {
        for (key, r) in other.map.iter() {
            if self.map.contains_key(key) || r.operator().is_negative() {
                continue;
            }
            if allow_undefined.is_some_and(|p| p.is_well_known(key)) {
                continue;
            }
            let hint = allow_undefined
                .and_then(|p| labels::hint(key, p.well_known.iter().map(String::as_str).chain(self.map.keys())))
                .map(str::to_string);
            return Err(Incompatibility::Undefined { key: key.to_string(), hint });
        }
        self.intersects(other)
    }

    /// Whether [`Requirements::compatible`] holds, without building its error or its hint.
    pub fn admits(&self, other: &Requirements, allow_undefined: Option<&LabelPolicy>) -> bool {
        let defined = other.map.iter().all(|(key, r)| {
            self.map.contains_key(key)
                || r.operator().is_negative()
                || allow_undefined.is_some_and(|p| p.is_well_known(key))
        });
        defined && self.overlaps(other)
    }

    /// Labels implied by single-valued `In` requirements.
    /// Each key with exactly one allowed value, borrowed (see [`Requirements::single_valued_labels`]).
    pub fn single_valued(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().filter(|(_, r)| !r.complement && r.values.len() == 1).map(|(k, r)| (k, r.values[0].as_str()))
    }

    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        self.single_valued().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    pub fn keys_set(&self) -> BTreeSet<&str> {
        self.map.keys().collect()
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.map.iter().map(|(k, r)| format!("{k} {r}")).collect();
        f.write_str(&parts.join(", "))
    }
}

impl FromIterator<(String, Requirement)> for Requirements {
    fn from_iter<T: IntoIterator<Item = (String, Requirement)>>(iter: T) -> Self {
        let mut r = Requirements::new();
        for (k, req) in iter {
            r.add(&k, req);
        }
        r
    }
}

fn quantities(
    map: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> crate::engine::resources::Resources {
    let mut r = crate::engine::resources::Resources::default();
    for (k, q) in map {
        if let Ok(v) = crate::engine::resources::parse_quantity(&q.0) {
            r.set(k, v);
        }
    }
    r
}

/// A NodeClaim's requirements as the algebra sees them (unparseable entries are skipped: the claim was built by
/// the engine or validated on the way in).
pub fn claim_requirements(claim: &crate::engine::api::NodeClaim) -> Requirements {
    selector_requirements(&claim.spec.requirements)
}

/// Node selector requirements (a claim's, an AMI's in an EC2NodeClass status) as a requirement set; unparseable
/// entries are skipped.
pub fn selector_requirements(list: &[crate::engine::api::NodeSelectorRequirementWithMinValues]) -> Requirements {
    let mut reqs = Requirements::new();
    for r in list {
        if let Some(op) = Operator::parse(&r.operator)
            && let Ok(req) = Requirement::new(op, &r.values)
        {
            reqs.add(&r.key, req);
        }
    }
    reqs
}

/// A NodeClaim's resource requests (unparseable quantities skipped).
pub fn claim_requests(claim: &crate::engine::api::NodeClaim) -> crate::engine::resources::Resources {
    quantities(&claim.spec.resources.requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Sets built through one [`SharedLabels`] equal the unshared ones and share the entries of labels they have
    /// in common; a deprecated key is normalised as `add` does, and a different value is its own entry.
    #[test]
    fn label_sets_built_sharing_equal_unshared_ones_and_share_common_entries() {
        let a: BTreeMap<String, String> =
            [("failure-domain.beta.kubernetes.io/zone", "us-east-1a"), ("kubernetes.io/hostname", "a")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let mut b = a.clone();
        b.insert("kubernetes.io/hostname".into(), "b".into());
        let mut shared = SharedLabels::default();
        let (ra, rb) =
            (Requirements::from_labels_sharing(&a, &mut shared), Requirements::from_labels_sharing(&b, &mut shared));
        assert_eq!(ra, Requirements::from_labels(&a));
        assert_eq!(rb, Requirements::from_labels(&b));
        let entry = |r: &Requirements, key: &str| r.map.0[r.map.find(key).expect("key")].1.clone();
        assert!(ra.get_ref(labels::ZONE).is_some(), "the deprecated zone key is normalised");
        assert!(Arc::ptr_eq(&entry(&ra, labels::ZONE), &entry(&rb, labels::ZONE)));
        assert!(!Arc::ptr_eq(&entry(&ra, labels::HOSTNAME), &entry(&rb, labels::HOSTNAME)));
    }

    #[test]
    fn set_single_value_makes_the_requirement_in_that_value_whatever_it_was() {
        let mut r = Requirements::default();
        r.set("a", Requirement::in_values(["old"]));
        r.set("b", Requirement::not_in(["x"]));
        r.set("c", Requirement::in_values(["p", "q"]));
        r.set("d", Requirement::in_values(["m"]).with_min_values(Some(1)));
        for key in ["a", "b", "c", "d", "e"] {
            r.set_single_value(key, "new");
            assert_eq!(r.get(key), Requirement::in_values(["new"]), "{key}");
        }
        assert_eq!(r.len(), 5);
    }

    #[test]
    fn copies_share_entries_but_changes_stay_with_the_copy_changed() {
        let mut original = Requirements::default();
        original.set("zone", Requirement::in_values(["a", "b"]));
        original.set("host", Requirement::in_values(["placeholder"]));
        let before = original.clone();
        let mut copy = original.clone();
        copy.set_single_value("host", "claim-1");
        copy.add("zone", Requirement::in_values(["b", "c"]));
        copy.remove("missing");
        let mut other = Requirements::default();
        other.set("arch", Requirement::in_values(["amd64"]));
        copy.add_all(&other);
        assert_eq!(original, before, "the original is untouched");
        assert_eq!(copy.get("host"), Requirement::in_values(["claim-1"]));
        assert_eq!(copy.get("zone"), Requirement::in_values(["b"]));
        assert_eq!(copy.get("arch"), Requirement::in_values(["amd64"]));
        assert_eq!(other.get("arch"), Requirement::in_values(["amd64"]));
        // A copy nobody else holds is changed in place and still reads the same.
        let mut alone = Requirements::default();
        alone.set("host", Requirement::in_values(["x"]));
        alone.set_single_value("host", "y");
        assert_eq!(alone.get("host"), Requirement::in_values(["y"]));
    }

    #[test]
    fn operators_map_to_representation() {
        let r = Requirement::new(Operator::Gt, &s(&["3"])).unwrap();
        assert!(r.has("4") && !r.has("3") && !r.has("abc"));
        let r = Requirement::new(Operator::Lt, &s(&["3"])).unwrap();
        assert!(r.has("2") && !r.has("3"));
        let r = Requirement::new(Operator::Gte, &s(&["3"])).unwrap();
        assert!(r.has("3") && !r.has("2"));
        let r = Requirement::new(Operator::Lte, &s(&["3"])).unwrap();
        assert!(r.has("3") && !r.has("4"));
        assert!(Requirement::new(Operator::Gt, &s(&["x"])).is_err());
        assert!(Requirement::new(Operator::Gt, &s(&["1", "2"])).is_err());
        let r = Requirement::new(Operator::Gt, &s(&[&i64::MAX.to_string()])).unwrap();
        assert_eq!(r.operator(), Operator::DoesNotExist);
        assert_eq!(Requirement::exists().operator(), Operator::Exists);
        assert_eq!(Requirement::not_in(["a"]).operator(), Operator::NotIn);
    }

    #[test]
    fn intersection_rules() {
        let a = Requirement::in_values(["a", "b", "c"]);
        let b = Requirement::not_in(["b"]);
        assert_eq!(a.intersect(&b), Requirement::in_values(["a", "c"]));
        let c = Requirement::not_in(["x"]).intersect(&Requirement::not_in(["y"]));
        assert_eq!(c, Requirement::not_in(["x", "y"]));
        let gt = Requirement::new(Operator::Gt, &s(&["5"])).unwrap();
        let lt = Requirement::new(Operator::Lt, &s(&["3"])).unwrap();
        assert_eq!(gt.intersect(&lt).operator(), Operator::DoesNotExist);
        let nums = Requirement::in_values(["1", "4", "8", "x"]);
        assert_eq!(
            nums.intersect(&Requirement::new(Operator::Gte, &s(&["4"])).unwrap()),
            Requirement::in_values(["4", "8"])
        );
        let m = Requirement::in_values(["a"])
            .with_min_values(Some(2))
            .intersect(&Requirement::exists().with_min_values(Some(3)));
        assert_eq!(m.min_values, Some(3));
    }

    #[test]
    fn negative_requirements_never_conflict() {
        let mut a = Requirements::new();
        a.add("team", Requirement::does_not_exist());
        let mut b = Requirements::new();
        b.add("team", Requirement::not_in(["x"]));
        assert!(a.intersects(&b).is_ok());
        let mut c = Requirements::new();
        c.add("team", Requirement::in_values(["x"]));
        assert!(a.intersects(&c).is_err());
    }

    #[test]
    fn compatible_requires_custom_labels_to_be_defined() {
        let policy = LabelPolicy::default();
        let pool = Requirements::new();
        let mut pod = Requirements::new();
        pod.add(labels::ZONE, Requirement::in_values(["z1"]));
        assert!(pool.compatible(&pod, Some(&policy)).is_ok(), "well-known labels may be undefined");
        pod.add("team", Requirement::in_values(["a"]));
        let err = pool.compatible(&pod, Some(&policy)).unwrap_err();
        assert!(err.to_string().contains("\"team\" does not have known values"), "{err}");
        let mut neg = Requirements::new();
        neg.add("team", Requirement::not_in(["a"]));
        assert!(pool.compatible(&neg, Some(&policy)).is_ok());
        let mut exists = Requirements::new();
        exists.add("team", Requirement::exists());
        assert!(pool.compatible(&exists, Some(&policy)).is_err());
        // Without allow-undefined, even well-known labels must be present.
        let mut zone_only = Requirements::new();
        zone_only.add(labels::ZONE, Requirement::in_values(["z1"]));
        assert!(pool.compatible(&zone_only, None).is_err());
    }

    #[test]
    fn keys_are_normalised() {
        let mut r = Requirements::new();
        r.add("failure-domain.beta.kubernetes.io/zone", Requirement::in_values(["z"]));
        assert!(r.has(labels::ZONE));
    }

    fn arb_requirement() -> impl Strategy<Value = Requirement> {
        let vals = proptest::collection::vec(prop_oneof!["a", "b", "c", "1", "2", "5", "9"], 0..4);
        (any::<bool>(), vals, proptest::option::of(0i64..10), proptest::option::of(0i64..10)).prop_map(
            |(complement, values, gte, lte)| {
                let mut r = if complement { Requirement::not_in(values) } else { Requirement::in_values(values) };
                if complement {
                    r.gte = gte;
                    r.lte = lte;
                }
                r
            },
        )
    }

    const UNIVERSE: [&str; 10] = ["a", "b", "c", "d", "0", "1", "2", "5", "9", "12"];

    proptest! {
        #[test]
        fn intersection_is_commutative(a in arb_requirement(), b in arb_requirement()) {
            let ab = a.intersect(&b);
            let ba = b.intersect(&a);
            for v in UNIVERSE {
                prop_assert_eq!(ab.has(v), ba.has(v));
            }
            prop_assert_eq!(a.has_intersection(&b), b.has_intersection(&a));
        }

        #[test]
        fn intersection_is_associative(a in arb_requirement(), b in arb_requirement(), c in arb_requirement()) {
            let l = a.intersect(&b).intersect(&c);
            let r = a.intersect(&b.intersect(&c));
            for v in UNIVERSE {
                prop_assert_eq!(l.has(v), r.has(v));
            }
        }

        #[test]
        fn has_agrees_with_intersection(a in arb_requirement(), b in arb_requirement()) {
            let ab = a.intersect(&b);
            for v in UNIVERSE {
                prop_assert_eq!(ab.has(v), a.has(v) && b.has(v), "value {}", v);
            }
        }

        #[test]
        fn the_yes_or_no_checks_agree_with_the_ones_that_explain(
            a in proptest::collection::vec((prop_oneof!["team", "tier", labels::ZONE], arb_requirement()), 0..3),
            b in proptest::collection::vec((prop_oneof!["team", "tier", labels::ZONE], arb_requirement()), 0..3),
        ) {
            let build = |reqs: &[(String, Requirement)]| {
                let mut r = Requirements::new();
                for (k, v) in reqs {
                    r.add(k, v.clone());
                }
                r
            };
            let (a, b) = (build(&a), build(&b));
            let policy = LabelPolicy::default();
            prop_assert_eq!(a.overlaps(&b), a.intersects(&b).is_ok());
            prop_assert_eq!(b.overlaps(&a), b.intersects(&a).is_ok());
            prop_assert_eq!(a.admits(&b, None), a.compatible(&b, None).is_ok());
            prop_assert_eq!(a.admits(&b, Some(&policy)), a.compatible(&b, Some(&policy)).is_ok());
        }

        #[test]
        fn has_intersection_agrees_with_intersect(a in arb_requirement(), b in arb_requirement()) {
            let ab = a.intersect(&b);
            let nonempty = ab.complement || !ab.values.is_empty();
            prop_assert_eq!(a.has_intersection(&b), nonempty);
        }
    }
}
