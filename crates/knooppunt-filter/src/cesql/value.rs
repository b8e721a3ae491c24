//! The CESQL type system (section 3.1) and its casts (section 3.7).

use std::fmt;

use super::{ErrorKind, EvalError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Boolean(bool),
    Integer(i32),
    String(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Boolean,
    Integer,
    String,
}

impl Type {
    /// The zero value an operator returns when it fails.
    pub fn zero(self) -> Value {
        match self {
            Type::Boolean => Value::Boolean(false),
            Type::Integer => Value::Integer(0),
            Type::String => Value::String(String::new()),
        }
    }
}

impl Value {
    pub fn ty(&self) -> Type {
        match self {
            Value::Boolean(_) => Type::Boolean,
            Value::Integer(_) => Type::Integer,
            Value::String(_) => Type::String,
        }
    }

    /// Casts to `to`. `explicit` casts (the `INT`, `BOOL` and `STRING` functions) also turn
    /// an Integer into a Boolean; implicit ones do not (the TCK's `NOT 10` is a cast error).
    pub(crate) fn cast(self, to: Type, explicit: bool) -> Result<Value, (Value, EvalError)> {
        let fail = |why: String| Err((to.zero(), EvalError::new(ErrorKind::Cast, why)));
        match (self, to) {
            (value, to) if value.ty() == to => Ok(value),
            (Value::Integer(n), Type::String) => Ok(Value::String(n.to_string())),
            (Value::Boolean(b), Type::String) => Ok(Value::String(b.to_string())),
            (Value::Boolean(b), Type::Integer) => Ok(Value::Integer(i32::from(b))),
            (Value::Integer(n), Type::Boolean) if explicit => Ok(Value::Boolean(n != 0)),
            (Value::Integer(n), Type::Boolean) => fail(format!(
                "the integer {n} is not implicitly a boolean; compare it or use BOOL()"
            )),
            (Value::String(s), Type::Integer) => match s.parse::<i32>() {
                Ok(n) => Ok(Value::Integer(n)),
                Err(_) => fail(format!("'{s}' is not a 32-bit integer")),
            },
            (Value::String(s), Type::Boolean) => match s.to_lowercase().as_str() {
                "true" => Ok(Value::Boolean(true)),
                "false" => Ok(Value::Boolean(false)),
                _ => fail(format!("'{s}' is not a boolean (true or false)")),
            },
            (value, to) => unreachable!("{value:?} to {to:?} is covered above"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Boolean(b) => write!(f, "{b}"),
            Value::Integer(n) => write!(f, "{n}"),
            Value::String(s) => f.write_str(s),
        }
    }
}
