//! [`StoredPod`]: a pod as this program keeps it, its spec shared with every other pod that has the same one.
//!
//! A k8s-openapi `Pod` takes about 6.5 KB even when its manifest is six lines, and most of that is the spec (the
//! `PodSpec` struct alone is 1.5 KB, each `Container` 2.3 KB, each map a B-tree node). The pods of one ReplicaSet,
//! Job or DaemonSet have equal specs but for the node they are bound to, so a stored pod keeps the node name beside
//! the spec and the spec behind an `Arc`, interned by value: at 20,000 pods of a few hundred workloads that is the
//! difference between about 130 MiB and about 40. Converting to and from `Pod` loses nothing, and the serde form is
//! the upstream one.

use std::borrow::Cow;
use std::hash::Hasher;
use std::io;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rustc_hash::{FxHashMap, FxHasher};
use serde::{Deserialize, Serialize};

/// A pod with a shared spec. Read the node it is bound to through [`StoredPod::node_name`]: the shared spec never
/// names one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "Pod", into = "Pod")]
pub struct StoredPod {
    pub metadata: ObjectMeta,
    /// Shared, interned unless made by [`StoredPod::unshared`]; its `node_name` is always `None`.
    spec: Arc<PodSpec>,
    /// `spec.nodeName` of the pod.
    pub node_name: Option<String>,
    pub status: Option<PodStatus>,
}

impl StoredPod {
    /// The pod's spec, without the node it is bound to (see [`StoredPod::node_name`]).
    pub fn spec(&self) -> &PodSpec {
        &self.spec
    }

    /// The spec to change; it stops being shared. The node name is not in here.
    pub fn spec_mut(&mut self) -> &mut PodSpec {
        Arc::make_mut(&mut self.spec)
    }

    /// The node the pod is bound to, as `spec.nodeName` says (which may be empty).
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    /// The node the pod is bound to, if it names one.
    pub fn bound_node(&self) -> Option<&str> {
        self.node_name().filter(|n| !n.is_empty())
    }

    /// Succeeded or Failed: done running, holding nothing on its node.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
    }

    /// Whether an owner of kind `kind` is named (`DaemonSet`; `Node` for a static pod's mirror).
    pub fn owned_by(&self, kind: &str) -> bool {
        self.metadata.owner_references.iter().flatten().any(|o| o.kind == kind)
    }

    /// The upstream object.
    pub fn to_pod(&self) -> Pod {
        let mut spec = PodSpec::clone(&self.spec);
        spec.node_name.clone_from(&self.node_name);
        Pod { metadata: self.metadata.clone(), spec: Some(spec), status: self.status.clone() }
    }

    /// A stored pod whose spec is its own: neither looked up in nor entered into the shared table. For objects that
    /// live briefly, like a parsed scenario dropped once its world is built: specs entered from there would be
    /// shared by the world's pods and keep the parser's memory pages in use (they sit among its garbage).
    pub fn unshared(p: Pod) -> Self {
        let mut spec = p.spec.unwrap_or_default();
        let node_name = spec.node_name.take();
        StoredPod { metadata: p.metadata, spec: Arc::new(spec), node_name, status: p.status }
    }

    /// A copy whose spec comes from the shared table (a new copy made here if no equal spec is in it).
    pub fn interned(&self) -> Self {
        StoredPod {
            metadata: self.metadata.clone(),
            spec: intern(Cow::Borrowed(&self.spec)),
            node_name: self.node_name.clone(),
            status: self.status.clone(),
        }
    }

    /// Whether two pods share one spec allocation (for tests of the interning).
    pub fn shares_spec_with(&self, other: &StoredPod) -> bool {
        Arc::ptr_eq(&self.spec, &other.spec)
    }
}

impl From<Pod> for StoredPod {
    fn from(p: Pod) -> Self {
        let mut spec = p.spec.unwrap_or_default();
        let node_name = spec.node_name.take();
        StoredPod { metadata: p.metadata, spec: intern(Cow::Owned(spec)), node_name, status: p.status }
    }
}

impl From<StoredPod> for Pod {
    fn from(p: StoredPod) -> Self {
        let mut spec = Arc::unwrap_or_clone(p.spec);
        spec.node_name = p.node_name;
        Pod { metadata: p.metadata, spec: Some(spec), status: p.status }
    }
}

impl PartialEq for StoredPod {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata
            && self.node_name == other.node_name
            && self.status == other.status
            && (Arc::ptr_eq(&self.spec, &other.spec) || self.spec == other.spec)
    }
}

// The same resource as `Pod` to the API server, so `kube::ResourceExt` and friends work on stored pods.
impl k8s_openapi::Resource for StoredPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for StoredPod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Specs in use, by a hash of their serialized form. Entries are weak: a spec goes when its last pod does. One table
/// for the process, so that every path that turns a `Pod` into a stored pod (a scenario, the simulated controllers,
/// a watch) shares specs without handing a table around.
static SPECS: LazyLock<Mutex<Interner>> = LazyLock::new(|| Mutex::new(Interner::default()));

