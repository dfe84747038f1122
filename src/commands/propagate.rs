//! What a command that changed data looks like in the log: Redis's deterministic forms
//! (relative expiries become absolute `PEXPIREAT`/`PXAT`, INCRBYFLOAT becomes a `SET ...
//! KEEPTTL` of the result, GETDEL a `DEL`), found from the keyspace *after* the command
//! ran, so the family code needs no logging logic. Also which keys a command names (for
//! the dirty-key tracking that holds reads until the writes they see are durable).

use super::{Args, CommandSpec};
use crate::keyspace::Keyspace;

/// The argument indices of a command's keys (Redis's first/last/step key specs).
pub fn key_indices(spec: &CommandSpec, argc: usize) -> impl Iterator<Item = usize> {
    let first = spec.first_key.max(0) as usize;
    let last = if spec.last_key < 0 {
        argc as i64 + spec.last_key as i64
    } else {
        spec.last_key as i64
    };
    let step = spec.key_step.max(1) as usize;
    let end = if first == 0 {
        0
    } else {
        (last.max(0) as usize + 1).min(argc)
    };
    (first..end).step_by(step).filter(move |&i| i > 0)
}

/// Every key position of a command, numkeys and keyword forms included (Redis's key
/// specs and getkeys procs): what COMMAND GETKEYS answers and what client tracking
/// remembers. None: the arguments cannot hold the keys they declare (a bad or too large
/// numkeys), which Redis's GETKEYS reports as invalid.
pub fn keys_of(spec: &CommandSpec, args: Args) -> Option<Vec<usize>> {
    let argc = args.len();
    let numkeys_at = |at: usize| -> Option<Vec<usize>> {
        let n = crate::util::parse_i64(args.get(at))?;
        if n < 0 || n as u64 > (argc - at - 1) as u64 {
            return None;
        }
        Some((at + 1..at + 1 + n as usize).collect())
    };
    let keyword_dest = |words: &[&str]| -> Vec<usize> {
        let mut v = vec![1];
        let mut i = 2;
        while i + 1 < argc {
            if words.iter().any(|w| args.is(i, w)) {
                v.push(i + 1);
                i += 1;
            }
            i += 1;
        }
        v
    };
    match spec.name {
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop"
            if argc > 1 =>
        {
            numkeys_at(1)
        }
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall"
        | "fcall_ro"
            if argc > 2 =>
        {
            numkeys_at(2)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" if argc > 2 => {
            let mut v = vec![1];
            v.extend(numkeys_at(2)?);
            Some(v)
        }
        "xread" | "xreadgroup" => {
            let at = (1..argc).find(|&i| args.is(i, "STREAMS"))?;
            let rest = argc - at - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return None;
            }
            Some((at + 1..at + 1 + rest / 2).collect())
        }
        // SORT's options take 0, 1 or 2 values; the last STORE names the destination.
        "sort" => {
            let mut dest = None;
            let mut i = 2;
            while i < argc {
                let skip = if args.is(i, "LIMIT") {
                    2
                } else if args.is(i, "GET") || args.is(i, "BY") {
                    1
                } else if args.is(i, "STORE") && i + 1 < argc {
                    dest = Some(i + 1);
                    1
                } else {
                    0
                };
                i += 1 + skip;
            }
            Some(std::iter::once(1).chain(dest).collect())
        }
        "georadius" | "georadiusbymember" => Some(keyword_dest(&["STORE", "STOREDIST"])),
        // MIGRATE's key, or (with an empty key) everything after KEYS.
        "migrate" if argc > 6 => match (6..argc).find(|&i| args.is(i, "KEYS")) {
            Some(_) if !args.get(3).is_empty() => None,
            Some(at) => Some((at + 1..argc).collect()),
            None => Some(vec![3]),
        },
        _ => Some(key_indices(spec, argc).collect()),
    }
}

/// Commands whose keys [`keys_of`] finds from their arguments (numkeys, keywords)
/// rather than from fixed positions.
pub fn has_key_proc(name: &str) -> bool {
    matches!(
        name,
        "zunion"
            | "zinter"
            | "zdiff"
            | "zintercard"
            | "sintercard"
            | "lmpop"
            | "zmpop"
            | "blmpop"
            | "bzmpop"
            | "eval"
            | "evalsha"
            | "eval_ro"
            | "evalsha_ro"
            | "fcall"
            | "fcall_ro"
            | "zunionstore"
            | "zinterstore"
            | "zdiffstore"
            | "xread"
            | "xreadgroup"
            | "sort"
            | "georadius"
            | "georadiusbymember"
            | "migrate"
            | "sort_ro"
    )
}

