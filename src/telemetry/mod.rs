//! Traces: with `[telemetry] otlp_endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`), a run is exported as
//! OpenTelemetry spans over OTLP/HTTP. The spans are built from the run's own records (`spans.rs`
//! reads `events.jsonl`, `turns.jsonl` and, with `capture_content`, the journal) on a thread of
//! their own, so the run core never names the crate and export never slows or fails a run: spans
//! go out in batches from the SDK's thread, a receiver that is down or hangs is reported once per
//! process, and the final flush waits at most `FLUSH` after `result.json` is written.

mod spans;

use crate::config::Config;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the end of a run waits for its last spans to go out.
const FLUSH: Duration = Duration::from_millis(2500);
/// How often a run's records are read for new spans.
const POLL: Duration = Duration::from_millis(200);

static REPORTER: OnceLock<fn(&str)> = OnceLock::new();
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Where export problems are told (the command line prints them); set once per process.
pub fn set_reporter(report: fn(&str)) {
    let _ = REPORTER.set(report);
}

fn report_once(text: &str) {
    if REPORTED.swap(true, Ordering::SeqCst) {
        return;
    }
    match REPORTER.get() {
        Some(report) => report(text),
        None => tracing::warn!("{text}"),
    }
}

/// An OTLP endpoint that is no http(s) URL, and where it was named (`[telemetry] otlp_endpoint`
/// or the variable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{from} = {url:?}: write an http:// or https:// URL, such as http://127.0.0.1:4318")]
pub struct BadEndpoint {
    pub from: &'static str,
    pub url: String,
}

/// The OTLP/HTTP traces URL: the config's endpoint, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (a
/// whole URL), else `OTEL_EXPORTER_OTLP_ENDPOINT`; a base URL gets `/v1/traces`. `Ok(None)`: no
/// traces. An endpoint that is no http(s) URL is refused, naming where it came from.
pub fn traces_url(config: &Config) -> Result<Option<String>, BadEndpoint> {
    if config.telemetry.off {
        return Ok(None);
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (url, from, whole) = match (&config.telemetry.otlp_endpoint, env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
        (Some(u), _) => (u.clone(), "[telemetry] otlp_endpoint", false),
        (None, Some(u)) => (u, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", true),
        (None, None) => match env("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Some(u) => (u, "OTEL_EXPORTER_OTLP_ENDPOINT", false),
            None => return Ok(None),
        },
    };
    let url = url.trim().to_string();
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
        return Err(BadEndpoint { from, url });
    }
    if whole || url.trim_end_matches('/').ends_with("/v1/traces") {
        return Ok(Some(url));
    }
    Ok(Some(format!("{}/v1/traces", url.trim_end_matches('/'))))
}

/// The OTLP exporter, reporting its first failure.
#[derive(Debug)]
struct Reported {
    inner: opentelemetry_otlp::SpanExporter,
    url: String,
}

impl SpanExporter for Reported {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            report_once(&format!(
                "telemetry: cannot export traces to {}: {e} (the run goes on; further failures are not reported)",
                self.url
            ));
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// A run's trace in the making; `finish` once the run has written `result.json`.
pub struct Trace {
    stop: mpsc::Sender<()>,
    done: mpsc::Receiver<()>,
}

/// Starts tracing attempt `attempt` of the run in `dir`, when the config (or the environment) names an endpoint.
pub fn start(config: &Config, dir: &Path, attempt: u32) -> Option<Trace> {
    let url = match traces_url(config) {
        Ok(Some(u)) => u,
        Ok(None) => return None,
        Err(e) => {
            report_once(&format!("telemetry: {e}; no traces are exported"));
            return None;
        }
    };
    let capture = config.telemetry.capture_content.unwrap_or(false);
    let (stop, stopped) = mpsc::channel();
    let (finished, done) = mpsc::channel();
    let dir = dir.to_path_buf();
    let spawned = std::thread::Builder::new().name("awf-telemetry".into()).spawn(move || {
        if let Some(provider) = provider(&url) {
            follow(&provider, &dir, attempt, capture, &stopped);
            let _ = provider.force_flush();
            let _ = provider.shutdown_with_timeout(EXPORT_TIMEOUT);
        }
        let _ = finished.send(());
    });
    if let Err(e) = spawned {
        report_once(&format!("telemetry: cannot start its thread: {e}"));
        return None;
    }
    Some(Trace { stop, done })
}

fn provider(url: &str) -> Option<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig;
    let built = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build();
    let inner = match built {
        Ok(e) => e,
        Err(e) => {
            report_once(&format!("telemetry: cannot export traces to {url}: {e}"));
            return None;
        }
    };
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("awf").build();
    Some(
        SdkTracerProvider::builder()
            .with_resource(resource)
            .with_batch_exporter(Reported { inner, url: url.to_string() })
            .build(),
    )
}

/// Reads the run's records as they grow into spans, until told the run has ended.
fn follow(provider: &SdkTracerProvider, dir: &Path, attempt: u32, capture: bool, stopped: &mpsc::Receiver<()>) {
    use opentelemetry::trace::TracerProvider;
    let tracer = provider.tracer("awf");
    let mut builder = spans::Builder::new(dir, attempt, capture);
    loop {
        let last = !matches!(stopped.recv_timeout(POLL), Err(mpsc::RecvTimeoutError::Timeout));
        builder.read(&tracer);
        if last {
            builder.end_all(&tracer);
            return;
        }
    }
}

impl Trace {
    /// Reads what is left of the run's records, ends every span and sends them, waiting at
    /// most `FLUSH`.
    pub fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.done.recv_timeout(FLUSH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_url_comes_from_the_config_with_its_path() {
        let mut config = Config::default();
        config.telemetry.otlp_endpoint = Some("http://127.0.0.1:4318".into());
        assert_eq!(traces_url(&config).expect("ok").as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        config.telemetry.otlp_endpoint = Some("http://127.0.0.1:4318/v1/traces".into());
        assert_eq!(traces_url(&config).expect("ok").as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        config.telemetry.otlp_endpoint = Some("127.0.0.1:4318".into());
        let err = traces_url(&config).expect_err("no scheme");
        assert_eq!(err, BadEndpoint { from: "[telemetry] otlp_endpoint", url: "127.0.0.1:4318".into() });
        assert!(
            err.to_string().starts_with("[telemetry] otlp_endpoint = \"127.0.0.1:4318\": write an http://"),
            "{err}"
        );
    }
}
