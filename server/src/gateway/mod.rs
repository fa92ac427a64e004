//! The WebSocket gateway: `ws://HOST:PORT/ws`, one task per connection, and the reference web
//! page on the same port (`http://HOST:PORT/`).

mod connection;
mod dispatch;
mod http;
pub mod security;

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::hub::Hub;
use crate::orchestrator::Orchestrator;
pub use connection::ConnectionLimits;
pub use security::SecurityPolicy;

/// What every connection shares.
pub struct Gateway {
    pub orchestrator: Arc<Orchestrator>,
    pub hub: Hub,
    pub security: SecurityPolicy,
    pub limits: ConnectionLimits,
}

impl Gateway {
    /// Accepts connections until `shutdown` resolves.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let gateway = self.clone();
                        tokio::spawn(async move { http::route(gateway, stream, peer).await });
                    }
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
            }
        }
    }
}
