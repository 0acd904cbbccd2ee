//! Watch semantics for the simulated object store, in the spirit of the Kubernetes API.
//!
//! Each kind of the store is a [`Watched`] map. Every write (insert, mutable access, removal) takes the next
//! value of a counter shared by every kind of one store, the store-wide resourceVersion, sets it in the object's
//! `metadata.resourceVersion`, and appends an event to the kind's bounded log. A consumer remembers the
//! resourceVersion it is current to and asks for what happened since ([`Watched::events_since`]); a consumer
//! further behind than the log reaches gets [`Gone`] (the API server's `410 Gone`) and must relist, as real
//! watchers do.
//!
//! Events name the object written, not a copy of it: copying every pod on every write would cost more than the
//! consumers save. So a watcher sees each object that changed once, with its current state, at the position of its
//! last write (a watcher that reads rarely sees what a slow real watcher sees after its events were coalesced):
//! an object created after `since` arrives as `Added`, one deleted as `Deleted` carrying its last state (the log
//! keeps deleted objects), one created and deleted in between not at all.
//!
//! Reads go through `Deref` to the `BTreeMap`, so iteration stays in key order and every decision deterministic.
//! There is no `DerefMut`: writes go through the methods here, so none can escape the log.
//!
//! Objects are kept behind `Arc`s so that one copy serves the map, the log of deletions and the consumers that
//! mirror the kind (the engine's snapshot): at 20,000 pods a copy is over a hundred megabytes. A write copies the
//! object only when a consumer still holds the old state (`Arc::make_mut`).

use std::borrow::Borrow;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::Resource;

/// Events kept per kind. Enough for the busiest step of a 10,000-pod simulation; a consumer further behind
/// relists.
pub const LOG_CAPACITY: usize = 1024;

/// The source of change stamps. Stamps are only compared for equality and never leave the process, so one counter
/// for all stores costs nothing in determinism.
static STAMPS: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_stamp() -> u64 {
    STAMPS.fetch_add(1, Ordering::Relaxed)
}

/// The store-wide resourceVersion counter, shared by the kinds of one store (and only by them, so the versions a
/// simulation issues depend on its writes alone).
#[derive(Debug, Clone, Default)]
pub struct Versions(Arc<AtomicU64>);

impl Versions {
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last resourceVersion issued.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change a watcher sees: the object as it is now, or as it was when deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a, K, V> {
    pub type_: EventType,
    pub resource_version: u64,
    pub key: &'a K,
    /// Shared, so a consumer can keep the object without copying it.
    pub object: &'a Arc<V>,
}

/// The watcher's resourceVersion is older than the log reaches: list again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("resourceVersion {requested} is too old (410 Gone: events up to {compacted} were compacted)")]
pub struct Gone {
    pub requested: u64,
    pub compacted: u64,
}

#[derive(Debug)]
struct Entry<K, V> {
    resource_version: u64,
    type_: EventType,
    key: K,
    /// The last state of a deleted object.
    deleted: Option<Arc<V>>,
}

/// One kind of the store: an ordered map whose every write is versioned and logged (module docs).
#[derive(Debug)]
pub struct Watched<K, V> {
    map: BTreeMap<K, Arc<V>>,
    /// A process-unique stamp, fresh on every write: equal stamps mean no write in between, whatever the map.
    stamp: u64,
    versions: Versions,
    log: VecDeque<Entry<K, V>>,
    capacity: usize,
    /// The resourceVersion of the last event dropped from the log (0: none).
    compacted: u64,
}

impl<K, V> Deref for Watched<K, V> {
    type Target = BTreeMap<K, Arc<V>>;
    fn deref(&self) -> &BTreeMap<K, Arc<V>> {
        &self.map
    }
}

impl<'a, K, V> IntoIterator for &'a Watched<K, V> {
    type Item = (&'a K, &'a Arc<V>);
    type IntoIter = std::collections::btree_map::Iter<'a, K, Arc<V>>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl<K, V> Default for Watched<K, V> {
    /// A kind of its own store; use [`Watched::new`] to share a store's counter.
    fn default() -> Self {
        Watched::new(Versions::default())
    }
}

impl<K, V> Watched<K, V> {
    pub fn new(versions: Versions) -> Self {
        Watched::with_capacity(versions, LOG_CAPACITY)
    }

    pub fn with_capacity(versions: Versions, capacity: usize) -> Self {
        Watched {
            map: BTreeMap::new(),
            stamp: next_stamp(),
            versions,
            log: VecDeque::new(),
            capacity: capacity.max(1),
            compacted: 0,
        }
    }

    /// Equal stamps mean no write in between.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// The resourceVersion of this kind's last write: a list now is current to it, and a watch from it misses
    /// nothing.
    pub fn resource_version(&self) -> u64 {
        self.log.back().map_or(self.compacted, |e| e.resource_version)
    }

    fn push(&mut self, resource_version: u64, type_: EventType, key: K, deleted: Option<Arc<V>>) {
        if self.log.len() >= self.capacity
            && let Some(e) = self.log.pop_front()
        {
            self.compacted = e.resource_version;
        }
        self.log.push_back(Entry { resource_version, type_, key, deleted });
    }

