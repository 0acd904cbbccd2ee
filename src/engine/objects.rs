//! [`Objects`]: the objects of one kind as an engine pass borrows them, whichever way their owner keeps them.
//!
//! An owned [`crate::engine::provisioning::Snapshot`] holds plain vectors; a store that keeps each object once and
//! shares it (the simulated cluster, where a pod costs kilobytes and there may be tens of thousands) holds
//! `Arc`s. Passes only read, so both borrow as the same view, and neither has to copy to be read.

use std::ops::Index;
use std::slice;
use std::sync::Arc;

/// A borrowed, ordered sequence of objects: a plain slice or a slice of shared objects.
#[derive(Debug)]
pub enum Objects<'a, T> {
    Plain(&'a [T]),
    Shared(&'a [Arc<T>]),
}

// Derived impls would demand `T: Clone`; a borrow is copyable whatever it points at.
impl<T> Clone for Objects<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Objects<'_, T> {}

impl<T> Default for Objects<'_, T> {
    fn default() -> Self {
        Objects::Plain(&[])
    }
}

impl<'a, T> Objects<'a, T> {
    pub fn len(&self) -> usize {
        match self {
            Objects::Plain(s) => s.len(),
            Objects::Shared(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Option<&'a T> {
        match *self {
            Objects::Plain(s) => s.get(i),
            Objects::Shared(s) => s.get(i).map(|a| &**a),
        }
    }

    pub fn iter(&self) -> Iter<'a, T> {
        match *self {
            Objects::Plain(s) => Iter::Plain(s.iter()),
            Objects::Shared(s) => Iter::Shared(s.iter()),
        }
    }
}

impl<T> Index<usize> for Objects<'_, T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        match self {
            Objects::Plain(s) => &s[i],
            Objects::Shared(s) => &s[i],
        }
    }
}

impl<'a, T> From<&'a [T]> for Objects<'a, T> {
    fn from(s: &'a [T]) -> Self {
        Objects::Plain(s)
    }
}

impl<'a, T> From<&'a Vec<T>> for Objects<'a, T> {
    fn from(s: &'a Vec<T>) -> Self {
        Objects::Plain(s)
    }
}

impl<'a, T> From<&'a [Arc<T>]> for Objects<'a, T> {
    fn from(s: &'a [Arc<T>]) -> Self {
        Objects::Shared(s)
    }
}

impl<'a, T> From<&'a Vec<Arc<T>>> for Objects<'a, T> {
    fn from(s: &'a Vec<Arc<T>>) -> Self {
        Objects::Shared(s)
    }
}

impl<'a, T> IntoIterator for Objects<'a, T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<'a, T> IntoIterator for &Objects<'a, T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// The iterator of [`Objects`]: references to the objects, in order.
#[derive(Debug)]
pub enum Iter<'a, T> {
    Plain(slice::Iter<'a, T>),
    Shared(slice::Iter<'a, Arc<T>>),
}

impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Iter::Plain(i) => Iter::Plain(i.clone()),
            Iter::Shared(i) => Iter::Shared(i.clone()),
        }
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        match self {
            Iter::Plain(i) => i.next(),
            Iter::Shared(i) => i.next().map(|a| &**a),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Plain(i) => i.size_hint(),
            Iter::Shared(i) => i.size_hint(),
        }
    }
}

impl<T> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Plain(i) => i.next_back(),
            Iter::Shared(i) => i.next_back().map(|a| &**a),
        }
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_shared_read_the_same() {
        let plain = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let shared: Vec<Arc<String>> = plain.iter().cloned().map(Arc::new).collect();
        let (p, s) = (Objects::from(&plain), Objects::from(&shared));
        assert_eq!(p.len(), s.len());
        assert!(p.iter().eq(s.iter()));
        assert!(p.iter().rev().eq(s.iter().rev()));
        assert_eq!((&p[1], s.get(2), s.get(3)), (&"b".to_string(), Some(&"c".to_string()), None));
        assert_eq!(s.iter().len(), 3);
        assert!(Objects::<String>::default().is_empty());
    }
}
