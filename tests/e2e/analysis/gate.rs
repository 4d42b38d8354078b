//! A webhook gate of the test's own on the loopback: it answers the status
//! the test sets, and keeps what it was sent.

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde_json::Value;

type State = Arc<Mutex<(u16, Vec<Value>)>>;

pub struct Gate {
    pub url: String,
    state: State,
    server: tokio::task::JoinHandle<()>,
}

impl Gate {
    /// A gate that answers `status` until told otherwise.
    pub async fn start(status: u16) -> Self {
        let state: State = Arc::new(Mutex::new((status, Vec::new())));
        let seen = state.clone();
        let router = Router::new().route(
            "/gate",
            post(move |body: String| {
                let seen = seen.clone();
                async move {
                    let mut s = seen.lock().expect("the gate's state");
                    s.1.push(serde_json::from_str(&body).unwrap_or(Value::Null));
                    let code = StatusCode::from_u16(s.0).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                    (code, "change freeze until the test says so")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}/gate", listener.local_addr().expect("its address"));
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("the gate serves");
        });
        Self { url, state, server }
    }

    /// From now on, the gate answers `status`.
    pub fn answer(&self, status: u16) {
        self.state.lock().expect("the gate's state").0 = status;
    }

    /// What the gate was sent so far.
    pub fn sent(&self) -> Vec<Value> {
        self.state.lock().expect("the gate's state").1.clone()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.server.abort();
    }
}
