//! Values written by the load: derived from (key, seed), so every key holds its own bytes
//! and a read can be checked against what the writer must have sent, with a stated
//! compressibility (`--value-entropy`). One shared buffer for every key (`repeat`) makes
//! any compressor that looks across values (a snapshot image's LZ4 blocks) look far better
//! than it does on real payloads, so it is never the default.

use crate::keys::Rng;
use std::str::FromStr;

/// How compressible the generated values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ValueEntropy {
    /// Uniform random bytes per key: incompressible, as compressed JSON, protobufs,
    /// images or tokens are.
    #[default]
    Random,
    /// Words from a small vocabulary, chosen per key: distinct per key, compresses about
    /// as English text does.
    Text,
    /// Every key's value is a prefix of one buffer of random letters shared by all keys
    /// (what cairn-bench wrote before values were per key): compresses across values.
    Repeat,
}

impl ValueEntropy {
    pub fn name(self) -> &'static str {
        match self {
            ValueEntropy::Random => "random",
            ValueEntropy::Text => "text",
            ValueEntropy::Repeat => "repeat",
        }
    }

    /// One line for a scenario's output: which values the run wrote.
    pub fn describe(self) -> &'static str {
        match self {
            ValueEntropy::Random => "random: distinct per key, incompressible",
            ValueEntropy::Text => "text: distinct per key, words from a small vocabulary",
            ValueEntropy::Repeat => "repeat: one shared buffer of letters, compresses across keys",
        }
    }
}

impl FromStr for ValueEntropy {
    type Err = String;
    fn from_str(s: &str) -> Result<ValueEntropy, String> {
        match s.to_ascii_lowercase().as_str() {
            "random" => Ok(ValueEntropy::Random),
            "text" => Ok(ValueEntropy::Text),
            "repeat" => Ok(ValueEntropy::Repeat),
            _ => Err(format!(
                "unknown value entropy '{s}' (random, text or repeat)"
            )),
        }
    }
}

/// Vocabulary of `text` values: common words of varied lengths, so the bytes look like
/// prose to a compressor (repeats at word granularity, not across whole values).
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "are", "with", "as", "his",
    "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but", "what",
    "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your",
    "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way",
    "about", "many", "then", "them", "write", "would", "like", "so", "these", "her", "long",
    "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go", "come",
    "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water", "than",
    "call", "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work",
    "part", "take", "get", "place", "made", "live", "where", "after", "back", "little", "only",
    "round", "man", "year", "came", "show", "every", "good", "me", "give", "our", "under", "name",
    "very", "through", "just", "form", "sentence", "great", "think", "say", "help", "low", "line",
    "differ", "turn", "cause", "much", "mean", "before", "move", "right", "boy", "old", "too",
    "same", "tell", "does", "set", "three", "want", "air", "well", "also", "play", "small", "end",
    "put", "home", "read", "hand", "port", "large", "spell", "add", "even", "land", "here", "must",
    "big", "high", "such", "follow", "act", "why", "ask", "men", "change", "went", "light", "kind",
    "off", "need", "house", "picture", "try", "us", "again", "animal", "point", "mother", "world",
    "near", "build", "self", "earth", "father", "head", "stand", "own", "page", "should",
    "country", "found", "answer", "school", "grow", "study", "still", "learn", "plant", "cover",
    "food", "sun", "four", "between", "state", "keep", "eye", "never", "last", "let", "thought",
    "city", "tree", "cross", "farm", "hard", "start", "might", "story", "saw", "far", "sea",
    "draw", "left", "late", "run", "while", "press", "close", "night", "real", "life", "few",
    "north", "open", "seem", "together", "next", "white", "children", "begin", "got", "walk",
    "example", "ease", "paper", "group", "always", "music", "those", "both", "mark", "often",
    "letter", "until", "mile", "river", "car",
];

/// Generates and checks values. Cheap to clone (the `repeat` buffer is shared).
#[derive(Clone, Debug)]
pub struct ValueGen {
    entropy: ValueEntropy,
    seed: u64,
    /// `repeat` only: the shared letters every value is a prefix of.
    shared: std::sync::Arc<Vec<u8>>,
}

/// FNV-1a of the key, mixed with the seed: the per-key stream's starting state.
fn key_state(key: &[u8], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ seed.rotate_left(29)
}

impl ValueGen {
    /// `max_len`: the longest value the run writes (sizes the `repeat` buffer).
    pub fn new(entropy: ValueEntropy, seed: u64, max_len: usize) -> ValueGen {
        let shared = if entropy == ValueEntropy::Repeat {
            let mut rng = Rng::new(seed);
            (0..max_len).map(|_| b'a' + rng.below(26) as u8).collect()
        } else {
            Vec::new()
        };
        ValueGen {
            entropy,
            seed,
            shared: std::sync::Arc::new(shared),
        }
    }

