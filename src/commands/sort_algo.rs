//! The two sorting algorithms whose tie orders SORT and the GEO searches inherit from
//! Redis: glibc's `qsort` (a top-down merge sort, so stable, for the sizes Redis sorts)
//! and Redis's `pqsort` (Bentley–McIlroy quicksort that only recurses into partitions
//! overlapping the wanted index range). Elements that compare equal come out in the
//! same places as in Redis only if the same algorithm moves them, so these follow the
//! algorithms step by step; the comparators return C's -1 / 0 / 1.

use std::cmp::Ordering;

/// glibc's `msort_with_tmp`: split in halves (the first gets n/2), sort each, merge
/// taking from the left half while `cmp(left, right) <= 0`.
pub fn merge_sort<T: Clone>(v: &mut [T], cmp: &mut impl FnMut(&T, &T) -> Ordering) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    merge_sort(&mut v[..n1], cmp);
    merge_sort(&mut v[n1..], cmp);
    let left: Vec<T> = v[..n1].to_vec();
    let (mut i, mut j, mut k) = (0, n1, 0);
    while i < left.len() && j < n {
        if cmp(&left[i], &v[j]) != Ordering::Greater {
            v[k] = left[i].clone();
            i += 1;
        } else {
            v[k] = v[j].clone();
            j += 1;
        }
        k += 1;
    }
    while i < left.len() {
        v[k] = left[i].clone();
        i += 1;
        k += 1;
    }
}

fn med3<T>(
    v: &[T],
    a: usize,
    b: usize,
    c: usize,
    cmp: &mut impl FnMut(&T, &T) -> Ordering,
) -> usize {
    if cmp(&v[a], &v[b]) == Ordering::Less {
        if cmp(&v[b], &v[c]) == Ordering::Less {
            b
        } else if cmp(&v[a], &v[c]) == Ordering::Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Ordering::Greater {
        b
    } else if cmp(&v[a], &v[c]) == Ordering::Less {
        a
    } else {
        c
    }
}

/// Swaps the `n` elements from `a` with the `n` from `b`, pairwise in order.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Redis's `pqsort(v, n, cmp, lo, hi)`: afterwards `v[lo..=hi]` holds the elements a
/// full sort would put there, in order. `hi` may be `lo - 1` (an empty range, as SORT
/// passes for LIMIT x 0), and either may lie outside `v` (nothing is then sorted).
pub fn partial_qsort<T>(v: &mut [T], lo: i64, hi: i64, cmp: &mut impl FnMut(&T, &T) -> Ordering) {
    pq(v, 0, v.len(), lo, hi, cmp);
}

/// Whether the wanted range [lo, hi] overlaps the partition [s, s + n).
fn overlaps(s: usize, n: usize, lo: i64, hi: i64) -> bool {
    let (s, e) = (s as i64, (s + n) as i64);
    !((lo < s && hi < s) || (lo >= e && hi >= e))
}

fn pq<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    lo: i64,
    hi: i64,
    cmp: &mut impl FnMut(&T, &T) -> Ordering,
) {
    loop {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        // pc and pd may step below `a + 1` (to `a`), never below `a`.
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r == Ordering::Greater {
                    break;
                }
                if r == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(&v[pc], &v[a]);
                if r == Ordering::Less {
                    break;
                }
                if r == Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let left = pb - pa;
        if left > 1 && overlaps(a, left, lo, hi) {
            pq(v, a, left, lo, hi, cmp);
        }
        let right = pd - pc;
        if right > 1 {
            a = pn - right;
            n = right;
            if overlaps(a, n, lo, hi) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sorts_sort_and_partial_sort_places_the_range() {
        let mut rng = crate::util::Rng::new(7);
        for n in [0usize, 1, 2, 6, 7, 8, 40, 41, 100, 500] {
            let orig: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 50) as u32).collect();
            let mut sorted = orig.clone();
            sorted.sort();
            let mut m = orig.clone();
            merge_sort(&mut m, &mut |a, b| a.cmp(b));
            assert_eq!(m, sorted);
            if n == 0 {
                continue;
            }
            for (lo, hi) in [(0, n - 1), (0, 0), (n / 2, n / 2), (n / 3, n - 1)] {
                let mut p = orig.clone();
                partial_qsort(&mut p, lo as i64, hi as i64, &mut |a, b| a.cmp(b));
                assert_eq!(p[lo..=hi], sorted[lo..=hi], "n {n} range {lo}..={hi}");
            }
        }
    }

    #[test]
    fn merge_sort_is_stable() {
        let mut v: Vec<(u8, usize)> = (0..64).map(|i| ((i % 3) as u8, i)).collect();
        merge_sort(&mut v, &mut |a, b| a.0.cmp(&b.0));
        for w in v.windows(2) {
            assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1));
        }
    }
}
