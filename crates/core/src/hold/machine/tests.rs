use std::time::Duration;

use holdpoint_protocol::{
    ApprovalRequest, ApproveScope, BatchId, ChosenOption, Deadline, DecisionKind, GrantScope,
    OnTimeout, QuestionOption, QuestionRequest, Role,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::canonical;
use crate::hold::{HoldContext, approval_hold, question_hold, validate_question};
use crate::policy::Policy;

const T0: Timestamp = Timestamp::from_millis(1_000_000);

fn ctx(chat: Option<&'static str>) -> HoldContext<'static> {
    HoldContext {
        world: "w",
        chat,
        agent: Some("a"),
        requested_by: "agent-1",
        batch: BatchId::random(),
        now: T0,
        remind_before: Duration::from_secs(60),
        policy: None,
        lineage: &[],
    }
}

fn approval_with(policy: &Policy, rule: Option<usize>, args: Value) -> Hold {
    let req = ApprovalRequest {
        tool_call_id: Some("call_1".into()),
        tool: "shell_cmd".into(),
        arguments: args.clone(),
        schema: Some(
            json!({"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}}),
        ),
        annotations: None,
        description: None,
        deadline: None,
        always_ask: false,
        mcp: None,
        offers: None,
    };
    let settings = policy.ask_settings("shell_cmd", rule);
    approval_hold(
        &ctx(Some("c")),
        &req,
        canonical::digest(&args),
        &settings,
        Deadline::After(Duration::from_secs(600)),
    )
}

fn approval() -> Hold {
    approval_with(&Policy::default(), None, json!({"command": "ls"}))
}

fn question(confirm: bool, multiple: bool, default: Option<&str>) -> Hold {
    question_of(&["a", "b", "no"], confirm, multiple, default)
}

fn question_of(options: &[&str], confirm: bool, multiple: bool, default: Option<&str>) -> Hold {
    let req = QuestionRequest {
        tool_call_id: None,
        question: "Which?".into(),
        options: options
            .iter()
            .map(|id| QuestionOption {
                id: (*id).into(),
                label: id.to_uppercase(),
                description: None,
            })
            .collect(),
        multiple,
        confirm,
        default_option: default.map(Into::into),
        context: None,
        deadline: None,
    };
    let spec = validate_question(&req, &Limits::default()).unwrap();
    question_hold(
        &ctx(None),
        spec,
        None,
        Deadline::After(Duration::from_secs(60)),
    )
}

fn alice() -> Principal {
    Principal::new("alice", Role::Approver)
}

fn run(hold: &Hold, who: &Principal, d: Decision) -> Result<Decided, EngineError> {
    decide(hold, who, &d, T0, &Policy::default(), &Limits::default())
}

fn approve(scope: ApproveScope) -> Decision {
    Decision::Approve {
        scope,
        expires_in: None,
        digest: None,
        reason: None,
    }
}

#[test]
fn approve_once_binds_the_arguments_shown() {
    let hold = approval();
    let (t, result) = run(&hold, &alice(), approve(ApproveScope::Once)).unwrap();
    assert_eq!(result, DecideOutcome::Resolved);
    assert_eq!(t.hold.version, hold.version + 1);
    assert_eq!(t.hold.status, HoldStatus::Approved);
    let o = t.hold.outcome.clone().unwrap();
    assert_eq!(o.verdict, Some(Verdict::Approve));
    assert_eq!(o.arguments, Some(json!({"command": "ls"})));
    assert_eq!(o.digest.as_deref(), hold.digest());
    assert_eq!(o.decided_by, vec!["alice"]);
    assert_eq!(o.source, Source::Person);
    assert!(t.grants.is_empty());
    assert_eq!(t.events.len(), 1);
    assert_eq!(
        t.events[0].payload,
        EventPayload::HoldDecided { outcome: o }
    );
}

#[test]
fn scoped_approvals_create_grants() {
    let hold = approval();
    let (t, _) = run(&hold, &alice(), approve(ApproveScope::Chat)).unwrap();
    let g = &t.grants[0];
    assert_eq!(
        (g.scope, g.chat.as_deref(), g.digest.as_deref()),
        (GrantScope::Chat, Some("c"), hold.digest())
    );
    assert_eq!(t.events.len(), 2);
    let (t, _) = run(&hold, &alice(), approve(ApproveScope::AlwaysTool)).unwrap();
    let g = &t.grants[0];
    assert_eq!(
        (g.scope, g.chat.as_deref(), g.digest.as_deref()),
        (GrantScope::AlwaysTool, None, None)
    );
    let (t, _) = run(&hold, &alice(), approve(ApproveScope::AlwaysArgs)).unwrap();
    assert_eq!(t.grants[0].scope, GrantScope::AlwaysArgs);
}

#[test]
fn agents_never_decide() {
    let err = run(
        &approval(),
        &Principal::new("bot", Role::Agent),
        approve(ApproveScope::Once),
    )
    .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let err = run(
        &question(false, false, None),
        &Principal::new("bot", Role::Agent),
        Decision::Answer {
            options: vec!["a".into()],
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "forbidden");
}

#[test]
fn a_decided_hold_reports_its_decision() {
    let hold = approval();
    let (t, _) = run(
        &hold,
        &alice(),
        Decision::Deny {
            reason: Some("no".into()),
        },
    )
    .unwrap();
    match run(
        &t.hold,
        &Principal::new("bob", Role::Admin),
        approve(ApproveScope::Once),
    )
    .unwrap_err()
    {
        EngineError::AlreadyDecided { hold } => {
            assert_eq!(hold.outcome.unwrap().reason.as_deref(), Some("no"))
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn deny_and_deny_stop() {
    let hold = approval();
    let (t, _) = run(
        &hold,
        &alice(),
        Decision::Deny {
            reason: Some("too risky".into()),
        },
    )
    .unwrap();
    let o = t.hold.outcome.unwrap();
    assert_eq!(
        (o.status, o.verdict, o.stop_turn, o.reason.as_deref()),
        (
            OutcomeStatus::Denied,
            Some(Verdict::Deny),
            false,
            Some("too risky")
        )
    );
    assert!(o.arguments.is_none());
    let (t, _) = run(&hold, &alice(), Decision::DenyStop { reason: None }).unwrap();
    assert!(t.hold.outcome.unwrap().stop_turn);
    let err = run(
        &hold,
        &alice(),
        Decision::Deny {
            reason: Some("x".repeat(5000)),
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "invalid_input");
}

#[test]
fn the_digest_seen_must_match() {
    let hold = approval();
    let d = Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: Some("0".repeat(64)),
        reason: None,
    };
    assert_eq!(
        run(&hold, &alice(), d).unwrap_err().code(),
        "digest_mismatch"
    );
    let d = Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: hold.digest().map(Into::into),
        reason: None,
    };
    assert!(run(&hold, &alice(), d).is_ok());
}

#[test]
fn only_offered_decisions_and_named_approvers() {
    let policy = Policy::from_toml(
        r#"[[rules]]
        name = "prod"
        tools = ["shell_cmd"]
        action = "ask"
        approvers = ["alice", "bob"]
        offers = ["approve_once", "deny"]"#,
    )
    .unwrap();
    let hold = approval_with(&policy, Some(0), json!({"command": "ls"}));
    assert_eq!(
        hold.offers,
        vec![DecisionKind::ApproveOnce, DecisionKind::Deny]
    );
    let err = run(&hold, &alice(), approve(ApproveScope::AlwaysTool)).unwrap_err();
    assert_eq!(err.code(), "decision_not_offered");
    assert!(
        err.to_string()
            .contains("approve_once, deny; not approve_always_tool"),
        "{err}"
    );
    let err = run(
        &hold,
        &Principal::new("mallory", Role::Admin),
        approve(ApproveScope::Once),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "only alice, bob may decide this hold");
    let err = run(
        &hold,
        &alice(),
        Decision::Answer {
            options: vec!["a".into()],
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "decision_not_offered");
}

#[test]
fn edits_are_validated_and_run_through_policy() {
    let policy = Policy::from_toml(
        r#"[[rules]]
        name = "no rm"
        tools = ["shell_cmd"]
        action = "deny"
        command = { program = "rm" }"#,
    )
    .unwrap();
    let hold = approval();
    let edit = |args: Value| Decision::Edit {
        arguments: args,
        reason: None,
    };
    let (t, _) = decide(
        &hold,
        &alice(),
        &edit(json!({"command": "ls -la"})),
        T0,
        &policy,
        &Limits::default(),
    )
    .unwrap();
    let o = t.hold.outcome.unwrap();
    assert!(o.edited);
    assert_eq!(o.arguments, Some(json!({"command": "ls -la"})));
    assert_eq!(
        o.digest,
        Some(canonical::digest(&json!({"command": "ls -la"})))
    );
    assert_ne!(o.digest.as_deref(), hold.digest());
    let err = decide(
        &hold,
        &alice(),
        &edit(json!({"command": 5})),
        T0,
        &policy,
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    assert!(err.to_string().contains("schema"), "{err}");
    let err = decide(
        &hold,
        &alice(),
        &edit(json!({"command": "rm -rf /"})),
        T0,
        &policy,
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "edit_denied");
    assert!(err.to_string().contains("\"no rm\""), "{err}");
}

#[test]
fn a_quorum_needs_distinct_approvers_and_any_deny_denies() {
    let policy = Policy::from_toml(
        "[[rules]]\nname = \"q\"\ntools = [\"shell_cmd\"]\naction = \"ask\"\napprovers = [\"alice\", \"bob\", \"cy\"]\nquorum = 2",
    )
    .unwrap();
    let hold = approval_with(&policy, Some(0), json!({"command": "deploy"}));
    let (t1, r1) = run(&hold, &alice(), approve(ApproveScope::Once)).unwrap();
    assert_eq!(r1, DecideOutcome::VoteRecorded);
    assert_eq!(t1.hold.status, HoldStatus::Pending);
    assert!(matches!(
        t1.events[0].payload,
        EventPayload::HoldVoted {
            approvals: 1,
            quorum: 2,
            ..
        }
    ));
    assert_eq!(
        run(&t1.hold, &alice(), approve(ApproveScope::Once))
            .unwrap_err()
            .code(),
        "already_voted"
    );
    let (t2, r2) = run(
        &t1.hold,
        &Principal::new("bob", Role::Approver),
        approve(ApproveScope::Once),
    )
    .unwrap();
    assert_eq!(r2, DecideOutcome::Resolved);
    assert_eq!(t2.hold.version, hold.version + 2);
    assert_eq!(t2.hold.outcome.unwrap().decided_by, vec!["alice", "bob"]);
    let (t3, _) = run(
        &t1.hold,
        &Principal::new("cy", Role::Approver),
        Decision::Deny { reason: None },
    )
    .unwrap();
    assert_eq!(t3.hold.status, HoldStatus::Denied);
}

#[test]
fn questions_take_valid_options() {
    let single = question(false, false, None);
    let (t, _) = run(
        &single,
        &alice(),
        Decision::Answer {
            options: vec!["b".into()],
        },
    )
    .unwrap();
    let o = t.hold.outcome.unwrap();
    assert_eq!(o.status, OutcomeStatus::Answered);
    assert_eq!(
        o.options,
        vec![ChosenOption {
            id: "b".into(),
            label: "B".into()
        }]
    );
    let err = run(
        &single,
        &alice(),
        Decision::Answer {
            options: vec!["z".into()],
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "invalid_option");
    assert_eq!(
        err.to_string(),
        "options[0]: \"z\" is not an option of this question; choose from a, b, no"
    );
    assert_eq!(
        run(
            &single,
            &alice(),
            Decision::Answer {
                options: vec!["a".into(), "b".into()]
            }
        )
        .unwrap_err()
        .code(),
        "invalid_option"
    );
    assert_eq!(
        run(&single, &alice(), Decision::Answer { options: vec![] })
            .unwrap_err()
            .code(),
        "invalid_option"
    );
    let multi = question(false, true, None);
    let (t, _) = run(
        &multi,
        &alice(),
        Decision::Answer {
            options: vec!["a".into(), "b".into()],
        },
    )
    .unwrap();
    assert_eq!(t.hold.outcome.unwrap().options.len(), 2);
    assert_eq!(
        run(
            &multi,
            &alice(),
            Decision::Answer {
                options: vec!["a".into(), "a".into()]
            }
        )
        .unwrap_err()
        .code(),
        "invalid_option"
    );
    assert_eq!(
        run(&single, &alice(), approve(ApproveScope::Once))
            .unwrap_err()
            .code(),
        "decision_not_offered"
    );
}

#[test]
fn confirm_step_confirms_or_cancels() {
    let q = question(true, false, None);
    assert_eq!(
        run(&q, &alice(), Decision::Confirm).unwrap_err().code(),
        "nothing_to_confirm"
    );
    let (t, r) = run(
        &q,
        &alice(),
        Decision::Answer {
            options: vec!["a".into()],
        },
    )
    .unwrap();
    assert_eq!(r, DecideOutcome::AwaitingConfirm);
    assert_eq!(t.hold.status, HoldStatus::AwaitingConfirm);
    assert!(t.hold.is_open());
    assert_eq!(
        run(
            &t.hold,
            &alice(),
            Decision::Answer {
                options: vec!["b".into()]
            }
        )
        .unwrap_err()
        .code(),
        "awaiting_confirm"
    );
    let (confirmed, _) = run(
        &t.hold,
        &Principal::new("bob", Role::Approver),
        Decision::Confirm,
    )
    .unwrap();
    let o = confirmed.hold.outcome.unwrap();
    assert_eq!(
        (o.status, o.options[0].id.as_str(), o.decided_by.clone()),
        (
            OutcomeStatus::Confirmed,
            "a",
            vec!["alice".to_owned(), "bob".to_owned()]
        )
    );
    let (canceled, _) = run(&t.hold, &alice(), Decision::Cancel { reason: None }).unwrap();
    let o = canceled.hold.outcome.unwrap();
    assert_eq!(o.status, OutcomeStatus::Canceled);
    assert!(o.options.is_empty(), "a cancel never reports a choice");
    assert!(canceled.hold.pending_answer.is_none());
}

#[test]
fn deadlines_apply_the_configured_outcome() {
    let hold = approval();
    assert!(expire(&hold, T0).is_none(), "not yet due");
    let due = hold.deadline.unwrap();
    let t = expire(&hold, due).unwrap();
    let o = t.hold.outcome.clone().unwrap();
    assert_eq!(
        (o.status, o.source, o.verdict),
        (
            OutcomeStatus::TimedOut,
            Source::Timeout,
            Some(Verdict::Deny)
        )
    );
    assert!(expire(&t.hold, due).is_none(), "expires once");

    let policy = Policy::from_toml("[tools.shell_cmd]\non_timeout = \"approve\"").unwrap();
    let lenient = approval_with(&policy, None, json!({"command": "ls"}));
    let o = expire(&lenient, due).unwrap().hold.outcome.unwrap();
    assert_eq!(
        (o.verdict, o.arguments),
        (Some(Verdict::Approve), Some(json!({"command": "ls"})))
    );

    let timeout = |h: &Hold| {
        expire(h, h.deadline.unwrap())
            .unwrap()
            .hold
            .outcome
            .unwrap()
    };
    let chosen =
        |h: &Hold| -> Vec<String> { timeout(h).options.into_iter().map(|c| c.id).collect() };
    assert_eq!(chosen(&question(false, false, Some("b"))), ["b"]);
    assert_eq!(chosen(&question(false, false, None)), ["no"]);
}

#[test]
fn a_question_nobody_answered_times_out_with_no_option() {
    let deploy = question_of(&["deploy", "abort"], false, false, None);
    assert_eq!(deploy.on_timeout, OnTimeout::NoAnswer);
    let o = expire(&deploy, deploy.deadline.unwrap())
        .unwrap()
        .hold
        .outcome
        .unwrap();
    assert_eq!(
        (o.status, o.source, o.verdict, o.options.len()),
        (OutcomeStatus::TimedOut, Source::Timeout, None, 0),
        "no option applies, and a question has no verdict"
    );
    // An option with the id `cancel` is an option like any other.
    let cancel = question_of(&["go", "cancel"], false, false, None);
    assert_eq!(cancel.on_timeout, OnTimeout::NoAnswer);

    // A pending question stored by an older version names its first option as the timeout;
    // nobody chose it, so it is not applied either.
    let mut stored = deploy.clone();
    stored.on_timeout = OnTimeout::Choose {
        option: "deploy".into(),
    };
    let o = expire(&stored, stored.deadline.unwrap())
        .unwrap()
        .hold
        .outcome
        .unwrap();
    assert!(o.options.is_empty(), "{o:?}");

    let with_default = question_of(&["deploy", "abort"], false, false, Some("abort"));
    assert_eq!(
        with_default.on_timeout,
        OnTimeout::Choose {
            option: "abort".into()
        }
    );
}

#[test]
fn withdrawal_and_reminders() {
    let hold = approval();
    let t = withdraw(
        &hold,
        Actor::of(Source::System),
        Some("turn cancelled".into()),
        T0,
    )
    .unwrap();
    let o = t.hold.outcome.clone().unwrap();
    assert_eq!(
        (o.status, o.source, o.verdict),
        (OutcomeStatus::Canceled, Source::System, Some(Verdict::Deny))
    );
    assert!(withdraw(&t.hold, Actor::of(Source::System), None, T0).is_none());
    assert_eq!(
        run(&t.hold, &alice(), approve(ApproveScope::Once))
            .unwrap_err()
            .code(),
        "already_decided"
    );

    let remind_at = hold.remind_at.unwrap();
    assert_eq!(
        remind_at,
        Timestamp::from_millis(hold.deadline.unwrap().as_millis() - 60_000),
        "one minute before"
    );
    assert!(remind(&hold, Timestamp::from_millis(remind_at.as_millis() - 1)).is_none());
    let t = remind(&hold, remind_at).unwrap();
    assert!(t.hold.reminded);
    assert_eq!(
        t.events[0].payload,
        EventPayload::HoldReminded {
            deadline: hold.deadline.unwrap()
        }
    );
    assert!(remind(&t.hold, remind_at).is_none(), "reminds once");
}

#[test]
fn short_deadlines_remind_halfway_and_never_has_no_timers() {
    let c = HoldContext {
        remind_before: Duration::from_secs(300),
        policy: None,
        ..ctx(None)
    };
    let spec = validate_question(
        &QuestionRequest {
            tool_call_id: None,
            question: "Q".into(),
            options: vec![QuestionOption {
                id: "a".into(),
                label: "A".into(),
                description: None,
            }],
            multiple: false,
            confirm: false,
            default_option: None,
            context: None,
            deadline: None,
        },
        &Limits::default(),
    )
    .unwrap();
    let short = question_hold(
        &c,
        spec.clone(),
        None,
        Deadline::After(Duration::from_secs(60)),
    );
    assert_eq!(
        short.remind_at,
        Some(T0.saturating_add(Duration::from_secs(30)))
    );
    let never = question_hold(&c, spec, None, Deadline::Never);
    assert_eq!((never.deadline, never.remind_at), (None, None));
    assert!(expire(&never, Timestamp::from_millis(i64::MAX)).is_none());
}

#[test]
fn the_fail_closed_default_denies_approvals_and_falls_back_for_questions() {
    let limits = Limits::default();
    let default = |hold: &Hold| {
        let (t, r) = fail_closed(hold, &alice(), Some("no terminal".into()), T0, &limits).unwrap();
        assert_eq!(r, DecideOutcome::Resolved);
        assert_eq!(t.events[0].actor.source, Source::Default);
        assert_eq!(t.events[0].actor.name.as_deref(), Some("alice"));
        t.hold.outcome.unwrap()
    };
    let denied = default(&approval());
    assert_eq!(denied.status, OutcomeStatus::Denied);
    assert_eq!(denied.verdict, Some(Verdict::Deny));
    assert_eq!(denied.source, Source::Default);
    assert_eq!(denied.reason.as_deref(), Some("no terminal"));
    assert_eq!(denied.decided_by, vec!["alice".to_owned()]);

    let chosen = |o: &Outcome| o.options.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
    let with_default = default(&question(false, false, Some("b")));
    assert_eq!(
        (with_default.status, chosen(&with_default)),
        (OutcomeStatus::Answered, vec!["b".to_owned()])
    );
    let falls_to_no = default(&question(true, false, None));
    assert_eq!(
        (falls_to_no.status, chosen(&falls_to_no)),
        (OutcomeStatus::Answered, vec!["no".to_owned()])
    );
    let mut without_no = question(false, false, None);
    if let HoldSpec::Question(q) = &mut without_no.spec {
        q.options.retain(|o| o.id != "no");
    }
    let canceled = default(&without_no);
    assert_eq!(canceled.status, OutcomeStatus::Canceled);
    assert!(canceled.options.is_empty());
}

#[test]
fn the_fail_closed_default_is_a_decision_like_any_other() {
    let limits = Limits::default();
    let agent = Principal::new("bot", Role::Agent);
    assert!(matches!(
        fail_closed(&approval(), &agent, None, T0, &limits),
        Err(EngineError::Forbidden(_))
    ));
    let (decided, _) = run(&approval(), &alice(), Decision::Deny { reason: None }).unwrap();
    assert!(matches!(
        fail_closed(&decided.hold, &alice(), None, T0, &limits),
        Err(EngineError::AlreadyDecided { .. })
    ));
    let mut named = approval();
    named.approvers = vec!["bob".into()];
    assert!(matches!(
        fail_closed(&named, &alice(), None, T0, &limits),
        Err(EngineError::Forbidden(_))
    ));
    let long = "x".repeat(limits.reason + 1);
    assert!(fail_closed(&approval(), &alice(), Some(long), T0, &limits).is_err());
}

/// One thing that can happen to a hold, at the time reached so far.
#[derive(Debug, Clone)]
enum Step {
    Decide {
        person: usize,
        choice: u8,
    },
    FailClosed {
        person: usize,
    },
    /// Time passes, then the timer fires.
    Expire {
        secs: u64,
    },
    Remind {
        secs: u64,
    },
    Withdraw,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0..4usize, 0..12u8).prop_map(|(person, choice)| Step::Decide { person, choice }),
        1 => (0..4usize).prop_map(|person| Step::FailClosed { person }),
        2 => (0..1200u64).prop_map(|secs| Step::Expire { secs }),
        1 => (0..1200u64).prop_map(|secs| Step::Remind { secs }),
        1 => Just(Step::Withdraw),
    ]
}

/// Every kind of decision, valid for the hold or not.
fn any_decision(choice: u8) -> Decision {
    match choice {
        0 => approve(ApproveScope::Once),
        1 => approve(ApproveScope::Chat),
        2 => approve(ApproveScope::AlwaysArgs),
        3 => approve(ApproveScope::AlwaysTool),
        4 => Decision::Deny { reason: None },
        5 => Decision::DenyStop { reason: None },
        6 => Decision::Edit {
            arguments: json!({"command": "ls -l"}),
            reason: None,
        },
        7 => Decision::Answer {
            options: vec!["a".into()],
        },
        8 => Decision::Answer {
            options: vec!["a".into(), "b".into()],
        },
        9 => Decision::Answer {
            options: vec!["no".into()],
        },
        10 => Decision::Confirm,
        _ => Decision::Cancel { reason: None },
    }
}

/// What `step` does to `hold` (`None`: nothing to do), with the time moved on as it says.
fn take(step: &Step, hold: &Hold, now: &mut Timestamp) -> Option<Result<Transition, EngineError>> {
    let people = [
        alice(),
        Principal::new("bob", Role::Approver),
        Principal::new("root", Role::Admin),
        Principal::new("bot", Role::Agent),
    ];
    let limits = Limits::default();
    match step {
        Step::Decide { person, choice } => {
            let d = any_decision(*choice);
            Some(
                decide(
                    hold,
                    &people[*person],
                    &d,
                    *now,
                    &Policy::default(),
                    &limits,
                )
                .map(|(t, _)| t),
            )
        }
        Step::FailClosed { person } => {
            Some(fail_closed(hold, &people[*person], None, *now, &limits).map(|(t, _)| t))
        }
        Step::Expire { secs } => {
            *now = Timestamp::from_millis(now.as_millis() + *secs as i64 * 1000);
            expire(hold, *now).map(Ok)
        }
        Step::Remind { secs } => {
            *now = Timestamp::from_millis(now.as_millis() + *secs as i64 * 1000);
            remind(hold, *now).map(Ok)
        }
        Step::Withdraw => withdraw(hold, Actor::of(Source::System), None, *now).map(Ok),
    }
}

/// Approvals (alone, and with a quorum of two) and questions (with and without a confirm
/// step, several options, a default).
fn any_hold(kind: u8) -> Hold {
    match kind {
        0 => approval(),
        1 => {
            let policy = Policy::from_toml(
                "[[rules]]\nname = \"q\"\ntools = [\"shell_cmd\"]\naction = \"ask\"\nquorum = 2",
            )
            .unwrap();
            approval_with(&policy, Some(0), json!({"command": "deploy"}))
        }
        2 => question(false, false, None),
        3 => question(true, false, None),
        4 => question(true, true, Some("b")),
        _ => question(false, true, Some("a")),
    }
}

proptest::proptest! {
    /// Once a hold is resolved nothing changes it: every decision is refused with the hold as
    /// it is, and the timers and withdrawal do nothing. While it is open, each change is
    /// one version on, and a hold is resolved exactly when it has an outcome.
    #[test]
    fn a_resolved_hold_never_changes(
        kind in 0..6u8,
        steps in proptest::collection::vec(step(), 1..24),
    ) {
        let mut hold = any_hold(kind);
        let mut now = T0;
        for step in steps {
            let result = take(&step, &hold, &mut now);
            if !hold.is_open() {
                match result {
                    None => {}
                    Some(Ok(t)) => proptest::prop_assert!(
                        false,
                        "{step:?} changed a {} hold to {}",
                        hold.status.as_str(),
                        t.hold.status.as_str()
                    ),
                    Some(Err(EngineError::AlreadyDecided { hold: told })) => {
                        proptest::prop_assert_eq!(&*told, &hold, "told of another hold");
                    }
                    Some(Err(e)) => proptest::prop_assert!(
                        matches!(e, EngineError::Forbidden(_)),
                        "{step:?} on a resolved hold: {e:?}"
                    ),
                }
                continue;
            }
            if let Some(Ok(t)) = result {
                proptest::prop_assert_eq!(t.hold.id, hold.id);
                proptest::prop_assert_eq!(t.hold.version, hold.version + 1);
                proptest::prop_assert!(!t.events.is_empty());
                proptest::prop_assert_eq!(t.hold.is_open(), t.hold.outcome.is_none());
                if let Some(o) = &t.hold.outcome {
                    proptest::prop_assert_eq!(HoldStatus::from(o.status), t.hold.status);
                }
                hold = t.hold;
            }
        }
    }
}

proptest::proptest! {
    /// Every event of a hold's life (its creation, then what the steps do) has the canonical
    /// text it had through a `serde_json::Value`, now written straight from the event.
    #[test]
    fn events_are_canonical_as_through_a_value(
        kind in 0..6u8,
        steps in proptest::collection::vec(step(), 1..24),
    ) {
        let mut hold = any_hold(kind);
        let created = draft(
            &hold,
            Actor::of(Source::System),
            T0,
            EventPayload::HoldCreated { hold: std::sync::Arc::new(hold.clone()) },
        );
        let mut drafts = vec![created];
        let mut now = T0;
        for step in steps {
            if let Some(Ok(t)) = take(&step, &hold, &mut now) {
                drafts.extend(t.events);
                hold = t.hold;
            }
        }
        for d in &drafts {
            let through_value = canonical::to_string(&serde_json::to_value(d).unwrap());
            proptest::prop_assert_eq!(d.canonical(), through_value);
        }
    }
}
