//! SQL's CASE as a row-wise column: `CASE WHEN c THEN a [WHEN …] [ELSE b] END`, the simple
//! form `CASE x WHEN v THEN a … END`, `IIF(c, a, b)`, and a comparison read as a number
//! (`SUM(x = 'M')`) become a `transform_data(operation_type="case")` writing a new column
//! `CASE_<n>`, which the query then reads like any column (selected, sorted on, aggregated).
//!
//! Each WHEN condition is a disjunction of AND-ed `filter_data` conditions; a THEN/ELSE is a
//! literal (number, text, NULL) or a column. The executor gives a row the first WHEN it
//! satisfies, with SQL's NULL rule (a comparison on NULL is not true), else the ELSE.

use serde_json::{Value as Json, json};
use sqlparser::ast::{BinaryOperator, Expr, Value};

use super::*;
use crate::sql::{LowerError, unsupported};

/// `filter_data` conditions and their negations (for a comparison read as 1/0/NULL).
const NEGATIONS: [(&str, &str); 8] = [
    ("equal_to", "not_equal_to"),
    ("not_equal_to", "equal_to"),
    ("greater_than", "less_than_equal_to"),
    ("less_than", "greater_than_equal_to"),
    ("greater_than_equal_to", "less_than"),
    ("less_than_equal_to", "greater_than"),
    ("like", "not_like"),
    ("not_like", "like"),
];

