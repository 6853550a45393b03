//! The one `Store` contract suite, run on each store.

mod sqlite {
    use holdpoint_test_support::TempStore;
    use holdpoint_test_support::contract::Fixture;

    async fn fresh() -> Option<Fixture> {
        let temp = TempStore::new();
        Some(Fixture {
            store: temp.dyn_store(),
            guard: Box::new(temp),
        })
    }

    holdpoint_test_support::store_contract!(fresh);
}

mod postgres {
    holdpoint_test_support::store_contract!(holdpoint_test_support::pg::fixture);
}
