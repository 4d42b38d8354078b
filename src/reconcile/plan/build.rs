//! Each selected pool's release, built once: its name checked against the
//! HelmReleases beside it, its values rendered, its spec hash and any hand
//! edit found, the Helm release it would drive checked against the others'.
//! What comes out is each pool's candidate, before the rollout, the chart
//! and suspension have their say.

use std::sync::Arc;

use crate::api::naming;
use crate::pools::Pool;
use crate::reconcile::drift;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::release::build::{self, AppInfo, BuiltRelease, FieldError};
use crate::values::template::Renderer;

use super::guards::{
    fail_duplicate_release_names, fail_one_cluster_twice, helm_release_taken, helm_release_taken_message,
};
use super::memo::{self, Made, Memo};
use super::{DesiredRelease, HelmReleaseKey, Manifest, ObservedRelease, Outcome, Owned, PlanInput};

/// One selected pool, before the rollout, the chart and suspension have
/// their say.
pub(super) struct Candidate<'a> {
    pub pool: &'a Pool,
    /// Its HelmRelease's object name.
    pub release: String,
    pub kind: Kind,
}

pub(super) enum Kind {
    /// Refused before any write: its name or Helm release is taken, or its
    /// config fails ([`Outcome::Conflict`], [`Outcome::HelmReleaseTaken`],
    /// [`Outcome::Failed`]). Its release, if any, is left alone.
    Refused(Outcome),
    /// Its release already holds this spec.
    Unchanged,
    /// Its release differs from what was built, or it has none.
    Differs(Change),
}

/// A release that differs from what was built: the write, but for its
/// time, which only the rollout's decision gives.
pub(super) struct Change {
    name: String,
    manifest: Manifest,
    spec_hash: String,
    drift: Option<String>,
    resumed: bool,
    claim: Option<HelmReleaseKey>,
    drove: Option<HelmReleaseKey>,
    lift_inert: bool,
    /// See [`DesiredRelease::moves`].
    moves: bool,
    /// See [`DesiredRelease::decided_on`].
    decided_on: Option<String>,
    /// What is written is suspended (`spec.suspend: true`, the template's
    /// or an override's): Helm does nothing with it.
    suspends: bool,
}

impl Change {
    /// See [`Change::suspends`].
    pub(super) fn suspends(&self) -> bool {
        self.suspends
    }

    /// See [`DesiredRelease::restores`]. Waking an inert release puts back
    /// what it holds only when it holds this spec: one that is behind is
    /// moved to the revision, and takes its turn like any other.
    pub(super) fn restores(&self) -> bool {
        self.drift.is_some() || self.resumed || (self.lift_inert && !self.moves)
    }

    pub(super) fn resumed(&self) -> bool {
        self.resumed
    }

    /// Whether the write puts back the release's own last write (a hand
    /// edit undone, a release resumed, an inert release woken), which
    /// keeps that write's time: its soak and the proof that it left its
    /// site up count from it. A resume's progress deadline runs again from
    /// the resume (see [`naming::ANNOTATION_RESUMED_AT`]).
    pub(super) fn keeps_its_time(&self) -> bool {
        self.drift.is_some() || self.resumed || (self.lift_inert && !self.moves)
    }

    pub(super) fn into_write(
        self,
        pool: String,
        (written_at, resumed_at): (String, Option<String>),
        stamps: super::Stamps,
    ) -> DesiredRelease {
        DesiredRelease {
            stamps,
            name: self.name,
            pool,
            manifest: self.manifest,
            written_at,
            resumed_at,
            spec_hash: self.spec_hash,
            drift: self.drift,
            resumed: self.resumed,
            claim: self.claim,
            drove: self.drove,
            lift_inert: self.lift_inert,
            moves: self.moves,
            decided_on: self.decided_on,
        }
    }
}

/// Every selected pool's candidate, sorted by pool name.
pub(super) struct Candidates<'a> {
    pub pools: Vec<Candidate<'a>>,
    /// Releases to make inert, with why (see `Plan::inert`).
    pub inert: Vec<(String, String)>,
    /// The pools whose release needed no write, for the next plan.
    pub memo: Memo,
}

