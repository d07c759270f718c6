//! Grouping and aggregates: aggregate calls (with the CASE/IIF counting idiom), the GROUP BY
//! key and HAVING comparisons.

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Select, Value,
};

use super::*;
use crate::sql::{LowerError, unsupported};

impl<'s> Builder<'s> {
    pub(super) fn aggregate(&mut self, e: &Expr, f: &sqlparser::ast::Function) -> Result<Measure, LowerError> {
        let name = ident_name(&f.name).to_lowercase();
        let agg = match name.as_str() {
            "count" => Agg::Count,
            "sum" => Agg::Sum,
            "avg" => Agg::Mean,
            "min" => Agg::Min,
            "max" => Agg::Max,
            _ => return Err(unsupported("function", e)),
        };
        if f.filter.is_some() {
            return Err(unsupported("aggregate_filter", e));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(unsupported("function_arguments", e));
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(sqlparser::ast::DuplicateTreatment::Distinct)
        );
        let arg = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if agg == Agg::Count => None,
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => Some(x),
            _ => return Err(unsupported("function_arguments", e)),
        };
        let Some(arg) = arg else {
            return Ok(Measure::Aggregate {
                agg,
                key: None,
                distinct,
                filters: vec![],
            });
        };
        let arg = strip_numeric_cast(arg);
        if let Some(m) = self.case_aggregate(agg, arg, distinct)? {
            return Ok(m);
        }
        // Any other CASE / IIF, or a comparison read as 1/0 (`SUM(x = 'M')`): the aggregate of
        // its row-wise column.
        let case = match self.case_key(arg)? {
            Some(k) => Some(k),
            None => self.boolean_key(arg)?,
        };
        if let Some(key) = case {
            return Ok(Measure::Aggregate {
                agg,
                key: Some(key),
                distinct,
                filters: vec![],
            });
        }
        if self.literal(arg).is_some() && agg == Agg::Count {
            return Ok(Measure::Aggregate {
                agg,
                key: None,
                distinct,
                filters: vec![],
            });
        }
        // A column, or a row-wise expression's column (`AVG(a - b)`, `SUM(price / amount)`).
        if rowexpr::contains_aggregate(arg) {
            return Err(unsupported("aggregate_expression", e));
        }
        let key = self.row_key(arg).map_err(|err| match err {
            LowerError::Unsupported { code: "expression", .. } => unsupported("aggregate_expression", e),
            other => other,
        })?;
        Ok(Measure::Aggregate {
            agg,
            key: Some(key),
            distinct,
            filters: vec![],
        })
    }

    /// `COUNT(CASE WHEN c THEN x [ELSE NULL] END)` and `COUNT(IIF(c, x, NULL))` with `c` a
    /// conjunction: a count over the rows satisfying `c`. Any other CASE (`SUM(CASE WHEN c THEN
    /// 1 ELSE 0 END)` is NULL, not 0, over no rows) is `None`: a `case` column (`case.rs`).
    pub(super) fn case_aggregate(
        &mut self,
        agg: Agg,
        arg: &Expr,
        distinct: bool,
    ) -> Result<Option<Measure>, LowerError> {
        let (cond, then, otherwise): (&Expr, &Expr, Option<&Expr>) = match arg {
            Expr::Case {
                operand: None,
                conditions,
                else_result,
                ..
            } if conditions.len() == 1 => (&conditions[0].condition, &conditions[0].result, else_result.as_deref()),
            Expr::Function(f) if ident_name(&f.name).eq_ignore_ascii_case("iif") => {
                match function_args(f)?.as_slice() {
                    [c, t, o] => (*c, *t, Some(*o)),
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let is_null = |x: Option<&Expr>| x.is_none_or(|x| matches!(x, Expr::Value(v) if v.value == Value::Null));
        let mut filters = Vec::new();
        let key = match agg {
            Agg::Count if is_null(otherwise) => match self.literal(then) {
                Some(_) => None,
                None => Some(self.column_key(then)?),
            },
            _ => return Ok(None),
        };
        let mut disjuncts = Vec::new();
        Self::disjuncts(cond, &mut disjuncts);
        if disjuncts.len() > 1 {
            return Ok(None);
        }
        self.conditions(cond, &mut filters)
            .map_err(|_| unsupported("case", arg))?;
        Ok(Some(Measure::Aggregate {
            agg: Agg::Count,
            key,
            distinct,
            filters,
        }))
    }

    /// The GROUP BY keys (columns, in the query's order); empty without GROUP BY.
    pub(super) fn group_by(&mut self, select: &Select) -> Result<Vec<String>, LowerError> {
        let GroupByExpr::Expressions(exprs, mods) = &select.group_by else {
            return Err(unsupported("group_by", &select.group_by));
        };
        if !mods.is_empty() {
            return Err(unsupported("group_by", &select.group_by));
        }
        let mut keys: Vec<String> = Vec::new();
        for e in exprs {
            match self.measure(e)? {
                // `GROUP BY a, a` groups as `GROUP BY a`.
                Measure::Column(k) if keys.contains(&k) => {}
                Measure::Column(k) => keys.push(k),
                _ => return Err(unsupported("group_by_expression", e)),
            }
        }
        Ok(keys)
    }

    /// The HAVING comparisons, each on an aggregate against a literal: the AND-ed ones, and at
    /// most one disjunction (`A OR B`, each branch AND-ed comparisons).
    pub(super) fn having(&mut self, select: &Select) -> Result<(Vec<Having>, Vec<Vec<Having>>), LowerError> {
        let (mut having, mut branches) = (Vec::new(), Vec::new());
        if let Some(h) = &select.having {
            let h = super::negation::push_not(h)?;
            let mut parts = Vec::new();
            Self::conjuncts(&h, &mut parts);
            for part in parts {
                let mut disjuncts = Vec::new();
                Self::disjuncts(part, &mut disjuncts);
                if disjuncts.len() == 1 {
                    self.having_comparison(part, &mut having)?;
                    continue;
                }
                if !branches.is_empty() {
                    return Err(unsupported("having", part));
                }
                for d in disjuncts {
                    let mut conjuncts = Vec::new();
                    Self::conjuncts(d, &mut conjuncts);
                    let mut branch = Vec::new();
                    for c in conjuncts {
                        self.having_comparison(c, &mut branch)?;
                    }
                    branches.push(branch);
                }
            }
        }
        Ok((having, branches))
    }

    /// One HAVING comparison `aggregate <op> literal` (or `aggregate BETWEEN a AND b`, two).
    fn having_comparison(&mut self, part: &Expr, out: &mut Vec<Having>) -> Result<(), LowerError> {
        if let Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } = part
        {
            // `agg BETWEEN a AND b` = `agg >= a AND agg <= b`.
            let measure = self.measure(expr)?;
            if !matches!(measure, Measure::Aggregate { .. }) {
                return Err(unsupported("having", part));
            }
            for (condition, bound) in [("greater_than_equal_to", low), ("less_than_equal_to", high)] {
                let value = self.literal(bound).ok_or_else(|| unsupported("having", part))?;
                out.push(Having {
                    measure: measure.clone(),
                    condition,
                    value,
                });
            }
            return Ok(());
        }
        let Expr::BinaryOp { left, op, right } = part else {
            return Err(unsupported("having", part));
        };
        if matches!(**left, Expr::Subquery(_)) {
            return Err(unsupported("subquery_in_having", part));
        }
        let condition = match op {
            BinaryOperator::Eq => "equal_to",
            BinaryOperator::NotEq => "not_equal_to",
            BinaryOperator::Gt => "greater_than",
            BinaryOperator::Lt => "less_than",
            BinaryOperator::GtEq => "greater_than_equal_to",
            BinaryOperator::LtEq => "less_than_equal_to",
            _ => return Err(unsupported("having", part)),
        };
        let value = match &**right {
            // `HAVING COUNT(x) = (SELECT MAX(c) FROM …)`: the subquery's value, an earlier chain.
            Expr::Subquery(q) => self.subquery(q, part)?,
            other => self.literal(other).ok_or_else(|| unsupported("having", part))?,
        };
        let measure = self.measure(left)?;
        if !matches!(measure, Measure::Aggregate { .. }) {
            return Err(unsupported("having", part));
        }
        out.push(Having {
            measure,
            condition,
            value,
        });
        Ok(())
    }
}
