//! Helpers shared by the CLI's test files (each uses some of them).

#![allow(dead_code)]

/// A `vev` process on pipes whose stdout is read a line at a time while it runs.
pub struct Live {
    pub child: std::process::Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Live {
    /// Start `vev ARGS` (with no REPL history file).
    pub fn spawn(args: &[&str]) -> Live {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vev"))
            .args(args)
            .env("VEV_HISTORY", "")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawns");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        Live { child, lines }
    }

    /// Write `text` to its stdin, flushed.
    pub fn write(&mut self, text: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line of output, read while stdin is still open.
    pub fn line(&self) -> String {
        self.lines
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a line of output before stdin is closed")
    }

    /// Close stdin and wait for the process.
    pub fn finish(mut self) -> std::process::Output {
        drop(self.child.stdin.take());
        self.child.wait_with_output().unwrap()
    }
}

/// The port `vev serve` names in the line it prints first (`... (psql -h HOST -p PORT -U
/// vev)`).
pub fn served_port(line: &str) -> Option<u16> {
    line.rsplit("-p ")
        .next()
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse::<u16>().ok())
}

/// `psql` on a server's loopback `port` (user vev, database app, no psqlrc), stopping at the
/// first error; the caller adds the commands.
pub fn psql(port: u16) -> std::process::Command {
    let mut cmd = std::process::Command::new("psql");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "vev", "-d", "app", "-X", "-v", "ON_ERROR_STOP=1"]);
    cmd
}
