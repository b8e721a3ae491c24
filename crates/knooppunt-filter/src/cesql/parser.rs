//! The CESQL grammar (cesql/spec.md section 2) as a precedence-climbing parser, with the
//! precedence of section 3.6: function calls, then unary NOT and `-`, LIKE, EXISTS, IN, then
//! `* / %`, `+ -`, comparisons, and AND/OR/XOR, equal precedence going left to right.
//!
//! Operators of one precedence level in a row become one [`Expr::Chain`], so that a long
//! `a OR b OR c ...` is a flat list rather than a tree as deep as it is long. The parser
//! checks the [`Budget`] while it builds: no expression deeper than `max_depth` (nor a
//! recursion of the parser itself, through parentheses) and no more nodes than `max_nodes`
//! is ever built, so everything that later walks the tree recursively is bounded.

use super::ParseError;
use super::functions::Function;
use super::lexer::{Spanned, Token, tokenize};
use super::like::LikePattern;
use super::value::Value;
use crate::limits::{Budget, Exceeded};

/// A parsed CESQL expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    Literal(Value),
    Attribute(String),
    Exists(String),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    /// `first op1 e1 op2 e2 ...`, evaluated left to right, all operators of one precedence
    /// level (so `rest` is never empty, and a chain is exactly `((first op1 e1) op2 e2) ...`).
    Chain {
        first: Box<Expr>,
        rest: Vec<(BinaryOp, Expr)>,
    },
    Like {
        value: Box<Expr>,
        pattern: LikePattern,
        negated: bool,
    },
    In {
        value: Box<Expr>,
        set: Vec<Expr>,
        negated: bool,
    },
    /// A function call; `function` is `None` when no built-in has that name and arity.
    Call {
        name: String,
        function: Option<Function>,
        args: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    And,
    Or,
    Xor,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

impl BinaryOp {
    /// The type every operator of this precedence level returns.
    pub(crate) fn returns_integer(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Subtract
                | BinaryOp::Multiply
                | BinaryOp::Divide
                | BinaryOp::Modulo
        )
    }

    /// Left and right binding power.
    fn binding_power(self) -> (u8, u8) {
        match self {
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => (1, 2),
            BinaryOp::Equal
            | BinaryOp::NotEqual
            | BinaryOp::Less
            | BinaryOp::LessEqual
            | BinaryOp::Greater
            | BinaryOp::GreaterEqual => (3, 4),
            BinaryOp::Add | BinaryOp::Subtract => (5, 6),
            BinaryOp::Multiply | BinaryOp::Divide | BinaryOp::Modulo => (7, 8),
        }
    }
}

const IN_POWER: u8 = 9;
const LIKE_POWER: u8 = 10;
const UNARY_POWER: u8 = 11;

/// Parses `input` within `budget` (which also counts the nodes of a subscription's other
/// filters).
pub(crate) fn parse(input: &str, budget: &mut Budget) -> Result<Expr, ParseError> {
    let length = input.chars().count();
    if length > budget.limits.max_sql_length {
        return Err(ParseError::at(
            budget.limits.max_sql_length,
            Exceeded::Length(budget.limits.max_sql_length).to_string(),
        ));
    }
    let tokens = tokenize(input)?;
    let mut parser = Parser {
        tokens,
        position: 0,
        end: length,
        budget,
        recursion: 0,
    };
    if parser.tokens.is_empty() {
        return Err(ParseError::at(0, "the expression is empty"));
    }
    let (expr, _) = parser.expression(0)?;
    match parser.peek() {
        None => Ok(expr),
        Some(_) => Err(parser.error("unexpected text after the end of the expression")),
    }
}

/// An expression with its depth (a literal is 1).
type Built = (Expr, usize);

struct Parser<'b> {
    tokens: Vec<Spanned>,
    position: usize,
    end: usize,
    budget: &'b mut Budget,
    /// How deeply `expression` is nested right now.
    recursion: usize,
}

