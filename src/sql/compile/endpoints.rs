//! The REST family's per-question part of the compile stage: each question's gold SQL
//! parameterised into an endpoint template that, run with the question's values, reproduces the
//! gold answer; the questions of one database shared out over one endpoint per normal form; and
//! each question's gold call with the response that verified it, which its trajectory shows
//! ([`crate::tools::shown::Shown::of_rest`], issue 17: the emitter does not run the endpoint
//! again).

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json, json};

use super::Compiled;
use super::rest::{Categorical, RestCounts, rest_endpoint};
use crate::corpus::Descriptions;
use crate::dataset::{Drop, Example};
use crate::sql::{self, rest::Template, schema::Schema};
use crate::tools::rest::{Endpoint, Limits};
use crate::tools::shown::rest_result_text;
use crate::tools::template::Parameter;
use crate::tools::{Call, Toolkit};
use crate::verify::{Answer, compare};

/// One execution that verified a REST question: the SQL run, its parameters, the values bound,
/// and the response as a trajectory's tool message shows it ([`rest_result_text`]).
#[derive(Clone)]
pub(super) struct Ran {
    sql: String,
    parameters: Vec<Parameter>,
    values: Vec<Json>,
    text: String,
}

impl Ran {
    fn new(endpoint: Endpoint, values: &[Json], rows: &Answer, max_rows: usize) -> Ran {
        Ran {
            sql: endpoint.sql,
            parameters: endpoint.parameters,
            values: values.to_vec(),
            text: rest_result_text(rows, max_rows),
        }
    }

    /// The shown response of calling `ep` with `arguments`, if that runs exactly what this
    /// execution ran (same SQL, parameters and bound values); `None` otherwise (the trajectory
    /// then executes the call itself).
    fn text_for(self, ep: &Endpoint, arguments: &Map<String, Json>) -> Option<String> {
        (self.sql == ep.sql
            && self.parameters == ep.parameters
            && ep.arguments_from_json(arguments).is_ok_and(|v| v == self.values))
        .then_some(self.text)
    }
}

/// What one database's REST questions read: its schema and column descriptions, and its
/// categorical columns, each table's counted the first time a question needs it (only a template
/// without a literal to lift does).
pub(super) struct Database<'a> {
    pub(super) db_id: &'a str,
    pub(super) db_path: &'a std::path::Path,
    pub(super) schema: &'a Schema,
    pub(super) descriptions: &'a Descriptions,
    pub(super) categorical: Categorical,
}

/// REST: `stmt` (whose result is `gold`, with tie runs `ties`) as an endpoint template that
/// reproduces `gold` when run with the question's values — compared as SLOT/SEL answers are
/// ([`crate::verify::compare`], any order inside a tie run); a template with no parameter gets
/// one exposed ([`sql::rest::exposures`]: the first that reproduces `gold`). `max_rows` is the
/// trajectories' row cap. Errors: the drop of the question (`drop(reason, detail)`).
pub(super) fn compile_question(
    conn: &mut rusqlite::Connection,
    db: &Database,
    stmt: &sqlparser::ast::Statement,
    (gold, ties): (Answer, Option<Vec<usize>>),
    max_rows: usize,
    drop: &dyn Fn(String, String) -> Drop,
) -> Result<Compiled, Drop> {
    let template =
        sql::rest::parameterise(stmt, db.schema, db.descriptions).map_err(|e| drop(e.reason(), e.to_string()))?;
    if template.parameters.is_empty() {
        let pick = |t: &str| db.categorical.pick(db.db_path, db.schema, t);
        for t in sql::rest::exposures(&template, db.schema, &pick) {
            let ep = rest_endpoint(db.db_id, &t);
            if let Ok(got) = ep.execute(conn, &t.values, Limits::default()) {
                if compare(&gold, &got, t.ordered, ties.as_deref()).is_ok() {
                    let ran = Ran::new(ep, &t.values, &got, max_rows);
                    return Ok(Compiled::Rest {
                        template: t,
                        gold,
                        ties,
                        ran,
                    });
                }
            }
        }
        return Err(drop(
            "unsupported:no_query_parameter".into(),
            format!(
                "no literal to lift and no LIMIT, ORDER BY, GROUP BY key or categorical column to expose as a parameter; SQL: {}",
                template.sql
            ),
        ));
    }
    let ep = rest_endpoint(db.db_id, &template);
    let got = ep.execute(conn, &template.values, Limits::default()).map_err(|e| {
        drop(
            "execution_error".into(),
            format!("{e}; parameterised SQL: {}", template.sql),
        )
    })?;
    compare(&gold, &got, template.ordered, ties.as_deref())
        .map_err(|d| drop("mismatch".into(), format!("{d}; parameterised SQL: {}", template.sql)))?;
    let ran = Ran::new(ep, &template.values, &got, max_rows);
    Ok(Compiled::Rest {
        template,
        gold,
        ties,
        ran,
    })
}

