//! LIKE patterns: `%` is any run of characters, `_` any one character, `\%` and `\_` the
//! characters themselves; everything else (a lone backslash included) matches itself.
//!
//! Matching is linear in the value: the pattern is split at its `%`s into segments; the
//! first is matched at the start, the last at the end, and each one between is found at its
//! leftmost place after the one before (greedy leftmost is exact for `%`-separated
//! segments). A segment without `_` is found with a linear substring search (`memmem`), one
//! with `_` with the bit-parallel Shift-And search, in `value × ⌈segment/64⌉` word steps.
//! No input can make it backtrack.

use std::collections::HashMap;

use memchr::memmem;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Char(char),
    AnyOne,
    AnyRun,
}

/// A run of pattern pieces without `%`: what one segment must match, character for
/// character (`None` is `_`).
#[derive(Debug, Clone)]
enum Segment {
    /// No `_`: a literal, found with `memmem`.
    Literal(memmem::Finder<'static>, usize),
    /// With `_`: Shift-And masks per character (`_` positions set in all of them).
    Wild(Wild),
}

#[derive(Debug, Clone)]
struct Wild {
    pieces: Vec<Option<char>>,
    masks: HashMap<char, Vec<u64>>,
    any: Vec<u64>,
}

impl Segment {
    fn new(pieces: &[Piece]) -> Segment {
        let pieces: Vec<Option<char>> = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        if pieces.iter().all(Option::is_some) {
            let literal: String = pieces.iter().flatten().collect();
            let chars = pieces.len();
            return Segment::Literal(memmem::Finder::new(literal.as_bytes()).into_owned(), chars);
        }
        let words = pieces.len().div_ceil(64);
        let mut any = vec![0u64; words];
        for (i, piece) in pieces.iter().enumerate() {
            if piece.is_none() {
                any[i / 64] |= 1 << (i % 64);
            }
        }
        let mut masks: HashMap<char, Vec<u64>> = HashMap::new();
        for (i, piece) in pieces.iter().enumerate() {
            if let Some(c) = piece {
                masks.entry(*c).or_insert_with(|| any.clone())[i / 64] |= 1 << (i % 64);
            }
        }
        Segment::Wild(Wild { pieces, masks, any })
    }

    /// Its length in characters.
    fn chars(&self) -> usize {
        match self {
            Segment::Literal(_, chars) => *chars,
            Segment::Wild(wild) => wild.pieces.len(),
        }
    }

    /// The machine words its search keeps per character of the value.
    fn words(&self) -> usize {
        match self {
            Segment::Literal(..) => 1,
            Segment::Wild(wild) => wild.any.len().max(1),
        }
    }

    /// Whether it matches `text` exactly (the same number of characters).
    fn matches_whole(&self, text: &str) -> bool {
        match self {
            Segment::Literal(finder, _) => finder.needle() == text.as_bytes(),
            Segment::Wild(wild) => {
                let mut chars = text.chars();
                wild.pieces
                    .iter()
                    .all(|piece| chars.next().is_some_and(|c| piece.is_none_or(|p| p == c)))
                    && chars.next().is_none()
            }
        }
    }

    /// The byte offset just past its leftmost occurrence in `text`.
    fn find_end(&self, text: &str) -> Option<usize> {
        match self {
            Segment::Literal(finder, _) => finder
                .find(text.as_bytes())
                .map(|at| at + finder.needle().len()),
            Segment::Wild(wild) => wild.find_end(text),
        }
    }
}

impl Wild {
    /// Shift-And: bit `i` of the state is set when the last `i + 1` characters read match
    /// the segment's first `i + 1` pieces. The first state with the last bit set ends the
    /// leftmost occurrence (all occurrences have the same length).
    fn find_end(&self, text: &str) -> Option<usize> {
        let m = self.pieces.len();
        if m == 0 {
            return Some(0);
        }
        let (last_word, last_bit) = ((m - 1) / 64, (m - 1) % 64);
        let mut state = vec![0u64; self.any.len()];
        for (at, c) in text.char_indices() {
            let mask = self.masks.get(&c).unwrap_or(&self.any);
            let mut carry = 1u64;
            for (word, mask) in state.iter_mut().zip(mask) {
                let next_carry = *word >> 63;
                *word = ((*word << 1) | carry) & mask;
                carry = next_carry;
            }
            if state[last_word] & (1 << last_bit) != 0 {
                return Some(at + c.len_utf8());
            }
        }
        None
    }
}

/// A compiled pattern, boxed: expressions hold it by value, and the parser's and
/// evaluator's stack frames stay small.
#[derive(Debug, Clone)]
pub struct LikePattern(Box<Compiled>);

#[derive(Debug, Clone)]
struct Compiled {
    pieces: Vec<Piece>,
    /// The pattern split at its `%`s: `segments.len() == 1` when it has none.
    segments: Vec<Segment>,
    /// The most machine words a segment's search keeps per character of the value.
    words: usize,
}

impl PartialEq for LikePattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.pieces == other.0.pieces
    }
}

