//! The bodies of `#inst` and `#uuid` literals.
//!
//! An instant is kept as milliseconds since the Unix epoch (an `i64`), Datomic's resolution.
//! The conversion between that count and a calendar date uses Howard Hinnant's
//! `days_from_civil` / `civil_from_days` algorithms on the proleptic Gregorian calendar, in
//! `i64` with checked arithmetic, so that every `i64` prints and every printed instant reads
//! back to the same count. RFC 3339 only has years 0000-9999; for the instants outside that
//! range (about ±292 million years fit an `i64`) the printer writes an ISO 8601 expanded
//! year with an explicit sign (`+10000-01-01T...`, `-0001-12-31T...`), which the reader
//! accepts too.

const MILLIS_PER_DAY: i64 = 86_400_000;

/// Days from 1970-01-01 to the given proleptic Gregorian date (`month` 1-12, `day` 1-31).
fn days_from_civil(year: i64, month: i64, day: i64) -> Option<i64> {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era.checked_mul(146_097)?.checked_add(doe - 719_468)
}

/// The `(year, month, day)` of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Formats an instant as `2020-01-01T00:00:00.000Z`: always UTC, millisecond precision.
pub fn format_inst(millis: i64) -> String {
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let ms_of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let year_text = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year > 0 {
        format!("+{year}")
    } else {
        format!("-{:04}", year.unsigned_abs())
    };
    format!(
        "{year_text}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

/// A cursor over the ASCII body of an `#inst` string.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.bytes.get(self.at) == Some(&b);
        self.at += usize::from(hit);
        hit
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Exactly `n` ASCII digits as a number.
    fn digits(&mut self, n: usize) -> Option<i64> {
        let field = self.bytes.get(self.at..self.at + n)?;
        let mut value: i64 = 0;
        for &b in field {
            if !b.is_ascii_digit() {
                return None;
            }
            value = value.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
        }
        self.at += n;
        Some(value)
    }

    /// A run of one or more ASCII digits, returned as a slice.
    fn digit_run(&mut self) -> &[u8] {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        &self.bytes[start..self.at]
    }

    /// A 4-digit year, or a signed expanded year of 4 to 12 digits.
    fn year(&mut self) -> Option<i64> {
        let sign = match self.peek() {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return self.digits(4),
        };
        self.at += 1;
        let run = self.digit_run();
        if !(4..=12).contains(&run.len()) {
            return None;
        }
        let text = std::str::from_utf8(run).ok()?;
        Some(sign * text.parse::<i64>().ok()?)
    }

    /// `.ddd...`: the first three digits as milliseconds, the rest truncated.
    fn fraction_millis(&mut self) -> Option<i64> {
        let run = self.digit_run();
        if run.is_empty() {
            return None;
        }
        let mut millis = 0;
        for i in 0..3 {
            millis = millis * 10 + run.get(i).map_or(0, |b| i64::from(b - b'0'));
        }
        Some(millis)
    }

    /// `Z`, `+hh:mm`, `-hh:mm` or nothing (UTC), as an offset in milliseconds.
    fn offset_millis(&mut self) -> Option<i64> {
        if self.eat(b'Z') {
            return Some(0);
        }
        let sign = if self.eat(b'+') {
            1
        } else if self.eat(b'-') {
            -1
        } else {
            return Some(0);
        };
        let hours = self.digits(2).filter(|h| *h <= 23)?;
        if !self.eat(b':') {
            return None;
        }
        let minutes = self.digits(2).filter(|m| *m <= 59)?;
        Some(sign * (hours * 3_600_000 + minutes * 60_000))
    }
}

/// The optional fields after the date, as `(hour, minute, second, millis)`.
fn time_of_day(scan: &mut Scan<'_>) -> Option<(i64, i64, i64, i64)> {
    let (mut hour, mut minute, mut second, mut millis) = (0, 0, 0, 0);
    if scan.eat(b'T') {
        hour = scan.digits(2).filter(|h| *h <= 23)?;
        if scan.eat(b':') {
            minute = scan.digits(2).filter(|m| *m <= 59)?;
            if scan.eat(b':') {
                second = scan.digits(2).filter(|s| *s <= 59)?;
                if scan.eat(b'.') {
                    millis = scan.fraction_millis()?;
                }
            }
        }
    }
    Some((hour, minute, second, millis))
}

/// Parses the body of an `#inst` literal to milliseconds since the Unix epoch.
///
/// Accepts RFC 3339 timestamps and, as Clojure does, their prefixes (`2020`, `2020-01`,
/// `2020-01-01`, `2020-01-01T10`, ...), with an optional `Z` or `±hh:mm` offset (absent means
/// UTC). Digits past milliseconds are truncated. Returns `None` for anything else, including
/// instants that do not fit an `i64`.
pub fn parse_inst(text: &str) -> Option<i64> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
    };
    let year = scan.year()?;
    let (mut month, mut day) = (1, 1);
    let mut time = (0, 0, 0, 0);
    if scan.eat(b'-') {
        month = scan.digits(2).filter(|m| (1..=12).contains(m))?;
        if scan.eat(b'-') {
            day = scan
                .digits(2)
                .filter(|d| (1..=days_in_month(year, month)).contains(d))?;
            time = time_of_day(&mut scan)?;
        }
    }
    let offset = scan.offset_millis()?;
    if scan.at != scan.bytes.len() {
        return None;
    }
    let (hour, minute, second, millis) = time;
    let days = days_from_civil(year, month, day)?;
    let in_day = hour * 3_600_000 + minute * 60_000 + second * 1000 + millis;
    // In i128: the first day of i64's range starts before i64::MIN.
    let total = i128::from(days) * i128::from(MILLIS_PER_DAY) + i128::from(in_day - offset);
    i64::try_from(total).ok()
}

