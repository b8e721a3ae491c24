//! Tokens of CESQL (cesql/spec.md section 2). Keywords are case-insensitive.

use super::ParseError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    /// A value identifier (lower-cased) or function name (as written).
    Word(String),
    Integer(String),
    String(String),
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

#[derive(Debug, Clone)]
pub(crate) struct Spanned {
    pub(crate) token: Token,
    /// Character offset in the expression, for error messages.
    pub(crate) at: usize,
}

pub(crate) fn tokenize(input: &str) -> Result<Vec<Spanned>, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let at = i;
        let simple = match c {
            '(' => Some(Token::LParen),
            ')' => Some(Token::RParen),
            ',' => Some(Token::Comma),
            '+' => Some(Token::Plus),
            '-' => Some(Token::Minus),
            '*' => Some(Token::Star),
            '/' => Some(Token::Slash),
            '%' => Some(Token::Percent),
            '=' => Some(Token::Equal),
            _ => None,
        };
        if let Some(token) = simple {
            tokens.push(Spanned { token, at });
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let token = match (c, next) {
            (c, _) if c.is_whitespace() => {
                i += 1;
                continue;
            }
            ('!', Some('=')) => {
                i += 2;
                Token::NotEqual
            }
            ('<', Some('>')) => {
                i += 2;
                Token::NotEqual
            }
            ('<', Some('=')) => {
                i += 2;
                Token::LessEqual
            }
            ('>', Some('=')) => {
                i += 2;
                Token::GreaterEqual
            }
            ('<', _) => {
                i += 1;
                Token::Less
            }
            ('>', _) => {
                i += 1;
                Token::Greater
            }
            ('\'' | '"', _) => {
                let (text, end) = string_literal(&chars, i)?;
                i = end;
                Token::String(text)
            }
            (c, _) if c.is_ascii_digit() => {
                let start = i;
                while chars.get(i).is_some_and(char::is_ascii_digit) {
                    i += 1;
                }
                if chars
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphabetic() || *c == '_')
                {
                    return Err(ParseError::at(
                        at,
                        "an identifier cannot start with a digit",
                    ));
                }
                Token::Integer(chars[start..i].iter().collect())
            }
            (c, _) if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    i += 1;
                }
                Token::Word(chars[start..i].iter().collect())
            }
            (other, _) => {
                return Err(ParseError::at(
                    at,
                    format!("unexpected character {other:?}"),
                ));
            }
        };
        tokens.push(Spanned { token, at });
    }
    Ok(tokens)
}

/// A `'...'` or `"..."` literal; the delimiter is escaped with a backslash, and a backslash
/// before anything else stays a backslash.
fn string_literal(chars: &[char], start: usize) -> Result<(String, usize), ParseError> {
    let quote = chars[start];
    let mut text = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => return Err(ParseError::at(start, "string literal is not closed")),
            Some('\\') if chars.get(i + 1) == Some(&quote) => {
                text.push(quote);
                i += 2;
            }
            Some(c) if *c == quote => return Ok((text, i + 1)),
            Some(c) => {
                text.push(*c);
                i += 1;
            }
        }
    }
}
