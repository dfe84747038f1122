//! GEO commands (Redis's `geo.c`, `geohash.c`, `geohash_helper.c`) over the sorted sets
//! of `crate::collections::zset`: a GEO set is a zset whose scores are 52-bit geohashes
//! (26 bits of longitude and 26 of latitude, interleaved; latitude limited to ±85.05112878
//! as Web Mercator).
//!
//! A search covers its area with the geohash box of the centre plus its eight neighbours
//! at a precision chosen from the radius, reads each box as one score interval of the
//! zset, and keeps the points whose haversine distance (or box test) passes — Redis's
//! method step by step, so results, distances and order match redis-server to the digit:
//! the boxes are visited in Redis's order, points are kept in zset order within a box,
//! and ASC/DESC sort with glibc's merge sort (or Redis's partial quicksort under COUNT),
//! see `sort_algo`.

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_ZSET};
use super::sort_algo::{merge_sort, partial_qsort};
use super::zsets::parse_score;
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, READONLY, WRITE};
use crate::arena::Ref;
use crate::collections::zset::{self, AddFlags, AddOut, Limits, Pairs};
use crate::keyspace::{Kind, Ttl};
use crate::protocol::reply::Resp;
use std::cmp::Ordering;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("geoadd", -5, WRITE | DENYOOM, "geo", geoadd).keys(1, 1, 1).doc("Add one or more geospatial items in the geospatial index represented using a sorted set", "3.2.0"),
    CommandSpec::new("geodist", -4, READONLY, "geo", geodist).keys(1, 1, 1).doc("Returns the distance between two members of a geospatial index", "3.2.0"),
    CommandSpec::new("geohash", -2, READONLY, "geo", geohash).keys(1, 1, 1).doc("Returns members of a geospatial index as standard geohash strings", "3.2.0"),
    CommandSpec::new("geopos", -2, READONLY, "geo", geopos).keys(1, 1, 1).doc("Returns longitude and latitude of members of a geospatial index", "3.2.0"),
    CommandSpec::new("georadius", -6, WRITE | DENYOOM, "geo", georadius).keys(1, 1, 1).doc("Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", "3.2.0"),
    CommandSpec::new("georadiusbymember", -5, WRITE | DENYOOM, "geo", georadiusbymember).keys(1, 1, 1).doc("Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", "3.2.0"),
    CommandSpec::new("georadius_ro", -6, READONLY, "geo", georadius_ro).keys(1, 1, 1).doc("A read-only variant for GEORADIUS", "3.2.10"),
    CommandSpec::new("georadiusbymember_ro", -5, READONLY, "geo", georadiusbymember_ro).keys(1, 1, 1).doc("A read-only variant for GEORADIUSBYMEMBER", "3.2.10"),
    CommandSpec::new("geosearch", -7, READONLY, "geo", geosearch).keys(1, 1, 1).doc("Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", "6.2.0"),
    CommandSpec::new("geosearchstore", -8, WRITE | DENYOOM, "geo", geosearchstore).keys(1, 2, 1).doc("Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", "6.2.0"),
];

// ---- geohash ---------------------------------------------------------------------------------

