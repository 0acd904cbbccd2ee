//! moto, the AWS mock server, started for one test binary on a free loopback port and stopped when dropped.
//! scripts/test.sh installs it into `.venv/`; `MOTO_SERVER` names another binary.
#![allow(dead_code)]

pub mod faults;

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;

pub struct Moto {
    child: Child,
    pub url: String,
}

fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MOTO_SERVER") {
        return p.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server");
    if venv.exists() { venv } else { "moto_server".into() }
}

impl Moto {
    pub fn start() -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let bin = binary();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): run the tests through `bash scripts/test.sh`, which installs moto into \
                     .venv, or set MOTO_SERVER",
                    bin.display()
                )
            });
        let moto = Moto { child, url: format!("http://127.0.0.1:{port}") };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(60), "moto did not start on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// An SDK configuration pointed at this server, with test credentials.
    pub async fn sdk(&self) -> SdkConfig {
        self.loader().load().await
    }

    /// The same, with every request going through `faults` first.
    pub async fn sdk_with(&self, faults: &faults::Faults) -> SdkConfig {
        self.loader().http_client(faults.client()).load().await
    }

    fn loader(&self) -> aws_config::ConfigLoader {
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(&self.url)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
