//! Migration of gold calls between A_old and A_new: [`migrate`] (A_old → A_new, with whether the
//! old call is now invalid, [`Migrated::loud`]) and [`unmigrate`] (A_new → the A_old call the
//! executor runs). Each operator's rule is in its file; the change log is applied in its
//! canonical order, and undone in reverse.

use super::{Change, default_flip, nested_object, parameter_rename, required_swap, type_drift};
use crate::tools::Call;

/// A gold call migrated from A_old to A_new, and whether the old call is invalid under A_new.
#[derive(Debug, Clone, PartialEq)]
pub struct Migrated {
    /// The A_new call.
    pub call: Call,
    /// Whether a loud change (module docs) touched this call, so the old call fails A_new.
    pub loud: bool,
}

/// Rewrites an A_old call into A_new (the migration table in the module docs).
pub fn migrate(call: &Call, changes: &[Change]) -> Migrated {
    let mut args = call.arguments.clone();
    let mut name = call.name.clone();
    let mut loud = false;
    for c in changes {
        match c {
            Change::TypeDrift { parameter, .. } => loud |= type_drift::migrate(&mut args, parameter),
            Change::DefaultFlip { parameter, old, .. } => default_flip::fill(&mut args, parameter, old),
            Change::RequiredSwap {
                parameter,
                now_required,
                default,
            } => loud |= required_swap::migrate(&mut args, parameter, *now_required, default),
            Change::ParameterRename { from, to } => loud |= parameter_rename::migrate(&mut args, from, to),
            Change::NestedObject { group, members } => loud |= nested_object::migrate(&mut args, group, members),
            Change::EndpointEvolution { name_new, .. } => {
                name = name_new.clone();
                loud = true;
            }
        }
    }
    Migrated {
        call: Call {
            name,
            arguments: args,
            label: call.label.clone(),
        },
        loud,
    }
}

/// Rewrites an A_new call back into the A_old call the executor runs (the inverse of
/// [`migrate`]; an omitted flipped default takes its A_new value). Errors: a nested group that
/// is not an object, or a drifted value that does not parse as its A_old type.
pub fn unmigrate(call: &Call, changes: &[Change]) -> Result<Call, String> {
    let mut args = call.arguments.clone();
    let mut name = call.name.clone();
    for c in changes.iter().rev() {
        match c {
            Change::EndpointEvolution { name_old, .. } => name = name_old.clone(),
            Change::NestedObject { group, .. } => nested_object::unmigrate(&mut args, group)?,
            Change::ParameterRename { from, to } => parameter_rename::unmigrate(&mut args, from, to),
            Change::DefaultFlip { parameter, new, .. } => default_flip::fill(&mut args, parameter, new),
            Change::RequiredSwap {
                parameter,
                now_required,
                default,
            } => required_swap::unmigrate(&mut args, parameter, *now_required, default),
            Change::TypeDrift { parameter, from } => type_drift::unmigrate(&mut args, parameter, from)?,
        }
    }
    Ok(Call {
        name,
        arguments: args,
        label: call.label.clone(),
    })
}