/// Commands whose effect reaches keys they do not name (another db, or whole dbs).
pub fn is_barrier(name: &str) -> bool {
    matches!(name, "flushall" | "flushdb" | "swapdb" | "move" | "copy")
}

/// EVAL, FCALL and friends: logged as the commands the script ran, never as themselves.
pub fn is_script(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

fn pxat(ks: &Keyspace, db: usize, key: &[u8]) -> Option<Option<i64>> {
    ks.find_raw(db, key).map(|e| ks.expire_at(e))
}

/// How a command that stores a string value is logged (SET and its variants): the
/// value's argument is `value_at`.
#[derive(Debug, PartialEq, Eq)]
pub enum SetForm {
    /// The arguments as given.
    AsGiven,
    /// `SET key value PXAT <t>` (a relative expiry made absolute).
    Pxat(i64),
    /// `SET key value` (the key has no expiry after all).
    Plain,
    /// `DEL key` (the value is already gone: an expiry in the past).
    Del,
}

/// The form of SET, SETEX, PSETEX and GETSET (which store argument `value_at` as the
/// key's value), found after the command ran; None for other commands.
pub fn set_form(ks: &Keyspace, name: &str, db: usize, args: Args) -> Option<(SetForm, usize)> {
    let ttl = |value_at| match pxat(ks, db, args.get(1)) {
        Some(Some(t)) => (SetForm::Pxat(t), value_at),
        Some(None) => (SetForm::Plain, value_at),
        None => (SetForm::Del, value_at),
    };
    match name {
        "set" if args.len() >= 3 => {
            let has_expire =
                (3..args.len()).any(|i| ["EX", "PX", "EXAT", "PXAT"].iter().any(|o| args.is(i, o)));
            Some(if has_expire {
                ttl(2)
            } else {
                (SetForm::AsGiven, 2)
            })
        }
        "getset" if args.len() == 3 => Some((SetForm::AsGiven, 2)),
        "setex" | "psetex" if args.len() == 4 => Some(ttl(3)),
        _ => None,
    }
}

/// The command to log for `form`, with `value` as the stored value (the argument itself,
/// or the value in its arena block for a log entry by reference). Always Some (an
/// Option for its callers' `?`).
pub fn set_form_argv<'a>(
    form: &SetForm,
    args: Args<'a>,
    value_at: usize,
    value: &'a [u8],
    pxat_text: &'a [u8],
) -> Option<Vec<&'a [u8]>> {
    let key = args.get(1);
    match form {
        SetForm::AsGiven => Some(
            args.iter()
                .enumerate()
                .map(|(i, a)| if i == value_at { value } else { a })
                .collect(),
        ),
        SetForm::Pxat(_) => Some(vec![b"SET", key, value, b"PXAT", pxat_text]),
        SetForm::Plain => Some(vec![b"SET", key, value]),
        SetForm::Del => Some(vec![b"DEL", key]),
    }
}

/// The form to log for a command that changed data; None: log its arguments as given.
pub fn log_form(ks: &Keyspace, name: &str, db: usize, args: Args) -> Option<Vec<Vec<u8>>> {
    let key = || args.get(1).to_vec();
    let del = || Some(vec![b"DEL".to_vec(), key()]);
    match name {
        "set" | "setex" | "psetex" => {
            let (form, at) = set_form(ks, name, db, args)?;
            if form == SetForm::AsGiven {
                return None;
            }
            let t = match form {
                SetForm::Pxat(t) => t.to_string().into_bytes(),
                _ => Vec::new(),
            };
            let argv = set_form_argv(&form, args, at, args.get(at), &t)?;
            Some(argv.into_iter().map(<[u8]>::to_vec).collect())
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" | "getex" => {
            match pxat(ks, db, args.get(1)) {
                Some(Some(t)) => Some(vec![
                    b"PEXPIREAT".to_vec(),
                    key(),
                    t.to_string().into_bytes(),
                ]),
                Some(None) => Some(vec![b"PERSIST".to_vec(), key()]),
                None => del(),
            }
        }
        "incrbyfloat" => match ks.find_raw(db, args.get(1)) {
            Some(e) => Some(vec![
                b"SET".to_vec(),
                key(),
                ks.value(e).to_vec(),
                b"KEEPTTL".to_vec(),
            ]),
            None => del(),
        },
        // As Redis: the float result is logged, so replay does not redo the arithmetic.
        "hincrbyfloat" => {
            let e = ks.find_raw(db, args.get(1))?;
            let v = crate::collections::hash::get(ks, e, args.get(2))?.to_vec();
            Some(vec![b"HSET".to_vec(), key(), args.get(2).to_vec(), v])
        }
        "getdel" => del(),
        "restore" => {
            let mut v = vec![b"RESTORE".to_vec(), key()];
            let t = pxat(ks, db, args.get(1)).flatten();
            v.push(t.unwrap_or(0).to_string().into_bytes());
            v.push(args.get(3).to_vec());
            v.push(b"REPLACE".to_vec());
            if t.is_some() {
                v.push(b"ABSTTL".to_vec());
            }
            Some(v)
        }
        _ => None,
    }
}

