//! A hand-written recursive-descent parser (Pratt for operators) over the lexer's tokens.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use crate::lexer::{StrPart, Tok, Token, TokenStream};
use crate::stack;
use std::cell::Cell;
use std::rc::Rc;

/// How deeply expressions, patterns and types may nest. Real modules stay far below this;
/// the bound keeps hostile input from exhausting the native stack.
pub const MAX_NESTING: usize = 1000;

/// The reserved words as a list, for the test that pins `is_reserved`.
#[cfg(test)]
const RESERVED: &[&str] = &[
    "if",
    "then",
    "else",
    "match",
    "with",
    "select",
    "timeout",
    "func",
    "pure",
    "let",
    "letrec",
    "in",
    "type",
    "class",
    "instance",
    "forall",
    "deriving",
    "module",
    "import",
    "export",
    "extern",
    "requires",
    "ensures",
    "invariant",
    "spawn",
    "parallel",
    "channel",
    "send",
    "recv",
    "true",
    "false",
    "and",
    "or",
    "not",
];

/// Words that can never name a binding. (`exists` is reserved by the reference's grammar but
/// unused by it; it stays free here because std/fs exports a function of that name.)
pub fn is_reserved(word: &str) -> bool {
    // A match compiles to a switch on length and bytes: this runs for every binder.
    matches!(
        word,
        "if" | "then"
            | "else"
            | "match"
            | "with"
            | "select"
            | "timeout"
            | "func"
            | "pure"
            | "let"
            | "letrec"
            | "in"
            | "type"
            | "class"
            | "instance"
            | "forall"
            | "deriving"
            | "module"
            | "import"
            | "export"
            | "extern"
            | "requires"
            | "ensures"
            | "invariant"
            | "spawn"
            | "parallel"
            | "channel"
            | "send"
            | "recv"
            | "true"
            | "false"
            | "and"
            | "or"
            | "not"
    )
}

/// Parse a whole module.
pub fn parse_module(source: &str) -> Result<Module, Diagnostic> {
    let _region = stack::enter(None);
    let mut parser = Parser::streaming(source);
    let parsed = parser.module();
    parser.lexical_error().map_or(parsed, Err)
}

/// Parse a single expression (used for tests and tooling).
pub fn parse_expr(source: &str) -> Result<Expr, Diagnostic> {
    let _region = stack::enter(None);
    let mut parser = Parser::streaming(source);
    let parsed = parser.expr().and_then(|expr| parser.expect_eof().map(|()| expr));
    parser.lexical_error().map_or(parsed, Err)
}

/// Parse a type expression (std signatures, tooling).
pub fn parse_type(source: &str) -> Result<TypeExpr, Diagnostic> {
    let mut parser = Parser::streaming(source);
    let parsed = parser.type_expr().and_then(|ty| parser.expect_eof().map(|()| ty));
    parser.lexical_error().map_or(parsed, Err)
}

enum Source<'s> {
    /// Tokens lexed beforehand (an interpolation's), ending in `Eof`.
    Lexed(std::vec::IntoIter<Token>),
    /// A whole source, lexed as the parser advances.
    Stream(TokenStream<'s>),
}

struct Parser<'s> {
    /// The current token and the next (the parser looks one ahead at most); both `Eof`
    /// once input ends.
    cur: Token,
    next: Token,
    source: Source<'s>,
    /// The lexer's error, where it cut the stream short.
    lex_error: Option<Diagnostic>,
    depth: usize,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Ident(name) => format!("'{name}'"),
        Tok::Int(n) => format!("number {n}"),
        Tok::Float(f) => format!("number {f}"),
        Tok::Str(_) => "string literal".to_string(),
        Tok::Sym(s) => format!("'{s}'"),
        Tok::Eof => "end of input".to_string(),
    }
}

impl<'s> Parser<'s> {
    fn lexed(toks: Vec<Token>, depth: usize) -> Self {
        Self::over(Source::Lexed(toks.into_iter()), depth)
    }

    fn streaming(source: &'s str) -> Self {
        Self::over(Source::Stream(TokenStream::new(source)), 0)
    }

    fn over(source: Source<'s>, depth: usize) -> Self {
        let eof = Token { tok: Tok::Eof, pos: Pos::default(), newline_before: false };
        let mut parser = Parser { cur: eof.clone(), next: eof, source, lex_error: None, depth };
        let first = parser.pull(Pos::default());
        parser.next = parser.after(&first);
        parser.cur = first;
        parser
    }

    /// Lexical errors win over syntax errors wherever they are in the source, as when the
    /// whole source was lexed before parsing: the one that cut the stream short, or else
    /// the first in what the parser did not reach.
    fn lexical_error(&mut self) -> Option<Diagnostic> {
        if let Some(e) = self.lex_error.take() {
            return Some(e);
        }
        match &mut self.source {
            Source::Stream(stream) => stream.first_error_in_rest(),
            Source::Lexed(_) => None,
        }
    }

    /// The token after `token`: `Eof` again at the end.
    fn after(&mut self, token: &Token) -> Token {
        if matches!(token.tok, Tok::Eof) { token.clone() } else { self.pull(token.pos) }
    }

    fn pull(&mut self, last: Pos) -> Token {
        let next = match &mut self.source {
            Source::Lexed(toks) => toks.next(),
            Source::Stream(stream) => match stream.next_token() {
                Ok(token) => Some(token),
                Err(e) => {
                    let pos = e.pos.unwrap_or(last);
                    self.lex_error.get_or_insert(e);
                    Some(Token { tok: Tok::Eof, pos, newline_before: false })
                }
            },
        };
        next.unwrap_or(Token { tok: Tok::Eof, pos: last, newline_before: false })
    }

