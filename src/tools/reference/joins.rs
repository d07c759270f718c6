//! The join step's rules of the reference pool ([`super::restrict`]): IBM's
//! `initialize_active_data` (`sql_tools.py`) joins INNER only, and merges the right-hand table of
//! every condition of `condition_sequence` into the active table, so each table must be the
//! right-hand side of one condition only (and not the first condition's left-hand side).

use serde_json::Value as Json;
#[cfg(test)]
use serde_json::json;

use crate::tools::Call;

/// The alias of a join condition's `<alias>.<column>` side.
fn alias(side: Option<&Json>) -> Option<&str> {
    side.and_then(Json::as_str)
        .and_then(|q| q.split_once('.'))
        .map(|(a, _)| a)
}

/// `Err(detail)` when IBM's `initialize_active_data` would not build the join step `setup` as
/// we do: it merges the right-hand table of every condition, so a table merged twice (two
/// conditions on one table pair, or a condition naming an already-joined table on its right)
/// gets suffixed columns (`colour_colour_x` / `_y`).
pub(super) fn check_joins(setup: &Call) -> Result<(), String> {
    let conditions = setup.arguments.get("condition_sequence").and_then(Json::as_array);
    let mut merged: Vec<&str> = Vec::new();
    for (k, c) in conditions.into_iter().flatten().enumerate() {
        let kind = c.get(2).and_then(Json::as_str).unwrap_or("INNER");
        if !kind.eq_ignore_ascii_case("INNER") {
            return Err(format!(
                "join step: a {kind} join (the reference's initialize_active_data joins INNER only)"
            ));
        }
        // The reference merges the right-hand table of every condition into the active table.
        merged.extend(alias(c.get(0)).filter(|_| k == 0));
        if let Some(right) = alias(c.get(1)) {
            if merged.iter().any(|m| m.eq_ignore_ascii_case(right)) {
                return Err(format!(
                    "join step: condition {c} joins `{right}` a second time (the reference's initialize_active_data merges the right-hand table of every condition, so a join on two conditions, or a condition naming the tables the other way round, merges a table twice)"
                ));
            }
            merged.push(right);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BIRD superhero 782 (`JOIN colour AS T2 ON T1.eye_colour_id = T2.id AND T1.hair_colour_id =
    /// T2.id`) was kept, and IBM's tools merged `colour` twice (`colour_colour_x`/`_y`): a join
    /// step that joins a table on two conditions is outside the pool.
    #[test]
    fn a_table_joined_on_two_conditions_is_outside_the_pool() {
        let setup = |conditions: Json| Call {
            name: "initialize_active_data".into(),
            arguments: json!({"condition_sequence": conditions, "alias_to_table_dict": {}, "database_path": "x"})
                .as_object()
                .unwrap()
                .clone(),
            label: "starting_table_var".into(),
        };
        let twice = json!([
            ["T1.eye_colour_id", "T2.id", "INNER"],
            ["T1.hair_colour_id", "T2.id", "INNER"]
        ]);
        let err = check_joins(&setup(twice)).unwrap_err();
        assert!(err.contains("`T2` a second time"), "{err}");
        let back = json!([["T1.a", "T2.id", "INNER"], ["T2.b", "t1.id", "INNER"]]);
        assert!(check_joins(&setup(back)).is_err());
        let chain = json!([
            ["T1.a", "T2.id", "INNER"],
            ["T2.b", "T3.id", "INNER"],
            ["T1.c", "T4.id", "INNER"]
        ]);
        assert_eq!(check_joins(&setup(chain)), Ok(()));
        assert!(check_joins(&setup(json!([["T1.a", "T2.id", "LEFT"]]))).is_err());
    }
}
