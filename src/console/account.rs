//! The console's own sign-in: to the provider, back from it, and out.

use super::*;

#[derive(Debug, Deserialize)]
pub(super) struct SignInQuery {
    #[serde(default)]
    back: String,
}

fn signin(console: &Console) -> Option<&signin::SignIn> {
    match &console.steering.as_ref()?.identity {
        Identity::Oidc(signin) => Some(signin),
        _ => None,
    }
}

fn failed(e: &signin::SignInError) -> Response {
    tracing::warn!(error = %e, "a sign-in failed");
    let status = match e {
        signin::SignInError::Discovery { .. } | signin::SignInError::Exchange(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::FORBIDDEN,
    };
    (status, html(pages::sign_in_failed(&e.to_string()))).into_response()
}

/// To the provider, to come back to the page `back` names.
pub(super) async fn sign_in(
    State(console): State<Console>,
    Query(query): Query<SignInQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(signin) = signin(&console) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match signin.begin(&headers, &query.back).await {
        Ok((jar, to)) => (jar, Redirect::to(&to)).into_response(),
        Err(e) => failed(&e),
    }
}

/// Back from the provider: signed in, to the page the sign-in began on.
pub(super) async fn callback(
    State(console): State<Console>,
    Query(answer): Query<signin::Callback>,
    headers: HeaderMap,
) -> Response {
    let Some(signin) = signin(&console) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match signin.finish(&headers, &answer).await {
        Ok((jar, back, session)) => {
            tracing::info!(user = %session.user, groups = ?session.groups, "signed in");
            (jar, Redirect::to(&back)).into_response()
        }
        Err(e) => failed(&e),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct SignOutForm {
    csrf: String,
}

/// Signed out: the session cookie taken back. The form is the
/// console's own, as every action's.
pub(super) async fn sign_out(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> Response {
    let (Some(signin), Some(steering)) = (signin(&console), &console.steering) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if identity::cross_site(&headers) {
        return (
            StatusCode::FORBIDDEN,
            html(pages::refused("Refused: the request came from another site.", "/")),
        )
            .into_response();
    }
    if let Ok(actor) = steering.identity.actor(&headers) {
        if !steering.tokens.check(&actor, &form.csrf) {
            let why = "Refused: the form is stale or not the console's own. Reload the page.";
            return (StatusCode::FORBIDDEN, html(pages::refused(why, "/"))).into_response();
        }
        tracing::info!(user = %actor.name, "signed out");
    }
    (signin.sign_out(&headers), html(pages::signed_out_done())).into_response()
}