/// 26 steps: 52 bits, what a double holds exactly.
const STEP_MAX: u8 = 26;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
/// Redis's EARTH_RADIUS_IN_METERS (the WGS-84 quadratic mean radius).
const EARTH_RADIUS_M: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}
fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A geohash prefix of `step` bits per axis (`step == 0 && bits == 0`: none, Redis's
/// GZERO).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    const ZERO: Hash = Hash { bits: 0, step: 0 };
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
    /// The prefix as a 52-bit score.
    fn align52(&self) -> u64 {
        self.bits << (52 - self.step as u32 * 2)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Area {
    lon_min: f64,
    lon_max: f64,
    lat_min: f64,
    lat_max: f64,
}

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The inverse of `spread`: the even bits of `v` packed into 32 bits.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// Latitude on the even bits, longitude on the odd ones (so the top bit is longitude's,
/// as in a standard geohash).
fn encode_in(
    lon_range: (f64, f64),
    lat_range: (f64, f64),
    lon: f64,
    lat: f64,
    step: u8,
) -> Option<Hash> {
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.0 || lat > lat_range.1 || lon < lon_range.0 || lon > lon_range.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let lon_off = (lon - lon_range.0) / (lon_range.1 - lon_range.0) * scale;
    Some(Hash {
        bits: spread(lat_off as u32) | (spread(lon_off as u32) << 1),
        step,
    })
}

fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in((LON_MIN, LON_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

/// The cell a hash names (its `step` is never 0 here).
fn decode_area(h: Hash) -> Area {
    let lat_i = squash(h.bits);
    let lon_i = squash(h.bits >> 1);
    let div = (1u64 << h.step) as f64;
    let lat_scale = LAT_MAX - LAT_MIN;
    let lon_scale = LON_MAX - LON_MIN;
    // `+ 1` wraps as C's 32-bit unsigned arithmetic does.
    Area {
        lat_min: LAT_MIN + (lat_i as f64 / div) * lat_scale,
        lat_max: LAT_MIN + (lat_i.wrapping_add(1) as f64 / div) * lat_scale,
        lon_min: LON_MIN + (lon_i as f64 / div) * lon_scale,
        lon_max: LON_MIN + (lon_i.wrapping_add(1) as f64 / div) * lon_scale,
    }
}

/// C's conversion of a double to uint64_t as x86-64 code does it (scores outside
/// 0..2^64 are undefined in C; this is what redis-server computes for them).
fn score_bits(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let cvtt = |x: f64| -> u64 {
        if x.is_nan() || !(-TWO63..TWO63).contains(&x) {
            1u64 << 63
        } else {
            x as i64 as u64
        }
    };
    if score.is_nan() || score < TWO63 {
        cvtt(score)
    } else {
        cvtt(score - TWO63) ^ (1u64 << 63)
    }
}

/// A score's point: the centre of its 52-bit cell, clamped to the valid ranges.
fn decode_score(score: f64) -> (f64, f64) {
    let a = decode_area(Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    });
    let lon = ((a.lon_min + a.lon_max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat_min + a.lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - h.step as u32 * 2;
    let mut x = h.bits & 0xAAAA_AAAA_AAAA_AAAA;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xAAAA_AAAA_AAAA_AAAAu64 >> shift;
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - h.step as u32 * 2;
    let x = h.bits & 0xAAAA_AAAA_AAAA_AAAA;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xAAAA_AAAA_AAAA_AAAAu64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    h.bits = x | y;
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// Redis's geohashGetLatDistance.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Redis's haversine (geohashGetDistance), with its shortcut for equal longitudes.
fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

fn steps_for_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

#[derive(Clone, Copy)]
enum Shape {
    Radius(f64),
    /// Width, height.
    Box(f64, f64),
}

struct Search {
    lon: f64,
    lat: f64,
    shape: Shape,
    /// Meters per unit.
    conversion: f64,
}

impl Search {
    /// [min lon, min lat, max lon, max lat] of the area (Redis's geohashBoundingBox).
    fn bounds(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box(w, h) => (h / 2.0, w / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let d = if self.lat < 0.0 { bottom } else { top };
        [
            self.lon - d,
            self.lat - lat_delta,
            self.lon + d,
            self.lat + lat_delta,
        ]
    }

    /// The centre box and its neighbours, in the order Redis visits them: centre, N, S,
    /// E, W, NE, NW, SE, SW (boxes that cannot hold a match are zero).
    fn boxes(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius_m = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = steps_for_radius(radius_m, self.lat);
        let Some(mut hash) = encode(self.lon, self.lat, steps) else {
            return [Hash::ZERO; 9];
        };
        let neighbours = |h: Hash| -> [Hash; 8] {
            [
                moved(h, 0, 1),   // north
                moved(h, 0, -1),  // south
                moved(h, 1, 0),   // east
                moved(h, -1, 0),  // west
                moved(h, 1, 1),   // north-east
                moved(h, -1, 1),  // north-west
                moved(h, 1, -1),  // south-east
                moved(h, -1, -1), // south-west
            ]
        };
        let mut nb = neighbours(hash);
        let mut area = decode_area(hash);
        let decrease = decode_area(nb[0]).lat_max < max_lat
            || decode_area(nb[1]).lat_min > min_lat
            || decode_area(nb[2]).lon_max < max_lon
            || decode_area(nb[3]).lon_min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            if let Some(h) = encode(self.lon, self.lat, steps) {
                hash = h;
            }
            nb = neighbours(hash);
            area = decode_area(hash);
        }
        if steps >= 2 {
            const N: usize = 0;
            const S: usize = 1;
            const E: usize = 2;
            const W: usize = 3;
            const NE: usize = 4;
            const NW: usize = 5;
            const SE: usize = 6;
            const SW: usize = 7;
            if area.lat_min < min_lat {
                for i in [S, SW, SE] {
                    nb[i] = Hash::ZERO;
                }
            }
            if area.lat_max > max_lat {
                for i in [N, NE, NW] {
                    nb[i] = Hash::ZERO;
                }
            }
            if area.lon_min < min_lon {
                for i in [W, SW, NW] {
                    nb[i] = Hash::ZERO;
                }
            }
            if area.lon_max > max_lon {
                for i in [E, SE, NE] {
                    nb[i] = Hash::ZERO;
                }
            }
        }
        let mut out = [hash; 9];
        out[1..].copy_from_slice(&nb);
        out
    }

    /// The point of `score` with its distance from the centre, if inside the area.
    fn within(&self, score: f64) -> Option<(f64, f64, f64)> {
        let (lon, lat) = decode_score(score);
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                if d > r * self.conversion {
                    return None;
                }
                Some((lon, lat, d))
            }
            Shape::Box(w, h) => {
                let (w_m, h_m) = (w * self.conversion, h * self.conversion);
                if lat_distance(lat, self.lat) > h_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > w_m / 2.0 {
                    return None;
                }
                Some((lon, lat, distance(self.lon, self.lat, lon, lat)))
            }
        }
    }
}

#[derive(Clone)]
struct Point {
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    dist: f64,
}

/// Points of zset `e` inside the search area, in Redis's visiting order; with `limit`
/// (ANY), stops once that many are found.
fn points_in(ks: &crate::keyspace::Keyspace, e: Ref, s: &Search, limit: u64) -> Vec<Point> {
    let boxes = s.boxes();
    let mut out: Vec<Point> = Vec::new();
    let full = |out: &Vec<Point>| limit != 0 && out.len() as u64 >= limit;
    let mut last: usize = 0;
    for (i, b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        // A huge radius can make neighbours equal: a box equal to the one processed
        // just before is skipped (Redis compares with the last one only when that was
        // not the centre box).
        if last != 0 && *b == boxes[last] {
            continue;
        }
        if full(&out) {
            break;
        }
        let min = b.align52() as f64;
        let mut next = *b;
        next.bits += 1;
        let max = next.align52() as f64;
        let start = zset::count_prefix(ks, e, &|sc, _| sc < min);
        zset::walk(ks, e, start, false, |m, sc| {
            if sc >= max {
                return false;
            }
            if let Some((lon, lat, dist)) = s.within(sc) {
                out.push(Point {
                    member: m.to_vec(),
                    score: sc,
                    lon,
                    lat,
                    dist,
                });
            }
            !full(&out)
        });
        last = i;
    }
    out
}

// ---- replies and argument helpers ------------------------------------------------------------

/// C's `%.17Lf` with trailing zeros (and a bare dot) removed, "-0" as "0": Redis's
/// LD_STR_HUMAN for a double's exact value.
fn human(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.is_nan() {
        return "nan".into();
    }
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

fn reply_coord(ctx: &mut Ctx, v: f64) {
    let s = human(v);
    if ctx.client.resp == Resp::V3 {
        ctx.out.raw(b",");
        ctx.out.raw(s.as_bytes());
        ctx.out.raw(b"\r\n");
    } else {
        ctx.out.bulk(s.as_bytes());
    }
}

/// Redis's fixedpoint_d2string with 4 digits: `llrint(d * 10000)` printed with a dot.
fn distance_text(d: f64) -> String {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d == 0.0 {
        return "0.0000".into();
    }
    let scaled = (d * 10000.0).round_ties_even();
    // llrint of a value beyond i64 is undefined in C; x86-64 gives i64::MIN.
    let v: i64 = if scaled.is_nan() || !(-TWO63..TWO63).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    let neg = v < 0;
    let u = v.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if neg { "-" } else { "" },
        u / 10000,
        u % 10000
    )
}

/// A longitude, latitude pair as GEOADD and FROMLONLAT take it.
fn lon_lat(a: &[u8], b: &[u8]) -> Result<(f64, f64), CmdError> {
    let lon = parse_score(a).ok_or(CmdError::NotFloat)?;
    let lat = parse_score(b).ok_or(CmdError::NotFloat)?;
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(CmdError::err(format!(
            "invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

fn unit(u: &[u8]) -> Result<f64, CmdError> {
    Ok(match u.to_ascii_lowercase().as_slice() {
        b"m" => 1.0,
        b"km" => 1000.0,
        b"ft" => 0.3048,
        b"mi" => 1609.34,
        _ => {
            return Err(CmdError::err(
                "unsupported unit provided. please use M, KM, FT, MI",
            ))
        }
    })
}

/// `<radius> <unit>`: (radius, meters per unit).
fn radius_arg(r: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = parse_score(r).ok_or_else(|| CmdError::err("need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

fn read_zset(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms);
    super::of_kind(ctx, e, Kind::ZSet)
}

// ---- GEOADD / GEODIST / GEOHASH / GEOPOS --------------------------------------------------

fn geoadd(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let mut fl = AddFlags::default();
    let mut ch = false;
    let mut idx = 2;
    while idx < ctx.args.len() {
        if ctx.args.is(idx, "nx") {
            fl.nx = true;
        } else if ctx.args.is(idx, "xx") {
            fl.xx = true;
        } else if ctx.args.is(idx, "ch") {
            ch = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = ctx.args.len() - idx;
    if !rest.is_multiple_of(3) || (fl.xx && fl.nx) {
        return Err(CmdError::Syntax);
    }
    if rest == 0 {
        // ZADD's own check on the rewritten arguments.
        return Err(CmdError::Syntax);
    }
    let n = rest / 3;
    let mut scores = Vec::with_capacity(n);
    for j in 0..n {
        let at = idx + 3 * j;
        let (lon, lat) = lon_lat(ctx.args.get(at), ctx.args.get(at + 1))?;
        let h = encode(lon, lat, STEP_MAX).map_or(0, |h| h.align52());
        scores.push(h as f64);
    }
    let db = ctx.db();
    let lim = Limits::from_config(&ctx.srv.config);
    let mut e = match ctx.srv.ks.lookup_write(db, key, ctx.now_ms) {
        Some(e) if ctx.srv.ks.kind(e) != Kind::ZSet => return Err(CmdError::WrongType),
        Some(e) => e,
        None if fl.xx => {
            ctx.out.int(0);
            return Ok(());
        }
        None => {
            let first = ctx.args.get(idx + 2).len() as u64;
            let skiplist = lim.max_entries == 0 || lim.max_value < first;
            zset::create(&mut ctx.srv.ks, db, key, skiplist)
        }
    };
    let (mut added, mut updated) = (0u64, 0u64);
    for (j, &sc) in scores.iter().enumerate() {
        let m = ctx.args.get(idx + 3 * j + 2);
        let (ne, out) = zset::add(&mut ctx.srv.ks, db, e, m, sc, fl, lim);
        e = ne;
        match out {
            AddOut::Added(_) => added += 1,
            AddOut::Updated(_) => updated += 1,
            _ => {}
        }
    }
    if zset::len(&ctx.srv.ks, e) == 0 {
        ctx.srv.ks.delete_entry(db, e);
    }
    ctx.dirty(added + updated);
    ctx.out
        .int((if ch { added + updated } else { added }) as i64);
    // Redis runs GEOADD as a ZADD, whose event it is.
    if added + updated > 0 {
        notify(ctx, NOTIFY_ZSET, "zadd", key);
    }
    Ok(())
}

fn geodist(ctx: &mut Ctx) -> CmdResult {
    let mut to_m = 1.0;
    if ctx.args.len() == 5 {
        to_m = unit(ctx.args.get(4))?;
    } else if ctx.args.len() > 5 {
        return Err(CmdError::Syntax);
    }
    let key = ctx.args.get(1);
    let Some(e) = read_zset(ctx, key)? else {
        ctx.out.null();
        return Ok(());
    };
    let ks = &ctx.srv.ks;
    let (Some(s1), Some(s2)) = (
        zset::score(ks, e, ctx.args.get(2)),
        zset::score(ks, e, ctx.args.get(3)),
    ) else {
        ctx.out.null();
        return Ok(());
    };
    let (lon1, lat1) = decode_score(s1);
    let (lon2, lat2) = decode_score(s2);
    let d = distance(lon1, lat1, lon2, lat2) / to_m;
    ctx.out.bulk(distance_text(d).as_bytes());
    Ok(())
}

fn geohash(ctx: &mut Ctx) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let key = ctx.args.get(1);
    let e = read_zset(ctx, key)?;
    ctx.out.array(ctx.args.len() - 2);
    for j in 2..ctx.args.len() {
        let Some(sc) = e.and_then(|e| zset::score(&ctx.srv.ks, e, ctx.args.get(j))) else {
            ctx.out.null();
            continue;
        };
        // Stored hashes use latitudes within ±85.05; a standard geohash uses ±90, so
        // the point is re-encoded.
        let (lon, lat) = decode_score(sc);
        let bits = encode_in((-180.0, 180.0), (-90.0, 90.0), lon, lat, 26).map_or(0, |h| h.bits);
        let mut buf = [0u8; 11];
        for (i, c) in buf.iter_mut().enumerate() {
            let idx = if i == 10 {
                0
            } else {
                ((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize
            };
            *c = ALPHABET[idx];
        }
        ctx.out.bulk(&buf);
    }
    Ok(())
}

fn geopos(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let e = read_zset(ctx, key)?;
    ctx.out.array(ctx.args.len() - 2);
    for j in 2..ctx.args.len() {
        let Some(sc) = e.and_then(|e| zset::score(&ctx.srv.ks, e, ctx.args.get(j))) else {
            ctx.out.null_array();
            continue;
        };
        let (lon, lat) = decode_score(sc);
        ctx.out.array(2);
        reply_coord(ctx, lon);
        reply_coord(ctx, lat);
    }
    Ok(())
}

// ---- searches --------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind2 {
    /// GEORADIUS: centre and radius at arguments 2..6.
    Coords,
    /// GEORADIUSBYMEMBER: member and radius at arguments 2..5.
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE: everything in options.
    Search,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

fn georadius(ctx: &mut Ctx) -> CmdResult {
    search_generic(ctx, 1, Kind2::Coords, false, true)
}
fn georadiusbymember(ctx: &mut Ctx) -> CmdResult {
    search_generic(ctx, 1, Kind2::Member, false, true)
}
fn georadius_ro(ctx: &mut Ctx) -> CmdResult {
    search_generic(ctx, 1, Kind2::Coords, false, false)
}
fn georadiusbymember_ro(ctx: &mut Ctx) -> CmdResult {
    search_generic(ctx, 1, Kind2::Member, false, false)
}
fn geosearch(ctx: &mut Ctx) -> CmdResult {
    search_generic(ctx, 1, Kind2::Search, false, false)
}
fn geosearchstore(ctx: &mut Ctx) -> CmdResult {
    search_generic(ctx, 2, Kind2::Search, true, false)
}

/// Redis's georadiusGeneric: the same argument walk (so the same error wins), search,
/// sort, reply or store.
fn search_generic(
    ctx: &mut Ctx,
    src: usize,
    kind: Kind2,
    searchstore: bool,
    may_store: bool,
) -> CmdResult {
    let src_key = ctx.args.get(src);
    let zobj = read_zset(ctx, src_key)?;
    let mut center: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let mut store: Option<usize> = if searchstore { Some(1) } else { None };
    let mut storedist = false;
    let base = match kind {
        Kind2::Coords => {
            center = Some(lon_lat(ctx.args.get(2), ctx.args.get(3))?);
            let (r, conv) = radius_arg(ctx.args.get(4), ctx.args.get(5))?;
            shape = Some((Shape::Radius(r), conv));
            6
        }
        Kind2::Member => {
            if let Some(e) = zobj {
                let Some(sc) = zset::score(&ctx.srv.ks, e, ctx.args.get(2)) else {
                    return Err(CmdError::err("could not decode requested zset member"));
                };
                center = Some(decode_score(sc));
                let (r, conv) = radius_arg(ctx.args.get(3), ctx.args.get(4))?;
                shape = Some((Shape::Radius(r), conv));
            }
            5
        }
        Kind2::Search => {
            if searchstore {
                3
            } else {
                2
            }
        }
    };
    let search = kind == Kind2::Search;
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut order = Order::None;
    let mut count: i64 = 0;
    let argc = ctx.args.len();
    let mut i = base;
    while i < argc {
        let left = argc - i - 1;
        let is = |w: &str| ctx.args.is(i, w);
        if is("withdist") {
            withdist = true;
        } else if is("withhash") {
            withhash = true;
        } else if is("withcoord") {
            withcoord = true;
        } else if is("any") {
            any = true;
        } else if is("asc") {
            order = Order::Asc;
        } else if is("desc") {
            order = Order::Desc;
        } else if is("count") && left >= 1 {
            count = ctx.args.i64(i + 1)?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if (is("store") || is("storedist")) && left >= 1 && may_store && !search {
            storedist = is("storedist");
            store = Some(i + 1);
            i += 1;
        } else if is("storedist") && searchstore {
            storedist = true;
        } else if is("frommember") && left >= 1 && search && !fromloc {
            if let Some(e) = zobj {
                let Some(sc) = zset::score(&ctx.srv.ks, e, ctx.args.get(i + 1)) else {
                    return Err(CmdError::err("could not decode requested zset member"));
                };
                center = Some(decode_score(sc));
            }
            frommember = true;
            i += 1;
        } else if is("fromlonlat") && left >= 2 && search && !frommember {
            center = Some(lon_lat(ctx.args.get(i + 1), ctx.args.get(i + 2))?);
            fromloc = true;
            i += 2;
        } else if is("byradius") && left >= 2 && search && !bybox {
            let (r, conv) = radius_arg(ctx.args.get(i + 1), ctx.args.get(i + 2))?;
            shape = Some((Shape::Radius(r), conv));
            byradius = true;
            i += 2;
        } else if is("bybox") && left >= 3 && search && !byradius {
            let w = parse_score(ctx.args.get(i + 1))
                .ok_or_else(|| CmdError::err("need numeric width"))?;
            let h = parse_score(ctx.args.get(i + 2))
                .ok_or_else(|| CmdError::err("need numeric height"))?;
            if h < 0.0 || w < 0.0 {
                return Err(CmdError::err("height or width cannot be negative"));
            }
            let conv = unit(ctx.args.get(i + 3))?;
            shape = Some((Shape::Box(w, h), conv));
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        return Err(CmdError::err(format!(
            "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if searchstore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    let name = String::from_utf8_lossy(ctx.args.get(0)).into_owned();
    if search && !(frommember || fromloc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && !(byradius || bybox) {
        return Err(CmdError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    let db = ctx.db();
    let Some(e) = zobj else {
        if let Some(s) = store {
            let dst = ctx.args.get(s);
            if ctx.srv.ks.delete_no_lookup(db, dst) {
                ctx.dirty(1);
                notify(ctx, NOTIFY_GENERIC, "del", dst);
            }
            ctx.out.int(0);
        } else {
            ctx.out.array(0);
        }
        return Ok(());
    };
    let (Some((lon, lat)), Some((shape, conversion))) = (center, shape) else {
        // Every path that reaches here with a source key has set both.
        return Err(CmdError::Syntax);
    };
    if count != 0 && order == Order::None && !any {
        order = Order::Asc;
    }
    let s = Search {
        lon,
        lat,
        shape,
        conversion,
    };
    let mut pts = points_in(&ctx.srv.ks, e, &s, if any { count as u64 } else { 0 });
    if pts.is_empty() && store.is_none() {
        ctx.out.array(0);
        return Ok(());
    }
    let total = pts.len();
    let returned = if count == 0 || (total as u64) < count as u64 {
        total
    } else {
        count as usize
    };
    if order != Order::None {
        let desc = order == Order::Desc;
        let mut cmp = |a: &Point, b: &Point| {
            let c = if a.dist > b.dist {
                Ordering::Greater
            } else if a.dist == b.dist {
                Ordering::Equal
            } else {
                Ordering::Less
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        if returned == total {
            merge_sort(&mut pts, &mut cmp);
        } else {
            partial_qsort(&mut pts, 0, returned as i64 - 1, &mut cmp);
        }
    }
    pts.truncate(returned);
    match store {
        None => {
            let opts = withdist as usize + withcoord as usize + withhash as usize;
            ctx.out.array(returned);
            for p in &pts {
                if opts > 0 {
                    ctx.out.array(opts + 1);
                }
                ctx.out.bulk(&p.member);
                if withdist {
                    ctx.out.bulk(distance_text(p.dist / conversion).as_bytes());
                }
                if withhash {
                    ctx.out.int(p.score as i64);
                }
                if withcoord {
                    ctx.out.array(2);
                    reply_coord(ctx, p.lon);
                    reply_coord(ctx, p.lat);
                }
            }
        }
        Some(s) => {
            let dst = ctx.args.get(s);
            if returned > 0 {
                let pairs: Pairs = pts
                    .into_iter()
                    .map(|p| {
                        let sc = if storedist {
                            p.dist / conversion
                        } else {
                            p.score
                        };
                        (p.member, sc)
                    })
                    .collect();
                let bytes: u64 = pairs.iter().map(|(m, _)| m.len() as u64 + 64).sum();
                ctx.ensure_arena_room(bytes)?;
                let lim = Limits::from_config(&ctx.srv.config);
                // An expired destination fires `expired` before it is replaced, as
                // Redis's setKey looks it up first.
                ctx.srv.ks.find(db, dst, ctx.now_ms);
                zset::create_from(&mut ctx.srv.ks, db, dst, pairs, Ttl::Clear, lim);
                ctx.dirty(returned as u64);
                let event = if searchstore {
                    "geosearchstore"
                } else {
                    "georadiusstore"
                };
                notify(ctx, NOTIFY_ZSET, event, dst);
            } else if ctx.srv.ks.delete_no_lookup(db, dst) {
                ctx.dirty(1);
                notify(ctx, NOTIFY_GENERIC, "del", dst);
            }
            ctx.out.int(returned as i64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for v in [0u32, 1, 0xFFFF_FFFF, 0x1234_5678, 1 << 25] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn known_points_match_redis() {
        // GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania.
        let p = encode(13.361389, 38.115556, STEP_MAX).unwrap().align52();
        let c = encode(15.087269, 37.502669, STEP_MAX).unwrap().align52();
        assert_eq!(p, 3479099956230698);
        assert_eq!(c, 3479447370796909);
        let (lon1, lat1) = decode_score(p as f64);
        let (lon2, lat2) = decode_score(c as f64);
        assert_eq!(
            distance_text(distance(lon1, lat1, lon2, lat2)),
            "166274.1516"
        );
        assert_eq!(human(lon1), "13.36138933897018433");
        assert_eq!(human(lat1), "38.11555639549629859");
    }

    #[test]
    fn distance_text_rounds_as_llrint() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(0.00005), "0.0000");
        assert_eq!(distance_text(1.23456), "1.2346");
        assert_eq!(distance_text(12345.6), "12345.6000");
    }

    #[test]
    fn garbage_scores_decode_like_redis() {
        assert_eq!(score_bits(-1.0), u64::MAX);
        assert_eq!(score_bits(f64::INFINITY), 0);
        assert_eq!(score_bits(f64::NAN), 1 << 63);
        let (lon, lat) = decode_score(-1.0);
        assert!((LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat));
    }
}