    fn write(&mut self) -> u64 {
        self.stamp = next_stamp();
        self.versions.next()
    }
}

fn set_version<V: Resource>(object: &mut V, resource_version: u64) {
    object.meta_mut().resource_version = Some(resource_version.to_string());
}

impl<K: Ord + Clone, V: Resource + Clone> Watched<K, V> {
    /// A plain copy of every object, in key order (for callers that want owned objects, not shared ones).
    pub fn cloned_values(&self) -> Vec<V> {
        self.map.values().map(|o| V::clone(o)).collect()
    }

    /// Every object, shared with the store, in key order.
    pub fn shared_values(&self) -> Vec<Arc<V>> {
        self.map.values().cloned().collect()
    }

    /// Creates or replaces an object (`Added` or `Modified`). Returns the replaced object.
    pub fn insert(&mut self, key: K, mut object: V) -> Option<Arc<V>> {
        let rv = self.write();
        set_version(&mut object, rv);
        let old = self.map.insert(key.clone(), Arc::new(object));
        self.push(rv, if old.is_some() { EventType::Modified } else { EventType::Added }, key, None);
        old
    }

    /// An object to modify: the access is a write (`Modified`), so borrow mutably only to change something.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let owned = self.map.get_key_value(key)?.0.clone();
        let rv = self.write();
        self.push(rv, EventType::Modified, owned, None);
        let object = Arc::make_mut(self.map.get_mut(key)?);
        set_version(object, rv);
        Some(object)
    }

    /// Changes an object as an API server's update does: written (`Modified`) only if `change` left it different;
    /// an update that changes nothing gets no new resourceVersion and no event. `None` when there is no such object.
    pub fn update<Q>(&mut self, key: &Q, change: impl FnOnce(&mut V)) -> Option<()>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        V: PartialEq,
    {
        let mut changed = V::clone(self.map.get(key)?);
        change(&mut changed);
        if changed != **self.map.get(key)? {
            *self.get_mut(key)? = changed;
        }
        Some(())
    }

    /// Deletes an object (`Deleted`, carrying its last state, which is also returned).
    pub fn remove<Q>(&mut self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let (key, mut object) = self.map.remove_entry(key)?;
        let rv = self.write();
        set_version(Arc::make_mut(&mut object), rv);
        self.push(rv, EventType::Deleted, key, Some(object.clone()));
        Some(object)
    }

