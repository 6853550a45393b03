//! The catalog records that nearly every request reads (credentials, browser sessions,
//! worlds, agents, webhook subscriptions), kept in memory so that authenticating and routing a
//! request costs no database read of its own. Both stores keep one; what makes each exact
//! differs.
//!
//! On SQLite this process is the database's only writer: the writer clears the cache right
//! after committing any change to these kinds, before anyone hears of the commit. On
//! PostgreSQL other nodes write too, so every such commit also moves a version in the
//! database, and a cached answer is used only after the version was read again (`pg/catalog.rs`).
//! Either way, a read that raced an invalidation carries the generation it started under and
//! is not cached when the generation has moved on, so an older answer never comes back.

use std::collections::HashMap;

use holdpoint_core::store::{Positioned, Record, RecordKind};
use parking_lot::Mutex;

/// Kinds that are read on every request and written rarely.
const CACHED: [RecordKind; 5] = [
    RecordKind::Token,
    RecordKind::Session,
    RecordKind::World,
    RecordKind::Agent,
    RecordKind::Webhook,
];

/// Past this many answers the cache starts afresh (made-up credentials are answers too).
const MAX_ENTRIES: usize = 4096;

/// One read of the records store, as the cache keys it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Query {
    ById(RecordKind, uuid::Uuid),
    ByKey(RecordKind, Option<uuid::Uuid>, String),
    List(RecordKind, Option<uuid::Uuid>, Option<u64>, usize),
}

impl Query {
    pub(crate) fn kind(&self) -> RecordKind {
        match self {
            Query::ById(kind, ..) | Query::ByKey(kind, ..) | Query::List(kind, ..) => *kind,
        }
    }
}

#[derive(Clone)]
pub(crate) enum Answer {
    One(Option<Record>),
    Many(Vec<Positioned<Record>>),
}

impl Answer {
    pub(crate) fn one(self) -> Option<Record> {
        match self {
            Answer::One(r) => r,
            Answer::Many(mut rs) => rs.pop().map(|r| r.item),
        }
    }

    pub(crate) fn many(self) -> Vec<Positioned<Record>> {
        match self {
            Answer::Many(rs) => rs,
            Answer::One(_) => Vec::new(),
        }
    }
}

#[derive(Default)]
pub(crate) struct RecordCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    generation: u64,
    answers: HashMap<Query, Answer>,
}

/// Whether the cache keeps records of the kind stored under this name.
pub(crate) fn covers(kind: &str) -> bool {
    CACHED.iter().any(|k| k.as_str() == kind)
}

/// Whether the cache keeps records of `kind`.
pub(crate) fn keeps(kind: RecordKind) -> bool {
    CACHED.contains(&kind)
}

impl RecordCache {
    /// The cached answer, or the generation to hand to [`Self::put`] with a fresh one.
    /// Queries of kinds the cache does not keep always miss.
    pub(crate) fn get(&self, query: &Query) -> Result<Answer, Option<u64>> {
        if !keeps(query.kind()) {
            return Err(None);
        }
        let inner = self.inner.lock();
        inner
            .answers
            .get(query)
            .cloned()
            .ok_or(Some(inner.generation))
    }

    /// Keeps an answer read from the database under `generation`, unless a commit came
    /// in between.
    pub(crate) fn put(&self, generation: u64, query: Query, answer: &Answer) {
        let mut inner = self.inner.lock();
        if inner.generation != generation {
            return;
        }
        if inner.answers.len() >= MAX_ENTRIES {
            inner.answers.clear();
        }
        inner.answers.insert(query, answer.clone());
    }

    /// Forgets everything: a change to a cached kind was committed.
    pub(crate) fn invalidate(&self) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner.answers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(name: &str) -> Answer {
        Answer::One(Some(Record {
            kind: RecordKind::World,
            id: uuid::Uuid::nil(),
            parent: None,
            key: Some(name.into()),
            version: 1,
            data: serde_json::json!({}),
        }))
    }

    fn name(answer: Answer) -> Option<String> {
        answer.one().and_then(|r| r.key)
    }

    #[test]
    fn a_read_that_raced_a_commit_is_not_kept() {
        let cache = RecordCache::default();
        let q = Query::ByKey(RecordKind::World, None, "lab".into());
        let Err(Some(generation)) = cache.get(&q) else {
            panic!("an empty cache answered")
        };
        cache.invalidate();
        cache.put(generation, q.clone(), &world("old"));
        assert!(cache.get(&q).is_err());

        let Err(Some(generation)) = cache.get(&q) else {
            panic!("an empty cache answered")
        };
        cache.put(generation, q.clone(), &world("new"));
        assert_eq!(cache.get(&q).ok().and_then(name), Some("new".into()));
        cache.invalidate();
        assert!(cache.get(&q).is_err());
    }

    #[test]
    fn busy_kinds_are_never_cached() {
        let cache = RecordCache::default();
        let q = Query::List(RecordKind::Message, None, None, 10);
        assert!(matches!(cache.get(&q), Err(None)));
        assert!(covers("token") && covers("webhook") && !covers("message") && !covers("cursor"));
    }
}
