//! Where logs go and what they look like. Headless commands log on stderr; the dashboards log to the state
//! directory's file, never to the terminal they own. Colour only ever goes to a terminal: a pod's log, `2>file` and
//! the log file get plain text (or JSON, one object per line, for log collectors).

use std::io::IsTerminal as _;

use clap::ValueEnum;
use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::Paths;

/// `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured only when written to a terminal).
    #[default]
    Plain,
    /// One JSON object per line: timestamp, level, target, fields (the message is `fields.message`).
    Json,
}

/// A subscriber writing `format` to `writer`. ANSI colour only when `ansi` and the format is plain; escapes that
/// arrive inside messages (an API server's error text) are escaped by tracing-subscriber when colour is off, and
/// JSON strings escape control characters, so neither form ever carries a raw escape.
pub fn subscriber<W>(
    format: LogFormat,
    writer: W,
    ansi: bool,
    level: Level,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_writer(writer).with_max_level(level);
    match format {
        LogFormat::Plain => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(builder.json().with_ansi(false).finish()),
    }
}

/// Logs on stderr, coloured only if stderr is a terminal. A second call (tests) keeps the first subscriber.
pub fn to_stderr(format: LogFormat, level: Level) {
    let ansi = std::io::stderr().is_terminal();
    subscriber(format, std::io::stderr, ansi, level).try_init().ok();
}

/// Logs to the state directory's log file, never to the terminal the dashboard owns, never coloured. The guard
/// flushes on drop.
pub fn to_file(paths: &Paths, format: LogFormat) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    std::fs::create_dir_all(&paths.state_dir).ok()?;
    let appender = tracing_appender::rolling::never(&paths.state_dir, "karpenter-tui.log");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    subscriber(format, writer, false, Level::INFO).try_init().ok()?;
    Some(guard)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer into a shared buffer, standing in for the log file or a pipe.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    fn log_with(format: LogFormat, ansi: bool) -> String {
        let buf = Buf::default();
        tracing::subscriber::with_default(subscriber(format, buf.clone(), ansi, Level::INFO), || {
            tracing::warn!(node = "ip-10-0-1-5", "the API server said \x1b[31mno\x1b[0m");
            tracing::info!("second line");
            tracing::debug!("below the level");
        });
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn plain_logs_without_a_terminal_carry_no_escapes_even_from_messages() {
        let out = log_with(LogFormat::Plain, false);
        assert!(out.contains("WARN") && out.contains("second line"), "{out}");
        assert!(!out.contains('\x1b'), "{out:?}");
        assert!(!out.contains("below the level"));
    }

    #[test]
    fn plain_logs_on_a_terminal_are_coloured() {
        // The other side of the switch, so the test above cannot pass by accident.
        assert!(log_with(LogFormat::Plain, true).contains("\x1b["));
    }

    #[test]
    fn json_logs_are_one_object_per_line() {
        let out = log_with(LogFormat::Json, true);
        let lines: Vec<serde_json::Value> =
            out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["fields"]["node"], "ip-10-0-1-5");
        assert_eq!(lines[0]["fields"]["message"], "the API server said \x1b[31mno\x1b[0m");
        assert_eq!(lines[1]["fields"]["message"], "second line");
        assert!(!out.contains('\x1b'), "the escape is a JSON \\u001b, not a raw byte: {out:?}");
    }
}
