//! `MemoryStore::exclusive` on the filesystem store: the write lock held
//! across several calls (what the encrypted store's rename needs), taken
//! again by the holding thread, waited for by every other handle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use claude_memory::store::{Lock, MemoryStoreExt as _, WriteMode};
use claude_memory::{FilesystemStore, InMemoryStore, MemoryPath, MemoryStore};

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

/// The lock [`MemoryStore::exclusive`] holds on `store`: `None` if it
/// refuses to run a change at all.
fn lock_of(store: &dyn MemoryStore) -> Option<Lock> {
    let mut seen = None;
    let _ = store.exclusive(&MemoryPath::root(), &mut |lock| {
        seen = Some(lock);
        Ok(())
    });
    seen
}

#[test]
fn the_holding_thread_writes_through_its_own_lock() {
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    assert_eq!(lock_of(&store), Some(Lock::Held));
    store
        .exclusive(&p("/memories"), &mut |_| {
            store.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)?;
            store.exclusive(&p("/memories"), &mut |_| {
                store.rename(&p("/memories/a.md"), &p("/memories/b.md"))
            })?;
            store.delete(&p("/memories/b.md"))
        })
        .expect("exclusive");
    assert!(store.stat(&p("/memories/b.md")).expect("stat").is_none());
}

#[test]
fn another_handle_waits_until_the_holder_is_done() {
    let dir = tempfile::tempdir().expect("dir");
    let holder = FilesystemStore::open(dir.path()).expect("store");
    let other = Arc::new(FilesystemStore::open(dir.path()).expect("store"));
    let done = Arc::new(AtomicBool::new(false));
    let mut waiter = None;
    holder
        .exclusive(&p("/memories"), &mut |_| {
            let (other, seen) = (Arc::clone(&other), Arc::clone(&done));
            waiter = Some(std::thread::spawn(move || {
                other
                    .write(&p("/memories/x.md"), b"other\n", WriteMode::Create)
                    .expect("write");
                // The holder set `done` before letting go.
                seen.load(Ordering::SeqCst)
            }));
            std::thread::sleep(Duration::from_millis(300));
            holder.write(&p("/memories/y.md"), b"holder\n", WriteMode::Create)?;
            done.store(true, Ordering::SeqCst);
            Ok(())
        })
        .expect("exclusive");
    let waited = waiter.expect("spawned").join().expect("thread");
    assert!(
        waited,
        "the other handle wrote while the lock was held across the calls"
    );
}

#[test]
fn a_panic_inside_lets_the_lock_go() {
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = store.exclusive(&p("/memories"), &mut |_| panic!("killed inside"));
    }));
    assert!(died.is_err());
    let other = FilesystemStore::open(dir.path()).expect("store");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = other.write(&p("/memories/z.md"), b"z\n", WriteMode::Create);
        let _ = tx.send(r.is_ok());
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true));
    // And the same handle, from another thread.
    let store = Arc::new(store);
    let s2 = Arc::clone(&store);
    let t = std::thread::spawn(move || s2.write(&p("/memories/w.md"), b"w\n", WriteMode::Create));
    assert!(t.join().expect("thread").is_ok());
}

#[test]
fn a_read_only_store_has_no_lock_to_hold() {
    let dir = tempfile::tempdir().expect("dir");
    drop(FilesystemStore::open(dir.path()).expect("store"));
    let ro = FilesystemStore::builder(dir.path())
        .read_only(true)
        .open()
        .expect("read-only");
    assert_eq!(lock_of(&ro), None);
    let mut ran = false;
    let r = ro.exclusive(&p("/memories"), &mut |_| {
        ran = true;
        Ok(())
    });
    assert!(r.is_err() && !ran, "{r:?}");
}

#[test]
fn stores_without_a_shared_lock_say_so_and_run_the_change() {
    let store = InMemoryStore::new();
    assert_eq!(lock_of(&store), Some(Lock::Absent));
    let mut ran = false;
    store
        .exclusive(&p("/memories"), &mut |_| {
            ran = true;
            Ok(())
        })
        .expect("exclusive");
    assert!(ran);
}

#[test]
fn the_lock_is_held_and_let_go_inside_a_tokio_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("dir");
        let store = FilesystemStore::open(dir.path()).expect("store");
        store
            .exclusive(&p("/memories"), &mut |_| {
                store.write(&p("/memories/t.md"), b"t\n", WriteMode::Create)?;
                Ok(())
            })
            .expect("exclusive");
        drop(store);
    });
}

/// A listing that meets a crashed writer's temporary file removes it only
/// if the lock is free at once: through a second handle on the same root,
/// while this thread holds the first handle's lock, it lists without
/// waiting (waiting would be for itself), and a later listing removes it.
#[test]
fn a_listing_never_waits_for_the_lock_to_remove_leftovers() {
    let dir = tempfile::tempdir().expect("dir");
    let first = FilesystemStore::open(dir.path()).expect("store");
    let second = FilesystemStore::open(dir.path()).expect("second handle");
    let temp = dir.path().join(".claude-memory.tmp.99999.7");
    std::fs::write(&temp, "half").expect("temp");
    let (done, finished) = std::sync::mpsc::channel();
    let lister = std::thread::spawn(move || {
        first
            .exclusive(&p("/memories"), &mut |_| {
                second.list(&MemoryPath::root()).map(|_| ())
            })
            .expect("list under the lock");
        let _ = done.send(());
        second
    });
    finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the listing did not wait for its own thread's lock");
    assert!(temp.exists(), "removed without the lock");
    let second = lister.join().expect("lister");
    second.list(&MemoryPath::root()).expect("list");
    assert!(!temp.exists(), "the next listing removes it");
}
