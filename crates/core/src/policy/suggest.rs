//! Rules from decisions: the narrowest rule that would have decided one exact call, written in
//! the policy file's format for a person to review, edit and add to a world's policy. It
//! carries the call as its own `must_match` example, so it cannot drift from what it was made
//! for without the policy refusing to load.

use serde_json::Value;

use super::Action;
use super::shell;

/// Why no rule can be written for a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SuggestError(pub String);

/// A `[[rules]]` entry that decides exactly this call `action`: the tool by name, every
/// top-level argument by `equals`, and for a shell command line of one plain command also its
/// program and arguments (so people read what it is for).
pub fn rule_for(tool: &str, arguments: &Value, action: Action) -> Result<String, SuggestError> {
    let Value::Object(args) = arguments else {
        return Err(SuggestError(
            "the call's arguments are not a JSON object".into(),
        ));
    };
    let mut matchers = Vec::new();
    for (key, value) in args {
        matchers.push(format!(
            "{{ pointer = {}, equals = {} }}",
            quote(&format!("/{}", key.replace('~', "~0").replace('/', "~1"))),
            inline(value)?
        ));
    }
    let command = args
        .get("command")
        .and_then(Value::as_str)
        .and_then(plain_command);
    let mut name = format!("{} {tool}", action.as_str());
    if let Some((program, rest)) = &command {
        name = format!("{name} {program} {}", rest.join(" "));
    }
    let mut out = String::from("[[rules]]\n");
    out += &format!("name = {}\n", quote(name.trim_end()));
    out += &format!("tools = [{}]\n", quote(tool));
    out += &format!("action = {}\n", quote(action.as_str()));
    if let Some((program, rest)) = command {
        let rest: Vec<String> = rest.iter().map(|a| quote(a)).collect();
        out += &format!(
            "command = {{ program = {}, args = [{}] }}\n",
            quote(&program),
            rest.join(", ")
        );
    }
    if !matchers.is_empty() {
        out += &format!("args = [{}]\n", matchers.join(", "));
    }
    out += &format!(
        "must_match = [{{ tool = {}, args = {} }}]\n",
        quote(tool),
        inline(arguments)?
    );
    Ok(out)
}

/// The program and its arguments, when `line` is one plain command of literal words that no
/// glob could misread.
fn plain_command(line: &str) -> Option<(String, Vec<String>)> {
    let parsed = shell::parse(line);
    if !parsed.is_plain() || parsed.commands.len() != 1 {
        return None;
    }
    let words = &parsed.commands[0].words;
    let glob = |t: &str| t.contains(['*', '?', '[', ']', '{', '}']);
    if words.is_empty() || words.iter().any(|w| !w.literal || glob(&w.text)) {
        return None;
    }
    let program = words[0].text.clone();
    let rest = words[1..].iter().map(|w| w.text.clone()).collect();
    Some((program, rest))
}

fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A JSON value as an inline TOML value.
fn inline(value: &Value) -> Result<String, SuggestError> {
    Ok(match value {
        Value::Null => {
            return Err(SuggestError(
                "an argument is null, which a policy file (TOML) cannot write".into(),
            ));
        }
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let items: Result<Vec<String>, _> = items.iter().map(inline).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Object(map) => {
            let mut fields = Vec::with_capacity(map.len());
            for (k, v) in map {
                fields.push(format!("{} = {}", quote(k), inline(v)?));
            }
            if fields.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", fields.join(", "))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{Call, Policy};

    fn with(rule: &str) -> Policy {
        let text = format!("mode = \"manual\"\n\n{rule}");
        Policy::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn a_rule_from_a_push_allows_it_is_checked_by_it_and_allows_no_neighbour() {
        let call = json!({"command": "git push origin main"});
        let rule = rule_for("shell_cmd", &call, Action::Allow).unwrap();
        assert!(
            rule.contains(r#"command = { program = "git", args = ["push", "origin", "main"] }"#),
            "{rule}"
        );
        assert!(
            rule.contains("must_match = [{ tool = \"shell_cmd\""),
            "{rule}"
        );
        let policy = with(&rule);
        let decide = |command: &str| {
            let args = json!({ "command": command });
            policy.evaluate(&Call::new("shell_cmd", &args)).action
        };
        assert_eq!(decide("git push origin main"), Action::Allow);
        for neighbour in [
            "git push --force",
            "git push origin main --force",
            "git push origin",
            "git push origin main; rm -rf ~",
        ] {
            assert_eq!(decide(neighbour), Action::Ask, "{neighbour}");
        }
        // Its own example checks it: the same rule made for another call does not load.
        let drifted = rule.replace("equals = \"git push origin main\"", "equals = \"git pull\"");
        assert!(Policy::from_toml(&drifted).is_err());
    }

    #[test]
    fn a_rule_from_any_tool_matches_its_arguments_exactly() {
        let call = json!({"path": "a/b~c.txt", "mode": 420, "tags": ["x"], "opts": {"n": true}});
        let rule = rule_for("fs__write", &call, Action::Deny).unwrap();
        let policy = with(&rule);
        assert_eq!(
            policy.evaluate(&Call::new("fs__write", &call)).action,
            Action::Deny
        );
        let other = json!({"path": "a/b~c.txt", "mode": 421, "tags": ["x"], "opts": {"n": true}});
        assert_eq!(
            policy.evaluate(&Call::new("fs__write", &other)).action,
            Action::Ask
        );
        assert!(rule_for("t", &json!({"x": null}), Action::Allow).is_err());
    }
}
