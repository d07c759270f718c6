//! Which shard computes which stage item: longest-processing-time-first packing on an estimated
//! cost (issue 34 item 2).
//!
//! Every shard computes the same [`Assignment`] from cheap metadata (the item names, their group
//! and an estimated cost, e.g. database file bytes × questions; no hashing), so no shard needs to
//! talk to another. The rule (Graham's LPT): items by cost, largest first (ties by name), each to
//! the shard with the smallest load so far (ties by the lower index). Groups (databases, the
//! names the later per-group stages — variants, trajectory segments — claim with) are packed
//! the same way on their own, each costing the sum of its items: those stages run in a round of
//! their own (after every compile item is stored), so they are balanced as a round, not as a
//! follow-up of the batches (by the shard of a group's largest batch, round two's slowest shard
//! did 2.6× the average on sel-spider). Names the assignment does not know go by their key
//! digest ([`shard_of`]).

use std::collections::BTreeMap;

/// One stage item to place: its name (what [`super::Store::claim`] is asked with), its group
/// (e.g. the database) and its estimated cost (any unit, only compared and summed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's name, e.g. `world_1` or `world_1#2` (the third question batch).
    pub name: String,
    /// The group the item belongs to, e.g. the database id.
    pub group: String,
    /// Estimated cost (database file bytes × questions for a text-to-SQL batch).
    pub cost: u64,
}

/// The shard of every item and group, and each shard's estimated load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    items: BTreeMap<String, u64>,
    groups: BTreeMap<String, u64>,
    loads: Vec<u64>,
    group_loads: Vec<u64>,
}

impl Assignment {
    /// Packs `items` into `count` shards (at least 1) by longest-processing-time-first (module
    /// docs). Deterministic: the same items give the same assignment in every process.
    pub fn pack(items: &[Item], count: u64) -> Assignment {
        let count = count.max(1) as usize;
        let mut order: Vec<&Item> = items.iter().collect();
        order.sort_by(|a, b| b.cost.cmp(&a.cost).then_with(|| a.name.cmp(&b.name)));
        let mut a = Assignment {
            loads: vec![0; count],
            ..Assignment::default()
        };
        for item in order {
            let (shard, _) = a
                .loads
                .iter()
                .enumerate()
                .min_by_key(|&(i, load)| (*load, i))
                .expect("at least one shard");
            a.loads[shard] += item.cost;
            a.items.insert(item.name.clone(), shard as u64);
        }
        // The groups, packed on their own (module docs).
        let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
        for item in items {
            *totals.entry(item.group.as_str()).or_default() += item.cost;
        }
        a.pack_groups(totals.into_iter().map(|(g, c)| (g.to_string(), c)).collect());
        a
    }

    /// This assignment with its groups packed again on `costs` (group name, cost; the items
    /// keep their shards): what round two does once the compiled build gives each group's cost
    /// of the later stages ([`later_cost`]). Every round-two shard and the merge compute the same
    /// costs from the same build, hence the same placement. Groups not in `costs` are no longer
    /// placed (their names go by digest).
    pub fn with_groups(&self, costs: Vec<(String, u64)>) -> Assignment {
        let mut a = Assignment {
            items: self.items.clone(),
            loads: self.loads.clone(),
            ..Assignment::default()
        };
        a.pack_groups(costs);
        a
    }

    /// Packs `groups` (name, cost) over the shards by LPT (largest first, ties by name; each to
    /// the least loaded shard, ties by the lower index) into `groups` and `group_loads`.
    fn pack_groups(&mut self, mut groups: Vec<(String, u64)>) {
        groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        self.groups.clear();
        self.group_loads = vec![0u64; self.loads.len().max(1)];
        for (group, cost) in groups {
            let (shard, _) = self
                .group_loads
                .iter()
                .enumerate()
                .min_by_key(|&(i, load)| (*load, i))
                .expect("at least one shard");
            self.group_loads[shard] += cost;
            self.groups.insert(group, shard as u64);
        }
    }

    /// The shard of `name`: an item's shard, else a group's (groups packed on their own), else,
    /// for a group's later item named by [`group_item`] (`<stage> of <group>`), its group's;
    /// `None` for a name the assignment does not know (then the key digest decides,
    /// [`super::shard_of`]).
    pub fn shard(&self, name: &str) -> Option<u64> {
        self.items
            .get(name)
            .or_else(|| self.groups.get(name))
            .or_else(|| name.rsplit_once(GROUP_ITEM).and_then(|(_, g)| self.groups.get(g)))
            .copied()
    }

    /// The groups placed, with their shard, by name.
    pub fn groups(&self) -> &BTreeMap<String, u64> {
        &self.groups
    }