/// Formats a UUID as 36 lowercase characters, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn format_uuid(u: u128) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        u >> 96,
        (u >> 80) & 0xffff,
        (u >> 64) & 0xffff,
        (u >> 48) & 0xffff,
        u & 0xffff_ffff_ffff
    )
}

/// Parses the body of a `#uuid` literal: exactly 8-4-4-4-12 hex digits, either case.
pub fn parse_uuid(text: &str) -> Option<u128> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut value: u128 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if b != b'-' {
                return None;
            }
            continue;
        }
        let digit = char::from(b).to_digit(16)?;
        value = (value << 4) | u128::from(digit);
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_and_known_instants() {
        assert_eq!(format_inst(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(parse_inst("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(parse_inst("2020-01-01T00:00:00Z"), Some(1_577_836_800_000));
        assert_eq!(format_inst(1_577_836_800_123), "2020-01-01T00:00:00.123Z");
        assert_eq!(format_inst(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(parse_inst("1969-12-31T23:59:59.999Z"), Some(-1));
    }

    #[test]
    fn prefixes_offsets_and_fractions() {
        let day = Some(1_577_836_800_000);
        assert_eq!(parse_inst("2020-01-01"), day);
        assert_eq!(parse_inst("2020-01"), day);
        assert_eq!(parse_inst("2020"), day);
        assert_eq!(parse_inst("2020-01-01T01:00:00+01:00"), day);
        assert_eq!(parse_inst("2019-12-31T23:00:00-01:00"), day);
        assert_eq!(
            parse_inst("2020-01-01T00:00:00.123456789Z"),
            Some(1_577_836_800_123)
        );
        assert_eq!(
            parse_inst("2020-01-01T00:00:00.1Z"),
            Some(1_577_836_800_100)
        );
        assert_eq!(parse_inst("2020-01-01T10Z"), Some(1_577_872_800_000));
    }

    #[test]
    fn rejects_malformed_instants() {
        for bad in [
            "",
            "20",
            "2020-13-01",
            "2020-02-30",
            "2019-02-29",
            "2020-01-01T24:00:00Z",
            "2020-01-01T00:60:00Z",
            "2020-01-01T00:00:60Z",
            "2020-01-01T00:00:00.Z",
            "2020-01-01T00:00:00+01",
            "2020-01-01 00:00:00Z",
            "2020-01-01T00:00:00Zjunk",
            "+123-01-01",
            "+9999999999999-01-01",
            "x020-01-01",
            "2020-1-01",
        ] {
            assert_eq!(parse_inst(bad), None, "{bad:?}");
        }
        assert_eq!(parse_inst("2020-02-29"), Some(1_582_934_400_000));
    }

    #[test]
    fn extreme_years_round_trip() {
        assert_eq!(format_inst(-62_135_596_800_000), "0001-01-01T00:00:00.000Z");
        assert_eq!(format_inst(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            format_inst(253_402_300_800_000),
            "+10000-01-01T00:00:00.000Z"
        );
        assert_eq!(
            format_inst(-62_167_219_200_001),
            "-0001-12-31T23:59:59.999Z"
        );
        for millis in [
            i64::MIN,
            i64::MAX,
            0,
            -1,
            1,
            -62_135_596_800_000,
            253_402_300_799_999,
            -62_167_219_200_000,
            -62_167_219_200_001,
        ] {
            let text = format_inst(millis);
            assert_eq!(parse_inst(&text), Some(millis), "{text}");
        }
        assert_eq!(parse_inst("+292278994-08-17T07:12:55.808Z"), None);
    }

    #[test]
    fn uuids() {
        let text = "f81d4fae-7dec-11d0-a765-00a0c91e6bf6";
        let u = parse_uuid(text).unwrap();
        assert_eq!(u, 0xf81d4fae_7dec_11d0_a765_00a0c91e6bf6);
        assert_eq!(format_uuid(u), text);
        assert_eq!(parse_uuid("F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6"), Some(u));
        assert_eq!(format_uuid(0), "00000000-0000-0000-0000-000000000000");
        assert_eq!(parse_uuid(&format_uuid(u128::MAX)), Some(u128::MAX));
        for bad in [
            "",
            "f81d4fae7dec11d0a76500a0c91e6bf6",
            "f81d4fae-7dec-11d0-a765-00a0c91e6bfg",
            "f81d4fae-7dec-11d0-a765_00a0c91e6bf6",
            "+81d4fae-7dec-11d0-a765-00a0c91e6bf6",
            "f81d4fae-7dec-11d0-a765-00a0c91e6bf67",
        ] {
            assert_eq!(parse_uuid(bad), None, "{bad:?}");
        }
    }
}
