//! CESQL 1.0, the CloudEvents SQL expression language (`specs/cloudevents/cesql`):
//! our own parser and evaluator, checked against the specification's TCK.
//!
//! Notes on the semantics we follow where the specification leaves room:
//! - keywords, function names and attribute names are case-insensitive;
//! - AND, OR and XOR share one precedence level and group left to right (section 3.6), so
//!   `a OR b AND c` is `(a OR b) AND c`: use parentheses;
//! - an implicit cast from Integer to Boolean is a cast error (the TCK's `NOT 10`); the
//!   explicit `BOOL()` allows it;
//! - as a filter, an expression matches only when it yields `TRUE` without any error.

mod eval;
mod functions;
mod lexer;
mod like;
mod parser;
mod value;

use std::fmt;

use knooppunt_event::Event;

use crate::cost::{EvalLimits, Meter};
use crate::limits::{Budget, Limits};

pub use like::LikePattern;
pub use value::{Type, Value};

pub(crate) use parser::{BinaryOp, Expr};

/// The kinds of error of section 3.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Parse,
    Math,
    Cast,
    MissingAttribute,
    MissingFunction,
    FunctionEvaluation,
    Generic,
    /// Not CESQL's: the evaluation spent its budget ([`crate::EvalLimits`]).
    Budget,
}

/// An error raised while evaluating an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    pub kind: ErrorKind,
    pub message: String,
}

impl EvalError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        EvalError {
            kind,
            message: message.into(),
        }
    }
}

/// Why an expression was rejected, with the character position it was found at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at character {at})")]
pub struct ParseError {
    pub at: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn at(at: usize, message: impl Into<String>) -> Self {
        ParseError {
            at,
            message: message.into(),
        }
    }
}

/// The result of evaluating an expression: always a value, and the first error if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    pub value: Value,
    pub error: Option<EvalError>,
}

/// A parsed CESQL expression.
#[derive(Debug, Clone)]
pub struct Expression {
    text: String,
    pub(crate) expr: Expr,
}

impl Expression {
    /// Parses an expression within the default [`Limits`]. Calls to unknown functions parse,
    /// and fail when evaluated with a MissingFunction error, as the specification says.
    pub fn parse(text: &str) -> Result<Expression, ParseError> {
        Expression::parse_within(text, &mut Budget::new(Limits::DEFAULT))
    }

    fn parse_within(text: &str, budget: &mut Budget) -> Result<Expression, ParseError> {
        Ok(Expression {
            text: text.to_owned(),
            expr: parser::parse(text, budget)?,
        })
    }

    /// Parses an expression for use as a filter within `limits`, also rejecting calls to
    /// functions that do not exist (they could never match).
    pub fn compile(text: &str, limits: &Limits) -> Result<Expression, ParseError> {
        Expression::compile_within(text, &mut Budget::new(*limits))
    }

    /// [`Expression::compile`] counting nodes against a subscription's whole budget.
    pub(crate) fn compile_within(
        text: &str,
        budget: &mut Budget,
    ) -> Result<Expression, ParseError> {
        let expression = Expression::parse_within(text, budget)?;
        if let Some((name, arity)) = missing_function(&expression.expr) {
            return Err(ParseError::at(
                text.to_ascii_uppercase().find(&name).unwrap_or(0),
                format!("there is no function {name} that takes {arity} arguments"),
            ));
        }
        Ok(expression)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Evaluates within the default [`EvalLimits`].
    pub fn evaluate(&self, event: &Event) -> Evaluation {
        self.evaluate_metered(event, &mut Meter::new(EvalLimits::DEFAULT))
    }

    /// Evaluates, charging `meter`; past its budget the result is a `Budget` error.
    pub fn evaluate_metered(&self, event: &Event, meter: &mut Meter) -> Evaluation {
        let (value, error) = eval::evaluate(&self.expr, event, meter);
        Evaluation { value, error }
    }

    /// The filter result: `TRUE` without errors, within the default [`EvalLimits`].
    pub fn matches(&self, event: &Event) -> bool {
        self.matches_metered(event, &mut Meter::new(EvalLimits::DEFAULT))
    }

    /// `TRUE` without errors and within `meter`'s budget.
    pub fn matches_metered(&self, event: &Event, meter: &mut Meter) -> bool {
        matches!(
            eval::evaluate(&self.expr, event, meter),
            (Value::Boolean(true), None)
        ) && !meter.exceeded()
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Expression {}

fn missing_function(expr: &Expr) -> Option<(String, usize)> {
    match expr {
        Expr::Call {
            name,
            function: None,
            args,
        } => Some((name.clone(), args.len())),
        Expr::Call { args, .. } => args.iter().find_map(missing_function),
        Expr::Not(inner) | Expr::Negate(inner) => missing_function(inner),
        Expr::Chain { first, rest } => missing_function(first)
            .or_else(|| rest.iter().find_map(|(_, right)| missing_function(right))),
        Expr::Like { value, .. } => missing_function(value),
        Expr::In { value, set, .. } => {
            missing_function(value).or_else(|| set.iter().find_map(missing_function))
        }
        Expr::Literal(_) | Expr::Attribute(_) | Expr::Exists(_) => None,
    }
}
