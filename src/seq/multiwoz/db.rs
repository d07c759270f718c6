//! The MultiWOZ domain databases: executing `find_<domain>` ([`Databases::find`]) and the
//! verification of a search call against what the system offered ([`verify`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::dialogue::{Event, Turn, is_set};
use super::{DB_DOMAINS, db_path};
use crate::corpus::{CorpusError, read_json};

/// Normalised entity/value string for database comparisons: lower case, `&` → `and`, a leading
/// `the` dropped, only letters and digits kept.
pub fn norm(s: &str) -> String {
    let s = s.trim().to_lowercase().replace('&', " and ");
    let s = s.strip_prefix("the ").unwrap_or(&s);
    s.chars().filter(|c| c.is_alphanumeric()).collect()
}

/// Minutes after midnight of `H:MM`, `HH:MM` (optionally followed by `am`/`pm`).
pub(super) fn minutes(t: &str) -> Option<u32> {
    let t = t.trim().to_lowercase();
    let (t, pm) = match (t.strip_suffix("pm"), t.strip_suffix("am")) {
        (Some(x), _) => (x.trim().to_string(), true),
        (_, Some(x)) => (x.trim().to_string(), false),
        _ => (t.clone(), false),
    };
    let (h, m) = t.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    let h = if pm && h < 12 { h + 12 } else { h };
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// The domain databases.
pub(super) struct Databases {
    pub(super) tables: BTreeMap<String, Vec<Value>>,
}

/// The result of executing one search.
pub(super) enum Execution {
    Rows(Vec<String>),
    NotExecutable(String),
}

impl Databases {
    pub(super) fn load(root: &Path) -> Result<Databases, CorpusError> {
        let mut tables = BTreeMap::new();
        for d in DB_DOMAINS {
            let p = db_path(root, d);
            if !p.is_file() {
                continue;
            }
            let rows = read_json(&p)?
                .as_array()
                .cloned()
                .ok_or_else(|| CorpusError::Malformed {
                    path: p.clone(),
                    message: "expected a JSON array of entities".into(),
                })?;
            tables.insert(d.to_string(), rows);
        }
        Ok(Databases { tables })
    }

    /// Runs `find_<domain>` with 2.2 arguments; returns the matching entities' key (name, or
    /// trainID) normalised.
    pub(super) fn find(&self, domain: &str, args: &Map<String, Value>) -> Execution {
        let key = if domain == "train" { "trainID" } else { "name" };
        match self.matching(domain, args) {
            Ok(rows) => Execution::Rows(rows.into_iter().filter_map(|row| row[key].as_str().map(norm)).collect()),
            Err(why) => Execution::NotExecutable(why),
        }
    }

    /// The database rows `find_<domain>` with 2.2 arguments `args` matches, in database order;
    /// `Err` when the search cannot run (no database, a time that does not parse).
    pub(super) fn matching(&self, domain: &str, args: &Map<String, Value>) -> Result<Vec<&Value>, String> {
        let Some(rows) = self.tables.get(domain) else {
            return Err(format!("no database for {domain}"));
        };
        let mut filters = Vec::new();
        for (arg, value) in args {
            let suffix = arg.split_once('-').map(|(_, s)| s).unwrap_or(arg);
            let value = value.as_str().unwrap_or_default();
            let (field, time) = match (domain, suffix) {
                ("train", "leaveat") => ("leaveAt", true),
                ("train", "arriveby") => ("arriveBy", true),
                (_, s) => (s, false),
            };
            if time {
                let Some(m) = minutes(value) else {
                    return Err(format!("{arg}: time {value:?} does not parse"));
                };
                filters.push((field, suffix, None, Some(m)));
            } else {
                // 2.1 writes alternatives as `a|b`: either matches.
                let alternatives: Vec<String> = value
                    .split('|')
                    .map(|a| match norm(a) {
                        v if matches!(suffix, "parking" | "internet") && v == "free" => "yes".into(),
                        v => v,
                    })
                    .collect();
                filters.push((field, suffix, Some(alternatives), None));
            }
        }
        Ok(rows
            .iter()
            .filter(|row| {
                filters.iter().all(|(field, suffix, text, time)| {
                    let cell = row[*field]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| row[*field].to_string());
                    match (text, time) {
                        (Some(alternatives), _) => alternatives.contains(&norm(&cell)),
                        (None, Some(m)) => {
                            minutes(&cell).is_some_and(|c| if *suffix == "leaveat" { c >= *m } else { c <= *m })
                        }
                        _ => false,
                    }
                })
            })
            .collect())
    }

    pub(super) fn contains(&self, domain: &str, entity: &str) -> bool {
        let key = if domain == "train" { "trainID" } else { "name" };
        self.tables.get(domain).is_some_and(|rows| {
            rows.iter()
                .any(|r| r[key].as_str().is_some_and(|n| same_entity(&norm(n), entity)))
        })
    }
}

/// Whether the normalised database key `key` names the entity `mention` (a dialogue-act or
/// booked name): equal after [`norm`], or one a prefix of the other when the shorter has at
/// least 4 characters (`Rosa 's` ~ `rosa's bed and breakfast`, `meze bar restaurant` ~
/// `meze bar`).
pub(super) fn same_entity(key: &str, mention: &str) -> bool {
    let m = norm(mention);
    let (short, long) = if key.len() <= m.len() {
        (key, m.as_str())
    } else {
        (m.as_str(), key)
    };
    key == m || (short.len() >= 4 && long.starts_with(short))
}

