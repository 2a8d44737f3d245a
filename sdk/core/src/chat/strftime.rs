//! `strftime_now(format)`: the current local date and time for templates (Llama 3.x put the
//! date in the system prompt), as Python's `datetime.now().strftime` gives transformers. The
//! device's UTC offset comes from chrono (the zone data of iOS, Android or the desktop); the
//! formatting is ours, so a directive chrono lacks cannot fail.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

pub(super) fn strftime_now(format: String) -> String {
    // A clock before 1970 is a broken clock; render the epoch rather than fail.
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let offset = chrono::Local::now().offset().local_minus_utc();
    format_local(&format, i64::try_from(secs).unwrap_or(i64::MAX), offset)
}

/// `format_unix` of the wall-clock time `offset` seconds east of Greenwich.
pub(super) fn format_local(format: &str, utc_secs: i64, offset: i32) -> String {
    format_unix(format, utc_secs.saturating_add(i64::from(offset)))
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// The supported subset of C/Python `strftime`: `%Y %y %m %d %e %j %H %I %M %S
/// %p %b %h %B %a %A %F %T %%`, with glibc's `-` flag (no padding, e.g. `%-d`).
/// Other directives are copied through unchanged, as glibc does.
pub(super) fn format_unix(format: &str, secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (tod / 3600, tod % 3600 / 60, tod % 60);
    // 1970-01-01 was a Thursday (index 3 with Monday = 0).
    let weekday = (days + 3).rem_euclid(7) as usize;
    let cumulative = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let month_idx = (month as usize).saturating_sub(1).min(11);
    let yday = cumulative[month_idx] + day as i64 + i64::from(month > 2 && is_leap(year));
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };

    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let unpadded = chars.peek() == Some(&'-');
        if unpadded {
            chars.next();
        }
        let num = |v: i64, width: usize| if unpadded { v.to_string() } else { format!("{v:0width$}") };
        let Some(d) = chars.next() else {
            out.push('%');
            break;
        };
        match d {
            'Y' => out.push_str(&year.to_string()),
            'y' => out.push_str(&num(year.rem_euclid(100), 2)),
            'm' => out.push_str(&num(i64::from(month), 2)),
            'd' => out.push_str(&num(i64::from(day), 2)),
            'e' => out.push_str(&if unpadded { day.to_string() } else { format!("{day:>2}") }),
            'j' => out.push_str(&num(yday, 3)),
            'H' => out.push_str(&num(hour, 2)),
            'I' => out.push_str(&num(hour12, 2)),
            'M' => out.push_str(&num(minute, 2)),
            'S' => out.push_str(&num(second, 2)),
            'p' => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            'b' | 'h' => out.push_str(&MONTHS[month_idx][..3]),
            'B' => out.push_str(MONTHS[month_idx]),
            'a' => out.push_str(&WEEKDAYS[weekday][..3]),
            'A' => out.push_str(WEEKDAYS[weekday]),
            'F' => out.push_str(&format!("{year}-{month:02}-{day:02}")),
            'T' => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
            '%' => out.push('%'),
            other => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
        }
    }
    out
}
