//! Negation as a rule: a WHERE or HAVING condition is rewritten to negation normal form before it
//! is lowered, so `NOT p` is accepted for every predicate `p` the planner accepts, whatever its
//! spelling (`NOT x IN (…)` ≡ `x NOT IN (…)`, `NOT x LIKE p` ≡ `x NOT LIKE p`, …).
//!
//! The rewrite keeps SQL's three-valued logic (SQLite: a comparison with NULL is NULL, `NOT
//! NULL` is NULL, WHERE keeps only TRUE), for which every step below is an identity:
//! - De Morgan: `NOT (a AND b)` = `NOT a OR NOT b`, `NOT (a OR b)` = `NOT a AND NOT b`
//!   (Kleene logic); `NOT NOT p` = `p`;
//! - a comparison flips its operator: `NOT (x > 3)` = `x <= 3` (a NULL `x` fails both);
//!   `NOT (x = y)` = `x <> y`;
//! - `[NOT] IN` lists and subqueries, `[NOT] LIKE`, `IS [NOT] NULL` and `[NOT] EXISTS` toggle
//!   their own negation (`NOT (x IN (1, NULL))` = `x NOT IN (1, NULL)`, never TRUE — the
//!   lowering of `NOT IN` keeps that rule);
//! - `x NOT BETWEEN a AND b` = `(x < a OR x > b)` (SQLite's definition of BETWEEN is `x >= a AND
//!   x <= b`).
//!
//! A NOT over anything else (a bare column, a function, CASE) stays `unsupported:not`.
//! Subqueries are not entered: their own WHERE is rewritten when they are planned.

use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};

use crate::sql::{LowerError, unsupported};

/// `e` with every NOT pushed down to its predicates and every `NOT BETWEEN` written as the OR
/// of its two comparisons; the result has no `NOT` operator.
pub(super) fn push_not(e: &Expr) -> Result<Expr, LowerError> {
    nnf(e, false)
}

/// `e` (`negate` false) or `NOT e` (`negate` true) in negation normal form.
fn nnf(e: &Expr, negate: bool) -> Result<Expr, LowerError> {
    let boxed = |x: &Expr, n: bool| nnf(x, n).map(Box::new);
    Ok(match e {
        Expr::Nested(inner) => Expr::Nested(boxed(inner, negate)?),
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => nnf(expr, !negate)?,
        Expr::BinaryOp {
            left,
            op: op @ (BinaryOperator::And | BinaryOperator::Or),
            right,
        } => {
            let op = match (op, negate) {
                (BinaryOperator::And, true) => BinaryOperator::Or,
                (BinaryOperator::Or, true) => BinaryOperator::And,
                (op, _) => op.clone(),
            };
            Expr::BinaryOp {
                left: boxed(left, negate)?,
                op,
                right: boxed(right, negate)?,
            }
        }
        Expr::BinaryOp { left, op, right } if negate => {
            let op = match op {
                BinaryOperator::Eq => BinaryOperator::NotEq,
                BinaryOperator::NotEq => BinaryOperator::Eq,
                BinaryOperator::Gt => BinaryOperator::LtEq,
                BinaryOperator::LtEq => BinaryOperator::Gt,
                BinaryOperator::Lt => BinaryOperator::GtEq,
                BinaryOperator::GtEq => BinaryOperator::Lt,
                _ => return Err(unsupported("not", format!("NOT ({e})"))),
            };
            Expr::BinaryOp {
                left: left.clone(),
                op,
                right: right.clone(),
            }
        }
        Expr::Between {
            expr,
            negated,
            low,
            high,
        } => {
            if *negated == negate {
                Expr::Between {
                    expr: expr.clone(),
                    negated: false,
                    low: low.clone(),
                    high: high.clone(),
                }
            } else {
                Expr::Nested(Box::new(Expr::BinaryOp {
                    left: Box::new(Expr::BinaryOp {
                        left: expr.clone(),
                        op: BinaryOperator::Lt,
                        right: low.clone(),
                    }),
                    op: BinaryOperator::Or,
                    right: Box::new(Expr::BinaryOp {
                        left: expr.clone(),
                        op: BinaryOperator::Gt,
                        right: high.clone(),
                    }),
                }))
            }
        }
        Expr::InList { expr, list, negated } => Expr::InList {
            expr: expr.clone(),
            list: list.clone(),
            negated: *negated != negate,
        },
        Expr::InSubquery {
            expr,
            subquery,
            negated,
        } => Expr::InSubquery {
            expr: expr.clone(),
            subquery: subquery.clone(),
            negated: *negated != negate,
        },
        Expr::Like {
            negated,
            any,
            expr,
            pattern,
            escape_char,
        } => Expr::Like {
            negated: *negated != negate,
            any: *any,
            expr: expr.clone(),
            pattern: pattern.clone(),
            escape_char: escape_char.clone(),
        },
        Expr::Exists { subquery, negated } => Expr::Exists {
            subquery: subquery.clone(),
            negated: *negated != negate,
        },
        Expr::IsNull(x) if negate => Expr::IsNotNull(x.clone()),
        Expr::IsNotNull(x) if negate => Expr::IsNull(x.clone()),
        other if !negate => other.clone(),
        other => return Err(unsupported("not", format!("NOT ({other})"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{SetExpr, Statement};

    fn nnf_of(condition: &str) -> String {
        let sql = format!("SELECT a FROM t WHERE {condition}");
        let Ok(Statement::Query(q)) = crate::sql::parse(&sql) else {
            panic!("{sql}")
        };
        let SetExpr::Select(s) = *q.body else { panic!() };
        push_not(s.selection.as_ref().unwrap())
            .map(|e| e.to_string())
            .unwrap_or_else(|e| e.reason())
    }

    /// Each rewrite step of the module docs, and what stays a named drop.
    #[test]
    fn not_is_pushed_to_the_predicates_by_de_morgan_and_operator_flips() {
        for (input, normal) in [
            ("NOT x IN (1, 2)", "x NOT IN (1, 2)"),
            ("NOT x NOT IN (1, 2)", "x IN (1, 2)"),
            ("NOT x IN (SELECT b FROM u)", "x NOT IN (SELECT b FROM u)"),
            ("NOT x LIKE 'a%'", "x NOT LIKE 'a%'"),
            ("x NOT BETWEEN 1 AND 3", "(x < 1 OR x > 3)"),
            ("NOT x BETWEEN 1 AND 3", "(x < 1 OR x > 3)"),
            ("NOT x NOT BETWEEN 1 AND 3", "x BETWEEN 1 AND 3"),
            ("NOT (x > 3)", "(x <= 3)"),
            ("NOT x = y", "x <> y"),
            ("NOT (x IS NULL)", "(x IS NOT NULL)"),
            ("NOT (a = 1 AND b < 2)", "(a <> 1 OR b >= 2)"),
            ("NOT (a = 1 OR NOT b < 2)", "(a <> 1 AND b < 2)"),
            ("NOT NOT a = 1", "a = 1"),
            ("NOT EXISTS (SELECT 1 FROM u)", "NOT EXISTS (SELECT 1 FROM u)"),
            ("NOT a", "unsupported:not"),
            ("NOT (x + 1)", "unsupported:not"),
        ] {
            assert_eq!(nnf_of(input), normal, "{input}");
        }
    }
}
