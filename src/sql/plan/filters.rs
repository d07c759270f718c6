//! Filters: WHERE conjuncts as `filter_data` conditions (comparisons, BETWEEN, IS [NOT] NULL,
//! [NOT] LIKE, NOT IN lists, column-vs-column comparisons), one disjunction as branches, literals, and the column transforms
//! (`substring`, `abs`, `strftime`) a comparison may read through.

use serde_json::{Map, Value as Json, json};
use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value};

use super::*;
use crate::sql::{LowerError, unsupported};

impl<'s> Builder<'s> {
    pub(super) fn literal(&self, e: &Expr) -> Option<Json> {
        match e {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => number(n),
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(json!(s)),
                Value::Boolean(b) => Some(json!(*b as i64)),
                _ => None,
            },
            // SQLite reads a double-quoted identifier that names no column as a string literal.
            Expr::Identifier(id) if id.quote_style == Some('"') && self.resolve_raw(e).is_err() => {
                Some(json!(id.value))
            }
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => self.literal(expr).and_then(negate),
            Expr::UnaryOp {
                op: UnaryOperator::Plus,
                expr,
            } => self.literal(expr),
            Expr::Nested(inner) => self.literal(inner),
            _ => None,
        }
    }

    /// The key a WHERE comparison reads: a column, or the column a row-wise expression is
    /// written to ([`Builder::row_key`]). A numeric `CAST` of a column compared is read as the
    /// column (the comparison's affinity does the conversion).
    pub(super) fn filter_key(&mut self, e: &Expr) -> Result<String, LowerError> {
        match e {
            Expr::Cast { expr, data_type, .. } if is_numeric_cast(data_type) && self.resolve_raw(expr).is_ok() => {
                self.filter_key(expr)
            }
            Expr::Nested(inner) => self.filter_key(inner),
            _ => self.row_key(e),
        }
    }

    /// `SUBSTR(x, start[, len])` (SQL: 1-based start) as a `substring` transform with a 0-based
    /// `start_index` and an exclusive `end_index` (absent without `len`).
    pub(super) fn substring(
        &mut self,
        x: &Expr,
        start: &Expr,
        len: Option<&Expr>,
        e: &Expr,
    ) -> Result<String, LowerError> {
        let key = self.row_key(x)?;
        let int = |b: &Self, v: &Expr| b.literal(v).and_then(|v| v.as_i64());
        let start = int(self, start).ok_or_else(|| unsupported("substring_arguments", e))?;
        let len = match len {
            Some(l) => Some(
                int(self, l)
                    .filter(|l| *l >= 0)
                    .ok_or_else(|| unsupported("substring_arguments", e))?,
            ),
            None => None,
        };
        // SQLite: characters from position `start` (1-based); position 0 is before the first
        // character (so `SUBSTR(x, 0, n)` is `n - 1` characters); a negative start counts from the
        // end (`SUBSTR(x, -2)` is the last two characters), the tool's negative `start_index`.
        let (begin, end) = match (start, len) {
            (s, l) if s >= 1 => (s - 1, l.map(|l| s - 1 + l)),
            (0, l) => (0, l.map(|l| (l - 1).max(0))),
            (s, None) => (s, None),
            _ => return Err(unsupported("substring_arguments", e)),
        };
        let mut args = Map::new();
        args.insert("start_index".into(), json!(begin));
        if let Some(end) = end {
            args.insert("end_index".into(), json!(end));
        }
        Ok(self.add_transform(key, "substring", Json::Object(args), e))
    }

    /// The column holding `operation(key)`: a new column (see [`Transform::output`]); the same
    /// transformation asked again (`STRFTIME('%Y', d)` in WHERE and SELECT) reads the column
    /// written the first time.
    pub(super) fn add_transform(&mut self, key: String, operation: &'static str, args: Json, _e: &Expr) -> String {
        if let Some(t) = self
            .transforms
            .iter()
            .find(|t| t.key == key && t.operation == operation && t.args == args)
        {
            return t.output.clone();
        }
        let suffix = match operation {
            "datetime" => match args["pattern"].as_str() {
                Some("%Y") => "year".to_string(),
                Some("%m") => "month".to_string(),
                Some("%d") => "day".to_string(),
                _ => "datetime".to_string(),
            },
            "substring" => match args["end_index"].as_i64() {
                Some(end) => format!("substr_{}_{end}", args["start_index"]),
                None => format!("substr_{}", args["start_index"]),
            },
            other => other.to_string(),
        };
        let mut output = format!("{key}_{suffix}");
        // Another transformation of the same column under the same name (`ROUND(x, 1)` and
        // `ROUND(x, 2)`) writes a numbered column.
        let base = output.clone();
        let mut n = 1;
        while self.transforms.iter().any(|t| t.output == output) {
            output = format!("{base}_{n}");
            n += 1;
        }
        self.transforms.push(Transform {
            key,
            output: output.clone(),
            operation,
            args,
        });
        output
    }

    /// `left <condition> right` between two row-wise values of the joined row (`WHERE T1.budget <
    /// T2.budget`, `WHERE a = b || '_1'`): a condition on `left`'s column with `other_key`
    /// `right`'s ([`Builder::row_key`]). Anything else on either side (an aggregate, a
    /// subquery) is `unsupported:column_comparison`.
    fn column_comparison(
        &mut self,
        left: &Expr,
        condition: &'static str,
        right: &Expr,
        e: &Expr,
    ) -> Result<Condition, LowerError> {
        let plain = |b: &mut Self, x: &Expr| {
            if super::rowexpr::contains_aggregate(x) || matches!(x, Expr::Subquery(_)) {
                return Err(unsupported("column_comparison", e));
            }
            b.row_key(x).map_err(|err| match err {
                LowerError::Unsupported { code: "expression", .. } => unsupported("column_comparison", e),
                other => other,
            })
        };
        let (key, other) = (plain(self, left)?, plain(self, right)?);
        Ok(Condition {
            key,
            condition,
            value: Json::Null,
            other_key: Some(other),
        })
    }

    /// `(SELECT …) <op> literal`: the subquery, the operation and the literal.
    fn scaled_subquery<'e>(&self, e: &'e Expr) -> Option<(&'e sqlparser::ast::Query, &'static str, Json)> {
        match e {
            Expr::Nested(inner) => self.scaled_subquery(inner),
            Expr::BinaryOp { left, op, right } => {
                let Expr::Subquery(q) = strip_nested(left) else {
                    return None;
                };
                let op = match op {
                    BinaryOperator::Plus => "add",
                    BinaryOperator::Minus => "subtract",
                    BinaryOperator::Multiply => "multiply",
                    BinaryOperator::Divide => "divide",
                    _ => return None,
                };
                Some((q, op, self.literal(right).filter(Json::is_number)?))
            }
            _ => None,
        }
    }

    /// Lowers a conjunct of the WHERE (or a branch of an OR) to conditions.
    pub(super) fn conditions(&mut self, e: &Expr, out: &mut Vec<Condition>) -> Result<(), LowerError> {
        match e {
            Expr::Nested(inner) => self.conditions(inner, out),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.conditions(left, out)?;
                self.conditions(right, out)
            }
            Expr::BinaryOp { left, op, right } => {
                let flip = |c: &'static str| match c {
                    "greater_than" => "less_than",
                    "less_than" => "greater_than",
                    "greater_than_equal_to" => "less_than_equal_to",
                    "less_than_equal_to" => "greater_than_equal_to",
                    c => c,
                };
                let condition = match op {
                    BinaryOperator::Eq => "equal_to",
                    BinaryOperator::NotEq => "not_equal_to",
                    BinaryOperator::Gt => "greater_than",
                    BinaryOperator::Lt => "less_than",
                    BinaryOperator::GtEq => "greater_than_equal_to",
                    BinaryOperator::LtEq => "less_than_equal_to",
                    BinaryOperator::Or => return Err(unsupported("nested_or", e)),
                    _ => return Err(unsupported("operator", op)),
                };
                if let Some((q, op, factor)) = self.scaled_subquery(right) {
                    // `x > (SELECT AVG(y) …) * 79`: the subquery's single value times 79,
                    // computed by the subquery's own chain (`SELECT AVG(y) * 79 …`).
                    let value = self.subquery(q, e)?;
                    let sub = self.subqueries.last_mut().expect("just planned");
                    let single = sub.group_by.is_empty() && sub.set_ops.is_empty() && sub.projection[0].has_aggregate();
                    if !single {
                        return Err(unsupported("column_comparison", e));
                    }
                    let measure = sub.projection[0].clone();
                    sub.projection[0] = Measure::Arith(Box::new(measure), op, Box::new(Measure::Literal(factor)));
                    let key = self.filter_key(left)?;
                    out.push(Condition {
                        key,
                        condition,
                        value,
                        other_key: None,
                    });
                } else if let Expr::Subquery(q) = &**right {
                    let value = self.subquery(q, e)?;
                    let key = self.filter_key(left)?;
                    out.push(Condition {
                        key,
                        condition,
                        value,
                        other_key: None,
                    });
                } else if let Expr::Subquery(q) = &**left {
                    let value = self.subquery(q, e)?;
                    let key = self.filter_key(right)?;
                    out.push(Condition {
                        key,
                        condition: flip(condition),
                        value,
                        other_key: None,
                    });
                } else if let Some(value) = self.literal(right) {
                    let value = self.typed(left, value);
                    let key = self.filter_key(left)?;
                    out.push(Condition {
                        key,
                        condition,
                        value,
                        other_key: None,
                    });
                } else if let Some(value) = self.literal(left) {
                    let value = self.typed(right, value);
                    let key = self.filter_key(right)?;
                    out.push(Condition {
                        key,
                        condition: flip(condition),
                        value,
                        other_key: None,
                    });
                } else {
                    out.push(self.column_comparison(left, condition, right, e)?);
                }
                Ok(())
            }
            Expr::Between {
                expr,
                negated: false,
                low,
                high,
            } => {
                let (Some(lo), Some(hi)) = (self.literal(low), self.literal(high)) else {
                    return Err(unsupported("between_expression", e));
                };
                let (lo, hi) = (self.typed(expr, lo), self.typed(expr, hi));
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key: key.clone(),
                    condition: "greater_than_equal_to",
                    value: lo,
                    other_key: None,
                });
                out.push(Condition {
                    key,
                    condition: "less_than_equal_to",
                    value: hi,
                    other_key: None,
                });
                Ok(())
            }
            Expr::IsNull(x) => {
                let key = self.filter_key(x)?;
                out.push(Condition {
                    key,
                    condition: "equal_to",
                    value: Json::Null,
                    other_key: None,
                });
                Ok(())
            }
            Expr::IsNotNull(x) => {
                let key = self.filter_key(x)?;
                out.push(Condition {
                    key,
                    condition: "not_equal_to",
                    value: Json::Null,
                    other_key: None,
                });
                Ok(())
            }
            Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => {
                let Some(value) = self.literal(pattern) else {
                    return Err(unsupported("like_pattern", e));
                };
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key,
                    condition: if *negated { "not_like" } else { "like" },
                    value,
                    other_key: None,
                });
                Ok(())
            }
            Expr::InList {
                expr,
                list,
                negated: true,
            } => {
                let key = self.filter_key(expr)?;
                for item in list {
                    let value = self
                        .literal(item)
                        .ok_or_else(|| unsupported("in_list_expression", item))?;
                    out.push(Condition {
                        key: key.clone(),
                        condition: "not_equal_to",
                        value,
                        other_key: None,
                    });
                }
                Ok(())
            }
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => {
                let value = self.subquery(subquery, e)?;
                let key = self.filter_key(expr)?;
                out.push(Condition {
                    key,
                    condition: if *negated { "not_in" } else { "is_in" },
                    value,
                    other_key: None,
                });
                Ok(())
            }
            Expr::Like { negated: true, .. } => Err(unsupported("not_like", e)),
            Expr::Between { negated: true, .. } => Err(unsupported("not_between", e)),
            Expr::UnaryOp {
                op: UnaryOperator::Not, ..
            } => Err(unsupported("not", e)),
            Expr::InList { .. } => Err(unsupported("nested_or", e)),
            Expr::Case { .. } => Err(unsupported("case", e)),
            _ => Err(unsupported("predicate", e)),
        }
    }

    /// Splits a disjunction into branches of AND-ed conditions (an `IN` list is one branch per
    /// value).
    pub(super) fn branches(&mut self, e: &Expr, out: &mut Vec<Vec<Condition>>) -> Result<(), LowerError> {
        match e {
            Expr::Nested(inner) => self.branches(inner, out),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or,
                right,
            } => {
                self.branches(left, out)?;
                self.branches(right, out)
            }
            Expr::InList {
                expr,
                list,
                negated: false,
            } => {
                let key = self.filter_key(expr)?;
                for item in list {
                    let value = self
                        .literal(item)
                        .ok_or_else(|| unsupported("in_list_expression", item))?;
                    out.push(vec![Condition {
                        key: key.clone(),
                        condition: "equal_to",
                        value,
                        other_key: None,
                    }]);
                }
                Ok(())
            }
            _ => {
                let mut branch = Vec::new();
                self.conditions(e, &mut branch)?;
                out.push(branch);
                Ok(())
            }
        }
    }

    /// The operands of a (nested, possibly parenthesised) AND.
    pub(super) fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        Self::operands(e, &BinaryOperator::And, out)
    }

    /// The operands of a (nested, possibly parenthesised) OR.
    pub(super) fn disjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        Self::operands(e, &BinaryOperator::Or, out)
    }

    /// The operands of a chain of `op` (AND or OR), left to right, through parentheses around
    /// the same operator. A conjunct is also taken out of its own parentheses (`WHERE (a.k =
    /// b.k) AND …` has the conjunct `a.k = b.k`, a comma join's condition).
    fn operands<'e>(e: &'e Expr, op: &BinaryOperator, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                Self::operands(left, op, out);
                Self::operands(right, op, out);
            }
            Expr::Nested(inner) if matches!(&**inner, Expr::BinaryOp { op: o, .. } if o == op) => {
                Self::operands(inner, op, out)
            }
            Expr::Nested(inner) if *op == BinaryOperator::And => Self::operands(inner, op, out),
            other => out.push(other),
        }
    }

    /// A literal compared with column `col`, typed like the column (SQLite applies the column's
    /// numeric affinity to a text literal): an integer-looking string (`'1970'`, canonical
    /// digits only) against an INTEGER/REAL/NUMERIC column becomes the number `1970`, so the
    /// call means the same in any executor. Anything else (expressions, text columns, other
    /// strings) is returned as is.
    pub(super) fn typed(&self, col: &Expr, value: Json) -> Json {
        let Some(text) = value.as_str() else { return value };
        let Ok((i, c)) = self.resolve_raw(col) else {
            return value;
        };
        if self.schema.dtype(&self.tables[i].table, &c) == "string" {
            return value;
        }
        match text.parse::<i64>() {
            Ok(n) if n.to_string() == text => json!(n),
            _ => value,
        }
    }
}

fn strip_nested(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(inner) => strip_nested(inner),
        other => other,
    }
}
