//! The console's pages, as HTML. Every value is escaped by maud; the
//! pages carry no inline script or style, so the content security policy
//! can forbid both.

use maud::{html, Markup, DOCTYPE};

use super::view::{AppView, CellState, Filter, PoolView};

fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · nodepool-fanout" }
                link rel="stylesheet" href="/static/console.css";
            }
            body {
                header { a href="/" { "nodepool-fanout" } " " span.readonly { "read-only" } }
                main { (body) }
            }
        }
    }
}

fn app_href(app: &AppView) -> String {
    format!("/apps/{}/{}", urlencode(&app.namespace), urlencode(&app.name))
}

fn urlencode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Every application, one row each.
pub fn landing(apps: &[AppView]) -> Markup {
    let body = html! {
        h1 { "Applications" }
        @if apps.is_empty() {
            p.empty { "No NodePoolApplication is visible to you." }
        } @else {
            table.apps {
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
    page("Applications", body)
}

/// One application: its rollout, the counts, the filter, and every pool as
/// a cell of the grid.
pub fn application(app: &AppView, filter: &Filter) -> Markup {
    let groups = filter.groups(app);
    let shown: usize = groups.iter().map(|(_, pools)| pools.len()).sum();
    let body = html! {
        h1 { (app.namespace) " / " (app.name) }
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
        (filter_form(app, filter))
        p.shown { (shown) " of " (app.pools.len()) " pools" }
        @for (group, pools) in &groups {
            section.group {
                @if filter.group.is_some() { h2 { (group) " " span.count { "(" (pools.len()) ")" } } }
                ul.grid {
                    @for pool in pools { (cell(app, pool)) }
                }
            }
        }
    };
    page(&format!("{}/{}", app.namespace, app.name), body)
}

fn class_of(state: CellState) -> String {
    format!("state-{}", state.word().to_lowercase())
}

fn cell(app: &AppView, pool: &PoolView) -> Markup {
    let href = format!("{}/pools/{}", app_href(app), urlencode(&pool.row.pool));
    let title = format!("{}: {} {}", pool.row.pool, pool.state.word(), pool.row.message);
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
pub fn pool(app: &AppView, pool: &PoolView) -> Markup {
    let row = &pool.row;
    let body = html! {
        p { a href=(app_href(app)) { "← " (app.namespace) " / " (app.name) } }
        h1 { (row.pool) " " span class=(class_of(pool.state)) { span.symbol aria-hidden="true" { (pool.state.symbol()) } " " (pool.state.word()) } }
        dl.summary {
            dt { "Nodes ready" } dd.nodes { (row.nodes) }
            dt { "HelmRelease" } dd.release { @if row.release.is_empty() { "none" } @else { (row.namespace) "/" (row.release) } }
            dt { "Flux state" } dd.flux { (row.state) " " (row.reason) }
            dt { "Rollout" } dd.rollout { (pool.rollout.clone().unwrap_or_else(|| "-".to_string())) }
            dt { "Chart version" } dd { (row.chart_version) }
            dt { "Helm revision" } dd { (row.revision.map(|r| r.to_string()).unwrap_or_else(|| "-".to_string())) }
            dt { "Suspended" } dd { (if row.suspended { "yes" } else { "no" }) }
        }
        h2 { "Message" }
        pre.message { (row.message) }
        h2 { "Labels" }
        @if pool.labels.is_empty() { p { "none" } } @else {
            ul.labels { @for (k, v) in &pool.labels { li { code { (k) "=" (v) } } } }
        }
    };
    page(&format!("{} of {}/{}", row.pool, app.namespace, app.name), body)
}

/// A page that says what is not there.
pub fn not_found(what: &str) -> Markup {
    page(
        "Not found",
        html! { h1 { "Not found" } p { (what) } p { a href="/" { "All applications" } } },
    )
}

/// A page that says the cluster could not be read, and why.
pub fn unavailable(why: &str) -> Markup {
    page("Cannot read the cluster", html! { h1 { "Cannot read the cluster" } p.error { (why) } })
}