    /// Deletes every object `keep` rejects, in key order.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) {
        let gone: Vec<K> = self.map.iter().filter(|(k, v)| !keep(k, v)).map(|(k, _)| k.clone()).collect();
        for k in gone {
            self.remove(&k);
        }
    }

    /// Every object, to modify: each one is written (`Modified`), in key order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        let keys: Vec<K> = self.map.keys().cloned().collect();
        for key in keys {
            let rv = self.write();
            if let Some(object) = self.map.get_mut(&key) {
                set_version(Arc::make_mut(object), rv);
            }
            self.push(rv, EventType::Modified, key, None);
        }
        self.map.values_mut().map(Arc::make_mut)
    }

    /// What changed after resourceVersion `since`, in the order of each object's last write (module docs), or
    /// [`Gone`] when the log no longer reaches back that far.
    pub fn events_since(&self, since: u64) -> Result<Vec<Event<'_, K, V>>, Gone> {
        if since < self.compacted {
            return Err(Gone { requested: since, compacted: self.compacted });
        }
        let start = self.log.partition_point(|e| e.resource_version <= since);
        // Per key: the type of its first event after `since` and the position of its last.
        let mut seen: BTreeMap<&K, (EventType, usize)> = BTreeMap::new();
        for (i, e) in self.log.range(start..).enumerate() {
            seen.entry(&e.key).and_modify(|s| s.1 = i).or_insert((e.type_, i));
        }
        let mut events = Vec::with_capacity(seen.len());
        for (i, e) in self.log.range(start..).enumerate() {
            let Some(&(first, last)) = seen.get(&e.key) else { continue };
            if last != i {
                continue;
            }
            let (type_, object) = match (&e.deleted, first) {
                // Came and went in between: the watcher never knew it.
                (Some(_), EventType::Added) => continue,
                (Some(gone), _) => (EventType::Deleted, gone),
                (None, _) => {
                    let Some(object) = self.map.get(&e.key) else { continue };
                    (if first == EventType::Added { EventType::Added } else { EventType::Modified }, object)
                }
            };
            events.push(Event { type_, resource_version: e.resource_version, key: &e.key, object });
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ns(name: &str, label: &str) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("l".to_string(), label.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn rv(o: &Namespace) -> u64 {
        o.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn summary(events: &[Event<'_, String, Namespace>]) -> Vec<(EventType, String, u64)> {
        events.iter().map(|e| (e.type_, e.key.clone(), e.resource_version)).collect()
    }

    #[test]
    fn every_write_gets_the_next_store_wide_version() {
        let versions = Versions::default();
        let mut a: Watched<String, Namespace> = Watched::new(versions.clone());
        let mut b: Watched<String, Namespace> = Watched::new(versions.clone());
        a.insert("x".into(), ns("x", "1"));
        b.insert("y".into(), ns("y", "1"));
        a.get_mut("x").unwrap().metadata.labels = None;
        assert_eq!((rv(&a["x"]), rv(&b["y"])), (3, 2), "one counter for the store, set in metadata");
        assert_eq!(versions.current(), 3);
        assert_eq!(a.resource_version(), 3);
        let gone = b.remove("y").unwrap();
        assert_eq!(rv(&gone), 4, "a deletion is a write too");
        assert!(a.get_mut("nope").is_none());
        assert_eq!(versions.current(), 4, "no write, no version");
    }

    #[test]
    fn an_update_that_changes_nothing_is_no_write() {
        let mut w: Watched<String, Namespace> = Watched::default();
        w.insert("a".into(), ns("a", "1"));
        let (version, stamp) = (w.resource_version(), w.stamp());
        let same = |n: &mut Namespace| n.metadata.labels = Some([("l".to_string(), "1".to_string())].into());
        assert_eq!(w.update("a", same), Some(()));
        assert_eq!((w.resource_version(), w.stamp()), (version, stamp), "no new version, no event");
        let other = |n: &mut Namespace| n.metadata.labels = None;
        assert_eq!(w.update("a", other), Some(()));
        assert_eq!(w.resource_version(), version + 1);
        assert_eq!(w["a"].metadata.labels, None);
        assert_eq!(w.update("nope", |_| {}), None);
    }

    #[test]
    fn events_come_in_order_with_the_latest_state_and_deletions_carry_the_last_one() {
        let mut w: Watched<String, Namespace> = Watched::default();
        w.insert("a".into(), ns("a", "1"));
        w.insert("b".into(), ns("b", "1"));
        let since = w.resource_version();
        let listed = w.events_since(0).unwrap();
        assert_eq!(summary(&listed), [(EventType::Added, "a".into(), 1), (EventType::Added, "b".into(), 2)]);

        w.get_mut("a").unwrap().metadata.labels = Some([("l".to_string(), "2".to_string())].into());
        w.insert("c".into(), ns("c", "1"));
        w.get_mut("b").unwrap().metadata.labels = Some([("l".to_string(), "last".to_string())].into());
        w.remove("b");
        w.get_mut("a").unwrap().metadata.labels = Some([("l".to_string(), "3".to_string())].into());
        w.insert("d".into(), ns("d", "1"));
        w.remove("d");
        let events = w.events_since(since).unwrap();
        assert_eq!(
            summary(&events),
            [
                (EventType::Added, "c".into(), 4),
                (EventType::Deleted, "b".into(), 6),
                (EventType::Modified, "a".into(), 7)
            ],
            "in the order of each object's last write; d came and went"
        );
        let label = |e: &Event<'_, String, Namespace>| e.object.metadata.labels.as_ref().unwrap()["l"].clone();
        assert_eq!(label(&events[1]), "last", "Deleted carries the last state");
        assert_eq!(label(&events[2]), "3");
        assert!(events.windows(2).all(|p| p[0].resource_version < p[1].resource_version));
        assert!(w.events_since(w.resource_version()).unwrap().is_empty());
    }

    #[test]
    fn a_watcher_behind_the_log_must_relist() {
        let mut w: Watched<String, Namespace> = Watched::with_capacity(Versions::default(), 3);
        for i in 0..3 {
            w.insert(format!("n{i}"), ns("n", "1"));
        }
        assert!(w.events_since(0).is_ok(), "the log still reaches back to the start");
        w.get_mut("n0");
        assert_eq!(w.events_since(0), Err(Gone { requested: 0, compacted: 1 }));
        // Relist: the map as it is, current to the kind's version; watching from there works again.
        let (listed, at) = (w.len(), w.resource_version());
        assert_eq!((listed, at), (3, 4));
        w.retain(|k, _| k != "n1");
        assert_eq!(summary(&w.events_since(at).unwrap()), [(EventType::Deleted, "n1".into(), 5)]);
        assert!(w.events_since(1).is_err(), "the deletion pushed the event at 2 out");
        assert!(w.events_since(2).is_ok(), "but every event after 2 is still there");
    }

    #[test]
    fn bulk_writes_and_stamps() {
        let mut w: Watched<String, Namespace> = Watched::default();
        let s0 = w.stamp();
        let _ = w.get("a");
        let _ = w.iter().count();
        assert_eq!(w.stamp(), s0, "reads keep the stamp");
        w.insert("a".into(), ns("a", "1"));
        w.insert("b".into(), ns("b", "1"));
        let (s1, at) = (w.stamp(), w.resource_version());
        assert_ne!(s1, s0);
        w.values_mut().for_each(|n| n.metadata.labels = None);
        assert_ne!(w.stamp(), s1);
        assert_eq!(
            summary(&w.events_since(at).unwrap()),
            [(EventType::Modified, "a".into(), 3), (EventType::Modified, "b".into(), 4)]
        );
    }
}
