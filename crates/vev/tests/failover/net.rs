//! Network namespaces for the failover test: each of our test "hosts" is a namespace joined
//! to this one by a veth pair on a /30 of its own (10.231.K.1 here, 10.231.K.2 there), so a
//! process in it reaches the PostgreSQL server only through that link, and cutting the link
//! (`ip link set ... down`) partitions it. Dropping `Hosts` deletes every namespace (which
//! deletes its veth pair), also when the test fails.

use std::process::Command;

/// Our test hosts: namespaces `<tag>h<i>`.
pub struct Hosts {
    tag: String,
    /// The third octet of host `i`'s addresses is `base + i`.
    base: u32,
    count: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

impl Hosts {
    /// Make `count` hosts, or say why this machine does not permit it.
    pub fn new(count: usize) -> Result<Hosts, String> {
        let pid = std::process::id();
        // Per process, so two runs at once do not collide; veth names stay under 15 bytes.
        let hosts = Hosts {
            tag: format!("vf{}", pid % 100_000),
            base: 10 + (pid % 40) * 6,
            count: 0,
        };
        let mut hosts = hosts;
        for i in 0..count {
            hosts.add(i)?;
            hosts.count = i + 1;
        }
        Ok(hosts)
    }

    fn add(&self, i: usize) -> Result<(), String> {
        let ns = self.namespace(i);
        let (outside, inside) = self.links(i);
        let k = self.base + i as u32;
        ip(&["netns", "add", &ns])?;
        ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", &inside,
        ])?;
        ip(&["link", "set", &inside, "netns", &ns])?;
        ip(&["addr", "add", &format!("10.231.{k}.1/30"), "dev", &outside])?;
        ip(&["link", "set", &outside, "up"])?;
        let in_ns = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns, "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        in_ns(&["addr", "add", &format!("10.231.{k}.2/30"), "dev", &inside])?;
        in_ns(&["link", "set", &inside, "up"])?;
        in_ns(&["link", "set", "lo", "up"])
    }

    pub fn namespace(&self, i: usize) -> String {
        format!("{}h{i}", self.tag)
    }

    fn links(&self, i: usize) -> (String, String) {
        (format!("{}o{i}", self.tag), format!("{}i{i}", self.tag))
    }

    /// The server's address as host `i` reaches it.
    pub fn server_address(&self, i: usize) -> String {
        format!("10.231.{}.1", self.base + i as u32)
    }

    /// Host `i`'s own address (a client of the server).
    pub fn address(&self, i: usize) -> String {
        format!("10.231.{}.2", self.base + i as u32)
    }

    /// A command run inside host `i` (`ip netns exec`, which execs it: same pid).
    pub fn command(&self, i: usize, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.namespace(i)]).arg(program);
        c
    }

    /// Cut host `i` off the network (`up = false`), or join it again.
    pub fn link(&self, i: usize, up: bool) {
        let (outside, _) = self.links(i);
        let state = if up { "up" } else { "down" };
        ip(&["link", "set", &outside, state]).unwrap();
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 0..=self.count {
            let _ = ip(&["netns", "del", &self.namespace(i)]);
            let _ = ip(&["link", "del", &self.links(i).0]);
        }
    }
}
