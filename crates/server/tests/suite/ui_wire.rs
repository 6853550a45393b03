//! The web interface spells no wire name and no API path of its own: `ui/wire.js` is generated
//! here from the protocol's enums (a new variant reaches the pages by regenerating it), and
//! every request `ui/api.js` can make is an operation of the OpenAPI document.

use std::fmt::{Debug, Write as _};
use std::path::PathBuf;

use holdpoint_protocol::{
    ApproveScope, ApprovedBy, CallState, CallVerdict, DecideOutcome, DecidedByKind, DecisionAction,
    DecisionKind, DeliveryStatus, EventType, GrantScope, HoldKind, HoldStatus, MarkdownNodeType,
    MessageRole, NoticePurpose, Order, OutcomeStatus, PolicyLayer, Role, Source, StatusFilterName,
    TimeoutAction, ToolResultStatus, TurnStatus, VariantArray, Verdict,
};

use super::TestServer;

const REGENERATE: &str =
    "HOLDPOINT_UPDATE_WIRE=1 cargo test -p holdpoint-server --test api wire_js";

fn ui(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("ui")
        .join(name)
}

/// `wire.js` as it is written.
struct Wire(String);

impl Wire {
    /// A frozen object of an enum's names, by the Rust name of each variant, and the typedef
    /// of their union (named as the object: tsc tells the type from the value).
    fn names<T>(&mut self, name: &str, doc: &str, skip: &[T])
    where
        T: VariantArray + Copy + PartialEq + Debug + Into<&'static str>,
    {
        let variants: Vec<T> = T::VARIANTS
            .iter()
            .copied()
            .filter(|v| !skip.contains(v))
            .collect();
        assert!(!variants.is_empty(), "{name}");
        let union: Vec<String> = variants
            .iter()
            .map(|&v| format!("{:?}", Into::<&str>::into(v)))
            .collect();
        let out = &mut self.0;
        writeln!(out, "\n/** @typedef {{{}}} {name} */", union.join(" | ")).unwrap();
        writeln!(out, "/** {doc} */").unwrap();
        writeln!(out, "export const {name} = Object.freeze({{").unwrap();
        for v in variants {
            let wire: &str = v.into();
            writeln!(out, "  {v:?}: {wire:?},").unwrap();
        }
        writeln!(out, "}});").unwrap();
    }

    /// A frozen list of names of the type `ty`, in the enum's order.
    fn list<T>(&mut self, name: &str, doc: &str, ty: &str, items: impl IntoIterator<Item = T>)
    where
        T: Copy + Into<&'static str>,
    {
        let items: Vec<String> = items
            .into_iter()
            .map(|v| format!("{:?}", Into::<&str>::into(v)))
            .collect();
        assert!(!items.is_empty(), "{name}");
        let out = &mut self.0;
        writeln!(out, "\n/**\n * {doc}\n * @type {{readonly {ty}[]}}\n */").unwrap();
        writeln!(out, "export const {name} = Object.freeze([").unwrap();
        for item in items {
            writeln!(out, "  {item},").unwrap();
        }
        writeln!(out, "]);").unwrap();
    }

    /// A frozen object from names of one enum to names of another.
    fn map<K, V>(&mut self, name: &str, doc: &str, types: (&str, &str), pairs: &[(K, V)])
    where
        K: Copy + Into<&'static str>,
        V: Copy + Into<&'static str>,
    {
        let out = &mut self.0;
        writeln!(
            out,
            "\n/**\n * {doc}\n * @type {{Readonly<Partial<Record<{}, {}>>>}}\n */",
            types.0, types.1
        )
        .unwrap();
        writeln!(out, "export const {name} = Object.freeze({{").unwrap();
        for &(k, v) in pairs {
            let (k, v): (&str, &str) = (k.into(), v.into());
            writeln!(out, "  {k}: {v:?},").unwrap();
        }
        writeln!(out, "}});").unwrap();
    }
}

