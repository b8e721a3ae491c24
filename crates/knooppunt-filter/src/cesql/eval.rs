//! Evaluation (section 3). Every operator is total: when an operand fails, the operator
//! returns the zero value of its own return type with that error (so `1 != 1 / 0` is `false`
//! with a math error); a failed implicit cast gives the zero value of the target type and
//! evaluation of that operator goes on (so `NOT 10` is `true` with a cast error).
//!
//! Every byte an attribute copies, a comparison or `LIKE` scans and a function reads or makes
//! is charged to a [`Meter`] (nodes are not: a filter has at most `max_nodes`, each visited
//! once). Once the meter is spent every node returns at once with a `Budget` error, so a
//! filter costs at most its nodes and its budget.

use knooppunt_event::AttributeRef;
use knooppunt_event::Event;

use super::functions::Function;
use super::like::LikePattern;
use super::parser::{BinaryOp, Expr};
use super::value::{Type, Value};
use super::{ErrorKind, EvalError};
use crate::cost::Meter;

type Outcome = (Value, Option<EvalError>);

/// Evaluates `expr`, and on error returns the zero value of `ty` from the enclosing function.
macro_rules! operand {
    ($expr:expr, $event:expr, $meter:expr, $ty:expr) => {
        match evaluate($expr, $event, $meter) {
            (value, None) => value,
            (_, Some(error)) => return ($ty.zero(), Some(error)),
        }
    };
}

fn cast(value: Value, to: Type, error: &mut Option<EvalError>) -> Value {
    match value.cast(to, false) {
        Ok(value) => value,
        Err((zero, cast_error)) => {
            error.get_or_insert(cast_error);
            zero
        }
    }
}

fn boolean(value: Value, error: &mut Option<EvalError>) -> bool {
    matches!(cast(value, Type::Boolean, error), Value::Boolean(true))
}

fn integer(value: Value, error: &mut Option<EvalError>) -> i32 {
    match cast(value, Type::Integer, error) {
        Value::Integer(n) => n,
        _ => 0,
    }
}

/// An attribute's value, its copy charged to the meter.
fn read_attribute(event: &Event, name: &str, meter: &mut Meter) -> Outcome {
    let value = match event.attribute(name) {
        Some(AttributeRef::String(s)) => {
            if !meter.charge(s.len() as u64) {
                return spent();
            }
            Value::String(s.to_owned())
        }
        Some(AttributeRef::Integer(n)) => Value::Integer(n),
        Some(AttributeRef::Boolean(b)) => Value::Boolean(b),
        None => {
            return (
                Type::Boolean.zero(),
                Some(EvalError::new(
                    ErrorKind::MissingAttribute,
                    format!("the event has no attribute `{name}`"),
                )),
            );
        }
    };
    (value, None)
}

/// What every node returns once the meter is spent.
fn spent() -> Outcome {
    (
        Type::Boolean.zero(),
        Some(EvalError::new(
            ErrorKind::Budget,
            "the filter spent its evaluation budget on this event",
        )),
    )
}

/// The bytes a value occupies as a string (0 for the others).
fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        _ => 0,
    }
}

pub(crate) fn evaluate(expr: &Expr, event: &Event, meter: &mut Meter) -> Outcome {
    let bytes = match expr {
        Expr::Literal(value) => string_bytes(value),
        _ => 0,
    };
    // Nodes are not charged: a filter has at most `max_nodes` of them (checked when it was
    // read), each visited once; what an event can make unbounded is the bytes.
    if bytes > 0 && !meter.charge(bytes as u64) {
        return spent();
    }
    match expr {
        Expr::Literal(value) => (value.clone(), None),
        Expr::Attribute(name) => read_attribute(event, name, meter),
        Expr::Exists(name) => (Value::Boolean(event.attribute(name).is_some()), None),
        Expr::Not(inner) => {
            let value = operand!(inner, event, meter, Type::Boolean);
            let mut error = None;
            (Value::Boolean(!boolean(value, &mut error)), error)
        }
        Expr::Negate(inner) => {
            let value = operand!(inner, event, meter, Type::Integer);
            let mut error = None;
            let n = integer(value, &mut error);
            match n.checked_neg() {
                Some(negated) => (Value::Integer(negated), error),
                None => math_error("-(-2147483648) overflows"),
            }
        }
        Expr::Chain { first, rest } => chain(first, rest, event, meter),
        Expr::Like {
            value,
            pattern,
            negated,
        } => like(value, pattern, *negated, event, meter),
        Expr::In {
            value,
            set,
            negated,
        } => in_set(value, set, *negated, event, meter),
        Expr::Call {
            name,
            function,
            args,
        } => call(name, *function, args, event, meter),
    }
}

// The operators below are functions of their own, so that `evaluate`, which recurses, keeps
// a small stack frame.

fn like(
    value: &Expr,
    pattern: &LikePattern,
    negated: bool,
    event: &Event,
    meter: &mut Meter,
) -> Outcome {
    let value = operand!(value, event, meter, Type::Boolean);
    let mut error = None;
    let text = cast(value, Type::String, &mut error).to_string();
    if !meter.charge(pattern.cost(text.len())) {
        return spent();
    }
    (Value::Boolean(pattern.matches(&text) != negated), error)
}

fn in_set(value: &Expr, set: &[Expr], negated: bool, event: &Event, meter: &mut Meter) -> Outcome {
    let value = operand!(value, event, meter, Type::Boolean);
    let mut error = None;
    let mut found = false;
    for element in set {
        let element = operand!(element, event, meter, Type::Boolean);
        if !meter.charge(string_bytes(&value) as u64) {
            return spent();
        }
        if cast(element, value.ty(), &mut error) == value {
            found = true;
        }
    }
    (Value::Boolean(found != negated), error)
}

