//! Row-wise expressions: arithmetic (`a + b`, `CAST(a AS REAL) / b`, `a * 100 / b`), `||`,
//! `CAST`, and SQLite's scalar functions (`SUBSTR`, `ABS`, `STRFTIME`, `DATE`, `DATETIME`,
//! `TIME`, `JULIANDAY`, `LENGTH`, `UPPER`, `LOWER`, `INSTR`, `REPLACE`, `TRIM`/`LTRIM`/`RTRIM`,
//! `ROUND`) over the columns of one row, each operation a `transform_data` call writing a new
//! column that the query then reads like any column: in WHERE (a filter on it), SELECT, ORDER
//! BY, or inside an aggregate (`AVG(a - b)` is the mean of the `a - b` column). Nested
//! expressions are one transform per operation, innermost first. The executor computes each
//! with SQLite's semantics (`tools::executor::transform`).

use serde_json::{Value as Json, json};
use sqlparser::ast::{BinaryOperator, CastKind, DataType, Expr, TrimWhereField};

use super::*;
use crate::sql::{LowerError, unsupported};

impl<'s> Builder<'s> {
    /// The column holding `e`'s value for each row: a column of the joined table, or the column
    /// a chain of transforms writes.
    pub(super) fn row_key(&mut self, e: &Expr) -> Result<String, LowerError> {
        match e {
            Expr::Nested(inner) => self.row_key(inner),
            Expr::BinaryOp { left, op, right } => self.arithmetic_key(left, op, right, e),
            Expr::Cast {
                expr,
                data_type,
                kind: CastKind::Cast,
                ..
            } => {
                let to = cast_type(data_type).ok_or_else(|| unsupported("cast", e))?;
                let key = self.row_key(expr)?;
                Ok(self.expr_transform(key, "cast", json!({ "type": to })))
            }
            Expr::Substring {
                expr,
                substring_from: Some(start),
                substring_for,
                ..
            } => self.substring(expr, start, substring_for.as_deref(), e),
            Expr::Substring { .. } => Err(unsupported("substring_arguments", e)),
            Expr::Case { .. } => Ok(self.case_key(e)?.expect("a CASE")),
            Expr::Function(f) if ident_name(&f.name).eq_ignore_ascii_case("iif") => {
                Ok(self.case_key(e)?.expect("an IIF"))
            }
            Expr::Function(f) => self.function_key(f, e),
            // `TRIM(x)`, `TRIM(x, chars)`, `TRIM(LEADING chars FROM x)`.
            Expr::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters,
            } => {
                let side = match trim_where {
                    None | Some(TrimWhereField::Both) => "both",
                    Some(TrimWhereField::Leading) => "left",
                    Some(TrimWhereField::Trailing) => "right",
                };
                let chars = match (trim_what, trim_characters.as_deref()) {
                    (None, None) => None,
                    (Some(w), None) => Some(&**w),
                    (None, Some([c])) => Some(c),
                    _ => return Err(unsupported("function_arguments", e)),
                };
                let mut args = json!({ "side": side });
                if let Some(c) = chars {
                    args["characters"] = self
                        .literal(c)
                        .filter(|v| !v.is_null())
                        .ok_or_else(|| unsupported("function_arguments", e))?;
                }
                let key = self.row_key(expr)?;
                Ok(self.add_transform(key, "trim", args, e))
            }
            _ => self.column_key(e),
        }
    }

    /// `left <op> right` row-wise: `arithmetic {operator, other_key_name | value}` on the left
    /// operand's column. A literal on the left of `+`, `*` is moved right (the same value);
    /// `L - x` is `(x * -1) + L`; a literal left of `/` or `||` has no operation.
    fn arithmetic_key(
        &mut self,
        left: &Expr,
        op: &BinaryOperator,
        right: &Expr,
        e: &Expr,
    ) -> Result<String, LowerError> {
        let operator = match op {
            BinaryOperator::Plus => "add",
            BinaryOperator::Minus => "subtract",
            BinaryOperator::Multiply => "multiply",
            BinaryOperator::Divide => "divide",
            BinaryOperator::StringConcat => "concat",
            _ => return Err(unsupported("operator", e)),
        };
        let (l, r) = (self.literal(left), self.literal(right));
        let (key, arg) = match (l, r) {
            (None, Some(v)) => (self.row_key(left)?, json!({"operator": operator, "value": v})),
            (Some(v), None) if matches!(operator, "add" | "multiply") => {
                (self.row_key(right)?, json!({"operator": operator, "value": v}))
            }
            (Some(v), None) if operator == "subtract" => {
                let x = self.row_key(right)?;
                let negated = self.expr_transform(x, "arithmetic", json!({"operator": "multiply", "value": -1}));
                (negated, json!({"operator": "add", "value": v}))
            }
            (None, None) => {
                let a = self.row_key(left)?;
                let b = self.row_key(right)?;
                (a, json!({"operator": operator, "other_key_name": b}))
            }
            _ => return Err(unsupported("expression", e)),
        };
        Ok(self.expr_transform(key, "arithmetic", arg))
    }

    /// A scalar function of the row as a transform of its (row-wise) first argument; the other
    /// arguments must be literals.
    fn function_key(&mut self, f: &sqlparser::ast::Function, e: &Expr) -> Result<String, LowerError> {
        let name = ident_name(&f.name).to_lowercase();
        let args = function_args(f)?;
        let text = |b: &Self, v: &Expr| -> Result<Json, LowerError> {
            b.literal(v)
                .filter(|v| !v.is_null())
                .ok_or_else(|| unsupported("function_arguments", e))
        };
        let unary = |name: &str| -> Option<&'static str> {
            ["abs", "length", "upper", "lower", "julianday"]
                .into_iter()
                .find(|n| *n == name)
        };
        match (name.as_str(), args.as_slice()) {
            ("substr" | "substring", [x, start]) => self.substring(x, start, None, e),
            ("substr" | "substring", [x, start, len]) => self.substring(x, start, Some(len), e),
            ("strftime", [fmt, x]) => {
                let format = text(self, fmt)?;
                let format = format.as_str().ok_or_else(|| unsupported("strftime_format", e))?;
                let key = self.row_key(x)?;
                Ok(match format {
                    // The component transform of the reference pool (`datetime`).
                    "%Y" | "%m" | "%d" => self.add_transform(key, "datetime", json!({ "pattern": format }), e),
                    other => self.add_transform(key, "strftime", json!({ "format": other }), e),
                })
            }
            ("date" | "datetime" | "time", [x]) => {
                let format = match name.as_str() {
                    "date" => "%Y-%m-%d",
                    "datetime" => "%Y-%m-%d %H:%M:%S",
                    _ => "%H:%M:%S",
                };
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, "strftime", json!({ "format": format }), e))
            }
            (n, [x]) if unary(n).is_some() => {
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, unary(n).expect("checked"), json!({}), e))
            }
            ("date" | "datetime" | "time" | "julianday" | "strftime", _) => Err(unsupported("date_modifier", e)),
            ("round", [x]) => {
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, "round", json!({"digits": 0}), e))
            }
            ("round", [x, digits]) => {
                let digits = self
                    .literal(digits)
                    .and_then(|d| d.as_i64())
                    .ok_or_else(|| unsupported("function_arguments", e))?;
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, "round", json!({ "digits": digits }), e))
            }
            ("instr", [x, needle]) => {
                let needle = text(self, needle)?;
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, "instr", json!({ "substring": needle }), e))
            }
            ("replace", [x, pattern, replacement]) => {
                let (p, r) = (text(self, pattern)?, text(self, replacement)?);
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, "replace", json!({"pattern": p, "replacement": r}), e))
            }
            ("trim" | "ltrim" | "rtrim", [x, rest @ ..]) if rest.len() <= 1 => {
                let side = match name.as_str() {
                    "trim" => "both",
                    "ltrim" => "left",
                    _ => "right",
                };
                let mut args = json!({ "side": side });
                if let [chars] = rest {
                    args["characters"] = text(self, chars)?;
                }
                let key = self.row_key(x)?;
                Ok(self.add_transform(key, "trim", args, e))
            }
            _ => Err(unsupported("function", e)),
        }
    }

    /// The column `EXPR_<n>` holding `operation(key, args)`; the same operation asked again
    /// reads the column written the first time.
    fn expr_transform(&mut self, key: String, operation: &'static str, args: Json) -> String {
        if let Some(t) = self
            .transforms
            .iter()
            .find(|t| t.key == key && t.operation == operation && t.args == args)
        {
            return t.output.clone();
        }
        let n = self.transforms.iter().filter(|t| t.output.starts_with("EXPR_")).count();
        let output = format!("EXPR_{n}");
        self.transforms.push(Transform {
            key,
            output: output.clone(),
            operation,
            args,
        });
        output
    }
}

