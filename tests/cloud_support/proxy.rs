//! A TCP proxy in front of a server, that can be cut: every open
//! connection is shut down and new ones are refused, as when the network
//! or the service goes away in the middle of a request; `restart` brings
//! it back on the same port.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A running proxy.
pub struct Proxy {
    target: SocketAddr,
    port: u16,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// Listens on 127.0.0.1:`port` (0: any free port) and forwards to
    /// `target`.
    pub fn start(target: SocketAddr, port: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the proxy");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (s, c) = (Arc::clone(&stop), Arc::clone(&conns));
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let Ok(server) = TcpStream::connect(target) else {
                            continue;
                        };
                        if let Ok(mut all) = c.lock() {
                            all.extend(client.try_clone().ok());
                            all.extend(server.try_clone().ok());
                        }
                        pump(&client, &server);
                        pump(&server, &client);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                }
            }
            // The listener is dropped here: connections are refused.
        });
        Proxy {
            target,
            port,
            stop,
            conns,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Shuts every connection down and stops listening.
    pub fn cut(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut all) = self.conns.lock() {
            for c in all.drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
        // Let the accept loop see the flag and drop its listener.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    /// A new proxy on the same port (after `cut`).
    pub fn restart(self) -> Proxy {
        self.cut();
        Proxy::start(self.target, self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn pump(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
