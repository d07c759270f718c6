//! Ordering and limit: ORDER BY keys as measures, LIMIT without OFFSET.

use sqlparser::ast::{LimitClause, OrderByKind, Query};

use super::*;
use crate::sql::{LowerError, unsupported};

impl<'s> Builder<'s> {
    /// The ORDER BY keys of `q`, most significant first.
    pub(super) fn order_by(&mut self, q: Option<&Query>) -> Result<Vec<SortKey>, LowerError> {
        let mut order_by = Vec::new();
        if let Some(ob) = q.and_then(|q| q.order_by.as_ref()) {
            let OrderByKind::Expressions(exprs) = &ob.kind else {
                return Err(unsupported("order_by", ob));
            };
            for o in exprs {
                if o.options.nulls_first.is_some() {
                    return Err(unsupported("order_by_nulls", o));
                }
                let measure = self.measure(&o.expr)?;
                order_by.push(SortKey {
                    measure,
                    ascending: o.options.asc.unwrap_or(true),
                });
            }
        }
        Ok(order_by)
    }

    /// The LIMIT of `q` and its OFFSET, in either spelling (`LIMIT n OFFSET m`, SQLite's
    /// `LIMIT m, n`); each an integer literal. A negative LIMIT is no limit and a negative OFFSET
    /// none, as in SQLite (SQLite "SELECT" §"The LIMIT clause").
    pub(super) fn limit(&self, q: Option<&Query>) -> Result<(Option<i64>, Option<i64>), LowerError> {
        let int = |e: &Expr, what: &'static str| {
            self.literal(e)
                .and_then(|v| v.as_i64())
                .ok_or_else(|| unsupported(what, e))
        };
        let (limit, offset) = match q.and_then(|q| q.limit_clause.as_ref()) {
            None => (None, None),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) if limit_by.is_empty() => {
                let limit = limit.as_ref().map(|l| int(l, "limit")).transpose()?;
                let offset = offset.as_ref().map(|o| int(&o.value, "offset")).transpose()?;
                (limit, offset)
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                (Some(int(limit, "limit")?), Some(int(offset, "offset")?))
            }
            Some(other) => return Err(unsupported("limit", other)),
        };
        let offset = offset.filter(|&m| m > 0);
        match (limit, offset) {
            // OFFSET without LIMIT (not SQLite syntax, but parsed): no window to lower.
            (None, Some(_)) => Err(unsupported("offset", "OFFSET without LIMIT")),
            (Some(l), Some(_)) if l < 0 => Err(unsupported("offset", "OFFSET with no limit (LIMIT -1)")),
            window => Ok(window),
        }
    }
}
