//! Joins: the FROM clause (tables, aliases, `JOIN … ON`, `USING`, `NATURAL JOIN`, comma joins
//! linked by WHERE equalities) as the join step's `condition_sequence`, and column resolution
//! against the tables joined so far.

use sqlparser::ast::{BinaryOperator, Expr, JoinConstraint, JoinOperator, Select, TableFactor};

use super::*;
use crate::sql::schema::Schema;
use crate::sql::{LowerError, unsupported};
use crate::tools::table::{JoinCondition, JoinTable, safe_name};

impl<'s> Builder<'s> {
    pub(super) fn new(schema: &'s Schema, select: &Select) -> Result<Self, LowerError> {
        let mut b = Builder {
            schema,
            tables: vec![],
            joins: vec![],
            aliases: vec![],
            transforms: vec![],
            subqueries: vec![],
            join_filters: vec![],
            on_filters: vec![],
            using: vec![],
        };
        let Some((first, rest)) = select.from.split_first() else {
            // `SELECT (SELECT …) - (SELECT …)`: values of subqueries only.
            let reads_subqueries = select.projection.iter().all(|i| match i {
                sqlparser::ast::SelectItem::UnnamedExpr(e)
                | sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. } => visit_expressions(e, |x| match x {
                    Expr::Subquery(_) => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                })
                .is_break(),
                _ => false,
            });
            if reads_subqueries && select.selection.is_none() {
                return Ok(b);
            }
            return Err(unsupported("no_from", "SELECT without FROM"));
        };
        b.add_from_item(first)?;
        // A comma join `FROM a, b WHERE a.k = b.k`: the WHERE equalities between each further
        // table and the tables before it become (INNER) join conditions of the later table. A
        // table no equality links when it is added may be linked by a later table's (`FROM a,
        // b, c WHERE a.x = c.x AND b.y = c.y`); one never linked is a cross product.
        let mut conjuncts = Vec::new();
        let selection = select.selection.as_ref().map(super::negation::push_not).transpose()?;
        if let Some(w) = &selection {
            Self::conjuncts(w, &mut conjuncts);
        }
        let mut unlinked = Vec::new();
        for item in rest {
            b.add_from_item(item)?;
            let newest = b.tables.len() - 1;
            let mut linked = false;
            for &c in &conjuncts {
                let Expr::BinaryOp {
                    left,
                    op: BinaryOperator::Eq,
                    right,
                } = c
                else {
                    continue;
                };
                let (Ok((l, _)), Ok((r, _))) = (b.resolve_raw(left), b.resolve_raw(right)) else {
                    continue;
                };
                if (l == newest) != (r == newest) && !b.join_filters.contains(c) {
                    b.add_join_condition(c, "INNER")?;
                    b.join_filters.push(c.clone());
                    linked = true;
                }
            }
            if !linked {
                unlinked.push((newest, item));
            }
        }
        for (i, item) in unlinked {
            let alias = &b.tables[i].alias;
            let joined = |q: &str| q.split_once('.').is_some_and(|(a, _)| a.eq_ignore_ascii_case(alias));
            if !b.joins.iter().any(|j| joined(&j.0) || joined(&j.1)) {
                return Err(unsupported(
                    "comma_join",
                    format!("FROM …, {item} without a join condition in WHERE"),
                ));
            }
        }
        Ok(b)
    }

    /// Adds one FROM item: its table and the tables it joins with `JOIN … ON`, `USING` or
    /// `NATURAL JOIN`.
    fn add_from_item(&mut self, item: &sqlparser::ast::TableWithJoins) -> Result<(), LowerError> {
        self.add_table(&item.relation)?;
        for join in &item.joins {
            let (kind, constraint) = match &join.join_operator {
                JoinOperator::Join(c) | JoinOperator::Inner(c) => ("INNER", c),
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => ("LEFT", c),
                _ => {
                    return Err(unsupported("join_kind", join.to_string()));
                }
            };
            self.add_table(&join.relation)?;
            match constraint {
                JoinConstraint::On(e) => self.add_on(e, kind)?,
                JoinConstraint::Using(cols) => {
                    for c in cols {
                        self.add_using(&crate::sql::ident::table_name(c), kind, join)?;
                    }
                }
                JoinConstraint::Natural => {
                    let newest = self.tables.len() - 1;
                    let (_, cols) = self
                        .schema
                        .table(&self.tables[newest].table)
                        .expect("table resolved when added");
                    let common: Vec<String> = cols
                        .iter()
                        .filter(|c| (0..newest).any(|i| self.has_column(i, c)))
                        .cloned()
                        .collect();
                    if common.is_empty() {
                        return Err(unsupported("join_condition", join.to_string()));
                    }
                    for c in common {
                        self.add_using(&c, kind, join)?;
                    }
                }
                JoinConstraint::None => {}
            }
        }
        Ok(())
    }

    /// Whether table instance `i` has column `c` (case-insensitive).
    fn has_column(&self, i: usize, c: &str) -> bool {
        let (_, cols) = self
            .schema
            .table(&self.tables[i].table)
            .expect("table resolved when added");
        cols.iter().any(|x| crate::sql::ident::same(x, c))
    }

    /// `JOIN t USING (c)` (and each common column of a `NATURAL JOIN`): the equality of `c` in
    /// the one earlier table having it with `c` in `t`. An unqualified `c` then names the left
    /// column, as in SQLite; `c` in several earlier tables is `unsupported:join_using`.
    fn add_using(&mut self, column: &str, kind: &str, join: &sqlparser::ast::Join) -> Result<(), LowerError> {
        let newest = self.tables.len() - 1;
        let left: Vec<usize> = (0..newest).filter(|&i| self.has_column(i, column)).collect();
        let ([l], true) = (left.as_slice(), self.has_column(newest, column)) else {
            return Err(unsupported("join_using", join.to_string()));
        };
        let declared = |i: usize| {
            let (_, cols) = self.schema.table(&self.tables[i].table).expect("resolved");
            cols.iter()
                .find(|x| crate::sql::ident::same(x, column))
                .cloned()
                .expect("checked")
        };
        let (lc, rc) = (declared(*l), declared(newest));
        self.joins.push(JoinCondition(
            format!("{}.{lc}", self.tables[*l].alias),
            format!("{}.{rc}", self.tables[newest].alias),
            kind.to_string(),
        ));
        self.using.push((column.to_lowercase(), *l));
        Ok(())
    }

    /// The ON clause of the join that added the newest table. Each equality between columns of
    /// two table instances becomes a join condition of the later of the two — for an INNER join
    /// also when that is an earlier table (`a JOIN b JOIN c ON a.x = b.x AND b.y = c.y`: the
    /// first equality is `b`'s, as in SQL, where INNER JOIN conditions filter the product in any
    /// order) provided every join so far is INNER. Any other conjunct of an INNER join's ON is a
    /// row filter (`ON a.x = b.y AND b.z = 1`); of a LEFT join's, `unsupported:join_condition`
    /// (there it decides which rows get NULLs, not which rows stay).
    fn add_on(&mut self, e: &Expr, kind: &str) -> Result<(), LowerError> {
        let e = super::negation::push_not(e)?;
        let mut parts = Vec::new();
        Self::conjuncts(&e, &mut parts);
        let newest = self.tables.len() - 1;
        for c in parts {
            let linked = match c {
                Expr::BinaryOp {
                    left,
                    op: BinaryOperator::Eq,
                    right,
                } => match (self.resolve_raw(left), self.resolve_raw(right)) {
                    (Ok((li, lc)), Ok((ri, rc))) if li != ri => {
                        Some(if li < ri { (li, lc, ri, rc) } else { (ri, rc, li, lc) })
                    }
                    _ => None,
                },
                _ => None,
            };
            match linked {
                Some((li, lc, ri, rc))
                    if ri == newest || (kind == "INNER" && self.joins.iter().all(|j| j.2 == "INNER")) =>
                {
                    let l = format!("{}.{}", self.tables[li].alias, lc);
                    let r = format!("{}.{}", self.tables[ri].alias, rc);
                    self.joins.push(JoinCondition(l, r, kind.to_string()));
                }
                _ if kind == "INNER" => self.on_filters.push(c.clone()),
                _ => return Err(unsupported("join_condition", c)),
            }
        }
        Ok(())
    }

    pub(super) fn add_table(&mut self, relation: &TableFactor) -> Result<(), LowerError> {
        let TableFactor::Table { name, alias, .. } = relation else {
            return Err(unsupported("derived_table", relation));
        };
        let raw = crate::sql::ident::table_name(name);
        let (table, _) = self
            .schema
            .table(&raw)
            .ok_or_else(|| LowerError::Schema(format!("no table {raw}")))?;
        let alias = alias
            .as_ref()
            .map_or_else(|| table.to_string(), |a| a.name.value.clone());
        if self.tables.iter().any(|t| t.alias.eq_ignore_ascii_case(&alias)) {
            return Err(LowerError::Schema(format!("alias {alias} used twice")));
        }
        let uses = self
            .tables
            .iter()
            .filter(|t| t.table.eq_ignore_ascii_case(table))
            .count();
        let prefix = if uses == 0 {
            table.to_string()
        } else {
            format!("{table}_{uses}")
        };
        self.tables.push(JoinTable {
            alias,
            table: table.to_string(),
            prefix,
        });
        Ok(())
    }

    pub(super) fn add_join_condition(&mut self, e: &Expr, kind: &str) -> Result<(), LowerError> {
        match e {
            Expr::Nested(inner) => self.add_join_condition(inner, kind),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.add_join_condition(left, kind)?;
                self.add_join_condition(right, kind)
            }
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                let (li, lc) = self.resolve_raw(left)?;
                let (ri, rc) = self.resolve_raw(right)?;
                let newest = self.tables.len() - 1;
                let ((li, lc), (ri, rc)) = if ri == newest {
                    ((li, lc), (ri, rc))
                } else {
                    ((ri, rc), (li, lc))
                };
                if ri != newest || li == newest {
                    return Err(unsupported("join_condition", e));
                }
                let l = format!("{}.{}", self.tables[li].alias, lc);
                let r = format!("{}.{}", self.tables[ri].alias, rc);
                self.joins.push(JoinCondition(l, r, kind.to_string()));
                Ok(())
            }
            other => Err(unsupported("join_condition", other)),
        }
    }

    /// Resolves a column expression to (table instance index, column name as declared).
    pub(super) fn resolve_raw(&self, e: &Expr) -> Result<(usize, String), LowerError> {
        let Some((qualifier, col)) = crate::sql::ident::column_ref(e) else {
            return Err(unsupported("expression", e));
        };
        let (qualifier, col) = (qualifier.map(|q| q.value.clone()), col.value.clone());
        let mut found = None;
        for (i, t) in self.tables.iter().enumerate() {
            if qualifier
                .as_ref()
                .is_some_and(|q| !q.eq_ignore_ascii_case(&t.alias) && !q.eq_ignore_ascii_case(&t.table))
            {
                continue;
            }
            let (_, cols) = self.schema.table(&t.table).expect("table resolved when added");
            if let Some(c) = cols.iter().find(|c| c.eq_ignore_ascii_case(&col)) {
                if found.is_some() {
                    if qualifier.is_some() || self.using.iter().any(|(u, _)| crate::sql::ident::same(u, &col)) {
                        continue;
                    }
                    return Err(LowerError::Schema(format!("ambiguous column {e}")));
                }
                found = Some((i, c.clone()));
            }
        }
        found.ok_or_else(|| LowerError::Schema(format!("no column {e}")))
    }

    pub(super) fn column_key(&self, e: &Expr) -> Result<String, LowerError> {
        let (i, c) = self.resolve_raw(e)?;
        Ok(safe_name(&self.tables[i].prefix, &c))
    }
}
