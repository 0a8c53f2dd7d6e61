//! The web view's admin actions: ending a rank's session, revoking its locks on a window and
//! deleting a world, each a `POST` that goes through the Admin service's own methods (the same
//! checks, the same forwarding to the node that serves the world in a cluster, the same
//! `admin` audit event, naming the page's address as who asked).
//!
//! - `POST /api/worlds/{world}/ranks/{rank}/end-session` — Admin `EndSession`.
//! - `POST /api/worlds/{world}/windows/{window}/ranks/{rank}/revoke-locks` — Admin
//!   `RevokeLocks` (`rank` in the world).
//! - `POST /api/worlds/{world}/delete` — Admin `DeleteWorld`.
//!
//! Owns: these paths and their JSON answers. Must not: act except through the Admin service.

use onesided_core::error::quoted;
use onesided_proto::v1::{self, admin_server::Admin};
use serde_json::{json, Value};

use super::{bad_request, refusal_of_status, Refusal, WebView};
use crate::admin::Via;

/// Whether `api` (the path after `/api/`, split at `/`) names an action, which only `POST`
/// reaches.
pub(super) fn is_action(api: &[&str]) -> bool {
    matches!(
        api,
        ["worlds", _, "ranks", _, "end-session"]
            | ["worlds", _, "windows", _, "ranks", _, "revoke-locks"]
            | ["worlds", _, "delete"]
    )
}

impl WebView {
    /// Carries out the action `api` names, asked from `from`; its answer as JSON.
    pub(super) async fn act(
        &self,
        api: &[&str],
        from: Option<std::net::SocketAddr>,
    ) -> Result<Value, Refusal> {
        let via = Via(match from {
            Some(address) => format!("{address} (web view)"),
            None => "the web view".to_string(),
        });
        let rank = |text: &str| {
            text.parse::<u32>()
                .map_err(|_| bad_request(format!("a rank is a whole number, not {}", quoted(text))))
        };
        match api {
            ["worlds", world, "ranks", number, "end-session"] => {
                let answer = self
                    .admin
                    .end_session(via.asking(v1::EndSessionRequest {
                        world: (*world).to_string(),
                        rank: rank(number)?,
                    }))
                    .await
                    .map_err(refusal_of_status)?
                    .into_inner();
                Ok(json!({"world": world, "rank": rank(number)?,
                          "incarnation": answer.incarnation}))
            }
            ["worlds", world, "windows", window, "ranks", number, "revoke-locks"] => {
                let answer = self
                    .admin
                    .revoke_locks(via.asking(v1::RevokeLocksRequest {
                        world: (*world).to_string(),
                        window: (*window).to_string(),
                        rank: rank(number)?,
                    }))
                    .await
                    .map_err(refusal_of_status)?
                    .into_inner();
                Ok(
                    json!({"world": world, "window": window, "rank": rank(number)?,
                          "incarnation": answer.incarnation, "targets": answer.targets}),
                )
            }
            ["worlds", world, "delete"] => {
                self.admin
                    .delete_world(via.asking(v1::DeleteWorldRequest {
                        name: (*world).to_string(),
                    }))
                    .await
                    .map_err(refusal_of_status)?;
                Ok(json!({"world": world, "deleted": true}))
            }
            _ => Err(Refusal::not_found("no such action".to_string())),
        }
    }
}
