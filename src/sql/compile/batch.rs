//! The stage items of a text-to-SQL compile: a database's questions in batches (issue 34 item
//! 2), so a large database is shared out over several shards.
//!
//! The rule is fixed (independent of the shard count, so a single build and every sharded build
//! compute the same items and the same bytes): the questions of one database, in question order,
//! are cut into consecutive batches of [`BATCH_QUESTIONS`] (the last one shorter). A database that
//! fits one batch is one item named after it (`world_1`); a larger one gives items `world_1#0`,
//! `world_1#1`, …. Consecutive, so a database's examples are its batches' examples one after the
//! other: each batch's later items (its trajectory segment,
//! [`crate::emit::segments_per_item`]) are computed by the shard that compiles it, and the files
//! concatenate them. Questions sharing a gold SQL text on both sides of a cut are computed once in
//! each batch ([`super::same_sql`]: the result is a function of the text, so both give the same
//! bytes). REST keeps one item per database: its endpoints are shared out over the whole
//! database's questions ([`super::endpoints::share`]), which needs them together.
//!
//! After the items are compiled (or read from the store) [`assemble`] puts a database's batches
//! back together: the examples in batch order (question order), the drops in question order, as
//! one item would have given them.

use std::collections::HashMap;

use crate::corpus::Question;
use crate::dataset::Outcome;

use super::stage::DbStage;

/// Largest number of questions in one batch. Spider dev: 20 databases → 72 items; BIRD mini-dev:
/// 11 → 37.
pub(super) const BATCH_QUESTIONS: usize = 16;

/// One stage item: a batch of one database's questions.
pub(super) struct Batch<'q> {
    /// The database id (the item's group).
    pub db_id: &'q str,
    /// The item's name: the database id, or `<db_id>#<n>` when the database has several batches.
    pub name: String,
    /// The batch's questions, in question order.
    pub questions: Vec<Question>,
}

/// The batches of database `db_id` whose questions are `qs` (module docs); `whole` keeps the
/// database one item (REST).
pub(super) fn batches<'q>(db_id: &'q str, qs: &[Question], whole: bool) -> Vec<Batch<'q>> {
    if whole || qs.len() <= BATCH_QUESTIONS {
        return vec![Batch {
            db_id,
            name: db_id.to_string(),
            questions: qs.to_vec(),
        }];
    }
    qs.chunks(BATCH_QUESTIONS)
        .enumerate()
        .map(|(n, chunk)| Batch {
            db_id,
            name: format!("{db_id}#{n}"),
            questions: chunk.to_vec(),
        })
        .collect()
}

/// One database's stage from its batches' stages (in batch order); `qs` are the database's
/// questions and `recipe` the recipe name (example ids are `<recipe>/<question id>`). Examples
/// come back in batch order (which is question order), drops in question order; the REST
/// endpoints and counts are summed (REST has one batch).
pub(super) fn assemble(mut parts: Vec<DbStage>, qs: &[Question], recipe: &str) -> DbStage {
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    let position: HashMap<String, usize> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| (format!("{recipe}/{}", q.id), i))
        .collect();
    let at = |id: &str| position.get(id).copied().unwrap_or(usize::MAX);
    let mut out = DbStage {
        outcome: Outcome::default(),
        ..DbStage::default()
    };
    for p in parts {
        out.outcome.attempted += p.outcome.attempted;
        out.outcome.examples.extend(p.outcome.examples);
        out.outcome.drops.extend(p.outcome.drops);
        out.endpoints.extend(p.endpoints);
        out.rest.by_text += p.rest.by_text;
        out.rest.merged += p.rest.merged;
        out.rest.merge_rejected += p.rest.merge_rejected;
    }
    // The examples stay in batch order: the batches are consecutive runs of the questions, so
    // this is question order, and each batch's examples stay one run (`Build::item_runs`) even
    // should two questions share an id.
    out.outcome.drops.sort_by_key(|d| at(&d.id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: usize, sql: &str) -> Question {
        Question {
            id: id.to_string(),
            db_id: "d".into(),
            question: format!("question {id}"),
            evidence: None,
            sql: sql.into(),
            difficulty: None,
        }
    }

    #[test]
    fn a_databases_batches_are_consecutive_runs_of_its_questions_in_question_order() {
        // 40 questions, every SQL text asked twice (the second time 20 questions later), and
        // one text asked 20 times: the batches ignore the texts.
        let mut qs: Vec<Question> = (0..40).map(|i| q(i, &format!("SELECT {}", i % 20))).collect();
        qs.extend((40..60).map(|i| q(i, "SELECT big")));
        let got = batches("d", &qs, false);
        let names: Vec<&str> = got.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["d#0", "d#1", "d#2", "d#3"]);
        assert!(got.iter().all(|b| b.questions.len() <= BATCH_QUESTIONS));
        // Concatenated in batch order they are the questions in question order.
        let flat: Vec<&str> = got
            .iter()
            .flat_map(|b| b.questions.iter().map(|x| x.id.as_str()))
            .collect();
        let ids: Vec<&str> = qs.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(flat, ids);
        // A small database, or REST, is one item named after the database.
        assert_eq!(batches("d", &qs[..16], false)[0].name, "d");
        assert_eq!(batches("d", &qs, true).len(), 1);
    }
}
