//! The PromQL lexer: a query as tokens, strings and range selectors
//! skipped.

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    Num,
    Open,
    Close,
    LBrace,
    RBrace,
    Comma,
    Op(String),
    /// `[5m]`, `[$__rate_interval]`, `[1h:5m]`: skipped whole.
    Range,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

pub(super) fn lex(expr: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            _ if c.is_whitespace() => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' | '\'' | '`' => {
                let mut value = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("unterminated string in {expr:?}")),
                        Some('\\') if c != '`' => {
                            value.extend(chars.get(i + 1));
                            i += 2;
                        }
                        Some(&q) if q == c => break,
                        Some(&other) => {
                            value.push(other);
                            i += 1;
                        }
                    }
                }
                i += 1;
                toks.push(Tok::Str(value));
            }
            '[' => {
                while i < chars.len() && chars[i] != ']' {
                    i += 1;
                }
                if i == chars.len() {
                    return Err(format!("unclosed [ in {expr:?}"));
                }
                i += 1;
                toks.push(Tok::Range);
            }
            // A Grafana variable outside a string or a range stands for a
            // value.
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    while i < chars.len() && chars[i] != '}' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < chars.len() && is_ident_char(chars[i]) {
                        i += 1;
                    }
                }
                toks.push(Tok::Num);
            }
            _ if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    // An exponent's sign: 1e-3.
                    if matches!(chars[i], 'e' | 'E') && matches!(chars.get(i + 1), Some('+' | '-')) {
                        i += 1;
                    }
                    i += 1;
                }
                toks.push(Tok::Num);
            }
            _ if is_ident_start(c) => {
                let start = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                toks.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            '(' => {
                toks.push(Tok::Open);
                i += 1;
            }
            ')' => {
                toks.push(Tok::Close);
                i += 1;
            }
            '{' => {
                toks.push(Tok::LBrace);
                i += 1;
            }
            '}' => {
                toks.push(Tok::RBrace);
                i += 1;
            }
            ',' => {
                toks.push(Tok::Comma);
                i += 1;
            }
            _ => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                if ["=~", "!=", "!~", "==", "<=", ">="].contains(&two.as_str()) {
                    toks.push(Tok::Op(two));
                    i += 2;
                } else if "=<>+-*/%^@".contains(c) {
                    toks.push(Tok::Op(c.to_string()));
                    i += 1;
                } else {
                    return Err(format!("unexpected {c:?} in {expr:?}"));
                }
            }
        }
    }
    Ok(toks)
}
