//! The client side of a watch: one kind's objects as a watcher has seen them. The live watch cache
//! (`kube::cache`, fed by kube-runtime's watcher) and the simulated cluster's mirror (`sim::cluster`, fed by its
//! store's event log) both keep their kinds in a [`Store`], so what the engine reads is kept the same way on both
//! sides.
//!
//! - Objects are kept in key order as vectors, so a pass reads a kind as a slice, sharing the objects (`Arc`s) rather
//!   than copying them, as kube-runtime's reflector store does.
//! - Each object has a version that changes whenever the object does and is kept while it doesn't, so what the
//!   engine derives from an object (a pod's scheduling digest) can be kept with it.
//! - Writes arrive one at a time and are merged in batches: a write waits in `pending` until [`Store::settle`]
//!   merges every waiting write in one pass, in place when only existing objects changed. Inserting into the middle
//!   of 100,000 sorted pods per watch event would move the whole vector each time.
//! - A relist gathers what the list brings aside while the old picture stands, then replaces the kind at once,
//!   keeping the object and version of every entry that is the same.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One kind's objects by key. Reads of the settled state ([`Store::keys`], [`Store::values`], ...) see writes once
/// [`Store::settle`] has merged them; [`Store::get`] and [`Store::len`] see them at once.
#[derive(Debug)]
pub struct Store<K, V> {
    keys: Vec<K>,
    values: Vec<Arc<V>>,
    /// Per value: a version that changes whenever the value does.
    versions: Vec<u64>,
    next_version: u64,
    /// Writes not merged yet, by key: the new object, or `None` for a deletion.
    pending: BTreeMap<K, Option<Arc<V>>>,
    /// Objects held, pending writes counted.
    len: usize,
    /// What the list in progress has brought, in arrival order.
    relist: Option<Vec<(K, Arc<V>)>>,
    /// A list has completed.
    listed: bool,
    /// A plain copy of `values` for kinds the engine reads as plain slices ([`Store::settle_plain`]), and whether
    /// it is behind them.
    plain: Vec<V>,
    plain_stale: bool,
}

impl<K, V> Default for Store<K, V> {
    fn default() -> Self {
        Store {
            keys: Vec::new(),
            values: Vec::new(),
            versions: Vec::new(),
            next_version: 0,
            pending: BTreeMap::new(),
            len: 0,
            relist: None,
            listed: false,
            plain: Vec::new(),
            plain_stale: false,
        }
    }
}

impl<K: Ord + Clone, V> Store<K, V> {
    fn bump(&mut self) -> u64 {
        self.next_version += 1;
        self.next_version
    }

