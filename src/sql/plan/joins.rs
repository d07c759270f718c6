//! Joins: the FROM clause (tables, aliases, `JOIN … ON` equalities) and column resolution
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
        };
        let Some((first, rest)) = select.from.split_first() else {
            return Err(unsupported("no_from", "SELECT without FROM"));
        };
        b.add_from_item(first)?;
        // A comma join `FROM a, b WHERE a.k = b.k`: the WHERE equalities linking each further
        // table to the tables before it become its (INNER) join conditions.
        let mut conjuncts = Vec::new();
        if let Some(w) = &select.selection {
            Self::conjuncts(w, &mut conjuncts);
        }
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
                return Err(unsupported(
                    "comma_join",
                    format!("FROM …, {item} without a join condition in WHERE"),
                ));
            }
        }
        Ok(b)
    }

    /// Adds one FROM item: its table and the tables it joins with `JOIN … ON`.
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
                JoinConstraint::On(e) => self.add_join_condition(e, kind)?,
                JoinConstraint::None => {}
                _ => return Err(unsupported("join_condition", join.to_string())),
            }
        }
        Ok(())
    }

    pub(super) fn add_table(&mut self, relation: &TableFactor) -> Result<(), LowerError> {
        let TableFactor::Table { name, alias, .. } = relation else {
            return Err(unsupported("derived_table", relation));
        };
        let raw = ident_name(name);
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
        let (qualifier, col) = match e {
            Expr::Identifier(id) => (None, id.value.clone()),
            Expr::CompoundIdentifier(ids) if ids.len() == 2 => (Some(ids[0].value.clone()), ids[1].value.clone()),
            Expr::Nested(inner) => return self.resolve_raw(inner),
            other => return Err(unsupported("expression", other)),
        };
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
                    if qualifier.is_some() {
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
