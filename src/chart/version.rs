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

mod parse;
use parse::parse_group;

#[cfg(test)]
mod tests;
