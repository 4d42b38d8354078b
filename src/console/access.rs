//! What each person may read. The console reads the fleet once, through
//! its own watch caches (one watch per kind, whoever looks: a watch per
//! user would cost the API server and the console as much again for each
//! user at 10,000 pools). Each person then sees only the namespaces their
//! own RBAC lets them list NodePoolApplications in, as the API server
//! answers a SubjectAccessReview for them; the answer is kept for
//! [`REMEMBERED`], so a page costs a look-up, not a review per load. A
//! namespace they may not read is the same page as one with nothing in
//! it: a 404 never tells them an application exists.
//!
//! An answer the API server could not give is a refusal, and is not kept.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::PostParams;
use kube::{Api, Client, Resource};

use super::identity::Impersonate;

/// How long an answer is kept: a grant or a revocation in RBAC shows
/// within this.
pub const REMEMBERED: Duration = Duration::from_secs(30);
/// The most answers kept (people × namespaces).
const KEPT: u64 = 100_000;

/// Whether a person may read a namespace's applications.
pub trait Access: Send + Sync + 'static {
    fn may_read<'a>(&'a self, who: &'a Impersonate, namespace: &'a str) -> BoxFuture<'a, bool>;
}

/// The API server's answers, through SubjectAccessReviews the console's
/// service account makes (it may `create` them, nothing more).
pub struct Reviews {
    client: Client,
    kept: moka::sync::Cache<(String, Vec<String>, String), bool>,
}

impl Reviews {
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(Self {
            client,
            kept: moka::sync::Cache::builder().max_capacity(KEPT).time_to_live(REMEMBERED).build(),
        })
    }

    async fn review(&self, who: &Impersonate, namespace: &str) -> bool {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(who.user.clone()),
                groups: Some(who.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_string()),
                    verb: Some("list".into()),
                    group: Some(crate::api::NodePoolApplication::group(&()).to_string()),
                    resource: Some("nodepoolapplications".into()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        match reviews.create(&PostParams::default(), &review).await {
            Ok(answered) => {
                let allowed = answered.status.is_some_and(|s| s.allowed);
                let key = (who.user.clone(), who.groups.clone(), namespace.to_string());
                self.kept.insert(key, allowed);
                allowed
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    user = %who.user,
                    namespace,
                    "cannot ask the API server what a console user may read (the console's service account \
                     needs create on subjectaccessreviews); refused"
                );
                false
            }
        }
    }
}

impl Access for Reviews {
    fn may_read<'a>(&'a self, who: &'a Impersonate, namespace: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let key = (who.user.clone(), who.groups.clone(), namespace.to_string());
            match self.kept.get(&key) {
                Some(allowed) => allowed,
                None => self.review(who, namespace).await,
            }
        })
    }
}
