//! The console's pages, as HTML. Every value is escaped by maud; the
//! pages carry no inline script or style, so the content security policy
//! can forbid both.

use maud::{html, Markup, DOCTYPE};

use super::view::{AppView, CellState, Filter, PoolDetail, PoolView};
use super::Controls;
use crate::api::RolloutPhase;

/// What a page says beyond the fleet: the reader's controls (none when
/// read-only), what the reader's last action did, and the page's own
/// query (the grid's grouping and filters), kept across an action.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub controls: Option<Controls>,
    pub notice: Option<String>,
    pub query: String,
}

fn page(title: &str, controls: Option<&Controls>, body: Markup) -> Markup {
    page_of_app(None, title, controls, body)
}

/// A page; one of an application (`namespace/name`) says so, and follows
/// only that application's changes (`console.js`).
fn page_of_app(app: Option<&str>, title: &str, controls: Option<&Controls>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · nodepool-fanout" }
                link rel="stylesheet" href="/static/console.css";
                script src="/static/console.js" defer {}
            }
            body data-app=[app] {
                header {
                    a href="/" { "nodepool-fanout" } " "
                    @match controls {
                        Some(c) => span.who { "acting as " strong.user { (c.user) } },
                        None => span.readonly { "read-only" },
                    }
                    @if let Some(c) = controls.filter(|c| c.sign_out) {
                        " "
                        form.sign-out method="post" action="/auth/sign-out" {
                            input type="hidden" name="csrf" value=(c.token);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The path of an application's page.
pub fn app_path(namespace: &str, name: &str) -> String {
    format!("/apps/{}/{}", urlencode(namespace), urlencode(name))
}

/// The path of a pool's page.
pub fn pool_path(namespace: &str, name: &str, pool: &str) -> String {
    format!("{}/pools/{}", app_path(namespace, name), urlencode(pool))
}

fn app_href(app: &AppView) -> String {
    app_path(&app.namespace, &app.name)
}

/// A form that posts one action, with the reader's CSRF token and the
/// page's query to come back to.
fn action(page: &Page, controls: &Controls, path: &str, word: &str, label: &str) -> Markup {
    html! {
        form.action method="post" action=(format!("{path}/actions/{word}")) {
            input type="hidden" name="csrf" value=(controls.token);
            input type="hidden" name="back" value=(page.query);
            button type="submit" data-action=(word) { (label) }
        }
    }
}

fn notice(page: &Page) -> Markup {
    html! { @if let Some(n) = &page.notice { p.notice role="status" { (n) } } }
}

fn urlencode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Every application, one row each.
pub fn landing(apps: &[AppView], controls: Option<&Controls>) -> Markup {
    let body = html! {
        h1 { "Applications" }
        @if controls.is_some() { p.new { a href="/new" { "New application" } } }
        @if apps.is_empty() {
            p.empty { "No NodePoolApplication is visible to you." }
        } @else {
            table.apps data-live="apps" {
                thead { tr {
                    th { "Namespace" } th { "Name" } th { "Chart" } th { "Version" }
                    th { "Ready" } th { "Rollout" } th { "Status" }
                } }
                tbody {
                    @for app in apps {
                        tr data-app=(format!("{}/{}", app.namespace, app.name)) {
                            td { (app.namespace) }
                            td { a href=(app_href(app)) { (app.name) } }
                            td { (app.chart) }
                            td { (app.versions) }
                            td.ready { (app.ready) }
                            td.progress { (app.progress) @if app.suspended { " (suspended)" } }
                            td.message { (app.message) }
                        }
                    }
                }
            }
        }
    };
    page("Applications", controls, body)
}

/// One application: its rollout, the counts, the filter, and every pool as
/// a cell of the grid.
pub fn application(app: &AppView, filter: &Filter, page_of: &Page) -> Markup {
    let groups = filter.groups(app);
    let shown: usize = groups.iter().map(|(_, pools)| pools.len()).sum();
    let body = html! {
        h1 { (app.namespace) " / " (app.name) }
        (notice(page_of))
        @if let Some(controls) = &page_of.controls { (app_actions(app, page_of, controls)) }
        div data-live="summary" {
        dl.summary {
            dt { "Chart" } dd { (app.chart) " " (app.versions) }
            dt { "Ready" } dd.ready { (app.ready) }
            dt { "Rollout" } dd.progress { (app.progress) }
            @if !app.revision.is_empty() { dt { "Revision" } dd.revision { (app.revision) } }
            @if let Some(wave) = &app.wave { dt { "Wave" } dd.wave { (wave) } }
        }
        p.message { (app.message) }
        ul.counts {
            @for (state, n) in app.counts() {
                li class=(class_of(state)) { span.symbol aria-hidden="true" { (state.symbol()) } " " (state.word()) " " strong { (n) } }
            }
        }
        }
        (filter_form(app, filter))
        div data-live="grid" {
        p.shown { (shown) " of " (app.pools.len()) " pools" }
        div.groups {
            @for (group, pools) in &groups {
                section.group {
                    @if filter.group.is_some() { h2 { (group) " " span.count { "(" (pools.len()) ")" } } }
                    ul.grid {
                        @for pool in pools { (cell(app, pool)) }
                    }
                }
            }
        }
        }
    };
    let key = format!("{}/{}", app.namespace, app.name);
    page_of_app(Some(&key), &key, page_of.controls.as_ref(), body)
}

/// The application's actions: pause or resume, reconcile, and approve
/// when a wave awaits approval.
fn app_actions(app: &AppView, page: &Page, controls: &Controls) -> Markup {
    let path = app_href(app);
    html! {
        div.actions {
            @if app.paused { (action(page, controls, &path, "resume", "Resume rollout")) }
            @else { (action(page, controls, &path, "pause", "Pause rollout")) }
            (action(page, controls, &path, "reconcile", "Reconcile now"))
            @if app.phase == Some(RolloutPhase::AwaitingApproval) { (action(page, controls, &path, "approve", "Approve wave")) }
            a.edit href=(format!("{path}/edit")) { "Edit" } " "
            a.delete href=(format!("{path}/delete")) { "Delete" }
        }
    }
}

/// The form's text fields: name, label, an example.
const FIELDS: [(&str, &str, &str); 9] = [
    ("name", "Name", "ingress"),
    ("namespace", "Namespace", "edge"),
    ("chart", "Chart", "ingress-gateway"),
    ("version", "Version", "1.0.0"),
    ("source_kind", "Source kind", "HelmRepository"),
    ("source_name", "Source name", "charts"),
    ("source_namespace", "Source namespace", "flux-system"),
    ("pool_kind", "Pool kind", "OpenYurt, KubeEdge, SuperEdge, NodeLabel or ClusterProfile"),
    ("selector", "Pools with the labels", "region=east, tier=edge"),
];

/// The YAML editor of a new or an existing application, with what a
/// preview found.
pub fn editor(editor: &super::editor::Editor, controls: &Controls) -> Markup {
    let body = html! {
        h1 { (editor.title) }
        p { "Preview shows what each pool's HelmRelease would be, over the pools the cluster holds now. \
             Copy the YAML to Git (the way we recommend: Flux then applies it), or apply it as "
            strong { (controls.user) } "." }
        @if let Some(error) = &editor.error { p.error role="alert" { (error) } }
        details.fields {
            summary { "Start from a form" }
            form.fields method="post" action="/editor/form" {
                input type="hidden" name="csrf" value=(controls.token);
                @for (name, label, hint) in FIELDS {
                    label { (label) " " input type="text" name=(name) placeholder=(hint); }
                }
                label { "Values (YAML) " textarea name="values" rows="6" cols="60" placeholder="controller: { replicas: 2 }" {} }
                label { "Per-pool overrides (YAML) " textarea name="overrides" rows="6" cols="60"
                    placeholder="- { pools: { names: [hangzhou] }, values: { controller: { replicas: 3 } } }" {} }
                button type="submit" data-action="compose" { "To YAML and preview" }
            }
        }
        form.editor method="post" action="/editor" {
            input type="hidden" name="csrf" value=(controls.token);
            textarea id="yaml" name="yaml" rows="30" cols="100" spellcheck="false" { (editor.yaml) }
            div id="selected" data-selected-pools="/editor/pools" { p.hint { "The pools it selects show here as you type." } }
            div.actions {
                button type="submit" name="action" value="preview" data-action="preview" { "Preview" }
                button type="submit" name="action" value="apply" data-action="apply" { "Apply" }
                button type="button" data-copy="yaml" { "Copy YAML" }
            }
        }
        @if let Some(preview) = &editor.preview {
            section.preview {
                h2 { "Preview: " (preview.pools.len()) " pools" }
                @if !preview.errors.is_empty() { ul.errors { @for e in &preview.errors { li.error { (e) } } } }
                @if !preview.warnings.is_empty() { ul.warnings { @for w in &preview.warnings { li { (w) } } } }
                @if !preview.pools.is_empty() {
                    table.pools { thead { tr { th { "Pool" } th { "HelmRelease" } } } tbody {
                        @for (pool, release, _) in &preview.pools { tr data-pool=(pool) { td { (pool) } td { code { (release) } } } }
                    } }
                    @for (pool, release, yaml) in &preview.pools {
                        @if let Some(yaml) = yaml {
                            details { summary { (pool) ": " (release) } pre { code { (yaml) } } }
                        }
                    }
                }
            }
        }
    };
    page(&editor.title, Some(controls), body)
}

/// The pools an application being edited would select now, or why that
/// cannot be told.
pub fn selected_pools(selected: &Result<Vec<String>, String>) -> Markup {
    html! {
        div id="selected" data-selected-pools="/editor/pools" {
            @match selected {
                Ok(pools) if pools.is_empty() => p.warning { "It selects no pool the cluster holds now." }
                Ok(pools) => {
                    p { "It selects " (pools.len()) " pools now: " }
                    ul.selected { @for pool in pools.iter().take(50) { li data-pool=(pool) { (pool) } } }
                    @if pools.len() > 50 { p { "and " (pools.len() - 50) " more." } }
                }
                Err(why) => p.error { (why) }
            }
        }
    }
}

/// The question before a delete: the name typed, and what the
/// application's `deletionPolicy` does.
pub fn delete_confirm(namespace: &str, name: &str, policy: &str, controls: &Controls) -> Markup {
    let path = app_path(namespace, name);
    let body = html! {
        h1 { "Delete " (namespace) "/" (name) "?" }
        p { (policy) }
        form.delete method="post" action=(format!("{path}/delete")) {
            input type="hidden" name="csrf" value=(controls.token);
            label { "Type " code { (name) } " to delete it: " input id="confirm" type="text" name="confirm" autocomplete="off"; }
            button type="submit" data-action="delete" { "Delete" }
        }
        p { a href=(path) { "Back" } }
    };
    page(&format!("Delete {namespace}/{name}"), Some(controls), body)
}

/// What was done, with a way back.
pub fn done(what: &str) -> Markup {
    page(
        "Done",
        None,
        html! { h1 { "Done" } p.notice role="status" { (what) } p { a href="/" { "All applications" } } },
    )
}

fn class_of(state: CellState) -> String {
    format!("state-{}", state.word().to_lowercase())
}

fn cell(app: &AppView, pool: &PoolView) -> Markup {
    let href = format!("{}/pools/{}", app_href(app), urlencode(&pool.row.pool));
    // The message is on the pool's page: in every cell it would double
    // the page of a large fleet.
    let title = format!("{}: {} {}", pool.row.pool, pool.state.word(), pool.row.reason);
    html! {
        li class=(format!("cell {}", class_of(pool.state))) data-pool=(pool.row.pool) data-state=(pool.state.word()) {
            a href=(href) title=(title) {
                span.symbol aria-hidden="true" { (pool.state.symbol()) }
                span.name { (pool.row.pool) }
                span.state { (pool.state.word()) }
            }
        }
    }
}

fn filter_form(app: &AppView, filter: &Filter) -> Markup {
    html! {
        form.filter method="get" action=(app_href(app)) {
            label { "Group by "
                select name="group" {
                    option value="" selected[filter.group.is_none()] { "(none)" }
                    @for key in app.label_keys() {
                        option value=(key) selected[filter.group.as_deref() == Some(key)] { (key) }
                    }
                }
            }
            label { " State "
                select name="state" {
                    option value="" selected[filter.state.is_none()] { "(any)" }
                    @for state in CellState::ALL {
                        option value=(state.word()) selected[filter.state == Some(state)] { (state.word()) }
                    }
                }
            }
            label { " Text " input type="search" name="q" value=(filter.text.clone().unwrap_or_default()); }
            " " button type="submit" { "Filter" }
        }
    }
}

/// One pool: its release as Flux reports it, its nodes and labels.
pub fn pool(app: &AppView, pool: &PoolView, detail: &PoolDetail, page_of: &Page) -> Markup {
    let row = &pool.row;
    let path = pool_path(&app.namespace, &app.name, &row.pool);
    let body = html! {
        p { a href=(app_href(app)) { "← " (app.namespace) " / " (app.name) } }
        (notice(page_of))
        @if let Some(controls) = page_of.controls.as_ref().filter(|_| !row.release.is_empty()) {
            div.actions {
                @if row.suspended { (action(page_of, controls, &path, "resume-pool", "Resume pool")) }
                @else { (action(page_of, controls, &path, "suspend", "Suspend pool")) }
            }
        }
        div data-live="pool" {
        h1 { (row.pool) " " span class=(class_of(pool.state)) { span.symbol aria-hidden="true" { (pool.state.symbol()) } " " (pool.state.word()) } }
        dl.summary {
            dt { "Nodes ready" } dd.nodes { (row.nodes) }
            @if let Some(since) = &row.down_since { dt { "Down since" } dd.down { (since) } }
            dt { "HelmRelease" } dd.release { @if row.release.is_empty() { "none" } @else { (row.namespace) "/" (row.release) } }
            dt { "Flux state" } dd.flux { (row.state) " " (row.reason) }
            dt { "Rollout" } dd.rollout { (pool.row.rollout.clone().unwrap_or_else(|| "-".to_string())) }
            dt { "Chart version" } dd { (row.chart_version) }
            dt { "Helm revision" } dd { (row.revision.map(|r| r.to_string()).unwrap_or_else(|| "-".to_string())) }
            dt { "Suspended" } dd { (if row.suspended { "yes" } else { "no" }) }
        }
        h2 { "Message" }
        pre.message { (row.message) }
        @if !detail.conditions.is_empty() {
            h2 { "Conditions" }
            table.detail.conditions {
                thead { tr { th { "Type" } th { "Status" } th { "Reason" } th { "Since" } th { "Message" } } }
                tbody { @for c in &detail.conditions {
                    tr { td { (c.type_) } td { (c.status) } td { (c.reason) } td { (c.since) } td.message { (c.message) } }
                } }
            }
        }
        @if !detail.history.is_empty() {
            h2 { "Helm history" }
            table.detail.history {
                thead { tr { th { "Revision" } th { "Chart version" } th { "Status" } th { "Deployed" } } }
                tbody { @for h in &detail.history {
                    tr { td { (h.revision) } td { (h.chart_version) } td { (h.status) } td { (h.deployed) } }
                } }
            }
        }
        h2 { "Events" }
        @if detail.events.is_empty() { p { "none recorded" } } @else {
            table.detail.events {
                thead { tr { th { "Type" } th { "Reason" } th { "Last seen" } th { "Count" } th { "Message" } } }
                tbody { @for e in &detail.events {
                    tr { td { (e.type_) } td { (e.reason) } td { (e.last) } td { (e.count) } td.message { (e.message) } }
                } }
            }
        }
        h2 { "Labels" }
        @if pool.labels.is_empty() { p { "none" } } @else {
            ul.labels { @for (k, v) in &pool.labels { li { code { (k) "=" (v) } } } }
        }
        }
    };
    let key = format!("{}/{}", app.namespace, app.name);
    page_of_app(Some(&key), &format!("{} of {key}", row.pool), page_of.controls.as_ref(), body)
}

/// An action not done, and why.
pub fn refused(why: &str, back: &str) -> Markup {
    page(
        "Not done",
        None,
        html! { h1 { "Not done" } p.error { (why) } p { a href=(back) { "Back" } } },
    )
}

/// A page that says what is not there.
pub fn not_found(what: &str) -> Markup {
    page(
        "Not found",
        None,
        html! { h1 { "Not found" } p { (what) } p { a href="/" { "All applications" } } },
    )
}

/// The page of whoever is not signed in: nothing of the fleet.
pub fn signed_out(why: &str) -> Markup {
    page("Sign in", None, html! { h1 { "Sign in" } p.error { (why) } })
}

/// What a failed sign-in says, with a way to try again.
pub fn sign_in_failed(why: &str) -> Markup {
    page(
        "Sign-in failed",
        None,
        html! { h1 { "Sign-in failed" } p.error { (why) } p { a href="/auth/sign-in" { "Sign in again" } } },
    )
}

/// The page after signing out: nothing of the fleet, a way back in.
pub fn signed_out_done() -> Markup {
    page(
        "Signed out",
        None,
        html! { h1 { "Signed out" } p { a href="/auth/sign-in" { "Sign in again" } } },
    )
}

/// A page that says the cluster could not be read, and why.
pub fn unavailable(why: &str) -> Markup {
    page(
        "Cannot read the cluster",
        None,
        html! { h1 { "Cannot read the cluster" } p.error { (why) } },
    )
}