/// Every selected pool's candidate; or, when the releases pass the
/// application's budget together, why it is refused whole.
pub(super) fn candidates<'a>(
    input: &PlanInput,
    app: &AppInfo,
    owned: &Owned,
    selected: &[&'a Pool],
) -> Result<Candidates<'a>, String> {
    let renderer = Renderer::new();
    let app_inputs = memo::app_inputs(app);
    let mut found = Memo::with_capacity(app_inputs, selected.len());
    // In the order of `selected`, which is the pools' name order: kept in
    // vectors and merged by position, not sorted by name again.
    let mut built: Vec<(usize, &Pool, Result<Built, FieldError>)> = Vec::with_capacity(selected.len());
    let mut conflicts = Vec::new();
    let mut total = 0usize;
    for (count, pool) in selected.iter().copied().enumerate() {
        let known = input.memo.and_then(|m| m.name_of(app_inputs, pool));
        let name = known.map_or_else(|| naming::release_name(app.name, &pool.name), |k| k.name.clone());
        let observed = owned.get(name.as_str()).copied();
        // A name one of its own releases holds, no other release holds:
        // only a pool with none is looked up among the others.
        if observed.is_none() && input.others.named(&name) {
            let release = name.clone();
            conflicts.push((
                count,
                Candidate {
                    pool,
                    release,
                    kind: Kind::Refused(Outcome::Conflict { name }),
                },
            ));
            continue;
        }
        let inputs = memo::pool_inputs(pool);
        let recalled = known.filter(|k| k.holds(inputs, observed));
        let result = match (recalled, observed) {
            (Some(known), Some(observed)) => {
                found.keep(pool, known.clone());
                Ok(Built::recalled(name, known, observed))
            }
            _ => {
                let written = observed.and_then(|o| o.spec_hash.as_deref());
                let built = build::release(app, pool, &renderer, written).map(|b| Built::new(b, observed));
                if let (Ok(b), Some(observed)) = (&built, observed) {
                    if let Some(unchanged) = b.found() {
                        found.remember(pool, inputs, observed, unchanged);
                    }
                }
                built
            }
        };
        total += result.as_ref().map_or(0, |b| b.made.size);
        if total > build::MAX_APPLICATION_BYTES {
            return Err(too_large(count + 1, selected.len()));
        }
        built.push((count, pool, result));
    }
    fail_duplicate_release_names(&mut built);
    fail_one_cluster_twice(&mut built);
    let mut inert = Vec::new();
    let mut candidates: Vec<(usize, Candidate)> = Vec::with_capacity(selected.len());
    for (count, pool, result) in built {
        let (release, kind) = match result {
            Err(FieldError { field, message }) => {
                let release = naming::release_name(app.name, &pool.name);
                (release, Kind::Refused(Outcome::Failed { field, message }))
            }
            Ok(b) => match helm_release_taken(input, owned, pool, &b) {
                Some(taken) => {
                    // Its own release, if it drives that Helm release, would
                    // fight the other's installs (an upgrade of
                    // helm-controller's alternates between the two): it
                    // drives nothing from now on.
                    if owned.get(b.name.as_str()).is_some_and(|o| {
                        !o.inert && o.helm_release.is_some() && o.helm_release == b.made.helm_release
                    }) {
                        inert.push((b.name.clone(), helm_release_taken_message(&taken)));
                    }
                    (b.name, Kind::Refused(taken))
                }
                None => b.into_candidate(),
            },
        };
        candidates.push((count, Candidate { pool, release, kind }));
    }
    if !conflicts.is_empty() {
        candidates.extend(conflicts);
        candidates.sort_by_key(|(count, _)| *count);
    }
    Ok(Candidates {
        pools: candidates.into_iter().map(|(_, c)| c).collect(),
        inert,
        memo: found,
    })
}

/// One pool's release as built, read for what planning needs while its
/// parsed form is at hand, then kept as text.
pub(super) struct Built {
    pub(super) name: String,
    /// What it is, as planning reads it; shared with the memo.
    pub(super) made: Arc<Made>,
    /// What to write; `None` when the release holds it already (its spec
    /// hash, and no field of ours edited): a resync of thousands of pools
    /// then keeps no manifest, where it used to keep all of them until the
    /// last pool was built.
    pub(super) object: Option<Manifest>,
    /// The first field the existing release no longer holds, if the
    /// release carries this very spec hash.
    pub(super) drift: Option<String>,
    /// What the existing release drives, when it drives another.
    pub(super) drove: Option<HelmReleaseKey>,
    /// The existing release drives nothing (see `ANNOTATION_INERT`).
    pub(super) inert: bool,
    /// Whether a claim is made before the write.
    pub(super) claims: bool,
    /// Carries this spec hash, and was suspended with the application.
    pub(super) resumed: bool,
    /// Carries another spec hash, or there is no release yet.
    pub(super) moves: bool,
    /// The observed release's `resourceVersion`, when it `moves`.
    pub(super) decided_on: Option<String>,
    /// What was built is suspended (see [`Change::suspends`]).
    pub(super) suspends: bool,
}

impl Built {
    /// Its release's name, and unchanged when the release holds it
    /// already, else the change.
    pub(super) fn into_candidate(self) -> (String, Kind) {
        match self.object {
            None => (self.name, Kind::Unchanged),
            Some(manifest) => (
                self.name.clone(),
                Kind::Differs(Change {
                    name: self.name,
                    manifest,
                    spec_hash: self.made.spec_hash.clone(),
                    drift: self.drift,
                    resumed: self.resumed,
                    claim: self.made.helm_release.clone().filter(|_| self.claims),
                    drove: self.drove,
                    lift_inert: self.inert,
                    moves: self.moves,
                    decided_on: self.decided_on,
                    suspends: self.suspends,
                }),
            ),
        }
    }

