//! Helm chart version resolution, as Flux's source-controller does it.
//!
//! A HelmRelease's `spec.chart.spec.version` is matched against the version
//! strings of one chart in a HelmRepository's index: an entry written exactly
//! like the wanted string wins outright; an empty string or `*` asks for the
//! newest stable version; anything else is a constraint in the grammar of the
//! Go library Masterminds/semver v3, which Flux and Helm use.
//!
//! The `semver` crate's own `VersionReq` speaks Cargo's dialect (no `||`, no
//! hyphen ranges, a bare `1.2.3` means `^1.2.3`, a different prerelease rule),
//! and picking a different chart version than Flux would is worse than not
//! picking one, so the Masterminds grammar is parsed here into comparators and
//! evaluated over `semver::Version`, comparator by comparator the way the Go
//! library evaluates them.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use semver::{BuildMetadata, Prerelease, Version};

/// How many available versions an error lists before summarising the rest:
/// enough to see what is there, short enough to read in a status condition.
const LISTED_VERSIONS: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("the chart version constraint is empty; write a version like \"1.2.3\", a range like \">=1.2 <2\", or \"*\" for the latest stable version")]
    EmptyConstraint,
    #[error(
        "invalid chart version constraint {constraint:?}: {part:?} {reason}; write comparators such as \
         \">=1.2 <2\", \"^1.4\", \"~1.2.3\", \"1.2.x\" or \"1.2 - 1.4.5\", and separate alternatives with \"||\""
    )]
    InvalidConstraint {
        constraint: String,
        part: String,
        reason: String,
    },
    #[error(
        "the repository index lists no versions of the chart; publish the chart or check the chart name"
    )]
    NoVersions,
    #[error(
        "none of the chart's versions in the repository index is a valid semantic version \
         (the index lists {listed}); publish the chart with a version like \"1.2.3\""
    )]
    NoValidVersions { listed: String },
    #[error(
        "the chart has no stable version: available are {available}; ask for a prerelease explicitly, \
         e.g. \">=1.0.0-0\", or publish a stable version"
    )]
    NoStableVersion { available: String },
    #[error(
        "no version of the chart matches {wanted:?}: available are {available} — widen the range or \
         publish a matching version"
    )]
    NoMatch { wanted: String, available: String },
}

/// A parsed Masterminds semver v3 constraint: alternatives separated by
/// `||`, each a set of comparators that must all hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    source: String,
    groups: Vec<Group>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    comparators: Vec<Comparator>,
    /// Masterminds lets prereleases through an alternative only when one of
    /// its comparators names a prerelease: asking for `>=1.2.3-0` is how a
    /// user opts in, and the opt-in then covers the whole alternative (so
    /// `>=1.2.3-0 <2` admits `1.5.0-rc.1` although `<2` names none).
    admits_prereleases: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// No operator, `=`: equality, widened to a tilde range by wildcards.
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    /// `~` and `~>`.
    Tilde,
    Caret,
}

/// Which part of the comparator's version is a wildcard (`x`, `X`, `*`) or
/// missing, which Masterminds treats alike; everything after it is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Major,
    Minor,
    Patch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    /// The version with wildcard parts set to 0 and build metadata dropped
    /// (it never takes part in comparisons).
    version: Version,
    wildcard: Wildcard,
}

impl Constraint {
    pub fn parse(s: &str) -> Result<Self, VersionError> {
        if s.trim().is_empty() {
            return Err(VersionError::EmptyConstraint);
        }
        let groups = s.split("||").map(|group| parse_group(group, s)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            source: s.to_string(),
            groups,
        })
    }

    pub fn matches(&self, v: &Version) -> bool {
        self.groups
            .iter()
            .any(|group| group.comparators.iter().all(|c| c.matches(v, group.admits_prereleases)))
    }
}

