//! Unit tests of the store (entries bound to their key, corrupt entries replaced, faults named).

use std::fs;

use super::*;

fn key(n: u32) -> StageKey {
    StageKey {
        stage: "t".into(),
        version: n,
        config: serde_json::json!({"a": 1}),
        inputs: vec!["x".into()],
    }
}

#[test]
fn round_trip_and_miss() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.get(&key(1)), Lookup::Missing);
    store.put(&key(1), b"hello").unwrap();
    assert_eq!(store.get(&key(1)), Lookup::Hit(bytes::Bytes::from_static(b"hello")));
    assert_eq!(store.get(&key(2)), Lookup::Missing);
}

#[test]
fn corrupt_and_truncated_entries_are_misses() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put(&key(1), b"hello world").unwrap();
    let path = dir.path().join(Store::entry_name(&key(1).digest()));
    let mut bytes = fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(store.get(&key(1)), Lookup::Corrupt);
    assert!(!path.exists(), "corrupt entry is removed");
    store.put(&key(1), b"hello world").unwrap();
    fs::write(&path, &fs::read(&path).unwrap()[..20]).unwrap();
    assert_eq!(store.get(&key(1)), Lookup::Corrupt);
    let dirty = store.dirty();
    assert_eq!(dirty.len(), 2);
    assert_eq!(
        (dirty[0].stage.as_str(), dirty[0].reason.as_str()),
        ("t", "payload hash mismatch")
    );
    assert_eq!(dirty[1].reason, "truncated to 20 bytes");
}

#[test]
fn entry_copied_under_another_key_is_corrupt_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put(&key(1), b"one").unwrap();
    store.put(&key(2), b"two").unwrap();
    let path = |n| dir.path().join(Store::entry_name(&key(n).digest()));
    fs::copy(path(1), path(2)).unwrap();
    assert_eq!(store.get(&key(2)), Lookup::Corrupt);
    assert!(!path(2).exists());
    assert!(
        store.dirty()[0].reason.starts_with("entry of another key ("),
        "{:?}",
        store.dirty()
    );
    assert_eq!(store.put(&key(2), b"two").unwrap(), Created::Written);
    assert_eq!(store.get(&key(2)), Lookup::Hit(bytes::Bytes::from_static(b"two")));
}

#[test]
fn undecodable_payload_is_rejected_and_replaced_by_the_next_put() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put(&key(1), b"garbage").unwrap();
    let decode = |b: &[u8]| {
        if b == b"good" {
            Ok(())
        } else {
            Err("not good".to_string())
        }
    };
    assert_eq!(store.load(&key(1), decode), None);
    assert_eq!(store.dirty()[0].reason, "undecodable payload: not good");
    assert_eq!(store.put(&key(1), b"good").unwrap(), Created::Written);
    assert_eq!(store.load(&key(1), decode), Some(()));
    // A bad entry that reappears (a poisoner racing the shard) is checked and replaced by
    // the write, not kept by put-if-absent.
    let path = dir.path().join(Store::entry_name(&key(1).digest()));
    fs::write(&path, entry::frame(&key(1).digest(), b"garbage")[..30].to_vec()).unwrap();
    assert_eq!(store.put(&key(1), b"good").unwrap(), Created::Written);
    assert_eq!(store.load(&key(1), decode), Some(()));
}

#[test]
fn a_failing_store_is_reported_with_its_fault() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.failure(), None);
    // The shard directory of the key is a file: the write cannot create its entry.
    fs::write(dir.path().join("objects").join(&key(1).digest()[..2]), b"").unwrap();
    assert!(store.put(&key(1), b"x").is_err());
    let failure = store.failure().unwrap();
    assert!(
        failure.starts_with("store request failed on ") && failure.contains("1 store request failed"),
        "{failure}"
    );
}

