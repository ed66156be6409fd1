//! Relaxed Extended JSON, as mongod logs commands, turned back into BSON; and the
//! small readers of a log line's JSON fields.

use bson::{Bson, Document};
use serde_json::{Map, Value};

use mongotap_events::Micros;

pub(super) fn str_at<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key)?.as_str()
}

pub(super) fn int_at(m: &Map<String, Value>, key: &str) -> Option<i64> {
    int_of(m.get(key)?)
}

pub(super) fn u64_at(m: &Map<String, Value>, key: &str) -> Option<u64> {
    int_at(m, key).and_then(|i| u64::try_from(i).ok())
}

pub(super) fn bool_at(m: &Map<String, Value>, key: &str) -> bool {
    match m.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(v) => int_of(v) == Some(1),
        None => false,
    }
}

/// An integer as the log writes one: a JSON number (relaxed), possibly a whole
/// double, or `{"$numberLong": "..."}` / `{"$numberInt": "..."}` (canonical).
pub(super) fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
        }),
        Value::Object(o) => o.get("$numberLong").or_else(|| o.get("$numberInt"))?.as_str()?.parse().ok(),
        _ => None,
    }
}

/// `t` (`{"$date": "2020-05-01T15:16:17.180+00:00"}`, or milliseconds) in microseconds.
pub(super) fn date_micros(t: &Value) -> Option<Micros> {
    let micros = match t.get("$date")? {
        Value::String(s) => parse_timestamp(s)?,
        other => int_of(other)?.checked_mul(1000)?,
    };
    Micros::try_from(micros).ok()
}

/// An ISO-8601 timestamp as mongod writes them (`iso8601-utc`: `+00:00`,
/// `iso8601-local`: `-05:00`, also `-0500`, `Z`, none for UTC; fractions of any
/// length) in microseconds since the epoch. Written here rather than taken from
/// `bson::DateTime`, whose RFC 3339 parser refuses `-0500` and keeps milliseconds only.
pub(super) fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0_i64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-') && at(7, b'-') && (at(10, b'T') || at(10, b' ')) && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0;
    if at(i, b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        // The first six digits, padded on the right.
        for k in 0..6 {
            micros = micros * 10 + b[start..i].get(k).map_or(0, |&c| i64::from(c - b'0'));
        }
    }
    let offset = match b.get(i) {
        None => 0,
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(&sign) if sign == b'+' || sign == b'-' => {
            let (h, m) = match b.len() - (i + 1) {
                5 if at(i + 3, b':') => (num(i + 1, 2)?, num(i + 4, 2)?),
                4 => (num(i + 1, 2)?, num(i + 3, 2)?),
                2 => (num(i + 1, 2)?, 0),
                _ => return None,
            };
            let seconds = h * 3600 + m * 60;
            if sign == b'-' {
                -seconds
            } else {
                seconds
            }
        }
        Some(_) => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(seconds * 1_000_000 + micros)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar. Years are
/// counted from March, so that February's leap day ends one; 400 years (146,097 days)
/// make a cycle.
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let cycle = y.div_euclid(400);
    let year_of_cycle = y.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_cycle = year_of_cycle * 365 + year_of_cycle / 4 - year_of_cycle / 100 + day_of_year;
    // 719,468 days from 0000-03-01 to 1970-01-01.
    cycle * 146_097 + day_of_cycle - 719_468
}

/// A JSON object in Relaxed (or Canonical) Extended JSON as a BSON document, its key
/// order kept (serde_json's `preserve_order`).
pub(super) fn to_document(m: Map<String, Value>) -> Document {
    m.into_iter().map(|(k, v)| (k, to_bson(v))).collect()
}

pub(super) fn to_bson(v: Value) -> Bson {
    match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Bson::String(s),
        Value::Array(a) => Bson::Array(a.into_iter().map(to_bson).collect()),
        Value::Object(m) => match wrapper(&m) {
            Some(b) => b,
            None => Bson::Document(to_document(m)),
        },
    }
}

/// The BSON value an Extended JSON wrapper (`{"$oid": ...}`, `{"$date": ...}`) stands
/// for; `None` for any other object (query operators are objects like any other). A
/// wrapper that does not parse becomes its JSON text: a literal either way.
pub(super) fn wrapper(m: &Map<String, Value>) -> Option<Bson> {
    if m.len() > 2 {
        return None;
    }
    let text = || Bson::String(Value::Object(m.clone()).to_string());
    match m.keys().next()?.as_str() {
        // mongod writes `{"$date": "...+00:00"}`; bson's parser wants RFC 3339 only.
        "$date" if m.len() == 1 => {
            let millis = match m.get("$date")? {
                Value::String(s) => parse_timestamp(s).map(|us| us.div_euclid(1000)),
                other => int_of(other),
            };
            Some(millis.map_or_else(text, |ms| Bson::DateTime(bson::DateTime::from_millis(ms))))
        }
        // mongod writes `"subType": "0"`; bson's parser wants two hex digits.
        "$binary" => Some(binary(m).map_or_else(text, Bson::Binary)),
        "$oid" | "$numberInt" | "$numberLong" | "$numberDouble" | "$numberDecimal" | "$uuid"
        | "$timestamp" | "$regularExpression" | "$minKey" | "$maxKey" | "$symbol" | "$code"
        | "$dbPointer" | "$undefined" => {
            Some(Bson::try_from(Value::Object(m.clone())).unwrap_or_else(|_| text()))
        }
        _ => None,
    }
}

/// `{"$binary": {"base64": ..., "subType": "0"}}`, or the legacy `{"$binary": ..., "$type": ...}`.
pub(super) fn binary(m: &Map<String, Value>) -> Option<bson::Binary> {
    let (base64, subtype) = match m.get("$binary")? {
        Value::Object(b) => (b.get("base64")?.as_str()?, b.get("subType")?.as_str()?),
        Value::String(s) => (s.as_str(), m.get("$type")?.as_str()?),
        _ => return None,
    };
    let subtype = bson::spec::BinarySubtype::from(u8::from_str_radix(subtype, 16).ok()?);
    bson::Binary::from_base64(base64, subtype).ok()
}
