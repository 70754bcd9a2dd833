//! A TCP relay for the failover test's object store: moto listens on loopback only, which a
//! process in one of our network namespaces cannot reach, so the test listens on the
//! server's address of each test host (the same port as moto's) and copies bytes both ways
//! to moto. A host whose link is cut reaches neither PostgreSQL nor the relay, as with a
//! real object store on the network. Dropping the `Relay` stops accepting and closes every
//! relayed connection.

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Relay {
    stop: Arc<AtomicBool>,
    addresses: Vec<SocketAddr>,
    acceptors: Vec<JoinHandle<()>>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    /// How many connections it has relayed.
    pub fn connections(&self) -> usize {
        self.open.lock().map_or(0, |list| list.len() / 2)
    }

    /// Listen on every address of `listen` (each with `target`'s port) and relay each
    /// connection to `target`.
    pub fn start(listen: &[String], target: SocketAddr) -> Result<Relay, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let mut relay = Relay {
            stop: Arc::clone(&stop),
            addresses: Vec::new(),
            acceptors: Vec::new(),
            open: Arc::clone(&open),
        };
        for address in listen {
            let at: SocketAddr = format!("{address}:{}", target.port())
                .parse()
                .map_err(|e| format!("{address}: {e}"))?;
            let listener = TcpListener::bind(at).map_err(|e| format!("relay on {at}: {e}"))?;
            relay.addresses.push(at);
            let (stop, open) = (Arc::clone(&stop), Arc::clone(&open));
            relay.acceptors.push(std::thread::spawn(move || {
                for incoming in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = incoming else { continue };
                    let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(5))
                    else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    if let Ok(mut list) = open.lock() {
                        list.extend(client.try_clone().ok());
                        list.extend(server.try_clone().ok());
                    }
                    pipe(&client, &server);
                    pipe(&server, &client);
                }
            }));
        }
        Ok(relay)
    }
}

/// Copy `from` into `to` on a thread of its own until `from` ends, then end `to`'s writing.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        // An error ends the copy as an end of stream does: the peer went away.
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake each acceptor with a connection of our own; it sees `stop` and returns.
        for at in &self.addresses {
            let _ = TcpStream::connect_timeout(at, Duration::from_secs(1));
        }
        for acceptor in self.acceptors.drain(..) {
            let _ = acceptor.join();
        }
        if let Ok(list) = self.open.lock() {
            for stream in list.iter() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}
