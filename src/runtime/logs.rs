//! Logs to stderr, as text or as JSON lines in the shape of Flux's
//! controllers, and the span each reconcile runs in.

/// Logs to stderr, as text for people or JSON for log pipelines; the level
/// comes from RUST_LOG (default `info`).
///
/// JSON lines have the keys Flux's controllers write (`level`, `ts`, `msg`,
/// `logger`, and, inside a reconcile, `controller`, `name`, `namespace`
/// and `reconcileID` at the top level, from the reconcile's span), so that
/// log queries written for Flux find this controller's lines too.
pub fn init_logs(json: bool) {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if json {
        let mut layer = json_subscriber::JsonLayer::stderr();
        layer
            .with_level("level")
            .with_timer("ts", tracing_subscriber::fmt::time::SystemTime)
            .with_target("logger")
            .with_flattened_event_with_renames(
                |name: &str, _: &()| match name {
                    "message" => "msg",
                    other => other,
                },
                (),
            );
        // Not the span list flattened: it would put each span's name under
        // `name` too, over the application's.
        layer.add_from_span("controller", |span| flux_keys(span).map(|k| k.controller));
        layer.add_from_span("name", |span| flux_keys(span).map(|k| k.name));
        layer.add_from_span("namespace", |span| flux_keys(span).map(|k| k.namespace));
        layer.add_from_span("reconcileID", |span| flux_keys(span).map(|k| k.reconcile_id));
        tracing_subscriber::registry().with(filter).with(FluxKeysLayer).with(layer).init();
    } else {
        tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).init();
    }
}

/// The keys Flux's controllers log for a reconcile, kept on the span of
/// one ([`reconcile_span`]) for the JSON lines logged inside it.
#[derive(Debug, Clone, Default)]
struct FluxKeys {
    controller: String,
    name: String,
    namespace: String,
    reconcile_id: String,
}

impl tracing::field::Visit for FluxKeys {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let slot = match field.name() {
            "controller" => &mut self.controller,
            "name" => &mut self.name,
            "namespace" => &mut self.namespace,
            "reconcileID" => &mut self.reconcile_id,
            _ => return,
        };
        *slot = value.to_string();
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here, their Debug being their Display.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// Records a reconcile span's Flux keys on it.
struct FluxKeysLayer;

impl<S> tracing_subscriber::Layer<S> for FluxKeysLayer
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() != RECONCILE_SPAN {
            return;
        }
        let mut keys = FluxKeys::default();
        attrs.record(&mut keys);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(keys);
        }
    }
}

/// The Flux keys of the reconcile a log line is logged in, if any.
fn flux_keys<S>(span: &tracing_subscriber::registry::SpanRef<'_, S>) -> Option<FluxKeys>
where
    S: for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    span.scope().find_map(|s| s.extensions().get::<FluxKeys>().cloned())
}

const RECONCILE_SPAN: &str = "reconcile";

/// The span of one reconcile, with the fields Flux's controllers log:
/// every line logged inside it carries them.
pub fn reconcile_span(namespace: &str, name: &str) -> tracing::Span {
    let id = uuid::Uuid::new_v4();
    tracing::info_span!(
        RECONCILE_SPAN,
        controller = "nodepoolapplication",
        controllerGroup = "apps.fanout.dev",
        controllerKind = "NodePoolApplication",
        name = %name,
        namespace = %namespace,
        reconcileID = %id,
    )
}