/// The entity name (or train id) of a `booked` entry.
pub(super) fn booked_entity(domain: &str, entry: &Value) -> Option<String> {
    let key = if domain == "train" { "trainID" } else { "name" };
    entry[key].as_str().filter(|s| is_set(s)).map(str::to_string)
}

/// Verification of one search call. One rule decides, applied both ways: a search is verified
/// when the database's result agrees with what the system said in the episode.
///
/// - The system offered or booked an entity: it must be among the results (`verified`; else
///   `entity_not_in_results`, or `offered_entity_not_in_db` when no database row names it).
/// - It offered none: the results are empty exactly when it said `<Domain>-NoOffer`
///   (`verified_no_offer`: no results, and the system said so; `verified_named`: results, among
///   them the entity the user named; `verified_results`: results, the system neither named one
///   nor said there was none). A disagreement is `no_offer_but_results` (the system said nothing
///   matched, the database finds some) or `no_results_without_no_offer` (the database finds
///   nothing, the system did not say so).
///
/// Before: a search with no results was kept on a `NoOffer` (309 in dev and test) while one with
/// results and no named entity was dropped (225, `no_offered_entity`).
/// `not_executable`: bus and taxi have no database, or a time does not parse.
pub(super) fn verify(event: &Event, args: &Map<String, Value>, turns: &[Turn], dbs: &Databases) -> Value {
    let domain = event.domain.as_str();
    let rows = match dbs.find(domain, args) {
        Execution::Rows(r) => r,
        Execution::NotExecutable(why) => return json!({"status": "not_executable", "detail": why}),
    };
    let span = &turns[event.span.0..=event.span.1.min(turns.len() - 1)];
    let offered = event
        .booked
        .as_ref()
        .and_then(|b| booked_entity(domain, b))
        .or_else(|| {
            span.iter()
                .flat_map(|t| &t.offers)
                .filter(|(d, _)| d == domain)
                .map(|(_, n)| n.clone())
                .last()
        });
    let named = args
        .iter()
        .find(|(k, _)| k.ends_with("-name"))
        .and_then(|(_, v)| v.as_str())
        .filter(|n| rows.iter().any(|r| same_entity(r, n)));
    let said_no_offer = span.iter().any(|t| t.no_offer.iter().any(|d| d == domain));
    let status = match &offered {
        Some(e) if rows.iter().any(|r| same_entity(r, e)) => "verified",
        Some(e) if !dbs.contains(domain, e) => "offered_entity_not_in_db",
        Some(_) => "entity_not_in_results",
        None if rows.is_empty() && said_no_offer => "verified_no_offer",
        None if rows.is_empty() => "no_results_without_no_offer",
        None if said_no_offer => "no_offer_but_results",
        None if named.is_some() => "verified_named",
        None => "verified_results",
    };
    json!({"status": status, "results": rows.len(), "offered": offered})
}

/// The database field a 2.2 slot suffix of `domain` is compared with, when the database has one
/// whose values are free text or categories (`name`, `food`, `area`, `pricerange`, `type`,
/// `department`; train `departure`, `destination`, `day`). Times, numbers and yes/no flags are
/// not normalised here.
fn db_field(domain: &str, suffix: &str) -> Option<&'static str> {
    Some(match (domain, suffix) {
        ("train", "departure") => "departure",
        ("train", "destination") => "destination",
        ("train", "day") => "day",
        ("train", _) => return None,
        (_, "name") => "name",
        (_, "food") => "food",
        (_, "area") => "area",
        (_, "pricerange") => "pricerange",
        (_, "type") => "type",
        (_, "department") => "department",
        _ => return None,
    })
}

impl Databases {
    /// The database's spelling of a belief-state value (`cafe uno` → `caffe uno`,
    /// `pizza hut fenditton` → `pizza hut fen ditton`), or `None` when the value already is one
    /// or no single database value is close enough. Rules, in order: equal after [`norm`]; else
    /// the one database value within Levenshtein distance `max(1, len / 8)` of the normalised
    /// value (at least 5 characters; ties → none); else, for names, the one database name that
    /// starts with the value (`charlie` → `charlie chan`; never the other way round: a longer
    /// mention such as `de luca cucina and bar riverside brasserie` names two places). `a|b` alternatives and `dontcare` are left alone.
    pub(super) fn canonical(&self, domain: &str, suffix: &str, value: &str) -> Option<String> {
        let field = db_field(domain, suffix)?;
        let rows = self.tables.get(domain)?;
        if value.contains('|') || value == "dontcare" {
            return None;
        }
        let mut values: Vec<&str> = rows.iter().filter_map(|r| r[field].as_str()).collect();
        values.sort_unstable();
        values.dedup();
        let n = norm(value);
        if let Some(v) = values.iter().find(|v| norm(v) == n) {
            return (*v != value).then(|| v.to_string());
        }
        if n.chars().count() >= 5 {
            let limit = (n.chars().count() / 8).max(1);
            let close: Vec<(usize, &str)> = values
                .iter()
                .map(|v| (strsim::levenshtein(&norm(v), &n), *v))
                .filter(|(d, _)| *d <= limit)
                .collect();
            if let Some(best) = close.iter().map(|(d, _)| *d).min() {
                let at_best: Vec<&str> = close.iter().filter(|(d, _)| *d == best).map(|(_, v)| *v).collect();
                if let [one] = at_best.as_slice() {
                    return Some(one.to_string());
                }
            }
        }
        if field == "name" && n.chars().count() >= 4 {
            let hits: Vec<&str> = values.iter().copied().filter(|v| norm(v).starts_with(&n)).collect();
            if let [one] = hits.as_slice() {
                return Some(one.to_string());
            }
        }
        None
    }
}
