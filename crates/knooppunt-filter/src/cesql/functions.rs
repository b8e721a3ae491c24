//! The built-in functions every CESQL engine must have (sections 3.5 and 3.7).

use super::value::{Type, Value};
use super::{ErrorKind, EvalError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    Int,
    Bool,
    String,
    Length,
    Concat,
    ConcatWs,
    Lower,
    Upper,
    Trim,
    Left,
    Right,
    Substring2,
    Substring3,
    Abs,
    /// `KNOOPPUNT_DATA_MATCHES(key, value)`, the hub's own function (CESQL lets an
    /// implementation add functions): whether the event's JSON object `data` lets a filter
    /// `key` = `value` through as Open Notificaties judges its abonnementen' filters on a
    /// CloudEvent's data: the member `key` is a string equal to `value`, or `value` is `*`,
    /// or there is no member `key` (data that is no JSON object has none).
    DataMatches,
}

impl Function {
    /// Dispatches on name (case-insensitive) and arity.
    pub(crate) fn resolve(name: &str, arity: usize) -> Option<Function> {
        let function = match (name.to_ascii_uppercase().as_str(), arity) {
            ("INT", 1) => Function::Int,
            ("BOOL", 1) => Function::Bool,
            ("STRING", 1) => Function::String,
            ("LENGTH", 1) => Function::Length,
            ("CONCAT", _) => Function::Concat,
            ("CONCAT_WS", n) if n >= 1 => Function::ConcatWs,
            ("LOWER", 1) => Function::Lower,
            ("UPPER", 1) => Function::Upper,
            ("TRIM", 1) => Function::Trim,
            ("LEFT", 2) => Function::Left,
            ("RIGHT", 2) => Function::Right,
            ("SUBSTRING", 2) => Function::Substring2,
            ("SUBSTRING", 3) => Function::Substring3,
            ("ABS", 1) => Function::Abs,
            ("KNOOPPUNT_DATA_MATCHES", 2) => Function::DataMatches,
            _ => return None,
        };
        Some(function)
    }

    pub(crate) fn return_type(self) -> Type {
        match self {
            Function::Int | Function::Length | Function::Abs => Type::Integer,
            Function::Bool | Function::DataMatches => Type::Boolean,
            _ => Type::String,
        }
    }

    /// The type argument `index` is cast to; `None` for the casting functions, which take
    /// any type.
    pub(crate) fn parameter(self, index: usize) -> Option<Type> {
        match (self, index) {
            (Function::Int | Function::Bool | Function::String, _) => None,
            (Function::Abs, _) => Some(Type::Integer),
            (Function::Left | Function::Right | Function::Substring2 | Function::Substring3, i)
                if i > 0 =>
            {
                Some(Type::Integer)
            }
            _ => Some(Type::String),
        }
    }

    /// At most how many bytes the string it returns for these arguments has (0 for a
    /// function that returns no string).
    pub(crate) fn result_bytes(self, args: &[Value]) -> usize {
        let bytes = |value: &Value| match value {
            Value::String(s) => s.len(),
            Value::Integer(_) => 11,
            Value::Boolean(_) => 5,
        };
        match self {
            Function::Concat => args.iter().map(bytes).sum(),
            Function::ConcatWs => {
                let separator = args.first().map_or(0, bytes);
                let parts: usize = args.iter().skip(1).map(bytes).sum();
                parts + separator * args.len().saturating_sub(2)
            }
            // Case mapping may make a character up to three times as long.
            Function::Lower | Function::Upper => 3 * args.first().map_or(0, bytes),
            Function::String
            | Function::Trim
            | Function::Left
            | Function::Right
            | Function::Substring2
            | Function::Substring3 => args.first().map_or(0, bytes),
            Function::Int
            | Function::Bool
            | Function::Length
            | Function::Abs
            | Function::DataMatches => 0,
        }
    }