impl<'s> Builder<'s> {
    /// The column holding `e`'s CASE value when `e` is a CASE or `IIF(c, a, b)`; `None` for
    /// any other expression.
    pub(super) fn case_key(&mut self, e: &Expr) -> Result<Option<String>, LowerError> {
        let (whens, otherwise): (Vec<(Expr, &Expr)>, Option<&Expr>) = match e {
            Expr::Nested(inner) => return self.case_key(inner),
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let whens = conditions
                    .iter()
                    .map(|w| {
                        let cond = match operand {
                            // `CASE x WHEN v …` is `CASE WHEN x = v …`.
                            Some(x) => Expr::BinaryOp {
                                left: x.clone(),
                                op: BinaryOperator::Eq,
                                right: Box::new(w.condition.clone()),
                            },
                            None => w.condition.clone(),
                        };
                        (cond, &w.result)
                    })
                    .collect();
                (whens, else_result.as_deref())
            }
            Expr::Function(f) if ident_name(&f.name).eq_ignore_ascii_case("iif") => {
                match function_args(f)?.as_slice() {
                    [c, t, o] => (vec![((*c).clone(), *t)], Some(*o)),
                    _ => return Err(unsupported("function_arguments", e)),
                }
            }
            _ => return Ok(None),
        };
        let mut when = Vec::new();
        for (cond, then) in whens {
            when.push(json!({"conditions": self.case_condition(&cond, e)?, "then": self.case_value(then, e)?}));
        }
        let mut args = json!({ "when": when });
        if let Some(o) = otherwise {
            args["else"] = self.case_value(o, e)?;
        }
        Ok(Some(self.case_transform(args)))
    }

    /// A comparison used as a number (`SUM(x = 'M')`): 1 when it holds, 0 when its negation
    /// holds, NULL when the cell is NULL — SQLite's value of a boolean expression.
    pub(super) fn boolean_key(&mut self, e: &Expr) -> Result<Option<String>, LowerError> {
        let comparison = matches!(
            e,
            Expr::BinaryOp {
                op: BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Gt
                    | BinaryOperator::Lt
                    | BinaryOperator::GtEq
                    | BinaryOperator::LtEq,
                ..
            } | Expr::Like { .. }
        );
        if !comparison {
            return Ok(None);
        }
        let mut conds = Vec::new();
        self.conditions(e, &mut conds)
            .map_err(|_| unsupported("aggregate_expression", e))?;
        let [c] = conds.as_slice() else {
            return Err(unsupported("aggregate_expression", e));
        };
        let negated = NEGATIONS
            .iter()
            .find(|(p, _)| *p == c.condition)
            .map(|(_, n)| *n)
            .ok_or_else(|| unsupported("aggregate_expression", e))?;
        if c.value.is_null() && c.other_key.is_none() || is_placeholder(&c.value) {
            return Err(unsupported("aggregate_expression", e));
        }
        let not_c = Condition {
            condition: negated,
            ..c.clone()
        };
        let args = json!({"when": [
            {"conditions": [[condition_json(c)]], "then": {"value": 1}},
            {"conditions": [[condition_json(&not_c)]], "then": {"value": 0}},
        ]});
        Ok(Some(self.case_transform(args)))
    }

    /// A disjunction's truth per row (`x IN ('a', 'b')`, `p OR q`) as a `case` column: 1 where
    /// a branch holds, else 0 (a NULL comparison is not true, so such a row is 0, as SQL's
    /// WHERE drops it).
    pub(super) fn disjunction_key(&mut self, e: &Expr) -> Result<String, LowerError> {
        let cond = match e {
            // `x IN (a, b)` is `x = a OR x = b`.
            Expr::InList {
                expr,
                list,
                negated: false,
            } => {
                let mut disjunction = None;
                for item in list {
                    let eq = Expr::BinaryOp {
                        left: expr.clone(),
                        op: BinaryOperator::Eq,
                        right: Box::new(item.clone()),
                    };
                    disjunction = Some(match disjunction {
                        None => eq,
                        Some(d) => Expr::BinaryOp {
                            left: Box::new(d),
                            op: BinaryOperator::Or,
                            right: Box::new(eq),
                        },
                    });
                }
                disjunction.ok_or_else(|| unsupported("in_list_expression", e))?
            }
            other => other.clone(),
        };
        let conditions = self.case_condition(&cond, e)?;
        let args = json!({"when": [{"conditions": conditions, "then": {"value": 1}}], "else": {"value": 0}});
        Ok(self.case_transform(args))
    }

    /// The transform writing `args`' CASE column; an identical CASE earlier in the query (the
    /// same expression in SELECT and ORDER BY) is read again rather than computed twice.
    fn case_transform(&mut self, args: Json) -> String {
        if let Some(t) = self.transforms.iter().find(|t| t.operation == "case" && t.args == args) {
            return t.key.clone();
        }
        let n = self.transforms.iter().filter(|t| t.operation == "case").count();
        let key = format!("CASE_{n}");
        self.transforms.push(Transform {
            key: key.clone(),
            output: key.clone(),
            operation: "case",
            args,
        });
        key
    }

    /// A WHEN condition as OR-ed lists of AND-ed `filter_data` condition objects.
    fn case_condition(&mut self, cond: &Expr, e: &Expr) -> Result<Json, LowerError> {
        let mut disjuncts = Vec::new();
        Self::disjuncts(cond, &mut disjuncts);
        let mut out = Vec::new();
        for d in disjuncts {
            let mut conjuncts = Vec::new();
            Self::conjuncts(d, &mut conjuncts);
            let mut conds = Vec::new();
            for c in conjuncts {
                self.conditions(c, &mut conds)?;
            }
            if conds.iter().any(|c| is_placeholder(&c.value)) {
                return Err(unsupported("case_subquery", e));
            }
            out.push(Json::Array(conds.iter().map(condition_json).collect()));
        }
        Ok(Json::Array(out))
    }

    /// A THEN/ELSE: `{"value": literal}` (NULL included) or `{"key_name": column}`.
    fn case_value(&mut self, v: &Expr, e: &Expr) -> Result<Json, LowerError> {
        if let Expr::Value(x) = v {
            if x.value == Value::Null {
                return Ok(json!({"value": null}));
            }
        }
        if let Some(l) = self.literal(v) {
            return Ok(json!({ "value": l }));
        }
        match self.column_key(v) {
            Ok(k) => Ok(json!({ "key_name": k })),
            Err(_) => Err(unsupported("case_value", e)),
        }
    }
}

/// A condition as `filter_data`'s arguments (without `data_source`).
fn condition_json(c: &Condition) -> Json {
    match &c.other_key {
        Some(o) => json!({"key_name": c.key, "condition": c.condition, "other_key_name": o}),
        None => json!({"key_name": c.key, "condition": c.condition, "value": c.value}),
    }
}

/// A `$SUBQUERY_<i>$` placeholder (a subquery's value, which a CASE cannot read).
fn is_placeholder(v: &Json) -> bool {
    v.as_str().is_some_and(|s| s.starts_with("$SUBQUERY_"))
}
