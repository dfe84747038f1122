//! Latency recording: HdrHistograms in microseconds, their merging and the summaries that go
//! into the results JSON.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub type Hist = Histogram<u64>;

/// Highest latency recorded: 1 hour in µs. Longer values saturate at the top.
pub const MAX_US: u64 = 3_600_000_000;

/// Interval histograms: 2 significant digits (1 % error) keeps one at ~10 KB, so hundreds of
/// intervals × commands stay small. Whole-run histograms use 3 digits.
pub fn interval_hist() -> Hist {
    Histogram::new_with_bounds(1, MAX_US, 2).expect("static histogram bounds")
}
pub fn total_hist() -> Hist {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("static histogram bounds")
}

pub fn record(h: &mut Hist, us: u64) {
    h.saturating_record(us.clamp(1, MAX_US));
}

/// Adds `src` into `dst`; both have the same bounds so this cannot fail except on a
/// precision mismatch, where we fall back to re-recording by value.
pub fn merge(dst: &mut Hist, src: &Hist) {
    if dst.add(src).is_err() {
        for v in src.iter_recorded() {
            dst.saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
}

/// Percentiles of one command (or of everything) over some time span. Latencies in µs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub errors: u64,
    /// Completed requests per second over the span.
    pub rate: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
    pub mean: f64,
}

pub fn summarize(h: &Hist, errors: u64, secs: f64) -> Summary {
    let count = h.len();
    if count == 0 {
        return Summary {
            errors,
            ..Default::default()
        };
    }
    Summary {
        count,
        errors,
        rate: if secs > 0.0 { count as f64 / secs } else { 0.0 },
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        p9999: h.value_at_quantile(0.9999),
        max: h.max(),
        mean: h.mean(),
    }
}

/// "295µs", "26.2ms", "1.20s".
pub fn fmt_us(us: u64) -> String {
    if us < 1000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        let ms = us as f64 / 1000.0;
        if ms < 10.0 {
            format!("{ms:.2}ms")
        } else {
            format!("{ms:.1}ms")
        }
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

/// Longest run of empty buckets in a per-millisecond completion count, restricted to
/// [from, to) (ms). Returns (length ms, start ms).
pub fn longest_gap(per_ms: &[u32], from: usize, to: usize) -> (u64, u64) {
    let to = to.min(per_ms.len());
    let (mut best, mut best_at, mut run, mut run_at) = (0u64, 0u64, 0u64, 0u64);
    for (i, &c) in per_ms.iter().enumerate().take(to).skip(from) {
        if c == 0 {
            if run == 0 {
                run_at = i as u64;
            }
            run += 1;
            if run > best {
                best = run;
                best_at = run_at;
            }
        } else {
            run = 0;
        }
    }
    (best, best_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_data() {
        let mut h = total_hist();
        for v in 1..=10_000u64 {
            record(&mut h, v);
        }
        let s = summarize(&h, 0, 2.0);
        assert_eq!(s.count, 10_000);
        assert_eq!(s.rate, 5000.0);
        // 3 significant digits: within 0.1 %.
        let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.001 + 1.0;
        assert!(close(s.p50, 5000), "{}", s.p50);
        assert!(close(s.p99, 9900), "{}", s.p99);
        assert!(close(s.p999, 9990), "{}", s.p999);
        assert!(close(s.max, 10_000), "{}", s.max);
        assert!((s.mean - 5000.5).abs() < 10.0);
    }

    #[test]
    fn merging_equals_recording_together() {
        let (mut a, mut b, mut all) = (interval_hist(), interval_hist(), interval_hist());
        for v in 0..1000u64 {
            let x = 10 + v * 37 % 5000;
            if v % 3 == 0 {
                record(&mut a, x)
            } else {
                record(&mut b, x)
            }
            record(&mut all, x);
        }
        let mut m = interval_hist();
        merge(&mut m, &a);
        merge(&mut m, &b);
        assert_eq!(m.len(), 1000);
        for q in [0.5, 0.9, 0.99, 1.0] {
            assert_eq!(m.value_at_quantile(q), all.value_at_quantile(q));
        }
        // Merging a finer histogram into a coarser one still keeps every count.
        let mut t = total_hist();
        record(&mut t, 123_456);
        merge(&mut m, &t);
        assert_eq!(m.len(), 1001);
        assert!(m.max() >= 123_000);
    }

    #[test]
    fn out_of_range_saturates() {
        let mut h = interval_hist();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= MAX_US);
    }

    #[test]
    fn gaps() {
        let v = [1, 0, 0, 1, 0, 0, 0, 1, 0];
        assert_eq!(longest_gap(&v, 0, v.len()), (3, 4));
        assert_eq!(longest_gap(&v, 0, 4), (2, 1));
        assert_eq!(longest_gap(&[], 0, 10), (0, 0));
        assert_eq!(fmt_us(295), "295µs");
        assert_eq!(fmt_us(26_200), "26.2ms");
        assert_eq!(fmt_us(2_800), "2.80ms");
    }
}
