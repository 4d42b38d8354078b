//! The action routes: the form checked as the console's own, the action
//! done as the user who sent it, and back to the page it came from.

use super::*;

/// An action's form: its CSRF token, and the query of the page it was
/// sent from.
#[derive(Debug, Deserialize)]
pub(super) struct ActionForm {
    csrf: String,
    #[serde(default)]
    back: String,
}

pub(super) async fn act_on_app(
    State(console): State<Console>,
    Path((namespace, name, action)): Path<(String, String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    let back = pages::app_path(&namespace, &name);
    let target = Target {
        namespace,
        name,
        pool: None,
    };
    act(&console, &headers, &form, &action, target, back).await
}

pub(super) async fn act_on_pool(
    State(console): State<Console>,
    Path((namespace, name, pool, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    let back = pages::pool_path(&namespace, &name, &pool);
    let viewer = match console.reader(&headers) {
        Ok(viewer) => viewer,
        Err(why) => return signed_out(&why),
    };
    let release = match console.find(&viewer, &namespace, &name).await {
        Ok(app) => app.pools.iter().find(|p| p.row.pool == pool).map(|p| p.row.release.clone()),
        Err(response) => return response,
    };
    let Some(release) = release else {
        let what = format!("{namespace}/{name} has no pool {pool}.");
        return (StatusCode::NOT_FOUND, html(pages::not_found(&what))).into_response();
    };
    let target = Target {
        namespace,
        name,
        pool: Some((pool, release)),
    };
    act(&console, &headers, &form, &action, target, back).await
}

/// Checks who asks and that the form is the console's own, does the
/// action, and sends the user back to the page with what was done.
async fn act(
    console: &Console,
    headers: &HeaderMap,
    form: &ActionForm,
    action: &str,
    target: Target,
    back: String,
) -> Response {
    let refuse = |status: StatusCode, why: &str| (status, html(pages::refused(why, &back))).into_response();
    let Some(steering) = &console.steering else {
        return refuse(StatusCode::NOT_FOUND, "This console is read-only.");
    };
    let Some(action) = Action::of_path(action) else {
        return refuse(StatusCode::NOT_FOUND, "No such action.");
    };
    if identity::cross_site(headers) {
        return refuse(StatusCode::FORBIDDEN, "Refused: the request came from another site.");
    }
    let actor: Actor = match steering.identity.actor(headers) {
        Ok(actor) => actor,
        Err(e @ identity::NoActor::NotSignedIn) => return refuse(StatusCode::UNAUTHORIZED, &e.to_string()),
        Err(e) => {
            tracing::warn!(error = %e, "a console action named a user the console never acts as");
            return refuse(StatusCode::FORBIDDEN, &e.to_string());
        }
    };
    if !steering.tokens.check(&actor, &form.csrf) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Refused: the form is stale or not the console's own. Reload the page.",
        );
    }
    match steering.actions.act(&actor, action, &target).await {
        Ok(done) => {
            tracing::info!(user = %actor.name, ?action, "{done}");
            // Back to the page as it was: its own path (never one the form
            // names), its grouping and filters, and what was done.
            let kept: PageQuery = serde_urlencoded::from_str(&form.back).unwrap_or_default();
            let notice = serde_urlencoded::to_string([("notice", done.as_str())]).unwrap_or_default();
            let query = [kept.kept(), notice]
                .into_iter()
                .filter(|q| !q.is_empty())
                .collect::<Vec<_>>()
                .join("&");
            Redirect::to(&format!("{back}?{query}")).into_response()
        }
        Err(e) => {
            let status = match &e {
                ActionError::Refused { .. } => StatusCode::FORBIDDEN,
                ActionError::HeldByGit { .. }
                | ActionError::HeldElsewhere { .. }
                | ActionError::NotNow(_) => StatusCode::CONFLICT,
                ActionError::Client { .. } | ActionError::Cluster(_) => StatusCode::BAD_GATEWAY,
            };
            tracing::info!(user = %actor.name, ?action, error = %e, "a console action was not done");
            refuse(status, &format!("Not done: {e}"))
        }
    }
}