    /// The items placed, with their shard, by name.
    pub fn items(&self) -> &BTreeMap<String, u64> {
        &self.items
    }

    /// Each shard's estimated load (sum of its items' costs), by shard index.
    pub fn loads(&self) -> &[u64] {
        &self.loads
    }

    /// Each shard's estimated load of groups (the later per-group stages' round), by shard index.
    pub fn group_loads(&self) -> &[u64] {
        &self.group_loads
    }

    /// The largest load over the average load (1.0 is perfect balance; 1.0 with no cost at all).
    pub fn worst_over_average(&self) -> f64 {
        worst_over_average(&self.loads)
    }
}

impl super::Store {
    /// Packs the groups again on `costs` (group name, cost; [`Assignment::with_groups`]): from
    /// now on [`super::Store::claim`] places the groups, and their later items
    /// ([`group_item`]), by these costs. Only where [`super::Store::assign`] placed items for a
    /// shard count (a sharded text-to-SQL build or merge); returns the new assignment.
    pub fn assign_groups(&self, costs: Vec<(String, u64)>) -> Option<std::sync::Arc<Assignment>> {
        let a = std::sync::Arc::new(self.assignment()?.with_groups(costs));
        if let Ok(mut slot) = self.assignment.lock() {
            *slot = Some(a.clone());
        }
        Some(a)
    }
}

/// What [`group_item`] puts between a later stage's name and its group's.
const GROUP_ITEM: &str = " of ";

/// The item name of group `group`'s later-stage item of stage `stage`: `<stage> of <group>`
/// (e.g. `variants of world_1`); [`Assignment::shard`] places it with its group. Group names
/// (database ids, splits) hold no `" of "`.
pub fn group_item(stage: &str, group: &str) -> String {
    format!("{stage}{GROUP_ITEM}{group}")
}

/// Specs' worth of work a group's later stages cost per verified example beyond its toolkit
/// ([`later_cost`]): drawing its variants and running its trajectory. Not fitted: on the
/// synthetic 100-database corpus (`benches/balance_synth.sh`) toolkit sizes are nearly the same
/// across databases (sel-spider 69–73 specs an example, slot 10), so the placement there follows
/// the verified-example counts whatever this is; 8 keeps a one-spec toolkit's examples from
/// costing nothing.
pub const LATER_EXAMPLE_OVERHEAD: u64 = 8;

/// The estimated cost of one group's later stages (round two: variants, trajectory segments)
/// from the compiled build: per verified example (`toolkits` holds each example's toolkit
/// size, the specs it lists), its toolkit size + [`LATER_EXAMPLE_OVERHEAD`]. Each variant row
/// copies and rewrites the example's toolkit (drift, obfuscation, shortlists, distractors) and
/// each trajectory line carries it, so the work scales with examples × toolkit size, not with
/// the database's bytes or its attempted questions (the compile's estimate, [`Item::cost`]).
pub fn later_cost(toolkits: impl IntoIterator<Item = usize>) -> u64 {
    toolkits.into_iter().map(|n| n as u64 + LATER_EXAMPLE_OVERHEAD).sum()
}

/// The largest of `loads` over their average (1.0 when they sum to 0).
pub fn worst_over_average(loads: &[u64]) -> f64 {
    let total: u64 = loads.iter().sum();
    if total == 0 || loads.is_empty() {
        return 1.0;
    }
    let worst = *loads.iter().max().expect("not empty") as f64;
    worst / (total as f64 / loads.len() as f64)
}

