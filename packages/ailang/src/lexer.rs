//! Tokens for AILANG source text.
//!
//! Interpolated strings are lexed eagerly: each `${…}` becomes its own token list (ending in
//! `Eof`) that the parser reads with a sub-parser. Tokens remember whether a line break came
//! before them, because blocks accept a newline where a `;` would go.

use crate::diag::{Diagnostic, Pos};
use std::collections::HashMap;
use std::rc::Rc;

/// How deeply string interpolations may nest inside one another.
const MAX_INTERPOLATION_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(Rc<str>),
    Int(i64),
    Float(f64),
    Str(Vec<StrPart>),
    Sym(&'static str),
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StrPart {
    Lit(String),
    /// The tokens of one `${…}` expression, ending in `Eof`.
    Interp(Vec<Token>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
    /// A line break separates this token from the previous one.
    pub newline_before: bool,
}

/// Operators and punctuation, longest first: what `longest_symbol` implements, as a list
/// for the test that pins it.
#[cfg(test)]
const SYMBOLS: &[&str] = &[
    "...", "..", "->", "=>", "==", "!=", "<=", ">=", "<<", ">>", "++", "::", "&&", "||", "**", "(", ")", "[", "]", "{",
    "}", ",", ";", ":", ".", "=", "<", ">", "+", "-", "*", "/", "%", "!", "~", "&", "^", "|", "\\", "@", "#",
];

/// The longest of SYMBOLS that `c0 c1 c2` starts with; a jump on the first character in
/// place of a scan of the whole list for every operator.
fn longest_symbol(c0: char, c1: Option<char>, c2: Option<char>) -> Option<&'static str> {
    let candidates: &[&'static str] = match c0 {
        '.' => &["...", "..", "."],
        '-' => &["->", "-"],
        '=' => &["=>", "==", "="],
        '!' => &["!=", "!"],
        '<' => &["<=", "<<", "<"],
        '>' => &[">=", ">>", ">"],
        '+' => &["++", "+"],
        ':' => &["::", ":"],
        '&' => &["&&", "&"],
        '|' => &["||", "|"],
        '*' => &["**", "*"],
        '(' => &["("],
        ')' => &[")"],
        '[' => &["["],
        ']' => &["]"],
        '{' => &["{"],
        '}' => &["}"],
        ',' => &[","],
        ';' => &[";"],
        '/' => &["/"],
        '%' => &["%"],
        '~' => &["~"],
        '^' => &["^"],
        '\\' => &["\\"],
        '@' => &["@"],
        '#' => &["#"],
        _ => return None,
    };
    candidates.iter().copied().find(|s| {
        let mut rest = s.chars().skip(1);
        rest.next().is_none_or(|b| c1 == Some(b)) && rest.next().is_none_or(|c| c2 == Some(c))
    })
}

pub fn lex(source: &str) -> Result<Vec<Token>, Diagnostic> {
    Lexer::new(source).tokens_until(false)
}

/// The tokens of a whole source, lexed as they are asked for, so that a parser never holds
/// more than its lookahead. After `Eof` or an error it yields `Eof` again.
pub struct TokenStream<'s> {
    lexer: Lexer<'s>,
    done: bool,
}

impl<'s> TokenStream<'s> {
    pub fn new(source: &'s str) -> Self {
        TokenStream { lexer: Lexer::new(source), done: false }
    }

    pub fn next_token(&mut self) -> Result<Token, Diagnostic> {
        if self.done {
            return Ok(Token { tok: Tok::Eof, pos: self.lexer.pos(), newline_before: false });
        }
        let token = self.lexer.next_token(false, &mut 0);
        self.done = !matches!(
            token,
            Ok(Token { tok: Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::Str(_) | Tok::Sym(_), .. })
        );
        token
    }

    /// The first lexical error in the rest of the source, if any.
    pub fn first_error_in_rest(&mut self) -> Option<Diagnostic> {
        while !self.done {
            if let Err(e) = self.next_token() {
                return Some(e);
            }
        }
        None
    }
}

struct Lexer<'s> {
    src: &'s str,
    /// Byte offset into `src`, always on a character boundary.
    at: usize,
    line: u32,
    /// Counted in characters, as diagnostics report it.
    col: u32,
    depth: usize,
    /// One shared `Rc<str>` per distinct identifier: a module repeats a few names many times.
    names: HashMap<&'s str, Rc<str>, foldhash::fast::FixedState>,
}

