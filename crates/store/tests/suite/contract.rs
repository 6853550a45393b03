use holdpoint_test_support::TempStore;
use holdpoint_test_support::contract::Fixture;

async fn fresh() -> Fixture {
    let temp = TempStore::new();
    Fixture {
        store: temp.dyn_store(),
        guard: Box::new(temp),
    }
}

holdpoint_test_support::store_contract!(fresh);
