//! The shell command-line reader, over any text, and the policy's command rules that use it:
//! a line a rule allows is plain and every command in it is the one allowed.
#![no_main]

use std::sync::LazyLock;

use holdpoint_core::policy::shell::{self, MAX_COMMANDS};
use holdpoint_core::policy::{Action, Call, Policy};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// `git status` (with any arguments after it) is allowed; everything else asks.
static POLICY: LazyLock<Policy> = LazyLock::new(|| {
    match Policy::from_toml(
        r#"
mode = "manual"
[[rules]]
name = "git status"
tools = ["shell_cmd"]
action = "allow"
command = { program = "git", args = ["status"] }
"#,
    ) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let line = shell::parse(text);
    assert!(line.commands.len() <= MAX_COMMANDS);
    assert_eq!(
        shell::parse(text),
        line,
        "reading the same line twice differed"
    );
    for command in &line.commands {
        assert!(
            !command.words.is_empty(),
            "a command without words: {line:?}"
        );
        let (word, name) = command.program().unwrap_or_else(|| panic!("{line:?}"));
        assert!(word.text.ends_with(name));
    }

    let args = json!({ "command": text });
    let evaluation = POLICY.evaluate(&Call::new("shell_cmd", &args));
    if evaluation.action == Action::Allow {
        assert!(
            line.is_plain(),
            "{text:?} was allowed but is not plain: {line:?}"
        );
        for command in &line.commands {
            let words: Vec<&str> = command.words.iter().map(|w| w.text.as_str()).collect();
            let program = command.program().map(|(_, name)| name);
            assert!(
                program == Some("git") && words.get(1) == Some(&"status"),
                "{text:?} was allowed as `git status` but runs {words:?}"
            );
            assert!(command.words.iter().take(2).all(|w| w.literal));
        }
    }
});
