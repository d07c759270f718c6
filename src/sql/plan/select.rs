//! Select and projection: measures (columns, aggregates, literals, arithmetic, aliases) and the
//! assembly of one SELECT's plan from its WHERE, projection, grouping, ordering and DISTINCT.

use sqlparser::ast::{BinaryOperator, CastKind, Distinct, Expr, Query, Select, SelectItem};

use super::*;
use crate::sql::{LowerError, unsupported};
use crate::tools::table::safe_name;

impl<'s> Builder<'s> {
    /// A SELECT / ORDER BY / HAVING expression as a measure.
    pub(super) fn measure(&mut self, e: &Expr) -> Result<Measure, LowerError> {
        if let Some(v) = self.literal(e) {
            return if v.is_number() {
                Ok(Measure::Literal(v))
            } else {
                Err(unsupported("string_literal_select", e))
            };
        }
        match e {
            Expr::Nested(inner) => self.measure(inner),
            Expr::Cast {
                expr,
                data_type,
                kind: CastKind::Cast,
                ..
            } if is_numeric_cast(data_type) => self.measure(expr),
            Expr::Cast { .. } if !rowexpr::contains_aggregate(e) => Ok(Measure::Column(self.row_key(e)?)),
            Expr::Cast { .. } => Err(unsupported("cast", e)),
            // `ROUND(<aggregates>, n)`: the aggregates, their arithmetic, then `calculate(round)`.
            Expr::Function(f)
                if ident_name(&f.name).eq_ignore_ascii_case("round") && rowexpr::contains_aggregate(e) =>
            {
                match function_args(f)?.as_slice() {
                    [x] => Ok(Measure::Arith(
                        Box::new(self.measure(x)?),
                        "round",
                        Box::new(Measure::Literal(serde_json::json!(0))),
                    )),
                    [x, n] => {
                        let digits = self
                            .literal(n)
                            .filter(Json::is_i64)
                            .ok_or_else(|| unsupported("function_arguments", e))?;
                        Ok(Measure::Arith(
                            Box::new(self.measure(x)?),
                            "round",
                            Box::new(Measure::Literal(digits)),
                        ))
                    }
                    _ => Err(unsupported("function_arguments", e)),
                }
            }
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Plus => "add",
                    BinaryOperator::Minus => "subtract",
                    BinaryOperator::Multiply => "multiply",
                    BinaryOperator::Divide => "divide",
                    _ => return Err(unsupported("operator", e)),
                };
                Ok(Measure::Arith(
                    Box::new(self.operand(left)?),
                    op,
                    Box::new(self.operand(right)?),
                ))
            }
            Expr::Identifier(id) => {
                if let Some((_, m)) = self.aliases.iter().find(|(a, _)| a.eq_ignore_ascii_case(&id.value)) {
                    if self.resolve_raw(e).is_err() {
                        return Ok(m.clone());
                    }
                }
                Ok(Measure::Column(self.column_key(e)?))
            }
            Expr::CompoundIdentifier(_) => Ok(Measure::Column(self.column_key(e)?)),
            Expr::Case { .. } => Ok(Measure::Column(self.case_key(e)?.expect("a CASE"))),
            Expr::Function(f) if ident_name(&f.name).eq_ignore_ascii_case("iif") => {
                Ok(Measure::Column(self.case_key(e)?.expect("an IIF")))
            }
            // A scalar function of a column (`SUBSTR`, `ABS`, `STRFTIME`): the column transformed.
            Expr::Function(f) if rowexpr::is_scalar_function(f) => Ok(Measure::Column(self.row_key(e)?)),
            Expr::Substring { .. } | Expr::Trim { .. } => Ok(Measure::Column(self.row_key(e)?)),
            Expr::Function(f) => self.aggregate(e, f),
            Expr::Subquery(q) => {
                let placeholder = self.subquery(q, e)?;
                Ok(Measure::Value(placeholder.as_str().expect("a placeholder").to_string()))
            }
            _ => Err(unsupported("expression", e)),
        }
    }

    /// An arithmetic operand. `CAST(x AS REAL|FLOAT|DOUBLE)` there is `x * 1.0`: the value made
    /// real so that a following `/` is real division (SQLite divides integer by integer as
    /// integers); a cast elsewhere changes only the value's type and is read as `x`.
    fn operand(&mut self, e: &Expr) -> Result<Measure, LowerError> {
        match e {
            Expr::Nested(inner) => self.operand(inner),
            Expr::Cast {
                expr,
                data_type,
                kind: CastKind::Cast,
                ..
            } if is_real_cast(data_type) => Ok(Measure::Arith(
                Box::new(self.operand(expr)?),
                "multiply",
                Box::new(Measure::Literal(serde_json::json!(1.0))),
            )),
            other => self.measure(other),
        }
    }

    /// The plan of `select`; `q` carries its ORDER BY and LIMIT (`None` for a compound
    /// SELECT's operand).
    pub(super) fn build(mut self, q: Option<&Query>, select: &Select) -> Result<QueryPlan, LowerError> {
        let mut filters = Vec::new();
        let mut branches = Vec::new();
        let selection = select.selection.as_ref().map(negation::push_not).transpose()?;
        let on_filters = std::mem::take(&mut self.on_filters);
        {
            let mut parts: Vec<&Expr> = on_filters.iter().collect();
            if let Some(w) = &selection {
                Self::conjuncts(w, &mut parts);
            }
            for part in parts {
                if self.join_filters.contains(part) {
                    continue;
                }
                let is_or = matches!(
                    part,
                    Expr::BinaryOp {
                        op: BinaryOperator::Or,
                        ..
                    }
                ) || matches!(part, Expr::InList { negated: false, .. })
                    || matches!(part, Expr::Nested(inner) if matches!(**inner, Expr::BinaryOp { op: BinaryOperator::Or, .. }));
                if is_or {
                    if branches.is_empty() {
                        self.branches(part, &mut branches)?;
                    } else {
                        // A further disjunction: its truth as a 1/0 `case` column, kept where 1.
                        let key = self.disjunction_key(part)?;
                        filters.push(Condition {
                            key,
                            condition: "equal_to",
                            value: serde_json::json!(1),
                            other_key: None,
                        });
                    }
                } else {
                    self.conditions(part, &mut filters)?;
                }
            }
        }
        let mut projection = Vec::new();
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(e) => projection.push(self.measure(e)?),
                SelectItem::ExprWithAlias { expr, alias } => {
                    let m = self.measure(expr)?;
                    self.aliases.push((alias.value.clone(), m.clone()));
                    projection.push(m);
                }
                SelectItem::Wildcard(_) if !self.using.is_empty() => {
                    // SQLite's `*` lists a USING / NATURAL column once.
                    return Err(unsupported("wildcard_using", item));
                }
                SelectItem::Wildcard(_) => {
                    for t in self.tables.clone() {
                        let (_, cols) = self.schema.table(&t.table).expect("resolved");
                        projection.extend(cols.iter().map(|c| Measure::Column(safe_name(&t.prefix, c))));
                    }
                }
                SelectItem::QualifiedWildcard(..) => return Err(unsupported("qualified_wildcard", item)),
            }
        }
        let group_by = self.group_by(select)?;
        let (having, having_branches) = self.having(select)?;
        let order_by = self.order_by(q)?;
        let (limit, offset) = self.limit(q)?;
        let distinct = match &select.distinct {
            None => false,
            Some(Distinct::Distinct) => true,
            Some(other) => return Err(unsupported("distinct_on", other)),
        };
        if select.top.is_some() || select.qualify.is_some() || !select.sort_by.is_empty() {
            return Err(unsupported("clause", "TOP/QUALIFY/SORT BY"));
        }
        let plan = QueryPlan {
            tables: self.tables,
            joins: self.joins,
            transforms: self.transforms,
            filters,
            branches,
            group_by,
            having,
            having_branches,
            order_by,
            projection,
            distinct,
            limit,
            offset,
            subqueries: self.subqueries,
            set_ops: vec![],
            count_rows: false,
            over_groups: vec![],
        };
        let has_value = |m: &Measure| -> bool {
            fn walk(m: &Measure) -> bool {
                match m {
                    Measure::Value(_) => true,
                    Measure::Arith(a, _, b) => walk(a) || walk(b),
                    _ => false,
                }
            }
            walk(m)
        };
        if plan.measures().any(has_value)
            && (!plan.group_by.is_empty() || plan.projection.iter().any(|m| matches!(m, Measure::Column(_))))
        {
            // One value beside each row or group: no tool repeats a value along a column.
            return Err(unsupported(
                "subquery_in_select",
                "a subquery's value beside columns or groups",
            ));
        }
        if plan.tables.is_empty() && plan.measures().any(|m| m.has_aggregate() && !has_value(m)) {
            return Err(unsupported("no_from", "an aggregate without FROM"));
        }
        if plan.group_by.is_empty() && (!plan.having.is_empty() || !plan.having_branches.is_empty()) {
            return Err(unsupported("having_without_group_by", "HAVING"));
        }
        if plan.projection.iter().any(|m| m.has_aggregate())
            && plan.group_by.is_empty()
            && plan.projection.iter().any(|m| matches!(m, Measure::Column(_)))
            && plan.bare_extreme().is_none()
        {
            return Err(unsupported(
                "bare_column_with_aggregate",
                "SELECT mixes columns and aggregates without GROUP BY",
            ));
        }
        Ok(plan)
    }
}