#[derive(Default)]
struct Interner {
    by_hash: FxHashMap<u64, Vec<Weak<PodSpec>>>,
    /// Entries, dead ones included; when it doubles since the last sweep, dead ones are swept. A dead entry still
    /// holds its spec's 1.5 KB block (a weak pointer keeps the allocation), so sweeping keeps the dead to about as
    /// many as the living; a lookup also drops the dead of its own bucket.
    entries: usize,
    sweep_at: usize,
}

/// Feeds serialized bytes into a hasher without building them.
struct HashWriter(FxHasher);

impl io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn hash_of(spec: &PodSpec) -> u64 {
    let mut w = HashWriter(FxHasher::default());
    // Serializing a PodSpec into a sink cannot fail; if it somehow did, the partial hash is still a fine bucket
    // key, because a bucket is only ever a shortlist for a full comparison.
    let _ = serde_json::to_writer(&mut w, spec);
    w.0.finish()
}

/// The shared copy of `spec`, made shared (owned here, copied if borrowed) if it is the first of its kind.
fn intern(spec: Cow<'_, PodSpec>) -> Arc<PodSpec> {
    let h = hash_of(&spec);
    // A poisoned table is still a valid table: every entry is either a live spec or a dead weak pointer.
    let mut t = SPECS.lock().unwrap_or_else(|e| e.into_inner());
    let bucket = t.by_hash.entry(h).or_default();
    let before = bucket.len();
    bucket.retain(|w| w.strong_count() > 0);
    let found = bucket.iter().filter_map(Weak::upgrade).find(|s| **s == *spec);
    let removed = before - bucket.len();
    let shared = match found {
        Some(s) => s,
        None => {
            let s = Arc::new(spec.into_owned());
            bucket.push(Arc::downgrade(&s));
            t.entries += 1;
            s
        }
    };
    t.entries -= removed;
    if t.entries > t.sweep_at.max(1024) * 2 {
        t.by_hash.retain(|_, b| {
            b.retain(|w| w.strong_count() > 0);
            !b.is_empty()
        });
        t.entries = t.by_hash.values().map(Vec::len).sum();
        t.sweep_at = t.entries;
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    fn pod(name: &str, node: Option<&str>, image: &str) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..Default::default() },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                containers: vec![Container { name: "c".into(), image: Some(image.into()), ..Default::default() }],
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn equal_specs_are_shared_whatever_node_they_are_bound_to() {
        let a = StoredPod::from(pod("a", Some("n1"), "shared-spec-test"));
        let b = StoredPod::from(pod("b", Some("n2"), "shared-spec-test"));
        let c = StoredPod::from(pod("c", None, "shared-spec-test:other"));
        assert!(a.shares_spec_with(&b));
        assert!(!a.shares_spec_with(&c));
        assert_eq!(a.node_name(), Some("n1"));
        assert_eq!(b.node_name(), Some("n2"));
        assert_eq!(a.spec().node_name, None, "the shared spec names no node");
    }

    #[test]
    fn unshared_specs_stay_out_of_the_table_until_interned() {
        let a = StoredPod::unshared(pod("a", Some("n1"), "unshared-test"));
        let b = StoredPod::unshared(pod("b", Some("n1"), "unshared-test"));
        assert!(!a.shares_spec_with(&b));
        let (a2, b2) = (a.interned(), b.interned());
        assert!(a2.shares_spec_with(&b2));
        assert!(!a2.shares_spec_with(&a), "the interned copy is a copy");
        assert_eq!((a2.to_pod(), b2.to_pod()), (a.to_pod(), b.to_pod()));
        assert!(StoredPod::from(pod("c", None, "unshared-test")).shares_spec_with(&a2));
    }

    #[test]
    fn conversion_and_serde_keep_the_upstream_object() {
        let p = pod("a", Some("n1"), "round-trip-test");
        let s = StoredPod::from(p.clone());
        assert_eq!(s.to_pod(), p);
        assert_eq!(Pod::from(s.clone()), p);
        assert_eq!(serde_json::to_value(&s).unwrap(), serde_json::to_value(&p).unwrap());
        let back: StoredPod = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn a_changed_spec_stops_being_shared_and_specs_go_with_their_last_pod() {
        let a = StoredPod::from(pod("a", None, "unshare-test"));
        let mut b = StoredPod::from(pod("b", None, "unshare-test"));
        b.spec_mut().containers[0].image = Some("unshare-test:2".into());
        assert!(!a.shares_spec_with(&b));
        assert_eq!(a.spec().containers[0].image.as_deref(), Some("unshare-test"));

        let weak = Arc::downgrade(&a.spec);
        drop(a);
        assert_eq!(weak.strong_count(), 0, "the table does not keep specs alive");
        let again = StoredPod::from(pod("c", None, "unshare-test"));
        assert_eq!(again.spec().containers[0].image.as_deref(), Some("unshare-test"));
    }
}