    /// Applies the function to arguments already cast to its parameter types.
    pub(crate) fn call(self, args: Vec<Value>) -> (Value, Option<EvalError>) {
        let string = |i: usize| match &args[i] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let integer = |i: usize| match args[i] {
            Value::Integer(n) => n,
            _ => 0,
        };
        let ok = |value| (value, None);
        let failed = |value, why: String| {
            (
                value,
                Some(EvalError::new(ErrorKind::FunctionEvaluation, why)),
            )
        };
        match self {
            Function::Int => cast(args, Type::Integer),
            Function::Bool => cast(args, Type::Boolean),
            Function::String => cast(args, Type::String),
            Function::Length => {
                let length = string(0).chars().count();
                ok(Value::Integer(i32::try_from(length).unwrap_or(i32::MAX)))
            }
            Function::Concat => ok(Value::String((0..args.len()).map(string).collect())),
            Function::ConcatWs => {
                let parts: Vec<String> = (1..args.len()).map(string).collect();
                ok(Value::String(parts.join(&string(0))))
            }
            Function::Lower => ok(Value::String(string(0).to_lowercase())),
            Function::Upper => ok(Value::String(string(0).to_uppercase())),
            Function::Trim => ok(Value::String(string(0).trim().to_owned())),
            Function::Left | Function::Right => {
                let text = string(0);
                let count = integer(1);
                if count < 0 {
                    return failed(
                        Value::String(text),
                        format!("{self:?} needs a length of 0 or more, not {count}"),
                    );
                }
                let chars: Vec<char> = text.chars().collect();
                let count = (count as usize).min(chars.len());
                let slice = if self == Function::Left {
                    &chars[..count]
                } else {
                    &chars[chars.len() - count..]
                };
                ok(Value::String(slice.iter().collect()))
            }
            Function::Substring2 | Function::Substring3 => {
                let chars: Vec<char> = string(0).chars().collect();
                let length = chars.len() as i64;
                let position = i64::from(integer(1));
                if position > length || position < -length {
                    return failed(
                        Value::String(String::new()),
                        format!(
                            "SUBSTRING position {position} is outside a string of {length} characters"
                        ),
                    );
                }
                if position == 0 {
                    return ok(Value::String(String::new()));
                }
                let start = if position > 0 {
                    position - 1
                } else {
                    length + position
                } as usize;
                let end = if self == Function::Substring3 {
                    let wanted = integer(2);
                    if wanted < 0 {
                        return failed(
                            Value::String(String::new()),
                            format!("SUBSTRING length must be 0 or more, not {wanted}"),
                        );
                    }
                    (start + wanted as usize).min(chars.len())
                } else {
                    chars.len()
                };
                ok(Value::String(chars[start..end].iter().collect()))
            }
            // Evaluated with the event (`data_matches`); it never gets here.
            Function::DataMatches => ok(Value::Boolean(false)),
            Function::Abs => {
                let n = integer(0);
                match n.checked_abs() {
                    Some(abs) => ok(Value::Integer(abs)),
                    None => (
                        Value::Integer(i32::MAX),
                        Some(EvalError::new(
                            ErrorKind::Math,
                            "ABS(-2147483648) overflows",
                        )),
                    ),
                }
            }
        }
    }
}

fn cast(mut args: Vec<Value>, to: Type) -> (Value, Option<EvalError>) {
    match args.remove(0).cast(to, true) {
        Ok(value) => (value, None),
        Err((value, error)) => (value, Some(error)),
    }
}

/// [`Function::DataMatches`] on an event's `data` (its JSON text, if it is JSON).
pub(crate) fn data_matches(data: Option<&str>, key: &str, value: &str) -> bool {
    if value == "*" {
        return true;
    }
    let Some(Ok(serde_json::Value::Object(members))) =
        data.map(serde_json::from_str::<serde_json::Value>)
    else {
        return true;
    };
    match members.get(key) {
        None => true,
        Some(serde_json::Value::String(found)) => found == value,
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::data_matches;

    #[test]
    fn data_matches_as_open_notificaties_filters_a_cloudevents_data() {
        let data = Some(r#"{"zaaktype": "https://zt/1", "n": 1}"#);
        assert!(data_matches(data, "zaaktype", "https://zt/1"));
        assert!(!data_matches(data, "zaaktype", "https://zt/2"));
        assert!(data_matches(data, "zaaktype", "*"));
        assert!(
            data_matches(data, "absent", "x"),
            "a member it lacks lets it through"
        );
        assert!(!data_matches(data, "n", "1"), "a number is not the string");
        assert!(
            data_matches(Some("[1]"), "zaaktype", "x"),
            "no object, no members"
        );
        assert!(data_matches(None, "zaaktype", "x"));
    }
}
