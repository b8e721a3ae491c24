//! LIKE patterns: `%` is any run of characters, `_` any one character, `\%` and `\_` the
//! characters themselves; everything else (a lone backslash included) matches itself.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Char(char),
    AnyOne,
    AnyRun,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikePattern {
    pieces: Vec<Piece>,
}

impl LikePattern {
    pub fn new(pattern: &str) -> Self {
        let mut pieces = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            let piece = match c {
                '\\' if matches!(chars.peek(), Some('%' | '_')) => {
                    Piece::Char(chars.next().expect("peeked"))
                }
                '%' => Piece::AnyRun,
                '_' => Piece::AnyOne,
                c => Piece::Char(c),
            };
            pieces.push(piece);
        }
        LikePattern { pieces }
    }

    /// Matches with the classic wildcard algorithm: linear, backtracking only to the last `%`.
    pub fn matches(&self, value: &str) -> bool {
        let text: Vec<char> = value.chars().collect();
        let (mut t, mut p) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.pieces.get(p) {
                Some(Piece::AnyRun) => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(Piece::AnyOne) => {
                    t += 1;
                    p += 1;
                }
                Some(Piece::Char(c)) if *c == text[t] => {
                    t += 1;
                    p += 1;
                }
                _ => match star {
                    Some((star_p, star_t)) => {
                        p = star_p + 1;
                        t = star_t + 1;
                        star = Some((star_p, star_t + 1));
                    }
                    None => return false,
                },
            }
        }
        self.pieces[p..].iter().all(|piece| *piece == Piece::AnyRun)
    }

    /// `Some(prefix)` when the pattern is a literal followed by one trailing `%`.
    pub fn as_prefix(&self) -> Option<String> {
        let (last, body) = self.pieces.split_last()?;
        (*last == Piece::AnyRun).then(|| literal(body)).flatten()
    }

    /// `Some(suffix)` when the pattern is one leading `%` followed by a literal.
    pub fn as_suffix(&self) -> Option<String> {
        let (first, body) = self.pieces.split_first()?;
        (*first == Piece::AnyRun).then(|| literal(body)).flatten()
    }

    /// `Some(text)` when the pattern has no wildcards.
    pub fn as_exact(&self) -> Option<String> {
        literal(&self.pieces)
    }
}

fn literal(pieces: &[Piece]) -> Option<String> {
    pieces
        .iter()
        .map(|piece| match piece {
            Piece::Char(c) => Some(*c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        let p = LikePattern::new("a%b_c");
        assert!(p.matches("abxc"));
        assert!(p.matches("azzzbxc"));
        assert!(!p.matches("abc"));
        assert!(LikePattern::new("%").matches(""));
        assert!(LikePattern::new("%%a%").matches("xxa"));
        assert!(LikePattern::new("ab\\c").matches("ab\\c"));
        assert!(LikePattern::new("100\\%").matches("100%"));
        assert!(!LikePattern::new("100\\%").matches("1000"));
    }

    #[test]
    fn shapes_for_the_index() {
        assert_eq!(
            LikePattern::new("nl.brp.%").as_prefix(),
            Some("nl.brp.".into())
        );
        assert_eq!(
            LikePattern::new("%.error").as_suffix(),
            Some(".error".into())
        );
        assert_eq!(LikePattern::new("a_%").as_prefix(), None);
        assert_eq!(LikePattern::new("50\\%%").as_prefix(), Some("50%".into()));
        assert_eq!(LikePattern::new("abc").as_exact(), Some("abc".into()));
    }
}