fn call(
    name: &str,
    function: Option<Function>,
    args: &[Expr],
    event: &Event,
    meter: &mut Meter,
) -> Outcome {
    let Some(function) = function else {
        return (
            Type::Boolean.zero(),
            Some(EvalError::new(
                ErrorKind::MissingFunction,
                format!("there is no function {name} with {} arguments", args.len()),
            )),
        );
    };
    let mut error = None;
    let mut values = Vec::with_capacity(args.len());
    for (index, arg) in args.iter().enumerate() {
        let value = operand!(arg, event, meter, function.return_type());
        values.push(match function.parameter(index) {
            Some(ty) => cast(value, ty, &mut error),
            None => value,
        });
    }
    // A function reads its strings once and makes one at most three times as long (case
    // mapping); CONCAT's result is known before it is made.
    let read: usize = values.iter().map(string_bytes).sum();
    let made = function.result_bytes(&values);
    if !meter.allows_string(made) {
        return (
            function.return_type().zero(),
            Some(EvalError::new(
                ErrorKind::FunctionEvaluation,
                format!(
                    "{name} would make a string of {made} bytes; the limit is {}",
                    meter.limits().max_string_bytes
                ),
            )),
        );
    }
    if !meter.charge((read + made) as u64) {
        return spent();
    }
    if function == Function::DataMatches {
        // Reads the event's data: charged by its size.
        let data = match event.data() {
            Some(knooppunt_event::Data::Json(json)) => Some(json.as_str()),
            _ => None,
        };
        if !meter.charge(data.map_or(0, str::len) as u64) {
            return spent();
        }
        let text = |value: &Value| match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let matches = super::functions::data_matches(data, &text(&values[0]), &text(&values[1]));
        return (Value::Boolean(matches), error);
    }
    let (value, call_error) = function.call(values);
    (value, error.or(call_error))
}

fn math_error(why: &str) -> Outcome {
    (
        Type::Integer.zero(),
        Some(EvalError::new(ErrorKind::Math, why)),
    )
}

/// `first op1 e1 op2 e2 ...` as the left-deep tree `((first op1 e1) op2 e2) ...` would be
/// evaluated, without recursing along the chain: an error in one step makes every later
/// step return its zero value with that error, as a failed left operand does.
fn chain(first: &Expr, rest: &[(BinaryOp, Expr)], event: &Event, meter: &mut Meter) -> Outcome {
    let mut outcome = evaluate(first, event, meter);
    for (op, right) in rest {
        outcome = match outcome {
            (left, None) => binary(*op, left, right, event, meter),
            (_, Some(error)) => {
                let zero = if op.returns_integer() {
                    Type::Integer.zero()
                } else {
                    Type::Boolean.zero()
                };
                (zero, Some(error))
            }
        };
    }
    outcome
}

/// One operator, its left operand already evaluated without error.
fn binary(op: BinaryOp, left: Value, right: &Expr, event: &Event, meter: &mut Meter) -> Outcome {
    let mut error = None;
    match op {
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            let left = boolean(left, &mut error);
            match (op, left) {
                (BinaryOp::And, false) => return (Value::Boolean(false), error),
                (BinaryOp::Or, true) => return (Value::Boolean(true), error),
                _ => {}
            }
            let right = operand!(right, event, meter, Type::Boolean);
            let right = boolean(right, &mut error);
            let result = match op {
                BinaryOp::Xor => left != right,
                _ => right,
            };
            (Value::Boolean(result), error)
        }
        BinaryOp::Equal | BinaryOp::NotEqual => {
            let right = operand!(right, event, meter, Type::Boolean);
            if !meter.charge(string_bytes(&right) as u64) {
                return spent();
            }
            // `=` is ambiguous: the right operand's type picks the definition.
            let left = cast(left, right.ty(), &mut error);
            let equal = left == right;
            (Value::Boolean(equal == (op == BinaryOp::Equal)), error)
        }
        BinaryOp::Less | BinaryOp::LessEqual | BinaryOp::Greater | BinaryOp::GreaterEqual => {
            let right = operand!(right, event, meter, Type::Boolean);
            let (left, right) = (integer(left, &mut error), integer(right, &mut error));
            let result = match op {
                BinaryOp::Less => left < right,
                BinaryOp::LessEqual => left <= right,
                BinaryOp::Greater => left > right,
                _ => left >= right,
            };
            (Value::Boolean(result), error)
        }
        BinaryOp::Add
        | BinaryOp::Subtract
        | BinaryOp::Multiply
        | BinaryOp::Divide
        | BinaryOp::Modulo => {
            let right = operand!(right, event, meter, Type::Integer);
            let (left, right) = (integer(left, &mut error), integer(right, &mut error));
            if matches!(op, BinaryOp::Divide | BinaryOp::Modulo) && right == 0 {
                return math_error("division by zero");
            }
            let result = match op {
                BinaryOp::Add => left.checked_add(right),
                BinaryOp::Subtract => left.checked_sub(right),
                BinaryOp::Multiply => left.checked_mul(right),
                BinaryOp::Divide => left.checked_div(right),
                _ => left.checked_rem(right),
            };
            match result {
                Some(n) => (Value::Integer(n), error),
                None => math_error("the result overflows a 32-bit integer"),
            }
        }
    }
}
