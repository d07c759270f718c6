//! SQLite's date and time functions over one cell (<https://sqlite.org/lang_datefunc.html>):
//! a time value read into a Julian day in milliseconds ([`julian_ms`]), then `julianday`
//! ([`julianday`]) or `strftime` with `%d %f %H %j %J %m %M %s %S %w %W %Y %%` ([`strftime`];
//! `date(x)` is `%Y-%m-%d`, `datetime(x)` `%Y-%m-%d %H:%M:%S`, `time(x)` `%H:%M:%S`).
//!
//! Time values are SQLite's: `YYYY-MM-DD`, optionally followed (after spaces or `T`) by
//! `HH:MM[:SS[.SSS…]]`; `HH:MM[:SS[.SSS]]` alone (on 2000-01-01); either with a time zone
//! suffix `[+-]HH:MM` or `Z`; trailing spaces allowed; or a number (cell or text), read as a
//! Julian day number. Anything else (and `'now'`, whose answer depends on the day) is NULL.
//! The calendar arithmetic is SQLite's `computeJD` / `computeYMD` / `computeHMS`.

use crate::verify::Datum;

use super::scalar::numeric;

const DAY_MS: i64 = 86_400_000;

/// The cell's time value as a Julian day in milliseconds, `None` when it is not one.
pub(super) fn julian_ms(d: &Datum) -> Option<i64> {
    match d {
        Datum::Null => None,
        Datum::Int(i) => from_julian_day(*i as f64),
        Datum::Real(r) => from_julian_day(*r),
        Datum::Text(s) => parse_text(s),
    }
}

fn from_julian_day(r: f64) -> Option<i64> {
    // SQLite accepts Julian day numbers from 0 to 5373484.5 (year 9999).
    (0.0..5_373_484.5)
        .contains(&r)
        .then(|| (r * DAY_MS as f64 + 0.5) as i64)
}

fn parse_text(s: &str) -> Option<i64> {
    // Spaces may follow a time value, not precede it (`' 2020-01-01'` is not one).
    if let Some(ms) = parse_date_time(s.trim_end_matches(' ')) {
        return Some(ms);
    }
    let t = s.trim_matches(' ');
    // A number is a Julian day number (the whole text, surrounding spaces aside).
    let is_number = !t.is_empty()
        && t.bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'))
        && t.parse::<f64>().is_ok();
    if is_number {
        return from_julian_day(numeric(t).as_f64()?);
    }
    None
}

/// `digits` decimal digits at the start of `b`, within `lo..=hi`.
fn fixed(b: &[u8], digits: usize, lo: i64, hi: i64) -> Option<i64> {
    if b.len() < digits || !b[..digits].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: i64 = std::str::from_utf8(&b[..digits]).ok()?.parse().ok()?;
    (lo..=hi).contains(&v).then_some(v)
}

/// `YYYY-MM-DD[( |T)HH:MM[:SS[.S…]]][tz]` or `HH:MM[:SS[.S…]][tz]` → Julian day ms.
fn parse_date_time(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    let (mut y, mut m, mut d) = (2000, 1, 1);
    let mut i = 0;
    let date = b.len() >= 10 && b[4] == b'-' && b[7] == b'-';
    if date {
        y = fixed(b, 4, 0, 9999)?;
        m = fixed(&b[5..], 2, 1, 12)?;
        d = fixed(&b[8..], 2, 1, 31)?;
        i = 10;
        while i < b.len() && (b[i] == b' ' || b[i] == b'T') {
            if b[i] == b'T' {
                i += 1;
                break;
            }
            i += 1;
        }
        if i == b.len() {
            return Some(compute_jd(y, m, d, 0, 0, 0.0, 0));
        }
    }
    let rest = &b[i..];
    let (h, min, sec, tz) = parse_time(rest)?;
    if !date && i != 0 {
        return None;
    }
    Some(compute_jd(y, m, d, h, min, sec, tz))
}

/// `HH:MM[:SS[.S…]]` then an optional time zone → (hour, minute, seconds, zone minutes).
fn parse_time(b: &[u8]) -> Option<(i64, i64, f64, i64)> {
    let h = fixed(b, 2, 0, 24)?;
    if b.get(2) != Some(&b':') {
        return None;
    }
    let min = fixed(&b[3..], 2, 0, 59)?;
    let mut i = 5;
    let mut sec = 0.0;
    if b.get(i) == Some(&b':') {
        let s = fixed(&b[i + 1..], 2, 0, 59)?;
        i += 3;
        let mut frac = String::new();
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                frac.push(b[i] as char);
                i += 1;
            }
        }
        // The fraction is capped at 0.999 (SQLite: no rounding up into the next second).
        let fraction = if frac.is_empty() {
            0.0
        } else {
            format!("0.{frac}").parse::<f64>().ok()?
        };
        sec = s as f64 + fraction.min(0.999);
    }
    // `24:00` only as midnight.
    if h == 24 && (min != 0 || sec != 0.0) {
        return None;
    }
    // Time zone: spaces, then `Z` or `[+-]HH:MM`, then only spaces.
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    let mut tz = 0;
    match b.get(i) {
        None => {}
        Some(b'Z' | b'z') => i += 1,
        Some(&c @ (b'+' | b'-')) => {
            let hh = fixed(&b[i + 1..], 2, 0, 14)?;
            if b.get(i + 3) != Some(&b':') {
                return None;
            }
            let mm = fixed(&b[i + 4..], 2, 0, 59)?;
            tz = (hh * 60 + mm) * if c == b'-' { -1 } else { 1 };
            i += 6;
        }
        Some(_) => return None,
    }
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    (i == b.len()).then_some((h, min, sec, tz))
}