/// Extra (db, key) pairs a command writes beyond its key specs (MOVE's and COPY's
/// destination db), for the rewrite's dirty set.
pub fn extra_written_keys(name: &str, db: usize, args: Args) -> Vec<(usize, Vec<u8>)> {
    let parse_db = |i: usize| {
        crate::util::parse_i64(args.get(i))
            .filter(|&d| d >= 0)
            .map(|d| d as usize)
    };
    match name {
        "move" if args.len() >= 3 => parse_db(2)
            .map(|d| vec![(d, args.get(1).to_vec())])
            .unwrap_or_default(),
        "copy" => {
            let mut dst_db = db;
            for i in 3..args.len().saturating_sub(1) {
                if args.is(i, "DB") {
                    dst_db = parse_db(i + 1).unwrap_or(db);
                }
            }
            vec![(dst_db, args.get(2).to_vec())]
        }
        // LMPOP's and ZMPOP's keys are counted by numkeys (no fixed key positions in its spec).
        "lmpop" | "zmpop" => {
            let n = crate::util::parse_i64(args.get(1)).unwrap_or(0).max(0) as usize;
            (2..(2 + n).min(args.len()))
                .map(|i| (db, args.get(i).to_vec()))
                .collect()
        }
        // BLMPOP's and BZMPOP's come after their timeout.
        "blmpop" | "bzmpop" => {
            let n = crate::util::parse_i64(args.get(2)).unwrap_or(0).max(0) as usize;
            (3..(3 + n).min(args.len()))
                .map(|i| (db, args.get(i).to_vec()))
                .collect()
        }
        // SORT ... STORE dst, GEORADIUS[BYMEMBER] ... STORE|STOREDIST dst: the last such
        // option wins, as the commands parse them.
        "sort" => store_option(args, 2, &["STORE"], &[("LIMIT", 2), ("BY", 1), ("GET", 1)])
            .map(|k| vec![(db, k)])
            .unwrap_or_default(),
        "georadius" => store_option(args, 6, &["STORE", "STOREDIST"], &[("COUNT", 1)])
            .map(|k| vec![(db, k)])
            .unwrap_or_default(),
        "georadiusbymember" => store_option(args, 5, &["STORE", "STOREDIST"], &[("COUNT", 1)])
            .map(|k| vec![(db, k)])
            .unwrap_or_default(),
        _ => vec![],
    }
}

/// The key after the last of `words` among the options from argument `from`, walking
/// them as the command does (`skips`: other options and how many arguments they take).
fn store_option(
    args: Args,
    from: usize,
    words: &[&str],
    skips: &[(&str, usize)],
) -> Option<Vec<u8>> {
    let mut found = None;
    let mut i = from;
    while i < args.len() {
        let left = args.len() - i - 1;
        if left >= 1 && words.iter().any(|w| args.is(i, w)) {
            found = Some(args.get(i + 1).to_vec());
            i += 1;
        } else if let Some(&(_, n)) = skips.iter().find(|(w, n)| left >= *n && args.is(i, w)) {
            i += n;
        }
        i += 1;
    }
    found
}

/// SORT with BY or GET patterns reads keys it does not name: like KEYS, its reply waits
/// for every logged write (it may have read any key).
pub fn reads_unnamed_keys(name: &str, args: Args) -> bool {
    matches!(name, "sort" | "sort_ro")
        && (2..args.len().saturating_sub(1)).any(|i| args.is(i, "BY") || args.is(i, "GET"))
}