impl FromStr for Constraint {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

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

fn parse_group(group: &str, whole: &str) -> Result<Group, VersionError> {
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

impl Comparator {
    /// Mirrors the per-operator checks of Masterminds semver v3, including
    /// how a wildcard widens each operator (`> 1.2.x` is `>= 1.3.0`,
    /// `<= 2.x` is `< 3`). Prerelease ordering follows the semver spec and
    /// build metadata is ignored, as there.
    fn matches(&self, v: &Version, admits_prereleases: bool) -> bool {
        if !v.pre.is_empty() && !admits_prereleases {
            return false;
        }
        let c = &self.version;
        let cmp = v.cmp_precedence(c);
        if self.wildcard == Wildcard::Major {
            // A whole-version wildcard stands for every version. The Go
            // library's arithmetic gives odd answers for the degenerate
            // forms (`<=*` would admit only 0.x); reading them as "any" or
            // "none" is what anyone writing them means.
            return match self.op {
                Op::Eq | Op::Tilde | Op::Caret | Op::Ge => cmp != Ordering::Less,
                Op::Le => true,
                Op::Ne | Op::Gt | Op::Lt => false,
            };
        }
        let minor_wild = self.wildcard == Wildcard::Minor;
        let patch_wild = self.wildcard == Wildcard::Patch;
        let dirty = self.wildcard != Wildcard::None;
        match self.op {
            Op::Eq if dirty => self.tilde(v),
            Op::Eq => cmp == Ordering::Equal,
            Op::Ne if dirty => {
                if v.major != c.major {
                    true
                } else if minor_wild {
                    false
                } else if v.minor != c.minor {
                    true
                } else {
                    // `!= 1.2.x` with prereleases in play: Masterminds tells
                    // versions apart by their prerelease alone here.
                    (!v.pre.is_empty() || !c.pre.is_empty()) && v.pre != c.pre
                }
            }
            Op::Ne => cmp != Ordering::Equal,
            Op::Gt if dirty => match v.major.cmp(&c.major) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => !minor_wild && patch_wild && v.minor > c.minor,
            },
            Op::Gt => cmp == Ordering::Greater,
            Op::Lt => cmp == Ordering::Less,
            Op::Ge => cmp != Ordering::Less,
            Op::Le if dirty => {
                !(v.major > c.major || (v.major == c.major && v.minor > c.minor && !minor_wild))
            }
            Op::Le => cmp != Ordering::Greater,
            Op::Tilde => self.tilde(v),
            Op::Caret => self.caret(v),
        }
    }

    // ~1.2.3 is >=1.2.3 <1.3.0; ~1.2 is >=1.2.0 <1.3.0; ~1 is >=1.0.0 <2.0.0.
    fn tilde(&self, v: &Version) -> bool {
        let c = &self.version;
        if v.cmp_precedence(c) == Ordering::Less {
            return false;
        }
        // Masterminds reads ~0.0.0 as ">= 0.0.0".
        if c.major == 0 && c.minor == 0 && c.patch == 0 && self.wildcard == Wildcard::None {
            return true;
        }
        v.major == c.major && (v.minor == c.minor || self.wildcard == Wildcard::Minor)
    }

    // ^1.2.3 is >=1.2.3 <2.0.0; ^0.2.3 is >=0.2.3 <0.3.0; ^0.0.3 is
    // >=0.0.3 <0.0.4; ^0.0 is <0.1.0; ^0 is <1.0.0.
    fn caret(&self, v: &Version) -> bool {
        let c = &self.version;
        if v.cmp_precedence(c) == Ordering::Less {
            return false;
        }
        if c.major > 0 || self.wildcard == Wildcard::Minor {
            return v.major == c.major;
        }
        if v.major > 0 {
            return false;
        }
        if c.minor > 0 || self.wildcard == Wildcard::Patch {
            return v.minor == c.minor;
        }
        v.minor == 0 && v.patch == c.patch
    }
}

/// Lenient parse as Masterminds NewVersion: optional v, 1–3 numeric parts
/// (missing ones are 0), prerelease, build.
///
/// Leading zeros in the numeric parts are read as numbers (`01.2` is
/// `1.2.0`), as that function does by default; a prerelease's numeric
/// identifiers may not have them, as the spec says.
pub fn parse_version(s: &str) -> Option<Version> {
    let rest = s.strip_prefix('v').unwrap_or(s);
    let (rest, build) = match rest.split_once('+') {
        Some((rest, build)) => (rest, BuildMetadata::new(build).ok().filter(|b| !b.is_empty())?),
        None => (rest, BuildMetadata::EMPTY),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Prerelease::new(pre).ok().filter(|p| !p.is_empty())?),
        None => (rest, Prerelease::EMPTY),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 3 {
        return None;
    }
    let mut numbers = [0u64; 3];
    for (index, part) in parts.iter().enumerate() {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        numbers[index] = part.parse().ok()?;
    }
    Some(Version {
        major: numbers[0],
        minor: numbers[1],
        patch: numbers[2],
        pre,
        build,
    })
}

/// Whether `s` names one version rather than a range: a full semantic
/// version, optionally with a leading `v`, which as a constraint admits only
/// that version (build metadata aside) and is what the index entry for it is
/// written as. Partial versions like `1.2` are ranges (`1.2.x`) to Flux.
pub fn is_exact(s: &str) -> bool {
    index_version(s).is_some()
}

/// How Flux reads a version in a repository index: strict semver (three
/// parts, no leading zeros) with an optional leading `v`. Helm itself would
/// coerce `1.2` to `1.2.0` when sorting the index, but Flux skips such
/// entries when matching a constraint, and the release is Flux's to make; an
/// entry like `1.2` can still be chosen by asking for exactly `1.2`.
fn index_version(s: &str) -> Option<Version> {
    Version::parse(s.strip_prefix('v').unwrap_or(s)).ok()
}

/// Resolve `wanted` (the spec's version string; empty or "*" = latest stable) against the index's
/// version strings for one chart; returns the index string chosen (exactly as written in the index).
///
/// Among entries of equal precedence (differing only in build metadata or a
/// leading `v`) the first in the index wins: Flux breaks that tie by the
/// entries' creation times, which are not passed here, and Helm writes an
/// index newest first.
pub fn resolve<'a>(
    wanted: &str,
    available: impl IntoIterator<Item = &'a str>,
) -> Result<&'a str, VersionError> {
    let available: Vec<&'a str> = available.into_iter().collect();
    if available.is_empty() {
        return Err(VersionError::NoVersions);
    }
    if !wanted.is_empty() {
        if let Some(exact) = available.iter().find(|candidate| **candidate == wanted) {
            return Ok(exact);
        }
    }
    let latest_stable = wanted.is_empty() || wanted == "*";
    let constraint = Constraint::parse(if latest_stable { "*" } else { wanted })?;

    let mut parsed: Vec<(&'a str, Version)> =
        available.iter().filter_map(|text| index_version(text).map(|v| (*text, v))).collect();
    if parsed.is_empty() {
        return Err(VersionError::NoValidVersions {
            listed: summarise(available.iter().copied()),
        });
    }
    let mut best: Option<&(&'a str, Version)> = None;
    for entry in parsed.iter().filter(|(_, v)| constraint.matches(v)) {
        if best.is_none_or(|(_, b)| entry.1.cmp_precedence(b) == Ordering::Greater) {
            best = Some(entry);
        }
    }
    if let Some((text, _)) = best {
        return Ok(text);
    }
    // Newest first, so a capped list shows what a user most likely wants.
    parsed.sort_by(|a, b| b.1.cmp_precedence(&a.1));
    let available = summarise(parsed.iter().map(|(text, _)| *text));
    Err(if latest_stable {
        VersionError::NoStableVersion { available }
    } else {
        VersionError::NoMatch {
            wanted: wanted.to_string(),
            available,
        }
    })
}

fn summarise<'a>(versions: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = versions.len();
    let mut out = versions.take(LISTED_VERSIONS).collect::<Vec<_>>().join(", ");
    if total > LISTED_VERSIONS {
        out.push_str(&format!(" and {} more", total - LISTED_VERSIONS));
    }
    out
}

#[cfg(test)]
mod tests;