fn illegal(message: impl Into<String>, pos: Pos) -> Diagnostic {
    Diagnostic::at("PAR_ILLEGAL_TOKEN", message, pos)
}

impl<'s> Lexer<'s> {
    fn new(src: &'s str) -> Self {
        Lexer { src, at: 0, line: 1, col: 1, depth: 0, names: HashMap::default() }
    }

    fn peek(&self) -> Option<char> {
        let byte = *self.src.as_bytes().get(self.at)?;
        if byte.is_ascii() { Some(byte as char) } else { self.src[self.at..].chars().next() }
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.src[self.at..].chars().nth(ahead)
    }

    /// The longest symbol at the cursor.
    fn symbol(&self) -> Option<&'static str> {
        // Symbols are ASCII: a byte that is not cannot extend one.
        let byte = |i: usize| self.src.as_bytes().get(self.at + i).filter(|b| b.is_ascii()).map(|b| *b as char);
        longest_symbol(byte(0)?, byte(1), byte(2))
    }

    fn pos(&self) -> Pos {
        Pos::new(self.line, self.col)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    /// Skip blanks and comments; report whether a line break was crossed.
    fn skip_trivia(&mut self) -> bool {
        let mut newline = false;
        while let Some(c) = self.peek() {
            if c == ' ' {
                self.at += 1;
                self.col += 1;
            } else if c == '\n' {
                newline = true;
                self.bump();
            } else if c.is_whitespace() {
                self.bump();
            } else if (c == '-' || c == '/') && self.src.as_bytes().get(self.at + 1) == Some(&(c as u8)) {
                // `--` and `//` comments run to the end of the line.
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.bump();
                }
            } else {
                break;
            }
        }
        newline
    }

    /// Lex to end of input, or (inside `${…}`) to the `}` that closes the interpolation.
    fn tokens_until(&mut self, in_interpolation: bool) -> Result<Vec<Token>, Diagnostic> {
        let mut tokens = Vec::new();
        let mut brace_depth = 0usize;
        loop {
            let token = self.next_token(in_interpolation, &mut brace_depth)?;
            let end = matches!(token.tok, Tok::Eof);
            tokens.push(token);
            if end {
                return Ok(tokens);
            }
        }
    }

    /// The next token; `Eof` at the end of input or at the `}` closing an interpolation.
    fn next_token(&mut self, in_interpolation: bool, brace_depth: &mut usize) -> Result<Token, Diagnostic> {
        let newline_before = self.skip_trivia();
        let pos = self.pos();
        let Some(c) = self.peek() else {
            if in_interpolation {
                return Err(illegal("unterminated interpolation `${`", pos));
            }
            return Ok(Token { tok: Tok::Eof, pos, newline_before });
        };
        if in_interpolation && c == '}' && *brace_depth == 0 {
            self.bump();
            return Ok(Token { tok: Tok::Eof, pos, newline_before });
        }
        let tok = if c.is_ascii_digit() {
            self.number(pos)?
        } else if c == '_' || c.is_alphabetic() {
            let start = self.at;
            loop {
                match self.src.as_bytes().get(self.at) {
                    Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => {
                        self.at += 1;
                        self.col += 1;
                    }
                    Some(b) if !b.is_ascii() => match self.peek().filter(|c| c.is_alphanumeric()) {
                        Some(c) => {
                            self.at += c.len_utf8();
                            self.col += 1;
                        }
                        None => break,
                    },
                    _ => break,
                }
            }
            let text = &self.src[start..self.at];
            Tok::Ident(self.names.entry(text).or_insert_with(|| Rc::from(text)).clone())
        } else if c == '"' {
            self.bump();
            Tok::Str(self.string_body('"', pos)?)
        } else if c == '\'' {
            self.bump();
            Tok::Str(self.string_body('\'', pos)?)
        } else {
            let sym = self.symbol().ok_or_else(|| illegal(format!("unexpected character {c:?}"), pos))?;
            // Symbols are ASCII and never contain a line break.
            self.at += sym.len();
            self.col += sym.len() as u32;
            match sym {
                "{" => *brace_depth += 1,
                "}" => *brace_depth = brace_depth.saturating_sub(1),
                _ => {}
            }
            Tok::Sym(sym)
        };
        Ok(Token { tok, pos, newline_before })
    }

    fn number(&mut self, pos: Pos) -> Result<Tok, Diagnostic> {
        // `0x…`, `0b…`, `0o…` are 64-bit patterns: one with the top bit set reads as its two's
        // complement (`0xffffffffffffffff` is -1), as in the reference.
        let radix = match (self.peek(), self.peek_at(1)) {
            (Some('0'), Some('x' | 'X')) => Some((16, "0x")),
            (Some('0'), Some('b' | 'B')) => Some((2, "0b")),
            (Some('0'), Some('o' | 'O')) => Some((8, "0o")),
            _ => None,
        };
        if let Some((radix, prefix)) = radix {
            self.bump();
            self.bump();
            let mut digits = String::new();
            while let Some(c) = self.peek().filter(|c| c.is_digit(radix) || *c == '_') {
                if c != '_' {
                    digits.push(c);
                }
                self.bump();
            }
            return u64::from_str_radix(&digits, radix)
                .map(|n| Tok::Int(n as i64))
                .map_err(|_| Diagnostic::at("PAR021", format!("invalid integer literal {prefix}{digits}"), pos));
        }
        let mut text = String::new();
        let mut is_float = false;
        self.digits(&mut text);
        if self.peek() == Some('.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            is_float = true;
            text.push('.');
            self.bump();
            self.digits(&mut text);
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let signed = matches!(self.peek_at(1), Some('+' | '-'));
            let digit_at = if signed { 2 } else { 1 };
            if self.peek_at(digit_at).is_some_and(|c| c.is_ascii_digit()) {
                is_float = true;
                text.push('e');
                self.bump();
                if signed {
                    text.push(self.bump().unwrap_or('+'));
                }
                self.digits(&mut text);
            }
        }
        if is_float {
            text.parse::<f64>()
                .map(Tok::Float)
                .map_err(|_| Diagnostic::at("PAR021", format!("invalid float literal {text}"), pos))
        } else {
            text.parse::<i64>()
                .map(Tok::Int)
                .map_err(|_| Diagnostic::at("PAR021", format!("integer literal {text} is out of range"), pos))
        }
    }

    fn digits(&mut self, into: &mut String) {
        while let Some(c) = self.peek().filter(|c| c.is_ascii_digit() || *c == '_') {
            if c != '_' {
                into.push(c);
            }
            self.bump();
        }
    }

    fn string_body(&mut self, quote: char, start: Pos) -> Result<Vec<StrPart>, Diagnostic> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        loop {
            let pos = self.pos();
            let Some(c) = self.bump() else {
                return Err(illegal("unterminated string literal", start));
            };
            match c {
                c if c == quote => break,
                '\\' => literal.push(self.escape(pos)?),
                '$' if quote == '"' && self.peek() == Some('{') => {
                    self.bump();
                    if self.depth >= MAX_INTERPOLATION_DEPTH {
                        return Err(illegal("string interpolation nested too deeply", pos));
                    }
                    if !literal.is_empty() {
                        parts.push(StrPart::Lit(std::mem::take(&mut literal)));
                    }
                    self.depth += 1;
                    let inner = self.tokens_until(true);
                    self.depth -= 1;
                    parts.push(StrPart::Interp(inner?));
                }
                '\n' if quote == '\'' => {
                    return Err(illegal("unterminated character literal", start));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() || parts.is_empty() {
            parts.push(StrPart::Lit(literal));
        }
        Ok(parts)
    }

    fn escape(&mut self, pos: Pos) -> Result<char, Diagnostic> {
        let Some(c) = self.bump() else {
            return Err(illegal("unterminated escape sequence", pos));
        };
        let simple = match c {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            '\\' => Some('\\'),
            '"' => Some('"'),
            '\'' => Some('\''),
            '$' => Some('$'),
            'e' => Some('\u{1b}'),
            '0' if !self.peek().is_some_and(|d| d.is_ascii_digit()) => Some('\0'),
            _ => None,
        };
        if let Some(ch) = simple {
            return Ok(ch);
        }
        let code = match c {
            'x' => self.hex_digits(2, pos)?,
            'u' if self.peek() == Some('{') => {
                self.bump();
                let mut value: u32 = 0;
                let mut count = 0;
                while let Some(d) = self.peek().and_then(|d| d.to_digit(16)) {
                    self.bump();
                    count += 1;
                    if count > 6 {
                        return Err(illegal("\\u{…} escape has too many digits", pos));
                    }
                    value = value * 16 + d;
                }
                if count == 0 || self.bump() != Some('}') {
                    return Err(illegal("malformed \\u{…} escape", pos));
                }
                value
            }
            'u' => self.hex_digits(4, pos)?,
            other => return Err(illegal(format!("unknown escape sequence \\{other}"), pos)),
        };
        char::from_u32(code).ok_or_else(|| illegal(format!("escape names an invalid code point U+{code:X}"), pos))
    }

    fn hex_digits(&mut self, count: usize, pos: Pos) -> Result<u32, Diagnostic> {
        let mut value = 0u32;
        for _ in 0..count {
            let d = self.peek().and_then(|d| d.to_digit(16)).ok_or_else(|| illegal("escape needs hex digits", pos))?;
            self.bump();
            value = value * 16 + d;
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn operators_are_munched_longest_first() {
        assert_eq!(
            kinds("a :: b ++ c ... ->"),
            vec![
                Tok::Ident("a".into()),
                Tok::Sym("::"),
                Tok::Ident("b".into()),
                Tok::Sym("++"),
                Tok::Ident("c".into()),
                Tok::Sym("..."),
                Tok::Sym("->"),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn comments_and_newlines_are_tracked() {
        let toks = lex("a -- note\nb").unwrap();
        assert!(!toks[0].newline_before);
        assert!(toks[1].newline_before);
        assert_eq!(toks[1].pos, Pos::new(2, 1));
    }

    #[test]
    fn escapes_decode_and_unknown_ones_fail() {
        assert_eq!(kinds(r#""\x41\u00e9\u{1F600}\e\0\$""#)[0], Tok::Str(vec![StrPart::Lit("Aé😀\u{1b}\0$".into())]));
        assert_eq!(lex(r#""\q""#).unwrap_err().code, "PAR_ILLEGAL_TOKEN");
        assert_eq!(lex(r#""\01""#).unwrap_err().code, "PAR_ILLEGAL_TOKEN");
    }

    #[test]
    fn interpolation_nests_strings_and_braces() {
        let toks = kinds(r#""a${f("}")}b$c""#);
        let Tok::Str(parts) = &toks[0] else { panic!("not a string") };
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], StrPart::Lit("b$c".into()));
    }

    #[test]
    fn the_symbol_jump_table_agrees_with_the_longest_first_list() {
        let alphabet: Vec<Option<char>> = (0x20u8..0x7f).map(|b| Some(b as char)).chain([None]).collect();
        for c0 in (0x20u8..0x7f).map(char::from) {
            for &c1 in &alphabet {
                for c2 in [None, Some('.'), Some('x'), Some('=')] {
                    if c1.is_none() && c2.is_some() {
                        continue;
                    }
                    let text: String = [Some(c0), c1, c2].into_iter().flatten().collect();
                    let expected = SYMBOLS.iter().copied().find(|s| text.starts_with(*s));
                    assert_eq!(longest_symbol(c0, c1, c2), expected, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn non_ascii_identifiers_and_blanks_count_columns_in_characters() {
        let toks = lex("é1\u{a0}x -- ü\nΔ+y").unwrap();
        let seen: Vec<(Tok, Pos)> = toks.into_iter().map(|t| (t.tok, t.pos)).collect();
        assert_eq!(
            seen,
            vec![
                (Tok::Ident("é1".into()), Pos::new(1, 1)),
                (Tok::Ident("x".into()), Pos::new(1, 4)),
                (Tok::Ident("Δ".into()), Pos::new(2, 1)),
                (Tok::Sym("+"), Pos::new(2, 2)),
                (Tok::Ident("y".into()), Pos::new(2, 3)),
                (Tok::Eof, Pos::new(2, 4)),
            ]
        );
        assert_eq!(lex("a → b").unwrap_err().pos, Some(Pos::new(1, 3)));
    }

    #[test]
    fn numbers() {
        assert_eq!(kinds("12 1.5 2e3 0x1F")[..4], [Tok::Int(12), Tok::Float(1.5), Tok::Float(2000.0), Tok::Int(31)]);
        assert_eq!(lex("99999999999999999999").unwrap_err().code, "PAR021");
    }
}