    fn position<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.keys.binary_search_by(|k| k.borrow().cmp(key))
    }

    /// The object under `key`, writes not yet merged included.
    pub fn get<Q>(&self, key: &Q) -> Option<&Arc<V>>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self.pending.get(key) {
            Some(written) => written.as_ref(),
            None => self.position(key).ok().map(|i| &self.values[i]),
        }
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.get(key).is_some()
    }

    /// Objects held, writes not yet merged included.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps `value` under `key` (added or modified); returns what was there.
    pub fn insert(&mut self, key: K, value: Arc<V>) -> Option<Arc<V>> {
        let old = self.get(&key).cloned();
        if old.is_none() {
            self.len += 1;
        }
        self.pending.insert(key, Some(value));
        old
    }

    /// Forgets what is under `key`; returns it.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Ord + ToOwned<Owned = K> + ?Sized,
    {
        let old = self.get(key).cloned()?;
        self.len -= 1;
        self.pending.insert(key.to_owned(), None);
        Some(old)
    }

    /// Merges the writes waiting since the last call into the key-ordered vectors.
    pub fn settle(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.plain_stale = true;
        let pending = std::mem::take(&mut self.pending);
        // Only existing objects changed: replace them in place, no new vectors.
        let in_place: Option<Vec<usize>> =
            pending.iter().map(|(k, v)| v.as_ref().and_then(|_| self.position(k).ok())).collect();
        if let Some(at) = in_place {
            for (i, v) in at.into_iter().zip(pending.into_values().flatten()) {
                self.values[i] = v;
                self.versions[i] = self.bump();
            }
            return;
        }
        let n = self.keys.len() + pending.len();
        let mut old = self.take_entries();
        let (mut keys, mut values, mut versions) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for (key, written) in pending {
            while let Some(((k, v), version)) = old.next_if(|((k, _), _)| *k < key) {
                keys.push(k);
                values.push(v);
                versions.push(version);
            }
            // The old entry under a written key is replaced, or dropped for a deletion.
            old.next_if(|((k, _), _)| *k == key);
            if let Some(v) = written {
                keys.push(key);
                values.push(v);
                versions.push(self.bump());
            }
        }
        for ((k, v), version) in old {
            keys.push(k);
            values.push(v);
            versions.push(version);
        }
        (self.keys, self.values, self.versions) = (keys, values, versions);
    }

    /// [`Store::settle`], then the store to read.
    pub fn settled(&mut self) -> &Self {
        self.settle();
        self
    }

    #[allow(clippy::type_complexity)]
    fn take_entries(
        &mut self,
    ) -> std::iter::Peekable<
        std::iter::Zip<std::iter::Zip<std::vec::IntoIter<K>, std::vec::IntoIter<Arc<V>>>, std::vec::IntoIter<u64>>,
    > {
        let keys = std::mem::take(&mut self.keys).into_iter();
        let values = std::mem::take(&mut self.values).into_iter();
        keys.zip(values).zip(std::mem::take(&mut self.versions)).peekable()
    }

    /// Replaces every object with those of `listed`, which must come in key order with no key twice: what a
    /// completed list says is there. An entry whose object is the same as before (the same `Arc`, or `same` says
    /// so) keeps the old object and its version. Writes not yet merged are superseded. Returns whether anything
    /// changed.
    pub fn replace_sorted<Q: Borrow<K>, A: Borrow<Arc<V>>>(
        &mut self,
        listed: impl Iterator<Item = (Q, A)>,
        into_key: impl Fn(Q) -> K,
        same: impl Fn(&V, &V) -> bool,
    ) -> bool {
        self.pending.clear();
        self.listed = true;
        let n = listed.size_hint().0;
        let mut old = self.take_entries();
        let (mut keys, mut values, mut versions) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let mut changed = false;
        for (key, v) in listed {
            let v = v.borrow();
            // Both sides are in key order: entries before `key` in the old vectors are gone.
            while old.next_if(|((k, _), _)| k < key.borrow()).is_some() {
                changed = true;
            }
            match old.next_if(|((k, ov), _)| k == key.borrow() && (Arc::ptr_eq(ov, v) || same(&**ov, &**v))) {
                Some(((k, ov), version)) => {
                    keys.push(k);
                    values.push(ov);
                    versions.push(version);
                }
                None => {
                    changed = true;
                    keys.push(into_key(key));
                    values.push(v.clone());
                    versions.push(self.bump());
                }
            }
        }
        changed |= old.next().is_some();
        drop(old);
        (self.keys, self.values, self.versions) = (keys, values, versions);
        self.len = self.keys.len();
        if changed {
            self.plain_stale = true;
        }
        changed
    }

    /// Starts a relist: the objects it brings are gathered by [`Store::relisted`] while the old ones stand.
    pub fn begin_relist(&mut self) {
        self.relist = Some(Vec::new());
    }

    /// One object of the relist in progress (one is started if none is).
    pub fn relisted(&mut self, key: K, value: Arc<V>) {
        self.relist.get_or_insert_default().push((key, value));
    }

    /// Objects the relist in progress has brought, if one is in progress.
    pub fn relisting(&self) -> Option<usize> {
        self.relist.as_ref().map(Vec::len)
    }

    /// Completes the relist in progress: the kind is what it brought (of a key brought twice, the last).
    pub fn finish_relist(&mut self, same: impl Fn(&V, &V) -> bool) -> bool {
        let mut listed = self.relist.take().unwrap_or_default();
        // Lists come in key order from an API server; sort only if this one didn't. The sort is stable, so the
        // last of equal keys stays last.
        if !listed.is_sorted_by(|a, b| a.0 <= b.0) {
            listed.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let mut listed = listed.into_iter().peekable();
        let deduplicated = std::iter::from_fn(|| {
            let mut next = listed.next()?;
            while let Some(later) = listed.next_if(|(k, _)| *k == next.0) {
                next = later;
            }
            Some(next)
        });
        self.replace_sorted(deduplicated, |k| k, same)
    }

    /// Whether a list has completed.
    pub fn listed(&self) -> bool {
        self.listed
    }

    /// The keys, in order, as of the last [`Store::settle`].
    pub fn keys(&self) -> &[K] {
        debug_assert!(self.pending.is_empty(), "a read of unsettled writes");
        &self.keys
    }

    /// The objects, in key order, as of the last [`Store::settle`].
    pub fn values(&self) -> &[Arc<V>] {
        debug_assert!(self.pending.is_empty(), "a read of unsettled writes");
        &self.values
    }

    /// The objects' versions, parallel to [`Store::values`].
    pub fn versions(&self) -> &[u64] {
        debug_assert!(self.pending.is_empty(), "a read of unsettled writes");
        &self.versions
    }

    /// Keys and objects, in key order, as of the last [`Store::settle`].
    pub fn iter(&self) -> impl Iterator<Item = (&K, &Arc<V>)> {
        self.keys().iter().zip(self.values())
    }
}

impl<K: Ord + Clone, V: Clone> Store<K, V> {
    /// [`Store::settle`], and the plain copy ([`Store::plain`]) made again if anything changed.
    pub fn settle_plain(&mut self) {
        self.settle();
        if self.plain_stale {
            self.plain = self.values.iter().map(|v| V::clone(v)).collect();
            self.plain_stale = false;
        }
    }

