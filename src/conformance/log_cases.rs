//! History log cases: a log's answers (one version by id, a filtered page
//! in either order, its checkpoint) are those of the reference, the
//! versions appended less those dropped, filtered by
//! [`Filter::matches`](crate::history::Filter::matches).

use std::time::{Duration, SystemTime};

use crate::history::{ChangeOp, Filter, Order, Revision, file_of, sha256_hex};
use crate::store::MemoryStore;

use super::history_cases::OpenLog;

/// A small deterministic generator (xorshift), so a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `n` versions over a few directories and files, with renames, deletes,
/// actors, calls and increasing times, as a history appends them.
fn versions(rng: &mut Rng, n: usize, start: SystemTime) -> Vec<Revision> {
    (0..n)
        .map(|i| {
            let dir = rng.below(4);
            let name = rng.below(12);
            let path = format!("/memories/d{dir}/f{name}.md");
            let op = match rng.below(10) {
                0 => ChangeOp::Created,
                1 => ChangeOp::Deleted,
                2 => ChangeOp::Renamed,
                _ => ChangeOp::Modified,
            };
            let from =
                (op == ChangeOp::Renamed).then(|| format!("/memories/d{}/g.md", rng.below(4)));
            let text = format!("content {i}\n");
            Revision {
                id: 0,
                file: rng.below(40),
                op,
                path,
                from,
                time: start + Duration::from_millis(i as u64),
                actor: Some(format!("agent-{}", rng.below(3))),
                call: (rng.below(3) > 0).then(|| format!("toolu_{}", rng.below(50))),
                sha256: sha256_hex(text.as_bytes()),
                size: text.len() as u64,
                content: (rng.below(5) > 0).then(|| text.into_bytes()),
                redacted: false,
                note: None,
                prev: None,
            }
        })
        .collect()
}

/// A filter drawn over the history's ids and times.
fn filter(rng: &mut Rng, last: u64, start: SystemTime) -> Filter {
    let mut f = Filter::default();
    let pick = |rng: &mut Rng| rng.below(4) == 0;
    if pick(rng) {
        f.after = Some(rng.below(last + 2));
    }
    if pick(rng) {
        f.before = Some(rng.below(last + 2));
    }
    if pick(rng) {
        f.files = Some(
            (0..=rng.below(3))
                .map(|_| rng.below(last.min(60) + 1))
                .collect(),
        );
    }
    if pick(rng) {
        f.path = Some(format!("/memories/d{}/f{}.md", rng.below(4), rng.below(12)));
    }
    if pick(rng) {
        f.prefix = Some(match rng.below(3) {
            0 => crate::path::ROOT.to_owned(),
            1 => format!("/memories/d{}", rng.below(4)),
            _ => format!("/memories/d{}/g.md", rng.below(4)),
        });
    }
    if pick(rng) {
        f.since = Some(start + Duration::from_millis(rng.below(last + 1)));
    }
    if pick(rng) {
        f.until = Some(start + Duration::from_millis(rng.below(last + 1)));
    }
    if pick(rng) {
        f.actor = Some(match rng.below(2) {
            0 => format!("agent-{}", rng.below(3)),
            _ => format!("toolu_{}", rng.below(50)),
        });
    }
    if pick(rng) {
        f.call = Some(format!("toolu_{}", rng.below(50)));
    }
    f
}

/// A log's `get` and `find` agree with the reference on 3,000 versions
/// appended in batches, with some dropped (a refused change's, and a dead
/// writer's from the middle), for 300 filters, both orders and several
/// limits; a checkpoint it keeps comes back as it was saved.
pub fn history_log_answers_match_the_reference(store: &dyn MemoryStore, log: OpenLog<'_>) {
    answers_match(store, log, 3_000, 300);
}

/// [`history_log_answers_match_the_reference`] on `count` versions and
/// `rounds` filters (the dead writer's are dropped after the 700th).
pub(crate) fn answers_match(
    _store: &dyn MemoryStore,
    log: OpenLog<'_>,
    count: usize,
    rounds: usize,
) {
    let log = log();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut all: Vec<Revision> = Vec::new();
    let mut made = 0;
    while made < count {
        let n = 1 + rng.below(60) as usize;
        let mut batch = versions(&mut rng, n, start + Duration::from_millis(made as u64));
        log.append(&mut batch).expect("append");
        made += n;
        if rng.below(8) == 0 {
            // A refused change: its batch dropped at once.
            let ids: Vec<u64> = batch.iter().map(|v| v.id).collect();
            log.drop_versions(&ids).expect("drop");
        } else {
            all.extend(batch);
        }
    }
    // A dead writer's versions, dropped from the middle.
    let middle: Vec<u64> = all
        .iter()
        .skip(700.min(all.len() / 2))
        .take(5)
        .map(|v| v.id)
        .collect();
    log.drop_versions(&middle).expect("drop the middle");
    all.retain(|v| !middle.contains(&v.id));
    assert!(all.windows(2).all(|w| w[0].id < w[1].id), "ids increase");
    let last = all.last().map_or(0, |v| v.id);
    for v in all.iter().step_by(97).chain(all.last()) {
        let got = log.get(v.id).expect("get").expect("a version");
        assert_eq!(got, *v, "get({})", v.id);
    }
    for id in &middle {
        assert_eq!(log.get(*id).expect("get"), None, "a dropped version");
    }
    assert_eq!(log.get(last + 1000).expect("get"), None);
    for round in 0..rounds {
        let f = filter(&mut rng, last, start);
        let limit = [1, 7, 100, usize::MAX][rng.below(4) as usize];
        for order in [Order::Oldest, Order::Newest] {
            let mut want: Vec<Revision> = all
                .iter()
                .filter(|v| f.matches(v))
                .map(Revision::clone_record)
                .collect();
            if order == Order::Newest {
                want.reverse();
            }
            want.truncate(limit);
            let got = log.find(&f, order, limit).expect("find");
            let ids = |vs: &[Revision]| vs.iter().map(|v| v.id).collect::<Vec<_>>();
            assert_eq!(
                ids(&got),
                ids(&want),
                "round {round}: {f:?} {order:?} {limit}"
            );
            assert_eq!(got, want, "round {round}: the records");
            assert!(got.iter().all(|v| v.content.is_none()), "records only");
            for v in &got {
                assert_eq!(file_of(v), if v.file == 0 { v.id } else { v.file });
            }
        }
    }
    log.save_checkpoint(b"the index at some version")
        .expect("save a checkpoint");
    if let Some(saved) = log.checkpoint().expect("read the checkpoint") {
        assert_eq!(saved, b"the index at some version");
        log.save_checkpoint(b"a newer one").expect("save again");
        assert_eq!(
            log.checkpoint().expect("read").as_deref(),
            Some(&b"a newer one"[..])
        );
    }
}