/// The whole of `wire.js`.
fn wire_js() -> String {
    let mut w = Wire(String::new());
    w.0.push_str(&format!(
        "// Holdpoint's wire names, generated from the enums of `holdpoint-protocol` by\n\
         // crates/server/tests/suite/ui_wire.rs. Do not edit: change the Rust enums, then run\n\
         //   {REGENERATE}\n\
         // and commit this file (the test fails while it differs).\n\
         //\n\
         // Each object maps the Rust name of a variant to its name on the wire\n\
         // (`HoldKind.Approval === \"approval\"`); the typedef of the same name is the union of\n\
         // those names, for the type check (`@param {{import(\"./wire.js\").HoldKind}} kind`).\n"
    ));
    w.names::<EventType>("EventType", "An event's `type`.", &[]);
    w.list(
        "EVENT_TYPES",
        "Every event type, in the API's order.",
        "EventType",
        EventType::VARIANTS.iter().copied(),
    );
    w.list(
        "HOLD_EVENT_TYPES",
        "The events that change a hold (`EventType::changes_hold`).",
        "EventType",
        EventType::VARIANTS
            .iter()
            .copied()
            .filter(|t| t.changes_hold()),
    );
    w.list(
        "RESOLVING_EVENT_TYPES",
        "The events that end a hold's wait; their payload has its `outcome` (`EventType::resolves_hold`).",
        "EventType",
        EventType::VARIANTS
            .iter()
            .copied()
            .filter(|t| t.resolves_hold()),
    );
    w.names::<HoldKind>("HoldKind", "What a hold asks: `spec.kind`.", &[]);
    w.names::<HoldStatus>("HoldStatus", "A hold's `status`.", &[]);
    w.list(
        "OPEN_HOLD_STATUSES",
        "The statuses of a hold still open (`HoldStatus::is_open`).",
        "HoldStatus",
        HoldStatus::VARIANTS.iter().copied().filter(|s| s.is_open()),
    );
    w.names::<StatusFilterName>(
        "StatusFilter",
        "The `status` filter of a listing of holds, besides each `HoldStatus`.",
        &[StatusFilterName::Is],
    );
    w.names::<Order>("Order", "The `order` of a listing.", &[]);
    w.names::<DecisionKind>(
        "DecisionKind",
        "The decisions a hold offers (`offers`).",
        &[],
    );
    w.list(
        "APPROVAL_DECISIONS",
        "What an approval can offer.",
        "DecisionKind",
        DecisionKind::APPROVAL,
    );
    w.list(
        "QUESTION_DECISIONS",
        "What a question can offer.",
        "DecisionKind",
        DecisionKind::QUESTION,
    );
    w.names::<DecisionAction>("DecisionAction", "A decision's `action`.", &[]);
    w.names::<ApproveScope>("ApproveScope", "How far an approval reaches: `scope`.", &[]);
    let scopes: Vec<(DecisionKind, ApproveScope)> = ApproveScope::VARIANTS
        .iter()
        .map(|&s| (s.kind(), s))
        .collect();
    w.map(
        "SCOPE_OF_DECISION",
        "The `scope` an approval sends, by the decision kind it is offered as.",
        ("DecisionKind", "ApproveScope"),
        &scopes,
    );
    w.names::<DecideOutcome>("DecideOutcome", "What a decision did: `result`.", &[]);
    w.names::<TimeoutAction>(
        "TimeoutAction",
        "What applies at a hold's deadline: `on_timeout.action`.",
        &[],
    );
    w.names::<OutcomeStatus>("OutcomeStatus", "A decided hold's `outcome.status`.", &[]);
    w.names::<Verdict>("Verdict", "An approval's `outcome.verdict`.", &[]);
    w.names::<Source>("Source", "What kind of actor did something: `source`.", &[]);
    w.names::<Role>("Role", "What a credential may do: `role`.", &[]);
    w.list(
        "PERSON_ROLES",
        "The roles of people, who sign in and decide (`Role::is_person`).",
        "Role",
        Role::VARIANTS.iter().copied().filter(|r| r.is_person()),
    );
    w.names::<GrantScope>("GrantScope", "How far a grant reaches: `scope`.", &[]);
    w.names::<CallVerdict>("CallVerdict", "Policy's answer for a call.", &[]);
    w.names::<DecidedByKind>(
        "DecidedBy",
        "What decided a call without a person: `decided_by.by`.",
        &[],
    );
    w.names::<PolicyLayer>("PolicyLayer", "A rule's policy `layer`.", &[]);
    w.names::<DeliveryStatus>(
        "DeliveryStatus",
        "A webhook delivery's or a notice's `status`.",
        &[],
    );
    w.names::<NoticePurpose>("NoticePurpose", "Why a notice was sent: `purpose`.", &[]);
    w.names::<MessageRole>("MessageRole", "A chat message's `role`.", &[]);
    w.names::<TurnStatus>("TurnStatus", "A turn's `status`.", &[]);
    w.list(
        "ACTIVE_TURN_STATUSES",
        "The statuses of a turn still going on (`TurnStatus::is_active`).",
        "TurnStatus",
        TurnStatus::VARIANTS
            .iter()
            .copied()
            .filter(|s| s.is_active()),
    );
    w.names::<CallState>(
        "CallState",
        "Where a tool call of a turn stands: `state`.",
        &[],
    );
    w.names::<ApprovedBy>(
        "ApprovedBy",
        "How a call that runs was allowed: `approved_by`.",
        &[],
    );
    w.names::<ToolResultStatus>("ToolResultStatus", "A tool result's `status`.", &[]);
    w.names::<MarkdownNodeType>(
        "MarkdownNodeType",
        "A node of rendered Markdown: `type`.",
        &[],
    );
    w.0
}

#[test]
fn the_committed_wire_js_is_current() {
    let path = ui("wire.js");
    let current = wire_js();
    if std::env::var_os("HOLDPOINT_UPDATE_WIRE").is_some() {
        std::fs::write(&path, &current).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == current,
        "crates/server/ui/wire.js is not what the protocol's enums say: run {REGENERATE}, and commit it"
    );
}