#[test]
fn claim_follows_the_assignment_for_planned_items_and_their_groups() {
    let dir = tempfile::tempdir().unwrap();
    let items = [("big#0", "big", 10), ("big#1", "big", 9), ("small", "small", 1)].map(|(n, g, c)| plan::Item {
        name: n.into(),
        group: g.into(),
        cost: c,
    });
    // LPT over 2 shards: big#0 → 0, big#1 → 1, small → 1 (load 9 < 10).
    for (index, mine) in [(0, ["big#0", "big"]), (1, ["big#1", "small"])] {
        let store = Store::open(dir.path())
            .unwrap()
            .with_scope(Scope::Shard { index, count: 2 });
        store.assign(&items);
        for name in ["big#0", "big#1", "small", "big"] {
            // The digest would say otherwise for some: the plan decides for the names it knows.
            assert_eq!(
                store.claim(&key(7), name),
                mine.contains(&name),
                "shard {index}: {name}"
            );
            assert_eq!(store.leaves(name), !mine.contains(&name), "shard {index}: {name}");
        }
        // A name the plan does not know (an LLM request) goes by its key's digest.
        let by_digest = shard_of(&key(7).digest(), 2) == index;
        assert_eq!(store.claim(&key(7), "llm-chat"), by_digest);
        assert!(!store.leaves("llm-chat"));
    }
    // A single build places nothing and computes everything.
    let all = Store::open(dir.path()).unwrap();
    assert!(all.assign(&items).is_none());
    assert!(all.claim(&key(7), "big#1") && !all.leaves("big#1"));
}

#[test]
fn a_groups_later_items_go_to_the_groups_shard_not_by_digest() {
    // Twelve groups of one item each; the later items (`variants of g`, claimed under one key of
    // the group's name as `dataset::claim_group` does) must go where the assignment puts the
    // group, for every group, on both shards, and a merge must name that shard.
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<plan::Item> = (0..12)
        .map(|i| plan::Item {
            name: format!("g{i:02}"),
            group: format!("g{i:02}"),
            cost: 100 - i,
        })
        .collect();
    let owner = |g: &str| StageKey {
        stage: "later-stages".into(),
        version: 1,
        config: serde_json::Value::Null,
        inputs: vec![g.to_string()],
    };
    let mut disagree = 0;
    for index in 0..2 {
        let store = Store::open(dir.path())
            .unwrap()
            .with_scope(Scope::Shard { index, count: 2 });
        let a = store.assign(&items).unwrap();
        for it in &items {
            let group_shard = a.groups()[&it.group];
            disagree += usize::from(shard_of(&owner(&it.group).digest(), 2) != group_shard);
            let later = plan::group_item("variants", &it.group);
            assert_eq!(store.claim(&owner(&it.group), &later), group_shard == index, "{later}");
        }
    }
    assert!(
        disagree > 0,
        "the digest agrees with the assignment everywhere: no test"
    );
    // Round two re-places the groups on their later costs (g11 now the largest): claims follow.
    let store = Store::open(dir.path())
        .unwrap()
        .with_scope(Scope::Shard { index: 1, count: 2 });
    store.assign(&items);
    let costs: Vec<(String, u64)> = items.iter().map(|it| (it.group.clone(), 1 + it.cost % 7)).collect();
    let a = store.assign_groups(costs).unwrap();
    for it in &items {
        let s = a.groups()[&it.group];
        assert_eq!(
            store.claim(&owner(&it.group), &plan::group_item("trajectories", &it.group)),
            s == 1
        );
    }
    // A merge names a missing later item with its group's shard.
    let merge = Store::open(dir.path())
        .unwrap()
        .with_scope(Scope::StoredOnly)
        .with_merge_shards(2);
    let a = merge.assign(&items).unwrap();
    for it in &items {
        assert!(!merge.claim(&owner(&it.group), &plan::group_item("variants", &it.group)));
    }
    for m in merge.missing(2) {
        let group = m.item.rsplit(' ').next().unwrap();
        assert_eq!(m.shard, a.groups()[group], "{}", m.item);
    }
}
