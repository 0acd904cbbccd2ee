//! A fixed-size bitset over a template's instance types: the scheduler filters types with word-wide ANDs instead of
//! re-checking every type for every pod.

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    pub fn empty(n: usize) -> Self {
        Bitset { words: vec![0; n.div_ceil(64)] }
    }

    pub fn full(n: usize) -> Self {
        let mut b = Bitset::empty(n);
        for i in 0..n {
            b.set(i);
        }
        b
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    pub fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn clear(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    pub fn get(&self, i: usize) -> bool {
        self.words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    pub fn and_with(&mut self, other: &Bitset) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    pub fn or_with(&mut self, other: &Bitset) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    pub fn and(&self, other: &Bitset) -> Bitset {
        let mut r = self.clone();
        r.and_with(other);
        r
    }

    /// `self & a & b` is non-empty, without allocating.
    pub fn intersects3(&self, a: &Bitset, b: &Bitset) -> bool {
        self.words.iter().zip(&a.words).zip(&b.words).any(|((x, y), z)| x & y & z != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let t = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + t)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_ops() {
        let mut a = Bitset::empty(130);
        a.set(0);
        a.set(64);
        a.set(129);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![0, 64, 129]);
        let mut b = Bitset::full(130);
        b.clear(64);
        assert_eq!(a.and(&b).iter().collect::<Vec<_>>(), vec![0, 129]);
        assert_eq!(b.count(), 129);
        assert!(!a.is_empty());
        assert!(Bitset::empty(10).is_empty());
        assert!(a.intersects3(&b, &Bitset::full(130)));
    }
}