fn keyword(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position).map(|t| &t.token)
    }

    fn peek_at(&self, offset: usize) -> Option<&Token> {
        self.tokens.get(self.position + offset).map(|t| &t.token)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).map(|t| t.token.clone());
        self.position += 1;
        token
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        let at = self.tokens.get(self.position).map_or(self.end, |t| t.at);
        ParseError::at(at, message)
    }

    fn expect(&mut self, expected: Token, what: &str) -> Result<(), ParseError> {
        if self.peek() == Some(&expected) {
            self.position += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {what}")))
        }
    }

    /// Builds a node of the given children's depth, within the budget.
    fn node(&mut self, expr: Expr, children: usize) -> Result<Built, ParseError> {
        let depth = children + 1;
        self.budget
            .enter(depth)
            .and_then(|()| self.budget.take())
            .map_err(|exceeded| self.error(exceeded.to_string()))?;
        Ok((expr, depth))
    }

    fn expression(&mut self, min_power: u8) -> Result<Built, ParseError> {
        self.recursion += 1;
        if let Err(exceeded) = self.budget.enter(self.recursion) {
            return Err(self.error(exceeded.to_string()));
        }
        let built = self.operators(min_power);
        self.recursion -= 1;
        built
    }

    fn operators(&mut self, min_power: u8) -> Result<Built, ParseError> {
        let mut left = self.prefix()?;
        loop {
            let negated = keyword(self.peek(), "not");
            let offset = usize::from(negated);
            if keyword(self.peek_at(offset), "like") {
                if LIKE_POWER < min_power {
                    break;
                }
                self.position += offset + 1;
                let pattern = match self.next() {
                    Some(Token::String(pattern)) => LikePattern::new(&pattern),
                    _ => {
                        self.position -= 1;
                        return Err(self.error("LIKE must be followed by a string literal pattern"));
                    }
                };
                let (value, depth) = left;
                let like = Expr::Like {
                    value: Box::new(value),
                    pattern,
                    negated,
                };
                left = self.node(like, depth)?;
                continue;
            }
            if keyword(self.peek_at(offset), "in") {
                if IN_POWER < min_power {
                    break;
                }
                self.position += offset + 1;
                let (set, set_depth) = self.set()?;
                let (value, depth) = left;
                let in_set = Expr::In {
                    value: Box::new(value),
                    set,
                    negated,
                };
                left = self.node(in_set, depth.max(set_depth))?;
                continue;
            }
            if negated {
                return Err(self.error("NOT here must be followed by LIKE or IN"));
            }
            let Some(op) = self.binary_operator() else {
                break;
            };
            let (left_power, right_power) = op.binding_power();
            if left_power < min_power {
                break;
            }
            self.position += 1;
            let (right, right_depth) = self.expression(right_power)?;
            left = match left {
                // Another operator of the chain's level: the chain grows, not the tree.
                (Expr::Chain { first, mut rest }, depth)
                    if rest[0].0.binding_power() == op.binding_power() =>
                {
                    self.budget
                        .take()
                        .map_err(|exceeded| self.error(exceeded.to_string()))?;
                    let depth = depth.max(right_depth + 1);
                    self.budget
                        .enter(depth)
                        .map_err(|exceeded| self.error(exceeded.to_string()))?;
                    rest.push((op, right));
                    (Expr::Chain { first, rest }, depth)
                }
                (first, depth) => {
                    let chain = Expr::Chain {
                        first: Box::new(first),
                        rest: vec![(op, right)],
                    };
                    self.node(chain, depth.max(right_depth))?
                }
            };
        }
        Ok(left)
    }

    fn binary_operator(&self) -> Option<BinaryOp> {
        Some(match self.peek()? {
            Token::Plus => BinaryOp::Add,
            Token::Minus => BinaryOp::Subtract,
            Token::Star => BinaryOp::Multiply,
            Token::Slash => BinaryOp::Divide,
            Token::Percent => BinaryOp::Modulo,
            Token::Equal => BinaryOp::Equal,
            Token::NotEqual => BinaryOp::NotEqual,
            Token::Less => BinaryOp::Less,
            Token::LessEqual => BinaryOp::LessEqual,
            Token::Greater => BinaryOp::Greater,
            Token::GreaterEqual => BinaryOp::GreaterEqual,
            Token::Word(word) => match word.to_ascii_lowercase().as_str() {
                "and" => BinaryOp::And,
                "or" => BinaryOp::Or,
                "xor" => BinaryOp::Xor,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// A parenthesised list of expressions, with the depth of the deepest.
    fn list(&mut self) -> Result<(Vec<Expr>, usize), ParseError> {
        let mut list = Vec::new();
        let mut deepest = 0;
        loop {
            let (expr, depth) = self.expression(0)?;
            list.push(expr);
            deepest = deepest.max(depth);
            if self.peek() != Some(&Token::Comma) {
                return Ok((list, deepest));
            }
            self.position += 1;
        }
    }

    fn set(&mut self) -> Result<(Vec<Expr>, usize), ParseError> {
        self.expect(Token::LParen, "`(` to start the IN set")?;
        let set = self.list()?;
        self.expect(Token::RParen, "`)` to close the IN set")?;
        Ok(set)
    }

    fn integer(&mut self, sign: &str, digits: &str) -> Result<Built, ParseError> {
        let n = format!("{sign}{digits}").parse::<i32>().map_err(|_| {
            self.error(format!(
                "integer literal {sign}{digits} is outside the 32-bit range"
            ))
        })?;
        self.node(Expr::Literal(Value::Integer(n)), 0)
    }

    fn prefix(&mut self) -> Result<Built, ParseError> {
        let Some(token) = self.next() else {
            self.position -= 1;
            return Err(self.error("the expression ends where a value was expected"));
        };
        match token {
            Token::Integer(digits) => self.integer("", &digits),
            Token::String(text) => self.node(Expr::Literal(Value::String(text)), 0),
            Token::LParen => {
                let inner = self.expression(0)?;
                self.expect(Token::RParen, "`)`")?;
                Ok(inner)
            }
            Token::Minus | Token::Plus => {
                let sign = if token == Token::Minus { "-" } else { "" };
                if let Some(Token::Integer(digits)) = self.peek().cloned() {
                    self.position += 1;
                    return self.integer(sign, &digits);
                }
                if token == Token::Plus {
                    return Err(self.error("`+` may only prefix an integer literal"));
                }
                let (operand, depth) = self.expression(UNARY_POWER)?;
                self.node(Expr::Negate(Box::new(operand)), depth)
            }
            Token::Word(word) => self.word(word),
            _ => {
                self.position -= 1;
                Err(self.error("expected a value, an attribute, a function call or `(`"))
            }
        }
    }

    fn word(&mut self, word: String) -> Result<Built, ParseError> {
        const KEYWORDS: [&str; 9] = [
            "not", "and", "or", "xor", "like", "in", "exists", "true", "false",
        ];
        let is_keyword = KEYWORDS.iter().any(|k| word.eq_ignore_ascii_case(k));
        if self.peek() == Some(&Token::LParen) && !is_keyword {
            self.position += 1;
            let (args, depth) = if self.peek() == Some(&Token::RParen) {
                (Vec::new(), 0)
            } else {
                self.list()?
            };
            self.expect(Token::RParen, "`)` to close the function call")?;
            let function = Function::resolve(&word, args.len());
            let call = Expr::Call {
                name: word.to_ascii_uppercase(),
                function,
                args,
            };
            return self.node(call, depth);
        }
        match word.to_ascii_lowercase().as_str() {
            "true" => self.node(Expr::Literal(Value::Boolean(true)), 0),
            "false" => self.node(Expr::Literal(Value::Boolean(false)), 0),
            "not" => {
                let (operand, depth) = self.expression(UNARY_POWER)?;
                self.node(Expr::Not(Box::new(operand)), depth)
            }
            "exists" => match self.next() {
                Some(Token::Word(name)) if is_identifier(&name) => {
                    self.node(Expr::Exists(name.to_ascii_lowercase()), 0)
                }
                _ => {
                    self.position -= 1;
                    Err(self.error("EXISTS must be followed by an attribute name"))
                }
            },
            keyword @ ("and" | "or" | "xor" | "like" | "in") => {
                self.position -= 1;
                Err(self.error(format!(
                    "`{}` needs a value on its left",
                    keyword.to_ascii_uppercase()
                )))
            }
            name if is_identifier(name) => self.node(Expr::Attribute(name.to_owned()), 0),
            _ => {
                self.position -= 1;
                Err(self.error(format!(
                    "`{word}` is not an attribute name (letters a-z and digits only)"
                )))
            }
        }
    }
}

fn is_identifier(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric())
}
