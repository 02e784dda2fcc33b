//! Every call of the addon that touches the database runs as a [`Work`]: on libuv's thread pool,
//! off Node's event loop, its answer handed back as a promise. The job itself calls
//! `strata::blocking`, which drives the engine on the addon's own runtime; here it is only
//! carried there and back.

use std::panic::{AssertUnwindSafe, catch_unwind};

use napi::bindgen_prelude::{AsyncTask, ToNapiValue, TypeName};
use napi::{Env, Task};

use crate::errors::Failure;

type Job<T> = Box<dyn FnOnce() -> Result<T, Failure> + Send>;

/// A job for the thread pool whose promise resolves to its `T`.
pub struct Work<T> {
    job: Option<Job<T>>,
}

/// `job` as the promise a method returns.
pub fn promise<T>(job: impl FnOnce() -> Result<T, Failure> + Send + 'static) -> AsyncTask<Work<T>>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    AsyncTask::new(Work { job: Some(Box::new(job)) })
}

/// A serializable answer as JSON text, which `index.js` parses: V8's `JSON.parse` builds the
/// objects faster than Node-API calls made one value at a time.
pub fn json(value: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|error| Failure::Internal(error.to_string()))
}

impl<T> std::fmt::Debug for Work<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Work").field("done", &self.job.is_none()).finish()
    }
}

impl<T> Task for Work<T>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    // The job's refusal travels as a value: only the main thread, in `resolve`, can make the
    // JavaScript error it becomes.
    type Output = Result<T, Failure>;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let Some(job) = self.job.take() else {
            return Ok(Err(Failure::Internal("a call's work ran twice".into())));
        };
        // A panic must not unwind into libuv: it becomes the call's error instead.
        Ok(catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a call panicked".to_owned());
            Err(Failure::Internal(what))
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<T> {
        output.map_err(|failure| failure.thrown(&env))
    }
}
