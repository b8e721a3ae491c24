//! The CESQL grammar (cesql/spec.md section 2) as a precedence-climbing parser, with the
//! precedence of section 3.6: function calls, then unary NOT and `-`, LIKE, EXISTS, IN, then
//! `* / %`, `+ -`, comparisons, and AND/OR/XOR, equal precedence going left to right.

use super::ParseError;
use super::functions::Function;
use super::lexer::{Spanned, Token, tokenize};
use super::like::LikePattern;
use super::value::Value;

/// A parsed CESQL expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    Literal(Value),
    Attribute(String),
    Exists(String),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
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

pub(crate) fn parse(input: &str) -> Result<Expr, ParseError> {
    let tokens = tokenize(input)?;
    let mut parser = Parser {
        tokens,
        position: 0,
        end: input.chars().count(),
    };
    if parser.tokens.is_empty() {
        return Err(ParseError::at(0, "the expression is empty"));
    }
    let expr = parser.expression(0)?;
    match parser.peek() {
        None => Ok(expr),
        Some(_) => Err(parser.error("unexpected text after the end of the expression")),
    }
}

struct Parser {
    tokens: Vec<Spanned>,
    position: usize,
    end: usize,
}

fn keyword(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
}

impl Parser {
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

    fn expression(&mut self, min_power: u8) -> Result<Expr, ParseError> {
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
                left = Expr::Like {
                    value: Box::new(left),
                    pattern,
                    negated,
                };
                continue;
            }
            if keyword(self.peek_at(offset), "in") {
                if IN_POWER < min_power {
                    break;
                }
                self.position += offset + 1;
                let set = self.set()?;
                left = Expr::In {
                    value: Box::new(left),
                    set,
                    negated,
                };
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
            let right = self.expression(right_power)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
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

    fn set(&mut self) -> Result<Vec<Expr>, ParseError> {
        self.expect(Token::LParen, "`(` to start the IN set")?;
        let mut set = vec![self.expression(0)?];
        while self.peek() == Some(&Token::Comma) {
            self.position += 1;
            set.push(self.expression(0)?);
        }
        self.expect(Token::RParen, "`)` to close the IN set")?;
        Ok(set)
    }

    fn integer(&self, sign: &str, digits: &str) -> Result<Expr, ParseError> {
        format!("{sign}{digits}")
            .parse::<i32>()
            .map(|n| Expr::Literal(Value::Integer(n)))
            .map_err(|_| {
                self.error(format!(
                    "integer literal {sign}{digits} is outside the 32-bit range"
                ))
            })
    }

    fn prefix(&mut self) -> Result<Expr, ParseError> {
        let Some(token) = self.next() else {
            self.position -= 1;
            return Err(self.error("the expression ends where a value was expected"));
        };
        match token {
            Token::Integer(digits) => self.integer("", &digits),
            Token::String(text) => Ok(Expr::Literal(Value::String(text))),
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
                let operand = self.expression(UNARY_POWER)?;
                Ok(Expr::Negate(Box::new(operand)))
            }
            Token::Word(word) => self.word(word),
            _ => {
                self.position -= 1;
                Err(self.error("expected a value, an attribute, a function call or `(`"))
            }
        }
    }

    fn word(&mut self, word: String) -> Result<Expr, ParseError> {
        if self.peek() == Some(&Token::LParen) {
            self.position += 1;
            let mut args = Vec::new();
            if self.peek() != Some(&Token::RParen) {
                args.push(self.expression(0)?);
                while self.peek() == Some(&Token::Comma) {
                    self.position += 1;
                    args.push(self.expression(0)?);
                }
            }
            self.expect(Token::RParen, "`)` to close the function call")?;
            let function = Function::resolve(&word, args.len());
            return Ok(Expr::Call {
                name: word.to_ascii_uppercase(),
                function,
                args,
            });
        }
        match word.to_ascii_lowercase().as_str() {
            "true" => Ok(Expr::Literal(Value::Boolean(true))),
            "false" => Ok(Expr::Literal(Value::Boolean(false))),
            "not" => Ok(Expr::Not(Box::new(self.expression(UNARY_POWER)?))),
            "exists" => match self.next() {
                Some(Token::Word(name)) if is_identifier(&name) => {
                    Ok(Expr::Exists(name.to_ascii_lowercase()))
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
            name if is_identifier(name) => Ok(Expr::Attribute(name.to_owned())),
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
