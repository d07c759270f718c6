//! `calculate`: `add`, `subtract`, `multiply`, `divide`, `round` on numbers, single values or lists
//! (elementwise, a single value broadcast, also over an empty list); `divide` follows SQLite:
//! integer by integer truncates toward zero, x/0 and NULL give NULL.

use super::args::{Args, kind};
use super::cells::*;
use super::{R, Value};
use crate::tools::as_label_ref;
use crate::tools::table::{array_from_datums, datums};
use crate::verify::Datum;

/// `calculate(operand_a, operand_b, operator)` (toolforge extension): `add`, `subtract`,
/// `multiply`, `divide`, `round` (`operand_a` rounded to `operand_b` decimals, half away from
/// zero, a real: SQLite's `ROUND`) on numbers, single values or lists (elementwise; a single value is
/// broadcast, so a list and a single value give a list of the list's length, empty for an empty
/// list). Operands are numbers or `$LABEL$` references. Integers stay integers; `divide` is
/// SQLite's: integer by integer is the quotient truncated toward zero (`7 / 2` = 3, `-7 / 2` =
/// -3), real otherwise; division by zero and NULL operands give NULL.
pub(super) fn calculate(args: &Args) -> R<Value> {
    // An operand's values, and whether it is a single value (a number or a scalar output).
    let operand = |name: &str| -> R<(Vec<Datum>, bool)> {
        let v = args.json(name)?;
        if as_label_ref(v).is_none() {
            return Ok((vec![json_to_datum(v)?], true));
        }
        match args.value(name)? {
            Value::Scalar(d) => Ok((vec![d.clone()], true)),
            Value::Column(a) => Ok((datums(a.as_ref()), false)),
            other => Err(format!("`{name}` must be a number or a list, got {}", kind(other))),
        }
    };
    let ((a, a_scalar), (b, b_scalar)) = (operand("operand_a")?, operand("operand_b")?);
    let op = args.str("operator")?;
    let scalar = a_scalar && b_scalar;
    // A single value broadcasts over a list of any length (SQL's `x * 100` over no rows is no
    // rows); two lists must be row-aligned.
    let n = match (a_scalar, b_scalar) {
        (true, false) => b.len(),
        (false, true) => a.len(),
        _ => a.len().max(b.len()),
    };
    if (!a_scalar && a.len() != n) || (!b_scalar && b.len() != n) || (n > 0 && (a.is_empty() || b.is_empty())) {
        return Err(format!("operands have lengths {} and {}", a.len(), b.len()));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (x, y) = (&a[i.min(a.len() - 1)], &b[i.min(b.len() - 1)]);
        out.push(match op {
            // `ROUND(x, digits)` (SQLite: half away from zero, a real).
            "round" => match y {
                Datum::Null => Datum::Null,
                d => super::scalar::round(x, d.as_f64().unwrap_or(0.0) as i64),
            },
            _ => arith(x, y, op)?,
        });
    }
    if scalar {
        Ok(Value::Scalar(out.pop().unwrap_or(Datum::Null)))
    } else {
        Ok(Value::Column(array_from_datums(&out)))
    }
}

pub(super) fn arith(x: &Datum, y: &Datum, op: &str) -> R<Datum> {
    let (Some(fx), Some(fy)) = (x.as_f64(), y.as_f64()) else {
        if matches!(x, Datum::Null) || matches!(y, Datum::Null) {
            return Ok(Datum::Null);
        }
        return Err(format!("`calculate` needs numbers, got {x:?} and {y:?}"));
    };
    if let (Datum::Int(a), Datum::Int(b)) = (x, y) {
        let r = match op {
            "add" => a.checked_add(*b),
            "subtract" => a.checked_sub(*b),
            "multiply" => a.checked_mul(*b),
            "divide" if *b == 0 => return Ok(Datum::Null),
            "divide" => a.checked_div(*b),
            _ => None,
        };
        if let Some(r) = r {
            return Ok(Datum::Int(r));
        }
    }
    Ok(match op {
        "add" => Datum::real(fx + fy),
        "subtract" => Datum::real(fx - fy),
        "multiply" => Datum::real(fx * fy),
        "divide" if fy == 0.0 => Datum::Null,
        "divide" => Datum::real(fx / fy),
        other => return Err(format!("unknown operator `{other}`")),
    })
}