/// REST: one endpoint template per normal form of the parameterised queries of `results`, in
/// first-question order. A question joins an endpoint whose SQL text differs from its own only if
/// that SQL, run with the question's arguments, reproduces its gold result (then that run is the
/// one its trajectory shows); otherwise it keeps its own endpoint. Also returns the sharing
/// numbers.
pub(super) fn share(
    results: &mut [Result<Compiled, Drop>],
    db_id: &str,
    conn: Option<&mut rusqlite::Connection>,
    max_rows: usize,
) -> (Vec<Template>, RestCounts) {
    let mut conn = conn;
    let mut templates: Vec<Template> = Vec::new();
    let mut texts = BTreeSet::new();
    let (mut merged, mut merge_rejected) = (0, 0);
    for r in results.iter_mut() {
        let Ok(Compiled::Rest {
            template,
            gold,
            ties,
            ran,
        }) = r
        else {
            continue;
        };
        texts.insert(template.sql.to_lowercase());
        match templates.iter().position(|t| t.key == template.key) {
            None => templates.push(template.clone()),
            Some(i) if templates[i].sql == template.sql => {}
            Some(i) => {
                let rep = &templates[i];
                let values: Option<Vec<Json>> = rep
                    .parameters
                    .iter()
                    .map(|p| {
                        let j = template.parameters.iter().position(|q| q.name == p.name)?;
                        Some(template.values[j].clone())
                    })
                    .collect();
                let reproduced = match (values, conn.as_deref_mut()) {
                    (Some(values), Some(c)) => {
                        let ep = rest_endpoint(db_id, rep);
                        match ep.execute(c, &values, Limits::default()) {
                            Ok(got) if compare(gold, &got, template.ordered, ties.as_deref()).is_ok() => {
                                Some(Ran::new(ep, &values, &got, max_rows))
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let Some(rep_ran) = reproduced {
                    merged += 1;
                    *ran = rep_ran;
                } else {
                    merge_rejected += 1;
                    template.key.push_str(&format!("\n-- not merged: {}", template.sql));
                    if !templates.iter().any(|t| t.key == template.key) {
                        templates.push(template.clone());
                    }
                }
            }
        }
    }
    let counts = RestCounts {
        by_text: texts.len(),
        merged,
        merge_rejected,
    };
    (templates, counts)
}

/// REST: the example of a verified question (`base` filled with its question fields): its gold
/// call of `template`'s endpoint among `endpoints` (named from `templates`, in that order), and
/// the response its trajectory shows when the call runs what verified it ([`Ran::text_for`]); its
/// `meta.order_ties` are the gold answer's tie runs, as a SLOT/SEL row's.
pub(super) fn example(
    base: Example,
    (template, gold, ties, ran): (Template, Answer, Option<Vec<usize>>, Ran),
    templates: &[Template],
    endpoints: &[Endpoint],
    db_tools: &Toolkit,
) -> (Example, Option<String>) {
    let i = templates
        .iter()
        .position(|t| t.key == template.key)
        .expect("template registered");
    let ep = &endpoints[i];
    // By name: a merged question's literals may come in another order.
    // An omitted optional filter (bound as NULL) is not part of the gold call.
    let arguments: Map<String, Json> = template
        .parameters
        .iter()
        .zip(&template.values)
        .filter(|(p, v)| !(p.optional && p.default.is_none() && v.is_null()))
        .map(|(p, v)| (p.name.clone(), v.clone()))
        .collect();
    let text = ran.text_for(ep, &arguments);
    let example = Example {
        output: vec![Call {
            name: ep.name.clone(),
            arguments,
            label: format!("{}_0", ep.name),
        }],
        gold_answer: Some(gold),
        ordered: ep.ordered,
        tools: db_tools.clone(),
        meta: Some(match ties {
            Some(t) => json!({"endpoint": {"path": ep.path, "operation_id": ep.operation_id()}, "order_ties": t}),
            None => json!({"endpoint": {"path": ep.path, "operation_id": ep.operation_id()}}),
        }),
        ..base
    };
    (example, text)
}