/// The `cast` type of a SQL type name, by SQLite's affinity rules (`INT` anywhere: integer;
/// `CHAR`/`CLOB`/`TEXT`: text; `REAL`/`FLOA`/`DOUB`: real; otherwise numeric); BLOB has none.
fn cast_type(t: &DataType) -> Option<&'static str> {
    let s = t.to_string().to_uppercase();
    if s.contains("INT") {
        Some("integer")
    } else if s.contains("CHAR") || s.contains("CLOB") || s.contains("TEXT") {
        Some("text")
    } else if s.contains("BLOB") {
        None
    } else if s.contains("REAL") || s.contains("FLOA") || s.contains("DOUB") {
        Some("real")
    } else {
        Some("numeric")
    }
}

/// Whether `e` calls an aggregate function (`COUNT`, `SUM`, `AVG`, `MIN`, `MAX`) anywhere.
pub(super) fn contains_aggregate(e: &Expr) -> bool {
    let flow = sqlparser::ast::visit_expressions(e, |x| match x {
        Expr::Function(f)
            if ["count", "sum", "avg", "min", "max", "total", "group_concat"]
                .contains(&ident_name(&f.name).to_lowercase().as_str()) =>
        {
            std::ops::ControlFlow::Break(())
        }
        _ => std::ops::ControlFlow::Continue(()),
    });
    flow.is_break()
}

/// The scalar functions [`Builder::row_key`] lowers.
pub(super) fn is_scalar_function(f: &sqlparser::ast::Function) -> bool {
    let name = ident_name(&f.name).to_lowercase();
    [
        "substr",
        "substring",
        "abs",
        "strftime",
        "date",
        "datetime",
        "time",
        "julianday",
        "length",
        "upper",
        "lower",
        "instr",
        "replace",
        "trim",
        "ltrim",
        "rtrim",
        "round",
    ]
    .contains(&name.as_str())
}
