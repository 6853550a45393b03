//! The page a decision link opens: small, phone-first, drawn on the server with every value
//! escaped (no script: the CSP allows none), showing the hold's card and one confirm button.

use holdpoint_protocol::{Hold, HoldSpec};

/// `text` safe inside an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The hold's card as plain text: the tool and its arguments pretty-printed, or the question
/// and its options.
pub fn card_text(hold: &Hold) -> String {
    match &hold.spec {
        HoldSpec::Approval(a) => {
            let args = serde_json::to_string_pretty(&a.arguments).unwrap_or_default();
            let mut s = format!("Tool: {}\nArguments:\n{args}", a.tool);
            if let Some(d) = &a.description {
                s.push_str(&format!("\nWhy (as the agent says): {d}"));
            }
            if let Some(agent) = &hold.agent {
                s.push_str(&format!("\nAgent: {agent}"));
            }
            s
        }
        HoldSpec::Question(q) => {
            let mut s = format!("Question: {}", q.question);
            for o in &q.options {
                s.push_str(&format!("\n- {} ({})", o.label, o.id));
            }
            s
        }
    }
}

/// What a link's decision is called on its button and in the mail.
pub fn label(hold: &Hold, decision: &str) -> String {
    match decision {
        "approve_once" => "Approve once".into(),
        "deny" => "Deny".into(),
        "deny_stop" => "Deny and stop".into(),
        "cancel" => "Cancel the question".into(),
        d => match (d.strip_prefix("answer:"), &hold.spec) {
            (Some(id), HoldSpec::Question(q)) => {
                let label = q
                    .options
                    .iter()
                    .find(|o| o.id == id)
                    .map_or(id, |o| o.label.as_str());
                format!("Answer: {label}")
            }
            _ => d.to_owned(),
        },
    }
}

/// A whole page: `title`, then `body` (already HTML). Styled by the web interface's own
/// stylesheet, as the sign-in page is: the Content-Security-Policy allows no inline style.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"robots\" content=\"noindex\">\n<title>{t} · Holdpoint</title>\n\
<link rel=\"icon\" href=\"/ui/icon.svg\" type=\"image/svg+xml\">\n\
<link rel=\"stylesheet\" href=\"/ui/app.css\">\n</head>\n<body>\n\
<header>\n<h1>Holdpoint</h1>\n</header>\n<main>\n<article class=\"hold card\">\n\
<h2>{t}</h2>\n{body}\n</article>\n</main>\n</body>\n</html>\n",
        t = escape(title)
    )
}

/// The confirm page: the card, and a form that posts `decision` back with `csrf`.
pub fn confirm(hold: &Hold, world: &str, decision: &str, decides_as: &str, csrf: &str) -> String {
    let button = label(hold, decision);
    page(
        &button,
        &format!(
            "<p class=\"muted\">World <b>{world}</b>. You decide as <b>{who}</b>.</p>\n\
<pre><code>{card}</code></pre>\n\
<form method=\"post\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\n\
<button type=\"submit\">{label}</button></form>\n\
<p class=\"muted\">Nothing is decided until you press the button.</p>",
            world = escape(world),
            who = escape(decides_as),
            card = escape(&card_text(hold)),
            csrf = escape(csrf),
            label = escape(&button),
        ),
    )
}

/// A page that only says something.
pub fn notice(title: &str, text: &str) -> String {
    page(title, &format!("<p role=\"status\">{}</p>", escape(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(notice("<b>", "<script>").contains("&lt;script&gt;"));
    }
}
