//! Questions of one database that share their gold SQL (issue 17): Spider dev asks 1,034
//! questions with 564 distinct (database, SQL) pairs — each query is usually phrased twice.
//!
//! Everything the compile stage derives from a question but its id and text (the gold answer,
//! the tie and bare-column probes, the plan, the lowered calls, their execution, verification
//! and shown results, the toolkit, the REST template) is a function of the SQL text, the
//! database file and the recipe, so it is computed once per distinct SQL text and copied to the
//! other questions ([`SameSql::spread`]), a drop under each question's own id. SQLite returns
//! the same rows for the same statement on the same unchanged file; a query whose result may
//! change between two executions ([`deterministic`]: `random()`, `'now'`, `CURRENT_…`) is not
//! shared.

use std::collections::HashMap;

use crate::corpus::Question;
use crate::dataset::Drop;

/// Which question of a database computes the result each question gets.
pub(super) struct SameSql {
    /// Index in `qs` of each computed question, in first-question order.
    firsts: Vec<usize>,
    /// For each question of `qs`, the position in `firsts` of the question computing its result.
    of: Vec<usize>,
}

impl SameSql {
    /// Groups `qs` by SQL text (byte-equal); a query that is not [`deterministic`] is its own
    /// group.
    pub(super) fn of(qs: &[Question]) -> SameSql {
        let mut firsts = Vec::new();
        let mut of = Vec::with_capacity(qs.len());
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, q) in qs.iter().enumerate() {
            let shareable = deterministic(&q.sql);
            match shareable.then(|| seen.get(q.sql.as_str()).copied()).flatten() {
                Some(g) => of.push(g),
                None => {
                    if shareable {
                        seen.insert(&q.sql, firsts.len());
                    }
                    of.push(firsts.len());
                    firsts.push(i);
                }
            }
        }
        SameSql { firsts, of }
    }

    /// The questions to compute, in first-question order.
    pub(super) fn firsts<'q>(&self, qs: &'q [Question]) -> Vec<&'q Question> {
        self.firsts.iter().map(|&i| &qs[i]).collect()
    }

    /// Each question's result, in `qs` order, from `computed` (one per [`SameSql::firsts`]
    /// question, in that order): a question sharing another's SQL gets a copy, a drop under its
    /// own id (`<recipe>/<question id>`) and database.
    pub(super) fn spread<T: Clone>(
        &self,
        computed: Vec<Result<T, Drop>>,
        qs: &[Question],
        recipe: &str,
    ) -> Vec<Result<T, Drop>> {
        let mut left = vec![0usize; self.firsts.len()];
        for &g in &self.of {
            left[g] += 1;
        }
        let mut slots: Vec<Option<Result<T, Drop>>> = computed.into_iter().map(Some).collect();
        qs.iter()
            .zip(&self.of)
            .map(|(q, &g)| {
                left[g] -= 1;
                let r = if left[g] == 0 {
                    slots[g].take().expect("each computed result is taken last once")
                } else {
                    slots[g]
                        .clone()
                        .expect("a computed result is present until its last use")
                };
                r.map_err(|d| Drop {
                    id: format!("{recipe}/{}", q.id),
                    group: q.db_id.clone(),
                    question: q.question.clone(),
                    ..d
                })
            })
            .collect()
    }
}

/// Whether two executions of `sql` on one unchanged database return the same rows: false when
/// it names a function whose value varies between calls (`random()`, `randomblob()`, the `'now'`
/// time value, `CURRENT_DATE`/`CURRENT_TIME`/`CURRENT_TIMESTAMP`, `changes()`); a false `false`
/// (a column called `known_now`) only costs the sharing.
pub(super) fn deterministic(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    !["random", "now", "current_", "changes("]
        .iter()
        .any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, sql: &str) -> Question {
        Question {
            id: id.into(),
            db_id: "d".into(),
            question: format!("question {id}"),
            evidence: None,
            sql: sql.into(),
            difficulty: None,
        }
    }

    #[test]
    fn questions_with_one_sql_text_are_computed_once_and_dropped_under_their_own_ids() {
        let qs = vec![
            q("0", "SELECT a FROM t"),
            q("1", "SELECT b FROM t"),
            q("2", "SELECT a FROM t"),
            q("3", "SELECT random() FROM t"),
            q("4", "SELECT random() FROM t"),
            q("5", "SELECT b FROM t"),
        ];
        let same = SameSql::of(&qs);
        let firsts: Vec<&str> = same.firsts(&qs).iter().map(|q| q.id.as_str()).collect();
        assert_eq!(firsts, ["0", "1", "3", "4"]);
        let computed: Vec<Result<String, Drop>> = same
            .firsts(&qs)
            .iter()
            .map(|q| {
                if q.sql.contains('b') {
                    Err(Drop {
                        id: format!("r/{}", q.id),
                        group: q.db_id.clone(),
                        reason: "mismatch".into(),
                        detail: "b".into(),
                        ..Default::default()
                    })
                } else {
                    Ok(format!("rows of {}", q.id))
                }
            })
            .collect();
        let got = same.spread(computed, &qs, "r");
        assert_eq!(got[0], Ok("rows of 0".to_string()));
        assert_eq!(got[2], Ok("rows of 0".to_string()));
        assert_eq!(got[3], Ok("rows of 3".to_string()));
        assert_eq!(got[4], Ok("rows of 4".to_string()));
        let ids: Vec<String> = [1, 5].iter().map(|&i| got[i].clone().unwrap_err().id).collect();
        assert_eq!(ids, ["r/1", "r/5"]);
    }

    #[test]
    fn time_and_random_queries_are_not_deterministic() {
        assert!(deterministic("SELECT name FROM singer WHERE age > 30"));
        assert!(!deterministic("SELECT * FROM t ORDER BY RANDOM() LIMIT 1"));
        assert!(!deterministic("SELECT STRFTIME('%Y', date('NOW')) - 1"));
        assert!(!deterministic("SELECT CURRENT_TIMESTAMP"));
    }
}