/// The shard (0-based, below `count`) an entry digest belongs to: the first 16 hex digits of the
/// blake3 digest as a number, modulo `count`. Uniform because blake3 is.
pub fn shard_of(digest: &str, count: u64) -> u64 {
    u64::from_str_radix(&digest[..16.min(digest.len())], 16).unwrap_or(0) % count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, group: &str, cost: u64) -> Item {
        Item {
            name: name.into(),
            group: group.into(),
            cost,
        }
    }

    /// A synthetic corpus of 100 databases: log-normal file sizes (median 1 MB, σ = 1.5: from
    /// kilobytes to over 100 MB, as Spider's and BIRD's databases spread) and 4 to 300 questions,
    /// deterministic (a seeded LCG), split into batches of at most 16 questions as the
    /// text-to-SQL compile splits them (`batched`), else one item per database; a batch costs
    /// bytes × (questions + 4), as the compile estimates it.
    fn synthetic(batched: bool) -> Vec<Item> {
        let mut state: u64 = 34;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let mut items = Vec::new();
        for d in 0..100 {
            let normal = (-2.0 * next().ln()).sqrt() * (std::f64::consts::TAU * next()).cos();
            let bytes = (1e6 * (1.5 * normal).exp()) as u64;
            let questions = 4 + (next() * 296.0) as u64;
            let db = format!("db{d:03}");
            let per = if batched { 16 } else { questions };
            let mut left = questions;
            let mut b = 0;
            while left > 0 {
                let n = left.min(per);
                let name = if batched { format!("{db}#{b}") } else { db.clone() };
                items.push(item(&name, &db, bytes * (n + 4)));
                left -= n;
                b += 1;
            }
        }
        items
    }

    #[test]
    fn shards_are_balanced_by_estimated_cost() {
        // Before: one item per database, each placed by the blake3 of its key (uniform hashing).
        let whole = synthetic(false);
        let mut hashed = vec![0u64; 16];
        for it in &whole {
            let digest = blake3::hash(it.name.as_bytes()).to_hex().to_string();
            hashed[shard_of(&digest, 16) as usize] += it.cost;
        }
        let before = worst_over_average(&hashed);
        let per_db = Assignment::pack(&whole, 16).worst_over_average();
        let batched = synthetic(true);
        let mut lines = Vec::new();
        for n in [2u64, 4, 8, 16] {
            let a = Assignment::pack(&batched, n);
            lines.push(format!(
                "N={n}: {:.3} (the later stages' round, whole databases: {:.3})",
                a.worst_over_average(),
                worst_over_average(a.group_loads())
            ));
            if n == 16 {
                assert!(a.worst_over_average() <= 1.25, "{lines:?}");
            }
        }
        eprintln!(
            "synthetic 100 databases, worst/average shard (estimated cost): by digest, one item per database, N=16: {before:.3}; LPT one item per database N=16: {per_db:.3}; LPT on batches of 16 questions: {}",
            lines.join(", ")
        );
    }

    #[test]
    fn packing_is_deterministic_and_ties_go_by_item_name() {
        let items = vec![
            item("b", "g", 5),
            item("a", "g", 5),
            item("c", "h", 3),
            item("d", "h", 3),
        ];
        let a = Assignment::pack(&items, 2);
        // `a` (tie with `b`, first by name) takes shard 0, `b` shard 1; `c` then the lighter…
        assert_eq!(a.shard("a"), Some(0));
        assert_eq!(a.shard("b"), Some(1));
        assert_eq!(a.shard("c"), Some(0));
        assert_eq!(a.shard("d"), Some(1));
        assert_eq!(a.loads(), [8, 8]);
        // Groups are packed on their own: g (10) → 0, h (6) → 1; unknown names go by digest.
        assert_eq!(a.shard("g"), Some(0));
        assert_eq!(a.shard("h"), Some(1));
        assert_eq!(a.group_loads(), [10, 6]);
        assert_eq!(a.shard("llm-chat"), None);
        let mut reversed = items.clone();
        reversed.reverse();
        assert_eq!(Assignment::pack(&reversed, 2), a);
    }

    #[test]
    fn later_costs_repack_the_groups_deterministically_ties_by_group_name() {
        // The later-stage cost: per verified example, its toolkit size + the overhead.
        assert_eq!(later_cost([3, 0, 10]), 13 + 3 * LATER_EXAMPLE_OVERHEAD);
        assert_eq!(later_cost(std::iter::empty()), 0);
        let items = vec![
            item("a#0", "a", 50),
            item("a#1", "a", 50),
            item("b", "b", 1),
            item("c", "c", 1),
        ];
        let first = Assignment::pack(&items, 2);
        // Round two: `a` has few verified examples, `b` and `c` many (equal costs: by name).
        let costs = |order: &[&str]| -> Vec<(String, u64)> {
            order
                .iter()
                .map(|g| {
                    (
                        g.to_string(),
                        if *g == "a" {
                            later_cost([1])
                        } else {
                            later_cost([40; 3])
                        },
                    )
                })
                .collect()
        };
        let second = first.with_groups(costs(&["a", "b", "c"]));
        // b (tie with c, first by name) → 0, c → 1, a → the lighter: 0 (tie, lower index).
        assert_eq!(second.shard("b"), Some(0));
        assert_eq!(second.shard("c"), Some(1));
        assert_eq!(second.shard("a"), Some(0));
        assert_eq!(second.group_loads(), [153, 144]);
        // The items keep their round-one shards; the group's later items follow the group.
        assert_eq!(second.items(), first.items());
        assert_eq!(second.loads(), first.loads());
        assert_eq!(second.shard(&group_item("variants", "c")), Some(1));
        assert_eq!(second.shard(&group_item("variants", "zz")), None);
        // Deterministic: the order the costs come in does not matter.
        assert_eq!(first.with_groups(costs(&["c", "a", "b"])), second);
    }
}
