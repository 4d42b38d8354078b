//! Schedules as Vixie cron reads them, the dialect Kubernetes CronJobs
//! document: five fields (minute, hour, day of month, month, day of week)
//! of numbers, `*`, ranges `a-b`, steps `*/n` and `a-b/n`, and lists of
//! these; months and weekdays also by their English three-letter names;
//! Sunday as 0 or 7; and the macros `@yearly` (`@annually`), `@monthly`,
//! `@weekly`, `@daily` (`@midnight`) and `@hourly`.
//!
//! croner evaluates them. It reads more than Vixie cron (seconds and years
//! as a sixth and seventh field, Quartz's `L`, `W`, `#` and `?`, its own
//! `+`), and it joins the days differently: Vixie cron takes a day when
//! its day of month or its weekday matches only when neither field starts
//! with `*`, and when one does, the day must match both, where croner
//! treats `*/2` as a restriction like any other. So the extensions are
//! refused here, with the field they are in named, and croner is told to
//! match both days whenever a field starts with `*`.
//!
//! A schedule that matches no day at all (the 30th of February) is refused
//! too: a search for its next time would walk to croner's year 5000.

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// The names of the five fields, as messages give them.
const FIELDS: [&str; 5] = ["minute", "hour", "day of month", "month", "day of week"];
/// The values each field takes.
const RANGES: [&str; 5] = [
    "0-59",
    "0-23",
    "1-31",
    "1-12 or jan-dec",
    "0-7 or sun-sat (Sunday is 0 or 7)",
];
const DAY_OF_MONTH: usize = 2;
const MONTH: usize = 3;
const DAY_OF_WEEK: usize = 4;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// Vixie cron's macros and the fields they stand for.
const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// The longest day of each month, in a leap year.
const LONGEST_MONTH: [u16; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// A schedule read as Vixie cron reads it; the message of an error says
/// what is wrong and, for a field, which.
pub(super) fn parse(schedule: &str) -> Result<Cron, String> {
    let text = schedule.trim();
    if text.starts_with("CRON_TZ=") || text.starts_with("TZ=") {
        return Err(format!(
            "{schedule:?} names its time zone in the schedule: give it as the window's timeZone, \
             and the five fields alone as its schedule"
        ));
    }
    let fields = match text.strip_prefix('@') {
        Some(_) => match MACROS.iter().find(|(name, _)| *name == text) {
            Some((_, fields)) => *fields,
            None => {
                return Err(format!(
                    "{schedule:?} is not a macro of Vixie cron for a window: @yearly, @annually, \
                     @monthly, @weekly, @daily, @midnight or @hourly"
                ))
            }
        },
        None => text,
    };
    let parts: Vec<&str> = fields.split_whitespace().collect();
    if parts.len() != FIELDS.len() {
        return Err(format!(
            "{schedule:?} has {} fields: a schedule has five (minute, hour, day of month, month, \
             day of week), as in Vixie cron and Kubernetes CronJobs, e.g. \"0 22 * * 1-5\"; \
             seconds and years are not read",
            parts.len()
        ));
    }
    for (i, part) in parts.iter().enumerate() {
        vixie_field(i, part).map_err(|e| format!("{schedule:?}: its {}, {part:?}, {e}", FIELDS[i]))?;
    }
    // Vixie cron matches both days when either field starts with `*`.
    let both_days = parts[DAY_OF_MONTH].starts_with('*') || parts[DAY_OF_WEEK].starts_with('*');
    let cron = parser(both_days).parse(fields).map_err(|e| match field_in_error(&parts) {
        Some(i) => format!(
            "{schedule:?}: its {}, {:?}, is out of range: it takes {}",
            FIELDS[i], parts[i], RANGES[i]
        ),
        None => format!("{schedule:?} is not a cron schedule such as \"0 22 * * 1-5\": {e}"),
    })?;
    match fires(&cron) {
        true => Ok(cron),
        false => Err(format!(
            "{schedule:?} never fires: none of the months it names has a day of the month it names"
        )),
    }
}

/// croner set to read five fields and, when `both_days`, to match a day
/// by its day of month and its weekday both.
fn parser(both_days: bool) -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .dom_and_dow(both_days)
        .build()
}

/// Whether field `i` is written as Vixie cron writes it: a list of `*`,
/// numbers or (for months and weekdays) names, alone or in a range,
/// either with a step. The values' ranges are croner's to check.
fn vixie_field(i: usize, field: &str) -> Result<(), String> {
    let names: &[&str] = match i {
        MONTH => &MONTHS,
        DAY_OF_WEEK => &WEEKDAYS,
        _ => &[],
    };
    let value = |v: &str| {
        let named = names.iter().any(|n| n.eq_ignore_ascii_case(v));
        match !v.is_empty() && (v.bytes().all(|b| b.is_ascii_digit()) || named) {
            true => Ok(()),
            false if v == field => Err(format!("is not what Vixie cron reads{}", extension(v))),
            false => Err(format!("has {v:?}, which Vixie cron does not read{}", extension(v))),
        }
    };
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        if let Some(step) = step {
            if step.is_empty() || !step.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("steps by {step:?}: a step is a number, as in */15"));
            }
            if range != "*" && !range.contains('-') {
                return Err(format!(
                    "steps from {range:?}: a step goes over `*` or a range, as in */15 or 0-30/15"
                ));
            }
        }
        if range == "*" {
            continue;
        }
        match range.split_once('-') {
            Some((low, high)) => value(low).and(value(high))?,
            None => value(range)?,
        }
    }
    Ok(())
}

/// What a value Vixie cron does not read is, where another dialect reads it.
fn extension(value: &str) -> &'static str {
    match value {
        v if v.contains('?') => " (Quartz's `?`: write `*`)",
        v if v.contains('#') => " (Quartz's `#`, the nth weekday of the month)",
        v if v.contains('L') || v.contains('W') => " (Quartz's `L` or `W`)",
        v if v.starts_with('+') => " (`+`, which only croner reads)",
        "*" => " (`*` stands alone or before a step, as in */2)",
        _ => "",
    }
}

/// The first field croner refuses when read alone, all others `*`.
fn field_in_error(parts: &[&str]) -> Option<usize> {
    (0..parts.len()).find(|i| {
        let mut alone = ["*"; 5];
        alone[*i] = parts[*i];
        parser(false).parse(&alone.join(" ")).is_err()
    })
}

/// Whether a schedule matches any day at all. When a day must match its
/// day of month and its weekday both, it does when one of its months has
/// one of its days of the month: that date falls on every weekday over
/// the years (the 29th of February too, over four centuries). When either
/// may match, every month has every weekday.
fn fires(cron: &Cron) -> bool {
    let pattern = &cron.pattern;
    if !pattern.matches_dom_and_dow() && !pattern.is_dom_wildcard() && !pattern.is_dow_wildcard() {
        return true;
    }
    let days = pattern.days.values();
    pattern.months.values().iter().any(|month| {
        let longest = LONGEST_MONTH.get(usize::from(*month).wrapping_sub(1)).copied().unwrap_or_default();
        days.iter().any(|day| *day <= longest)
    })
}