    pub fn entropy(&self) -> ValueEntropy {
        self.entropy
    }

    /// Appends `key`'s value of `len` bytes to `out`. The same (key, seed, len) always
    /// gives the same bytes; a shorter length gives a prefix of a longer one.
    pub fn append(&self, key: &[u8], len: usize, out: &mut Vec<u8>) {
        match self.entropy {
            ValueEntropy::Repeat => {
                // Longer than the buffer (never, with `max_len` right): repeat it.
                let mut left = len;
                while left > 0 && !self.shared.is_empty() {
                    let n = left.min(self.shared.len());
                    out.extend_from_slice(&self.shared[..n]);
                    left -= n;
                }
                out.resize(out.len() + left, b'a');
            }
            ValueEntropy::Random => {
                let mut rng = Rng::new(key_state(key, self.seed));
                let end = out.len() + len;
                while out.len() < end {
                    let word = rng.next_u64().to_le_bytes();
                    let n = (end - out.len()).min(8);
                    out.extend_from_slice(&word[..n]);
                }
            }
            ValueEntropy::Text => {
                let mut rng = Rng::new(key_state(key, self.seed));
                let end = out.len() + len;
                while out.len() < end {
                    let w = WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes();
                    let n = (end - out.len()).min(w.len());
                    out.extend_from_slice(&w[..n]);
                    if out.len() < end {
                        out.push(b' ');
                    }
                }
            }
        }
    }

    /// `key`'s value of `len` bytes.
    pub fn value(&self, key: &[u8], len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len);
        self.append(key, len, &mut v);
        v
    }

    /// True when `value` is what this generator writes to `key` (at the value's length:
    /// runs with a size range write several lengths).
    pub fn verify(&self, key: &[u8], value: &[u8]) -> bool {
        self.value(key, value.len()) == value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ValueEntropy; 3] = [
        ValueEntropy::Random,
        ValueEntropy::Text,
        ValueEntropy::Repeat,
    ];

    #[test]
    fn two_keys_get_different_values_except_with_repeat() {
        for e in ALL {
            let g = ValueGen::new(e, 7, 500);
            let (a, b) = (g.value(b"key:1", 500), g.value(b"key:2", 500));
            assert_eq!((a.len(), b.len()), (500, 500), "{e:?}");
            assert_eq!(a != b, e != ValueEntropy::Repeat, "{e:?}");
        }
        // The seed matters too.
        let (g1, g2) = (
            ValueGen::new(ValueEntropy::Random, 1, 64),
            ValueGen::new(ValueEntropy::Random, 2, 64),
        );
        assert_ne!(g1.value(b"k", 64), g2.value(b"k", 64));
    }

    #[test]
    fn a_read_verifies_against_its_key_and_nothing_else() {
        for e in ALL {
            let g = ValueGen::new(e, 3, 1000);
            let v = g.value(b"key:42", 777);
            assert!(g.verify(b"key:42", &v), "{e:?}");
            // A shorter write (size ranges) verifies at its own length.
            assert!(g.verify(b"key:42", &g.value(b"key:42", 10)), "{e:?}");
            let mut bad = v.clone();
            bad[100] ^= 1;
            assert!(!g.verify(b"key:42", &bad), "{e:?}");
            if e != ValueEntropy::Repeat {
                assert!(!g.verify(b"key:43", &v), "{e:?}");
            }
        }
    }

    #[test]
    fn random_values_do_not_compress_and_the_others_do() {
        let ratio = |e: ValueEntropy| {
            let g = ValueGen::new(e, 11, 500);
            let mut all = Vec::new();
            for k in 0..2000u32 {
                g.append(format!("key:{k}").as_bytes(), 500, &mut all);
            }
            lz4_flex::block::compress(&all).len() as f64 / all.len() as f64
        };
        let random = ratio(ValueEntropy::Random);
        assert!(random > 0.95, "random values compress to {random}");
        let text = ratio(ValueEntropy::Text);
        assert!(text < 0.8, "text values compress to {text}");
        let repeat = ratio(ValueEntropy::Repeat);
        assert!(repeat < 0.05, "repeat values compress to {repeat}");
    }

    #[test]
    fn entropy_names_round_trip() {
        for e in ALL {
            assert_eq!(e.name().parse::<ValueEntropy>().unwrap(), e);
        }
        assert!("zip".parse::<ValueEntropy>().is_err());
        assert_eq!(ValueEntropy::default(), ValueEntropy::Random);
    }
}
