//! Parsing Masterminds/semver v3's constraint grammar: a group of
//! comparators (`>= 1.2, < 2`), each an operator and a partial version
//! (`1.x`, `~1.2`, `1.2 - 1.4`), as the Go library reads them.

use semver::{BuildMetadata, Prerelease, Version};

use super::*;

enum Token<'a> {
    Comma,
    Word(&'a str),
}

/// Words are runs of anything but whitespace and commas; the comparators
/// and the `-` of a hyphen range are made of words.
fn tokens(group: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, ch) in group.char_indices() {
        let separator = ch.is_whitespace() || ch == ',';
        match (separator, start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push(Token::Word(&group[s..i]));
                start = None;
            }
            _ => {}
        }
        if ch == ',' {
            out.push(Token::Comma);
        }
    }
    if let Some(s) = start {
        out.push(Token::Word(&group[s..]));
    }
    out
}

pub(super) fn parse_group(group: &str, whole: &str) -> Result<Group, VersionError> {
    let invalid = |part: &str, reason: &str| VersionError::InvalidConstraint {
        constraint: whole.to_string(),
        part: part.to_string(),
        reason: reason.to_string(),
    };
    let tokens = tokens(group);
    if tokens.is_empty() {
        return Err(invalid("||", "has an empty alternative beside it; put a comparator on each side"));
    }
    let mut comparators = Vec::new();
    let mut i = 0;
    // Masterminds separates comparators by whitespace or one comma, and
    // refuses a comma with nothing on one side of it.
    let mut after_comma = false;
    while i < tokens.len() {
        let word = match tokens[i] {
            Token::Comma if comparators.is_empty() || after_comma => {
                return Err(invalid(",", "has no comparator before it"));
            }
            Token::Comma => {
                after_comma = true;
                i += 1;
                continue;
            }
            Token::Word(word) => word,
        };
        if word == "-" {
            return Err(invalid(
                "-",
                "is a hyphen range without a plain version before it; write it like \"1.2 - 1.4.5\"",
            ));
        }
        let (op_text, mut version_text) = split_operator(word);
        i += 1;
        if version_text.is_empty() {
            // The operator may stand apart from its version: `>= 1.2`.
            match tokens.get(i) {
                Some(Token::Word(next)) if split_operator(next).0.is_empty() && *next != "-" => {
                    version_text = next;
                    i += 1;
                }
                _ => return Err(invalid(word, "is an operator without a version after it")),
            }
        }
        let op = parse_operator(op_text).ok_or_else(|| invalid(op_text, "is not a comparison operator"))?;
        let (version, wildcard) =
            parse_partial(version_text).map_err(|reason| invalid(version_text, &reason))?;

        if let Some(Token::Word("-")) = tokens.get(i) {
            // A hyphen range is shorthand for `>= low, <= high`; rewriting it
            // that way keeps Masterminds' wildcard reading of a partial high
            // end (`2.3 - 4.5` admits 4.5.7).
            if !op_text.is_empty() {
                return Err(invalid(
                    word,
                    "starts a hyphen range but has an operator; a hyphen range joins two plain versions",
                ));
            }
            let high_text = match tokens.get(i + 1) {
                Some(Token::Word(next)) if split_operator(next).0.is_empty() && *next != "-" => *next,
                _ => {
                    return Err(invalid(
                        version_text,
                        "starts a hyphen range with no plain version after the \"-\"",
                    ))
                }
            };
            let (high, high_wildcard) =
                parse_partial(high_text).map_err(|reason| invalid(high_text, &reason))?;
            comparators.push(Comparator {
                op: Op::Ge,
                version,
                wildcard,
            });
            comparators.push(Comparator {
                op: Op::Le,
                version: high,
                wildcard: high_wildcard,
            });
            i += 2;
        } else {
            comparators.push(Comparator {
                op,
                version,
                wildcard,
            });
        }
        after_comma = false;
    }
    if after_comma {
        return Err(invalid(",", "has no comparator after it"));
    }
    let admits_prereleases = comparators.iter().any(|c| !c.version.pre.is_empty());
    Ok(Group {
        comparators,
        admits_prereleases,
    })
}

fn split_operator(word: &str) -> (&str, &str) {
    let end = word
        .find(|c: char| !matches!(c, '=' | '!' | '<' | '>' | '~' | '^'))
        .unwrap_or(word.len());
    word.split_at(end)
}

fn parse_operator(op: &str) -> Option<Op> {
    Some(match op {
        "" | "=" => Op::Eq,
        "!=" => Op::Ne,
        ">" => Op::Gt,
        "<" => Op::Lt,
        ">=" | "=>" => Op::Ge,
        "<=" | "=<" => Op::Le,
        "~" | "~>" => Op::Tilde,
        "^" => Op::Caret,
        _ => return None,
    })
}

/// A constraint's version: optional `v`, one to three parts each a number or
/// a wildcard, then an optional prerelease and build. Numbers with leading
/// zeros are read as numbers, as Masterminds does.
fn parse_partial(text: &str) -> Result<(Version, Wildcard), String> {
    let rest = text.strip_prefix('v').unwrap_or(text);
    let (rest, build) = match rest.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (rest, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    if let Some(build) = build {
        if build.is_empty() || BuildMetadata::new(build).is_err() {
            return Err(format!(
                "has invalid build metadata {build:?}; use dot-separated letters, digits and hyphens"
            ));
        }
    }
    let pre = match pre {
        None => Prerelease::EMPTY,
        Some(p) => Prerelease::new(p).ok().filter(|p| !p.is_empty()).ok_or_else(|| {
            format!(
                "has an invalid prerelease {p:?}; use dot-separated letters, digits and hyphens, \
                 numbers without leading zeros"
            )
        })?,
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 3 {
        return Err("has more than three version parts; write major.minor.patch".to_string());
    }
    let mut numbers = [0u64; 3];
    let mut wildcard = Wildcard::None;
    for (index, part) in parts.iter().enumerate() {
        if matches!(*part, "x" | "X" | "*") {
            if wildcard == Wildcard::None {
                wildcard = wildcard_at(index);
            }
            continue;
        }
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("is not a version: {part:?} should be a number or a wildcard (x, X, *)"));
        }
        // Parts after a wildcard must still be well formed, but the wildcard
        // makes their values irrelevant.
        if wildcard == Wildcard::None {
            numbers[index] =
                part.parse().map_err(|_| format!("has a version part {part:?} that is too large"))?;
        }
    }
    if wildcard == Wildcard::None && parts.len() < 3 {
        // Masterminds reads a missing part like a wildcard: `~1` is `~1.x`.
        wildcard = wildcard_at(parts.len());
    }
    let mut version = Version::new(numbers[0], numbers[1], numbers[2]);
    version.pre = pre;
    Ok((version, wildcard))
}

fn wildcard_at(index: usize) -> Wildcard {
    match index {
        0 => Wildcard::Major,
        1 => Wildcard::Minor,
        _ => Wildcard::Patch,
    }
}