/// SQLite's `computeJD`: the Julian day (ms) of a Gregorian date and time, less the zone.
fn compute_jd(y: i64, m: i64, d: i64, h: i64, min: i64, sec: f64, tz: i64) -> i64 {
    let (mut y, mut m) = (y, m);
    if m <= 2 {
        y -= 1;
        m += 12;
    }
    let a = y / 100;
    let b = 2 - a + a / 4;
    let x1 = 36525 * (y + 4716) / 100;
    let x2 = 306001 * (m + 1) / 10000;
    let jd = ((x1 + x2 + d + b) as f64 - 1524.5) * DAY_MS as f64;
    let mut ms = jd as i64;
    ms += h * 3_600_000 + min * 60_000 + (sec * 1000.0 + 0.5) as i64;
    ms - tz * 60_000
}

/// SQLite's `computeYMD` and `computeHMS`: (year, month, day, hour, minute, seconds).
fn civil(ms: i64) -> (i64, i64, i64, i64, i64, f64) {
    let z = (ms + 43_200_000) / DAY_MS;
    let a = ((z as f64 - 1_867_216.25) / 36_524.25) as i64;
    let a = z + 1 + a - (a / 4);
    let b = a + 1524;
    let c = ((b as f64 - 122.1) / 365.25) as i64;
    let d = (36525 * (c & 32767)) / 100;
    let e = ((b - d) as f64 / 30.6001) as i64;
    let x1 = (30.6001 * e as f64) as i64;
    let day = b - d - x1;
    let month = if e < 14 { e - 1 } else { e - 13 };
    let year = if month > 2 { c - 4716 } else { c - 4715 };
    let day_ms = (ms + 43_200_000) % DAY_MS;
    let sec = (day_ms % 60_000) as f64 / 1000.0;
    let day_min = day_ms / 60_000;
    (year, month, day, day_min / 60, day_min % 60, sec)
}

/// `julianday(x)`: the Julian day number (real), NULL when `x` is not a time value.
pub(super) fn julianday(d: &Datum) -> Datum {
    match julian_ms(d) {
        Some(ms) => Datum::Real(ms as f64 / DAY_MS as f64),
        None => Datum::Null,
    }
}

/// `strftime(format, x)` as text, NULL when `x` is not a time value or the format has a
/// specifier outside `%d %f %H %j %J %m %M %s %S %w %W %Y %%`.
pub(super) fn strftime(format: &str, d: &Datum) -> Datum {
    let Some(ms) = julian_ms(d) else {
        return Datum::Null;
    };
    let (y, m, day, h, min, sec) = civil(ms);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('f') => out.push_str(&format!("{:06.3}", sec.min(59.999))),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('M') => out.push_str(&format!("{min:02}")),
            Some('S') => out.push_str(&format!("{:02}", sec as i64)),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('j') => out.push_str(&format!("{:03}", day_of_year(ms, y) + 1)),
            Some('J') => out.push_str(&julian_text(ms as f64 / DAY_MS as f64)),
            Some('s') => out.push_str(&format!("{}", ms / 1000 - 210_866_760_000)),
            Some('w') => out.push_str(&format!("{}", ((ms + 129_600_000) / DAY_MS) % 7)),
            Some('W') => {
                // Week of the year, weeks starting on Monday (SQLite's formula).
                let wd = ((ms + 43_200_000) / DAY_MS) % 7; // 0 = Monday
                let yday = day_of_year(ms, y);
                out.push_str(&format!("{:02}", (yday + 7 - wd) / 7));
            }
            Some('%') => out.push('%'),
            _ => return Datum::Null,
        }
    }
    Datum::Text(out)
}

/// Days since 1 January of year `y` (0-based).
fn day_of_year(ms: i64, y: i64) -> i64 {
    let jan1 = compute_jd(y, 1, 1, 0, 0, 0.0, 0);
    (ms - jan1) / DAY_MS
}

/// `%J`: the Julian day number as SQLite prints it (`%.16g`).
fn julian_text(r: f64) -> String {
    super::scalar::g_format(r, 16)
}