    // ---- token helpers ----

    fn peek(&self) -> &Token {
        &self.cur
    }

    fn peek_nth(&self, n: usize) -> &Tok {
        if n == 0 { &self.cur.tok } else { &self.next.tok }
    }

    fn pos(&self) -> Pos {
        self.peek().pos
    }

    /// Consume the current token and hand it over; `Eof` stays for every later peek.
    fn bump(&mut self) -> Token {
        if matches!(self.cur.tok, Tok::Eof) {
            return self.cur.clone();
        }
        let after_next = if matches!(self.next.tok, Tok::Eof) { self.next.clone() } else { self.pull(self.next.pos) };
        let next = std::mem::replace(&mut self.next, after_next);
        std::mem::replace(&mut self.cur, next)
    }

    fn is_sym(&self, sym: &str) -> bool {
        matches!(&self.peek().tok, Tok::Sym(s) if *s == sym)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if &**s == word)
    }

    fn nth_is_sym(&self, n: usize, sym: &str) -> bool {
        matches!(self.peek_nth(n), Tok::Sym(s) if *s == sym)
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        self.eat_if(self.is_sym(sym))
    }

    fn eat_word(&mut self, word: &str) -> bool {
        self.eat_if(self.is_word(word))
    }

    /// Steps past the token when `here` says it is the one wanted.
    fn eat_if(&mut self, here: bool) -> bool {
        if here {
            self.bump();
        }
        here
    }

    fn unexpected(&self, wanted: &str) -> Diagnostic {
        let found = &self.peek().tok;
        let code = if matches!(found, Tok::Eof) { "PAR002" } else { "PAR001" };
        Diagnostic::at(code, format!("expected {wanted}, found {}", describe(found)), self.pos())
    }

    fn expect_sym(&mut self, sym: &str) -> Result<Pos, Diagnostic> {
        if self.is_sym(sym) { Ok(self.bump().pos) } else { Err(self.unexpected(&format!("'{sym}'"))) }
    }

    fn expect_word(&mut self, word: &str) -> Result<Pos, Diagnostic> {
        if self.is_word(word) { Ok(self.bump().pos) } else { Err(self.unexpected(&format!("'{word}'"))) }
    }

    fn expect_eof(&self) -> Result<(), Diagnostic> {
        if matches!(self.peek().tok, Tok::Eof) { Ok(()) } else { Err(self.unexpected("end of input")) }
    }

    /// Any identifier, keywords included (record fields, module path segments).
    fn any_ident(&mut self, wanted: &str) -> Result<(Name, Pos), Diagnostic> {
        match &self.peek().tok {
            Tok::Ident(name) => {
                let name = name.clone();
                Ok((name, self.bump().pos))
            }
            _ => Err(self.unexpected(wanted)),
        }
    }

    /// An identifier that may name a binding.
    fn binder(&mut self, wanted: &str) -> Result<(Name, Pos), Diagnostic> {
        let pos = self.pos();
        let (name, pos) = match &self.peek().tok {
            Tok::Ident(name) => (name.clone(), pos),
            _ => return Err(self.unexpected(wanted)),
        };
        if is_reserved(&name) {
            return Err(Diagnostic::at(
                "PAR012",
                format!("reserved keyword '{name}' cannot be used as an identifier"),
                pos,
            ));
        }
        self.bump();
        Ok((name, pos))
    }

    fn enter(&mut self) -> Result<(), Diagnostic> {
        self.depth += 1;
        if self.depth > MAX_NESTING || stack::exhausted() {
            return Err(Diagnostic::at("PAR999", "nesting too deep", self.pos()));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// `parse`, one nesting level deeper.
    fn nested<T>(&mut self, parse: impl FnOnce(&mut Self) -> Result<T, Diagnostic>) -> Result<T, Diagnostic> {
        self.enter()?;
        let result = parse(self);
        self.leave();
        result
    }

    /// Comma-separated items up to `close`, allowing a trailing comma.
    fn comma_list<T>(
        &mut self,
        close: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, Diagnostic>,
    ) -> Result<Vec<T>, Diagnostic> {
        let mut items = Vec::new();
        while !self.is_sym(close) {
            items.push(item(self)?);
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_sym(close)?;
        Ok(items)
    }

    /// Comma-separated items up to `close`, allowing a trailing comma, where `...` ends the
    /// items and `spread` reads what follows it; gives what `spread` read when there was one.
    fn comma_list_spread<T, S>(
        &mut self,
        close: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, Diagnostic>,
        spread: impl FnOnce(&mut Self) -> Result<S, Diagnostic>,
    ) -> Result<(Vec<T>, Option<S>), Diagnostic> {
        let mut items = Vec::new();
        let mut rest = None;
        while !self.is_sym(close) {
            if self.eat_sym("...") {
                rest = Some(spread(self)?);
                break;
            }
            items.push(item(self)?);
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_sym(close)?;
        Ok((items, rest))
    }

    /// Skip a balanced bracket group starting at the current opener.
    fn skip_group(&mut self) -> Result<(), Diagnostic> {
        let mut depth = 0usize;
        loop {
            let tok = self.bump();
            match tok.tok {
                Tok::Sym("(" | "[" | "{") => depth += 1,
                Tok::Sym(")" | "]" | "}") => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Tok::Eof => {
                    return Err(Diagnostic::at("PAR002", "unclosed bracket", tok.pos));
                }
                _ => {}
            }
        }
    }

    // ---- module level ----

    fn module(&mut self) -> Result<Module, Diagnostic> {
        let name = if self.is_word("module") {
            let pos = self.bump().pos;
            Some((self.module_path()?, pos))
        } else {
            None
        };
        let mut imports = Vec::new();
        while self.is_word("import") {
            imports.push(self.import()?);
        }
        let mut decls = Vec::new();
        let mut annotations = Vec::new();
        loop {
            if matches!(self.peek().tok, Tok::Eof) {
                break;
            }
            if self.is_word("import") {
                imports.push(self.import()?);
                continue;
            }
            if self.eat_sym("@") {
                let (name, _) = self.any_ident("an annotation name")?;
                if self.is_sym("(") {
                    self.skip_group()?;
                }
                annotations.push(name.to_string());
                continue;
            }
            decls.push(self.decl(std::mem::take(&mut annotations))?);
        }
        Ok(Module { name, imports, decls })
    }

    fn module_path(&mut self) -> Result<String, Diagnostic> {
        let (first, _) = self.any_ident("a module path")?;
        let mut path = first.to_string();
        loop {
            if self.is_sym("-") && matches!(self.peek_nth(1), Tok::Ident(_)) {
                return Err(Diagnostic::at(
                    "PAR_HYPHEN_IN_IMPORT",
                    "module path segments cannot contain '-'; use '_'",
                    self.pos(),
                ));
            }
            if !self.eat_sym("/") {
                break;
            }
            let (seg, _) = self.any_ident("a module path segment")?;
            path.push('/');
            path.push_str(&seg);
        }
        Ok(path)
    }

    fn import(&mut self) -> Result<Import, Diagnostic> {
        let pos = self.expect_word("import")?;
        let path = self.module_path()?;
        let items = if self.eat_sym("(") {
            Some(self.comma_list(")", |p| {
                let (name, pos) = p.any_ident("an imported name")?;
                let alias = if p.eat_word("as") { Some(p.binder("an alias")?.0) } else { None };
                Ok(ImportItem { name, alias, pos })
            })?)
        } else {
            None
        };
        let alias = if items.is_none() && self.eat_word("as") { Some(self.binder("a module alias")?.0) } else { None };
        Ok(Import { path, pos, items, alias })
    }

    fn decl(&mut self, annotations: Vec<String>) -> Result<Decl, Diagnostic> {
        let pos = self.pos();
        let exported = self.eat_word("export");
        self.eat_word("pure");
        if self.eat_word("func") {
            return Ok(Decl::Func(Rc::new(self.func_decl(exported, annotations, pos)?)));
        }
        if self.eat_word("type") {
            return Ok(Decl::Type(self.type_decl(exported, pos)?));
        }
        if !exported && self.is_word("test") && matches!(self.peek_nth(1), Tok::Str(_)) {
            self.bump();
            let name = match self.bump().tok {
                Tok::Str(parts) => plain_string(&parts).unwrap_or_default(),
                _ => String::new(),
            };
            let body = if self.is_sym("{") {
                let open = self.bump().pos;
                self.block(open)?
            } else {
                self.expect_sym("=")?;
                self.expr()?
            };
            return Ok(Decl::Test { name, body, pos });
        }
        if !exported && self.eat_word("let") {
            return Ok(Decl::Let(self.top_let(pos)?));
        }
        if self.is_word("extern") {
            return Err(Diagnostic::at("PAR001", "extern functions are not supported", pos));
        }
        Err(self.unexpected("a declaration (func, type, test)"))
    }

    /// `let x[: T] = e` at module level (the `let` is consumed). The reference's retired
    /// script mode (`let x = e in …` at the top) is refused with a pointer to `func`.
    fn top_let(&mut self, pos: Pos) -> Result<TopLet, Diagnostic> {
        let (name, _) = self.binder("a name")?;
        let ty = if self.eat_sym(":") { Some(self.type_expr()?) } else { None };
        self.expect_sym("=")?;
        let value = self.expr()?;
        if self.is_word("in") {
            return Err(Diagnostic::at(
                "PAR001",
                "a top-level 'let … in' (script mode) is not supported: bind the value with a top-level `let x = …` or put the code in a func",
                self.pos(),
            ));
        }
        self.eat_sym(";");
        Ok(TopLet { name, ty, value, pos })
    }

    fn starts_decl(&self) -> bool {
        match &self.peek().tok {
            Tok::Eof => true,
            Tok::Sym("@") => true,
            Tok::Ident(w) => match &**w {
                "export" | "type" | "import" | "pure" | "extern" => true,
                "func" => !self.nth_is_sym(1, "("),
                "test" => matches!(self.peek_nth(1), Tok::Str(_)),
                _ => false,
            },
            _ => false,
        }
    }

    fn params(&mut self) -> Result<Vec<Param>, Diagnostic> {
        self.expect_sym("(")?;
        let mut params = self.comma_list(")", |p| {
            let (name, pos) = p.binder("a parameter name")?;
            let ty = if p.eat_sym(":") { Some(p.type_expr()?) } else { None };
            Ok(Param { name, ty, pos })
        })?;
        if params.is_empty() {
            // `func f()` takes one unit parameter.
            params.push(Param { name: "_".into(), ty: Some(TypeExpr::Unit), pos: self.pos() });
        }
        Ok(params)
    }

    fn func_decl(&mut self, exported: bool, annotations: Vec<String>, pos: Pos) -> Result<FuncDecl, Diagnostic> {
        let (name, _) = self.binder("a function name")?;
        let type_params =
            if self.eat_sym("[") { self.comma_list("]", |p| Ok(p.binder("a type parameter")?.0))? } else { Vec::new() };
        let params = self.params()?;
        let ret = if self.eat_sym("->") { Some(self.type_expr()?) } else { None };
        let effects = self.effect_row()?;
        let mut requires = Vec::new();
        let mut ensures = Vec::new();
        let mut tests = Vec::new();
        loop {
            if self.eat_word("requires") {
                self.expect_sym("{")?;
                requires.extend(self.comma_list("}", |p| p.expr())?);
            } else if self.eat_word("ensures") {
                self.expect_sym("{")?;
                ensures.extend(self.comma_list("}", |p| p.expr())?);
            } else if self.is_word("tests") && self.nth_is_sym(1, "[") {
                self.bump();
                self.bump();
                for row in self.comma_list("]", |p| p.expr())? {
                    tests.push(test_row(row)?);
                }
            } else if self.is_word("properties") && self.nth_is_sym(1, "[") {
                self.bump();
                self.skip_group()?;
            } else {
                break;
            }
        }
        let body = if self.eat_sym("=") {
            self.equation_body()?
        } else if self.is_sym("{") {
            let open = self.bump().pos;
            self.block(open)?
        } else {
            return Err(Diagnostic::at(
                "PAR010",
                format!("expected '=' or '{{' to start the body of '{name}', found {}", describe(&self.peek().tok)),
                self.pos(),
            ));
        };
        Ok(FuncDecl {
            name,
            exported,
            type_params,
            params,
            ret,
            effects,
            requires,
            ensures,
            tests,
            annotations,
            body,
            pos,
        })
    }

    /// `! {IO, FS}`, `! {}`, `! {e}` or `! {IO | e}`; a lower-case name is a row variable.
    /// Effect parameters (`Rand[mode=seeded]`) are skipped.
    fn effect_row(&mut self) -> Result<Option<EffectRow>, Diagnostic> {
        if !(self.is_sym("!") && self.nth_is_sym(1, "{")) {
            return Ok(None);
        }
        self.bump();
        self.bump();
        let mut row = EffectRow::default();
        while !self.is_sym("}") {
            if self.eat_sym("|") {
                row.tail = Some(self.any_ident("a row variable")?.0);
                break;
            }
            let (name, _) = self.any_ident("an effect name")?;
            if self.is_sym("[") {
                self.skip_group()?;
            }
            if name.starts_with(|c: char| c.is_lowercase()) {
                row.tail = Some(name);
            } else {
                row.labels.push(name);
            }
            if !self.eat_sym(",") {
                if self.eat_sym("|") {
                    row.tail = Some(self.any_ident("a row variable")?.0);
                }
                break;
            }
        }
        self.expect_sym("}")?;
        Ok(Some(row))
    }

    fn equation_body(&mut self) -> Result<Expr, Diagnostic> {
        let first = self.expr()?;
        if !self.is_sym(";") {
            return Ok(first);
        }
        let pos = first.pos;
        let mut stmts = vec![Stmt::Expr(first)];
        while self.eat_sym(";") {
            if self.starts_decl() {
                break;
            }
            stmts.push(self.statement()?);
        }
        Ok(Expr { kind: ExprKind::Block(stmts), pos })
    }

    fn type_decl(&mut self, exported: bool, pos: Pos) -> Result<TypeDecl, Diagnostic> {
        let (name, _) = self.binder("a type name")?;
        let params =
            if self.eat_sym("[") { self.comma_list("]", |p| Ok(p.binder("a type parameter")?.0))? } else { Vec::new() };
        self.expect_sym("=")?;
        let leading_bar = self.eat_sym("|");
        let is_variants = leading_bar
            || matches!(&self.peek().tok, Tok::Ident(n) if n.starts_with(|c: char| c.is_uppercase()))
                && !self.nth_is_sym(1, "[");
        let body = if is_variants {
            let mut variants = Vec::new();
            loop {
                let (vname, vpos) = self.binder("a constructor name")?;
                let fields = if self.eat_sym("(") { self.comma_list(")", |p| p.type_expr())? } else { Vec::new() };
                variants.push(Variant { name: vname, fields, pos: vpos });
                if !self.eat_sym("|") {
                    break;
                }
            }
            TypeBody::Variants(variants)
        } else {
            TypeBody::Alias(self.type_expr()?)
        };
        if self.eat_word("deriving") && self.is_sym("(") {
            self.skip_group()?;
        }
        Ok(TypeDecl { name, params, exported, body, pos })
    }

    // ---- types ----

    fn type_expr(&mut self) -> Result<TypeExpr, Diagnostic> {
        self.nested(Self::type_expr_inner)
    }

    fn type_expr_inner(&mut self) -> Result<TypeExpr, Diagnostic> {
        let (atom, group) = self.type_atom()?;
        if self.eat_sym("->") {
            let ret = self.type_expr()?;
            let effects = self.effect_row()?;
            let params = match (atom, group) {
                (TypeExpr::Unit, true) => Vec::new(),
                (TypeExpr::Tuple(items), true) => items,
                (other, _) => vec![other],
            };
            return Ok(TypeExpr::Func(params, Box::new(ret), effects));
        }
        Ok(atom)
    }

    /// A type atom; the flag says it was a parenthesised group (possible parameter list).
    fn type_atom(&mut self) -> Result<(TypeExpr, bool), Diagnostic> {
        if self.eat_sym("(") {
            let items = self.comma_list(")", |p| p.type_expr())?;
            let ty = match items.len() {
                0 => TypeExpr::Unit,
                1 => items.into_iter().next().unwrap_or(TypeExpr::Unit),
                _ => TypeExpr::Tuple(items),
            };
            return Ok((ty, true));
        }
        if self.eat_sym("[") {
            let inner = self.type_expr()?;
            self.expect_sym("]")?;
            return Ok((TypeExpr::List(Box::new(inner)), false));
        }
        if self.eat_sym("{") {
            let mut fields = Vec::new();
            let mut open = false;
            while !self.is_sym("}") {
                if self.eat_sym("...") {
                    open = true;
                    break;
                }
                if self.eat_sym("|") {
                    self.any_ident("a row variable")?;
                    open = true;
                    break;
                }
                let (name, _) = self.any_ident("a field name")?;
                self.expect_sym(":")?;
                fields.push((name, self.type_expr()?));
                if !self.eat_sym(",") {
                    if self.eat_sym("|") {
                        self.any_ident("a row variable")?;
                        open = true;
                    }
                    break;
                }
            }
            self.expect_sym("}")?;
            return Ok((TypeExpr::Record { fields, open }, false));
        }
        let (name, _) = self.any_ident("a type")?;
        let args = if self.eat_sym("[") { self.comma_list("]", |p| p.type_expr())? } else { Vec::new() };
        if matches!(&*name, "list" | "List") && args.len() == 1 {
            let inner = args.into_iter().next().unwrap_or(TypeExpr::Unit);
            return Ok((TypeExpr::List(Box::new(inner)), false));
        }
        Ok((TypeExpr::Named(name, args), false))
    }

    // ---- patterns ----

    fn pattern(&mut self) -> Result<Pattern, Diagnostic> {
        self.nested(Self::pattern_inner)
    }

    fn pattern_inner(&mut self) -> Result<Pattern, Diagnostic> {
        let head = self.pattern_atom()?;
        if self.is_sym("::") {
            self.bump();
            let tail = self.pattern()?;
            let pos = head.pos;
            return Ok(Pattern { kind: PatKind::Cons(Box::new(head), Box::new(tail)), pos });
        }
        Ok(head)
    }

    fn pattern_atom(&mut self) -> Result<Pattern, Diagnostic> {
        let pos = self.pos();
        let kind = match self.peek().tok.clone() {
            Tok::Int(n) => {
                self.bump();
                PatKind::Int(n)
            }
            Tok::Float(f) => {
                self.bump();
                PatKind::Float(f)
            }
            Tok::Sym("-") => {
                self.bump();
                match self.bump().tok {
                    Tok::Int(n) => PatKind::Int(n.wrapping_neg()),
                    Tok::Float(f) => PatKind::Float(-f),
                    other => {
                        return Err(Diagnostic::at(
                            "PAR001",
                            format!("expected a number after '-' in a pattern, found {}", describe(&other)),
                            pos,
                        ));
                    }
                }
            }
            Tok::Str(parts) => {
                let Some(text) = plain_string(&parts) else {
                    return Err(Diagnostic::at("PAR001", "interpolation is not allowed in a pattern", pos));
                };
                self.bump();
                PatKind::Str(text.into())
            }
            Tok::Sym("(") => {
                self.bump();
                let mut items = self.comma_list(")", |p| p.pattern())?;
                match items.len() {
                    0 => PatKind::Unit,
                    1 => return Ok(items.remove(0)),
                    _ => PatKind::Tuple(items),
                }
            }
            // `::(head, tail)`, the prefix form of `head :: tail`.
            Tok::Sym("::") if self.nth_is_sym(1, "(") => {
                self.bump();
                self.bump();
                let items = self.comma_list(")", |p| p.pattern())?;
                let [head, tail]: [Pattern; 2] = items.try_into().map_err(|items: Vec<Pattern>| {
                    Diagnostic::at(
                        "PAR001",
                        format!("'::(…)' takes a head and a tail pattern, found {}", items.len()),
                        pos,
                    )
                })?;
                PatKind::Cons(Box::new(head), Box::new(tail))
            }
            Tok::Sym("[") => {
                self.bump();
                let (items, rest) = self.comma_list_spread("]", |p| p.pattern(), |p| p.pattern_atom())?;
                PatKind::List(items, rest.map(Box::new))
            }
            Tok::Sym("{") => {
                self.bump();
                let field = |p: &mut Self| {
                    let (name, fpos) = p.any_ident("a field name")?;
                    let pat = if p.eat_sym(":") {
                        p.pattern()?
                    } else {
                        Pattern { kind: PatKind::Var(name.clone()), pos: fpos }
                    };
                    Ok((name, pat))
                };
                let (fields, open) = self.comma_list_spread("}", field, |_| Ok(()))?;
                PatKind::Record { fields, open: open.is_some() }
            }
            Tok::Ident(name) => match &*name {
                "_" => {
                    self.bump();
                    PatKind::Wildcard
                }
                "true" | "false" => {
                    self.bump();
                    PatKind::Bool(&*name == "true")
                }
                _ if name.starts_with(|c: char| c.is_uppercase()) => {
                    self.bump();
                    let args = if self.eat_sym("(") { self.comma_list(")", |p| p.pattern())? } else { Vec::new() };
                    PatKind::Ctor(name, args)
                }
                _ => PatKind::Var(self.binder("a pattern")?.0),
            },
            _ => return Err(self.unexpected("a pattern")),
        };
        Ok(Pattern { kind, pos })
    }

    // ---- expressions ----

    fn expr(&mut self) -> Result<Expr, Diagnostic> {
        self.nested(|p| p.binary(0))
    }

    fn infix(&self) -> Option<(BinOp, u8, bool)> {
        let op = match &self.peek().tok {
            Tok::Sym(s) => match *s {
                "||" => BinOp::Or,
                "&&" => BinOp::And,
                "^" => BinOp::BitXor,
                "&" => BinOp::BitAnd,
                "==" => BinOp::Eq,
                "!=" => BinOp::Ne,
                "<" => BinOp::Lt,
                "<=" => BinOp::Le,
                ">" => BinOp::Gt,
                ">=" => BinOp::Ge,
                "<<" => BinOp::Shl,
                ">>" => BinOp::Shr,
                "::" => BinOp::Cons,
                "++" => BinOp::Append,
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Rem,
                "**" => BinOp::Pow,
                _ => return None,
            },
            Tok::Ident(w) if &**w == "or" => BinOp::Or,
            Tok::Ident(w) if &**w == "and" => BinOp::And,
            _ => return None,
        };
        let prec = match op {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::BitXor => 3,
            BinOp::BitAnd => 4,
            BinOp::Eq | BinOp::Ne => 5,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 6,
            BinOp::Shl | BinOp::Shr => 7,
            BinOp::Cons => 8,
            BinOp::Append => 9,
            BinOp::Add | BinOp::Sub => 10,
            BinOp::Mul | BinOp::Div | BinOp::Rem | BinOp::Pow => 11,
        };
        Some((op, prec, op == BinOp::Cons))
    }

    fn binary(&mut self, min_prec: u8) -> Result<Expr, Diagnostic> {
        let mut lhs = self.unary()?;
        while let Some((op, prec, right_assoc)) = self.infix() {
            if prec < min_prec {
                break;
            }
            self.bump();
            let rhs = self.nested(|p| p.binary(if right_assoc { prec } else { prec + 1 }));
            let pos = lhs.pos;
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs?)), pos };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, Diagnostic> {
        let pos = self.pos();
        let op = if self.is_sym("-") {
            UnaryOp::Neg
        } else if self.is_sym("!") || self.is_word("not") {
            UnaryOp::Not
        } else if self.is_sym("~") {
            UnaryOp::BitNot
        } else {
            return self.postfix();
        };
        self.bump();
        if op == UnaryOp::Neg {
            match self.peek().tok {
                Tok::Int(n) => {
                    self.bump();
                    let lit = Expr { kind: ExprKind::Int(n.wrapping_neg(), Cell::new(false)), pos };
                    return self.postfix_from(lit);
                }
                Tok::Float(f) => {
                    self.bump();
                    let lit = Expr { kind: ExprKind::Float(-f), pos };
                    return self.postfix_from(lit);
                }
                _ => {}
            }
        }
        let operand = self.nested(Self::unary);
        Ok(Expr { kind: ExprKind::Unary(op, Box::new(operand?)), pos })
    }

    fn postfix(&mut self) -> Result<Expr, Diagnostic> {
        let base = self.primary()?;
        self.postfix_from(base)
    }

    fn postfix_from(&mut self, mut expr: Expr) -> Result<Expr, Diagnostic> {
        loop {
            // A call's `(` must sit on the same line, so a new statement can start with one.
            if self.is_sym("(") && !self.peek().newline_before {
                self.bump();
                let args = self.comma_list(")", |p| p.expr())?;
                let pos = expr.pos;
                expr = Expr { kind: ExprKind::Call(Box::new(expr), args), pos };
            } else if self.is_sym(".") && matches!(self.peek_nth(1), Tok::Ident(_)) {
                self.bump();
                let (field, _) = self.any_ident("a field name")?;
                let pos = expr.pos;
                expr = Expr { kind: ExprKind::Field(Box::new(expr), field), pos };
            } else {
                return Ok(expr);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, Diagnostic> {
        let pos = self.pos();
        // A string token is taken rather than cloned: it may hold whole interpolations.
        let tok = match &self.peek().tok {
            Tok::Str(_) => self.bump().tok,
            other => other.clone(),
        };
        let kind = match tok {
            Tok::Int(n) => {
                self.bump();
                ExprKind::Int(n, Cell::new(false))
            }
            Tok::Float(f) => {
                self.bump();
                ExprKind::Float(f)
            }
            Tok::Str(parts) => self.string_expr(parts)?,
            Tok::Sym("(") => {
                self.bump();
                let mut items = self.comma_list(")", |p| p.expr())?;
                match items.len() {
                    0 => ExprKind::Unit,
                    1 => {
                        let mut inner = items.remove(0);
                        inner.pos = pos;
                        return Ok(inner);
                    }
                    _ => ExprKind::Tuple(items),
                }
            }
            Tok::Sym("[") => {
                self.bump();
                ExprKind::List(self.comma_list("]", |p| p.expr())?)
            }
            Tok::Sym("#") if self.nth_is_sym(1, "[") => {
                self.bump();
                self.bump();
                ExprKind::List(self.comma_list("]", |p| p.expr())?)
            }
            Tok::Sym("{") => {
                self.bump();
                return self.brace_expr(pos);
            }
            Tok::Sym("\\") => {
                self.bump();
                return self.lambda(pos);
            }
            Tok::Ident(word) => match &*word {
                "true" | "false" => {
                    self.bump();
                    ExprKind::Bool(&*word == "true")
                }
                "if" => {
                    self.bump();
                    let cond = self.expr()?;
                    self.expect_word("then")?;
                    let then = self.expr()?;
                    self.expect_word("else")?;
                    let otherwise = self.expr()?;
                    ExprKind::If(Box::new(cond), Box::new(then), Box::new(otherwise))
                }
                "match" => {
                    self.bump();
                    return self.match_expr(pos);
                }
                "let" | "letrec" => {
                    self.bump();
                    let recursive = &*word == "letrec";
                    let (pat, value) = self.let_binding()?;
                    self.expect_word("in")?;
                    let body = self.expr()?;
                    ExprKind::Let { pat, value: Box::new(value), body: Box::new(body), recursive }
                }
                "func" if self.nth_is_sym(1, "(") => {
                    self.bump();
                    let params = self.params()?;
                    let ret = if self.eat_sym("->") { Some(self.type_expr()?) } else { None };
                    let effects = self.effect_row()?;
                    let body = if self.eat_sym("=") {
                        self.expr()?
                    } else {
                        let open = self.expect_sym("{")?;
                        self.block(open)?
                    };
                    ExprKind::Lambda(Rc::new(Lambda { params, ret, effects, body }))
                }
                _ => ExprKind::Var(self.binder("an expression")?.0),
            },
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr { kind, pos })
    }

    fn string_expr(&mut self, parts: Vec<StrPart>) -> Result<ExprKind, Diagnostic> {
        if let Some(text) = plain_string(&parts) {
            return Ok(ExprKind::Str(text.into()));
        }
        let mut out = Vec::new();
        for part in parts {
            match part {
                StrPart::Lit(text) => out.push(InterpPart::Lit(text.into())),
                StrPart::Interp(tokens) => {
                    let mut sub = Parser::lexed(tokens, self.depth);
                    let expr = sub.expr()?;
                    sub.expect_eof()?;
                    out.push(InterpPart::Expr(expr));
                }
            }
        }
        Ok(ExprKind::Interp(out))
    }

    fn lambda(&mut self, pos: Pos) -> Result<Expr, Diagnostic> {
        let mut params = Vec::new();
        while !self.is_sym(".") {
            let ppos = self.pos();
            if self.eat_sym("(") {
                if self.eat_sym(")") {
                    params.push(Param { name: "_".into(), ty: Some(TypeExpr::Unit), pos: ppos });
                    continue;
                }
                let (name, _) = self.binder("a parameter name")?;
                let ty = if self.eat_sym(":") { Some(self.type_expr()?) } else { None };
                self.expect_sym(")")?;
                params.push(Param { name, ty, pos: ppos });
            } else {
                let (name, _) = self.binder("a lambda parameter")?;
                params.push(Param { name, ty: None, pos: ppos });
            }
        }
        self.expect_sym(".")?;
        if params.is_empty() {
            return Err(Diagnostic::at("PAR001", "a lambda needs at least one parameter", pos));
        }
        let body = self.expr()?;
        Ok(Expr { kind: ExprKind::Lambda(Rc::new(Lambda { params, ret: None, effects: None, body })), pos })
    }

    fn match_expr(&mut self, pos: Pos) -> Result<Expr, Diagnostic> {
        let scrutinee = self.expr()?;
        self.expect_sym("{")?;
        let mut arms = Vec::new();
        while !self.is_sym("}") {
            let pat = self.pattern()?;
            let guard = if self.eat_word("if") { Some(self.expr()?) } else { None };
            self.expect_sym("=>")?;
            let body = self.expr()?;
            arms.push(Arm { pat, guard, body });
            if !self.eat_sym(",") && !self.is_sym("}") && !self.peek().newline_before {
                return Err(self.unexpected("',' or '}' after a match arm"));
            }
        }
        self.expect_sym("}")?;
        if arms.is_empty() {
            return Err(Diagnostic::at("PAR001", "a match needs at least one arm", pos));
        }
        Ok(Expr { kind: ExprKind::Match(Box::new(scrutinee), arms), pos })
    }

    fn let_binding(&mut self) -> Result<(Pattern, Expr), Diagnostic> {
        let pat = self.pattern()?;
        if self.eat_sym(":") {
            self.type_expr()?;
        }
        self.expect_sym("=")?;
        let value = self.expr()?;
        Ok((pat, value))
    }

    /// `{` opens a record literal, a record update or a block.
    fn brace_expr(&mut self, pos: Pos) -> Result<Expr, Diagnostic> {
        if self.eat_sym("}") {
            return Ok(Expr { kind: ExprKind::Record(Vec::new()), pos });
        }
        let ident_first = matches!(self.peek().tok, Tok::Ident(_));
        if ident_first && (self.nth_is_sym(1, ":") || self.nth_is_sym(1, ",")) {
            let fields = self.record_fields()?;
            return Ok(Expr { kind: ExprKind::Record(fields), pos });
        }
        if ident_first && self.nth_is_sym(1, "|") {
            let (base, bpos) = self.binder("a record")?;
            self.bump();
            let fields = self.record_fields()?;
            let base = Expr { kind: ExprKind::Var(base), pos: bpos };
            return Ok(Expr { kind: ExprKind::RecordUpdate(Box::new(base), fields), pos });
        }
        if self.is_word("let") || self.is_word("letrec") || self.is_word("assert") {
            return self.block(pos);
        }
        // `{ expr | f: v }` updates any record expression; otherwise `expr` opens a block.
        let first = self.nested(Self::expr)?;
        if self.eat_sym("|") {
            let fields = self.record_fields()?;
            return Ok(Expr { kind: ExprKind::RecordUpdate(Box::new(first), fields), pos });
        }
        self.block_from(pos, Some(Stmt::Expr(first)))
    }

    fn record_fields(&mut self) -> Result<Vec<(Name, Expr)>, Diagnostic> {
        self.comma_list("}", |p| {
            let (name, fpos) = p.any_ident("a field name")?;
            let value = if p.eat_sym(":") { p.expr()? } else { Expr { kind: ExprKind::Var(name.clone()), pos: fpos } };
            Ok((name, value))
        })
    }

    fn statement(&mut self) -> Result<Stmt, Diagnostic> {
        if self.is_word("let") || self.is_word("letrec") {
            let pos = self.pos();
            let recursive = self.is_word("letrec");
            self.bump();
            let (pat, value) = self.let_binding()?;
            if self.eat_word("in") {
                let body = self.expr()?;
                let kind = ExprKind::Let { pat, value: Box::new(value), body: Box::new(body), recursive };
                return Ok(Stmt::Expr(Expr { kind, pos }));
            }
            return Ok(Stmt::Let { pat, value, pos, recursive });
        }
        // `assert` is a keyword at the start of a statement, as in the reference.
        if self.eat_word("assert") {
            return Ok(Stmt::Assert(self.expr()?));
        }
        Ok(Stmt::Expr(self.expr()?))
    }

    /// The statements of a block whose `{` is already consumed.
    fn block(&mut self, pos: Pos) -> Result<Expr, Diagnostic> {
        self.block_from(pos, None)
    }

    /// A block body, possibly with its first statement already parsed.
    fn block_from(&mut self, pos: Pos, first: Option<Stmt>) -> Result<Expr, Diagnostic> {
        self.enter()?;
        let mut stmts = Vec::new();
        let mut pending = first;
        loop {
            if pending.is_none() {
                while self.eat_sym(";") {}
                if self.is_sym("}") {
                    break;
                }
            }
            let stmt = match pending.take() {
                Some(stmt) => stmt,
                None => self.statement()?,
            };
            stmts.push(stmt);
            if self.eat_sym(";") || self.is_sym("}") || self.peek().newline_before {
                continue;
            }
            self.leave();
            return Err(Diagnostic::at(
                "PAR020",
                format!("expected ';' or a new line between statements, found {}", describe(&self.peek().tok)),
                self.pos(),
            ));
        }
        self.expect_sym("}")?;
        self.leave();
        Ok(Expr { kind: ExprKind::Block(stmts), pos })
    }
}

fn plain_string(parts: &[StrPart]) -> Option<String> {
    match parts {
        [StrPart::Lit(text)] => Some(text.clone()),
        [] => Some(String::new()),
        _ => None,
    }
}

fn test_row(mut row: Expr) -> Result<TestRow, Diagnostic> {
    let pos = row.pos;
    // `Expr` has a drop of its own, so its kind is taken rather than moved out.
    match std::mem::replace(&mut row.kind, ExprKind::Unit) {
        ExprKind::Tuple(mut items) if items.len() == 2 => {
            let expected = items.remove(1);
            let input = items.remove(0);
            Ok(TestRow { input, expected, pos })
        }
        _ => Err(Diagnostic::at("PAR006", "a test row must be a pair (input, expected)", pos)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(src: &str) -> String {
        format!("{:?}", parse_expr(src).unwrap().kind)
    }

    #[test]
    fn a_lexical_error_wins_over_a_syntax_error_before_it() {
        let source = "module m\nfunc f( = 1\nfunc g() -> int { 2 }\nfunc h() = \"open";
        let err = parse_module(source).unwrap_err();
        assert_eq!((err.code.as_str(), err.pos), ("PAR_ILLEGAL_TOKEN", Some(Pos::new(4, 12))));
        let err = parse_module("module m\nfunc f( = 1\nfunc g() = 2 ¤").unwrap_err();
        assert_eq!((err.code.as_str(), err.pos), ("PAR_ILLEGAL_TOKEN", Some(Pos::new(3, 14))));
        // Without one, the syntax error stands.
        assert_eq!(parse_module("module m\nfunc f( = 1\n").unwrap_err().code, "PAR001");
        assert_eq!(parse_expr("1 + ¤").unwrap_err().code, "PAR_ILLEGAL_TOKEN");
        assert_eq!(parse_type("[int] ¤").unwrap_err().code, "PAR_ILLEGAL_TOKEN");
    }

    #[test]
    fn every_reserved_word_is_reserved_and_nothing_else() {
        assert!(RESERVED.iter().all(|w| is_reserved(w)));
        for word in ["exists", "x", "step0", "Let", "lets", "i", "iff", ""] {
            assert!(!is_reserved(word), "{word}");
        }
    }

    #[test]
    fn precedence_follows_the_reference() {
        let e = parse_expr("1 + 2 * 3 == 7 && true || false").unwrap();
        let ExprKind::Binary(BinOp::Or, lhs, _) = &e.kind else { panic!("top is not ||") };
        let ExprKind::Binary(BinOp::And, eq, _) = &lhs.kind else { panic!("then &&") };
        let ExprKind::Binary(BinOp::Eq, sum, _) = &eq.kind else { panic!("then ==") };
        assert!(matches!(sum.kind, ExprKind::Binary(BinOp::Add, _, _)));
    }

    #[test]
    fn cons_is_right_associative() {
        let e = parse_expr("1 :: 2 :: xs").unwrap();
        let ExprKind::Binary(BinOp::Cons, _, rhs) = &e.kind else { panic!("not cons") };
        assert!(matches!(rhs.kind, ExprKind::Binary(BinOp::Cons, _, _)));
    }

    #[test]
    fn braces_pick_record_update_or_block() {
        assert!(shape("{ a: 1 }").starts_with("Record"));
        assert!(shape("{ r | a: 1 }").starts_with("RecordUpdate"));
        assert!(shape("{ let x = 1; x }").starts_with("Block"));
        assert!(shape("{}").starts_with("Record"));
    }

    #[test]
    fn reserved_words_are_refused_as_names() {
        assert_eq!(parse_expr("let match = 1 in match").unwrap_err().code, "PAR012");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = "(".repeat(5000) + "1" + &")".repeat(5000);
        assert_eq!(parse_expr(&src).unwrap_err().code, "PAR999");
    }

    #[test]
    fn func_without_params_takes_unit() {
        let m = parse_module("module a\nexport func main() -> string { \"x\" }").unwrap();
        let Decl::Func(f) = &m.decls[0] else { panic!("no func") };
        assert_eq!(f.params.len(), 1);
        assert_eq!(f.params[0].ty, Some(TypeExpr::Unit));
    }
}