/// One request of api.js's table: its name, method and path template.
#[derive(Debug)]
struct Operation {
    name: String,
    method: String,
    path: String,
}

/// The table of api.js (`const OPERATIONS = Object.freeze({` … `});`), one operation a line:
/// `  name: ["METHOD", "/api/v1/…/{param}"],`.
fn operations_of(api_js: &str) -> Vec<Operation> {
    let table = api_js
        .split_once("const OPERATIONS = Object.freeze({\n")
        .and_then(|(_, rest)| rest.split_once("\n});"))
        .map(|(table, _)| table)
        .expect("the table OPERATIONS in api.js");
    table
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .map(|line| {
            let parse = || -> Option<Operation> {
                let (name, rest) = line.split_once(": [\"")?;
                let (method, rest) = rest.split_once("\", \"")?;
                let path = rest.strip_suffix("\"],")?;
                Some(Operation {
                    name: name.to_owned(),
                    method: method.to_owned(),
                    path: path.to_owned(),
                })
            };
            parse().unwrap_or_else(|| {
                panic!("api.js: not a line of OPERATIONS (name: [\"METHOD\", \"/path\"],): {line}")
            })
        })
        .collect()
}

#[tokio::test]
async fn every_request_of_the_web_interface_is_an_operation_of_the_served_document() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let served = api.get("/ui/api.js").await;
    assert_eq!(served.status, 200);
    let committed = std::fs::read_to_string(ui("api.js")).unwrap();
    assert_eq!(served.text, committed, "the server serves api.js as it is");
    let wire = api.get("/ui/wire.js").await;
    assert_eq!(wire.status, 200);
    assert_eq!(wire.text, std::fs::read_to_string(ui("wire.js")).unwrap());
    let operations = operations_of(&committed);
    assert!(operations.len() > 40, "{operations:?}");

    let doc = api.get("/api/v1/openapi.json").await.expect(200);
    let paths = doc["paths"].as_object().unwrap();
    let documented = |method: &str, path: &str| {
        paths
            .get(path)
            .is_some_and(|item| item.get(method.to_lowercase()).is_some())
    };
    // Each is what one function of api.js calls, under its name.
    for op in &operations {
        assert!(
            committed.contains(&format!("call(\"{}\"", op.name))
                || committed.contains(&format!("pathOf(\"{}\")", op.name)),
            "api.js never calls {op:?}"
        );
    }
    let stray: Vec<_> = operations
        .iter()
        .filter(|op| !documented(&op.method, &op.path))
        .collect();
    assert!(stray.is_empty(), "not operations of the API: {stray:?}");
    // Each operation once, under one name.
    let mut seen = std::collections::BTreeSet::new();
    for op in &operations {
        assert!(seen.insert((&op.method, &op.path)), "twice: {op:?}");
    }
    // The check tells a stray request from an operation.
    assert!(!documented("GET", "/api/v1/hold/{hold}"));
    assert!(!documented("PUT", "/api/v1/holds"));
    assert!(documented("GET", "/api/v1/holds/{hold}"));
    // No other module of the interface spells a path of the API.
    for entry in std::fs::read_dir(ui("")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".js") || name == "api.js" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            assert!(
                !code.contains("\"/api/v1") && !code.contains("`/api/v1"),
                "{name}:{}: a path of the API outside api.js: {line}",
                i + 1
            );
        }
    }
}

/// A hold of a kind the page does not know (a newer server's) is shown as that, with no
/// decision, never drawn as a question.
#[tokio::test]
async fn a_browser_shows_a_hold_of_a_kind_it_does_not_know_as_unknown() {
    use super::browser::Browser;
    let t = TestServer::start().await;
    let token = t.server.admin_token().unwrap();
    let b = Browser::signed_in(&t, "unknown-kind", token).await;
    b.eval(
        "window.drawn = null; import('/ui/card.js').then((m) => { \
           const el = m.card({ id: 'h1', batch: 'b1', world: 'lab', requested_by: 'bot', \
             created_at: new Date().toISOString(), status: 'pending', offers: ['answer'], \
             quorum: 1, version: 1, on_timeout: { action: 'deny' }, \
             spec: { kind: 'poll', question: 'Lunch?', options: [] } }); \
           document.body.append(el); window.drawn = el.textContent; }); return true",
    )
    .await;
    b.wait_until(
        "return typeof window.drawn === 'string'",
        "the card to be drawn",
    )
    .await;
    let text = b.eval("return window.drawn").await;
    let text = text.as_str().unwrap();
    assert!(text.contains("Unknown kind of hold"), "{text}");
    assert!(
        text.contains("a kind this page does not know (“poll”)"),
        "{text}"
    );
    assert!(!text.contains("Question"), "{text}");
    let buttons = b
        .eval("return document.querySelectorAll('article.hold[data-hold=h1] button').length")
        .await;
    assert_eq!(buttons, serde_json::json!(0));
    b.close().await;
}