    /// A plain copy of the objects, as of the last [`Store::settle_plain`]: for kinds with few objects that the
    /// engine reads as plain slices.
    pub fn plain(&self) -> &[V] {
        debug_assert!(!self.plain_stale, "a read of a stale plain copy");
        &self.plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(entries: &[(&str, i32)]) -> Store<String, i32> {
        let mut s = Store::default();
        for (k, v) in entries {
            s.insert(k.to_string(), Arc::new(*v));
        }
        s.settle();
        s
    }

    fn contents(s: &Store<String, i32>) -> Vec<(String, i32)> {
        s.iter().map(|(k, v)| (k.clone(), **v)).collect()
    }

    #[test]
    fn writes_are_seen_at_once_by_lookups_and_after_settling_by_reads() {
        let mut s = store(&[("b", 2), ("d", 4)]);
        assert_eq!(contents(&s), [("b".into(), 2), ("d".into(), 4)]);
        s.insert("a".into(), Arc::new(1));
        s.insert("d".into(), Arc::new(40));
        assert_eq!(s.remove("b").as_deref(), Some(&2));
        assert_eq!(s.remove("zz"), None, "nothing there to remove");
        assert_eq!(s.get("a").map(|v| **v), Some(1));
        assert_eq!(s.get("d").map(|v| **v), Some(40));
        assert!(!s.contains_key("b"));
        assert_eq!(s.len(), 2);
        s.settle();
        assert_eq!(contents(&s), [("a".into(), 1), ("d".into(), 40)]);
        assert_eq!(s.len(), 2);
        // Added and removed before a read: never seen.
        s.insert("c".into(), Arc::new(3));
        s.remove("c");
        s.settle();
        assert_eq!(contents(&s), [("a".into(), 1), ("d".into(), 40)]);
    }

    #[test]
    fn a_version_moves_with_its_object_only() {
        let mut s = store(&[("a", 1), ("b", 2), ("c", 3)]);
        let before = s.versions().to_vec();
        assert_eq!(before.len(), 3);
        assert!(before.windows(2).all(|w| w[0] != w[1]), "distinct versions: {before:?}");
        // In place: only b's version moves.
        s.insert("b".into(), Arc::new(20));
        s.settle();
        assert_eq!(s.versions()[0], before[0]);
        assert_ne!(s.versions()[1], before[1]);
        assert_eq!(s.versions()[2], before[2]);
        // A merge (an addition): the others keep theirs.
        let before = s.versions().to_vec();
        s.insert("aa".into(), Arc::new(9));
        s.settle();
        assert_eq!(s.keys(), ["a", "aa", "b", "c"]);
        assert_eq!([s.versions()[0], s.versions()[2], s.versions()[3]], [before[0], before[1], before[2]]);
        assert!(!before.contains(&s.versions()[1]));
    }

    #[test]
    fn a_relist_replaces_the_kind_at_once_and_keeps_what_is_the_same() {
        let mut s = store(&[("a", 1), ("b", 2), ("c", 3)]);
        let before = s.versions().to_vec();
        s.begin_relist();
        // Out of order, and one key twice (the last counts).
        s.relisted("c".into(), Arc::new(30));
        s.relisted("a".into(), Arc::new(1));
        s.relisted("d".into(), Arc::new(0));
        s.relisted("d".into(), Arc::new(4));
        assert_eq!(s.relisting(), Some(4));
        assert_eq!(contents(&s), [("a".into(), 1), ("b".into(), 2), ("c".into(), 3)], "the old picture stands");
        assert!(!s.listed());
        assert!(s.finish_relist(|x, y| x == y));
        assert!(s.listed());
        assert_eq!(s.relisting(), None);
        assert_eq!(contents(&s), [("a".into(), 1), ("c".into(), 30), ("d".into(), 4)]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.versions()[0], before[0], "a is the same: kept");
        assert!(!before.contains(&s.versions()[1]) && !before.contains(&s.versions()[2]));
        // The same list again changes nothing.
        let (keys, versions) = (s.keys().to_vec(), s.versions().to_vec());
        assert!(!s.replace_sorted(keys.iter().zip(s.values().to_vec()), Clone::clone, |x, y| x == y));
        assert_eq!(s.versions(), versions);
        // A list that only drops an entry changed the kind.
        assert!(s.replace_sorted([("a".to_string(), Arc::new(1))].into_iter(), |k| k, |x, y| x == y));
        assert_eq!(contents(&s), [("a".into(), 1)]);
    }

    #[test]
    fn the_plain_copy_follows_the_objects() {
        let mut s = store(&[("a", 1)]);
        s.settle_plain();
        assert_eq!(s.plain(), [1]);
        s.insert("b".into(), Arc::new(2));
        s.settle_plain();
        assert_eq!(s.plain(), [1, 2]);
        s.begin_relist();
        s.relisted("b".into(), Arc::new(2));
        s.finish_relist(|x, y| x == y);
        s.settle_plain();
        assert_eq!(s.plain(), [2]);
    }
}
