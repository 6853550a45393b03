//! An assistant's Markdown as `MarkdownNode`s, the safe tree a page builds element by element.
//! pulldown-cmark parses; what it reports as raw HTML is kept as text, images become their alt
//! text, and a link goes through only to the web or mail. Nesting is capped, so a hostile text
//! cannot make a tree deeper than a JSON reader (serde's limit is 128) or a page will follow.

use holdpoint_protocol::MarkdownNode;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The deepest nesting of containers kept; deeper ones give their content to their parent.
const MAX_DEPTH: usize = 32;

/// The schemes a link may use.
const SCHEMES: &[&str] = &["http", "https", "mailto"];

/// `text` as Markdown nodes (CommonMark with tables and strikethrough).
pub fn render(text: &str) -> Vec<MarkdownNode> {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut tree = Tree::default();
    for event in Parser::new_ext(text, options) {
        tree.event(event);
    }
    tree.finish()
}

/// What an open container becomes when it ends.
enum Open {
    Node(Container),
    /// Its children go to the parent: an image (its alt text), a link to another scheme, a
    /// container past `MAX_DEPTH`, or a kind this renderer does not show.
    Transparent,
    /// Its text is collected verbatim (a code block).
    Verbatim(Option<String>),
}

enum Container {
    Paragraph,
    Heading(u8),
    Emphasis,
    Strong,
    Strikethrough,
    BlockQuote,
    List(Option<u64>),
    Item,
    Link(String),
    Table,
    TableHead,
    TableRow,
    TableCell,
}

#[derive(Default)]
struct Tree {
    /// Open containers with the children they have so far; the root is below them.
    stack: Vec<(Open, Vec<MarkdownNode>)>,
    root: Vec<MarkdownNode>,
}

impl Tree {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(end) => self.end(end),
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
            Event::Code(t) => self.push(MarkdownNode::Code {
                text: t.into_string(),
            }),
            Event::SoftBreak => self.text("\n"),
            Event::HardBreak => self.push(MarkdownNode::LineBreak),
            Event::Rule => self.push(MarkdownNode::Rule),
            // Kinds not enabled by `render`'s options; shown as their source if ever met.
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                self.text(&t)
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let open = match tag {
            Tag::CodeBlock(kind) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().map(str::to_owned)
                    }
                    CodeBlockKind::Indented => None,
                };
                Open::Verbatim(language)
            }
            _ if self.stack.len() >= MAX_DEPTH => Open::Transparent,
            // A block of raw HTML is shown as a paragraph of its text.
            Tag::Paragraph | Tag::HtmlBlock => Open::Node(Container::Paragraph),
            Tag::Heading { level, .. } => Open::Node(Container::Heading(heading(level))),
            Tag::Emphasis => Open::Node(Container::Emphasis),
            Tag::Strong => Open::Node(Container::Strong),
            Tag::Strikethrough => Open::Node(Container::Strikethrough),
            Tag::BlockQuote(_) => Open::Node(Container::BlockQuote),
            Tag::List(start) => Open::Node(Container::List(start)),
            Tag::Item => Open::Node(Container::Item),
            Tag::Link { dest_url, .. } if allowed(&dest_url) => {
                Open::Node(Container::Link(dest_url.into_string()))
            }
            Tag::Table(_) => Open::Node(Container::Table),
            Tag::TableHead => Open::Node(Container::TableHead),
            Tag::TableRow => Open::Node(Container::TableRow),
            Tag::TableCell => Open::Node(Container::TableCell),
            _ => Open::Transparent,
        };
        self.stack.push((open, Vec::new()));
    }

    fn end(&mut self, _: TagEnd) {
        let Some((open, children)) = self.stack.pop() else {
            return;
        };
        match open {
            Open::Transparent => {
                for child in children {
                    self.push(child);
                }
            }
            Open::Verbatim(language) => {
                let text = children
                    .into_iter()
                    .map(|c| match c {
                        MarkdownNode::Text { text } => text,
                        _ => String::new(),
                    })
                    .collect();
                self.push(MarkdownNode::CodeBlock { language, text });
            }
            Open::Node(container) => self.push(node(container, children)),
        }
    }

    /// Text joins the text just before it (pulldown-cmark splits it at every special
    /// character), except inside a code block, whose text is joined as it ends.
    fn text(&mut self, text: &str) {
        let siblings = self.siblings();
        if let Some(MarkdownNode::Text { text: last }) = siblings.last_mut() {
            last.push_str(text);
        } else {
            siblings.push(MarkdownNode::Text {
                text: text.to_owned(),
            });
        }
    }

    fn push(&mut self, node: MarkdownNode) {
        if let MarkdownNode::Text { text } = &node {
            return self.text(text);
        }
        self.siblings().push(node);
    }

    fn siblings(&mut self) -> &mut Vec<MarkdownNode> {
        match self.stack.last_mut() {
            Some((_, children)) => children,
            None => &mut self.root,
        }
    }

    fn finish(mut self) -> Vec<MarkdownNode> {
        // The parser closes what it opens; this only guards against a text it did not.
        while !self.stack.is_empty() {
            self.end(TagEnd::Paragraph);
        }
        self.root
    }
}

