//! Key and value generators: uniform, Zipf(α) and sequential key choice; fixed or ranged
//! value sizes. Deterministic per seed so runs can be repeated.

/// xorshift64*: fast, good enough for choosing keys, and seedable.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 step so that small seeds (0, 1, 2 per thread) still differ a lot.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Zipf over ranks 1..=n with exponent `s` > 0, by rejection-inversion (Hörmann and
/// Derflinger 1996): O(1) memory and time, so a key space of a billion keys costs nothing.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    sv: f64,
}

fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        let mut z = Zipf {
            n: n.max(1) as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            sv: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(z.n + 0.5);
        z.sv = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }
    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.s) * lx) * lx
    }
    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }
    /// A rank in 1..=n (1 the most frequent).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.sv || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

#[derive(Clone, Debug)]
pub enum KeyDist {
    Uniform,
    Zipf(f64),
    Sequential,
}

impl std::str::FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<KeyDist, String> {
        let l = s.to_ascii_lowercase();
        if l == "uniform" {
            Ok(KeyDist::Uniform)
        } else if l == "sequential" || l == "seq" {
            Ok(KeyDist::Sequential)
        } else if l == "zipf" {
            Ok(KeyDist::Zipf(0.99))
        } else if let Some(a) = l.strip_prefix("zipf:") {
            let a: f64 = a.parse().map_err(|_| format!("bad Zipf exponent {a:?}"))?;
            if !(a > 0.0 && a < 100.0) {
                return Err(format!("Zipf exponent must be in (0, 100), got {a}"));
            }
            Ok(KeyDist::Zipf(a))
        } else {
            Err(format!(
                "unknown distribution {s:?} (uniform, zipf[:ALPHA], sequential)"
            ))
        }
    }
}

/// Chooses key indexes in [0, n) for one worker.
pub struct KeyGen {
    n: u64,
    dist: KeyDist,
    zipf: Option<Zipf>,
    next: u64,
}

impl KeyGen {
    /// `start` spreads sequential walkers of different workers over the key space.
    pub fn new(n: u64, dist: KeyDist, start: u64) -> KeyGen {
        let n = n.max(1);
        let zipf = match dist {
            KeyDist::Zipf(a) => Some(Zipf::new(n, a)),
            _ => None,
        };
        KeyGen {
            n,
            dist,
            zipf,
            next: start % n,
        }
    }
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self.dist {
            KeyDist::Uniform => rng.below(self.n),
            KeyDist::Sequential => {
                let k = self.next;
                self.next = (self.next + 1) % self.n;
                k
            }
            KeyDist::Zipf(_) => self.zipf.as_ref().map_or(0, |z| z.sample(rng) - 1),
        }
    }
}

/// Value size: fixed or uniform in an inclusive range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueSize {
    pub min: usize,
    pub max: usize,
}

impl std::str::FromStr for ValueSize {
    type Err = String;
    fn from_str(s: &str) -> Result<ValueSize, String> {
        let p = |x: &str| parse_size(x).ok_or_else(|| format!("bad size {x:?}"));
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (p(a)?, p(b)?),
            None => (p(s)?, p(s)?),
        };
        if min > max || max > 512 * 1024 * 1024 {
            return Err(format!("bad value size range {s:?} (at most 512MB)"));
        }
        Ok(ValueSize { min, max })
    }
}

impl ValueSize {
    pub fn pick(&self, rng: &mut Rng) -> usize {
        self.min + rng.below((self.max - self.min) as u64 + 1) as usize
    }
}

/// "100", "1k", "10MB", "4KiB" -> bytes (powers of 1024 for k/m/g, as redis-benchmark's -d
/// takes bytes and the seeds speak of 1 KB / 10 MB objects).
pub fn parse_size(s: &str) -> Option<usize> {
    let l = s.trim().to_ascii_lowercase();
    let digits = l.find(|c: char| !c.is_ascii_digit()).unwrap_or(l.len());
    let n: usize = l[..digits].parse().ok()?;
    let mult = match l[digits..].trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1024,
        "m" => 1024 * 1024,
        "g" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Key name for index i: fixed width so every key has the same length.
pub fn key_name(prefix: &str, i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(format!("{i:012}").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(1000, 0.99);
        let mut r = Rng::new(1);
        let mut counts = vec![0u32; 1001];
        for _ in 0..200_000 {
            let k = z.sample(&mut r);
            assert!((1..=1000).contains(&k));
            counts[k as usize] += 1;
        }
        // P(1)/P(2) = 2^0.99 ≈ 1.99; rank 1 near 1/H(1000,0.99) ≈ 13.4 %.
        let ratio = counts[1] as f64 / counts[2] as f64;
        assert!((1.8..2.2).contains(&ratio), "ratio {ratio}");
        let p1 = counts[1] as f64 / 200_000.0;
        assert!((0.12..0.15).contains(&p1), "p1 {p1}");
        // alpha = 1 exactly goes through the limit branches.
        let z1 = Zipf::new(10, 1.0);
        for _ in 0..1000 {
            assert!((1..=10).contains(&z1.sample(&mut r)));
        }
    }

    #[test]
    fn uniform_and_sequential() {
        let mut r = Rng::new(7);
        let mut g = KeyGen::new(3, KeyDist::Sequential, 1);
        assert_eq!((g.next(&mut r), g.next(&mut r), g.next(&mut r)), (1, 2, 0));
        let mut u = KeyGen::new(10, KeyDist::Uniform, 0);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[u.next(&mut r) as usize] = true;
        }
        assert!(seen.iter().all(|&b| b));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("10MB"), Some(10 << 20));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("x"), None);
        let v: ValueSize = "10-20".parse().unwrap();
        let mut r = Rng::new(3);
        for _ in 0..100 {
            assert!((10..=20).contains(&v.pick(&mut r)));
        }
        assert!("20-10".parse::<ValueSize>().is_err());
        assert!("zipf:0".parse::<KeyDist>().is_err());
        assert!(matches!("zipf:1.2".parse::<KeyDist>(), Ok(KeyDist::Zipf(a)) if a == 1.2));
    }
}
