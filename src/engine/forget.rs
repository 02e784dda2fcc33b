//! Forgetting through the engine: the backend erases in one transaction (its `Maintenance`
//! role, on SQLite and PostgreSQL alike); the engine first has its summarizer rewrite the Level-0 nodes that keep part
//! of their messages, since the store knows no summarizer. No connection is held while the
//! summarizer runs; the store's transaction uses a rewrite only if its span is unchanged.

use strata_seam::forgetting::{ForgetPlan, ForgetScope, Forgotten, Rebuilt};

use super::Engine;
use crate::error::{Error, Result};

impl Engine {
    /// What [`Engine::forget`] would erase, changing nothing (`strata forget --dry-run`).
    pub async fn forget_plan(&self, scope: &ForgetScope) -> Result<ForgetPlan> {
        let (store, scope) = (self.inner.store.clone(), scope.clone());
        Ok(tokio::task::spawn_blocking(move || store.forget_plan(&scope)).await.map_err(join)??)
    }

    /// Erases what `scope` names and everything derived from it, in one transaction, leaving
    /// an audit row that records `command` (see `Store::forget`); nodes that keep part of
    /// their messages are first summarized again by this engine's summarizer (a marker when it
    /// cannot). `progress` hears (messages deleted, messages to delete) as the work goes.
    pub async fn forget(
        &self,
        scope: &ForgetScope,
        command: &str,
        mut progress: impl FnMut(u64, u64) + Send + 'static,
    ) -> Result<Forgotten> {
        let plan = self.forget_plan(scope).await?;
        let mut rebuilt = Vec::with_capacity(plan.rebuild.len());
        for span in plan.rebuild {
            if let Some(summary) = self.inner.compactor.rebuild_span(&span).await? {
                rebuilt.push(Rebuilt { span, summary });
            }
        }
        let (store, scope, command) = (self.inner.store.clone(), scope.clone(), command.to_owned());
        let forgotten =
            tokio::task::spawn_blocking(move || store.forget(&scope, &command, &rebuilt, &mut progress))
                .await
                .map_err(join)??;
        if forgotten.counts.rebuilt > 0 {
            self.notify_worker();
        }
        Ok(forgotten)
    }
}

fn join(error: tokio::task::JoinError) -> Error {
    Error::Compactor(strata_compactor::Error::Join(error))
}