    pub(super) fn new(built: BuiltRelease, observed: Option<&ObservedRelease>) -> Self {
        let drift = observed
            .filter(|o| o.spec_hash.as_deref() == Some(built.spec_hash.as_str()))
            .and_then(|o| o.live.as_ref())
            .and_then(PackedJson::value)
            .and_then(|live| drift::first_difference(&built.object, &live));
        // Resumed, a release gets our spec again whole: suspending may have
        // taken `spec.suspend` from us (an override's), and resuming drops it.
        let same_hash = observed.filter(|o| !o.suspended_with_app).and_then(|o| o.spec_hash.as_deref())
            == Some(built.spec_hash.as_str());
        let resumed = observed.is_some_and(|o| {
            o.suspended_with_app && o.spec_hash.as_deref() == Some(built.spec_hash.as_str())
        });
        let helm_release = naming::helm_release_of(&built.object);
        let inert = observed.is_some_and(|o| o.inert);
        let drove = observed
            .and_then(|o| o.helm_release.clone())
            .filter(|d| Some(d) != helm_release.as_ref());
        let moves = observed.and_then(|o| o.spec_hash.as_deref()) != Some(built.spec_hash.as_str());
        let suspends = built.object.pointer("/spec/suspend") == Some(&serde_json::Value::Bool(true));
        Self {
            resumed,
            moves,
            // Cloned only for a release that moves: at rest, none does.
            decided_on: observed.filter(|_| moves).and_then(|o| o.resource_version.clone()),
            suspends,
            claims: observed.is_none() || drove.is_some() || inert,
            drove,
            inert,
            object: (!same_hash || drift.is_some() || inert).then(|| Manifest::new(&built.object)),
            name: built.name,
            made: Arc::new(Made {
                release_name: built.release_name,
                spec_hash: built.spec_hash,
                helm_release,
                size: built.size,
            }),
            drift,
        }
    }

    /// What [`Built::new`] makes of the release `observed` when it holds
    /// what `known` says was built for its pool, with no drift: the memo's
    /// promise, since neither the inputs nor the object changed.
    pub(super) fn recalled(name: String, known: &memo::Remembered, observed: &ObservedRelease) -> Self {
        let drove = observed
            .helm_release
            .as_ref()
            .filter(|d| Some(*d) != known.made.helm_release.as_ref())
            .cloned();
        Self {
            resumed: false,
            moves: false,
            decided_on: None,
            suspends: false,
            claims: drove.is_some(),
            drove,
            inert: false,
            object: None,
            name,
            made: Arc::clone(&known.made),
            drift: None,
        }
    }

    /// What the memo keeps of it: only a release that needs no write.
    fn found(&self) -> Option<Arc<Made>> {
        let plain = self.object.is_none() && self.drift.is_none() && !self.inert && !self.resumed;
        plain.then(|| Arc::clone(&self.made))
    }
}

/// Why an application whose releases pass its budget is refused whole:
/// the first `built` of `selected` pools passed it.
fn too_large(built: usize, selected: usize) -> String {
    format!(
        "the HelmReleases of this application pass {} MiB together (the first {built} of its \
         {selected} pools did), the most one application may hold; nothing is written or pruned \
         until they fit: render less per pool (values shared by every pool belong in the chart's \
         values.yaml or a valuesFrom ConfigMap), or split the pools between applications",
        build::MAX_APPLICATION_BYTES / (1024 * 1024)
    )
}

pub(super) fn app_info<'a>(input: &PlanInput<'a>, requests: &'a [(&'a str, &'a str)]) -> AppInfo<'a> {
    let app = input.app;
    AppInfo {
        requests,
        name: app.metadata.name.as_deref().unwrap_or_default(),
        namespace: app.metadata.namespace.as_deref().unwrap_or_default(),
        uid: app.metadata.uid.as_deref(),
        spec: &app.spec,
        chart_ref: input.chart_ref,
        chart: input.chart,
        shard: app
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(naming::LABEL_SHARD))
            .map(String::as_str),
    }
}

/// The application's part of every pool's inputs ([`memo::app_inputs`])
/// of `app` with no chart and no requests, for tests.
#[cfg(test)]
pub(super) fn app_info_for_tests(app: &crate::api::NodePoolApplication) -> u64 {
    let requests = super::requests(app);
    let others = super::ListedReleases::default();
    let input = PlanInput {
        app,
        pools: &[],
        nodes: None,
        owned: Vec::new(),
        others: &others,
        now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref: None,
        chart: None,
        hold: None,
        unserved: None,
        clock_since: None,
        history: None,
        memo: None,
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    };
    memo::app_inputs(&app_info(&input, &requests))
}
