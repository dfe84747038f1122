//! Redis-style log lines (`pid:M 22 Nov 2026 04:14:15.123 * message`) to stdout or the
//! configured `logfile`, filtered by `loglevel`.

use std::io::Write;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

struct Sink {
    level: Level,
    file: Option<std::fs::File>,
}

static SINK: Mutex<Sink> = Mutex::new(Sink {
    level: Level::Notice,
    file: None,
});

pub fn level_from_name(s: &str) -> Level {
    match s {
        "debug" => Level::Debug,
        "verbose" => Level::Verbose,
        "warning" => Level::Warning,
        _ => Level::Notice,
    }
}

/// Sets the level and destination; an empty path logs to stdout.
pub fn init(level: &str, logfile: &str) -> std::io::Result<()> {
    let file = if logfile.is_empty() {
        None
    } else {
        Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(logfile)?,
        )
    };
    let mut s = SINK.lock().unwrap_or_else(|e| e.into_inner());
    s.level = level_from_name(level);
    s.file = file;
    Ok(())
}

pub fn set_level(level: &str) {
    SINK.lock().unwrap_or_else(|e| e.into_inner()).level = level_from_name(level);
}

fn timestamp() -> String {
    let now = crate::util::now_ms();
    let secs = now / 1000;
    let ms = now % 1000;
    // Civil date from days since epoch (Howard Hinnant's algorithm).
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        d,
        MONTHS[(m - 1) as usize],
        y,
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms
    )
}

pub fn log(level: Level, msg: &str) {
    let mut s = SINK.lock().unwrap_or_else(|e| e.into_inner());
    if level < s.level {
        return;
    }
    let mark = match level {
        Level::Debug => '.',
        Level::Verbose => '-',
        Level::Notice => '*',
        Level::Warning => '#',
    };
    let line = format!(
        "{}:M {} {} {}\n",
        std::process::id(),
        timestamp(),
        mark,
        msg
    );
    match s.file.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stdout().write_all(line.as_bytes());
        }
    }
}

#[macro_export]
macro_rules! notice { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Notice, &format!($($t)*)) } }
#[macro_export]
macro_rules! warning { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Warning, &format!($($t)*)) } }
#[macro_export]
macro_rules! verbose { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Verbose, &format!($($t)*)) } }