impl Eq for LikePattern {}

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
        let segments: Vec<Segment> = pieces
            .split(|piece| *piece == Piece::AnyRun)
            .map(Segment::new)
            .collect();
        let words = segments.iter().map(Segment::words).max().unwrap_or(1);
        LikePattern(Box::new(Compiled {
            pieces,
            segments,
            words,
        }))
    }

    /// What matching a value of `bytes` bytes costs at most, in word steps: the budget of a
    /// filter's evaluation is charged this before the match runs.
    pub fn cost(&self, bytes: usize) -> u64 {
        (bytes as u64 + self.0.pieces.len() as u64).saturating_mul(self.0.words as u64)
    }

    /// Whether `value` matches, in time linear in `value` (see the module's documentation).
    pub fn matches(&self, value: &str) -> bool {
        let (first, rest) = self
            .0
            .segments
            .split_first()
            .expect("split yields one at least");
        let Some((last, middle)) = rest.split_last() else {
            return first.matches_whole(value);
        };
        // The first segment at the start, the last at the end, not overlapping.
        let Some(start) = char_offset(value, first.chars()) else {
            return false;
        };
        if !first.matches_whole(&value[..start]) {
            return false;
        }
        let Some(end) = char_offset_from_end(value, last.chars()) else {
            return false;
        };
        if end < start || !last.matches_whole(&value[end..]) {
            return false;
        }
        let mut at = start;
        for segment in middle {
            match segment.find_end(&value[at..end]) {
                Some(found) => at += found,
                None => return false,
            }
        }
        true
    }

    /// `Some(prefix)` when the pattern is a literal followed by one trailing `%`.
    pub fn as_prefix(&self) -> Option<String> {
        let (last, body) = self.0.pieces.split_last()?;
        (*last == Piece::AnyRun).then(|| literal(body)).flatten()
    }

    /// `Some(suffix)` when the pattern is one leading `%` followed by a literal.
    pub fn as_suffix(&self) -> Option<String> {
        let (first, body) = self.0.pieces.split_first()?;
        (*first == Piece::AnyRun).then(|| literal(body)).flatten()
    }

    /// `Some(text)` when the pattern has no wildcards.
    pub fn as_exact(&self) -> Option<String> {
        literal(&self.0.pieces)
    }
}

/// The byte offset after the first `chars` characters of `text`, if it has that many.
fn char_offset(text: &str, chars: usize) -> Option<usize> {
    if chars == 0 {
        return Some(0);
    }
    text.char_indices()
        .nth(chars - 1)
        .map(|(at, c)| at + c.len_utf8())
}

/// The byte offset where the last `chars` characters of `text` begin, if it has that many.
fn char_offset_from_end(text: &str, chars: usize) -> Option<usize> {
    if chars == 0 {
        return Some(text.len());
    }
    text.char_indices().rev().nth(chars - 1).map(|(at, _)| at)
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

    /// The backtracking definition, for comparison (exponential; small inputs only).
    fn reference(pieces: &[Piece], text: &[char]) -> bool {
        match pieces.split_first() {
            None => text.is_empty(),
            Some((Piece::AnyRun, rest)) => (0..=text.len()).any(|i| reference(rest, &text[i..])),
            Some((Piece::AnyOne, rest)) => !text.is_empty() && reference(rest, &text[1..]),
            Some((Piece::Char(c), rest)) => text.first() == Some(c) && reference(rest, &text[1..]),
        }
    }

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
        assert!(LikePattern::new("é_%ü").matches("éxyzü"));
        assert!(!LikePattern::new("a%a").matches("a"));
        assert!(LikePattern::new("a%a").matches("aa"));
    }

    #[test]
    fn agrees_with_the_definition() {
        let alphabet = ['a', 'b', 'é'];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        for _ in 0..20_000 {
            let pattern: String = (0..next(7))
                .map(|_| match next(6) {
                    0 => '%',
                    1 => '_',
                    _ => alphabet[next(3)],
                })
                .collect();
            let text: Vec<char> = (0..next(9)).map(|_| alphabet[next(3)]).collect();
            let like = LikePattern::new(&pattern);
            let value: String = text.iter().collect();
            assert_eq!(
                like.matches(&value),
                reference(&like.0.pieces, &text),
                "{pattern:?} LIKE {value:?}"
            );
        }
    }

    #[test]
    fn long_segments_with_any_one_span_words() {
        let segment = format!("{}_{}", "a".repeat(70), "b".repeat(70));
        let pattern = LikePattern::new(&format!("%{segment}%"));
        assert!(pattern.matches(&format!("xx{}Z{}yy", "a".repeat(75), "b".repeat(70))));
        assert!(!pattern.matches(&format!("xx{}Z{}yy", "a".repeat(75), "b".repeat(69))));
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
