//! Mounting the push sources. Each cloud crate owns its push protocol (config,
//! authentication, handshakes, handler: `driftreactor_gcp::push_endpoint`,
//! `driftreactor_azure::push_endpoint`); the service builds them from `[[sources]]`,
//! mounts each [`PushEndpoint::handler`] at its path, and gives them a
//! [`PushHost`]: the hand-off into the pipeline channel, the push timeout and the
//! metrics of refused and unparseable pushes.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use driftreactor_event::Provider;
use driftreactor_source::SourceMessage;
use driftreactor_source::push::{BoxFuture, PushEndpoint, PushHost};

use crate::ServeError;
use crate::config::SourceSpec;
use crate::metrics::{SourceLabels, SourceProviderLabels};
use crate::state::AppState;
use crate::worker::Envelope;

/// The endpoint of a push `[[sources]]` entry at `field`; `None` for a pull source.
pub(crate) fn build(
    spec: &SourceSpec,
    field: &str,
) -> Option<Result<Arc<dyn PushEndpoint>, ServeError>> {
    let built: Result<Arc<dyn PushEndpoint>, _> = match spec {
        SourceSpec::GcpPush(c) => {
            driftreactor_gcp::push_endpoint::GcpPush::build(c, field).map(|p| Arc::new(p) as _)
        }
        SourceSpec::AzurePush(c) => {
            driftreactor_azure::push_endpoint::AzurePush::build(c, field).map(|p| Arc::new(p) as _)
        }
        SourceSpec::Pull { .. } => return None,
    };
    Some(built.map_err(ServeError::from))
}

/// The service's side of a mounted push endpoint.
struct Host(AppState);

impl PushHost for Host {
    fn submit(&self, source: Arc<str>, msg: SourceMessage) -> BoxFuture<'_, bool> {
        Box::pin(async move { self.0.tx.send(Envelope { source, msg }).await.is_ok() })
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.0.ctx.server.push_timeout_secs.max(1))
    }

    fn body_read_timeout(&self) -> Duration {
        Duration::from_secs(self.0.ctx.server.body_read_timeout_secs.max(1))
    }

    fn redact_reason(&self, reason: &str) -> String {
        crate::worker::excerpt(&self.0.ctx.redactor, reason)
    }

    fn count_unauthorized(&self, source: &str) {
        self.0
            .ctx
            .metrics
            .unauthorized
            .get_or_create(&SourceLabels::new(source))
            .inc();
    }

    fn count_unparsed(&self, source: &str, provider: Provider) {
        let m = &self.0.ctx.metrics;
        m.received
            .get_or_create(&SourceProviderLabels::new(source, provider))
            .inc();
        m.rejected.get_or_create(&SourceLabels::new(source)).inc();
    }
}

/// Mounts every endpoint of `pushes` on `r` (whose state is already given).
pub(crate) fn mount(mut r: Router, state: &AppState, pushes: Vec<Arc<dyn PushEndpoint>>) -> Router {
    let host: Arc<dyn PushHost> = Arc::new(Host(state.clone()));
    for p in pushes {
        let path = p.path().to_owned();
        r = r.route(&path, p.handler(host.clone()));
    }
    r
}
