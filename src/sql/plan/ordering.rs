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

    /// The LIMIT of `q`.
    pub(super) fn limit(&self, q: Option<&Query>) -> Result<Option<i64>, LowerError> {
        let limit = match q.and_then(|q| q.limit_clause.as_ref()) {
            None => None,
            Some(LimitClause::LimitOffset {
                limit,
                offset: None,
                limit_by,
            }) if limit_by.is_empty() => match limit {
                None => None,
                Some(l) => Some(
                    self.literal(l)
                        .and_then(|v| v.as_i64())
                        .ok_or_else(|| unsupported("limit", l))?,
                ),
            },
            Some(other) => return Err(unsupported("offset", other)),
        };
        Ok(limit)
    }
}