fn node(container: Container, children: Vec<MarkdownNode>) -> MarkdownNode {
    match container {
        Container::Paragraph => MarkdownNode::Paragraph { children },
        Container::Heading(level) => MarkdownNode::Heading { level, children },
        Container::Emphasis => MarkdownNode::Emphasis { children },
        Container::Strong => MarkdownNode::Strong { children },
        Container::Strikethrough => MarkdownNode::Strikethrough { children },
        Container::BlockQuote => MarkdownNode::BlockQuote { children },
        Container::List(start) => MarkdownNode::List { start, children },
        Container::Item => MarkdownNode::Item { children },
        Container::Link(href) => MarkdownNode::Link { href, children },
        Container::Table => MarkdownNode::Table { children },
        // pulldown-cmark gives the header's cells straight under its head.
        Container::TableHead => MarkdownNode::TableRow {
            header: true,
            children,
        },
        Container::TableRow => MarkdownNode::TableRow {
            header: false,
            children,
        },
        Container::TableCell => MarkdownNode::TableCell { children },
    }
}

fn heading(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Whether a link's address may be followed: an absolute URL with one of `SCHEMES`. Anything
/// else (`javascript:`, `data:`, a relative path that would point into Holdpoint itself) is
/// shown as text.
fn allowed(href: &str) -> bool {
    let Some((scheme, _)) = href.split_once(':') else {
        return false;
    };
    SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme))
        && !href.chars().any(|c| c.is_control() || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use holdpoint_protocol::MarkdownNode::{self, *};

    use super::render;

    fn text(t: &str) -> MarkdownNode {
        Text { text: t.into() }
    }

    fn para(children: Vec<MarkdownNode>) -> MarkdownNode {
        Paragraph { children }
    }

    /// Every `href` in the tree, in order.
    fn links(nodes: &[MarkdownNode], out: &mut Vec<String>) {
        for n in nodes {
            let value = serde_json::to_value(n).unwrap();
            if let Some(href) = value["href"].as_str() {
                out.push(href.to_owned());
            }
            if let Some(children) = value["children"].as_array() {
                let children: Vec<MarkdownNode> = children
                    .iter()
                    .map(|c| serde_json::from_value(c.clone()).unwrap())
                    .collect();
                links(&children, out);
            }
        }
    }

    #[test]
    fn code_blocks_lists_and_emphasis_become_their_nodes() {
        let nodes = render("# Plan\n\n1. *one*\n2. **two**\n\n```rust extra\nfn main() {}\n```\n");
        assert_eq!(
            nodes,
            vec![
                Heading {
                    level: 1,
                    children: vec![text("Plan")]
                },
                List {
                    start: Some(1),
                    children: vec![
                        Item {
                            children: vec![Emphasis {
                                children: vec![text("one")]
                            }]
                        },
                        Item {
                            children: vec![Strong {
                                children: vec![text("two")]
                            }]
                        },
                    ]
                },
                CodeBlock {
                    language: Some("rust".into()),
                    text: "fn main() {}\n".into()
                },
            ]
        );
    }

    #[test]
    fn raw_html_is_text() {
        assert_eq!(
            render("Hi <img src=x onerror=alert(1)> and <script>alert(2)</script>"),
            vec![para(vec![text(
                "Hi <img src=x onerror=alert(1)> and <script>alert(2)</script>"
            )])]
        );
        // A block of HTML is a paragraph of its source.
        assert_eq!(
            render("<script>alert(1)</script>\n"),
            vec![para(vec![text("<script>alert(1)</script>\n")])]
        );
        assert_eq!(
            render("</textarea><b>x</b>"),
            vec![para(vec![text("</textarea><b>x</b>")])]
        );
    }

    #[test]
    fn only_web_and_mail_links_are_links() {
        let nodes = render(
            "[a](javascript:alert(1)) [b](JavaScript:alert(1)) [c](data:text/html,x) [d](/api/v1/holds) \
             [e](https://example.com/x) [f](mailto:a@example.com) <http://example.org>",
        );
        let mut hrefs = Vec::new();
        links(&nodes, &mut hrefs);
        assert_eq!(
            hrefs,
            [
                "https://example.com/x",
                "mailto:a@example.com",
                "http://example.org"
            ]
        );
        // A refused link keeps its text.
        let Paragraph { children } = &nodes[0] else {
            panic!("{nodes:?}")
        };
        assert_eq!(children[0], text("a b c d "));
    }

    #[test]
    fn an_image_is_its_alt_text() {
        assert_eq!(
            render("![a cat](https://example.com/cat.png \"t\")"),
            vec![para(vec![text("a cat")])]
        );
    }

    #[test]
    fn tables_have_a_header_row() {
        let nodes = render("| a | b |\n|---|---|\n| 1 | 2 |\n");
        let cell = |t: &str| TableCell {
            children: vec![text(t)],
        };
        assert_eq!(
            nodes,
            vec![Table {
                children: vec![
                    TableRow {
                        header: true,
                        children: vec![cell("a"), cell("b")]
                    },
                    TableRow {
                        header: false,
                        children: vec![cell("1"), cell("2")]
                    },
                ]
            }]
        );
    }

    #[test]
    fn nesting_is_capped_and_the_text_kept() {
        let deep = format!("{}deep", "> ".repeat(500));
        let nodes = render(&deep);
        let json = serde_json::to_string(&nodes).unwrap();
        // serde_json reads at most 128 levels; each node is two (object, children array).
        let back: Vec<MarkdownNode> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, nodes);
        assert!(json.contains("deep"), "{json}");
        assert_eq!(
            render("*a **b** c*"),
            vec![para(vec![Emphasis {
                children: vec![
                    text("a "),
                    Strong {
                        children: vec![text("b")]
                    },
                    text(" c")
                ]
            }])]
        );
    }
}
